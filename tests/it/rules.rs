//! Each campaign rule on real captures, one artifact set that passes and one that fails:
//! `anvil-sim` with the fault or profile that breaks the rule, `anvil-capture` on loopback,
//! then `anvil check` or `anvil compare`, asserting the verdict and its reason text.
//! (Contamination, headline-vs-screen refusal, matching and missing evidence are in
//! `compare.rs`.)

use std::path::{Path, PathBuf};

use super::common::{
    Recording, Sim, anvil, anvil_check, anvil_compare, path, says, small_manifest,
};

use super::common::SAMPLE_PLAN as PLAN;

/// An off-manifest headline-shaped cell of `requests` at C4 for `arm`, with `extra`
/// capture arguments (`--set`, more `--endpoint`s).
fn cell(
    sim: &Sim,
    manifest: &Path,
    out: &Path,
    arm: &str,
    requests: u32,
    extra: &[&str],
) -> PathBuf {
    Recording::cell(manifest, out, 4, requests)
        .arm(arm)
        .endpoint(&sim.url(0))
        .args(extra)
        .record()
}

/// A data folder with the restore stage's evidence, so only the rule under test can stop.
fn data_dir(root: &Path, name: &str) -> PathBuf {
    let data = root.join(name);
    std::fs::create_dir_all(&data).unwrap();
    super::common::write_restored(&data);
    data
}

/// The advance-rule line of `arm` and `rule` in `anvil check`'s table.
fn advance<'a>(out: &'a str, arm: &str, rule: &str) -> &'a str {
    out.lines()
        .find(|l| {
            l.trim_start()
                .strip_prefix(arm)
                .filter(|rest| rest.starts_with(char::is_whitespace))
                .and_then(|rest| rest.trim_start().strip_prefix(rule))
                .is_some_and(|rest| rest.starts_with(char::is_whitespace))
        })
        .unwrap_or_else(|| panic!("no {rule} line for {arm}:\n{out}"))
}

#[test]
fn a_replica_restart_stops_the_campaign_and_fails_completion() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = small_manifest(tmp.path(), |_| {});

    let clean = Sim::start(&["--seed", "3"]);
    let ok = data_dir(tmp.path(), "ok");
    cell(&clean, &manifest, &ok, "K4", 12, &[]);
    let (code, out) = anvil_check(&ok, PLAN, &manifest);
    assert_eq!(code, Some(4), "no stop rule, evidence missing:\n{out}");
    says(&out, "stop rules\n  none fired");
    assert!(advance(&out, "K4", "completion").ends_with("pass"), "{out}");

    let restarting = Sim::start(&["--fault", "restart=0.5", "--seed", "3"]);
    let bad = data_dir(tmp.path(), "bad");
    cell(&restarting, &manifest, &bad, "K4", 12, &[]);
    let (code, out) = anvil_check(&bad, PLAN, &manifest);
    assert_eq!(code, Some(1), "{out}");
    let stop = out
        .lines()
        .find(|l| l.contains("STOP restart"))
        .unwrap_or_else(|| panic!("no restart stop:\n{out}"));
    says(stop, "replica 0 restarted (process_start_time_seconds");
    let completion = advance(&out, "K4", "completion");
    says(completion, "FAIL");
    says(completion, "restart");
}

#[test]
fn failed_requests_with_an_error_text_fail_completion_without_an_unexplained_loss() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = small_manifest(tmp.path(), |_| {});
    let sim = Sim::start(&["--fault", "disconnect=0.3", "--seed", "5"]);
    let data = data_dir(tmp.path(), "data");
    cell(&sim, &manifest, &data, "K4", 12, &[]);
    let (code, out) = anvil_check(&data, PLAN, &manifest);
    // Every failed request says why (the stream ended without [DONE]): the loss is
    // explained, so no stop rule fires, but the arm does not advance.
    says(&out, "stop rules\n  none fired");
    assert_ne!(code, Some(0), "{out}");
    let completion = advance(&out, "K4", "completion");
    says(completion, "FAIL");
    says(completion, "disconnected");
}

#[test]
fn an_in_stream_cuda_error_is_its_own_outcome_and_stops_the_campaign() {
    // vLLM and SGLang end a failed generation with `data: {"error": ...}` mid-stream; the
    // simulator's says "CUDA error: an illegal memory access was encountered".
    let tmp = tempfile::tempdir().unwrap();
    let manifest = small_manifest(tmp.path(), |_| {});
    let sim = Sim::start(&["--fault", "stream-error=0.3", "--seed", "5"]);
    let data = data_dir(tmp.path(), "data");
    cell(&sim, &manifest, &data, "K4", 12, &[]);
    let (code, out) = anvil_check(&data, PLAN, &manifest);
    assert_eq!(code, Some(1), "{out}");
    let stop = out
        .lines()
        .find(|l| l.contains("CUDA server errors in requests"))
        .unwrap_or_else(|| panic!("no CUDA stop:\n{out}"));
    says(stop, "STOP");
    let completion = advance(&out, "K4", "completion");
    says(completion, "FAIL");
    says(completion, "stream_error");
}

