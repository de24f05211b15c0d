//! The metric catalogue: every per-request metric anvil reports, with its SQL column (in
//! `request_metrics` and `cell_stats`), its display label, unit, direction, the tail that
//! hurts and the name the workload manifest's `metrics` list gives it; and the windows every
//! statistic is computed over. `compare`, `summary`, `verify`, the rules and the report all
//! read them from here; the definitions themselves are SQL
//! (`queries/20_request_figures.sql`) and their order, units and directions are
//! `cell_stats`'s.

use serde::{Deserialize, Serialize};

use crate::stats::Percentile;

/// The requests a statistic is over (`cell_stats.window`; docs/artifact.md "Windows"), named
/// in JSON as in the `window` column.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Window {
    /// Every measured request: the plan's figures.
    #[default]
    All,
    /// The measured requests not in the run's first wave (the start-up transient).
    AfterFirstWave,
}

impl Window {
    /// Both windows, `all` first.
    pub const ALL: [Window; 2] = [Window::All, Window::AfterFirstWave];

    /// Its value in the `window` column.
    pub const fn as_str(self) -> &'static str {
        match self {
            Window::All => "all",
            Window::AfterFirstWave => "after_first_wave",
        }
    }

    /// The window named by its column value.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|w| w.as_str() == text)
    }

    /// The name a reader sees.
    pub const fn label(self) -> &'static str {
        match self {
            Window::All => "all requests",
            Window::AfterFirstWave => "after the first wave",
        }
    }
}

impl std::fmt::Display for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which way a metric improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Direction {
    /// Throughputs: larger is better.
    HigherIsBetter,
    /// Latencies: smaller is better.
    LowerIsBetter,
}

/// The per-request metrics, in report order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum MetricId {
    /// Time to first content delta, milliseconds.
    TtftMs,
    /// Usage prompt tokens / TTFT, tokens per second.
    EffectivePrefillTps,
    /// (Usage completion tokens − 1) / generation time, tokens per second.
    DecodeTps,
    /// Generation time / (usage completion tokens − 1), milliseconds.
    TpotMs,
    /// Mean inter-token latency (the same per-request aggregate as TPOT), milliseconds.
    ItlMs,
    /// Request start to stream completion, milliseconds.
    E2eMs,
}

impl MetricId {
    /// Every metric, in report order (`cell_stats.metric_order`).
    pub const ALL: [MetricId; 6] = [
        MetricId::TtftMs,
        MetricId::EffectivePrefillTps,
        MetricId::DecodeTps,
        MetricId::TpotMs,
        MetricId::ItlMs,
        MetricId::E2eMs,
    ];

    /// The SQL columns of [`MetricId::ALL`], in order.
    pub const COLUMNS: [&'static str; 6] = [
        MetricId::TtftMs.as_str(),
        MetricId::EffectivePrefillTps.as_str(),
        MetricId::DecodeTps.as_str(),
        MetricId::TpotMs.as_str(),
        MetricId::ItlMs.as_str(),
        MetricId::E2eMs.as_str(),
    ];

