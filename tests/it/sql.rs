//! The SQL layer against a hand-built artifact whose every timestamp is known: each metric
//! and statistic asserted here is computed by hand in this file from those timestamps. Also
//! the `anvil sql` command through the real binary, and a cross-check against DuckDB.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::common::anvil;
use anvil::artifact::run::utc_now;
use anvil::artifact::testing;
use anvil::artifact::{
    Arm, ArtifactWriter, EventRow, Outcome, RequestKind, RequestRow, RunJson, ScrapePhase,
    ScrapeRow, Status, Workload,
};
use anvil::query::{AnvilSession, StatementResult};
use arrow::array::AsArray;
use arrow::compute::cast;
use arrow::datatypes::{DataType, Float64Type, Int64Type};

const MS: i64 = 1_000_000;
pub const RUN_ID: &str = "run-hand-1";
const CAMPAIGN: &str = "camp-sql-test";

/// The canary of request `i` of run `run_no` (hex, so it is a well-formed marker).
fn run_canary(run_no: u32, i: u32) -> String {
    format!("ANV-{run_no:04x}{i:08x}")
}

/// The canary of request `i` of the first run.
fn canary(i: u32) -> String {
    run_canary(0, i)
}

fn run_json(run_id: &str) -> RunJson {
    let workload = Workload {
        prompt_tokens_target: 1000,
        concurrency_per_replica: 2,
        total_requests: 5,
        off_manifest: true,
        ..testing::workload()
    };
    let mut run = testing::with_workload(testing::run_json(run_id), workload);
    run.campaign_id = CAMPAIGN.into();
    run.arm = Arm {
        name: "K12".into(),
        stage: "test".into(),
        runtime: "sim".into(),
        config: [("tp", "1"), ("dp", "2")].into_iter().collect(),
        defaults: Default::default(),
    };
    run.cell_id = "hand-c2".into();
    run.topology = testing::topology(2, 9000, "m");
    run.prompt_salt = "salt".into();
    run.command_line = vec!["test".into()];
    run
}

#[allow(clippy::too_many_arguments)]
fn request(
    run_no: u32,
    i: u32,
    kind: RequestKind,
    replica: u32,
    outcome: Outcome,
    t_sent_ms: i64,
    t_done_ms: i64,
    events: u32,
) -> RequestRow {
    RequestRow {
        canary: Some(run_canary(run_no, i)),
        t_intended_ns: t_sent_ms * MS,
        t_sent_ns: Some(t_sent_ms * MS),
        t_first_byte_ns: Some(t_sent_ms * MS + MS),
        t_done_ns: t_done_ms * MS,
        error: (outcome != Outcome::Ok).then(|| "idle for 30 s".to_owned()),
        events,
        ..anvil::artifact::testing::request_row(i, kind, replica, outcome)
    }
}

fn content(text: &str) -> String {
    serde_json::json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
        .to_string()
}

fn usage(prompt: i64, completion: i64) -> String {
    serde_json::json!({"choices": [], "usage": {"prompt_tokens": prompt,
        "completion_tokens": completion, "prompt_tokens_details": {"cached_tokens": 0}}})
    .to_string()
}

const ROLE_NULL: &str =
    r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}]}"#;
const ROLE_EMPTY: &str =
    r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#;
const REASONING: &str = r#"{"choices":[{"index":0,"delta":{"reasoning_content":"let me think"},"finish_reason":null}]}"#;
const STOP: &str = r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#;

/// (request_index, time in ms, SSE data) of every event of run `run_no`; `leak` is appended
/// to request 0's first content chunk.
fn events(run_no: u32, leak: &str) -> Vec<(u32, i64, String)> {
    let c = |i| run_canary(run_no, i);
    vec![
        // Request 0, replica 0, sent at 10 ms: role chunk (content null) at 20, reasoning at
        // 30, first content at 50 (multi-token chunks: 11 usage tokens in 3 chunks), usage at
        // 80, [DONE] at 90 = t_done.
        (0, 20, ROLE_NULL.to_owned()),
        (0, 30, REASONING.to_owned()),
        (0, 50, content(&format!("Hello {} {leak}", c(0)))),
        (0, 60, content("world")),
        (0, 70, content(" again")),
        (0, 75, STOP.to_owned()),
        // ... with the server's own timings, as llama.cpp's server sends them.
        (0, 80, {
            let mut u: serde_json::Value = serde_json::from_str(&usage(1000, 11)).unwrap();
            u["timings"] = serde_json::json!({"prompt_n": 1000, "prompt_ms": 30.5,
                "predicted_n": 11, "predicted_ms": 39.0, "cache_n": 0});
            u.to_string()
        }),
        (0, 90, "[DONE]".to_owned()),
        // Request 1, replica 1, sent at 0: role chunk with content "" at 5, content at 25
        // and 45 carrying its own canary and request 2's, usage 900/5 at 50, [DONE] at 55.
        (1, 5, ROLE_EMPTY.to_owned()),
        (1, 25, content(&format!("{} and ", c(1)))),
        (1, 45, content(&format!("{} leaked", c(2)))),
        (1, 50, usage(900, 5)),
        (1, 55, "[DONE]".to_owned()),
        // Request 2, replica 0, sent at 20: content at 32 and 40, no usage event, [DONE] 44.
        (2, 32, content(&c(2))),
        (2, 40, content(" done")),
        (2, 44, "[DONE]".to_owned()),
        // Request 3, replica 1, sent at 5: content at 15, then silence: timeout_idle at 100.
        (3, 15, content("partial")),
        // Request 4, warmup, replica 0.
        (4, 2, content("warm")),
        (4, 3, usage(1000, 1)),
        (4, 4, "[DONE]".to_owned()),
        // Request 5, replica 0, sent at 30: one token; content at 40 without its own canary
        // but with a marker no request owns; usage 800/1 at 40; [DONE] at 41.
        (5, 40, content("x ANV-ffffffffffff")),
        (5, 40, usage(800, 1)),
        (5, 41, "[DONE]".to_owned()),
    ]
}

/// Write the hand-built artifact under `root` (created) and return its folder.
pub fn build_artifact(root: &Path) -> PathBuf {
    build_run(root, 0, "")
}

