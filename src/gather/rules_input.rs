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
};

use crate::query::rows::{column_f64, column_i64, column_stats, column_str};
use crate::query::{AnvilSession, QueryError};

const STATS_SQL: &str = "\
SELECT run_id, metric, n, mean, sd, ci95_low, ci95_high, min, p25, p50, p75, p90, p95, p99, max \
FROM cell_stats ORDER BY run_id, metric_order";

const PER_REQUEST_SQL: &str = "\
SELECT run_id, request_index, ttft_ms, effective_prefill_tps, decode_tps, tpot_ms, itl_ms, e2e_ms \
FROM request_metrics WHERE outcome = 'ok' ORDER BY run_id, request_index";

const THROUGHPUT_SQL: &str = "\
SELECT run_id, scope, replica, output_tps, succeeded_without_usage FROM aggregate_throughput \
ORDER BY run_id, replica";

const PARSE_ERRORS_SQL: &str = "\
SELECT run_id, request_index, parse_errors, coalesce(first_parse_error, '') AS first_parse_error \
FROM request_timing WHERE kind = 'measured' AND parse_errors > 0 ORDER BY run_id, request_index";

const COMPLETION_SQL: &str = "SELECT run_id, completion_tokens_p50 FROM completion_lengths";

const FINISH_SQL: &str = "\
SELECT run_id, finish_reason, count(*) AS requests FROM request_metrics \
WHERE outcome = 'ok' AND finish_reason IS NOT NULL GROUP BY run_id, finish_reason";

const OUTCOME_SQL: &str = "\
SELECT run_id, outcome, count(*) AS requests FROM request_timing \
WHERE kind = 'measured' GROUP BY run_id, outcome";

const CANARY_SQL: &str = "\
SELECT run_id, request_index, own_canary IS NOT FALSE AS own_canary, \
       coalesce(array_to_string(foreign_canaries, ','), '') AS foreign_list \
FROM request_metrics WHERE canary IS NOT NULL OR foreign_canary_count > 0 \
ORDER BY run_id, request_index";

const RESTARTS_SQL: &str = "\
SELECT run_id, replica, restarted, detectable, scraped, signal, first_start_time_s, last_start_time_s, \
       counters_reset, coalesce(counter_reset_example, '') AS counter_reset_example \
FROM restarts WHERE restarted OR NOT detectable ORDER BY run_id, replica";

