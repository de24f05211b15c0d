//! Typed, validated loading of a campaign's two input documents: the workload manifest
//! (`anvil-serving.benchmark-workload-manifest/v1`, what to run) and the run plan
//! (`anvil-serving.benchmark-run-plan/v1`, stages, arms and rules).
//!
//! Loading goes in three steps, each with its own error: the text must be JSON (line and
//! column), the `schema` field must name a version anvil reads, and the document must
//! deserialize into the typed model and pass a semantic check (non-empty lists, sets without
//! duplicates, unique stage orders). Field errors carry the JSON path:
//! `sample-data/workload-manifest.json: selection.concurrency[2]: expected a positive integer,
//! found -4`. Every field of the documents is modelled, so a loaded document serializes back
//! to the same JSON.

mod check;
mod error;
mod plan;
mod types;
mod workload;

use std::fmt;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde_json::Value;

pub use error::{ManifestError, Problem};
pub use plan::{RunPlan, Stage};
pub use types::{Metric, PercentileMethod, Positive, PromptCacheMode, Statistic, Thinking};
pub use workload::{
    HeadlineWorkload, MAX_PROMPT_TOKEN_TARGET, Selection, Statistics, TimingDefinitions,
    WorkloadClass, WorkloadManifest,
};

/// The workload manifest schema version this anvil reads.
pub const WORKLOAD_MANIFEST_SCHEMA: &str = "anvil-serving.benchmark-workload-manifest/v1";
/// The run plan schema version this anvil reads.
/// Workload class id of headline runs: the class the manifest's `selection.headline_*`
/// settings describe, which every manifest defines.
pub const HEADLINE_CLASS: &str = "headline-sustained-output";

pub const RUN_PLAN_SCHEMA: &str = "anvil-serving.benchmark-run-plan/v1";
/// Every document schema this module reads.
pub const SUPPORTED_SCHEMAS: [&str; 2] = [WORKLOAD_MANIFEST_SCHEMA, RUN_PLAN_SCHEMA];

/// Which of the two campaign input documents a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DocumentKind {
    WorkloadManifest,
    RunPlan,
}

impl DocumentKind {
    /// The schema version anvil reads for this kind.
    pub fn schema(self) -> &'static str {
        match self {
            DocumentKind::WorkloadManifest => WORKLOAD_MANIFEST_SCHEMA,
            DocumentKind::RunPlan => RUN_PLAN_SCHEMA,
        }
    }

    /// What the document is called in messages: `workload manifest`, `run plan`.
    pub fn name(self) -> &'static str {
        match self {
            DocumentKind::WorkloadManifest => "workload manifest",
            DocumentKind::RunPlan => "run plan",
        }
    }

    /// Both kinds.
    pub const ALL: [DocumentKind; 2] = [DocumentKind::WorkloadManifest, DocumentKind::RunPlan];

    /// The schema without its version: `anvil-serving.benchmark-run-plan`.
    pub fn schema_family(self) -> &'static str {
        match self {
            DocumentKind::WorkloadManifest => "anvil-serving.benchmark-workload-manifest",
            DocumentKind::RunPlan => "anvil-serving.benchmark-run-plan",
        }
    }

    /// The kind whose supported schema is exactly `schema`.
    pub fn from_schema(schema: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.schema() == schema)
    }

    /// The kind whose schema family `schema` belongs to, whatever its version
    /// (`anvil-serving.benchmark-run-plan/v7` is a run plan anvil cannot read).
    pub fn from_schema_family(schema: &str) -> Option<Self> {
        let (family, _version) = schema.rsplit_once('/')?;
        Self::ALL
            .into_iter()
            .find(|kind| kind.schema_family() == family)
    }
}

