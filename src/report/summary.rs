//! `anvil summary` as text: per artifact a heading, one aligned row per metric, the
//! aggregate output throughput and its warnings, client queueing and server timings. The
//! plain structs are filled by [`crate::gather::summary`].

use std::fmt::Write as _;

use serde::Serialize;

use super::format::{NA, fmt_mean, fmt_num, fmt_percentile, fmt_share, fmt_unit};
use super::input::{ClientQueue, ServerTimings};
use super::table::{Table, TextFormat};
use crate::metric::{MetricId, Window};
use crate::stats::{Percentile, Stats, bounded_from};

/// The statistics of one metric of one artifact over one window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricRow {
    pub metric: MetricId,
    /// Measured requests in the window (n + n_null + failed).
    pub requests: i64,
    pub failed: i64,
    pub n_null: i64,
    /// n and the other statistics.
    pub stats: Stats,
}

/// Aggregate output throughput of one artifact over one window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Throughput {
    pub output_tps: Option<f64>,
    pub completion_tokens: Option<i64>,
    pub span_s: Option<f64>,
    pub requests: i64,
    pub succeeded: i64,
    /// Successful requests without API usage (their tokens are in no figure).
    pub succeeded_without_usage: i64,
    /// Measured requests with events that could not be parsed.
    pub parse_error_requests: i64,
}

/// Attainment of the SLOs in force and goodput of one artifact over one window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Goodput {
    /// The attained share with its exact 95% interval (k of n).
    pub share: Option<crate::stats::Proportion>,
    pub goodput_rps: Option<f64>,
    pub goodput_tps: Option<f64>,
    /// The run's workload class's own SLOs, as text, where they replace the default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class_slos: Option<String>,
}

/// One window's figures of an artifact.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowStats {
    pub window: Window,
    pub metrics: Vec<MetricRow>,
    pub throughput: Option<Throughput>,
    /// With SLOs given.
    pub goodput: Option<Goodput>,
}

/// A run's first wave (`request_figures.first_wave`) and how the run was released.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FirstWave {
    /// Measured requests in the first wave.
    pub requests: i64,
    pub measured: i64,
    pub first_index: Option<i64>,
    pub last_index: Option<i64>,
    /// `closed`, `constant` or `poisson`.
    pub schedule: String,
    pub ramp_s: Option<f64>,
    pub concurrency_per_replica: i64,
    pub replicas: i64,
}

impl FirstWave {
    /// What the first wave is, in words.
    pub fn describe(&self) -> String {
        let which = match (self.first_index, self.last_index) {
            (Some(a), Some(b)) if a == b => format!("request {a}, "),
            (Some(a), Some(b)) if self.requests == b - a + 1 => format!("requests {a}–{b}, "),
            _ => String::new(),
        };
        let how = match (self.ramp_s, self.schedule.as_str()) {
            (Some(ramp), _) => format!(
                "meant to start before the {} s ramp ended",
                fmt_num(Some(ramp))
            ),
            (None, "closed") => format!(
                "C{} × {} replica{}, released together into an idle server",
                self.concurrency_per_replica,
                self.replicas,
                if self.replicas == 1 { "" } else { "s" }
            ),
            (None, _) => String::new(),
        };
        if self.requests == 0 {
            return if self.ramp_s.is_none() && self.schedule != "closed" {
                "no first wave (open loop without a ramp): the two windows are equal".to_owned()
            } else {
                "no first wave: the two windows are equal".to_owned()
            };
        }
        format!(
            "first wave: {which}{} of {} measured ({how}); the after_first_wave window leaves them out",
            self.requests, self.measured
        )
    }
}

/// A tail of the `all` window that a first-wave request holds and that is better after the
/// first wave: the start-up wave set it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FirstWaveTail {
    pub metric: MetricId,
    pub percentile: Percentile,
    /// The percentile over every measured request.
    pub all: f64,
    /// The same percentile after the first wave.
    pub after_first_wave: Option<f64>,
}

