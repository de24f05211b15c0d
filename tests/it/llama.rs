//! anvil against a real serving engine: llama.cpp's `llama-server` (built offline from the
//! llama-cpp-python sdist by `scripts/llama-server.sh`, a small random-weight Qwen2-style
//! model made locally), started on loopback by each test. Every capture feature that the
//! simulator tests for timing and faults is checked here for wire behaviour, against the
//! server's own numbers (its `/metrics`, its per-request `timings`, its `usage`).
//!
//! The engine is found through `ANVIL_LLAMA_SERVER` and `ANVIL_LLAMA_MODELS` (what
//! `scripts/llama-server.sh env` prints), else in the script's default cache. Where it is
//! missing each test is skipped and named in the test command's closing list; with `ANVIL_REQUIRE_LLAMA=1` (set by
//! `.ci/run` once the build succeeded) a missing engine fails them instead.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anvil::artifact::{CalibrationMethod, RunJson};

use super::common::{
    ANVIL, CAPTURE, anvil_check, batches, intended_and_sent, ints, run, run_campaign,
    sql_rows as sql, strs,
};

/// Where the engine and its models are.
pub(super) struct Engine {
    server: PathBuf,
    models: PathBuf,
}

impl Engine {
    /// The path of one of the engine's models.
    fn model(&self, file: &str) -> String {
        self.models.join(file).to_string_lossy().into_owned()
    }
}

/// A temporary folder holding copies of the sample campaign's manifest and plan, for a
/// campaign file written beside them.
fn seeded_dir() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for name in ["workload-manifest.json", "run-plan.json"] {
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("sample-data")
                .join(name),
            tmp.path().join(name),
        )
        .unwrap();
    }
    tmp
}

