//! From a query session to the plain inputs of the rules and the report: the one layer that
//! knows both the query layer and the types the rules and the report take. Every figure is
//! a column of a view of `queries/`; nothing is computed here.
//!
//! - [`rules_input`]: each artifact's facts and figures for the rules;
//! - [`report_input`]: what the report draws (timings, queues, snippets, definitions);
//! - [`summary`]: `anvil summary`'s statistics;
//! - [`evidence`]: the evidence file names beneath the data folders;
//! - [`decisions`]: the decisions as SQL tables (`capacity`), registered into a session.

pub mod decisions;
pub mod evidence;
pub mod report_input;
pub mod rules_input;
pub mod summary;
