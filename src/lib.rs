//! anvil: evidence toolkit for LLM-serving benchmark campaigns.
//!
//! ```text
//!   app             the edge: command lines, standard output and error, exit codes
//!    │
//!    ├─ capture     record one cell (hot path) ──► artifact (the Parquet contract)
//!    ├─ sim         the simulator: known timing, injected faults
//!    └─ gather      a query session → the plain inputs of rules and report
//!         │
//!         ├─ rules  the campaign's rules, pure: matching, comparison, advance, stop
//!         ├─ report pure renderers: HTML, Markdown, text, one table, one number format
//!         └─ query  DataFusion over the artifacts: tables, the views of queries/, functions
//!              │
//!              stats · manifest · artifact · util (clock, figure, json, outfile, notice, …)
//! ```
//!
//! Data flows one way: [`manifest`] (what to run) → [`capture`] → [`artifact`] → query
//! (feature `analysis`) → rules → report. [`sim`] is the OpenAI-compatible simulator used
//! as ground truth. Only [`app`] and the binaries print or choose an exit code.
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
#[cfg(feature = "analysis")]
pub mod metric;
pub mod notice;
pub mod outfile;
pub mod panics;
#[cfg(feature = "analysis")]
pub mod query;
pub mod realtime;
#[cfg(feature = "analysis")]
pub mod report;
#[cfg(feature = "analysis")]
pub mod rules;
pub mod shell;
pub mod sim;
#[cfg(feature = "analysis")]
pub mod slo;
#[cfg(feature = "analysis")]
pub mod stats;
pub mod validate;
#[cfg(feature = "analysis")]
pub mod verify;
pub mod workload;
