//! The headline comparison's section: per arm and metric the statistics, differences to
//! the reference with their intervals, throughput and goodput, and its charts.

use std::collections::BTreeSet;

use crate::metric::Window;
use crate::rules::compare::{Comparison, OutputLength, Paired, ThroughputEstimate};
use crate::rules::input::{Artifact, MetricId, Stats};

use crate::report::charts::Palette;
use crate::report::charts::{
    Bar, BarChart, CdfChart, SampleSeries, TimelineBar, TimelineChart, colour_hex,
};
use crate::report::format::{
    NA, fmt_diff, fmt_diff_interval, fmt_interval, fmt_num, fmt_percent, fmt_percentile, fmt_ratio,
    fmt_throughput_difference, fmt_unit, fmt_welch,
};
use crate::report::input::*;
use crate::report::view::*;
use crate::stats::Percentile;

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
pub(super) fn arm_of<'a>(artifacts: &'a [Artifact], run_id: &str) -> Option<&'a str> {
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

pub(super) fn comparison_charts(
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
            width: crate::report::charts::SMALL_WIDTH,
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
