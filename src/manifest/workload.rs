//! The workload manifest (`anvil-serving.benchmark-workload-manifest/v1`): what a campaign
//! runs (contexts, concurrency, request counts, response words, token ceiling, prompt cache
//! mode, canaries, seed, thinking), its workload classes, controls, metrics, timing
//! definitions and statistics.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::check::Checks;
use super::error::{ManifestError, Problem};
use super::types::{Metric, PercentileMethod, Positive, PromptCacheMode, Statistic, Thinking};
use super::{DocumentKind, parse_document, read_document};

/// The largest prompt token target anvil accepts: 2^24 = 16,777,216 tokens, whether a
/// manifest's `selection.contexts_actual_prompt_token_targets`, `anvil-capture run
/// --context` or a capacity search's `context` states it. No served model reads a prompt that
/// long (the longest context windows announced are about 10M tokens), so a larger target is a
/// typo or an overflow; taken as given, it would only reach calibration, which builds
/// prompts of millions of words before giving up. Refused where it is read instead.
pub const MAX_PROMPT_TOKEN_TARGET: u64 = 1 << 24;

/// A validated workload manifest. Values returned by [`WorkloadManifest::load`] and
/// [`WorkloadManifest::from_str`] have passed [`WorkloadManifest::problems`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadManifest {
    /// Always [`super::WORKLOAD_MANIFEST_SCHEMA`] for a loaded manifest.
    pub schema: String,
    pub campaign_id: String,
    pub selection: Selection,
    pub workload_classes: Vec<WorkloadClass>,
    /// One-variable controls, in the campaign's words.
    pub controls: Vec<String>,
    pub metrics: Vec<Metric>,
    pub timing_definitions: TimingDefinitions,
    pub statistics: Statistics,
}

/// The cells a campaign may run and the headline workload's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Selection {
    /// Prompt token targets (the actual prompt length, not the model's context window).
    pub contexts_actual_prompt_token_targets: Vec<Positive>,
    /// Concurrency levels, per replica.
    pub concurrency: Vec<Positive>,
    /// Request counts used by natural-completion screens.
    pub natural_completion_screen_requests: Vec<Positive>,
    /// Total requests of a headline run.
    pub headline_requests: Positive,
    /// Words each headline request asks the model to write.
    pub headline_response_words: Positive,
    /// `max_tokens` ceiling of each headline request.
    pub headline_max_tokens: Positive,
    pub headline_prompt_cache_mode: PromptCacheMode,
    /// Whether each headline request carries its own canary marker.
    pub headline_request_canaries: bool,
    /// Seed of the random prompt prefixes.
    pub random_prefix_seed: u64,
    pub thinking: Thinking,
}

/// A named class of workload (e.g. `headline-sustained-output`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadClass {
    pub id: String,
    pub description: String,
}

/// The exact words defining each timing metric; the SQL in `queries/` implements them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimingDefinitions {
    pub ttft: String,
    pub effective_prefill: String,
    pub decode: String,
    pub tpot: String,
    pub mean_inter_token_latency: String,
    pub end_to_end: String,
    pub aggregate_throughput: String,
}

impl TimingDefinitions {
    /// `(name, definition)` pairs in the manifest's order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("ttft", self.ttft.as_str()),
            ("effective_prefill", self.effective_prefill.as_str()),
            ("decode", self.decode.as_str()),
            ("tpot", self.tpot.as_str()),
            (
                "mean_inter_token_latency",
                self.mean_inter_token_latency.as_str(),
            ),
            ("end_to_end", self.end_to_end.as_str()),
            ("aggregate_throughput", self.aggregate_throughput.as_str()),
        ]
        .into_iter()
    }
}

/// Which statistics are reported for each metric, and how percentiles are computed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Statistics {
    pub distribution: Vec<Statistic>,
    pub percentile_method: PercentileMethod,
}

/// The settings of a headline run, as the manifest's `selection` states them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadlineWorkload {
    pub requests: u64,
    pub response_words: u64,
    pub max_tokens: u64,
    pub prompt_cache_mode: PromptCacheMode,
    pub request_canaries: bool,
    pub random_prefix_seed: u64,
    pub thinking: Thinking,
}

super::document_readers!(WorkloadManifest, DocumentKind::WorkloadManifest);

