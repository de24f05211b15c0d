//! The `anvil-capture` command line: clap structs holding what was typed, and [`run`], which
//! turns them into a checked [`super::config::RunConfig`] and carries out one subcommand,
//! returning the process exit code (see [`crate::exit`]).

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use super::cells;
use super::config::{self, ConfigError, RunConfig};
use super::driver;
use crate::exit;
use crate::manifest::WorkloadManifest;

fn exit_codes_help() -> String {
    format!(
        "Exit codes:\n  \
         {}    the run completed (failed requests are recorded, not fatal)\n  \
         {}    bad input: a malformed manifest, flag, URL, output folder or unreachable endpoint;\n       \
         nothing was written\n  \
         {}    the run could not be measured: calibration failed against the server, or the\n       \
         recorder failed while running (the artifact is marked `failed` and says why)\n  \
         {}  interrupted by SIGINT (the artifact is finalised as `interrupted`)",
        exit::OK,
        exit::BAD_INPUT,
        exit::CAPTURE_FAILED,
        exit::INTERRUPTED
    )
}

/// The `--no-realtime` help, naming the priority the code actually uses.
fn realtime_help() -> String {
    format!(
        "Keep ordinary scheduling. By default the threads that read the sockets and stamp \
         events run SCHED_FIFO (priority {}) when the system permits, so that other work on \
         the client machine cannot delay a timestamp; the writer thread stays ordinary.",
        crate::realtime::CAPTURE_PRIORITY
    )
}

/// anvil-capture: record one cell of a workload manifest against one or more endpoints.
#[derive(Debug, Parser)]
#[command(name = "anvil-capture", version, after_help = exit_codes_help())]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List every cell the manifest defines, one per line, tab-separated, with a stable id.
    Cells(CellsArgs),
    /// Record one cell: drive the endpoints and write one artifact folder.
    ///
    /// The artifact goes to OUT/<campaign_id>/<arm>/<cell_id>/ and its path is the last line
    /// of standard output. Progress and the quick-look summary go to standard error.
    #[command(after_help = exit_codes_help())]
    Run(Box<RunArgs>),
    /// Turn what a killed run left in DIR into a valid artifact marked `interrupted`.
    Recover(RecoverArgs),
}

#[derive(Debug, Args)]
pub struct CellsArgs {
    /// The workload manifest (anvil-serving.benchmark-workload-manifest/v1).
    #[arg(long, value_name = "FILE")]
    pub manifest: PathBuf,
}

