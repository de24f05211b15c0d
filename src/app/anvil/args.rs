//! Every `anvil` subcommand's arguments as clap parses them; the doc comments are the
//! `--help` text, and each command's exit codes are printed after it.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::app::Exit;

/// Exit codes of `anvil` as a whole, as printed at the end of `anvil --help` (each
/// command's `--help` lists its own).
fn exit_codes_help() -> String {
    format!(
        "Exit codes (each command's --help lists its own):\n  \
         {}  everything valid / every rule held\n  \
         {}  a stop rule fired, evidence contradicts a rule or claim, or recomputed figures disagree\n  \
         {}  bad input: a malformed or unknown document, artifact, path or flag\n  \
         {}  a comparison the campaign's rules forbid was refused\n  \
         {}  advance rules incomplete: evidence is missing\n  \
         {}  a campaign could not run\n  \
         {}  interrupted",
        Exit::Ok.code(),
        Exit::RuleFailed.code(),
        Exit::BadInput.code(),
        Exit::Refused.code(),
        Exit::Incomplete.code(),
        Exit::Failed.code(),
        Exit::Interrupted.code(),
    )
}

/// Exit codes of `anvil validate`.
/// Exit codes of `anvil push`.
#[cfg(feature = "object-store")]
fn push_exit_codes_help() -> String {
    format!(
        "Exit codes:\n  \
         {}  every file was uploaded\n  \
         {}  bad input or a store that refused: nothing to push, a run still recording or \
         damaged (nothing uploaded), no such bucket, access denied, or the store unreachable \
         after retries",
        Exit::Ok.code(),
        Exit::BadInput.code()
    )
}

/// Exit codes of `anvil validate`.
fn validate_exit_codes_help() -> String {
    format!(
        "Exit codes:\n  \
         {}  every input is valid\n  \
         {}  bad input: a malformed or unknown document, artifact, path or flag",
        Exit::Ok.code(),
        Exit::BadInput.code()
    )
}

/// Exit codes of `anvil campaign plan`.
#[cfg(feature = "analysis")]
fn plan_exit_codes_help() -> String {
    format!(
        "Exit codes:\n  \
         {}  the plan was printed\n  \
         {}  bad input: the campaign file, its manifest or plan, or --out",
        Exit::Ok.code(),
        Exit::BadInput.code()
    )
}

/// Exit codes of `anvil sql` and `anvil summary`.
#[cfg(feature = "analysis")]
fn sql_exit_codes_help() -> String {
    format!(
        "Exit codes:\n  \
         {}  the statements ran\n  \
         {}  bad input: an unreadable artifact, an SQL error, or a write refused without --allow-write",
        Exit::Ok.code(),
        Exit::BadInput.code()
    )
}

/// Exit codes of `anvil verify`.
#[cfg(feature = "analysis")]
fn verify_exit_codes_help() -> String {
    format!(
        "Exit codes:\n  \
         {}  the SQL figures and the independent recomputation agree (relative difference <= 1e-9)\n  \
         {}  a figure differs\n  \
         {}  bad input: an unreadable artifact or path",
        Exit::Ok.code(),
        Exit::RuleFailed.code(),
        Exit::BadInput.code()
    )
}

/// Exit codes of `anvil compare`.
#[cfg(feature = "analysis")]
fn compare_exit_codes_help() -> String {
    format!(
        "Exit codes:\n  \
         {}  the artifacts were compared\n  \
         {}  bad input: an unreadable manifest, plan, artifact or path\n  \
         {}  refused: the campaign's rules forbid this comparison (differing fields and the rule are printed)",
        Exit::Ok.code(),
        Exit::BadInput.code(),
        Exit::Refused.code()
    )
}

/// Exit codes of `anvil check`.
#[cfg(feature = "analysis")]
fn check_exit_codes_help() -> String {
    format!(
        "Exit codes:\n  \
         {}  every measurable advance rule holds, no claim is contradicted, no stop rule fired\n  \
         {}  a stop rule fired, or the evidence contradicts an advance rule or a claim\n  \
         {}  bad input: an unreadable manifest, plan, artifact or path\n  \
         {}  incomplete: nothing failed, but evidence is missing",
        Exit::Ok.code(),
        Exit::RuleFailed.code(),
        Exit::BadInput.code(),
        Exit::Incomplete.code()
    )
}

