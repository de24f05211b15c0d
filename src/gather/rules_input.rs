//! The rules' inputs read from a session: for every artifact its [`ArtifactFacts`] (from
//! `run.json`) and its [`ArtifactFigures`] (from the views of `queries/`).
//!
//! Every number here is a column of a view or a plain SQL aggregate over one; nothing is
//! recomputed in Rust, so `anvil compare` and `anvil check` show what `anvil sql` shows.

use std::collections::BTreeMap;

use crate::artifact::run::Outcome;
use crate::rules::{
    Artifact, ArtifactFacts, ArtifactFigures, CanaryResult, FunctionalResult, MetricId,
    ParseErrors, ReplicaThroughput, RequestValue, Restart, RestartSignal, ServerError, SpecDecode,
    Window,
};

use serde::Deserialize;

use crate::query::rows::{column_stats, decode};
use crate::query::{AnvilSession, QueryError};

const STATS_SQL: &str = "\
SELECT run_id, window, metric, n, mean, sd, ci95_low, ci95_high, min, p1, p5, p25, p50, p75, p90, \
       p95, p99, max, p1_ci_low, p1_ci_high, p5_ci_low, p5_ci_high, p25_ci_low, p25_ci_high, \
       p50_ci_low, p50_ci_high, p75_ci_low, p75_ci_high, p90_ci_low, p90_ci_high, p95_ci_low, \
       p95_ci_high, p99_ci_low, p99_ci_high \
FROM cell_stats ORDER BY run_id, window, metric_order";

const PER_REQUEST_SQL: &str = "\
SELECT run_id, request_index, ttft_ms, effective_prefill_tps, decode_tps, tpot_ms, itl_ms, e2e_ms \
FROM request_metrics WHERE outcome = 'ok' ORDER BY run_id, request_index";

const FIRST_WAVE_SQL: &str = "\
SELECT run_id, request_index FROM request_figures WHERE first_wave ORDER BY run_id, request_index";

/// Each run's first-wave makespan: its first send to the last first token of the first
/// wave, ms; NULL when a first-wave request failed or never streamed (its first token, and
/// so the wave's end, is unknown: leaving it out would shorten the makespan).
const MAKESPAN_SQL: &str = "\
SELECT run_id, \
CASE WHEN bool_and(outcome = 'ok' AND ttft_ms IS NOT NULL) \
THEN (MAX(t_sent_ns + ttft_ms * 1e6) - MIN(t_sent_ns)) / 1e6 END AS makespan_ms \
FROM request_figures WHERE first_wave GROUP BY run_id ORDER BY run_id";

const THROUGHPUT_SQL: &str = "\
SELECT run_id, window, scope, replica, output_tps, succeeded_without_usage FROM aggregate_throughput \
ORDER BY run_id, window, replica";

pub(crate) const GOODPUT_SQL: &str = "\
SELECT g.run_id, g.window, g.requests, g.attained, g.share_ci95_low, g.share_ci95_high, \
       g.goodput_rps, g.goodput_tps, g.slos, o.class_slos \
FROM goodput g \
LEFT JOIN (SELECT DISTINCT run_id, class_slos FROM run_slos) o ON o.run_id = g.run_id \
ORDER BY g.run_id, g.window";

/// A row of [`GOODPUT_SQL`] (a NULL count is 0).
#[derive(Deserialize)]
pub(crate) struct GoodputRow {
    pub(crate) run_id: String,
    pub(crate) window: String,
    #[serde(default)]
    pub(crate) requests: i64,
    #[serde(default)]
    pub(crate) attained: i64,
    pub(crate) share_ci95_low: Option<f64>,
    pub(crate) share_ci95_high: Option<f64>,
    pub(crate) goodput_rps: Option<f64>,
    pub(crate) goodput_tps: Option<f64>,
    /// The SLOs the run is judged by, as text.
    #[serde(default)]
    pub(crate) slos: Option<String>,
    /// They are its workload class's own list, not the default.
    #[serde(default)]
    pub(crate) class_slos: Option<bool>,
}

