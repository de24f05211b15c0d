//! The `anvil compare` and `anvil check` commands: open the artifacts, read the rules'
//! inputs from the views ([`super::figures`]), run the pure rules of [`crate::rules`], and
//! render the typed result as a text table, Markdown or JSON.
//!
//! The renderers are pure functions from the rules' result to a string; every figure they
//! print was computed by the query layer or the rules.

use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::cli::{CheckArgs, CompareArgs, RulesFormat};
use crate::exit;
use crate::manifest::{RunPlan, WorkloadManifest};
use crate::rules::{
    self, CheckReport, Comparison, HeadlineSelection, OutputLength, Paired, Refusal, RefusalKind,
    Verdict,
};

// Every recorded string in Markdown output goes through the report's one escaping function
// (a `|` or `<script>` in an arm or tool name stays text).
use super::command::{open_session_materialized, runtime};
use super::figures::read_artifacts;
use crate::report::markdown::escape;

/// `anvil compare`: exit 0 compared, 3 refused, 2 bad input.
pub fn run_compare(args: &CompareArgs) -> anyhow::Result<u8> {
    let manifest = WorkloadManifest::load(&args.manifest)
        .with_context(|| format!("--manifest {}", args.manifest.display()))?;
    let plan =
        RunPlan::load(&args.plan).with_context(|| format!("--plan {}", args.plan.display()))?;
    let selection = match HeadlineSelection::from_manifest(&manifest) {
        Ok(selection) => selection,
        Err(e) => {
            eprintln!("anvil compare: --manifest {}: {e}", args.manifest.display());
            return Ok(e.exit_code());
        }
    };
    let rt = runtime()?;
    let (artifacts, baseline) = rt.block_on(async {
        let session = open_session_materialized("compare", &args.artifacts).await?;
        let artifacts = read_artifacts(&session).await?;
        // Default baseline: the arm of the first artifact named on the command line.
        let baseline = args.baseline.clone().or_else(|| {
            args.artifacts.iter().find_map(|dir| {
                session
                    .artifacts()
                    .iter()
                    .find(|source| source.dir.starts_with(dir))
                    .map(|source| source.run.arm.name.clone())
            })
        });
        anyhow::Ok((artifacts, baseline))
    })?;
    let Some(baseline) = baseline else {
        anyhow::bail!("no artifact (a folder holding run.json) under the ARTIFACT_DIRs given");
    };
    let [m, p] = document_names(&args.manifest, &args.plan);
    one_campaign(&manifest, &plan, [&m, &p], &artifacts)?;
    let mut out = std::io::stdout().lock();
    match rules::compare_artifacts(&artifacts, &[], &baseline, &selection, &plan) {
        Ok(comparison) => {
            let text = match args.format {
                RulesFormat::Json => json(&comparison)?,
                RulesFormat::Table => {
                    super::output::printable(&render_comparison(&comparison, args.format))
                        .into_owned()
                }
                format => render_comparison(&comparison, format),
            };
            out.write_all(text.as_bytes())
                .context("writing the comparison")?;
            out.flush().context("writing the comparison")?;
            Ok(exit::OK)
        }
        Err(refusal) => {
            let text = match args.format {
                RulesFormat::Json => json(&refusal)?,
                RulesFormat::Md => render_refusal(&refusal)
                    .lines()
                    .map(|l| format!("{}\n", escape(l)))
                    .collect(),
                RulesFormat::Table => {
                    super::output::printable(&render_refusal(&refusal)).into_owned()
                }
            };
            out.write_all(text.as_bytes())
                .context("writing the refusal")?;
            out.flush().context("writing the refusal")?;
            Ok(refusal.exit_code())
        }
    }
}

