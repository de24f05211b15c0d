//! Workload classes declared beside the manifest, recorded end to end: the real
//! `anvil-capture` against the real `anvil-sim`, held to the simulator's truth.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use anvil::artifact::RunJson;
use serde_json::{Value, json};

use super::common::{CAPTURE, Sim, artifact_of, output_text, run, small_manifest, sql_rows};

/// A campaign-style document declaring `workloads`.
fn declare(dir: &Path, workloads: serde_json::Value) -> PathBuf {
    let path = dir.join("workloads.json");
    std::fs::write(&path, json!({ "workloads": workloads }).to_string()).unwrap();
    path
}

/// `anvil-capture run` of declared `class` (arm A) against `url`, writing under `out`.
fn capture(manifest: &Path, workloads: &Path, class: &str, url: &str, out: &Path) -> Output {
    capture_with(manifest, workloads, class, url, out, &[])
}

/// [`capture`] with `extra` flags.
pub(super) fn capture_with(
    manifest: &Path,
    workloads: &Path,
    class: &str,
    url: &str,
    out: &Path,
    extra: &[&str],
) -> Output {
    let mut args = vec![
        "run",
        "--manifest",
        manifest.to_str().unwrap(),
        "--workloads",
        workloads.to_str().unwrap(),
        "--class",
        class,
        "--arm",
        "A",
        "--endpoint",
        url,
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    run(CAPTURE, &args, &[])
}

/// The simulator's own account of each generation request's cache hit: prompt tokens served
/// from the cache, by request id.
fn truth_hits(truth: &Path) -> BTreeMap<String, u64> {
    std::fs::read_to_string(truth)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|r| r[4] == "cache_hit")
        .map(|r| (r[0].to_owned(), r[3].parse().unwrap()))
        .collect()
}

fn prefix_groups() -> serde_json::Value {
    json!([{
        "class": "prefix-groups",
        "gate": "broad repeated quality, agentic, SWE, and endurance",
        "context": 1024,
        "concurrency": 2,
        "requests": 24,
        "reply_words": 12,
        "max_tokens": 32,
        "prefix_groups": {"groups": 3, "shared_tokens": 512}
    }])
}

#[test]
fn prefix_groups_share_their_prefix_and_the_cache_serves_it_as_the_truth_says() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = small_manifest(tmp.path(), |_| {});
    let workloads = declare(tmp.path(), prefix_groups());
    let truth = tmp.path().join("truth.csv");
    let sim = Sim::start(&["--truth", truth.to_str().unwrap()]);
    let out = tmp.path().join("out");
    let url = sim.url(0);
    let o = capture(&manifest, &workloads, "prefix-groups", &url, &out);
    let dir = artifact_of(&o);
    let (code, err) = sim.stop();
    assert_eq!(code, 0, "{err}");

    let rj = RunJson::read(&dir.join("run.json")).unwrap();
    assert!(rj.run_id.len() > 4);
    assert_eq!(rj.workload.prompt_cache_mode, "groups");
    let g = rj
        .workload
        .prefix_groups
        .clone()
        .expect("prefix_groups in run.json");
    assert_eq!((g.groups, g.shared_tokens), (3, 512));
    assert!((g.expected_cacheable_share - 21.0 / 24.0 * 0.5).abs() < 1e-12);
    let sized = rj
        .calibration
        .group_prefix
        .clone()
        .expect("the shared prefixes were calibrated");
    assert_eq!(sized.tokens.len(), 3);
    assert!(
        sized.tokens.iter().all(|t| t.abs_diff(512) <= 8),
        "{sized:?}"
    );
    assert!(
        dir.to_str()
            .unwrap()
            .contains("prefix-groups.ctx1024.c2.n24")
    );

    let rows = sql_rows(
        &out,
        "SELECT request_index, usage_prompt_tokens, usage_cached_tokens FROM request_timing \
         WHERE kind = 'measured' ORDER BY request_index",
    );
    assert_eq!(rows.len(), 24, "{rows:?}");
    let hits = truth_hits(&truth);
    let (mut cached, mut prompt) = (0u64, 0u64);
    for r in &rows {
        let index = r["request_index"].as_u64().unwrap();
        let got = r["usage_cached_tokens"].as_u64().unwrap();
        let truth = hits[&format!("{}-{index}", rj.run_id)];
        assert_eq!(
            got, truth,
            "request {index}: usage says {got}, the truth {truth}"
        );
        if index < 3 {
            // Each group's first request finds nothing of it cached (its own group's
            // prefix is new; the run's salt keeps other runs' prefixes apart).
            assert!(
                got < 16,
                "request {index} is its group's first: {got} cached"
            );
        } else {
            // Whole 16-token blocks of the shared prefix, and no more: the request's unique
            // prefix follows it. The calibrated count also holds the chat template's closing
            // tokens, which the requests do not share: up to a block and a few tokens less.
            let group = sized.tokens[(index % 3) as usize];
            assert!(
                (group - 32..=group).contains(&got),
                "request {index}: {got} cached of a {group}-token shared prefix"
            );
        }
        cached += got;
        prompt += r["usage_prompt_tokens"].as_u64().unwrap();
    }
    let share = cached as f64 / prompt as f64;
    // The server's own counters (vLLM's names, exported by the simulator) against the client's
    // usage: both sides of the prefix_cache view.
    let pc = sql_rows(
        &out,
        "SELECT server_source, hit_tokens, server_hit_rate, measured_cached_share, \
         disagreement FROM prefix_cache",
    );
    assert_eq!(pc.len(), 1, "{pc:?}");
    assert_eq!(pc[0]["server_source"], "counters");
    assert!((pc[0]["measured_cached_share"].as_f64().unwrap() - share).abs() < 1e-9);
    let all_hits: u64 = hits.values().sum();
    let server_hits = pc[0]["hit_tokens"].as_f64().unwrap() as u64;
    assert!(
        (cached..=all_hits).contains(&server_hits),
        "server counted {server_hits} hit tokens; measured {cached}, the truth {all_hits}"
    );
    let server_rate = pc[0]["server_hit_rate"].as_f64().unwrap();
    assert!(
        (server_rate - share).abs() < 0.03,
        "{server_rate} vs {share}"
    );
    assert!(
        (share - g.expected_cacheable_share).abs() < 0.05,
        "served {share:.3} of prompt tokens from cache, declared {:.3}",
        g.expected_cacheable_share
    );
}

