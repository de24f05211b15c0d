//! The plain inputs of the rules: [`ArtifactFacts`] (what `run.json` says) and
//! [`ArtifactFigures`] (what the query layer computed from the Parquet tables).
//!
//! Both are plain structs with public fields so the query layer can fill them without
//! going through the rules; nothing here is computed, only carried.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::artifact::run::{Api, ArmConfig, Outcome, RunJson, Status, Workload};

pub use crate::artifact::gpus::{GPUS_KEY, Gpus, TOPOLOGY_KEY, Topology};

/// What an artifact's `run.json` says about the run (no figures).
#[derive(Debug, Clone, PartialEq)]
pub struct ArtifactFacts {
    /// Unique id of the run (`run.json` `run_id`).
    pub run_id: String,
    /// The campaign the run belongs to (`campaign_id`).
    pub campaign_id: String,
    /// Arm name as the run plan spells it (`arm.name`), e.g. `TP2`.
    pub arm: String,
    /// Run-plan stage of the arm (`arm.stage`), e.g. `matched topology`.
    pub stage: String,
    /// The arm's configuration as ordered `key = value` pairs (`arm.config`).
    pub config: ArmConfig,
    /// The campaign defaults the arm inherits, for the keys it does not declare
    /// (`arm.defaults`).
    pub defaults: ArmConfig,
    /// Serving runtime (`arm.runtime`), e.g. `sglang 0.6.1`.
    pub runtime: String,
    /// The cell's workload section; its `api` field is the API the run drove.
    pub workload: Workload,
    /// The recorded workload fingerprint (`sha256:` + 64 hex digits).
    pub fingerprint: String,
    /// How the run ended.
    pub status: Status,
    /// Number of replicas the requests were spread over (`topology.replica_count`).
    pub replica_count: u32,
}

impl ArtifactFacts {
    /// The facts of a parsed `run.json`.
    pub fn from_run_json(run: &RunJson) -> Self {
        Self {
            run_id: run.run_id.clone(),
            campaign_id: run.campaign_id.clone(),
            arm: run.arm.name.clone(),
            stage: run.arm.stage.clone(),
            config: run.arm.config.clone(),
            defaults: run.arm.defaults.clone(),
            runtime: run.arm.runtime.clone(),
            workload: run.workload.clone(),
            fingerprint: run.workload_fingerprint.clone(),
            status: run.status,
            replica_count: run.topology.replica_count,
        }
    }

    /// The API the run drove (part of the workload).
    pub fn api(&self) -> Api {
        self.workload.api
    }

    /// The arm's topology from its `topology` configuration key (declared or inherited):
    /// `None` when the key is absent, an error naming the value when it is not `TPn` or `DPn`.
    pub fn topology(&self) -> Option<Result<Topology, String>> {
        self.setting(TOPOLOGY_KEY).map(Topology::parse)
    }

    /// The value of `key`: declared by the arm, else inherited from the campaign defaults.
    pub fn setting(&self, key: &str) -> Option<&str> {
        self.config.get(key).or_else(|| self.defaults.get(key))
    }

    /// The effective configuration: the declared keys in their order, then the inherited
    /// defaults the arm does not declare.
    pub fn effective_config(&self) -> ArmConfig {
        let mut pairs = self.config.0.clone();
        for (k, v) in self.defaults.iter() {
            if self.config.get(k).is_none() {
                pairs.push((k.to_owned(), v.to_owned()));
            }
        }
        ArmConfig(pairs)
    }

    /// The GPUs the arm uses: its `gpus` key, else derived from its topology (`TPn` and `DPn`
    /// use n), else unknown.
    pub fn gpus(&self) -> Option<Gpus> {
        crate::artifact::gpus::gpus(|key| self.setting(key))
    }

    /// Requests in flight at once: concurrency per replica × replicas.
    pub fn in_flight(&self) -> u64 {
        u64::from(self.workload.concurrency_per_replica) * u64::from(self.replica_count.max(1))
    }
}

pub use crate::metric::{MetricId, Window};
pub use crate::stats::Stats;

/// One request's value of a metric.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RequestValue {
    /// `request_index` of the request in its run.
    pub request_index: i64,
    /// The value, in the metric's unit.
    pub value: f64,
}

/// Aggregate output throughput of one replica.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ReplicaThroughput {
    /// Replica index.
    pub replica: u32,
    /// Sum of usage completion tokens / wall-clock span of that replica's requests, tokens
    /// per second.
    pub output_tps: f64,
}

