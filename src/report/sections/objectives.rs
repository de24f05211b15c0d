//! The first screen's objectives and topology rows: each objective's leader, runner-up and
//! lead with its unit and window (the burst's makespan in the burst's row, attainment left
//! out when every arm attains), and each capacity search at its capacity, in rank order.

use serde::Serialize;

use crate::report::format::{NA, fmt_diff, fmt_num};
use crate::rules::objective::Objective;

/// One objective's leader.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObjectiveView {
    pub objective: String,
    /// `lower is better` / `higher is better`.
    pub better: String,
    /// The leader, named as the winner only when resolved.
    pub leader: String,
    /// `647 tok/s [635, 660], 3 runs, 16 in flight`.
    pub figure: String,
    pub runner_up: String,
    /// `+88.2 [+76.4, +100]` (leader − runner-up, Welch across runs).
    pub lead: String,
    /// `resolved` or why not.
    pub resolved: String,
    pub resolved_class: String,
}

/// One searched arm at its capacity, in rank order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CapacityRowView {
    pub arm: String,
    /// `18 in flight per GPU` (`18 per replica × 1 replica on 1 GPU`).
    pub capacity: String,
    pub detail: String,
    /// `97.8% [94.4%, 99.4%]` at the passing load; the failing load's beside.
    pub attainment: String,
    /// `390 [366, 414] tok/s per GPU (3 runs)`.
    pub goodput: String,
    /// `resolved`, or why it ranks nowhere.
    pub status: String,
    pub status_class: String,
}

pub(super) fn capacity_row(r: &crate::rules::capacity::CapacityRow) -> CapacityRowView {
    let pct = |v: f64| crate::report::format::fmt_percent(Some(v));
    let resolved = r.status == crate::artifact::capacity::CapacityStatus::Resolved
        && r.capacity_per_gpu.is_some();
    CapacityRowView {
        arm: r.arm.clone(),
        capacity: r.capacity_per_gpu.map_or_else(
            || NA.to_owned(),
            |c| format!("{} in flight per GPU", crate::figure::count_or_sig3(c)),
        ),
        detail: match (r.capacity, r.replicas, r.gpus) {
            (Some(c), Some(rep), Some(g)) => format!(
                "{} per replica × {rep} replica{} on {g} GPU{}",
                crate::figure::count_or_sig3(c),
                if rep == 1 { "" } else { "s" },
                if g == 1 { "" } else { "s" }
            ),
            _ => String::new(),
        },
        attainment: {
            let pass = r
                .passing
                .map(|(s, l, h)| format!("{} [{}, {}]", pct(s), pct(l), pct(h)));
            let fail = r.failing.map(|(load, s, l, h)| {
                format!(
                    "at {} per replica: {} [{}, {}]",
                    crate::figure::count_or_sig3(load),
                    pct(s),
                    pct(l),
                    pct(h)
                )
            });
            match (pass, fail) {
                (Some(p), Some(f)) => format!("{p}; {f}"),
                (Some(p), None) => p,
                (None, Some(f)) => f,
                (None, None) => NA.to_owned(),
            }
        },
        goodput: match &r.goodput_per_gpu {
            Some(g) => match (g.low, g.high) {
                (Some(low), Some(high)) => format!(
                    "{} [{}, {}] tok/s per GPU ({} runs)",
                    fmt_num(Some(g.mean)),
                    fmt_num(Some(low)),
                    fmt_num(Some(high)),
                    g.runs
                ),
                _ => format!("{} tok/s per GPU (1 run)", fmt_num(Some(g.mean))),
            },
            None => NA.to_owned(),
        },
        status: if resolved {
            "resolved".to_owned()
        } else {
            r.status.as_str().to_owned()
        },
        status_class: if resolved { "pass" } else { "missing" }.to_owned(),
    }
}