#[cfg(feature = "analysis")]
fn report_exit_codes_help() -> String {
    format!(
        "Exit codes:\n  \
         {}  the report was written (the campaign's own outcome is in the report and on\n     \
         standard error; `anvil check` exits with it)\n  \
         {}  bad input: an unreadable manifest, plan, artifact or path",
        Exit::Ok.code(),
        Exit::BadInput.code(),
    )
}

#[cfg(feature = "analysis")]
fn demo_exit_codes_help() -> String {
    format!(
        "Exit codes:\n  \
         {}  the campaign was recorded and the report written\n  \
         {}  a stop rule fired, or the starting service was not restored (no report)\n  \
         {}  bad input: an unusable --out, --speed or seed in --out\n  \
         {}  a cell could not be recorded (what was recorded stays in --out; no report)\n  \
         {}  the campaign could not run (a simulator did not start)",
        Exit::Ok.code(),
        Exit::RuleFailed.code(),
        Exit::BadInput.code(),
        Exit::Incomplete.code(),
        Exit::Failed.code(),
    )
}

/// anvil: evidence toolkit for LLM-serving benchmark campaigns.
#[derive(Debug, Parser)]
#[command(name = "anvil", version, after_help = exit_codes_help())]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check workload manifests, run plans and artifact folders.
    ///
    /// A FILE is a workload manifest, run plan or campaign file, chosen by its `schema` field;
    /// a campaign file is also checked against the manifest and plan it names (every arm an
    /// arm of the plan, every cell one of the manifest). A DIR holding
    /// `run.json` is an artifact folder; any other DIR is searched recursively for both, and
    /// holding neither is an error. One line is printed per input, naming what it is and
    /// `ok`, or the file and JSON path of each problem.
    #[command(after_help = validate_exit_codes_help())]
    Validate(ValidateArgs),

    /// Upload artifacts to object storage (s3://, gs://, az://).
    ///
    /// Uploads DIR (an artifact folder or a campaign folder, with the files beside the
    /// artifacts: journals, logs, evidence) beneath URL: to URL/<DIR's name>/ when URL ends
    /// in `/`, else to URL itself, keeping the layout. Every artifact must be finished and
    /// valid; a run still being recorded (status `running`) or a damaged one is refused and
    /// nothing is uploaded. Each artifact's tables go first and its run.json last, so a
    /// reader never takes a half-uploaded run for a whole one. Hidden files and folders
    /// (`.superseded/`) stay behind. Credentials come from the cloud's environment
    /// variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL,
    /// AWS_ALLOW_HTTP; GOOGLE_APPLICATION_CREDENTIALS; AZURE_STORAGE_ACCOUNT_NAME,
    /// AZURE_STORAGE_ACCOUNT_KEY) and are never printed.
    #[cfg(feature = "object-store")]
    #[command(after_help = push_exit_codes_help())]
    Push(PushArgs),

    /// Serve as a worker of the distributed SQL engine (`anvil sql --workers`).
    ///
    /// Listens on ADDR (e.g. 0.0.0.0:50051; port 0 picks one) and prints
    /// `anvil worker listening on http://HOST:PORT`; runs the stages of the plans clients send,
    /// with anvil's SQL functions, reading artifacts by the paths or object-store URLs the
    /// plans name (credentials from this process's environment). Runs until stopped.
    /// Needs anvil built with `--features distributed`.
    Worker(WorkerArgs),

    /// Query artifacts with SQL (DataFusion).
    ///
    /// Tables: `runs` (one row per artifact, from run.json), `requests`, `events`, `scrapes`
    /// (the union over every artifact folder found beneath each --data DIR; join on
    /// `run_id`). Views from queries/*.sql: request_timing, request_metrics, cell_stats,
    /// percentile_ci, aggregate_throughput, across_runs, chunk_gaps, spec_decode, restarts,
    /// prompt_calibration, functional_results, ... `DESCRIBE name` lists a table's or view's
    /// columns with their unit and meaning. Functions: nearest_rank(x, p),
    /// nearest_rank_ci_low(x, p), nearest_rank_ci_high(x, p), percentiles(x), ci95_low(x),
    /// ci95_high(x), canaries(text), json_pointer(text, pointer), json_schema_valid(instance,
    /// schema), json_schema_error(instance, schema), json_find(text, array, key, value),
    /// tool_calls(list of tool_call_delta texts).
    /// With no QUERY and no -f, reads SQL from standard input, or opens an interactive
    /// prompt when standard input is a terminal (`\?` lists its meta-commands: `\d NAME`,
    /// `\l`, `\r`, `\q`, which work also in the middle of a statement). Read-only unless
    /// --allow-write.
    #[cfg(feature = "analysis")]
    #[command(after_help = sql_exit_codes_help())]
    Sql(SqlArgs),

    /// Print the statistics of every artifact (from the cell_stats view).
    ///
    /// Per artifact: its first wave, then TTFT, effective prefill, decode, TPOT, ITL and E2E
    /// over all requests and after the first wave (where it has one), each with n, the mean
    /// with its 95% CI, p50 and the slowest 5% and 1% (p95/p99 for times, p5/p1 for rates)
    /// each with its distribution-free 95% interval, min and max, failed requests beside;
    /// the tails the first wave sets, named; and the aggregate output throughput of both
    /// windows. `--format csv|json` gives every cell_stats column, both windows.
    #[cfg(feature = "analysis")]
    #[command(after_help = sql_exit_codes_help())]
    Summary(SummaryArgs),

    /// Recompute the figures independently (polars) and compare them with the SQL.
    ///
    /// Per artifact, reads the Parquet files with polars and recomputes per-request TTFT,
    /// effective prefill, decode, TPOT, ITL and E2E, and their statistics (n, mean, sd, 95%
    /// CI, min, p25..p99, max), then compares them with the request_figures and cell_stats
    /// views. Prints the largest relative difference per metric.
    #[cfg(feature = "analysis")]
    #[command(after_help = verify_exit_codes_help())]
    Verify(VerifyArgs),

    /// Compare arms: each stage's arms against their one-variable controls, or every arm
    /// against one baseline.
    ///
    /// With --stage NAME, per performance workload that plan stage recorded beneath the
    /// ARTIFACT_DIRs, each arm is compared with its control: the arm of the stage that
    /// differs from it in exactly one configuration key (TP2 and DP2 vs TP1, K4 and K16 vs
    /// K12, MTP2 vs matched no-spec). Otherwise the ARTIFACT_DIRs form one matched set, each
    /// arm compared with its one-variable control among them (an arm one key apart from none,
    /// with the arm of the first ARTIFACT_DIR), or with --baseline every arm with that one.
    /// The headline comparison rule and the matching check apply first; a forbidden
    /// comparison is refused with the differing fields (both values) and the rule quoted. Then, over both windows (all
    /// requests, and after the first wave): aggregate throughput per arm (a single run, or
    /// the mean across repeats with its 95% CI across runs), per GPU, against the reference
    /// and, for multi-GPU arms, the scaling efficiency against the matched single-GPU arm;
    /// per metric (TTFT, effective prefill, decode, TPOT, ITL, E2E) each run's mean with its
    /// CI, p50 and the tail that hurts with their distribution-free 95% intervals, and each
    /// arm's difference to its reference (Welch's CI of the means, paired differences by
    /// request index, percentile differences with a seeded bootstrap or a CI across runs);
    /// spec-decode acceptance, one-variable controls and output-length realization.
    #[cfg(feature = "analysis")]
    #[command(after_help = compare_exit_codes_help())]
    Compare(CompareArgs),

    /// Check the campaign's rules over the artifacts against the run plan.
    ///
    /// Per arm the advance rules; every stage's comparisons (each arm against its
    /// one-variable control, per workload); topology comparisons (per GPU, scaling
    /// efficiency against the single-GPU arm, in flight, what communication overhead was
    /// measured); every stop rule (naming contaminated requests and their canaries); per
    /// plan stage which arms have evidence, and each selection or rejection labelled
    /// supported, contradicted or not testable with its figures; promotion_authorized and
    /// the open gates.
    #[cfg(feature = "analysis")]
    #[command(after_help = check_exit_codes_help())]
    Check(CheckArgs),

    /// Render the campaign report: one self-contained HTML file, or Markdown.
    ///
    /// Reads every artifact beneath the --data folders, runs the checks and every stage's
    /// comparisons, and lays the campaign out around the decision: a first screen with each
    /// objective's leader, its interval and whether the lead is resolved, the stages' claims
    /// and what may not be claimed (with a banner when the servers were the simulator);
    /// evidence coverage and gaps; each arm against its control; the trade-off, sweep,
    /// context and capacity charts; then the headline tables, topology, speculative
    /// decoding, queues, the advance-rule matrix, the plan and the definitions. With no
    /// arguments: the sample campaign in sample-data/ to reports/campaign.html. The path
    /// written is printed last.
    #[cfg(feature = "analysis")]
    #[command(after_help = report_exit_codes_help())]
    Report(ReportArgs),

    /// Run a small campaign through the managed path on simulator processes, then report it.
    ///
    /// Writes OUT/campaign.json (a cut-down copy of sample-data/campaign.json: each arm an
    /// `anvil sim` process on a free loopback port, 8x its profile's speed) and runs it as
    /// `anvil campaign run` does: the starting service fingerprinted, the baseline stage's two
    /// arms on the headline cell and a K4-vs-K12 screen (each with the functional checks)
    /// launched, recorded and stopped, the starting service restored (restoration.json) and
    /// then stopped; then the HTML report. Prints each cell's capture command line as it goes,
    /// and the report's path last. `--campaign sample` runs the whole sample campaign instead
    /// (about an hour on two cores) into a new folder.
    #[cfg(feature = "analysis")]
    #[command(after_help = demo_exit_codes_help())]
    Demo(DemoArgs),

    /// The simulator (`anvil-sim`'s arguments), for the campaigns `anvil demo` launches: the
    /// demo needs no second binary.
    #[command(hide = true, disable_help_flag = true)]
    Sim {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },

    /// Work with a campaign file: how each arm of the run plan is served and which cells it
    /// records.
    #[cfg(feature = "analysis")]
    #[command(subcommand)]
    Campaign(CampaignCommand),
}

