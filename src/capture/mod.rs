//! The recorder: sends one cell's requests to each replica, timestamps what streams back, and
//! hands the raw events on without interpreting them.
//!
//! # Architecture
//!
//! ```text
//!  workload: prompt ──► request ──► PreparedRequest (body serialised to Bytes before the run)
//!                               │
//!   run (run.rs, the steps) · schedule (schedule.rs): one Worker per (replica, concurrency
//!   slot), each sending its requests one after another at their intended times on one
//!   reused HTTP/1.1 connection
//!                               │
//!          hot path (hotpath.rs, sse.rs): write the request, note t_sent at the write that
//!          completed it and t_first_byte at the first read; frame SSE events and stamp each
//!          with CLOCK_MONOTONIC as it is framed; no JSON parsing, no encoding, no blocking I/O
//!                               │  RawEvent (plain struct), try_send; a full channel is
//!                               ▼  counted, then waited on: no event is ever dropped
//!                       bounded channel (EventSink → EventReceiver)
//!                               │
//!          writer thread (recorder.rs): drains the channel in batches (`drain_into`, then a
//!          short sleep, so no send ever has to wake it), parses the `data:` JSON into content /
//!          reasoning / tool-call deltas, finish reason and usage, and appends rows to
//!          events.parquet; request outcomes go to requests.parquet
//! ```
//!
//! The hot path's runtime worker and the writer thread share one CPU by default, the one the
//! run starts on ([`request::CpuPlacement`], `--cpu`): an event is written into memory by one
//! and read by the other, and on one core that stays in its cache.
//!
//! A run: [`request::RunRequest`] (what was asked, typed; the command line in
//! `crate::app::capture` and the campaign build it, and `to_argv()` is its one command line)
//! → [`config`] (checked [`config::RunConfig`], which flag is wrong and why) → [`run()`] (the steps: [`preflight`], [`calibrate`], the artifact,
//! [`schedule`], SIGINT, finishing), which returns a [`RunSummary`] or a [`CaptureError`]
//! and never prints: what it notices while running goes to the caller's
//! [`crate::notice::Notices`]. What is sent comes from [`crate::workload`]; [`scrape`] reads
//! `/metrics` (its text through [`exposition`]), [`summary`] writes the quick look, [`http`] does the one-shot GETs off the
//! hot path.
//!
//! Budget: at most 8 µs of CPU per event for the whole recording thread. Measured at
//! opt-level 1 on this 2-core machine while other builds kept its load average at 6–8.5
//! (ignored test `hot_path_cpu_per_event`, CPU time of the recording thread): 256 streams at
//! about 8,500 events/s cost 6.3–11.2 µs per event (most runs about 8) with a writer that
//! polls the channel, and 7.8–15.4 µs with a writer that blocks per event, since every send
//! then wakes it. A `perf` profile puts most of it in the kernel (socket reads, epoll,
//! wake-ups); SSE framing is 0.2–0.4 µs of it. A measurement on a quiet machine is still due.

pub mod cache_reset;
pub mod calibrate;
pub mod config;
pub mod endpoint;
pub mod error;
pub mod exposition;
pub mod host_clock;
pub mod hotpath;
pub mod http;
pub mod oracle;
pub mod preflight;
pub mod prepare;
pub mod recorder;
pub mod release;
pub mod request;
pub mod run;
pub mod schedule;
pub mod scrape;
pub mod sessions;
pub mod sidecar;
pub mod sse;
pub mod summary;
pub mod telemetry;

pub use error::CaptureError;
pub use run::{RunHooks, RunSummary, run};
