//! The advance and stop rules' section: each rule's verdict with its evidence, the
//! functional checks, and the snippets that show a contamination.

use crate::manifest::RunPlan;
use crate::rules::advance::AdvanceRule;
use crate::rules::check::CheckReport;
use crate::rules::input::{Artifact, MetricId, RestartSignal};

use super::*;
use crate::report::input::*;
use crate::report::view::*;

/// Section 10: each arm's advance-rule verdicts with the evidence behind them.
pub fn verdicts_view(
    plan: &RunPlan,
    check: &CheckReport,
    artifacts: &[Artifact],
    snippets: &[OutputSnippet],
) -> VerdictsView {
    let arms: Vec<ArmVerdictView> = check
        .arms
        .iter()
        .map(|arm| {
            let rules = arm
                .rules
                .iter()
                .map(|(rule, verdict)| {
                    let (text, class, reason) = verdict_text(verdict);
                    RuleVerdictView {
                        rule: plan
                            .advance_rules
                            .get(rule.index())
                            .cloned()
                            .unwrap_or_else(|| rule.label().to_owned()),
                        verdict: text.to_owned(),
                        verdict_class: class.to_owned(),
                        reason,
                    }
                })
                .collect();
            let mut evidence = Vec::new();
            for a in artifacts.iter().filter(|a| a.facts.arm == arm.arm) {
                let run = &a.facts.run_id;
                for c in &a.figures.canaries {
                    if !c.own_present {
                        evidence.push(EvidenceView {
                            run_id: run.clone(),
                            request: c.request_index.to_string(),
                            what: "own canary missing".to_owned(),
                            detail: String::new(),
                        });
                    }
                    let foreign: Vec<&str> = c
                        .foreign
                        .iter()
                        .chain(&c.foreign_in_tool_arguments)
                        .map(String::as_str)
                        .collect();
                    if !foreign.is_empty() {
                        evidence.push(EvidenceView {
                            run_id: run.clone(),
                            request: c.request_index.to_string(),
                            what: "foreign canary".to_owned(),
                            detail: foreign.join(", "),
                        });
                    }
                }
                for f in a.figures.functional.iter().filter(|f| !f.passed) {
                    evidence.push(EvidenceView {
                        run_id: run.clone(),
                        request: f.request_index.map_or_else(String::new, |i| i.to_string()),
                        what: format!("{} failed", f.check),
                        detail: f.reason.clone().unwrap_or_default(),
                    });
                }
                for e in &a.figures.server_errors {
                    evidence.push(EvidenceView {
                        run_id: run.clone(),
                        request: e.request_index.to_string(),
                        what: e.outcome.as_str().to_owned(),
                        detail: e.body.clone(),
                    });
                }
                for r in &a.figures.restarts {
                    evidence.push(EvidenceView {
                        run_id: run.clone(),
                        request: String::new(),
                        what: format!("replica {} {}", r.replica, r.what()),
                        detail: r.evidence(),
                    });
                }
                for s in snippets.iter().filter(|s| &s.run_id == run) {
                    evidence.push(EvidenceView {
                        run_id: run.clone(),
                        request: s.request_index.to_string(),
                        what: "model output".to_owned(),
                        detail: s.text.clone(),
                    });
                }
            }
            ArmVerdictView {
                arm: arm.arm.clone(),
                rules,
                functional: functional_checks(artifacts.iter().filter(|a| a.facts.arm == arm.arm)),
                evidence,
            }
        })
        .collect();
    let mut ordered: Vec<&crate::rules::ArmAdvance> = check.arms.iter().collect();
    ordered.sort_by_key(|a| crate::rules::stage::plan_rank(plan, &a.arm));
    let rules: Vec<AdvanceRule> = ordered
        .first()
        .map(|a| a.rules.iter().map(|(r, _)| *r).collect())
        .unwrap_or_default();
    let matrix = ordered
        .iter()
        .map(|arm| {
            let runs: Vec<&Artifact> = artifacts
                .iter()
                .filter(|a| a.facts.arm == arm.arm)
                .collect();
            let cells = rules
                .iter()
                .map(|rule| {
                    let verdict = arm.rules.iter().find(|(r, _)| r == rule).map(|(_, v)| v);
                    let (text, class, reason) =
                        verdict.map_or(("not run", "missing", String::new()), verdict_text);
                    MatrixCellView {
                        verdict: text.to_owned(),
                        verdict_class: class.to_owned(),
                        evidence: rule_evidence(*rule, &runs),
                        reason,
                    }
                })
                .collect();
            let functional = functional_checks(runs.iter().copied())
                .iter()
                .map(|f| format!("{} {}", f.check, f.passed.replace(" of ", "/")))
                .collect::<Vec<_>>()
                .join(", ");
            MatrixRowView {
                arm: arm.arm.clone(),
                cells,
                functional,
            }
        })
        .collect();
    VerdictsView {
        arms: arms
            .into_iter()
            .filter(|a: &ArmVerdictView| !a.evidence.is_empty())
            .collect(),
        rules: rules
            .iter()
            .map(|rule| {
                plan.advance_rules
                    .get(rule.index())
                    .cloned()
                    .unwrap_or_else(|| rule.label().to_owned())
            })
            .collect(),
        matrix,
    }
}

