//! `anvil summary`: the statistics table of every artifact, read from the `cell_stats` and
//! `aggregate_throughput` views (never recomputed here), as a plain view struct and a pure
//! text renderer.

use std::fmt::Write as _;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type};
use datafusion::error::DataFusionError;
use serde::Serialize;

use super::{AnvilSession, QueryError, StatementResult};
use crate::report::view::{ClientQueue, ServerTimings};

/// The flat summary rows (`--format csv|json`): cell_stats beside the run's aggregate output
/// throughput, one row per artifact × metric.
pub const SUMMARY_SQL: &str = "\
SELECT s.run_id, s.arm, s.cell_id, s.metric, s.unit, s.n, s.failed, s.n_null, s.mean, s.sd, \
       s.ci95_low, s.ci95_high, s.min, s.p25, s.p50, s.p75, s.p90, s.p95, s.p99, s.max, \
       a.output_tps AS aggregate_output_tps \
FROM cell_stats s \
LEFT JOIN aggregate_throughput a ON a.run_id = s.run_id AND a.scope = 'run' \
ORDER BY s.run_id, s.metric_order";

const THROUGHPUT_SQL: &str = "\
SELECT t.run_id, t.output_tps, t.completion_tokens, t.span_s, t.requests, t.succeeded, \
       t.succeeded_without_usage, \
       (SELECT count(*) FROM request_timing r \
        WHERE r.run_id = t.run_id AND r.kind = 'measured' AND r.parse_errors > 0) AS parse_error_requests \
FROM aggregate_throughput t WHERE t.scope = 'run' ORDER BY t.run_id";

const RUNS_SQL: &str = "SELECT run_id, arm, cell_id, status, dir FROM runs ORDER BY run_id";

const CLIENT_QUEUE_SQL: &str = "\
SELECT run_id, schedule, rate_per_s, requests, queued_over_1ms, p50_ms, p95_ms, max_ms \
FROM client_queueing ORDER BY run_id";

const SERVER_TIMINGS_SQL: &str = "\
SELECT run_id, requests, prefill_p50_ms, queue_p50_ms, queue_max_ms, generation_diff_p50_ms, \
       generation_diff_max_abs_ms, token_mismatches \
FROM server_timing_summary ORDER BY run_id";

/// Every artifact's client-side queueing (the `client_queueing` view), in run id order.
pub async fn client_queues(session: &AnvilSession) -> Result<Vec<ClientQueue>, QueryError> {
    let r = session.query(CLIENT_QUEUE_SQL).await?;
    let ids = column_str(&r, "run_id")?;
    let schedule = column_str(&r, "schedule")?;
    let rate = column_f64(&r, "rate_per_s")?;
    let sent = column_i64(&r, "requests")?;
    let over = column_i64(&r, "queued_over_1ms")?;
    let [p50, p95, max] = ["p50_ms", "p95_ms", "max_ms"].map(|c| column_f64(&r, c));
    let (p50, p95, max) = (p50?, p95?, max?);
    Ok((0..ids.len())
        .map(|i| ClientQueue {
            run_id: ids[i].clone(),
            schedule: schedule[i].clone(),
            rate_per_s: rate[i],
            requests: sent[i].unwrap_or(0),
            queued_over_1ms: over[i].unwrap_or(0),
            p50_ms: p50[i],
            p95_ms: p95[i],
            max_ms: max[i],
        })
        .collect())
}

/// Every artifact's server-reported timings (the `server_timing_summary` view), in run id
/// order; artifacts whose server reported none are absent.
pub async fn server_timings(session: &AnvilSession) -> Result<Vec<ServerTimings>, QueryError> {
    let r = session.query(SERVER_TIMINGS_SQL).await?;
    let ids = column_str(&r, "run_id")?;
    let timed = column_i64(&r, "requests")?;
    let mismatches = column_i64(&r, "token_mismatches")?;
    let [prefill, queue_p50, queue_max, gen_p50, gen_max] = [
        "prefill_p50_ms",
        "queue_p50_ms",
        "queue_max_ms",
        "generation_diff_p50_ms",
        "generation_diff_max_abs_ms",
    ]
    .map(|c| column_f64(&r, c));
    let (prefill, queue_p50, queue_max, gen_p50, gen_max) =
        (prefill?, queue_p50?, queue_max?, gen_p50?, gen_max?);
    Ok((0..ids.len())
        .map(|i| ServerTimings {
            run_id: ids[i].clone(),
            requests: timed[i].unwrap_or(0),
            prefill_p50_ms: prefill[i],
            queue_p50_ms: queue_p50[i],
            queue_max_ms: queue_max[i],
            generation_diff_p50_ms: gen_p50[i],
            generation_diff_max_abs_ms: gen_max[i],
            token_mismatches: mismatches[i].unwrap_or(0),
        })
        .collect())
}

