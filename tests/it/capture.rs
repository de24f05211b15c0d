//! `anvil-capture` end to end: the real binary against the real `anvil-sim` on loopback,
//! artifacts read back with the artifact reader and checked by `anvil validate`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use anvil::artifact::{RunJson, canary};
use serde_json::Value;

use super::common::{
    ANVIL, CAPTURE, Recording, Sim, artifact_of, batches, bools, intended_and_sent, ints,
    measured_requests, run, strs,
};

/// The sample manifest with a short reply (24 words, 64-token ceiling) so runs are quick.
fn quick_manifest(dir: &Path) -> PathBuf {
    let src = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/sample-data/workload-manifest.json"
    );
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(src).unwrap()).unwrap();
    v["selection"]["headline_response_words"] = 24.into();
    v["selection"]["headline_max_tokens"] = 64.into();
    let path = dir.join("manifest.json");
    std::fs::write(&path, v.to_string()).unwrap();
    path
}

/// A small off-manifest headline-shaped cell of arm K12 (spec depth 12) in stage `test`.
fn k12(manifest: &Path, out: &Path, concurrency: u32, requests: u32) -> Recording {
    Recording::cell(manifest, out, concurrency, requests).args(&[
        "--arm",
        "K12",
        "--stage",
        "test",
        "--set",
        "spec_depth=12",
    ])
}