/// Measured requests by how they ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RequestCounts {
    /// Rows of `requests` with `kind = 'measured'`.
    pub measured: u64,
    /// Measured requests with outcome `ok`.
    pub ok: u64,
    /// Measured requests that did not succeed, by outcome.
    pub failed: BTreeMap<Outcome, u64>,
    /// Of the `ok` ones, those that carry a canary (a trace row asking too short a reply
    /// carries none).
    pub ok_with_canary: u64,
}

impl RequestCounts {
    /// Measured requests that did not succeed (saturating: hostile counts cannot overflow).
    pub fn failed_total(&self) -> u64 {
        self.failed
            .values()
            .fold(0, |sum, n| sum.saturating_add(*n))
    }
}

/// The canary check of one measured request.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CanaryResult {
    /// `request_index` of the request.
    pub request_index: i64,
    /// Whether the reply contained the request's own canary (true for a request that carried
    /// none but is listed for the markers in its reply).
    pub own_present: bool,
    /// Canary markers other than the request's own found in the reply's content, wherever
    /// they came from (another request, run, tenant or a prompt cache).
    pub foreign: Vec<String>,
    /// Canary markers other than the request's own found in its tool-call arguments.
    pub foreign_in_tool_arguments: Vec<String>,
}

/// A replica the restart rule fired on: it restarted during the run, or stopped answering
/// and did not come back (the `restarts` view's `signal` says which).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Restart {
    /// Replica index.
    pub replica: u32,
    /// What showed it.
    pub signal: RestartSignal,
}

/// The evidence of a restart (the `restarts` view's `signal`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum RestartSignal {
    /// `process_start_time_seconds` changed, seconds since the Unix epoch.
    StartTime { before_s: f64, after_s: f64 },
    /// Monotonic counters fell between two scrapes: the server counted from 0 again.
    CounterReset {
        /// How many series fell.
        counters: u64,
        /// One of them, `name{labels}`.
        example: String,
    },
    /// A run that completed has the replica's scrape before it but none after it, and every
    /// measured request of the replica that ended after its last answer failed: it stopped
    /// answering and did not come back (not a restart that was seen).
    StoppedAnswering {
        /// Its last answer (latest scrape or successful request), seconds since the run's
        /// origin; `None` when it never answered.
        last_answer_s: Option<f64>,
        /// Measured requests that ended after it, all failed.
        failed: u64,
        /// Their outcomes with counts, e.g. `connect_error 12, aborted 8`.
        outcomes: String,
    },
}

impl Restart {
    /// What the replica did, as findings say it: `restarted` (a new start time, or counters
    /// counting from 0 again, seen in a later scrape) or `stopped answering` (no later
    /// scrape or response).
    pub fn what(&self) -> &'static str {
        match self.signal {
            RestartSignal::StartTime { .. } | RestartSignal::CounterReset { .. } => "restarted",
            RestartSignal::StoppedAnswering { .. } => "stopped answering",
        }
    }

    /// The evidence in words, e.g. `process_start_time_seconds 100 → 250.5` or
    /// `3 counters fell, e.g. llamacpp:prompt_tokens_total`.
    pub fn evidence(&self) -> String {
        match &self.signal {
            RestartSignal::StartTime { before_s, after_s } => format!(
                // A timestamp as the server exported it, not rounded to a figure.
                "process_start_time_seconds {before_s} → {after_s}",
            ),
            RestartSignal::CounterReset { counters, example } => format!(
                "{counters} counter{} fell between two scrapes, e.g. {example}: the server began counting again",
                if *counters == 1 { "" } else { "s" }
            ),
            RestartSignal::StoppedAnswering {
                last_answer_s,
                failed,
                outcomes,
            } => {
                let last = match last_answer_s {
                    Some(s) => format!(
                        "its last answer (a /metrics scrape or a successful request) came {s:.1} s into the run"
                    ),
                    None => "it never answered".to_owned(),
                };
                format!(
                    "{last}; the {failed} measured request{} that ended after it all failed ({outcomes}), \
                     and no later scrape answered, the one after the run included: it did not come back",
                    if *failed == 1 { "" } else { "s" }
                )
            }
        }
    }
}

/// A failed measured request with the error the server (or the client) gave.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerError {
    /// `request_index` of the request.
    pub request_index: i64,
    /// How it ended.
    pub outcome: Outcome,
    /// The `error` column: error text, including the server's error body.
    pub body: String,
}

