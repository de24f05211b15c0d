//! [`RunRequest`]: the one typed value that describes what `anvil-capture run` records — the
//! cell, the arm with its configuration and the campaign's defaults, the endpoints, the API,
//! the schedule, the timeouts, which repeat and which shard, whether it is a probe — and
//! [`RunRequest::to_argv`], the only writer of its command line.
//!
//! The command line (`crate::app::capture`) maps its parsed flags into a request; the
//! campaign (`crate::campaign`) builds requests from its file and records them in process or
//! spawns `anvil-capture` with `to_argv()`; `run.json` records that canonical rendering. A
//! request holds what was asked, not what it means on this machine: the manifest is not
//! loaded, the API key is not read and the output folder is not looked at until
//! [`super::config::RunConfig::from_request`] checks it.

use std::path::PathBuf;

use serde::Deserialize;

pub use crate::artifact::Api;
pub use crate::workload::shard::ShardArg;

/// The GPU telemetry sources (`--telemetry`, `--telemetry-gpus`, `--telemetry-interval`,
/// `--telemetry-every`), as typed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TelemetryRequest {
    /// `dcgm=URL` or `nvidia-smi`, one per source.
    pub sources: Vec<String>,
    /// The arm's GPUs of each source (`0,1`), in source order; empty: every GPU each reports.
    pub gpus: Vec<String>,
    /// Each source's update interval, s (one for all, or one per source).
    pub intervals_s: Vec<f64>,
    /// Seconds between readings during the run.
    pub every_s: Option<f64>,
}

/// What `anvil-capture run` records, as typed values (`anvil-capture run --help` for each
/// flag's meaning).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunRequest {
    /// The workload manifest.
    pub manifest: PathBuf,
    pub cell: CellRequest,
    pub arm: ArmRequest,
    /// Base URL of each replica, in replica order.
    pub endpoints: Vec<String>,
    /// Prometheus URL of each replica; empty: each endpoint's origin + `/metrics`.
    pub metrics_urls: Vec<String>,
    /// The GPU telemetry sources to read.
    pub telemetry: TelemetryRequest,
    /// The model to send; `None`: the first one the first endpoint lists.
    pub model: Option<String>,
    pub api: Api,
    /// The environment variable holding a bearer token (its name; the value is never held).
    pub api_key_env: Option<String>,
    pub load: LoadRequest,
    pub timeouts: Timeouts,
    /// Which repeat of the cell this is, when it is recorded more than once.
    pub repeat: Option<RepeatRequest>,
    /// This process is one shard of a run driven from several client hosts.
    pub shard: Option<ShardRequest>,
    /// The search this run is a probe of (`capacity`).
    pub probe: Option<String>,
    /// The output root.
    pub out: PathBuf,
    pub host: HostOptions,
    /// What is done about the servers' prefix caches.
    pub cache: CacheRequest,
}

/// The servers' prefix caches: reset before the run, and whether the run salts its prompts.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CacheRequest {
    /// Reset every replica's prefix cache before the `before` scrape (`--reset-cache`).
    pub reset: bool,
    /// Give up a reset the server keeps refusing as busy after this many seconds
    /// (`--reset-timeout`; default [`DEFAULT_RESET_TIMEOUT_S`]).
    pub reset_timeout_s: Option<f64>,
    /// Turn the per-run salt off: a warm cell on purpose (`--warm-cache`, run.json workload
    /// `cache: "warm"`).
    pub warm: bool,
}

/// How long a cache reset may wait for a busy server, seconds.
pub const DEFAULT_RESET_TIMEOUT_S: f64 = 30.0;

/// Which cell of the manifest: its class and the values that pick one of its cells (each
/// `None` is the class's only value, as the manifest lists it).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CellRequest {
    pub class: String,
    /// Prompt token target.
    pub context: Option<u64>,
    /// Concurrent requests per replica.
    pub concurrency: Option<u32>,
    /// Measured requests, all replicas together.
    pub requests: Option<u64>,
    /// Values outside the manifest's lists are allowed (run.json `off_manifest`).
    pub off_manifest: bool,
    /// A JSON document whose `workloads` section declares classes beside the manifest's
    /// (a campaign file): `class` may name one of them.
    pub workloads: Option<PathBuf>,
}

