//! `anvil campaign plan`: a campaign file's arm × cell matrix, what the data folder already
//! holds, and the command lines that would record the rest. `anvil campaign run`: the
//! campaign through the managed path (`crate::campaign::runner`), with SIGINT watched, the
//! progress on standard error and the data folder's path on standard output.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::args::{CampaignCommand, CampaignPlanArgs, CampaignRunArgs};
use crate::app::{AppError, Exit, output};
use crate::campaign::runner::{self, CampaignError, CampaignHooks, CampaignSummary, RunOptions};
use crate::campaign::{CampaignFile, CellState};
use crate::report::table::{Table, TextFormat};
use crate::shell::quote as shell_quoted;

/// One `anvil campaign` subcommand.
pub fn run(command: &CampaignCommand) -> anyhow::Result<Exit> {
    match command {
        CampaignCommand::Plan(args) => plan(args),
        CampaignCommand::Run(args) => run_campaign(args),
    }
}

fn plan(args: &CampaignPlanArgs) -> anyhow::Result<Exit> {
    let (campaign, manifest, plan) =
        CampaignFile::load_checked(&args.file).map_err(|e| AppError::wrap(Exit::BadInput, e))?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| match args.file.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
            _ => std::path::PathBuf::from("."),
        });
    let cells = campaign.plan(&args.file, &manifest, &plan, &out);
    let mut table = Table::new(&["stage", "arm", "cell", "state"]);
    for c in &cells {
        table.row(vec![
            c.stage.clone(),
            c.arm.clone(),
            c.name(),
            c.state.to_string(),
        ]);
    }
    let mut text = format!(
        "campaign {}: {} cells over {} arms, recording into {}\n",
        campaign.campaign_id,
        cells.len(),
        campaign.all_arms().len(),
        out.display()
    );
    table.render(TextFormat::Text, &mut text);
    let todo: Vec<_> = cells
        .iter()
        .filter(|c| c.state != CellState::Recorded)
        .collect();
    text.push_str(&format!(
        "\n{} recorded, {} to record\n",
        cells.len() - todo.len(),
        todo.len()
    ));
    let any = !todo.is_empty();
    for c in todo {
        text.push_str(&format!("  {}", crate::shell::join(&c.request.to_argv())));
        if c.shards > 1 {
            text.push_str(&format!(
                " (as {} local shard processes: --shard I/{} --start-at <a published instant>)",
                c.shards, c.shards
            ));
        }
        text.push('\n');
    }
    let searches = searches(&args.file, &campaign, &manifest, &plan, &out);
    let any = any || !searches.is_empty();
    text.push_str(&searches);
    if any {
        text.push_str(&format!(
            "\nanvil campaign run {} --out {}{} launches each arm's server and records them\n",
            shell_quoted(&args.file.display().to_string()),
            shell_quoted(&out.display().to_string()),
            if cells.iter().any(|c| c.state == CellState::Recorded) {
                " --resume"
            } else {
                ""
            }
        ));
    }
    output::stdout(&crate::query::output::printable(&text), "the campaign plan")?;
    Ok(Exit::Ok)
}

/// Each capacity search: what it varies between which bounds, its target, window and SLOs,
/// how many probes of how many requests it records at most, and its first probe's command.
fn searches(
    file: &std::path::Path,
    campaign: &CampaignFile,
    manifest: &crate::manifest::WorkloadManifest,
    plan: &crate::manifest::RunPlan,
    out: &std::path::Path,
) -> String {
    use crate::campaign::search::Vary;
    let mut text = String::new();
    for arm in campaign.all_arms() {
        let Some(s) = &arm.search else { continue };
        let stage = plan
            .stages_in_order()
            .iter()
            .find(|st| st.arms.iter().flatten().any(|a| *a == arm.arm))
            .map(|st| st.stage.clone())
            .unwrap_or_default();
        let kind = campaign.class_kind(&s.class);
        let counted = kind.judged().as_str();
        let (what, unit) = match s.vary {
            Vary::Concurrency => (
                "concurrency",
                format!(" {counted} in flight per replica, bisected over integers"),
            ),
            Vary::Rate => ("rate", format!(" {counted}/s, bisected geometrically")),
        };
        text.push_str(&format!(
            "\ncapacity search on {}: {what} {} to {}{unit}{}; target {} attainment of {} over window {}; probes of {} of {} at {} prompt tokens (marked --probe {}), at most {} probes ({}); result in {}\n",
            arm.arm,
            s.min,
            s.max,
            s.resolution.map(|r| format!(" to within {}%", r * 100.0)).unwrap_or_default(),
            s.target,
            crate::slo::texts(s.slos(&campaign.slo)).join(", "),
            s.window.as_str(),
            match (kind, s.requests, s.window_requests) {
                (crate::campaign::search::ClassKind::Sessions { sessions, .. }, _, _) => {
                    format!("the class's {sessions} sessions, each attaining when every turn does")
                }
                (_, Some(n), _) => format!("{n} requests"),
                (_, None, Some(w)) => format!(
                    "the first wave (load × {} replica{}) plus {w} requests",
                    arm.replicas().max(1),
                    if arm.replicas() > 1 { "s" } else { "" }
                ),
                (_, None, None) => "no stated number of requests".to_owned(),
            },
            s.class,
            s.context,
            crate::campaign::search::PROBE,
            s.most_probes(),
            if s.repeats > 1 {
                format!("including {} runs of each side of the final bracket", s.repeats)
            } else {
                "each side of the final bracket once".to_owned()
            },
            out.join(&campaign.campaign_id)
                .join(crate::artifact::capacity::CAPACITY_JSON)
                .display()
        ));
        match campaign.probe(file, manifest, &stage, &arm, s, s.min, 1, out) {
            Ok(first) => {
                text.push_str(&format!(
                    "  first probe ({}): {}\n",
                    first.state,
                    crate::shell::join(&first.request.to_argv())
                ));
            }
            Err(why) => text.push_str(&format!("  its probes cannot be planned: {why}\n")),
        }
    }
    text
}

