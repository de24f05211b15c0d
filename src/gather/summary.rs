//! `anvil summary`'s data: the statistics of every artifact read from the `cell_stats` and
//! `aggregate_throughput` views (never recomputed here), and each artifact's client-side
//! queueing and server-reported timings, as the plain structs of [`crate::report::summary`].

use serde::Deserialize;

use crate::query::rows::{column_stats, decode};
use crate::query::{AnvilSession, QueryError};
use crate::report::input::{ClientQueue, ServerTimings};
use crate::report::summary::{ArtifactStats, MetricRow, Summary, Throughput};

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
    decode(&session.query(CLIENT_QUEUE_SQL).await?)
}

/// Every artifact's server-reported timings (the `server_timing_summary` view), in run id
/// order; artifacts whose server reported none are absent.
pub async fn server_timings(session: &AnvilSession) -> Result<Vec<ServerTimings>, QueryError> {
    decode(&session.query(SERVER_TIMINGS_SQL).await?)
}

/// A row of [`RUNS_SQL`].
#[derive(Deserialize)]
struct RunRow {
    run_id: String,
    arm: String,
    cell_id: String,
    status: String,
    dir: String,
}

/// The columns of [`SUMMARY_SQL`] beside the statistics.
#[derive(Deserialize)]
struct StatsRow {
    run_id: String,
    metric: String,
    unit: String,
    #[serde(default)]
    failed: i64,
    #[serde(default)]
    n_null: i64,
}

/// A row of [`THROUGHPUT_SQL`] (a NULL count is 0).
#[derive(Deserialize)]
struct ThroughputRow {
    run_id: String,
    output_tps: Option<f64>,
    completion_tokens: Option<i64>,
    span_s: Option<f64>,
    #[serde(default)]
    requests: i64,
    #[serde(default)]
    succeeded: i64,
    #[serde(default)]
    succeeded_without_usage: i64,
    #[serde(default)]
    parse_error_requests: i64,
}

/// Read the summary from the session's views.
pub async fn read(session: &AnvilSession) -> Result<Summary, QueryError> {
    let stats = session.query(SUMMARY_SQL).await?;
    let mut artifacts: Vec<ArtifactStats> = decode::<RunRow>(&session.query(RUNS_SQL).await?)?
        .into_iter()
        .map(|r| ArtifactStats {
            run_id: r.run_id,
            arm: r.arm,
            cell_id: r.cell_id,
            status: r.status,
            dir: r.dir,
            metrics: Vec::new(),
            throughput: None,
            client_queue: None,
            server_timings: None,
        })
        .collect();
    let index = |run_id: &str| artifacts.iter().position(|a| a.run_id == run_id);

    let rows: Vec<_> = decode::<StatsRow>(&stats)?
        .into_iter()
        .zip(column_stats(&stats)?)
        .map(|(r, stats)| {
            let row = MetricRow {
                metric: r.metric,
                unit: r.unit,
                failed: r.failed,
                n_null: r.n_null,
                stats,
            };
            (index(&r.run_id), row)
        })
        .collect();
    let throughputs: Vec<_> = decode::<ThroughputRow>(&session.query(THROUGHPUT_SQL).await?)?
        .into_iter()
        .map(|t| {
            let throughput = Throughput {
                output_tps: t.output_tps,
                completion_tokens: t.completion_tokens,
                span_s: t.span_s,
                requests: t.requests,
                succeeded: t.succeeded,
                succeeded_without_usage: t.succeeded_without_usage,
                parse_error_requests: t.parse_error_requests,
            };
            (index(&t.run_id), throughput)
        })
        .collect();
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
    Ok(Summary { artifacts })
}
