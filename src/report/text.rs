//! The rules' results as text: `anvil compare` (a comparison or a refusal), `anvil check`
//! and `anvil summary`, each as aligned text or Markdown ([`TextFormat`]). Pure functions
//! from typed results to a string; every figure was computed by the query layer or the
//! rules, every table is a [`Table`], every recorded string in Markdown is escaped.

use std::fmt::Write as _;

use super::format::{
    NA, fmt_diff, fmt_diff_interval, fmt_estimate, fmt_interval, fmt_mean, fmt_num, fmt_percent,
    fmt_percentile, fmt_ratio, fmt_share, fmt_throughput_difference, fmt_welch,
};
use super::markdown::escape;
use super::table::{Table, TextFormat};
use crate::metric::Window;
use crate::rules::compare::PercentileComparison;
use crate::rules::input::TradeoffPoint;
use crate::rules::{
    CheckReport, Comparison, OutputLength, Paired, Refusal, RefusalKind, StageComparison,
    ThroughputEstimate, Verdict,
};
use crate::stats::Percentile;

fn heading(format: TextFormat, level: usize, text: &str, out: &mut String) {
    if format == TextFormat::Markdown {
        let _ = writeln!(out, "{} {}\n", "#".repeat(level + 1), escape(text));
    } else {
        let _ = writeln!(out, "{text}");
    }
}

fn line(format: TextFormat, text: &str, out: &mut String) {
    if format == TextFormat::Markdown {
        let _ = writeln!(out, "- {}", escape(text));
    } else {
        let _ = writeln!(out, "  {text}");
    }
}

/// A percentile difference as a cell (see [`fmt_diff_interval`]).
fn percentile_difference(d: &PercentileComparison) -> String {
    fmt_diff_interval(d.estimate(), d.interval(), &d.method())
}

