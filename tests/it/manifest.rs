//! `anvil validate` against the seed workload manifest and run plan and malformed variants of
//! them, through the real binary: each refusal must exit 2 and name the file and JSON path.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

const SAMPLE_DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/sample-data");
const MANIFEST: &str = "workload-manifest.json";
const PLAN: &str = "run-plan.json";

struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
}

fn anvil_validate(paths: &[&Path]) -> Outcome {
    let words: Vec<&str> = std::iter::once("validate")
        .chain(paths.iter().map(|p| super::common::path(p)))
        .collect();
    let ran = super::common::anvil(&words);
    Outcome {
        code: ran.code.expect("anvil exited by signal"),
        stdout: ran.stdout,
        stderr: ran.stderr,
    }
}

fn seed(name: &str) -> Value {
    let text = std::fs::read_to_string(Path::new(SAMPLE_DATA).join(name)).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A seed with one change, written into a fresh temporary folder.
struct Variant {
    _dir: tempfile::TempDir,
    file: PathBuf,
}

fn variant(name: &str, change: impl FnOnce(&mut Value)) -> Variant {
    let mut value = seed(name);
    change(&mut value);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(name);
    std::fs::write(&file, serde_json::to_string_pretty(&value).unwrap()).unwrap();
    Variant { _dir: dir, file }
}

/// Set the field at a JSON pointer (`/selection/concurrency/2`).
fn set(value: &mut Value, pointer: &str, new: Value) {
    *value
        .pointer_mut(pointer)
        .unwrap_or_else(|| panic!("no {pointer} in the seed")) = new;
}

/// Add a field that the seed does not have.
fn insert(value: &mut Value, pointer: &str, new: Value) {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let object = value.pointer_mut(parent).unwrap().as_object_mut().unwrap();
    assert!(
        object.insert(key.to_owned(), new).is_none(),
        "{pointer} is in the seed"
    );
}

fn remove(value: &mut Value, pointer: &str) {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let object = value.pointer_mut(parent).unwrap().as_object_mut().unwrap();
    assert!(object.remove(key).is_some(), "no {pointer} in the seed");
}

/// `anvil validate FILE` exits 2 with a line `FILE: FIELD: MESSAGE...`.
fn assert_refused(variant: &Variant, field: &str, message: &str) {
    let outcome = anvil_validate(&[&variant.file]);
    let expected = format!("{}: {field}: {message}", variant.file.display());
    assert_eq!(
        outcome.code, 2,
        "exit code; stdout:\n{}\nstderr:\n{}",
        outcome.stdout, outcome.stderr
    );
    let output = format!("{}{}", outcome.stdout, outcome.stderr);
    assert!(
        output.lines().any(|line| line.starts_with(&expected)),
        "no line starting with\n  {expected}\nin\n{output}"
    );
}

/// A manifest without the headline class is refused, naming the class: its `selection`
/// describes the headline, and every headline verdict reads that class.
#[test]
fn a_manifest_without_the_headline_class_is_refused() {
    let v = variant("workload-manifest.json", |m| {
        let classes = m["workload_classes"].as_array_mut().unwrap();
        classes.retain(|c| c["id"] != "headline-sustained-output");
    });
    assert_refused(
        &v,
        "workload_classes",
        "no \"headline-sustained-output\" class",
    );
}

// Seeds and directories that hold.

#[test]
fn seed_documents_are_valid() {
    let manifest = Path::new(SAMPLE_DATA).join(MANIFEST);
    let plan = Path::new(SAMPLE_DATA).join(PLAN);
    let outcome = anvil_validate(&[&manifest, &plan]);
    assert_eq!(outcome.code, 0, "{}{}", outcome.stdout, outcome.stderr);
    let campaign = "campaign 2026-09-04-qwen38-27b-pro6000-possibility";
    assert!(outcome.stdout.contains(&format!(
        "{}: workload manifest anvil-serving.benchmark-workload-manifest/v1, {campaign}: ok",
        manifest.display()
    )));
    assert!(outcome.stdout.contains(&format!(
        "{}: run plan anvil-serving.benchmark-run-plan/v1, {campaign}: ok",
        plan.display()
    )));
}

#[test]
fn sample_data_directory_is_valid_and_says_what_it_holds() {
    let outcome = anvil_validate(&[Path::new(SAMPLE_DATA)]);
    assert_eq!(outcome.code, 0, "{}{}", outcome.stdout, outcome.stderr);
    let lines: Vec<&str> = outcome.stdout.lines().collect();
    // The sample campaign's artifacts: every folder beneath sample-data holding run.json.
    let artifacts = crate::common::run_jsons(Path::new(SAMPLE_DATA)).len();
    assert!(artifacts > 0, "the sample campaign is committed");
    assert_eq!(
        lines[0],
        format!("{SAMPLE_DATA}: directory with 5 campaign documents, {artifacts} artifact folders")
    );
    assert_eq!(lines.len(), 6 + artifacts, "{}", outcome.stdout);
    assert!(
        outcome
            .stdout
            .contains("capacity searches anvil-serving.capacity/v1, campaign 2026-09-04-qwen38-27b-pro6000-possibility, TP1 resolved; TP2 resolved; two independent TP1 replicas resolved: ok"),
        "{}",
        outcome.stdout
    );
    assert!(lines[1..].iter().all(|line| line.ends_with(": ok")));
}

#[test]
fn directory_search_reports_the_bad_document_among_good_ones() {
    let dir = tempfile::tempdir().unwrap();
    let nested = dir.path().join("campaign/inputs");
    std::fs::create_dir_all(&nested).unwrap();
    for name in [MANIFEST, PLAN] {
        std::fs::copy(Path::new(SAMPLE_DATA).join(name), nested.join(name)).unwrap();
    }
    let mut bad = seed(PLAN);
    set(&mut bad, "/execution_order/1/order", json!(1));
    std::fs::write(nested.join("run-plan-copy.json"), bad.to_string()).unwrap();
    std::fs::write(dir.path().join("package.json"), r#"{"name": "unrelated"}"#).unwrap();

    let outcome = anvil_validate(&[dir.path()]);
    assert_eq!(outcome.code, 2, "{}{}", outcome.stdout, outcome.stderr);
    assert!(
        outcome.stdout.contains(
            "directory with 3 campaign documents, 0 artifact folders (skipped 1 JSON file"
        )
    );
    assert!(outcome.stdout.contains(&format!(
        "{}: execution_order[1].order: duplicate stage order 1 (already at execution_order[0])",
        nested.join("run-plan-copy.json").display()
    )));
    assert_eq!(
        outcome.stdout.matches(": ok").count(),
        2,
        "{}",
        outcome.stdout
    );
}

#[test]
fn directory_without_campaign_documents_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("notes.json"),
        r#"{"schema": "someone-else/v1"}"#,
    )
    .unwrap();
    let outcome = anvil_validate(&[dir.path()]);
    assert_eq!(outcome.code, 2);
    assert!(outcome.stdout.contains(&format!(
        "{}: no workload manifest, run plan or artifact folder found",
        dir.path().display()
    )));
}

