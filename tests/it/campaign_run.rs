//! `anvil campaign run` with every server a real `anvil-sim` child process launched by the
//! runner on loopback: the whole run (artifacts, journal, server logs, restoration.json, a
//! report whose restore stage is supported, a sweep's one-variable arms), an arm that never
//! becomes ready, a server killed during a cell, a restored service whose fingerprint differs,
//! `--resume` after the runner is killed with SIGKILL, and SIGINT during a cell.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::common::{SIM, anvil, anvil_words, path, run_campaign, says};

const SAMPLE_DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/sample-data");
pub(super) const CAMPAIGN_ID: &str = "2026-09-04-qwen38-27b-pro6000-possibility";
const SCREEN: &str = "optimization-screen.ctx4096.c4.n4";
const FUNCTIONAL: &str = "functional.ctx4096.c1.n4";

/// The journal's last steps: the starting service restored, checked and left running.
const RESTORE: [&str; 7] = [
    "restore_started",
    "launched",
    "ready",
    "fingerprint",
    "left_running",
    "restored",
    "campaign_ended",
];

/// Free loopback ports (bound, then released).
pub(super) fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

/// `anvil-sim` on `{port}`, fast unless `extra` slows it.
pub(super) fn sim_launch(extra: &[&str]) -> Value {
    let mut argv = vec![
        SIM,
        "--port",
        "{port}",
        "--profile",
        "fast",
        "--no-realtime",
        "--max-model-len",
        "65536",
    ];
    argv.extend_from_slice(extra);
    json!({ "argv": argv })
}

/// A campaign folder: copies of the seeds and a campaign file with a starting service and
/// three arms: `Inferact target-only` (the screen and functional cells, on `first_launch`),
/// and the sweep `K{value}` over spec_depth 4 and 12 (the screen cell).
pub(super) struct Fixture {
    pub(super) dir: tempfile::TempDir,
    pub(super) file: PathBuf,
    pub(super) out: PathBuf,
}

impl Fixture {
    fn new(first_launch: Value, first_readiness: Value, starting_launch: Value) -> Fixture {
        Fixture::with_campaign(|ports| {
            campaign_json(
                starting_launch,
                ports[0],
                json!({"arms": [{
                        "arm": "Inferact target-only",
                        "launch": first_launch,
                        "ports": [ports[1]],
                        "readiness": first_readiness,
                        "stop": {"grace_s": 5},
                        "config": {"spec_depth": "0", "chunked_prefill": "2048"},
                        "runtime": "anvil-sim",
                        "cells": {"ids": [SCREEN, FUNCTIONAL]}
                    }],
                    "sweeps": [{
                        "key": "spec_depth",
                        "values": ["4", "12"],
                        "template": {
                            "arm": "K{value}",
                            "launch": sim_launch(&["--spec-depth", "{value}"]),
                            "ports": [ports[2]],
                            "readiness": {"timeout_s": 30},
                            "stop": {"grace_s": 5},
                            "config": {"chunked_prefill": "2048"},
                            "runtime": "anvil-sim",
                            "cells": {"ids": [SCREEN]}
                        }
                    }]
                }),
            )
        })
    }

