//! `anvil-sim`'s command line: the flags as clap parses them ([`Args`], with the profile and
//! fault tables after `--help`) and [`config`], which checks them into a
//! [`crate::sim::Config`].

use std::path::PathBuf;

use clap::Parser;

use crate::sim::config::{
    Config, ConfigError, DEFAULT_KV_POOL_TOKENS, PROFILES, RunSpeed, Timing, find_profile,
};
use crate::sim::faults::{FaultKind, FaultRates};
use crate::sim::power::{GpuSetup, PowerModel};

/// The profile and fault tables and the wire rules, shown after `--help`.
pub fn long_help() -> String {
    let mut s = String::from("Profiles (explicit flags override their values):\n");
    s.push_str(&format!(
        "  {:<13} {:>9} {:>7} {:>6} {:>6} {:>5} {:>6} {:>8}  {}\n",
        "name", "prefill/s", "decode", "batch", "bcost", "spec", "accept", "chunk", "what"
    ));
    for p in PROFILES {
        s.push_str(&format!(
            "  {:<13} {:>9} {:>7} {:>6} {:>6} {:>5} {:>6} {:>8}  {}\n",
            p.name,
            p.timing.prefill_tps,
            p.timing.decode_tps,
            p.timing.max_batch,
            p.timing.batch_cost,
            p.timing.spec_depth,
            p.timing.spec_accept,
            p.timing.chunked_prefill,
            p.what
        ));
    }
    s.push_str("\nFault kinds (--fault KIND=RATE, RATE in [0,1], drawn per request, seeded):\n");
    for k in FaultKind::ALL {
        s.push_str(&format!("  {:<20} {}\n", k.name(), k.wire_behaviour()));
    }
    s.push_str(
        "\nTokenizer: each maximal run of letters/digits is split into pieces of at most 4\n\
         characters, every other non-space character is one token, and whitespace attaches to\n\
         the following token (trailing whitespace is one token). Chat template: 3 tokens per\n\
         message + the role's tokens + the content's tokens (+ the JSON of `tools`), then 3\n\
         tokens of assistant prime. `/tokenize` applies the same rule, so its count equals\n\
         usage.prompt_tokens exactly. Generated words are one token each. A reply is as long\n\
         as the prompt's \"in about N words\" asks (else --mean-words on average), cut at\n\
         max_tokens; `ignore_eos: true` runs it to max_tokens (finish_reason length) and\n\
         `min_tokens: N` makes it at least N tokens, as vLLM does.\n\
         \n\
         Timing: one timer thread holds every stream's absolute deadlines; prefill runs FIFO at\n\
         --prefill-tps over uncached tokens; each sequence then steps on its own phase, a step\n\
         costing (1 - bcost + bcost * running) / decode-tps seconds (x (1 + 0.03 * spec-depth)),\n\
         with small seeded jitter; while a prefill runs, a step also pays one prefill chunk\n\
         (--chunked-prefill; 0 = waits for the whole prefill).\n\
         \n\
         Run speed: with --run-seed TEXT each replica's prefill and decode rates are multiplied\n\
         by a factor drawn from a log-normal distribution of mean 1 and coefficient of\n\
         variation --run-cv (default 0.03), seeded by TEXT and the replica's index: runs with\n\
         different seeds differ in aggregate throughput by about 3% (one standard deviation),\n\
         as launches of one configuration on real hardware do. A campaign gives each launch\n\
         its own seed, e.g. --run-seed tp1-{repeat}-{replica}. Without it every factor is 1.\n\
         The factors are printed at start and, with --truth, on the file's first line as a\n\
         comment: `# anvil-sim run speed factor F... (--run-seed \"TEXT\", cv CV)`.\n\
         \n\
         Prefix cache: per replica, vLLM-style chained hashes of 16-token blocks; a prompt's\n\
         leading blocks already held are cached (never the whole prompt) and cost no prefill.\n\
         --prefix-cache-tokens bounds it (least recently used blocks evicted first, a prompt's\n\
         tail before its head; 0 = caching off). Resets: vLLM's POST /reset_prefix_cache\n\
         (mounted with --dev-mode, else 404; {\"success\":false} while requests run) and\n\
         SGLang's GET|POST /flush_cache[?timeout=S] (400 while requests run or wait, or after\n\
         waiting S seconds for idle).\n\
         \n\
         KV pool: --kv-pool-tokens per replica (default 4194304; 0 = no limit). A running\n\
         request holds its prompt plus what it generated; a waiting one is admitted only when\n\
         it fits (first come, first served), and a decode step that finds the pool full\n\
         preempts the most recently admitted request, which later prefills everything again\n\
         (vllm:num_preemptions, vllm:kv_cache_usage_perc).\n\
         \n\
         --truth FILE: CSV request_id,replica,seq,tokens,kind,t_deadline_ns,t_write_ns, one row\n\
         per SSE event written plus one `request_read` row per request (CLOCK_MONOTONIC ns),\n\
         and the prefix cache's rows: `cache_hit` per generation request (tokens = cached\n\
         prompt tokens), `cache_evict` (tokens evicted by that request), `cache_reset` (tokens\n\
         dropped by a reset), and `preempt` per preemption (tokens = KV the request held).\n\
         FILE replaces any earlier one at start and grows while the simulator runs: rows are\n\
         flushed to it at least once a second, and on SIGINT or SIGTERM every row is flushed\n\
         and the file synced and closed. SIGKILL leaves no chance to flush: the file then\n\
         lacks at most the last second's rows, and a kill in mid-flush may cut the last row short.\n\
         \n\
         GPUs (--dcgm): each replica has --gpus-per-replica GPUs sharing its work. Every tick\n\
         (at most 100 ms, dividing the collect interval) each GPU is asked for its share of the\n\
         tokens its replica decoded and prefilled (at full clocks): power = idle + W/decode\n\
         tok/s x decode + W/kprefill tok/s x prefill / 1000 at full clocks, scaled by the clock\n\
         factor, which is the lower of (limit - idle) / (asked - idle) (SW power cap) and 0.5\n\
         while the GPU is past its slowdown temperature (HW slowdown and HW thermal slowdown,\n\
         until 2 C below it); temperature relaxes towards ambient + C/W x power (20 s time\n\
         constant); the energy counter is the exact integral. Steps and prefills take 1 / factor\n\
         as long. GET /dcgm/metrics serves the DCGM exporter's text as of the last collect\n\
         (--dcgm-interval-ms, default 30000 as the exporter's). --gpu-truth FILE: CSV\n\
         t_ns,gpu,uuid,replica,power_w,energy_mj,temp_c,sm_clock_mhz,reasons,snapshot, one row\n\
         per GPU per tick (CLOCK_MONOTONIC ns at the tick's end; power over the tick; reasons\n\
         NVML's bitmask; snapshot 1 where the exporter's values were taken).\n",
    );
    s.push_str(&format!(
        "\nExit codes:\n  \
         {}  stopped by SIGINT or SIGTERM: a clean shutdown, the --truth file flushed\n  \
         {}  a bad flag\n  \
         {}  could not serve: its port is taken, or --truth cannot be written\n",
        super::Exit::Ok.code(),
        super::Exit::BadInput.code(),
        super::Exit::Failed.code(),
    ));
    s
}

