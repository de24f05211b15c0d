//! One run from several client processes: three `anvil-capture run --shard I/3` processes
//! against `anvil-sim --replicas 3`, one `--start-at`, read back as one logical run; and a
//! killed shard, which leaves the run group incomplete and named.

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use super::common::{
    ANVIL, CAPTURE, Recording, Sim, anvil, batches, ints, output_text as text, run, says, strs,
};

const CELL: &str = "headline-sustained-output.ctx512.c4.n30";

pub(super) fn manifest(dir: &Path) -> PathBuf {
    let src = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/sample-data/workload-manifest.json"
    );
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(src).unwrap()).unwrap();
    v["selection"]["headline_response_words"] = 24.into();
    v["selection"]["headline_max_tokens"] = 64.into();
    let path = dir.join("manifest.json");
    std::fs::write(&path, v.to_string()).unwrap();
    path
}

/// `--start-at`: `ahead` from now, to the second (RFC 3339 UTC).
pub(super) fn start_at(ahead: Duration) -> String {
    let t = time::OffsetDateTime::now_utc() + ahead;
    let t = t.replace_nanosecond(0).unwrap() + Duration::from_secs(1);
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

fn shard(sim: &Sim, manifest: &Path, out: &Path, index: u32, at: &str) -> Child {
    shard_with(sim, manifest, out, index, at, &[], &[])
}

/// Shard `index` of 3 with `extra` arguments and environment.
pub(super) fn shard_with(
    sim: &Sim,
    manifest: &Path,
    out: &Path,
    index: u32,
    at: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Child {
    let shard = format!("{index}/3");
    let mut recording = Recording::cell(manifest, out, 4, 30)
        .arm("K12")
        .args(&["--stage", "test", "--no-realtime"])
        .args(&["--shard", &shard, "--start-at", at]);
    for r in 0..3 {
        recording = recording.endpoint(&sim.url(r));
    }
    for (k, v) in env {
        recording = recording.env(k, v);
    }
    recording.args(extra).spawn()
}

fn cell_dir(out: &Path) -> PathBuf {
    out.join("2026-09-04-qwen38-27b-pro6000-possibility")
        .join("K12")
        .join(CELL)
}

#[test]
fn three_shards_are_one_run_with_every_index_once() {
    let sim = Sim::start(&["--replicas", "3"]);
    let dir = tempfile::tempdir().unwrap();
    let manifest = manifest(dir.path());
    let out = dir.path().join("out");
    let at = start_at(Duration::from_secs(6));
    let children: Vec<Child> = (0..3)
        .map(|i| shard(&sim, &manifest, &out, i, &at))
        .collect();
    for child in children {
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", text(&o));
    }
    // Each shard: its indices only, its workers on the replicas the single host would use.
    let mut all = Vec::new();
    let mut canaries = Vec::new();
    for i in 0..3u32 {
        let d = cell_dir(&out).join(format!("shard-{i}-of-3"));
        let run: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join("run.json")).unwrap()).unwrap();
        assert_eq!(run["shard"]["index"], i);
        assert_eq!(run["shard"]["of"], 3);
        assert!(run["run_id"].as_str().unwrap().contains("-group-"), "{run}");
        let late = run["shard"]["started_late_ms"].as_f64().unwrap();
        assert!((0.0..1000.0).contains(&late), "started {late} ms late");
        assert!(run["shard"]["clock"]["max_error_ns"].is_i64(), "{run}");
        let b = batches(&d.join("requests.parquet"));
        let kinds = strs(&b, "kind");
        let idx: Vec<i64> = ints(&b, "request_index")
            .into_iter()
            .zip(&kinds)
            .filter(|(_, k)| k.as_deref() == Some("measured"))
            .map(|(i, _)| i.unwrap())
            .collect();
        assert_eq!(idx.len(), 10, "shard {i}: {idx:?}");
        assert!(
            idx.iter().all(|x| x % 3 == i64::from(i)),
            "shard {i}: {idx:?}"
        );
        // Worker k of the single host targets replica k mod 3: shard i's are all replica i.
        let replicas = ints(&b, "replica");
        assert!(
            replicas
                .iter()
                .zip(&kinds)
                .filter(|(_, k)| k.as_deref() == Some("measured"))
                .all(|(r, _)| *r == Some(i64::from(i))),
            "shard {i}: {replicas:?}"
        );
        all.extend(idx);
        canaries.extend(strs(&b, "canary").into_iter().flatten());
    }
    all.sort_unstable();
    assert_eq!(all, (0..30).collect::<Vec<i64>>());
    let distinct: std::collections::BTreeSet<&String> = canaries.iter().collect();
    assert_eq!(
        distinct.len(),
        canaries.len(),
        "a canary repeats across shards"
    );
    // The analysis: one run, its statistics over the union, polars agreeing.
    let data = out.to_str().unwrap();
    let csv = |q: &str| anvil(&["sql", "--format", "csv", "--data", data, q]);
    let o = csv("SELECT run_id, shards, total_requests, status FROM runs");
    assert!(o.ok(), "{o:?}");
    let rows = o.stdout;
    assert_eq!(rows.lines().count(), 2, "one logical run: {rows}");
    assert!(rows.contains(",3,30,complete"), "{rows}");
    let o = csv("SELECT count(*) AS n, count(DISTINCT request_index) AS d FROM request_metrics");
    says(&o.stdout, "30,30");
    // The p99 of TTFT over the union, from the view and from the raw rows concatenated.
    let q = "SELECT (SELECT p99 FROM cell_stats WHERE metric = 'ttft_ms' AND window = 'all') \
             = (SELECT nearest_rank(ttft_ms, 0.99) FROM request_metrics WHERE outcome = 'ok') \
             AS same";
    let o = csv(q);
    assert!(o.stdout.contains("true"), "{o:?}");
    let o = run(ANVIL, &["verify", "--data", data], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let o = run(ANVIL, &["summary", "--data", data], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let summary = String::from_utf8_lossy(&o.stdout);
    assert!(summary.contains("one run from 3 client hosts"), "{summary}");
    assert!(
        summary.contains("requests 0–11, 12 of 30 measured"),
        "{summary}"
    );
    sim.terminate();
}

#[test]
fn a_killed_shard_leaves_its_run_group_incomplete_and_named() {
    let sim = Sim::start(&["--replicas", "3"]);
    let dir = tempfile::tempdir().unwrap();
    let manifest = manifest(dir.path());
    let out = dir.path().join("out");
    let at = start_at(Duration::from_secs(8));
    let mut children: Vec<Child> = (0..3)
        .map(|i| shard(&sim, &manifest, &out, i, &at))
        .collect();
    // Shard 2 is killed while it waits for the instant: its artifact says `running`.
    let killed = cell_dir(&out).join("shard-2-of-3");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !killed.join("run.json").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "shard 2 wrote no run.json"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    children[2].kill().unwrap();
    let _ = children[2].wait();
    for child in children.drain(..2) {
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", text(&o));
    }
    let data = out.to_str().unwrap();
    let o = run(ANVIL, &["summary", "--data", data], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        err.contains("shard-2-of-3") && err.contains("anvil-capture recover"),
        "{err}"
    );
    // Recovered, it is an interrupted shard without its requests: the group is refused.
    let o = run(CAPTURE, &["recover", killed.to_str().unwrap()], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let o = run(ANVIL, &["summary", "--data", data], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(err.contains("is not one whole run"), "{err}");
    assert!(
        err.contains("10 of the cell's 30 measured requests are in no shard"),
        "{err}"
    );
    // Without the killed shard's folder, the shard itself is named missing.
    std::fs::remove_dir_all(&killed).unwrap();
    let o = run(ANVIL, &["summary", "--data", data], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("shard 2/3 is missing"),
        "{}",
        text(&o)
    );
    sim.terminate();
}

#[test]
fn shard_flags_are_checked() {
    let soon = start_at(Duration::from_secs(60));
    let dir = tempfile::tempdir().unwrap();
    let manifest = manifest(dir.path());
    let m = manifest.to_str().unwrap();
    let base = [
        "run",
        "--manifest",
        m,
        "--class",
        "headline-sustained-output",
        "--context",
        "512",
        "--concurrency",
        "4",
        "--requests",
        "30",
        "--off-manifest",
        "--arm",
        "K12",
        "--endpoint",
        "http://127.0.0.1:9",
        "--out",
        "/tmp/never",
    ];
    for (extra, says) in [
        (
            vec!["--shard", "3/3", "--start-at", "2030-01-01T00:00:00Z"],
            "0-based",
        ),
        (vec!["--shard", "1/3", "--start-at", "tomorrow"], "RFC 3339"),
        (
            vec!["--shard", "auto", "--start-at", "2030-01-01T00:00:00Z"],
            "SLURM_PROCID",
        ),
        (vec!["--shard", "1/3"], "--start-at"),
        // 4 workers (C4 × 1 replica) do not split over 3 shards.
        (vec!["--shard", "1/3", "--start-at", &soon], "split evenly"),
        (
            vec!["--shard", "1/4", "--start-at", "2020-01-01T00:00:00Z"],
            "in the past",
        ),
        (
            vec!["--shard", "1/4", "--start-at", "2099-01-01T00:00:00Z"],
            "more than a day ahead",
        ),
    ] {
        let args: Vec<&str> = base.iter().copied().chain(extra.iter().copied()).collect();
        let o = run(CAPTURE, &args, &[]);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(says),
            "{extra:?}: {}",
            text(&o)
        );
    }
    let functional: Vec<&str> = base
        .iter()
        .map(|a| match *a {
            "headline-sustained-output" => "functional",
            "30" => "32",
            other => other,
        })
        .chain(["--shard", "1/4", "--start-at", &soon])
        .collect();
    let o = run(CAPTURE, &functional, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("one host"),
        "{}",
        text(&o)
    );
}
