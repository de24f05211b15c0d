//! What to send, with no socket in sight: the manifest's cells ([`cells`]) and the classes a
//! campaign declares beside it ([`declared`]), each request's prompt with its canary
//! ([`prompt`]), made of filler text ([`filler`]) sized to its context target
//! ([`calibration`]), the functional checks' request bodies ([`functional`]), the request
//! bodies serialised before a run starts ([`request`]), which of them a shard of a
//! multi-host run sends ([`shard`]), the published traces a replay reads ([`trace`]), and
//! the content requests of one run share on purpose ([`shared`]: trace blocks, prefix
//! groups).
//! The recorder (`crate::capture`) sends what this module prepared and times what comes
//! back.

pub mod calibration;
pub mod cells;
pub mod declared;
pub mod filler;
pub mod functional;
pub mod prompt;
pub mod request;
pub mod session;
pub mod shard;
pub mod shared;
pub mod trace;
