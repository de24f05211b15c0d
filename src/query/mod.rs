//! The query layer: artifacts as DataFusion tables, the metric definitions of `queries/` as
//! views, and the statistics functions they use.
//!
//! [`AnvilSession::open`] finds every artifact folder beneath the `--data` directories and
//! registers `runs` (one row per `run.json`), `requests`, `events` and `scrapes` (each the
//! union over all artifacts, Parquet scanned in place), the functions of [`udf`]
//! (`nearest_rank`, `ci95_low`, `ci95_high`, `canaries`) and [`functional_udf`]
//! (`json_pointer`, `json_schema_valid`, `json_schema_error`, `json_find`, `tool_calls`),
//! and the views of [`views::VIEWS`] (`request_timing`, `request_metrics`, `cell_stats`,
//! `aggregate_throughput`, ..., `functional_results`).
//! [`AnvilSession::run_sql`] runs statements read-only unless writes are allowed.

pub mod aggregate_state;
pub mod catalog;
pub mod context;
#[cfg(feature = "distributed")]
pub mod distributed;
pub mod docs;
pub mod error;
pub mod exec;
pub mod functional_udf;
pub mod ordered_concat;
pub mod output;
pub mod rows;
pub mod source;
pub mod telemetry_sources;
pub mod udf;
pub mod views;

pub use context::{AnvilSession, DECISION_TABLES, TABLES, runs_schema};
pub use error::QueryError;
pub use exec::{Access, StatementResult};
pub use output::{Format, write_result};
pub use source::{ArtifactSource, find_artifacts};
