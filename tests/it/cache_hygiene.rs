//! Cache hygiene end to end against `anvil-sim`: a reset before the run, verified by a probe
//! and by the simulator's truth; a warm cell (salt off) that finds the last run's prompts
//! cached and is never matched with a cold one; a difference in reset shown beside the
//! comparison, not refused.

use std::path::Path;

use anvil::artifact::RunJson;

use super::common::{Sim, anvil_compare, capture_cell, small_manifest, sql_rows};

fn cell(sim: &Sim, manifest: &Path, out: &Path, arm: &str, extra: &[&str]) -> std::path::PathBuf {
    let mut args = vec![
        "--class",
        "headline-sustained-output",
        "--concurrency",
        "2",
        "--requests",
        "8",
        "--off-manifest",
        "--arm",
        arm,
    ];
    args.extend_from_slice(extra);
    capture_cell(sim, manifest, out, &args)
}

#[test]
fn a_reset_before_the_run_empties_the_cache_and_its_probe_and_the_truth_say_so() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = small_manifest(tmp.path(), |_| {});
    let truth = tmp.path().join("truth.csv");
    // vLLM's endpoint (development mode), then SGLang's when vLLM's answers 404.
    for (flags, method) in [
        (vec!["--dev-mode"], "POST /reset_prefix_cache"),
        (vec![], "POST /flush_cache"),
    ] {
        let mut args = flags.clone();
        args.extend(["--truth", truth.to_str().unwrap()]);
        let sim = Sim::start(&args);
        let out = tmp.path().join(method.replace([' ', '/'], "_"));
        let dir = cell(&sim, &manifest, &out, "A", &["--reset-cache"]);
        let (code, err) = sim.stop();
        assert_eq!(code, 0, "{err}");
        let rj = RunJson::read(&dir.join("run.json")).unwrap();
        assert_eq!(rj.schema, anvil::artifact::SCHEMA);
        let h = rj.cache_hygiene.expect("cache_hygiene");
        assert!(h.salted);
        let r = &h.resets[0];
        assert_eq!(
            (r.outcome.as_str(), r.method.as_deref()),
            ("reset", Some(method))
        );
        assert_eq!(r.verified, Some(true), "{r:?}");
        assert!(r.probe_cached_before.unwrap() >= 16);
        assert_eq!(r.probe_cached_after, Some(0));
        // The simulator emptied its cache once, dropping what was held (the calibration's
        // probes and the reset's own).
        let text = std::fs::read_to_string(&truth).unwrap();
        let resets: Vec<u64> = text
            .lines()
            .map(|l| l.split(',').collect::<Vec<_>>())
            .filter(|f| f.len() > 4 && f[4] == "cache_reset")
            .map(|f| f[3].parse().unwrap())
            .collect();
        assert_eq!(resets.len(), 1, "{resets:?}");
        assert!(resets[0] >= r.probe_cached_before.unwrap(), "{resets:?}");
        // The measured requests found nothing cached: the run started cold.
        let cached = sql_rows(
            &out,
            "SELECT max(usage_cached_tokens) AS m FROM request_timing WHERE kind = 'measured'",
        );
        assert!(cached[0]["m"].as_i64().unwrap() < 16, "{cached:?}");
    }
}

#[test]
fn a_warm_cell_finds_the_last_runs_prompts_and_is_never_matched_with_a_cold_one() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = small_manifest(tmp.path(), |_| {});
    let sim = Sim::start(&["--dev-mode"]);
    let warm1 = cell(
        &sim,
        &manifest,
        &tmp.path().join("warm1"),
        "A",
        &["--warm-cache"],
    );
    let warm2 = cell(
        &sim,
        &manifest,
        &tmp.path().join("warm2"),
        "B",
        &["--warm-cache"],
    );
    let cold = cell(&sim, &manifest, &tmp.path().join("cold"), "B", &[]);
    let reset = cell(
        &sim,
        &manifest,
        &tmp.path().join("reset"),
        "A",
        &["--reset-cache"],
    );
    let (code, err) = sim.stop();
    assert_eq!(code, 0, "{err}");
    let rj = RunJson::read(&warm2.join("run.json")).unwrap();
    assert_eq!(rj.workload.cache.as_deref(), Some("warm"));
    assert!(!rj.cache_hygiene.unwrap().salted);
    // The second warm run sends the first's prompts: the cache serves nearly all of them.
    let share = sql_rows(
        &tmp.path().join("warm2"),
        "SELECT sum(usage_cached_tokens) * 1.0 / sum(usage_prompt_tokens) AS s \
         FROM request_timing WHERE kind = 'measured'",
    );
    assert!(share[0]["s"].as_f64().unwrap() > 0.9, "{share:?}");
    let share = sql_rows(
        &tmp.path().join("cold"),
        "SELECT sum(usage_cached_tokens) * 1.0 / sum(usage_prompt_tokens) AS s \
         FROM request_timing WHERE kind = 'measured'",
    );
    assert!(share[0]["s"].as_f64().unwrap() < 0.1, "{share:?}");

    let m = manifest.to_str().unwrap();
    let (code, out, err) =
        anvil_compare(m, &[warm1.to_str().unwrap(), cold.to_str().unwrap()]).parts();
    assert_ne!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("not matched") && out.contains("cache"),
        "a warm run against a cold one is refused, naming the cache:\n{out}{err}"
    );
    // Salted both, one reset and one not: compared, the difference shown beside it.
    let (code, out, err) =
        anvil_compare(m, &[reset.to_str().unwrap(), cold.to_str().unwrap()]).parts();
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("Prefix cache before the runs differs")
            && out.contains("reset: A")
            && out.contains("no reset: B"),
        "{out}"
    );
}