#[derive(Debug, Args)]
pub struct RecoverArgs {
    /// The artifact folder of the killed run.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// What `run` was given, unchecked.
#[derive(Debug, Args, Clone)]
// A negative number is a value, so `--requests -1` is refused as an invalid count rather than
// reported as a stray argument.
#[command(allow_negative_numbers = true)]
pub struct RunArgs {
    /// The workload manifest (anvil-serving.benchmark-workload-manifest/v1).
    #[arg(long, value_name = "FILE")]
    pub manifest: PathBuf,
    /// Workload class id from the manifest, e.g. headline-sustained-output.
    ///
    /// `functional` runs four checks in one artifact (the `check` column of requests), the
    /// requests split evenly over them (--requests must be a multiple of 4): `coding` (a
    /// named Python function in a fenced block) one at a time, `structured_json` (strict
    /// json_schema with a nested object, an enum, an array and required fields) all of its
    /// share at once, `tools` (four tool definitions behind a long shared system prompt, the
    /// canary as the `ticket` argument) all at once, and `responses` (streamed
    /// /v1/responses) one at a time. The verdicts are computed by `anvil sql`'s
    /// functional_results view.
    #[arg(long, value_name = "CLASS")]
    pub class: String,
    /// Prompt token target (must be one of the manifest's for the class).
    #[arg(long, value_name = "TOKENS")]
    pub context: Option<u64>,
    /// Concurrent requests per replica.
    #[arg(long, value_name = "C")]
    pub concurrency: Option<u32>,
    /// Measured requests, all replicas together.
    #[arg(long, value_name = "N")]
    pub requests: Option<u64>,
    /// Allow values outside the manifest's lists; run.json then says `off_manifest: true`.
    #[arg(long)]
    pub off_manifest: bool,
    /// Arm name (a folder level of the artifact path), e.g. K12.
    #[arg(long, value_name = "NAME")]
    pub arm: String,
    /// Run-plan stage of the arm.
    #[arg(long, value_name = "NAME")]
    pub stage: Option<String>,
    /// Arm configuration as KEY=VALUE (repeatable, order kept), e.g. --set spec_depth=12.
    /// `runtime=...` also names the arm's runtime.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Base URL of one replica (repeat for each replica), e.g. http://127.0.0.1:8000.
    #[arg(long = "endpoint", value_name = "URL", required = true)]
    pub endpoints: Vec<String>,
    /// Model name to send; default: the first model the first endpoint's /v1/models lists.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// API to drive: chat, responses or completions.
    #[arg(long, value_name = "API", default_value = "chat")]
    pub api: String,
    /// Name of an environment variable holding a bearer token (never written anywhere).
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,
    /// Open loop: release R requests per second (all replicas together) instead of closed
    /// loop; each goes to the next free worker (C per replica), so C caps what is in flight.
    #[arg(long, value_name = "R", allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// With --rate: exponential (Poisson-process) gaps instead of constant ones.
    #[arg(long, requires = "rate")]
    pub poisson: bool,
    /// Warm-up requests before the measured ones (recorded with kind `warmup`).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub warmup: u64,
    /// Prometheus URL of each replica, in replica order (default: the endpoint's origin +
    /// /metrics).
    #[arg(long = "metrics-url", value_name = "URL")]
    pub metrics_urls: Vec<String>,
    /// Seconds from sending a request to its first event (covers queueing and prefill).
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    pub timeout_first_byte: Option<f64>,
    /// Longest silence between two events, in seconds.
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    pub timeout_idle: Option<f64>,
    /// Longest request, in seconds.
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    pub timeout_total: Option<f64>,
    /// No progress bar and no quick-look summary.
    #[arg(long)]
    pub quiet: bool,
    /// Send no thinking switch. By default, when the manifest disables thinking, chat and
    /// Responses requests carry `chat_template_kwargs: {"enable_thinking": false}`; a server
    /// that refuses unknown request fields needs it left out. run.json `thinking_switch`
    /// records what was sent.
    #[arg(long)]
    pub no_thinking_switch: bool,
    /// Keep ordinary scheduling (see `realtime_help` for the default).
    #[arg(long, help = realtime_help())]
    pub no_realtime: bool,
    /// Output root folder.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// Carry out one subcommand; the result is the process exit code. `argv` is the full command
/// line, recorded (redacted) in run.json.
pub fn run(cli: Cli, argv: Vec<String>) -> anyhow::Result<u8> {
    match cli.command {
        Command::Cells(a) => run_cells(&a),
        Command::Run(a) => {
            let cfg = match RunConfig::from_args(*a, argv, &config::process_env) {
                Ok(c) => c,
                Err(e) => return Ok(bad_input(&e)),
            };
            driver::run(cfg)
        }
        Command::Recover(a) => {
            let report = match crate::artifact::recover(&a.dir) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("anvil-capture recover: {e}");
                    return Ok(exit::BAD_INPUT);
                }
            };
            for note in &report.notes {
                eprintln!("anvil-capture recover: {note}");
            }
            for (table, merged) in &report.tables {
                eprintln!(
                    "anvil-capture recover: {}: {} rows from {} parts",
                    table.name(),
                    merged.rows,
                    merged.parts
                );
            }
            eprintln!(
                "anvil-capture recover: status {} -> {}",
                report.status_before.as_str(),
                report.status_after.as_str()
            );
            println!("{}", report.dir.display());
            Ok(exit::OK)
        }
    }
}

fn bad_input(e: &ConfigError) -> u8 {
    eprintln!("anvil-capture: {e}");
    exit::BAD_INPUT
}

fn run_cells(a: &CellsArgs) -> anyhow::Result<u8> {
    let manifest = match WorkloadManifest::load(&a.manifest) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("anvil-capture: {e}");
            return Ok(exit::BAD_INPUT);
        }
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", cells::TABLE_HEADER)?;
    for cell in cells::cells(&manifest) {
        writeln!(out, "{cell}")?;
    }
    out.flush()?;
    Ok(exit::OK)
}