/// `anvil campaign` subcommands.
#[cfg(feature = "analysis")]
#[derive(Debug, Subcommand)]
pub enum CampaignCommand {
    /// The arm × cell matrix in the plan's execution order: what --out already holds
    /// (a complete artifact with the cell's workload fingerprint), what is missing, and the
    /// `anvil-capture run` command line of each missing cell. Nothing is started.
    #[command(after_help = plan_exit_codes_help())]
    Plan(CampaignPlanArgs),
    /// Run the campaign: fingerprint the starting service; stage by stage, launch each arm's
    /// server, wait until it is ready, record its cells (the `anvil-capture run` code path),
    /// check each artifact against the plan's stop rules, stop the server (its log kept beside
    /// the arm's artifacts); then restore the starting service, compare its fingerprint and
    /// write restoration.json. Every step is a line of OUT/<campaign_id>/campaign-journal.jsonl.
    /// After SIGINT no new request starts and those in flight finish (after SIGTERM or SIGHUP
    /// the cell in flight completes); then the server is stopped and the starting service
    /// restored; a second signal kills every server started and leaves at once. --resume
    /// continues a campaign that was stopped or killed.
    #[command(after_help = campaign_exit_codes_help())]
    Run(CampaignRunArgs),
}

#[cfg(feature = "analysis")]
#[derive(Debug, Args)]
pub struct CampaignRunArgs {
    /// The campaign file (anvil-serving.benchmark-campaign/v1).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The data folder to record into (artifacts go to OUT/<campaign_id>/<arm>/<cell_id>).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Continue a campaign already run into --out: cells whose complete artifact has the
    /// cell's workload fingerprint are kept, other attempts are moved to
    /// OUT/<campaign_id>/.superseded/, servers an earlier run left behind are stopped.
    #[arg(long)]
    pub resume: bool,
    /// Stop the starting service once its restoration is checked (a campaign on
    /// simulators); by default it is left running, restored.
    #[arg(long)]
    pub stop_after_restore: bool,
}