/// Run `run_no` of the hand-built campaign (arm `K12` for run 0, `K13`, … after), with
/// `leak` appended to its request 0's first content chunk.
fn build_run(root: &Path, run_no: u32, leak: &str) -> PathBuf {
    let arm = format!("K{}", 12 + run_no);
    let dir = root.join(CAMPAIGN).join(&arm).join("hand-c2");
    let mut run = run_json(&format!("run-hand-{}", run_no + 1));
    run.arm.name = arm;
    let mut writer = ArtifactWriter::create(&dir, run.clone()).unwrap();
    let mut seqs: BTreeMap<u32, u32> = BTreeMap::new();
    for (i, t_ms, data) in events(run_no, leak) {
        let seq = seqs.entry(i).or_default();
        writer
            .push_event(EventRow::from_raw(
                i,
                *seq,
                t_ms * MS,
                None,
                data.as_bytes(),
            ))
            .unwrap();
        *seq += 1;
    }
    let n = |i: u32| seqs[&i];
    use Outcome::{Ok as Good, TimeoutIdle};
    use RequestKind::{Measured, Warmup};
    for row in [
        request(run_no, 4, Warmup, 0, Good, 0, 4, n(4)),
        request(run_no, 0, Measured, 0, Good, 10, 90, n(0)),
        request(run_no, 1, Measured, 1, Good, 0, 55, n(1)),
        request(run_no, 2, Measured, 0, Good, 20, 44, n(2)),
        request(run_no, 3, Measured, 1, TimeoutIdle, 5, 100, n(3)),
        request(run_no, 5, Measured, 0, Good, 30, 41, n(5)),
    ] {
        writer.push_request(row).unwrap();
    }
    // Replica 0: speculative-decoding counters 100/400/250 before, 110/440/280 after; no
    // restart. Replica 1: no counters; process start time changes (a restart).
    let scrape = |replica, t_ms: i64, phase, metric: &str, value| ScrapeRow {
        replica,
        t_ns: t_ms * MS,
        phase,
        metric: metric.into(),
        labels: String::new(),
        metric_type: String::new(),
        value,
    };
    for row in [
        scrape(
            0,
            0,
            ScrapePhase::Before,
            "process_start_time_seconds",
            1000.0,
        ),
        scrape(
            0,
            0,
            ScrapePhase::Before,
            "vllm:spec_decode_num_drafts_total",
            100.0,
        ),
        scrape(
            0,
            0,
            ScrapePhase::Before,
            "vllm:spec_decode_num_draft_tokens_total",
            400.0,
        ),
        scrape(
            0,
            0,
            ScrapePhase::Before,
            "vllm:spec_decode_num_accepted_tokens_total",
            250.0,
        ),
        scrape(
            0,
            110,
            ScrapePhase::After,
            "process_start_time_seconds",
            1000.0,
        ),
        scrape(
            0,
            110,
            ScrapePhase::After,
            "vllm:spec_decode_num_drafts_total",
            110.0,
        ),
        scrape(
            0,
            110,
            ScrapePhase::After,
            "vllm:spec_decode_num_draft_tokens_total",
            440.0,
        ),
        scrape(
            0,
            110,
            ScrapePhase::After,
            "vllm:spec_decode_num_accepted_tokens_total",
            280.0,
        ),
        scrape(
            1,
            0,
            ScrapePhase::Before,
            "process_start_time_seconds",
            1000.0,
        ),
        scrape(
            1,
            110,
            ScrapePhase::After,
            "process_start_time_seconds",
            2000.0,
        ),
    ] {
        writer.push_scrape(row).unwrap();
    }
    // Replica 1 also exports llama.cpp's names, typed: its drafts counter goes 5 -> 9, then
    // falls to 3 with the restart (an increase of 4 + 3); position 0's series is absent
    // before (it counts from 0), 4 during, 2 after the restart (4 + 2); the queue gauges.
    let typed = |t_ms: i64, phase, metric: &str, labels: &str, kind: &str, value| ScrapeRow {
        replica: 1,
        t_ns: t_ms * MS,
        phase,
        metric: metric.into(),
        labels: labels.into(),
        metric_type: kind.into(),
        value,
    };
    let drafts = "llamacpp:spec_decode_num_drafts_total";
    let per_pos = "llamacpp:spec_decode_num_accepted_tokens_per_pos_total";
    for row in [
        typed(0, ScrapePhase::Before, drafts, "", "counter", 5.0),
        typed(60, ScrapePhase::During, drafts, "", "counter", 9.0),
        typed(
            60,
            ScrapePhase::During,
            per_pos,
            "position=\"0\"",
            "counter",
            4.0,
        ),
        typed(
            60,
            ScrapePhase::During,
            "llamacpp:requests_processing",
            "",
            "gauge",
            2.0,
        ),
        typed(
            60,
            ScrapePhase::During,
            "llamacpp:requests_deferred",
            "",
            "gauge",
            1.0,
        ),
        typed(110, ScrapePhase::After, drafts, "", "counter", 3.0),
        typed(
            110,
            ScrapePhase::After,
            per_pos,
            "position=\"0\"",
            "counter",
            2.0,
        ),
    ] {
        writer.push_scrape(row).unwrap();
    }
    let mut done = run;
    done.status = Status::Complete;
    done.ended_utc = Some(utc_now());
    writer.finish(done).unwrap();
    dir
}

/// A one-request artifact under `root/hostile` (created) whose arm name, stage, config value
/// and model reply each carry `payload`, and whose reply lacks its own canary, so a report
/// shows the reply as evidence. For the report's escaping tests.
pub fn build_hostile(root: &Path, payload: &str) -> PathBuf {
    let dir = root.join("hostile");
    let mut run = run_json("run-hostile");
    // Reported beside the sample campaign, so one of its runs.
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/sample-data/workload-manifest.json"
        ))
        .unwrap(),
    )
    .unwrap();
    run.campaign_id = manifest["campaign_id"].as_str().unwrap().to_owned();
    run.arm.name = format!("K12{payload}");
    run.arm.stage = format!("stage{payload}");
    run.arm.config = [("spec_depth", format!("12{payload}"))]
        .into_iter()
        .collect();
    let mut writer = ArtifactWriter::create(&dir, run.clone()).unwrap();
    let events = [
        (20, content(&format!("reply {payload} without its canary"))),
        (30, usage(1000, 6)),
        (40, "[DONE]".to_owned()),
    ];
    for (seq, (t_ms, data)) in events.iter().enumerate() {
        writer
            .push_event(EventRow::from_raw(
                0,
                seq as u32,
                t_ms * MS,
                None,
                data.as_bytes(),
            ))
            .unwrap();
    }
    writer
        .push_request(request(
            7,
            0,
            RequestKind::Measured,
            0,
            Outcome::Ok,
            10,
            40,
            events.len() as u32,
        ))
        .unwrap();
    let mut done = run;
    done.status = Status::Complete;
    done.ended_utc = Some(utc_now());
    writer.finish(done).unwrap();
    dir
}

fn session(dir: &Path) -> (tokio::runtime::Runtime, AnvilSession) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let s = rt.block_on(AnvilSession::open(&[dir.to_owned()])).unwrap();
    (rt, s)
}

fn query(rt: &tokio::runtime::Runtime, s: &AnvilSession, sql: &str) -> StatementResult {
    rt.block_on(s.query(sql))
        .unwrap_or_else(|e| panic!("{sql}\n{e}"))
}

/// Column `name` of a result as f64 values (integers cast).
fn floats(r: &StatementResult, name: &str) -> Vec<Option<f64>> {
    let mut out = Vec::new();
    for b in &r.batches {
        let col = b
            .column_by_name(name)
            .unwrap_or_else(|| panic!("no column {name}"));
        let col = cast(col, &DataType::Float64).unwrap();
        out.extend(col.as_primitive::<Float64Type>().iter());
    }
    out
}

fn ints(r: &StatementResult, name: &str) -> Vec<Option<i64>> {
    let mut out = Vec::new();
    for b in &r.batches {
        let col = cast(b.column_by_name(name).unwrap(), &DataType::Int64).unwrap();
        out.extend(col.as_primitive::<Int64Type>().iter());
    }
    out
}

fn strings(r: &StatementResult, name: &str) -> Vec<Option<String>> {
    let mut out = Vec::new();
    for b in &r.batches {
        let col = cast(b.column_by_name(name).unwrap(), &DataType::Utf8).unwrap();
        out.extend(col.as_string::<i32>().iter().map(|s| s.map(str::to_owned)));
    }
    out
}

fn assert_close(found: Option<f64>, expected: Option<f64>, what: &str) {
    match (found, expected) {
        (Some(f), Some(e)) => assert!(
            (f - e).abs() <= 1e-9 * e.abs().max(1.0),
            "{what}: found {f}, expected {e}"
        ),
        (f, e) => assert_eq!(f, e, "{what}"),
    }
}

fn assert_column(r: &StatementResult, name: &str, expected: &[Option<f64>]) {
    let found = floats(r, name);
    assert_eq!(found.len(), expected.len(), "{name}: row count");
    for (i, (f, e)) in found.iter().zip(expected).enumerate() {
        assert_close(*f, *e, &format!("{name} row {i}"));
    }
}