/// The comparison as text or Markdown: whom each arm is compared with and the control
/// verdicts, aggregate throughput per window (across runs, per GPU, against the reference,
/// the scaling efficiency of multi-GPU arms), then per metric each arm's statistics with the
/// tail that hurts and every difference to the reference, then spec decode and output
/// lengths.
pub fn comparison(c: &Comparison, format: TextFormat) -> String {
    let mut out = String::new();
    heading(
        format,
        0,
        &format!(
            "compare: {} — {} (fingerprint {})",
            c.label,
            c.references.describe(),
            c.fingerprint
        ),
        &mut out,
    );
    for arm in &c.arms {
        let text = match c.controls.iter().find(|v| v.arm == *arm) {
            Some(v) => format!("{arm} vs {}: {}", v.reference, v.control.reason()),
            None if c.baseline() == Some(arm) => format!("{arm}: the baseline"),
            None => format!("{arm}: a control of its stage (no reference)"),
        };
        line(format, &text, &mut out);
    }
    for warning in &c.warnings {
        line(format, &format!("warning: {warning}"), &mut out);
    }
    out.push('\n');

    heading(
        format,
        1,
        "aggregate output throughput (tok/s, higher is better)",
        &mut out,
    );
    let mut grid = Table::new(&[
        "arm",
        "window",
        "runs",
        "output tok/s [95% CI across runs]",
        "GPUs",
        "per GPU",
        "in flight",
        "vs reference",
        "difference [95% CI across runs]",
        "scaling efficiency",
    ]);
    let mut single = false;
    for window in Window::ALL {
        for t in c.throughput.iter().filter(|t| t.window == window) {
            single |= matches!(t.estimate, ThroughputEstimate::SingleRun { .. });
            let (runs, value) = fmt_estimate(&t.estimate);
            let versus = match (&t.reference, t.ratio_to_reference) {
                (Some(r), ratio) => format!("{} {r}", fmt_ratio(ratio)),
                (None, _) => String::new(),
            };
            let difference = t
                .difference
                .as_ref()
                .map_or_else(String::new, fmt_throughput_difference);
            grid.row(vec![
                t.arm.clone(),
                window.as_str().to_owned(),
                runs,
                value,
                t.gpus.map_or_else(|| NA.to_owned(), |g| g.to_string()),
                fmt_num(t.per_gpu),
                t.in_flight.to_string(),
                versus,
                difference,
                t.scaling_efficiency.as_ref().map_or_else(String::new, |e| {
                    format!("{} of {} per GPU", fmt_percent(Some(e.value)), e.against)
                }),
            ]);
        }
    }
    grid.render(format, &mut out);
    if single {
        line(
            format,
            &format!("runs 1: {}", crate::rules::compare::SINGLE_RUN),
            &mut out,
        );
    }
    out.push('\n');
    goodput(c, format, &mut out);

    for m in &c.metrics {
        let metric = m.metric;
        heading(
            format,
            1,
            &format!("{metric}: {}", metric.label_with_direction()),
            &mut out,
        );
        let [mild, far] = metric.tails();
        let mut grid = Table::new(&[
            "arm",
            "window",
            "run",
            "n",
            "mean [95% CI]",
            "p50 [95% CI]",
            "slowest 5% [95% CI]",
            "slowest 1% [95% CI]",
        ]);
        for arm in &c.arms {
            for window in Window::ALL {
                let Some(a) = m.arm(arm, window) else {
                    continue;
                };
                for run in &a.runs {
                    let s = &run.stats;
                    grid.row(vec![
                        arm.clone(),
                        window.as_str().to_owned(),
                        run.run_id.clone(),
                        s.n.to_string(),
                        fmt_mean(s),
                        fmt_percentile(s, Percentile::P50, false),
                        fmt_percentile(s, mild, true),
                        fmt_percentile(s, far, true),
                    ]);
                }
            }
        }
        grid.render(format, &mut out);
        out.push('\n');
        if m.differences.is_empty() {
            continue;
        }
        let mild_head = format!("{mild} Δ [95% CI]");
        let far_head = format!("{far} Δ [95% CI]");
        let mut diffs = Table::new(&[
            "arm",
            "vs",
            "window",
            "mean Δ",
            "ratio",
            "Welch 95% CI",
            "paired by request (95% CI)",
            "p50 Δ [95% CI]",
            &mild_head,
            &far_head,
        ]);
        for d in &m.differences {
            let paired = match &d.paired {
                Paired::Interval { pairs, interval: i } => format!(
                    "{} {} over {pairs} pairs",
                    fmt_diff(Some(i.estimate)),
                    fmt_interval(Some(i.low), Some(i.high))
                ),
                Paired::NotPaired { reason } => format!("not paired: {reason}"),
            };
            let q = |p: Percentile| {
                d.percentiles
                    .iter()
                    .find(|x| x.percentile == p)
                    .map_or_else(|| NA.to_owned(), |x| percentile_difference(&x.comparison))
            };
            diffs.row(vec![
                d.arm.clone(),
                d.reference.clone(),
                d.window.as_str().to_owned(),
                fmt_diff(d.difference),
                fmt_ratio(d.ratio),
                fmt_welch(d),
                paired,
                q(Percentile::P50),
                q(mild),
                q(far),
            ]);
        }
        diffs.render(format, &mut out);
        out.push('\n');
    }
    line(
        format,
        "percentile intervals: distribution-free 95% ([X(l), X(u)], ∞ where too few requests \
         bound that side); mean differences: Welch over requests, across runs when both arms \
         have repeats; percentile differences: a seeded bootstrap (2,000 resamples) when each \
         arm is one run, paired by request index where both keep as many requests in flight \
         (request i then carries the same prompt body and target length at the same place in \
         the schedule, so that variation cancels), a t interval across runs when both arms \
         have repeats, none where an arm's own interval (in any run) is unbounded",
        &mut out,
    );
    out.push('\n');

    heading(format, 1, "speculative decoding", &mut out);
    let mut grid = Table::new(&[
        "arm",
        "run",
        "replica",
        "acceptance rate",
        "mean accepted length",
    ]);
    for s in &c.spec_decode {
        for r in &s.replicas {
            grid.row(vec![
                s.arm.clone(),
                s.run_id.clone(),
                r.replica.to_string(),
                fmt_percent(r.acceptance_rate),
                fmt_num(r.mean_accepted_length),
            ]);
        }
    }
    if grid.is_empty() {
        line(format, "no spec-decode counters recorded", &mut out);
        out.push('\n');
    } else {
        grid.render(format, &mut out);
        out.push('\n');
    }

    heading(format, 1, "output lengths", &mut out);
    for (arm, reference, length) in &c.output_length {
        let text = match length {
            OutputLength::Comparable => format!("output lengths realized alike with {reference}"),
            OutputLength::NotComparable { warning } => format!("warning: {warning}"),
        };
        line(format, &format!("{arm}: {text}"), &mut out);
    }
    out
}