/// A test bed: a temporary folder, the quick manifest in it, the output folder beneath it,
/// and a simulator started with `sim_args`.
fn bed(sim_args: &[&str]) -> (tempfile::TempDir, PathBuf, PathBuf, Sim) {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = quick_manifest(tmp.path());
    let out = tmp.path().join("out");
    (tmp, manifest, out, Sim::start(sim_args))
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn validate(dir: &Path) {
    let o = run(ANVIL, &["validate", dir.to_str().unwrap()], &[]);
    assert!(
        o.status.success(),
        "anvil validate refused {}: {}{}",
        dir.display(),
        stdout(&o),
        stderr(&o)
    );
}

/// Per request: concatenated content, whether [DONE] came, usage prompt/completion tokens,
/// whether any event failed to parse.
#[derive(Debug, Default)]
struct Stream {
    content: String,
    done: bool,
    prompt_tokens: Option<i64>,
    completion_tokens: Option<i64>,
    parse_errors: usize,
    events: usize,
}

fn streams(dir: &Path) -> BTreeMap<i64, Stream> {
    let b = batches(&dir.join("events.parquet"));
    let idx = ints(&b, "request_index");
    let seq = ints(&b, "seq");
    let content = strs(&b, "content_delta");
    let done = bools(&b, "done");
    let prompt = ints(&b, "usage_prompt_tokens");
    let completion = ints(&b, "usage_completion_tokens");
    let parse = strs(&b, "parse_error");
    let mut order: Vec<usize> = (0..idx.len()).collect();
    order.sort_by_key(|&i| (idx[i], seq[i]));
    let mut out: BTreeMap<i64, Stream> = BTreeMap::new();
    for i in order {
        let s = out.entry(idx[i].unwrap()).or_default();
        s.events += 1;
        if let Some(c) = &content[i] {
            s.content.push_str(c);
        }
        s.done |= done[i];
        s.prompt_tokens = s.prompt_tokens.or(prompt[i]);
        s.completion_tokens = s.completion_tokens.or(completion[i]);
        s.parse_errors += usize::from(parse[i].is_some());
    }
    out
}

#[test]
fn a_headline_shaped_cell_gives_a_complete_valid_artifact() {
    let (_tmp, manifest, out, sim) = bed(&[]);
    let url = sim.url(0);
    let o = k12(&manifest, &out, 4, 20).endpoint(&url).run();
    let dir = artifact_of(&o);
    assert!(dir.ends_with(
        "2026-09-04-qwen38-27b-pro6000-possibility/K12/headline-sustained-output.ctx512.c4.n20"
    ));
    validate(&dir);

    let run_json = RunJson::read(&dir.join("run.json")).unwrap();
    run_json.check(&dir.join("run.json")).unwrap();
    assert_eq!(run_json.status.as_str(), "complete");
    assert_eq!(
        run_json.workload_fingerprint,
        run_json.workload.fingerprint()
    );
    let w = &run_json.workload;
    assert_eq!(
        (
            w.prompt_tokens_target,
            w.concurrency_per_replica,
            w.total_requests
        ),
        (512, 4, 20)
    );
    assert_eq!((w.response_words, w.max_tokens), (Some(24), 64));
    assert!(w.off_manifest && w.canaries);
    assert_eq!(w.prompt_cache_mode, "unique");
    assert_eq!(run_json.arm.name, "K12");
    assert_eq!(run_json.arm.stage, "test");
    assert_eq!(run_json.arm.config.get("spec_depth"), Some("12"));
    // From /v1/models' owned_by and /version, as for vLLM.
    assert_eq!(
        run_json.arm.runtime,
        format!("anvil-sim {}", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(run_json.topology.replica_count, 1);
    assert_eq!(run_json.topology.endpoints[0].model, "anvil-sim");
    assert_eq!(run_json.topology.endpoints[0].url, url);
    assert!(!run_json.topology.endpoints[0].server_info.is_empty());
    assert!(run_json.ended_utc.is_some());
    assert!(run_json.command_line.iter().any(|a| a == "--off-manifest"));
    assert_eq!(run_json.counts.requests_measured, 20);
    assert_eq!(run_json.counts.succeeded, 20);
    assert!(run_json.counts.scrapes > 0, "before/after scrapes recorded");

    let r = measured_requests(&dir);
    let idx = ints(&r, "request_index");
    assert_eq!(idx.len(), 20);
    // The first wave's intended time is the synchronised release: one instant for all of
    // it, so a slot that started late shows as client-side queueing.
    let intended: BTreeMap<i64, i64> = idx
        .iter()
        .zip(ints(&r, "t_intended_ns"))
        .map(|(i, t)| (i.unwrap(), t.unwrap()))
        .collect();
    let c = run_json.workload.concurrency_per_replica as i64;
    let first: BTreeSet<i64> = (0..c).map(|i| intended[&i]).collect();
    assert_eq!(
        first.len(),
        1,
        "first wave intended at one instant: {intended:?}"
    );
    assert!(
        intended[&c] > intended[&0],
        "later requests are intended when a slot frees"
    );
    let set: BTreeSet<i64> = idx.iter().map(|i| i.unwrap()).collect();
    assert_eq!(set, (0..20).collect());
    assert!(
        strs(&r, "kind")
            .iter()
            .all(|k| k.as_deref() == Some("measured"))
    );
    assert!(
        strs(&r, "outcome")
            .iter()
            .all(|k| k.as_deref() == Some("ok"))
    );
    let canaries: Vec<String> = strs(&r, "canary").into_iter().map(Option::unwrap).collect();
    let unique: BTreeSet<&String> = canaries.iter().collect();
    assert_eq!(unique.len(), 20, "canaries are unique");
    let events_per_request = ints(&r, "events");
    let s = streams(&dir);
    let total: i64 = events_per_request.iter().map(|e| e.unwrap()).sum();
    assert_eq!(total as u64, run_json.counts.events);
    assert_eq!(s.values().map(|s| s.events).sum::<usize>() as i64, total);
    let tol = 8.max(512usize.div_ceil(100)) as i64;
    for (k, i) in idx.iter().enumerate() {
        let st = &s[&i.unwrap()];
        assert!(st.done, "request {i:?} ends with [DONE]");
        let p = st.prompt_tokens.expect("usage prompt tokens");
        assert!((p - 512).abs() <= tol, "request {i:?}: {p} prompt tokens");
        assert!(st.content.contains(&canaries[k]), "own canary echoed");
        assert_eq!(canary::find_all(&st.content).len(), 1);
        let sent = ints(&r, "t_sent_ns")[k].unwrap();
        assert!(sent >= ints(&r, "t_intended_ns")[k].unwrap());
    }
    // The request id the server saw joins with run_id-request_index.
    assert!(run_json.run_id.is_ascii() && !run_json.run_id.is_empty());
}

#[test]
fn cells_lists_the_manifest_cells_with_stable_ids() {
    let manifest = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/sample-data/workload-manifest.json"
    );
    let o = run(CAPTURE, &["cells", "--manifest", manifest], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let ids: Vec<&str> = text
        .lines()
        .skip(1)
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    assert!(ids.contains(&"headline-sustained-output.ctx4096.c8.n100"));
    assert!(ids.contains(&"context-curve.ctx81920.c8.n100"));
    assert!(ids.contains(&"optimization-screen.ctx4096.c1.n3"));
    let line = text
        .lines()
        .find(|l| l.starts_with("headline-sustained-output."))
        .unwrap();
    assert_eq!(
        line,
        "headline-sustained-output.ctx4096.c8.n100\theadline-sustained-output\t4096\t8\t100\t256\t512\tabout-words"
    );
}

#[test]
fn two_replicas_start_together_and_each_request_names_its_replica() {
    let (_tmp, manifest, out, sim) = bed(&["--replicas", "2"]);
    let (u0, u1) = (sim.url(0), sim.url(1));
    let o = k12(&manifest, &out, 2, 20)
        .endpoint(&u0)
        .endpoint(&u1)
        .run();
    let dir = artifact_of(&o);
    validate(&dir);
    let run_json = RunJson::read(&dir.join("run.json")).unwrap();
    assert_eq!(run_json.topology.replica_count, 2);
    let r = measured_requests(&dir);
    let replica = ints(&r, "replica");
    let endpoint = strs(&r, "endpoint");
    let (intended, sent, done) = (
        ints(&r, "t_intended_ns"),
        ints(&r, "t_sent_ns"),
        ints(&r, "t_done_ns"),
    );
    // Each replica's first request: (intended, sent, done) of its earliest send.
    let mut first: HashMap<i64, (i64, i64, i64)> = HashMap::new();
    for k in 0..replica.len() {
        let rep = replica[k].unwrap();
        let want = if rep == 0 { &u0 } else { &u1 };
        assert_eq!(endpoint[k].as_deref(), Some(want.as_str()));
        let row = (intended[k].unwrap(), sent[k].unwrap(), done[k].unwrap());
        first
            .entry(rep)
            .and_modify(|f| {
                if row.1 < f.1 {
                    *f = row;
                }
            })
            .or_insert(row);
    }
    assert_eq!(first.len(), 2, "both replicas used");
    let (a, b) = (first[&0], first[&1]);
    // Released by one barrier: the same intended time, to the nanosecond.
    assert_eq!(
        a.0, b.0,
        "first requests' intended times differ: {a:?} {b:?}"
    );
    // And sent together: each replica's first request went out while the other's was still
    // running (a timing bound would measure the machine's load, not the release).
    assert!(
        b.1 < a.2 && a.1 < b.2,
        "first requests did not overlap (intended, sent, done): {a:?} {b:?}"
    );
}

#[test]
fn faults_get_their_outcome_class_and_no_request_is_lost() {
    let (_tmp, manifest, out, sim) = bed(&[
        "--seed",
        "7",
        "--fault",
        "http500=0.08",
        "--fault",
        "http429=0.08",
        "--fault",
        "disconnect=0.08",
        "--fault",
        "malformed=0.08",
        "--fault",
        "stall=0.08",
        "--fault",
        "no-usage=0.08",
        "--fault",
        "restart=0.03",
        "--stall-ms",
        "1500",
    ]);
    let url = sim.url(0);
    let o = k12(&manifest, &out, 4, 80)
        .endpoint(&url)
        .args(&["--timeout-idle", "0.5"])
        .run();
    let dir = artifact_of(&o);
    validate(&dir);
    let r = measured_requests(&dir);
    let idx = ints(&r, "request_index");
    assert_eq!(
        idx.iter().map(|i| i.unwrap()).collect::<BTreeSet<_>>(),
        (0..80).collect(),
        "every request has its row"
    );
    let outcome = strs(&r, "outcome");
    let status = ints(&r, "http_status");
    let error = strs(&r, "error");
    let s = streams(&dir);
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    let (mut malformed_ok, mut no_usage_ok) = (0, 0);
    for k in 0..idx.len() {
        let o = outcome[k].clone().unwrap();
        *by.entry(o.clone()).or_default() += 1;
        let st = s.get(&idx[k].unwrap());
        match o.as_str() {
            "ok" => {
                let st = st.unwrap();
                assert!(st.done);
                assert_eq!(status[k], Some(200));
                malformed_ok += usize::from(st.parse_errors > 0);
                no_usage_ok += usize::from(st.completion_tokens.is_none());
                if st.parse_errors == 0 && st.completion_tokens.is_some() {
                    assert!(st.content.contains("ANV-"), "an unaffected reply is whole");
                }
            }
            "http_error" => {
                assert!(matches!(status[k], Some(500 | 429)), "{:?}", status[k]);
                assert!(error[k].as_deref().is_some_and(|e| e.contains("error")));
            }
            "timeout_idle" => assert!(st.is_some_and(|st| !st.done)),
            "disconnected" => assert!(st.is_none_or(|st| !st.done)),
            other => panic!("unexpected outcome {other}: {:?}", error[k]),
        }
    }
    for class in ["ok", "http_error", "timeout_idle", "disconnected"] {
        assert!(by.contains_key(class), "no {class} among {by:?}");
    }
    assert!(malformed_ok > 0, "a malformed line leaves the request ok");
    assert!(
        no_usage_ok > 0,
        "a missing usage chunk leaves the request ok"
    );
    let codes: BTreeSet<i64> = status.iter().flatten().copied().collect();
    assert!(codes.contains(&500) && codes.contains(&429), "{codes:?}");
}

#[test]
fn a_killed_run_is_recovered_with_every_request_finished_two_seconds_before() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = quick_manifest(tmp.path());
    let out = tmp.path().join("out");
    let truth = tmp.path().join("truth.csv");
    let sim = Sim::start(&["--decode-tps", "300", "--truth", truth.to_str().unwrap()]);
    let url = sim.url(0);
    let mut child = k12(&manifest, &out, 2, 400).endpoint(&url).spawn();
    // Kill once the run has been recording for a few seconds: four request parts on disk
    // (one roll per second; the first holds the calibration probe), however long calibration
    // took on a loaded machine.
    let dir = out.join(
        "2026-09-04-qwen38-27b-pro6000-possibility/K12/headline-sustained-output.ctx512.c2.n400",
    );
    let parts = dir.join("requests.parts");
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let n = std::fs::read_dir(&parts).map_or(0, |d| {
            d.filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".parquet"))
            })
            .count()
        });
        if n >= 4 || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    child.kill().unwrap(); // SIGKILL
    let killed_at = anvil::clock::monotonic_ns();
    let _ = child.wait();
    sim.terminate();

    // Killed and not recovered: every reading command refuses it as `validate` does.
    #[cfg(feature = "analysis")]
    for args in [
        vec![
            "sql",
            "--data",
            dir.to_str().unwrap(),
            "SELECT count(*) FROM requests",
        ],
        vec!["summary", "--data", dir.to_str().unwrap()],
        vec!["validate", dir.to_str().unwrap()],
    ] {
        let o = run(super::common::ANVIL, &args, &[]);
        let said = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
        assert_eq!(o.status.code(), Some(2), "anvil {args:?}: {said}");
        assert!(
            said.contains("anvil-capture recover"),
            "anvil {args:?}: {said}"
        );
    }

    let o = run(CAPTURE, &["recover", dir.to_str().unwrap()], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    validate(&dir);
    let run_json = RunJson::read(&dir.join("run.json")).unwrap();
    assert_eq!(run_json.status.as_str(), "interrupted");

    // Last write per request id from the simulator's truth.
    let text = std::fs::read_to_string(&truth).unwrap();
    let mut last: HashMap<String, i64> = HashMap::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        // Event rows only: `request_read` and the prefix cache's rows have no seq.
        if f[2].is_empty() {
            continue;
        }
        let t: i64 = f[6].parse().unwrap();
        let e = last.entry(f[0].to_owned()).or_insert(t);
        *e = (*e).max(t);
    }
    let prefix = format!("{}-", run_json.run_id);
    let finished_early: BTreeSet<i64> = last
        .iter()
        .filter(|(_, t)| **t < killed_at - 2_000_000_000)
        .filter_map(|(id, _)| id.strip_prefix(&prefix)?.parse().ok())
        .collect();
    assert!(
        finished_early.len() > 10,
        "the run should have finished requests well before the kill ({})",
        finished_early.len()
    );
    let r = batches(&dir.join("requests.parquet"));
    let recovered: BTreeSet<i64> = ints(&r, "request_index").into_iter().flatten().collect();
    let missing: Vec<&i64> = finished_early.difference(&recovered).collect();
    assert!(missing.is_empty(), "lost finished requests: {missing:?}");

    // The requests the kill took have no record: an unexplained loss, and the run did not
    // complete. (The rules' side of the same artifact.)
    #[cfg(feature = "analysis")]
    {
        let plan = concat!(env!("CARGO_MANIFEST_DIR"), "/sample-data/run-plan.json");
        let o = run(
            ANVIL,
            &[
                "check",
                "--data",
                dir.to_str().unwrap(),
                "--plan",
                plan,
                "--manifest",
                manifest.to_str().unwrap(),
            ],
            &[],
        );
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(1), "{out}");
        let stop = out
            .lines()
            .find(|l| l.contains("STOP unexplained loss"))
            .unwrap_or_else(|| panic!("no unexplained-loss stop:\n{out}"));
        assert!(
            stop.contains("of 400 planned requests have no record"),
            "{stop}"
        );
        assert!(
            out.lines()
                .any(|l| l.contains("completion") && l.contains("status interrupted")),
            "{out}"
        );
    }
}

