//! anvil: evidence toolkit for LLM-serving benchmark campaigns.
//!
//! ```text
//!   bin, app        the edge: command lines, standard output and error, exit codes
//!   validate        every campaign document and artifact folder checked
//!   campaign        the orchestrator: plan of RunRequests, servers, runner, journal
//!   gather          a query session → the plain inputs of rules and report
//!   report          pure renderers: HTML, Markdown, text, one table, one number format
//!   verify          the headline figures recomputed independently (polars)
//!   rules           the campaign's rules, pure: matching, comparison, advance, stop
//!   query           DataFusion over the artifacts: tables, the views of queries/, functions
//!   capture         record one cell (RunRequest → RunConfig → hot path → writer)
//!   workload        what to send: cells, prompts with canaries, functional bodies, shards
//!   sim             the simulator: known timing, injected faults
//!   location        a folder or an object store
//!   manifest        the workload manifest and the run plan
//!   slo             service-level objectives
//!   artifact        the contract: run.json, Parquet tables, capacity.json, restoration.json
//!   metric · stats  the metric catalogue and windows; pure statistics
//!   figure · clock · json · outfile · notice · shell · memory · realtime · panics
//! ```
//!
//! Each layer imports only those below it: the README's layer table is this order, and
//! `tests/it/layers.rs` holds it, file by file and folder by folder. Data flows one way:
//! [`manifest`] (what to run) → [`capture`] → [`artifact`] → query (feature `analysis`) →
//! rules → report. [`sim`] is the OpenAI-compatible simulator used as ground truth. Only
//! [`app`] and the binaries print or choose an exit code.
// Libraries return results and say what they notice through `notice::Notices`; only the
// edge (`app`) and the binaries write to the terminal.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod app;
pub mod artifact;
pub mod campaign;
pub mod capture;
pub mod clock;
pub mod figure;
#[cfg(feature = "analysis")]
pub mod gather;
pub mod json;
pub mod location;
pub mod manifest;
pub mod memory;
pub mod metric;
pub mod notice;
pub mod outfile;
pub mod panics;
#[cfg(feature = "analysis")]
pub mod query;
pub mod realtime;
#[cfg(feature = "analysis")]
pub mod report;
pub mod rules;
pub mod shell;
pub mod sim;
pub mod slo;
pub mod stats;
pub mod validate;
#[cfg(feature = "analysis")]
pub mod verify;
pub mod workload;
