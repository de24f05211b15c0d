//! Workload classes declared beside the manifest, recorded end to end: the real
//! `anvil-capture` against the real `anvil-sim`, held to the simulator's truth.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use anvil::artifact::RunJson;
use serde_json::json;

use super::common::{CAPTURE, Sim, artifact_of, output_text, run, small_manifest, sql_rows};

/// A campaign-style document declaring `workloads`.
fn declare(dir: &Path, workloads: serde_json::Value) -> PathBuf {
    let path = dir.join("workloads.json");
    std::fs::write(&path, json!({ "workloads": workloads }).to_string()).unwrap();
    path
}

/// `anvil-capture run` of declared `class` (arm A) against `url`, writing under `out`.
fn capture(manifest: &Path, workloads: &Path, class: &str, url: &str, out: &Path) -> Output {
    run(
        CAPTURE,
        &[
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
        ],
        &[],
    )
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
    // The simulator's own account of each request's cache hit, by request id.
    let text = std::fs::read_to_string(&truth).unwrap();
    let hits: BTreeMap<String, u64> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|r| r[4] == "cache_hit")
        .map(|r| (r[0].to_owned(), r[3].parse().unwrap()))
        .collect();
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
            // prefix follows it.
            let group = sized.tokens[(index % 3) as usize];
            assert!(
                (group - 16..group + 32).contains(&got),
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
}