/// Exit codes of `anvil campaign run`.
#[cfg(feature = "analysis")]
fn campaign_exit_codes_help() -> String {
    format!(
        "Exit codes:\n  \
         {}  every cell recorded and the starting service restored\n  \
         {}  a stop rule fired, or the starting service was not restored\n  \
         {}  bad input: the campaign file, its manifest or plan, or --out\n  \
         {}  some cells were not recorded (an arm not ready, a server that died)\n  \
         {}  the campaign could not run (the starting service did not start, a file not writable)\n  \
         {}  interrupted (the starting service was restored)",
        Exit::Ok.code(),
        Exit::RuleFailed.code(),
        Exit::BadInput.code(),
        Exit::Incomplete.code(),
        Exit::Failed.code(),
        Exit::Interrupted.code(),
    )
}

#[cfg(feature = "analysis")]
#[derive(Debug, Args)]
pub struct CampaignPlanArgs {
    /// The campaign file (anvil-serving.benchmark-campaign/v1).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The data folder the campaign records into [default: the campaign file's folder].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Output format of `anvil compare` and `anvil check`.
#[cfg(feature = "analysis")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RulesFormat {
    /// Aligned text tables.
    Table,
    /// The typed result as JSON.
    Json,
    /// Markdown headings and tables.
    Md,
}

