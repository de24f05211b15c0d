//! The report's data read from a session: the rules' inputs ([`super::rules_input`]),
//! each run's facts, per-request timings for the Gantt and the context curve, the server's
//! queue gauges, client queueing, server timings, tokens per chunk and the replies shown as
//! evidence, as the plain structs of [`crate::report::view`].
//!
//! Every figure comes from a view of `queries/` (or a plain SQL aggregate over one).

use std::collections::BTreeMap;

use crate::query::rows::{column_f64, column_i64, column_str};
use crate::query::views::VIEWS;
use crate::query::{AnvilSession, QueryError};
use crate::report::input::{
    ClientQueue, OutputSnippet, QueueSample, RequestTiming, RunInfo, RunQueue, ServerTimings,
    TokensPerChunk,
};
use crate::rules::Artifact;

/// The Gantt bars and context-curve points (the `request_timeline` view).
const TIMING_SQL: &str = "SELECT * FROM request_timeline ORDER BY run_id, request_index";

/// The scheduler gauges on the same clock (the `server_queue_timeline` view).
const QUEUE_SQL: &str = "\
SELECT run_id, replica, runtime, t_s, waiting, running FROM server_queue_timeline \
ORDER BY run_id, replica, t_ns";

/// The queue gauges of each runtime, as the views read them.
const QUEUE_GAUGES_SQL: &str = "\
SELECT runtime, array_to_string(array_agg(metric ORDER BY role), ' and ') AS metrics \
FROM server_metric_names WHERE role IN ('queue_running', 'queue_waiting') \
GROUP BY runtime ORDER BY runtime";

/// How many scrapes each run has, and of how many metrics.
const SCRAPES_SQL: &str = "\
SELECT run_id, count(DISTINCT t_ns) AS scrapes, count(DISTINCT metric) AS metrics \
FROM scrapes GROUP BY run_id ORDER BY run_id";

/// Usage completion tokens per content chunk (the `tokens_per_chunk` view).
const TOKENS_PER_CHUNK_SQL: &str =
    "SELECT run_id, replica, tokens_per_chunk FROM tokens_per_chunk ORDER BY run_id, replica";

/// Replies that are evidence against a request: its own canary missing, or another
/// request's canary present. A tool call answers in its arguments, not in text: those are
/// judged by `functional_results` and shown as functional evidence instead.
const SNIPPET_SQL: &str = "\
SELECT m.run_id, m.request_index, t.content \
FROM request_metrics m \
JOIN request_timing t ON t.run_id = m.run_id AND t.request_index = m.request_index \
JOIN requests q ON q.run_id = m.run_id AND q.request_index = m.request_index \
WHERE m.canary IS NOT NULL AND (m.foreign_canary_count > 0 OR NOT m.canary_ok) \
  AND coalesce(q.\"check\", '') <> 'tools' \
ORDER BY m.run_id, m.request_index";

/// Characters of a reply shown as evidence.
const SNIPPET_CHARS: usize = 400;

/// Evidence snippets shown per run at most.
const SNIPPETS_PER_RUN: usize = 5;

/// What the report is built from, read from one session.
pub struct Gathered {
    pub artifacts: Vec<Artifact>,
    pub runs: Vec<RunInfo>,
    pub requests: Vec<RequestTiming>,
    pub queues: Vec<RunQueue>,
    pub known_queue_gauges: String,
    pub client_queues: Vec<ClientQueue>,
    pub server_timings: Vec<ServerTimings>,
    pub tokens_per_chunk: Vec<TokensPerChunk>,
    pub snippets: Vec<OutputSnippet>,
}

