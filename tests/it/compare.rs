//! `anvil compare` and `anvil check` on real captures: `anvil-sim` on loopback →
//! `anvil-capture` → Parquet → the SQL views → the rules. Guards the exit codes (0 compared,
//! 3 refused, 1 stop rule, 4 incomplete) and that the printed figures and reasons reach the
//! reader.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::common::{
    Sim, anvil, anvil_compare, capture_cell, path, says, small_manifest, sql_rows,
};

use super::common::SAMPLE_PLAN as PLAN;
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

#[test]
fn compare_of_two_spec_depths_prints_each_metric_with_the_ratio_to_the_baseline() {
    let k4 = Sim::start(&["--spec-depth", "4", "--spec-accept", "0.7"]);
    let k8 = Sim::start(&["--spec-depth", "8", "--spec-accept", "0.7"]);
    let tmp = tempfile::tempdir().unwrap();
    let manifest = small_manifest(tmp.path(), |_| {});
    let a = off_manifest_cell(&k4, &manifest, &tmp.path().join("a"), "K4", "4");
    let b = off_manifest_cell(&k8, &manifest, &tmp.path().join("b"), "K8", "4");
    let m = manifest.to_str().unwrap();
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());

    let (code, out, err) = anvil_compare(m, &[a, b]).parts();
    assert_eq!(code, Some(0), "{out}{err}");
    for metric in anvil::metric::MetricId::COLUMNS {
        assert!(out.contains(metric), "{metric} missing:\n{out}");
    }
    for header in [
        "mean [95% CI]",
        "p50 [95% CI]",
        "slowest 5% [95% CI]",
        "slowest 1% [95% CI]",
        "ratio",
        "Welch 95% CI",
        "p95 Δ [95% CI]",
    ] {
        assert!(out.contains(header), "{header} missing:\n{out}");
    }
    // Nothing recorded says how K8 differs from K4 (no --set): compared with the first
    // ARTIFACT_DIR's arm, and the control verdict says so.
    says(&out, "K8 vs K4: no variable differs");
    assert!(
        out.contains("over 10 pairs"),
        "paired by request index:\n{out}"
    );
    says(&out, "single run");
    says(&out, "acceptance rate");

    // The same comparison as JSON: one entry per metric, K8's ratio to K4 on each.
    let (code, out, err) = anvil_compare(m, &["--format", "json", a, b]).parts();
    assert_eq!(code, Some(0), "{out}{err}");
    let c: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(c["references"]["Controls"]["controls"][1][1], "K4", "{c}");
    let metrics = c["metrics"].as_array().unwrap();
    assert_eq!(metrics.len(), 6);
    for m in metrics {
        // One difference per window.
        let d = &m["differences"][0];
        assert_eq!(
            (&d["arm"], &d["reference"]),
            (&"K8".into(), &"K4".into()),
            "{m}"
        );
        assert_eq!(m["differences"][1]["window"], "after_first_wave", "{m}");
        assert!(d["ratio"].as_f64().unwrap() > 0.0, "{m}");
    }
    let spec = c["spec_decode"].as_array().unwrap();
    assert_eq!(spec.len(), 2, "a spec-decode row per run: {c}");
    for s in spec {
        let rate = s["replicas"][0]["acceptance_rate"].as_f64().unwrap();
        assert!(rate > 0.0 && rate <= 1.0, "{s}");
    }

    // Markdown renders the same tables.
    let (code, out, _) = anvil_compare(m, &["--format", "md", a, b]).parts();
    assert_eq!(code, Some(0));
    says(&out, "| arm | window | run | n | mean \\[95% CI\\] |");
}

