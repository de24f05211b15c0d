//! The report's view: plain serde structs of already-formatted strings (and chart data) for
//! every section, built by [`super::build`]. Templates only lay the strings out;
//! [`super::charts`] draws the chart data.

use serde::Serialize;

use super::charts::{BarChart, CdfChart, TimeSeriesChart, TimelineChart};

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReportView {
    pub header: HeaderView,
    /// The first screen: the decision summary.
    pub decision: super::sections::decision::DecisionView,
    pub plan: PlanView,
    /// Each stage's comparisons at a glance.
    pub stage_pairs: Vec<super::sections::stages::StagePairsView>,
    /// The charts that carry decisions.
    pub charts: super::sections::curves::DecisionCharts,
    pub headline: HeadlineView,
    pub context_curve: ContextCurveView,
    pub screens: Vec<ScreenView>,
    pub controls: ControlsView,
    pub topology: Vec<TopologyView>,
    pub slo: super::sections::slo::SloView,
    pub spec_decode: Vec<SpecDecodeRow>,
    pub server: ServerView,
    /// Sessions, traces and prefix groups: TTFT by turn, the cache, the KV pool.
    pub cache: super::sections::cache::CacheView,
    pub verdicts: VerdictsView,
    pub open_gates: Vec<String>,
    pub appendix: AppendixView,
}

/// Section 1.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeaderView {
    pub campaign_id: String,
    pub goal: String,
    pub data_folder: String,
    pub generated_utc: String,
    pub tool_version: String,
    pub promotion_authorized: bool,
    /// `holds`, `stop rule fired`, `rule failed`, `incomplete`.
    pub outcome: String,
    /// CSS class of the outcome: `pass`, `fail`, `missing`.
    pub outcome_class: String,
    pub exit_code: u8,
    pub reasons: Vec<String>,
    pub stops: Vec<StopView>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StopView {
    pub kind: String,
    pub run_id: String,
    pub reason: String,
}