impl GoodputRow {
    /// The attained share with its interval (`None` without requests).
    pub(crate) fn share(&self) -> Option<crate::stats::Proportion> {
        crate::stats::Proportion::with_bounds(
            u64::try_from(self.attained).unwrap_or(0),
            u64::try_from(self.requests).unwrap_or(0),
            self.share_ci95_low,
            self.share_ci95_high,
        )
    }
}

const ENERGY_SQL: &str = "\
SELECT run_id, window, energy_j, bound_j, j_per_output_token, throttled, throttle_judged_by, \
       at_power_limit_share, power_limit_w, power_limit_min_w, too_coarse, partial \
FROM run_energy ORDER BY run_id, window";

/// A row of [`ENERGY_SQL`].
#[derive(Deserialize)]
struct EnergyRow {
    run_id: String,
    window: String,
    energy_j: f64,
    bound_j: Option<f64>,
    j_per_output_token: Option<f64>,
    #[serde(default)]
    throttled: Option<bool>,
    throttle_judged_by: Option<String>,
    at_power_limit_share: Option<f64>,
    power_limit_w: Option<f64>,
    power_limit_min_w: Option<f64>,
    #[serde(default)]
    too_coarse: Option<bool>,
    #[serde(default)]
    partial: Option<bool>,
}

const TRADEOFF_SQL: &str = "\
SELECT arm, cell_id, window, frontier_group, concurrency_per_replica, replicas, rate_per_s, gpus, \
       gpus_derived, runs, output_tps, output_tps_per_gpu, tpot_p50_ms, output_tps_per_user, \
       goodput_tps, goodput_tps_per_gpu, attained_share, on_frontier, dominated_by \
FROM tradeoff ORDER BY frontier_group, window, output_tps_per_gpu DESC NULLS LAST, arm, cell_id";

/// Every point of the `tradeoff` view: per arm, cell and window, throughput per GPU against
/// throughput per user, and whether it is on its group's Pareto frontier.
pub async fn read_tradeoff(
    session: &AnvilSession,
) -> Result<Vec<crate::rules::input::TradeoffPoint>, QueryError> {
    decode(&session.query(TRADEOFF_SQL).await?)
}

const PARSE_ERRORS_SQL: &str = "\
SELECT run_id, request_index, parse_errors, coalesce(first_parse_error, '') AS first_parse_error \
FROM request_timing WHERE kind = 'measured' AND parse_errors > 0 ORDER BY run_id, request_index";

const COMPLETION_SQL: &str = "SELECT run_id, completion_tokens_p50, completion_tokens_mean, completion_tokens_total FROM completion_lengths";

const FINISH_SQL: &str = "\
SELECT run_id, finish_reason, count(*) AS requests FROM request_metrics \
WHERE outcome = 'ok' AND finish_reason IS NOT NULL GROUP BY run_id, finish_reason";

const OUTCOME_SQL: &str = "\
SELECT run_id, outcome, count(*) AS requests, count(canary) AS with_canary FROM request_timing \
WHERE kind = 'measured' GROUP BY run_id, outcome";

/// A canary checked in tool arguments starts as missing: the tools check's arguments say
/// whether it is there (below).
const CANARY_SQL: &str = "\
SELECT run_id, request_index, \
       CASE WHEN canary_checked_in = 'tool_arguments' THEN false \
            ELSE own_canary IS NOT FALSE END AS own_canary, \
       coalesce(array_to_string(foreign_canaries, ','), '') AS foreign_list \
FROM request_metrics WHERE canary IS NOT NULL OR foreign_canary_count > 0 \
ORDER BY run_id, request_index";

const RESTARTS_SQL: &str = "\
SELECT run_id, replica, restarted, detectable, scraped, signal, first_start_time_s, last_start_time_s, \
       counters_reset, coalesce(counter_reset_example, '') AS counter_reset_example, \
       last_answer_s, failed_after, coalesce(failed_after_outcomes, '') AS failed_after_outcomes \
FROM restarts WHERE restarted OR NOT detectable ORDER BY run_id, replica";