impl fmt::Display for DocumentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Either campaign input document, chosen by its `schema` field (boxed: the manifest is
/// several hundred bytes).
#[derive(Debug, Clone, PartialEq)]
pub enum Document {
    WorkloadManifest(Box<WorkloadManifest>),
    RunPlan(Box<RunPlan>),
}

impl Document {
    /// Read, parse and validate a file of either kind.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ManifestError> {
        let path = path.as_ref();
        Self::from_str(&read_document(path)?, path)
    }

    /// Parse and validate text of either kind; `file` is only used in messages.
    pub fn from_str(text: &str, file: impl AsRef<Path>) -> Result<Self, ManifestError> {
        let file = file.as_ref();
        Self::from_value(parse_document(text, file)?, file)
    }

    /// Validate a parsed JSON document of either kind; `file` is only used in messages.
    pub fn from_value(value: Value, file: impl AsRef<Path>) -> Result<Self, ManifestError> {
        let file = file.as_ref();
        match schema_kind(&value, None, file)? {
            DocumentKind::WorkloadManifest => WorkloadManifest::from_value(value, file)
                .map(|manifest| Document::WorkloadManifest(Box::new(manifest))),
            DocumentKind::RunPlan => {
                RunPlan::from_value(value, file).map(|plan| Document::RunPlan(Box::new(plan)))
            }
        }
    }

    pub fn kind(&self) -> DocumentKind {
        match self {
            Document::WorkloadManifest(_) => DocumentKind::WorkloadManifest,
            Document::RunPlan(_) => DocumentKind::RunPlan,
        }
    }

    pub fn schema(&self) -> &str {
        match self {
            Document::WorkloadManifest(manifest) => &manifest.schema,
            Document::RunPlan(plan) => &plan.schema,
        }
    }

    pub fn campaign_id(&self) -> &str {
        match self {
            Document::WorkloadManifest(manifest) => &manifest.campaign_id,
            Document::RunPlan(plan) => &plan.campaign_id,
        }
    }
}

/// Read, parse and validate a workload manifest or run plan, whichever its `schema` says.
pub fn load_any(path: impl AsRef<Path>) -> Result<Document, ManifestError> {
    Document::load(path)
}

/// The `schema` field of a parsed document, if it has a string one.
pub fn schema_of(value: &Value) -> Option<&str> {
    value.get("schema").and_then(Value::as_str)
}

/// Read a document's text.
pub(crate) fn read_document(path: &Path) -> Result<String, ManifestError> {
    std::fs::read_to_string(path).map_err(|cause| ManifestError::Read {
        file: path.to_path_buf(),
        cause,
    })
}

/// Parse text as JSON, reporting syntax errors with line and column.
pub fn parse_document(text: &str, file: impl AsRef<Path>) -> Result<Value, ManifestError> {
    crate::json::parse_strict(text).map_err(|error| ManifestError::Syntax {
        file: file.as_ref().to_path_buf(),
        line: error.line(),
        column: error.column(),
        message: without_position(&error),
    })
}

/// A typed document: deserialized from JSON, then checked for what its types cannot state.
trait Checked: DeserializeOwned {
    fn problems(&self) -> Vec<Problem>;
}

/// The readers of a typed document of `kind` (`load`, `from_str`, `from_value`) and its
/// [`Checked`] implementation, for the workload manifest and the run plan alike.
macro_rules! document_readers {
    ($document:ty, $kind:expr) => {
        impl $document {
            /// Read, parse and validate the file.
            pub fn load(path: impl AsRef<Path>) -> Result<Self, ManifestError> {
                let path = path.as_ref();
                Self::from_str(&read_document(path)?, path)
            }

            /// Parse and validate the text; `file` is only used in messages.
            pub fn from_str(text: &str, file: impl AsRef<Path>) -> Result<Self, ManifestError> {
                let file = file.as_ref();
                let value = parse_document(text, file)?;
                Self::from_value(value, file)
            }

            /// Validate an already parsed JSON document; `file` is only used in messages.
            pub fn from_value(
                value: serde_json::Value,
                file: impl AsRef<Path>,
            ) -> Result<Self, ManifestError> {
                super::typed_document($kind, value, file.as_ref())
            }
        }

        impl super::Checked for $document {
            fn problems(&self) -> Vec<Problem> {
                <$document>::problems(self)
            }
        }
    };
}
pub(crate) use document_readers;