/// The script's default cache (`scripts/llama-server.sh`).
fn default_cache() -> Option<PathBuf> {
    if let Ok(c) = std::env::var("ANVIL_ENGINE_CACHE") {
        return Some(PathBuf::from(c));
    }
    let base = std::env::var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|_| std::env::var("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .ok()?;
    Some(base.join("anvil-engines"))
}

/// Held by each test for its whole run: one real engine at a time, so a busy llama-server
/// does not take the cores the simulator tests' timing needs.
static ONE_ENGINE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The engine (and the turn to use it), or `None` after a loud skip message (a panic when it
/// is required).
pub(super) fn engine(test: &str) -> Option<(Engine, std::sync::MutexGuard<'static, ()>)> {
    let cache = default_cache();
    let server = std::env::var("ANVIL_LLAMA_SERVER")
        .map(PathBuf::from)
        .ok()
        .or_else(|| {
            cache
                .as_ref()
                .map(|c| c.join("llama.cpp-0.3.36/bin/llama-server"))
        });
    let models = std::env::var("ANVIL_LLAMA_MODELS")
        .map(PathBuf::from)
        .ok()
        .or_else(|| cache.as_ref().map(|c| c.join("models-v1")));
    if let (Some(server), Some(models)) = (server, models)
        && server.is_file()
        && models.join("tiny.gguf").is_file()
        && models.join("draft.gguf").is_file()
    {
        let turn = ONE_ENGINE.lock().unwrap_or_else(|e| e.into_inner());
        return Some((Engine { server, models }, turn));
    }
    let why = std::env::var("ANVIL_LLAMA_UNAVAILABLE").unwrap_or_default();
    super::skip::skipped(test, &super::skip::LLAMA, &why);
    None
}

/// A free loopback port (bound, then released for the server).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running llama-server on loopback, killed when dropped.
pub(super) struct Llama {
    child: Child,
    port: u16,
    args: Vec<String>,
    server: PathBuf,
    log: PathBuf,
}

impl Llama {
    /// Start the tiny model with `slots` parallel slots of `ctx / slots` tokens each, plus
    /// `extra` flags; waits for `/health`.
    pub(super) fn start(
        engine: &Engine,
        dir: &Path,
        slots: u32,
        ctx: u32,
        extra: &[String],
    ) -> Llama {
        // The port is free when chosen; another test may take it before the server binds,
        // so a server that exits at once is started again on another.
        for _ in 0..2 {
            let mut l = Self::spawn_on(engine, dir, free_port(), slots, ctx, extra);
            std::thread::sleep(Duration::from_millis(200));
            if l.child.try_wait().ok().flatten().is_none() {
                l.wait_ready();
                return l;
            }
        }
        let l = Self::spawn_on(engine, dir, free_port(), slots, ctx, extra);
        l.wait_ready();
        l
    }

    fn spawn_on(
        engine: &Engine,
        dir: &Path,
        port: u16,
        slots: u32,
        ctx: u32,
        extra: &[String],
    ) -> Llama {
        let mut args: Vec<String> = [
            "-m",
            &engine.models.join("tiny.gguf").to_string_lossy(),
            "-a",
            "tiny",
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "-c",
            &ctx.to_string(),
            "-np",
            &slots.to_string(),
            "--metrics",
            "--no-webui",
            "-t",
            "1",
            "--poll",
            "0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().cloned());
        let log = dir.join(format!("llama-{port}.log"));
        let child = spawn(&engine.server, &args, &log);
        Llama {
            child,
            port,
            args,
            server: engine.server.clone(),
            log,
        }
    }

    pub(super) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if ureq::get(&format!("{}/health", self.url()))
                .call()
                .is_ok_and(|r| r.status() == 200)
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "llama-server did not become ready: {}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGKILL the server and start it again with the same flags on the same port.
    fn kill_and_restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.child = spawn(&self.server, &self.args, &self.log);
        self.wait_ready();
    }

    /// The server's `/metrics` samples whose name contains `needle`, `name{labels}` → value.
    fn metrics(&self, needle: &str) -> BTreeMap<String, f64> {
        let text = ureq::get(&format!("{}/metrics", self.url()))
            .call()
            .unwrap()
            .into_body()
            .read_to_string()
            .unwrap();
        text.lines()
            .filter(|l| !l.starts_with('#') && l.contains(needle))
            .filter_map(|l| {
                let (k, v) = l.rsplit_once(' ')?;
                Some((k.to_owned(), v.parse().ok()?))
            })
            .collect()
    }
}

fn spawn(server: &Path, args: &[String], log: &Path) -> Child {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    Command::new(server)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("spawn llama-server")
}

impl Drop for Llama {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The sample manifest, as every user's campaign would give it.
fn manifest() -> String {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/sample-data/workload-manifest.json"
    )
    .to_owned()
}

/// `anvil-capture run` against `url` with `args`; returns (exit code, stderr, artifact dir).
fn capture(url: &str, out: &Path, args: &[&str]) -> (Option<i32>, String, PathBuf) {
    capture_with_env(url, out, args, &[])
}

/// [`capture`] with extra environment variables (an API key).
fn capture_with_env(
    url: &str,
    out: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Option<i32>, String, PathBuf) {
    let m = manifest();
    let mut all = vec![
        "run",
        "--manifest",
        &m,
        "--off-manifest",
        "--endpoint",
        url,
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let o = run(CAPTURE, &all, env);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let dir = String::from_utf8_lossy(&o.stdout)
        .lines()
        .last()
        .map(PathBuf::from)
        .unwrap_or_default();
    (o.status.code(), stderr, dir)
}

fn f(v: &serde_json::Value, k: &str) -> f64 {
    v[k].as_f64()
        .unwrap_or_else(|| panic!("{k} is not a number in {v}"))
}

/// Outcomes of the measured requests, by outcome.
fn outcomes(dir: &Path) -> BTreeMap<String, usize> {
    let r = batches(&dir.join("requests.parquet"));
    let kind = strs(&r, "kind");
    let mut by = BTreeMap::new();
    for (k, o) in kind.iter().zip(strs(&r, "outcome")) {
        if k.as_deref() == Some("measured") {
            *by.entry(o.unwrap()).or_default() += 1;
        }
    }
    by
}

/// The headline shape at 4K against 4 slots: calibrated by the server's own tokenizer
/// (`/apply-template` + `/tokenize`, checked against usage), 12 of 12 requests ok with prompt
/// tokens within 1% of 4096 by usage, nothing lost to the server's close after each stream,
/// and the server's own timings agreeing with anvil's.
#[test]
fn llama_headline_cell_is_calibrated_by_the_servers_tokenizer_and_loses_nothing() {
    let Some((engine, _turn)) = engine("llama_headline_cell") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let llama = Llama::start(&engine, tmp.path(), 4, 32768, &[]);
    let out = tmp.path().join("out");
    let (code, stderr, dir) = capture(
        &llama.url(),
        &out,
        &[
            "--class",
            "headline-sustained-output",
            "--requests",
            "12",
            "--concurrency",
            "4",
            "--arm",
            "llama",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    assert_eq!(outcomes(&dir), BTreeMap::from([("ok".to_owned(), 12)]));
    let run_json = RunJson::read(&dir.join("run.json")).unwrap();
    let c = &run_json.calibration;
    assert_eq!(c.method, CalibrationMethod::Tokenize, "{c:?}");
    assert_eq!(c.dialect.as_deref(), Some("llama.cpp"));
    assert_eq!(c.tokenize_tokens, c.usage_prompt_tokens);
    assert_eq!(
        run_json.topology.endpoints[0].server_info["connection_after_stream"],
        "closed"
    );
    assert_eq!(run_json.workload.response_words, Some(256));

    // Usage prompt tokens: the server's count of what was sent.
    let rows = sql(
        &out,
        "SELECT request_index, prompt_tokens, completion_tokens, outcome FROM request_metrics",
    );
    assert_eq!(rows.len(), 12);
    for r in &rows {
        let p = f(r, "prompt_tokens");
        assert!(
            (p - 4096.0).abs() <= 41.0,
            "prompt tokens {p} not within 1% of 4096: {r}"
        );
    }
    let calibrated = sql(
        &out,
        "SELECT count(*) AS n FROM prompt_calibration WHERE calibrated_tokens = actual_tokens",
    );
    assert_eq!(f(&calibrated[0], "n"), 12.0, "tokenizer counts equal usage");

    // The server's timings beside anvil's: same token counts, the same decode time within
    // a few ms, and TTFT never below the server's own prefill.
    let timings = sql(
        &out,
        "SELECT t.request_index, t.queue_ms, t.generation_diff_ms, t.token_diff, \
                t.server_prompt_tokens, t.cached_tokens, m.prompt_tokens \
         FROM server_timings t JOIN request_metrics m \
           ON m.run_id = t.run_id AND m.request_index = t.request_index",
    );
    assert_eq!(timings.len(), 12);
    for t in &timings {
        // The server's own token counts agree with its usage: generated tokens, and prompt
        // tokens processed plus those reused from its cache.
        assert_eq!(f(t, "token_diff"), 0.0, "{t}");
        assert_eq!(
            f(t, "server_prompt_tokens") + f(t, "cached_tokens"),
            f(t, "prompt_tokens"),
            "{t}"
        );
        // Both clocks see the same decode: within a quarter second even on loaded cores
        // (measured here: within 1.3 ms).
        assert!(f(t, "generation_diff_ms").abs() < 250.0, "{t}");
    }
    // ... and in summary.
    let o = run(ANVIL, &["summary", "--data", out.to_str().unwrap()], &[]);
    let summary = String::from_utf8_lossy(&o.stdout);
    assert!(
        summary.contains("server-reported timings (12 requests)")
            && summary.contains("usage completion tokens differ from the server's count in 0"),
        "{summary}"
    );
    assert!(
        summary.contains("client queueing (sent - intended)"),
        "{summary}"
    );

    // The server view knows llama.cpp's queue gauges.
    let queue = sql(
        &out,
        "SELECT max(running) AS running, count(*) AS n, max(runtime) AS runtime, \
         max(metric_dialect) AS metric_dialect FROM server_queue",
    );
    // The runtime is the arm's (here the server's own `owned_by`); the dialect is whose
    // metric names were found.
    assert_eq!(queue[0]["runtime"], "llamacpp");
    assert_eq!(queue[0]["metric_dialect"], "llama.cpp");
    assert!(
        f(&queue[0], "n") > 2.0 && f(&queue[0], "running") >= 1.0,
        "{queue:?}"
    );
}

/// A sequential run on the server's connections: 30 requests, none lost, each on the fresh
/// connection the server's close after every stream calls for.
#[test]
fn llama_sequential_requests_lose_none_to_the_servers_close() {
    let Some((engine, _turn)) = engine("llama_sequential_requests") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let llama = Llama::start(&engine, tmp.path(), 2, 8192, &[]);
    let out = tmp.path().join("out");
    let (code, stderr, dir) = capture(
        &llama.url(),
        &out,
        &[
            "--class",
            "headline-sustained-output",
            "--context",
            "256",
            "--requests",
            "30",
            "--concurrency",
            "1",
            "--arm",
            "llama",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(outcomes(&dir), BTreeMap::from([("ok".to_owned(), 30)]));
    let run_json = RunJson::read(&dir.join("run.json")).unwrap();
    assert_eq!(
        run_json.topology.endpoints[0].server_info["connection_after_stream"],
        "closed"
    );
    // Found before the run: no request raced the close, none had to be sent again.
    let r = batches(&dir.join("requests.parquet"));
    let kind = strs(&r, "kind");
    let fresh = super::common::bools(&r, "new_connection");
    let resent = super::common::bools(&r, "resent");
    let measured: Vec<usize> = (0..kind.len())
        .filter(|&k| kind[k].as_deref() == Some("measured"))
        .collect();
    assert!(measured.iter().all(|&k| !resent[k]), "{resent:?}");
    // The first request goes on the connection the worker opened before the start.
    assert_eq!(measured.iter().filter(|&&k| fresh[k]).count(), 29);
}

/// The functional class against a random-weight model: every request accepted and recorded
/// with an honest reason. A random model fails the content checks; the reasons must say how
/// (cut by the token ceiling, no tool call, an error the server reported in the stream),
/// never "disconnected", and no structured-output corruption is claimed for replies the
/// server's grammar kept valid.
#[test]
fn llama_functional_run_records_every_request_with_an_honest_reason() {
    let Some((engine, _turn)) = engine("llama_functional_run") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let llama = Llama::start(&engine, tmp.path(), 4, 32768, &[]);
    let out = tmp.path().join("out");
    let (code, stderr, dir) = capture(
        &llama.url(),
        &out,
        &[
            "--class",
            "functional",
            "--requests",
            "16",
            "--arm",
            "llama",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let by = outcomes(&dir);
    assert_eq!(by.values().sum::<usize>(), 16, "{by:?}");
    assert!(!by.contains_key("disconnected"), "{by:?}");
    for o in by.keys() {
        assert!(matches!(o.as_str(), "ok" | "stream_error"), "{by:?}");
    }
    let rows = sql(
        &out,
        "SELECT request_index, \"check\", passed, failure, reason FROM functional_results",
    );
    assert_eq!(rows.len(), 16);
    for r in &rows {
        let reason = r["reason"].as_str().unwrap_or("");
        assert!(
            !reason.contains("disconnected") && !reason.contains("corruption"),
            "{r}"
        );
        if r["check"] == "structured_json" {
            assert_ne!(r["failure"], "invalid", "the grammar keeps JSON valid: {r}");
        }
        if r["failure"] == "incomplete" {
            assert!(
                reason.contains("the server reported an error in the stream"),
                "{r}"
            );
        }
        if r["failure"] == "truncated" {
            assert!(reason.contains("token ceiling"), "{r}");
        }
    }
    let plan = concat!(env!("CARGO_MANIFEST_DIR"), "/sample-data/run-plan.json");
    let (_, check) = anvil_check(&out, plan, Path::new(&manifest()));
    assert!(
        !check.contains("STOP structured-output corruption"),
        "{check}"
    );
}

/// `--api completions`: llama.cpp puts usage inside the final chunk that still carries the
/// finish reason; `--api responses`: its prompts are counted through the chat template.
#[test]
fn llama_completions_and_responses_streams_are_recorded_with_their_usage() {
    let Some((engine, _turn)) = engine("llama_completions_and_responses") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let llama = Llama::start(&engine, tmp.path(), 2, 8192, &[]);
    for api in ["completions", "responses"] {
        let out = tmp.path().join(api);
        let (code, stderr, dir) = capture(
            &llama.url(),
            &out,
            &[
                "--class",
                "headline-sustained-output",
                "--context",
                "512",
                "--requests",
                "4",
                "--concurrency",
                "2",
                "--api",
                api,
                "--arm",
                "llama",
            ],
        );
        assert_eq!(code, Some(0), "{api}: {stderr}");
        assert_eq!(
            outcomes(&dir),
            BTreeMap::from([("ok".to_owned(), 4)]),
            "{api}"
        );
        let c = RunJson::read(&dir.join("run.json")).unwrap().calibration;
        assert_eq!(c.method, CalibrationMethod::Tokenize, "{api}: {c:?}");
        assert_eq!(c.tokenize_tokens, c.usage_prompt_tokens, "{api}");
        for r in sql(
            &out,
            "SELECT prompt_tokens, completion_tokens FROM request_metrics",
        ) {
            let p = f(&r, "prompt_tokens");
            assert!((p - 512.0).abs() <= 8.0, "{api}: {p} prompt tokens");
            assert!(f(&r, "completion_tokens") > 0.0, "{api}: {r}");
        }
        if api == "completions" {
            let e = batches(&dir.join("events.parquet"));
            let finish = strs(&e, "finish_reason");
            let usage = ints(&e, "usage_completion_tokens");
            let both = finish
                .iter()
                .zip(&usage)
                .filter(|(f, u)| f.is_some() && u.is_some())
                .count();
            assert_eq!(
                both, 4,
                "usage beside finish_reason in one chunk per request"
            );
        }
    }
}

/// Speculative decoding with llama.cpp's synthetic acceptance: `spec_decode` (and its
/// positions) equal the server's own counter deltas exactly.
#[test]
fn llama_spec_decode_equals_the_servers_counter_deltas() {
    let Some((engine, _turn)) = engine("llama_spec_decode") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let draft = engine.model("draft.gguf");
    let extra: Vec<String> = [
        "--spec-type",
        "draft-simple",
        "-md",
        &draft,
        "--spec-draft-n-max",
        "4",
        "--spec-synth-len",
        "2.5",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let llama = Llama::start(&engine, tmp.path(), 2, 8192, &extra);
    let before = llama.metrics("spec_decode");
    let out = tmp.path().join("out");
    let (code, stderr, _) = capture(
        &llama.url(),
        &out,
        &[
            "--class",
            "headline-sustained-output",
            "--context",
            "256",
            "--requests",
            "6",
            "--concurrency",
            "2",
            "--arm",
            "spec",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let after = llama.metrics("spec_decode");
    let delta = |name: &str| {
        after.get(name).copied().unwrap_or(0.0) - before.get(name).copied().unwrap_or(0.0)
    };
    let s = &sql(
        &out,
        "SELECT runtime, metric_dialect, drafts, draft_tokens, accepted_tokens, \
         mean_accepted_length FROM spec_decode",
    )[0];
    assert_eq!(s["runtime"], "llamacpp");
    assert_eq!(s["metric_dialect"], "llama.cpp");
    let drafts = delta("llamacpp:spec_decode_num_drafts_total");
    assert!(drafts > 0.0, "the server drafted: {after:?}");
    assert_eq!(f(s, "drafts"), drafts);
    assert_eq!(
        f(s, "draft_tokens"),
        delta("llamacpp:spec_decode_num_draft_tokens_total")
    );
    assert_eq!(
        f(s, "accepted_tokens"),
        delta("llamacpp:spec_decode_num_accepted_tokens_total")
    );
    let positions = sql(
        &out,
        "SELECT position, accepted_tokens FROM spec_decode_positions ORDER BY position",
    );
    let server_positions = after
        .keys()
        .filter(|k| k.starts_with("llamacpp:spec_decode_num_accepted_tokens_per_pos_total{"))
        .count();
    assert!(server_positions > 0, "{after:?}");
    assert_eq!(
        positions.len(),
        server_positions,
        "every position the server reports"
    );
    for p in &positions {
        let name = format!(
            "llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position=\"{}\"}}",
            p["position"]
        );
        assert_eq!(f(p, "accepted_tokens"), delta(&name), "{name}");
    }
}

/// A server killed and started again mid-run: llama.cpp exports no process start time, but
/// its counters begin again from 0, and `anvil check` names the restart.
#[test]
fn llama_restart_mid_run_is_detected_from_its_counters() {
    let Some((engine, _turn)) = engine("llama_restart_mid_run") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut llama = Llama::start(&engine, tmp.path(), 2, 8192, &[]);
    let out = tmp.path().join("out");
    let m = manifest();
    let url = llama.url();
    let child = Command::new(CAPTURE)
        .args([
            "run",
            "--manifest",
            &m,
            "--off-manifest",
            "--class",
            "headline-sustained-output",
            "--context",
            "256",
            "--requests",
            "40",
            "--concurrency",
            "2",
            // Paced, so the requests due while the server is down are few and the run goes
            // on against the restarted server (closed loop would spend the rest at once on
            // refused connections).
            "--rate",
            "5",
            "--arm",
            "restarted",
            "--endpoint",
            &url,
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Restart once the run has recorded a few scrapes of the first server.
    let dir = out.join(
        "2026-09-04-qwen38-27b-pro6000-possibility/restarted/headline-sustained-output.ctx256.c2.n40.rate5",
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    while !dir.join("scrapes.parts").exists()
        || std::fs::read_dir(dir.join("scrapes.parts")).map_or(0, |d| d.count()) < 3
    {
        assert!(Instant::now() < deadline, "the run did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    llama.kill_and_restart();
    let o = child.wait_with_output().unwrap();
    assert!(
        matches!(o.status.code(), Some(0)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r = &sql(&out, "SELECT restarted, signal, detectable FROM restarts")[0];
    assert_eq!(r["restarted"], true, "{r}");
    assert_eq!(r["signal"], "counter_reset", "{r}");
    let plan = concat!(env!("CARGO_MANIFEST_DIR"), "/sample-data/run-plan.json");
    let (code, check) = anvil_check(&out, plan, Path::new(&m));
    assert_eq!(code, Some(1), "{check}");
    let stop = check
        .lines()
        .find(|l| l.contains("STOP restart"))
        .unwrap_or_else(|| panic!("no restart stop:\n{check}"));
    assert!(
        stop.contains("replica 0 restarted") && stop.contains("counters fell"),
        "{stop}"
    );
}

/// A server behind an API key: the key goes in every request (calibration, the connection
/// check, /metrics scrapes and the measured requests all pass), a wrong key is refused before
/// anything is measured with the server's own 401 reason, and neither key lands in any file
/// of the artifact.
#[test]
fn llama_behind_an_api_key_is_recorded_without_the_key() {
    let Some((engine, _turn)) = engine("llama_api_key") else {
        return;
    };
    const KEY: &str = "sk-llama-test-9f8e7d6c5b4a";
    let tmp = tempfile::tempdir().unwrap();
    let llama = Llama::start(
        &engine,
        tmp.path(),
        2,
        4096,
        &["--api-key".to_owned(), KEY.to_owned()],
    );
    let out = tmp.path().join("out");
    let args = |arm: &'static str| {
        [
            "--class",
            "headline-sustained-output",
            "--context",
            "256",
            "--requests",
            "4",
            "--concurrency",
            "2",
            "--arm",
            arm,
            "--api-key-env",
            "ANVIL_KEY",
        ]
    };
    let (code, stderr, dir) =
        capture_with_env(&llama.url(), &out, &args("keyed"), &[("ANVIL_KEY", KEY)]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(outcomes(&dir), BTreeMap::from([("ok".to_owned(), 4)]));
    for entry in std::fs::read_dir(&dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        assert!(
            !bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes()),
            "the key was written"
        );
    }

    let wrong = "sk-wrong-key-000000";
    let (code, stderr, _) =
        capture_with_env(&llama.url(), &out, &args("wrong"), &[("ANVIL_KEY", wrong)]);
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains("401"), "{stderr}");
    assert!(!stderr.contains(wrong), "{stderr}");
}

/// `anvil campaign run` with real llama-servers launched by the runner: the starting service
/// fingerprinted (llama.cpp answers no `/version`: that check compares nothing with nothing),
/// a target-only arm and a speculative arm (a draft model) each launched, waited for until
/// `/health` says 200, recorded and stopped with SIGTERM, the starting service restored and
/// checked, `restoration.json` written.
#[test]
fn llama_campaign_launches_records_stops_and_restores_real_servers() {
    let Some((engine, _turn)) = engine("llama_campaign") else {
        return;
    };
    let tmp = seeded_dir();
    let server = engine.server.to_string_lossy().into_owned();
    let tiny = engine.model("tiny.gguf");
    let draft = engine.model("draft.gguf");
    let llama = |extra: &[&str]| {
        let mut argv = vec![
            server.as_str(),
            "-m",
            &tiny,
            "-a",
            "tiny",
            "--host",
            "127.0.0.1",
            "--port",
            "{port}",
            "-c",
            "32768",
            "-np",
            "4",
            "--metrics",
            "--no-webui",
            "-t",
            "1",
            "--poll",
            "0",
        ];
        argv.extend_from_slice(extra);
        serde_json::json!({ "argv": argv })
    };
    let ready = serde_json::json!({"path": "/health", "timeout_s": 120});
    let stop = serde_json::json!({"signal": "SIGTERM", "grace_s": 15});
    let campaign = serde_json::json!({
        "schema": "anvil-serving.benchmark-campaign/v1",
        "campaign_id": "2026-09-04-qwen38-27b-pro6000-possibility",
        "manifest": "workload-manifest.json",
        "plan": "run-plan.json",
        "starting_service": {
            "launch": llama(&[]), "ports": [free_port()], "readiness": ready, "stop": stop,
            "runtime": "llama.cpp", "model": "tiny"
        },
        "arms": [
            {
                "arm": "Inferact target-only", "launch": llama(&[]), "ports": [free_port()],
                "readiness": ready, "stop": stop, "config": {"spec_depth": "0"},
                "runtime": "llama.cpp",
                "cells": {"ids": ["functional.ctx4096.c1.n4", "optimization-screen.ctx4096.c4.n4"]}
            },
            {
                "arm": "Inferact DFlash2 K8",
                "launch": llama(&["--spec-type", "draft-simple", "-md", &draft, "--spec-draft-n-max", "8"]),
                "ports": [free_port()], "readiness": ready, "stop": stop,
                "config": {"spec_depth": "8"}, "runtime": "llama.cpp",
                "cells": {"ids": ["optimization-screen.ctx4096.c4.n4"]}
            }
        ]
    });
    let file = tmp.path().join("campaign.json");
    std::fs::write(&file, campaign.to_string()).unwrap();
    let out = tmp.path().join("data");
    let o = run_campaign(&file, &out, &["--stop-after-restore"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let folder = out.join("2026-09-04-qwen38-27b-pro6000-possibility");
    for (arm, cell) in [
        ("Inferact target-only", "functional.ctx4096.c1.n4"),
        ("Inferact target-only", "optimization-screen.ctx4096.c4.n4"),
        ("Inferact DFlash2 K8", "optimization-screen.ctx4096.c4.n4"),
    ] {
        let run_json = RunJson::read(&folder.join(arm).join(cell).join("run.json")).unwrap();
        assert_eq!(
            run_json.status,
            anvil::artifact::Status::Complete,
            "{arm} {cell}"
        );
        assert_eq!(run_json.arm.runtime, "llama.cpp");
        assert_eq!(run_json.topology.endpoints[0].model, "tiny");
        // The server's own bytes (a random-weight model's text need not be UTF-8).
        let log = std::fs::read(folder.join(arm).join("server.replica0.log")).unwrap();
        let log = String::from_utf8_lossy(&log);
        assert!(
            log.contains("llama"),
            "the server's own output is kept: {log}"
        );
    }
    let restoration: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("restoration.json")).unwrap())
            .unwrap();
    assert_eq!(restoration["restored"], true, "{restoration:#}");
    assert_eq!(
        restoration["after"]["models"],
        serde_json::json!([["tiny"]])
    );
    assert_eq!(restoration["after"]["smoke_status"], 200);
    assert_eq!(
        restoration["after"]["server_version"],
        serde_json::Value::Null
    );
    let journal = std::fs::read_to_string(folder.join("campaign-journal.jsonl")).unwrap();
    let stopped: Vec<serde_json::Value> = journal
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["step"] == "stopped")
        .collect();
    // The starting service twice (before and after), each arm once: every one by its
    // SIGTERM, none needing SIGKILL.
    assert_eq!(stopped.len(), 4, "{journal}");
    for s in &stopped {
        assert_eq!(s["replicas"][0]["killed"], false, "{s}");
    }
    let (_, check) = anvil_check(
        &folder,
        tmp.path().join("run-plan.json").to_str().unwrap(),
        &tmp.path().join("workload-manifest.json"),
    );
    assert!(!check.contains("service not restored"), "{check}");
    assert!(check.contains("restored (7 checks passed)"), "{check}");
    // Real servers: the report's first screen carries no synthetic-data banner (the servers'
    // model list says owned_by llamacpp, not anvil-sim), in HTML and in Markdown.
    let html = tmp.path().join("campaign.html");
    for format in ["html", "md"] {
        let o = run(
            ANVIL,
            &[
                "report",
                "--data",
                out.to_str().unwrap(),
                "--plan",
                tmp.path().join("run-plan.json").to_str().unwrap(),
                "--manifest",
                tmp.path().join("workload-manifest.json").to_str().unwrap(),
                "--format",
                format,
                "--out",
                html.with_extension(format).to_str().unwrap(),
            ],
            &[],
        );
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let text = std::fs::read_to_string(html.with_extension(format)).unwrap();
        assert!(text.contains("what the campaign supports"), "{text}");
        assert!(
            !text.contains("SIMULATED DATA"),
            "a real engine reported as simulated"
        );
        assert!(
            !text.contains("anvil-sim"),
            "{format}: anvil-sim named for real servers"
        );
    }
}

/// A capacity search against a real llama-server (4 slots, the tiny model): concurrency 2 to
/// 4 of a short-prompt screen cell under a TTFT SLO the tiny model meets, probes of 36
/// requests (the fewest that can show 90%). The search completes with a `search_probe`
/// journal line per probe and `capacity.json`, whose every probe is a complete artifact of
/// the real server marked as a probe.
#[test]
fn llama_capacity_search_completes_with_a_journal_line_per_probe() {
    let Some((engine, _turn)) = engine("llama_capacity_search") else {
        return;
    };
    let tmp = seeded_dir();
    let server = engine.server.to_string_lossy().into_owned();
    let tiny = engine.model("tiny.gguf");
    let launch = serde_json::json!({"argv": [
        server, "-m", tiny, "-a", "tiny", "--host", "127.0.0.1", "--port", "{port}",
        "-c", "8192", "-np", "4", "--metrics", "--no-webui", "-t", "1", "--poll", "0"
    ]});
    let ready = serde_json::json!({"path": "/health", "timeout_s": 120});
    let stop = serde_json::json!({"signal": "SIGTERM", "grace_s": 15});
    let campaign = serde_json::json!({
        "schema": "anvil-serving.benchmark-campaign/v1",
        "campaign_id": "2026-09-04-qwen38-27b-pro6000-possibility",
        "manifest": "workload-manifest.json",
        "plan": "run-plan.json",
        "slo": ["ttft_ms<=30000"],
        "starting_service": {
            "launch": launch, "ports": [free_port()], "readiness": ready, "stop": stop,
            "runtime": "llama.cpp", "model": "tiny"
        },
        "arms": [{
            "arm": "TP1", "launch": launch, "ports": [free_port()], "readiness": ready,
            "stop": stop, "config": {"topology": "TP1"}, "runtime": "llama.cpp",
            "search": {
                "class": "optimization-screen", "context": 256, "vary": "concurrency",
                "min": 2, "max": 4, "requests": 36, "target": 0.9
            }
        }]
    });
    let file = tmp.path().join("campaign.json");
    std::fs::write(&file, campaign.to_string()).unwrap();
    let out = tmp.path().join("data");
    let o = run_campaign(&file, &out, &["--stop-after-restore"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let folder = out.join("2026-09-04-qwen38-27b-pro6000-possibility");
    let capacity: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("capacity.json")).unwrap())
            .unwrap();
    let search = &capacity["searches"][0];
    let probes = search["probes"].as_array().unwrap();
    let journal = std::fs::read_to_string(folder.join("campaign-journal.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = journal
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|l: &serde_json::Value| l["step"] == "search_probe")
        .collect();
    assert_eq!(lines.len(), probes.len(), "{journal}");
    assert!(probes.len() >= 2, "{search:#}");
    assert!(
        ["resolved", "not resolved at this sample size"]
            .contains(&search["status"].as_str().unwrap()),
        "{search:#}"
    );
    for p in probes {
        let run_json =
            RunJson::read(&Path::new(p["dir"].as_str().unwrap()).join("run.json")).unwrap();
        assert_eq!(run_json.status, anvil::artifact::Status::Complete);
        assert_eq!(run_json.workload.probe.as_deref(), Some("capacity"));
        assert_eq!(run_json.topology.endpoints[0].model, "tiny");
        assert_eq!(p["requests"], 36, "{p}");
    }
}

/// The start ramp and the paced, kernel-stamped reads against a real server: the two slots'
/// first requests are intended 0.3 s apart and sent at those times, every request succeeds,
/// and every recorded time is causal (first byte after the send, events in order after the
/// first byte, the end after the last event) on llama.cpp's own wire.
#[test]
fn llama_ramp_starts_the_slots_at_their_intended_times_and_stamps_stay_causal() {
    let Some((engine, _turn)) = engine("llama_ramp") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let llama = Llama::start(&engine, tmp.path(), 2, 4096, &[]);
    let out = tmp.path().join("out");
    let (code, stderr, dir) = capture(
        &llama.url(),
        &out,
        &[
            "--class",
            "headline-sustained-output",
            "--context",
            "256",
            "--requests",
            "6",
            "--concurrency",
            "2",
            "--arm",
            "ramped",
            "--ramp",
            "0.6",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(outcomes(&dir), BTreeMap::from([("ok".to_owned(), 6)]));
    let run_json = RunJson::read(&dir.join("run.json")).unwrap();
    assert_eq!(run_json.workload.ramp_s, Some(0.6));

    let r = batches(&dir.join("requests.parquet"));
    let (kind, index) = (strs(&r, "kind"), ints(&r, "request_index"));
    let sent = ints(&r, "t_sent_ns");
    let (first_byte, done) = (ints(&r, "t_first_byte_ns"), ints(&r, "t_done_ns"));
    let wave = intended_and_sent(&dir);
    assert_eq!(wave[1].1 - wave[0].1, 300_000_000, "{wave:?}");
    for (i, t, s) in &wave[..2] {
        assert!(
            s >= t && s - t < 100_000_000,
            "request {i}: sent {s}, intended {t}"
        );
    }

    let e = batches(&dir.join("events.parquet"));
    let mut events: BTreeMap<i64, Vec<(i64, i64)>> = BTreeMap::new();
    for ((i, seq), t) in ints(&e, "request_index")
        .into_iter()
        .zip(ints(&e, "seq"))
        .zip(ints(&e, "t_ns"))
    {
        events
            .entry(i.unwrap())
            .or_default()
            .push((seq.unwrap(), t.unwrap()));
    }
    for k in 0..kind.len() {
        let Some(evs) = events.get_mut(&index[k].unwrap()) else {
            continue;
        };
        evs.sort();
        let (s, fb, d) = (sent[k].unwrap(), first_byte[k].unwrap(), done[k].unwrap());
        assert!(
            fb >= s,
            "request {:?}: first byte before the send",
            index[k]
        );
        assert!(
            evs[0].1 >= fb,
            "request {:?}: an event before the first byte",
            index[k]
        );
        assert!(
            evs.windows(2).all(|w| w[1].1 >= w[0].1),
            "request {:?}: events out of order",
            index[k]
        );
        assert!(
            d >= evs[evs.len() - 1].1,
            "request {:?}: ended before its last event",
            index[k]
        );
    }
}
