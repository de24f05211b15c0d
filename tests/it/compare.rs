//! `anvil compare` and `anvil check` on real captures: `anvil-sim` on loopback →
//! `anvil-capture` → Parquet → the SQL views → the rules. Guards the exit codes (0 compared,
//! 3 refused, 1 stop rule, 4 incomplete) and that the printed figures and reasons reach the
//! reader.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::common::{ANVIL, Sim, capture_cell, run, small_manifest};

const PLAN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/sample-data/run-plan.json");
const SAMPLE_MANIFEST: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/sample-data/workload-manifest.json"
);

/// An off-manifest headline-shaped cell: 10 requests at `concurrency` for `arm`.
fn off_manifest_cell(
    sim: &Sim,
    manifest: &Path,
    out: &Path,
    arm: &str,
    concurrency: &str,
) -> PathBuf {
    capture_cell(
        sim,
        manifest,
        out,
        &[
            "--class",
            "headline-sustained-output",
            "--concurrency",
            concurrency,
            "--requests",
            "10",
            "--off-manifest",
            "--arm",
            arm,
        ],
    )
}

/// Run `anvil` and return (exit code, stdout, stderr).
fn anvil(args: &[&str]) -> (Option<i32>, String, String) {
    let o = run(ANVIL, args, &[]);
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn compare_of_two_spec_depths_prints_each_metric_with_the_ratio_to_the_baseline() {
    let k4 = Sim::start(&["--spec-depth", "4", "--spec-accept", "0.7"]);
    let k8 = Sim::start(&["--spec-depth", "8", "--spec-accept", "0.7"]);
    let tmp = tempfile::tempdir().unwrap();
    let manifest = small_manifest(tmp.path(), |_| {});
    let a = off_manifest_cell(&k4, &manifest, &tmp.path().join("a"), "K4", "4");
    let b = off_manifest_cell(&k8, &manifest, &tmp.path().join("b"), "K8", "4");
    let (m, p) = (manifest.to_str().unwrap(), PLAN);
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());

    let (code, out, err) = anvil(&["compare", "--manifest", m, "--plan", p, a, b]);
    assert_eq!(code, Some(0), "{out}{err}");
    for metric in [
        "ttft_ms",
        "effective_prefill_tps",
        "decode_tps",
        "tpot_ms",
        "itl_ms",
        "e2e_ms",
    ] {
        assert!(out.contains(metric), "{metric} missing:\n{out}");
    }
    for header in ["mean 95% CI", "p50", "p95", "p99", "ratio", "Welch 95% CI"] {
        assert!(out.contains(header), "{header} missing:\n{out}");
    }
    assert!(out.contains("baseline K4"), "{out}");
    assert!(
        out.contains("over 10 pairs"),
        "paired by request index:\n{out}"
    );
    assert!(out.contains("single run"), "{out}");
    assert!(out.contains("acceptance rate"), "{out}");

    // The same comparison as JSON: one entry per metric, K8's ratio to K4 on each.
    let (code, out, err) = anvil(&[
        "compare",
        "--manifest",
        m,
        "--plan",
        p,
        "--format",
        "json",
        a,
        b,
    ]);
    assert_eq!(code, Some(0), "{out}{err}");
    let c: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(c["baseline"], "K4");
    let metrics = c["metrics"].as_array().unwrap();
    assert_eq!(metrics.len(), 6);
    for m in metrics {
        let d = &m["differences"][0];
        assert_eq!(d["arm"], "K8", "{m}");
        assert!(d["ratio"].as_f64().unwrap() > 0.0, "{m}");
    }
    let spec = c["spec_decode"].as_array().unwrap();
    assert_eq!(spec.len(), 2, "a spec-decode row per run: {c}");
    for s in spec {
        let rate = s["replicas"][0]["acceptance_rate"].as_f64().unwrap();
        assert!(rate > 0.0 && rate <= 1.0, "{s}");
    }

    // Markdown renders the same tables.
    let (code, out, _) = anvil(&[
        "compare",
        "--manifest",
        m,
        "--plan",
        p,
        "--format",
        "md",
        a,
        b,
    ]);
    assert_eq!(code, Some(0));
    assert!(out.contains("| arm | run | n | mean |"), "{out}");
}

