//! `anvil demo`: run a campaign through the managed path (`anvil campaign run`'s runner)
//! against `anvil-sim` processes, then render its report.
//!
//! The campaign is the committed sample campaign file (`sample-data/campaign.json`: every arm
//! of the seeds' run plan the simulator has a profile for, each launched as its own simulator
//! process), written into `--out` with three changes: each simulator is this executable's
//! hidden `anvil sim` (the demo needs no second binary), every port is a free one, and every
//! simulator runs `--speed` times faster than its profile.
//!
//! - `small` (the default): the baseline stage's two arms on the headline cell and the
//!   functional checks, and one within-screen comparison (K4 vs K12 on an 8-request screen),
//!   at [`DEMO_SPEED`] times the profiles' speed, so the whole demo takes well under a
//!   minute;
//! - `sample`: the whole sample campaign at the profiles' own speed (what `just sample-data`
//!   records into `sample-data/`).
//!
//! The starting service is fingerprinted before the first arm and restored after the last,
//! so the report's restore stage is backed by a real `restoration.json`; the demo then stops
//! it (it was a simulator started for the demo).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use serde_json::Value;

use super::args::{DemoArgs, DemoCampaign, ReportFormat};
use super::report::render;
use crate::app::output::{self, write_file};
use crate::app::{AppError, Exit};
use crate::campaign::runner::{self, CampaignHooks, RunOptions};
use crate::manifest::{RunPlan, WorkloadManifest};
use crate::shell::quote as shell_quoted;

/// The seeds and the sample campaign file, embedded so the demo runs from any folder.
const MANIFEST: &str = include_str!("../../../sample-data/workload-manifest.json");
const PLAN: &str = include_str!("../../../sample-data/run-plan.json");
const CAMPAIGN: &str = include_str!("../../../sample-data/campaign.json");
/// The trace excerpt the sample campaign's `mooncake-replay` class replays (beside the
/// campaign file, as its `workloads` section names it).
const TRACE: (&str, &str) = (
    "traces/mooncake_conversation_head.jsonl",
    include_str!("../../../sample-data/traces/mooncake_conversation_head.jsonl"),
);

/// How much faster than its profile the small demo's simulator runs.
pub const DEMO_SPEED: f64 = 8.0;

const HEADLINE: &str = "headline-sustained-output.ctx4096.c8.n100";
const FUNCTIONAL: &str = "functional.ctx4096.c1.n8";
/// The small demo's screen: 8 requests at C4 (two rounds per arm).
const SCREEN_SMALL: &str = "optimization-screen.ctx4096.c4.n8";

/// The small demo: the baseline arms on the headline cell, the sweep cut to K4 and K12.
const SMALL_ARMS: [&str; 2] = ["Inferact target-only", "Inferact DFlash2 K8"];
const SMALL_SWEEP: [&str; 2] = ["4", "12"];

/// The demo's campaign file: the sample campaign, cut down for `small`, with `exe sim` as
/// each simulator, free ports and `--speed speed`.
fn campaign_file(campaign: DemoCampaign, exe: &Path, speed: f64) -> anyhow::Result<Value> {
    let mut doc: Value =
        serde_json::from_str(CAMPAIGN).context("the embedded sample campaign file")?;
    if campaign == DemoCampaign::Small {
        if let Some(arms) = doc["arms"].as_array_mut() {
            arms.retain(|a| SMALL_ARMS.iter().any(|n| a["arm"] == *n));
            for arm in arms.iter_mut() {
                arm["cells"] = serde_json::json!({"ids": [HEADLINE, FUNCTIONAL]});
            }
        }
        if let Some(sweep) = doc["sweeps"].get_mut(0) {
            sweep["values"] = serde_json::json!(SMALL_SWEEP);
            sweep["template"]["cells"] = serde_json::json!({"ids": [SCREEN_SMALL, FUNCTIONAL]});
        }
        // No arm of the small demo records a declared class.
        if let Some(o) = doc.as_object_mut() {
            o.remove("workloads");
        }
    }
    rewrite_service(&mut doc["starting_service"], exe, speed)?;
    for arm in doc["arms"].as_array_mut().into_iter().flatten() {
        rewrite_service(arm, exe, speed)?;
    }
    for sweep in doc["sweeps"].as_array_mut().into_iter().flatten() {
        rewrite_service(&mut sweep["template"], exe, speed)?;
    }
    Ok(doc)
}

/// One service of the demo's campaign: `anvil-sim` → `exe sim`, `--speed`, free ports.
fn rewrite_service(service: &mut Value, exe: &Path, speed: f64) -> anyhow::Result<()> {
    if let Some(argv) = service["launch"]["argv"].as_array_mut()
        && argv.first().is_some_and(|p| p == "anvil-sim")
    {
        argv[0] = Value::from(exe.display().to_string());
        argv.insert(1, Value::from("sim"));
        argv.extend([Value::from("--speed"), Value::from(speed.to_string())]);
    }
    if let Some(ports) = service["ports"].as_array_mut() {
        let free = free_ports(ports.len())?;
        *ports = free.into_iter().map(Value::from).collect();
    }
    Ok(())
}