#[test]
fn the_api_key_is_written_nowhere() {
    const SECRET: &str = "sk-anvil-test-6a1f0c93d2";
    let (_tmp, manifest, out, sim) = bed(&[]);
    let url = sim.url(0);
    let o = k12(&manifest, &out, 2, 4)
        .loud()
        .endpoint(&url)
        .args(&["--api-key-env", "ANVIL_TEST_KEY"])
        .env("ANVIL_TEST_KEY", SECRET)
        .run();
    let dir = artifact_of(&o);
    assert!(!stdout(&o).contains(SECRET) && !stderr(&o).contains(SECRET));
    let mut files = vec![out.clone()];
    let mut seen = 0;
    while let Some(p) = files.pop() {
        if p.is_dir() {
            files.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else {
            seen += 1;
            let bytes = std::fs::read(&p).unwrap();
            assert!(
                !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
                "{} holds the key",
                p.display()
            );
        }
    }
    assert!(seen >= 4, "{seen} files");
    assert!(dir.join("run.json").exists());
}

#[test]
fn bad_input_is_refused_with_the_flag_named_and_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = quick_manifest(tmp.path());
    let m = manifest.to_str().unwrap();
    let out = tmp.path().join("out");
    let o = out.to_str().unwrap();
    let sim = Sim::start(&[]);
    let url = sim.url(0);
    // A port that refuses connections: bound, then released.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://127.0.0.1:{}", l.local_addr().unwrap().port())
    };
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let base = |class: &'static str| {
        vec![
            "run".to_owned(),
            "--manifest".into(),
            m.into(),
            "--class".into(),
            class.into(),
            "--arm".into(),
            "A".into(),
            "--quiet".into(),
        ]
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            [
                base("no-such-class"),
                vec!["--endpoint".into(), url.clone(), "--out".into(), o.into()],
            ]
            .concat(),
            "--class",
        ),
        (
            [
                base("headline-sustained-output"),
                vec![
                    "--context".into(),
                    "777".into(),
                    "--endpoint".into(),
                    url.clone(),
                    "--out".into(),
                    o.into(),
                ],
            ]
            .concat(),
            "--context 777",
        ),
        (
            [
                base("headline-sustained-output"),
                vec![
                    "--context".into(),
                    "32".into(),
                    "--off-manifest".into(),
                    "--endpoint".into(),
                    url.clone(),
                    "--out".into(),
                    o.into(),
                ],
            ]
            .concat(),
            "the prompt's fixed part",
        ),
        (
            [
                base("headline-sustained-output"),
                vec!["--endpoint".into(), closed, "--out".into(), o.into()],
            ]
            .concat(),
            "unreachable",
        ),
        (
            [
                base("headline-sustained-output"),
                vec![
                    "--endpoint".into(),
                    "localhost:8000".into(),
                    "--out".into(),
                    o.into(),
                ],
            ]
            .concat(),
            "--endpoint",
        ),
        (
            [
                base("headline-sustained-output"),
                vec![
                    "--endpoint".into(),
                    url.clone(),
                    "--out".into(),
                    file.to_str().unwrap().into(),
                ],
            ]
            .concat(),
            "--out",
        ),
        (
            [
                base("headline-sustained-output"),
                vec![
                    "--ramp".into(),
                    "-3".into(),
                    "--endpoint".into(),
                    url.clone(),
                    "--out".into(),
                    o.into(),
                ],
            ]
            .concat(),
            "--ramp `-3`: must be a positive number of seconds",
        ),
    ];
    for (args, expect) in cases {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = run(CAPTURE, &refs, &[]);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {}", stderr(&r));
        assert!(stderr(&r).contains(expect), "{args:?}: {}", stderr(&r));
        assert!(!stderr(&r).contains("panicked"));
    }
    assert!(!out.exists(), "nothing was written for refused runs");
}