/// Failed measured requests with their error text, and the error a stream carried when the
/// request's error does not already say it (an error event, then the server hung:
/// `timeout_idle`); a `stream_error` request's error quotes it, so it is said once.
const ERRORS_SQL: &str = "\
WITH streamed AS ( \
    SELECT run_id, request_index, first_value(stream_error ORDER BY seq) AS stream_error \
    FROM events WHERE stream_error IS NOT NULL GROUP BY run_id, request_index) \
SELECT t.run_id, t.request_index, t.outcome, \
       concat_ws('; ', t.error, \
                 CASE WHEN strpos(coalesce(t.error, ''), s.stream_error) = 0 \
                      THEN 'in the stream: ' || s.stream_error END) AS error \
FROM request_timing t \
LEFT JOIN streamed s ON s.run_id = t.run_id AND s.request_index = t.request_index \
WHERE t.kind = 'measured' AND t.outcome <> 'ok' ORDER BY t.run_id, t.request_index";

const FUNCTIONAL_SQL: &str = "\
SELECT run_id, request_index, \"check\", passed, coalesce(reason, '') AS reason, \
       coalesce(failure, '') AS failure, \
       coalesce(array_to_string(foreign_in_tool_arguments, ','), '') AS foreign_list, \
       canary IS NOT NULL AND strpos(coalesce(json_pointer(evidence, '/0/arguments'), ''), canary) > 0 \
           AS own_in_arguments \
FROM functional_results ORDER BY run_id, request_index";

const SPEC_SQL: &str = "\
SELECT run_id, replica, acceptance_rate, mean_accepted_length FROM spec_decode \
WHERE coalesce(drafts, 0) > 0 OR source = 'gauges' ORDER BY run_id, replica";

/// A row of [`STATS_SQL`] beside its statistics.
#[derive(Deserialize)]
struct StatsRow {
    run_id: String,
    window: String,
    metric: String,
}

/// A row of [`FIRST_WAVE_SQL`].
#[derive(Deserialize)]
struct FirstWaveRow {
    run_id: String,
    request_index: i64,
}

/// A row of [`MAKESPAN_SQL`].
#[derive(Deserialize)]
struct MakespanRow {
    run_id: String,
    makespan_ms: Option<f64>,
}

/// A row of [`PER_REQUEST_SQL`].
#[derive(Deserialize)]
struct PerRequestRow {
    run_id: String,
    request_index: i64,
    #[serde(flatten)]
    metrics: MetricColumns,
}

/// One request's value of each metric, the columns of [`MetricId::COLUMNS`].
#[derive(Deserialize)]
pub(crate) struct MetricColumns {
    ttft_ms: Option<f64>,
    effective_prefill_tps: Option<f64>,
    decode_tps: Option<f64>,
    tpot_ms: Option<f64>,
    itl_ms: Option<f64>,
    e2e_ms: Option<f64>,
}

impl MetricColumns {
    /// The values in [`MetricId::ALL`] order.
    pub(crate) fn values(&self) -> [Option<f64>; 6] {
        [
            self.ttft_ms,
            self.effective_prefill_tps,
            self.decode_tps,
            self.tpot_ms,
            self.itl_ms,
            self.e2e_ms,
        ]
    }
}

#[derive(Deserialize)]
struct ThroughputRow {
    run_id: String,
    window: String,
    scope: String,
    replica: Option<u32>,
    output_tps: Option<f64>,
    succeeded_without_usage: Option<i64>,
}

#[derive(Deserialize)]
struct ParseErrorRow {
    run_id: String,
    request_index: i64,
    parse_errors: Option<i64>,
    first_parse_error: String,
}

#[derive(Deserialize)]
struct CompletionRow {
    run_id: String,
    completion_tokens_p50: Option<f64>,
    completion_tokens_mean: Option<f64>,
    completion_tokens_total: Option<f64>,
}

#[derive(Deserialize)]
struct FinishRow {
    run_id: String,
    finish_reason: String,
    requests: Option<i64>,
}