#[test]
fn nonexistent_path_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing-manifest.json");
    let outcome = anvil_validate(&[&missing]);
    assert_eq!(outcome.code, 2);
    assert!(
        outcome
            .stdout
            .contains(&format!("{}: no such file or directory", missing.display()))
    );
}

#[test]
fn validate_without_paths_is_a_usage_error() {
    let outcome = anvil_validate(&[]);
    assert_eq!(outcome.code, 2);
    assert!(outcome.stderr.contains("FILE|DIR"), "{}", outcome.stderr);
}

#[test]
fn help_documents_exit_codes() {
    for args in [&["--help"][..], &["validate", "--help"][..]] {
        let output = Command::new(env!("CARGO_BIN_EXE_anvil"))
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success());
        let help = String::from_utf8(output.stdout).unwrap();
        assert!(help.contains("Exit codes"), "{help}");
        assert!(
            help.contains("  0  every input is valid")
                || help.contains("  0  everything valid / every rule held"),
            "{help}"
        );
        assert!(help.contains("  2  bad input"), "{help}");
    }
}

// Malformed workload manifests.

#[test]
fn negative_concurrency_is_refused_at_its_index() {
    let bad = variant(MANIFEST, |m| set(m, "/selection/concurrency/2", json!(-4)));
    assert_refused(
        &bad,
        "selection.concurrency[2]",
        "expected a positive integer, found -4",
    );
}

