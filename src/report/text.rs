//! The rules' results as text: `anvil compare` (a comparison or a refusal), `anvil check`
//! and `anvil summary`, each as aligned text or Markdown ([`TextFormat`]). Pure functions
//! from typed results to a string; every figure was computed by the query layer or the
//! rules, every table is a [`Table`], every recorded string in Markdown is escaped.

use std::fmt::Write as _;

use super::format::{NA, fmt_diff, fmt_interval, fmt_num, fmt_percent, fmt_ratio};
use super::markdown::escape;
use super::table::{Table, TextFormat};
use crate::rules::{CheckReport, Comparison, OutputLength, Paired, Refusal, RefusalKind, Verdict};

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

/// The comparison as text or Markdown: per metric the arms' statistics and the differences
/// to the baseline, then throughput, spec decode, controls and output lengths.
pub fn comparison(c: &Comparison, format: TextFormat) -> String {
    let mut out = String::new();
    heading(
        format,
        0,
        &format!(
            "compare: {} (baseline {}; fingerprint {})",
            c.label, c.baseline, c.fingerprint
        ),
        &mut out,
    );
    for warning in &c.warnings {
        line(format, &format!("warning: {warning}"), &mut out);
    }
    out.push('\n');
    for m in &c.metrics {
        let unit = m.metric.unit();
        heading(format, 1, &format!("{} ({unit})", m.metric), &mut out);
        let mut grid = Table::new(&[
            "arm",
            "run",
            "n",
            "mean",
            "mean 95% CI",
            "p50",
            "p95",
            "p99",
        ]);
        for arm in &m.arms {
            for run in &arm.runs {
                grid.row(vec![
                    arm.arm.clone(),
                    run.run_id.clone(),
                    run.n.to_string(),
                    fmt_num(run.mean),
                    fmt_interval(run.ci95_low, run.ci95_high),
                    fmt_num(run.p50),
                    fmt_num(run.p95),
                    fmt_num(run.p99),
                ]);
            }
        }
        grid.render(format, &mut out);
        out.push('\n');
        let mut diffs = Table::new(&[
            "arm",
            "vs baseline",
            "difference",
            "ratio",
            "Welch 95% CI",
            "paired by request (95% CI)",
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
            diffs.row(vec![
                d.arm.clone(),
                c.baseline.clone(),
                fmt_diff(d.difference),
                fmt_ratio(d.ratio),
                d.welch.as_ref().map_or_else(
                    || NA.to_owned(),
                    |w| fmt_interval(Some(w.low), Some(w.high)),
                ),
                paired,
            ]);
        }
        diffs.render(format, &mut out);
        out.push('\n');
    }

    heading(format, 1, "aggregate output throughput (tok/s)", &mut out);
    let mut grid = Table::new(&["arm", "output tok/s", "estimate", "ratio", "per replica"]);
    for t in &c.throughput {
        let per_replica: Vec<String> = t
            .per_replica
            .iter()
            .flat_map(|(run, replicas)| {
                replicas
                    .iter()
                    .map(move |r| format!("{run}/r{}: {}", r.replica, fmt_num(Some(r.output_tps))))
            })
            .collect();
        grid.row(vec![
            t.arm.clone(),
            fmt_num(t.estimate.value()),
            t.estimate.label(),
            fmt_ratio(t.ratio_to_baseline),
            per_replica.join(", "),
        ]);
    }
    grid.render(format, &mut out);
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

    heading(format, 1, "controls and output lengths", &mut out);
    for (arm, control) in &c.controls {
        line(format, &format!("{arm}: {}", control.reason()), &mut out);
    }
    for (arm, length) in &c.output_length {
        let text = match length {
            OutputLength::Comparable => "output lengths realized alike".to_owned(),
            OutputLength::NotComparable { warning } => format!("warning: {warning}"),
        };
        line(format, &format!("{arm}: {text}"), &mut out);
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

fn verdict(v: &Verdict) -> String {
    match v {
        Verdict::Pass => "pass".to_owned(),
        Verdict::Fail(reason) => format!("FAIL: {reason}"),
        Verdict::NotRun(reason) => format!("not run: {reason}"),
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

    for t in &report.topology {
        heading(format, 0, "topology", &mut out);
        let mut grid = Table::new(&[
            "arm",
            "topology",
            "GPUs",
            "output tok/s",
            "tok/s per GPU",
            "scaling efficiency",
            "verdict",
        ]);
        for r in &t.rows {
            grid.row(vec![
                r.arm.clone(),
                r.topology.map_or_else(|| NA.to_owned(), |t| t.to_string()),
                r.gpus.map_or_else(|| NA.to_owned(), |g| g.to_string()),
                fmt_num(r.output_tps),
                fmt_num(r.output_tps_per_gpu),
                fmt_percent(r.scaling_efficiency),
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
        out.push('\n');
    }

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
        let report = rules::check(&plan(), &[a], &Default::default());
        let md = check(&report, TextFormat::Markdown);
        assert!(!md.contains("<script>"), "{md}");
        assert!(md.contains("K\\|12&lt;script&gt;"), "{md}");
        assert!(md.contains("ANV-\\|\\`x\\`"), "{md}");
        // Text output is not Markdown and stays as recorded.
        let text = check(&report, TextFormat::Text);
        assert!(text.contains(hostile), "{text}");
    }
}
