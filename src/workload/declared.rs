//! Workload classes declared beside the manifest: a campaign file's `workloads` section (or
//! any JSON document with one, given to `anvil-capture run --workloads FILE`). The manifest
//! stays as its authors wrote it; a declared class adds what production traffic has and the
//! manifest's one-shot classes do not, and names the run plan's open gate it serves.
//!
//! Three kinds:
//!
//! - **prefix groups**, the generalisation of the manifest's `prompt_cache_mode`: G groups of
//!   P shared tokens (a system prompt, a few-shot template, a long document asked several
//!   questions), each request's own part after its group's prefix. `unique` is G = 0 and
//!   `shared` is G = 1 with the fixed system text as the prefix; a declared class has G ≥ 1
//!   and P tokens of its own. Request `i` belongs to group `i mod G`
//!   ([`super::shared::group_of`]), so every group is used from the first wave on;
//! - **trace replay**: a published trace (Mooncake, Azure, BurstGPT) read from beside the
//!   declaring document, its first `requests` rows (absent: all) sent at their own times
//!   stretched by `time_scale`, at most `concurrency` in flight per replica (absent:
//!   [`UNCAPPED_IN_FLIGHT`]); each row's lengths are the trace's ([`super::trace::replay`]);
//! - **sessions**: N conversations of T turns, each later turn carrying the earlier messages
//!   and the assistant's actual replies, `concurrency` sessions in flight per replica (or
//!   arriving at `rate_per_s`), a think time between a reply and the next turn, optional
//!   tool turns for agentic loops ([`super::session`]); `context` sizes the first turn.
//!
//! ```json
//! "workloads": [{
//!   "class": "prefix-groups", "gate": "broad repeated quality, agentic, SWE, and endurance",
//!   "context": 4096, "concurrency": 8, "requests": 96, "reply_words": 128,
//!   "prefix_groups": {"groups": 4, "shared_tokens": 2048}
//! }, {
//!   "class": "mooncake-replay", "gate": "broad repeated quality, agentic, SWE, and endurance",
//!   "requests": 1000, "concurrency": 64,
//!   "trace": {"file": "traces/conversation.jsonl", "time_scale": 0.5}
//! }, {
//!   "class": "chat-sessions", "gate": "broad repeated quality, agentic, SWE, and endurance",
//!   "context": 1024, "concurrency": 4, "reply_words": 48, "max_tokens": 128,
//!   "session": {"sessions": 24, "turns": {"min": 2, "max": 4}, "think_time_s": 0.5}
//! }]
//! ```

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::cells::{Cell, CellError, CellQuery, Chosen, ReplyMode, choose};
use super::prompt::PromptCacheMode;
use super::session::{SessionCell, SessionSpec};
pub use super::shared::PrefixGroups;
use super::trace::TraceFormat;
use super::trace::replay::{Timing, TraceCell};
use crate::manifest::{ManifestError, Problem, WorkloadManifest};

/// One declared workload class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredWorkload {
    /// The class id (a path component, not a class of the manifest).
    pub class: String,
    /// The run plan's open gate this class serves, as the plan words it.
    pub gate: String,
    /// Prompt token target of every request (shared prefix included); a trace's rows give
    /// their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<u64>,
    /// Concurrent requests per replica; for a trace, the cap on requests in flight per
    /// replica (absent: [`UNCAPPED_IN_FLIGHT`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// Measured requests, all replicas together; for a trace, its first rows (absent: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// Words each reply is asked for ("in about N words"); absent: a natural completion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_words: Option<u32>,
    /// The token ceiling; absent: the manifest's headline `max_tokens` (a trace: its longest
    /// reply; declared, it caps every row's reply length).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Prefix groups (one kind of class).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_groups: Option<PrefixGroups>,
    /// A trace replayed at its own times (another kind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceReplay>,
    /// Multi-turn sessions (the third kind, [`super::session`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionSpec>,
}