#[test]
fn request_metrics_follow_the_definitions_by_hand() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = build_artifact(tmp.path());
    let (rt, s) = session(&dir);
    let r = query(
        &rt,
        &s,
        "SELECT * FROM request_metrics ORDER BY request_index",
    );
    // Measured requests only: the warmup request 4 is absent.
    assert_eq!(ints(&r, "request_index"), [0, 1, 2, 3, 5].map(Some));
    assert_eq!(
        strings(&r, "outcome"),
        ["ok", "ok", "ok", "timeout_idle", "ok"].map(|s| Some(s.to_owned()))
    );
    // TTFT = first non-empty content - t_sent: the role chunks (content null or '') and the
    // reasoning delta of request 0 do not count.
    assert_column(
        &r,
        "ttft_ms",
        &[50.0 - 10.0, 25.0, 32.0 - 20.0, 15.0 - 5.0, 40.0 - 30.0].map(Some),
    );
    // E2E = t_done - t_sent.
    assert_column(&r, "e2e_ms", &[80.0, 55.0, 24.0, 95.0, 11.0].map(Some));
    // Usage tokens, never chunk counts: request 0 has 11 tokens in 3 content chunks, so
    // TPOT = (90 - 50) ms / (11 - 1) = 4 ms, not 40 / 2.
    let gen_ms = [40.0, 30.0, 12.0, 85.0, 1.0];
    assert_column(&r, "generation_ms", &gen_ms.map(Some));
    assert_column(
        &r,
        "tpot_ms",
        &[Some(4.0), Some(30.0 / 4.0), None, None, None],
    );
    assert_column(
        &r,
        "itl_ms",
        &[Some(4.0), Some(30.0 / 4.0), None, None, None],
    );
    assert_column(
        &r,
        "decode_tps",
        &[Some(10.0 / 0.040), Some(4.0 / 0.030), None, None, None],
    );
    // Effective prefill = usage prompt tokens / TTFT in s.
    assert_column(
        &r,
        "effective_prefill_tps",
        &[
            Some(1000.0 / 0.040),
            Some(900.0 / 0.025),
            None,
            None,
            Some(800.0 / 0.010),
        ],
    );
    assert_column(
        &r,
        "completion_tokens",
        &[Some(11.0), Some(5.0), None, None, Some(1.0)],
    );
    assert_column(
        &r,
        "prompt_tokens",
        &[Some(1000.0), Some(900.0), None, None, Some(800.0)],
    );
    assert_column(&r, "content_chunks", &[3.0, 2.0, 2.0, 1.0, 1.0].map(Some));
    assert_column(&r, "reasoning_chunks", &[1.0, 0.0, 0.0, 0.0, 0.0].map(Some));
    assert_column(
        &r,
        "tokens_per_chunk",
        &[Some(11.0 / 3.0), Some(2.5), None, None, Some(1.0)],
    );
    // The request without a usage event is reported as such.
    assert_eq!(
        strings(&r, "has_usage"),
        ["true", "true", "false", "false", "true"].map(|s| Some(s.to_owned()))
    );
    // Canaries: 0 and 2 carry their own; 1 carries its own and request 2's (foreign); 3 was
    // cut off before it; 5 lacks its own and carries a marker nobody owns (stray). Any marker
    // other than its own fails a request's check, whoever owns it.
    assert_eq!(
        strings(&r, "own_canary"),
        ["true", "true", "true", "false", "false"].map(|s| Some(s.to_owned()))
    );
    assert_eq!(
        strings(&r, "canary_ok"),
        ["true", "false", "true", "false", "false"].map(|s| Some(s.to_owned()))
    );
    assert_eq!(ints(&r, "foreign_canary_count"), [0, 1, 0, 0, 1].map(Some));
    let foreign = strings(&r, "foreign_canaries");
    assert_eq!(
        foreign[1].as_deref(),
        Some(format!("[{}]", canary(2)).as_str())
    );
    assert_eq!(foreign[0], None);
    assert_eq!(ints(&r, "stray_canary_count"), [0, 0, 0, 0, 1].map(Some));
    assert_eq!(
        strings(&r, "finish_reason"),
        [Some("stop".to_owned()), None, None, None, None]
    );
}

#[test]
fn cell_stats_match_hand_computed_statistics() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = build_artifact(tmp.path());
    let (rt, s) = session(&dir);
    let r = query(
        &rt,
        &s,
        "SELECT * FROM cell_stats WHERE window = 'all' ORDER BY metric_order",
    );
    assert_eq!(
        strings(&r, "metric"),
        [
            "ttft_ms",
            "effective_prefill_tps",
            "decode_tps",
            "tpot_ms",
            "itl_ms",
            "e2e_ms"
        ]
        .map(|s| Some(s.to_owned()))
    );
    // The failed request (3) is counted beside every metric, never inside.
    assert_eq!(ints(&r, "failed"), [1; 6].map(Some));
    // TTFT of the ok requests 0, 1, 2, 5: 40, 25, 12, 10 ms.
    let ttft = [40.0, 25.0, 12.0, 10.0];
    let mean = ttft.iter().sum::<f64>() / 4.0;
    assert_eq!(mean, 21.75);
    let sd = (ttft.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / 3.0).sqrt();
    let t3 = 3.182_446_305_284_263; // t(0.975, 3), from a t-table
    let half = t3 * sd / 2.0;
    let row = |name: &str| floats(&r, name)[0];
    assert_eq!(ints(&r, "n")[0], Some(4));
    assert_eq!(ints(&r, "n_null")[0], Some(0));
    assert_close(row("mean"), Some(mean), "ttft mean");
    assert_close(row("sd"), Some(sd), "ttft sd");
    assert_close(row("ci95_low"), Some(mean - half), "ttft ci95_low");
    assert_close(row("ci95_high"), Some(mean + half), "ttft ci95_high");
    // Sorted 10, 12, 25, 40: rank ceil(p*4).
    for (col, v) in [
        ("min", 10.0),
        ("p25", 10.0),
        ("p50", 12.0),
        ("p75", 25.0),
        ("p90", 40.0),
        ("p95", 40.0),
        ("p99", 40.0),
        ("max", 40.0),
    ] {
        assert_close(row(col), Some(v), &format!("ttft {col}"));
    }
    // TPOT: values only for requests 0 (4 ms) and 1 (7.5 ms); 2 has no usage and 5 one
    // token: two ok requests without a value.
    let tpot = 3;
    assert_eq!(ints(&r, "n")[tpot], Some(2));
    assert_eq!(ints(&r, "n_null")[tpot], Some(2));
    let (m, sd) = (5.75, (2.0 * 1.75f64 * 1.75).sqrt());
    let t1 = 12.706_204_736_174_707; // t(0.975, 1)
    assert_close(floats(&r, "mean")[tpot], Some(m), "tpot mean");
    assert_close(floats(&r, "sd")[tpot], Some(sd), "tpot sd");
    assert_close(
        floats(&r, "ci95_high")[tpot],
        Some(m + t1 * sd / 2f64.sqrt()),
        "tpot ci95_high",
    );
    assert_close(floats(&r, "p50")[tpot], Some(4.0), "tpot p50");
    assert_close(floats(&r, "p75")[tpot], Some(7.5), "tpot p75");
    // Decode: one value less than... requests 0 and 1 only.
    assert_close(floats(&r, "min")[2], Some(4.0 / 0.030), "decode min");
    assert_close(floats(&r, "max")[2], Some(10.0 / 0.040), "decode max");
    assert_eq!(
        strings(&r, "better"),
        ["lower", "higher", "higher", "lower", "lower", "lower"].map(|s| Some(s.to_owned()))
    );
    // Percentile intervals of the four TTFTs (10, 12, 25, 40), by the Binomial(4, p) CDF:
    // p25: F(0) = 0.316 > 0.025 (no lower bound), F(3) = 0.996 >= 0.975 first at u = 4;
    // p50: F(0) = 0.0625, F(3) = 0.9375: neither side bounded; p99: F(2) = 0.0006 <= 0.025
    // < F(3) = 0.039, so l = 3, and F(3) < 0.975 leaves the top unbounded.
    assert_eq!(row("p25_ci_low"), None);
    assert_close(row("p25_ci_high"), Some(40.0), "ttft p25_ci_high");
    assert_eq!((row("p50_ci_low"), row("p50_ci_high")), (None, None));
    assert_close(row("p99_ci_low"), Some(25.0), "ttft p99_ci_low");
    assert_eq!(row("p99_ci_high"), None);

    // After the first wave (closed loop, C2 x 2 replicas: requests 0-3 by index) only
    // request 5 remains: TTFT 10 ms, one token (no decode figures); the failed request 3 is
    // in the first wave.
    let after = query(
        &rt,
        &s,
        "SELECT * FROM cell_stats WHERE window = 'after_first_wave' ORDER BY metric_order",
    );
    assert_eq!(ints(&after, "requests"), [1; 6].map(Some));
    assert_eq!(ints(&after, "failed"), [0; 6].map(Some));
    assert_eq!(ints(&after, "n"), [1, 1, 0, 0, 0, 1].map(Some));
    assert_close(floats(&after, "p99")[0], Some(10.0), "after ttft p99");
    assert_eq!(floats(&after, "mean")[2], None);
    let waves = query(
        &rt,
        &s,
        "SELECT request_index, first_wave FROM request_metrics ORDER BY request_index",
    );
    assert_eq!(waves.batches.iter().map(|b| b.num_rows()).sum::<usize>(), 5);
    assert_eq!(
        strings(&waves, "first_wave"),
        ["true", "true", "true", "true", "false"].map(|s| Some(s.to_owned()))
    );
    // percentile_ci is the long form of the same intervals.
    let ci = query(
        &rt,
        &s,
        "SELECT percentile, estimate, ci_low, ci_high, bounded, tail FROM percentile_ci \
         WHERE window = 'all' AND metric = 'ttft_ms' ORDER BY percentile",
    );
    assert_column(
        &ci,
        "estimate",
        &[10.0, 10.0, 10.0, 12.0, 25.0, 40.0, 40.0, 40.0].map(Some),
    );
    assert_eq!(floats(&ci, "ci_low")[7], Some(25.0));
    assert_eq!(
        strings(&ci, "tail"),
        [
            None,
            None,
            None,
            None,
            None,
            None,
            Some("slowest 5%"),
            Some("slowest 1%")
        ]
        .map(|s| s.map(str::to_owned))
    );
    assert!(
        strings(&ci, "bounded")
            .iter()
            .all(|b| b.as_deref() == Some("false"))
    );
}