/// Read the report's data from `session`.
pub async fn gather(session: &AnvilSession) -> Result<Gathered, QueryError> {
    let artifacts = super::rules_input::read_artifacts(session).await?;
    let runs = session
        .artifacts()
        .iter()
        .map(|source| RunInfo {
            run_id: source.run.run_id.clone(),
            started_utc: source.run.started_utc.clone(),
            ended_utc: source.run.ended_utc.clone(),
            servers: source
                .run
                .topology
                .endpoints
                .iter()
                .map(|e| {
                    let info: Vec<String> = e
                        .server_info
                        .iter()
                        .map(|(k, v)| match v {
                            serde_json::Value::String(s) => format!("{k} {s}"),
                            other => format!("{k} {other}"),
                        })
                        .collect();
                    format!("replica {}: {} ({})", e.replica, e.model, info.join(", "))
                })
                .collect(),
        })
        .collect();

    let r = session.query(TIMING_SQL).await?;
    let ids = column_str(&r, "run_id")?;
    let replica = column_i64(&r, "replica")?;
    let index = column_i64(&r, "request_index")?;
    let [start, first, end, ttft, tpot, prompt, prefill] = [
        "start_s",
        "first_token_s",
        "end_s",
        "ttft_ms",
        "tpot_ms",
        "prompt_tokens",
        "effective_prefill_tps",
    ]
    .map(|c| column_f64(&r, c));
    let (start, first, end, ttft, tpot, prompt, prefill) =
        (start?, first?, end?, ttft?, tpot?, prompt?, prefill?);
    let requests = (0..ids.len())
        .filter_map(|i| {
            Some(RequestTiming {
                run_id: ids[i].clone(),
                replica: u32::try_from(replica[i]?).ok()?,
                request_index: index[i]?,
                start_s: start[i]?,
                first_token_s: first[i],
                end_s: end[i]?,
                ttft_ms: ttft[i],
                tpot_ms: tpot[i],
                prompt_tokens: prompt[i],
                effective_prefill_tps: prefill[i],
            })
        })
        .collect();

    let r = session.query(SCRAPES_SQL).await?;
    let ids = column_str(&r, "run_id")?;
    let scrapes = column_i64(&r, "scrapes")?;
    let metrics = column_i64(&r, "metrics")?;
    let mut by_run: BTreeMap<String, RunQueue> = (0..ids.len())
        .map(|i| {
            (
                ids[i].clone(),
                RunQueue {
                    run_id: ids[i].clone(),
                    scrapes: scrapes[i].unwrap_or(0),
                    metrics: metrics[i].unwrap_or(0),
                    runtime: None,
                    samples: Vec::new(),
                },
            )
        })
        .collect();
    let r = session.query(QUEUE_SQL).await?;
    let ids = column_str(&r, "run_id")?;
    let replica = column_i64(&r, "replica")?;
    let runtime = column_str(&r, "runtime")?;
    let t = column_f64(&r, "t_s")?;
    let waiting = column_f64(&r, "waiting")?;
    let running = column_f64(&r, "running")?;
    for i in 0..ids.len() {
        let (Some(replica), Some(t_s), Some(q)) = (
            replica[i].and_then(|r| u32::try_from(r).ok()),
            t[i],
            by_run.get_mut(&ids[i]),
        ) else {
            continue;
        };
        q.runtime.get_or_insert_with(|| runtime[i].clone());
        q.samples.push(QueueSample {
            replica,
            t_s,
            waiting: waiting[i].unwrap_or(0.0),
            running: running[i].unwrap_or(0.0),
        });
    }
    let queues = by_run.into_values().collect();
    let r = session.query(QUEUE_GAUGES_SQL).await?;
    let known_queue_gauges = column_str(&r, "runtime")?
        .into_iter()
        .zip(column_str(&r, "metrics")?)
        .map(|(runtime, metrics)| format!("{runtime} {metrics}"))
        .collect::<Vec<_>>()
        .join(", ");

    let client_queues = super::summary::client_queues(session).await?;
    let server_timings = super::summary::server_timings(session).await?;

    let r = session.query(TOKENS_PER_CHUNK_SQL).await?;
    let ids = column_str(&r, "run_id")?;
    let replica = column_i64(&r, "replica")?;
    let tpc = column_f64(&r, "tokens_per_chunk")?;
    let tokens_per_chunk = (0..ids.len())
        .filter_map(|i| {
            Some(TokensPerChunk {
                run_id: ids[i].clone(),
                replica: u32::try_from(replica[i]?).ok()?,
                tokens_per_chunk: tpc[i]?,
            })
        })
        .collect();

    let r = session.query(SNIPPET_SQL).await?;
    let ids = column_str(&r, "run_id")?;
    let index = column_i64(&r, "request_index")?;
    let content = column_str(&r, "content")?;
    let mut per_run: BTreeMap<&str, usize> = BTreeMap::new();
    let mut snippets = Vec::new();
    for i in 0..ids.len() {
        let shown = per_run.entry(ids[i].as_str()).or_default();
        if *shown >= SNIPPETS_PER_RUN {
            continue;
        }
        let Some(request_index) = index[i] else {
            continue;
        };
        *shown += 1;
        let mut text: String = content[i].chars().take(SNIPPET_CHARS).collect();
        if content[i].chars().count() > SNIPPET_CHARS {
            text.push('…');
        }
        snippets.push(OutputSnippet {
            run_id: ids[i].clone(),
            request_index,
            text,
        });
    }

    Ok(Gathered {
        artifacts,
        runs,
        requests,
        queues,
        known_queue_gauges,
        client_queues,
        server_timings,
        tokens_per_chunk,
        snippets,
    })
}

/// Metric definitions `(view, text)` from the SQL files' header comments.
pub fn definitions() -> Vec<(String, String)> {
    VIEWS
        .iter()
        .map(|v| (v.name.to_owned(), v.definition()))
        .collect()
}