/// Attainment of the SLOs in force and goodput per arm and window, against the reference;
/// nothing with no SLO given.
fn goodput(c: &Comparison, format: TextFormat, out: &mut String) {
    if c.goodput.is_empty() {
        return;
    }
    heading(
        format,
        1,
        "SLO attainment and goodput (requests that succeeded and met every SLO; higher is better)",
        out,
    );
    let mut grid = Table::new(&[
        "arm",
        "window",
        "runs",
        "attained [exact 95% CI]",
        "goodput req/s",
        "goodput tok/s [95% CI across runs]",
        "per GPU",
        "vs reference",
        "difference tok/s [95% CI across runs]",
    ]);
    for window in Window::ALL {
        for g in c.goodput.iter().filter(|g| g.window == window) {
            let (runs, tps) = fmt_estimate(&g.goodput_tps);
            grid.row(vec![
                g.arm.clone(),
                window.as_str().to_owned(),
                runs,
                fmt_share(g.share.as_ref()),
                fmt_estimate(&g.goodput_rps).1,
                tps,
                fmt_num(g.per_gpu),
                g.reference.clone().unwrap_or_default(),
                g.difference
                    .as_ref()
                    .map_or_else(String::new, fmt_throughput_difference),
            ]);
        }
    }
    grid.render(format, out);
    line(
        format,
        "a failed request counts as not attained; the share pools the runs' requests",
        out,
    );
    out.push('\n');
}

/// The throughput-per-GPU against throughput-per-user trade-off of every performance
/// workload with two points or more (window `all`), best per GPU first, each point marked
/// on the frontier or with what dominates it; then where the frontier after the first wave
/// differs.
pub fn frontier(points: &[TradeoffPoint], format: TextFormat) -> String {
    let mut out = String::new();
    let groups = super::sections::slo::performance_groups(points);
    let with_goodput = points.iter().any(|p| p.goodput_tps.is_some());
    let mut any = false;
    for group in groups {
        let of = |window: &str| -> Vec<&TradeoffPoint> {
            points
                .iter()
                .filter(|p| p.frontier_group == group && p.window == window)
                .collect()
        };
        let all = of(Window::All.as_str());
        if all.iter().filter(|p| p.on_frontier.is_some()).count() < 2 {
            continue;
        }
        any = true;
        heading(
            format,
            1,
            &format!(
                "trade-off {group}: output tok/s per GPU against tok/s per user (1000 / median TPOT), window all; higher is better on both"
            ),
            &mut out,
        );
        let mut header = vec![
            "arm",
            "cell",
            "runs",
            "GPUs",
            "tok/s per GPU",
            "tok/s per user",
        ];
        if with_goodput {
            header.push("goodput tok/s per GPU");
        }
        header.push("Pareto frontier");
        let mut grid = Table::new(&header);
        for p in &all {
            let mut row = vec![
                p.arm.clone(),
                p.cell_id.clone(),
                p.runs.to_string(),
                super::sections::slo::fmt_gpus(p),
                fmt_num(p.output_tps_per_gpu),
                fmt_num(p.output_tps_per_user),
            ];
            if with_goodput {
                row.push(fmt_num(p.goodput_tps_per_gpu));
            }
            row.push(super::sections::slo::frontier_text(p));
            grid.row(row);
        }
        grid.render(format, &mut out);
        let names = |ps: &[&TradeoffPoint]| -> Vec<String> {
            ps.iter()
                .filter(|p| p.on_frontier == Some(true))
                .map(|p| format!("{} ({})", p.arm, p.cell_id))
                .collect()
        };
        let after = of(Window::AfterFirstWave.as_str());
        let (a, b) = (names(&all), names(&after));
        if !after.is_empty() && a != b {
            line(
                format,
                &format!(
                    "after the first wave the frontier is: {}",
                    if b.is_empty() {
                        NA.to_owned()
                    } else {
                        b.join(", ")
                    }
                ),
                &mut out,
            );
        }
        out.push('\n');
    }
    if !any {
        line(
            format,
            "trade-off: no performance workload has two arms or loads to place against each other",
            &mut out,
        );
    }
    out
}