/// What was typed on the command line.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "anvil-sim",
    version,
    about = "OpenAI-compatible LLM server simulator with a known timing model and fault injection",
    after_long_help = long_help(),
    after_help = "Run with --help for the profile table, fault kinds, tokenizer and timing model.",
    allow_negative_numbers = true
)]
pub struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// First replica's port; replica i listens on PORT+i (0 = pick free ports).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Number of independent replicas (each with its own scheduler, cache, metrics).
    #[arg(long, default_value_t = 1)]
    pub replicas: usize,
    /// Timing preset (see the table below).
    #[arg(long, default_value = "default")]
    pub profile: String,
    /// Seed for replies, faults and jitter.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Prefill throughput, uncached prompt tokens per second.
    #[arg(long)]
    pub prefill_tps: Option<f64>,
    /// Decode steps per second of one sequence running alone.
    #[arg(long)]
    pub decode_tps: Option<f64>,
    /// Run the timing model this many times faster: the prefill and decode rates (the
    /// profile's or the flags') are multiplied by it.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// Vary this run's speed as real launches do: each replica's prefill and decode rates
    /// are multiplied by a factor drawn (log-normal, mean 1) from TEXT and the replica's
    /// index, so runs seeded differently differ in throughput with coefficient of variation
    /// --run-cv. Without it every factor is 1. The factors are printed at start and written
    /// at the head of the --truth file.
    #[arg(long, value_name = "TEXT")]
    pub run_seed: Option<String>,
    /// The coefficient of variation of the run speed factor across --run-seed values.
    #[arg(long, default_value_t = crate::sim::config::DEFAULT_RUN_CV)]
    pub run_cv: f64,
    /// Maximum running sequences per replica; the rest wait FIFO.
    #[arg(long)]
    pub max_batch: Option<usize>,
    /// Extra step cost per running sequence, fraction of the single-sequence step (0..=1).
    #[arg(long)]
    pub batch_cost: Option<f64>,
    /// Speculative drafts proposed per decode step (0 = off).
    #[arg(long)]
    pub spec_depth: Option<u32>,
    /// Probability each draft is accepted, in turn, until the first rejection.
    #[arg(long)]
    pub spec_accept: Option<f64>,
    /// Chunked-prefill chunk size in tokens (0 = off).
    #[arg(long)]
    pub chunked_prefill: Option<u32>,
    /// Inject a fault: KIND=RATE (repeatable).
    #[arg(long = "fault", value_name = "KIND=RATE")]
    pub faults: Vec<String>,
    /// How long the `stall` fault holds a stream silent, in milliseconds.
    #[arg(long, default_value_t = 5000)]
    pub stall_ms: u64,
    /// Close the connection right after every streamed response, without announcing it
    /// (no `Connection: close`), as llama.cpp's server does.
    #[arg(long)]
    pub close_after_stream: bool,
    /// Write one CSV row per SSE event written (and per request read) to FILE, flushed every
    /// second and on SIGINT/SIGTERM (see below).
    #[arg(long, value_name = "FILE")]
    pub truth: Option<PathBuf>,
    /// Served model name; when given, requests naming another model get HTTP 400.
    #[arg(long)]
    pub model: Option<String>,
    /// Context length: prompt + max_tokens beyond it get HTTP 400.
    #[arg(long, default_value_t = 32768)]
    pub max_model_len: u32,
    /// Mean reply length in words when the prompt asks for no count.
    #[arg(long, default_value_t = 120)]
    pub mean_words: u32,
    /// Each replica's prefix cache holds at most this many tokens (whole 16-token blocks,
    /// least recently used evicted first, a prompt's tail before its head); 0 turns prefix
    /// caching off.
    #[arg(long, value_name = "TOKENS", default_value_t = crate::sim::cache::DEFAULT_CAPACITY_TOKENS)]
    pub prefix_cache_tokens: u64,
    /// Each replica's KV pool holds at most this many tokens (running sequences' prompts
    /// and generated tokens); when a decode step finds it full, the most recently admitted
    /// sequence is preempted and later recomputed, counted in `vllm:num_preemptions`. 0: no
    /// limit.
    #[arg(long, value_name = "TOKENS", default_value_t = DEFAULT_KV_POOL_TOKENS)]
    pub kv_pool_tokens: u64,
    /// Mount vLLM's development endpoints, as `VLLM_SERVER_DEV_MODE=1` does: `POST
    /// /reset_prefix_cache` answers 404 without it. SGLang's `/flush_cache` is always there.
    #[arg(long)]
    pub dev_mode: bool,
    /// Run SCHED_FIFO when permitted (best effort; the default).
    #[arg(long, overrides_with = "no_realtime")]
    pub realtime: bool,
    /// Keep ordinary scheduling.
    #[arg(long)]
    pub no_realtime: bool,
    /// Timer thread: stop sleeping this many microseconds before a deadline and spin.
    #[arg(long, default_value_t = 50, hide = true)]
    pub spin_us: u32,
    /// HTTP worker threads.
    #[arg(long, default_value_t = 2, hide = true)]
    pub http_threads: usize,
    #[command(flatten)]
    pub gpu: GpuArgs,
}