#[derive(Deserialize)]
struct OutcomeRow {
    run_id: String,
    outcome: String,
    requests: Option<i64>,
    with_canary: Option<i64>,
}

#[derive(Deserialize)]
struct CanaryRow {
    run_id: String,
    request_index: i64,
    own_canary: Option<bool>,
    foreign_list: String,
}

#[derive(Deserialize)]
struct FunctionalRow {
    run_id: String,
    request_index: Option<i64>,
    check: Option<String>,
    passed: Option<bool>,
    reason: String,
    failure: String,
    foreign_list: String,
    own_in_arguments: Option<bool>,
}

#[derive(Deserialize)]
struct RestartRow {
    run_id: String,
    replica: u32,
    restarted: Option<bool>,
    detectable: Option<bool>,
    scraped: Option<bool>,
    signal: Option<String>,
    first_start_time_s: Option<f64>,
    last_start_time_s: Option<f64>,
    counters_reset: Option<i64>,
    counter_reset_example: String,
    last_answer_s: Option<f64>,
    failed_after: Option<i64>,
    failed_after_outcomes: String,
}

#[derive(Deserialize)]
struct ErrorRow {
    run_id: String,
    request_index: i64,
    outcome: String,
    error: Option<String>,
}

#[derive(Deserialize)]
struct SpecRow {
    run_id: String,
    replica: u32,
    acceptance_rate: Option<f64>,
    mean_accepted_length: Option<f64>,
}

