//! The report as Markdown (`anvil report --format md`): the same [`ReportView`] as the HTML
//! page, without charts: header and promotion banner, stop rules, the headline tables,
//! screens (labelled within-screen only), verdicts per arm, missing evidence and open gates.
//!
//! Every string from the view goes through [`escape`], so a `|` or a backtick in an arm
//! name or an error body cannot break a table or open a code span, and `<` cannot start
//! raw HTML.

use std::fmt::Write;

use super::table::{Table, TextFormat};
use super::view::{ComparisonView, RefusalView, ReportView};

pub use super::table::escape;

/// One Markdown table ([`Table`]), every cell escaped.
fn table<'a, R>(out: &mut String, header: &[&str], rows: R)
where
    R: IntoIterator<Item = Vec<&'a str>>,
{
    let mut t = Table::new(header);
    for r in rows {
        t.row(r.into_iter().map(str::to_owned).collect());
    }
    t.render(TextFormat::Markdown, out);
}

fn refusal(out: &mut String, r: &RefusalView) {
    let _ = writeln!(out, "**Refused:** {}\n", escape(&r.reason));
    if !r.rule.is_empty() {
        let _ = writeln!(out, "> {}\n", escape(&r.rule));
    }
    if !r.differences.is_empty() {
        table(
            out,
            &["run", "field", "first artifact", "this artifact"],
            r.differences
                .iter()
                .map(|d| vec![d.run_id.as_str(), &d.field, &d.first, &d.other]),
        );
        out.push('\n');
    }
}

fn comparison(out: &mut String, c: &ComparisonView, throughput_title: &str) {
    let _ = writeln!(
        out,
        "Scope: **{}**; {}; fingerprint `{}`\n",
        escape(&c.label),
        escape(&c.references),
        c.fingerprint.replace('`', "'")
    );
    for p in &c.pairs {
        let _ = writeln!(out, "- {}", escape(p));
    }
    for w in &c.warnings {
        let _ = writeln!(out, "- **Warning:** {}", escape(w));
    }
    out.push('\n');
    let _ = writeln!(out, "#### {}\n", escape(throughput_title));
    if c.throughput.is_empty() {
        out.push_str("No aggregate throughput recorded.\n\n");
    } else {
        table(
            out,
            &[
                "arm",
                "window",
                "aggregate output",
                "basis",
                "95% CI across runs",
                "GPUs",
                "per GPU",
                "in flight",
                "vs reference",
                "difference",
                "scaling efficiency",
            ],
            c.throughput.iter().map(|t| {
                vec![
                    t.arm.as_str(),
                    &t.window,
                    &t.output_tps,
                    &t.basis,
                    &t.ci95,
                    &t.gpus,
                    &t.per_gpu,
                    &t.in_flight,
                    &t.versus,
                    &t.difference,
                    &t.scaling_efficiency,
                ]
            }),
        );
        out.push('\n');
    }
    for m in &c.metrics {
        let _ = writeln!(
            out,
            "#### {} ({}, {})\n",
            escape(&m.name),
            escape(&m.unit),
            escape(&m.better)
        );
        let (mild, far) = (
            format!("{} [95% CI]", m.tail_labels[0]),
            format!("{} [95% CI]", m.tail_labels[1]),
        );
        table(
            out,
            &[
                "arm",
                "window",
                "run",
                "n",
                "mean",
                "95% CI of mean",
                "p50 [95% CI]",
                &mild,
                &far,
            ],
            m.rows.iter().map(|r| {
                vec![
                    r.arm.as_str(),
                    &r.window,
                    &r.run_id,
                    &r.n,
                    &r.mean,
                    &r.ci95,
                    &r.p50,
                    &r.tails[0],
                    &r.tails[1],
                ]
            }),
        );
        out.push('\n');
        if !m.differences.is_empty() {
            let (mild, far) = (
                format!("{} Δ", m.tail_labels[0]),
                format!("{} Δ", m.tail_labels[1]),
            );
            table(
                out,
                &[
                    "arm",
                    "vs",
                    "window",
                    "difference of means",
                    "ratio",
                    "Welch 95% CI",
                    "paired",
                    "p50 Δ",
                    &mild,
                    &far,
                ],
                m.differences.iter().map(|d| {
                    vec![
                        d.arm.as_str(),
                        &d.reference,
                        &d.window,
                        &d.difference,
                        &d.ratio,
                        &d.welch_ci,
                        &d.paired,
                        &d.percentiles[0],
                        &d.percentiles[1],
                        &d.percentiles[2],
                    ]
                }),
            );
            out.push('\n');
        }
    }
    for o in c.output_length.iter().filter(|o| !o.comparable) {
        let _ = writeln!(
            out,
            "- **Output-length warning ({}):** {}",
            escape(&o.arm),
            escape(&o.text)
        );
    }
    out.push('\n');
}