/// Read a document of another schema family than the manifest's and the plan's (the campaign
/// file) with the same rules: strict JSON (duplicate keys refused), its `schema` exactly
/// `schema`, fields deserialized with their JSON paths, then `problems` run.
pub(crate) fn load_typed<T: DeserializeOwned>(
    path: &Path,
    schema: &str,
    problems: impl Fn(&T) -> Vec<Problem>,
) -> Result<T, ManifestError> {
    let value = parse_document(&read_document(path)?, path)?;
    match schema_of(&value) {
        Some(found) if found == schema => {}
        Some(found) => {
            return Err(ManifestError::field(
                path,
                "schema",
                format!("\"{found}\": anvil reads \"{schema}\""),
            ));
        }
        None => {
            return Err(ManifestError::field(
                path,
                "schema",
                format!("missing required field; anvil reads \"{schema}\""),
            ));
        }
    }
    let document: T = serde_path_to_error::deserialize(value)
        .map_err(|error| ManifestError::invalid(path, vec![serde_problem(&error)]))?;
    let found = problems(&document);
    if found.is_empty() {
        Ok(document)
    } else {
        Err(ManifestError::invalid(path, found))
    }
}

/// Check the schema is `kind`'s, deserialize with JSON paths, then run the semantic check.
fn typed_document<T: Checked>(
    kind: DocumentKind,
    value: Value,
    file: &Path,
) -> Result<T, ManifestError> {
    schema_kind(&value, Some(kind), file)?;
    let document: T = serde_path_to_error::deserialize(value)
        .map_err(|error| ManifestError::invalid(file, vec![serde_problem(&error)]))?;
    let problems = document.problems();
    if problems.is_empty() {
        Ok(document)
    } else {
        Err(ManifestError::invalid(file, problems))
    }
}

/// The document's kind from its `schema` field; with `expected`, only that kind is accepted.
fn schema_kind(
    value: &Value,
    expected: Option<DocumentKind>,
    file: &Path,
) -> Result<DocumentKind, ManifestError> {
    let reads = |kind: Option<DocumentKind>| match kind {
        Some(kind) => format!("anvil reads \"{}\"", kind.schema()),
        None => format!(
            "anvil reads {}",
            SUPPORTED_SCHEMAS
                .map(|schema| format!("\"{schema}\""))
                .join(" or ")
        ),
    };
    let Value::Object(fields) = value else {
        return Err(ManifestError::field(
            file,
            "document",
            format!("expected a JSON object, found {}", describe(value)),
        ));
    };
    let schema = match fields.get("schema") {
        None => {
            return Err(ManifestError::field(
                file,
                "schema",
                format!("missing required field; {}", reads(expected)),
            ));
        }
        Some(Value::String(schema)) => schema,
        Some(other) => {
            return Err(ManifestError::field(
                file,
                "schema",
                format!("expected a string, found {}", describe(other)),
            ));
        }
    };
    let found = DocumentKind::from_schema(schema);
    match (found, expected) {
        (Some(found), None) => Ok(found),
        (Some(found), Some(expected)) if found == expected => Ok(found),
        (Some(found), Some(expected)) => Err(ManifestError::field(
            file,
            "schema",
            format!(
                "expected a {expected} (\"{}\"), found a {found} (\"{schema}\")",
                expected.schema()
            ),
        )),
        (None, _) => {
            let message = match DocumentKind::from_schema_family(schema) {
                Some(kind) if expected.is_some_and(|expected| expected != kind) => {
                    format!("unknown schema \"{schema}\"; {}", reads(expected))
                }
                Some(kind) => format!(
                    "unsupported {kind} version \"{schema}\"; {}",
                    reads(Some(kind))
                ),
                None => format!("unknown schema \"{schema}\"; {}", reads(expected)),
            };
            Err(ManifestError::field(file, "schema", message))
        }
    }
}

/// Deserialize `value`, the part of `file` found under the key `at`, naming a wrong field by
/// its whole path from the document's root (`workloads[0].prefix_groups.groups`).
pub(crate) fn deserialize_at<T: DeserializeOwned>(
    value: Value,
    at: &str,
    file: &Path,
) -> Result<T, ManifestError> {
    serde_path_to_error::deserialize(value).map_err(|error| {
        let mut problem = serde_problem(&error);
        problem.field = match problem.field.as_str() {
            "." => at.to_owned(),
            f if f.starts_with('[') => format!("{at}{f}"),
            f => format!("{at}.{f}"),
        };
        ManifestError::invalid(file, vec![problem])
    })
}

