//! `anvil`: validate, query, compare, check and report on benchmark artifacts.
fn main() {}
