//! `anvil-sim`'s prefix cache and KV pool held to its own truth: a capacity with LRU
//! eviction, the engines' reset endpoints as each engine answers them, preemption when the
//! KV pool is full, and a truth row for every hit, eviction, reset and preemption.

use serde_json::json;

use super::common::Sim;
use super::sim::{agent, chat, get, metric, parsed, stream, usage_of};

/// A prompt of about `words` words that no other prompt of the test shares.
fn prompt(tag: &str, words: usize) -> String {
    format!("{tag} {}", "shared system prompt words ".repeat(words / 4))
}

fn cached(url: &str, text: &str, id: &str) -> u64 {
    let c = parsed(&stream(url, &chat(text, json!({"max_tokens": 3})), Some(id)).unwrap());
    usage_of(&c)["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap()
}

/// A 40-token reply on the slow profile (about 3 s), running when this returns.
fn busy(base: &str) -> std::thread::JoinHandle<Vec<super::sim::Sse>> {
    let url = format!("{base}/v1/chat/completions");
    let long = std::thread::spawn(move || {
        stream(
            &url,
            &chat("about 40 words", json!({"max_tokens": 40})),
            None,
        )
        .unwrap()
    });
    std::thread::sleep(std::time::Duration::from_millis(150));
    long
}

fn call(method: &str, url: &str) -> (u16, String) {
    let a = agent();
    let r = match method {
        "GET" => a.get(url).call(),
        _ => a.post(url).send(""),
    }
    .unwrap();
    let status = r.status().as_u16();
    (status, r.into_body().read_to_string().unwrap())
}

#[test]
fn capacity_evicts_least_recent_prefixes_and_resets_empty_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let truth = dir.path().join("truth.csv");
    // Room for about two of the prompts below.
    let sim = Sim::start(&[
        "--prefix-cache-tokens",
        "512",
        "--dev-mode",
        "--truth",
        truth.to_str().unwrap(),
    ]);
    let base = sim.url(0);
    let url = format!("{base}/v1/chat/completions");
    let (a, b, c) = (
        prompt("alpha", 160),
        prompt("bravo", 160),
        prompt("charlie", 160),
    );
    assert_eq!(cached(&url, &a, "a1"), 0);
    let a_hit = cached(&url, &a, "a2");
    assert!(a_hit > 0 && a_hit.is_multiple_of(16), "{a_hit}");
    assert_eq!(cached(&url, &b, "b1"), 0);
    // C pushes out the least recent blocks: A's.
    assert_eq!(cached(&url, &c, "c1"), 0);
    let a_after = cached(&url, &a, "a3");
    assert!(
        a_after < a_hit,
        "A lost blocks to eviction: {a_after} < {a_hit}"
    );

    // vLLM's reset (mounted with --dev-mode) and SGLang's flush, on an idle replica.
    assert_eq!(
        call("POST", &format!("{base}/reset_prefix_cache")),
        (200, "{\"success\":true}".to_owned())
    );
    assert_eq!(cached(&url, &a, "a4"), 0);
    let a5_hit = cached(&url, &a, "a5");
    assert!(a5_hit > 0);
    let (status, body) = call("GET", &format!("{base}/flush_cache"));
    assert_eq!(status, 200);
    assert!(body.starts_with("Cache flushed."), "{body}");
    assert_eq!(cached(&url, &a, "a6"), 0);
    let (status, body) = call("POST", &format!("{base}/flush_cache?timeout=soon"));
    assert_eq!(status, 422, "{body}");

    let (code, err) = sim.stop();
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&truth).unwrap();
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    let hits: Vec<(&str, u64)> = rows
        .iter()
        .filter(|r| r[4] == "cache_hit")
        .map(|r| (r[0], r[3].parse().unwrap()))
        .collect();
    assert_eq!(
        hits,
        vec![
            ("a1", 0),
            ("a2", a_hit),
            ("b1", 0),
            ("c1", 0),
            ("a3", a_after),
            ("a4", 0),
            ("a5", a5_hit),
            ("a6", 0)
        ]
    );
    let evicted: u64 = rows
        .iter()
        .filter(|r| r[4] == "cache_evict")
        .map(|r| r[3].parse::<u64>().unwrap())
        .sum();
    assert!(evicted > 0 && evicted.is_multiple_of(16), "{evicted}");
    let resets: Vec<u64> = rows
        .iter()
        .filter(|r| r[4] == "cache_reset")
        .map(|r| r[3].parse().unwrap())
        .collect();
    assert_eq!(resets.len(), 2, "{text}");
    assert!(resets.iter().all(|t| *t > 0 && *t <= 512), "{resets:?}");
}

