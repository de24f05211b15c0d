//! Session workloads recorded end to end: the real `anvil-capture` against the real
//! `anvil-sim`, each later turn carrying the actual replies before it, held to the
//! simulator's truth (cached tokens, TTFT per turn), and a cache that leaks one session's
//! content into another's reply caught by the per-turn canaries.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use anvil::artifact::RunJson;
use serde_json::{Value, json};

use super::common::{Sim, artifact_of, output_text, small_manifest, sql_rows, sql_rows_with};

fn declare(dir: &Path, session: Value, concurrency: u32) -> PathBuf {
    let path = dir.join("workloads.json");
    let doc = json!({"workloads": [{
        "class": "chat-sessions",
        "gate": "broad repeated quality, agentic, SWE, and endurance",
        "context": 512,
        "concurrency": concurrency,
        "reply_words": 24,
        "max_tokens": 48,
        "session": session
    }]});
    std::fs::write(&path, doc.to_string()).unwrap();
    path
}

fn capture(manifest: &Path, workloads: &Path, url: &str, out: &Path, extra: &[&str]) -> Output {
    super::workloads::capture_with(manifest, workloads, "chat-sessions", url, out, extra)
}

/// Per request id of the simulator's truth: (cached prompt tokens, body read at, first
/// content token written at).
fn truth(path: &Path) -> BTreeMap<String, (u64, i64, i64)> {
    let mut out: BTreeMap<String, (u64, i64, i64)> = BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        if line.starts_with('#') || line.starts_with("request_id") {
            continue;
        }
        let f: Vec<&str> = line.split(',').collect();
        let e = out.entry(f[0].to_owned()).or_insert((0, 0, 0));
        let t: i64 = f[6].parse().unwrap();
        match f[4] {
            "cache_hit" => e.0 = f[3].parse().unwrap(),
            "request_read" => e.1 = t,
            "content" if f[3] != "0" && e.2 == 0 => e.2 = t,
            _ => {}
        }
    }
    out
}

