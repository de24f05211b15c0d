//! Process exit codes shared by every anvil binary (documented in each `--help` and the README).

/// Everything held: valid input, rules passed.
pub const OK: u8 = 0;
/// A stop rule fired or the recorded evidence contradicts an advance rule or a plan claim
/// (`anvil check`), or recomputed figures disagree (`anvil verify`).
pub const RULE_FAILED: u8 = 1;
/// Bad input: a malformed manifest, plan, artifact, flag or request.
pub const BAD_INPUT: u8 = 2;
/// A comparison the campaign's rules forbid was refused.
pub const REFUSED: u8 = 3;
/// Advance rules incomplete: evidence is missing.
pub const INCOMPLETE: u8 = 4;
/// `anvil-capture run` could not measure: the run failed before or while it was issued
/// (prompt calibration impossible against the server, the artifact writer failed); the
/// artifact, when one was written, is marked `failed` and says why.
pub const CAPTURE_FAILED: u8 = 5;
/// `anvil-sim` could not serve (its port is taken, a replica failed): like
/// [`CAPTURE_FAILED`], the tool could not do its job with valid input.
pub const SERVE_FAILED: u8 = 5;
/// `anvil-capture run` stopped by SIGINT; the artifact was finalised as `interrupted`
/// (128 + SIGINT, the shell's convention).
pub const INTERRUPTED: u8 = 130;