#[test]
fn resets_refuse_as_the_engines_do() {
    // Without --dev-mode vLLM's route is not mounted.
    let sim = Sim::start_raw(&["--port", "0", "--profile", "slow", "--no-realtime"]);
    let base = sim.url(0);
    assert_eq!(
        call("POST", &format!("{base}/reset_prefix_cache")),
        (404, "{\"detail\":\"Not Found\"}".to_owned())
    );
    // While a request runs, SGLang's flush refuses (400), or waits for idle with a timeout.
    let long = busy(&base);
    let (status, body) = call("POST", &format!("{base}/flush_cache"));
    assert_eq!((status, body.as_str()), (400, "Flush cache failed.\n"));
    let (status, body) = call("POST", &format!("{base}/flush_cache?timeout=0.05"));
    assert_eq!(
        (status, body.as_str()),
        (400, "Timed out waiting for idle state.")
    );
    let (status, body) = call("POST", &format!("{base}/flush_cache?timeout=60"));
    assert_eq!(status, 200, "{body}");
    assert!(long.join().unwrap().len() > 3);
}

#[test]
fn vllm_reset_while_busy_answers_success_false() {
    let sim = Sim::start_raw(&[
        "--port",
        "0",
        "--profile",
        "slow",
        "--no-realtime",
        "--dev-mode",
    ]);
    let base = sim.url(0);
    let long = busy(&base);
    assert_eq!(
        call("POST", &format!("{base}/reset_prefix_cache")),
        (200, "{\"success\":false}".to_owned())
    );
    long.join().unwrap();
    assert_eq!(
        call("POST", &format!("{base}/reset_prefix_cache")),
        (200, "{\"success\":true}".to_owned())
    );
}

#[test]
fn caching_off_never_hits() {
    let sim = Sim::start(&["--prefix-cache-tokens", "0"]);
    let url = format!("{}/v1/chat/completions", sim.url(0));
    let a = prompt("alpha", 160);
    assert_eq!(cached(&url, &a, "x1"), 0);
    assert_eq!(cached(&url, &a, "x2"), 0);
}

#[test]
fn a_full_kv_pool_preempts_the_latest_request_which_still_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let truth = dir.path().join("truth.csv");
    // Four prompts of about 200 tokens fit the pool at admission (with no cache hits: each
    // starts differently); their replies of 60 tokens each do not.
    let sim = Sim::start(&[
        "--decode-tps",
        "200",
        "--kv-pool-tokens",
        "900",
        "--prefix-cache-tokens",
        "0",
        "--truth",
        truth.to_str().unwrap(),
    ]);
    let base = sim.url(0);
    let replies: Vec<_> = (0..4)
        .map(|i| {
            let url = format!("{base}/v1/chat/completions");
            std::thread::spawn(move || {
                let text = prompt(&format!("request {i} about 60 words"), 80);
                let c = parsed(
                    &stream(
                        &url,
                        &chat(&text, json!({"max_tokens": 60})),
                        Some(&format!("p{i}")),
                    )
                    .unwrap(),
                );
                usage_of(&c)
            })
        })
        .collect();
    let usages: Vec<_> = replies.into_iter().map(|h| h.join().unwrap()).collect();
    let prompt_tokens = usages[0]["prompt_tokens"].as_u64().unwrap();
    assert!((150..=225).contains(&prompt_tokens), "{prompt_tokens}");
    for u in &usages {
        assert_eq!(
            u["completion_tokens"], 60,
            "a preempted request still finishes: {u}"
        );
    }
    let metrics = get(&format!("{base}/metrics"));
    let preemptions = metric(&metrics, "vllm:num_preemptions_total");
    assert_eq!(
        metric(&metrics, "vllm:kv_cache_usage_perc"),
        0.0,
        "idle pool is empty"
    );

    let (code, err) = sim.stop();
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&truth).unwrap();
    let preempted: Vec<(String, u64)> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|r| r[4] == "preempt")
        .map(|r| (r[0].to_owned(), r[3].parse().unwrap()))
        .collect();
    assert!(
        !preempted.is_empty(),
        "4 x (prompt + 60) > 900 must preempt"
    );
    assert_eq!(preempted.len() as f64, preemptions, "metric = truth rows");
    for (id, held) in &preempted {
        assert!(
            *held >= prompt_tokens && *held < prompt_tokens + 60,
            "{id} held its prompt and part of its reply: {held}"
        );
    }
}