impl WorkloadManifest {
    /// Every rule the manifest breaks beyond its types, with JSON paths; empty when valid.
    pub fn problems(&self) -> Vec<Problem> {
        let mut checks = Checks::default();
        if self.schema != super::WORKLOAD_MANIFEST_SCHEMA {
            checks.push(
                "schema",
                format!(
                    "expected \"{}\", found \"{}\"",
                    super::WORKLOAD_MANIFEST_SCHEMA,
                    self.schema
                ),
            );
        }
        checks.path_component("campaign_id", &self.campaign_id);

        let selection = &self.selection;
        for (field, values) in [
            (
                "selection.contexts_actual_prompt_token_targets",
                &selection.contexts_actual_prompt_token_targets,
            ),
            ("selection.concurrency", &selection.concurrency),
            (
                "selection.natural_completion_screen_requests",
                &selection.natural_completion_screen_requests,
            ),
        ] {
            checks.non_empty(field, values);
            checks.distinct(field, values);
        }
        for (index, target) in self.contexts().enumerate() {
            if target > MAX_PROMPT_TOKEN_TARGET {
                checks.push(
                    format!("selection.contexts_actual_prompt_token_targets[{index}]"),
                    format!(
                        "{target} tokens is above the largest prompt target anvil accepts, \
                         {MAX_PROMPT_TOKEN_TARGET} (2^24): no served model reads a prompt that long"
                    ),
                );
            }
        }

        checks.non_empty("workload_classes", &self.workload_classes);
        for (index, class) in self.workload_classes.iter().enumerate() {
            checks.text(format!("workload_classes[{index}].id"), &class.id);
            checks.text(
                format!("workload_classes[{index}].description"),
                &class.description,
            );
        }
        let ids: Vec<&str> = self.workload_class_ids().collect();
        if !self.workload_classes.is_empty() && !ids.contains(&super::HEADLINE_CLASS) {
            checks.push(
                "workload_classes",
                format!(
                    "no \"{}\" class: the selection's headline_* settings describe it and every \
                     headline verdict reads it; add {{\"id\": \"{}\", \"description\": \"…, \
                     C<n> per replica, …\"}} (classes: {})",
                    super::HEADLINE_CLASS,
                    super::HEADLINE_CLASS,
                    ids.join(", ")
                ),
            );
        }
        for (index, id) in ids.iter().enumerate() {
            if let Some(first) = ids[..index].iter().position(|earlier| earlier == id) {
                checks.push(
                    format!("workload_classes[{index}].id"),
                    format!("duplicate workload class id \"{id}\" (already at workload_classes[{first}])"),
                );
            }
        }

        checks.texts("controls", &self.controls);
        checks.distinct("controls", &self.controls);

        checks.non_empty("metrics", &self.metrics);
        checks.distinct("metrics", &self.metrics);

        for (name, definition) in self.timing_definitions.iter() {
            checks.text(format!("timing_definitions.{name}"), definition);
        }

        checks.non_empty("statistics.distribution", &self.statistics.distribution);
        checks.distinct("statistics.distribution", &self.statistics.distribution);

        checks.into_problems()
    }

    /// The headline run's settings.
    pub fn headline_workload(&self) -> HeadlineWorkload {
        let selection = &self.selection;
        HeadlineWorkload {
            requests: selection.headline_requests.get(),
            response_words: selection.headline_response_words.get(),
            max_tokens: selection.headline_max_tokens.get(),
            prompt_cache_mode: selection.headline_prompt_cache_mode,
            request_canaries: selection.headline_request_canaries,
            random_prefix_seed: selection.random_prefix_seed,
            thinking: selection.thinking,
        }
    }

    /// Prompt token targets, in the manifest's order.
    pub fn contexts(&self) -> impl Iterator<Item = u64> + '_ {
        self.selection
            .contexts_actual_prompt_token_targets
            .iter()
            .map(|tokens| tokens.get())
    }

    /// Concurrency levels per replica, in the manifest's order.
    pub fn concurrency(&self) -> impl Iterator<Item = u64> + '_ {
        self.selection.concurrency.iter().map(|level| level.get())
    }

    /// Request counts of natural-completion screens, in the manifest's order.
    pub fn natural_completion_screen_requests(&self) -> impl Iterator<Item = u64> + '_ {
        self.selection
            .natural_completion_screen_requests
            .iter()
            .map(|requests| requests.get())
    }

    pub fn workload_class_ids(&self) -> impl Iterator<Item = &str> {
        self.workload_classes.iter().map(|class| class.id.as_str())
    }

    pub fn workload_class(&self, id: &str) -> Option<&WorkloadClass> {
        self.workload_classes.iter().find(|class| class.id == id)
    }
}