/// A comma-separated list (`array_to_string`), empty items dropped.
fn list(text: &str) -> Vec<String> {
    text.split(',')
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Every artifact of the session with its facts and figures, in the session's order.
pub async fn read_artifacts(session: &AnvilSession) -> Result<Vec<Artifact>, QueryError> {
    let mut artifacts: Vec<Artifact> = session
        .artifacts()
        .iter()
        .map(|source| Artifact {
            facts: ArtifactFacts::from_run_json(&source.run),
            figures: ArtifactFigures::default(),
        })
        .collect();
    let index: BTreeMap<String, usize> = artifacts
        .iter()
        .enumerate()
        .map(|(i, a)| (a.facts.run_id.clone(), i))
        .collect();

    let r = session.query(STATS_SQL).await?;
    for (row, stats) in decode::<StatsRow>(&r)?.into_iter().zip(column_stats(&r)?) {
        let (Some(id), Some(window)) = (
            MetricId::from_column(&row.metric),
            Window::parse(&row.window),
        ) else {
            continue;
        };
        if let Some(f) = slot(&mut artifacts, &index, &row.run_id) {
            match window {
                Window::All => f.metrics.insert(id, stats),
                Window::AfterFirstWave => f.after_first_wave.metrics.insert(id, stats),
            };
        }
    }

    for row in decode::<FirstWaveRow>(&session.query(FIRST_WAVE_SQL).await?)? {
        if let Some(f) = slot(&mut artifacts, &index, &row.run_id) {
            f.first_wave.insert(row.request_index);
        }
    }

    for row in decode::<MakespanRow>(&session.query(MAKESPAN_SQL).await?)? {
        if let Some(f) = slot(&mut artifacts, &index, &row.run_id) {
            f.first_wave_makespan_ms = row.makespan_ms;
        }
    }

    for row in decode::<PerRequestRow>(&session.query(PER_REQUEST_SQL).await?)? {
        let Some(f) = slot(&mut artifacts, &index, &row.run_id) else {
            continue;
        };
        for (metric, value) in MetricId::ALL.into_iter().zip(row.metrics.values()) {
            if let Some(value) = value {
                f.per_request.entry(metric).or_default().push(RequestValue {
                    request_index: row.request_index,
                    value,
                });
            }
        }
    }

    for row in decode::<ThroughputRow>(&session.query(THROUGHPUT_SQL).await?)? {
        let Some(f) = slot(&mut artifacts, &index, &row.run_id) else {
            continue;
        };
        match (
            Window::parse(&row.window),
            row.scope.as_str(),
            row.replica,
            row.output_tps,
        ) {
            (Some(Window::AfterFirstWave), "run", _, tps) => {
                f.after_first_wave.aggregate_output_tps = tps;
            }
            (Some(Window::All), "run", _, tps) => {
                f.aggregate_output_tps = tps;
                f.succeeded_without_usage = count_u64(row.succeeded_without_usage);
            }
            (Some(Window::All), "replica", Some(replica), Some(output_tps)) => {
                f.aggregate_output_tps_per_replica.push(ReplicaThroughput {
                    replica,
                    output_tps,
                });
            }
            _ => {}
        }
    }

    if !session.slos().is_empty() {
        for row in decode::<GoodputRow>(&session.query(GOODPUT_SQL).await?)? {
            let (Some(f), Some(window)) = (
                slot(&mut artifacts, &index, &row.run_id),
                Window::parse(&row.window),
            ) else {
                continue;
            };
            let (requests, attained) =
                (count_u64(Some(row.requests)), count_u64(Some(row.attained)));
            let share = row.share();
            f.goodput.insert(
                window,
                crate::rules::input::GoodputFigures {
                    requests,
                    attained,
                    share,
                    goodput_rps: row.goodput_rps,
                    goodput_tps: row.goodput_tps,
                },
            );
        }
    }

    for row in decode::<EnergyRow>(&session.query(ENERGY_SQL).await?)? {
        let (Some(f), Some(window)) = (
            slot(&mut artifacts, &index, &row.run_id),
            Window::parse(&row.window),
        ) else {
            continue;
        };
        f.energy.insert(
            window,
            crate::rules::input::EnergyFigures {
                energy_j: row.energy_j,
                bound_j: row.bound_j,
                j_per_output_token: row.j_per_output_token,
                throttled: row.throttled,
                throttle_judged_by: row.throttle_judged_by,
                at_power_limit_share: row.at_power_limit_share,
                power_limit_w: row.power_limit_w,
                power_limit_min_w: row.power_limit_min_w,
                too_coarse: row.too_coarse.unwrap_or(true),
                partial: row.partial.unwrap_or(false),
            },
        );
    }

    for row in decode::<ParseErrorRow>(&session.query(PARSE_ERRORS_SQL).await?)? {
        if let Some(f) = slot(&mut artifacts, &index, &row.run_id) {
            f.parse_errors.push(ParseErrors {
                request_index: row.request_index,
                events: count_u64(row.parse_errors),
                first: row.first_parse_error,
            });
        }
    }

    for row in decode::<CompletionRow>(&session.query(COMPLETION_SQL).await?)? {
        if let Some(f) = slot(&mut artifacts, &index, &row.run_id) {
            f.completion_tokens_p50 = row.completion_tokens_p50;
            f.completion_tokens_mean = row.completion_tokens_mean;
            f.completion_tokens_total = row.completion_tokens_total;
        }
    }

    for row in decode::<FinishRow>(&session.query(FINISH_SQL).await?)? {
        if let Some(f) = slot(&mut artifacts, &index, &row.run_id) {
            f.finish_reasons
                .insert(row.finish_reason, count_u64(row.requests));
        }
    }

    for row in decode::<OutcomeRow>(&session.query(OUTCOME_SQL).await?)? {
        let Some(f) = slot(&mut artifacts, &index, &row.run_id) else {
            continue;
        };
        let n = count_u64(row.requests);
        let parsed = parse_outcome(&row.run_id, &row.outcome)?;
        f.requests.measured = f.requests.measured.saturating_add(n);
        if parsed == Outcome::Ok {
            f.requests.ok = f.requests.ok.saturating_add(n);
            f.requests.ok_with_canary = f
                .requests
                .ok_with_canary
                .saturating_add(count_u64(row.with_canary));
        } else {
            let slot = f.requests.failed.entry(parsed).or_default();
            *slot = slot.saturating_add(n);
        }
    }

    for row in decode::<CanaryRow>(&session.query(CANARY_SQL).await?)? {
        if let Some(f) = slot(&mut artifacts, &index, &row.run_id) {
            f.canaries.push(CanaryResult {
                request_index: row.request_index,
                own_present: row.own_canary == Some(true),
                foreign: list(&row.foreign_list),
                foreign_in_tool_arguments: Vec::new(),
            });
        }
    }

    // Functional checks; a tool call answers with arguments, not content, so there the
    // request's canary is looked for (and other canaries are found) in the arguments.
    for row in decode::<FunctionalRow>(&session.query(FUNCTIONAL_SQL).await?)? {
        let Some(f) = slot(&mut artifacts, &index, &row.run_id) else {
            continue;
        };
        let check = row.check.unwrap_or_default();
        f.functional.push(FunctionalResult {
            check: check.clone(),
            request_index: row.request_index,
            passed: row.passed == Some(true),
            reason: (!row.reason.is_empty()).then(|| row.reason.clone()),
            failure: crate::rules::FunctionalFailure::parse(&row.failure),
        });
        if check == "tools"
            && let Some(c) = f
                .canaries
                .iter_mut()
                .find(|c| Some(c.request_index) == row.request_index)
        {
            c.own_present |= row.own_in_arguments == Some(true);
            c.foreign_in_tool_arguments = list(&row.foreign_list);
        }
    }

    for row in decode::<RestartRow>(&session.query(RESTARTS_SQL).await?)? {
        let Some(f) = slot(&mut artifacts, &index, &row.run_id) else {
            continue;
        };
        if row.detectable == Some(false) {
            f.restart_undetectable
                .push((row.replica, row.scraped == Some(true)));
        }
        if row.restarted != Some(true) {
            continue;
        }
        let signal = match (
            row.signal.as_deref(),
            row.first_start_time_s,
            row.last_start_time_s,
        ) {
            (Some("process_start_time_seconds"), Some(before_s), Some(after_s)) => {
                RestartSignal::StartTime { before_s, after_s }
            }
            (Some("stopped_answering"), _, _) => RestartSignal::StoppedAnswering {
                last_answer_s: row.last_answer_s,
                failed: row.failed_after.map_or(0, |n| n.max(0) as u64),
                outcomes: row.failed_after_outcomes,
            },
            _ => RestartSignal::CounterReset {
                counters: row.counters_reset.map_or(0, |n| n.max(0) as u64),
                example: row.counter_reset_example,
            },
        };
        f.restarts.push(Restart {
            replica: row.replica,
            signal,
        });
    }

    for row in decode::<ErrorRow>(&session.query(ERRORS_SQL).await?)? {
        let parsed = parse_outcome(&row.run_id, &row.outcome)?;
        if let Some(f) = slot(&mut artifacts, &index, &row.run_id) {
            f.server_errors.push(ServerError {
                request_index: row.request_index,
                outcome: parsed,
                body: row.error.unwrap_or_default(),
            });
        }
    }

    for row in decode::<SpecRow>(&session.query(SPEC_SQL).await?)? {
        if let Some(f) = slot(&mut artifacts, &index, &row.run_id) {
            f.spec_decode.push(SpecDecode {
                replica: row.replica,
                acceptance_rate: row.acceptance_rate,
                mean_accepted_length: row.mean_accepted_length,
            });
        }
    }

    Ok(artifacts)
}

/// The figures of the artifact `run_id`, if the session holds it.
fn slot<'a>(
    artifacts: &'a mut [Artifact],
    index: &BTreeMap<String, usize>,
    run_id: &str,
) -> Option<&'a mut ArtifactFigures> {
    index
        .get(run_id)
        .and_then(|&i| artifacts.get_mut(i))
        .map(|a| &mut a.figures)
}

fn count_u64(count: Option<i64>) -> u64 {
    count.map_or(0, |c| u64::try_from(c).unwrap_or(0))
}

fn parse_outcome(run_id: &str, text: &str) -> Result<Outcome, QueryError> {
    Outcome::parse(text).ok_or_else(|| QueryError::Sql {
        message: format!("run {run_id}: unknown request outcome `{text}` in the requests table"),
        hint: None,
    })
}