#[test]
fn a_declared_class_is_refused_with_its_field_named() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = small_manifest(tmp.path(), |_| {});
    let mut bad = prefix_groups();
    bad[0]["prefix_groups"]["shared_tokens"] = 1000.into();
    let workloads = declare(tmp.path(), bad);
    let out = tmp.path().join("out");
    let o = capture(
        &manifest,
        &workloads,
        "prefix-groups",
        "http://127.0.0.1:9",
        &out,
    );
    let said = output_text(&o);
    assert_eq!(o.status.code(), Some(2), "{said}");
    assert!(
        said.contains("workloads.json")
            && said.contains("workloads[0].prefix_groups.shared_tokens"),
        "{said}"
    );
    // A class neither in the manifest nor declared is named with both lists.
    let workloads = declare(tmp.path(), prefix_groups());
    let o = capture(
        &manifest,
        &workloads,
        "sessions",
        "http://127.0.0.1:9",
        &out,
    );
    let said = output_text(&o);
    assert_eq!(o.status.code(), Some(2), "{said}");
    assert!(said.contains("declared beside it: prefix-groups"), "{said}");
    // A trace stretched past a day is refused before anything is written.
    let workloads = mooncake_replay(tmp.path(), 120);
    let mut doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&workloads).unwrap()).unwrap();
    doc["workloads"][0]["trace"]["time_scale"] = 1000.into();
    doc["workloads"][0]["trace"]["start_offset_s"] = 50_000.into();
    std::fs::write(&workloads, doc.to_string()).unwrap();
    let o = capture(
        &manifest,
        &workloads,
        "mooncake-replay",
        "http://127.0.0.1:9",
        &out,
    );
    let said = output_text(&o);
    assert_eq!(o.status.code(), Some(2), "{said}");
    assert!(
        said.contains("--class") && said.contains("a schedule may span at most 86400 s"),
        "{said}"
    );
    assert!(!out.exists(), "nothing is written: {said}");
}

/// The first `rows` rows of the Mooncake excerpt replayed 20 times faster than recorded.
fn mooncake_replay(dir: &Path, rows: u64) -> PathBuf {
    let trace = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/sample-data/traces/mooncake_conversation_head.jsonl"
    ));
    std::fs::copy(trace, dir.join("mooncake.jsonl")).unwrap();
    declare(
        dir,
        json!([{
            "class": "mooncake-replay",
            "gate": "broad repeated quality, agentic, SWE, and endurance",
            "requests": rows,
            "trace": {"file": "mooncake.jsonl", "time_scale": 0.05}
        }]),
    )
}

