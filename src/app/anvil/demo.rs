//! `anvil demo`: record a campaign against `anvil-sim` profiles started in this process, then
//! render its report.
//!
//! Two campaigns are defined here, both laid out on the seeds' run plan (arm and stage names
//! as the plan spells them):
//!
//! - `small` (the default): the baseline stage's two arms on the headline cell and the
//!   functional checks, and one within-screen comparison (K4 vs K12), with the simulator's clock running
//!   [`DEMO_SPEED`] times faster than its profiles, so the whole demo takes well under a
//!   minute;
//! - `sample`: the committed sample campaign in `sample-data/` (`just sample-data`): every
//!   arm of the plan the simulator has a profile for (target-only and speculative K4/K8/
//!   K12/K16, chunked prefill 1024/2048/8192 at K12, TP1/TP2/two TP1 replicas, a second
//!   runtime with and without MTP-style speculation), on the headline cell, the 4K screen
//!   and a short context curve, each arm with the functional checks, at the profiles' own
//!   speed.
//!
//! Each arm gets its own simulator (`anvil::sim::start_in_process`, ordinary scheduling);
//! each cell is recorded by the same code path as `anvil-capture run`, with the arguments
//! shown in the progress line so a reader can repeat any cell by hand.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::Parser;

use super::args::{DemoArgs, DemoCampaign, ReportFormat};
use super::report::render;
use crate::app::capture::{Cli as CaptureCli, Command as CaptureCommand, capture_error, hooks};
use crate::app::output::{self, write_file};
use crate::app::{AppError, Exit};
use crate::capture::config::{RunConfig, process_env};
use crate::manifest::{RunPlan, WorkloadManifest};

/// The seeds, embedded so the demo runs from any folder.
const MANIFEST: &str = include_str!("../../../sample-data/workload-manifest.json");
const PLAN: &str = include_str!("../../../sample-data/run-plan.json");

/// How much faster than its profile the small demo's simulator runs.
pub const DEMO_SPEED: f64 = 8.0;

/// One cell to record.
#[derive(Debug, Clone, Copy)]
struct Cell {
    class: &'static str,
    context: u64,
    concurrency: u32,
    requests: u64,
}

const HEADLINE: Cell = Cell {
    class: "headline-sustained-output",
    context: 4096,
    concurrency: 8,
    requests: 100,
};

/// The 4K optimization screen: the manifest's smallest screen count at C4 that still gives
/// every arm several rounds of four concurrent requests.
const SCREEN: Cell = Cell {
    class: "optimization-screen",
    context: 4096,
    concurrency: 4,
    requests: 16,
};

const SCREEN_SMALL: Cell = Cell {
    requests: 8,
    ..SCREEN
};

/// The functional checks: 8 requests, two per check (the manifest's smallest functional
/// count that gives every check more than one request).
const FUNCTIONAL: Cell = Cell {
    class: "functional",
    context: 4096,
    concurrency: 1,
    requests: 8,
};

const CURVE_32K: Cell = Cell {
    class: "context-curve",
    context: 32768,
    concurrency: 1,
    requests: 3,
};

const CURVE_128K: Cell = Cell {
    context: 131072,
    ..CURVE_32K
};

/// One arm: the plan's names, the simulator that stands in for its server, the
/// configuration recorded with `--set`, and the cells recorded against it.
#[derive(Debug, Clone, Copy)]
struct Arm {
    arm: &'static str,
    stage: &'static str,
    /// `anvil-sim` flags after `--profile`.
    sim: &'static [&'static str],
    replicas: usize,
    set: &'static [&'static str],
    cells: &'static [Cell],
}

const TARGET_ONLY: Arm = Arm {
    arm: "Inferact target-only",
    stage: "baseline",
    sim: &["--profile", "no-spec"],
    replicas: 1,
    set: &[
        "runtime=sglang (anvil-sim)",
        "checkpoint=Inferact",
        "spec_depth=0",
        "chunked_prefill=2048",
        "topology=TP1",
    ],
    cells: &[HEADLINE, FUNCTIONAL, CURVE_32K, CURVE_128K],
};

const K8: Arm = Arm {
    arm: "Inferact DFlash2 K8",
    stage: "baseline",
    sim: &["--profile", "spec-k8"],
    replicas: 1,
    set: &[
        "runtime=sglang (anvil-sim)",
        "checkpoint=Inferact",
        "spec_depth=8",
        "chunked_prefill=2048",
        "topology=TP1",
    ],
    cells: &[HEADLINE, FUNCTIONAL, CURVE_32K, CURVE_128K],
};

const fn screen_arm(
    arm: &'static str,
    sim: &'static [&'static str],
    set: &'static [&'static str],
    cells: &'static [Cell],
) -> Arm {
    Arm {
        arm,
        stage: "SGLang optimization",
        sim,
        replicas: 1,
        set,
        cells,
    }
}