#[test]
fn compare_refuses_a_different_workload_naming_fields_and_quoting_the_rule() {
    let sim = Sim::start(&[]);
    let tmp = tempfile::tempdir().unwrap();

    // Two off-manifest cells that differ in concurrency: not matched.
    let manifest = small_manifest(tmp.path(), |_| {});
    let a = off_manifest_cell(&sim, &manifest, &tmp.path().join("a"), "K4", "4");
    let s = off_manifest_cell(&sim, &manifest, &tmp.path().join("s"), "K4", "2");
    let (code, out, err) =
        anvil_compare(path(&manifest), &[a.to_str().unwrap(), s.to_str().unwrap()]).parts();
    assert_eq!(code, Some(3), "{out}{err}");
    assert!(out.starts_with("refused:"), "{out}");
    says(&out, "concurrency_per_replica");
    says(&out, "4 in the first artifact, 2 in this one");

    // The same cell open loop (`--rate`) against closed loop: the schedule differs, so the
    // load the server saw differs; refused, naming the schedule.
    let open = capture_cell(
        &sim,
        &manifest,
        &tmp.path().join("open"),
        &[
            "--class",
            "headline-sustained-output",
            "--concurrency",
            "4",
            "--requests",
            "10",
            "--off-manifest",
            "--arm",
            "K4",
            "--rate",
            "20",
        ],
    );
    assert!(
        open.ends_with("headline-sustained-output.ctx512.c4.n10.rate20"),
        "{open:?}"
    );
    let (code, out, err) = anvil_compare(
        path(&manifest),
        &[a.to_str().unwrap(), open.to_str().unwrap()],
    )
    .parts();
    assert_eq!(code, Some(3), "{out}{err}");
    says(&out, "schedule");
    assert!(!out.contains("no variable differs"), "{out}");

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
    let (code, out, err) = anvil_compare(
        path(&manifest),
        &[h.to_str().unwrap(), screen.to_str().unwrap()],
    )
    .parts();
    headline_refused_beside(code, &out, &err, "optimization-screen");
    says(&out, "concurrency_per_replica");
    says(&out, "recorded 4, headline 8");
    says(
        &out,
        "rule: \"Compare only the matched 100-request unique-canary",
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
    ])
    .parts();
    assert_eq!(code, Some(1), "{out}{err}");

    // The requests the SQL finds contaminated are the ones the stop rule names.
    let rows = sql_rows(
        &data,
        "SELECT request_index FROM request_metrics WHERE foreign_canary_count > 0 \
         ORDER BY request_index",
    );
    assert!(!rows.is_empty(), "contaminate=0.5 contaminated some reply");
    let stop = out
        .lines()
        .find(|l| l.contains("STOP cross-request contamination"))
        .unwrap_or_else(|| panic!("no contamination stop:\n{out}"));
    for r in &rows {
        let request = format!("request {} returned ", r["request_index"]);
        assert!(stop.contains(&request), "{request} not named: {stop}");
    }
    says(&out, "outcome: stop rule fired");
}

#[test]
fn a_marker_from_outside_the_campaign_fails_the_canary_check_and_stops_it() {
    // At C1 no other request is in flight: the simulator's contamination is a marker no
    // request of the campaign owns (the realistic kind: another run, tenant or prompt cache).
    let sim = Sim::start(&["--fault", "contaminate=0.5", "--seed", "7"]);
    let tmp = tempfile::tempdir().unwrap();
    let manifest = small_manifest(tmp.path(), |_| {});
    let data = tmp.path().join("data");
    off_manifest_cell(&sim, &manifest, &data, "K4", "1");

    let rows = sql_rows(
        &data,
        "SELECT request_index, canary_ok, array_to_string(stray_canaries, ',') AS stray \
         FROM request_metrics WHERE foreign_canary_count > 0 ORDER BY request_index",
    );
    assert!(!rows.is_empty(), "contaminate=0.5 contaminated some reply");
    for r in &rows {
        assert_eq!(r["canary_ok"], serde_json::Value::Bool(false), "{r}");
        assert!(
            r["stray"].as_str().is_some_and(|s| s.starts_with("ANV-")),
            "{r}"
        );
    }

    let (code, out, err) = anvil(&[
        "check",
        "--data",
        data.to_str().unwrap(),
        "--plan",
        PLAN,
        "--manifest",
        SAMPLE_MANIFEST,
    ])
    .parts();
    assert_eq!(code, Some(1), "{out}{err}");
    let stop = out
        .lines()
        .find(|l| l.contains("STOP cross-request contamination"))
        .unwrap_or_else(|| panic!("no contamination stop:\n{out}"));
    for r in &rows {
        let named = format!(
            "request {} returned {}",
            r["request_index"],
            r["stray"].as_str().unwrap()
        );
        assert!(stop.contains(&named), "{named} not named: {stop}");
    }
    let canaries = out
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("canaries"))
        .unwrap_or_else(|| panic!("no Canaries line:\n{out}"));
    says(canaries, "FAIL");
}