#[test]
fn each_turn_carries_the_actual_replies_and_the_cache_serves_the_history_as_the_truth_says() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = small_manifest(tmp.path(), |_| {});
    let workloads = declare(
        tmp.path(),
        json!({"sessions": 6, "turns": 3, "turn_words": 40, "think_time_s": 0.05}),
        2,
    );
    let truth_csv = tmp.path().join("truth.csv");
    let sim = Sim::start(&["--truth", truth_csv.to_str().unwrap()]);
    let out = tmp.path().join("out");
    let o = capture(&manifest, &workloads, &sim.url(0), &out, &[]);
    let dir = artifact_of(&o);
    let (code, err) = sim.stop();
    assert_eq!(code, 0, "{err}");
    let rj = RunJson::read(&dir.join("run.json")).unwrap();
    let s = rj.workload.sessions.clone().expect("sessions in run.json");
    assert_eq!((s.sessions, s.turns_min, s.turns_max), (6, 3, 3));
    assert_eq!(rj.workload.total_requests, 18);
    assert_eq!(rj.counts.succeeded, 18, "{}", output_text(&o));

    let rows = sql_rows(
        &out,
        "SELECT t.session_id, t.turn, t.request_index, t.replica, t.outcome, t.history_tokens, \
         t.prompt_tokens, t.cached_tokens, t.cached_source, t.ttft_ms, t.think_ms, \
         t.canary_ok, t.foreign_canary_count, r.request_body, r.t_sent_ns, rt.content, \
         rt.usage_completion_tokens \
         FROM session_turns t \
         JOIN requests r ON r.run_id = t.run_id AND r.request_index = t.request_index \
         JOIN request_timing rt ON rt.run_id = t.run_id AND rt.request_index = t.request_index \
         ORDER BY t.session_id, t.turn",
    );
    assert_eq!(rows.len(), 18, "{rows:?}");
    let truth = truth(&truth_csv);
    let int = |r: &Value, k: &str| r[k].as_i64().unwrap_or_else(|| panic!("{k}: {r}"));
    for pair in rows.chunks(3).flat_map(|s| s.windows(2)) {
        let (before, turn) = (&pair[0], &pair[1]);
        assert_eq!(int(turn, "turn"), int(before, "turn") + 1);
        assert_eq!(turn["outcome"], "ok");
        assert_eq!(turn["canary_ok"], true, "{turn}");
        assert_eq!(int(turn, "foreign_canary_count"), 0);
        // A session's turns stay on one replica, and the history is the reply itself.
        assert_eq!(turn["replica"], before["replica"]);
        let body: Value = serde_json::from_str(turn["request_body"].as_str().unwrap()).unwrap();
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len() as i64, 2 + 2 * int(turn, "turn"));
        assert_eq!(messages[messages.len() - 2]["role"], "assistant");
        assert_eq!(messages[messages.len() - 2]["content"], before["content"]);
        let before_body: Value =
            serde_json::from_str(before["request_body"].as_str().unwrap()).unwrap();
        assert_eq!(
            &messages[..messages.len() - 2],
            before_body["messages"].as_array().unwrap().as_slice()
        );
        assert_eq!(
            int(turn, "history_tokens"),
            int(before, "prompt_tokens") + int(before, "usage_completion_tokens")
        );
        // The previous prompt's whole blocks are served from the cache (it ends with the
        // template's 3-token assistant prime, which the history does not repeat).
        let (cached, prev_prompt) = (int(turn, "cached_tokens"), int(before, "prompt_tokens"));
        assert_eq!(turn["cached_source"], "usage");
        assert!(
            (prev_prompt - 3 - 15..=prev_prompt - 3).contains(&cached),
            "turn {turn}: {cached} cached of a previous prompt of {prev_prompt}"
        );
        // The think time is from the reply's last byte.
        let think = turn["think_ms"].as_f64().unwrap();
        assert!((50.0..80.0).contains(&think), "think {think} ms");
    }
    for r in &rows {
        let index = int(r, "request_index");
        let (hit, read, first) = truth[&format!("{}-{index}", rj.run_id)];
        assert_eq!(int(r, "cached_tokens") as u64, hit, "request {index}");
        if int(r, "turn") == 0 {
            assert!(hit < 16, "a first turn finds nothing of it cached: {hit}");
        }
        // TTFT per turn against the simulator's own: from its body read to its first
        // content token written (the client's TTFT adds the request's and the token's
        // transit, a few ms at most on loopback).
        let ttft = r["ttft_ms"].as_f64().unwrap();
        let sim_ttft = (first - read) as f64 / 1e6;
        assert!(
            ttft >= sim_ttft - 0.5 && ttft <= sim_ttft + 25.0,
            "request {index}: anvil TTFT {ttft} ms, the simulator's {sim_ttft} ms"
        );
    }

    // Per turn and per session.
    let by_turn = sql_rows(
        &out,
        "SELECT turn, sessions, ok, cut, cached_share, contaminated FROM turn_stats \
         ORDER BY turn",
    );
    assert_eq!(by_turn.len(), 3);
    assert!(by_turn.iter().all(|r| r["sessions"] == 6 && r["ok"] == 6));
    assert!(by_turn[0]["cached_share"].as_f64().unwrap() < 0.05);
    assert!(
        by_turn[2]["cached_share"].as_f64().unwrap() > 0.6,
        "{by_turn:?}"
    );
    let sessions = sql_rows(
        &out,
        "SELECT session_id, turns, turns_ok, all_ok, contaminated FROM sessions \
         ORDER BY session_id",
    );
    assert_eq!(sessions.len(), 6);
    assert!(
        sessions
            .iter()
            .all(|s| s["turns"] == 3 && s["all_ok"] == true && s["contaminated"] == false),
        "{sessions:?}"
    );

    // Per-turn SLOs: turn 0 at its median TTFT, later turns just under their slowest. A
    // session attains when every turn meets its own turn's bound, as counted here from the
    // turns' TTFTs.
    let sorted = |first: bool| {
        let mut v: Vec<f64> = rows
            .iter()
            .filter(|r| (int(r, "turn") == 0) == first)
            .map(|r| r["ttft_ms"].as_f64().unwrap())
            .collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let (first, later) = (sorted(true), sorted(false));
    let (first_bound, later_bound) = (first[(first.len() - 1) / 2], later[later.len() - 2]);
    let slos = [
        format!("turn 0: ttft_ms<={first_bound}"),
        format!("turns 1+: ttft_ms<={later_bound}"),
    ];
    let args = ["--slo", &slos[0], "--slo", &slos[1]];
    let meets = |r: &Value| {
        let bound = if int(r, "turn") == 0 {
            first_bound
        } else {
            later_bound
        };
        r["ttft_ms"].as_f64().unwrap() <= bound
    };
    // The first wave: the first turns of sessions 0 and 1 (2 in flight, one replica).
    let expect = |window: &str| {
        let kept: Vec<&[Value]> = rows
            .chunks(3)
            .filter(|s| window == "all" || int(&s[0], "session_id") >= 2)
            .collect();
        let attained = kept.iter().filter(|s| s.iter().all(meets)).count() as i64;
        let turns_attained = kept
            .iter()
            .flat_map(|s| s.iter())
            .filter(|r| meets(r))
            .count();
        (kept.len() as i64, attained, turns_attained as i64)
    };
    let per_turn = sql_rows_with(
        &out,
        &args,
        "SELECT turn, slos, missed FROM slo_attainment ORDER BY session_id, turn",
    );
    assert_eq!(per_turn.len(), 18);
    assert!(per_turn.iter().all(|r| r["slos"] == 1), "{per_turn:?}");
    let goodput = sql_rows_with(
        &out,
        &args,
        "SELECT window, sessions, completed, attained, turns, turns_attained, attained_share, \
         goodput_sps, span_s FROM session_goodput ORDER BY window",
    );
    assert_eq!(goodput.len(), 2, "{goodput:?}");
    for g in &goodput {
        let window = g["window"].as_str().unwrap();
        let (n, k, turns_k) = expect(window);
        assert_eq!(
            (
                int(g, "sessions"),
                int(g, "attained"),
                int(g, "turns_attained")
            ),
            (n, k, turns_k),
            "{window}: {g}"
        );
        assert_eq!((int(g, "completed"), int(g, "turns")), (n, 3 * n));
        let sps = g["goodput_sps"].as_f64().unwrap();
        assert!((sps - k as f64 / g["span_s"].as_f64().unwrap()).abs() < 1e-9);
    }
    let (_, k_all, _) = expect("all");
    assert!(
        (1..6).contains(&k_all),
        "the bounds leave some sessions attained and some not: {k_all}"
    );
}