/// The report's evidence quotes a `stream_error` request's message once: the request's
/// error already carries what the stream said.
#[test]
fn an_in_stream_error_message_is_reported_once() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = small_manifest(tmp.path(), |_| {});
    let sim = Sim::start(&["--fault", "stream-error=0.3", "--seed", "5"]);
    let data = data_dir(tmp.path(), "data");
    cell(&sim, &manifest, &data, "K4", 12, &[]);
    let report = tmp.path().join("report.md");
    let (code, out) = anvil(&[
        "report",
        "--data",
        data.to_str().unwrap(),
        "--plan",
        PLAN,
        "--manifest",
        manifest.to_str().unwrap(),
        "--format",
        "md",
        "--out",
        report.to_str().unwrap(),
    ])
    .said();
    assert_eq!(code, Some(0), "{out}");
    let md = std::fs::read_to_string(&report).unwrap();
    let rows: Vec<&str> = md
        .lines()
        .filter(|l| l.contains(r"| stream\_error |"))
        .collect();
    assert!(!rows.is_empty(), "no stream_error evidence:\n{md}");
    for row in rows {
        assert_eq!(
            row.matches("an illegal memory access was encountered")
                .count(),
            1,
            "{row}"
        );
    }
}

/// A server stopped during a run that stays down did not restart: `anvil check` says its
/// replica stopped answering, when it last answered and how the requests after that failed,
/// and never calls it a restart.
#[test]
fn a_server_stopped_for_good_stopped_answering_and_did_not_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = small_manifest(tmp.path(), |_| {});
    let sim = Sim::start(&["--seed", "3"]);
    let data = data_dir(tmp.path(), "data");
    let url = sim.url(0);
    // Paced, so the run goes on after the stop and its later requests find nobody there.
    let child = Recording::cell(&manifest, &data, 2, 30)
        .args(&["--rate", "5"])
        .arm("K4")
        .endpoint(&url)
        .spawn();
    // Stop the server for good once the run has recorded a few scrapes of it.
    let dir = data.join(
        "2026-09-04-qwen38-27b-pro6000-possibility/K4/headline-sustained-output.ctx512.c2.n30.rate5",
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::fs::read_dir(dir.join("scrapes.parts")).map_or(0, |d| d.count()) < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the run did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    sim.terminate();
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    let rows = super::common::sql_rows(
        &data,
        "SELECT signal, failed_after, failed_after_outcomes FROM restarts",
    );
    assert_eq!(rows[0]["signal"], "stopped_answering", "{rows:?}\n{stderr}");
    assert!(rows[0]["failed_after"].as_i64().unwrap() > 0, "{rows:?}");
    assert!(
        rows[0]["failed_after_outcomes"]
            .as_str()
            .unwrap()
            .contains("connect_error"),
        "{rows:?}"
    );
    let (code, out) = anvil_check(&data, PLAN, &manifest);
    assert_eq!(code, Some(1), "{out}");
    let stop = out
        .lines()
        .find(|l| l.contains("STOP restart"))
        .unwrap_or_else(|| panic!("no restart-rule stop:\n{out}"));
    says(stop, "replica 0 stopped answering (its last answer");
    says(stop, "it did not come back");
    assert!(!stop.contains("restarted"), "{stop}");
    let completion = advance(&out, "K4", "completion");
    says(completion, "FAIL");
    says(completion, "stopped answering");
}

#[test]
fn replies_without_usage_make_token_figures_incomplete_everywhere_they_are_shown() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = small_manifest(tmp.path(), |_| {});
    let sim = Sim::start(&["--fault", "no-usage=0.3", "--seed", "11"]);
    let data = data_dir(tmp.path(), "data");
    let dir = cell(&sim, &manifest, &data, "K4", 12, &[]);
    let base = cell(&sim, &manifest, &data, "K8", 12, &["--set", "spec_k=8"]);
    let gap = "successful measured requests carried no API usage; token figures";

    let (code, out) = anvil(&["summary", "--data", dir.to_str().unwrap()]).said();
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("WARNING: run ") && out.contains(gap), "{out}");

    let (code, out) = anvil_check(&data, PLAN, &manifest);
    assert_eq!(code, Some(1), "{out}");
    let claim = advance(&out, "K4", "performance claim");
    says(claim, "FAIL");
    says(claim, "carried no");

    let (code, out) = anvil_compare(
        path(&manifest),
        &[dir.to_str().unwrap(), base.to_str().unwrap()],
    )
    .said();
    assert!(matches!(code, Some(0) | Some(3)), "{out}");
    assert!(out.contains(gap), "{out}");
}