/// The simulated GPUs: their power and thermal model and the DCGM exporter.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "GPUs (with --dcgm)")]
pub struct GpuArgs {
    /// Simulate each replica's GPUs (power, clocks, temperature, energy) and serve a DCGM
    /// exporter's text at `GET /dcgm/metrics` on every replica's port; their clocks then
    /// shape the timing (a GPU at its power limit or too hot runs slower).
    #[arg(long)]
    pub dcgm: bool,
    /// The exporter's collect interval (`dcgm-exporter -c`): how often its values change.
    #[arg(long, value_name = "MS", default_value_t = crate::sim::dcgm::DEFAULT_COLLECT_MS)]
    pub dcgm_interval_ms: u64,
    /// `default`: the exporter's default counter set; `extended`: with the fields anvil's
    /// README adds (clock-event reasons, power limit, slowdown temperature, maximum SM
    /// clock, power and thermal violation counters).
    #[arg(long, value_name = "SET", default_value = "default")]
    pub dcgm_counters: String,
    /// GPUs per replica (TP2: 2); each does an equal share of its replica's work.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub gpus_per_replica: usize,
    /// The index of this process's first GPU (a DP replica launched as its own process:
    /// e.g. `{replica}`).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub first_gpu: u32,
    /// The power-management limit, W.
    #[arg(long, value_name = "W")]
    pub gpu_power_limit: Option<f64>,
    /// Idle power, W.
    #[arg(long, value_name = "W")]
    pub gpu_idle_w: Option<f64>,
    /// W per decode token per second (per GPU).
    #[arg(long, value_name = "W")]
    pub gpu_w_per_decode_tps: Option<f64>,
    /// W per thousand prefill tokens per second (per GPU).
    #[arg(long, value_name = "W")]
    pub gpu_w_per_kprefill_tps: Option<f64>,
    /// Steady temperature rise per W, °C (a hot chassis: more).
    #[arg(long, value_name = "C")]
    pub gpu_c_per_w: Option<f64>,
    /// Ambient temperature, °C.
    #[arg(long, value_name = "C")]
    pub gpu_ambient_c: Option<f64>,
    /// Temperature at which a GPU slows to half clock (HW thermal slowdown), °C.
    #[arg(long, value_name = "C")]
    pub gpu_slowdown_c: Option<f64>,
    /// The thermal time constant, s (how fast a GPU heats up and cools down).
    #[arg(long, value_name = "S")]
    pub gpu_tau_s: Option<f64>,
    /// CSV of each GPU's exact state every tick (see --help).
    #[arg(long, value_name = "FILE")]
    pub gpu_truth: Option<PathBuf>,
}