/// Output format of `anvil report`.
#[cfg(feature = "analysis")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    /// One self-contained HTML file (inline CSS and SVG, no scripts).
    Html,
    /// A Markdown summary: headline table, verdicts, missing evidence.
    Md,
}

#[cfg(feature = "analysis")]
#[derive(Debug, Args)]
pub struct ReportArgs {
    #[command(flatten)]
    pub evidence: EvidenceArgs,
    /// Where to write the report [default: reports/campaign.html for HTML, standard
    /// output for Markdown].
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ReportFormat::Html)]
    pub format: ReportFormat,
}

/// Which campaign `anvil demo` records.
#[cfg(feature = "analysis")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DemoCampaign {
    /// Two headline arms and a two-arm screen, at 8x speed (about a minute).
    Small,
    /// The sample campaign committed in sample-data/ (every arm the simulator can stand in
    /// for), at the profiles' own speed.
    Sample,
}

#[cfg(feature = "analysis")]
#[derive(Debug, Args)]
#[command(allow_negative_numbers = true)]
pub struct DemoArgs {
    /// Folder for the artifacts (and the seeds, when it has none) [default: a new folder
    /// under the system temp directory].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Where to write the report [default: OUT/campaign.html].
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// The campaign to record.
    #[arg(long, value_enum, default_value_t = DemoCampaign::Small)]
    pub campaign: DemoCampaign,
    /// Multiply the simulator profiles' prefill and decode rates [default: 8 for small, 1
    /// for sample].
    #[arg(long, value_name = "FACTOR")]
    pub speed: Option<f64>,
    /// Continue a demo campaign that was stopped or killed in OUT (complete cells are kept,
    /// as `anvil campaign run --resume` keeps them).
    #[arg(long)]
    pub resume: bool,
}

#[cfg(feature = "analysis")]
#[derive(Debug, Args)]
pub struct CompareArgs {
    #[command(flatten)]
    pub evidence: EvidenceArgs,
    /// Compare every arm with this one instead of each with its stage's control.
    #[arg(long, value_name = "ARM", conflicts_with = "stage")]
    pub baseline: Option<String>,
    /// Only this plan stage's comparisons (e.g. "matched topology").
    #[arg(long, value_name = "NAME")]
    pub stage: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = RulesFormat::Table)]
    pub format: RulesFormat,
    /// Artifact folders, or folders searched for them, as --data names them (both may be
    /// given) [default: sample-data].
    #[arg(value_name = "ARTIFACT_DIR")]
    pub artifacts: Vec<PathBuf>,
}

#[cfg(feature = "analysis")]
#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub evidence: EvidenceArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = RulesFormat::Table)]
    pub format: RulesFormat,
}

/// What `check`, `compare` and `report` judge: the artifacts, the run plan and the workload
/// manifest, and the SLOs in force.
#[cfg(feature = "analysis")]
#[derive(Debug, Args)]
pub struct EvidenceArgs {
    /// An artifact folder or a campaign tree; repeat to load several. Its file names also
    /// count as evidence files the plan names [default: sample-data].
    #[arg(long = "data", value_name = "DIR")]
    pub data: Vec<PathBuf>,
    /// The run plan (its headline comparison rule is quoted on refusal) [default: the one
    /// the campaign file beside the data names].
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
    /// The workload manifest (its selection defines the headline workload; a manifest that
    /// does not is bad input) [default: the one the campaign file beside the data names].
    #[arg(long, value_name = "FILE")]
    pub manifest: Option<PathBuf>,
    #[command(flatten)]
    pub slo: SloArgs,
}

#[cfg(feature = "analysis")]
impl EvidenceArgs {
    /// The folders given with --data and `more` (a command's positional folders), or
    /// `sample-data` when none is.
    pub fn folders(&self, more: &[PathBuf]) -> Vec<PathBuf> {
        let all: Vec<PathBuf> = self.data.iter().chain(more).cloned().collect();
        if all.is_empty() {
            vec![PathBuf::from("sample-data")]
        } else {
            all
        }
    }
}

