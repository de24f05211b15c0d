//! The functional class end to end: `anvil-capture run --class functional` against
//! `anvil-sim` (all four checks pass by default; each simulator fault breaks its check),
//! the `functional_results` view's verdicts and reasons, and what `anvil check` makes of
//! them (advance rule 3, the tool-contamination and structured-output stop rules).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::common::{ANVIL, Sim, anvil_check, capture_cell, run, small_manifest, sql_rows};

const PLAN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/sample-data/run-plan.json");

/// The sample manifest with the token ceiling the seeds give (512): structured replies and
/// tool calls must not be cut short.
fn functional_manifest(dir: &Path) -> PathBuf {
    small_manifest(dir, |m| {
        m["selection"]["headline_max_tokens"] = 512.into();
    })
}

/// A functional run of 8 requests (2 per check) against `sim`.
fn functional_run(sim: &Sim, manifest: &Path, out: &Path) -> PathBuf {
    capture_cell(
        sim,
        manifest,
        out,
        &[
            "--class",
            "functional",
            "--requests",
            "8",
            "--off-manifest",
            "--arm",
            "K12",
        ],
    )
}

/// A functional run against a simulator started with `sim_args`: the temp folder (kept
/// alive), the data folder, the manifest, and the view's verdicts.
fn faulted(sim_args: &[&str]) -> Faulted {
    let sim = Sim::start(sim_args);
    let tmp = tempfile::tempdir().unwrap();
    let manifest = functional_manifest(tmp.path());
    let data = tmp.path().join("data");
    let dir = functional_run(&sim, &manifest, &data);
    let results = results(&dir);
    Faulted {
        _tmp: tmp,
        data,
        manifest,
        results,
    }
}

struct Faulted {
    _tmp: tempfile::TempDir,
    data: PathBuf,
    manifest: PathBuf,
    results: BTreeMap<i64, (String, bool, String)>,
}

/// (check, passed, reason) per request, from the view.
fn results(dir: &Path) -> BTreeMap<i64, (String, bool, String)> {
    let rows = sql_rows(
        dir,
        "SELECT request_index, \"check\", passed, coalesce(reason, '') AS reason \
         FROM functional_results ORDER BY request_index",
    );
    rows.iter()
        .map(|r| {
            (
                r["request_index"].as_i64().unwrap(),
                (
                    r["check"].as_str().unwrap().to_owned(),
                    r["passed"].as_bool().unwrap(),
                    r["reason"].as_str().unwrap().to_owned(),
                ),
            )
        })
        .collect()
}

/// A functional run against a simulator with `fault` on every request: both requests of
/// `check` failed, each for a reason `reason_ok` accepts.
fn failed_twice(fault: &str, check: &str, reason_ok: impl Fn(&str) -> bool) -> Faulted {
    let run = faulted(&["--fault", fault]);
    let failed = failures(&run.results, check);
    assert_eq!(failed.len(), 2, "{:?}", run.results);
    assert!(failed.iter().all(|f| reason_ok(f)), "{failed:?}");
    run
}

/// The reasons of the failed requests of `check`.
fn failures(r: &BTreeMap<i64, (String, bool, String)>, check: &str) -> Vec<String> {
    r.values()
        .filter(|(c, passed, _)| c == check && !passed)
        .map(|(_, _, reason)| reason.clone())
        .collect()
}

fn check_cmd(data: &Path, manifest: &Path) -> (Option<i32>, String) {
    super::common::write_restored(data);
    anvil_check(data, PLAN, manifest)
}

