//! The sessions-and-cache section: for the runs of declared workload classes (sessions,
//! trace replays, prefix groups), TTFT by turn index, the prefix cache's hit rate as the
//! server counted it beside what the client was told, and the KV pool's use over time, side
//! by side per arm, under a one-line verdict that stays visible when the rest is collapsed.

use serde::Serialize;

use crate::report::charts::{
    CurveChart, CurvePoint, CurveSeries, LineSeriesData, SMALL_WIDTH, TimeSeriesChart,
};
use crate::report::format::fmt_num;
use crate::report::input::{CacheReplica, ReportInput};

/// The section.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CacheView {
    /// One line, always shown; empty when no run of a declared class was recorded.
    pub verdict: String,
    /// TTFT p50 by turn index, one line per session run.
    pub turn_chart: Option<CurveChart>,
    /// Per run and turn.
    pub turns: Vec<TurnRowView>,
    /// Per run and replica.
    pub replicas: Vec<CacheRowView>,
    /// KV usage over each run.
    pub kv_charts: Vec<TimeSeriesChart>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TurnRowView {
    pub arm: String,
    pub run_id: String,
    pub turn: String,
    pub sessions: String,
    pub ok: String,
    pub ttft_p50: String,
    pub ttft_p90: String,
    pub cached_share: String,
    pub history: String,
    pub contaminated: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CacheRowView {
    pub arm: String,
    pub cell: String,
    pub run_id: String,
    pub replica: String,
    pub server_hit_rate: String,
    pub source: String,
    pub client_share: String,
    pub disagreement: String,
    pub kv_mean: String,
    pub kv_max: String,
    pub preemptions: String,
}

fn percent(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_owned(), |v| format!("{:.1}%", v * 100.0))
}