/// The arm: its name, stage, configuration (order kept) and runtime, and the campaign's
/// defaults it inherits for the keys it does not declare.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ArmRequest {
    pub name: String,
    pub stage: Option<String>,
    /// The arm's configuration keys other than `runtime`, order kept (`--set KEY=VALUE`).
    pub config: Vec<(String, String)>,
    /// The campaign's defaults, all recorded (`--default KEY=VALUE`).
    pub defaults: Vec<(String, String)>,
    /// The runtime (`--set runtime=…`); `None`: the server says.
    pub runtime: Option<String>,
}

/// How the requests are released.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LoadRequest {
    /// Open loop at this many requests per second (all replicas together); `None`: closed
    /// loop.
    pub rate: Option<f64>,
    /// With `rate`: exponential gaps instead of constant ones.
    pub poisson: bool,
    /// Seconds over which the load starts.
    pub ramp: Option<f64>,
    /// Warm-up requests before the measured ones.
    pub warmup: u64,
}

/// The recorder's timeouts, seconds; an absent one keeps the default. Also the campaign
/// file's per-cell `timeouts` (`first_byte_s`, `idle_s`, `total_s`).
#[derive(Debug, Clone, Copy, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timeouts {
    #[serde(default)]
    pub first_byte_s: Option<f64>,
    #[serde(default)]
    pub idle_s: Option<f64>,
    #[serde(default)]
    pub total_s: Option<f64>,
}

impl Timeouts {
    /// Each value that is not a positive number of seconds, named by its field.
    pub fn problems(&self) -> Vec<String> {
        [
            ("first_byte_s", self.first_byte_s),
            ("idle_s", self.idle_s),
            ("total_s", self.total_s),
        ]
        .into_iter()
        .filter_map(|(name, v)| {
            v.filter(|v| !(v.is_finite() && *v > 0.0))
                .map(|v| format!("{name}: {v} is not a positive number of seconds"))
        })
        .collect()
    }
}

/// Repeat `index` (1-based) of `of`; `index` `None`: every repeat, one after another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepeatRequest {
    pub of: u32,
    pub index: Option<u32>,
}

/// One shard of a run group: which, the published instant of the first wave, how late it
/// may start, and the group's id.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardRequest {
    pub shard: ShardArg,
    /// RFC 3339 UTC, as published (checked against the clock when the run is configured).
    pub start_at: String,
    /// Seconds a shard may be late and still run; `None`: the default.
    pub start_margin: Option<f64>,
    /// The run group's id; `None`: derived alike by every shard.
    pub run_group: Option<String>,
}

/// How the recorder runs on this host: none of it changes what is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct HostOptions {
    /// No progress bar and no quick look.
    pub quiet: bool,
    /// Leave the thinking switch out of every request.
    pub no_thinking_switch: bool,
    /// Keep ordinary scheduling.
    pub no_realtime: bool,
    /// Where the hot path's worker and the writer run; `None`: [`CpuPlacement::Start`].
    pub cpu: Option<CpuPlacement>,
}

/// Where the recorder's two busy threads run: the runtime's worker, which reads the sockets
/// and stamps events, and the writer, which parses and encodes them (`--cpu`).
///
/// By default they share one CPU, the one the run starts on: each event's bytes are then
/// written and read in one core's cache, and neither thread is moved between cores.
/// Measured (BENCHMARKS.md, recorder fidelity): 0.7 µs (9%) less CPU per event at 256
/// streams, receive lag unchanged. One CPU carries both up to roughly 150,000 events a second
/// on the benchmark's machine; above that, or with a busy server process on the same CPU,
/// `any` leaves them to the scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuPlacement {
    /// Both on the CPU the run starts on.
    Start,
    /// Both on this CPU.
    Cpu(usize),
    /// Wherever the scheduler puts them.
    Any,
}

impl std::str::FromStr for CpuPlacement {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "any" => Ok(CpuPlacement::Any),
            "start" => Ok(CpuPlacement::Start),
            n => n
                .parse()
                .map(CpuPlacement::Cpu)
                .map_err(|_| format!("`{n}` is not a CPU number, `start` or `any`")),
        }
    }
}

impl std::fmt::Display for CpuPlacement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CpuPlacement::Start => f.write_str("start"),
            CpuPlacement::Cpu(n) => write!(f, "{n}"),
            CpuPlacement::Any => f.write_str("any"),
        }
    }
}

impl CpuPlacement {
    /// The one CPU both threads go on, deciding `Start` now (call on the thread that starts
    /// the run); `None` for `Any` or a system that does not say where it runs.
    pub fn resolve(self) -> Option<usize> {
        match self {
            CpuPlacement::Start => crate::realtime::current_cpu(),
            CpuPlacement::Cpu(n) => Some(n),
            CpuPlacement::Any => None,
        }
    }
}

