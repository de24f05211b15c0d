//! Capacity search through `anvil campaign run` against a real `anvil-sim` process whose
//! timing model fixes the answer: the bracket it finds, a journal line per probe,
//! `capacity.json`, `--resume` after SIGKILL that re-records no complete probe, a two-replica
//! search after the first wave with its capacity and goodput per GPU (and the `capacity` SQL
//! table), a bracket too close to the target to resolve, and a probe size that cannot resolve
//! the target at all.

use std::process::Command;

use serde_json::{Value, json};

use super::campaign_run::{Fixture, campaign_json, signal, sim_launch, stderr};
use super::common::{ANVIL, SIM, says};

/// The searched arm's simulator ([`sim_arm`]) at 80 decode steps per second.
///
/// At 10^6 prefill tokens/s the timing model fixes the capacity under `ttft_ms<=60`: with at
/// most 4 requests in flight every request is admitted on arrival, and its TTFT is its
/// prefill (4,096 tokens: about 4 ms; at most 16 ms behind the rest of a first wave of 4)
/// plus one decode step (12.5 ms), under 30 ms. With 5 in flight the fifth waits
/// for a running sequence to finish: in the closed loop each new request arrives as one
/// finishes and waits for the next completion, the four running ones spread over a reply's
/// ~0.5 s of generation, about 125 ms apart, so most TTFTs exceed 60 ms. Capacity is the
/// batch limit: 4 in flight meets 90% attainment, 5 does not.
fn arm_launch(prefill_tps: &str) -> Value {
    sim_arm(prefill_tps, "80")
}

/// The simulator of a searched arm: at most 4 running sequences (the rest wait FIFO),
/// prefill at `prefill_tps` tokens/s (one FIFO lane), `decode_tps` decode steps per second,
/// no batch cost, no chunking, unasked replies of about 40 words (one token each).
fn sim_arm(prefill_tps: &str, decode_tps: &str) -> Value {
    let argv = vec![
        SIM,
        "--port",
        "{port}",
        "--no-realtime",
        "--max-model-len",
        "65536",
        "--prefill-tps",
        prefill_tps,
        "--decode-tps",
        decode_tps,
        "--max-batch",
        "4",
        "--batch-cost",
        "0",
        "--chunked-prefill",
        "0",
        "--mean-words",
        "40",
    ];
    json!({ "argv": argv })
}

/// A campaign of one arm, `TP1`, that records no cell and searches concurrency 3..8 of the
/// screen class (natural completion, 4,096 prompt tokens) against `ttft_ms<=60`.
fn search_campaign(launch: Value, requests: u64) -> Fixture {
    Fixture::with_campaign(|ports| {
        campaign_json(
            sim_launch(&["--model", "qwen"]),
            ports[0],
            json!({"slo": ["ttft_ms<=60"],
                "arms": [{
                    "arm": "TP1",
                    "launch": launch,
                    "ports": [ports[1]],
                    "readiness": {"timeout_s": 30},
                    "stop": {"grace_s": 5},
                    "config": {"topology": "TP1"},
                    "runtime": "anvil-sim",
                    "search": {
                        "class": "optimization-screen",
                        "context": 4096,
                        "vary": "concurrency",
                        "min": 3,
                        "max": 8,
                        "requests": requests,
                        "target": 0.9
                    }
                }]
            }),
        )
    })
}