/// A deserialization error as a field problem. serde reports a missing field at the
/// enclosing object; its own name is moved into the path. (An unknown field's path already
/// ends with its key: serde_path_to_error captures keys as they are read.)
fn serde_problem(error: &serde_path_to_error::Error<serde_json::Error>) -> Problem {
    let at = error.path().to_string();
    let message = without_position(error.inner());
    let join = |name: &str| {
        if at == "." {
            name.to_owned()
        } else {
            format!("{at}.{name}")
        }
    };
    // serde's wording: "missing field `x`" (serde::de::Error::missing_field).
    if let Some(name) = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.strip_suffix('`'))
    {
        return Problem::new(join(name), "missing required field");
    }
    // serde's wording: "unknown field `x`, expected one of `a`, `b`" (or "expected `a`").
    if let Some((_name, expected)) = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split_once("`, "))
    {
        return Problem::new(at, format!("unknown field; {expected}"));
    }
    let field = if at == "." { "document".to_owned() } else { at };
    Problem::new(field, message)
}

/// serde_json's message without its ` at line L column C` suffix (reported separately).
fn without_position(error: &serde_json::Error) -> String {
    let message = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    match message.strip_suffix(&suffix) {
        Some(bare) if error.line() != 0 => bare.to_owned(),
        _ => message,
    }
}