/// `KEY=VALUE` (`--set`, `--default`): the key trimmed and not empty, the value as given.
pub fn parse_pair(text: &str) -> Result<(String, String), String> {
    let Some((key, value)) = text.split_once('=') else {
        return Err(format!("`{text}`: expected KEY=VALUE"));
    };
    let key = key.trim();
    if key.is_empty() {
        return Err(format!("`{text}`: the key is empty"));
    }
    Ok((key.to_owned(), value.to_owned()))
}

/// The configuration key that names the arm's runtime (`--set runtime=…`).
pub const RUNTIME_KEY: &str = "runtime";

impl RunRequest {
    /// The canonical `anvil-capture run` command line of this request (program name first):
    /// what the campaign spawns, `anvil campaign plan` prints, the journal and `run.json`
    /// record, and the report suggests. Every value it holds is written, each flag once and
    /// always in the same order, defaults (`--api chat`, `--warmup 0`) left out; parsing it
    /// with `anvil-capture` gives this request back.
    pub fn to_argv(&self) -> Vec<String> {
        let mut argv = Argv(vec!["anvil-capture".to_owned(), "run".to_owned()]);
        argv.pair("--manifest", self.manifest.display());
        argv.option(
            "--workloads",
            self.cell.workloads.as_ref().map(|p| p.display()),
        );
        argv.pair("--class", &self.cell.class);
        argv.option("--context", self.cell.context);
        argv.option("--concurrency", self.cell.concurrency);
        argv.option("--requests", self.cell.requests);
        argv.pair("--arm", &self.arm.name);
        argv.option("--stage", self.arm.stage.as_ref());
        for (key, value) in &self.arm.config {
            argv.pair("--set", format!("{key}={value}"));
        }
        for (key, value) in &self.arm.defaults {
            argv.pair("--default", format!("{key}={value}"));
        }
        if let Some(runtime) = &self.arm.runtime {
            argv.pair("--set", format!("{RUNTIME_KEY}={runtime}"));
        }
        for url in &self.endpoints {
            argv.pair("--endpoint", url);
        }
        argv.option("--timeout-first-byte", self.timeouts.first_byte_s);
        argv.option("--timeout-idle", self.timeouts.idle_s);
        argv.option("--timeout-total", self.timeouts.total_s);
        argv.pair("--out", self.out.display());
        argv.flag("--off-manifest", self.cell.off_manifest);
        argv.flag("--warm-cache", self.cache.warm);
        argv.flag("--reset-cache", self.cache.reset);
        argv.option("--reset-timeout", self.cache.reset_timeout_s);
        argv.option("--probe", self.probe.as_ref());
        argv.option("--rate", self.load.rate);
        argv.flag("--poisson", self.load.poisson);
        if let Some(repeat) = &self.repeat {
            argv.pair("--repeat", repeat.of);
            argv.option("--repeat-index", repeat.index);
        }
        if let Some(shard) = &self.shard {
            argv.pair("--shard", shard.shard);
            argv.pair("--start-at", &shard.start_at);
            argv.option("--start-margin", shard.start_margin);
            argv.option("--run-group", shard.run_group.as_ref());
        }
        argv.option("--model", self.model.as_ref());
        if self.api != Api::Chat {
            argv.pair("--api", self.api.as_str());
        }
        argv.option("--api-key-env", self.api_key_env.as_ref());
        argv.option("--ramp", self.load.ramp);
        if self.load.warmup > 0 {
            argv.pair("--warmup", self.load.warmup);
        }
        for url in &self.metrics_urls {
            argv.pair("--metrics-url", url);
        }
        for source in &self.telemetry.sources {
            argv.pair("--telemetry", source);
        }
        for gpus in &self.telemetry.gpus {
            argv.pair("--telemetry-gpus", gpus);
        }
        for interval in &self.telemetry.intervals_s {
            argv.pair("--telemetry-interval", interval);
        }
        argv.option("--telemetry-every", self.telemetry.every_s);
        argv.flag("--quiet", self.host.quiet);
        argv.flag("--no-thinking-switch", self.host.no_thinking_switch);
        argv.flag("--no-realtime", self.host.no_realtime);
        argv.option("--cpu", self.host.cpu);
        argv.0
    }

