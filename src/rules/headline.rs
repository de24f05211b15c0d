//! Workload classes and the headline comparison rule.
//!
//! An artifact is *headline* when its workload equals the manifest's headline selection.
//! The manifest states most of it in `selection` (requests, response words, token ceiling,
//! prompt cache mode, canaries, seed, thinking); the prompt target is the first entry of
//! `contexts_actual_prompt_token_targets` (4096, the 4K context). The concurrency is not a
//! `selection` field: the manifest states it only in the description of the
//! `headline-sustained-output` class (`4K/C8 per replica`), so it is read from there (the
//! `C<n>` word) and must be one of `selection.concurrency`; otherwise the manifest is refused
//! as bad input rather than guessed. The manifest's cells are driven over chat (the default
//! `--api`), closed loop and on the manifest: a run on another API, open loop or off the
//! manifest is not headline.
//!
//! Headline aggregate throughput is never put beside a natural-completion screen or an
//! external figure ([`gate`] refuses, quoting the run plan's `headline_comparison_rule`);
//! screens compare only within the same screen.

use serde::Serialize;

use crate::manifest::{RunPlan, WorkloadManifest};

use super::input::ArtifactFacts;
use super::refusal::{FieldDifference, Refusal, RefusalKind};

pub use crate::manifest::HEADLINE_CLASS;
/// Workload class id of natural-completion optimization screens.
pub const SCREEN_CLASS: &str = "optimization-screen";
/// Workload class id of the context curve.
pub const CONTEXT_CURVE_CLASS: &str = "context-curve";
/// Workload class id of functional checks.
pub const FUNCTIONAL_CLASS: &str = "functional";

/// The headline workload as the manifest defines it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeadlineSelection {
    /// Measured requests of a headline run, all replicas together.
    pub total_requests: u64,
    /// Prompt token target, tokens (the manifest's first context target).
    pub prompt_tokens_target: u64,
    /// Concurrent requests per replica.
    pub concurrency_per_replica: u64,
    /// Words each request asks for.
    pub response_words: u64,
    /// Token ceiling of each request, tokens.
    pub max_tokens: u64,
    /// Prompt cache mode, e.g. `unique`.
    pub prompt_cache_mode: String,
    /// Whether each request carries its own canary.
    pub canaries: bool,
    /// Random prefix seed.
    pub seed: u64,
    /// Thinking mode, e.g. `disabled`.
    pub thinking: String,
}

/// Why the manifest does not define a headline selection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    #[error("workload manifest has no `{HEADLINE_CLASS}` workload class")]
    NoHeadlineClass,
    #[error(
        "workload class `{HEADLINE_CLASS}` does not state a concurrency (`C<n>`) in its description \"{0}\""
    )]
    NoConcurrency(String),
    #[error(
        "workload class `{HEADLINE_CLASS}` states C{found}, which is not in selection.concurrency {listed:?}"
    )]
    ConcurrencyNotListed { found: u64, listed: Vec<u64> },
    #[error("selection.contexts_actual_prompt_token_targets is empty")]
    NoContext,
}

impl HeadlineSelection {
    /// The headline selection of a manifest (see the module documentation).
    pub fn from_manifest(manifest: &WorkloadManifest) -> Result<Self, SelectionError> {
        let class = manifest
            .workload_class(HEADLINE_CLASS)
            .ok_or(SelectionError::NoHeadlineClass)?;
        let concurrency = class
            .description
            .split(|c: char| !c.is_ascii_alphanumeric())
            .find_map(|word| {
                let digits = word.strip_prefix('C')?;
                (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| digits.parse::<u64>().ok())
                    .flatten()
            })
            .ok_or_else(|| SelectionError::NoConcurrency(class.description.clone()))?;
        let listed: Vec<u64> = manifest.concurrency().collect();
        if !listed.contains(&concurrency) {
            return Err(SelectionError::ConcurrencyNotListed {
                found: concurrency,
                listed,
            });
        }
        let context = manifest
            .contexts()
            .next()
            .ok_or(SelectionError::NoContext)?;
        let headline = manifest.headline_workload();
        Ok(Self {
            total_requests: headline.requests,
            prompt_tokens_target: context,
            concurrency_per_replica: concurrency,
            response_words: headline.response_words,
            max_tokens: headline.max_tokens,
            prompt_cache_mode: headline.prompt_cache_mode.as_str().to_owned(),
            canaries: headline.request_canaries,
            seed: headline.random_prefix_seed,
            thinking: headline.thinking.as_str().to_owned(),
        })
    }

