//! Per stage, its own comparisons at a glance: each arm against its control on the figures
//! a decision turns on (aggregate throughput, mean decode, TTFT p50 and p95, median TPOT,
//! goodput), the difference with the interval the verdict uses, a direction cue (better,
//! worse, or not resolved: the interval includes zero or there is none), the first-wave
//! window beside the full one where they disagree, and the stage's claims checked.

use serde::Serialize;

use crate::metric::Window;
use crate::report::format::{fmt_diff, fmt_num, fmt_percent, fmt_throughput_difference};
use crate::rules::compare::{
    Comparison, MetricComparison, ThroughputDifference, ThroughputEstimate,
};
use crate::rules::coverage::StageCoverage;
use crate::rules::effect::Effect;
use crate::rules::input::MetricId;
use crate::rules::load::LoadBasis;
use crate::rules::stage::StageComparison;
use crate::stats::Percentile;

/// One stage's comparison on one workload.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StagePairsView {
    pub stage: String,
    pub workload: String,
    /// Anchor id of the stage block.
    pub anchor: String,
    pub columns: Vec<ColumnView>,
    pub rows: Vec<PairRowView>,
    /// The stage's claims, checked (shown under its first workload only).
    pub claims: Vec<String>,
    pub warnings: Vec<String>,
    /// Why there is no comparison (a refusal), when there is none.
    pub refusal: Option<String>,
    /// A workload a chart carries better (the context curve's cells) or a section of its own
    /// (a declared class's: sessions, traces, prefix groups): folded away.
    pub minor: bool,
    /// Why it is folded away, shown on its fold.
    pub minor_note: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ColumnView {
    pub name: String,
    /// `higher is better` / `lower is better`.
    pub better: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairRowView {
    pub arm: String,
    /// `control` or `vs K12: spec_depth 12 → 4`.
    pub against: String,
    pub cells: Vec<PairCellView>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairCellView {
    /// The arm's own figure.
    pub value: String,
    /// Difference to the control with its interval, empty for a control.
    pub difference: String,
    /// `▲ better`, `▼ worse`, `≈ not resolved`, empty for a control.
    pub cue: String,
    /// `better`, `worse`, `unresolved`, empty.
    pub class: String,
    /// The same difference after the first wave, when it tells another story.
    pub after_first_wave: String,
}

/// How a difference reads against the control's own figure `reference`: its cue and class
/// (a resolved difference under the smallest effect that matters is negligible).
fn cue(
    difference: Option<f64>,
    interval: Option<(f64, f64)>,
    reference: Option<f64>,
    higher_is_better: bool,
    min_effect: f64,
) -> (String, String) {
    let Some(d) = difference.filter(|d| d.is_finite()) else {
        return (String::new(), String::new());
    };
    let (cue, class) =
        match Effect::with_share(d, interval, reference, higher_is_better, min_effect) {
            Effect::Better => ("▲ better", "better"),
            Effect::Worse => ("▼ worse", "worse"),
            Effect::Negligible => ("≈ negligible", "unresolved"),
            Effect::NotResolved => ("≈ not resolved", "unresolved"),
            Effect::NoInterval => ("≈ no interval", "unresolved"),
        };
    (cue.to_owned(), class.to_owned())
}

fn with_interval(d: Option<f64>, interval: Option<(f64, f64)>) -> String {
    match interval {
        Some((low, high)) => format!(
            "{} [{}, {}]",
            fmt_diff(d),
            fmt_diff(Some(low)),
            fmt_diff(Some(high))
        ),
        None => fmt_diff(d),
    }
}

/// Which figure of a metric a column shows.
#[derive(Clone, Copy)]
enum Figure {
    Mean,
    Percentile(Percentile),
}

/// The arm's figure over `window`: the mean of its runs' means or percentiles.
fn arm_figure(m: &MetricComparison, arm: &str, window: Window, figure: Figure) -> Option<f64> {
    let a = m.arm(arm, window)?;
    let values: Vec<f64> = a
        .runs
        .iter()
        .filter_map(|r| match figure {
            Figure::Mean => r.stats.mean,
            Figure::Percentile(q) => r.stats.percentile(q),
        })
        .collect();
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// A difference and its interval, either possibly absent.
type Estimate = (Option<f64>, Option<(f64, f64)>);

/// The difference to the control over `window` and its interval.
fn metric_difference(
    m: &MetricComparison,
    arm: &str,
    window: Window,
    figure: Figure,
) -> Option<Estimate> {
    let d = m.difference(arm, window)?;
    Some(match figure {
        Figure::Mean => (d.difference, d.welch.map(|w| (w.low, w.high))),
        Figure::Percentile(q) => {
            let p = d.percentiles.iter().find(|p| p.percentile == q)?;
            (p.comparison.estimate(), p.comparison.interval())
        }
    })
}

fn metric_cell(
    c: &Comparison,
    arm: &str,
    metric: MetricId,
    figure: Figure,
    has_control: bool,
) -> PairCellView {
    let Some(m) = c.metrics.iter().find(|m| m.metric == metric) else {
        return empty_cell();
    };
    let value = fmt_num(arm_figure(m, arm, Window::All, figure));
    if !has_control {
        return PairCellView {
            value,
            ..empty_cell()
        };
    }
    let higher = metric.higher_is_better();
    let Some((d, interval)) = metric_difference(m, arm, Window::All, figure) else {
        return PairCellView {
            value,
            ..empty_cell()
        };
    };
    // The control's own figure, the base of the smallest effect that matters.
    let reference = m
        .difference(arm, Window::All)
        .and_then(|d| arm_figure(m, &d.reference, Window::All, figure));
    let min_effect = c.min_effect_for(metric.as_str());
    let (cue, class) = cue(d, interval, reference, higher, min_effect);
    let (cue, class) = m
        .difference(arm, Window::All)
        .and_then(|d| c.load_differs(arm, &d.reference, LoadBasis::PerReplica))
        .map_or((cue, class), |_| load_differs_cue());
    // The first wave sets the start-up tail of TTFT: its window shown beside the full one
    // where the verdict differs or the difference moves by more than a quarter.
    let after = metric_difference(m, arm, Window::AfterFirstWave, figure)
        .filter(|_| metric == MetricId::TtftMs)
        .filter(|(d2, i2)| {
            let (_, class2) = self::cue(*d2, *i2, reference, higher, min_effect);
            class2 != class
                || match (d, d2) {
                    (Some(a), Some(b)) => (a - b).abs() > 0.25 * a.abs().max(b.abs()),
                    _ => false,
                }
        })
        .map(|(d2, i2)| {
            let (cue2, _) = self::cue(d2, i2, reference, higher, min_effect);
            format!("after the first wave {} {cue2}", with_interval(d2, i2))
        })
        .unwrap_or_default();
    PairCellView {
        value,
        difference: with_interval(d, interval),
        cue,
        class,
        after_first_wave: after,
    }
}

fn empty_cell() -> PairCellView {
    PairCellView {
        value: String::new(),
        difference: String::new(),
        cue: String::new(),
        class: String::new(),
        after_first_wave: String::new(),
    }
}

fn throughput_cell(c: &Comparison, arm: &str) -> PairCellView {
    let Some(t) = c.throughput(arm, Window::All) else {
        return empty_cell();
    };
    let mut value = match &t.estimate {
        ThroughputEstimate::Repeats {
            mean,
            interval: Some(i),
            ..
        } => format!(
            "{} [{}, {}]",
            fmt_num(Some(*mean)),
            fmt_num(Some(i.low)),
            fmt_num(Some(i.high))
        ),
        e => fmt_num(e.value()),
    };
    if let (Some(g), Some(per)) = (t.gpus.filter(|g| g.count > 1), t.per_gpu) {
        value.push_str(&format!(", {} per GPU on {}", fmt_num(Some(per)), g.count));
        if let Some(e) = &t.scaling_efficiency {
            value.push_str(&format!(
                " ({} of {})",
                fmt_percent(Some(e.value)),
                e.against
            ));
        }
    }
    let own = t.estimate.value();
    let cell = difference_cell(
        value,
        own,
        t.difference.as_ref(),
        fmt_throughput_difference,
        c.min_effect_for("output_tps"),
    );
    at_load(c, arm, t.reference.as_deref(), cell)
}

/// The cue of a difference between arms offered different load: no better or worse.
fn load_differs_cue() -> (String, String) {
    ("≠ load differs".to_owned(), "unresolved".to_owned())
}

/// `cell` (a throughput or goodput difference) with its cue replaced when `arm` and its
/// `reference` differ in aggregate load, or realized output lengths beyond the guard.
fn at_load(c: &Comparison, arm: &str, reference: Option<&str>, cell: PairCellView) -> PairCellView {
    if cell.difference.is_empty() {
        return cell;
    }
    if reference
        .and_then(|r| c.load_differs(arm, r, LoadBasis::Aggregate))
        .is_some()
    {
        let (cue, class) = load_differs_cue();
        return PairCellView { cue, class, ..cell };
    }
    let lengths_differ = c.output_length.iter().any(|(a, r, verdict)| {
        a == arm
            && Some(r.as_str()) == reference
            && matches!(
                verdict,
                crate::rules::compare::OutputLength::NotComparable { .. }
            )
    });
    if lengths_differ {
        return PairCellView {
            cue: "≠ not comparable: output lengths differ".to_owned(),
            class: "unresolved".to_owned(),
            ..cell
        };
    }
    cell
}

fn goodput_cell(c: &Comparison, arm: &str) -> PairCellView {
    let Some(g) = c
        .goodput
        .iter()
        .find(|g| g.arm == arm && g.window == Window::All)
    else {
        return empty_cell();
    };
    let value = format!(
        "{} ({} attained)",
        fmt_num(g.goodput_tps.value()),
        fmt_percent(g.share.as_ref().map(|s| s.share))
    );
    let cell = difference_cell(
        value,
        g.goodput_tps.value(),
        g.difference.as_ref(),
        |d| with_interval(Some(d.estimate), d.interval.map(|i| (i.low, i.high))),
        c.min_effect_for("goodput_tps"),
    );
    at_load(c, arm, g.reference.as_deref(), cell)
}

/// A run-level figure's cell: `value` (the arm's figure `own`), its difference to the
/// control as `text` writes it, and the cue its interval and size give (higher is better).
fn difference_cell(
    value: String,
    own: Option<f64>,
    difference: Option<&ThroughputDifference>,
    text: fn(&ThroughputDifference) -> String,
    min_effect: f64,
) -> PairCellView {
    let Some(d) = difference else {
        return PairCellView {
            value,
            ..empty_cell()
        };
    };
    let reference = own.map(|own| own - d.estimate);
    let interval = d.interval.map(|i| (i.low, i.high));
    let (cue, class) = cue(Some(d.estimate), interval, reference, true, min_effect);
    PairCellView {
        value,
        difference: text(d),
        cue,
        class,
        after_first_wave: String::new(),
    }
}

/// The columns, in order.
fn columns(has_goodput: bool) -> Vec<ColumnView> {
    let col = |name: &str, better: &str| ColumnView {
        name: name.to_owned(),
        better: format!("{better} is better"),
    };
    let mut out = vec![
        col("aggregate output, tok/s", "higher"),
        col("decode mean, tok/s", "higher"),
        col("TTFT p50, ms", "lower"),
        col("TTFT p95, ms", "lower"),
        col("TPOT p50, ms", "lower"),
    ];
    if has_goodput {
        out.push(col("goodput, tok/s", "higher"));
    }
    out
}

/// `; load differs: 16 in flight, 8 per GPU, 50 requests per replica against 8 in flight,
/// …` when `arm` and its reference were offered different load (its cells then carry no
/// better or worse).
fn load_note(c: &Comparison, arm: &str, reference: Option<&str>) -> String {
    let Some(reference) = reference else {
        return String::new();
    };
    match (c.load(arm), c.load(reference)) {
        (Some(a), Some(r)) if a.differs(r, LoadBasis::Aggregate).is_some() => {
            format!("; load differs: {} against {}", a.short(), r.short())
        }
        _ => String::new(),
    }
}

/// Anchor id of a stage block: `stage-3-matched-topology`.
pub fn stage_anchor(order: usize, stage: &str) -> String {
    let slug: String = stage
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    format!("stage-{order}-{}", slug.trim_matches('-'))
}

/// Every stage comparison at a glance, the stage's claims under its first workload.
/// The workloads of `declared` classes (declared beside the manifest) are folded away with
/// the context curve's: the sessions-and-cache section carries them.
pub fn stage_pairs(
    stages: &[StageComparison],
    coverage: &[StageCoverage],
    declared: &[String],
) -> Vec<StagePairsView> {
    let mut seen: Vec<String> = Vec::new();
    stages
        .iter()
        .map(|s| {
            let first = !seen.contains(&s.stage);
            if first {
                seen.push(s.stage.clone());
            }
            let claims = if first {
                coverage
                    .iter()
                    .filter(|c| c.stage == s.stage)
                    .flat_map(|c| {
                        c.selected
                            .iter()
                            .map(|x| ("selected", x))
                            .chain(c.rejected.iter().map(|x| ("rejected", x)))
                    })
                    .map(|(side, claim)| {
                        format!(
                            "{side} \"{}\": {}: {}",
                            claim.clause, claim.verdict, claim.reason
                        )
                    })
                    .collect()
            } else {
                Vec::new()
            };
            let order = coverage
                .iter()
                .find(|c| c.stage == s.stage)
                .map_or(0, |c| c.order as usize);
            let anchor = if first {
                stage_anchor(order, &s.stage)
            } else {
                String::new()
            };
            let curve = s
                .workload
                .starts_with(crate::rules::headline::CONTEXT_CURVE_CLASS);
            // The workload label starts with its class (`chat-sessions, 2048 tokens, …`).
            let own_section = declared.iter().any(|class| {
                s.workload
                    .strip_prefix(class.as_str())
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with([',', '.']))
            });
            let minor = curve || own_section;
            let minor_note = if curve {
                "a context-curve cell: the curve below carries it"
            } else if own_section {
                "a class declared beside the manifest: the sessions, traces and prefix-cache \
                 section carries it"
            } else {
                ""
            }
            .to_owned();
            match &s.result {
                Err(refusal) => StagePairsView {
                    stage: s.stage.clone(),
                    workload: s.workload.clone(),
                    anchor,
                    columns: Vec::new(),
                    rows: Vec::new(),
                    claims,
                    warnings: Vec::new(),
                    refusal: Some(refusal.reason.clone()),
                    minor,
                    minor_note: minor_note.clone(),
                },
                Ok(c) => {
                    let has_goodput = !c.goodput.is_empty();
                    let rows = c
                        .arms
                        .iter()
                        .map(|arm| {
                            let control = c.controls.iter().find(|v| v.arm == *arm);
                            let has_control = control.is_some();
                            let mut cells = vec![
                                throughput_cell(c, arm),
                                metric_cell(c, arm, MetricId::DecodeTps, Figure::Mean, has_control),
                                metric_cell(
                                    c,
                                    arm,
                                    MetricId::TtftMs,
                                    Figure::Percentile(Percentile::P50),
                                    has_control,
                                ),
                                metric_cell(
                                    c,
                                    arm,
                                    MetricId::TtftMs,
                                    Figure::Percentile(Percentile::P95),
                                    has_control,
                                ),
                                metric_cell(
                                    c,
                                    arm,
                                    MetricId::TpotMs,
                                    Figure::Percentile(Percentile::P50),
                                    has_control,
                                ),
                            ];
                            if has_goodput {
                                cells.push(goodput_cell(c, arm));
                            }
                            PairRowView {
                                arm: arm.clone(),
                                against: match control.map(|v| (v, &v.control)) {
                                    Some((
                                        v,
                                        crate::rules::control::Control::OneVariable {
                                            key,
                                            baseline,
                                            arm,
                                            ..
                                        },
                                    )) => format!("vs {}: {key} {baseline} → {arm}", v.reference),
                                    Some((v, c)) => format!("vs {}: {}", v.reference, c.reason()),
                                    None => "control".to_owned(),
                                } + &load_note(
                                    c,
                                    arm,
                                    control.map(|v| v.reference.as_str()),
                                ),
                                cells,
                            }
                        })
                        .collect();
                    StagePairsView {
                        stage: s.stage.clone(),
                        workload: s.workload.clone(),
                        anchor,
                        columns: columns(has_goodput),
                        rows,
                        claims,
                        warnings: c.warnings.clone(),
                        refusal: None,
                        minor,
                        minor_note,
                    }
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cues_read_the_direction_and_the_interval() {
        let control = Some(100.0);
        assert_eq!(
            cue(Some(5.0), Some((1.0, 9.0)), control, true, 0.02).0,
            "▲ better"
        );
        assert_eq!(
            cue(Some(5.0), Some((1.0, 9.0)), control, false, 0.02).0,
            "▼ worse"
        );
        assert_eq!(
            cue(Some(-5.0), Some((-9.0, -1.0)), control, false, 0.02).0,
            "▲ better"
        );
        assert_eq!(
            cue(Some(5.0), Some((-1.0, 9.0)), control, true, 0.02).0,
            "≈ not resolved"
        );
        assert_eq!(cue(Some(5.0), None, control, true, 0.02).0, "≈ no interval");
        // Resolved but under 2% of the control's figure: neither better nor worse.
        assert_eq!(
            cue(Some(1.5), Some((1.0, 2.0)), control, false, 0.02).0,
            "≈ negligible"
        );
    }

    #[test]
    fn anchors_are_slugs() {
        assert_eq!(
            stage_anchor(3, "matched topology"),
            "stage-3-matched-topology"
        );
        assert_eq!(
            stage_anchor(2, "SGLang optimization"),
            "stage-2-sglang-optimization"
        );
    }
}