#[test]
fn compare_refuses_a_different_workload_naming_fields_and_quoting_the_rule() {
    let sim = Sim::start(&[]);
    let tmp = tempfile::tempdir().unwrap();

    // Two off-manifest cells that differ in concurrency: not matched.
    let manifest = small_manifest(tmp.path(), |_| {});
    let a = off_manifest_cell(&sim, &manifest, &tmp.path().join("a"), "K4", "4");
    let s = off_manifest_cell(&sim, &manifest, &tmp.path().join("s"), "K4", "2");
    let (code, out, err) = anvil(&[
        "compare",
        "--manifest",
        manifest.to_str().unwrap(),
        "--plan",
        PLAN,
        a.to_str().unwrap(),
        s.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(3), "{out}{err}");
    assert!(out.starts_with("refused:"), "{out}");
    assert!(
        out.contains("concurrency_per_replica")
            && out.contains("4 in the first artifact, 2 in this one"),
        "{out}"
    );

    // A headline cell (the manifest's headline made 10 requests at 512 tokens) beside a
    // natural-completion screen: the headline comparison rule refuses and is quoted.
    let dir = tmp.path().join("headline");
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = small_manifest(&dir, |m| {
        m["selection"]["headline_requests"] = 10.into();
        m["selection"]["contexts_actual_prompt_token_targets"][0] = 512.into();
    });
    let h = capture_cell(
        &sim,
        &manifest,
        &dir.join("h"),
        &[
            "--class",
            "headline-sustained-output",
            "--concurrency",
            "8",
            "--requests",
            "10",
            "--arm",
            "K4",
        ],
    );
    let screen = capture_cell(
        &sim,
        &manifest,
        &dir.join("screen"),
        &[
            "--class",
            "optimization-screen",
            "--concurrency",
            "4",
            "--requests",
            "12",
            "--arm",
            "K4",
        ],
    );
    let (code, out, err) = anvil(&[
        "compare",
        "--manifest",
        manifest.to_str().unwrap(),
        "--plan",
        PLAN,
        h.to_str().unwrap(),
        screen.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(3), "{out}{err}");
    assert!(
        out.contains("refused: headline aggregate throughput cannot be put beside"),
        "{out}"
    );
    assert!(
        out.contains("recorded optimization-screen, headline headline-sustained-output"),
        "{out}"
    );
    assert!(
        out.contains("concurrency_per_replica") && out.contains("recorded 4, headline 8"),
        "{out}"
    );
    assert!(
        out.contains("rule: \"Compare only the matched 100-request unique-canary"),
        "{out}"
    );
}

#[test]
fn check_stops_on_contamination_naming_the_requests() {
    let sim = Sim::start(&["--fault", "contaminate=0.5", "--seed", "7"]);
    let tmp = tempfile::tempdir().unwrap();
    let manifest = small_manifest(tmp.path(), |_| {});
    let data = tmp.path().join("data");
    off_manifest_cell(&sim, &manifest, &data, "K4", "4");

    let (code, out, err) = anvil(&[
        "check",
        "--data",
        data.to_str().unwrap(),
        "--plan",
        PLAN,
        "--manifest",
        SAMPLE_MANIFEST,
    ]);
    assert_eq!(code, Some(1), "{out}{err}");

    // The requests the SQL finds contaminated are the ones the stop rule names.
    let o = run(
        ANVIL,
        &[
            "sql",
            "--data",
            data.to_str().unwrap(),
            "--format",
            "json",
            "SELECT request_index FROM request_metrics WHERE foreign_canary_count > 0 \
             ORDER BY request_index",
        ],
        &[],
    );
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    let rows: Vec<Value> = serde_json::from_str(text.trim()).unwrap_or_else(|_| {
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    });
    assert!(!rows.is_empty(), "contaminate=0.5 contaminated some reply");
    let stop = out
        .lines()
        .find(|l| l.contains("STOP Contamination"))
        .unwrap_or_else(|| panic!("no contamination stop:\n{out}"));
    for r in &rows {
        let request = format!("request {} returned ", r["request_index"]);
        assert!(stop.contains(&request), "{request} not named: {stop}");
    }
    assert!(out.contains("outcome: StopRuleFired"), "{out}");
}

#[test]
fn check_reports_missing_evidence_per_stage_and_exits_incomplete() {
    let sim = Sim::start(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let manifest = small_manifest(tmp.path(), |_| {});
    let data = tmp.path().join("data");
    off_manifest_cell(&sim, &manifest, &data, "K4", "4");
    // The restore stage's evidence file is present, so no stop rule fires.
    std::fs::write(data.join("restoration.json"), "{}").unwrap();

    let (code, out, err) = anvil(&[
        "check",
        "--data",
        data.to_str().unwrap(),
        "--plan",
        PLAN,
        "--manifest",
        SAMPLE_MANIFEST,
    ]);
    assert_eq!(code, Some(4), "{out}{err}");
    assert!(out.contains("stop rules\n  none fired"), "{out}");
    assert!(out.contains("arm K4: evidence: "), "{out}");
    assert!(out.contains("arm K12: no evidence"), "{out}");
    assert!(
        out.contains("missing evidence: K12, K16, chunk1K"),
        "stage 2 lists its arms without artifacts:\n{out}"
    );
    assert!(
        out.contains("missing evidence: TP1, TP2, two independent TP1 replicas"),
        "{out}"
    );
    assert!(out.contains("promotion_authorized: false"), "{out}");
    assert!(out.contains("outcome: Incomplete"), "{out}");

    // JSON carries the same report.
    let (code, out, _) = anvil(&[
        "check",
        "--data",
        data.to_str().unwrap(),
        "--plan",
        PLAN,
        "--manifest",
        SAMPLE_MANIFEST,
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(4));
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["outcome"], "Incomplete");
    assert_eq!(report["coverage"]["promotion_authorized"], false);
}