#[test]
fn events_that_cannot_be_parsed_are_parser_corruption() {
    // One extra `data:` line that is not JSON; the stream goes on and the request is `ok`.
    let tmp = tempfile::tempdir().unwrap();
    let manifest = small_manifest(tmp.path(), |_| {});
    let sim = Sim::start(&["--fault", "malformed=0.3", "--seed", "11"]);
    let data = data_dir(tmp.path(), "data");
    let dir = cell(&sim, &manifest, &data, "K4", 12, &[]);
    let (code, out) = anvil_check(&data, PLAN, &manifest);
    assert_eq!(code, Some(1), "{out}");
    let stop = out
        .lines()
        .find(|l| l.contains("STOP parser corruption"))
        .unwrap_or_else(|| panic!("no parser corruption stop:\n{out}"));
    says(stop, "could not be parsed (request ");
    says(stop, "invalid JSON");
    let (_, out) = anvil(&["summary", "--data", dir.to_str().unwrap()]).said();
    says(&out, "have events that could not be parsed");
}

#[test]
fn output_length_mismatch_warns_that_throughput_is_not_comparable() {
    let tmp = tempfile::tempdir().unwrap();
    // Replies asked for "about 24 words" come back at 24 words from any simulator: the
    // lengths are realized alike.
    let manifest = small_manifest(tmp.path(), |_| {});
    let m = manifest.to_str().unwrap();
    let compare =
        |x: &Path, y: &Path| anvil_compare(m, &[x.to_str().unwrap(), y.to_str().unwrap()]).said();
    let one = Sim::start(&["--seed", "9"]);
    let two = Sim::start(&["--seed", "10"]);
    let a = cell(&one, &manifest, &tmp.path().join("a"), "A", 12, &[]);
    let b = cell(&two, &manifest, &tmp.path().join("b"), "B", 12, &[]);
    let (code, out) = compare(&a, &b);
    assert_eq!(code, Some(0), "{out}");
    says(&out, "B: output lengths realized alike");
    assert!(!out.contains("not comparable"), "{out}");

    // Natural-completion screens from a simulator that writes a quarter as much: the
    // throughput of the shorter arm is not comparable as it stands.
    let screen_manifest = small_manifest(tmp.path(), |m| {
        m["selection"]["headline_max_tokens"] = 512.into();
    });
    let screen = |sim: &Sim, out: &Path, arm: &str| {
        Recording::cell(&screen_manifest, out, 4, 12)
            .set("--class", "optimization-screen")
            .arm(arm)
            .endpoint(&sim.url(0))
            .record()
    };
    let long = Sim::start(&["--mean-words", "80"]);
    let short = Sim::start(&["--mean-words", "20"]);
    let l = screen(&long, &tmp.path().join("l"), "L");
    let s = screen(&short, &tmp.path().join("s"), "S");
    let (code, out) = compare(&l, &s);
    assert_eq!(code, Some(0), "{out}");
    says(
        &out,
        "warning: S vs L: output-length realization differs (completion tokens p50 ",
    );
    says(&out, "throughput is not comparable as it stands");
}

#[test]
fn controls_name_the_one_variable_or_every_confounding_key() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = small_manifest(tmp.path(), |_| {});
    let sim = Sim::start(&[]);
    let base = |arm: &str, sets: &[&str]| {
        let mut extra = Vec::new();
        for s in sets {
            extra.extend(["--set", *s]);
        }
        cell(&sim, &manifest, &tmp.path().join(arm), arm, 8, &extra)
    };
    let k4 = base("K4", &["spec_depth=4", "chunked_prefill=2048"]);
    let k8 = base("K8", &["spec_depth=8", "chunked_prefill=2048"]);
    let k8c = base("K8c", &["spec_depth=8", "chunked_prefill=1024"]);
    let m = manifest.to_str().unwrap();
    let (code, out) = anvil_compare(
        m,
        &[
            "--baseline",
            "K4",
            k4.to_str().unwrap(),
            k8.to_str().unwrap(),
            k8c.to_str().unwrap(),
        ],
    )
    .said();
    assert_eq!(code, Some(0), "{out}");
    says(&out, "K8 vs K4: one variable: spec_depth = 4 vs 8");
    says(
        &out,
        "K8c vs K4: confounded: differs in chunked_prefill, spec_depth",
    );
}

