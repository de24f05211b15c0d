//! The workload of a run: the cell (class, prompt target, concurrency, requests, words,
//! ceiling, cache mode, canaries, seed, thinking), the API, the schedule and ramp, and the
//! probe mark; hashed into the workload fingerprint, with the suffixes each adds to a cell id.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::artifact::fingerprint;

/// The API a cell drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// `POST /v1/chat/completions`.
    #[default]
    Chat,
    /// `POST /v1/completions` (legacy).
    Completions,
    /// `POST /v1/responses`.
    Responses,
}

impl Api {
    /// The name used in `run.json` and in the `api` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Completions => "completions",
            Api::Responses => "responses",
        }
    }

    /// Parse that name (also the manifest's and the command line's spelling).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "chat" => Some(Self::Chat),
            "completions" => Some(Self::Completions),
            "responses" => Some(Self::Responses),
            _ => None,
        }
    }

    /// The cell-id suffix that keeps runs of a cell on different APIs apart, before the
    /// schedule's: empty for chat (the manifest's cells, so their ids are unchanged),
    /// `.responses` and `.completions` otherwise.
    pub fn cell_id_suffix(self) -> &'static str {
        match self {
            Api::Chat => "",
            Api::Completions => ".completions",
            Api::Responses => ".responses",
        }
    }

    /// What a report adds to a workload's description so a run on another API than chat is
    /// never read as a chat run: `, Responses API`, `, legacy completions API`; nothing for
    /// chat (the manifest's own API).
    pub fn note(self) -> &'static str {
        match self {
            Api::Chat => "",
            Api::Completions => ", legacy completions API",
            Api::Responses => ", Responses API",
        }
    }
}

/// The workload of one cell: everything that must be equal for two runs to be compared.
/// Hashed into the workload fingerprint; topology and salt are deliberately not here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Workload class id from the manifest, e.g. `headline-sustained-output`.
    pub class: String,
    /// Target prompt length in tokens (actual prompt token target), e.g. 4096.
    pub prompt_tokens_target: u64,
    /// Concurrent in-flight requests per replica.
    pub concurrency_per_replica: u32,
    /// Measured requests in the cell (warmup and calibration excluded), all replicas together.
    pub total_requests: u64,
    /// Words the prompt asks the model to write; `null` for natural-completion cells.
    pub response_words: Option<u32>,
    /// `max_tokens` (token ceiling) sent with every request.
    pub max_tokens: u32,
    /// Prompt cache mode from the manifest, e.g. `unique`; `groups` for a declared
    /// prefix-group class ([`PROMPT_CACHE_GROUPS`]).
    pub prompt_cache_mode: String,
    /// A prefix-group class's groups, shared tokens and the share of prompt tokens a cache
    /// can serve by the declaration; absent for every other class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_groups: Option<PrefixGroupsRecord>,
    /// A trace replay's trace: its file's name, format and SHA-256, the rows replayed, the
    /// time scale and start offset; absent for every other class. Part of the fingerprint:
    /// two different traces never match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceRecord>,
    /// A session class's sessions (how many, their turns, think time and arrivals); absent
    /// for every other class. `total_requests` is then their turns, `concurrency_per_replica`
    /// the sessions in flight per replica, and an open `schedule`'s rate the sessions'
    /// arrival rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<SessionsRecord>,
    /// `warm` when the run's prompts carried no per-run salt, to measure a warm cache on
    /// purpose ([`WARM_CACHE`]); absent: every run's prompts are its own (cold). A warm run
    /// is never matched with a cold one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<String>,
    /// Whether every request carries a unique canary it must echo.
    pub canaries: bool,
    /// Random prefix seed from the manifest.
    pub seed: u64,
    /// Thinking mode, e.g. `disabled`.
    pub thinking: String,
    /// API driven.
    pub api: Api,
    /// How requests were issued: closed loop (a fixed number in flight) or open loop (at a
    /// rate). Open and closed loop load a server differently, so the schedule is part of
    /// what must match.
    pub schedule: Schedule,
    /// The start ramp, seconds (`--ramp`). Closed loop: the slots' first requests started
    /// evenly over it from the barrier's release (slot k of W at k·ramp/W, its intended
    /// time); open loop: the release rate rose linearly from 0 to `rate_per_s` over it.
    /// Absent: every slot released at once, an open loop at full rate from its first release.
    /// A ramp loads the server differently at the start, so it is part of what must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp_s: Option<f64>,
    /// True when the cell was not taken from the manifest (an ad-hoc run).
    pub off_manifest: bool,
    /// The search this run is a probe of (`capacity`: a load tried by `anvil campaign run`'s
    /// capacity search); absent for every other run. Part of the fingerprint, so a probe
    /// never matches a manifest cell's run at the same load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<String>,
}

/// `cache` of a run measured warm on purpose.
pub const WARM_CACHE: &str = "warm";

/// `prompt_cache_mode` of a prefix-group class.
pub const PROMPT_CACHE_GROUPS: &str = "groups";

/// What run.json says of a prefix-group class (part of the workload fingerprint).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrefixGroupsRecord {
    /// G: the groups, request `i` in group `i mod G`.
    pub groups: u32,
    /// P: the declared tokens of each group's shared prefix.
    pub shared_tokens: u64,
    /// `(n − G) / n × P / context`: the share of prompt tokens a prefix cache can serve when
    /// every request after its group's first finds the prefix cached.
    pub expected_cacheable_share: f64,
}