fn run_campaign(args: &CampaignRunArgs) -> anyhow::Result<Exit> {
    let interrupted = watch_interrupts();
    let mut record = record_in_process;
    let opts = RunOptions {
        file: args.file.clone(),
        out: args.out.clone(),
        resume: args.resume,
        stop_after_restore: args.stop_after_restore,
    };
    let hooks = CampaignHooks {
        notices: crate::app::stderr_notices(),
        record: &mut record,
        interrupted,
    };
    let summary = runner::run(&opts, hooks).map_err(campaign_error)?;
    eprintln!("{}", ending(&summary));
    output::stdout(
        &format!("{}\n", summary.folder.display()),
        "the data folder's path",
    )?;
    Ok(exit(&summary))
}

/// A campaign that could not run, with its exit class.
pub fn campaign_error(e: CampaignError) -> anyhow::Error {
    match e {
        CampaignError::BadInput(why) => AppError::wrap(Exit::BadInput, anyhow::anyhow!("{why}")),
        CampaignError::Failed(why) => AppError::wrap(Exit::Failed, anyhow::anyhow!("{why}")),
    }
}

/// Record one cell in this process, as `anvil-capture run` records it (the runner has said
/// its command line, so any cell can be repeated by hand).
pub fn record_in_process(
    request: &crate::capture::request::RunRequest,
) -> anyhow::Result<crate::capture::RunSummary> {
    let hooks = crate::capture::RunHooks {
        notices: crate::app::stderr_notices(),
        abort: abort_campaign,
        // The campaign handles SIGTERM: the cell in flight completes, no other starts.
        sigterm: false,
    };
    crate::app::capture::record_request(request, hooks)
}

/// The last lines on standard error: what was recorded, what failed, the restoration, and
/// the command that reports the folder.
pub fn ending(s: &CampaignSummary) -> String {
    let mut text = format!(
        "anvil campaign: {} of {} cells recorded{}; {} problems",
        s.recorded,
        s.cells,
        if s.skipped > 0 {
            format!(", {} kept from before", s.skipped)
        } else {
            String::new()
        },
        s.failures.len()
    );
    for f in &s.failures {
        text.push_str(&format!("\n  - {f}"));
    }
    for c in &s.capacity {
        text.push_str(&format!("\nanvil campaign: capacity search {c}"));
    }
    if let Some(rule) = &s.stop_rule {
        text.push_str(&format!("\nanvil campaign: {rule}"));
    }
    text.push_str(&format!(
        "\nanvil campaign: starting service {}\nanvil campaign: journal {}\nanvil campaign: report it with: anvil report --data {} --manifest {} --plan {} --out campaign.html",
        s.restoration_verdict,
        s.journal.display(),
        shell_quoted(&s.folder.display().to_string()),
        shell_quoted(&s.manifest.display().to_string()),
        shell_quoted(&s.plan.display().to_string()),
    ));
    text
}

/// Interrupted, a stop rule or a failed restoration, cells not recorded, or all well.
pub fn exit(s: &CampaignSummary) -> Exit {
    if s.interrupted {
        Exit::Interrupted
    } else if s.stop_rule.is_some() || !s.restored {
        Exit::RuleFailed
    } else if !s.failures.is_empty() {
        Exit::Incomplete
    } else {
        Exit::Ok
    }
}

/// A flag set by the first SIGINT, SIGTERM or SIGHUP (the runner starts no further cell,
/// stops the server and restores the starting service); a second one kills every server the
/// campaign started and leaves at once. The handlers are in place when this returns.
pub fn watch_interrupts() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let set = flag.clone();
    let (ready, registered) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("anvil-campaign-signals".into())
        .spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                let _ = ready.send(false);
                return;
            };
            rt.block_on(async move {
                use tokio::signal::unix::{SignalKind, signal};
                let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
                    signal(SignalKind::interrupt()),
                    signal(SignalKind::terminate()),
                    signal(SignalKind::hangup()),
                ) else {
                    let _ = ready.send(false);
                    return;
                };
                let _ = ready.send(true);
                let mut seen = 0;
                loop {
                    let name = tokio::select! {
                        _ = int.recv() => "SIGINT",
                        _ = term.recv() => "SIGTERM",
                        _ = hup.recv() => "SIGHUP",
                    };
                    seen += 1;
                    if seen == 1 {
                        set.store(true, Ordering::SeqCst);
                        eprintln!(
                            "\nanvil campaign: {name}: no further cell starts; the server is stopped and the starting service restored (signal again to leave at once)"
                        );
                    } else {
                        leave_now(name);
                    }
                }
            });
        });
    let watching = spawned.is_ok() && registered.recv().unwrap_or(false);
    if !watching {
        eprintln!(
            "anvil campaign: cannot watch for SIGINT/SIGTERM: an interrupt ends the campaign at once, without restoring the starting service"
        );
    }
    flag
}

/// Kill every server the campaign started and exit as interrupted.
fn leave_now(name: &str) -> ! {
    eprintln!(
        "\nanvil campaign: {name} again: the servers started are killed and the campaign leaves now; the journal says how far it got (`--resume` continues)"
    );
    crate::campaign::supervise::kill_live();
    std::process::exit(i32::from(Exit::Interrupted.code()))
}

/// A recording's second SIGINT (the recorder's own handler): leave as [`leave_now`] does.
fn abort_campaign() -> ! {
    leave_now("SIGINT")
}