#[test]
fn aggregate_throughput_spans_all_replicas() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = build_artifact(tmp.path());
    let (rt, s) = session(&dir);
    let r = query(
        &rt,
        &s,
        "SELECT * FROM aggregate_throughput WHERE window = 'all' ORDER BY scope DESC, replica",
    );
    assert_eq!(
        strings(&r, "scope"),
        ["run", "replica", "replica"].map(|s| Some(s.to_owned()))
    );
    // Run: 11 + 5 usage tokens (requests 2 and 3 have none; 5 has 1) = 17 over
    // 0 ms (first t_sent, request 1) .. 100 ms (last t_done, request 3).
    assert_eq!(ints(&r, "completion_tokens"), [Some(17), Some(12), Some(5)]);
    assert_column(&r, "span_s", &[0.100, 0.080, 0.100].map(Some));
    // Replica 0: requests 0, 2, 5: 10 .. 90 ms, 12 tokens; replica 1: 1, 3: 0 .. 100 ms.
    assert_column(&r, "output_tps", &[170.0, 150.0, 50.0].map(Some));
    assert_eq!(ints(&r, "requests_without_usage"), [2, 1, 1].map(Some));
    // After the first wave only request 5 (replica 0) is left: 1 token over its own span,
    // 30 .. 41 ms; replica 1 has no request in that window.
    let after = query(
        &rt,
        &s,
        "SELECT * FROM aggregate_throughput WHERE window = 'after_first_wave' \
         ORDER BY scope DESC, replica",
    );
    assert_eq!(ints(&after, "requests"), [1, 1, 0].map(Some));
    assert_column(&after, "span_s", &[Some(0.011), Some(0.011), None]);
    assert_column(
        &after,
        "output_tps",
        &[Some(1.0 / 0.011), Some(1.0 / 0.011), None],
    );
}

#[test]
fn scrape_views_find_spec_decode_and_restarts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = build_artifact(tmp.path());
    let (rt, s) = session(&dir);
    let r = query(&rt, &s, "SELECT * FROM spec_decode ORDER BY replica");
    // Replica 1 speaks llama.cpp's names: 5 -> 9, then a fall to 3 at the restart (counted
    // from 0): 4 + 3. The metric dialect is whose names were found; the runtime the arm's.
    assert_eq!(
        strings(&r, "metric_dialect"),
        [Some("vllm".to_owned()), Some("llama.cpp".to_owned())]
    );
    assert_eq!(
        strings(&r, "runtime"),
        [Some("sim".to_owned()), Some("sim".to_owned())]
    );
    assert_column(&r, "drafts", &[Some(10.0), Some(7.0)]);
    assert_column(&r, "draft_tokens", &[Some(40.0), None]);
    assert_column(&r, "accepted_tokens", &[Some(30.0), None]);
    assert_column(&r, "acceptance_rate", &[Some(0.75), None]);
    assert_column(&r, "mean_accepted_length", &[Some(4.0), None]);
    // A position series absent before the run counts from 0: 4, then 2 after the fall.
    let r = query(&rt, &s, "SELECT * FROM spec_decode_positions");
    assert_eq!(ints(&r, "position"), [Some(0)]);
    assert_column(&r, "accepted_tokens", &[Some(6.0)]);
    let r = query(&rt, &s, "SELECT * FROM restarts ORDER BY replica");
    assert_eq!(
        strings(&r, "restarted"),
        [Some("false".to_owned()), Some("true".to_owned())]
    );
    assert_eq!(ints(&r, "counters_reset"), [Some(0), Some(2)]);
    assert_eq!(
        strings(&r, "detectable"),
        [Some("true".to_owned()), Some("true".to_owned())]
    );
    let r = query(&rt, &s, "SELECT * FROM server_queue");
    assert_column(&r, "running", &[Some(2.0)]);
    assert_column(&r, "waiting", &[Some(1.0)]);
    // The server's timings beside anvil's: TTFT 40 ms - prefill 30.5; generation 40 - 39.
    let r = query(&rt, &s, "SELECT * FROM server_timings");
    assert_column(&r, "queue_ms", &[Some(9.5)]);
    assert_column(&r, "generation_diff_ms", &[Some(1.0)]);
    assert_eq!(ints(&r, "token_diff"), [Some(0)]);
}

#[test]
fn prompt_calibration_and_chunk_gaps() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = build_artifact(tmp.path());
    let (rt, s) = session(&dir);
    let r = query(&rt, &s, "SELECT * FROM prompt_calibration_cells");
    assert_eq!(ints(&r, "requests_with_usage"), [Some(3)]);
    assert_eq!(ints(&r, "requests_without_usage"), [Some(2)]);
    // Actual 1000, 900, 800 against 1000: largest |error| / target = 0.2.
    assert_column(&r, "max_abs_relative_error", &[Some(0.2)]);
    assert_column(&r, "mean_actual_tokens", &[Some(900.0)]);
    let r = query(
        &rt,
        &s,
        "SELECT chunk_gap_ms FROM chunk_gaps WHERE request_index = 0 ORDER BY seq",
    );
    assert_column(&r, "chunk_gap_ms", &[None, Some(10.0), Some(10.0)]);
}

#[test]
fn runs_table_holds_run_json() {
    let tmp = tempfile::tempdir().unwrap();
    build_artifact(tmp.path());
    // A campaign tree: the artifact is found beneath the root.
    let (rt, s) = session(tmp.path());
    let r = query(&rt, &s, "SELECT * FROM runs");
    assert_eq!(strings(&r, "run_id"), [Some(RUN_ID.to_owned())]);
    assert_eq!(
        strings(&r, "arm_config_text"),
        [Some("tp=1,dp=2".to_owned())]
    );
    // Sorted by key: the same configuration declared in another order reads the same.
    assert_eq!(
        strings(&r, "arm_config_canonical"),
        [Some("dp=2,tp=1".to_owned())]
    );
    // The same configuration as a map, one key at a time.
    let r = query(
        &rt,
        &s,
        "SELECT arm_config['dp'] AS dp, arm_config['none'] AS none, repeat_index, repeats FROM runs",
    );
    assert_eq!(strings(&r, "dp"), [Some("2".to_owned())]);
    assert_eq!(strings(&r, "none"), [None]);
    assert_eq!(
        (ints(&r, "repeat_index"), ints(&r, "repeats")),
        (vec![Some(1)], vec![Some(1)])
    );
    let r = query(&rt, &s, "SELECT * FROM runs");
    assert_eq!(ints(&r, "replicas"), [Some(2)]);
    assert_eq!(strings(&r, "status"), [Some("complete".to_owned())]);
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn cli_sql_prints_one_csv_row_per_measured_request() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = build_artifact(tmp.path());
    let out = anvil(&[
        "sql",
        "--data",
        dir.to_str().unwrap(),
        "SELECT run_id, request_index, ttft_ms, tpot_ms, e2e_ms, completion_tokens FROM request_metrics ORDER BY request_index",
        "--format",
        "csv",
    ]);
    assert!(out.ok(), "{}", out.stderr);
    let stdout = out.stdout.clone();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "run_id,request_index,ttft_ms,tpot_ms,e2e_ms,completion_tokens",
            "run-hand-1,0,40.0,4.0,80.0,11",
            "run-hand-1,1,25.0,7.5,55.0,5",
            "run-hand-1,2,12.0,,24.0,",
            "run-hand-1,3,10.0,,95.0,",
            "run-hand-1,5,10.0,,11.0,1",
        ]
    );
}