/// The SLOs in force: `--slo`, else the campaign file's `slo` section.
#[cfg(feature = "analysis")]
#[derive(Debug, Clone, Default, Args)]
pub struct SloArgs {
    /// A service-level objective on a per-request metric: 'METRIC<=VALUE' for a time,
    /// 'METRIC>=VALUE' for a rate (quote it: a shell reads < and >), e.g. --slo
    /// 'ttft_ms<=2000' --slo 'tpot_ms<=50'. Metrics: ttft_ms, effective_prefill_tps,
    /// decode_tps, tpot_ms, itl_ms, e2e_ms. Repeatable, one per metric; a session workload's
    /// bound may hold for some turns only ('turn 0: ttft_ms<=2000', 'turns 1+: ttft_ms<=800',
    /// 'turns 1-3: ...'), one per metric and turn. Replaces the campaign file's `slo` section.
    #[arg(long = "slo", value_name = "'METRIC<=VALUE'")]
    pub slo: Vec<String>,
    /// The campaign file whose `slo` section applies when no --slo is given [default: a
    /// campaign.json in a --data folder, else the SLOs a campaign journal there recorded].
    #[arg(long, value_name = "FILE")]
    pub campaign: Option<PathBuf>,
}

/// Where the artifacts are: `--data DIR`, repeatable.
#[cfg(feature = "analysis")]
#[derive(Debug, Args)]
pub struct DataArgs {
    /// An artifact folder or a campaign tree: every folder holding run.json beneath it is
    /// loaded. Repeat to load several.
    #[arg(long = "data", value_name = "DIR", default_value = "sample-data")]
    pub data: Vec<PathBuf>,
}

/// Output format of query results.
#[cfg(feature = "analysis")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// A text table.
    Table,
    /// CSV with a header row.
    Csv,
    /// A JSON array of objects.
    Json,
}

#[cfg(feature = "analysis")]
impl From<OutputFormat> for crate::query::Format {
    fn from(f: OutputFormat) -> Self {
        match f {
            OutputFormat::Table => crate::query::Format::Table,
            OutputFormat::Csv => crate::query::Format::Csv,
            OutputFormat::Json => crate::query::Format::Json,
        }
    }
}

#[cfg(feature = "analysis")]
#[derive(Debug, Args)]
pub struct SqlArgs {
    #[command(flatten)]
    pub data: DataArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,
    /// Write the results to FILE instead of standard output (at the interactive prompt,
    /// each statement's result replaces the file).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Allow statements that write or change state (COPY, INSERT, CREATE, DROP, SET ...).
    #[arg(long)]
    pub allow_write: bool,
    /// Run the statements in FILE (separated by `;`).
    #[arg(
        short = 'f',
        long = "file",
        value_name = "FILE.sql",
        conflicts_with = "query"
    )]
    pub file: Option<PathBuf>,
    /// List the tables and views with their columns and types.
    #[arg(long, conflicts_with_all = ["query", "file", "allow_write"])]
    pub list: bool,
    /// Run the SQL on a distributed DataFusion engine: the plan is made here and its stages
    /// run on these `anvil worker`s (comma-separated http://HOST:PORT URLs). The workers read
    /// the artifacts by the paths or URLs the plan names. Needs anvil built with
    /// `--features distributed`.
    #[arg(long, value_name = "URL,...", value_delimiter = ',')]
    pub workers: Vec<String>,
    /// With --workers: bytes of Parquet one leaf task reads (smaller spreads a small query
    /// over more tasks) [default: 16 MiB].
    #[arg(long, value_name = "BYTES", requires = "workers")]
    pub bytes_per_task: Option<usize>,
    /// SQL to run (one or more statements separated by `;`).
    pub query: Option<String>,
    #[command(flatten)]
    pub slo: SloArgs,
}

#[cfg(feature = "analysis")]
#[derive(Debug, Args)]
pub struct SummaryArgs {
    #[command(flatten)]
    pub data: DataArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,
    #[command(flatten)]
    pub slo: SloArgs,
}

#[cfg(feature = "analysis")]
#[derive(Debug, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub data: DataArgs,
    #[command(flatten)]
    pub slo: SloArgs,
}

#[cfg(feature = "object-store")]
#[derive(Debug, Args)]
pub struct PushArgs {
    /// An artifact folder or a campaign folder.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Where to: s3://BUCKET/PREFIX, gs://BUCKET/PREFIX or az://CONTAINER/PREFIX (a final
    /// `/` puts DIR's name beneath it).
    #[arg(value_name = "URL")]
    pub url: String,
}

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// Address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:50051")]
    pub listen: String,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Documents, artifact folders, or directories to search.
    #[arg(required = true, value_name = "FILE|DIR")]
    pub paths: Vec<PathBuf>,
}