/// Speculative-decoding figures of one replica, from its `/metrics` scrapes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SpecDecode {
    /// Replica index.
    pub replica: u32,
    /// Accepted draft tokens / proposed draft tokens, 0 to 1.
    pub acceptance_rate: Option<f64>,
    /// Mean tokens accepted per verification step, tokens.
    pub mean_accepted_length: Option<f64>,
}

/// One functional check's result (e.g. `structured_json`, `tools`, `responses`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionalResult {
    /// The check's name, the `check` column of `requests`.
    pub check: String,
    /// The request the result is about, when it is about one.
    pub request_index: Option<i64>,
    pub passed: bool,
    /// Why it failed (or a note when it passed).
    pub reason: Option<String>,
    /// What kind of failure (`None` when it passed).
    pub failure: Option<FunctionalFailure>,
}

/// What kind of failure a functional result is (`functional_results.failure`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum FunctionalFailure {
    /// The request did not complete: a loss, counted under its outcome, not bad output.
    Incomplete,
    /// The reply was cut by the token ceiling before the check could see it whole.
    Truncated,
    /// A whole reply that fails its check.
    Invalid,
}

impl FunctionalFailure {
    /// Parse the view's spelling (`incomplete`, `truncated`, `invalid`).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "incomplete" => Some(Self::Incomplete),
            "truncated" => Some(Self::Truncated),
            "invalid" => Some(Self::Invalid),
            _ => None,
        }
    }
}

/// Functional check names the third advance rule needs.
pub const REQUIRED_FUNCTIONAL_CHECKS: [&str; 3] = ["structured_json", "tools", "responses"];

/// The functional check whose failures count as structured-output corruption.
pub const STRUCTURED_OUTPUT_CHECK: &str = "structured_json";

/// The figures of one window of a run other than `all` (`cell_stats` and
/// `aggregate_throughput` rows of that window).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WindowFigures {
    /// Per-metric statistics over the window's requests.
    pub metrics: BTreeMap<MetricId, Stats>,
    /// Aggregate output throughput over the window's own span, tokens per second.
    pub aggregate_output_tps: Option<f64>,
}

/// One point of the throughput-per-GPU against throughput-per-user trade-off (the `tradeoff`
/// view): an arm on one cell, its runs averaged, with whether it is on the Pareto frontier
/// of its frontier group.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct TradeoffPoint {
    pub arm: String,
    pub cell_id: String,
    pub window: String,
    /// The points compared for the frontier: `<class>.ctx<prompt tokens>`.
    pub frontier_group: String,
    pub concurrency_per_replica: Option<u32>,
    pub replicas: Option<u32>,
    pub rate_per_s: Option<f64>,
    pub gpus: Option<u32>,
    pub gpus_derived: Option<bool>,
    pub runs: u64,
    pub output_tps: Option<f64>,
    pub output_tps_per_gpu: Option<f64>,
    pub tpot_p50_ms: Option<f64>,
    pub output_tps_per_user: Option<f64>,
    pub goodput_tps: Option<f64>,
    pub goodput_tps_per_gpu: Option<f64>,
    pub attained_share: Option<f64>,
    /// `None` for a point off the plot (no GPUs or no median TPOT).
    pub on_frontier: Option<bool>,
    /// The points that dominate this one.
    #[serde(default)]
    pub dominated_by: Option<Vec<String>>,
}

/// Attainment of the SLOs in force and goodput over one window of one run (the `goodput`
/// view).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GoodputFigures {
    /// Measured requests in the window.
    pub requests: u64,
    /// Of them, those that succeeded and met every SLO.
    pub attained: u64,
    /// attained / requests with its exact 95% interval; `None` without requests.
    pub share: Option<crate::stats::Proportion>,
    /// Attained requests per second of the window's span.
    pub goodput_rps: Option<f64>,
    /// The attained requests' usage completion tokens per second of the span.
    pub goodput_tps: Option<f64>,
}

/// The arm's GPUs over one window of one run, from their telemetry (`run_energy`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnergyFigures {
    /// The GPUs' energy over the window, J, and the most it may be off by.
    pub energy_j: f64,
    pub bound_j: Option<f64>,
    /// Joules per usage output token.
    pub j_per_output_token: Option<f64>,
    /// A GPU was throttled in the window (a slowdown reason, or a low SM clock); `None` when
    /// no GPU's throttling could be judged (no reasons, no SM clock).
    pub throttled: Option<bool>,
    /// `reasons and SM clock`, or `SM clock only` where a source gave no reasons.
    pub throttle_judged_by: Option<String>,
    /// The largest share of the window a GPU spent at its power limit (SW power cap).
    pub at_power_limit_share: Option<f64>,
    /// The enforced power limits read: the largest and the smallest, W.
    pub power_limit_w: Option<f64>,
    pub power_limit_min_w: Option<f64>,
    /// Shorter than 20 update intervals.
    pub too_coarse: bool,
    /// A source failed inside the window.
    pub partial: bool,
}