#[test]
fn cli_sql_refuses_writes_without_allow_write() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = build_artifact(tmp.path());
    let target = tmp.path().join("copy.csv");
    for (statement, keywords) in [
        (format!("COPY (SELECT 1) TO '{}'", target.display()), "COPY"),
        ("CREATE VIEW v AS SELECT 1".to_owned(), "CREATE VIEW"),
        (
            "CREATE EXTERNAL TABLE t STORED AS CSV LOCATION '/tmp/x.csv'".to_owned(),
            "CREATE EXTERNAL TABLE",
        ),
        ("DROP VIEW cell_stats".to_owned(), "DROP VIEW"),
        (
            "INSERT INTO requests SELECT * FROM requests".to_owned(),
            "INSERT INTO",
        ),
        ("SET datafusion.execution.batch_size = 1".to_owned(), "SET"),
    ] {
        let out = anvil(&["sql", "--data", dir.to_str().unwrap(), &statement]);
        assert_eq!(out.code, Some(2), "{statement}");
        let stderr = out.stderr;
        assert!(
            stderr.contains(&format!("refused: {keywords} writes or changes state"))
                && stderr.contains("--allow-write"),
            "{statement}: {stderr}"
        );
    }
    assert!(!target.exists(), "COPY must not have written");
    let out = anvil(&[
        "sql",
        "--data",
        dir.to_str().unwrap(),
        "--allow-write",
        &format!(
            "COPY (SELECT 1 AS one) TO '{}' STORED AS CSV",
            target.display()
        ),
    ]);
    assert!(out.ok(), "{}", out.stderr);
    assert!(target.exists());
}

#[test]
fn cli_sql_bad_column_lists_the_available_columns() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = build_artifact(tmp.path());
    let out = anvil(&[
        "sql",
        "--data",
        dir.to_str().unwrap(),
        "SELECT ttft FROM request_metrics",
    ]);
    assert_eq!(out.code, Some(2));
    let stderr = out.stderr;
    assert!(stderr.contains("hint: available columns"), "{stderr}");
    assert!(stderr.contains("request_metrics: run_id, arm"), "{stderr}");
    assert!(stderr.contains("ttft_ms"), "{stderr}");
    let out = anvil(&["sql", "--data", dir.to_str().unwrap(), "SELECT * FROM nope"]);
    assert_eq!(out.code, Some(2));
    assert!(
        out.stderr.contains("views: server_metric_names, counter_steps, counter_increases, counter_falls, request_timing"),
        "{}",
        out.stderr
    );
}

#[test]
fn cli_sql_list_shows_tables_views_and_columns() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = build_artifact(tmp.path());
    let out = anvil(&[
        "sql",
        "--data",
        dir.to_str().unwrap(),
        "--list",
        "--format",
        "csv",
    ]);
    assert!(out.ok(), "{}", out.stderr);
    let stdout = out.stdout.clone();
    for line in [
        "name,kind,column_name,data_type,nullable,unit,meaning",
        "runs,table,repeat_index,Int64,false,-,\"Which repeat of its cell the run is, 1-based (run.json `repeat.index`; 1 for a cell recorded once).\"",
        "events,table,t_ns,Int64,false,ns,When the event's bytes arrived: the kernel's receive time of the newest TCP segment read when the client framed it (never before its own last byte).",
    ] {
        assert!(
            stdout.lines().any(|l| l == line),
            "missing `{line}` in\n{stdout}"
        );
    }
    // Views carry the units and meanings of their queries/*.sql headers.
    for start in [
        "request_metrics,view,ttft_ms,Float64,true,ms,",
        "cell_stats,view,p99_ci_high,Float64,true,as unit,",
    ] {
        assert!(
            stdout.lines().any(|l| l.starts_with(start)),
            "missing `{start}…` in\n{stdout}"
        );
    }
    // DESCRIBE of a view: one row per column with its unit and meaning.
    let out = anvil(&[
        "sql",
        "--data",
        dir.to_str().unwrap(),
        "--format",
        "csv",
        "DESCRIBE cell_stats",
    ]);
    assert!(out.ok(), "{}", out.stderr);
    let described = out.stdout.clone();
    assert_eq!(
        described.lines().next(),
        Some("column_name,data_type,nullable,unit,meaning")
    );
    assert!(
        described
            .lines()
            .any(|l| l.starts_with("window,Utf8,true,-,")),
        "{described}"
    );
}

#[test]
fn cli_sql_reads_a_file_and_writes_json_to_out() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = build_artifact(tmp.path());
    let sql = tmp.path().join("q.sql");
    std::fs::write(
        &sql,
        "-- two statements\nSELECT count(*) AS n FROM requests;\nSELECT metric, n FROM cell_stats WHERE metric = 'e2e_ms' AND window = 'all';\n",
    )
    .unwrap();
    let out_file = tmp.path().join("out.json");
    let out = anvil(&[
        "sql",
        "--data",
        dir.to_str().unwrap(),
        "-f",
        sql.to_str().unwrap(),
        "--format",
        "json",
        "--out",
        out_file.to_str().unwrap(),
    ]);
    assert!(out.ok(), "{}", out.stderr);
    let written = std::fs::read_to_string(&out_file).unwrap();
    assert_eq!(written, "[{\"n\":6}]\n[{\"metric\":\"e2e_ms\",\"n\":4}]\n");
}

#[test]
fn cli_sql_over_no_artifacts_says_so_and_missing_dir_is_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let out = anvil(&[
        "sql",
        "--data",
        tmp.path().to_str().unwrap(),
        "SELECT count(*) AS n FROM events",
    ]);
    assert!(out.ok(), "{}", out.stderr);
    assert!(out.stderr.contains("no artifact"));
    let missing = tmp.path().join("missing");
    let out = anvil(&["sql", "--data", missing.to_str().unwrap(), "SELECT 1"]);
    assert_eq!(out.code, Some(2));
    assert!(out.stderr.contains("does not exist"));
}