/// The statistics of one metric of one artifact.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricRow {
    pub metric: String,
    pub unit: String,
    pub n: i64,
    pub failed: i64,
    pub n_null: i64,
    /// mean, sd, ci95_low, ci95_high, min, p25, p50, p75, p90, p95, p99, max.
    pub values: [Option<f64>; 12],
}

/// Names of [`MetricRow::values`], in order.
pub const VALUE_COLUMNS: [&str; 12] = [
    "mean",
    "sd",
    "ci95_low",
    "ci95_high",
    "min",
    "p25",
    "p50",
    "p75",
    "p90",
    "p95",
    "p99",
    "max",
];

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

pub(crate) fn column_f64(r: &StatementResult, name: &str) -> Result<Vec<Option<f64>>, QueryError> {
    let mut out = Vec::with_capacity(r.num_rows());
    for b in &r.batches {
        let col = b.column_by_name(name).ok_or_else(|| missing(name))?;
        let col = cast(col, &DataType::Float64).map_err(DataFusionError::from)?;
        out.extend(col.as_primitive::<Float64Type>().iter());
    }
    Ok(out)
}

pub(crate) fn column_i64(r: &StatementResult, name: &str) -> Result<Vec<Option<i64>>, QueryError> {
    let mut out = Vec::with_capacity(r.num_rows());
    for b in &r.batches {
        let col = b.column_by_name(name).ok_or_else(|| missing(name))?;
        let col = cast(col, &DataType::Int64).map_err(DataFusionError::from)?;
        out.extend(col.as_primitive::<Int64Type>().iter());
    }
    Ok(out)
}

pub(crate) fn column_str(r: &StatementResult, name: &str) -> Result<Vec<String>, QueryError> {
    let mut out = Vec::with_capacity(r.num_rows());
    for b in &r.batches {
        let col = b.column_by_name(name).ok_or_else(|| missing(name))?;
        let col = cast(col, &DataType::Utf8).map_err(DataFusionError::from)?;
        let col = col.as_string::<i32>();
        out.extend((0..col.len()).map(|i| {
            if col.is_null(i) {
                String::new()
            } else {
                col.value(i).to_owned()
            }
        }));
    }
    Ok(out)
}

fn missing(name: &str) -> QueryError {
    QueryError::Sql {
        message: format!("summary: column `{name}` missing from the query result"),
        hint: None,
    }
}