impl FirstWaveTail {
    /// `p99 TTFT 3,639 ms is a first-wave request; after the first wave: 1,714 ms`.
    pub fn describe(&self) -> String {
        let unit = self.metric.unit();
        format!(
            "{} {} {} is a first-wave request; after the first wave: {}",
            self.metric.percentile_label(self.percentile),
            self.metric.label(),
            fmt_unit(Some(self.all), unit),
            fmt_unit(self.after_first_wave, unit)
        )
    }
}

/// One artifact's summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArtifactStats {
    pub run_id: String,
    pub arm: String,
    pub cell_id: String,
    pub status: String,
    pub dir: String,
    /// A run driven from several client hosts: its shard count and how far apart their
    /// timelines may be (ms).
    pub shards: Option<(i64, f64)>,
    pub first_wave: Option<FirstWave>,
    /// `all`, then `after_first_wave`.
    pub windows: Vec<WindowStats>,
    pub first_wave_tails: Vec<FirstWaveTail>,
    pub client_queue: Option<ClientQueue>,
    pub server_timings: Option<ServerTimings>,
    /// The arm's GPUs over the `all` window (`run_energy`); `None` without telemetry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpus: Option<GpuSummary>,
}

/// The arm's GPUs over a run's measured window, from their telemetry.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct GpuSummary {
    pub gpus: i64,
    pub method: String,
    pub energy_j: f64,
    pub bound_j: Option<f64>,
    pub j_per_output_token: Option<f64>,
    pub mean_power_w: Option<f64>,
    pub idle_power_w: Option<f64>,
    pub power_limit_w: Option<f64>,
    pub at_power_limit_share: Option<f64>,
    pub throttled: Option<bool>,
    pub throttle_judged_by: Option<String>,
    pub too_coarse: Option<bool>,
    pub partial: Option<bool>,
}

/// The summary of every artifact, in run id order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// The SLOs in force and where they came from, e.g. `ttft_ms<=2000, tpot_ms<=50 (from
    /// --slo)`; `None` with none given.
    pub slos: Option<String>,
    pub artifacts: Vec<ArtifactStats>,
}

/// The columns of the per-metric table `anvil summary` prints for each run.
pub const FIGURE_COLUMNS: [&str; 13] = [
    "metric",
    "unit",
    "better",
    "window",
    "n",
    "failed",
    "null",
    "mean [95% CI]",
    "p50 [95% CI]",
    "slowest 5% [95% CI]",
    "slowest 1% [95% CI]",
    "min",
    "max",
];