    /// Every workload field of `facts` that differs from the selection, `field: recorded vs
    /// headline`.
    pub fn differences(&self, facts: &ArtifactFacts) -> Vec<FieldDifference> {
        let w = &facts.workload;
        let response_words = w
            .response_words
            .map_or_else(|| "null".to_owned(), |words| words.to_string());
        let fields: [(&str, String, String); 13] = [
            ("class", w.class.clone(), HEADLINE_CLASS.to_owned()),
            (
                "total_requests",
                w.total_requests.to_string(),
                self.total_requests.to_string(),
            ),
            (
                "prompt_tokens_target",
                w.prompt_tokens_target.to_string(),
                self.prompt_tokens_target.to_string(),
            ),
            (
                "concurrency_per_replica",
                w.concurrency_per_replica.to_string(),
                self.concurrency_per_replica.to_string(),
            ),
            (
                "response_words",
                response_words,
                self.response_words.to_string(),
            ),
            (
                "max_tokens",
                w.max_tokens.to_string(),
                self.max_tokens.to_string(),
            ),
            (
                "prompt_cache_mode",
                w.prompt_cache_mode.clone(),
                self.prompt_cache_mode.clone(),
            ),
            (
                "canaries",
                w.canaries.to_string(),
                self.canaries.to_string(),
            ),
            ("seed", w.seed.to_string(), self.seed.to_string()),
            ("thinking", w.thinking.clone(), self.thinking.clone()),
            (
                "api",
                w.api.as_str().to_owned(),
                crate::artifact::Api::Chat.as_str().to_owned(),
            ),
            (
                "schedule",
                w.schedule.to_string(),
                crate::artifact::Schedule::Closed.to_string(),
            ),
            (
                "off_manifest",
                w.off_manifest.to_string(),
                false.to_string(),
            ),
        ];
        fields
            .into_iter()
            .filter(|(_, recorded, headline)| recorded != headline)
            .map(|(field, recorded, headline)| FieldDifference {
                run_id: facts.run_id.clone(),
                field: field.to_owned(),
                first: recorded,
                other: headline,
            })
            .collect()
    }
}

/// What kind of workload an artifact ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ClassKind {
    Headline,
    OptimizationScreen,
    ContextCurve,
    Functional,
    Other,
}

/// An artifact's class with the reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Classification {
    pub kind: ClassKind,
    pub reason: String,
}

/// The class of an artifact: headline only when its workload equals the selection; a run
/// labelled headline that differs is `Other`, naming every differing field.
pub fn classify(facts: &ArtifactFacts, selection: &HeadlineSelection) -> Classification {
    let class = facts.workload.class.as_str();
    let (kind, reason) = match class {
        HEADLINE_CLASS => {
            let differences = selection.differences(facts);
            if differences.is_empty() {
                (
                    ClassKind::Headline,
                    "matches the manifest's headline selection".to_owned(),
                )
            } else {
                let listed: Vec<String> = differences.iter().map(ToString::to_string).collect();
                (
                    ClassKind::Other,
                    format!(
                        "labelled {HEADLINE_CLASS} but differs from the manifest's headline selection (recorded vs headline): {}",
                        listed.join("; ")
                    ),
                )
            }
        }
        SCREEN_CLASS => (
            ClassKind::OptimizationScreen,
            "natural-completion optimization screen".to_owned(),
        ),
        CONTEXT_CURVE_CLASS => (ClassKind::ContextCurve, "context curve".to_owned()),
        FUNCTIONAL_CLASS => (ClassKind::Functional, "functional checks".to_owned()),
        other => (
            ClassKind::Other,
            format!("class {other} is not one of the rules' known classes"),
        ),
    };
    Classification { kind, reason }
}

/// Something a comparison would put side by side.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Comparand<'a> {
    /// A recorded artifact.
    Artifact(&'a ArtifactFacts),
    /// A figure from outside the campaign (a vendor page, a paper), named by its source.
    External { source: &'a str },
}

/// What a permitted comparison is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Scope {
    /// Headline artifacts only.
    Headline,
    /// Artifacts of one optimization screen (one fingerprint).
    WithinScreen,
    /// Anything else; matching decides.
    Other,
}

impl Scope {
    /// The label a report puts on the comparison.
    pub fn label(self) -> &'static str {
        match self {
            Scope::Headline => "headline: matched sustained-output artifacts",
            Scope::WithinScreen => "within-screen selection only",
            Scope::Other => "matched artifacts",
        }
    }
}