fn capacity(f: &Fixture) -> Value {
    let text = std::fs::read_to_string(f.folder().join("capacity.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The probes a journal slice records (not reused), as (load, run id).
fn probes(lines: &[Value]) -> Vec<(f64, String)> {
    lines
        .iter()
        .filter(|l| l["step"] == "search_probe" && l["reused"] == false)
        .map(|l| {
            (
                l["load"].as_f64().unwrap(),
                l["run_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn capacity_search_finds_the_simulators_batch_limit_and_resumes_after_sigkill() {
    let f = search_campaign(arm_launch("1000000"), 100);
    let mut child = f.command(false).spawn().unwrap();
    // Killed once two probes are complete (3 and 8 in flight).
    f.wait_for("two probes", |l| {
        l["step"] == "search_probe" && l["load"].as_f64() == Some(8.0)
    });
    signal(&child, libc::SIGKILL);
    child.wait().unwrap();
    let before = probes(&f.journal());
    assert_eq!(
        before.iter().map(|p| p.0).collect::<Vec<_>>(),
        [3.0, 8.0],
        "{before:?}"
    );

    let o = f.run(true);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let last = f.last_run();
    let after = last.as_slice();
    // The two complete probes are read back, not recorded again; bisection goes on from
    // them: 5 fails, 4 meets.
    let reused: Vec<String> = after
        .iter()
        .filter(|l| l["step"] == "search_probe" && l["reused"] == true)
        .map(|l| l["run_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        reused,
        before.iter().map(|p| p.1.clone()).collect::<Vec<_>>()
    );
    let recorded: Vec<f64> = probes(after).iter().map(|p| p.0).collect();
    assert_eq!(recorded, [5.0, 4.0], "{after:?}");
    assert!(
        !after.iter().any(|l| l["step"] == "superseded"),
        "a complete probe was superseded: {after:?}"
    );

    let c = capacity(&f);
    assert_eq!(c["schema"], "anvil-serving.capacity/v1");
    let s = &c["searches"][0];
    assert_eq!(s["arm"], "TP1");
    assert_eq!(s["status"], "resolved", "{s:#}");
    assert_eq!(s["capacity"], 4.0, "{s:#}");
    let bracket = &s["bracket"];
    assert_eq!(bracket["passing"]["load"], 4.0);
    assert_eq!(bracket["failing"]["load"], 5.0);
    assert!(
        bracket["passing"]["low"].as_f64().unwrap() > 0.9,
        "{bracket:#}"
    );
    assert!(
        bracket["failing"]["high"].as_f64().unwrap() < 0.9,
        "{bracket:#}"
    );
    assert_eq!(s["probes"].as_array().unwrap().len(), 4);
    // Each probe is an ordinary artifact marked as a probe: the SQL sees its attainment.
    let dir = bracket["passing"]["runs"][0]["dir"].as_str().unwrap();
    assert!(
        dir.ends_with("TP1/optimization-screen.ctx4096.c4.n100.probe-capacity"),
        "{dir}"
    );
    let run: Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{dir}/run.json")).unwrap()).unwrap();
    assert_eq!(run["workload"]["probe"], "capacity");
    let o = Command::new(ANVIL)
        .args([
            "sql",
            "--format",
            "json",
            "--data",
            dir,
            "--slo",
            "ttft_ms<=60",
        ])
        .arg("SELECT attained, requests FROM goodput WHERE window = 'all'")
        .output()
        .unwrap();
    let rows: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rows[0]["attained"], bracket["passing"]["attained"]);
}

#[test]
fn a_bracket_whose_intervals_straddle_the_target_is_not_resolved() {
    // Prefill at 200,000 tokens/s (20.5 ms a prompt): a first wave of C requests released
    // together queues on the prefill lane, its k-th TTFT about 12.5 + 20.5 k ms, so at 3 in
    // flight the third misses `ttft_ms<=60` and at 4 the third and fourth do, while later
    // requests, arriving one at a time, meet it. 39 of 40 and 38 of 40 meet the 90% target
    // by their point estimate, but their exact lower bounds (87%, 83%) do not clear it: with
    // 40 requests a probe cannot show 90% unless every request attains. On a loaded machine
    // more requests miss (35 and 36 of 40 seen in CI): the minimum then misses by its point
    // estimate but not by its interval, the failing side widens up to 5, shown to miss, and
    // the loads below it stay unresolved: "not resolved" either way, never "no load meets".
    let f = search_campaign(arm_launch("200000"), 40);
    let o = f.run(false);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = &capacity(&f)["searches"][0];
    assert_eq!(s["status"], "not resolved at this sample size", "{s:#}");
    assert_eq!(s["capacity"], Value::Null);
    assert!(
        s["verdict"]
            .as_str()
            .unwrap()
            .starts_with("not resolved at this sample size"),
        "{s:#}"
    );
    let lines = f.journal();
    let probed = probes(&lines).len();
    assert_eq!(probed, s["probes"].as_array().unwrap().len());
    says(&stderr(&o), "capacity search TP1: not resolved");
}

#[test]
fn a_probe_too_small_to_resolve_the_target_is_refused() {
    let f = search_campaign(arm_launch("1000000"), 30);
    let o = Command::new(ANVIL)
        .arg("validate")
        .arg(&f.file)
        .output()
        .unwrap();
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(2), "{out}");
    says(&out, "search.requests");
    says(&out, "only from 36 requests");
    let o = f.run(false);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!f.folder().join("capacity.json").exists());
}

/// A two-replica arm searched after the first wave with `window_requests`: each probe sends
/// its first wave (c × 2) plus 40 measured requests; the batch limit of 4 per replica is the
/// capacity (8 in flight on 2 GPUs: 4 per GPU), goodput per GPU there has an interval across
/// the passing load's two runs, and `anvil sql` reads the result as the `capacity` table.
#[test]
fn a_dp2_search_after_the_first_wave_states_capacity_and_goodput_per_gpu() {
    let f = Fixture::with_campaign(|ports| {
        campaign_json(
            sim_launch(&["--model", "qwen"]),
            ports[0],
            json!({"slo": ["ttft_ms<=60"],
                "arms": [{
                    "arm": "two independent TP1 replicas",
                    "launch": arm_launch("1000000"),
                    "ports": [ports[1], ports[2]],
                    "readiness": {"timeout_s": 30},
                    "stop": {"grace_s": 5},
                    "config": {"topology": "DP2"},
                    "runtime": "anvil-sim",
                    "search": {
                        "class": "optimization-screen",
                        "context": 4096,
                        "vary": "concurrency",
                        "min": 3,
                        "max": 8,
                        "window": "after_first_wave",
                        "window_requests": 40,
                        "target": 0.9,
                        "repeats": 2
                    }
                }]
            }),
        )
    });
    let o = f.run(false);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = &capacity(&f)["searches"][0];
    assert_eq!(s["status"], "resolved", "{s:#}");
    assert_eq!(
        (&s["capacity"], &s["capacity_per_gpu"]),
        (&json!(4.0), &json!(4.0)),
        "{s:#}"
    );
    assert_eq!((&s["replicas"], &s["gpus"]), (&json!(2), &json!(2)));
    assert_eq!(s["window_requests"], 40);
    // Every probe measured 40 requests after a first wave of c × 2.
    for p in s["probes"].as_array().unwrap() {
        assert_eq!(p["requests"], 40, "{p:#}");
        let dir = p["dir"].as_str().unwrap();
        let c = p["load"].as_f64().unwrap() as u64;
        assert!(
            dir.contains(&format!(".c{c}.n{}.probe-capacity", c * 2 + 40)),
            "{dir}"
        );
    }
    let g = &s["goodput_per_gpu"];
    assert_eq!(g["runs"], 2, "{s:#}");
    let (mean, low, high) = (
        g["mean"].as_f64().unwrap(),
        g["low"].as_f64().unwrap(),
        g["high"].as_f64().unwrap(),
    );
    assert!(low <= mean && mean <= high && mean > 0.0, "{g:#}");
    // The mean is the passing runs' goodput over the window, halved (two GPUs).
    let runs = s["bracket"]["passing"]["runs"].as_array().unwrap();
    let sum: f64 = runs
        .iter()
        .map(|r| r["goodput_tps"].as_f64().unwrap())
        .sum();
    assert!((mean - sum / 2.0 / 2.0).abs() < 1e-9, "{g:#} {runs:#?}");
    says(
        s["verdict"].as_str().unwrap(),
        "4 in flight per GPU (4 × 2 replicas on 2 GPUs)",
    );
    let o = Command::new(ANVIL)
        .args(["sql", "--format", "json", "--data"])
        .arg(&f.out)
        .arg("SELECT arm, capacity_per_gpu, goodput_per_gpu_tps, goodput_runs, passing_runs FROM capacity")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rows[0]["arm"], "two independent TP1 replicas");
    assert_eq!(rows[0]["capacity_per_gpu"], 4.0);
    assert_eq!(rows[0]["goodput_runs"], 2);
    assert_eq!(rows[0]["passing_runs"], 2);
    assert!((rows[0]["goodput_per_gpu_tps"].as_f64().unwrap() - mean).abs() < 1e-9);
}

/// A session workload's search judges sessions: each probe measures the class's 20 declared
/// sessions of 3 turns (think time 0), and a session attains when every turn meets its
/// turn's bound (`turn 0: ttft_ms<=60`, `turns 1+: ttft_ms<=50`). The simulator runs at most
/// 4 sequences (decode 200 steps/s, replies of 20 words: about 100 ms), so up to 4 sessions
/// in flight every turn is admitted on arrival (TTFT about one 5 ms decode step); with 5,
/// in every round of replies one turn waits a whole reply for a free sequence (over 100 ms),
/// so most sessions miss (about a quarter attained). Capacity at 80% attainment: 4 sessions
/// in flight (20 of 20 attained there clears 80% by the exact interval), judged per session, and
/// `anvil verify` recomputes every probe's session attainment with polars.
#[test]
fn a_session_search_finds_the_sessions_in_flight_the_batch_limit_allows() {
    let f = Fixture::with_campaign(|ports| {
        campaign_json(
            sim_launch(&["--model", "qwen"]),
            ports[0],
            json!({
                "slo": {"default": ["ttft_ms<=60"],
                        "chat-sessions": ["turn 0: ttft_ms<=60", "turns 1+: ttft_ms<=50"]},
                "workloads": [{
                    "class": "chat-sessions",
                    "gate": "broad repeated quality, agentic, SWE, and endurance",
                    "context": 512,
                    "concurrency": 4,
                    "reply_words": 20,
                    "max_tokens": 40,
                    "session": {"sessions": 20, "turns": 3, "turn_words": 32}
                }],
                "arms": [{
                    "arm": "TP1",
                    "launch": sim_arm("1000000", "200"),
                    "ports": [ports[1]],
                    "readiness": {"timeout_s": 30},
                    "stop": {"grace_s": 5},
                    "config": {"topology": "TP1"},
                    "runtime": "anvil-sim",
                    "search": {
                        "class": "chat-sessions",
                        "context": 512,
                        "vary": "concurrency",
                        "min": 3,
                        "max": 8,
                        "target": 0.8
                    }
                }]
            }),
        )
    });
    let o = f.run(false);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = &capacity(&f)["searches"][0];
    assert_eq!(s["status"], "resolved", "{s:#}");
    assert_eq!(s["judged"], "sessions", "{s:#}");
    assert_eq!(s["capacity"], json!(4.0), "{s:#}");
    assert_eq!(
        s["slo"],
        json!(["turn 0: ttft_ms<=60", "turns 1+: ttft_ms<=50"]),
        "{s:#}"
    );
    for p in s["probes"].as_array().unwrap() {
        assert_eq!(
            p["requests"], 20,
            "every probe judges its 20 sessions: {p:#}"
        );
        let c = p["load"].as_f64().unwrap() as u64;
        assert!(
            p["dir"]
                .as_str()
                .unwrap()
                .contains(&format!("chat-sessions.ctx512.c{c}.n60.probe-capacity")),
            "{p:#}"
        );
    }
    let failing = &s["bracket"]["failing"];
    assert_eq!(failing["load"], 5.0, "{s:#}");
    assert!(failing["high"].as_f64().unwrap() < 0.8, "{failing:#}");
    says(
        s["verdict"].as_str().unwrap(),
        "capacity 4 sessions in flight per replica at 80.0% attainment: 4 sessions in flight per replica: 100.0%",
    );
    let o = Command::new(ANVIL)
        .args(["verify", "--data"])
        .arg(&f.out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}{}", stderr(&o));
    assert!(text.contains("session_goodput "), "{text}");
    assert!(
        text.contains("capacity probes (attainment, goodput)"),
        "{text}"
    );
}