/// The SLOs' attainment and goodput of every arm of every stage comparison (window `all`),
/// labelled as information: the plan has no SLO rule, so nothing here changes a verdict.
/// Nothing with no SLO given.
fn slo_information(report: &CheckReport, format: TextFormat, out: &mut String) {
    let rows = super::sections::slo::stage_goodput(&report.stages);
    if rows.is_empty() {
        return;
    }
    heading(
        format,
        0,
        "SLO attainment (information: the plan has no SLO rule, so nothing here changes a verdict)",
        out,
    );
    let mut grid = Table::new(&[
        "stage",
        "workload",
        "arm",
        "runs",
        "attained [exact 95% CI]",
        "goodput tok/s [95% CI across runs]",
        "vs control",
        "difference tok/s [95% CI across runs]",
    ]);
    for (s, g) in rows {
        grid.row(vec![
            s.stage.clone(),
            s.workload.clone(),
            g.arm.clone(),
            g.runs.to_string(),
            fmt_share(g.share.as_ref()),
            fmt_estimate(&g.goodput_tps).1,
            g.reference.clone().unwrap_or_default(),
            g.difference
                .as_ref()
                .map_or_else(String::new, fmt_throughput_difference),
        ]);
    }
    grid.render(format, out);
    out.push('\n');
}

/// Every stage comparison of `anvil compare` without a baseline: each a heading and the
/// comparison, or its refusal.
pub fn stage_comparisons(stages: &[StageComparison], format: TextFormat) -> String {
    let mut out = String::new();
    if stages.is_empty() {
        line(
            format,
            "no stage recorded two or more arms on one performance workload: nothing to compare",
            &mut out,
        );
    }
    for (k, s) in stages.iter().enumerate() {
        if k > 0 {
            out.push('\n');
        }
        heading(format, 0, &format!("stage {}", s.name()), &mut out);
        match &s.result {
            Ok(c) => out.push_str(&comparison(c, format)),
            Err(r) => match format {
                TextFormat::Markdown => {
                    for l in refusal(r).lines() {
                        let _ = writeln!(out, "{}", escape(l));
                    }
                }
                TextFormat::Text => out.push_str(&refusal(r)),
            },
        }
    }
    out
}

/// A refusal: what was refused, each differing field with both values, and the rule quoted.
pub fn refusal(r: &Refusal) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "refused: {}", r.reason);
    for d in &r.differences {
        let _ = if r.kind == RefusalKind::HeadlineRule {
            writeln!(
                out,
                "  {} (run {}): recorded {}, headline {}",
                d.field, d.run_id, d.first, d.other
            )
        } else {
            writeln!(
                out,
                "  {} (run {}): {} in the first artifact, {} in this one",
                d.field, d.run_id, d.first, d.other
            )
        };
    }
    if let Some(rule) = &r.rule {
        let _ = writeln!(out, "rule: \"{rule}\"");
    }
    out
}