#[test]
fn fractional_concurrency_is_refused() {
    let bad = variant(MANIFEST, |m| set(m, "/selection/concurrency/4", json!(8.5)));
    assert_refused(
        &bad,
        "selection.concurrency[4]",
        "expected a positive integer, found 8.5",
    );
}

#[test]
fn zero_headline_requests_is_refused() {
    let bad = variant(MANIFEST, |m| {
        set(m, "/selection/headline_requests", json!(0))
    });
    assert_refused(
        &bad,
        "selection.headline_requests",
        "expected a positive integer, found 0",
    );
}

#[test]
fn duplicate_context_is_refused() {
    let bad = variant(MANIFEST, |m| {
        set(
            m,
            "/selection/contexts_actual_prompt_token_targets/3",
            json!(4096),
        )
    });
    assert_refused(
        &bad,
        "selection.contexts_actual_prompt_token_targets[3]",
        "duplicate value 4096 (already at selection.contexts_actual_prompt_token_targets[0])",
    );
}

#[test]
fn duplicate_concurrency_is_refused() {
    let bad = variant(MANIFEST, |m| set(m, "/selection/concurrency/5", json!(8)));
    assert_refused(
        &bad,
        "selection.concurrency[5]",
        "duplicate value 8 (already at selection.concurrency[4])",
    );
}

#[test]
fn empty_concurrency_list_is_refused() {
    let bad = variant(MANIFEST, |m| set(m, "/selection/concurrency", json!([])));
    assert_refused(
        &bad,
        "selection.concurrency",
        "expected a non-empty list, found []",
    );
}

#[test]
fn missing_headline_max_tokens_is_refused() {
    let bad = variant(MANIFEST, |m| remove(m, "/selection/headline_max_tokens"));
    assert_refused(
        &bad,
        "selection.headline_max_tokens",
        "missing required field",
    );
}

#[test]
fn wrong_type_for_canaries_is_refused() {
    let bad = variant(MANIFEST, |m| {
        set(m, "/selection/headline_request_canaries", json!("yes"))
    });
    assert_refused(
        &bad,
        "selection.headline_request_canaries",
        "invalid type: string \"yes\", expected a boolean",
    );
}

#[test]
fn unknown_manifest_schema_version_is_refused() {
    let bad = variant(MANIFEST, |m| {
        set(
            m,
            "/schema",
            json!("anvil-serving.benchmark-workload-manifest/v2"),
        )
    });
    assert_refused(
        &bad,
        "schema",
        "unsupported workload manifest version \"anvil-serving.benchmark-workload-manifest/v2\"; \
         anvil reads \"anvil-serving.benchmark-workload-manifest/v1\"",
    );
}

#[test]
fn unknown_schema_lists_supported_versions() {
    let bad = variant(MANIFEST, |m| set(m, "/schema", json!("vendor.bench/v1")));
    assert_refused(
        &bad,
        "schema",
        "unknown schema \"vendor.bench/v1\"; anvil reads \
         \"anvil-serving.benchmark-workload-manifest/v1\" or \
         \"anvil-serving.benchmark-run-plan/v1\"",
    );
}

#[test]
fn percentile_method_other_than_nearest_rank_is_refused() {
    let bad = variant(MANIFEST, |m| {
        set(
            m,
            "/statistics/percentile_method",
            json!("linear interpolation"),
        )
    });
    assert_refused(
        &bad,
        "statistics.percentile_method",
        "unknown percentile method \"linear interpolation\"; known: \"nearest rank\"",
    );
}