    /// A folder with copies of the seeds and the campaign file `make` writes from four free
    /// loopback ports.
    pub(super) fn with_campaign(make: impl FnOnce(&[u16]) -> Value) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        for name in ["workload-manifest.json", "run-plan.json"] {
            std::fs::copy(Path::new(SAMPLE_DATA).join(name), dir.path().join(name)).unwrap();
        }
        let campaign = make(&free_ports(4));
        let file = dir.path().join("campaign.json");
        std::fs::write(&file, serde_json::to_string_pretty(&campaign).unwrap()).unwrap();
        let out = dir.path().join("data");
        Fixture { dir, file, out }
    }

    /// The usual campaign: every server a fast simulator, the starting one serving `qwen`.
    fn usual() -> Fixture {
        Fixture::new(
            sim_launch(&[]),
            json!({"timeout_s": 30}),
            sim_launch(&["--model", "qwen"]),
        )
    }

    /// The usual campaign with the first arm decoding `decode_tps` tokens per second (its
    /// screen cell lasts seconds: long enough to kill or interrupt something during it).
    fn slow_first_arm(decode_tps: &str) -> Fixture {
        Fixture::new(
            sim_launch(&["--decode-tps", decode_tps]),
            json!({"timeout_s": 30}),
            sim_launch(&["--model", "qwen"]),
        )
    }

    pub(super) fn folder(&self) -> PathBuf {
        self.out.join(CAMPAIGN_ID)
    }

    pub(super) fn command(&self, resume: bool) -> Command {
        run_campaign(
            &self.file,
            &self.out,
            if resume { &["--resume"] } else { &[] },
        )
    }

    pub(super) fn run(&self, resume: bool) -> Output {
        self.command(resume).output().unwrap()
    }

    pub(super) fn journal(&self) -> Vec<Value> {
        std::fs::read_to_string(self.folder().join("campaign-journal.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The journal's lines of the last run (from its last `campaign_started`).
    pub(super) fn last_run(&self) -> Vec<Value> {
        let mut journal = self.journal();
        let start = journal
            .iter()
            .rposition(|l| l["step"] == "campaign_started")
            .expect("a campaign_started line");
        journal.split_off(start)
    }

    pub(super) fn steps(&self) -> Vec<String> {
        self.journal()
            .iter()
            .map(|l| l["step"].as_str().unwrap().to_owned())
            .collect()
    }

    fn restoration(&self) -> Value {
        let text = std::fs::read_to_string(self.folder().join("restoration.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    fn run_json(&self, arm: &str, cell: &str) -> Value {
        let path = self.folder().join(arm).join(cell).join("run.json");
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    }

    /// `anvil check` over the campaign folder: exit code and output.
    fn check(&self) -> (Option<i32>, String) {
        let o = anvil_words(&self.evidence("check", &[]));
        (o.code, o.stdout)
    }

    /// `anvil COMMAND --data FOLDER --manifest … --plan …` over the campaign, then `extra`.
    fn evidence(&self, command: &str, extra: &[&str]) -> Vec<String> {
        let doc = |name: &str| self.dir.path().join(name).to_string_lossy().into_owned();
        let words = [
            command.to_owned(),
            "--data".to_owned(),
            self.folder().to_string_lossy().into_owned(),
            "--manifest".to_owned(),
            doc("workload-manifest.json"),
            "--plan".to_owned(),
            doc("run-plan.json"),
        ];
        words
            .into_iter()
            .chain(extra.iter().map(|w| (*w).to_owned()))
            .collect()
    }

    /// Wait until the journal holds a line matching `pred`.
    pub(super) fn wait_for(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(line) = self.journal().into_iter().find(|l| pred(l)) {
                return line;
            }
            assert!(
                Instant::now() < deadline,
                "no journal line {what}: {:?}",
                self.steps()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Fixture {
    /// Every server the runner launched and left (the restored service, orphans of a killed
    /// runner) is stopped with the test: each process still the one launched (same pid and
    /// start time), never a process that reused a pid.
    fn drop(&mut self) {
        for line in self.journal() {
            for r in line["replicas"].as_array().into_iter().flatten() {
                if let (Some(pid), Some(ticks)) = (r["pid"].as_u64(), r["start_ticks"].as_u64())
                    && anvil::campaign::supervise::start_ticks(pid as u32) == Some(ticks)
                {
                    anvil::campaign::supervise::signal_group(pid as u32, libc::SIGKILL);
                }
            }
        }
    }
}

/// Wait until the cell's recorder has written streamed events (its first part file): its
/// requests are in flight.
pub(super) fn wait_streaming(cell: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let parts = cell.join("events.parts");
    while std::fs::read_dir(&parts).map_or(true, |mut d| d.next().is_none()) {
        assert!(
            Instant::now() < deadline,
            "no events in {}",
            parts.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The tests' campaign file: the sample documents, the simulator launched by `launch` on
/// `port` as the starting service, and `fields` (the arms, SLOs) on top.
pub(super) fn campaign_json(launch: Value, port: u16, fields: Value) -> Value {
    let mut doc = json!({
        "schema": "anvil-serving.benchmark-campaign/v1",
        "campaign_id": CAMPAIGN_ID,
        "manifest": "workload-manifest.json",
        "plan": "run-plan.json",
        "starting_service": starting_service(launch, port),
    });
    for (key, value) in fields.as_object().expect("an object of fields") {
        doc[key] = value.clone();
    }
    doc
}

/// The campaign's starting service: a simulator serving `qwen` launched by `launch` on
/// `port`, readied by `/health`.
pub(super) fn starting_service(launch: Value, port: u16) -> Value {
    json!({
        "launch": launch,
        "ports": [port],
        "readiness": {"path": "/health", "timeout_s": 30},
        "stop": {"grace_s": 5},
        "config": {"spec_depth": "0"},
        "runtime": "anvil-sim",
        "model": "qwen"
    })
}

pub(super) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub(super) fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, sig) };
}

#[test]
fn campaign_run_records_every_arm_restores_the_starting_service_and_reports_it() {
    let f = Fixture::usual();
    let o = f.run(false);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        f.folder().display().to_string()
    );
    let err = stderr(&o);
    says(&err, "4 of 4 cells recorded; 0 problems");
    says(&err, "report it with: anvil report --data");

    // Every cell complete, each arm's server log beside its artifacts.
    for (arm, cell) in [
        ("Inferact target-only", SCREEN),
        ("Inferact target-only", FUNCTIONAL),
        ("K4", SCREEN),
        ("K12", SCREEN),
    ] {
        assert_eq!(f.run_json(arm, cell)["status"], "complete", "{arm} {cell}");
        let log = f.folder().join(arm).join("server.replica0.log");
        assert!(log.is_file(), "{}", log.display());
    }
    // The sweep's arms differ from each other in exactly the swept key.
    let config = |arm: &str| f.run_json(arm, SCREEN)["arm"]["config"].clone();
    let (k4, k12) = (config("K4"), config("K12"));
    let differing: Vec<&String> = k4
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, v)| k12.get(k.as_str()) != Some(v))
        .map(|(k, _)| k)
        .collect();
    assert_eq!(differing, ["spec_depth"], "{k4} vs {k12}");

    // The journal: the starting service fingerprinted and stopped, each arm launched, ready,
    // recorded and stopped in the plan's order, then the restore.
    let steps = f.steps();
    let expected = [
        "campaign_started",
        "launched",
        "ready",
        "fingerprint",
        "stopped",
        "order",
        "launched",
        "ready",
        "recording",
        "recorded",
        "recording",
        "recorded",
        "stopped",
        "launched",
        "ready",
        "recording",
        "recorded",
        "stopped",
        "launched",
        "ready",
        "recording",
        "recorded",
        "stopped",
    ]
    .into_iter()
    .chain(RESTORE)
    .collect::<Vec<_>>();
    assert_eq!(steps, expected);
    let arms: Vec<String> = f
        .journal()
        .iter()
        .filter(|l| l["step"] == "launched")
        .map(|l| l["who"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        arms,
        [
            "starting service",
            "arm Inferact target-only",
            "arm K4",
            "arm K12",
            "starting service"
        ]
    );

    // restoration.json: every check passed, the restored service left running.
    let r = f.restoration();
    assert_eq!(r["restored"], true, "{r:#}");
    let checks: Vec<&str> = r["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["check"].as_str().unwrap())
        .collect();
    assert_eq!(
        checks,
        [
            "ready",
            "model",
            "models",
            "server_version",
            "model_facts",
            "smoke_reply",
            "configuration"
        ]
    );
    assert_eq!(r["after"]["models"], json!([["qwen"]]));
    assert!(
        r["after"]["smoke_reply_shape"]
            .as_array()
            .unwrap()
            .contains(&json!("choices[].message.content"))
    );
    let pid = r["pids"][0].as_i64().unwrap();
    assert!(Path::new(&format!("/proc/{pid}")).exists(), "left running");

    // The rules: no restore stop rule; the report's restore stage is supported.
    let (_, check) = f.check();
    assert!(!check.contains("service not restored"), "{check}");
    let report = f.dir.path().join("campaign.md");
    let o = anvil_words(&f.evidence(
        "report",
        &["--format", "md", "--out", report.to_str().unwrap()],
    ));
    assert!(o.code.is_some(), "{}", o.stderr);
    let md = std::fs::read_to_string(&report).unwrap();
    assert!(!md.contains("service not restored"), "{md}");

    // Nothing missing afterwards; a second run without --resume is refused.
    let plan = anvil(&["campaign", "plan", path(&f.file), "--out", path(&f.out)]).stdout;
    says(&plan, "4 recorded, 0 to record");
    let again = f.run(false);
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    says(&stderr(&again), "--resume");
}

/// A sweep of two arms whose screen cell is recorded twice, `{repeat}` in their command;
/// `order` as given (absent: interleaved).
fn repeated_sweep(order: Option<&str>, seed: &str) -> Fixture {
    Fixture::with_campaign(|ports| {
        let mut fields = json!({"sweeps": [{
            "key": "spec_depth",
            "values": ["4", "12"],
            "template": {
                "arm": "K{value}",
                "launch": sim_launch(&["--spec-depth", "{value}", "--run-seed", seed]),
                "ports": [ports[2]],
                "readiness": {"timeout_s": 30},
                "stop": {"grace_s": 5},
                "config": {"chunked_prefill": "2048"},
                "runtime": "anvil-sim",
                "cells": {"ids": [SCREEN], "repeats": 2}
            }
        }]});
        if let Some(order) = order {
            fields["order"] = json!(order);
        }
        campaign_json(sim_launch(&["--model", "qwen"]), ports[0], fields)
    })
}

/// Repeats interleaved across the stage's arms (K4 K12 K4 K12), each repeat a launch of
/// its own with its repeat in its command, warmed up before its measured requests; `order:
/// blocked` keeps each arm's repeats in one launch, unwarmed, when the command has no
/// `{repeat}`.
#[test]
fn repeats_are_interleaved_each_a_warmed_launch_of_its_own_unless_blocked() {
    let f = repeated_sweep(None, "k{value}-{repeat}-{replica}");
    let o = f.run(false);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let launches: Vec<(String, u64)> = f
        .journal()
        .iter()
        .filter(|l| l["step"] == "launched" && l["who"] != "starting service")
        .map(|l| {
            (
                l["who"].as_str().unwrap().to_owned(),
                l["repeat"].as_u64().unwrap(),
            )
        })
        .collect();
    let want: Vec<(String, u64)> = [("arm K4", 1), ("arm K12", 1), ("arm K4", 2), ("arm K12", 2)]
        .iter()
        .map(|(a, r)| (a.to_string(), *r))
        .collect();
    assert_eq!(launches, want);
    let order = f
        .journal()
        .into_iter()
        .find(|l| l["step"] == "order")
        .unwrap();
    assert_eq!(order["order"], "interleaved", "{order}");
    let log = std::fs::read_to_string(f.folder().join("K4").join("server.replica0.log")).unwrap();
    says(&log, "--run-seed k4-2-0");
    says(&log, "run speed factor");
    for (arm, repeat) in [("K4", 1), ("K12", 2)] {
        let run = f
            .folder()
            .join(arm)
            .join(SCREEN)
            .join(format!("repeat-{repeat}"));
        let run: Value =
            serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
        assert_eq!(run["status"], "complete", "{arm} {repeat}");
        assert_eq!(
            run["counts"]["requests_warmup"], 4,
            "{arm} {repeat}: one wave of C4"
        );
    }

    let f = repeated_sweep(Some("blocked"), "k{value}-{replica}");
    let o = f.run(false);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let launches: Vec<String> = f
        .journal()
        .iter()
        .filter(|l| l["step"] == "launched" && l["who"] != "starting service")
        .map(|l| l["who"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(launches, ["arm K4", "arm K12"]);
    let run = f
        .folder()
        .join("K12")
        .join(SCREEN)
        .join("repeat-2")
        .join("run.json");
    let run: Value = serde_json::from_str(&std::fs::read_to_string(run).unwrap()).unwrap();
    assert_eq!(run["counts"]["requests_warmup"], 0);
}

#[test]
fn an_arm_that_never_becomes_ready_is_journaled_and_the_next_arm_runs() {
    // The first arm's "server" listens nowhere.
    let f = Fixture::new(
        json!({"argv": ["sleep", "60"]}),
        json!({"timeout_s": 1.5}),
        sim_launch(&["--model", "qwen"]),
    );
    let o = f.run(false);
    // Cells missing: incomplete, not a crash.
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let not_ready = f.wait_for("not_ready", |l| l["step"] == "not_ready");
    assert_eq!(not_ready["who"], "arm Inferact target-only");
    assert!(
        not_ready["why"]
            .as_str()
            .unwrap()
            .contains("not ready after"),
        "{not_ready}"
    );
    let not_recorded: Vec<Value> = f
        .journal()
        .into_iter()
        .filter(|l| l["step"] == "not_recorded")
        .collect();
    assert_eq!(not_recorded.len(), 2, "{not_recorded:?}");
    // `sleep` was stopped, the sweep's arms recorded, the service restored.
    let stopped = f.wait_for("stopped arm", |l| {
        l["step"] == "stopped" && l["who"] == "arm Inferact target-only"
    });
    assert_eq!(stopped["replicas"][0]["status"], "killed by SIGTERM");
    assert_eq!(f.run_json("K4", SCREEN)["status"], "complete");
    assert_eq!(f.run_json("K12", SCREEN)["status"], "complete");
    assert_eq!(f.restoration()["restored"], true);
    says(&stderr(&o), "did not become ready");
}

#[test]
fn a_server_killed_during_a_cell_is_journaled_and_its_loss_stops_the_campaign() {
    let f = Fixture::slow_first_arm("20");
    let child = f.command(false).spawn().unwrap();
    let launched = f.wait_for("launched arm", |l| {
        l["step"] == "launched" && l["who"] == "arm Inferact target-only"
    });
    f.wait_for("recording", |l| l["step"] == "recording");
    wait_streaming(&f.folder().join("Inferact target-only").join(SCREEN));
    let pid = launched["replicas"][0]["pid"].as_i64().unwrap();
    // SAFETY: kill(2) on the server the runner launched.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));

    let died = f.wait_for("died", |l| l["step"] == "died");
    assert_eq!(died["status"], "killed by SIGKILL");
    assert_eq!(died["during"], SCREEN);
    let stop = f.wait_for("stop_rule", |l| l["step"] == "stop_rule");
    assert!(
        ["unexplained_loss", "restart"].contains(&stop["rule"].as_str().unwrap()),
        "{stop}"
    );
    // The cell's artifact says so: requests failed.
    let run = f.run_json("Inferact target-only", SCREEN);
    let succeeded = run["counts"]["succeeded"].as_u64().unwrap();
    assert!(succeeded < 4, "{run:#}");
    // No further arm ran; the starting service was restored all the same.
    assert!(!f.folder().join("K4").exists());
    assert_eq!(f.restoration()["restored"], true);
    let (code, check) = f.check();
    assert_eq!(code, Some(1), "{check}");
    assert!(
        check.contains("unexplained loss") || check.contains("STOP restart"),
        "{check}"
    );
}

#[test]
fn a_restored_service_whose_fingerprint_differs_fires_the_restore_stop_rule() {
    // The starting service serves the model named in model.txt; the first arm's launch
    // rewrites it, so the service restored afterwards serves another model.
    let starting = json!({
        "argv": ["sh", "-c", format!("exec {SIM} --port {{port}} --profile fast --no-realtime --model \"$(cat model.txt)\"")],
        "cwd": "."
    });
    let first = json!({
        "argv": ["sh", "-c", format!("echo llama > model.txt; exec {SIM} --port {{port}} --profile fast --no-realtime --max-model-len 65536")],
        "cwd": "."
    });
    let f = Fixture::new(first, json!({"timeout_s": 30}), starting);
    std::fs::write(f.dir.path().join("model.txt"), "qwen").unwrap();
    let o = f.run(false);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let r = f.restoration();
    assert_eq!(r["restored"], false);
    let failed: Vec<&str> = r["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["passed"] == false)
        .map(|c| c["check"].as_str().unwrap())
        .collect();
    // The served model's own facts (its `root`) differ too, and the smoke request naming
    // `qwen` is refused.
    assert_eq!(
        failed,
        ["model", "models", "model_facts", "smoke_reply"],
        "{r:#}"
    );
    assert_eq!(f.steps().iter().filter(|s| *s == "not_restored").count(), 1);
    let (code, check) = f.check();
    assert_eq!(code, Some(1), "{check}");
    says(&check, "service not restored");
    says(&check, "check model failed");
}

#[test]
fn resume_after_sigkill_records_only_what_is_not_complete() {
    let f = Fixture::slow_first_arm("20");
    let mut child = f.command(false).spawn().unwrap();
    // Killed during the second cell, after the first is complete.
    f.wait_for("second recording", |l| {
        l["step"] == "recording" && l["cell"] == FUNCTIONAL
    });
    wait_streaming(&f.folder().join("Inferact target-only").join(FUNCTIONAL));
    signal(&child, libc::SIGKILL);
    child.wait().unwrap();
    let launched = f.wait_for("launched arm", |l| {
        l["step"] == "launched" && l["who"] == "arm Inferact target-only"
    });
    let orphan = launched["replicas"][0]["pid"].as_i64().unwrap();
    assert!(
        Path::new(&format!("/proc/{orphan}")).exists(),
        "the arm's server outlived the runner"
    );

    let o = f.run(true);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let last = f.last_run();
    let after: Vec<&Value> = last.iter().collect();
    let step = |s: &str| after.iter().filter(|l| l["step"] == s).count();
    // The orphan was stopped; the complete cell kept; the cut one superseded and recorded.
    assert_eq!(step("orphan_stopped"), 1, "{after:?}");
    assert_eq!(
        step("fingerprint"),
        1,
        "only the restored one: the before one is reused"
    );
    let recorded: Vec<String> = after
        .iter()
        .filter(|l| l["step"] == "recording")
        .map(|l| {
            format!(
                "{} {}",
                l["arm"].as_str().unwrap(),
                l["cell"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        recorded,
        [
            format!("Inferact target-only {FUNCTIONAL}"),
            format!("K4 {SCREEN}"),
            format!("K12 {SCREEN}")
        ]
    );
    let skipped: Vec<&&Value> = after.iter().filter(|l| l["step"] == "skipped").collect();
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0]["cell"], SCREEN);
    assert_eq!(step("superseded"), 1, "{after:?}");
    let kept = f.folder().join(".superseded").join("Inferact target-only");
    assert_eq!(std::fs::read_dir(&kept).unwrap().count(), 1);
    assert_eq!(f.restoration()["restored"], true);
    // The superseded attempt is not read as evidence: one run per cell.
    let (_, check) = f.check();
    assert!(!check.contains("service not restored"), "{check}");
}

#[test]
fn sigint_during_a_cell_finishes_it_stops_the_server_and_restores() {
    let f = Fixture::slow_first_arm("20");
    let mut child = f.command(false).spawn().unwrap();
    f.wait_for("recording", |l| l["step"] == "recording");
    wait_streaming(&f.folder().join("Inferact target-only").join(SCREEN));
    signal(&child, libc::SIGINT);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let steps = f.steps();
    let tail: Vec<&str> = steps
        .iter()
        .map(String::as_str)
        .skip_while(|s| *s != "recorded")
        .collect();
    let expected: Vec<&str> = ["recorded", "interrupted", "stopped"]
        .into_iter()
        .chain(RESTORE)
        .collect();
    assert_eq!(tail, expected);
    let run = f.run_json("Inferact target-only", SCREEN);
    assert_eq!(run["status"], "interrupted", "{run:#}");
    assert!(
        !f.folder()
            .join("Inferact target-only")
            .join(FUNCTIONAL)
            .exists()
    );
    assert!(!f.folder().join("K4").exists());
    assert_eq!(f.restoration()["restored"], true);
}

#[test]
fn a_starting_service_not_serving_its_model_is_refused_before_any_arm() {
    // The starting simulator serves its default model, not the file's `qwen`.
    let f = Fixture::new(sim_launch(&[]), json!({"timeout_s": 30}), sim_launch(&[]));
    let o = f.run(false);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    says(&stderr(&o), "starting_service.model");
    // Fingerprinted, stopped, nothing else launched or recorded.
    let launched = f
        .journal()
        .iter()
        .filter(|l| l["step"] == "launched")
        .count();
    assert_eq!(launched, 1, "{:?}", f.steps());
    assert!(!f.folder().join("Inferact target-only").exists());
}

#[test]
fn sigterm_during_a_cell_lets_it_complete_then_stops_and_restores() {
    let f = Fixture::slow_first_arm("40");
    let child = f.command(false).spawn().unwrap();
    f.wait_for("recording", |l| l["step"] == "recording");
    wait_streaming(&f.folder().join("Inferact target-only").join(SCREEN));
    signal(&child, libc::SIGTERM);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    // The recorder does not see SIGTERM: the cell in flight completes, no other starts.
    assert_eq!(
        f.run_json("Inferact target-only", SCREEN)["status"],
        "complete"
    );
    assert!(
        !f.folder()
            .join("Inferact target-only")
            .join(FUNCTIONAL)
            .exists()
    );
    let steps = f.steps();
    assert!(steps.contains(&"interrupted".to_owned()), "{steps:?}");
    assert_eq!(f.restoration()["restored"], true);
}

/// An arm whose cells are recorded as two local shard processes: the screen cell is one run
/// of two shard folders, read back as one logical run; the functional cell from one process;
/// `--resume` keeps the recorded group.
#[test]
fn a_sharded_arm_records_each_cell_as_one_run_of_local_shards() {
    let f = Fixture::with_campaign(|ports| {
        campaign_json(
            sim_launch(&["--model", "qwen"]),
            ports[0],
            json!({"arms": [{
                    "arm": "Inferact target-only",
                    "launch": sim_launch(&[]),
                    "ports": [ports[1]],
                    "readiness": {"timeout_s": 30},
                    "stop": {"grace_s": 5},
                    "config": {"spec_depth": "0", "chunked_prefill": "2048"},
                    "runtime": "anvil-sim",
                    "cells": {"ids": [SCREEN, FUNCTIONAL], "shards": 2}
                }]
            }),
        )
    });
    let o = f.run(false);
    assert!(o.status.success(), "{}", stderr(&o));
    let cell = f.folder().join("Inferact target-only").join(SCREEN);
    for i in 0..2 {
        let run: Value = serde_json::from_str(
            &std::fs::read_to_string(cell.join(format!("shard-{i}-of-2")).join("run.json"))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(run["status"], "complete", "{run}");
        assert_eq!(run["shard"]["index"], i);
    }
    assert!(
        f.folder()
            .join("Inferact target-only")
            .join(FUNCTIONAL)
            .join("run.json")
            .exists()
    );
    let err = stderr(&o);
    says(&err, "--shard 1/2 --start-at");
    // Local shards are spread over the machine's CPUs, one `--cpu` each.
    let cpu_of = |shard: &str| {
        let line = err
            .lines()
            .find(|l| l.contains(&format!("--shard {shard}/2 ")))
            .unwrap_or_else(|| panic!("no command of shard {shard}: {err}"));
        let at = line
            .find("--cpu ")
            .unwrap_or_else(|| panic!("no --cpu: {line}"));
        line[at + 6..].split_whitespace().next().unwrap().to_owned()
    };
    let (first, second) = (cpu_of("0"), cpu_of("1"));
    if std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2) {
        assert_ne!(first, second, "{err}");
    }
    let data = f.folder();
    let q = "SELECT shards, total_requests FROM runs WHERE cell_id LIKE 'optimization-screen%'";
    let o = anvil(&["sql", "--format", "csv", "--data", path(&data), q]);
    assert!(o.stdout.contains("2,4"), "{o:?}");
    // Resumed, the recorded group is kept.
    let o = f.run(true);
    assert!(o.status.success(), "{}", stderr(&o));
    let recording = f
        .last_run()
        .iter()
        .filter(|l| l["step"] == "recording")
        .count();
    assert_eq!(recording, 0, "{:?}", f.steps());
}
