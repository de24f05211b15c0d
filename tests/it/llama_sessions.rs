//! Sessions and the cache against a real `llama-server` (one slot, so each turn finds its
//! conversation in the slot that served the last): the server's own `timings.cache_n` says
//! how much of each turn's prompt it reused, and anvil's per-turn figures must agree; the
//! slot erase before the run (`--reset-cache`) is verified by the next request's `cache_n`.

use serde_json::{Value, json};

use super::common::{CAPTURE, artifact_of, output_text, run, sql_rows};
use super::llama::{Llama, engine};

#[test]
fn llama_session_turns_reuse_their_history_as_the_servers_cache_n_says_after_a_slot_erase() {
    let Some((engine, _turn)) = engine(
        "llama_session_turns_reuse_their_history_as_the_servers_cache_n_says_after_a_slot_erase",
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    // llama-server answers slot actions, the erase included, only with a save path.
    let slots = tmp.path().join("slots");
    std::fs::create_dir(&slots).unwrap();
    let llama = Llama::start(
        &engine,
        tmp.path(),
        1,
        4096,
        &["--slot-save-path".to_owned(), slots.display().to_string()],
    );
    let workloads = tmp.path().join("workloads.json");
    std::fs::write(
        &workloads,
        json!({"workloads": [{
            "class": "chat-sessions",
            "gate": "broad repeated quality, agentic, SWE, and endurance",
            "context": 512, "concurrency": 1, "reply_words": 16, "max_tokens": 24,
            "session": {"sessions": 2, "turns": 3, "turn_words": 40}
        }]})
        .to_string(),
    )
    .unwrap();
    let manifest = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/sample-data/workload-manifest.json"
    );
    let out = tmp.path().join("out");
    let url = llama.url();
    let o = run(
        CAPTURE,
        &[
            "run",
            "--manifest",
            manifest,
            "--workloads",
            workloads.to_str().unwrap(),
            "--class",
            "chat-sessions",
            "--arm",
            "llama",
            "--endpoint",
            &url,
            "--model",
            "tiny",
            "--reset-cache",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    let dir = artifact_of(&o);
    let rj = anvil::artifact::RunJson::read(&dir.join("run.json")).unwrap();
    assert_eq!(rj.counts.succeeded, 6, "{}", output_text(&o));
    // The slot erase: the probe was in the slot before it, and nothing of it after.
    let reset = &rj.cache_hygiene.as_ref().unwrap().resets[0];
    assert_eq!(reset.outcome, "reset", "{reset:?}");
    assert_eq!(
        reset.method.as_deref(),
        Some("POST /slots/{id}?action=erase")
    );
    assert!(reset.probe_cached_before.unwrap() >= 16, "{reset:?}");
    assert_eq!(reset.probe_cached_after, Some(0), "{reset:?}");
    assert_eq!(reset.verified, Some(true));

    let rows = sql_rows(
        &out,
        "SELECT t.session_id, t.turn, t.prompt_tokens, t.cached_tokens, t.cached_source, \
         t.history_tokens, s.cached_tokens AS cache_n, s.server_prompt_tokens \
         FROM session_turns t JOIN server_timings s \
         ON s.run_id = t.run_id AND s.request_index = t.request_index \
         ORDER BY t.session_id, t.turn",
    );
    assert_eq!(rows.len(), 6, "{rows:?}");
    let int = |r: &Value, k: &str| r[k].as_i64().unwrap_or_else(|| panic!("{k}: {r}"));
    for r in &rows {
        // anvil's per-turn figure is the server's own count.
        assert_eq!(int(r, "cached_tokens"), int(r, "cache_n"), "{r}");
        assert_eq!(
            int(r, "cache_n") + int(r, "server_prompt_tokens"),
            int(r, "prompt_tokens"),
            "cached and processed make the prompt: {r}"
        );
    }
    for pair in rows.chunks(3).flat_map(|s| s.windows(2)) {
        let (before, turn) = (&pair[0], &pair[1]);
        // Turns 2 and 3 find the conversation so far in the slot: at least the last
        // prompt (the reply's tokens too, as far as the template renders them alike).
        let cached = int(turn, "cache_n");
        assert!(
            cached >= int(before, "prompt_tokens") - 16 && cached < int(turn, "prompt_tokens"),
            "turn {turn}: {cached} cached after a prompt of {}",
            int(before, "prompt_tokens")
        );
        assert_eq!(
            int(turn, "history_tokens"),
            int(before, "prompt_tokens") + {
                let c = sql_rows(
                    &out,
                    &format!(
                        "SELECT usage_completion_tokens AS c FROM request_timing r \
                         WHERE r.session_id = {} AND r.turn = {}",
                        int(before, "session_id"),
                        int(before, "turn")
                    ),
                );
                c[0]["c"].as_i64().unwrap()
            }
        );
    }
    // A session's first turn after another's: its own unique prefix, nothing to reuse but
    // the template's opening.
    assert!(int(&rows[3], "cache_n") < 16, "{:?}", rows[3]);
}