/// `n` loopback ports free now (bound together, then released).
fn free_ports(n: usize) -> anyhow::Result<Vec<u16>> {
    let listeners = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .context("finding free loopback ports")?;
    listeners
        .iter()
        .map(|l| Ok(l.local_addr()?.port()))
        .collect()
}

/// A document the demo needs in `out`: the one already there (checked), else the seed.
fn seed(out: &Path, name: &str, text: &str) -> anyhow::Result<PathBuf> {
    let path = out.join(name);
    // `symlink_metadata`: a dangling link is there too, and is not written through.
    if std::fs::symlink_metadata(&path).is_err() {
        crate::outfile::write_file(&path, text.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(path)
}

/// The demo writes its own `campaign.json` into `--out`; one that is not a demo's (its
/// starting service is not this executable's `sim`), such as `sample-data/campaign.json`,
/// is never replaced.
fn refuse_foreign_campaign(file: &Path) -> anyhow::Result<()> {
    let Ok(text) = std::fs::read_to_string(file) else {
        return Ok(());
    };
    let demo = serde_json::from_str::<Value>(&text)
        .ok()
        .is_some_and(|doc| doc["starting_service"]["launch"]["argv"][1] == "sim");
    if demo {
        return Ok(());
    }
    Err(AppError::wrap(
        Exit::BadInput,
        anyhow::anyhow!(
            "{} is a campaign file the demo did not write, and the demo writes its own there; \
             give another --out (`just sample-data` re-records sample-data/ through `anvil \
             campaign run`)",
            file.display()
        ),
    ))
}

/// `anvil demo`: exit 0 with the report's path on standard output.
pub fn run(args: &DemoArgs) -> anyhow::Result<Exit> {
    let started = Instant::now();
    let out = match &args.out {
        Some(dir) => dir.clone(),
        None => {
            let stamp = time::OffsetDateTime::now_utc().unix_timestamp();
            std::env::temp_dir().join(format!("anvil-demo-{stamp}-{}", std::process::id()))
        }
    };
    std::fs::create_dir_all(&out)
        .with_context(|| format!("--out {}: cannot create", out.display()))?;
    let speed = args.speed.unwrap_or(match args.campaign {
        DemoCampaign::Small => DEMO_SPEED,
        DemoCampaign::Sample => 1.0,
    });
    if !(speed.is_finite() && speed > 0.0 && speed <= 1000.0) {
        return Err(AppError::wrap(
            Exit::BadInput,
            anyhow::anyhow!("demo: --speed {speed}: expected a number in (0, 1000]"),
        ));
    }
    let manifest_path = seed(&out, "workload-manifest.json", MANIFEST)?;
    let plan_path = seed(&out, "run-plan.json", PLAN)?;
    let docs = super::Documents {
        manifest: WorkloadManifest::load(&manifest_path)
            .with_context(|| format!("{}", manifest_path.display()))?,
        plan: RunPlan::load(&plan_path).with_context(|| format!("{}", plan_path.display()))?,
        names: [
            "the demo's workload manifest".to_owned(),
            "the demo's run plan".to_owned(),
        ],
        manifest_path,
    };
    let exe = std::env::current_exe().context("finding this executable (the demo's simulator)")?;
    let doc = campaign_file(args.campaign, &exe, speed)?;
    if doc.get("workloads").is_some() {
        std::fs::create_dir_all(out.join("traces"))
            .with_context(|| format!("creating {}", out.join("traces").display()))?;
        seed(&out, TRACE.0, TRACE.1)?;
    }
    let file = out.join("campaign.json");
    refuse_foreign_campaign(&file)?;
    write_file(&file, &format!("{}\n", serde_json::to_string_pretty(&doc)?))?;
    eprintln!(
        "anvil demo: running the campaign {} into {} (simulators at {speed}x their profiles' speed); it can be run again with: anvil campaign run {} --out {}",
        file.display(),
        out.display(),
        shell_quoted(&file.display().to_string()),
        shell_quoted(&out.display().to_string()),
    );
    let interrupted = super::campaign::watch_interrupts();
    let mut record = super::campaign::record_in_process;
    let hooks = CampaignHooks {
        notices: crate::app::stderr_notices(),
        record: &mut record,
        interrupted,
    };
    let opts = RunOptions {
        file,
        out: out.clone(),
        resume: args.resume,
        stop_after_restore: true,
    };
    let summary = runner::run(&opts, hooks).map_err(super::campaign::campaign_error)?;
    let exit = super::campaign::exit(&summary);
    if exit != Exit::Ok {
        eprintln!("{}", super::campaign::ending(&summary));
        return Ok(exit);
    }
    let report = args
        .report
        .clone()
        .unwrap_or_else(|| out.join("campaign.html"));
    let data = std::slice::from_ref(&out);
    let slos = super::resolve_slos("demo", &Default::default(), data)?;
    let (html, outcome) = render(data, &docs, ReportFormat::Html, &slos, None)?;
    write_file(&report, &html)?;
    eprintln!(
        "anvil demo: {} cells recorded, the starting service {}, and the report written in {:.1} s; `anvil check` would exit {}",
        summary.recorded,
        summary.restoration_verdict,
        started.elapsed().as_secs_f64(),
        Exit::from(outcome).code()
    );
    output::stdout(&format!("{}\n", report.display()), "the report's path")?;
    Ok(Exit::Ok)
}