/// The report as Markdown.
pub fn render_markdown(view: &ReportView) -> String {
    let mut out = String::new();
    let h = &view.header;
    let _ = writeln!(out, "# Campaign report: {}\n", escape(&h.campaign_id));
    let _ = writeln!(out, "**Goal:** {}\n", escape(&h.goal));
    let _ = writeln!(
        out,
        "Data folder: {} · generated {} · anvil {}\n",
        escape(&h.data_folder),
        escape(&h.generated_utc),
        escape(&h.tool_version)
    );
    if !h.promotion_authorized {
        out.push_str(
            "> **PROMOTION NOT AUTHORIZED:** the run plan sets promotion_authorized to false.\n\n",
        );
    }
    let _ = writeln!(
        out,
        "**Overall: {}** (exit code {})\n",
        escape(&h.outcome),
        h.exit_code
    );
    if h.stops.is_empty() {
        out.push_str("No stop rule fired.\n\n");
    } else {
        out.push_str("## Stop rules fired\n\n");
        for s in &h.stops {
            let _ = writeln!(
                out,
                "- **{}** ({}): {}",
                escape(&s.kind),
                escape(&s.run_id),
                escape(&s.reason)
            );
        }
        out.push('\n');
    }
    for r in &h.reasons {
        let _ = writeln!(out, "- {}", escape(r));
    }
    out.push('\n');

    out.push_str("## Headline comparison\n\n");
    match (&view.headline.comparison, &view.headline.refusal) {
        (Some(c), _) => comparison(
            &mut out,
            c,
            "Headline aggregate output throughput (matched headline artifacts only)",
        ),
        (None, Some(r)) => refusal(&mut out, r),
        (None, None) => {
            let _ = writeln!(out, "_{}_\n", escape(&view.headline.empty_note));
        }
    }
    if !view.headline.left_out.is_empty() {
        out.push_str("Headline-class artifacts left out (not the manifest's headline cell):\n\n");
        for l in &view.headline.left_out {
            let _ = writeln!(
                out,
                "- {} `{}` ({}): {}",
                escape(&l.arm),
                escape(&l.run_id),
                escape(&l.workload),
                escape(&l.reason)
            );
        }
        out.push('\n');
    }

    out.push_str("## Optimization screens (within-screen selection only)\n\n");
    if view.screens.is_empty() {
        out.push_str("_No optimization-screen comparisons recorded._\n\n");
    }
    for s in &view.screens {
        let _ = writeln!(
            out,
            "### Screen: {} (within-screen selection only)\n",
            escape(&s.name)
        );
        match (&s.comparison, &s.refusal) {
            (Some(c), _) => comparison(
                &mut out,
                c,
                "Screen aggregate output throughput (within-screen selection only)",
            ),
            (None, Some(r)) => refusal(&mut out, r),
            (None, None) => {}
        }
    }

    out.push_str("## SLOs and goodput\n\n");
    if view.slo.given {
        let _ = writeln!(out, "SLOs: {}\n", escape(&view.slo.slos));
        table(
            &mut out,
            &[
                "stage",
                "workload",
                "arm",
                "attained [exact 95% CI]",
                "goodput tok/s",
                "vs control",
                "difference",
            ],
            view.slo.goodput.iter().map(|r| {
                vec![
                    r.stage.as_str(),
                    &r.workload,
                    &r.arm,
                    &r.attained,
                    &r.goodput_tps,
                    &r.reference,
                    &r.difference,
                ]
            }),
        );
        out.push('\n');
    } else {
        out.push_str("_No SLO given: no attainment or goodput._\n\n");
    }
    for c in &view.slo.capacity {
        let _ = writeln!(
            out,
            "Capacity search {}: {}\n",
            escape(&c.search.arm),
            escape(&c.search.verdict)
        );
    }
    let frontier: Vec<String> = view
        .slo
        .tradeoff
        .iter()
        .filter(|r| r.frontier_class == "pass")
        .map(|r| format!("{} ({})", r.arm, r.workload))
        .collect();
    if !frontier.is_empty() {
        let _ = writeln!(
            out,
            "On the throughput-per-GPU against throughput-per-user frontier: {}\n",
            escape(&frontier.join(", "))
        );
    }

    out.push_str("## Verdicts\n\n");
    if view.verdicts.arms.is_empty() {
        out.push_str("_No arm has recorded artifacts: no verdicts._\n\n");
    }
    for a in &view.verdicts.arms {
        let _ = writeln!(out, "### {}\n", escape(&a.arm));
        table(
            &mut out,
            &["advance rule", "verdict", "evidence"],
            a.rules
                .iter()
                .map(|r| vec![r.rule.as_str(), &r.verdict, &r.reason]),
        );
        out.push('\n');
        if !a.functional.is_empty() {
            table(
                &mut out,
                &["functional check", "requests passed"],
                a.functional
                    .iter()
                    .map(|f| vec![f.check.as_str(), &f.passed]),
            );
            out.push('\n');
        }
        if !a.evidence.is_empty() {
            table(
                &mut out,
                &["run", "request", "finding", "detail"],
                a.evidence
                    .iter()
                    .map(|e| vec![e.run_id.as_str(), &e.request, &e.what, &e.detail]),
            );
            out.push('\n');
        }
    }

    out.push_str("## Missing evidence\n\n");
    let mut missing = 0;
    for s in &view.plan.stages {
        for a in s.arms.iter().filter(|a| !a.found) {
            missing += 1;
            let _ = writeln!(
                out,
                "- stage {} {}: {} ({})",
                escape(&s.order),
                escape(&s.stage),
                escape(&a.arm),
                escape(&a.evidence)
            );
        }
        for c in s.claims.iter().filter(|c| c.verdict_class == "missing") {
            missing += 1;
            let _ = writeln!(
                out,
                "- stage {} {}: {} claim \"{}\": {}",
                escape(&s.order),
                escape(&s.stage),
                escape(&c.side),
                escape(&c.clause),
                escape(&c.reason)
            );
        }
    }
    for a in &view.verdicts.arms {
        for r in a.rules.iter().filter(|r| r.verdict_class == "missing") {
            missing += 1;
            let _ = writeln!(
                out,
                "- {}: \"{}\" not run: {}",
                escape(&a.arm),
                escape(&r.rule),
                escape(&r.reason)
            );
        }
    }
    if missing == 0 {
        out.push_str("None.\n");
    }
    out.push('\n');

    out.push_str("## Open gates\n\n");
    if view.open_gates.is_empty() {
        out.push_str("_The run plan lists no open gates._\n");
    }
    for g in &view.open_gates {
        let _ = writeln!(out, "- {}", escape(g));
    }
    super::visible_controls(&out)
}