/// Per-request TTFT computed by DuckDB (Python) over the same Parquet files, compared with
/// `anvil sql`. Needs `pip install pyarrow duckdb`; where they are missing it is skipped and
/// named in the test command's closing list, and with `ANVIL_REQUIRE_PYTHON=1` (set by
/// `.ci/run` once it installed them) it fails instead.
#[test]
fn duckdb_agrees_on_ttft() {
    let probe = Command::new("python3")
        .args(["-c", "import pyarrow, duckdb"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        super::skip::skipped(
            "sql::duckdb_agrees_on_ttft",
            &super::skip::PYTHON,
            &std::env::var("ANVIL_PYTHON_UNAVAILABLE").unwrap_or_default(),
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = build_artifact(tmp.path());
    let script = r#"
import sys, duckdb
d = sys.argv[1]
rows = duckdb.sql(f"""
SELECT r.request_index,
       (min(e.t_ns) FILTER (WHERE e.content_delta <> '') - r.t_sent_ns) / 1e6 AS ttft_ms
FROM '{d}/requests.parquet' r JOIN '{d}/events.parquet' e USING (run_id, request_index)
WHERE r.kind = 'measured'
GROUP BY r.request_index, r.t_sent_ns
ORDER BY r.request_index
""").fetchall()
for i, t in rows:
    print(f"{i},{t!r}")
"#;
    let duck = Command::new("python3")
        .args(["-c", script, dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(duck.status.success(), "{}", text(&duck.stderr));
    let ours = anvil(&[
        "sql",
        "--data",
        dir.to_str().unwrap(),
        "--format",
        "csv",
        "SELECT request_index, ttft_ms FROM request_metrics ORDER BY request_index",
    ]);
    assert!(ours.ok(), "{}", ours.stderr);
    let parse = |s: &str| -> Vec<(i64, f64)> {
        s.lines()
            .filter(|l| !l.starts_with("request_index"))
            .map(|l| {
                let (i, t) = l.split_once(',').unwrap();
                (i.parse().unwrap(), t.parse().unwrap())
            })
            .collect()
    };
    let duck = parse(&text(&duck.stdout));
    let ours = parse(&ours.stdout.clone());
    assert_eq!(duck.len(), 5);
    assert_eq!(duck.len(), ours.len());
    for ((i, a), (j, b)) in duck.iter().zip(&ours) {
        assert_eq!(i, j);
        assert!(
            (a - b).abs() <= 1e-9 * a.abs().max(1.0),
            "request {i}: duckdb {a}, anvil {b}"
        );
    }
}

#[test]
fn cli_summary_prints_every_statistic_per_artifact() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = build_artifact(tmp.path());
    let out = anvil(&["summary", "--data", dir.to_str().unwrap()]);
    assert!(out.ok(), "{}", out.stderr);
    let stdout = out.stdout.clone();
    let header = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("metric"))
        .unwrap_or_else(|| panic!("no header in\n{stdout}"));
    let columns: Vec<&str> = header
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(columns, anvil::report::summary::FIGURE_COLUMNS);
    // The first wave (closed loop, C2 x 2 replicas) is named, and both windows shown.
    assert!(
        stdout.contains(
            "first wave: requests 0–3, 4 of 5 measured (C2 × 2 replicas, released together into \
             an idle server); the after_first_wave window leaves them out"
        ),
        "{stdout}"
    );
    // TTFT of the ok requests 40, 25, 12, 10 ms: n 4, one failed, mean 21.75, p50 12 (n = 4
    // bounds no side of the median's interval), p99 40 at least 25.
    let ttft: Vec<&str> = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("ttft_ms"))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(
        &ttft[..8],
        ["ttft_ms", "ms", "lower", "all", "4", "1", "0", "21.8"]
    );
    let ttft = ttft.join(" ");
    assert!(
        ttft.contains("12.0 (−∞, ∞) p95 40.0 [25.0, ∞) p99 40.0 [25.0, ∞) 10.0 40.0"),
        "{ttft}"
    );
    let after = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("after_first_wave"))
        .unwrap();
    assert!(
        after
            .split_whitespace()
            .take(4)
            .eq(["after_first_wave", "1", "0", "0"]),
        "{after}"
    );
    assert!(stdout.contains("∞: that side of the percentile's 95% interval is unbounded"));
    for metric in &anvil::metric::MetricId::COLUMNS[1..] {
        assert!(stdout.contains(metric), "{metric} missing:\n{stdout}");
    }
    assert!(
        stdout.contains(
            "aggregate output: 170 tok/s (17 completion tokens over 0.100 s; 4 of 5 measured \
             requests ok); after the first wave 90.9 tok/s over its own 0.011 s"
        ),
        "{stdout}"
    );
    let out = anvil(&[
        "summary",
        "--data",
        dir.to_str().unwrap(),
        "--format",
        "csv",
    ]);
    assert!(out.ok(), "{}", out.stderr);
    let stdout = out.stdout.clone();
    assert_eq!(
        stdout.lines().next().unwrap(),
        "run_id,arm,cell_id,window,metric,unit,better,requests,n,failed,n_null,mean,sd,ci95_low,\
         ci95_high,min,p1,p5,p25,p50,p75,p90,p95,p99,max,p1_ci_low,p1_ci_high,p5_ci_low,\
         p5_ci_high,p25_ci_low,p25_ci_high,p50_ci_low,p50_ci_high,p75_ci_low,p75_ci_high,\
         p90_ci_low,p90_ci_high,p95_ci_low,p95_ci_high,p99_ci_low,p99_ci_high,aggregate_output_tps,\
         slos,attained,attained_share,share_ci95_low,share_ci95_high,goodput_rps,goodput_tps"
    );
    // Six metrics over two windows.
    assert_eq!(stdout.lines().count(), 13);
}

#[test]
fn cli_verify_agrees_on_the_hand_built_artifact() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = build_artifact(tmp.path());
    // Given the campaign tree's root: the artifact is found beneath it.
    let out = anvil(&["verify", "--data", tmp.path().to_str().unwrap()]);
    let stdout = out.stdout.clone();
    assert_eq!(out.code, Some(0), "{stdout}{}", out.stderr);
    for metric in anvil::metric::MetricId::COLUMNS {
        assert!(stdout.contains(&format!("request {metric}")), "{stdout}");
        assert!(stdout.contains(&format!("cell_stats {metric}")), "{stdout}");
    }
    assert!(stdout.contains("SQL and polars agree"), "{stdout}");
    assert!(dir.exists());
}

#[test]
fn verify_reports_a_tampered_figure() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = build_artifact(tmp.path());
    let (rt, s) = session(&dir);
    let mut recomputed: Vec<_> = s
        .artifacts()
        .iter()
        .map(|a| anvil::verify::recompute(a, &[]).unwrap())
        .collect();
    let clean = rt
        .block_on(anvil::verify::compare(&s, &recomputed))
        .unwrap();
    assert!(clean.iter().all(|d| d.within_tolerance()), "{clean:?}");
    // One TPOT off by 1e-6 relative, one p99 missing after the first wave, one end of a
    // percentile interval moved: each reported.
    let tpot = &mut recomputed[0].requests[0].metrics[3];
    *tpot = tpot.map(|v| v * (1.0 + 1e-6));
    let p99 = anvil::verify::STATISTICS
        .iter()
        .position(|s| *s == "p99")
        .unwrap();
    let p50_low = anvil::verify::STATISTICS
        .iter()
        .position(|s| *s == "p50_ci_low")
        .unwrap();
    let stats = &mut recomputed[0].stats;
    stats.get_mut(&("after_first_wave", "e2e_ms")).unwrap()[p99] = None;
    let low = &mut stats.get_mut(&("all", "ttft_ms")).unwrap()[p50_low];
    *low = Some(low.unwrap_or(0.0) + 1.0);
    let found = rt
        .block_on(anvil::verify::compare(&s, &recomputed))
        .unwrap();
    let failing: Vec<String> = found
        .iter()
        .filter(|d| !d.within_tolerance())
        .map(|d| d.what.clone())
        .collect();
    assert_eq!(
        failing,
        [
            "request tpot_ms",
            "cell_stats e2e_ms",
            "percentile_ci ttft_ms"
        ],
        "{found:?}"
    );
    let e2e = found
        .iter()
        .find(|d| d.what == "cell_stats e2e_ms")
        .unwrap();
    assert!(e2e.at.contains("after_first_wave p99"), "{}", e2e.at);
    let tpot = found.iter().find(|d| d.what == "request tpot_ms").unwrap();
    assert!(
        (tpot.largest - 1e-6 / (1.0 + 1e-6)).abs() < 1e-12,
        "{}",
        tpot.largest
    );
    assert!(tpot.at.contains("request 0"), "{}", tpot.at);
}

#[test]
fn a_campaign_tree_is_one_set_of_tables_and_canaries_cross_runs() {
    let tmp = tempfile::tempdir().unwrap();
    build_artifact(tmp.path());
    // Run 2's request 0 returns run 1's request 5 canary: contamination across runs of
    // the same campaign.
    build_run(tmp.path(), 1, &canary(5));
    let (rt, s) = session(tmp.path());
    assert_eq!(s.artifacts().len(), 2);
    let r = query(&rt, &s, "SELECT run_id, arm FROM runs ORDER BY run_id");
    assert_eq!(
        strings(&r, "arm"),
        [Some("K12".to_owned()), Some("K13".to_owned())]
    );
    let r = query(&rt, &s, "SELECT count(*) AS n FROM requests");
    assert_eq!(ints(&r, "n"), [Some(12)]);
    let r = query(
        &rt,
        &s,
        "SELECT run_id, request_index, foreign_canary_count, foreign_canaries \
         FROM request_metrics WHERE foreign_canary_count > stray_canary_count \
         ORDER BY run_id, request_index",
    );
    // (markers some request of the campaign owns; the stray ones are counted apart)
    assert_eq!(
        strings(&r, "run_id"),
        ["run-hand-1", "run-hand-2", "run-hand-2"].map(|s| Some(s.to_owned()))
    );
    assert_eq!(ints(&r, "request_index"), [1, 0, 1].map(Some));
    assert_eq!(
        strings(&r, "foreign_canaries")[1].as_deref(),
        Some(format!("[{}]", canary(5)).as_str())
    );
    // Statistics stay per artifact.
    let r = query(
        &rt,
        &s,
        "SELECT run_id, n, mean FROM cell_stats WHERE metric = 'ttft_ms' AND window = 'all' \
         ORDER BY run_id",
    );
    assert_eq!(ints(&r, "n"), [Some(4), Some(4)]);
    assert_column(&r, "mean", &[Some(21.75), Some(21.75)]);
    // CSV holds the list column as JSON text.
    let out = anvil(&[
        "sql",
        "--data",
        tmp.path().to_str().unwrap(),
        "--format",
        "csv",
        "SELECT * FROM request_metrics WHERE run_id = 'run-hand-2' ORDER BY request_index",
    ]);
    assert!(out.ok(), "{}", out.stderr);
    let stdout = out.stdout.clone();
    let leak = format!(",\"[\"\"{}\"\"]\"", canary(5));
    assert!(
        stdout.lines().nth(1).is_some_and(|row| row.contains(&leak)),
        "no `{leak}` in the first row of\n{stdout}"
    );
}