#[test]
fn unknown_thinking_value_is_refused() {
    let bad = variant(MANIFEST, |m| {
        set(m, "/selection/thinking", json!("sometimes"))
    });
    assert_refused(
        &bad,
        "selection.thinking",
        "unknown thinking mode \"sometimes\"; known: \"disabled\", \"enabled\"",
    );
}

#[test]
fn unknown_prompt_cache_mode_is_refused() {
    let bad = variant(MANIFEST, |m| {
        set(m, "/selection/headline_prompt_cache_mode", json!("warm"))
    });
    assert_refused(
        &bad,
        "selection.headline_prompt_cache_mode",
        "unknown prompt cache mode \"warm\"; known: \"unique\", \"shared\"",
    );
}

#[test]
fn unknown_metric_is_refused() {
    let bad = variant(MANIFEST, |m| {
        set(m, "/metrics/3", json!("tokens_per_dollar"))
    });
    assert_refused(&bad, "metrics[3]", "unknown metric \"tokens_per_dollar\"");
}

#[test]
fn unknown_statistic_is_refused() {
    let bad = variant(MANIFEST, |m| {
        set(m, "/statistics/distribution/1", json!("median"))
    });
    assert_refused(
        &bad,
        "statistics.distribution[1]",
        "unknown statistic \"median\"",
    );
}

#[test]
fn unknown_selection_field_is_refused() {
    let bad = variant(MANIFEST, |m| insert(m, "/selection/replicas", json!(2)));
    assert_refused(&bad, "selection.replicas", "unknown field; expected one of");
}

#[test]
fn duplicate_workload_class_id_is_refused() {
    let bad = variant(MANIFEST, |m| {
        set(m, "/workload_classes/2/id", json!("optimization-screen"))
    });
    assert_refused(
        &bad,
        "workload_classes[2].id",
        "duplicate workload class id \"optimization-screen\" (already at workload_classes[0])",
    );
}

#[test]
fn manifest_that_is_not_an_object_is_refused() {
    let bad = variant(MANIFEST, |m| *m = json!(["not", "a", "manifest"]));
    assert_refused(&bad, "document", "expected a JSON object, found an array");
}

#[test]
fn invalid_json_is_refused_with_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(MANIFEST);
    let text = std::fs::read_to_string(Path::new(SAMPLE_DATA).join(MANIFEST)).unwrap();
    // Drop the comma after the schema line: line 2 ends, line 3 starts without a separator.
    std::fs::write(&file, text.replacen("/v1\",", "/v1\"", 1)).unwrap();
    let outcome = anvil_validate(&[&file]);
    assert_eq!(outcome.code, 2);
    assert!(
        outcome.stdout.contains(&format!(
            "{}: invalid JSON at line 3, column 3: expected `,` or `}}`",
            file.display()
        )),
        "{}",
        outcome.stdout
    );
}

// Malformed run plans.

#[test]
fn duplicate_stage_order_is_refused() {
    let bad = variant(PLAN, |p| set(p, "/execution_order/3/order", json!(2)));
    assert_refused(
        &bad,
        "execution_order[3].order",
        "duplicate stage order 2 (already at execution_order[1])",
    );
}

#[test]
fn negative_stage_order_is_refused() {
    let bad = variant(PLAN, |p| set(p, "/execution_order/0/order", json!(-1)));
    assert_refused(
        &bad,
        "execution_order[0].order",
        "expected a positive integer, found -1",
    );
}

#[test]
fn empty_arms_list_is_refused() {
    let bad = variant(PLAN, |p| insert(p, "/execution_order/5/arms", json!([])));
    assert_refused(
        &bad,
        "execution_order[5].arms",
        "expected a non-empty list, found []",
    );
}

#[test]
fn missing_goal_is_refused() {
    let bad = variant(PLAN, |p| remove(p, "/goal"));
    assert_refused(&bad, "goal", "missing required field");
}