    /// The column name the query layer uses (`request_metrics`, `cell_stats.metric`).
    pub const fn as_str(self) -> &'static str {
        match self {
            MetricId::TtftMs => "ttft_ms",
            MetricId::EffectivePrefillTps => "effective_prefill_tps",
            MetricId::DecodeTps => "decode_tps",
            MetricId::TpotMs => "tpot_ms",
            MetricId::ItlMs => "itl_ms",
            MetricId::E2eMs => "e2e_ms",
        }
    }

    /// The metric named by its SQL column.
    pub fn from_column(column: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == column)
    }

    /// The name a reader sees.
    pub const fn label(self) -> &'static str {
        match self {
            MetricId::TtftMs => "TTFT",
            MetricId::EffectivePrefillTps => "Effective prefill",
            MetricId::DecodeTps => "Decode",
            MetricId::TpotMs => "TPOT",
            MetricId::ItlMs => "Mean ITL",
            MetricId::E2eMs => "E2E",
        }
    }

    /// The unit of its values (`cell_stats.unit`).
    pub const fn unit(self) -> &'static str {
        match self.direction() {
            Direction::HigherIsBetter => "tok/s",
            Direction::LowerIsBetter => "ms",
        }
    }

    /// Which way it improves.
    pub const fn direction(self) -> Direction {
        match self {
            MetricId::EffectivePrefillTps | MetricId::DecodeTps => Direction::HigherIsBetter,
            MetricId::TtftMs | MetricId::TpotMs | MetricId::ItlMs | MetricId::E2eMs => {
                Direction::LowerIsBetter
            }
        }
    }

    /// Whether a larger value is better (throughputs) or worse (latencies).
    pub const fn higher_is_better(self) -> bool {
        matches!(self.direction(), Direction::HigherIsBetter)
    }

    /// Which way it improves, as `cell_stats.better` says it: `lower` or `higher`.
    pub const fn better(self) -> &'static str {
        match self.direction() {
            Direction::HigherIsBetter => "higher",
            Direction::LowerIsBetter => "lower",
        }
    }

    /// The two percentiles of the tail that hurts, the milder first: p95 and p99 for a time,
    /// p5 and p1 for a rate (its slowest 5% and 1%).
    pub const fn tails(self) -> [Percentile; 2] {
        match self.direction() {
            Direction::HigherIsBetter => [Percentile::P5, Percentile::P1],
            Direction::LowerIsBetter => [Percentile::P95, Percentile::P99],
        }
    }

    /// The label a reader sees beside one of its percentiles: `p99 (slowest 1%)`, `p1
    /// (slowest 1%)`, `p50`.
    pub fn percentile_label(self, q: Percentile) -> String {
        let [mild, far] = self.tails();
        if q == mild {
            format!("{q} (slowest 5%)")
        } else if q == far {
            format!("{q} (slowest 1%)")
        } else {
            q.to_string()
        }
    }

    /// Its label with the direction: `TTFT (ms, lower is better)`.
    pub fn label_with_direction(self) -> String {
        format!(
            "{} ({}, {} is better)",
            self.label(),
            self.unit(),
            self.better()
        )
    }

    /// Its name in the workload manifest's `metrics` list.
    pub const fn manifest_name(self) -> &'static str {
        match self {
            MetricId::TtftMs => "time_to_first_output_ms",
            MetricId::EffectivePrefillTps => "effective_prefill_tokens_per_second",
            MetricId::DecodeTps => "per_request_decode_tokens_per_second",
            MetricId::TpotMs => "time_per_output_token_ms",
            MetricId::ItlMs => "mean_inter_token_latency_ms",
            MetricId::E2eMs => "end_to_end_ms",
        }
    }
}

impl std::fmt::Display for MetricId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cell_stats`'s own list: `(order, 'metric', 'unit', 'better')` rows of its VALUES
    /// clause.
    fn cell_stats_rows() -> Vec<(usize, String, String, String)> {
        let sql = include_str!("../queries/40_cell_stats.sql");
        sql.lines()
            .filter_map(|l| {
                let l = l.trim().trim_end_matches(',').trim_end_matches(')');
                let l = l.strip_prefix('(')?;
                let parts: Vec<&str> = l.split(", ").collect();
                let [order, metric, unit, better] = parts[..] else {
                    return None;
                };
                let text = |s: &str| s.trim_matches('\'').to_owned();
                Some((order.parse().ok()?, text(metric), text(unit), text(better)))
            })
            .collect()
    }

    #[test]
    fn the_catalogue_is_cell_stats_list_in_order_with_its_units() {
        let rows = cell_stats_rows();
        assert_eq!(rows.len(), MetricId::ALL.len(), "{rows:?}");
        for (k, (m, (order, column, unit, better))) in MetricId::ALL.iter().zip(&rows).enumerate() {
            assert_eq!(*order, k + 1);
            assert_eq!((m.as_str(), m.unit()), (column.as_str(), unit.as_str()));
            assert_eq!(m.better(), better);
            assert_eq!(MetricId::from_column(column), Some(*m));
            assert_eq!(MetricId::COLUMNS[k], column);
        }
    }

    #[test]
    fn tails_point_the_way_that_hurts() {
        assert_eq!(MetricId::TtftMs.tails(), [Percentile::P95, Percentile::P99]);
        assert_eq!(
            MetricId::DecodeTps.tails(),
            [Percentile::P5, Percentile::P1]
        );
        assert_eq!(
            MetricId::DecodeTps.percentile_label(Percentile::P1),
            "p1 (slowest 1%)"
        );
        assert_eq!(
            MetricId::E2eMs.percentile_label(Percentile::P99),
            "p99 (slowest 1%)"
        );
        assert_eq!(MetricId::E2eMs.percentile_label(Percentile::P50), "p50");
        assert_eq!(
            MetricId::EffectivePrefillTps.label_with_direction(),
            "Effective prefill (tok/s, higher is better)"
        );
        for w in Window::ALL {
            assert_eq!(Window::parse(w.as_str()), Some(w));
        }
    }

    #[test]
    fn every_metric_is_named_in_the_seed_manifest() {
        let manifest: serde_json::Value =
            serde_json::from_str(include_str!("../sample-data/workload-manifest.json")).unwrap();
        let listed = manifest["metrics"].as_array().unwrap();
        for m in MetricId::ALL {
            assert!(
                listed.iter().any(|v| v == m.manifest_name()),
                "{} not in the manifest's metrics",
                m.manifest_name()
            );
        }
    }
}