/// One arm of a comparison in a line: against its reference, the control verdict, the
/// throughput (per GPU, efficiency), the decode rate and TTFT p50 differences with their
/// intervals, and TTFT p50 after the first wave.
fn pair_summary(c: &Comparison, arm: &str) -> String {
    let Some(v) = c.controls.iter().find(|v| v.arm == arm) else {
        return if c.baseline() == Some(arm) {
            format!("{arm}: the baseline")
        } else {
            format!("{arm}: a control of its stage")
        };
    };
    let reference = &v.reference;
    let mut parts = vec![format!("{arm} vs {reference} ({})", v.control.reason())];
    if let (Some(t), Some(r)) = (
        c.throughput(arm, Window::All),
        c.throughput(reference, Window::All),
    ) {
        let mut text = format!(
            "output {} vs {} tok/s {}",
            fmt_num(t.estimate.value()),
            fmt_num(r.estimate.value()),
            fmt_ratio(t.ratio_to_reference)
        );
        if let Some(d) = &t.difference {
            text.push_str(", ");
            text.push_str(&fmt_throughput_difference(d));
            if d.interval.is_some() {
                text.push_str(" across runs");
            }
        }
        if let (Some(a), Some(b)) = (t.per_gpu, r.per_gpu) {
            text.push_str(&format!(
                "; per GPU {} vs {}",
                fmt_num(Some(a)),
                fmt_num(Some(b))
            ));
        }
        if let Some(e) = &t.scaling_efficiency {
            text.push_str(&format!(
                ", {} of {} per GPU",
                fmt_percent(Some(e.value)),
                e.against
            ));
        }
        parts.push(text);
    }
    let mean = |metric: crate::metric::MetricId| {
        let d = c
            .metrics
            .iter()
            .find(|m| m.metric == metric)?
            .difference(arm, Window::All)?;
        d.welch?;
        Some(format!(
            "{} mean {} {} {} ({} is better)",
            metric.label(),
            fmt_diff(d.difference),
            fmt_welch(d),
            metric.unit(),
            metric.better()
        ))
    };
    let p50 = |metric: crate::metric::MetricId, window: Window| {
        let d = c
            .metrics
            .iter()
            .find(|m| m.metric == metric)?
            .difference(arm, window)?;
        let p = d
            .percentiles
            .iter()
            .find(|p| p.percentile == Percentile::P50)?;
        Some(format!(
            "{} p50 {}{} {}",
            metric.label(),
            if window == Window::All {
                ""
            } else {
                "after the first wave "
            },
            percentile_difference(&p.comparison),
            metric.unit()
        ))
    };
    use crate::metric::MetricId::{DecodeTps, TtftMs};
    parts.extend(mean(DecodeTps));
    parts.extend(p50(TtftMs, Window::All));
    parts.extend(p50(TtftMs, Window::AfterFirstWave));
    parts.join("; ")
}

fn verdict(v: &Verdict) -> String {
    match v {
        Verdict::Pass => "pass".to_owned(),
        Verdict::Fail(reason) => format!("FAIL: {reason}"),
        Verdict::NotRun(reason) => format!("not run: {reason}"),
        Verdict::NotApplicable(reason) => format!("n/a: {reason}"),
        Verdict::NotTestable(reason) => format!("not testable: {reason}"),
    }
}

