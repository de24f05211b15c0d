//! The campaign's rules as pure functions over plain typed inputs: matching, headline
//! gating, comparison, advance and stop rules, one-variable controls, plan coverage and the
//! overall verdict of `anvil check`.
//!
//! The query layer fills [`ArtifactFacts`] (from `run.json`) and [`ArtifactFigures`] (from
//! the SQL); nothing here reads files or computes a figure the query layer owns. Every rule
//! returns a typed result with a reason written for a reviewer.

pub mod input;
pub mod stats;

pub use input::{
    Artifact, ArtifactFacts, ArtifactFigures, CanaryResult, FunctionalResult, MetricId,
    ReplicaThroughput, RequestCounts, RequestValue, Restart, ServerError, SpecDecode, Stats,
    Topology,
};
pub mod advance;
pub mod check;
pub mod compare;
pub mod control;
pub mod coverage;
pub mod headline;
pub mod matching;
pub mod refusal;
pub mod stop;

pub use advance::{AdvanceRule, TopologyAssessment, Verdict};
pub use check::{ArmAdvance, CheckReport, Outcome, check};
pub use compare::{
    Comparison, OutputLength, Paired, ThroughputEstimate, compare, compare_artifacts,
};
pub use control::{Control, control};
pub use coverage::{ClaimCheck, ClaimVerdict, PlanCoverage, plan_coverage};
pub use headline::{Comparand, HeadlineSelection, Scope, classify, gate};
pub use matching::{MatchedSet, match_artifacts};
pub use refusal::{FieldDifference, Refusal, RefusalKind};
pub use stop::{StopFinding, StopKind, stop_rules};

#[cfg(test)]
mod fixtures;