/// Wait until `dir/requests.parts` holds `n` part files (one roll per second of recording).
fn wait_for_parts(dir: &Path, n: usize) {
    let parts = dir.join("requests.parts");
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while std::time::Instant::now() < deadline {
        let found = std::fs::read_dir(&parts).map_or(0, |d| {
            d.filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".parquet"))
            })
            .count()
        });
        if found >= n {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no {n} request parts in {} after 120 s", parts.display());
}

#[test]
fn sigint_finishes_in_flight_requests_and_records_the_rest_as_cancelled() {
    interrupted_by(libc::SIGINT);
}

/// SIGTERM, how Kubernetes and Slurm stop a task, ends a capture as SIGINT does.
#[test]
fn sigterm_finishes_in_flight_requests_and_records_the_rest_as_cancelled() {
    interrupted_by(libc::SIGTERM);
}

fn interrupted_by(signal: i32) {
    let (_tmp, manifest, out, sim) = bed(&["--decode-tps", "100"]);
    let url = sim.url(0);
    let child = k12(&manifest, &out, 2, 200).endpoint(&url).spawn();
    let dir = out.join(
        "2026-09-04-qwen38-27b-pro6000-possibility/K12/headline-sustained-output.ctx512.c2.n200",
    );
    wait_for_parts(&dir, 3);
    // SAFETY: plain kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, signal) };
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert_eq!(PathBuf::from(stdout(&o).trim()), dir);
    validate(&dir);
    let run_json = RunJson::read(&dir.join("run.json")).unwrap();
    assert_eq!(run_json.status.as_str(), "interrupted");
    assert!(
        run_json
            .status_reason
            .as_deref()
            .unwrap()
            .contains("SIGINT or SIGTERM")
    );
    let r = measured_requests(&dir);
    let outcome = strs(&r, "outcome");
    assert_eq!(outcome.len(), 200, "every measured request has a row");
    let ok = outcome
        .iter()
        .filter(|o| o.as_deref() == Some("ok"))
        .count();
    let cancelled = outcome
        .iter()
        .filter(|o| o.as_deref() == Some("cancelled"))
        .count();
    assert!(
        ok > 0 && cancelled > 0 && ok + cancelled == 200,
        "{ok} ok, {cancelled} cancelled"
    );
    // In-flight requests had the grace period: none was cut off, so every sent one is ok.
    let sent = ints(&r, "t_sent_ns");
    for k in 0..outcome.len() {
        if sent[k].is_some() {
            assert_eq!(outcome[k].as_deref(), Some("ok"));
        }
    }
    // Scrapes before, during (one per second) and after.
    let s = batches(&dir.join("scrapes.parquet"));
    let phases: BTreeSet<String> = strs(&s, "phase").into_iter().flatten().collect();
    assert_eq!(
        phases,
        ["after", "before", "during"]
            .map(String::from)
            .into_iter()
            .collect()
    );
    drop(sim);
}

#[test]
fn open_loop_records_intended_send_times() {
    let (_tmp, manifest, out, sim) = bed(&[]);
    let url = sim.url(0);
    for (poisson, arm) in [(false, "constant"), (true, "poisson")] {
        let mut cell = k12(&manifest, &out, 4, 20)
            .set("--arm", arm)
            .endpoint(&url)
            .args(&["--rate", "50"])
            .loud();
        if poisson {
            cell = cell.args(&["--poisson"]);
        }
        let o = cell.run();
        // The quick look shows no first wave: open loop releases nothing together.
        let said = stderr(&o);
        assert!(
            said.contains("quick look") && !said.contains("first wave"),
            "{said}"
        );
        let dir = artifact_of(&o);
        validate(&dir);
        let rows = intended_and_sent(&dir);
        assert_eq!(rows.len(), 20);
        let gaps: Vec<i64> = rows.windows(2).map(|w| w[1].1 - w[0].1).collect();
        if poisson {
            assert!(gaps.iter().all(|g| *g >= 0));
            assert!(
                gaps.iter().any(|g| (*g - 20_000_000).abs() > 1_000_000),
                "{gaps:?}"
            );
        } else {
            for g in &gaps {
                assert!((g - 20_000_000).abs() <= 1, "constant 20 ms gaps: {gaps:?}");
            }
        }
        for (i, intended, sent) in &rows {
            assert!(sent >= intended, "request {i} sent before its time");
        }
    }
}

#[test]
fn missing_metrics_give_a_warning_and_an_empty_scrapes_table() {
    let (_tmp, manifest, out, sim) = bed(&[]);
    let url = sim.url(0);
    let metrics = format!("{url}/no-metrics-here");
    let o = k12(&manifest, &out, 2, 4)
        .endpoint(&url)
        .args(&["--metrics-url", &metrics])
        .run();
    let dir = artifact_of(&o);
    assert!(stderr(&o).contains("no metrics"), "{}", stderr(&o));
    validate(&dir);
    let run_json = RunJson::read(&dir.join("run.json")).unwrap();
    assert_eq!(run_json.counts.scrapes, 0);
    assert_eq!(
        run_json.topology.endpoints[0].metrics_url.as_deref(),
        Some(metrics.as_str())
    );
    // Without metrics a restart could not be seen: check says so instead of passing it.
    #[cfg(feature = "analysis")]
    {
        let plan = concat!(env!("CARGO_MANIFEST_DIR"), "/sample-data/run-plan.json");
        let (_, out) = super::common::anvil_check(&dir, plan, &manifest);
        let line = out
            .lines()
            .find(|l| l.contains("restart detection not possible"))
            .unwrap_or_else(|| panic!("no restart-detection note:\n{out}"));
        assert!(line.contains("replica 0"), "{line}");
    }
}