impl Summary {
    /// Read the summary from the session's views.
    pub async fn read(session: &AnvilSession) -> Result<Self, QueryError> {
        let stats = session.query(SUMMARY_SQL).await?;
        let throughput = session.query(THROUGHPUT_SQL).await?;
        let runs = session.query(RUNS_SQL).await?;

        let run_ids = column_str(&runs, "run_id")?;
        let mut artifacts: Vec<ArtifactStats> = run_ids
            .iter()
            .zip(column_str(&runs, "arm")?)
            .zip(column_str(&runs, "cell_id")?)
            .zip(column_str(&runs, "status")?)
            .zip(column_str(&runs, "dir")?)
            .map(|((((run_id, arm), cell_id), status), dir)| ArtifactStats {
                run_id: run_id.clone(),
                arm,
                cell_id,
                status,
                dir,
                metrics: Vec::new(),
                throughput: None,
                client_queue: None,
                server_timings: None,
            })
            .collect();
        let index = |run_id: &str| artifacts.iter().position(|a| a.run_id == run_id);

        let ids = column_str(&stats, "run_id")?;
        let metric = column_str(&stats, "metric")?;
        let unit = column_str(&stats, "unit")?;
        let n = column_i64(&stats, "n")?;
        let failed = column_i64(&stats, "failed")?;
        let n_null = column_i64(&stats, "n_null")?;
        let values = VALUE_COLUMNS
            .iter()
            .map(|c| column_f64(&stats, c))
            .collect::<Result<Vec<_>, _>>()?;
        let mut rows = Vec::with_capacity(ids.len());
        for i in 0..ids.len() {
            let row = MetricRow {
                metric: metric[i].clone(),
                unit: unit[i].clone(),
                n: n[i].unwrap_or(0),
                failed: failed[i].unwrap_or(0),
                n_null: n_null[i].unwrap_or(0),
                values: std::array::from_fn(|k| values[k][i]),
            };
            rows.push((index(&ids[i]), row));
        }

        let t_ids = column_str(&throughput, "run_id")?;
        let tps = column_f64(&throughput, "output_tps")?;
        let tokens = column_i64(&throughput, "completion_tokens")?;
        let span = column_f64(&throughput, "span_s")?;
        let requests = column_i64(&throughput, "requests")?;
        let succeeded = column_i64(&throughput, "succeeded")?;
        let without_usage = column_i64(&throughput, "succeeded_without_usage")?;
        let parse_errors = column_i64(&throughput, "parse_error_requests")?;
        let mut throughputs = Vec::with_capacity(t_ids.len());
        for i in 0..t_ids.len() {
            throughputs.push((
                index(&t_ids[i]),
                Throughput {
                    output_tps: tps[i],
                    completion_tokens: tokens[i],
                    span_s: span[i],
                    requests: requests[i].unwrap_or(0),
                    succeeded: succeeded[i].unwrap_or(0),
                    succeeded_without_usage: without_usage[i].unwrap_or(0),
                    parse_error_requests: parse_errors[i].unwrap_or(0),
                },
            ));
        }
        for (at, row) in rows {
            if let Some(at) = at {
                artifacts[at].metrics.push(row);
            }
        }
        for (at, t) in throughputs {
            if let Some(at) = at {
                artifacts[at].throughput = Some(t);
            }
        }
        for q in client_queues(session).await? {
            if let Some(a) = artifacts.iter_mut().find(|a| a.run_id == q.run_id) {
                a.client_queue = Some(q);
            }
        }
        for t in server_timings(session).await? {
            if let Some(a) = artifacts.iter_mut().find(|a| a.run_id == t.run_id) {
                a.server_timings = Some(t);
            }
        }
        Ok(Self { artifacts })
    }
}

/// A number as the summary shows it: three decimals, `-` for none.
fn number(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.3}"))
}

/// Render the summary as text: per artifact a heading, one aligned row per metric, and the
/// aggregate output throughput.
pub fn render_table(summary: &Summary) -> String {
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
        let mut header: Vec<String> = ["metric", "unit", "n", "failed", "null"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        header.extend(VALUE_COLUMNS.iter().map(|s| (*s).to_owned()));
        let mut table = vec![header];
        for m in &a.metrics {
            let mut row = vec![
                m.metric.clone(),
                m.unit.clone(),
                m.n.to_string(),
                m.failed.to_string(),
                m.n_null.to_string(),
            ];
            row.extend(m.values.iter().map(|v| number(*v)));
            table.push(row);
        }
        let widths: Vec<usize> = (0..table[0].len())
            .map(|c| {
                table
                    .iter()
                    .map(|r| r[c].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for row in &table {
            let cells: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(c, cell)| {
                    if c < 2 {
                        format!("{cell:<w$}", w = widths[c])
                    } else {
                        format!("{cell:>w$}", w = widths[c])
                    }
                })
                .collect();
            let _ = writeln!(out, "  {}", cells.join("  ").trim_end());
        }
        match &a.throughput {
            Some(t) => {
                let _ = writeln!(
                    out,
                    "  aggregate output: {} tok/s ({} completion tokens over {} s; {} of {} measured requests ok)",
                    number(t.output_tps),
                    t.completion_tokens
                        .map_or_else(|| "-".to_owned(), |v| v.to_string()),
                    number(t.span_s),
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
                let _ = writeln!(out, "  aggregate output: - (no measured requests)");
            }
        }
        if let Some(q) = &a.client_queue {
            let _ = writeln!(
                out,
                "  client queueing (sent - intended): p50 {} ms, p95 {} ms, max {} ms; {} of {} sent requests waited over 1 ms",
                number(q.p50_ms),
                number(q.p95_ms),
                number(q.max_ms),
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
                number(t.prefill_p50_ms),
                number(t.queue_p50_ms),
                number(t.queue_max_ms),
                number(t.generation_diff_p50_ms),
                number(t.generation_diff_max_abs_ms),
                t.token_mismatches
            );
        }
    }
    out
}
