//! `anvil-sim`: OpenAI-compatible simulator with a known timing model.
fn main() {}