#[test]
fn check_reports_missing_evidence_per_stage_and_exits_incomplete() {
    let sim = Sim::start(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let manifest = small_manifest(tmp.path(), |_| {});
    let data = tmp.path().join("data");
    off_manifest_cell(&sim, &manifest, &data, "K4", "4");
    // The restore stage's evidence file is present, so no stop rule fires.
    super::common::write_restored(&data);

    let (code, out, err) = anvil(&[
        "check",
        "--data",
        data.to_str().unwrap(),
        "--plan",
        PLAN,
        "--manifest",
        SAMPLE_MANIFEST,
    ])
    .parts();
    assert_eq!(code, Some(4), "{out}{err}");
    says(&out, "stop rules\n  none fired");
    says(&out, "arm K4: evidence: ");
    says(&out, "arm K12: no evidence");
    assert!(
        out.contains("missing evidence: K12, K16, chunk1K"),
        "stage 2 lists its arms without artifacts:\n{out}"
    );
    says(
        &out,
        "missing evidence: TP1, TP2, two independent TP1 replicas",
    );
    says(&out, "promotion_authorized: false");
    says(&out, "outcome: incomplete");

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
    ])
    .parts();
    assert_eq!(code, Some(4));
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["outcome"], "incomplete");
    assert_eq!(report["coverage"]["promotion_authorized"], false);
}