/// A published trace to replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceReplay {
    /// The trace file, relative to the declaring document's folder.
    pub file: std::path::PathBuf,
    /// `mooncake`, `azure` or `burstgpt`; absent: told by the file's first line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<TraceFormat>,
    /// Every gap multiplied by it (default 1; 0.5 replays twice as fast).
    #[serde(default = "one")]
    pub time_scale: f64,
    /// Seconds from the replay's start to the trace's first row (default 0).
    #[serde(default)]
    pub start_offset_s: f64,
}

fn one() -> f64 {
    1.0
}

impl Eq for TraceReplay {}

/// Requests in flight per replica of a trace replay the declaration does not cap: the
/// recorder's slots; a row due while all are busy waits in the client, which its
/// `t_sent_ns − t_intended_ns` shows (together with the recorder's own lateness).
pub const UNCAPPED_IN_FLIGHT: u32 = 256;

/// The prompt tokens a request's own part needs at least, beside its group's prefix: the
/// system text, the canary instruction and some filler.
pub const MIN_OWN_TOKENS: u64 = 64;

impl DeclaredWorkload {
    /// The class's one cell, the manifest supplying the ceiling and canaries it does not
    /// state; a trace is read from `base` (the declaring document's folder). `Err`: why the
    /// trace cannot be read.
    pub fn cell(&self, manifest: &WorkloadManifest, base: &Path) -> Result<Cell, String> {
        let h = manifest.headline_workload();
        let canaries = h.request_canaries;
        if let Some(t) = &self.trace {
            let path = base.join(&t.file);
            let mut trace = super::trace::read(&path, t.format).map_err(|e| e.to_string())?;
            if let Some(n) = self.requests {
                if n as usize > trace.rows.len() {
                    return Err(format!(
                        "class `{}`: requests {n}, but {} has {} rows to replay",
                        self.class,
                        path.display(),
                        trace.rows.len()
                    ));
                }
                trace.rows.truncate(n as usize);
            }
            let context = trace
                .rows
                .iter()
                .map(|r| u64::from(r.input_tokens))
                .max()
                .unwrap_or(1);
            let longest = trace
                .rows
                .iter()
                .map(|r| r.output_tokens)
                .max()
                .unwrap_or(1);
            return Ok(Cell {
                class: self.class.clone(),
                context,
                concurrency: self.concurrency.unwrap_or(UNCAPPED_IN_FLIGHT),
                requests: trace.rows.len() as u64,
                reply: ReplyMode::Natural,
                max_tokens: self.max_tokens.unwrap_or(longest),
                cache_mode: PromptCacheMode::Unique,
                canaries,
                groups: None,
                sessions: None,
                trace: Some(TraceCell {
                    trace: std::sync::Arc::new(trace),
                    timing: Timing {
                        time_scale: t.time_scale,
                        start_offset_s: t.start_offset_s,
                    },
                    capped: self.concurrency.is_some(),
                }),
            });
        }
        Ok(Cell {
            class: self.class.clone(),
            context: self.context.unwrap_or(0),
            concurrency: self.concurrency.unwrap_or(0),
            requests: match &self.session {
                Some(spec) => spec
                    .plan(manifest.selection.random_prefix_seed, &self.class)
                    .requests(),
                None => self.requests.unwrap_or(0),
            },
            reply: self
                .reply_words
                .map_or(ReplyMode::Natural, ReplyMode::AboutWords),
            max_tokens: self
                .max_tokens
                .unwrap_or_else(|| u32::try_from(h.max_tokens).unwrap_or(u32::MAX)),
            cache_mode: PromptCacheMode::Unique,
            canaries,
            groups: self.prefix_groups,
            trace: None,
            sessions: self.session.as_ref().map(|spec| SessionCell {
                plan: std::sync::Arc::new(
                    spec.plan(manifest.selection.random_prefix_seed, &self.class),
                ),
                spec: spec.clone(),
            }),
        })
    }

