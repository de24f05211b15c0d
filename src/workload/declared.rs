//! Workload classes declared beside the manifest: a campaign file's `workloads` section (or
//! any JSON document with one, given to `anvil-capture run --workloads FILE`). The manifest
//! stays as its authors wrote it; a declared class adds what production traffic has and the
//! manifest's one-shot classes do not, and names the run plan's open gate it serves.
//!
//! One kind so far: **prefix groups**, the generalisation of the manifest's
//! `prompt_cache_mode`: G groups of P shared tokens (a system prompt, a few-shot template, a
//! long document asked several questions), each request's own part after its group's
//! prefix. `unique` is G = 0 and `shared` is G = 1 with the fixed system text as the prefix;
//! a declared class has G ≥ 1 and P tokens of its own. Request `i` belongs to group
//! `i mod G` ([`super::shared::group_of`]), so every group is used from the first wave on.
//!
//! ```json
//! "workloads": [{
//!   "class": "prefix-groups", "gate": "broad repeated quality, agentic, SWE, and endurance",
//!   "context": 4096, "concurrency": 8, "requests": 96, "reply_words": 128,
//!   "prefix_groups": {"groups": 4, "shared_tokens": 2048}
//! }]
//! ```

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::cells::{Cell, CellError, CellQuery, Chosen, ReplyMode, choose};
use super::prompt::PromptCacheMode;
pub use super::shared::PrefixGroups;
use crate::manifest::{ManifestError, Problem, WorkloadManifest};

/// One declared workload class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredWorkload {
    /// The class id (a path component, not a class of the manifest).
    pub class: String,
    /// The run plan's open gate this class serves, as the plan words it.
    pub gate: String,
    /// Prompt token target of every request (shared prefix included).
    pub context: u64,
    /// Concurrent requests per replica.
    pub concurrency: u32,
    /// Measured requests, all replicas together.
    pub requests: u64,
    /// Words each reply is asked for ("in about N words"); absent: a natural completion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_words: Option<u32>,
    /// The token ceiling; absent: the manifest's headline `max_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Prefix groups (the one kind so far; required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_groups: Option<PrefixGroups>,
}

/// The prompt tokens a request's own part needs at least, beside its group's prefix: the
/// system text, the canary instruction and some filler.
pub const MIN_OWN_TOKENS: u64 = 64;

impl DeclaredWorkload {
    /// The class's one cell, the manifest supplying the ceiling and canaries it does not
    /// state.
    pub fn cell(&self, manifest: &WorkloadManifest) -> Cell {
        let h = manifest.headline_workload();
        Cell {
            class: self.class.clone(),
            context: self.context,
            concurrency: self.concurrency,
            requests: self.requests,
            reply: self
                .reply_words
                .map_or(ReplyMode::Natural, ReplyMode::AboutWords),
            max_tokens: self
                .max_tokens
                .unwrap_or_else(|| u32::try_from(h.max_tokens).unwrap_or(u32::MAX)),
            cache_mode: PromptCacheMode::Unique,
            canaries: h.request_canaries,
            groups: self.prefix_groups,
        }
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
        if self.concurrency == 0 {
            say("concurrency", "must be at least 1".into());
        }
        if self.requests < u64::from(self.concurrency) || self.requests > u64::from(u32::MAX / 2) {
            say(
                "requests",
                format!(
                    "{}: must be at least the concurrency ({}) and at most 2^31",
                    self.requests, self.concurrency
                ),
            );
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
        match &self.prefix_groups {
            None => say(
                "prefix_groups",
                "a declared class needs its kind: `prefix_groups: {groups, shared_tokens}`".into(),
            ),
            Some(g) => {
                if g.groups == 0 {
                    say(
                        "prefix_groups.groups",
                        "must be at least 1 (no shared prefix is the manifest's `unique` mode)"
                            .into(),
                    );
                }
                if g.shared_tokens == 0 || g.shared_tokens + MIN_OWN_TOKENS > self.context {
                    say(
                        "prefix_groups.shared_tokens",
                        format!(
                            "{}: must be at least 1 and leave {MIN_OWN_TOKENS} of the context's {} \
                             tokens to each request's own part",
                            g.shared_tokens, self.context
                        ),
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
    let mut cell = d.cell(manifest);
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
        if !q.off_manifest {
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
            "--concurrency" => cell.concurrency = super::cells::clamp_u32(v),
            _ => cell.requests = v,
        }
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
            context: 4096,
            concurrency: 8,
            requests: 96,
            reply_words: Some(128),
            max_tokens: None,
            prefix_groups: Some(PrefixGroups {
                groups: g,
                shared_tokens: p,
            }),
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
}
