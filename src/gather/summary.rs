//! `anvil summary`'s data: the statistics of every artifact read from the `cell_stats` and
//! `aggregate_throughput` views (never recomputed here), and each artifact's client-side
//! queueing and server-reported timings, as the plain structs of [`crate::report::summary`].

use std::collections::BTreeMap;

use serde::Deserialize;

use super::rules_input::MetricColumns;
use crate::metric::{Direction, MetricId, Window};
use crate::query::rows::{column_stats, column_str, decode};
use crate::query::{AnvilSession, QueryError};
use crate::report::input::{ClientQueue, ServerTimings};
use crate::report::summary::{
    ArtifactStats, FirstWave, FirstWaveTail, Goodput, MetricRow, Summary, Throughput, WindowStats,
};

/// The flat summary rows (`--format csv|json`): cell_stats beside the aggregate output
/// throughput of the same run and window, one row per artifact × window × metric.
pub const SUMMARY_SQL: &str = "\
SELECT s.run_id, s.arm, s.cell_id, s.window, s.metric, s.unit, s.better, s.requests, s.n, s.failed, \
       s.n_null, s.mean, s.sd, s.ci95_low, s.ci95_high, s.min, s.p1, s.p5, s.p25, s.p50, s.p75, \
       s.p90, s.p95, s.p99, s.max, s.p1_ci_low, s.p1_ci_high, s.p5_ci_low, s.p5_ci_high, \
       s.p25_ci_low, s.p25_ci_high, s.p50_ci_low, s.p50_ci_high, s.p75_ci_low, s.p75_ci_high, \
       s.p90_ci_low, s.p90_ci_high, s.p95_ci_low, s.p95_ci_high, s.p99_ci_low, s.p99_ci_high, \
       a.output_tps AS aggregate_output_tps, g.slos, g.attained, g.attained_share, \
       g.share_ci95_low, g.share_ci95_high, g.goodput_rps, g.goodput_tps \
FROM cell_stats s \
LEFT JOIN aggregate_throughput a \
    ON a.run_id = s.run_id AND a.window = s.window AND a.scope = 'run' \
LEFT JOIN goodput g ON g.run_id = s.run_id AND g.window = s.window \
ORDER BY s.run_id, s.window, s.metric_order";

use super::rules_input::{GOODPUT_SQL, GoodputRow};

const THROUGHPUT_SQL: &str = "\
SELECT t.run_id, t.window, t.output_tps, t.completion_tokens, t.span_s, t.requests, t.succeeded, \
       t.succeeded_without_usage, \
       (SELECT count(*) FROM request_timing r \
        WHERE r.run_id = t.run_id AND r.kind = 'measured' AND r.parse_errors > 0) AS parse_error_requests \
FROM aggregate_throughput t WHERE t.scope = 'run' ORDER BY t.run_id, t.window";

/// Each run's first wave as the statistics leave it out, and how the run was released.
const FIRST_WAVE_SQL: &str = "\
SELECT f.run_id, count(*) FILTER (WHERE f.first_wave) AS first_wave, count(*) AS measured, \
       min(f.request_index) FILTER (WHERE f.first_wave) AS first_index, \
       max(f.request_index) FILTER (WHERE f.first_wave) AS last_index, \
       min(ru.schedule) AS schedule, min(ru.ramp_s) AS ramp_s, \
       min(ru.concurrency_per_replica) AS concurrency_per_replica, min(ru.replicas) AS replicas \
FROM request_figures f JOIN runs ru ON ru.run_id = f.run_id \
GROUP BY f.run_id ORDER BY f.run_id";

/// Every successful measured request's figures with its first-wave flag: which request
/// holds a tail value.
const TAIL_HOLDERS_SQL: &str = "\
SELECT run_id, first_wave, ttft_ms, effective_prefill_tps, decode_tps, tpot_ms, itl_ms, e2e_ms \
FROM request_figures WHERE outcome = 'ok' ORDER BY run_id, request_index";

const RUNS_SQL: &str = "SELECT run_id, arm, cell_id, status, dir, shards, clock_uncertainty_ms \
FROM runs ORDER BY run_id";

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

/// What requests waited in the server before their first token, per run and window (the
/// `prefill_wait` view), in run id order.
pub async fn prefill_waits(
    session: &AnvilSession,
) -> Result<Vec<crate::report::input::PrefillWait>, QueryError> {
    decode(
        &session
            .query(
                "SELECT run_id, window, requests, waited, wait_max_ms FROM prefill_wait \
                 ORDER BY run_id, window",
            )
            .await?,
    )
}

/// Every artifact's server-reported timings (the `server_timing_summary` view), in run id
/// order; artifacts whose server reported none are absent.
pub async fn server_timings(session: &AnvilSession) -> Result<Vec<ServerTimings>, QueryError> {
    decode(&session.query(SERVER_TIMINGS_SQL).await?)
}