/// The plan's topology stage alone (and a restore stage with its evidence present), with
/// `selected` as the stage's claim.
fn topology_plan(dir: &Path, name: &str, selected: &str) -> PathBuf {
    let mut plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(PLAN).unwrap()).unwrap();
    let stages = plan["execution_order"].as_array().unwrap().clone();
    let mut keep: Vec<serde_json::Value> = stages
        .into_iter()
        .filter(|s| s["stage"] == "matched topology" || s["stage"] == "restore")
        .collect();
    keep[0]["selected"] = selected.into();
    keep[0].as_object_mut().unwrap().remove("rejected");
    plan["execution_order"] = keep.into();
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, plan.to_string()).unwrap();
    path
}

#[test]
fn topology_efficiency_comes_from_the_recorded_throughput_and_claims_wait_for_equal_load() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = small_manifest(tmp.path(), |_| {});
    let data = data_dir(tmp.path(), "data");
    // TP2 is faster per replica than TP1; DP2 is two TP1 replicas. Three runs of each: a
    // throughput claim needs run-to-run uncertainty to be decided.
    let tp1 = Sim::start(&["--decode-tps", "400", "--seed", "1"]);
    let tp2 = Sim::start(&["--decode-tps", "600", "--seed", "1"]);
    let dp2 = Sim::start(&["--decode-tps", "400", "--replicas", "2", "--seed", "1"]);
    cell(
        &tp1,
        &manifest,
        &data,
        "TP1",
        16,
        &["--set", "topology=TP1", "--repeat", "3"],
    );
    cell(
        &tp2,
        &manifest,
        &data,
        "TP2",
        16,
        &["--set", "topology=TP2", "--repeat", "3"],
    );
    let second = dp2.url(1);
    cell(
        &dp2,
        &manifest,
        &data,
        "two independent TP1 replicas",
        16,
        &[
            "--set",
            "topology=DP2",
            "--endpoint",
            &second,
            "--repeat",
            "3",
        ],
    );

    let supported = topology_plan(tmp.path(), "dp2", "DP2 for aggregate throughput");
    let (_, out) = anvil_check(&data, supported.to_str().unwrap(), &manifest);
    for header in ["tok/s per GPU", "scaling efficiency"] {
        assert!(out.contains(header), "{header} missing:\n{out}");
    }
    // The figures themselves from the JSON form (the text rounds them for reading).
    let (d, plan, m) = (path(&data), path(&supported), path(&manifest));
    let check = ["check", "--data", d, "--plan", plan, "--manifest", m];
    let o = anvil(&[&check[..], &["--format", "json"]].concat());
    let report: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let rows = report["topology"][0]["rows"].as_array().unwrap();
    let row = |arm: &str| {
        rows.iter()
            .find(|r| r["arm"] == arm)
            .unwrap_or_else(|| panic!("no topology row for {arm}: {report}"))
    };
    let (tp1_row, tp2_row) = (row("TP1"), row("TP2"));
    assert_eq!(
        tp2_row["gpus"],
        serde_json::json!({"count": 2, "derived": true}),
        "TP2 counts two GPUs, from its topology: {tp2_row}"
    );
    let figure = |r: &serde_json::Value, k: &str| r[k].as_f64().unwrap();
    let (tps1, tps2) = (figure(tp1_row, "output_tps"), figure(tp2_row, "output_tps"));
    let per_gpu2 = figure(tp2_row, "output_tps_per_gpu");
    let eff2 = figure(tp2_row, "scaling_efficiency");
    assert!((per_gpu2 - tps2 / 2.0).abs() < 1e-9, "{tp2_row}");
    assert!(
        (eff2 - tps2 / (2.0 * tps1)).abs() < 1e-9,
        "{tp2_row} vs {tp1_row}"
    );
    // DP2 holds 16 in flight against TP1's and TP2's 8 (and 8 requests per replica against
    // 16): no aggregate throughput verdict stands between them, whatever the figures; the
    // claim points to the capacity search that compares them at equal load.
    says(
        &out,
        "selected \"DP2 for aggregate throughput\": not testable",
    );
    says(
        &out,
        "aggregate throughput not testable at equal load: load differs",
    );
    says(&out, "capacity");
    assert_eq!(tp2_row["runs"], 3, "{tp2_row}");

    // Nor does the same evidence contradict a claim that TP1 has the highest throughput: TP1
    // and TP2 run on different GPU counts.
    let unsupported = topology_plan(tmp.path(), "tp1", "TP1 for aggregate throughput");
    let (code, out) = anvil_check(&data, unsupported.to_str().unwrap(), &manifest);
    assert_ne!(code, Some(1), "{out}");
    says(
        &out,
        "selected \"TP1 for aggregate throughput\": not testable",
    );
    says(
        &out,
        "load differs (in flight on equal GPUs and requests per replica)",
    );
}