/// The check report: advance rules per arm, stop rules, topology, plan coverage per stage,
/// promotion and open gates, and the outcome with its reasons.
pub fn check(report: &CheckReport, format: TextFormat) -> String {
    let mut out = String::new();
    heading(format, 0, "advance rules", &mut out);
    let mut grid = Table::new(&["arm", "rule", "verdict"]);
    for arm in &report.arms {
        for (rule, v) in &arm.rules {
            grid.row(vec![arm.arm.clone(), rule.to_string(), verdict(v)]);
        }
    }
    if grid.is_empty() {
        line(format, "no artifacts", &mut out);
        out.push('\n');
    } else {
        grid.render(format, &mut out);
        out.push('\n');
    }

    heading(
        format,
        0,
        "stage comparisons (each arm against its one-variable control)",
        &mut out,
    );
    if report.stages.is_empty() {
        line(
            format,
            "no stage recorded two or more arms on one performance workload",
            &mut out,
        );
    }
    for s in &report.stages {
        heading(format, 1, &format!("stage {}", s.name()), &mut out);
        match &s.result {
            Ok(c) => {
                for arm in &c.arms {
                    line(format, &pair_summary(c, arm), &mut out);
                }
                for w in &c.warnings {
                    line(format, &format!("warning: {w}"), &mut out);
                }
            }
            Err(r) => line(format, &format!("refused: {}", r.reason), &mut out),
        }
        out.push('\n');
    }

    slo_information(report, format, &mut out);

    for t in &report.topology {
        heading(format, 0, &format!("topology: {}", t.name), &mut out);
        let mut grid = Table::new(&[
            "arm",
            "topology",
            "GPUs",
            "in flight",
            "runs",
            "output tok/s [95% CI across runs]",
            "tok/s per GPU",
            "scaling efficiency",
            "verdict",
        ]);
        for r in &t.rows {
            grid.row(vec![
                r.arm.clone(),
                r.topology.map_or_else(|| NA.to_owned(), |t| t.to_string()),
                r.gpus.map_or_else(|| NA.to_owned(), |g| g.to_string()),
                r.in_flight.to_string(),
                r.runs.to_string(),
                match r.output_tps_ci {
                    Some((low, high)) => format!(
                        "{} {}",
                        fmt_num(r.output_tps),
                        fmt_interval(Some(low), Some(high))
                    ),
                    None => fmt_num(r.output_tps),
                },
                fmt_num(r.output_tps_per_gpu),
                match (&r.against, r.scaling_efficiency) {
                    (Some(against), Some(e)) => {
                        format!("{} of {against}", fmt_percent(Some(e)))
                    }
                    _ => String::new(),
                },
                verdict(&r.verdict),
            ]);
        }
        grid.render(format, &mut out);
        out.push('\n');
        line(
            format,
            &format!(
                "winner: {} ({})",
                t.winner.as_deref().unwrap_or("none"),
                t.reason
            ),
            &mut out,
        );
        for o in &t.overhead {
            line(format, o, &mut out);
        }
        out.push('\n');
    }

    heading(format, 0, "manifest controls", &mut out);
    if report.controls.is_empty() {
        line(format, "the manifest declares no control", &mut out);
    }
    for c in &report.controls {
        let key = c
            .key
            .as_deref()
            .map(|k| format!(", {k}"))
            .unwrap_or_default();
        line(
            format,
            &format!("\"{}\": {} ({}{key})", c.text, c.status, c.mapping),
            &mut out,
        );
        for comparison in &c.comparisons {
            line(format, &format!("  {comparison}"), &mut out);
        }
        if !c.reason.is_empty() {
            line(format, &format!("  {}", c.reason), &mut out);
        }
    }
    out.push('\n');

    heading(format, 0, "stop rules", &mut out);
    if report.stops.is_empty() {
        line(format, "none fired", &mut out);
    }
    for s in &report.stops {
        let run = s.run_id.as_deref().unwrap_or("plan");
        line(
            format,
            &format!("STOP {} [{run}]: {}", s.kind, s.reason),
            &mut out,
        );
    }
    out.push('\n');

    heading(format, 0, "plan coverage", &mut out);
    for stage in &report.coverage.stages {
        heading(
            format,
            1,
            &format!("stage {} {} ({})", stage.order, stage.stage, stage.status),
            &mut out,
        );
        for arm in &stage.arms {
            let evidence = if arm.run_ids.is_empty() {
                "no evidence".to_owned()
            } else {
                format!("evidence: {}", arm.run_ids.join(", "))
            };
            line(format, &format!("arm {}: {evidence}", arm.arm), &mut out);
        }
        if !stage.without_evidence.is_empty() {
            line(
                format,
                &format!("missing evidence: {}", stage.without_evidence.join(", ")),
                &mut out,
            );
        }
        for restore in report
            .restore
            .iter()
            .filter(|r| r.supported && r.order == stage.order && r.stage == stage.stage)
        {
            for l in &restore.lines {
                line(format, l, &mut out);
            }
        }
        for (kind, claims) in [("selected", &stage.selected), ("rejected", &stage.rejected)] {
            for claim in claims {
                line(
                    format,
                    &format!(
                        "{kind} \"{}\": {} ({})",
                        claim.clause, claim.verdict, claim.reason
                    ),
                    &mut out,
                );
            }
        }
        out.push('\n');
    }
    line(
        format,
        &format!(
            "promotion_authorized: {}",
            report.coverage.promotion_authorized
        ),
        &mut out,
    );
    for gate in &report.coverage.post_campaign_open_gates {
        line(format, &format!("open gate: {gate}"), &mut out);
    }
    out.push('\n');
    heading(format, 0, &format!("outcome: {}", report.outcome), &mut out);
    for reason in &report.reasons {
        line(format, reason, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules;
    use crate::rules::fixtures::{artifact, plan};

    #[test]
    fn markdown_escapes_recorded_text_in_tables_headings_and_lines() {
        let hostile = "K|12<script>alert(1)</script>";
        let mut a = artifact("r-a", hostile, &[("spec_k", "8")], 100.0);
        a.figures.canaries[0].foreign = vec!["ANV-|`x`".to_owned()];
        let report = rules::check(
            &plan(),
            &crate::rules::fixtures::selection(),
            &[a],
            &Default::default(),
        );
        let md = check(&report, TextFormat::Markdown);
        assert!(!md.contains("<script>"), "{md}");
        assert!(md.contains("K\\|12&lt;script&gt;"), "{md}");
        assert!(md.contains("ANV-\\|\\`x\\`"), "{md}");
        // Text output is not Markdown and stays as recorded.
        let text = check(&report, TextFormat::Text);
        assert!(text.contains(hostile), "{text}");
    }
}