/// Section 2.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanView {
    pub stages: Vec<StageView>,
    pub headline_rule: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageView {
    pub order: String,
    pub stage: String,
    pub status: String,
    pub selected: String,
    pub rejected: String,
    pub evidence_file: String,
    /// What the evidence file shows (a restore stage: restored, or the failing checks).
    pub evidence_verdict: String,
    pub evidence_supported: bool,
    pub arms: Vec<ArmEvidenceView>,
    pub claims: Vec<ClaimView>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmEvidenceView {
    pub arm: String,
    pub found: bool,
    /// `found (r1, r2)` or `missing`.
    pub evidence: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClaimView {
    /// `selected` or `rejected`.
    pub side: String,
    pub clause: String,
    pub verdict: String,
    pub verdict_class: String,
    pub reason: String,
}

/// Section 3.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeadlineView {
    pub comparison: Option<ComparisonView>,
    pub refusal: Option<RefusalView>,
    /// Said when there is neither a comparison nor a refusal.
    pub empty_note: String,
    /// Artifacts of the headline class that are not the manifest's headline cell, with why.
    pub left_out: Vec<LeftOutView>,
}

/// An artifact of the headline class left out of the headline comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeftOutView {
    pub arm: String,
    pub run_id: String,
    /// Prompt tokens, concurrency and requests of its workload.
    pub workload: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RefusalView {
    pub reason: String,
    pub rule: String,
    pub differences: Vec<DifferenceView>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DifferenceView {
    pub run_id: String,
    pub field: String,
    pub first: String,
    pub other: String,
}

/// A comparison of matched artifacts (the headline, or one stage on one workload).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComparisonView {
    pub label: String,
    pub fingerprint: String,
    /// How each arm's reference was chosen.
    pub references: String,
    /// One line per arm: its reference and control verdict, or why it has none.
    pub pairs: Vec<String>,
    pub arms: Vec<ArmSwatch>,
    pub metrics: Vec<MetricTableView>,
    pub throughput: Vec<ThroughputRowView>,
    pub output_length: Vec<OutputLengthView>,
    pub warnings: Vec<String>,
    pub charts: ComparisonCharts,
}

/// An arm name with its palette colour (CSS hex) for tables.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmSwatch {
    pub arm: String,
    pub colour: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricTableView {
    pub name: String,
    pub unit: String,
    /// `lower is better` or `higher is better`.
    pub better: String,
    /// Column labels of the tail that hurts: `p95 (slowest 5%)`, `p99 (slowest 1%)` or
    /// `p5 …`, `p1 …`.
    pub tail_labels: [String; 2],
    pub rows: Vec<MetricRowView>,
    pub differences: Vec<DifferenceRowView>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricRowView {
    pub arm: String,
    /// `all` or `after_first_wave`.
    pub window: String,
    pub run_id: String,
    pub n: String,
    pub mean: String,
    pub ci95: String,
    /// `estimate [low, high]` with its distribution-free 95% interval.
    pub p50: String,
    pub tails: [String; 2],
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DifferenceRowView {
    pub arm: String,
    pub reference: String,
    pub window: String,
    pub difference: String,
    pub ratio: String,
    pub welch_ci: String,
    pub paired: String,
    /// p50, then the two tail percentiles: `+12.3 [−4.0, +20.1]` or why there is no CI.
    pub percentiles: [String; 3],
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThroughputRowView {
    pub arm: String,
    pub colour: String,
    pub window: String,
    pub output_tps: String,
    pub basis: String,
    pub ci95: String,
    pub gpus: String,
    pub per_gpu: String,
    pub in_flight: String,
    /// `×1.70 TP1`, empty without a reference.
    pub versus: String,
    /// `+230 [+180, +280]` across runs, or `+230 (single runs: no CI)`.
    pub difference: String,
    /// `84.8% of TP1 per GPU` for a multi-GPU arm.
    pub scaling_efficiency: String,
    pub per_replica: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutputLengthView {
    pub arm: String,
    pub comparable: bool,
    pub text: String,
}

/// Chart data of a comparison; the renderer draws them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComparisonCharts {
    pub ttft_cdf: CdfChart,
    pub tpot_cdf: CdfChart,
    pub e2e_cdf: CdfChart,
    pub timelines: Vec<TimelineChart>,
    pub throughput: BarChart,
}

/// Section 4.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContextCurveView {
    pub rows: Vec<ContextRowView>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContextRowView {
    pub arm: String,
    pub run_id: String,
    pub prompt_target: String,
    pub concurrency: String,
    pub ttft_mean: String,
    pub ttft_p50: String,
    pub ttft_p95: String,
    pub prefill_mean: String,
}

/// Section 5: one stage's comparison on one workload.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScreenView {
    pub name: String,
    pub comparison: Option<ComparisonView>,
    pub refusal: Option<RefusalView>,
}

/// Section 6.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ControlsView {
    /// The manifest's declared controls, each with what realises it (its comparisons and
    /// their throughput differences), its method, or why neither.
    pub declared: Vec<String>,
    pub sweeps: Vec<SweepView>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepView {
    pub name: String,
    pub baseline: String,
    pub rows: Vec<ControlRowView>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ControlRowView {
    pub arm: String,
    /// `one variable`, `confounded`, `no variable`.
    pub verdict: String,
    pub verdict_class: String,
    pub detail: String,
}

/// Section 7: one matched workload whose arms differ in topology.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TopologyView {
    /// `stage: workload`.
    pub name: String,
    pub rows: Vec<TopologyRowView>,
    pub winner: String,
    pub reason: String,
    /// What was and was not measured of communication overhead; the loads.
    pub overhead: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TopologyRowView {
    pub arm: String,
    pub topology: String,
    pub gpus: String,
    pub in_flight: String,
    pub runs: String,
    /// `649 tok/s [640, 658]` (across runs) or `649 tok/s`.
    pub output_tps: String,
    pub per_gpu: String,
    /// `84.8% of TP1`.
    pub scaling_efficiency: String,
    pub verdict: String,
    pub verdict_class: String,
}

/// Section 9: one replica of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpecDecodeRow {
    pub arm: String,
    /// The runs averaged (a tooltip).
    pub run_id: String,
    /// The cell, short (`headline`, `screen 4K C4`).
    pub cell: String,
    /// How many runs.
    pub replica: String,
    pub acceptance_rate: String,
    pub mean_accepted_length: String,
    pub tokens_per_chunk: String,
}

/// Section 10: the server's queue per run, the client's own queueing, and the timings the
/// server reported.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerView {
    /// Per run with scrapes: the most requests running and waiting.
    pub queue: Vec<QueueRowView>,
    /// Charts of the runs where a request waited, or notes on runs without a queue gauge.
    pub runs: Vec<ServerRunView>,
    pub client_queue: Vec<ClientQueueView>,
    pub timings: Vec<ServerTimingsView>,
    /// What waited, as the client observed it beside the gauges: `requests waited for
    /// prefill beyond their own in 30 of 73 runs (first waves: up to 3,600 ms) …`.
    pub waited: String,
}

/// One run's queue at a glance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueRowView {
    pub arm: String,
    pub cell: String,
    pub run_id: String,
    /// The gauges' dialect (`vllm`, `sglang`, `llama.cpp`), or `none known`.
    pub gauges: String,
    pub scrapes: String,
    pub max_running: String,
    pub max_waiting: String,
    /// `pass` when nothing waited, `missing` when something did.
    pub waiting_class: String,
}

/// One run's server queue: a chart, or what was there instead.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerRunView {
    pub arm: String,
    pub run_id: String,
    pub chart: Option<TimeSeriesChart>,
    /// Why there is no chart (scrapes without a known queue gauge).
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClientQueueView {
    pub arm: String,
    pub run_id: String,
    pub schedule: String,
    pub requests: String,
    pub p50: String,
    pub p95: String,
    pub max: String,
    pub queued: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerTimingsView {
    pub arm: String,
    pub run_id: String,
    pub requests: String,
    pub prefill_p50: String,
    pub queue_p50: String,
    pub queue_max: String,
    pub generation_diff_p50: String,
    pub generation_diff_max: String,
    pub token_mismatches: String,
}

/// Section 11.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerdictsView {
    pub arms: Vec<ArmVerdictView>,
    /// The advance rules as the plan words them (the matrix's columns).
    pub rules: Vec<String>,
    /// Arms × rules, arms in the plan's order.
    pub matrix: Vec<MatrixRowView>,
}

/// One arm's row of the rules matrix.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MatrixRowView {
    pub arm: String,
    pub cells: Vec<MatrixCellView>,
    /// `coding 2/2, structured_json 2/2, …`.
    pub functional: String,
}