/// The headline comparison rule: headline artifacts are compared only with headline
/// artifacts, never beside a screen, another class or an external figure (refused, quoting
/// the plan's rule and listing each recorded artifact's fields that differ from the
/// headline workload); screens are compared only within one screen (one fingerprint).
pub fn gate(
    comparands: &[Comparand<'_>],
    selection: &HeadlineSelection,
    plan: &RunPlan,
) -> Result<Scope, Refusal> {
    let described: Vec<(String, ClassKind)> = comparands
        .iter()
        .map(|comparand| match comparand {
            Comparand::Artifact(facts) => {
                let kind = classify(facts, selection).kind;
                let class = if kind == ClassKind::Headline {
                    "headline".to_owned()
                } else {
                    facts.workload.class.clone()
                };
                (format!("run {} ({class})", facts.run_id), kind)
            }
            Comparand::External { source } => {
                (format!("external figure \"{source}\""), ClassKind::Other)
            }
        })
        .collect();
    let is_external = |comparand: &Comparand<'_>| matches!(comparand, Comparand::External { .. });
    let headline = described
        .iter()
        .zip(comparands)
        .any(|((_, kind), c)| *kind == ClassKind::Headline && !is_external(c));
    if headline {
        let beside: Vec<&str> = described
            .iter()
            .filter(|(_, kind)| *kind != ClassKind::Headline)
            .map(|(text, _)| text.as_str())
            .collect();
        if beside.is_empty() {
            return Ok(Scope::Headline);
        }
        return Err(Refusal {
            kind: RefusalKind::HeadlineRule,
            reason: format!(
                "headline aggregate throughput cannot be put beside {}",
                beside.join(", ")
            ),
            // Each recorded non-headline artifact's fields against the headline workload.
            differences: comparands
                .iter()
                .filter_map(|c| match c {
                    Comparand::Artifact(facts) => Some(*facts),
                    Comparand::External { .. } => None,
                })
                .filter(|facts| classify(facts, selection).kind != ClassKind::Headline)
                .flat_map(|facts| selection.differences(facts))
                .collect(),
            rule: Some(plan.headline_comparison_rule.clone()),
        });
    }
    if let Some(Comparand::External { source }) = comparands.iter().find(|c| is_external(c)) {
        return Err(Refusal {
            kind: RefusalKind::NotMatched,
            reason: format!(
                "external figure \"{source}\" is not a recorded artifact and cannot be matched"
            ),
            differences: Vec::new(),
            rule: None,
        });
    }
    let screens: Vec<&ArtifactFacts> = comparands
        .iter()
        .filter_map(|c| match c {
            Comparand::Artifact(facts) => Some(*facts),
            Comparand::External { .. } => None,
        })
        .filter(|facts| facts.workload.class == SCREEN_CLASS)
        .collect();
    if screens.is_empty() {
        return Ok(Scope::Other);
    }
    if screens.len() == comparands.len() {
        let first = screens[0];
        let others: Vec<String> = screens
            .iter()
            .filter(|facts| facts.fingerprint != first.fingerprint)
            .map(|facts| facts.run_id.clone())
            .collect();
        if others.is_empty() {
            return Ok(Scope::WithinScreen);
        }
        return Err(Refusal {
            kind: RefusalKind::AcrossScreens,
            reason: format!(
                "screens compare only within the same screen: {} ran a different screen (fingerprint) from {}",
                others.join(", "),
                first.run_id
            ),
            differences: Vec::new(),
            rule: None,
        });
    }
    Ok(Scope::Other)
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{artifact, manifest, plan, screen_workload, selection};
    use super::*;

    #[test]
    fn selection_is_read_from_the_seed_manifest() {
        assert_eq!(
            selection(),
            HeadlineSelection {
                total_requests: 100,
                prompt_tokens_target: 4096,
                concurrency_per_replica: 8,
                response_words: 256,
                max_tokens: 512,
                prompt_cache_mode: "unique".to_owned(),
                canaries: true,
                seed: 38027,
                thinking: "disabled".to_owned(),
            }
        );
    }

    #[test]
    fn a_headline_class_without_a_listed_concurrency_is_bad_input() {
        let mut manifest = manifest();
        manifest.workload_classes[1].description = "4K/C12 per replica".to_owned();
        let error = HeadlineSelection::from_manifest(&manifest).unwrap_err();
        assert_eq!(
            error.to_string(),
            "workload class `headline-sustained-output` states C12, which is not in \
             selection.concurrency [1, 2, 3, 4, 8, 16]"
        );
    }

    #[test]
    fn headline_run_is_classified_headline_and_a_c4_one_is_not() {
        let head = artifact("r-a", "TP1", &[], 1000.0);
        assert_eq!(
            classify(&head.facts, &selection()).kind,
            ClassKind::Headline
        );
        let mut c4 = head.clone();
        c4.facts.workload.concurrency_per_replica = 4;
        assert_eq!(
            classify(&c4.facts, &selection()),
            Classification {
                kind: ClassKind::Other,
                reason: "labelled headline-sustained-output but differs from the manifest's \
                         headline selection (recorded vs headline): concurrency_per_replica: 4 vs 8"
                    .to_owned()
            }
        );
    }

    /// The manifest's headline cell is driven over chat: a Responses run of the same class,
    /// context and concurrency is its own cell and stays out of the headline comparison.
    #[test]
    fn a_responses_run_of_the_headline_cell_is_not_headline() {
        let mut responses = artifact("r-resp", "TP1", &[], 1000.0);
        responses.facts.workload.api = crate::artifact::Api::Responses;
        assert_eq!(
            classify(&responses.facts, &selection()).reason,
            "labelled headline-sustained-output but differs from the manifest's headline \
             selection (recorded vs headline): api: responses vs chat"
        );
    }

    #[test]
    fn headline_beside_a_screen_or_external_figure_is_refused_quoting_the_rule() {
        let plan = plan();
        let head = artifact("r-head", "TP1", &[], 1000.0);
        let mut screen = artifact("r-screen", "K12", &[], 900.0);
        screen.facts.workload = screen_workload();
        let refusal = gate(
            &[
                Comparand::Artifact(&head.facts),
                Comparand::Artifact(&screen.facts),
                Comparand::External {
                    source: "vendor blog 2026-08",
                },
            ],
            &selection(),
            &plan,
        )
        .unwrap_err();
        assert_eq!(refusal.kind, RefusalKind::HeadlineRule);
        assert_eq!(
            refusal.to_string(),
            "refused: headline aggregate throughput cannot be put beside run r-screen \
             (optimization-screen), external figure \"vendor blog 2026-08\"\n\
             rule: \"Compare only the matched 100-request unique-canary 4K/C8-per-replica \
             sustained-output artifacts. Do not compare their aggregate throughput with \
             natural-completion screens or external workloads.\""
        );
        // The screen's fields that differ from the headline workload are listed.
        let fields: Vec<&str> = refusal
            .differences
            .iter()
            .map(|d| d.field.as_str())
            .collect();
        assert!(fields.contains(&"class"), "{fields:?}");
        assert!(
            refusal
                .differences
                .iter()
                .all(|d| d.run_id == "r-screen" && d.first != d.other),
            "{:?}",
            refusal.differences
        );
    }

    #[test]
    fn headline_beside_headline_is_permitted() {
        let a = artifact("r-a", "TP1", &[], 1000.0);
        let b = artifact("r-b", "TP2", &[], 1000.0);
        let scope = gate(
            &[Comparand::Artifact(&a.facts), Comparand::Artifact(&b.facts)],
            &selection(),
            &plan(),
        )
        .unwrap();
        assert_eq!(scope, Scope::Headline);
    }

    #[test]
    fn screens_compare_only_within_the_same_screen() {
        let mut a = artifact("r-k4", "K4", &[], 1.0);
        a.facts.workload = screen_workload();
        a.facts.fingerprint = a.facts.workload.fingerprint();
        let mut b = a.clone();
        b.facts.run_id = "r-k12".to_owned();
        let scope = gate(
            &[Comparand::Artifact(&a.facts), Comparand::Artifact(&b.facts)],
            &selection(),
            &plan(),
        )
        .unwrap();
        assert_eq!(scope.label(), "within-screen selection only");
        b.facts.workload.concurrency_per_replica = 1;
        b.facts.fingerprint = b.facts.workload.fingerprint();
        let refusal = gate(
            &[Comparand::Artifact(&a.facts), Comparand::Artifact(&b.facts)],
            &selection(),
            &plan(),
        )
        .unwrap_err();
        assert_eq!(
            refusal.reason,
            "screens compare only within the same screen: r-k12 ran a different screen \
             (fingerprint) from r-k4"
        );
    }
}