/// `anvil check`: exit 0 holds, 1 a stop rule fired or evidence contradicts a rule, 4
/// evidence missing, 2 bad input.
pub fn run_check(args: &CheckArgs) -> anyhow::Result<u8> {
    let plan =
        RunPlan::load(&args.plan).with_context(|| format!("--plan {}", args.plan.display()))?;
    let manifest = WorkloadManifest::load(&args.manifest)
        .with_context(|| format!("--manifest {}", args.manifest.display()))?;
    // The manifest must yield a headline selection for the claims to be judged at all.
    if let Err(e) = HeadlineSelection::from_manifest(&manifest) {
        eprintln!("anvil check: --manifest {}: {e}", args.manifest.display());
        return Ok(e.exit_code());
    }
    let rt = runtime()?;
    let artifacts = rt.block_on(async {
        let session = open_session_materialized("check", &args.data).await?;
        anyhow::Ok(read_artifacts(&session).await?)
    })?;
    let [m, p] = document_names(&args.manifest, &args.plan);
    one_campaign(&manifest, &plan, [&m, &p], &artifacts)?;
    let report = check_data(&plan, &artifacts, &args.data)?;
    let text = match args.format {
        RulesFormat::Json => json(&report)?,
        RulesFormat::Table => {
            super::output::printable(&render_check(&report, RulesFormat::Table)).into_owned()
        }
        format => render_check(&report, format),
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .context("writing the report")?;
    out.flush().context("writing the report")?;
    Ok(report.exit_code())
}

/// Refuse a manifest, plan and artifacts of different campaigns: the rules of one campaign
/// say nothing about the runs of another. Names the first file that differs.
/// `names` are how the manifest and the plan are shown (`--manifest PATH`, `--plan PATH`).
pub(crate) fn one_campaign(
    manifest: &WorkloadManifest,
    plan: &RunPlan,
    names: [&str; 2],
    artifacts: &[rules::Artifact],
) -> anyhow::Result<()> {
    let [manifest_name, plan_name] = names;
    let campaign = &manifest.campaign_id;
    if plan.campaign_id != *campaign {
        anyhow::bail!(
            "{plan_name}: campaign_id is `{}` but {manifest_name} is campaign `{campaign}`; \
             pass the plan and the manifest of one campaign",
            plan.campaign_id,
        );
    }
    if let Some(other) = artifacts.iter().find(|a| a.facts.campaign_id != *campaign) {
        anyhow::bail!(
            "run {} is of campaign `{}`, but {manifest_name} and {plan_name} are campaign \
             `{campaign}`; pass only that campaign's artifacts",
            other.facts.run_id,
            other.facts.campaign_id,
        );
    }
    Ok(())
}

/// How `--manifest` and `--plan` are named in messages.
pub(crate) fn document_names(manifest: &Path, plan: &Path) -> [String; 2] {
    [
        format!("--manifest {}", manifest.display()),
        format!("--plan {}", plan.display()),
    ]
}

/// The rules' check of `artifacts` against `plan`, the evidence files being every file
/// name beneath the `data` folders.
pub(crate) fn check_data(
    plan: &RunPlan,
    artifacts: &[rules::Artifact],
    data: &[PathBuf],
) -> anyhow::Result<CheckReport> {
    let mut names = Vec::new();
    for dir in data {
        file_names(dir, &mut names)
            .with_context(|| format!("--data {}: listing files", dir.display()))?;
    }
    let present: Vec<&str> = names.iter().map(String::as_str).collect();
    Ok(rules::check(plan, artifacts, &present))
}

/// Names of every file at or beneath `dir`.
fn file_names(dir: &Path, out: &mut Vec<String>) -> std::io::Result<()> {
    if dir.is_file() {
        if let Some(name) = dir.file_name().and_then(|n| n.to_str()) {
            out.push(name.to_owned());
        }
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    entries.sort();
    for path in entries {
        file_names(&path, out)?;
    }
    Ok(())
}

fn json<T: serde::Serialize>(value: &T) -> anyhow::Result<String> {
    let mut text = serde_json::to_string_pretty(value).context("encoding JSON")?;
    text.push('\n');
    Ok(text)
}

/// Rows with a header, rendered as aligned text or a Markdown table.
struct Grid {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Grid {
    fn new(header: &[&str]) -> Self {
        Self {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    fn render(&self, format: RulesFormat, out: &mut String) {
        if format == RulesFormat::Md {
            let line = |cells: &[String]| {
                let cells: Vec<String> = cells.iter().map(|c| escape(c)).collect();
                format!("| {} |\n", cells.join(" | "))
            };
            out.push_str(&line(&self.header));
            out.push_str(&line(&vec!["---".to_owned(); self.header.len()]));
            for row in &self.rows {
                out.push_str(&line(row));
            }
            out.push('\n');
            return;
        }
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect();
            format!("  {}\n", padded.join("  ").trim_end())
        };
        out.push_str(&line(&self.header));
        for row in &self.rows {
            out.push_str(&line(row));
        }
        out.push('\n');
    }
}

fn heading(format: RulesFormat, level: usize, text: &str, out: &mut String) {
    if format == RulesFormat::Md {
        let _ = writeln!(out, "{} {}\n", "#".repeat(level + 1), escape(text));
    } else {
        let _ = writeln!(out, "{text}");
    }
}

fn line(format: RulesFormat, text: &str, out: &mut String) {
    if format == RulesFormat::Md {
        let _ = writeln!(out, "- {}", escape(text));
    } else {
        let _ = writeln!(out, "  {text}");
    }
}

fn n3(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.3}"))
}

fn interval(low: Option<f64>, high: Option<f64>) -> String {
    match (low, high) {
        (Some(l), Some(h)) => format!("[{l:.3}, {h:.3}]"),
        _ => "-".to_owned(),
    }
}

/// The comparison as text or Markdown: per metric the arms' statistics and the differences
/// to the baseline, then throughput, spec decode, controls and output lengths.
pub fn render_comparison(c: &Comparison, format: RulesFormat) -> String {
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
        let unit = if m.metric.higher_is_better() {
            "tok/s"
        } else {
            "ms"
        };
        heading(format, 1, &format!("{} ({unit})", m.metric), &mut out);
        let mut grid = Grid::new(&[
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
                    n3(run.mean),
                    interval(run.ci95_low, run.ci95_high),
                    n3(run.p50),
                    n3(run.p95),
                    n3(run.p99),
                ]);
            }
        }
        grid.render(format, &mut out);
        let mut diffs = Grid::new(&[
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
                    "{:.3} [{:.3}, {:.3}] over {pairs} pairs",
                    i.estimate, i.low, i.high
                ),
                Paired::NotPaired { reason } => format!("not paired: {reason}"),
            };
            diffs.row(vec![
                d.arm.clone(),
                c.baseline.clone(),
                n3(d.difference),
                d.ratio
                    .map_or_else(|| "-".to_owned(), |r| format!("{r:.3}x")),
                d.welch
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), |w| interval(Some(w.low), Some(w.high))),
                paired,
            ]);
        }
        diffs.render(format, &mut out);
    }

    heading(format, 1, "aggregate output throughput (tok/s)", &mut out);
    let mut grid = Grid::new(&["arm", "output tok/s", "estimate", "ratio", "per replica"]);
    for t in &c.throughput {
        let per_replica: Vec<String> = t
            .per_replica
            .iter()
            .flat_map(|(run, replicas)| {
                replicas
                    .iter()
                    .map(move |r| format!("{run}/r{}: {:.3}", r.replica, r.output_tps))
            })
            .collect();
        grid.row(vec![
            t.arm.clone(),
            n3(t.estimate.value()),
            t.estimate.label(),
            n3(t.ratio_to_baseline),
            per_replica.join(", "),
        ]);
    }
    grid.render(format, &mut out);

    heading(format, 1, "speculative decoding", &mut out);
    let mut grid = Grid::new(&[
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
                n3(r.acceptance_rate),
                n3(r.mean_accepted_length),
            ]);
        }
    }
    if grid.rows.is_empty() {
        line(format, "no spec-decode counters recorded", &mut out);
        out.push('\n');
    } else {
        grid.render(format, &mut out);
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
pub fn render_refusal(r: &Refusal) -> String {
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
pub fn render_check(report: &CheckReport, format: RulesFormat) -> String {
    let mut out = String::new();
    heading(format, 0, "advance rules", &mut out);
    let mut grid = Grid::new(&["arm", "rule", "verdict"]);
    for arm in &report.arms {
        for (rule, v) in &arm.rules {
            grid.row(vec![arm.arm.clone(), format!("{rule:?}"), verdict(v)]);
        }
    }
    if grid.rows.is_empty() {
        line(format, "no artifacts", &mut out);
        out.push('\n');
    } else {
        grid.render(format, &mut out);
    }

    for t in &report.topology {
        heading(format, 0, "topology", &mut out);
        let mut grid = Grid::new(&[
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
                r.topology.map_or_else(|| "-".to_owned(), |t| t.to_string()),
                r.gpus.map_or_else(|| "-".to_owned(), |g| g.to_string()),
                n3(r.output_tps),
                n3(r.output_tps_per_gpu),
                n3(r.scaling_efficiency),
                verdict(&r.verdict),
            ]);
        }
        grid.render(format, &mut out);
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
            &format!("STOP {:?} [{run}]: {}", s.kind, s.reason),
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
        for (kind, claims) in [("selected", &stage.selected), ("rejected", &stage.rejected)] {
            for claim in claims {
                line(
                    format,
                    &format!(
                        "{kind} \"{}\": {:?} ({})",
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
    heading(
        format,
        0,
        &format!("outcome: {:?}", report.outcome),
        &mut out,
    );
    for reason in &report.reasons {
        line(format, reason, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::fixtures::{artifact, plan};

    #[test]
    fn markdown_escapes_recorded_text_in_tables_headings_and_lines() {
        let hostile = "K|12<script>alert(1)</script>";
        let mut a = artifact("r-a", hostile, &[("spec_k", "8")], 100.0);
        a.figures.canaries[0].foreign = vec!["ANV-|`x`".to_owned()];
        let report = rules::check(&plan(), &[a], &[]);
        let md = render_check(&report, RulesFormat::Md);
        assert!(!md.contains("<script>"), "{md}");
        assert!(md.contains("K\\|12&lt;script&gt;"), "{md}");
        assert!(md.contains("ANV-\\|\\`x\\`"), "{md}");
        // Text output is not Markdown and stays as recorded.
        let text = render_check(&report, RulesFormat::Table);
        assert!(text.contains(hostile), "{text}");
    }
}
