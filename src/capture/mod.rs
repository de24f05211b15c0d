//! The recorder: sends one cell's requests to each replica, timestamps what streams back, and
//! hands the raw events on without interpreting them.
//!
//! # Architecture
//!
//! ```text
//!  prompt ──► request ──► PreparedRequest (body serialised to Bytes before the run)
//!                               │
//!   driver (next step): one Worker per (replica, concurrency slot), each sending its
//!   requests one after another at their intended times on one reused HTTP/1.1 connection
//!                               │
//!          hot path (hotpath.rs, sse.rs): write the request, note t_sent at the write that
//!          completed it and t_first_byte at the first read; frame SSE events and stamp each
//!          with CLOCK_MONOTONIC as it is framed; no JSON parsing, no encoding, no blocking I/O
//!                               │  RawEvent (plain struct), try_send; a full channel is
//!                               ▼  counted, then waited on: no event is ever dropped
//!                       bounded channel (EventSink → EventReceiver)
//!                               │
//!          writer thread (next step): drains the channel in batches (`drain_into`, then a
//!          short sleep, so no send ever has to wake it), parses the `data:` JSON into content /
//!          reasoning / tool-call deltas, finish reason and usage, and appends rows to
//!          events.parquet; request outcomes go to requests.parquet
//! ```
//!
//! Budget: at most 8 µs of CPU per event for the whole recording thread. Measured at
//! opt-level 1 on this 2-core machine while other builds shared it (ignored test
//! `hot_path_cpu_per_event`): 256 streams at about 8,500 events/s cost 6–8 µs per event with a
//! polling writer and 8–12.5 µs with a writer that blocks per event; about half of it is kernel
//! time (socket reads and wakes). SSE framing is about 0.25 µs of that.
//!
//! - [`prompt`]: deterministic prompts (same request index → same body in every arm and at
//!   every concurrency), unique cache-busting prefixes, canaries, and calibration of the filler
//!   size against a token-count oracle.
//! - [`oracle`]: the two real token-count oracles (`POST /tokenize`, and a `max_tokens: 1`
//!   probe reading `usage.prompt_tokens`).
//! - [`request`]: request bodies for the chat, completions and Responses APIs, serialised
//!   ahead of time.
//! - [`endpoint`]: where a replica listens.
//! - [`sse`]: SSE framing of a response body into events.
//! - [`hotpath`]: connections, workers, timeouts, outcomes and the event channel.
//!
//! Every time here is a raw `CLOCK_MONOTONIC` nanosecond reading ([`crate::clock::monotonic_ns`]);
//! the writer turns them into offsets from the run's [`crate::clock::Origin`].

pub mod endpoint;
pub mod hotpath;
pub mod oracle;
pub mod prompt;
pub mod request;
pub mod sse;
