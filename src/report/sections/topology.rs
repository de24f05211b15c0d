//! The controls and topology sections: each one-variable control's verdict and each
//! topology assessment (throughput, communication overhead, scaling efficiency).

use crate::manifest::WorkloadManifest;
use crate::rules::advance::Verdict;
use crate::rules::compare::Comparison;
use crate::rules::control::Control;
use crate::rules::topology::TopologyAssessment;

use crate::report::format::{NA, fmt_interval, fmt_percent, fmt_unit};
use crate::report::view::*;

/// Section 6: the manifest's declared controls, each with what realises it, and each
/// comparison's control verdicts.
pub fn controls_view(
    manifest: &WorkloadManifest,
    mapped: &[crate::rules::controls::ControlCoverage],
    comparisons: &[(String, &Comparison)],
) -> ControlsView {
    let declared = manifest
        .controls
        .iter()
        .map(|text| match mapped.iter().find(|c| c.text == *text) {
            Some(c) => {
                let key = c
                    .key
                    .as_deref()
                    .map(|k| format!(", {k}"))
                    .unwrap_or_default();
                let detail = if c.comparisons.is_empty() {
                    c.reason.clone()
                } else {
                    c.comparisons.join("; ")
                };
                format!("{text}: {} ({}{key}): {detail}", c.status, c.mapping)
            }
            None => text.clone(),
        })
        .collect();
    ControlsView {
        declared,
        sweeps: comparisons
            .iter()
            .filter(|(_, c)| !c.controls.is_empty())
            .map(|(name, c)| SweepView {
                name: format!("{name} ({})", c.label),
                baseline: c.references.describe(),
                rows: c
                    .controls
                    .iter()
                    .map(|v| {
                        let (verdict, class) = match &v.control {
                            Control::OneVariable { .. } => ("one variable", "pass"),
                            Control::Confounded { .. } => ("confounded", "fail"),
                            Control::NoVariable { .. } => ("no variable", "missing"),
                        };
                        ControlRowView {
                            arm: format!("{} vs {}", v.arm, v.reference),
                            verdict: verdict.to_owned(),
                            verdict_class: class.to_owned(),
                            detail: v.control.reason(),
                        }
                    })
                    .collect(),
            })
            .collect(),
    }
}

pub(super) fn verdict_text(verdict: &Verdict) -> (&'static str, &'static str, String) {
    match verdict {
        Verdict::Pass => ("pass", "pass", String::new()),
        Verdict::Fail(reason) => ("fail", "fail", reason.clone()),
        Verdict::NotRun(reason) => ("not run", "missing", reason.clone()),
        Verdict::NotApplicable(reason) => ("n/a", "", reason.clone()),
        Verdict::NotTestable(reason) => ("not testable", "missing", reason.clone()),
    }
}

/// Section 7 from the check's topology assessments.
pub fn topology_view(assessments: &[TopologyAssessment]) -> Vec<TopologyView> {
    assessments
        .iter()
        .map(|t| TopologyView {
            name: t.name.clone(),
            overhead: t.overhead.clone(),
            rows: t
                .rows
                .iter()
                .map(|row| {
                    let (verdict, class, reason) = verdict_text(&row.verdict);
                    TopologyRowView {
                        arm: row.arm.clone(),
                        topology: row
                            .topology
                            .map_or_else(|| NA.to_owned(), |t| t.to_string()),
                        gpus: row.gpus.map_or_else(|| NA.to_owned(), |g| g.to_string()),
                        in_flight: row.in_flight.to_string(),
                        runs: row.runs.to_string(),
                        output_tps: match row.output_tps_ci {
                            Some((low, high)) => format!(
                                "{} {}",
                                fmt_unit(row.output_tps, "tok/s"),
                                fmt_interval(Some(low), Some(high))
                            ),
                            None => fmt_unit(row.output_tps, "tok/s"),
                        },
                        per_gpu: fmt_unit(row.output_tps_per_gpu, "tok/s/GPU"),
                        scaling_efficiency: match (&row.against, row.scaling_efficiency) {
                            (Some(against), Some(e)) => {
                                format!("{} of {against}", fmt_percent(Some(e)))
                            }
                            _ => String::new(),
                        },
                        verdict: if reason.is_empty() {
                            verdict.to_owned()
                        } else {
                            format!("{verdict}: {reason}")
                        },
                        verdict_class: class.to_owned(),
                    }
                })
                .collect(),
            winner: t
                .winner
                .clone()
                .unwrap_or_else(|| "no winner declared".to_owned()),
            reason: t.reason.clone(),
        })
        .collect()
}