/// One verdict with the evidence counted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MatrixCellView {
    pub verdict: String,
    pub verdict_class: String,
    /// `300/300 own canaries, 0 foreign`.
    pub evidence: String,
    /// The verdict's reason (a tooltip).
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmVerdictView {
    pub arm: String,
    pub rules: Vec<RuleVerdictView>,
    /// Per functional check of the arm's functional runs: requests passed of recorded.
    pub functional: Vec<FunctionalCheckView>,
    pub evidence: Vec<EvidenceView>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionalCheckView {
    pub check: String,
    /// `2 of 2`.
    pub passed: String,
    /// `pass` when every request passed, else `fail`.
    pub verdict_class: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleVerdictView {
    pub rule: String,
    /// `pass`, `fail`, `not run`.
    pub verdict: String,
    pub verdict_class: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvidenceView {
    pub run_id: String,
    pub request: String,
    pub what: String,
    pub detail: String,
}

/// Section 13.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AppendixView {
    pub definitions: Vec<DefinitionView>,
    pub runs: Vec<RunView>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DefinitionView {
    pub name: String,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunView {
    pub run_id: String,
    pub arm: String,
    pub stage: String,
    /// The workload class, with the API after it when the run drove another than chat
    /// (`headline-sustained-output, Responses API`).
    pub class: String,
    pub runtime: String,
    pub config: String,
    pub status: String,
    pub started_utc: String,
    pub ended_utc: String,
    pub servers: String,
}