impl GpuArgs {
    /// The checked GPU setup, `None` without `--dcgm` (the other GPU flags then refused).
    fn setup(&self) -> Result<Option<GpuSetup>, ConfigError> {
        let given = self.gpu_power_limit.is_some()
            || self.gpu_idle_w.is_some()
            || self.gpu_w_per_decode_tps.is_some()
            || self.gpu_w_per_kprefill_tps.is_some()
            || self.gpu_c_per_w.is_some()
            || self.gpu_ambient_c.is_some()
            || self.gpu_slowdown_c.is_some()
            || self.gpu_tau_s.is_some()
            || self.gpu_truth.is_some()
            || self.gpus_per_replica != 1
            || self.first_gpu != 0
            || self.dcgm_interval_ms != crate::sim::dcgm::DEFAULT_COLLECT_MS
            || self.dcgm_counters != "default";
        if !self.dcgm {
            check(
                !given,
                "--gpu-*, --gpus-per-replica, --first-gpu, --dcgm-*",
                "given",
                "used with --dcgm (no GPUs simulated without it)",
            )?;
            return Ok(None);
        }
        let d = PowerModel::default();
        let model = PowerModel {
            idle_w: self.gpu_idle_w.unwrap_or(d.idle_w),
            w_per_decode_tps: self.gpu_w_per_decode_tps.unwrap_or(d.w_per_decode_tps),
            w_per_kprefill_tps: self.gpu_w_per_kprefill_tps.unwrap_or(d.w_per_kprefill_tps),
            limit_w: self.gpu_power_limit.unwrap_or(d.limit_w),
            ambient_c: self.gpu_ambient_c.unwrap_or(d.ambient_c),
            c_per_w: self.gpu_c_per_w.unwrap_or(d.c_per_w),
            slowdown_c: self.gpu_slowdown_c.unwrap_or(d.slowdown_c),
            tau_s: self.gpu_tau_s.unwrap_or(d.tau_s),
            ..d
        };
        let positive = |x: f64| x.is_finite() && x > 0.0;
        let non_negative = |x: f64| x.is_finite() && x >= 0.0;
        check(
            positive(model.idle_w),
            "--gpu-idle-w",
            model.idle_w,
            "a positive number",
        )?;
        check(
            positive(model.limit_w) && model.limit_w > model.idle_w,
            "--gpu-power-limit",
            model.limit_w,
            "a number of watts above the idle power",
        )?;
        check(
            non_negative(model.w_per_decode_tps),
            "--gpu-w-per-decode-tps",
            model.w_per_decode_tps,
            "a number >= 0",
        )?;
        check(
            non_negative(model.w_per_kprefill_tps),
            "--gpu-w-per-kprefill-tps",
            model.w_per_kprefill_tps,
            "a number >= 0",
        )?;
        check(
            non_negative(model.c_per_w),
            "--gpu-c-per-w",
            model.c_per_w,
            "a number >= 0",
        )?;
        check(
            model.ambient_c.is_finite() && (-40.0..=80.0).contains(&model.ambient_c),
            "--gpu-ambient-c",
            model.ambient_c,
            "in [-40, 80]",
        )?;
        check(
            model.slowdown_c.is_finite() && model.slowdown_c > model.ambient_c,
            "--gpu-slowdown-c",
            model.slowdown_c,
            "above the ambient temperature",
        )?;
        check(
            model.tau_s.is_finite() && (0.1..=3600.0).contains(&model.tau_s),
            "--gpu-tau-s",
            model.tau_s,
            "in [0.1, 3600] seconds",
        )?;
        check(
            (100..=3_600_000).contains(&self.dcgm_interval_ms),
            "--dcgm-interval-ms",
            self.dcgm_interval_ms,
            "in 100..=3600000 (the exporter's -c)",
        )?;
        let extended = match self.dcgm_counters.as_str() {
            "default" => false,
            "extended" => true,
            other => {
                return Err(ConfigError::OutOfRange {
                    flag: "--dcgm-counters",
                    value: other.to_owned(),
                    rule: "`default` or `extended`",
                });
            }
        };
        check(
            (1..=16).contains(&self.gpus_per_replica),
            "--gpus-per-replica",
            self.gpus_per_replica,
            "in 1..=16",
        )?;
        check(
            self.first_gpu <= 4096,
            "--first-gpu",
            self.first_gpu,
            "at most 4096",
        )?;
        writable("--gpu-truth", self.gpu_truth.as_deref())?;
        Ok(Some(GpuSetup {
            model,
            gpus_per_replica: self.gpus_per_replica,
            first_gpu: self.first_gpu,
            collect: std::time::Duration::from_millis(self.dcgm_interval_ms),
            extended,
            truth: self.gpu_truth.clone(),
        }))
    }
}