    /// What the declaration states wrongly on its own, fields under `at` (e.g.
    /// `workloads[0]`).
    pub fn problems(&self, at: &str) -> Vec<Problem> {
        let mut out = Vec::new();
        let mut say =
            |field: &str, what: String| out.push(Problem::new(format!("{at}.{field}"), what));
        if let Err(why) = crate::artifact::path_component(&self.class) {
            say("class", format!("`{}` {why}", self.class));
        }
        if self.class.contains('.') {
            say(
                "class",
                format!(
                    "`{}`: a class id holds no `.` (cell ids join their parts with it)",
                    self.class
                ),
            );
        }
        if self.gate.trim().is_empty() {
            say(
                "gate",
                "name the run plan's open gate the class serves, as the plan words it".into(),
            );
        }
        if self.concurrency == Some(0) {
            say("concurrency", "must be at least 1".into());
        }
        if let Some(n) = self.requests
            && (n == 0 || n > u64::from(u32::MAX / 2))
        {
            say("requests", format!("{n}: must be between 1 and 2^31"));
        }
        if self.max_tokens == Some(0) {
            say("max_tokens", "must be at least 1".into());
        }
        if self.reply_words == Some(0) {
            say(
                "reply_words",
                "must be at least 1 (leave it out for a natural completion)".into(),
            );
        }
        let kinds = [
            self.prefix_groups.is_some(),
            self.trace.is_some(),
            self.session.is_some(),
        ];
        if kinds.iter().filter(|k| **k).count() != 1 {
            say(
                "prefix_groups",
                "a declared class has one kind: `prefix_groups: {groups, shared_tokens}`, \
                 `trace: {file, format, time_scale, start_offset_s}` or `session: {sessions, \
                 turns, turn_words, think_time_s, rate_per_s}`"
                    .into(),
            );
            return out;
        }
        if let Some(spec) = &self.session {
            out.extend(spec.problems(&format!("{at}.session")));
            if self.context.is_none() || self.concurrency.is_none() {
                out.push(Problem::new(
                    format!("{at}.context"),
                    "a session class states its context (the first turn's prompt tokens) and \
                     concurrency (sessions in flight per replica)",
                ));
            }
            if self.requests.is_some() {
                out.push(Problem::new(
                    format!("{at}.requests"),
                    "a session class's requests are its sessions' turns: leave `requests` out",
                ));
            }
            if let Some(context) = self.context
                && context < MIN_OWN_TOKENS
            {
                out.push(Problem::new(
                    format!("{at}.context"),
                    format!("{context}: a first turn needs at least {MIN_OWN_TOKENS} tokens"),
                ));
            }
            return out;
        }
        match (&self.prefix_groups, &self.trace) {
            (None, None) | (Some(_), Some(_)) => {}
            (Some(g), None) => {
                let (Some(context), Some(concurrency), Some(requests)) =
                    (self.context, self.concurrency, self.requests)
                else {
                    say(
                        "context",
                        "a prefix-group class states its context, concurrency and requests".into(),
                    );
                    return out;
                };
                if requests < u64::from(concurrency) {
                    say(
                        "requests",
                        format!("{requests}: must be at least the concurrency ({concurrency})"),
                    );
                }
                if g.groups == 0 {
                    say(
                        "prefix_groups.groups",
                        "must be at least 1 (no shared prefix is the manifest's `unique` mode)"
                            .into(),
                    );
                }
                if g.shared_tokens == 0 || g.shared_tokens + MIN_OWN_TOKENS > context {
                    say(
                        "prefix_groups.shared_tokens",
                        format!(
                            "{}: must be at least 1 and leave {MIN_OWN_TOKENS} of the context's \
                             {context} tokens to each request's own part",
                            g.shared_tokens
                        ),
                    );
                }
            }
            (None, Some(t)) => {
                if self.context.is_some() || self.reply_words.is_some() {
                    say(
                        "context",
                        "a trace's rows give each prompt's and reply's length: leave out \
                         `context` and `reply_words`"
                            .into(),
                    );
                }
                if !(t.time_scale.is_finite() && t.time_scale > 0.0 && t.time_scale <= 1000.0) {
                    say(
                        "trace.time_scale",
                        format!("{}: must be above 0 and at most 1000", t.time_scale),
                    );
                }
                if !(t.start_offset_s.is_finite() && (0.0..=86_400.0).contains(&t.start_offset_s)) {
                    say(
                        "trace.start_offset_s",
                        format!("{}: must be 0 to 86400 seconds", t.start_offset_s),
                    );
                }
            }
        }
        out
    }
}