const SCREEN_SWEEP: &[Arm] = &[
    screen_arm(
        "K4",
        &["--profile", "spec-k4"],
        &["spec_depth=4", "chunked_prefill=2048"],
        &[SCREEN, FUNCTIONAL],
    ),
    screen_arm(
        "K12",
        &["--profile", "spec-k12"],
        &["spec_depth=12", "chunked_prefill=2048"],
        &[SCREEN, FUNCTIONAL],
    ),
    screen_arm(
        "K16",
        &["--profile", "spec-k16"],
        &["spec_depth=16", "chunked_prefill=2048"],
        &[SCREEN, FUNCTIONAL],
    ),
    screen_arm(
        "chunk1K",
        &["--profile", "spec-k12", "--chunked-prefill", "1024"],
        &["spec_depth=12", "chunked_prefill=1024"],
        &[SCREEN, FUNCTIONAL],
    ),
    screen_arm(
        "chunk8K",
        &["--profile", "spec-k12", "--chunked-prefill", "8192"],
        &["spec_depth=12", "chunked_prefill=8192"],
        &[SCREEN, FUNCTIONAL],
    ),
];

const fn topology_arm(
    arm: &'static str,
    sim: &'static [&'static str],
    replicas: usize,
    topology: &'static [&'static str],
) -> Arm {
    Arm {
        arm,
        stage: "matched topology",
        sim,
        replicas,
        set: topology,
        cells: &[HEADLINE, FUNCTIONAL],
    }
}

const TOPOLOGY: &[Arm] = &[
    topology_arm(
        "TP1",
        &[
            "--profile",
            "tp1",
            "--spec-depth",
            "12",
            "--spec-accept",
            "0.65",
        ],
        1,
        &["spec_depth=12", "topology=TP1"],
    ),
    topology_arm(
        "TP2",
        &[
            "--profile",
            "tp2",
            "--spec-depth",
            "12",
            "--spec-accept",
            "0.65",
        ],
        1,
        &["spec_depth=12", "topology=TP2"],
    ),
    topology_arm(
        "two independent TP1 replicas",
        &[
            "--profile",
            "tp1",
            "--spec-depth",
            "12",
            "--spec-accept",
            "0.65",
        ],
        2,
        &["spec_depth=12", "topology=DP2"],
    ),
];

const ALTERNATE_RUNTIME: &[Arm] = &[
    Arm {
        arm: "kelnei vLLM 0.27.1 MTP2",
        stage: "alternate runtime",
        sim: &["--profile", "mtp2"],
        replicas: 1,
        set: &[
            "runtime=vllm (anvil-sim)",
            "spec=mtp",
            "spec_depth=2",
            "topology=TP1",
        ],
        cells: &[HEADLINE, FUNCTIONAL],
    },
    Arm {
        arm: "matched no-spec",
        stage: "alternate runtime",
        sim: &["--profile", "mtp2", "--spec-depth", "0"],
        replicas: 1,
        set: &[
            "runtime=vllm (anvil-sim)",
            "spec=mtp",
            "spec_depth=0",
            "topology=TP1",
        ],
        cells: &[HEADLINE, FUNCTIONAL],
    },
];

/// The arms of a campaign, in recording order.
fn arms(campaign: DemoCampaign) -> Vec<Arm> {
    match campaign {
        DemoCampaign::Small => {
            let headline_only = |a: Arm| Arm {
                cells: &[HEADLINE, FUNCTIONAL],
                ..a
            };
            vec![
                headline_only(TARGET_ONLY),
                headline_only(K8),
                Arm {
                    cells: &[SCREEN_SMALL, FUNCTIONAL],
                    ..SCREEN_SWEEP[0]
                },
                Arm {
                    cells: &[SCREEN_SMALL, FUNCTIONAL],
                    ..SCREEN_SWEEP[1]
                },
            ]
        }
        DemoCampaign::Sample => [TARGET_ONLY, K8]
            .into_iter()
            .chain(SCREEN_SWEEP.iter().copied())
            .chain(TOPOLOGY.iter().copied())
            .chain(ALTERNATE_RUNTIME.iter().copied())
            .collect(),
    }
}

