//! anvil: evidence toolkit for LLM-serving benchmark campaigns.
//!
//! Layers, data flowing one way: [`manifest`] (what to run) → [`capture`] (hot path) →
//! [`artifact`] (the Parquet contract) → query (feature `analysis`: DataFusion views over
//! the artifacts, statistics in `stats`) → rules → report. [`sim`] is the
//! OpenAI-compatible simulator with a known timing model used as ground truth.

pub mod artifact;
pub mod capture;
pub mod cli;
pub mod clock;
#[cfg(feature = "analysis")]
pub mod demo;
pub mod exit;
pub mod json;
pub mod manifest;
pub mod outfile;
pub mod panics;
#[cfg(feature = "analysis")]
pub mod query;
pub mod realtime;
#[cfg(feature = "analysis")]
pub mod report;
#[cfg(feature = "analysis")]
pub mod rules;
pub mod sim;
#[cfg(feature = "analysis")]
pub mod stats;
pub mod validate;
#[cfg(feature = "analysis")]
pub mod verify;
