//! The run plan's section: each stage with its arms, claims and evidence coverage; and a
//! refused headline comparison's view.

use crate::manifest::RunPlan;
use crate::rules::check::CheckReport;
use crate::rules::refusal::Refusal;

use super::*;
use crate::report::view::*;

/// Section 2 from the plan and the check's coverage.
pub fn plan_view(plan: &RunPlan, check: &CheckReport) -> PlanView {
    let stages = plan
        .stages_in_order()
        .into_iter()
        .map(|stage| {
            let coverage = check
                .coverage
                .stages
                .iter()
                .find(|c| c.order == stage.order.get() && c.stage == stage.stage);
            let arms: Vec<ArmEvidenceView> = match coverage {
                Some(c) => c
                    .arms
                    .iter()
                    .map(|a| ArmEvidenceView {
                        arm: a.arm.clone(),
                        found: !a.run_ids.is_empty(),
                        evidence: match a.run_ids.len() {
                            0 => "no artifacts".to_owned(),
                            1 => "1 run".to_owned(),
                            n => format!("{n} runs"),
                        },
                    })
                    .collect(),
                None => stage
                    .arms()
                    .iter()
                    .map(|arm| ArmEvidenceView {
                        arm: arm.clone(),
                        found: false,
                        evidence: "not checked".to_owned(),
                    })
                    .collect(),
            };
            let restore = check
                .restore
                .iter()
                .find(|r| r.order == stage.order.get() && r.stage == stage.stage);
            let claims = coverage
                .map(|c| {
                    c.selected
                        .iter()
                        .map(|claim| claim_view("selected", claim))
                        .chain(c.rejected.iter().map(|claim| claim_view("rejected", claim)))
                        .collect()
                })
                .unwrap_or_default();
            let unevidenced = !arms.is_empty() && arms.iter().all(|a| !a.found);
            StageView {
                order: stage.order.get().to_string(),
                stage: stage.stage.clone(),
                status: if unevidenced {
                    format!("{} (the plan's word; no artifacts)", stage.status)
                } else {
                    stage.status.clone()
                },
                selected: stage.selected.clone().unwrap_or_default(),
                rejected: stage.rejected.clone().unwrap_or_default(),
                evidence_file: stage.evidence.clone().unwrap_or_default(),
                evidence_verdict: restore.map(|r| r.lines.join("; ")).unwrap_or_default(),
                evidence_supported: restore.is_some_and(|r| r.supported),
                arms,
                claims,
            }
        })
        .collect();
    PlanView {
        stages,
        headline_rule: plan.headline_comparison_rule.clone(),
    }
}

/// A refusal as the report shows it.
pub fn refusal_view(refusal: &Refusal) -> RefusalView {
    RefusalView {
        reason: refusal.reason.clone(),
        rule: refusal.rule.clone().unwrap_or_default(),
        differences: refusal
            .differences
            .iter()
            .map(|d| DifferenceView {
                run_id: d.run_id.clone(),
                field: d.field.clone(),
                first: d.first.clone(),
                other: d.other.clone(),
            })
            .collect(),
    }
}