#[test]
fn the_same_run_twice_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = build_artifact(tmp.path());
    let copy = tmp.path().join("copy");
    std::fs::create_dir_all(&copy).unwrap();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
    }
    let out = anvil(&["sql", "--data", tmp.path().to_str().unwrap(), "SELECT 1"]);
    assert_eq!(out.code, Some(2));
    let stderr = out.stderr;
    assert!(
        stderr.contains("run `run-hand-1` appears twice"),
        "{stderr}"
    );
}

/// One snapshot per view of `queries/`: every row over the hand-built artifact, all columns
/// (times are run-relative and the data is fixed, so the output is deterministic up to
/// the rounding below).
#[test]
fn every_view_matches_its_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = build_artifact(tmp.path());
    // With two SLOs, so that slo_attainment, goodput and tradeoff's goodput are pinned too.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let slos = anvil::slo::Slos::parse_all(
        &["ttft_ms<=60", "tpot_ms<=20"],
        anvil::slo::SloSource::Flags,
    )
    .unwrap();
    let s = rt
        .block_on(AnvilSession::open_with(
            std::slice::from_ref(&dir),
            &slos,
            false,
        ))
        .unwrap();
    for view in anvil::query::views::VIEWS {
        let schema = rt
            .block_on(s.query(&format!("SELECT * FROM {} LIMIT 0", view.name)))
            .unwrap()
            .schema;
        let order: Vec<String> = (1..=schema.fields().len()).map(|i| i.to_string()).collect();
        // Doubles rounded to 9 decimals: partial aggregates merge in any order, which moves
        // the last bit of a standard deviation or mean.
        let columns: Vec<String> = schema
            .fields()
            .iter()
            .map(|f| match f.data_type() {
                DataType::Float64 => format!("round({0}, 9) AS {0}", f.name()),
                _ => f.name().clone(),
            })
            .collect();
        let r = query(
            &rt,
            &s,
            &format!(
                "SELECT {} FROM {} ORDER BY {}",
                columns.join(", "),
                view.name,
                order.join(", ")
            ),
        );
        let table = arrow::util::pretty::pretty_format_batches_with_schema(r.schema, &r.batches)
            .unwrap()
            .to_string();
        insta::assert_snapshot!(view.name, format!("-- queries/{}\n{table}", view.file));
    }
}

#[test]
fn a_run_still_recording_is_queried_from_its_part_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("live");
    let mut writer = ArtifactWriter::create(&dir, run_json("run-live")).unwrap();
    for (seq, data) in [content("a"), content("b"), "[DONE]".to_owned()]
        .iter()
        .enumerate()
    {
        let t = 10 * MS * (seq as i64 + 1);
        writer
            .push_event(EventRow::from_raw(0, seq as u32, t, None, data.as_bytes()))
            .unwrap();
    }
    writer
        .push_request(request(
            0,
            0,
            RequestKind::Measured,
            0,
            Outcome::Ok,
            0,
            30,
            3,
        ))
        .unwrap();
    writer.flush().unwrap();
    let (rt, s) = session(&dir);
    let r = query(
        &rt,
        &s,
        "SELECT r.status, (SELECT count(*) FROM events) AS events, m.ttft_ms \
         FROM runs r JOIN request_metrics m ON m.run_id = r.run_id",
    );
    assert_eq!(strings(&r, "status"), [Some("running".to_owned())]);
    assert_eq!(ints(&r, "events"), [Some(3)]);
    assert_column(&r, "ttft_ms", &[Some(10.0)]);
    drop(writer);
}

