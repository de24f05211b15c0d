//! `anvil report`: gather the campaign's data from the views, run the rules (check with
//! every stage's comparisons, the headline comparison), and write the report the pure
//! renderers of [`crate::report`] make of it.

use std::path::PathBuf;

use super::args::{ReportArgs, ReportFormat};
use super::check::check_data;
use super::{Documents, open_session_materialized, runtime};
use crate::app::{Exit, output};
use crate::gather::report_input::{definitions, gather};
use crate::manifest::RunPlan;
use crate::report::{ReportInput, render_html, render_markdown};
use crate::rules::{self, HeadlineSelection, Outcome};

/// The report of the artifacts beneath `data` (HTML or Markdown), and the campaign's
/// outcome.
pub fn render(
    data: &[PathBuf],
    docs: &Documents,
    format: ReportFormat,
    slos: &crate::slo::Slos,
    campaign: Option<&std::path::Path>,
) -> anyhow::Result<(String, Outcome)> {
    let (plan, manifest) = (&docs.plan, &docs.manifest);
    let selection = HeadlineSelection::from_manifest(manifest)
        .map_err(|e| anyhow::anyhow!("the manifest defines no headline workload: {e}"))?;
    let rt = runtime()?;
    let gathered = rt.block_on(async {
        let session = open_session_materialized("report", data, slos).await?;
        anyhow::Ok((
            gather(&session).await?,
            crate::gather::rules_input::read_tradeoff(&session).await?,
        ))
    })?;
    let (gathered, tradeoff) = gathered;
    let slo_text = if slos.is_empty() {
        String::new()
    } else {
        format!("{} (from {})", slos.text(), slos.source)
    };
    let [m, p] = &docs.names;
    rules::one_campaign(manifest, plan, [m, p], &gathered.artifacts)?;
    let check = check_data(
        plan,
        &selection,
        &gathered.artifacts,
        data,
        &manifest.controls,
    )?;
    let mut headline = rules::headline_comparison(&gathered.artifacts, &selection, plan);
    if let Some(Ok(c)) = headline.as_mut() {
        c.min_effect = check.min_effect;
        c.min_effect_by = check.min_effect_by.clone();
        c.slo_target = check.slo_target;
    }
    let data_folder: Vec<String> = data.iter().map(|d| crate::location::shown(d)).collect();
    let data_folder = data_folder.join(", ");
    let generated = crate::artifact::run::utc_now();
    let definitions = definitions();
    let planned = planned_cells(data, campaign, plan);
    let manifest_file = docs.manifest_path.display().to_string();
    let input = ReportInput {
        data_folder: &data_folder,
        manifest_file: &manifest_file,
        generated_utc: &generated,
        tool_version: env!("CARGO_PKG_VERSION"),
        plan,
        manifest,
        check: &check,
        artifacts: &gathered.artifacts,
        headline: headline.as_ref().map(|r| r.as_ref()),
        screens: &check.stages,
        runs: &gathered.runs,
        requests: &gathered.requests,
        queues: &gathered.queues,
        known_queue_gauges: &gathered.known_queue_gauges,
        client_queues: &gathered.client_queues,
        prefill_waits: &gathered.prefill_waits,
        server_timings: &gathered.server_timings,
        tokens_per_chunk: &gathered.tokens_per_chunk,
        snippets: &gathered.snippets,
        definitions: &definitions,
        check_exit_code: Exit::from(check.outcome).code(),
        slos: &slo_text,
        tradeoff: &tradeoff,
        capacity: &super::capacity_beside("report", data),
        spec_positions: &gathered.spec_positions,
        planned: planned.as_ref(),
        cache: &gathered.cache,
    };
    let view = crate::report::build(&input);
    let text = match format {
        ReportFormat::Html => render_html(&view)?,
        ReportFormat::Md => render_markdown(&view),
    };
    Ok((text, check.outcome))
}

/// The cells the campaign file plans (`campaign`, else a `campaign.json` in a data
/// folder), when one is found and it is this plan's campaign; the report marks what it
/// plans and did not record.
fn planned_cells(
    data: &[PathBuf],
    campaign: Option<&std::path::Path>,
    plan: &RunPlan,
) -> Option<crate::report::sections::decision::PlannedCells> {
    let file = match campaign {
        Some(f) => f.to_owned(),
        None => data
            .iter()
            .map(|d| d.join("campaign.json"))
            .find(|f| f.is_file())?,
    };
    let (campaign, manifest, campaign_plan) =
        crate::campaign::CampaignFile::load_checked(&file).ok()?;
    if campaign_plan.campaign_id != plan.campaign_id {
        return None;
    }
    let out = file.parent().unwrap_or(std::path::Path::new("."));
    let out = if out.as_os_str().is_empty() {
        std::path::Path::new(".")
    } else {
        out
    };
    let cells = campaign
        .plan(&file, &manifest, &campaign_plan, out)
        .into_iter()
        .map(|c| (c.stage, c.arm, c.cell_id))
        .collect();
    Some(crate::report::sections::decision::PlannedCells {
        file: file.display().to_string(),
        out: out.display().to_string(),
        cells,
        objective: campaign.objective.clone(),
        order: campaign.order.as_str().to_owned(),
    })
}

/// `anvil report`: exit 0 when the report was written, 2 on bad input. The campaign's own
/// outcome (what `anvil check` exits with) is stated in the report and on standard error.
pub fn run(args: &ReportArgs) -> anyhow::Result<Exit> {
    let evidence = super::evidence("report", &args.evidence, &args.evidence.folders(&[]))?;
    let campaign = super::resolve_document(args.evidence.slo.campaign.as_deref(), true)?;
    let (text, outcome) = render(
        &evidence.data,
        &evidence.docs,
        args.format,
        &evidence.slos,
        campaign.as_deref(),
    )?;
    let out = match (&args.out, args.format) {
        (Some(path), _) => Some(path.clone()),
        (None, ReportFormat::Html) => Some(PathBuf::from("reports/campaign.html")),
        (None, ReportFormat::Md) => None,
    };
    match out {
        Some(path) => {
            output::write_file(&path, &text)?;
            eprintln!(
                "anvil report: campaign outcome {} (exit code of `anvil check`: {})",
                outcome_words(outcome),
                Exit::from(outcome).code()
            );
            output::stdout(&format!("{}\n", path.display()), "the report's path")?;
        }
        None => output::stdout(&text, "the report to standard output")?,
    }
    Ok(Exit::Ok)
}

/// The outcome as the report's closing line says it.
fn outcome_words(outcome: Outcome) -> &'static str {
    if outcome.failed() {
        "rule failed or stop rule fired"
    } else {
        outcome.label()
    }
}