/// A JSON value's type for messages: `an array`, `the number 5`, `the string "x"`.
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(flag) => format!("the boolean {flag}"),
        Value::Number(number) => format!("the number {number}"),
        Value::String(text) => format!("the string {}", Value::String(text.clone())),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST_PATH: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/sample-data/workload-manifest.json"
    );
    const PLAN_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/sample-data/run-plan.json");

    fn seed_value(path: &str) -> Value {
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn workload_manifest_seed_loads_with_its_headline_settings() {
        let manifest = WorkloadManifest::load(MANIFEST_PATH).unwrap();
        assert_eq!(
            manifest.campaign_id,
            "2026-09-04-qwen38-27b-pro6000-possibility"
        );
        assert_eq!(
            manifest.headline_workload(),
            HeadlineWorkload {
                requests: 100,
                response_words: 256,
                max_tokens: 512,
                prompt_cache_mode: PromptCacheMode::Unique,
                request_canaries: true,
                random_prefix_seed: 38027,
                thinking: Thinking::Disabled,
            }
        );
        assert_eq!(
            manifest.contexts().collect::<Vec<_>>(),
            [4096, 32768, 81920, 131072, 253952]
        );
        assert_eq!(
            manifest.concurrency().collect::<Vec<_>>(),
            [1, 2, 3, 4, 8, 16]
        );
        assert_eq!(
            manifest
                .natural_completion_screen_requests()
                .collect::<Vec<_>>(),
            [3, 4, 5, 8, 9, 12, 16, 100]
        );
        assert!(
            manifest
                .workload_class("headline-sustained-output")
                .is_some()
        );
        assert_eq!(manifest.workload_class_ids().count(), 4);
        assert_eq!(manifest.controls.len(), 9);
        assert_eq!(manifest.metrics.len(), Metric::ALL.len());
        assert_eq!(manifest.timing_definitions.iter().count(), 7);
        assert_eq!(
            manifest.statistics.percentile_method,
            PercentileMethod::NearestRank
        );
        assert!(
            manifest
                .statistics
                .distribution
                .contains(&Statistic::Percentile(99))
        );
    }

    #[test]
    fn workload_manifest_seed_round_trips_to_the_same_json() {
        let original = seed_value(MANIFEST_PATH);
        let manifest = WorkloadManifest::load(MANIFEST_PATH).unwrap();
        let round_trip = serde_json::to_value(&manifest).unwrap();
        assert_eq!(round_trip, original);
        // Same keys in the same order, too (serde_json keeps insertion order here).
        assert_eq!(round_trip.to_string(), original.to_string());
    }

    #[test]
    fn run_plan_seed_loads_with_its_stages() {
        let plan = RunPlan::load(PLAN_PATH).unwrap();
        assert_eq!(
            plan.campaign_id,
            "2026-09-04-qwen38-27b-pro6000-possibility"
        );
        assert!(!plan.promotion_authorized);
        let stages = plan.stages_in_order();
        assert_eq!(stages.len(), 6);
        assert!(stages.iter().all(|stage| stage.is_complete()));
        let topology = plan.stage("matched topology").unwrap();
        assert_eq!(topology.arms().len(), 3);
        assert_eq!(topology.rejected.as_deref(), Some("TP2"));
        let restore = plan.stage("restore").unwrap();
        assert!(restore.arms.is_none());
        assert_eq!(restore.evidence.as_deref(), Some("restoration.json"));
        assert_eq!(plan.advance_rules.len(), 5);
        assert_eq!(plan.stop_rules.len(), 4);
        assert_eq!(plan.post_campaign_open_gates.len(), 6);
    }

    #[test]
    fn run_plan_seed_round_trips_to_the_same_json() {
        let original = seed_value(PLAN_PATH);
        let plan = RunPlan::load(PLAN_PATH).unwrap();
        let round_trip = serde_json::to_value(&plan).unwrap();
        assert_eq!(round_trip, original);
        // Same keys in the same order, too (serde_json keeps insertion order here).
        assert_eq!(round_trip.to_string(), original.to_string());
    }

    #[test]
    fn load_any_dispatches_on_schema() {
        let manifest = load_any(MANIFEST_PATH).unwrap();
        assert_eq!(manifest.kind(), DocumentKind::WorkloadManifest);
        assert_eq!(manifest.schema(), WORKLOAD_MANIFEST_SCHEMA);
        let plan = load_any(PLAN_PATH).unwrap();
        assert_eq!(plan.kind(), DocumentKind::RunPlan);
        assert_eq!(plan.campaign_id(), manifest.campaign_id());
    }

    fn problems_of(value: Value) -> Vec<String> {
        match Document::from_value(value, "m.json") {
            Ok(_) => Vec::new(),
            Err(error) => error.to_string().lines().map(str::to_owned).collect(),
        }
    }

    #[test]
    fn negative_concurrency_is_named_by_path() {
        let mut value = seed_value(MANIFEST_PATH);
        value["selection"]["concurrency"][2] = (-4).into();
        assert_eq!(
            problems_of(value),
            ["m.json: selection.concurrency[2]: expected a positive integer, found -4"]
        );
    }

    #[test]
    fn missing_field_is_named_by_its_own_path() {
        let mut value = seed_value(MANIFEST_PATH);
        value["selection"]
            .as_object_mut()
            .unwrap()
            .remove("headline_max_tokens");
        assert_eq!(
            problems_of(value),
            ["m.json: selection.headline_max_tokens: missing required field"]
        );
        let mut value = seed_value(PLAN_PATH);
        value.as_object_mut().unwrap().remove("goal");
        assert_eq!(problems_of(value), ["m.json: goal: missing required field"]);
    }

    #[test]
    fn unknown_field_is_named_by_its_own_path() {
        let mut value = seed_value(PLAN_PATH);
        value["execution_order"][1]["winner"] = "K12".into();
        let problems = problems_of(value);
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0]
                .starts_with("m.json: execution_order[1].winner: unknown field; expected one of"),
            "{problems:?}"
        );
    }

    #[test]
    fn semantic_problems_are_all_reported() {
        let mut value = seed_value(MANIFEST_PATH);
        value["selection"]["contexts_actual_prompt_token_targets"] = serde_json::json!([]);
        value["selection"]["concurrency"][5] = 1.into();
        value["campaign_id"] = " ".into();
        assert_eq!(
            problems_of(value),
            [
                "m.json: campaign_id: expected a non-empty string",
                "m.json: selection.contexts_actual_prompt_token_targets: expected a non-empty list, found []",
                "m.json: selection.concurrency[5]: duplicate value 1 (already at selection.concurrency[0])",
            ]
        );
    }

    #[test]
    fn a_context_above_the_largest_prompt_target_is_refused_at_its_index() {
        let mut value = seed_value(MANIFEST_PATH);
        value["selection"]["contexts_actual_prompt_token_targets"][1] =
            MAX_PROMPT_TOKEN_TARGET.into();
        assert_eq!(problems_of(value.clone()), Vec::<String>::new());
        value["selection"]["contexts_actual_prompt_token_targets"][1] = i64::MAX.into();
        assert_eq!(
            problems_of(value),
            [
                "m.json: selection.contexts_actual_prompt_token_targets[1]: 9223372036854775807 \
                 tokens is above the largest prompt target anvil accepts, 16777216 (2^24): no \
                 served model reads a prompt that long"
            ]
        );
    }

    #[test]
    fn wrong_kind_is_refused_by_the_typed_loader() {
        let error = WorkloadManifest::load(PLAN_PATH).unwrap_err().to_string();
        assert!(
            error.ends_with(
                "run-plan.json: schema: expected a workload manifest \
                 (\"anvil-serving.benchmark-workload-manifest/v1\"), found a run plan \
                 (\"anvil-serving.benchmark-run-plan/v1\")"
            ),
            "{error}"
        );
    }

    #[test]
    fn syntax_errors_give_line_and_column() {
        let error = Document::from_str("{\n  \"schema\": \n}", "m.json").unwrap_err();
        assert_eq!(
            error.to_string(),
            "m.json: invalid JSON at line 3, column 1: expected value"
        );
    }

    /// Every field of `value` with its JSON pointer and its path as messages write it.
    fn fields(value: &Value, pointer: &str, path: &str, out: &mut Vec<(String, String)>) {
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    let child_path = if path.is_empty() {
                        key.clone()
                    } else {
                        format!("{path}.{key}")
                    };
                    let child_pointer = format!("{pointer}/{key}");
                    out.push((child_pointer.clone(), child_path.clone()));
                    fields(child, &child_pointer, &child_path, out);
                }
            }
            Value::Array(items) => {
                for (index, child) in items.iter().enumerate() {
                    let child_path = format!("{path}[{index}]");
                    let child_pointer = format!("{pointer}/{index}");
                    out.push((child_pointer.clone(), child_path.clone()));
                    fields(child, &child_pointer, &child_path, out);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn every_field_of_the_seeds_refuses_wrong_values_at_its_own_path() {
        // No field of either document may be null or -1, so each replacement must be refused
        // and the first problem must be at (or, for a replaced object, inside) that field.
        for seed in [MANIFEST_PATH, PLAN_PATH] {
            let original = seed_value(seed);
            let mut all = Vec::new();
            fields(&original, "", "", &mut all);
            assert!(all.len() > 60, "{seed}: only {} fields", all.len());
            for (pointer, path) in &all {
                for wrong in [Value::Null, Value::from(-1), serde_json::json!({})] {
                    let mut value = original.clone();
                    *value.pointer_mut(pointer).unwrap() = wrong.clone();
                    let error = Document::from_value(value, "seed.json")
                        .expect_err(&format!("{pointer} = {wrong} accepted"));
                    let problem = &error.problems()[0];
                    assert!(
                        problem.field.starts_with(path.as_str()),
                        "{pointer} = {wrong}: reported at {problem}"
                    );
                }
            }
        }
    }

    #[test]
    fn schema_is_family_and_version() {
        for kind in DocumentKind::ALL {
            assert_eq!(kind.schema(), format!("{}/v1", kind.schema_family()));
        }
    }

    #[test]
    fn schema_family_knows_other_versions() {
        assert_eq!(
            DocumentKind::from_schema_family("anvil-serving.benchmark-run-plan/v7"),
            Some(DocumentKind::RunPlan)
        );
        assert_eq!(
            DocumentKind::from_schema_family("anvil-serving.capture-run/v2"),
            None
        );
        assert_eq!(DocumentKind::from_schema_family("no-slash"), None);
    }
}