/// Failed measured requests with their error text, and the error a stream carried when the
/// request ended otherwise (an error event, then the server hung: `timeout_idle`).
const ERRORS_SQL: &str = "\
WITH streamed AS ( \
    SELECT run_id, request_index, first_value(stream_error ORDER BY seq) AS stream_error \
    FROM events WHERE stream_error IS NOT NULL GROUP BY run_id, request_index) \
SELECT t.run_id, t.request_index, t.outcome, \
       concat_ws('; ', t.error, CASE WHEN s.stream_error IS DISTINCT FROM t.error \
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
    let ids = column_str(&r, "run_id")?;
    let metric = column_str(&r, "metric")?;
    let stats = column_stats(&r)?;
    for i in 0..ids.len() {
        let Some(id) = MetricId::from_column(&metric[i]) else {
            continue;
        };
        if let Some(f) = slot(&mut artifacts, &index, &ids[i]) {
            f.metrics.insert(id, stats[i]);
        }
    }

    let r = session.query(PER_REQUEST_SQL).await?;
    let ids = column_str(&r, "run_id")?;
    let request = column_i64(&r, "request_index")?;
    for metric in MetricId::ALL {
        let values = column_f64(&r, metric.as_str())?;
        for i in 0..ids.len() {
            if let (Some(request_index), Some(value), Some(f)) =
                (request[i], values[i], slot(&mut artifacts, &index, &ids[i]))
            {
                f.per_request.entry(metric).or_default().push(RequestValue {
                    request_index,
                    value,
                });
            }
        }
    }

    let r = session.query(THROUGHPUT_SQL).await?;
    let ids = column_str(&r, "run_id")?;
    let scope = column_str(&r, "scope")?;
    let replica = column_i64(&r, "replica")?;
    let tps = column_f64(&r, "output_tps")?;
    let without_usage = column_i64(&r, "succeeded_without_usage")?;
    for i in 0..ids.len() {
        let Some(f) = slot(&mut artifacts, &index, &ids[i]) else {
            continue;
        };
        match (scope[i].as_str(), replica[i], tps[i]) {
            ("run", _, tps) => {
                f.aggregate_output_tps = tps;
                f.succeeded_without_usage = count_u64(without_usage[i]);
            }
            ("replica", Some(replica), Some(output_tps)) => {
                if let Ok(replica) = u32::try_from(replica) {
                    f.aggregate_output_tps_per_replica.push(ReplicaThroughput {
                        replica,
                        output_tps,
                    });
                }
            }
            _ => {}
        }
    }

    let r = session.query(PARSE_ERRORS_SQL).await?;
    let ids = column_str(&r, "run_id")?;
    let request = column_i64(&r, "request_index")?;
    let events = column_i64(&r, "parse_errors")?;
    let first = column_str(&r, "first_parse_error")?;
    for i in 0..ids.len() {
        let (Some(request_index), Some(f)) = (request[i], slot(&mut artifacts, &index, &ids[i]))
        else {
            continue;
        };
        f.parse_errors.push(ParseErrors {
            request_index,
            events: count_u64(events[i]),
            first: first[i].clone(),
        });
    }

    let r = session.query(COMPLETION_SQL).await?;
    let ids = column_str(&r, "run_id")?;
    let p50 = column_f64(&r, "completion_tokens_p50")?;
    for i in 0..ids.len() {
        if let Some(f) = slot(&mut artifacts, &index, &ids[i]) {
            f.completion_tokens_p50 = p50[i];
        }
    }

    let r = session.query(FINISH_SQL).await?;
    let ids = column_str(&r, "run_id")?;
    let reason = column_str(&r, "finish_reason")?;
    let count = column_i64(&r, "requests")?;
    for i in 0..ids.len() {
        if let Some(f) = slot(&mut artifacts, &index, &ids[i]) {
            f.finish_reasons
                .insert(reason[i].clone(), count_u64(count[i]));
        }
    }

    let r = session.query(OUTCOME_SQL).await?;
    let ids = column_str(&r, "run_id")?;
    let outcome = column_str(&r, "outcome")?;
    let count = column_i64(&r, "requests")?;
    for i in 0..ids.len() {
        let Some(f) = slot(&mut artifacts, &index, &ids[i]) else {
            continue;
        };
        let n = count_u64(count[i]);
        let parsed = parse_outcome(&ids[i], &outcome[i])?;
        f.requests.measured = f.requests.measured.saturating_add(n);
        if parsed == Outcome::Ok {
            f.requests.ok = f.requests.ok.saturating_add(n);
        } else {
            let slot = f.requests.failed.entry(parsed).or_default();
            *slot = slot.saturating_add(n);
        }
    }

    let r = session.query(CANARY_SQL).await?;
    let ids = column_str(&r, "run_id")?;
    let request = column_i64(&r, "request_index")?;
    let own = column_i64(&r, "own_canary")?;
    let foreign = column_str(&r, "foreign_list")?;
    for i in 0..ids.len() {
        let (Some(request_index), Some(f)) = (request[i], slot(&mut artifacts, &index, &ids[i]))
        else {
            continue;
        };
        f.canaries.push(CanaryResult {
            request_index,
            own_present: own[i] == Some(1),
            foreign: foreign[i]
                .split(',')
                .filter(|c| !c.is_empty())
                .map(str::to_owned)
                .collect(),
            foreign_in_tool_arguments: Vec::new(),
        });
    }

    // Functional checks; a tool call answers with arguments, not content, so there the
    // request's canary is looked for (and other canaries are found) in the arguments.
    let r = session.query(FUNCTIONAL_SQL).await?;
    let ids = column_str(&r, "run_id")?;
    let request = column_i64(&r, "request_index")?;
    let check = column_str(&r, "check")?;
    let passed = column_i64(&r, "passed")?;
    let reason = column_str(&r, "reason")?;
    let failure = column_str(&r, "failure")?;
    let foreign = column_str(&r, "foreign_list")?;
    let own_in_arguments = column_i64(&r, "own_in_arguments")?;
    for i in 0..ids.len() {
        let Some(f) = slot(&mut artifacts, &index, &ids[i]) else {
            continue;
        };
        f.functional.push(FunctionalResult {
            check: check[i].clone(),
            request_index: request[i],
            passed: passed[i] == Some(1),
            reason: (!reason[i].is_empty()).then(|| reason[i].clone()),
            failure: crate::rules::FunctionalFailure::parse(&failure[i]),
        });
        if check[i] == "tools"
            && let Some(c) = f
                .canaries
                .iter_mut()
                .find(|c| Some(c.request_index) == request[i])
        {
            c.own_present |= own_in_arguments[i] == Some(1);
            c.foreign_in_tool_arguments = foreign[i]
                .split(',')
                .filter(|c| !c.is_empty())
                .map(str::to_owned)
                .collect();
        }
    }

    let r = session.query(RESTARTS_SQL).await?;
    let ids = column_str(&r, "run_id")?;
    let replica = column_i64(&r, "replica")?;
    let restarted = column_i64(&r, "restarted")?;
    let detectable = column_i64(&r, "detectable")?;
    let scraped = column_i64(&r, "scraped")?;
    let signal = column_str(&r, "signal")?;
    let before = column_f64(&r, "first_start_time_s")?;
    let after = column_f64(&r, "last_start_time_s")?;
    let reset = column_i64(&r, "counters_reset")?;
    let example = column_str(&r, "counter_reset_example")?;
    for i in 0..ids.len() {
        let (Some(replica), Some(f)) = (
            replica[i].and_then(|r| u32::try_from(r).ok()),
            slot(&mut artifacts, &index, &ids[i]),
        ) else {
            continue;
        };
        if detectable[i] == Some(0) {
            f.restart_undetectable
                .push((replica, scraped[i] == Some(1)));
        }
        if restarted[i] != Some(1) {
            continue;
        }
        let signal = match (signal[i].as_str(), before[i], after[i]) {
            ("process_start_time_seconds", Some(before_s), Some(after_s)) => {
                RestartSignal::StartTime { before_s, after_s }
            }
            _ => RestartSignal::CounterReset {
                counters: reset[i].map_or(0, |n| n.max(0) as u64),
                example: example[i].clone(),
            },
        };
        f.restarts.push(Restart { replica, signal });
    }

    let r = session.query(ERRORS_SQL).await?;
    let ids = column_str(&r, "run_id")?;
    let request = column_i64(&r, "request_index")?;
    let outcome = column_str(&r, "outcome")?;
    let error = column_str(&r, "error")?;
    for i in 0..ids.len() {
        let parsed = parse_outcome(&ids[i], &outcome[i])?;
        if let (Some(request_index), Some(f)) = (request[i], slot(&mut artifacts, &index, &ids[i]))
        {
            f.server_errors.push(ServerError {
                request_index,
                outcome: parsed,
                body: error[i].clone(),
            });
        }
    }

    let r = session.query(SPEC_SQL).await?;
    let ids = column_str(&r, "run_id")?;
    let replica = column_i64(&r, "replica")?;
    let rate = column_f64(&r, "acceptance_rate")?;
    let length = column_f64(&r, "mean_accepted_length")?;
    for i in 0..ids.len() {
        if let (Some(replica), Some(f)) = (replica[i], slot(&mut artifacts, &index, &ids[i]))
            && let Ok(replica) = u32::try_from(replica)
        {
            f.spec_decode.push(SpecDecode {
                replica,
                acceptance_rate: rate[i],
                mean_accepted_length: length[i],
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
