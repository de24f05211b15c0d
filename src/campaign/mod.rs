//! The campaign file (`anvil-serving.benchmark-campaign/v1`): how each arm of the run plan is
//! served and which cells are recorded against it, beside the workload manifest and the run
//! plan it names.
//!
//! Per arm (named as the plan spells it): a launch command (argv, environment, working
//! directory; `{port}` and `{replica}` are replaced per replica in the argv and the
//! environment's values, e.g. `CUDA_VISIBLE_DEVICES={replica}`, and `{repeat}` by the repeat
//! the launch records), the replicas' ports, a
//! readiness check (`GET /health` or `/v1/models` until 200, with a timeout), a stop method
//! (SIGTERM or SIGINT, a grace period, then SIGKILL), the arm's configuration keys (what
//! `anvil-capture run --set` records) and runtime, and the cells to record (by class or by
//! cell id); or, instead of a launch command, the endpoints of servers already running. The
//! starting service is described the same way, with what shows it is restored.
//!
//! A sweep is an arm template and a list of values for one configuration key: it expands into
//! one arm per value (`{value}` replaced in the arm's name, its argv and its environment),
//! each differing from the others in exactly that key, so the one-variable control rule holds
//! by construction.
//!
//! Repeated cells are recorded interleaved across a stage's arms (one launch per repeat, A B C
//! A B C) unless the file declares `order: blocked`; a launch per repeat is warmed up before
//! its first measured cell (`warmup_requests`).
//!
//! [`CampaignFile::problems`] checks what the file states on its own;
//! [`CampaignFile::check_against`] checks it against its manifest and plan (every arm in the
//! plan, every cell in the manifest).

pub mod file;
pub mod fingerprint;
pub mod journal;
pub mod plan;
#[cfg(feature = "analysis")]
pub mod runner;
pub mod search;
pub mod shards;
pub mod supervise;

pub use file::{
    Arm, CAMPAIGN_SCHEMA, CAMPAIGN_SCHEMA_FAMILY, CampaignFile, Cells, Launch, MAX_LOCAL_SHARDS,
    Order, PLACEHOLDERS, Readiness, Repeats, Service, StartingService, StopMethod, Sweep, Timeouts,
};
pub use plan::{CellState, PlannedCell};

#[cfg(test)]
mod tests;
