//! `anvil-capture`: record one manifest cell against one or more endpoints.
fn main() {}