/// Sessions by turn, the prefix cache and the KV pool of the runs of declared workload
/// classes (sessions, trace replays, prefix groups): the other runs' caches are salted
/// away by design and not shown.
pub async fn cache_figures(
    session: &AnvilSession,
) -> Result<crate::report::input::CacheFigures, QueryError> {
    let declared: Vec<String> = session
        .artifacts()
        .iter()
        .filter(|a| a.run.workload.is_declared_class())
        .map(|a| format!("'{}'", a.run.run_id.replace('\'', "''")))
        .collect();
    let mut out = crate::report::input::CacheFigures::default();
    if declared.is_empty() {
        return Ok(out);
    }
    let runs = declared.join(", ");
    let sessions = session
        .artifacts()
        .iter()
        .any(|a| a.run.workload.sessions.is_some());
    if sessions {
        out.turns = decode(
            &session
                .query(&format!(
                    "SELECT run_id, turn, sessions, ok, ttft_p50_ms, ttft_p90_ms, cached_share, \
                     history_tokens_mean, contaminated FROM turn_stats \
                     WHERE run_id IN ({runs}) ORDER BY run_id, turn"
                ))
                .await?,
        )?;
        if !session.slos().is_empty() {
            out.sessions = decode(
                &session
                    .query(&format!(
                        "SELECT run_id, sessions, attained, attained_share, share_ci95_low, \
                         share_ci95_high, goodput_sps FROM session_goodput \
                         WHERE run_id IN ({runs}) AND window = 'after_first_wave' \
                         ORDER BY run_id"
                    ))
                    .await?,
            )?;
        }
    }
    out.replicas = decode(
        &session
            .query(&format!(
                "SELECT run_id, replica, server_source, server_hit_rate, client_cached_share, \
                 disagreement, kv_usage_mean, kv_usage_max, CAST(preemptions AS DOUBLE) AS \
                 preemptions FROM prefix_cache WHERE run_id IN ({runs}) ORDER BY run_id, replica"
            ))
            .await?,
    )?;
    #[derive(Deserialize)]
    struct Kv {
        run_id: String,
        replica: i64,
        t_s: f64,
        kv_usage: f64,
    }
    out.kv = decode::<Kv>(
        &session
            .query(&format!(
                "SELECT run_id, replica, t_s, kv_usage FROM kv_cache_timeline \
                 WHERE run_id IN ({runs}) AND phase = 'during' AND kv_usage IS NOT NULL \
                 AND t_s IS NOT NULL ORDER BY run_id, replica, t_s"
            ))
            .await?,
    )?
    .into_iter()
    .map(|k| (k.run_id, k.replica as u32, k.t_s, k.kv_usage))
    .collect();
    Ok(out)
}

/// A row of [`RUNS_SQL`].
#[derive(Deserialize)]
struct RunRow {
    run_id: String,
    arm: String,
    cell_id: String,
    status: String,
    dir: String,
    shards: Option<i64>,
    clock_uncertainty_ms: Option<f64>,
}

/// The columns of [`SUMMARY_SQL`] beside the statistics.
#[derive(Deserialize)]
struct StatsRow {
    run_id: String,
    window: String,
    metric: String,
    #[serde(default)]
    requests: i64,
    #[serde(default)]
    failed: i64,
    #[serde(default)]
    n_null: i64,
}

/// A row of [`FIRST_WAVE_SQL`].
#[derive(Deserialize)]
struct FirstWaveRow {
    run_id: String,
    #[serde(default)]
    first_wave: i64,
    #[serde(default)]
    measured: i64,
    first_index: Option<i64>,
    last_index: Option<i64>,
    schedule: Option<String>,
    ramp_s: Option<f64>,
    concurrency_per_replica: Option<i64>,
    replicas: Option<i64>,
}

/// A row of [`TAIL_HOLDERS_SQL`].
#[derive(Deserialize)]
struct HolderRow {
    run_id: String,
    first_wave: Option<bool>,
    #[serde(flatten)]
    metrics: MetricColumns,
}