#[test]
fn cli_sql_into_a_pipe_closed_early_succeeds() {
    // `anvil sql … | head -1`: the reader took what it wanted; that is not a failure.
    use std::io::{BufRead, BufReader};
    // One arm's three headline runs: 300 requests, far more than a pipe's buffer holds.
    let data = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/sample-data/2026-09-04-qwen38-27b-pro6000-possibility/RadixArk target-only"
    );
    for format in ["table", "csv", "json"] {
        let mut child = std::process::Command::new(super::common::ANVIL)
            .args([
                "sql",
                "--data",
                data,
                "--format",
                format,
                "SELECT * FROM request_metrics",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(!first.is_empty());
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{format}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `tmux` and its private server for one test, killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux runs")
    }

    /// The pane's text, scrollback included.
    fn pane(&self) -> String {
        text(
            &self
                .run(&["capture-pane", "-p", "-J", "-S", "-2000", "-t", "s"])
                .stdout,
        )
    }

    /// Wait until the pane shows `needle` (10 s at most).
    fn wait_for(&self, needle: &str) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let pane = self.pane();
            if pane.contains(needle) {
                return pane;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "`{needle}` never appeared:\n{pane}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    fn type_line(&self, line: &str) {
        // tmux reads an argument ending in `;` as the end of its command: escape it.
        let line = match line.strip_suffix(';') {
            Some(head) => format!("{head}\\;"),
            None => line.to_owned(),
        };
        self.run(&["send-keys", "-t", "s", "-l", &line]);
        self.run(&["send-keys", "-t", "s", "Enter"]);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// The interactive prompt in a real terminal: meta-commands work in the middle of a
/// statement (`\d NAME` describes with units and meanings), an unknown one is refused
/// without swallowing the next line, and the statement typed around them runs whole.
#[test]
fn the_interactive_prompt_takes_meta_commands_anywhere() {
    let have_tmux = std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_tmux {
        super::skip::skipped(
            "sql::the_interactive_prompt_takes_meta_commands_anywhere",
            &super::skip::TMUX,
            "",
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = build_artifact(tmp.path());
    let tmux = Tmux {
        socket: format!("anvil-test-{}", std::process::id()),
    };
    let command = format!(
        "HOME={} {} sql --data {}",
        tmp.path().display(),
        super::common::ANVIL,
        dir.display()
    );
    let started = tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "s",
        "-x",
        "250",
        "-y",
        "80",
        &command,
    ]);
    assert!(started.status.success(), "{}", text(&started.stderr));
    tmux.wait_for("anvil> ");
    tmux.type_line("SELECT count(*) AS measured_rows");
    tmux.wait_for("..> ");
    tmux.type_line("\\d request_metrics");
    let pane = tmux.wait_for("canary_checked_in");
    assert!(pane.contains("| ttft_ms"), "{pane}");
    assert!(pane.contains("| ms "), "units shown:\n{pane}");
    tmux.type_line("\\x");
    tmux.wait_for("unknown meta-command \\x");
    tmux.type_line("FROM request_metrics;");
    let pane = tmux.wait_for("| measured_rows");
    let pane = if pane.contains("| 5 ") {
        pane
    } else {
        tmux.wait_for("| 5 ")
    };
    assert!(pane.contains("| 5 "), "the whole statement ran:\n{pane}");
    tmux.type_line("\\q");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while tmux.run(&["has-session", "-t", "s"]).status.success() {
        assert!(std::time::Instant::now() < deadline, "\\q did not quit");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The frontier holds only points that meet the SLO target (the sample's 250K and 82K
/// context-curve cells attain nothing under their class's own SLOs: no trade-off), and
/// functional cells are neither points nor in goodput: their tool-call replies are no SLO
/// misses. The context curve is judged by its own list (`ttft_ms<=20000`), every other
/// class by the default; `--slo` judges every class alike.
#[test]
fn the_frontier_holds_only_points_meeting_the_slo_target_and_no_functional_cell() {
    let rows = |sql: &str| -> serde_json::Value {
        let out = anvil(&["sql", "--format", "json", "--data", "sample-data", sql]).expect(0);
        serde_json::from_str(&out).unwrap()
    };
    let off = rows(
        "SELECT arm, cell_id FROM tradeoff WHERE on_frontier AND NOT coalesce(meets_target, true)",
    );
    assert_eq!(off, serde_json::json!([]), "{off:#}");
    let missing = rows("SELECT count(*) AS n FROM tradeoff WHERE meets_target = false");
    assert!(missing[0]["n"].as_i64().unwrap() > 0, "{missing:#}");
    // Points within each other's across-run intervals on both axes tie: neither dominates
    // the other (RadixArk's K8 and K12 chunk1K at the headline, 3 runs each).
    let ties = rows(
        "SELECT (SELECT count(*) FROM tradeoff WHERE array_has_any(tied_with, dominated_by)) \
            AS tied_and_dominated, \
         (SELECT count(*) FROM tradeoff WHERE arm = 'RadixArk DFlash2 K8' \
            AND window = 'after_first_wave' AND cell_id LIKE 'headline-sustained-output.%.n100' \
            AND array_has(tied_with, 'RadixArk DFlash2 K12 chunk1K')) AS k8_ties_k12",
    );
    assert_eq!(
        ties,
        serde_json::json!([{"tied_and_dominated": 0, "k8_ties_k12": 1}]),
        "{ties:#}"
    );
    let functional = rows(
        "SELECT (SELECT count(*) FROM tradeoff WHERE cell_id LIKE 'functional.%') \
         + (SELECT count(*) FROM goodput WHERE cell_id LIKE 'functional.%') AS n",
    );
    assert_eq!(functional[0]["n"], 0, "{functional:#}");
    let target = rows("SELECT DISTINCT target FROM slos");
    assert_eq!(target, serde_json::json!([{"target": 0.9}]));

    // SLOs per workload class: the context curve's own list replaces the default.
    let judged = rows(
        "SELECT class, class_slos, string_agg(DISTINCT slo, ', ' ORDER BY slo) AS slos \
         FROM run_slos GROUP BY class, class_slos ORDER BY class",
    );
    assert_eq!(
        judged,
        serde_json::json!([
            {"class": "chat-sessions", "class_slos": false, "slos": "tpot_ms<=50, ttft_ms<=2000"},
            {"class": "context-curve", "class_slos": true, "slos": "tpot_ms<=50, ttft_ms<=20000"},
            {"class": "headline-sustained-output", "class_slos": false, "slos": "tpot_ms<=50, ttft_ms<=2000"},
            {"class": "mooncake-replay", "class_slos": false, "slos": "tpot_ms<=50, ttft_ms<=2000"},
            {"class": "optimization-screen", "class_slos": false, "slos": "tpot_ms<=50, ttft_ms<=2000"},
            {"class": "prefix-groups", "class_slos": false, "slos": "tpot_ms<=50, ttft_ms<=2000"},
        ]),
        "{judged:#}"
    );
    let curve = "SELECT cell_id, bool_and(meets_target) AS meets, bool_or(on_frontier) AS frontier \
         FROM tradeoff WHERE cell_id LIKE 'context-curve.%' AND window = 'all' \
         GROUP BY cell_id ORDER BY cell_id";
    let expected = serde_json::json!([
        {"cell_id": "context-curve.ctx131072.c1.n3", "meets": true, "frontier": true},
        {"cell_id": "context-curve.ctx253952.c1.n3", "meets": false, "frontier": false},
        {"cell_id": "context-curve.ctx32768.c1.n3", "meets": true, "frontier": true},
        {"cell_id": "context-curve.ctx81920.c8.n8", "meets": false, "frontier": false},
    ]);
    let by_class = rows(curve);
    assert_eq!(by_class, expected, "{by_class:#}");
    // `--slo` replaces the campaign's lists for every class: a 32K prompt then misses 2 s.
    let out = anvil(&[
        "sql",
        "--format",
        "json",
        "--data",
        "sample-data",
        "--slo",
        "ttft_ms<=2000",
        curve,
    ])
    .expect(0);
    let flat: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        flat.as_array()
            .unwrap()
            .iter()
            .all(|r| r["meets"] == false && r["frontier"] == false),
        "{flat:#}"
    );
}

/// The rules' verdicts are tables an analyst can query: every difference of the stage
/// comparisons with its interval and verdict, every claim clause with one of the five
/// labels, every arm's advance rules, every manifest control with what realises it; without
/// the campaign's documents a statement naming them is refused saying what to give.
#[test]
fn claims_rule_verdicts_and_controls_are_tables_of_the_same_check() {
    // One statement (the check runs once per invocation).
    let sql = "SELECT \
        (SELECT count(*) FROM claims WHERE verdict NOT IN ('supported', 'contradicted', \
            'tested, not resolved', 'not testable', 'plan text not read')) AS other_labels, \
        (SELECT count(*) FROM claims WHERE component IS NULL) AS clauses, \
        (SELECT count(DISTINCT arm) FROM rule_verdicts) AS arms, \
        (SELECT count(*) FROM controls WHERE control LIKE 'Inferact versus RadixArk%' \
            AND status = 'realised') AS checkpoint_pairs, \
        (SELECT min(status) FROM controls WHERE control LIKE 'API usage tokens%') AS method, \
        (SELECT count(*) FROM comparisons WHERE verdict NOT IN ('better', 'worse', \
            'negligible', 'not resolved', 'no interval', 'no figure', 'load differs', \
            'not comparable')) \
            AS other_verdicts, \
        (SELECT count(*) FROM comparisons WHERE verdict = 'better' \
            AND NOT (ci_low > 0 OR ci_high < 0)) AS better_without_interval, \
        (SELECT count(*) FROM comparisons WHERE stage = 'matched topology' \
            AND figure = 'output_tps' AND verdict <> 'load differs') AS topology_verdicts, \
        (SELECT count(*) FROM comparisons WHERE arm = 'RadixArk DFlash2 K8' \
            AND reference = 'RadixArk target-only' AND figure = 'ttft_ms' \
            AND statistic IN ('mean', 'p50', 'p95')) AS k8_ttft_rows";
    let out = anvil(&["sql", "--format", "json", "--data", "sample-data", sql]).expect(0);
    let row: serde_json::Value = serde_json::from_str(&out).unwrap();
    let row = &row[0];
    assert_eq!(row["other_labels"], 0, "{row}");
    assert!(row["clauses"].as_i64().unwrap() >= 5, "{row}");
    assert_eq!(row["arms"], 18, "{row}");
    // Inferact versus RadixArk at K0 and at K8.
    assert_eq!(row["checkpoint_pairs"], 2, "{row}");
    assert_eq!(row["method"], "realised by method", "{row}");
    // Every difference: one of the verdicts, "better" only with an interval clear of zero,
    // no throughput verdict between the topologies' unequal loads, K8's TTFT in both
    // windows.
    assert_eq!(row["other_verdicts"], 0, "{row}");
    assert_eq!(row["better_without_interval"], 0, "{row}");
    assert_eq!(row["topology_verdicts"], 0, "{row}");
    assert_eq!(row["k8_ttft_rows"], 6, "{row}");

    // A data folder without the campaign's documents: refused, saying what to give.
    let tmp = tempfile::tempdir().unwrap();
    let run = "sample-data/2026-09-04-qwen38-27b-pro6000-possibility/TP1/headline-sustained-output.ctx4096.c8.n100/repeat-1";
    let copy = tmp.path().join("one");
    std::fs::create_dir_all(&copy).unwrap();
    for f in std::fs::read_dir(run).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, copy.join(f.file_name().unwrap())).unwrap();
    }
    let (code, _, err) = anvil(&[
        "sql",
        "--data",
        copy.to_str().unwrap(),
        "SELECT * FROM claims",
    ])
    .parts();
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--campaign"), "{err}");
}