#[test]
fn every_check_passes_against_the_default_simulator() {
    let sim = Sim::start(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let manifest = functional_manifest(tmp.path());
    let data = tmp.path().join("data");
    let dir = functional_run(&sim, &manifest, &data);
    let r = results(&dir);
    assert_eq!(r.len(), 8);
    let mut per_check: BTreeMap<&str, usize> = BTreeMap::new();
    for (check, passed, reason) in r.values() {
        assert!(passed, "{check} failed: {reason}");
        *per_check.entry(check).or_default() += 1;
    }
    assert_eq!(
        per_check,
        BTreeMap::from([
            ("coding", 2),
            ("responses", 2),
            ("structured_json", 2),
            ("tools", 2)
        ])
    );
    // The artifact records each request's check and API.
    let o = run(
        ANVIL,
        &[
            "sql",
            "--data",
            dir.to_str().unwrap(),
            "--format",
            "csv",
            "SELECT \"check\", api, count(*) AS n FROM requests GROUP BY \"check\", api ORDER BY \"check\"",
        ],
        &[],
    );
    let csv = String::from_utf8_lossy(&o.stdout);
    assert!(
        csv.contains("responses,responses,2") && csv.contains("tools,chat,2"),
        "{csv}"
    );

    let (code, out) = check_cmd(&data, &manifest);
    let functional = out
        .lines()
        .find(|l| l.contains("K12") && l.contains(" functional "))
        .unwrap_or_else(|| panic!("no functional verdict:\n{out}"));
    assert!(functional.trim_end().ends_with("pass"), "{functional}");
    let canaries = out
        .lines()
        .find(|l| l.contains("K12") && l.contains(" canaries "))
        .unwrap();
    assert!(canaries.trim_end().ends_with("pass"), "{canaries}");
    assert!(out.contains("stop rules\n  none fired"), "{out}");
    assert_ne!(code, Some(1), "{out}");
}

#[test]
fn bad_json_fails_structured_output_and_fires_the_stop_rule() {
    let run = failed_twice("bad-json=1", "structured_json", |f| {
        f.starts_with("not JSON")
    });
    assert!(failures(&run.results, "coding").is_empty());
    assert!(failures(&run.results, "tools").is_empty());

    let (code, out) = check_cmd(&run.data, &run.manifest);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("STOP structured-output corruption")
            && out.contains("structured-output corruption in 2 requests"),
        "{out}"
    );
}

#[test]
fn a_tool_not_offered_fails_the_tools_check() {
    failed_twice("wrong-tool=1", "tools", |f| {
        f.starts_with("called `") && f.ends_with("_not_offered`, which the request did not offer")
    });
}

#[test]
fn tool_contamination_fails_the_check_and_stops_the_campaign() {
    let run = failed_twice("tool-contaminate=1", "tools", |f| {
        f.starts_with("tool contamination: the arguments carry ANV-")
    });
    let (code, out) = check_cmd(&run.data, &run.manifest);
    assert_eq!(code, Some(1), "{out}");
    let stop = out
        .lines()
        .find(|l| l.contains("STOP cross-request contamination"))
        .unwrap_or_else(|| panic!("no contamination stop:\n{out}"));
    for (index, (check, _, _)) in &run.results {
        if check == "tools" {
            assert!(
                stop.contains(&format!("request {index} tool arguments carried ANV-")),
                "request {index} not named: {stop}"
            );
        }
    }
}

#[test]
fn a_malformed_responses_stream_fails_the_responses_check() {
    let run = failed_twice("responses-malformed=1", "responses", |f| {
        f == "the completed response's text differs from the concatenated deltas"
    });
    assert!(failures(&run.results, "tools").is_empty());
    assert!(failures(&run.results, "structured_json").is_empty());
}

#[test]
fn a_truncated_reply_fails_the_coding_check() {
    let sim = Sim::start(&[]);
    let tmp = tempfile::tempdir().unwrap();
    // An 8-token ceiling cuts the code block short.
    let manifest = small_manifest(tmp.path(), |m| {
        m["selection"]["headline_max_tokens"] = 8.into();
    });
    let dir = functional_run(&sim, &manifest, &tmp.path().join("data"));
    let r = results(&dir);
    let failed = failures(&r, "coding");
    assert_eq!(failed.len(), 2, "{r:?}");
    assert!(
        failed
            .iter()
            .all(|f| (f.starts_with("the code block does not define")
                || f.starts_with("no fenced code block in the reply"))
                && f.ends_with("(the reply was cut by the token ceiling, finish_reason length)")),
        "{failed:?}"
    );
}

#[test]
fn functional_runs_refuse_counts_that_do_not_split_over_the_checks() {
    let sim = Sim::start(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let manifest = functional_manifest(tmp.path());
    let url = sim.url(0);
    let o = run(
        super::common::CAPTURE,
        &[
            "run",
            "--manifest",
            manifest.to_str().unwrap(),
            "--class",
            "functional",
            "--requests",
            "6",
            "--off-manifest",
            "--arm",
            "K12",
            "--endpoint",
            &url,
            "--out",
            tmp.path().join("out").to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--requests `6`") && err.contains("multiple of 4"),
        "{err}"
    );
}