#[test]
fn warmup_requests_are_recorded_with_their_kind_and_not_counted_as_measured() {
    let (_tmp, manifest, out, sim) = bed(&[]);
    let url = sim.url(0);
    let dir = k12(&manifest, &out, 2, 6)
        .endpoint(&url)
        .args(&["--warmup", "3"])
        .record();
    validate(&dir);
    let run_json = RunJson::read(&dir.join("run.json")).unwrap();
    assert_eq!(run_json.counts.requests_measured, 6);
    assert_eq!(run_json.counts.requests_warmup, 3);
    assert_eq!(run_json.workload.total_requests, 6);
    let r = batches(&dir.join("requests.parquet"));
    let mut rows: Vec<(i64, String, i64)> = ints(&r, "request_index")
        .into_iter()
        .zip(strs(&r, "kind"))
        .zip(ints(&r, "t_sent_ns"))
        .map(|((i, k), t)| (i.unwrap(), k.unwrap(), t.unwrap()))
        .filter(|(_, k, _)| k != "calibration")
        .collect();
    rows.sort();
    let kinds: Vec<&str> = rows.iter().map(|r| r.1.as_str()).collect();
    assert_eq!(
        kinds,
        ["measured"; 6]
            .iter()
            .chain(&["warmup"; 3])
            .copied()
            .collect::<Vec<_>>()
    );
    // Warm-up ends before the measured requests start.
    let last_warm = rows[6..].iter().map(|r| r.2).max().unwrap();
    let first_measured = rows[..6].iter().map(|r| r.2).min().unwrap();
    assert!(first_measured > last_warm);
}

/// A loopback proxy in front of `upstream` that answers `/tokenize` with 404 (a server without
/// a tokenizer endpoint) and pipes every other connection through unchanged. It looks only at
/// the first request of each connection: the recorder opens a fresh connection per token count.
fn proxy_without_tokenize(upstream: u16) -> u16 {
    proxy_answering_tokenize(
        upstream,
        b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
    )
}

/// A proxy whose `/tokenize` and `/apply-template` answer as llama.cpp's `/tokenize` does to a
/// body it does not read: HTTP 200 `{"tokens": []}`.
fn proxy_with_empty_tokenize(upstream: u16) -> u16 {
    proxy_answering_tokenize(
        upstream,
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 13\r\nconnection: close\r\n\r\n{\"tokens\":[]}",
    )
}

/// A proxy in front of the simulator that answers `POST /tokenize` and `POST
/// /apply-template` itself with `answer` and forwards everything else.
fn proxy_answering_tokenize(upstream: u16, answer: &'static [u8]) -> u16 {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for client in l.incoming() {
            let Ok(mut client) = client else { continue };
            std::thread::spawn(move || {
                let mut head = vec![0u8; 64];
                let Ok(n) = client.read(&mut head) else {
                    return;
                };
                head.truncate(n);
                if head.starts_with(b"POST /tokenize ")
                    || head.starts_with(b"POST /apply-template ")
                {
                    let _ = client.write_all(answer);
                    return;
                }
                let Ok(mut server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    return;
                };
                let _ = server.write_all(&head);
                let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut s2, &mut c2);
                    let _ = c2.shutdown(std::net::Shutdown::Write);
                });
                let _ = std::io::copy(&mut client, &mut server);
                let _ = server.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    port
}

#[test]
fn without_tokenize_calibration_uses_recorded_one_token_probes() {
    let (_tmp, manifest, out, sim) = bed(&[]);
    let url = format!("http://127.0.0.1:{}", proxy_without_tokenize(sim.ports[0]));
    let o = k12(&manifest, &out, 2, 4).endpoint(&url).run();
    let dir = artifact_of(&o);
    assert!(stderr(&o).contains("no usable /tokenize"), "{}", stderr(&o));
    validate(&dir);
    let run_json = RunJson::read(&dir.join("run.json")).unwrap();
    assert_eq!(run_json.counts.requests_measured, 4);
    assert_eq!(run_json.counts.succeeded, 4);
    let probes = run_json.counts.requests_calibration;
    assert!(probes >= 4, "{probes} calibration probes");
    let r = batches(&dir.join("requests.parquet"));
    let kind = strs(&r, "kind");
    let max_tokens = ints(&r, "max_tokens");
    let idx = ints(&r, "request_index");
    for k in 0..kind.len() {
        if kind[k].as_deref() == Some("calibration") {
            assert_eq!(max_tokens[k], Some(1));
            assert!(
                idx[k].unwrap() >= 4,
                "calibration rows follow the measured indices"
            );
        }
    }
    // The measured prompts still land within tolerance by the server's usage.
    for (i, st) in streams(&dir) {
        if i < 4 {
            let p = st.prompt_tokens.unwrap();
            assert!((p - 512).abs() <= 8, "request {i}: {p} prompt tokens");
        }
    }
}