/// The simulator's command line for `arm` at `speed`: its profile's prefill and decode
/// rates multiplied (unless the arm sets them), a free loopback port, contexts up to 256K.
fn sim_args(arm: &Arm, speed: f64) -> anyhow::Result<Vec<String>> {
    let mut args: Vec<String> = ["anvil-sim", "--port", "0", "--no-realtime"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    args.extend(arm.sim.iter().map(|s| (*s).to_owned()));
    args.extend([
        "--replicas".to_owned(),
        arm.replicas.to_string(),
        "--max-model-len".to_owned(),
        "262144".to_owned(),
    ]);
    if speed != 1.0 {
        let name = arm
            .sim
            .iter()
            .position(|a| *a == "--profile")
            .and_then(|i| arm.sim.get(i + 1))
            .copied()
            .unwrap_or("default");
        let profile = crate::sim::config::find_profile(name)
            .with_context(|| format!("arm {}: unknown simulator profile {name}", arm.arm))?;
        args.extend([
            "--prefill-tps".to_owned(),
            (profile.prefill_tps * speed).to_string(),
            "--decode-tps".to_owned(),
            (profile.decode_tps * speed).to_string(),
        ]);
    }
    Ok(args)
}

/// `anvil-capture run` arguments for one cell of `arm`.
fn capture_args(
    arm: &Arm,
    cell: &Cell,
    manifest: &Path,
    urls: &[String],
    out: &Path,
) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "anvil-capture".into(),
        "run".into(),
        "--manifest".into(),
        manifest.display().to_string(),
        "--class".into(),
        cell.class.into(),
        "--context".into(),
        cell.context.to_string(),
        "--concurrency".into(),
        cell.concurrency.to_string(),
        "--requests".into(),
        cell.requests.to_string(),
        "--arm".into(),
        arm.arm.into(),
        "--stage".into(),
        arm.stage.into(),
    ];
    for set in arm.set {
        args.extend(["--set".to_owned(), (*set).to_owned()]);
    }
    for url in urls {
        args.extend(["--endpoint".to_owned(), url.clone()]);
    }
    args.extend([
        "--quiet".to_owned(),
        "--no-realtime".to_owned(),
        "--out".to_owned(),
        out.display().to_string(),
    ]);
    args
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
    let manifest_path = seed(&out, "workload-manifest.json", MANIFEST)?;
    let plan_path = seed(&out, "run-plan.json", PLAN)?;
    let manifest = WorkloadManifest::load(&manifest_path)
        .with_context(|| format!("{}", manifest_path.display()))?;
    let plan = RunPlan::load(&plan_path).with_context(|| format!("{}", plan_path.display()))?;
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
    let arms = arms(args.campaign);
    let total: usize = arms.iter().map(|a| a.cells.len()).sum();
    let mut done = 0;
    eprintln!(
        "anvil demo: recording {total} cells of {} arms into {} (simulator at {speed}x its profiles' speed)",
        arms.len(),
        out.display()
    );
    for arm in &arms {
        let sim_argv = sim_args(arm, speed)?;
        let sim_cfg = crate::app::sim::Args::try_parse_from(&sim_argv)
            .map_err(|e| anyhow::anyhow!("arm {}: simulator arguments: {e}", arm.arm))
            .and_then(|a| {
                crate::app::sim::config(a)
                    .map_err(|e| anyhow::anyhow!("arm {}: simulator arguments: {e}", arm.arm))
            })?;
        let sim = crate::sim::start_in_process(sim_cfg)
            .with_context(|| format!("arm {}: starting the simulator", arm.arm))?;
        for cell in arm.cells {
            done += 1;
            let argv = capture_args(arm, cell, &manifest_path, &sim.urls, &out);
            let shown: Vec<String> = argv.iter().map(|a| crate::app::shell_quoted(a)).collect();
            eprintln!("anvil demo: [{done}/{total}] {}", shown.join(" "));
            let cell_started = Instant::now();
            let cli = CaptureCli::try_parse_from(&argv)
                .map_err(|e| anyhow::anyhow!("arm {}: capture arguments: {e}", arm.arm))?;
            let CaptureCommand::Run(run_args) = cli.command else {
                anyhow::bail!("arm {}: capture arguments did not parse as `run`", arm.arm);
            };
            let cfg = RunConfig::from_request((*run_args).into(), argv.clone(), &process_env)
                .map_err(|e| anyhow::anyhow!("arm {}: {e}", arm.arm))?;
            let dir = cfg.artifact_dir.clone();
            let recorded = crate::capture::run(cfg, hooks()).map_err(capture_error)?;
            let exit = crate::app::capture::status_exit(recorded.status);
            if exit != Exit::Ok {
                eprintln!(
                    "anvil demo: arm {}: recording {} ended {} (exit code {}){}; what was recorded is in {}",
                    arm.arm,
                    cell.class,
                    recorded.status.as_str(),
                    exit.code(),
                    recorded
                        .reason
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default(),
                    dir.display()
                );
                return Ok(exit);
            }
            eprintln!(
                "anvil demo:        {} ({:.1} s)",
                dir.display(),
                cell_started.elapsed().as_secs_f64()
            );
        }
        sim.stop()
            .with_context(|| format!("arm {}: stopping the simulator", arm.arm))?;
    }
    let report = args
        .report
        .clone()
        .unwrap_or_else(|| out.join("campaign.html"));
    let (html, outcome) = render(
        std::slice::from_ref(&out),
        &plan,
        &manifest,
        ["the demo's workload manifest", "the demo's run plan"],
        ReportFormat::Html,
    )?;
    write_file(&report, &html)?;
    eprintln!(
        "anvil demo: {total} cells recorded and the report written in {:.1} s; `anvil check` would exit {}",
        started.elapsed().as_secs_f64(),
        Exit::from(outcome).code()
    );
    output::stdout(&format!("{}\n", report.display()), "the report's path")?;
    Ok(Exit::Ok)
}
