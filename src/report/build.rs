//! The whole view ([`super::view::ReportView`]) assembled from its sections
//! ([`super::sections`]), each built from the rules' results, the plan, the manifest and the
//! query layer's figures ([`super::input::ReportInput`]), in page order.

use crate::rules::compare::Comparison;

use super::input::*;
use super::sections::*;
use super::view::*;

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
    let palette = crate::report::sections::curves::campaign_palette(input);
    let mut headline = match input.headline {
        Some(Ok(comparison)) => HeadlineView {
            comparison: Some(comparison_view(comparison, input, &palette)),
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
                comparison: Some(comparison_view(comparison, input, &palette)),
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
        decision: super::sections::decision::decision_view(input),
        plan: plan_view(input.plan, input.check),
        stage_pairs: super::sections::stages::stage_pairs(
            input.screens,
            &input.check.coverage.stages,
            &super::sections::cache::declared_classes(input),
        ),
        charts: super::sections::curves::decision_charts(input),
        headline,
        context_curve: context_curve_view(input),
        screens,
        controls: controls_view(input.manifest, &input.check.controls, &comparisons),
        topology: topology_view(&input.check.topology),
        slo: super::sections::slo::slo_view(
            input.slos,
            &input.check.stages,
            input.tradeoff,
            input.capacity,
            &input
                .artifacts
                .iter()
                .filter(|a| a.facts.workload.sessions.is_some())
                .map(|a| a.facts.workload.class.clone())
                .collect::<Vec<_>>(),
        ),
        spec_decode: spec_decode_view(
            input.plan,
            input.artifacts,
            input.runs,
            input.tokens_per_chunk,
        ),
        server: server_view(input),
        cache: super::sections::cache::cache_view(input),
        verdicts: verdicts_view(input.plan, input.check, input.artifacts, input.snippets),
        open_gates: input.plan.post_campaign_open_gates.clone(),
        appendix: appendix_view(input.plan, input.definitions, input.artifacts, input.runs),
    }
}