/// The problems of a whole `workloads` section: each entry's, a class declared twice, and a
/// class the manifest already defines.
pub fn section_problems(workloads: &[DeclaredWorkload], manifest_classes: &[&str]) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (i, w) in workloads.iter().enumerate() {
        let at = format!("workloads[{i}]");
        out.extend(w.problems(&at));
        if !seen.insert(w.class.as_str()) {
            out.push(Problem::new(
                format!("{at}.class"),
                format!("`{}` is declared twice", w.class),
            ));
        }
        if manifest_classes.contains(&w.class.as_str()) {
            out.push(Problem::new(
                format!("{at}.class"),
                format!(
                    "`{}` is a class of the manifest: a declared class takes a new id",
                    w.class
                ),
            ));
        }
    }
    out
}

/// The `workloads` section of the JSON document at `path` (a campaign file, or any document
/// with one), each entry checked on its own.
pub fn load_section(path: &Path) -> Result<Vec<DeclaredWorkload>, ManifestError> {
    let value = crate::manifest::parse_document(&crate::manifest::read_document(path)?, path)?;
    let Some(section) = value.get("workloads") else {
        return Err(ManifestError::field(
            path,
            "workloads",
            "missing: the file declares no workload classes (a campaign file's `workloads` \
             section, a list of {class, gate, context, concurrency, requests, prefix_groups})",
        ));
    };
    let workloads: Vec<DeclaredWorkload> =
        crate::manifest::deserialize_at(section.clone(), "workloads", path)?;
    let problems = section_problems(&workloads, &[]);
    if problems.is_empty() {
        Ok(workloads)
    } else {
        Err(ManifestError::invalid(path, problems))
    }
}

/// The declaration of `class` among `workloads`.
pub fn find<'a>(workloads: &'a [DeclaredWorkload], class: &str) -> Option<&'a DeclaredWorkload> {
    workloads.iter().find(|w| w.class == class)
}