#[test]
fn a_second_sigint_stops_at_once_and_leaves_a_recoverable_folder() {
    let (_tmp, manifest, out, sim) = bed(&["--decode-tps", "20"]);
    let url = sim.url(0);
    let child = k12(&manifest, &out, 4, 200).endpoint(&url).spawn();
    let dir = out.join(
        "2026-09-04-qwen38-27b-pro6000-possibility/K12/headline-sustained-output.ctx512.c4.n200",
    );
    wait_for_parts(&dir, 2);
    for _ in 0..2 {
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        std::thread::sleep(Duration::from_millis(300));
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(stderr(&o).contains("recover"), "{}", stderr(&o));
    let before = RunJson::read(&dir.join("run.json")).unwrap();
    assert_eq!(before.status.as_str(), "running");
    let r = run(CAPTURE, &["recover", dir.to_str().unwrap()], &[]);
    assert!(r.status.success(), "{}", stderr(&r));
    validate(&dir);
    let after = RunJson::read(&dir.join("run.json")).unwrap();
    assert_eq!(after.status.as_str(), "interrupted");
    assert!(after.counts.requests_measured > 0);
}

/// What run.json says about calibration, and the rows' kinds.
fn calibration_of(dir: &Path) -> anvil::artifact::Calibration {
    RunJson::read(&dir.join("run.json")).unwrap().calibration
}

/// The simulator speaks vLLM's `/tokenize`: it is detected, checked against a probe's usage
/// and recorded; a server answering `{"tokens": []}` is not mistaken for a count.
#[test]
fn calibration_detects_the_tokenizer_dialect_and_checks_it_against_usage() {
    let (_tmp, manifest, out, sim) = bed(&[]);
    let url = sim.url(0);
    for api in ["chat", "completions", "responses"] {
        let out = out.join(api);
        let o = k12(&manifest, &out, 2, 4)
            .endpoint(&url)
            .args(&["--api", api])
            .run();
        let dir = artifact_of(&o);
        validate(&dir);
        let c = calibration_of(&dir);
        assert_eq!(
            c.method,
            anvil::artifact::CalibrationMethod::Tokenize,
            "{api}: {c:?}"
        );
        assert_eq!(c.dialect.as_deref(), Some("vllm"), "{api}");
        assert!(
            c.tokenize_tokens.is_some() && c.tokenize_tokens == c.usage_prompt_tokens,
            "{api}: {c:?}"
        );
        assert!(!stderr(&o).contains("warning"), "{api}: {}", stderr(&o));
        // One probe checked the tokenizer; the measured prompts are on target by usage.
        let run_json = RunJson::read(&dir.join("run.json")).unwrap();
        assert_eq!(run_json.counts.requests_calibration, 1, "{api}");
        for (i, st) in streams(&dir) {
            if i < 4 {
                let p = st.prompt_tokens.unwrap();
                assert!(
                    (p - 512).abs() <= 8,
                    "{api}: request {i}: {p} prompt tokens"
                );
            }
        }
        // The thinking switch went with every API that has a chat template.
        let sent = &run_json.thinking_switch[api];
        assert_eq!(sent.is_some(), api != "completions", "{api}: {sent:?}");
    }

    let url = format!(
        "http://127.0.0.1:{}",
        proxy_with_empty_tokenize(sim.ports[0])
    );
    let out = out.join("empty");
    let o = k12(&manifest, &out, 2, 4).endpoint(&url).run();
    let dir = artifact_of(&o);
    let c = calibration_of(&dir);
    assert_eq!(c.method, anvil::artifact::CalibrationMethod::Probe, "{c:?}");
    let note = c.note.unwrap_or_default();
    assert!(note.contains("0 tokens for a prompt"), "{note}");
    assert!(
        stderr(&o).contains("calibrating with max_tokens:1 probes"),
        "{}",
        stderr(&o)
    );
    for (i, st) in streams(&dir) {
        if i < 4 {
            let p = st.prompt_tokens.unwrap();
            assert!((p - 512).abs() <= 8, "request {i}: {p} prompt tokens");
        }
    }
}

/// A server that closes every connection right after its streamed response, announcing
/// nothing (llama.cpp's server): no request is lost, sequentially or concurrently, and a
/// request sent again is marked so.
#[test]
fn a_server_closing_after_each_stream_loses_no_request() {
    let (_tmp, manifest, out, sim) = bed(&["--close-after-stream"]);
    let url = sim.url(0);
    for (c, n) in [(1, 30), (4, 40)] {
        let out = out.join(c.to_string());
        let dir = k12(&manifest, &out, c, n).endpoint(&url).record();
        validate(&dir);
        let r = batches(&dir.join("requests.parquet"));
        let kind = strs(&r, "kind");
        let outcome = strs(&r, "outcome");
        let fresh = bools(&r, "new_connection");
        let resent = bools(&r, "resent");
        let measured: Vec<usize> = (0..kind.len())
            .filter(|&k| kind[k].as_deref() == Some("measured"))
            .collect();
        assert_eq!(measured.len(), n as usize);
        for &k in &measured {
            assert_eq!(
                outcome[k].as_deref(),
                Some("ok"),
                "C{c}: {:?}",
                strs(&r, "error")[k]
            );
        }
        // Found before the run: each worker's first request goes on the connection it
        // opened before the start, every later one on its own; none raced the close.
        let run_json = RunJson::read(&dir.join("run.json")).unwrap();
        assert_eq!(
            run_json.topology.endpoints[0].server_info["connection_after_stream"],
            "closed"
        );
        let c: usize = c as usize;
        let fresh_count = measured.iter().filter(|&&k| fresh[k]).count();
        assert_eq!(fresh_count, measured.len() - c, "C{c}: {fresh:?}");
        assert!(measured.iter().all(|&k| !resent[k]), "C{c}: {resent:?}");
    }
}

/// On a server that keeps connections, requests share them and nothing is resent.
#[test]
fn kept_connections_are_reused_and_nothing_is_resent() {
    let (_tmp, manifest, out, sim) = bed(&[]);
    let url = sim.url(0);
    let dir = k12(&manifest, &out, 1, 30).endpoint(&url).record();
    let r = batches(&dir.join("requests.parquet"));
    let kind = strs(&r, "kind");
    let fresh = bools(&r, "new_connection");
    let resent = bools(&r, "resent");
    let measured: Vec<usize> = (0..kind.len())
        .filter(|&k| kind[k].as_deref() == Some("measured"))
        .collect();
    assert!(
        measured.iter().all(|&k| !fresh[k] && !resent[k]),
        "{fresh:?} {resent:?}"
    );
}

/// vLLM ends a request it aborts cleanly (`finish_reason: "abort"`, `[DONE]`): that is a
/// failed request, with the reason, on every API.
#[test]
fn a_stream_ended_with_an_abort_finish_reason_is_a_failure() {
    let (_tmp, manifest, out, sim) = bed(&["--seed", "3", "--fault", "abort=0.5"]);
    let url = sim.url(0);
    for api in ["chat", "completions", "responses"] {
        let out = out.join(api);
        let dir = k12(&manifest, &out, 2, 16)
            .endpoint(&url)
            .args(&["--api", api])
            .record();
        validate(&dir);
        let r = batches(&dir.join("requests.parquet"));
        let kind = strs(&r, "kind");
        let outcome = strs(&r, "outcome");
        let error = strs(&r, "error");
        let mut by: BTreeMap<String, usize> = BTreeMap::new();
        for k in 0..kind.len() {
            if kind[k].as_deref() != Some("measured") {
                continue;
            }
            let o = outcome[k].clone().unwrap();
            if o == "aborted" {
                let e = error[k].clone().unwrap_or_default();
                assert!(
                    e.contains("finish reason `abort`") || e.contains("finish reason `cancelled`"),
                    "{api}: {e}"
                );
            }
            *by.entry(o).or_default() += 1;
        }
        assert!(by.get("aborted").is_some_and(|n| *n > 0), "{api}: {by:?}");
        assert!(by.get("ok").is_some_and(|n| *n > 0), "{api}: {by:?}");
        assert_eq!(by.len(), 2, "{api}: {by:?}");
        let run_json = RunJson::read(&dir.join("run.json")).unwrap();
        assert_eq!(
            run_json
                .counts
                .failed
                .get(&anvil::artifact::Outcome::Aborted)
                .copied(),
            by.get("aborted").map(|n| *n as u64),
            "{api}"
        );
    }
}

/// A Responses run of a cell whose chat run the arm already recorded is its own cell
/// (`.responses` in its id): both are kept, the chat one under the manifest's id, and they
/// never match (their workload fingerprints differ).
#[test]
fn a_responses_run_beside_the_chat_run_of_its_cell_is_its_own_cell() {
    let (_tmp, manifest, out, sim) = bed(&["--seed", "5"]);
    let url = sim.url(0);
    let mut dirs = Vec::new();
    for api in ["chat", "responses"] {
        dirs.push(
            k12(&manifest, &out, 2, 4)
                .endpoint(&url)
                .args(&["--api", api])
                .record(),
        );
    }
    assert!(
        dirs[0].ends_with("K12/headline-sustained-output.ctx512.c2.n4"),
        "{dirs:?}"
    );
    assert!(
        dirs[1].ends_with("K12/headline-sustained-output.ctx512.c2.n4.responses"),
        "{dirs:?}"
    );
    let rows = super::common::sql_rows(
        &out,
        "SELECT cell_id, api, workload_fingerprint FROM runs ORDER BY api",
    );
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(
        (rows[0]["api"].as_str(), rows[1]["api"].as_str()),
        (Some("chat"), Some("responses"))
    );
    assert_eq!(
        rows[1]["cell_id"],
        "headline-sustained-output.ctx512.c2.n4.responses"
    );
    assert_ne!(
        rows[0]["workload_fingerprint"],
        rows[1]["workload_fingerprint"]
    );
}

/// A server that reports an error inside the stream (llama.cpp's and vLLM's `data:
/// {"error": ...}`) gives a `stream_error` request with the server's message, not
/// `disconnected` and not `ok`.
#[test]
fn an_error_reported_in_the_stream_is_its_own_outcome() {
    let (_tmp, manifest, out, sim) = bed(&["--seed", "5", "--fault", "stream-error=0.5"]);
    let url = sim.url(0);
    for api in ["chat", "responses"] {
        let out = out.join(api);
        let dir = k12(&manifest, &out, 2, 16)
            .endpoint(&url)
            .args(&["--api", api])
            .record();
        validate(&dir);
        let r = measured_requests(&dir);
        let outcome = strs(&r, "outcome");
        let error = strs(&r, "error");
        let mut by: BTreeMap<String, usize> = BTreeMap::new();
        for k in 0..outcome.len() {
            let o = outcome[k].clone().unwrap();
            if o == "stream_error" {
                let e = error[k].clone().unwrap_or_default();
                assert!(
                    e.starts_with("the server reported an error in the stream: CUDA error"),
                    "{api}: {e}"
                );
            }
            *by.entry(o).or_default() += 1;
        }
        assert!(
            by.get("stream_error").is_some_and(|n| *n > 0),
            "{api}: {by:?}"
        );
        assert!(by.get("ok").is_some_and(|n| *n > 0), "{api}: {by:?}");
        assert_eq!(by.len(), 2, "{api}: {by:?}");
    }
}

#[test]
fn the_first_wave_is_intended_at_the_barrier_release_or_across_the_ramp() {
    let (_tmp, manifest, out, sim) = bed(&["--replicas", "2"]);
    let (u0, u1) = (sim.url(0), sim.url(1));

    // No ramp: the 2 × 3 slots' first requests (indices 0..6) share one intended time, the
    // release; later requests are intended when their slot came free.
    let cell = k12(&manifest, &out, 3, 18).endpoint(&u0).endpoint(&u1);
    let plain = cell.record();
    let rows = intended_and_sent(&plain);
    let release = rows[0].1;
    assert!(rows[..6].iter().all(|r| r.1 == release), "{rows:?}");
    assert!(rows[6..].iter().all(|r| r.1 > release), "{rows:?}");
    // The report's timeline reads the first wave from the artifact the same way.
    #[cfg(feature = "analysis")]
    {
        let first_wave = super::common::sql_rows(
            &plain,
            "SELECT count(*) AS n FROM request_timeline WHERE first_wave",
        );
        assert_eq!(first_wave[0]["n"], 6, "{first_wave:?}");
    }

    // A 1.2 s ramp: slot k of the 6 starts 0.2·k s after the release, at its intended time.
    let ramped = cell
        .args(&["--ramp", "1.2"])
        .set("--arm", "K12-ramped")
        .record();
    assert!(
        ramped.to_string_lossy().ends_with(".ramp1.2"),
        "{}",
        ramped.display()
    );
    validate(&ramped);
    let rows = intended_and_sent(&ramped);
    let release = rows[0].1;
    for (k, (i, intended, sent)) in rows[..6].iter().enumerate() {
        assert_eq!(
            *intended - release,
            200_000_000 * k as i64,
            "request {i}: {rows:?}"
        );
        assert!(sent >= intended, "request {i} sent before its time");
        assert!(
            sent - intended < 50_000_000,
            "request {i} sent {} ms late",
            (sent - intended) / 1_000_000
        );
    }
    let a = RunJson::read(&plain.join("run.json")).unwrap();
    let b = RunJson::read(&ramped.join("run.json")).unwrap();
    assert_eq!(a.workload.ramp_s, None);
    assert_eq!(b.workload.ramp_s, Some(1.2));
    assert_ne!(
        a.workload_fingerprint, b.workload_fingerprint,
        "the ramp is part of the workload"
    );
    #[cfg(feature = "analysis")]
    {
        let ramp = super::common::sql_rows(&ramped, "SELECT ramp_s FROM runs");
        assert_eq!(ramp[0]["ramp_s"], 1.2);
    }
}

#[test]
fn an_open_loop_ramp_raises_the_release_rate_linearly() {
    let (_tmp, manifest, out, sim) = bed(&[]);
    let url = sim.url(0);
    let dir = k12(&manifest, &out, 8, 30)
        .endpoint(&url)
        .args(&["--rate", "50", "--ramp", "0.4"])
        .record();
    validate(&dir);
    let rows = intended_and_sent(&dir);
    let start = rows[0].1;
    // At full rate release i is due at i/50 s; over the 0.4 s ramp at sqrt(2·0.4·i/50) while
    // i/50 ≤ 0.2 s, then at i/50 + 0.2 s.
    for (i, intended, sent) in &rows {
        let full = *i as f64 / 50.0;
        let want = if full <= 0.2 {
            (2.0 * 0.4 * full).sqrt()
        } else {
            full + 0.2
        };
        let got = (intended - start) as f64 / 1e9;
        assert!(
            (got - want).abs() < 1e-6,
            "release {i} at {got} s, want {want} s"
        );
        assert!(sent >= intended, "request {i} sent before its time");
    }
    let run_json = RunJson::read(&dir.join("run.json")).unwrap();
    assert_eq!(run_json.workload.ramp_s, Some(0.4));
    assert!(
        run_json.cell_id.ends_with(".rate50.ramp0.4"),
        "{}",
        run_json.cell_id
    );
}

#[test]
fn repeats_record_one_artifact_each_and_give_an_interval_across_runs() {
    let (_tmp, manifest, out, sim) = bed(&[]);
    let url = sim.url(0);
    let single = k12(&manifest, &out, 2, 6).endpoint(&url);
    let repeats = single.clone().args(&["--repeat", "3"]).args(&[
        "--default",
        "torch_compile=off",
        "--default",
        "spec_depth=0",
    ]);
    let run_o = repeats.run();
    assert!(run_o.status.success(), "{}", stderr(&run_o));
    // One folder per repeat, printed in order, each run.json saying which repeat it is.
    let printed: Vec<PathBuf> = stdout(&run_o).lines().map(PathBuf::from).collect();
    assert_eq!(printed.len(), 3, "{printed:?}");
    let mut run_ids = BTreeSet::new();
    for (k, dir) in printed.iter().enumerate() {
        assert!(dir.ends_with(format!("repeat-{}", k + 1)), "{dir:?}");
        let run = RunJson::read(&dir.join("run.json")).unwrap();
        assert_eq!((run.repeat.index, run.repeat.of), (k as u32 + 1, 3));
        // Every default is recorded; the arm declares spec_depth, so it inherits only
        // torch_compile (the runs table's `inherited`, below).
        assert_eq!(run.arm.defaults.get("torch_compile"), Some("off"));
        assert_eq!(run.arm.defaults.get("spec_depth"), Some("0"));
        run_ids.insert(run.run_id);
        validate(dir);
    }
    assert_eq!(run_ids.len(), 3, "every repeat is its own run");
    // The three runs are repeats of one cell: one across_runs row per figure, with an
    // interval over the runs.
    let rows = super::common::sql_rows(
        &out,
        "SELECT runs, mean, ci95_low, ci95_high FROM across_runs \
         WHERE metric = 'output_tps' AND window = 'all'",
    );
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["runs"], 3);
    let (low, mean, high) = (
        rows[0]["ci95_low"].as_f64().unwrap(),
        rows[0]["mean"].as_f64().unwrap(),
        rows[0]["ci95_high"].as_f64().unwrap(),
    );
    assert!(low <= mean && mean <= high, "{rows:?}");
    let config = super::common::sql_rows(
        &out,
        "SELECT arm_config['torch_compile'] AS tc, arm_config['spec_depth'] AS depth, inherited \
         FROM runs LIMIT 1",
    );
    assert_eq!(config[0]["tc"], "off");
    assert_eq!(config[0]["depth"], "12");
    assert_eq!(config[0]["inherited"], serde_json::json!(["torch_compile"]));
    // A repeat that is there already is refused before anything is recorded; an index
    // outside the count is bad input.
    let again = repeats.run();
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("repeat-1` already holds a run"),
        "{}",
        stderr(&again)
    );
    // A single run of the same cell beside its repeats is refused too.
    let refused = single.run();
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("holds repeats of this cell"),
        "{}",
        stderr(&refused)
    );
    let bad = single.args(&["--repeat", "2", "--repeat-index", "3"]).run();
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("--repeat-index"), "{}", stderr(&bad));
}