/// What the query layer computed from one artifact's tables.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ArtifactFigures {
    /// Per-metric statistics of the `all` window (every measured request: the plan's
    /// figures); a metric the query layer did not compute is absent.
    pub metrics: BTreeMap<MetricId, Stats>,
    /// The same figures without the first wave (the `after_first_wave` window).
    pub after_first_wave: WindowFigures,
    /// Request indices of the run's first wave (`request_figures.first_wave`).
    pub first_wave: BTreeSet<i64>,
    /// The first wave's makespan: the run's first send to the wave's last first token, ms
    /// (`None` without a first wave, or when a first-wave request failed or never streamed).
    pub first_wave_makespan_ms: Option<f64>,
    /// Per-request values by metric, for paired differences.
    pub per_request: BTreeMap<MetricId, Vec<RequestValue>>,
    /// Sum of usage completion tokens / wall-clock span of the whole run (all replicas
    /// together), tokens per second.
    pub aggregate_output_tps: Option<f64>,
    /// The same per replica.
    pub aggregate_output_tps_per_replica: Vec<ReplicaThroughput>,
    /// Successful measured requests whose stream carried no API usage: their tokens are in
    /// no token figure (TPOT, decode rate, aggregate throughput), which are then incomplete.
    pub succeeded_without_usage: u64,
    /// Measured requests with events whose data could not be parsed.
    pub parse_errors: Vec<ParseErrors>,
    /// Median usage completion tokens per successful request, tokens.
    pub completion_tokens_p50: Option<f64>,
    /// Mean usage completion tokens per successful request, tokens.
    pub completion_tokens_mean: Option<f64>,
    /// Sum of the successful requests' usage completion tokens, tokens.
    pub completion_tokens_total: Option<f64>,
    /// Successful requests by finish reason (`stop`, `length`, …).
    pub finish_reasons: BTreeMap<String, u64>,
    /// Measured requests by outcome.
    pub requests: RequestCounts,
    /// Canary results of measured requests; empty when the cell has no canaries.
    pub canaries: Vec<CanaryResult>,
    /// Replicas that restarted during the run.
    pub restarts: Vec<Restart>,
    /// Replicas that exported neither restart signal (no `process_start_time_seconds`, no
    /// counter): a restart there could not have been seen. With each, whether it was
    /// scraped at all.
    pub restart_undetectable: Vec<(u32, bool)>,
    /// Failed measured requests with their error text.
    pub server_errors: Vec<ServerError>,
    /// Speculative-decoding figures per replica; empty without speculative decoding.
    pub spec_decode: Vec<SpecDecode>,
    /// Functional results; empty when the run had none.
    pub functional: Vec<FunctionalResult>,
    /// Attainment and goodput per window; empty with no SLO given.
    pub goodput: BTreeMap<Window, GoodputFigures>,
    /// The arm's GPUs per window; empty without telemetry.
    pub energy: BTreeMap<Window, EnergyFigures>,
}

/// A measured request with events that could not be parsed (`events.parse_error`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ParseErrors {
    pub request_index: i64,
    /// How many of its events.
    pub events: u64,
    /// The first one's error.
    pub first: String,
}

impl ArtifactFigures {
    /// The statistics of `metric` over `window`.
    pub fn stats(&self, window: Window, metric: MetricId) -> Option<&Stats> {
        match window {
            Window::All => self.metrics.get(&metric),
            Window::AfterFirstWave => self.after_first_wave.metrics.get(&metric),
        }
    }

    /// The aggregate output throughput over `window`, tokens per second.
    pub fn output_tps(&self, window: Window) -> Option<f64> {
        match window {
            Window::All => self.aggregate_output_tps,
            Window::AfterFirstWave => self.after_first_wave.aggregate_output_tps,
        }
    }

    /// Attainment and goodput over `window`, with SLOs given.
    pub fn goodput(&self, window: Window) -> Option<&GoodputFigures> {
        self.goodput.get(&window)
    }

