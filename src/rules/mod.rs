//! The campaign's rules as pure functions over plain typed inputs: matching, headline
//! gating, comparison, advance and stop rules, one-variable controls, plan coverage and the
//! overall verdict of `anvil check`.
//!
//! The query layer fills [`ArtifactFacts`] (from `run.json`, see
//! [`ArtifactFacts::from_run_json`]) and [`ArtifactFigures`] (from the SQL) for each
//! artifact; nothing here reads files or computes a figure the query layer owns. Every rule
//! returns a typed result with a reason written for a reviewer.
//!
//! Entry points:
//! - `anvil compare`: [`HeadlineSelection::from_manifest`] (an error is a bad manifest),
//!   then [`stage_comparisons`] (each stage's arms against their one-variable controls) or,
//!   with a baseline, [`compare_artifacts`] (headline gate → [`match_artifacts`] →
//!   [`compare()`]); a [`Refusal`] where the rules forbid it.
//! - `anvil check`: [`check()`] with the plan, the artifacts and the names of the files in
//!   the data folder; its [`CheckReport::outcome`] is the campaign's [`Outcome`].
//! - `anvil report`: [`stage::comparisons`] (the headline and each stage's comparisons).
//! - all three: [`one_campaign`] first.
//!
//! Data flows one way: manifest and artifact types in, plain serde structs out for the
//! report layer.

pub mod advance;
pub mod campaign;
pub mod capacity;
pub mod check;
pub mod compare;
pub mod control;
pub mod controls;
pub mod coverage;
pub mod effect;
pub mod headline;
pub mod input;
pub mod load;
pub mod matching;
pub mod naming;
pub mod objective;
pub mod recommend;
pub mod refusal;
pub mod stage;
pub mod stop;
pub mod topology;

pub use advance::{AdvanceRule, Verdict};
pub use campaign::{CampaignMismatch, one_campaign};
pub use check::{ArmAdvance, CheckReport, Outcome, check};
pub use compare::{
    ArmGoodput, Comparison, OutputLength, Paired, References, ThroughputEstimate, compare,
    compare_artifacts,
};
pub use control::{Control, control};
pub use coverage::{ClaimCheck, ClaimVerdict, PlanCoverage, StageCoverage, plan_coverage};
pub use headline::{
    ClassKind, Classification, Comparand, HeadlineSelection, Scope, classify, gate,
};
pub use input::{
    Artifact, ArtifactFacts, ArtifactFigures, CanaryResult, FunctionalFailure, FunctionalResult,
    MetricId, ParseErrors, ReplicaThroughput, RequestCounts, RequestValue, Restart, RestartSignal,
    ServerError, SpecDecode, Stats, Topology, Window, WindowFigures, throttle_note, usage_gap,
};
pub use matching::{MatchedSet, match_artifacts};
pub use refusal::{FieldDifference, Refusal, RefusalKind};
pub use stage::{StageComparison, comparisons, headline_comparison, stage_comparisons};
pub use stop::{EvidenceFiles, StopFinding, StopKind, stop_rules};
pub use topology::{TopologyAssessment, TopologyRow};

#[cfg(test)]
pub(crate) mod fixtures;
