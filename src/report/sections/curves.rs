//! The charts that carry decisions, as chart data: the throughput-per-GPU against
//! throughput-per-user trade-off with its Pareto frontier (per performance workload), a
//! metric-vs-parameter curve for each one-variable sweep (draft depth, chunk size: every
//! arm recorded on the sweep's workload whose configuration differs from the sweep's centre
//! in that key alone, whatever its stage), TTFT and decode against context length,
//! attainment against load for each capacity search, and acceptance per draft position.
//!
//! Colours are assigned per chart (the chart's arms in plan order), so the hues of one chart
//! are always distinct.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::report::charts::{
    CurveChart, CurvePoint, CurveSeries, ParetoChart, ParetoPoint, ReferenceLine, SMALL_WIDTH,
};
use crate::report::input::ReportInput;
pub use crate::report::input::SpecPosition;
use crate::rules::control::Control;
use crate::rules::headline::CONTEXT_CURVE_CLASS;
use crate::rules::input::{Artifact, MetricId};
use crate::stats::Percentile;

/// One group of small multiples.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CurveGroup {
    pub title: String,
    /// What the points are and what they leave out.
    pub note: String,
    pub charts: Vec<CurveChart>,
}

/// Every decision chart's data.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DecisionCharts {
    pub pareto: Vec<ParetoChart>,
    pub sweeps: Vec<CurveGroup>,
    pub context: Option<CurveGroup>,
    pub capacity: Vec<CurveChart>,
    pub positions: Option<CurveChart>,
}

/// Colour indices of `arms`: the report's one palette ([`campaign_palette`]), so each arm
/// keeps its colour in every chart.
fn colours(input: &ReportInput<'_>, arms: &BTreeSet<&str>) -> BTreeMap<String, usize> {
    let palette = campaign_palette(input);
    arms.iter()
        .map(|a| ((*a).to_owned(), palette.index(a)))
        .collect()
}

/// The report's palette: every arm of the plan and of the artifacts, in plan order (arms the
/// plan does not name after, by first appearance).
pub fn campaign_palette(input: &ReportInput<'_>) -> crate::report::charts::Palette {
    let mut arms: Vec<&str> = input
        .plan
        .stages_in_order()
        .iter()
        .flat_map(|s| s.arms().iter().map(String::as_str).collect::<Vec<_>>())
        .chain(input.artifacts.iter().map(|a| a.facts.arm.as_str()))
        .collect();
    let mut seen = BTreeSet::new();
    arms.retain(|a| seen.insert(*a));
    arms.sort_by_key(|a| plan_rank(input, a));
    crate::report::charts::Palette::campaign(arms)
}

/// The arm's position in the plan (arms the plan does not name last).
pub fn plan_rank(input: &ReportInput<'_>, arm: &str) -> usize {
    crate::rules::stage::plan_rank(input.plan, arm)
}

/// Mean of the runs' values, with the one run's own interval when there is one run.
fn mean_point(x: f64, values: &[(f64, Option<f64>, Option<f64>)]) -> Option<CurvePoint> {
    match values {
        [] => None,
        [(y, low, high)] => Some(CurvePoint {
            x,
            y: *y,
            low: *low,
            high: *high,
        }),
        many => Some(CurvePoint {
            x,
            y: many.iter().map(|v| v.0).sum::<f64>() / many.len() as f64,
            low: None,
            high: None,
        }),
    }
}

/// What a sweep curve plots from a run.
#[derive(Clone, Copy)]
enum Plot {
    DecodeMean,
    Percentile(MetricId, Percentile),
    Acceptance,
}

impl Plot {
    fn label(self) -> &'static str {
        match self {
            Plot::DecodeMean => "decode mean (tok/s)",
            Plot::Percentile(MetricId::TtftMs, Percentile::P50) => "TTFT p50 (ms)",
            Plot::Percentile(MetricId::TtftMs, _) => "TTFT p95 (ms)",
            Plot::Percentile(MetricId::TpotMs, _) => "TPOT p50 (ms)",
            Plot::Percentile(..) => "value",
            Plot::Acceptance => "draft acceptance rate",
        }
    }

    fn of(self, a: &Artifact) -> Option<(f64, Option<f64>, Option<f64>)> {
        match self {
            Plot::DecodeMean => {
                let s = a.figures.metrics.get(&MetricId::DecodeTps)?;
                Some((s.mean?, s.ci95_low, s.ci95_high))
            }
            Plot::Percentile(m, q) => {
                let s = a.figures.metrics.get(&m)?;
                let b = s.interval(q);
                Some((s.percentile(q)?, b.low, b.high))
            }
            Plot::Acceptance => {
                let rates: Vec<f64> = a
                    .figures
                    .spec_decode
                    .iter()
                    .filter_map(|s| s.acceptance_rate)
                    .collect();
                (!rates.is_empty())
                    .then(|| (rates.iter().sum::<f64>() / rates.len() as f64, None, None))
            }
        }
    }
}