    /// Per-request values of `metric` of the requests in `window` (successful requests only,
    /// as the statistics).
    pub fn values(&self, window: Window, metric: MetricId) -> Vec<RequestValue> {
        self.per_request
            .get(&metric)
            .into_iter()
            .flatten()
            .filter(|v| window == Window::All || !self.first_wave.contains(&v.request_index))
            .copied()
            .collect()
    }

    /// That the run's GPUs were throttled in its measured window (a slowdown reason set, or
    /// the SM clock held low), if they were: every figure of it stands on slowed GPUs.
    pub fn throttle_note(&self, run_id: &str) -> Option<String> {
        let e = self
            .energy
            .get(&Window::All)
            .filter(|e| e.throttled == Some(true))?;
        Some(throttle_note(run_id, e.throttle_judged_by.as_deref()))
    }

    /// Why the artifact's token figures are incomplete ([`usage_gap`]).
    pub fn usage_gap(&self, run_id: &str) -> Option<String> {
        usage_gap(run_id, self.succeeded_without_usage, self.requests.ok)
    }
}

/// That run `run_id`'s GPUs were throttled in its measured window, judged as `judged_by`
/// says (`gpu_throttle.judged_by`): the one text `compare`, `summary` and the report print.
pub fn throttle_note(run_id: &str, judged_by: Option<&str>) -> String {
    let judged = judged_by.unwrap_or("SM clock only");
    format!(
        "run {run_id}: its GPUs were throttled in the measured window (judged by {judged}): its \
         figures stand on slowed GPUs"
    )
}

/// Why a run's token figures are incomplete: successful measured requests without API usage
/// (the manifest's control is "API usage tokens rather than streamed chunk count", so their
/// tokens are counted nowhere). `None` when every one carried usage. The one text that
/// `summary`, `compare`, `check` and the report print.
pub fn usage_gap(run_id: &str, without_usage: u64, succeeded: u64) -> Option<String> {
    (without_usage > 0).then(|| {
        format!(
            "run {run_id}: {without_usage} of {succeeded} successful measured requests carried no \
             API usage; token figures (TPOT, decode rate, aggregate throughput) leave their \
             tokens out and are incomplete"
        )
    })
}

/// One artifact as the rules see it: its facts and its figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Artifact {
    pub facts: ArtifactFacts,
    pub figures: ArtifactFigures,
}

/// The values of a config or workload field as messages print them: strings bare, `null`
/// for absent values.
pub(crate) fn show(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Format a number for a reason text in the one number policy: integers bare, others with
/// three significant figures, a true minus sign (`crate::figure`).
pub(crate) fn num(value: f64) -> String {
    if value.is_finite() {
        crate::figure::count_or_sig3(value)
    } else {
        value.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topology_parses_tp_and_dp_only() {
        assert_eq!(Topology::parse("TP2"), Ok(Topology::Tp(2)));
        assert_eq!(Topology::parse("dp2"), Ok(Topology::Dp(2)));
        assert_eq!(Topology::Dp(2).gpus(), 2);
        assert_eq!(Topology::Tp(2).replicas(), 1);
        for bad in ["TP0", "TP", "EP2", "TP+2", "TP2x", "ТP2"] {
            assert_eq!(
                Topology::parse(bad),
                Err(format!("topology `{bad}` is not TPn or DPn"))
            );
        }
    }

    #[test]
    fn facts_come_from_run_json_and_a_sample_headline_run_is_headline() {
        let run = crate::artifact::run::tests::sample_run();
        let facts = ArtifactFacts::from_run_json(&run);
        assert_eq!(
            (
                facts.run_id.as_str(),
                facts.arm.as_str(),
                facts.stage.as_str()
            ),
            ("run-0001", "K12", "SGLang optimization")
        );
        assert_eq!(facts.config.get("speculative_num_steps"), Some("12"));
        assert_eq!(facts.fingerprint, run.workload.fingerprint());
        assert_eq!(
            (facts.api(), facts.status, facts.replica_count),
            (Api::Chat, Status::Complete, 1)
        );
        assert_eq!(facts.topology(), None);
        let selection = super::super::fixtures::selection();
        assert_eq!(
            super::super::headline::classify(&facts, &selection).kind,
            super::super::headline::ClassKind::Headline
        );
    }

    #[test]
    fn numbers_print_short() {
        assert_eq!(num(1500.0), "1500");
        assert_eq!(num(0.75), "0.750");
        assert_eq!(num(2.0 / 3.0), "0.667");
        assert_eq!(num(648.784), "649");
        assert_eq!(num(-21.127), "−21.1");
    }
}