/// The classes declared beside the manifest that the runs recorded (sessions, trace
/// replays, prefix groups).
pub fn declared_classes(input: &ReportInput<'_>) -> Vec<String> {
    let mut out: Vec<String> = input
        .artifacts
        .iter()
        .map(|a| &a.facts.workload)
        .filter(|w| w.is_declared_class())
        .map(|w| w.class.clone())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The arm of `run_id`, as its run.json names it.
fn arm_of(input: &ReportInput<'_>, run_id: &str) -> String {
    input
        .artifacts
        .iter()
        .find(|a| a.facts.run_id == run_id)
        .map_or_else(|| "unknown arm".to_owned(), |a| a.facts.arm.clone())
}

/// The workload class of `run_id` (empty when no artifact holds it).
fn class_of(input: &ReportInput<'_>, run_id: &str) -> String {
    input
        .artifacts
        .iter()
        .find(|a| a.facts.run_id == run_id)
        .map(|a| a.facts.workload.class.clone())
        .unwrap_or_default()
}

/// The section's view.
pub fn cache_view(input: &ReportInput<'_>) -> CacheView {
    let c = input.cache;
    let arm = |run_id: &str| arm_of(input, run_id);
    let cell = |run_id: &str| class_of(input, run_id);
    if c.turns.is_empty() && c.replicas.is_empty() {
        return CacheView::default();
    }
    let mut runs: Vec<&str> = c.turns.iter().map(|t| t.run_id.as_str()).collect();
    runs.dedup();
    let turns: Vec<TurnRowView> = c
        .turns
        .iter()
        .map(|t| TurnRowView {
            arm: arm(&t.run_id),
            run_id: t.run_id.clone(),
            turn: t.turn.to_string(),
            sessions: t.sessions.to_string(),
            ok: t.ok.to_string(),
            ttft_p50: fmt_num(t.ttft_p50_ms),
            ttft_p90: fmt_num(t.ttft_p90_ms),
            cached_share: percent(t.cached_share),
            history: fmt_num(t.history_tokens_mean),
            contaminated: t.contaminated.to_string(),
        })
        .collect();
    let turn_chart = (!runs.is_empty()).then(|| CurveChart {
        title: "TTFT by turn: each later turn carries the conversation so far".to_owned(),
        x_label: "turn (0 = a session's first)".to_owned(),
        y_label: "TTFT p50 (ms)".to_owned(),
        log_x: false,
        log_y: false,
        x_ticks: Vec::new(),
        series: runs
            .iter()
            .enumerate()
            .map(|(k, run)| CurveSeries {
                name: format!("{} ({})", arm(run), cell(run)),
                colour: k,
                points: c
                    .turns
                    .iter()
                    .filter(|t| t.run_id == *run)
                    .filter_map(|t| {
                        Some(CurvePoint {
                            x: t.turn as f64,
                            y: t.ttft_p50_ms?,
                            low: None,
                            high: None,
                        })
                    })
                    .collect(),
            })
            .collect(),
        reference: None,
        width: SMALL_WIDTH,
    });
    let replicas: Vec<CacheRowView> = c
        .replicas
        .iter()
        .map(|r: &CacheReplica| CacheRowView {
            arm: arm(&r.run_id),
            cell: cell(&r.run_id),
            run_id: r.run_id.clone(),
            replica: r.replica.to_string(),
            server_hit_rate: percent(r.server_hit_rate),
            source: match r.server_source.as_deref() {
                Some("gauge") => "gauge (approximate)".to_owned(),
                Some(s) => s.to_owned(),
                None => "none exported".to_owned(),
            },
            client_share: percent(r.client_cached_share),
            disagreement: r
                .disagreement
                .map_or_else(|| "n/a".to_owned(), |d| format!("{:+.1} pts", d * 100.0)),
            kv_mean: percent(r.kv_usage_mean),
            kv_max: percent(r.kv_usage_max),
            preemptions: fmt_num(r.preemptions),
        })
        .collect();
    let mut kv_runs: Vec<&str> = c.kv.iter().map(|k| k.0.as_str()).collect();
    kv_runs.dedup();
    let kv_charts = kv_runs
        .iter()
        .map(|run| {
            let mut replicas: Vec<u32> = c.kv.iter().filter(|k| k.0 == *run).map(|k| k.1).collect();
            replicas.dedup();
            TimeSeriesChart {
                title: format!("KV cache in use: {}, {}", arm(run), cell(run)),
                y_label: "KV cache used (%)".to_owned(),
                series: replicas
                    .iter()
                    .enumerate()
                    .map(|(k, replica)| LineSeriesData {
                        name: format!("replica {replica}"),
                        colour: k,
                        points: c
                            .kv
                            .iter()
                            .filter(|p| p.0 == *run && p.1 == *replica)
                            .map(|p| (p.2, p.3 * 100.0))
                            .collect(),
                    })
                    .collect(),
            }
        })
        .collect();
    CacheView {
        verdict: verdict(input, &runs),
        turn_chart,
        turns,
        replicas,
        kv_charts,
    }
}

/// The one line: per session run, the first and last turn's TTFT p50 and the cache's share
/// of the last turn, and with SLOs the sessions whose every turn attained them after the
/// first wave; the server's hit rate per run of every declared class; contamination.
fn verdict(input: &ReportInput<'_>, session_runs: &[&str]) -> String {
    let c = input.cache;
    let arm = |run_id: &str| arm_of(input, run_id);
    let mut parts = Vec::new();
    let mut turns = Vec::new();
    for run in session_runs {
        let of: Vec<_> = c.turns.iter().filter(|t| t.run_id == *run).collect();
        if let (Some(first), Some(last)) = (of.first(), of.last()) {
            turns.push(format!(
                "{} {} → {} ms (turn {}, {} cached)",
                arm(run),
                fmt_num(first.ttft_p50_ms),
                fmt_num(last.ttft_p50_ms),
                last.turn,
                percent(last.cached_share)
            ));
        }
    }
    if !turns.is_empty() {
        parts.push(format!(
            "TTFT p50 from a session's first turn: {}",
            turns.join(", ")
        ));
    }
    // A session attains when every turn meets its turn's SLOs: the decision window's share.
    let attained: Vec<String> = c
        .sessions
        .iter()
        .filter(|s| session_runs.contains(&s.run_id.as_str()))
        .map(|s| {
            if s.sessions == 0 {
                return format!("{} none (every session in the first wave)", arm(&s.run_id));
            }
            format!(
                "{} {} of {} ({} [{}, {}], {} sessions/s)",
                arm(&s.run_id),
                s.attained,
                s.sessions,
                percent(s.attained_share),
                percent(s.share_ci95_low),
                percent(s.share_ci95_high),
                fmt_num(s.goodput_sps)
            )
        })
        .collect();
    if !attained.is_empty() {
        parts.push(format!(
            "sessions attaining the SLOs in every turn (after the first wave): {}",
            attained.join(", ")
        ));
    }
    // The server's hit rate per class, each arm's beside the others' (replicas averaged).
    let class = |run_id: &str| class_of(input, run_id);
    let mut by_class: Vec<(String, Vec<String>)> = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for r in &c.replicas {
        if seen.contains(&r.run_id.as_str()) {
            continue;
        }
        seen.push(&r.run_id);
        let rates: Vec<f64> = c
            .replicas
            .iter()
            .filter(|x| x.run_id == r.run_id)
            .filter_map(|x| x.server_hit_rate)
            .collect();
        if rates.is_empty() {
            continue;
        }
        let figure = format!(
            "{} {}",
            arm(&r.run_id),
            percent(Some(rates.iter().sum::<f64>() / rates.len() as f64))
        );
        let k = class(&r.run_id);
        match by_class.iter_mut().find(|(c, _)| *c == k) {
            Some((_, v)) => v.push(figure),
            None => by_class.push((k, vec![figure])),
        }
    }
    if !by_class.is_empty() {
        let classes: Vec<String> = by_class
            .iter()
            .map(|(k, v)| format!("{k} {}", v.join(" / ")))
            .collect();
        parts.push(format!(
            "server prefix-cache hit rate: {}",
            classes.join(", ")
        ));
    }
    let contaminated: i64 = c.turns.iter().map(|t| t.contaminated).sum();
    if !c.turns.is_empty() {
        parts.push(if contaminated == 0 {
            "no cross-session canary".to_owned()
        } else {
            format!("{contaminated} turns carried another session's canary: contamination")
        });
    }
    parts.join("; ")
}