/// A parameter value as a tick: integers bare (`12`), others in the number policy.
fn short_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e9 {
        format!("{v:.0}")
    } else {
        crate::report::format::fmt_num(Some(v))
    }
}

/// `1K`, `2K`, `8K` for token counts that are multiples of 1024, else the number.
fn tokens_label(v: f64) -> String {
    if v >= 1024.0 && (v / 1024.0).fract() == 0.0 {
        format!("{}K", v / 1024.0)
    } else if v >= 1000.0 {
        format!("{}K", (v / 1024.0).round())
    } else {
        crate::report::format::fmt_num(Some(v))
    }
}

/// A one-variable sweep found in the data, and its charts.
struct Sweep {
    fingerprint: String,
    key: String,
    workload: String,
    /// Its arms, in value order.
    arms: Vec<String>,
    group: CurveGroup,
}

/// The one-variable sweeps: per (workload, key) with at least three values.
fn sweeps(input: &ReportInput<'_>) -> Vec<Sweep> {
    // (fingerprint, key, centre arm) of every one-variable edge whose values are numbers.
    let mut centres: Vec<(String, String, String, String)> = Vec::new();
    for s in input.screens {
        let Ok(c) = &s.result else { continue };
        for v in &c.controls {
            if let Control::OneVariable {
                key, baseline, arm, ..
            } = &v.control
                && baseline.parse::<f64>().is_ok()
                && arm.parse::<f64>().is_ok()
                && !centres
                    .iter()
                    .any(|(f, k, _, _)| *f == c.fingerprint && k == key)
            {
                centres.push((
                    c.fingerprint.clone(),
                    key.clone(),
                    v.reference.clone(),
                    s.workload.clone(),
                ));
            }
        }
    }
    let mut out = Vec::new();
    for (fingerprint, key, centre, workload) in centres {
        let members: Vec<&Artifact> = input
            .artifacts
            .iter()
            .filter(|a| {
                a.facts.fingerprint == fingerprint
                    && a.facts.status == crate::artifact::run::Status::Complete
            })
            .collect();
        let Some(centre_config) = members
            .iter()
            .find(|a| a.facts.arm == centre)
            .map(|a| a.facts.effective_config())
        else {
            continue;
        };
        // Arms whose configuration differs from the centre's in `key` alone.
        let mut by_value: BTreeMap<String, Vec<&Artifact>> = BTreeMap::new();
        for a in &members {
            let config = a.facts.effective_config();
            let same = a.facts.arm == centre
                || matches!(
                    crate::rules::control::control(&centre_config, &config),
                    Control::OneVariable { key: k, .. } if k == key
                );
            if let (true, Some(v)) = (same, config.get(&key)) {
                by_value.entry(v.to_owned()).or_default().push(a);
            }
        }
        let mut values: Vec<(f64, Vec<&Artifact>)> = by_value
            .into_iter()
            .filter_map(|(v, a)| Some((v.parse::<f64>().ok()?, a)))
            .collect();
        values.sort_by(|a, b| a.0.total_cmp(&b.0));
        if values.len() < 3 {
            continue;
        }
        let arms_of = |v: &[&Artifact]| -> String {
            let names: BTreeSet<&str> = v.iter().map(|a| a.facts.arm.as_str()).collect();
            names.into_iter().collect::<Vec<_>>().join(", ")
        };
        let tokens = key.contains("chunk") || key.contains("prefill");
        let plots: Vec<Plot> = if key.contains("spec") {
            vec![
                Plot::DecodeMean,
                Plot::Percentile(MetricId::TpotMs, Percentile::P50),
                Plot::Acceptance,
            ]
        } else {
            vec![
                Plot::Percentile(MetricId::TtftMs, Percentile::P50),
                Plot::DecodeMean,
                Plot::Percentile(MetricId::TpotMs, Percentile::P50),
            ]
        };
        let charts = plots
            .iter()
            .map(|plot| {
                let points: Vec<CurvePoint> = values
                    .iter()
                    .filter_map(|(x, runs)| {
                        let ys: Vec<_> = runs.iter().filter_map(|a| plot.of(a)).collect();
                        mean_point(*x, &ys)
                    })
                    .collect();
                CurveChart {
                    title: format!("{} vs {key}", plot.label()),
                    x_label: key.clone(),
                    y_label: plot.label().to_owned(),
                    log_x: tokens,
                    log_y: false,
                    x_ticks: values
                        .iter()
                        .map(|(x, _)| {
                            (
                                *x,
                                if tokens {
                                    tokens_label(*x)
                                } else {
                                    short_value(*x)
                                },
                            )
                        })
                        .collect(),
                    series: vec![CurveSeries {
                        name: key.clone(),
                        colour: 0,
                        points,
                    }],
                    reference: None,
                    width: SMALL_WIDTH,
                }
            })
            .collect();
        let legend: Vec<String> = values
            .iter()
            .map(|(x, runs)| format!("{key} {}: {}", short_value(*x), arms_of(runs)))
            .collect();
        let mut sweep_arms: Vec<String> = Vec::new();
        for (_, runs) in &values {
            for a in runs {
                if !sweep_arms.contains(&a.facts.arm) {
                    sweep_arms.push(a.facts.arm.clone());
                }
            }
        }
        let group = CurveGroup {
            title: format!("{key} sweep on {workload}"),
            note: format!(
                "Every arm recorded on this workload whose configuration differs from {centre}'s \
                 in {key} alone, whatever its stage ({}); whiskers: a single run's 95% interval.",
                legend.join("; ")
            ),
            charts,
        };
        out.push(Sweep {
            fingerprint,
            key,
            workload,
            arms: sweep_arms,
            group,
        });
    }
    out
}

