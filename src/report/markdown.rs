//! The report as Markdown (`anvil report --format md`, for a pull request): the same
//! [`ReportView`] as the HTML page, without charts: the first screen (banners, what was
//! tested, the winners per objective, the stages' claims, what may not be claimed, the
//! gaps), each stage's arms against their controls, the headline tables, SLOs, the
//! advance-rule matrix, stop rules and open gates.
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
    decision(&mut out, view);
    stages(&mut out, view);

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

    if !view.cache.verdict.is_empty() {
        out.push_str("## Sessions, traces and the prefix cache\n\n");
        let _ = writeln!(out, "{}.\n", escape(&view.cache.verdict));
    }
    out.push_str("## Advance rules\n\n");
    if view.verdicts.matrix.is_empty() {
        out.push_str("_No arm has recorded artifacts: no verdicts._\n\n");
    } else {
        let mut header: Vec<&str> = vec!["arm"];
        header.extend(view.verdicts.rules.iter().map(String::as_str));
        header.push("functional checks passed");
        let rows: Vec<Vec<String>> = view
            .verdicts
            .matrix
            .iter()
            .map(|m| {
                let mut row = vec![m.arm.clone()];
                row.extend(m.cells.iter().map(|c| {
                    let mut text = c.verdict.clone();
                    if !c.evidence.is_empty() {
                        text.push_str(&format!(": {}", c.evidence));
                    }
                    if !c.reason.is_empty() && c.verdict != "n/a" {
                        text.push_str(&format!(" ({})", c.reason));
                    }
                    text
                }));
                row.push(m.functional.clone());
                row
            })
            .collect();
        table(
            &mut out,
            &header,
            rows.iter().map(|r| r.iter().map(String::as_str).collect()),
        );
        out.push('\n');
    }
    for a in &view.verdicts.arms {
        let _ = writeln!(out, "### Evidence against {}\n", escape(&a.arm));
        table(
            &mut out,
            &["run", "request", "finding", "detail"],
            a.evidence
                .iter()
                .map(|e| vec![e.run_id.as_str(), &e.request, &e.what, &e.detail]),
        );
        out.push('\n');
    }
    if view.header.stops.is_empty() {
        out.push_str("No stop rule fired.\n\n");
    } else {
        out.push_str("## Stop rules fired\n\n");
        for s in &view.header.stops {
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

    out.push_str("## Open gates\n\n");
    if view.open_gates.is_empty() {
        out.push_str("_The run plan lists no open gates._\n");
    }
    for g in &view.open_gates {
        let _ = writeln!(out, "- {}", escape(g));
    }
    super::visible_controls(&out)
}

/// The first screen: banners, what was tested, the winners, the stages' claims, what may
/// not be claimed, and the gaps.
fn decision(out: &mut String, view: &ReportView) {
    let h = &view.header;
    let d = &view.decision;
    let _ = writeln!(
        out,
        "# {}: what the campaign supports\n",
        escape(&h.campaign_id)
    );
    if let Some(s) = &d.synthetic {
        let _ = writeln!(out, "> **{}**\n", escape(s));
    }
    if !h.promotion_authorized {
        out.push_str(
            "> **PROMOTION NOT AUTHORIZED:** the run plan sets promotion_authorized to false; nothing here promotes a configuration.\n\n",
        );
    }
    let _ = writeln!(out, "**{}**", escape(&d.recommendation));
    if !d.recommendation_caveats.is_empty() {
        let _ = writeln!(
            out,
            "Caveats that would change it: {}.",
            escape(&d.recommendation_caveats.join("; "))
        );
    }
    out.push('\n');
    let _ = writeln!(
        out,
        "**Tested:** {} **Outcome: {}.** {}\n",
        escape(&d.tested),
        escape(&d.outcome),
        escape(&d.outcome_reason)
    );
    let _ = writeln!(
        out,
        "### Winners per objective (on {})\n",
        escape(&d.objectives_scope)
    );
    if d.objectives.is_empty() {
        out.push_str("_No objective is ranked._\n\n");
    } else {
        let rows: Vec<Vec<String>> = d
            .objectives
            .iter()
            .map(|o| {
                vec![
                    format!("{} ({})", o.objective, o.better),
                    format!("{}: {}", o.leader, o.figure),
                    o.runner_up.clone(),
                    format!("{} {}", o.lead, o.resolved),
                ]
            })
            .collect();
        table_owned(
            out,
            &[
                "objective",
                "leader",
                "runner-up",
                "lead [95% CI across runs]",
            ],
            &rows,
        );
        out.push('\n');
    }
    out.push_str("### The stages' claims, checked\n\n");
    if d.claims.is_empty() {
        out.push_str("_The run plan makes no selection or rejection claim._\n\n");
    } else {
        let rows: Vec<Vec<String>> = d
            .claims
            .iter()
            .map(|c| {
                vec![
                    c.stage.clone(),
                    format!("{}: {}", c.side, c.clause),
                    format!("{}: {}", c.verdict, c.basis),
                ]
            })
            .collect();
        table_owned(out, &["stage", "claim", "verdict, on what"], &rows);
        out.push('\n');
    }
    out.push_str("### What may not be claimed\n\n");
    for n in &d.not_claimable {
        let _ = writeln!(out, "- {}", escape(n));
    }
    out.push('\n');
    if !d.gaps.is_empty() {
        out.push_str("### Evidence gaps\n\n");
        for g in &d.gaps {
            let _ = writeln!(
                out,
                "- {}: `{}`",
                escape(&g.what),
                g.command.replace('`', "'")
            );
        }
        out.push('\n');
    }
    if !d.unread.is_empty() {
        out.push_str("### Plan text that could not be read\n\n");
        for u in &d.unread {
            let _ = writeln!(
                out,
                "- stage {}, {}: {}; instead, {}.",
                escape(&u.stage),
                escape(&u.text),
                escape(&u.why),
                escape(&u.instead)
            );
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "Goal: {} · data {} · generated {} · anvil {}\n",
        escape(&h.goal),
        escape(&h.data_folder),
        escape(&h.generated_utc),
        escape(&h.tool_version)
    );
}

/// Each stage's comparisons: every arm against its control.
fn stages(out: &mut String, view: &ReportView) {
    out.push_str("## Stage by stage: each arm against its control\n\n");
    out.push_str("Each cell: the arm's figure; its difference to the control [95% CI] with ▲ better, ▼ worse (the interval excludes zero and the difference is at least 2% of the control's figure), ≈ negligible (resolved but smaller) or ≈ not resolved.\n\n");
    if view.stage_pairs.is_empty() {
        out.push_str("_No stage recorded two or more arms on one performance workload._\n\n");
    }
    for s in view.stage_pairs.iter().filter(|s| !s.minor) {
        let _ = writeln!(
            out,
            "### Stage {}: {}\n",
            escape(&s.stage),
            escape(&s.workload)
        );
        if let Some(r) = &s.refusal {
            let _ = writeln!(out, "**Refused:** {}\n", escape(r));
            continue;
        }
        let mut header: Vec<String> = vec!["arm".to_owned(), "against".to_owned()];
        header.extend(
            s.columns
                .iter()
                .map(|c| format!("{} ({})", c.name, c.better)),
        );
        let rows: Vec<Vec<String>> = s
            .rows
            .iter()
            .map(|r| {
                let mut row = vec![r.arm.clone(), r.against.clone()];
                row.extend(r.cells.iter().map(|c| {
                    let mut text = c.value.clone();
                    if !c.difference.is_empty() {
                        text.push_str(&format!("; {} {}", c.difference, c.cue));
                    }
                    if !c.after_first_wave.is_empty() {
                        text.push_str(&format!("; {}", c.after_first_wave));
                    }
                    text
                }));
                row
            })
            .collect();
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        table_owned(out, &header, &rows);
        out.push('\n');
        for w in &s.warnings {
            let _ = writeln!(out, "- **Warning:** {}", escape(w));
        }
        for c in &s.claims {
            let _ = writeln!(out, "- {}", escape(c));
        }
        if !s.warnings.is_empty() || !s.claims.is_empty() {
            out.push('\n');
        }
    }
}

fn table_owned(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    table(
        out,
        header,
        rows.iter().map(|r| r.iter().map(String::as_str).collect()),
    );
}
