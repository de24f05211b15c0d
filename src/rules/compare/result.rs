//! What a comparison says, as plain serde types: per arm and metric its statistics and
//! differences to its reference, its throughput and goodput, spec-decode figures, control
//! verdicts and output-length warnings.

use super::*;

/// One run's statistics of a metric over one window, in the metric's unit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSummary {
    pub run_id: String,
    pub stats: Stats,
}

/// One arm's figures of a metric over one window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmMetric {
    pub arm: String,
    pub window: Window,
    /// One entry per run of the arm (percentiles are per run).
    pub runs: Vec<RunSummary>,
    /// Count, mean and sd over all the arm's requests (pooled across runs).
    pub pooled: Option<Moments>,
    /// Student t 95% interval of the pooled mean.
    pub pooled_ci: Option<Interval>,
}

/// Paired differences by request index (arm − reference).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Paired {
    /// Mean paired difference with its t interval over `pairs` requests.
    Interval { pairs: usize, interval: Interval },
    /// Why no paired interval is shown.
    NotPaired { reason: String },
}

/// A difference of one percentile (arm − reference) with its interval, or why it has none.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum PercentileComparison {
    /// One run each: the seeded bootstrap (paired by request index where the arms are).
    Bootstrap(Bootstrap),
    /// Repeats on both sides: the difference of the mean per-run percentiles with Welch's
    /// interval, runs as the sample.
    AcrossRuns {
        runs: (usize, usize),
        interval: Interval,
    },
    /// No interval: the reason (an unbounded percentile interval, no values).
    NoInterval {
        estimate: Option<f64>,
        reason: String,
    },
}

impl PercentileComparison {
    /// The difference itself.
    pub fn estimate(&self) -> Option<f64> {
        match self {
            PercentileComparison::Bootstrap(b) => Some(b.estimate),
            PercentileComparison::AcrossRuns { interval, .. } => Some(interval.estimate),
            PercentileComparison::NoInterval { estimate, .. } => *estimate,
        }
    }

    /// The interval's ends, when there is one.
    pub fn interval(&self) -> Option<(f64, f64)> {
        match self {
            PercentileComparison::Bootstrap(b) => Some((b.low, b.high)),
            PercentileComparison::AcrossRuns { interval, .. } => {
                Some((interval.low, interval.high))
            }
            PercentileComparison::NoInterval { .. } => None,
        }
    }

    /// Which interval it is, in words.
    pub fn method(&self) -> String {
        match self {
            PercentileComparison::Bootstrap(b) if b.paired => {
                format!("paired bootstrap, {} resamples", b.resamples)
            }
            PercentileComparison::Bootstrap(b) => {
                format!("bootstrap, {} resamples", b.resamples)
            }
            PercentileComparison::AcrossRuns { runs, .. } => {
                format!("t across runs ({} vs {})", runs.0, runs.1)
            }
            PercentileComparison::NoInterval { reason, .. } => reason.clone(),
        }
    }
}

/// A percentile's difference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PercentileDifference {
    pub percentile: Percentile,
    pub comparison: PercentileComparison,
}

/// An arm against its reference on one metric over one window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricDifference {
    pub arm: String,
    pub reference: String,
    pub window: Window,
    /// Mean of the arm − mean of the reference, in the metric's unit: the pooled means, or
    /// the means of the runs' means when both arms have repeats.
    pub difference: Option<f64>,
    /// Mean of the arm / mean of the reference, the same means.
    pub ratio: Option<f64>,
    /// Welch 95% interval of the mean difference: over the requests when an arm has one
    /// run, over the runs' means when both arms have repeats (see `welch_runs`).
    pub welch: Option<Interval>,
    /// `(reference runs, arm runs)` when the Welch interval takes runs as the sample (both
    /// arms have repeats, so run-to-run variation is in it); `None` when it takes requests.
    pub welch_runs: Option<(usize, usize)>,
    pub paired: Paired,
    /// p50 and the tail that hurts (p95, p99 or p5, p1).
    pub percentiles: Vec<PercentileDifference>,
}

impl MetricDifference {
    /// What the Welch interval is over, in words.
    pub fn welch_method(&self) -> String {
        match self.welch_runs {
            Some((b, a)) => format!("across runs ({a} vs {b})"),
            None => "over requests".to_owned(),
        }
    }
}

/// Every arm on one metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricComparison {
    pub metric: MetricId,
    /// Per arm and window, arms in comparison order, `all` first.
    pub arms: Vec<ArmMetric>,
    /// One per arm with a reference and window.
    pub differences: Vec<MetricDifference>,
}

impl MetricComparison {
    /// The figures of `arm` over `window`.
    pub fn arm(&self, arm: &str, window: Window) -> Option<&ArmMetric> {
        self.arms
            .iter()
            .find(|a| a.arm == arm && a.window == window)
    }

    /// The difference of `arm` to its reference over `window`.
    pub fn difference(&self, arm: &str, window: Window) -> Option<&MetricDifference> {
        self.differences
            .iter()
            .find(|d| d.arm == arm && d.window == window)
    }
}

