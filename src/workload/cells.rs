//! The cells a workload manifest defines: one (class, prompt token target, concurrency per
//! replica, request count) combination each, with its response length, token ceiling and
//! prompt mode, under a stable id such as `headline-sustained-output.ctx4096.c8.n100`.
//!
//! The manifest states the headline cell exactly (`selection.headline_*`) and describes the
//! other classes in words. How each class is read (the mapping `anvil-capture cells` prints):
//!
//! | class | contexts | concurrency | requests | reply | cache |
//! |---|---|---|---|---|---|
//! | `headline-sustained-output` | the first context (4K) | 8 | `headline_requests` | about `headline_response_words` words | headline mode |
//! | `optimization-screen` | the first context (4K) | 1, 4, 8 | each of `natural_completion_screen_requests` ≥ C | natural | headline mode |
//! | `context-curve` | 2nd (32K) at C1, 3rd (82K) at C8, 4th (128K) and 5th (250K) at C1 | as listed | each of `natural_completion_screen_requests` ≥ C | about `headline_response_words` words | headline mode |
//! | `functional` | the first context (4K) | 1 (the concurrent checks send their whole share at once) | each of `natural_completion_screen_requests` divisible by 4, split evenly over the four checks | per check (`functional`) | `shared` |
//!
//! Every cell sends `headline_max_tokens` as its ceiling and carries canaries when
//! `headline_request_canaries` is set. Concurrency levels and contexts named above must be in
//! the manifest's lists (a level missing from `selection.concurrency` drops its cells); a
//! request count below the concurrency is left out (the cell would never reach its
//! concurrency). A class this module does not know gets the optimisation-screen shape at
//! every listed context and concurrency.

use std::fmt;

use crate::manifest::WorkloadManifest;

use super::prompt::{GroupPrefix, PromptCacheMode, PromptForm, PromptSpec, ResponseLength};
use super::shared::PrefixGroups;
use super::trace::replay::TraceCell;

/// The headline class id.
pub const HEADLINE: &str = "headline-sustained-output";
/// The optimisation-screen class id.
pub const SCREEN: &str = "optimization-screen";
/// The context-curve class id.
pub const CONTEXT_CURVE: &str = "context-curve";
/// The functional class id.
pub const FUNCTIONAL: &str = "functional";

/// What a cell's prompts ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyMode {
    /// "about N words", with the token ceiling.
    AboutWords(u32),
    /// No length asked; the token ceiling still applies.
    Natural,
}

impl ReplyMode {
    /// `about-words` or `natural`, as `cells` prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AboutWords(_) => "about-words",
            Self::Natural => "natural",
        }
    }

    pub fn words(self) -> Option<u32> {
        match self {
            Self::AboutWords(n) => Some(n),
            Self::Natural => None,
        }
    }
}

/// One cell of the manifest (or an off-manifest one built the same way).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub class: String,
    /// Prompt token target.
    pub context: u64,
    /// Concurrent requests per replica.
    pub concurrency: u32,
    /// Measured requests, all replicas together.
    pub requests: u64,
    pub reply: ReplyMode,
    pub max_tokens: u32,
    pub cache_mode: PromptCacheMode,
    pub canaries: bool,
    /// Prefix groups (a declared class, [`super::declared`]); `None` for the manifest's.
    pub groups: Option<PrefixGroups>,
    /// The trace a declared trace class replays; `None` for every other class.
    pub trace: Option<TraceCell>,
    /// The sessions of a declared session class; `None` for every other class.
    pub sessions: Option<super::session::SessionCell>,
}