fn context_curve(input: &ReportInput<'_>) -> Option<CurveGroup> {
    let curve: Vec<&Artifact> = input
        .artifacts
        .iter()
        .filter(|a| {
            a.facts.workload.class == CONTEXT_CURVE_CLASS
                && a.facts.status == crate::artifact::run::Status::Complete
        })
        .collect();
    let arms: BTreeSet<&str> = curve.iter().map(|a| a.facts.arm.as_str()).collect();
    if curve.len() < 2 {
        return None;
    }
    let colours = colours(input, &arms);
    let mut contexts: BTreeMap<u64, BTreeSet<u32>> = BTreeMap::new();
    for a in &curve {
        contexts
            .entry(a.facts.workload.prompt_tokens_target)
            .or_default()
            .insert(a.facts.workload.concurrency_per_replica);
    }
    let ticks: Vec<(f64, String)> = contexts
        .keys()
        .map(|ctx| (*ctx as f64, tokens_label(*ctx as f64)))
        .collect();
    // The curve is at the concurrency most of its cells use (C1); a cell at another (the
    // manifest's C8 stress level) is not a point of it: it is named in the note instead.
    let mut by_conc: BTreeMap<u32, usize> = BTreeMap::new();
    for a in &curve {
        *by_conc
            .entry(a.facts.workload.concurrency_per_replica)
            .or_default() += 1;
    }
    let conc = by_conc
        .iter()
        .max_by_key(|(c, n)| (**n, std::cmp::Reverse(**c)))
        .map_or(1, |(c, _)| *c);
    let others: Vec<String> = curve
        .iter()
        .filter(|a| a.facts.workload.concurrency_per_replica != conc)
        .filter_map(|a| {
            let ttft = Plot::Percentile(MetricId::TtftMs, Percentile::P50).of(a)?.0;
            let decode = Plot::DecodeMean.of(a).map(|d| d.0);
            Some(format!(
                "{} at {} C{}: TTFT p50 {} ms, decode mean {} tok/s",
                a.facts.arm,
                tokens_label(a.facts.workload.prompt_tokens_target as f64),
                a.facts.workload.concurrency_per_replica,
                crate::report::format::fmt_num(Some(ttft)),
                crate::report::format::fmt_num(decode)
            ))
        })
        .collect();
    let curve: Vec<&Artifact> = curve
        .into_iter()
        .filter(|a| a.facts.workload.concurrency_per_replica == conc)
        .collect();
    let arms: BTreeSet<&str> = curve.iter().map(|a| a.facts.arm.as_str()).collect();
    let lines: Vec<(&str, u32)> = {
        let mut v: Vec<&str> = arms.iter().copied().collect();
        v.sort_by_key(|a| plan_rank(input, a));
        v.into_iter().map(|a| (a, conc)).collect()
    };
    let ticks: Vec<(f64, String)> = ticks
        .into_iter()
        .filter(|(x, _)| {
            curve
                .iter()
                .any(|a| a.facts.workload.prompt_tokens_target as f64 == *x)
        })
        .collect();
    let chart = |plot: Plot, log_y: bool| CurveChart {
        title: format!("{} vs context", plot.label()),
        x_label: "prompt tokens (log)".to_owned(),
        y_label: if log_y {
            format!("{} (log)", plot.label())
        } else {
            plot.label().to_owned()
        },
        log_x: true,
        log_y,
        x_ticks: ticks.clone(),
        series: lines
            .iter()
            .map(|(arm, conc)| CurveSeries {
                name: (*arm).to_owned(),
                colour: colours[*arm],
                points: contexts
                    .keys()
                    .filter_map(|ctx| {
                        let ys: Vec<_> = curve
                            .iter()
                            .filter(|a| {
                                a.facts.arm == *arm
                                    && a.facts.workload.concurrency_per_replica == *conc
                                    && a.facts.workload.prompt_tokens_target == *ctx
                            })
                            .filter_map(|a| plot.of(a))
                            .collect();
                        mean_point(*ctx as f64, &ys)
                    })
                    .collect(),
            })
            .collect(),
        reference: None,
        width: SMALL_WIDTH,
    };
    Some(CurveGroup {
        title: "TTFT and decode against context length".to_owned(),
        note: format!(
            "The context-curve cells at C{conc}, one line per arm; whiskers: the run's 95% \
             interval (none where too few requests bound it).{}",
            if others.is_empty() {
                String::new()
            } else {
                format!(
                    " Not on the curve (another concurrency): {}.",
                    others.join("; ")
                )
            }
        ),
        charts: vec![
            chart(Plot::Percentile(MetricId::TtftMs, Percentile::P50), true),
            chart(Plot::DecodeMean, false),
        ],
    })
}

