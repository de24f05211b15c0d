//! The report's data read from a session: the rules' inputs ([`super::rules_input`]),
//! each run's facts, per-request timings for the Gantt and the context curve, the server's
//! queue gauges, client queueing, server timings, tokens per chunk and the replies shown as
//! evidence, as the plain structs of [`crate::report::view`].
//!
//! Every figure comes from a view of `queries/` (or a plain SQL aggregate over one).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::query::rows::decode;
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
SELECT metric_dialect AS runtime, array_to_string(array_agg(metric ORDER BY role), ' and ') AS metrics \
FROM server_metric_names WHERE role IN ('queue_running', 'queue_waiting') \
GROUP BY metric_dialect ORDER BY metric_dialect";

/// How many scrapes each run has, and of how many metrics.
const SCRAPES_SQL: &str = "\
SELECT run_id, count(DISTINCT t_ns) AS scrapes, count(DISTINCT metric) AS metrics \
FROM scrapes GROUP BY run_id ORDER BY run_id";

/// Usage completion tokens per content chunk (the `tokens_per_chunk` view).
const TOKENS_PER_CHUNK_SQL: &str =
    "SELECT run_id, replica, tokens_per_chunk FROM tokens_per_chunk ORDER BY run_id, replica";

/// Acceptance per draft position (the `spec_decode_positions` view).
const POSITIONS_SQL: &str = "\
SELECT run_id, replica, position, acceptance_rate FROM spec_decode_positions \
WHERE position IS NOT NULL AND acceptance_rate IS NOT NULL \
ORDER BY run_id, replica, position";

#[derive(Deserialize)]
struct PositionRow {
    run_id: String,
    replica: u32,
    position: i64,
    acceptance_rate: f64,
}

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

/// A row of [`TIMING_SQL`].
#[derive(Deserialize)]
struct TimingRow {
    run_id: String,
    replica: u32,
    request_index: i64,
    start_s: Option<f64>,
    first_token_s: Option<f64>,
    end_s: Option<f64>,
    ttft_ms: Option<f64>,
    tpot_ms: Option<f64>,
    prompt_tokens: Option<f64>,
    effective_prefill_tps: Option<f64>,
    first_wave: Option<bool>,
}

/// A row of [`SCRAPES_SQL`].
#[derive(Deserialize)]
struct ScrapeCount {
    run_id: String,
    scrapes: i64,
    metrics: i64,
}

/// A row of [`QUEUE_SQL`].
#[derive(Deserialize)]
struct QueueRow {
    run_id: String,
    replica: u32,
    runtime: Option<String>,
    t_s: Option<f64>,
    waiting: Option<f64>,
    running: Option<f64>,
}

/// A row of [`QUEUE_GAUGES_SQL`].
#[derive(Deserialize)]
struct GaugeNames {
    runtime: String,
    metrics: String,
}

/// A row of [`TOKENS_PER_CHUNK_SQL`].
#[derive(Deserialize)]
struct ChunkRow {
    run_id: String,
    replica: u32,
    tokens_per_chunk: Option<f64>,
}

/// A row of [`SNIPPET_SQL`].
#[derive(Deserialize)]
struct SnippetRow {
    run_id: String,
    request_index: i64,
    content: Option<String>,
}