impl Cell {
    /// The workload section of the run.json of a run of this cell (its fingerprint is the
    /// one `--resume` and `anvil campaign plan` match recorded artifacts by).
    pub fn workload(
        &self,
        manifest: &WorkloadManifest,
        api: crate::artifact::Api,
        schedule: crate::artifact::Schedule,
        ramp_s: Option<f64>,
        off_manifest: bool,
    ) -> crate::artifact::Workload {
        let sel = &manifest.selection;
        crate::artifact::Workload {
            class: self.class.clone(),
            prompt_tokens_target: self.context,
            concurrency_per_replica: self.concurrency,
            total_requests: self.requests,
            response_words: self.reply.words(),
            max_tokens: self.max_tokens,
            prompt_cache_mode: match self.groups {
                Some(_) => crate::artifact::PROMPT_CACHE_GROUPS.to_owned(),
                None => self.cache_mode.as_str().to_owned(),
            },
            prefix_groups: self.groups.map(|g| crate::artifact::PrefixGroupsRecord {
                groups: g.groups,
                shared_tokens: g.shared_tokens,
                expected_cacheable_share: g.expected_cacheable_share(self.context, self.requests),
            }),
            canaries: self.canaries,
            seed: sel.random_prefix_seed,
            thinking: sel.thinking.as_str().to_owned(),
            api,
            schedule,
            ramp_s,
            off_manifest,
            probe: None,
            trace: self.trace.as_ref().map(TraceCell::record),
            sessions: self
                .sessions
                .as_ref()
                .map(super::session::SessionCell::record),
            cache: None,
        }
    }

    /// How this cell's requests are released when no load is asked for: a trace at its own
    /// times, every other cell in closed loop.
    pub fn schedule(&self) -> crate::artifact::Schedule {
        if let Some(s) = &self.sessions {
            s.schedule()
        } else if self.trace.is_some() {
            crate::artifact::Schedule::Trace
        } else {
            crate::artifact::Schedule::Closed
        }
    }

    /// The stable id: `<class>.ctx<context>.c<concurrency>.n<requests>`. A run's cell id
    /// adds what else it ran with: `.responses` / `.completions` for an API other than chat
    /// (`Api::cell_id_suffix`), then `.rateR` / `.poissonR`, `.rampS` and `.probe-NAME`.
    pub fn id(&self) -> String {
        format!(
            "{}.ctx{}.c{}.n{}",
            self.class, self.context, self.concurrency, self.requests
        )
    }
}

impl Cell {
    /// What determines this cell's prompts, for a run with `run_salt` on an API taking
    /// `form` (the manifest's `seed`).
    pub fn prompt_spec(&self, seed: u64, run_salt: &str, form: PromptForm) -> PromptSpec {
        PromptSpec {
            seed,
            run_salt: run_salt.to_owned(),
            workload_class: self.class.clone(),
            context_target: self.context,
            cache_mode: self.cache_mode,
            response_length: match self.reply.words() {
                Some(words) => ResponseLength::AboutWords(words),
                None => ResponseLength::Natural,
            },
            canaries: self.canaries,
            form,
            // Sized by calibration (`PromptBuilder::with_group_units`).
            groups: self.groups.map(|g| GroupPrefix {
                groups: g.groups,
                units: Vec::new(),
            }),
        }
    }
}

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let words = self
            .reply
            .words()
            .map_or_else(|| "-".to_owned(), |w| w.to_string());
        write!(
            f,
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            self.id(),
            self.class,
            self.context,
            self.concurrency,
            self.requests,
            words,
            self.max_tokens,
            self.reply.as_str()
        )
    }
}

/// The header line matching [`Cell`]'s `Display`.
pub const TABLE_HEADER: &str =
    "cell_id\tclass\tcontext\tconcurrency\trequests\twords\tmax_tokens\tmode";

/// What every cell of a class shares, from the manifest's `selection` and the class
/// description alone (never from whichever cells happen to exist): its reply mode, ceiling,
/// cache mode and canaries, and where it runs when a value is not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassShape {
    pub reply: ReplyMode,
    pub max_tokens: u32,
    pub cache_mode: PromptCacheMode,
    pub canaries: bool,
    /// The class's own context (`None`: the class spans several).
    pub context: Option<u64>,
    /// The class's own concurrency per replica (`None`: the class spans several).
    pub concurrency: Option<u32>,
    /// The class's own request count (`None`: one cell per screen count).
    pub requests: Option<u64>,
}