/// The evidence a rule's verdict counts, in a few words.
pub(super) fn rule_evidence(rule: AdvanceRule, runs: &[&Artifact]) -> String {
    let sum = |f: &dyn Fn(&Artifact) -> u64| runs.iter().map(|a| f(a)).sum::<u64>();
    match rule {
        AdvanceRule::Completion => {
            let measured = sum(&|a| a.figures.requests.measured);
            let ok = sum(&|a| a.figures.requests.ok);
            let stopped = sum(&|a| {
                a.figures
                    .restarts
                    .iter()
                    .filter(|r| matches!(r.signal, RestartSignal::StoppedAnswering { .. }))
                    .count() as u64
            });
            let restarts = sum(&|a| a.figures.restarts.len() as u64) - stopped;
            let mut text = format!(
                "{ok}/{measured} requests ok, {restarts} restart{}",
                if restarts == 1 { "" } else { "s" }
            );
            if stopped > 0 {
                text.push_str(&format!(
                    ", {stopped} replica{} stopped answering",
                    if stopped == 1 { "" } else { "s" }
                ));
            }
            text
        }
        AdvanceRule::Canaries => {
            let checked = sum(&|a| a.figures.canaries.len() as u64);
            if checked == 0 {
                return "no canaries".to_owned();
            }
            let own = sum(&|a| a.figures.canaries.iter().filter(|c| c.own_present).count() as u64);
            let foreign = sum(&|a| {
                a.figures
                    .canaries
                    .iter()
                    .filter(|c| !c.foreign.is_empty() || !c.foreign_in_tool_arguments.is_empty())
                    .count() as u64
            });
            format!("{own}/{checked} own canaries, {foreign} foreign")
        }
        AdvanceRule::Functional => {
            let total = sum(&|a| a.figures.functional.len() as u64);
            let passed = sum(&|a| a.figures.functional.iter().filter(|f| f.passed).count() as u64);
            format!("{passed}/{total} checks passed")
        }
        AdvanceRule::PerformanceClaim => {
            let n = runs
                .iter()
                .filter(|a| a.figures.metrics.contains_key(&MetricId::TtftMs))
                .count();
            format!("{n} runs with every statistic")
        }
        AdvanceRule::Topology => String::new(),
    }
}

/// Passed of recorded requests per functional check, the suite's checks first in their
/// order, then any other check by name.
pub(super) fn functional_checks<'a>(
    runs: impl Iterator<Item = &'a Artifact>,
) -> Vec<FunctionalCheckView> {
    const ORDER: [&str; 4] = ["coding", "structured_json", "tools", "responses"];
    let mut counts: std::collections::BTreeMap<(usize, String), (usize, usize)> =
        std::collections::BTreeMap::new();
    for run in runs {
        for f in &run.figures.functional {
            let rank = ORDER
                .iter()
                .position(|c| *c == f.check)
                .unwrap_or(ORDER.len());
            let entry = counts.entry((rank, f.check.clone())).or_default();
            entry.0 += usize::from(f.passed);
            entry.1 += 1;
        }
    }
    counts
        .into_iter()
        .map(|((_, check), (passed, total))| FunctionalCheckView {
            check,
            passed: format!("{passed} of {total}"),
            verdict_class: if passed == total { "pass" } else { "fail" }.to_owned(),
        })
        .collect()
}