#[test]
fn a_trace_replays_at_its_times_with_its_lengths_and_its_shared_blocks_hit_the_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = small_manifest(tmp.path(), |_| {});
    let workloads = mooncake_replay(tmp.path(), 40);
    let truth = tmp.path().join("truth.csv");
    let sim = Sim::start(&[
        "--max-model-len",
        "200000",
        "--truth",
        truth.to_str().unwrap(),
    ]);
    let out = tmp.path().join("out");
    let o = capture(&manifest, &workloads, "mooncake-replay", &sim.url(0), &out);
    let dir = artifact_of(&o);
    let (code, err) = sim.stop();
    assert_eq!(code, 0, "{err}");

    let rj = RunJson::read(&dir.join("run.json")).unwrap();
    let trace = anvil::workload::trace::read(&tmp.path().join("mooncake.jsonl"), None).unwrap();
    let t = rj.workload.trace.clone().expect("the trace in run.json");
    assert_eq!((t.format.as_str(), t.rows), ("mooncake", 40));
    assert_eq!(t.sha256, trace.sha256);
    assert_eq!(rj.workload.schedule, anvil::artifact::Schedule::Trace);
    let density = rj.calibration.trace_density.expect("blocks were sized");
    assert_eq!(density.block_tokens, 512);

    let rows = sql_rows(
        &out,
        "SELECT t.request_index, t.t_intended_ns, t.t_sent_ns, t.prompt_tokens_target, \
         t.max_tokens, t.usage_prompt_tokens, t.usage_completion_tokens, \
         t.usage_cached_tokens, t.finish_reason, q.request_body FROM request_timing t \
         JOIN requests q ON q.run_id = t.run_id AND q.request_index = t.request_index \
         WHERE t.kind = 'measured' ORDER BY t.request_index",
    );
    assert_eq!(rows.len(), 40);
    let int = |r: &serde_json::Value, k: &str| r[k].as_i64().unwrap_or_else(|| panic!("{k}: {r}"));
    let t0 = int(&rows[0], "t_intended_ns");
    let mut late = Vec::new();
    let mut errors = Vec::new();
    let hits = truth_hits(&truth);
    let mut seen: Vec<(f64, &[u64])> = Vec::new();
    let mut shared_rows = 0;
    for (i, r) in rows.iter().enumerate() {
        let row = &trace.rows[i];
        // Sent at the trace's time, scaled: 20 times faster.
        let want = (row.t_ms * 0.05 * 1e6).round() as i64;
        assert_eq!(int(r, "t_intended_ns") - t0, want, "row {i}");
        late.push(int(r, "t_sent_ns") - int(r, "t_intended_ns"));
        // Its lengths: the prompt within 5% of the trace's (a text's words vary in tokens),
        // the reply exactly (ignore_eos).
        assert_eq!(int(r, "prompt_tokens_target"), i64::from(row.input_tokens));
        let got = int(r, "usage_prompt_tokens");
        errors.push((got - i64::from(row.input_tokens)) as f64 / f64::from(row.input_tokens));
        assert!(
            got.abs_diff(i64::from(row.input_tokens)) * 100 <= u64::from(row.input_tokens) * 5,
            "row {i}: {got} prompt tokens for the trace's {}",
            row.input_tokens
        );
        assert_eq!(int(r, "max_tokens"), i64::from(row.output_tokens));
        assert_eq!(
            int(r, "usage_completion_tokens"),
            i64::from(row.output_tokens)
        );
        assert_eq!(r["finish_reason"], "length");
        assert!(
            r["request_body"]
                .as_str()
                .unwrap()
                .contains("\"ignore_eos\":true")
        );
        // A row whose first block an earlier row sent finds it cached, as the truth says.
        let cached = r["usage_cached_tokens"].as_u64().unwrap();
        assert_eq!(cached, hits[&format!("{}-{i}", rj.run_id)], "row {i}");
        // Rows of one burst share a time and reach the server in any order: only a row sent
        // strictly earlier, whose first block it sent whole, must have left it cached.
        let earlier = seen
            .iter()
            .any(|(t, ids)| *t < row.t_ms && ids.len() > 1 && ids.first() == row.hash_ids.first());
        if earlier && row.hash_ids.len() > 1 {
            shared_rows += 1;
            assert!(cached >= 400, "row {i} repeats a block yet {cached} cached");
        }
        seen.push((row.t_ms, &row.hash_ids));
    }
    assert!(
        shared_rows > 5,
        "the excerpt's rows share blocks: {shared_rows}"
    );
    let mean_error = errors.iter().map(|e| e.abs()).sum::<f64>() / errors.len() as f64;
    assert!(
        mean_error < 0.025,
        "prompt lengths off by {mean_error:.3} on average"
    );
    late.sort_unstable();
    let p90 = late[late.len() * 9 / 10];
    assert!(
        p90 < 50_000_000,
        "sent {p90} ns after the trace's time (p90)"
    );
}