pub(crate) fn clamp_u32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// The headline class's concurrency per replica (the manifest's "C8 per replica").
pub const HEADLINE_CONCURRENCY: u32 = 8;

/// The shape of `class` in `manifest` (see the module table).
pub fn shape(manifest: &WorkloadManifest, class: &str) -> ClassShape {
    let h = manifest.headline_workload();
    let first = manifest.contexts().next();
    let about = ReplyMode::AboutWords(clamp_u32(h.response_words));
    let base = ClassShape {
        reply: ReplyMode::Natural,
        max_tokens: clamp_u32(h.max_tokens),
        cache_mode: h.prompt_cache_mode,
        canaries: h.request_canaries,
        context: None,
        concurrency: None,
        requests: None,
    };
    match class {
        HEADLINE => ClassShape {
            reply: about,
            context: first,
            concurrency: Some(HEADLINE_CONCURRENCY),
            requests: Some(h.requests),
            ..base
        },
        SCREEN => ClassShape {
            context: first,
            ..base
        },
        CONTEXT_CURVE => ClassShape {
            reply: about,
            ..base
        },
        FUNCTIONAL => ClassShape {
            cache_mode: PromptCacheMode::Shared,
            context: first,
            concurrency: Some(1),
            ..base
        },
        _ => base,
    }
}

/// Every cell the manifest defines, in class order, then context, concurrency, requests.
pub fn cells(manifest: &WorkloadManifest) -> Vec<Cell> {
    let contexts: Vec<u64> = manifest.contexts().collect();
    let levels: Vec<u64> = manifest.concurrency().collect();
    let screen_counts: Vec<u64> = manifest.natural_completion_screen_requests().collect();
    let mut out = Vec::new();
    for class in manifest.workload_class_ids() {
        let sh = shape(manifest, class);
        let mut push = |context: u64, c: u64, n: u64| {
            if !levels.contains(&c) || n < c {
                return;
            }
            out.push(Cell {
                class: class.to_owned(),
                context,
                concurrency: clamp_u32(c),
                requests: n,
                reply: sh.reply,
                max_tokens: sh.max_tokens,
                cache_mode: sh.cache_mode,
                canaries: sh.canaries,
                groups: None,
                trace: None,
                sessions: None,
            });
        };
        let first = sh.context.unwrap_or(4096);
        match class {
            HEADLINE => push(
                first,
                u64::from(HEADLINE_CONCURRENCY),
                sh.requests.unwrap_or(0),
            ),
            SCREEN => {
                for c in [1, 4, 8] {
                    for &n in &screen_counts {
                        push(first, c, n);
                    }
                }
            }
            CONTEXT_CURVE => {
                let plan = [(1usize, 1u64), (2, 8), (3, 1), (4, 1)];
                for (i, c) in plan {
                    let Some(&context) = contexts.get(i) else {
                        continue;
                    };
                    for &n in &screen_counts {
                        push(context, c, n);
                    }
                }
            }
            FUNCTIONAL => {
                // The four checks share the count evenly (see `functional`).
                for &n in screen_counts.iter().filter(|n| *n % 4 == 0) {
                    push(first, 1, n);
                }
            }
            _ => {
                for &context in &contexts {
                    for &c in &levels {
                        for &n in &screen_counts {
                            push(context, c, n);
                        }
                    }
                }
            }
        }
    }
    out
}

/// Why `class` has no cell in `manifest`, in the manifest's own terms.
fn why_no_cells(manifest: &WorkloadManifest, class: &str) -> String {
    let levels = list(manifest.concurrency());
    match shape(manifest, class).concurrency {
        Some(c) if !manifest.concurrency().any(|l| l == u64::from(c)) => format!(
            "the class runs at concurrency {c} per replica, which selection.concurrency ({levels}) does not list"
        ),
        _ => format!(
            "no combination of its contexts, selection.concurrency ({levels}) and request counts \
             (each at least the concurrency) is left"
        ),
    }
}

