//! `anvil summary` as text: per artifact a heading, one aligned row per metric, the
//! aggregate output throughput and its warnings, client queueing and server timings. The
//! plain structs are filled by [`crate::gather::summary`].

use std::fmt::Write as _;

use serde::Serialize;

use super::format::{NA, fmt_num};
use super::input::{ClientQueue, ServerTimings};
use super::table::{Table, TextFormat};
use crate::stats::{STATISTICS, Stats};

/// The statistics of one metric of one artifact.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricRow {
    pub metric: String,
    pub unit: String,
    pub failed: i64,
    pub n_null: i64,
    /// n and the other statistics.
    pub stats: Stats,
}

/// Aggregate output throughput of one artifact.
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

/// One artifact's summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArtifactStats {
    pub run_id: String,
    pub arm: String,
    pub cell_id: String,
    pub status: String,
    pub dir: String,
    pub metrics: Vec<MetricRow>,
    pub throughput: Option<Throughput>,
    pub client_queue: Option<ClientQueue>,
    pub server_timings: Option<ServerTimings>,
}

/// The summary of every artifact, in run id order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub artifacts: Vec<ArtifactStats>,
}

/// Render the summary as text: per artifact a heading, one aligned row per metric, and the
/// aggregate output throughput.
pub fn render(summary: &Summary) -> String {
    let mut out = String::new();
    if summary.artifacts.is_empty() {
        out.push_str("no artifacts\n");
        return out;
    }
    for (k, a) in summary.artifacts.iter().enumerate() {
        if k > 0 {
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "run {}  arm {}  cell {}  ({})  {}",
            a.run_id, a.arm, a.cell_id, a.status, a.dir
        );
        let mut header = vec!["metric", "unit", "n", "failed", "null"];
        header.extend(&STATISTICS[1..]);
        let mut table = Table::new(&header).numbers_from(2);
        for m in &a.metrics {
            let mut row = vec![
                m.metric.clone(),
                m.unit.clone(),
                m.stats.n.to_string(),
                m.failed.to_string(),
                m.n_null.to_string(),
            ];
            row.extend(m.stats.values().iter().map(|v| fmt_num(*v)));
            table.row(row);
        }
        table.render(TextFormat::Text, &mut out);
        match &a.throughput {
            Some(t) => {
                let _ = writeln!(
                    out,
                    "  aggregate output: {} tok/s ({} completion tokens over {} s; {} of {} measured requests ok)",
                    fmt_num(t.output_tps),
                    t.completion_tokens
                        .map_or_else(|| NA.to_owned(), |v| v.to_string()),
                    fmt_num(t.span_s),
                    t.succeeded,
                    t.requests
                );
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
