//! The builders that turn the rules' results, the plan, the manifest and the query layer's
//! figures ([`super::input::ReportInput`]) into the view ([`super::view::ReportView`]) of
//! every section. Numbers are formatted by [`super::format`] (the one policy).

use std::collections::BTreeSet;

use crate::manifest::{RunPlan, WorkloadManifest};
use crate::metric::Window;
use crate::rules::advance::{AdvanceRule, TopologyAssessment, Verdict};
use crate::rules::check::{CheckReport, Outcome};
use crate::rules::compare::{Comparison, OutputLength, Paired, ThroughputEstimate};
use crate::rules::control::Control;
use crate::rules::coverage::ClaimCheck;
use crate::rules::headline::CONTEXT_CURVE_CLASS;
use crate::rules::input::{Artifact, MetricId, RestartSignal, Stats};
use crate::rules::refusal::Refusal;
use crate::rules::stop::StopKind;

use super::charts::{
    Bar, BarChart, CdfChart, LineSeriesData, SampleSeries, TimeSeriesChart, TimelineBar,
    TimelineChart, colour_hex,
};
use super::format::{
    NA, fmt_diff, fmt_diff_interval, fmt_interval, fmt_num, fmt_percent, fmt_percentile, fmt_ratio,
    fmt_throughput_difference, fmt_unit, fmt_welch,
};
use super::input::*;
use super::view::*;
use crate::stats::Percentile;

/// Arm names in a stable order (plan order, then first seen in artifacts) for colours.
#[derive(Debug, Clone, Default)]
pub struct Palette {
    arms: Vec<String>,
}

impl Palette {
    /// Exactly these arms, in this order: one comparison's colours (a comparison has at
    /// most as many arms as the palette has colours in practice, so none repeats).
    pub fn of(arms: &[String]) -> Self {
        let mut palette = Self::default();
        for arm in arms {
            palette.add(arm);
        }
        palette
    }

    fn add(&mut self, arm: &str) {
        if !self.arms.iter().any(|a| a == arm) {
            self.arms.push(arm.to_owned());
        }
    }

    /// The arm's palette index (arms not seen before get the next free index).
    pub fn index(&self, arm: &str) -> usize {
        self.arms
            .iter()
            .position(|a| a == arm)
            .unwrap_or(self.arms.len())
    }
}