fn check(
    ok: bool,
    flag: &'static str,
    value: impl ToString,
    rule: &'static str,
) -> Result<(), ConfigError> {
    if ok {
        Ok(())
    } else {
        Err(ConfigError::OutOfRange {
            flag,
            value: value.to_string(),
            rule,
        })
    }
}

/// A file `flag` names must be in an existing folder (it is created at start).
fn writable(flag: &'static str, path: Option<&std::path::Path>) -> Result<(), ConfigError> {
    let Some(t) = path else {
        return Ok(());
    };
    let dir = t.parent().filter(|d| !d.as_os_str().is_empty());
    check(
        dir.is_none_or(|d| d.is_dir()),
        flag,
        t.display(),
        "a file in an existing directory",
    )
}

/// Turn what was typed into a checked configuration: explicit flags override the chosen
/// profile's values; every check names the flag at fault and, for enumerations (profiles,
/// fault kinds), lists the valid values.
pub fn config(a: Args) -> Result<Config, ConfigError> {
    let p = find_profile(&a.profile).ok_or_else(|| {
        ConfigError::UnknownProfile(
            a.profile.clone(),
            PROFILES
                .iter()
                .map(|p| p.name)
                .collect::<Vec<_>>()
                .join(", "),
        )
    })?;
    check(
        a.speed.is_finite() && a.speed > 0.0 && a.speed <= 1000.0,
        "--speed",
        a.speed,
        "a number in (0, 1000]",
    )?;
    let timing = Timing {
        prefill_tps: a.prefill_tps.unwrap_or(p.timing.prefill_tps) * a.speed,
        decode_tps: a.decode_tps.unwrap_or(p.timing.decode_tps) * a.speed,
        max_batch: a.max_batch.unwrap_or(p.timing.max_batch),
        batch_cost: a.batch_cost.unwrap_or(p.timing.batch_cost),
        spec_depth: a.spec_depth.unwrap_or(p.timing.spec_depth),
        spec_accept: a.spec_accept.unwrap_or(p.timing.spec_accept),
        chunked_prefill: a.chunked_prefill.unwrap_or(p.timing.chunked_prefill),
    };
    check(
        a.run_cv.is_finite() && (0.0..=0.5).contains(&a.run_cv),
        "--run-cv",
        a.run_cv,
        "in [0, 0.5]",
    )?;
    let t = &timing;
    check(
        t.prefill_tps.is_finite() && t.prefill_tps > 0.0,
        "--prefill-tps",
        t.prefill_tps,
        "a positive number",
    )?;
    check(
        t.decode_tps.is_finite() && t.decode_tps > 0.0,
        "--decode-tps",
        t.decode_tps,
        "a positive number",
    )?;
    check(t.max_batch >= 1, "--max-batch", t.max_batch, "at least 1")?;
    check(
        (0.0..=1.0).contains(&t.batch_cost),
        "--batch-cost",
        t.batch_cost,
        "in [0,1]",
    )?;
    check(
        t.spec_depth <= 64,
        "--spec-depth",
        t.spec_depth,
        "in 0..=64",
    )?;
    check(
        (0.0..=1.0).contains(&t.spec_accept),
        "--spec-accept",
        t.spec_accept,
        "in [0,1]",
    )?;
    check(
        a.replicas >= 1 && a.replicas <= 64,
        "--replicas",
        a.replicas,
        "in 1..=64",
    )?;
    check(
        a.port == 0 || (a.port as usize) + a.replicas - 1 <= u16::MAX as usize,
        "--port",
        a.port,
        "such that PORT + replicas - 1 <= 65535",
    )?;
    check(
        a.max_model_len >= 16,
        "--max-model-len",
        a.max_model_len,
        "at least 16",
    )?;
    check(
        a.mean_words >= 1,
        "--mean-words",
        a.mean_words,
        "at least 1",
    )?;
    check(
        a.stall_ms <= 600_000,
        "--stall-ms",
        a.stall_ms,
        "at most 600000",
    )?;

    writable("--truth", a.truth.as_deref())?;

    let mut faults = FaultRates::default();
    for f in &a.faults {
        let (kind, rate) = f
            .split_once('=')
            .ok_or_else(|| ConfigError::FaultSyntax(f.clone()))?;
        let kind = FaultKind::parse(kind.trim()).ok_or_else(|| {
            ConfigError::UnknownFault(
                f.clone(),
                FaultKind::ALL
                    .iter()
                    .map(|k| k.name())
                    .collect::<Vec<_>>()
                    .join(", "),
            )
        })?;
        let rate: f64 = rate
            .trim()
            .parse()
            .map_err(|_| ConfigError::FaultSyntax(f.clone()))?;
        check((0.0..=1.0).contains(&rate), "--fault rate", f, "in [0,1]")?;
        faults.set(kind, rate);
    }
    Ok(Config {
        host: a.host,
        port: a.port,
        replicas: a.replicas,
        profile: p.name,
        seed: a.seed,
        run_speed: RunSpeed::draw(a.run_seed.as_deref(), a.run_cv, a.replicas),
        timing,
        faults,
        stall_ms: a.stall_ms,
        close_after_stream: a.close_after_stream,
        truth: a.truth,
        strict_model: a.model.is_some(),
        model: a.model.unwrap_or_else(|| "anvil-sim".to_string()),
        max_model_len: a.max_model_len,
        mean_words: a.mean_words,
        prefix_cache_tokens: a.prefix_cache_tokens,
        kv_pool_tokens: a.kv_pool_tokens,
        dev_mode: a.dev_mode,
        gpus: a.gpu.setup()?,
        realtime: !a.no_realtime,
        spin_us: a.spin_us.min(10_000),
        http_threads: a.http_threads.clamp(1, 64),
    })
}