    /// What records the cell of a recorded run's `workload` again (its class and numbers,
    /// API, schedule, ramp and probe), for an arm, endpoints and output folder still to
    /// name.
    pub fn for_workload(workload: &crate::artifact::Workload) -> RunRequest {
        let (rate, poisson) = match workload.schedule {
            crate::artifact::Schedule::Closed | crate::artifact::Schedule::Trace => (None, false),
            crate::artifact::Schedule::Open {
                rate_per_s,
                arrivals,
            } => (
                Some(rate_per_s),
                arrivals == crate::artifact::Arrivals::Poisson,
            ),
        };
        RunRequest {
            cell: CellRequest {
                class: workload.class.clone(),
                context: Some(workload.prompt_tokens_target),
                concurrency: Some(workload.concurrency_per_replica),
                requests: Some(workload.total_requests),
                off_manifest: workload.off_manifest,
                workloads: None,
            },
            api: workload.api,
            load: LoadRequest {
                rate,
                poisson,
                ramp: workload.ramp_s,
                warmup: 0,
            },
            probe: workload.probe.clone(),
            cache: CacheRequest {
                warm: workload.cache.as_deref() == Some(crate::artifact::WARM_CACHE),
                ..CacheRequest::default()
            },
            ..RunRequest::default()
        }
    }

    /// The arm's configuration as run.json records it: the declared keys in order, the
    /// runtime last.
    pub fn arm_config(&self) -> Vec<(String, String)> {
        let mut pairs = self.arm.config.clone();
        if let Some(runtime) = &self.arm.runtime {
            pairs.push((RUNTIME_KEY.to_owned(), runtime.clone()));
        }
        pairs
    }
}

/// A command line being written.
struct Argv(Vec<String>);

impl Argv {
    fn pair(&mut self, flag: &str, value: impl ToString) {
        self.0.push(flag.to_owned());
        self.0.push(value.to_string());
    }

    fn option(&mut self, flag: &str, value: Option<impl ToString>) {
        if let Some(v) = value {
            self.pair(flag, v);
        }
    }

    fn flag(&mut self, flag: &str, on: bool) {
        if on {
            self.0.push(flag.to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_keep_their_value_and_name_what_is_wrong() {
        assert_eq!(
            parse_pair(" spec_depth =a=b").unwrap(),
            ("spec_depth".to_owned(), "a=b".to_owned())
        );
        assert!(parse_pair("novalue").unwrap_err().contains("KEY=VALUE"));
        assert!(parse_pair("=x").unwrap_err().contains("key is empty"));
    }

    #[test]
    fn cpu_placements_read_back_as_written() {
        for text in ["start", "any", "3"] {
            let cpu: CpuPlacement = text.parse().unwrap();
            assert_eq!(cpu.to_string(), text);
        }
        assert!("fast".parse::<CpuPlacement>().is_err());
    }

    /// The canonical order: what the campaign journal of the sample data recorded.
    #[test]
    fn the_argv_writes_every_value_once_in_the_canonical_order() {
        let request = RunRequest {
            manifest: "m.json".into(),
            cell: CellRequest {
                class: "optimization-screen".into(),
                context: Some(4096),
                concurrency: Some(4),
                requests: Some(40),
                off_manifest: true,
                workloads: None,
            },
            arm: ArmRequest {
                name: "TP1".into(),
                stage: Some("matched topology".into()),
                config: vec![("spec_depth".into(), "12".into())],
                defaults: vec![("torch_compile".into(), "off".into())],
                runtime: Some("sglang".into()),
            },
            endpoints: vec!["http://127.0.0.1:18304".into()],
            timeouts: Timeouts {
                first_byte_s: Some(300.0),
                ..Timeouts::default()
            },
            probe: Some("capacity".into()),
            load: LoadRequest {
                rate: Some(2.5),
                ..LoadRequest::default()
            },
            repeat: Some(RepeatRequest {
                of: 3,
                index: Some(2),
            }),
            out: "data".into(),
            ..RunRequest::default()
        };
        assert_eq!(
            request.to_argv().join(" "),
            "anvil-capture run --manifest m.json --class optimization-screen --context 4096 \
             --concurrency 4 --requests 40 --arm TP1 --stage matched topology \
             --set spec_depth=12 --default torch_compile=off --set runtime=sglang \
             --endpoint http://127.0.0.1:18304 --timeout-first-byte 300 --out data \
             --off-manifest --probe capacity --rate 2.5 --repeat 3 --repeat-index 2"
        );
        assert_eq!(
            request.arm_config(),
            vec![
                ("spec_depth".to_owned(), "12".to_owned()),
                ("runtime".to_owned(), "sglang".to_owned())
            ]
        );
    }
}