/// Build the whole view.
pub fn build(input: &ReportInput<'_>) -> ReportView {
    let left_out: Vec<LeftOutView> = crate::rules::HeadlineSelection::from_manifest(input.manifest)
        .map(|selection| {
            input
                .artifacts
                .iter()
                .filter(|a| a.facts.workload.class == crate::rules::headline::HEADLINE_CLASS)
                .filter_map(|a| {
                    let c = crate::rules::classify(&a.facts, &selection);
                    (c.kind != crate::rules::ClassKind::Headline).then(|| LeftOutView {
                        arm: a.facts.arm.clone(),
                        run_id: a.facts.run_id.clone(),
                        workload: format!(
                            "{} tokens, C{} per replica, {} requests, {}{}",
                            a.facts.workload.prompt_tokens_target,
                            a.facts.workload.concurrency_per_replica,
                            a.facts.workload.total_requests,
                            a.facts.workload.schedule,
                            a.facts.workload.api.note()
                        ),
                        reason: c.reason,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let mut headline = match input.headline {
        Some(Ok(comparison)) => HeadlineView {
            comparison: Some(comparison_view(
                comparison,
                input,
                &Palette::of(&comparison.arms),
            )),
            refusal: None,
            empty_note: String::new(),
            left_out: Vec::new(),
        },
        Some(Err(refusal)) => HeadlineView {
            comparison: None,
            refusal: Some(refusal_view(refusal)),
            empty_note: String::new(),
            left_out: Vec::new(),
        },
        None if !left_out.is_empty() => HeadlineView {
            comparison: None,
            refusal: None,
            empty_note: format!(
                "no artifact matches the manifest's headline cell; {} of the headline class are left out (below)",
                left_out.len()
            ),
            left_out: Vec::new(),
        },
        None => HeadlineView {
            comparison: None,
            refusal: None,
            empty_note: "no headline artifacts recorded".to_owned(),
            left_out: Vec::new(),
        },
    };
    headline.left_out = left_out;
    let screens = input
        .screens
        .iter()
        .map(|screen| match &screen.result {
            Ok(comparison) => ScreenView {
                name: screen.name(),
                comparison: Some(comparison_view(
                    comparison,
                    input,
                    &Palette::of(&comparison.arms),
                )),
                refusal: None,
            },
            Err(refusal) => ScreenView {
                name: screen.name(),
                comparison: None,
                refusal: Some(refusal_view(refusal)),
            },
        })
        .collect();
    let mut comparisons: Vec<(String, &Comparison)> = Vec::new();
    if let Some(Ok(comparison)) = input.headline {
        comparisons.push(("headline".to_owned(), comparison));
    }
    for screen in input.screens {
        if let Ok(comparison) = &screen.result {
            comparisons.push((screen.name(), comparison));
        }
    }
    ReportView {
        header: header_view(input),
        decision: super::decision::decision_view(input),
        plan: plan_view(input.plan, input.check),
        stage_pairs: super::stages::stage_pairs(input.screens, &input.check.coverage.stages),
        charts: super::curves::decision_charts(input),
        headline,
        context_curve: context_curve_view(input),
        screens,
        controls: controls_view(input.manifest, &comparisons),
        topology: topology_view(&input.check.topology),
        slo: super::slo::slo_view(
            input.slos,
            &input.check.stages,
            input.tradeoff,
            input.capacity,
        ),
        spec_decode: spec_decode_view(
            input.plan,
            input.artifacts,
            input.runs,
            input.tokens_per_chunk,
        ),
        server: server_view(
            input.plan,
            input.artifacts,
            input.runs,
            input.queues,
            input.known_queue_gauges,
            input.client_queues,
            input.server_timings,
        ),
        verdicts: verdicts_view(input.plan, input.check, input.artifacts, input.snippets),
        open_gates: input.plan.post_campaign_open_gates.clone(),
        appendix: appendix_view(input.plan, input.definitions, input.artifacts, input.runs),
    }
}

fn outcome_text(outcome: Outcome) -> (&'static str, &'static str) {
    match outcome {
        Outcome::Holds => ("holds", "pass"),
        Outcome::StopRuleFired => ("stop rule fired", "fail"),
        Outcome::RuleFailed => ("rule failed", "fail"),
        Outcome::Incomplete => ("incomplete", "missing"),
    }
}

/// `, Responses API` after a run's workload when it drove another API than chat (the
/// manifest's cells are chat); empty for chat.
fn stop_kind_text(kind: StopKind) -> String {
    match kind {
        StopKind::Contamination => "cross-request contamination".to_owned(),
        StopKind::StructuredOutputCorruption => "structured-output corruption".to_owned(),
        StopKind::UnexplainedLoss => "unexplained loss".to_owned(),
        StopKind::Restart => "restart".to_owned(),
        StopKind::ServerError(kind) => format!("{} error", kind.as_str()),
        StopKind::ParserCorruption => "parser corruption".to_owned(),
        StopKind::NotRestored => "service not restored".to_owned(),
    }
}

/// Section 1 from the plan, the check and the run's metadata.
pub fn header_view(input: &ReportInput<'_>) -> HeaderView {
    let (outcome, outcome_class) = outcome_text(input.check.outcome);
    HeaderView {
        campaign_id: input.plan.campaign_id.clone(),
        goal: input.plan.goal.clone(),
        data_folder: input.data_folder.to_owned(),
        generated_utc: input.generated_utc.to_owned(),
        tool_version: input.tool_version.to_owned(),
        promotion_authorized: input.plan.promotion_authorized,
        outcome: outcome.to_owned(),
        outcome_class: outcome_class.to_owned(),
        exit_code: input.check_exit_code,
        reasons: input.check.reasons.clone(),
        stops: input
            .check
            .stops
            .iter()
            .map(|stop| StopView {
                kind: stop_kind_text(stop.kind),
                run_id: stop.run_id.clone().unwrap_or_else(|| "plan".to_owned()),
                reason: stop.reason.clone(),
            })
            .collect(),
    }
}

fn claim_view(side: &str, claim: &ClaimCheck) -> ClaimView {
    ClaimView {
        side: side.to_owned(),
        clause: claim.clause.clone(),
        verdict: claim.verdict.to_string(),
        verdict_class: super::decision::claim_class(claim.verdict).to_owned(),
        reason: claim.reason.clone(),
    }
}

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

/// The run ids a comparison is built from.
pub fn comparison_runs(comparison: &Comparison) -> BTreeSet<String> {
    let mut runs: BTreeSet<String> = comparison
        .metrics
        .iter()
        .flat_map(|m| &m.arms)
        .flat_map(|a| &a.runs)
        .map(|r| r.run_id.clone())
        .collect();
    for t in &comparison.throughput {
        if let ThroughputEstimate::SingleRun { run_id, .. } = &t.estimate {
            runs.insert(run_id.clone());
        }
        runs.extend(t.per_replica.iter().map(|(run, _)| run.clone()));
    }
    runs
}

/// The arm of each run id (from the artifacts).
fn arm_of<'a>(artifacts: &'a [Artifact], run_id: &str) -> Option<&'a str> {
    artifacts
        .iter()
        .find(|a| a.facts.run_id == run_id)
        .map(|a| a.facts.arm.as_str())
}

/// A comparison (headline or screen) with its chart data: only the comparison's own runs
/// enter its tables and charts.
pub fn comparison_view(
    comparison: &Comparison,
    input: &ReportInput<'_>,
    palette: &Palette,
) -> ComparisonView {
    let runs = comparison_runs(comparison);
    // Mean ITL is TPOT by the manifest's definition: one table, not two identical ones.
    let metrics = comparison
        .metrics
        .iter()
        .filter(|m| m.metric != MetricId::ItlMs)
        .map(|m| {
            let metric = m.metric;
            let [mild, far] = metric.tails();
            let cell = |s: &Stats, q: Percentile| fmt_percentile(s, q, false);
            MetricTableView {
                name: metric.label().to_owned(),
                unit: metric.unit().to_owned(),
                better: format!("{} is better", metric.better()),
                tail_labels: [metric.percentile_label(mild), metric.percentile_label(far)],
                rows: comparison
                    .arms
                    .iter()
                    .flat_map(|arm| Window::ALL.map(|w| m.arm(arm, w)))
                    .flatten()
                    .flat_map(|arm| {
                        arm.runs.iter().map(move |r| MetricRowView {
                            arm: arm.arm.clone(),
                            window: arm.window.as_str().to_owned(),
                            run_id: r.run_id.clone(),
                            n: r.stats.n.to_string(),
                            mean: fmt_num(r.stats.mean),
                            ci95: fmt_interval(r.stats.ci95_low, r.stats.ci95_high),
                            p50: cell(&r.stats, Percentile::P50),
                            tails: [cell(&r.stats, mild), cell(&r.stats, far)],
                        })
                    })
                    .collect(),
                differences: m
                    .differences
                    .iter()
                    .map(|d| DifferenceRowView {
                        arm: d.arm.clone(),
                        reference: d.reference.clone(),
                        window: d.window.as_str().to_owned(),
                        difference: fmt_diff(d.difference),
                        ratio: fmt_ratio(d.ratio),
                        welch_ci: fmt_welch(d),
                        paired: match &d.paired {
                            Paired::Interval { pairs, interval } => format!(
                                "{} {} over {pairs} pairs",
                                fmt_diff(Some(interval.estimate)),
                                fmt_interval(Some(interval.low), Some(interval.high))
                            ),
                            Paired::NotPaired { reason } => reason.clone(),
                        },
                        percentiles: [Percentile::P50, mild, far].map(|q| {
                            d.percentiles
                                .iter()
                                .find(|p| p.percentile == q)
                                .map_or_else(
                                    || NA.to_owned(),
                                    |p| {
                                        fmt_diff_interval(
                                            p.comparison.estimate(),
                                            p.comparison.interval(),
                                            &p.comparison.method(),
                                        )
                                    },
                                )
                        }),
                    })
                    .collect(),
            }
        })
        .collect();
    let throughput = Window::ALL
        .iter()
        .flat_map(|w| comparison.throughput.iter().filter(move |t| t.window == *w))
        .map(|t| {
            let ci95 = match &t.estimate {
                ThroughputEstimate::Repeats {
                    interval: Some(i), ..
                } => fmt_interval(Some(i.low), Some(i.high)),
                _ => NA.to_owned(),
            };
            let per_replica = t
                .per_replica
                .iter()
                .filter(|(_, replicas)| !replicas.is_empty())
                .map(|(run, replicas)| {
                    let parts: Vec<String> = replicas
                        .iter()
                        .map(|r| format!("r{} {}", r.replica, fmt_num(Some(r.output_tps))))
                        .collect();
                    format!("{run}: {}", parts.join(", "))
                })
                .collect::<Vec<_>>()
                .join("; ");
            ThroughputRowView {
                arm: t.arm.clone(),
                colour: colour_hex(palette.index(&t.arm)),
                window: t.window.as_str().to_owned(),
                output_tps: fmt_unit(t.estimate.value(), "tok/s"),
                basis: t.estimate.label(),
                ci95,
                gpus: t.gpus.map_or_else(|| NA.to_owned(), |g| g.to_string()),
                per_gpu: fmt_num(t.per_gpu),
                in_flight: t.in_flight.to_string(),
                versus: match &t.reference {
                    Some(r) => format!("{} {r}", fmt_ratio(t.ratio_to_reference)),
                    None => String::new(),
                },
                difference: t
                    .difference
                    .as_ref()
                    .map_or_else(String::new, fmt_throughput_difference),
                scaling_efficiency: t.scaling_efficiency.as_ref().map_or_else(String::new, |e| {
                    format!("{} of {} per GPU", fmt_percent(Some(e.value)), e.against)
                }),
                per_replica: if t.window == Window::All {
                    per_replica
                } else {
                    String::new()
                },
            }
        })
        .collect();
    let output_length = comparison
        .output_length
        .iter()
        .map(|(arm, reference, realization)| match realization {
            OutputLength::Comparable => OutputLengthView {
                arm: arm.clone(),
                comparable: true,
                text: format!("output lengths comparable with {reference}"),
            },
            OutputLength::NotComparable { warning } => OutputLengthView {
                arm: arm.clone(),
                comparable: false,
                text: warning.clone(),
            },
        })
        .collect();
    let pairs = comparison
        .arms
        .iter()
        .map(
            |arm| match comparison.controls.iter().find(|v| v.arm == *arm) {
                Some(v) => format!("{arm} vs {}: {}", v.reference, v.control.reason()),
                None if comparison.baseline() == Some(arm) => format!("{arm}: the baseline"),
                None => format!("{arm}: a control of its stage (no reference)"),
            },
        )
        .collect();
    ComparisonView {
        label: comparison.label.clone(),
        fingerprint: comparison.fingerprint.clone(),
        references: comparison.references.describe(),
        pairs,
        arms: comparison
            .arms
            .iter()
            .map(|arm| ArmSwatch {
                arm: arm.clone(),
                colour: colour_hex(palette.index(arm)),
            })
            .collect(),
        metrics,
        throughput,
        output_length,
        warnings: comparison.warnings.clone(),
        charts: comparison_charts(comparison, &runs, input, palette),
    }
}

fn comparison_charts(
    comparison: &Comparison,
    runs: &BTreeSet<String>,
    input: &ReportInput<'_>,
    palette: &Palette,
) -> ComparisonCharts {
    let scope = &comparison.label;
    let in_arm = |arm: &str| -> Vec<&RequestTiming> {
        input
            .requests
            .iter()
            .filter(|r| runs.contains(&r.run_id))
            .filter(|r| arm_of(input.artifacts, &r.run_id) == Some(arm))
            .collect()
    };
    let cdf = |name: &str, unit: &str, pick: fn(&RequestTiming) -> Option<f64>| {
        let arms: Vec<(&String, Vec<&RequestTiming>)> = comparison
            .arms
            .iter()
            .map(|arm| (arm, in_arm(arm)))
            .collect();
        CdfChart {
            title: format!("{name}, cumulative"),
            x_label: format!("{name} ({unit})"),
            series: arms
                .iter()
                .map(|(arm, requests)| SampleSeries {
                    name: (*arm).clone(),
                    colour: palette.index(arm),
                    values: requests.iter().filter_map(|r| pick(r)).collect(),
                    markers: Vec::new(),
                })
                .collect(),
            log_x: true,
            first_wave: arms
                .iter()
                .map(|(_, requests)| {
                    requests
                        .iter()
                        .filter(|r| r.first_wave)
                        .filter_map(|r| pick(r))
                        .collect()
                })
                .collect(),
            width: super::charts::SMALL_WIDTH,
        }
    };
    let ttft_cdf = cdf("TTFT", "ms", |r| r.ttft_ms);
    let tpot_cdf = cdf("TPOT", "ms", |r| r.tpot_ms);
    let e2e_cdf = cdf("E2E", "ms", |r| Some((r.end_s - r.start_s) * 1000.0));
    // Run ids sort by start time: the k-th of an arm's runs here is its k-th repeat.
    let mut seen: Vec<&str> = Vec::new();
    let timelines = runs
        .iter()
        .map(|run_id| {
            let arm = arm_of(input.artifacts, run_id).unwrap_or("unknown arm");
            seen.push(arm);
            let k = seen.iter().filter(|a| **a == arm).count();
            let of = runs
                .iter()
                .filter(|r| arm_of(input.artifacts, r) == Some(arm))
                .count();
            let cell = input
                .runs
                .iter()
                .find(|r| &r.run_id == run_id)
                .map(|r| super::decision::cell_label(&r.cell_id))
                .unwrap_or_default();
            let which = if of > 1 {
                format!(", run {k} of {of}")
            } else {
                String::new()
            };
            TimelineChart {
                title: format!("Requests over time: {arm}, {cell}{which}"),
                colour: palette.index(arm),
                bars: input
                    .requests
                    .iter()
                    .filter(|r| &r.run_id == run_id)
                    .map(|r| TimelineBar {
                        replica: r.replica,
                        request_index: r.request_index,
                        start_s: r.start_s,
                        first_token_s: r.first_token_s,
                        end_s: r.end_s,
                        first_wave: r.first_wave,
                    })
                    .collect(),
            }
        })
        .collect();
    let throughput = BarChart {
        title: format!("Aggregate output throughput ({scope})"),
        y_label: "aggregate output (tok/s)".to_owned(),
        bars: comparison
            .throughput
            .iter()
            .filter(|t| t.window == Window::All)
            .filter_map(|t| {
                let value = t.estimate.value()?;
                let interval = match &t.estimate {
                    ThroughputEstimate::Repeats {
                        interval: Some(i), ..
                    } => Some((i.low, i.high)),
                    _ => None,
                };
                Some(Bar {
                    name: t.arm.clone(),
                    colour: palette.index(&t.arm),
                    value,
                    interval,
                    label: fmt_unit(Some(value), "tok/s"),
                })
            })
            .collect(),
    };
    ComparisonCharts {
        ttft_cdf,
        tpot_cdf,
        e2e_cdf,
        timelines,
        throughput,
    }
}

/// Section 4: context-curve artifacts and their per-request points.
pub fn context_curve_view(input: &ReportInput<'_>) -> ContextCurveView {
    let curve: Vec<&Artifact> = input
        .artifacts
        .iter()
        .filter(|a| a.facts.workload.class == CONTEXT_CURVE_CLASS)
        .collect();
    let rows = curve
        .iter()
        .map(|a| {
            let ttft = a.figures.metrics.get(&MetricId::TtftMs);
            let prefill = a.figures.metrics.get(&MetricId::EffectivePrefillTps);
            ContextRowView {
                arm: a.facts.arm.clone(),
                run_id: a.facts.run_id.clone(),
                prompt_target: format!(
                    "{} tok",
                    fmt_num(Some(a.facts.workload.prompt_tokens_target as f64))
                ),
                concurrency: format!("C{} per replica", a.facts.workload.concurrency_per_replica),
                ttft_mean: fmt_unit(ttft.and_then(|s| s.mean), "ms"),
                ttft_p50: fmt_unit(ttft.and_then(|s| s.p50), "ms"),
                ttft_p95: fmt_unit(ttft.and_then(|s| s.p95), "ms"),
                prefill_mean: fmt_unit(prefill.and_then(|s| s.mean), "tok/s"),
            }
        })
        .collect();
    ContextCurveView { rows }
}

/// Section 6: the manifest's declared controls and each comparison's control verdicts.
pub fn controls_view(
    manifest: &WorkloadManifest,
    comparisons: &[(String, &Comparison)],
) -> ControlsView {
    ControlsView {
        declared: manifest.controls.clone(),
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

fn verdict_text(verdict: &Verdict) -> (&'static str, &'static str, String) {
    match verdict {
        Verdict::Pass => ("pass", "pass", String::new()),
        Verdict::Fail(reason) => ("fail", "fail", reason.clone()),
        Verdict::NotRun(reason) => ("not run", "missing", reason.clone()),
        Verdict::NotApplicable(reason) => ("n/a", "", reason.clone()),
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

/// Section 8: spec-decode figures per arm, run and replica, with tokens per chunk.
pub fn spec_decode_view(
    plan: &RunPlan,
    artifacts: &[Artifact],
    runs: &[RunInfo],
    chunks: &[TokensPerChunk],
) -> Vec<SpecDecodeRow> {
    // One row per arm and cell: the runs' and replicas' figures averaged.
    let mut groups: Vec<((String, String), Vec<&Artifact>)> = Vec::new();
    for a in artifacts {
        let has = a
            .figures
            .spec_decode
            .iter()
            .any(|s| s.acceptance_rate.is_some());
        if !has {
            continue;
        }
        let cell = runs
            .iter()
            .find(|r| r.run_id == a.facts.run_id)
            .map(|r| r.cell_id.clone())
            .unwrap_or_default();
        let key = (a.facts.arm.clone(), cell);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(a),
            None => groups.push((key, vec![a])),
        }
    }
    groups.sort_by_key(|((arm, cell), _)| {
        (
            crate::rules::stage::plan_rank(plan, arm),
            super::decision::cell_label(cell),
        )
    });
    let mean = |values: Vec<f64>| {
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    };
    groups
        .into_iter()
        .map(|((arm, cell), group)| {
            let specs: Vec<&crate::rules::input::SpecDecode> =
                group.iter().flat_map(|a| &a.figures.spec_decode).collect();
            let ids: Vec<&str> = group.iter().map(|a| a.facts.run_id.as_str()).collect();
            SpecDecodeRow {
                arm,
                run_id: ids.join(", "),
                cell: super::decision::cell_label(&cell),
                replica: group.len().to_string(),
                acceptance_rate: fmt_percent(mean(
                    specs.iter().filter_map(|s| s.acceptance_rate).collect(),
                )),
                mean_accepted_length: fmt_unit(
                    mean(
                        specs
                            .iter()
                            .filter_map(|s| s.mean_accepted_length)
                            .collect(),
                    ),
                    "tok",
                ),
                tokens_per_chunk: fmt_num(mean(
                    chunks
                        .iter()
                        .filter(|c| ids.contains(&c.run_id.as_str()))
                        .map(|c| c.tokens_per_chunk)
                        .collect(),
                )),
            }
        })
        .collect()
}

/// Section 9: per run with scrapes a queue chart (or why there is none), the client-side
/// queueing of every run, and the server-reported timings where a server gave them.
pub fn server_view(
    plan: &RunPlan,
    artifacts: &[Artifact],
    runs_info: &[RunInfo],
    queues: &[RunQueue],
    known_queue_gauges: &str,
    client: &[ClientQueue],
    timings: &[ServerTimings],
) -> ServerView {
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
    let queue = ordered
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
    ServerView {
        queue,
        runs,
        client_queue,
        timings,
    }
}

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
                            .unwrap_or_else(|| rule_name(*rule).to_owned()),
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
                    .unwrap_or_else(|| rule_name(*rule).to_owned())
            })
            .collect(),
        matrix,
    }
}

/// The evidence a rule's verdict counts, in a few words.
fn rule_evidence(rule: AdvanceRule, runs: &[&Artifact]) -> String {
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
fn functional_checks<'a>(runs: impl Iterator<Item = &'a Artifact>) -> Vec<FunctionalCheckView> {
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

fn rule_name(rule: AdvanceRule) -> &'static str {
    match rule {
        AdvanceRule::Completion => "completion",
        AdvanceRule::Canaries => "canaries",
        AdvanceRule::Functional => "functional",
        AdvanceRule::PerformanceClaim => "performance claim",
        AdvanceRule::Topology => "topology",
    }
}

/// Section 12: metric definitions and the runs' environment.
pub fn appendix_view(
    plan: &RunPlan,
    definitions: &[(String, String)],
    artifacts: &[Artifact],
    runs: &[RunInfo],
) -> AppendixView {
    AppendixView {
        definitions: definitions
            .iter()
            .map(|(name, text)| DefinitionView {
                name: name.clone(),
                text: text.clone(),
            })
            .collect(),
        runs: {
            let mut ordered: Vec<&Artifact> = artifacts.iter().collect();
            ordered.sort_by_key(|a| {
                (
                    crate::rules::stage::plan_rank(plan, &a.facts.arm),
                    a.facts.run_id.clone(),
                )
            });
            ordered
        }
        .into_iter()
        .map(|a| {
            let info = runs.iter().find(|r| r.run_id == a.facts.run_id);
            RunView {
                run_id: a.facts.run_id.clone(),
                arm: a.facts.arm.clone(),
                stage: a.facts.stage.clone(),
                class: format!("{}{}", a.facts.workload.class, a.facts.workload.api.note()),
                runtime: a.facts.runtime.clone(),
                config: a
                    .facts
                    .config
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                status: a.facts.status.as_str().to_owned(),
                started_utc: info.map_or_else(|| NA.to_owned(), |i| i.started_utc.clone()),
                ended_utc: info
                    .and_then(|i| i.ended_utc.clone())
                    .unwrap_or_else(|| NA.to_owned()),
                servers: info.map_or_else(String::new, |i| i.servers.join("; ")),
            }
        })
        .collect(),
    }
}