/// Render the summary as text: per artifact a heading, its first wave, one aligned row per
/// metric and window (the `after_first_wave` rows only where a first wave exists), what the
/// first wave sets, and the aggregate output throughput.
pub fn render(summary: &Summary) -> String {
    let mut out = String::new();
    if summary.artifacts.is_empty() {
        out.push_str("no artifacts\n");
        return out;
    }
    let _ = writeln!(
        out,
        "SLOs: {}\n",
        summary.slos.as_deref().unwrap_or(
            "none given (--slo 'ttft_ms<=2000', or a campaign file's `slo` section): no attainment or goodput"
        )
    );
    for (k, a) in summary.artifacts.iter().enumerate() {
        if k > 0 {
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "run {}  arm {}  cell {}  ({})  {}",
            a.run_id, a.arm, a.cell_id, a.status, a.dir
        );
        if let Some((n, uncertainty_ms)) = a.shards {
            let _ = writeln!(
                out,
                "  one run from {n} client hosts (shards; `SELECT * FROM shards`): its times share \
                 the published start instant; spans across hosts, and the aggregate throughput \
                 over them, are uncertain by ±{} ms (the hosts' clock error bounds)",
                crate::figure::sig3(uncertainty_ms)
            );
        }
        let has_wave = a.first_wave.as_ref().is_some_and(|w| w.requests > 0);
        if let Some(w) = &a.first_wave {
            let _ = writeln!(out, "  {}", w.describe());
        }
        let mut table = Table::new(&FIGURE_COLUMNS).numbers_from(4);
        let mut unbounded = false;
        for metric in MetricId::ALL {
            for w in &a.windows {
                if w.window == Window::AfterFirstWave && !has_wave {
                    continue;
                }
                let Some(m) = w.metrics.iter().find(|m| m.metric == metric) else {
                    continue;
                };
                let s = &m.stats;
                let [mild, far] = metric.tails();
                unbounded |= s.n > 0
                    && [Percentile::P50, mild, far].iter().any(|q| {
                        let b = s.interval(*q);
                        b.low.is_none() || b.high.is_none()
                    });
                let first = w.window == Window::All;
                table.row(vec![
                    if first {
                        metric.as_str().to_owned()
                    } else {
                        String::new()
                    },
                    if first {
                        metric.unit().to_owned()
                    } else {
                        String::new()
                    },
                    if first {
                        metric.better().to_owned()
                    } else {
                        String::new()
                    },
                    w.window.as_str().to_owned(),
                    s.n.to_string(),
                    m.failed.to_string(),
                    m.n_null.to_string(),
                    fmt_mean(s),
                    fmt_percentile(s, Percentile::P50, false),
                    fmt_percentile(s, mild, true),
                    fmt_percentile(s, far, true),
                    fmt_num(s.min),
                    fmt_num(s.max),
                ]);
            }
        }
        table.render(TextFormat::Text, &mut out);
        let _ = writeln!(
            out,
            "  slowest 5% / 1%: p95 / p99 where lower is better, p5 / p1 where higher is better"
        );
        if unbounded {
            let _ = writeln!(
                out,
                "  ∞: that side of the percentile's 95% interval is unbounded at this n (a \
                 bounded p50 needs n ≥ {}, p95 or p5 n ≥ {}, p99 or p1 n ≥ {})",
                bounded_from(Percentile::P50.probability()),
                bounded_from(Percentile::P95.probability()),
                bounded_from(Percentile::P99.probability())
            );
        }
        for tail in &a.first_wave_tails {
            let _ = writeln!(out, "  first wave sets a tail: {}", tail.describe());
        }
        let throughput = |w: Window| {
            a.windows
                .iter()
                .find(|x| x.window == w)
                .and_then(|x| x.throughput.as_ref())
        };
        match throughput(Window::All) {
            Some(t) => {
                let _ = write!(
                    out,
                    "  aggregate output: {} tok/s ({} completion tokens over {} s; {} of {} measured requests ok)",
                    fmt_num(t.output_tps),
                    t.completion_tokens
                        .map_or_else(|| NA.to_owned(), |v| v.to_string()),
                    fmt_num(t.span_s),
                    t.succeeded,
                    t.requests
                );
                match throughput(Window::AfterFirstWave).filter(|_| has_wave) {
                    Some(after) => {
                        let _ = writeln!(
                            out,
                            "; after the first wave {} tok/s over its own {} s",
                            fmt_num(after.output_tps),
                            fmt_num(after.span_s)
                        );
                    }
                    None => out.push('\n'),
                }
                let without = u64::try_from(t.succeeded_without_usage).unwrap_or(0);
                let succeeded = u64::try_from(t.succeeded).unwrap_or(0);
                if let Some(gap) = crate::rules::usage_gap(&a.run_id, without, succeeded) {
                    let _ = writeln!(out, "  WARNING: {gap}");
                }
                if t.parse_error_requests > 0 {
                    let _ = writeln!(
                        out,
                        "  WARNING: run {}: {} measured requests have events that could not be \
                         parsed (parser corruption; `SELECT request_index, first_parse_error FROM \
                         request_timing WHERE parse_errors > 0`)",
                        a.run_id, t.parse_error_requests
                    );
                }
            }
            None => {
                let _ = writeln!(out, "  aggregate output: n/a (no measured requests)");
            }
        }
        let goodput = |w: Window| {
            a.windows
                .iter()
                .find(|x| x.window == w)
                .and_then(|x| x.goodput.as_ref())
        };
        if let Some(g) = goodput(Window::All) {
            let one = |g: &Goodput| {
                format!(
                    "attained {}, goodput {} req/s, {} tok/s",
                    fmt_share(g.share.as_ref()),
                    fmt_num(g.goodput_rps),
                    fmt_num(g.goodput_tps)
                )
            };
            let label = g.class_slos.as_ref().map_or_else(
                || "SLOs".to_owned(),
                |own| format!("SLOs of its class ({own})"),
            );
            let _ = write!(out, "  {label}: {}", one(g));
            match goodput(Window::AfterFirstWave).filter(|_| has_wave) {
                Some(after) => {
                    let _ = writeln!(out, "; after the first wave {}", one(after));
                }
                None => out.push('\n'),
            }
        }
        if let Some(g) = &a.gpus {
            let bound = g
                .bound_j
                .map_or(String::new(), |b| format!(" ± {}", fmt_num(Some(b))));
            let limit = g.power_limit_w.map_or(String::new(), |l| {
                format!(
                    ", power limit {} W (at it {} of the window)",
                    fmt_num(Some(l)),
                    g.at_power_limit_share
                        .map_or_else(|| NA.to_owned(), |s| format!("{:.0}%", s * 100.0))
                )
            });
            let _ = writeln!(
                out,
                "  GPUs ({} {}): {}{bound} J over the window, {} J per output token, mean {} W \
                 (idle {} W){limit}{}{}",
                g.gpus,
                g.method,
                fmt_num(Some(g.energy_j)),
                fmt_num(g.j_per_output_token),
                fmt_num(g.mean_power_w),
                fmt_num(g.idle_power_w),
                if g.too_coarse == Some(true) {
                    "; telemetry too coarse (under 20 update intervals)"
                } else {
                    ""
                },
                match (g.partial, g.throttled) {
                    (Some(true), None) => {
                        "; partial (a telemetry source failed or a GPU went unread); throttling \
                         not assessed (no reasons, no SM clock)"
                    }
                    (Some(true), _) => "; partial (a telemetry source failed or a GPU went unread)",
                    (_, None) => "; throttling not assessed (no reasons, no SM clock)",
                    _ => "",
                },
            );
            if g.throttled == Some(true) {
                let note = crate::rules::throttle_note(&a.run_id, g.throttle_judged_by.as_deref());
                let _ = writeln!(out, "  WARNING: {note}");
            }
        }
        if let Some(q) = &a.client_queue {
            let _ = writeln!(
                out,
                "  client queueing (sent - intended): p50 {} ms, p95 {} ms, max {} ms; {} of {} sent requests waited over 1 ms",
                fmt_num(q.p50_ms),
                fmt_num(q.p95_ms),
                fmt_num(q.max_ms),
                q.queued_over_1ms,
                q.requests
            );
        }
        if let Some(t) = &a.server_timings {
            let _ = writeln!(
                out,
                "  server-reported timings ({} requests): server prefill p50 {} ms; TTFT - server prefill \
                 (queued or batched, plus transport) p50 {} ms, max {} ms; generation - server decode \
                 p50 {} ms, largest {} ms; usage completion tokens differ from the server's count in {}",
                t.requests,
                fmt_num(t.prefill_p50_ms),
                fmt_num(t.queue_p50_ms),
                fmt_num(t.queue_max_ms),
                fmt_num(t.generation_diff_p50_ms),
                fmt_num(t.generation_diff_max_abs_ms),
                t.token_mismatches
            );
        }
    }
    out
}