fn objective_view(o: &Objective, headline: Option<&crate::rules::Comparison>) -> ObjectiveView {
    let unit = o.kind.unit();
    // A share in percent reads 97.1% [94.4%, 98.8%]; other figures take their unit after.
    let shown = |v: f64| {
        if unit == "%" {
            crate::report::format::fmt_percent(Some(v / 100.0))
        } else {
            fmt_num(Some(v))
        }
    };
    let figure = |f: &crate::rules::objective::ObjectiveFigure| {
        let interval = f
            .interval
            .map(|i| format!(" [{}, {}]", shown(i.low), shown(i.high)))
            .unwrap_or_default();
        let runs = if f.runs == 1 {
            "1 run".to_owned()
        } else {
            format!("{} runs", f.runs)
        };
        let load = f
            .in_flight
            .map(|n| format!(", {n} in flight"))
            .unwrap_or_default();
        let with_unit = |v: f64| {
            if unit == "%" {
                shown(v)
            } else {
                format!("{} {unit}", shown(v))
            }
        };
        let all = f
            .all_requests
            .map(|v| format!("; all requests: {}", with_unit(v)))
            .unwrap_or_default();
        format!("{}{interval} ({runs}{load}{all})", with_unit(f.value))
    };
    // The lead's unit: percentage points for a share.
    let lead_unit = if unit == "%" { "pp" } else { unit };
    let (resolved, class) = match (&o.runner_up, o.resolved) {
        _ if o.every_arm_attains => (o.unresolved.clone().unwrap_or_default(), "na".to_owned()),
        (None, _) => ("only arm".to_owned(), "na".to_owned()),
        (Some(_), true) => ("resolved".to_owned(), "pass".to_owned()),
        (Some(r), false) if o.load_differs.is_some() => {
            let short = |arm: &str| {
                headline
                    .and_then(|c| c.load(arm))
                    .map_or_else(String::new, |l| format!(" ({})", l.short()))
            };
            // The leader and runner-up columns name the arms: their loads only, in order.
            (
                format!("load differs:{} vs{}", short(&o.leader.arm), short(&r.arm)),
                "missing".to_owned(),
            )
        }
        (Some(_), false) => (
            match o.unresolved.as_deref() {
                Some(why) if why.starts_with("not comparable") => why.to_owned(),
                why => format!("not resolved: {}", why.unwrap_or("no interval")),
            },
            "missing".to_owned(),
        ),
    };
    ObjectiveView {
        objective: format!("{} ({})", o.kind.label(), o.kind.window_label()),
        better: if o.kind.higher_is_better() {
            "higher is better".to_owned()
        } else {
            "lower is better".to_owned()
        },
        leader: if o.every_arm_attains {
            "every arm attains".to_owned()
        } else {
            o.leader.arm.clone()
        },
        figure: if o.every_arm_attains {
            format!(
                "each ≥ {}",
                headline.map_or_else(
                    || NA.to_owned(),
                    |c| crate::report::format::fmt_percent(Some(c.slo_target))
                )
            )
        } else {
            figure(&o.leader)
        },
        runner_up: match &o.runner_up {
            _ if o.every_arm_attains => NA.to_owned(),
            Some(r) => format!("{}: {}", r.arm, figure(r)),
            None => NA.to_owned(),
        },
        lead: match (&o.runner_up, o.lead) {
            _ if o.every_arm_attains => NA.to_owned(),
            (Some(_), Some(i)) => format!(
                "{} [{}, {}] {lead_unit}",
                fmt_diff(Some(i.estimate)),
                fmt_diff(Some(i.low)),
                fmt_diff(Some(i.high))
            ),
            (Some(r), None) if o.kind == crate::rules::objective::ObjectiveKind::Attainment => {
                format!(
                    "{} {lead_unit} (the shares' exact intervals beside)",
                    fmt_diff(Some(o.leader.value - r.value))
                )
            }
            (Some(r), None) => {
                format!(
                    "{} {lead_unit} (no interval)",
                    fmt_diff(Some(o.leader.value - r.value))
                )
            }
            (None, _) => NA.to_owned(),
        },
        resolved,
        resolved_class: class,
    }
}

/// One view per objective of the headline comparison, in order.
pub(super) fn objective_views(
    objectives: &[Objective],
    headline: Option<&crate::rules::Comparison>,
) -> Vec<ObjectiveView> {
    use crate::rules::objective::ObjectiveKind;
    // The burst's makespan stands in the burst's row, beside its worst TTFT.
    let makespan = objectives
        .iter()
        .find(|o| o.kind == ObjectiveKind::BurstMakespan)
        .map(|o| objective_view(o, headline));
    objectives
        .iter()
        .filter(|o| o.kind != ObjectiveKind::BurstMakespan && !o.every_arm_attains)
        .map(|o| {
            let mut view = objective_view(o, headline);
            if let Some(m) = makespan
                .as_ref()
                .filter(|_| o.kind == ObjectiveKind::BurstTtft)
            {
                let same_leader = m.leader == view.leader;
                view.figure = format!(
                    "{}; makespan {}{}",
                    view.figure,
                    if same_leader {
                        String::new()
                    } else {
                        format!("{}: ", m.leader)
                    },
                    m.figure
                );
                view.lead = format!("{}; makespan {}", view.lead, m.lead);
            }
            view
        })
        .collect()
}
