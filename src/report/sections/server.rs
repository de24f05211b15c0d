//! The server section: what each run's server said of its queue and timings, and restarts.

use super::*;
use crate::report::charts::{LineSeriesData, TimeSeriesChart};
use crate::report::format::{fmt_num, fmt_unit};
use crate::report::input::*;
use crate::report::view::*;

/// Section 9: per run with scrapes a queue chart (or why there is none), the client-side
/// queueing of every run, the server-reported timings where a server gave them, and what
/// waited as the client observed it beside what the gauges said.
pub fn server_view(input: &ReportInput<'_>) -> ServerView {
    let (plan, artifacts, runs_info, queues) =
        (input.plan, input.artifacts, input.runs, input.queues);
    let (known_queue_gauges, client, timings, prefill) = (
        input.known_queue_gauges,
        input.client_queues,
        input.server_timings,
        input.prefill_waits,
    );
    let arm = |run_id: &str| {
        arm_of(artifacts, run_id)
            .unwrap_or("unknown arm")
            .to_owned()
    };
    let cell = |run_id: &str| {
        runs_info
            .iter()
            .find(|r| r.run_id == run_id)
            .map(|r| super::decision::cell_label(&r.cell_id))
            .unwrap_or_default()
    };
    let mut ordered: Vec<&RunQueue> = queues.iter().collect();
    ordered.sort_by_key(|q| {
        (
            crate::rules::stage::plan_rank(plan, &arm(&q.run_id)),
            cell(&q.run_id),
            q.run_id.clone(),
        )
    });
    let max = |q: &RunQueue, pick: fn(&QueueSample) -> f64| {
        q.samples
            .iter()
            .map(pick)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
    };
    let queue: Vec<QueueRowView> = ordered
        .iter()
        .map(|q| {
            let waiting = max(q, |s| s.waiting);
            QueueRowView {
                arm: arm(&q.run_id),
                cell: cell(&q.run_id),
                run_id: q.run_id.clone(),
                gauges: q.runtime.clone().unwrap_or_else(|| "none known".to_owned()),
                scrapes: q.scrapes.to_string(),
                max_running: fmt_num(max(q, |s| s.running)),
                max_waiting: fmt_num(waiting),
                waiting_class: match waiting {
                    Some(w) if w > 0.0 => "missing",
                    Some(_) => "pass",
                    None => "",
                }
                .to_owned(),
            }
        })
        .collect();
    let runs = ordered
        .iter()
        .filter(|q| q.samples.is_empty() || max(q, |s| s.waiting).is_some_and(|w| w > 0.0))
        .map(|q| {
            let arm = arm(&q.run_id);
            if q.samples.is_empty() {
                return ServerRunView {
                    note: Some(format!(
                        "{arm}, {}: {} scrapes of {} metrics, none of them a known queue gauge ({known_queue_gauges}): this runtime exports no queue metric anvil knows.",
                        cell(&q.run_id), q.scrapes, q.metrics
                    )),
                    chart: None,
                    arm,
                    run_id: q.run_id.clone(),
                };
            }
            let mut replicas: Vec<u32> = q.samples.iter().map(|s| s.replica).collect();
            replicas.sort_unstable();
            replicas.dedup();
            let mut series = Vec::new();
            for (k, replica) in replicas.iter().enumerate() {
                let of = |pick: fn(&QueueSample) -> f64| -> Vec<(f64, f64)> {
                    q.samples
                        .iter()
                        .filter(|s| s.replica == *replica)
                        .map(|s| (s.t_s, pick(s)))
                        .collect()
                };
                series.push(LineSeriesData {
                    name: format!("replica {replica}: waiting"),
                    colour: 1 + 2 * k,
                    points: of(|s| s.waiting),
                });
                series.push(LineSeriesData {
                    name: format!("replica {replica}: running"),
                    colour: 2 * k,
                    points: of(|s| s.running),
                });
            }
            ServerRunView {
                chart: Some(TimeSeriesChart {
                    title: format!("Server queue: {arm}, {}", cell(&q.run_id)),
                    y_label: format!(
                        "requests waiting / running ({} gauges)",
                        q.runtime.as_deref().unwrap_or("server")
                    ),
                    series,
                }),
                note: None,
                arm,
                run_id: q.run_id.clone(),
            }
        })
        .collect();
    let client_queue = client
        .iter()
        .map(|c| ClientQueueView {
            arm: arm(&c.run_id),
            run_id: c.run_id.clone(),
            schedule: match c.rate_per_s {
                Some(r) => format!("{}, {r} requests per second", c.schedule),
                None => c.schedule.clone(),
            },
            requests: c.requests.to_string(),
            p50: fmt_unit(c.p50_ms, "ms"),
            p95: fmt_unit(c.p95_ms, "ms"),
            max: fmt_unit(c.max_ms, "ms"),
            queued: c.queued_over_1ms.to_string(),
        })
        .collect();
    let timings = timings
        .iter()
        .map(|t| ServerTimingsView {
            arm: arm(&t.run_id),
            run_id: t.run_id.clone(),
            requests: t.requests.to_string(),
            prefill_p50: fmt_unit(t.prefill_p50_ms, "ms"),
            queue_p50: fmt_unit(t.queue_p50_ms, "ms"),
            queue_max: fmt_unit(t.queue_max_ms, "ms"),
            generation_diff_p50: fmt_unit(t.generation_diff_p50_ms, "ms"),
            generation_diff_max: fmt_unit(t.generation_diff_max_abs_ms, "ms"),
            token_mismatches: t.token_mismatches.to_string(),
        })
        .collect();
    let gauge_waited = queue
        .iter()
        .filter(|q| q.waiting_class == "missing")
        .count();
    let all: Vec<&PrefillWait> = prefill.iter().filter(|p| p.window == "all").collect();
    let runs_waited = all.iter().filter(|p| p.waited > 0).count();
    let requests_waited: i64 = all.iter().map(|p| p.waited).sum();
    let first_wave_max = prefill
        .iter()
        .filter(|p| p.window == "first_wave")
        .filter_map(|p| p.wait_max_ms)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    let gauges = if gauge_waited == 0 {
        format!(
            "the servers' waiting gauges read 0 in all {} runs scraped (they count only requests not yet admitted to a batch)",
            queue.len()
        )
    } else {
        format!(
            "the servers' waiting gauges counted waiting requests in {gauge_waited} of {} runs scraped",
            queue.len()
        )
    };
    let client = if runs_waited == 0 {
        format!(
            "as the client observes it, no request's TTFT held more than its own prefill (at the run's unqueued prefill rate) in any of {} runs",
            all.len()
        )
    } else {
        format!(
            "as the client observes it, {requests_waited} requests in {runs_waited} of {} runs waited beyond their own prefill before their first token{}",
            all.len(),
            first_wave_max.map_or_else(String::new, |m| format!(
                " (first waves: up to {} ms, the prefill of the prompts released with them)",
                crate::figure::sig3(m)
            ))
        )
    };
    ServerView {
        queue,
        runs,
        client_queue,
        timings,
        waited: format!("{gauges}; {client} (the prefill_wait view)."),
    }
}