#[test]
fn figures_read_for_the_rules_agree_with_the_sql_views() {
    let sim = Sim::start(&[
        "--spec-depth",
        "4",
        "--spec-accept",
        "0.7",
        "--fault",
        "contaminate=0.5",
        "--seed",
        "3",
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let manifest = small_manifest(tmp.path(), |_| {});
    let dir = off_manifest_cell(&sim, &manifest, &tmp.path().join("data"), "K4", "4");

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (artifacts, sql) = rt.block_on(async {
        let session = anvil::query::AnvilSession::open(std::slice::from_ref(&dir))
            .await
            .unwrap();
        let artifacts = anvil::gather::rules_input::read_artifacts(&session)
            .await
            .unwrap();
        let sql = session
            .query(
                "SELECT count(*) FILTER (WHERE foreign_canary_count > 0) AS contaminated, \
                        avg(ttft_ms) AS ttft_mean, \
                        median(CAST(completion_tokens AS DOUBLE)) AS tokens_p50 \
                 FROM request_metrics",
            )
            .await
            .unwrap();
        (artifacts, sql)
    });
    let batch = &sql.batches[0];
    let int = |name: &str| {
        use arrow::array::AsArray;
        batch
            .column_by_name(name)
            .unwrap()
            .as_primitive::<arrow::datatypes::Int64Type>()
            .value(0)
    };
    let float = |name: &str| {
        use arrow::array::AsArray;
        batch
            .column_by_name(name)
            .unwrap()
            .as_primitive::<arrow::datatypes::Float64Type>()
            .value(0)
    };

    assert_eq!(artifacts.len(), 1);
    let a = &artifacts[0];
    assert_eq!(a.facts.arm, "K4");
    let f = &a.figures;
    assert_eq!((f.requests.measured, f.requests.ok), (10, 10));
    assert_eq!(f.metrics.len(), 6);
    for (metric, stats) in &f.metrics {
        assert_eq!(stats.n, 10, "{metric}");
        assert!(stats.p99.is_some() && stats.ci95_low.is_some(), "{metric}");
        assert_eq!(f.per_request[metric].len(), 10, "{metric}");
    }
    let ttft = f.metrics[&anvil::rules::MetricId::TtftMs].mean.unwrap();
    assert!((ttft - float("ttft_mean")).abs() <= 1e-9 * ttft.abs());
    assert_eq!(f.completion_tokens_p50, Some(float("tokens_p50")));
    assert_eq!(f.finish_reasons.values().sum::<u64>(), 10);
    assert!(f.aggregate_output_tps.is_some_and(|t| t > 0.0));
    assert_eq!(f.aggregate_output_tps_per_replica.len(), 1);
    assert_eq!(f.canaries.len(), 10);
    let contaminated = f.canaries.iter().filter(|c| !c.foreign.is_empty()).count();
    assert_eq!(contaminated as i64, int("contaminated"));
    assert!(f.restarts.is_empty() && f.server_errors.is_empty());
    assert_eq!(f.spec_decode.len(), 1);
    assert!(
        f.spec_decode[0]
            .acceptance_rate
            .is_some_and(|r| r > 0.0 && r <= 1.0)
    );
}

#[test]
fn compare_and_check_exit_2_on_bad_input_and_document_their_exit_codes() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing");
    let (code, _, err) = anvil(&["compare", missing.to_str().unwrap()]).parts();
    assert_eq!(code, Some(2), "{err}");
    says(&err, "does not exist");

    // A folder given beside an artifact that holds none is named, not counted as nothing.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let one = "sample-data/2026-09-04-qwen38-27b-pro6000-possibility/TP1/headline-sustained-output.ctx4096.c8.n100/repeat-1";
    let (code, _, err) = anvil(&["compare", empty.to_str().unwrap(), one]).parts();
    assert_eq!(code, Some(2), "{err}");
    says(&err, &format!("{}: no artifact", empty.display()));

    let bad_plan = tmp.path().join("plan.json");
    std::fs::write(&bad_plan, "{ not json").unwrap();
    let (code, _, err) = anvil(&[
        "check",
        "--data",
        tmp.path().to_str().unwrap(),
        "--plan",
        bad_plan.to_str().unwrap(),
        "--manifest",
        SAMPLE_MANIFEST,
    ])
    .parts();
    assert_eq!(code, Some(2), "{err}");
    says(&err, "--plan");

    let (_, help, _) = anvil(&["check", "--help"]).parts();
    for line in [
        "0  every measurable advance rule holds",
        "1  a stop rule fired",
        "2  bad input",
        "4  incomplete",
    ] {
        assert!(help.contains(line), "{line} missing:\n{help}");
    }
    let (_, help, _) = anvil(&["compare", "--help"]).parts();
    says(&help, "3  refused");
}

#[test]
fn markdown_of_compare_and_check_escapes_a_recorded_arm_name() {
    let sim = Sim::start(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let manifest = small_manifest(tmp.path(), |_| {});
    let data = tmp.path().join("data");
    let hostile = "K|12<script>alert(1)";
    let a = off_manifest_cell(&sim, &manifest, &data, "baseline", "2");
    let b = off_manifest_cell(&sim, &manifest, &data, hostile, "2");
    let (m, d) = (manifest.to_str().unwrap(), data.to_str().unwrap());
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let escaped = "K\\|12&lt;script&gt;alert(1)";

    let compare = [
        "compare",
        "--manifest",
        m,
        "--plan",
        PLAN,
        "--format",
        "md",
        a,
        b,
    ];
    let (code, out, err) = anvil(&compare).parts();
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains(escaped), "{out}");
    assert!(!out.contains("<script>") && !out.contains("K|12"), "{out}");
    // Text output is not Markdown: the name stays as recorded.
    let (code, out, _) = anvil_compare(m, &[a, b]).parts();
    assert_eq!(code, Some(0));
    assert!(out.contains(hostile), "text output is not Markdown: {out}");

    let check = [
        "check",
        "--data",
        d,
        "--plan",
        PLAN,
        "--manifest",
        m,
        "--format",
        "md",
    ];
    let (code, out, err) = anvil(&check).parts();
    assert!(matches!(code, Some(1 | 4)), "{code:?} {out}{err}");
    assert!(out.contains(escaped), "{out}");
    assert!(!out.contains("<script>") && !out.contains("K|12"), "{out}");
}

/// Artifact folders named one by one are compared as given: a headline run beside a
/// functional run is refused (exit 3) naming the fields that differ, not read stage by stage
/// as "nothing to compare" with exit 0.
#[test]
fn artifacts_named_one_by_one_are_refused_when_they_differ() {
    let arm = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/sample-data/2026-09-04-qwen38-27b-pro6000-possibility/Inferact target-only"
    );
    let headline = format!("{arm}/headline-sustained-output.ctx4096.c8.n100/repeat-1");
    let functional = format!("{arm}/functional.ctx4096.c1.n8");
    let (code, out, err) = anvil_compare(SAMPLE_MANIFEST, &[&headline, &functional]).parts();
    headline_refused_beside(code, &out, &err, "functional");
}

/// A refusal (exit 3) to put the headline's aggregate throughput beside a run of `class`,
/// naming the class that differs.
fn headline_refused_beside(code: Option<i32>, out: &str, err: &str, class: &str) {
    assert_eq!(code, Some(3), "{out}{err}");
    says(
        out,
        "refused: headline aggregate throughput cannot be put beside",
    );
    says(
        out,
        &format!("recorded {class}, headline headline-sustained-output"),
    );
}