/// A row of [`THROUGHPUT_SQL`] (a NULL count is 0).
#[derive(Deserialize)]
struct ThroughputRow {
    run_id: String,
    window: String,
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
            shards: r.shards.zip(r.clock_uncertainty_ms),
            first_wave: None,
            windows: Window::ALL
                .iter()
                .map(|w| WindowStats {
                    window: *w,
                    metrics: Vec::new(),
                    throughput: None,
                    goodput: None,
                })
                .collect(),
            first_wave_tails: Vec::new(),
            client_queue: None,
            server_timings: None,
            gpus: None,
        })
        .collect();
    let index: BTreeMap<String, usize> = artifacts
        .iter()
        .enumerate()
        .map(|(i, a)| (a.run_id.clone(), i))
        .collect();
    let window_of = |a: &mut ArtifactStats, w: Window| -> usize {
        a.windows.iter().position(|x| x.window == w).unwrap_or(0)
    };

    for (r, stats) in decode::<StatsRow>(&stats)?
        .into_iter()
        .zip(column_stats(&stats)?)
    {
        let (Some(&at), Some(window), Some(metric)) = (
            index.get(&r.run_id),
            Window::parse(&r.window),
            MetricId::from_column(&r.metric),
        ) else {
            continue;
        };
        let a = &mut artifacts[at];
        let w = window_of(a, window);
        a.windows[w].metrics.push(MetricRow {
            metric,
            requests: r.requests,
            failed: r.failed,
            n_null: r.n_null,
            stats,
        });
    }
    for t in decode::<ThroughputRow>(&session.query(THROUGHPUT_SQL).await?)? {
        let (Some(&at), Some(window)) = (index.get(&t.run_id), Window::parse(&t.window)) else {
            continue;
        };
        let a = &mut artifacts[at];
        let w = window_of(a, window);
        a.windows[w].throughput = Some(Throughput {
            output_tps: t.output_tps,
            completion_tokens: t.completion_tokens,
            span_s: t.span_s,
            requests: t.requests,
            succeeded: t.succeeded,
            succeeded_without_usage: t.succeeded_without_usage,
            parse_error_requests: t.parse_error_requests,
        });
    }
    if !session.slos().is_empty() {
        for g in decode::<GoodputRow>(&session.query(GOODPUT_SQL).await?)? {
            let (Some(&at), Some(window)) = (index.get(&g.run_id), Window::parse(&g.window)) else {
                continue;
            };
            let share = g.share();
            let a = &mut artifacts[at];
            let w = window_of(a, window);
            a.windows[w].goodput = Some(Goodput {
                share,
                goodput_rps: g.goodput_rps,
                goodput_tps: g.goodput_tps,
                class_slos: g.slos.filter(|_| g.class_slos == Some(true)),
            });
        }
    }
    for r in decode::<FirstWaveRow>(&session.query(FIRST_WAVE_SQL).await?)? {
        if let Some(&at) = index.get(&r.run_id) {
            artifacts[at].first_wave = Some(FirstWave {
                requests: r.first_wave,
                measured: r.measured,
                first_index: r.first_index,
                last_index: r.last_index,
                schedule: r.schedule.unwrap_or_default(),
                ramp_s: r.ramp_s,
                concurrency_per_replica: r.concurrency_per_replica.unwrap_or(0),
                replicas: r.replicas.unwrap_or(0),
            });
        }
    }
    // Which tails of the `all` window a first-wave request holds: its value is the
    // percentile, and no request after the first wave has that same value.
    let mut holders: BTreeMap<String, Vec<HolderRow>> = BTreeMap::new();
    for row in decode::<HolderRow>(&session.query(TAIL_HOLDERS_SQL).await?)? {
        holders.entry(row.run_id.clone()).or_default().push(row);
    }
    for a in &mut artifacts {
        let Some(rows) = holders.get(&a.run_id) else {
            continue;
        };
        let all = a.windows.iter().find(|w| w.window == Window::All);
        let after = a
            .windows
            .iter()
            .find(|w| w.window == Window::AfterFirstWave);
        let (Some(all), Some(after)) = (all, after) else {
            continue;
        };
        let mut tails = Vec::new();
        for (m, metric) in MetricId::ALL.into_iter().enumerate() {
            let find = |w: &WindowStats| {
                w.metrics
                    .iter()
                    .find(|r| r.metric == metric)
                    .map(|r| r.stats)
            };
            let (Some(s_all), Some(s_after)) = (find(all), find(after)) else {
                continue;
            };
            for q in metric.tails() {
                let Some(value) = s_all.percentile(q) else {
                    continue;
                };
                let held = |first_wave: bool| {
                    rows.iter().any(|r| {
                        r.first_wave.unwrap_or(false) == first_wave
                            && r.metrics.values()[m] == Some(value)
                    })
                };
                // Only when leaving the first wave out improves the tail: the wave set it.
                let improves =
                    s_after
                        .percentile(q)
                        .is_some_and(|after| match metric.direction() {
                            Direction::LowerIsBetter => after < value,
                            Direction::HigherIsBetter => after > value,
                        });
                if held(true) && !held(false) && improves {
                    tails.push(FirstWaveTail {
                        metric,
                        percentile: q,
                        all: value,
                        after_first_wave: s_after.percentile(q),
                    });
                }
            }
        }
        a.first_wave_tails = tails;
    }
    for q in client_queues(session).await? {
        if let Some(&at) = index.get(&q.run_id) {
            artifacts[at].client_queue = Some(q);
        }
    }
    let energy = session
        .query(
            "SELECT run_id, gpus, method, energy_j, bound_j, j_per_output_token, mean_power_w, \
             idle_power_w, power_limit_w, at_power_limit_share, throttled, throttle_judged_by, \
             too_coarse, partial FROM run_energy WHERE window = 'all'",
        )
        .await?;
    for (run_id, g) in column_str(&energy, "run_id")?
        .into_iter()
        .zip(decode::<crate::report::summary::GpuSummary>(&energy)?)
    {
        if let Some(&at) = index.get(&run_id) {
            artifacts[at].gpus = Some(g);
        }
    }
    for t in server_timings(session).await? {
        if let Some(&at) = index.get(&t.run_id) {
            artifacts[at].server_timings = Some(t);
        }
    }
    let slos = session.slos();
    Ok(Summary {
        slos: (!slos.is_empty()).then(|| format!("{} (from {})", slos.text(), slos.source)),
        artifacts,
    })
}