/// What the report is built from, read from one session.
pub struct Gathered {
    pub artifacts: Vec<Artifact>,
    pub runs: Vec<RunInfo>,
    pub requests: Vec<RequestTiming>,
    pub queues: Vec<RunQueue>,
    pub known_queue_gauges: String,
    pub client_queues: Vec<ClientQueue>,
    pub prefill_waits: Vec<crate::report::input::PrefillWait>,
    pub server_timings: Vec<ServerTimings>,
    pub tokens_per_chunk: Vec<TokensPerChunk>,
    pub snippets: Vec<OutputSnippet>,
    pub spec_positions: Vec<crate::report::sections::curves::SpecPosition>,
    pub cache: crate::report::input::CacheFigures,
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
            cell_id: source.run.cell_id.clone(),
            owners: source
                .run
                .topology
                .endpoints
                .iter()
                .filter_map(|e| e.server_info.get("models.owned_by"))
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
        })
        .collect();

    let requests = decode::<TimingRow>(&session.query(TIMING_SQL).await?)?
        .into_iter()
        .filter_map(|r| {
            Some(RequestTiming {
                run_id: r.run_id,
                replica: r.replica,
                request_index: r.request_index,
                start_s: r.start_s?,
                first_token_s: r.first_token_s,
                end_s: r.end_s?,
                ttft_ms: r.ttft_ms,
                tpot_ms: r.tpot_ms,
                prompt_tokens: r.prompt_tokens,
                effective_prefill_tps: r.effective_prefill_tps,
                first_wave: r.first_wave.unwrap_or(false),
            })
        })
        .collect();

    let mut by_run: BTreeMap<String, RunQueue> =
        decode::<ScrapeCount>(&session.query(SCRAPES_SQL).await?)?
            .into_iter()
            .map(|r| {
                let queue = RunQueue {
                    run_id: r.run_id.clone(),
                    scrapes: r.scrapes,
                    metrics: r.metrics,
                    runtime: None,
                    samples: Vec::new(),
                };
                (r.run_id, queue)
            })
            .collect();
    for r in decode::<QueueRow>(&session.query(QUEUE_SQL).await?)? {
        let (Some(t_s), Some(q)) = (r.t_s, by_run.get_mut(&r.run_id)) else {
            continue;
        };
        if let Some(runtime) = r.runtime {
            q.runtime.get_or_insert(runtime);
        }
        q.samples.push(QueueSample {
            replica: r.replica,
            t_s,
            waiting: r.waiting.unwrap_or(0.0),
            running: r.running.unwrap_or(0.0),
        });
    }
    let queues = by_run.into_values().collect();
    let known_queue_gauges = decode::<GaugeNames>(&session.query(QUEUE_GAUGES_SQL).await?)?
        .into_iter()
        .map(|g| format!("{} {}", g.runtime, g.metrics))
        .collect::<Vec<_>>()
        .join(", ");

    let client_queues = super::summary::client_queues(session).await?;
    let prefill_waits = super::summary::prefill_waits(session).await?;
    let server_timings = super::summary::server_timings(session).await?;

    let tokens_per_chunk = decode::<ChunkRow>(&session.query(TOKENS_PER_CHUNK_SQL).await?)?
        .into_iter()
        .filter_map(|r| {
            Some(TokensPerChunk {
                run_id: r.run_id,
                replica: r.replica,
                tokens_per_chunk: r.tokens_per_chunk?,
            })
        })
        .collect();

    let mut per_run: BTreeMap<String, usize> = BTreeMap::new();
    let mut snippets = Vec::new();
    for r in decode::<SnippetRow>(&session.query(SNIPPET_SQL).await?)? {
        let shown = per_run.entry(r.run_id.clone()).or_default();
        if *shown >= SNIPPETS_PER_RUN {
            continue;
        }
        *shown += 1;
        let content = r.content.unwrap_or_default();
        let mut text: String = content.chars().take(SNIPPET_CHARS).collect();
        if content.chars().count() > SNIPPET_CHARS {
            text.push('…');
        }
        snippets.push(OutputSnippet {
            run_id: r.run_id,
            request_index: r.request_index,
            text,
        });
    }

    let spec_positions = decode::<PositionRow>(&session.query(POSITIONS_SQL).await?)?
        .into_iter()
        .filter_map(|r| {
            Some(crate::report::sections::curves::SpecPosition {
                run_id: r.run_id,
                replica: r.replica,
                position: u32::try_from(r.position).ok()?,
                acceptance_rate: r.acceptance_rate,
            })
        })
        .collect();

    let cache = super::summary::cache_figures(session).await?;
    Ok(Gathered {
        cache,
        spec_positions,
        artifacts,
        runs,
        requests,
        queues,
        known_queue_gauges,
        client_queues,
        prefill_waits,
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