#[test]
fn missing_stage_status_is_refused() {
    let bad = variant(PLAN, |p| remove(p, "/execution_order/2/status"));
    assert_refused(&bad, "execution_order[2].status", "missing required field");
}

#[test]
fn unknown_stage_field_is_refused() {
    let bad = variant(PLAN, |p| {
        insert(p, "/execution_order/1/winner", json!("K12"))
    });
    assert_refused(
        &bad,
        "execution_order[1].winner",
        "unknown field; expected one of",
    );
}

#[test]
fn empty_stop_rules_are_refused() {
    let bad = variant(PLAN, |p| set(p, "/stop_rules", json!([])));
    assert_refused(&bad, "stop_rules", "expected a non-empty list, found []");
}

#[test]
fn wrong_type_for_promotion_authorized_is_refused() {
    let bad = variant(PLAN, |p| set(p, "/promotion_authorized", json!("no")));
    assert_refused(
        &bad,
        "promotion_authorized",
        "invalid type: string \"no\", expected a boolean",
    );
}

#[test]
fn unknown_run_plan_schema_version_is_refused() {
    let bad = variant(PLAN, |p| {
        set(p, "/schema", json!("anvil-serving.benchmark-run-plan/v0"))
    });
    assert_refused(
        &bad,
        "schema",
        "unsupported run plan version \"anvil-serving.benchmark-run-plan/v0\"",
    );
}

/// A campaign file beside copies of the seeds: one launched arm named `arm`, and a
/// three-value depth sweep; returns the folder and the file.
fn campaign_file(arm: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    for name in [MANIFEST, PLAN] {
        std::fs::copy(Path::new(SAMPLE_DATA).join(name), dir.path().join(name)).unwrap();
    }
    let campaign = json!({
        "schema": "anvil-serving.benchmark-campaign/v1",
        "campaign_id": seed(MANIFEST)["campaign_id"],
        "manifest": MANIFEST,
        "plan": PLAN,
        "starting_service": {
            "endpoints": ["http://127.0.0.1:30000"], "runtime": "sglang 0.6.1", "model": "qwen"
        },
        "arms": [{
            "arm": arm,
            "launch": {"argv": ["python3", "-m", "sglang.launch_server", "--port", "{port}"]},
            "ports": [30001],
            "runtime": "sglang 0.6.1",
            "cells": {"classes": ["headline-sustained-output"]}
        }],
        "sweeps": [{
            "key": "spec_depth",
            "values": ["4", "12", "16"],
            "template": {
                "arm": "K{value}",
                "launch": {"argv": ["python3", "-m", "sglang.launch_server", "--port", "{port}",
                                     "--speculative-num-steps", "{value}"]},
                "ports": [30002],
                "runtime": "sglang 0.6.1",
                "cells": {"classes": ["optimization-screen"]}
            }
        }]
    });
    let file = dir.path().join("campaign.json");
    std::fs::write(&file, serde_json::to_string_pretty(&campaign).unwrap()).unwrap();
    (dir, file)
}

#[test]
fn validate_checks_a_campaign_file_against_its_plan_and_names_unknown_arms() {
    let (_dir, file) = campaign_file("TP2");
    let ok = anvil_validate(&[&file]);
    assert_eq!(ok.code, 0, "{}{}", ok.stdout, ok.stderr);
    assert!(
        ok.stdout
            .contains("campaign file anvil-serving.benchmark-campaign/v1")
            && ok.stdout.contains("4 arms: ok"),
        "{}",
        ok.stdout
    );

    let (_dir, file) = campaign_file("TP3 turbo");
    let bad = anvil_validate(&[&file]);
    assert_eq!(bad.code, 2, "{}{}", bad.stdout, bad.stderr);
    assert!(
        bad.stdout.contains("not arms of the run plan: `TP3 turbo`"),
        "{}",
        bad.stdout
    );
    assert!(
        bad.stdout.contains(&file.display().to_string()),
        "{}",
        bad.stdout
    );
}
