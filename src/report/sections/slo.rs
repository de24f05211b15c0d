//! The report's SLO section: the SLOs in force and where they came from (or that none was
//! given), each stage comparison's attainment and goodput per arm (window `all`, against
//! the arm's control), and the throughput-per-GPU against throughput-per-user trade-off of
//! every performance workload with its Pareto frontier (the `tradeoff` view).

use serde::Serialize;

use crate::metric::Window;
use crate::report::format::{fmt_estimate, fmt_num, fmt_share, fmt_throughput_difference};
use crate::rules::input::TradeoffPoint;
use crate::rules::{ArmGoodput, StageComparison};

/// The section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SloView {
    /// `ttft_ms<=2000, tpot_ms<=50 (from --slo)`, or that none was given.
    pub slos: String,
    pub given: bool,
    pub goodput: Vec<GoodputRowView>,
    pub tradeoff: Vec<TradeoffRowView>,
    /// Each capacity search's result (`capacity.json`).
    pub capacity: Vec<crate::report::input::CapacityFound>,
}

/// One arm of one stage comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GoodputRowView {
    pub stage: String,
    pub workload: String,
    pub arm: String,
    pub runs: String,
    pub attained: String,
    pub goodput_tps: String,
    pub reference: String,
    pub difference: String,
}

/// One point of the trade-off (window `all`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TradeoffRowView {
    pub workload: String,
    pub arm: String,
    /// The load: `C8 × 1 replica`, or `2.5 req/s` for an open loop.
    pub load: String,
    pub gpus: String,
    pub per_gpu: String,
    pub per_user: String,
    pub goodput_per_gpu: String,
    pub frontier: String,
    /// CSS class: `pass` on the frontier, else empty.
    pub frontier_class: String,
}

/// The arms on the Pareto frontier of each performance workload, per window: the rows of
/// `points` on the frontier, as (frontier group, window, `arm (cell)` or `arm`).
pub fn frontier_arms(points: &[TradeoffPoint]) -> Vec<(String, String, Vec<String>)> {
    let mut out: Vec<(String, String, Vec<String>)> = Vec::new();
    for p in points
        .iter()
        .filter(|p| performance_group(&p.frontier_group))
    {
        if p.on_frontier != Some(true) {
            continue;
        }
        let name = format!("{} ({})", p.arm, p.cell_id);
        match out
            .iter_mut()
            .find(|(g, w, _)| *g == p.frontier_group && *w == p.window)
        {
            Some((_, _, arms)) => arms.push(name),
            None => out.push((p.frontier_group.clone(), p.window.clone(), vec![name])),
        }
    }
    out
}

/// Whether a frontier group holds performance cells (not the functional checks, whose
/// throughput means nothing).
pub fn performance_group(group: &str) -> bool {
    !group.starts_with(&format!("{}.", crate::rules::headline::FUNCTIONAL_CLASS))
}

/// The frontier groups of the performance workloads, in the order the points give them.
pub fn performance_groups(points: &[TradeoffPoint]) -> Vec<&str> {
    let mut groups: Vec<&str> = Vec::new();
    for p in points
        .iter()
        .filter(|p| performance_group(&p.frontier_group))
    {
        if !groups.contains(&p.frontier_group.as_str()) {
            groups.push(&p.frontier_group);
        }
    }
    groups
}

/// A point's GPUs: `2`, `2 (from topology)`, `n/a`.
pub fn fmt_gpus(p: &TradeoffPoint) -> String {
    match (p.gpus, p.gpus_derived) {
        (Some(g), Some(true)) => format!("{g} (from topology)"),
        (Some(g), _) => g.to_string(),
        (None, _) => crate::report::format::NA.to_owned(),
    }
}

/// Where a point stands: `on the frontier`, `dominated by …`, or why it is not placed.
pub fn frontier_text(p: &TradeoffPoint) -> String {
    match (p.on_frontier, &p.dominated_by) {
        (Some(true), _) => "on the frontier".to_owned(),
        (Some(false), Some(by)) => format!("dominated by {}", by.join(", ")),
        _ => "not placed (no GPUs or no median TPOT)".to_owned(),
    }
}

/// Every arm's attainment and goodput (window `all`) of every stage comparison, with its
/// stage; empty with no SLO given.
pub fn stage_goodput(stages: &[StageComparison]) -> Vec<(&StageComparison, &ArmGoodput)> {
    stages
        .iter()
        .filter_map(|s| s.result.as_ref().ok().map(|c| (s, c)))
        .flat_map(|(s, c)| {
            c.goodput
                .iter()
                .filter(|g| g.window == Window::All)
                .map(move |g| (s, g))
        })
        .collect()
}

/// Build the section; `session_classes` are the workload classes whose open loop releases
/// sessions, not requests.
pub fn slo_view(
    slos: &str,
    stages: &[StageComparison],
    points: &[TradeoffPoint],
    capacity: &[crate::report::input::CapacityFound],
    session_classes: &[String],
) -> SloView {
    let goodput = stage_goodput(stages)
        .into_iter()
        .map(|(s, g)| GoodputRowView {
            stage: s.stage.clone(),
            workload: s.workload.clone(),
            arm: g.arm.clone(),
            runs: g.runs.to_string(),
            attained: fmt_share(g.share.as_ref()),
            goodput_tps: fmt_estimate(&g.goodput_tps).1,
            reference: g.reference.clone().unwrap_or_default(),
            difference: g
                .difference
                .as_ref()
                .map_or_else(String::new, fmt_throughput_difference),
        })
        .collect();
    let groups = performance_groups(points);
    let tradeoff = groups
        .into_iter()
        .flat_map(|group| {
            points
                .iter()
                .filter(move |p| p.frontier_group == group && p.window == Window::All.as_str())
        })
        .map(|p| TradeoffRowView {
            workload: p.frontier_group.clone(),
            arm: p.arm.clone(),
            load: match (p.rate_per_s, p.concurrency_per_replica, p.replicas) {
                (Some(r), _, _) => format!(
                    "{} {}/s",
                    fmt_num(Some(r)),
                    if session_classes
                        .iter()
                        .any(|c| p.frontier_group.starts_with(&format!("{c}.ctx")))
                    {
                        "sessions"
                    } else {
                        "req"
                    }
                ),
                (None, Some(c), Some(1)) => format!("C{c} × 1 replica"),
                (None, Some(c), Some(n)) => format!("C{c} × {n} replicas"),
                _ => crate::report::format::NA.to_owned(),
            },
            gpus: fmt_gpus(p),
            per_gpu: fmt_num(p.output_tps_per_gpu),
            per_user: fmt_num(p.output_tps_per_user),
            goodput_per_gpu: fmt_num(p.goodput_tps_per_gpu),
            frontier: frontier_text(p),
            frontier_class: if p.on_frontier == Some(true) {
                "pass".to_owned()
            } else {
                String::new()
            },
        })
        .collect();
    SloView {
        slos: slos.to_owned(),
        given: !slos.is_empty(),
        goodput,
        tradeoff,
        capacity: capacity.to_vec(),
    }
}