/// `anvil-sim`: check the flags, then serve until SIGINT or SIGTERM; each replica's
/// address on standard output, everything else on standard error.
pub fn run(args: Args) -> anyhow::Result<super::Exit> {
    let cfg = config(args).map_err(|e| super::AppError::wrap(super::Exit::BadInput, e))?;
    let console = crate::sim::Console {
        notices: super::stderr_notices(),
        listening: Box::new(|addrs| {
            use std::io::Write;
            let mut out = super::output::Sink::open(None)?;
            for (i, addr) in addrs.iter().enumerate() {
                writeln!(out, "anvil-sim replica {i} listening on http://{addr}")?;
            }
            out.finish()
        }),
    };
    crate::sim::run(cfg, console)?;
    Ok(super::Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Config, ConfigError> {
        let mut v = vec!["anvil-sim"];
        v.extend_from_slice(args);
        config(Args::try_parse_from(v).unwrap())
    }

    #[test]
    fn every_profile_is_valid_and_named_once() {
        let mut names = std::collections::HashSet::new();
        for p in PROFILES {
            assert!(names.insert(p.name), "{} twice", p.name);
            assert!(parse(&["--profile", p.name]).is_ok(), "{}", p.name);
        }
        for required in [
            "default", "fast", "slow", "no-spec", "spec-k4", "spec-k8", "spec-k12", "spec-k16",
        ] {
            assert!(find_profile(required).is_some(), "{required}");
        }
    }

    #[test]
    fn the_run_speed_varies_with_its_seed_by_the_stated_coefficient_of_variation() {
        let c = parse(&["--replicas", "2"]).unwrap();
        assert_eq!(
            c.run_speed.factors,
            vec![1.0, 1.0],
            "no seed: the profile's numbers"
        );
        let a = parse(&["--replicas", "2", "--run-seed", "tp1-1-{r}"]).unwrap();
        let again = parse(&["--replicas", "2", "--run-seed", "tp1-1-{r}"]).unwrap();
        assert_eq!(a.run_speed, again.run_speed, "one seed, one draw");
        assert_ne!(
            a.run_speed.factors[0], a.run_speed.factors[1],
            "replicas differ"
        );
        let t = a.run_speed.timing(&a.timing, 1);
        let f = a.run_speed.factors[1];
        assert!((t.decode_tps - a.timing.decode_tps * f).abs() < 1e-9);
        assert!((t.prefill_tps - a.timing.prefill_tps * f).abs() < 1e-9);
        assert_eq!(t.max_batch, a.timing.max_batch);
        // Across launches (seeds), the factor has mean 1 and a 3% coefficient of variation.
        let draws: Vec<f64> = (0..4000)
            .map(|k| RunSpeed::draw(Some(&format!("arm-{k}")), 0.03, 1).factors[0])
            .collect();
        let n = draws.len() as f64;
        let mean = draws.iter().sum::<f64>() / n;
        let sd = (draws.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        assert!((mean - 1.0).abs() < 0.003, "mean {mean}");
        assert!((sd / mean - 0.03).abs() < 0.003, "cv {}", sd / mean);
        let e = parse(&["--run-cv", "0.9"]).unwrap_err().to_string();
        assert!(e.contains("--run-cv"), "{e}");
        assert_eq!(
            parse(&["--run-seed", "x", "--run-cv", "0"])
                .unwrap()
                .run_speed
                .factors,
            vec![1.0]
        );
    }

    #[test]
    fn flags_override_profile() {
        let c = parse(&["--profile", "spec-k8", "--spec-accept", "0.5"]).unwrap();
        assert_eq!(c.timing.spec_depth, 8);
        assert_eq!(c.timing.spec_accept, 0.5);
    }

    #[test]
    fn bad_values_name_the_flag_and_list_valid_ones() {
        let e = parse(&["--profile", "nope"]).unwrap_err().to_string();
        assert!(e.contains("spec-k16") && e.contains("nope"), "{e}");
        let e = parse(&["--fault", "boom=0.1"]).unwrap_err().to_string();
        assert!(e.contains("contaminate") && e.contains("restart"), "{e}");
        let e = parse(&["--fault", "stall=1.5"]).unwrap_err().to_string();
        assert!(e.contains("[0,1]"), "{e}");
        assert!(parse(&["--spec-accept", "2"]).is_err());
        let e = parse(&["--truth", "/no/such/dir/t.csv"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--truth"), "{e}");
        assert!(parse(&["--truth", "t.csv"]).is_ok());
        assert!(parse(&["--no-realtime"]).is_ok_and(|c| !c.realtime));
    }

    #[test]
    fn gpu_flags_need_dcgm_and_name_themselves() {
        assert!(parse(&[]).unwrap().gpus.is_none());
        let e = parse(&["--gpu-power-limit", "300"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--dcgm"), "{e}");
        let g = parse(&[
            "--dcgm",
            "--gpu-power-limit",
            "300",
            "--gpus-per-replica",
            "2",
        ])
        .unwrap()
        .gpus
        .unwrap();
        assert_eq!(
            (g.model.limit_w, g.gpus_per_replica, g.extended),
            (300.0, 2, false)
        );
        assert_eq!(g.collect, std::time::Duration::from_secs(30));
        let e = parse(&["--dcgm", "--dcgm-counters", "all"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--dcgm-counters") && e.contains("extended"),
            "{e}"
        );
        let e = parse(&["--dcgm", "--gpu-power-limit", "50"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--gpu-power-limit"), "{e}");
        let e = parse(&["--dcgm", "--dcgm-interval-ms", "10"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--dcgm-interval-ms"), "{e}");
    }
}