fn pareto(input: &ReportInput<'_>) -> Vec<ParetoChart> {
    // A class declared beside the manifest (sessions, traces, prefix groups) has its own
    // section; its trade-off points stay in the tables.
    let declared = super::cache::declared_classes(input);
    super::slo::performance_groups(input.tradeoff)
        .into_iter()
        .filter(|group| {
            !declared
                .iter()
                .any(|class| group.starts_with(&format!("{class}.")))
        })
        .filter_map(|group| {
            let points: Vec<&crate::rules::input::TradeoffPoint> = input
                .tradeoff
                .iter()
                .filter(|p| {
                    p.frontier_group == group
                        && p.window == "all"
                        && !super::decision::is_probe(&p.cell_id)
                })
                // Context-curve cells run one request at a time: no throughput trade-off.
                .filter(|p| !p.frontier_group.starts_with(CONTEXT_CURVE_CLASS))
                .collect();
            let arms: BTreeSet<&str> = points.iter().map(|p| p.arm.as_str()).collect();
            if arms.len() < 2 {
                return None;
            }
            let colours = colours(input, &arms);
            let mut points: Vec<ParetoPoint> = points
                .iter()
                .filter_map(|p| {
                    Some(ParetoPoint {
                        name: p.arm.clone(),
                        colour: colours[p.arm.as_str()],
                        per_user: p.output_tps_per_user?,
                        per_gpu: p.output_tps_per_gpu?,
                        goodput_per_gpu: p.goodput_tps_per_gpu,
                        on_frontier: p.on_frontier == Some(true),
                        gpus: p.gpus,
                        in_flight_per_gpu: match (p.concurrency_per_replica, p.replicas, p.gpus) {
                            (Some(c), Some(r), Some(g)) if g > 0 => {
                                Some(f64::from(c) * f64::from(r) / f64::from(g))
                            }
                            _ => None,
                        },
                    })
                })
                .collect();
            points.sort_by_key(|p| plan_rank(input, &p.name));
            Some(ParetoChart {
                title: format!("Trade-off on {group}: tok/s per GPU vs tok/s per user"),
                points,
            })
        })
        .collect()
}

