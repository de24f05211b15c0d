//! The context curve's section: each arm's TTFT and prefill against prompt length.

use crate::rules::headline::CONTEXT_CURVE_CLASS;
use crate::rules::input::{Artifact, MetricId};

use crate::report::format::{fmt_num, fmt_unit};
use crate::report::input::*;
use crate::report::view::*;

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