/// [`choose`] among the manifest's classes and `declared` ones: a declared class's one cell,
/// the query's values replacing its own only with `off_manifest`.
pub fn choose_among(
    manifest: &WorkloadManifest,
    declared: &[DeclaredWorkload],
    base: &Path,
    q: &CellQuery,
) -> Result<Chosen, CellError> {
    let Some(d) = find(declared, &q.class) else {
        return choose(manifest, q).map_err(|e| match e {
            CellError::UnknownClass { class, known } if !declared.is_empty() => {
                CellError::UnknownClass {
                    class,
                    known: format!(
                        "{known}; declared beside it: {}",
                        super::cells::list(declared.iter().map(|d| d.class.as_str()))
                    ),
                }
            }
            e => e,
        });
    };
    let mut cell = d
        .cell(manifest, base)
        .map_err(|why| CellError::Declared { why })?;
    let asked: [(&'static str, Option<u64>, u64); 3] = [
        ("--context", q.context, cell.context),
        (
            "--concurrency",
            q.concurrency.map(u64::from),
            u64::from(cell.concurrency),
        ),
        ("--requests", q.requests, cell.requests),
    ];
    let mut off = false;
    for (flag, value, own) in asked {
        let Some(v) = value.filter(|v| *v != own) else {
            continue;
        };
        // A trace's lengths and rows are the trace's, a session class's requests its
        // sessions' turns: only the cap (sessions in flight) and a first turn's context may
        // move.
        if !q.off_manifest
            || (cell.trace.is_some() && flag != "--concurrency")
            || (cell.sessions.is_some() && flag == "--requests")
        {
            return Err(CellError::NotDeclared {
                flag,
                value: v,
                class: q.class.clone(),
                declared: own,
            });
        }
        off = true;
        match flag {
            "--context" => cell.context = v,
            "--concurrency" => {
                cell.concurrency = super::cells::clamp_u32(v);
                // A trace run with a cap on what is in flight is a capped replay.
                if let Some(t) = cell.trace.as_mut() {
                    t.capped = true;
                }
            }
            _ => cell.requests = v,
        }
    }
    // A session class's arrival rate: its sessions' plan is drawn again at that rate (the
    // same turns and think times: they are drawn before the arrivals).
    if let (Some(rate), Some(sessions)) = (q.rate, cell.sessions.as_mut())
        && sessions.spec.rate_per_s != Some(rate)
    {
        if let Err(why) = sessions.spec.arrival_rate_problem(rate) {
            return Err(CellError::Declared {
                why: format!("--rate {why} (class `{}`)", q.class),
            });
        }
        if !q.off_manifest {
            return Err(CellError::Declared {
                why: format!(
                    "class `{}` declares its sessions' arrival rate ({}); --rate {rate} \
                     replaces it only with --off-manifest",
                    q.class,
                    sessions
                        .spec
                        .rate_per_s
                        .map_or_else(|| "closed loop".to_owned(), |r| format!("{r}/s"))
                ),
            });
        }
        off = true;
        sessions.spec.rate_per_s = Some(rate);
        sessions.plan = std::sync::Arc::new(
            sessions
                .spec
                .plan(manifest.selection.random_prefix_seed, &q.class),
        );
    }
    Ok(Chosen {
        cell,
        off_manifest: off,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(g: u32, p: u64) -> DeclaredWorkload {
        DeclaredWorkload {
            class: "prefix-groups".into(),
            gate: "broad repeated quality, agentic, SWE, and endurance".into(),
            context: Some(4096),
            concurrency: Some(8),
            requests: Some(96),
            reply_words: Some(128),
            max_tokens: None,
            prefix_groups: Some(PrefixGroups {
                groups: g,
                shared_tokens: p,
            }),
            trace: None,
            session: None,
        }
    }

    #[test]
    fn expected_cacheable_share_counts_each_groups_first_request_as_a_miss() {
        let g = PrefixGroups {
            groups: 4,
            shared_tokens: 2048,
        };
        assert!((g.expected_cacheable_share(4096, 96) - 92.0 / 96.0 * 0.5).abs() < 1e-12);
        assert_eq!(g.expected_cacheable_share(4096, 4), 0.0);
        assert_eq!(g.expected_cacheable_share(4096, 0), 0.0);
    }

    #[test]
    fn declarations_that_cannot_run_name_their_field() {
        assert!(groups(4, 2048).problems("workloads[0]").is_empty());
        let p = groups(0, 4090).problems("workloads[0]");
        let fields: Vec<&str> = p.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "workloads[0].prefix_groups.groups",
                "workloads[0].prefix_groups.shared_tokens"
            ]
        );
        let mut none = groups(4, 2048);
        none.prefix_groups = None;
        none.class = "a.b".into();
        let p = none.problems("w");
        assert!(p.iter().any(|p| p.field == "w.class"), "{p:?}");
        assert!(p.iter().any(|p| p.field == "w.prefix_groups"), "{p:?}");
        let twice = section_problems(&[groups(4, 2048), groups(2, 1024)], &["prefix-groups"]);
        assert_eq!(twice.len(), 3, "{twice:?}");
    }

    fn mooncake(requests: Option<u64>) -> DeclaredWorkload {
        DeclaredWorkload {
            class: "mooncake-replay".into(),
            gate: "broad repeated quality, agentic, SWE, and endurance".into(),
            context: None,
            concurrency: None,
            requests,
            reply_words: None,
            max_tokens: None,
            prefix_groups: None,
            trace: Some(TraceReplay {
                file: "traces/mooncake_conversation_head.jsonl".into(),
                format: None,
                time_scale: 0.5,
                start_offset_s: 1.0,
            }),
            session: None,
        }
    }

    #[test]
    fn a_trace_class_is_one_cell_of_its_rows_and_refuses_what_the_trace_decides() {
        let manifest = crate::manifest::WorkloadManifest::load(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/sample-data/workload-manifest.json"
        ))
        .unwrap();
        let base = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/sample-data"));
        let cell = mooncake(Some(40)).cell(&manifest, base).unwrap();
        let t = cell.trace.as_ref().unwrap();
        assert_eq!((cell.requests, t.trace.rows.len()), (40, 40));
        assert_eq!(cell.concurrency, UNCAPPED_IN_FLIGHT);
        assert_eq!(cell.schedule(), crate::artifact::Schedule::Trace);
        let record = t.record();
        assert_eq!((record.rows, record.capped), (40, false));
        assert_eq!(record.file, "mooncake_conversation_head.jsonl");
        assert_eq!(t.offsets_ns()[0], 1_000_000_000);
        // A cap asked off the manifest makes the replay a capped one.
        let capped = choose_among(
            &manifest,
            &[mooncake(Some(40))],
            base,
            &CellQuery {
                class: "mooncake-replay".into(),
                concurrency: Some(8),
                off_manifest: true,
                ..CellQuery::default()
            },
        )
        .unwrap();
        assert_eq!(capped.cell.concurrency, 8);
        assert!(capped.cell.trace.as_ref().unwrap().capped);
        let err = mooncake(Some(1000)).cell(&manifest, base).unwrap_err();
        assert!(err.contains("has 120 rows to replay"), "{err}");
        let err = mooncake(None)
            .cell(&manifest, Path::new("/nonexistent"))
            .unwrap_err();
        assert!(err.contains("mooncake_conversation_head.jsonl"), "{err}");

        let mut bad = mooncake(None);
        bad.context = Some(4096);
        bad.trace.as_mut().unwrap().time_scale = 0.0;
        let fields: Vec<String> = bad.problems("w").into_iter().map(|p| p.field).collect();
        assert_eq!(fields, ["w.context", "w.trace.time_scale"]);
        bad.prefix_groups = Some(PrefixGroups {
            groups: 2,
            shared_tokens: 100,
        });
        assert!(
            bad.problems("w")
                .iter()
                .any(|p| p.field == "w.prefix_groups")
        );
    }

    #[test]
    fn a_session_class_takes_a_rate_as_its_sessions_arrivals_only_off_the_manifest() {
        let manifest = crate::manifest::WorkloadManifest::load(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/sample-data/workload-manifest.json"
        ))
        .unwrap();
        let mut chat = groups(1, 1);
        chat.class = "chat-sessions".into();
        chat.prefix_groups = None;
        chat.requests = None;
        chat.session = Some(
            serde_json::from_value(
                serde_json::json!({"sessions": 12, "turns": {"min": 2, "max": 4}}),
            )
            .unwrap(),
        );
        let declared = [chat];
        let q = |rate: Option<f64>, off_manifest: bool| CellQuery {
            class: "chat-sessions".into(),
            rate,
            off_manifest,
            ..CellQuery::default()
        };
        let base = Path::new(".");
        let closed = choose_among(&manifest, &declared, base, &q(None, false)).unwrap();
        assert_eq!(closed.cell.schedule(), crate::artifact::Schedule::Closed);
        let err = choose_among(&manifest, &declared, base, &q(Some(2.0), false)).unwrap_err();
        assert!(
            err.to_string()
                .contains("replaces it only with --off-manifest"),
            "{err}"
        );
        let open = choose_among(&manifest, &declared, base, &q(Some(2.0), true)).unwrap();
        assert!(open.off_manifest);
        let (a, b) = (
            closed.cell.sessions.as_ref().unwrap(),
            open.cell.sessions.as_ref().unwrap(),
        );
        // The same sessions and think times, now arriving at 2 per second.
        assert_eq!(
            (&a.plan.turns, &a.plan.think_ns),
            (&b.plan.turns, &b.plan.think_ns)
        );
        assert_eq!(a.plan.arrivals_ns, None);
        assert_eq!(b.plan.arrivals_ns.as_ref().map(Vec::len), Some(12));
        assert_eq!(
            open.cell.schedule(),
            crate::artifact::Schedule::Open {
                rate_per_s: 2.0,
                arrivals: crate::artifact::Arrivals::Poisson
            }
        );
        for bad in [0.0, -1.0, f64::NAN, 1e9] {
            let err = choose_among(&manifest, &declared, base, &q(Some(bad), true)).unwrap_err();
            assert!(
                err.to_string().contains("arrival rate is above 0"),
                "{bad}: {err}"
            );
        }
        for slow in [1e-4, 1e-9] {
            let err = choose_among(&manifest, &declared, base, &q(Some(slow), true)).unwrap_err();
            assert!(err.to_string().contains("take over a day"), "{slow}: {err}");
        }
    }
}