/// What run.json says of a replayed trace (part of the workload fingerprint).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceRecord {
    /// The trace file's name (without its folder: the same trace anywhere matches).
    pub file: String,
    /// `mooncake`, `azure` or `burstgpt`.
    pub format: String,
    /// SHA-256 of the file's bytes, hex.
    pub sha256: String,
    /// The trace's rows replayed (its first `rows` after those left out).
    pub rows: u64,
    /// Every gap multiplied by it (1: as recorded).
    pub time_scale: f64,
    /// Seconds from the replay's start to the trace's first row.
    pub start_offset_s: f64,
    /// Whether the declaration capped the requests in flight (`concurrency_per_replica`);
    /// uncapped replays still hold at most that many per replica and report what it held
    /// back.
    pub capped: bool,
}

/// What run.json says of a session class (part of the workload fingerprint).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionsRecord {
    /// N: the sessions measured.
    pub sessions: u32,
    /// The fewest and most turns a session has (equal when fixed; drawn uniformly between
    /// them, seeded by the manifest seed and the class, when not).
    pub turns_min: u32,
    pub turns_max: u32,
    /// Filler words of each later turn's new user message.
    pub turn_words: u32,
    /// `fixed` or `exponential` think time before each later turn.
    pub think_time: String,
    /// The think time (fixed) or its mean (exponential), seconds.
    pub think_time_s: f64,
    /// Open loop: the sessions' mean arrival rate per second (Poisson); absent: closed loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_s: Option<f64>,
    /// Whether replies' reasoning is resent in the history.
    pub keep_reasoning: bool,
    /// Every k-th later turn a tool turn (a `tool` message answering the assistant's call);
    /// absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_every: Option<u32>,
}

/// How a run issued its measured requests.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Schedule {
    /// `concurrency_per_replica` requests in flight on every replica, each sent as soon as
    /// the previous one on its slot ended.
    Closed,
    /// Requests released at `rate_per_s` (all replicas together), each taken by the next free
    /// slot; a request released while every slot is busy waits in the client, which shows
    /// as `t_sent_ns - t_intended_ns`.
    Open {
        /// Mean release rate, requests per second.
        rate_per_s: f64,
        /// `constant` gaps of 1 / rate, or `poisson` (exponential gaps of mean 1 / rate).
        arrivals: Arrivals,
    },
    /// A trace replayed at its own times (the workload's `trace` says which, at what scale
    /// and offset); each request taken by the next free slot of at most
    /// `concurrency_per_replica` per replica, a request released while every slot is busy
    /// held back in the client (shown by `t_sent_ns - t_intended_ns`).
    Trace,
}

/// Gaps between the releases of an open-loop schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arrivals {
    Constant,
    Poisson,
}

/// The cell-id suffix of a start ramp (`.ramp2.5` for 2.5 s; empty without one), after the
/// schedule's: ramped and unramped runs of a cell never share a folder.
pub fn ramp_cell_id_suffix(ramp_s: Option<f64>) -> String {
    ramp_s.map(|r| format!(".ramp{r}")).unwrap_or_default()
}

/// The cell-id suffix of a probe of a search (`.probe-capacity`); empty for other runs.
pub fn probe_cell_id_suffix(probe: Option<&str>) -> String {
    probe.map(|p| format!(".probe-{p}")).unwrap_or_default()
}

impl Schedule {
    /// The cell-id suffix that keeps open- and closed-loop artifacts of a cell apart:
    /// empty for closed loop, `.rate2.5` / `.poisson2.5` for open loop at 2.5 requests/s.
    pub fn cell_id_suffix(&self) -> String {
        match self {
            Schedule::Closed => String::new(),
            Schedule::Open {
                rate_per_s,
                arrivals: Arrivals::Constant,
            } => format!(".rate{rate_per_s}"),
            Schedule::Open {
                rate_per_s,
                arrivals: Arrivals::Poisson,
            } => format!(".poisson{rate_per_s}"),
            // A trace class's cells are its own: its id says enough.
            Schedule::Trace => String::new(),
        }
    }

    /// `closed`, `constant`, `poisson` or `trace` (the `schedule` column of `runs`).
    pub fn kind(&self) -> &'static str {
        match self {
            Schedule::Closed => "closed",
            Schedule::Trace => "trace",
            Schedule::Open {
                arrivals: Arrivals::Constant,
                ..
            } => "constant",
            Schedule::Open {
                arrivals: Arrivals::Poisson,
                ..
            } => "poisson",
        }
    }

    /// The open-loop rate, requests per second.
    pub fn rate_per_s(&self) -> Option<f64> {
        match self {
            Schedule::Closed | Schedule::Trace => None,
            Schedule::Open { rate_per_s, .. } => Some(*rate_per_s),
        }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Schedule::Closed => f.write_str("closed loop"),
            Schedule::Trace => f.write_str("trace replay at the trace's own times"),
            Schedule::Open {
                rate_per_s,
                arrivals,
            } => write!(
                f,
                "open loop at {rate_per_s} requests/s ({})",
                match arrivals {
                    Arrivals::Constant => "constant gaps",
                    Arrivals::Poisson => "Poisson arrivals",
                }
            ),
        }
    }
}

impl Workload {
    /// Whether this is the workload of a class declared beside the manifest (a campaign
    /// file's `workloads`): sessions, a trace replay or prefix groups.
    pub fn is_declared_class(&self) -> bool {
        self.sessions.is_some() || self.trace.is_some() || self.prefix_groups.is_some()
    }

    /// This workload's fingerprint (`sha256:…`).
    pub fn fingerprint(&self) -> String {
        // Serialising a struct of plain fields to a JSON value cannot fail.
        fingerprint::fingerprint(self)
            .unwrap_or_else(|e| format!("{}unserialisable:{e}", fingerprint::PREFIX))
    }
}