fn capacity(input: &ReportInput<'_>) -> Vec<CurveChart> {
    input
        .capacity
        .iter()
        .filter(|c| c.search.probes.len() >= 2)
        .map(|c| {
            let mut points: Vec<CurvePoint> = c
                .search
                .probes
                .iter()
                .filter_map(|p| {
                    let share = crate::stats::clopper_pearson(p.attained, p.requests)?;
                    Some(CurvePoint {
                        x: p.load,
                        y: share.share * 100.0,
                        low: Some(share.low * 100.0),
                        high: Some(share.high * 100.0),
                    })
                })
                .collect();
            points.sort_by(|a, b| a.x.total_cmp(&b.x));
            CurveChart {
                title: format!("{}: SLO attainment vs {}", c.search.arm, c.search.vary),
                x_label: format!("{} per replica", c.search.vary),
                y_label: "attained (%)".to_owned(),
                log_x: true,
                log_y: false,
                x_ticks: points.iter().map(|p| (p.x, short_value(p.x))).collect(),
                series: vec![CurveSeries {
                    name: c.search.arm.clone(),
                    colour: 0,
                    points,
                }],
                reference: Some(ReferenceLine {
                    label: format!(
                        "target {}",
                        crate::report::format::fmt_percent(Some(c.search.target))
                    ),
                    y: c.search.target * 100.0,
                }),
                width: SMALL_WIDTH,
            }
        })
        .collect()
}

fn positions(input: &ReportInput<'_>, sweeps: &[Sweep]) -> Option<CurveChart> {
    let arm_of = |run: &str| input.artifacts.iter().find(|a| a.facts.run_id == run);
    // The draft-depth sweep with the most arms exporting per-position counters: one line per
    // depth (a handful of distinct hues), on one workload.
    let has_positions = |arm: &str, fingerprint: &str| {
        input.spec_positions.iter().any(|p| {
            arm_of(&p.run_id)
                .is_some_and(|a| a.facts.arm == arm && a.facts.fingerprint == fingerprint)
        })
    };
    let sweep = sweeps
        .iter()
        .filter(|s| s.key.contains("spec"))
        .max_by_key(|s| {
            s.arms
                .iter()
                .filter(|a| has_positions(a, &s.fingerprint))
                .count()
        })?;
    let fingerprint = sweep.fingerprint.as_str();
    let arms: BTreeSet<&str> = sweep
        .arms
        .iter()
        .map(String::as_str)
        .filter(|a| has_positions(a, fingerprint))
        .collect();
    if arms.is_empty() {
        return None;
    }
    let colours = colours(input, &arms);
    let mut ordered: Vec<&str> = arms.iter().copied().collect();
    ordered.sort_by_key(|a| plan_rank(input, a));
    let workload = sweep.workload.clone();
    let series: Vec<CurveSeries> = ordered
        .iter()
        .map(|arm| {
            let mut at: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
            for p in input.spec_positions {
                if arm_of(&p.run_id)
                    .is_some_and(|a| a.facts.arm == *arm && a.facts.fingerprint == fingerprint)
                {
                    at.entry(p.position).or_default().push(p.acceptance_rate);
                }
            }
            CurveSeries {
                name: (*arm).to_owned(),
                colour: colours[*arm],
                points: at
                    .into_iter()
                    .map(|(pos, v)| CurvePoint {
                        x: f64::from(pos + 1),
                        y: v.iter().sum::<f64>() / v.len() as f64,
                        low: None,
                        high: None,
                    })
                    .collect(),
            }
        })
        .collect();
    let max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.x as u32))
        .max()?;
    let step = if max > 12 { 2 } else { 1 };
    Some(CurveChart {
        title: format!("Acceptance per draft position ({workload})"),
        x_label: "draft position".to_owned(),
        y_label: "drafts accepted at the position (fraction)".to_owned(),
        log_x: false,
        log_y: false,
        x_ticks: (1..=max)
            .filter(|p| (p - 1) % step == 0)
            .map(|p| (f64::from(p), p.to_string()))
            .collect(),
        series,
        reference: None,
        width: 0,
    })
}

/// Every decision chart of `input`.
pub fn decision_charts(input: &ReportInput<'_>) -> DecisionCharts {
    let found = sweeps(input);
    DecisionCharts {
        pareto: pareto(input),
        positions: positions(input, &found),
        sweeps: found.into_iter().map(|s| s.group).collect(),
        context: context_curve(input),
        capacity: capacity(input),
    }
}