/// Why no cell could be chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CellError {
    #[error("--class `{class}`: not a workload class of the manifest; known: {known}")]
    UnknownClass { class: String, known: String },
    #[error(
        "{flag} {value}: the manifest has no `{class}` cell with it (allowed: {allowed}); \
         pass --off-manifest to run it anyway"
    )]
    NotInManifest {
        flag: &'static str,
        value: u64,
        class: String,
        allowed: String,
    },
    #[error(
        "the manifest has several `{class}` cells matching what was given; add {missing} \
         (candidates: {candidates})"
    )]
    Ambiguous {
        class: String,
        missing: String,
        candidates: String,
    },
    #[error(
        "--class `{class}`: the manifest defines no cell of this class: {why}; pass \
         --off-manifest with --context, --concurrency and --requests to run it anyway"
    )]
    NoCells { class: String, why: String },
    #[error("{why}")]
    Declared { why: String },
    #[error("--off-manifest needs {flag} for class `{class}`")]
    OffManifestNeeds { flag: &'static str, class: String },
    #[error(
        "{flag} {value}: class `{class}` is declared with {declared} (its `workloads` \
         entry); pass --off-manifest to run it anyway"
    )]
    NotDeclared {
        flag: &'static str,
        value: u64,
        class: String,
        declared: u64,
    },
}

/// What the command line asked for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CellQuery {
    pub class: String,
    pub context: Option<u64>,
    pub concurrency: Option<u32>,
    pub requests: Option<u64>,
    /// An open loop's rate; for a declared session class, its sessions' arrival rate per
    /// second (replacing `session.rate_per_s`, off the manifest). Other classes take the
    /// rate as their schedule, not their cell.
    pub rate: Option<f64>,
    pub off_manifest: bool,
}

/// The chosen cell and whether it is off the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    pub cell: Cell,
    pub off_manifest: bool,
}

pub(crate) fn list<T: fmt::Display>(values: impl IntoIterator<Item = T>) -> String {
    let mut v: Vec<String> = values.into_iter().map(|x| x.to_string()).collect();
    v.dedup();
    v.join(", ")
}