/// What to print when an arm has one run: throughput has no run-to-run uncertainty.
pub const SINGLE_RUN: &str = "single run: no run-to-run uncertainty; record ≥ 3 repeats";

/// An arm's aggregate output throughput, tokens per second.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum ThroughputEstimate {
    /// One run: the figure stands alone.
    SingleRun { run_id: String, output_tps: f64 },
    /// Several runs: mean across runs with its t interval (runs − 1 degrees of freedom).
    Repeats {
        runs: usize,
        mean: f64,
        sd: Option<f64>,
        interval: Option<Interval>,
    },
    /// No run of the arm recorded a throughput.
    Missing,
}

impl ThroughputEstimate {
    /// The label a report prints beside the figure.
    pub fn label(&self) -> String {
        match self {
            ThroughputEstimate::SingleRun { .. } => SINGLE_RUN.to_owned(),
            ThroughputEstimate::Repeats { runs, .. } => {
                format!("{runs} runs, 95% CI across runs")
            }
            ThroughputEstimate::Missing => "not recorded".to_owned(),
        }
    }

    /// The central figure, tokens per second.
    pub fn value(&self) -> Option<f64> {
        match self {
            ThroughputEstimate::SingleRun { output_tps, .. } => Some(*output_tps),
            ThroughputEstimate::Repeats { mean, .. } => Some(*mean),
            ThroughputEstimate::Missing => None,
        }
    }

    /// The interval across runs, when there are repeats.
    pub fn interval(&self) -> Option<Interval> {
        match self {
            ThroughputEstimate::Repeats { interval, .. } => *interval,
            _ => None,
        }
    }
}

/// A throughput difference to the reference (arm − reference, tokens per second).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThroughputDifference {
    pub estimate: f64,
    /// Welch's interval with runs as the sample, when both arms have repeats.
    pub interval: Option<Interval>,
    /// Why there is no interval, when there is none.
    pub no_interval: Option<String>,
}

/// A multi-GPU arm's throughput against the matched single-GPU arm: aggregate ÷ (GPUs ×
/// that arm's aggregate).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Efficiency {
    /// The single-GPU arm.
    pub against: String,
    pub value: f64,
}

/// An arm's aggregate throughput over one window, with its per-GPU and per-replica figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmThroughput {
    pub arm: String,
    pub window: Window,
    pub estimate: ThroughputEstimate,
    pub gpus: Option<Gpus>,
    /// The estimate ÷ GPUs.
    pub per_gpu: Option<f64>,
    /// Requests in flight at once (concurrency per replica × replicas).
    pub in_flight: u64,
    pub reference: Option<String>,
    /// This arm's throughput / its reference's.
    pub ratio_to_reference: Option<f64>,
    pub difference: Option<ThroughputDifference>,
    /// Per GPU, against the matched single-GPU arm (multi-GPU arms only).
    pub scaling_efficiency: Option<Efficiency>,
    /// Per-replica throughput of each run (the `all` window), by run id.
    pub per_replica: Vec<(String, Vec<ReplicaThroughput>)>,
}

/// An arm's attainment of the SLOs in force and its goodput over one window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmGoodput {
    pub arm: String,
    pub window: Window,
    pub runs: usize,
    /// Requests that succeeded and met every SLO, all runs together.
    pub attained: u64,
    /// Measured requests, all runs together.
    pub requests: u64,
    /// attained / requests with its exact (Clopper–Pearson) 95% interval, the runs' requests
    /// pooled.
    pub share: Option<crate::stats::Proportion>,
    /// Goodput in output tokens/s: a single run's, or the mean across runs with its t
    /// interval.
    pub goodput_tps: ThroughputEstimate,
    /// Goodput in requests/s, the same way.
    pub goodput_rps: ThroughputEstimate,
    /// goodput_tps ÷ the arm's GPUs.
    pub per_gpu: Option<f64>,
    pub reference: Option<String>,
    /// goodput_tps − the reference's, Welch's interval across runs when both have repeats.
    pub difference: Option<ThroughputDifference>,
}

/// The cold-start burst of one arm: each run's worst TTFT among its first wave's successful
/// requests, in ms (the first wave: the requests released before any completed).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmBurst {
    pub arm: String,
    /// Requests in the first wave of its first run.
    pub size: usize,
    /// One per run that has a first wave with a TTFT.
    pub worst_ttft_ms: Vec<f64>,
    /// Each run's makespan: first send to the first wave's last first token, ms.
    pub makespan_ms: Vec<f64>,
}

/// Spec-decode figures of one run, passed through.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmSpecDecode {
    pub arm: String,
    pub run_id: String,
    pub replicas: Vec<SpecDecode>,
}

/// Whether two arms realized the same output lengths.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum OutputLength {
    Comparable,
    /// Throughput is not comparable as it stands; the reason gives the figures.
    NotComparable {
        warning: String,
    },
}

/// An arm's control verdict against its reference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ControlVerdict {
    pub arm: String,
    pub reference: String,
    pub control: Control,
}
