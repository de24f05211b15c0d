//! `anvil summary`'s data: the statistics of every artifact read from the `cell_stats` and
//! `aggregate_throughput` views (never recomputed here), and each artifact's client-side
//! queueing and server-reported timings, as the plain structs of [`crate::report::summary`].

use crate::query::rows::{column_f64, column_i64, column_stats, column_str};
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

/// Read the summary from the session's views.
pub async fn read(session: &AnvilSession) -> Result<Summary, QueryError> {
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
    let failed = column_i64(&stats, "failed")?;
    let n_null = column_i64(&stats, "n_null")?;
    let values = column_stats(&stats)?;
    let mut rows = Vec::with_capacity(ids.len());
    for i in 0..ids.len() {
        let row = MetricRow {
            metric: metric[i].clone(),
            unit: unit[i].clone(),
            failed: failed[i].unwrap_or(0),
            n_null: n_null[i].unwrap_or(0),
            stats: values[i],
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
    Ok(Summary { artifacts })
}