/// Pick the cell `q` names. Values the manifest lacks are refused unless `off_manifest`; then
/// the cell takes the class's reply mode, ceiling and cache mode with the given values.
pub fn choose(manifest: &WorkloadManifest, q: &CellQuery) -> Result<Chosen, CellError> {
    if manifest.workload_class(&q.class).is_none() {
        return Err(CellError::UnknownClass {
            class: q.class.clone(),
            known: list(manifest.workload_class_ids()),
        });
    }
    let all: Vec<Cell> = cells(manifest)
        .into_iter()
        .filter(|c| c.class == q.class)
        .collect();
    let matches: Vec<&Cell> = all
        .iter()
        .filter(|c| q.context.is_none_or(|v| c.context == v))
        .filter(|c| q.concurrency.is_none_or(|v| c.concurrency == v))
        .filter(|c| q.requests.is_none_or(|v| c.requests == v))
        .collect();
    if let [one] = matches.as_slice() {
        return Ok(Chosen {
            cell: (*one).clone(),
            off_manifest: false,
        });
    }
    if matches.len() > 1 {
        let mut missing = Vec::new();
        let first = matches[0];
        if matches.iter().any(|c| c.context != first.context) {
            missing.push("--context");
        }
        if matches.iter().any(|c| c.concurrency != first.concurrency) {
            missing.push("--concurrency");
        }
        if matches.iter().any(|c| c.requests != first.requests) {
            missing.push("--requests");
        }
        return Err(CellError::Ambiguous {
            class: q.class.clone(),
            missing: missing.join(" and "),
            candidates: list(matches.iter().take(12).map(|c| c.id())),
        });
    }
    if !q.off_manifest && all.is_empty() {
        return Err(CellError::NoCells {
            class: q.class.clone(),
            why: why_no_cells(manifest, &q.class),
        });
    }
    if !q.off_manifest {
        // Name the first value that has no cell.
        let checks: [(&'static str, Option<u64>, Vec<u64>); 3] = [
            (
                "--context",
                q.context,
                all.iter().map(|c| c.context).collect(),
            ),
            (
                "--concurrency",
                q.concurrency.map(u64::from),
                all.iter()
                    .filter(|c| q.context.is_none_or(|v| c.context == v))
                    .map(|c| u64::from(c.concurrency))
                    .collect(),
            ),
            (
                "--requests",
                q.requests,
                all.iter()
                    .filter(|c| q.context.is_none_or(|v| c.context == v))
                    .filter(|c| q.concurrency.is_none_or(|v| c.concurrency == v))
                    .map(|c| c.requests)
                    .collect(),
            ),
        ];
        for (flag, value, mut allowed) in checks {
            if let Some(v) = value
                && !allowed.contains(&v)
            {
                allowed.sort_unstable();
                allowed.dedup();
                return Err(CellError::NotInManifest {
                    flag,
                    value: v,
                    class: q.class.clone(),
                    allowed: list(allowed),
                });
            }
        }
        // Every value exists somewhere but not together.
        return Err(CellError::NotInManifest {
            flag: "--requests",
            value: q.requests.unwrap_or(0),
            class: q.class.clone(),
            allowed: list(all.iter().map(|c| c.id())),
        });
    }
    // Off the manifest: the class's shape with the given values; a missing value is the
    // class's own (headline: the first context, C8, `headline_requests`), else its first
    // cell's.
    let sh = shape(manifest, &q.class);
    let template = all.first();
    let pick = |flag: &'static str, v: Option<u64>, own: Option<u64>, from: Option<u64>| {
        v.or(own).or(from).ok_or(CellError::OffManifestNeeds {
            flag,
            class: q.class.clone(),
        })
    };
    let cell = Cell {
        class: q.class.clone(),
        context: pick(
            "--context",
            q.context,
            sh.context,
            template.map(|c| c.context),
        )?,
        concurrency: clamp_u32(pick(
            "--concurrency",
            q.concurrency.map(u64::from),
            sh.concurrency.map(u64::from),
            template.map(|c| u64::from(c.concurrency)),
        )?),
        requests: pick(
            "--requests",
            q.requests,
            sh.requests,
            template.map(|c| c.requests),
        )?,
        reply: sh.reply,
        max_tokens: sh.max_tokens,
        cache_mode: sh.cache_mode,
        canaries: sh.canaries,
        groups: None,
        trace: None,
        sessions: None,
    };
    let off_manifest = !all.contains(&cell);
    Ok(Chosen { cell, off_manifest })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> WorkloadManifest {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/sample-data/workload-manifest.json"
        );
        WorkloadManifest::load(path).unwrap()
    }

    fn q(class: &str) -> CellQuery {
        CellQuery {
            class: class.into(),
            ..CellQuery::default()
        }
    }

    #[test]
    fn the_headline_cell_is_the_manifests_selection() {
        let m = manifest();
        let c = choose(&m, &q(HEADLINE)).unwrap();
        assert!(!c.off_manifest);
        assert_eq!(c.cell.id(), "headline-sustained-output.ctx4096.c8.n100");
        assert_eq!(c.cell.reply, ReplyMode::AboutWords(256));
        assert_eq!(c.cell.max_tokens, 512);
        assert_eq!(c.cell.cache_mode, PromptCacheMode::Unique);
        assert!(c.cell.canaries);
    }

    #[test]
    fn screens_and_the_context_curve_follow_the_class_descriptions() {
        let m = manifest();
        let all = cells(&m);
        let ids: Vec<String> = all.iter().map(Cell::id).collect();
        for id in [
            "optimization-screen.ctx4096.c1.n3",
            "optimization-screen.ctx4096.c4.n4",
            "optimization-screen.ctx4096.c8.n100",
            "context-curve.ctx32768.c1.n3",
            "context-curve.ctx81920.c8.n8",
            "context-curve.ctx131072.c1.n5",
            "context-curve.ctx253952.c1.n3",
            "functional.ctx4096.c1.n4",
            "functional.ctx4096.c1.n100",
        ] {
            assert!(ids.contains(&id.to_owned()), "{id} missing");
        }
        // The functional checks share a cell's count evenly: counts not divisible by 4 are
        // not functional cells.
        assert!(!ids.contains(&"functional.ctx4096.c1.n3".to_owned()));
        // Fewer requests than concurrency, and levels outside the description, are not cells.
        assert!(!ids.contains(&"optimization-screen.ctx4096.c8.n5".to_owned()));
        assert!(
            !ids.iter()
                .any(|i| i.starts_with("optimization-screen.ctx4096.c2."))
        );
        assert!(
            !ids.iter()
                .any(|i| i.starts_with("context-curve.ctx32768.c8."))
        );
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), ids.len(), "cell ids are unique");
    }

    #[test]
    fn values_outside_the_manifest_are_refused_unless_off_manifest() {
        let m = manifest();
        let mut query = q(HEADLINE);
        query.context = Some(512);
        let e = choose(&m, &query).unwrap_err();
        assert!(e.to_string().contains("--context 512"), "{e}");
        query.off_manifest = true;
        query.concurrency = Some(4);
        query.requests = Some(20);
        let c = choose(&m, &query).unwrap();
        assert!(c.off_manifest);
        assert_eq!(c.cell.id(), "headline-sustained-output.ctx512.c4.n20");
        assert_eq!(c.cell.reply, ReplyMode::AboutWords(256));
        let e = choose(&m, &q("nope")).unwrap_err();
        assert!(matches!(e, CellError::UnknownClass { .. }), "{e}");
        let e = choose(&m, &q(SCREEN)).unwrap_err();
        assert!(matches!(e, CellError::Ambiguous { .. }), "{e}");
    }

    /// A manifest whose `selection.concurrency` lacks the headline's 8: the class keeps its
    /// reply mode off the manifest, and the refusal without `--off-manifest` says why.
    #[test]
    fn the_headline_shape_comes_from_the_selection_not_from_its_cells() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/sample-data/workload-manifest.json"
        );
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        v["selection"]["concurrency"] = serde_json::json!([1, 4]);
        let m = WorkloadManifest::from_value(v, "no-c8.json").unwrap();
        assert!(cells(&m).iter().all(|c| c.class != HEADLINE));
        let mut query = q(HEADLINE);
        query.concurrency = Some(4);
        query.requests = Some(12);
        let e = choose(&m, &query).unwrap_err().to_string();
        assert!(
            e.contains(
                "concurrency 8 per replica, which selection.concurrency (1, 4) does not list"
            ),
            "{e}"
        );
        assert!(!e.contains("allowed: )"), "{e}");
        query.off_manifest = true;
        let c = choose(&m, &query).unwrap();
        assert!(c.off_manifest);
        assert_eq!(c.cell.reply, ReplyMode::AboutWords(256));
        assert_eq!(c.cell.context, 4096);
        assert_eq!(c.cell.max_tokens, 512);
        assert!(c.cell.canaries);
        assert_eq!(c.cell.id(), "headline-sustained-output.ctx4096.c4.n12");
        // Nothing given but the class: its own context, concurrency and count.
        let c = choose(
            &m,
            &CellQuery {
                off_manifest: true,
                ..q(HEADLINE)
            },
        )
        .unwrap();
        assert_eq!(c.cell.id(), "headline-sustained-output.ctx4096.c8.n100");
    }
}