#[test]
fn a_cache_that_serves_one_sessions_content_into_anothers_reply_is_caught_by_the_turns_canaries() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = small_manifest(tmp.path(), |_| {});
    let workloads = declare(
        tmp.path(),
        json!({"sessions": 4, "turns": 2, "turn_words": 24}),
        1,
    );
    let sim = Sim::start(&["--fault", "cache-leak=0.5"]);
    let out = tmp.path().join("out");
    let o = capture(&manifest, &workloads, &sim.url(0), &out, &["--warmup", "0"]);
    let _ = artifact_of(&o);
    let (code, err) = sim.stop();
    assert_eq!(code, 0, "{err}");
    let turns = sql_rows(
        &out,
        "SELECT session_id, turn, foreign_canary_count, canary_ok FROM session_turns \
         ORDER BY session_id, turn",
    );
    assert_eq!(turns.len(), 8, "{turns:?}");
    // The first session's first turn has nothing of another to leak.
    assert_eq!(turns[0]["foreign_canary_count"], 0);
    let leaked: Vec<&Value> = turns
        .iter()
        .filter(|t| t["foreign_canary_count"].as_i64() > Some(0))
        .collect();
    assert!(!leaked.is_empty(), "{turns:?}");
    assert!(leaked.iter().all(|t| t["canary_ok"] == false));
    let contaminated = sql_rows(
        &out,
        "SELECT count(*) AS n FROM sessions WHERE contaminated AND NOT all_ok",
    );
    assert!(contaminated[0]["n"].as_i64().unwrap() >= 1);
}

#[test]
fn open_loop_sessions_arrive_at_their_rate_and_tool_turns_answer_the_assistants_call() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = small_manifest(tmp.path(), |_| {});
    let workloads = declare(
        tmp.path(),
        json!({"sessions": 8, "turns": {"min": 2, "max": 3}, "turn_words": 24,
               "rate_per_s": 40.0, "tool_every": 2}),
        4,
    );
    let sim = Sim::start(&[]);
    let out = tmp.path().join("out");
    let o = capture(&manifest, &workloads, &sim.url(0), &out, &[]);
    let dir = artifact_of(&o);
    let (code, err) = sim.stop();
    assert_eq!(code, 0, "{err}");
    assert!(
        dir.to_str().unwrap().contains(".poisson40"),
        "{}",
        dir.display()
    );
    let rj = RunJson::read(&dir.join("run.json")).unwrap();
    assert_eq!(rj.workload.sessions.as_ref().unwrap().tool_every, Some(2));
    let rows = sql_rows(
        &out,
        "SELECT r.session_id, r.turn, r.outcome, r.request_body, r.t_intended_ns, \
         r.t_released_ns, r.t_sent_ns FROM requests r \
         WHERE r.kind = 'measured' ORDER BY r.session_id, r.turn",
    );
    assert_eq!(rows.len() as u64, rj.workload.total_requests);
    assert!(rows.iter().all(|r| r["outcome"] == "ok"), "{rows:?}");
    // First turns released in session order, at the plan's Poisson arrivals (not all at once).
    let firsts: Vec<i64> = rows
        .iter()
        .filter(|r| r["turn"] == 0)
        .map(|r| r["t_intended_ns"].as_i64().unwrap())
        .collect();
    assert_eq!(firsts.len(), 8);
    assert!(firsts.windows(2).all(|w| w[0] <= w[1]), "{firsts:?}");
    assert!(firsts[7] - firsts[0] > 20_000_000, "{firsts:?}");
    for r in &rows {
        let (intended, released, sent) = (
            r["t_intended_ns"].as_i64().unwrap(),
            r["t_released_ns"].as_i64().unwrap(),
            r["t_sent_ns"].as_i64().unwrap(),
        );
        assert!(intended <= released && released <= sent, "{r}");
        let body: Value = serde_json::from_str(r["request_body"].as_str().unwrap()).unwrap();
        let last = body["messages"].as_array().unwrap().last().unwrap().clone();
        match r["turn"].as_i64().unwrap() {
            // Turn 2 answers a tool call the history's assistant message made.
            2 => {
                assert_eq!(last["role"], "tool", "{body}");
                let m = body["messages"].as_array().unwrap();
                let call = &m[m.len() - 2]["tool_calls"][0];
                assert_eq!(call["id"], last["tool_call_id"]);
            }
            _ => assert_eq!(last["role"], "user"),
        }
    }
}