/// A loopback server that answers `GET /v1/models` with one model and every other request
/// with HTTP 500 and `page`, as a proxy (nginx) in front of a dead engine does. One request
/// per connection, then it closes.
fn html_500_server(page: &'static str) -> u16 {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for client in l.incoming() {
            let Ok(mut client) = client else { continue };
            std::thread::spawn(move || {
                let mut got = Vec::new();
                let mut buf = [0u8; 8192];
                let head_end = loop {
                    match client.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                    if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                };
                let head = String::from_utf8_lossy(&got[..head_end]).to_ascii_lowercase();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                while got.len() < head_end + len {
                    match client.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let (status, kind, body) = if head.starts_with("get /v1/models ") {
                    (
                        "200 OK",
                        "application/json",
                        r#"{"object":"list","data":[{"id":"m","object":"model"}]}"#,
                    )
                } else {
                    ("500 Internal Server Error", "text/html", page)
                };
                let _ = write!(
                    client,
                    "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    port
}

/// A server answering calibration with an HTML error page: the run fails (exit 5) with a
/// message of a few lines naming the URL and the status, the page shown once, as its title.
#[test]
fn a_calibration_failure_shows_the_servers_html_page_once_and_short() {
    const PAGE: &str = "<!DOCTYPE html>\n<html>\n<head>\n<title>500 Internal Server Error</title>\n\
        <style>\nbody { font-family: sans-serif; }\n</style>\n</head>\n<body>\n\
        <center><h1>500 Internal Server Error</h1></center>\n<hr><center>nginx/1.25.3</center>\n\
        <p>The upstream server failed to answer.</p>\n</body>\n</html>\n";
    let tmp = tempfile::tempdir().unwrap();
    let manifest = quick_manifest(tmp.path());
    let out = tmp.path().join("out");
    let url = format!("http://127.0.0.1:{}", html_500_server(PAGE));
    let o = k12(&manifest, &out, 2, 4).endpoint(&url).run();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(5), "{err}");
    assert!(
        err.contains(&format!(
            "{url}/v1/chat/completions: HTTP 500: an HTML page"
        )),
        "{err}"
    );
    assert_eq!(err.matches("500 Internal Server Error").count(), 1, "{err}");
    for markup in ["<title", "<html", "nginx", "font-family"] {
        assert!(!err.contains(markup), "{markup}: {err}");
    }
    assert!(err.lines().count() < 10, "{err}");
    // The artifact says why, in the same short words.
    let dir = PathBuf::from(stdout(&o).lines().last().expect("the artifact's path"));
    let reason = RunJson::read(&dir.join("run.json"))
        .unwrap()
        .status_reason
        .unwrap();
    assert!(reason.contains("HTTP 500: an HTML page"), "{reason}");
    assert_eq!(reason.lines().count(), 1, "{reason}");
}

/// A prompt target above 2^24 tokens is refused before anything is sent (exit 2), naming the
/// flag or the manifest field and the limit, instead of failing in calibration (exit 5).
#[test]
fn a_context_above_the_largest_prompt_target_is_refused_up_front() {
    // A live server: without the check, the target would reach calibration.
    let (tmp, manifest, out, sim) = bed(&[]);
    let url = sim.url(0);
    let huge = i64::MAX.to_string();
    let r = Recording::cell(&manifest, &out, 1, 1)
        .set("--context", &huge)
        .arm("A")
        .endpoint(&url)
        .run();
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(
        stderr(&r).contains(&format!("--context `{huge}`: at most 16777216 tokens")),
        "{}",
        stderr(&r)
    );
    // The same target in the manifest.
    let sub = tmp.path().join("huge");
    std::fs::create_dir(&sub).unwrap();
    let huge_manifest = super::common::small_manifest(&sub, |m| {
        m["selection"]["contexts_actual_prompt_token_targets"][0] = i64::MAX.into();
    });
    let r = run(
        CAPTURE,
        &[
            "run",
            "--manifest",
            huge_manifest.to_str().unwrap(),
            "--class",
            "headline-sustained-output",
            "--arm",
            "A",
            "--endpoint",
            &url,
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(
        stderr(&r).contains(&format!(
            "selection.contexts_actual_prompt_token_targets[0]: {huge} tokens is above the largest prompt target anvil accepts, 16777216"
        )),
        "{}",
        stderr(&r)
    );
    assert!(!out.exists(), "nothing was written for refused runs");
}
