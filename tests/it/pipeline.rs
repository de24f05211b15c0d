//! The whole pipeline on real parts: `anvil-sim` on loopback → `anvil-capture` → Parquet →
//! `anvil sql` / `anvil verify`. Guards that what the recorder writes is what the SQL layer
//! reads, and that the simulator's injected contamination reaches `foreign_canaries`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::common::{ANVIL, Recording, Sim, run, small_manifest, sql_rows as sql};

/// Capture a small headline-shaped cell (512-token prompts, 24 words) against `sim`.
fn capture(sim: &Sim, out: &Path, arm: &str, requests: u32) -> PathBuf {
    let manifest = small_manifest(out, |_| {});
    Recording::cell(&manifest, out, 4, requests)
        .arm(arm)
        .endpoint(&sim.url(0))
        .record()
}

#[test]
fn verify_agrees_with_sql_on_a_capture_from_the_simulator() {
    let sim = Sim::start(&["--spec-depth", "4", "--spec-accept", "0.7"]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = capture(&sim, tmp.path(), "K4", 16);

    let o = run(ANVIL, &["verify", "--data", dir.to_str().unwrap()], &[]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "verify: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );

    let rows = sql(
        &dir,
        "SELECT request_index, ttft_ms, tpot_ms, completion_tokens, tokens_per_chunk, canary_ok \
         FROM request_metrics ORDER BY request_index",
    );
    assert_eq!(rows.len(), 16, "one row per measured request");
    for r in &rows {
        assert!(r["ttft_ms"].as_f64().unwrap() > 0.0, "{r}");
        assert_eq!(r["canary_ok"], Value::Bool(true), "{r}");
        // Speculative decoding puts several tokens in one chunk; TPOT stays on usage tokens.
        assert!(r["tokens_per_chunk"].as_f64().unwrap() > 1.0, "{r}");
    }
}

#[test]
fn simulator_contamination_shows_in_foreign_canaries() {
    let sim = Sim::start(&["--fault", "contaminate=1", "--seed", "7"]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = capture(&sim, tmp.path(), "contaminated", 12);

    let own: BTreeSet<String> = sql(&dir, "SELECT canary FROM requests WHERE kind = 'measured'")
        .iter()
        .map(|r| r["canary"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(own.len(), 12, "a unique canary per request");

    let rows = sql(
        &dir,
        "SELECT request_index, canary_ok, foreign_canary_count, stray_canary_count, \
                array_to_string(foreign_canaries, ',') AS foreign_list, \
                coalesce(array_to_string(stray_canaries, ','), '') AS stray_list \
         FROM request_metrics ORDER BY request_index",
    );
    assert_eq!(rows.len(), 12);
    let mut with_foreign = 0;
    for r in &rows {
        let foreign = r["foreign_canary_count"].as_i64().unwrap();
        let stray = r["stray_canary_count"].as_i64().unwrap();
        // At rate 1 every reply carries a marker that is not its own: another in-flight
        // request's canary, or a made-up one when none was in flight. Either fails the
        // request's canary check.
        assert!(
            foreign >= 1,
            "uncontaminated reply under contaminate=1: {r}"
        );
        assert_eq!(r["canary_ok"], Value::Bool(false), "{r}");
        assert!(
            stray <= foreign,
            "stray markers are a subset of foreign ones: {r}"
        );
        for c in r["foreign_list"].as_str().unwrap().split(',') {
            let from_outside = r["stray_list"].as_str().unwrap().split(',').any(|s| s == c);
            assert_eq!(
                own.contains(c),
                !from_outside,
                "{c} is stray exactly when no request of the run owns it: {r}"
            );
            if own.contains(c) {
                with_foreign += 1;
            }
        }
    }
    assert!(
        with_foreign > 0,
        "with 4 requests in flight, some replies carry another request's canary"
    );
}
