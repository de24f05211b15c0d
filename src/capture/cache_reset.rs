//! `--reset-cache`: each replica's prefix cache emptied before the run's `before` scrape, and
//! the reset verified, off the hot path (one-shot exchanges on fresh connections).
//!
//! 1. A probe prompt of the run's own (about 300 words) is sent twice, non-streamed with
//!    `max_tokens` 1: the second send finds it cached (`usage.prompt_tokens_details.
//!    cached_tokens`, or llama.cpp's `timings.cache_n`) when the server caches and says so.
//! 2. The reset, by the first endpoint the server answers, in an order the server's
//!    `owned_by` suggests:
//!    - llama.cpp: `GET /slots`, then `POST /slots/{id}?action=erase` for every slot (answered
//!      only by a server started with `--slot-save-path`: HTTP 501 otherwise);
//!    - vLLM: `POST /reset_prefix_cache` (mounted only with `VLLM_SERVER_DEV_MODE=1`: a 404
//!      is "not available"); `{"success": false}` means requests hold blocks: busy;
//!    - SGLang: `POST /flush_cache`; HTTP 400 while requests are running or waiting: busy.
//!
//!    A busy server is asked again every [`RETRY`] until the timeout; the run then fails
//!    with why, its measured requests never sent.
//! 3. The probe once more: cached before and (almost) nothing after is `verified`.
//!
//! Every answer goes to run.json `cache_hygiene.resets` ([`CacheReset`]).

use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::header::HeaderValue;
use serde_json::Value;

use super::endpoint::Endpoint;
use super::http;
use crate::artifact::CacheReset;
use crate::workload::prompt::PromptContent;
use crate::workload::request::{self, RequestOptions};

/// How often a busy server is asked again.
pub const RETRY: Duration = Duration::from_millis(200);
/// Each exchange's own deadline.
const EXCHANGE: Duration = Duration::from_secs(30);
/// Fewer cached tokens than one block (vLLM's and the simulator's 16) is "nothing cached".
const BLOCK: u64 = 16;

/// What one replica's reset needs.
pub struct ResetInputs<'a> {
    pub endpoint: &'a Endpoint,
    pub auth: Option<&'a HeaderValue>,
    pub opts: &'a RequestOptions,
    /// The probe prompt (the run's own text).
    pub probe: &'a PromptContent,
    /// The server's `/v1/models` `owned_by`, which orders the endpoints tried.
    pub owner: Option<&'a str>,
    /// How long a busy server is retried.
    pub timeout: Duration,
}

/// The reset endpoints, as tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    LlamaSlots,
    Vllm,
    Sglang,
}

/// What one reset attempt found.
enum Attempt {
    Done(String),
    Busy(String),
    /// This endpoint is not there (404, or not the engine's).
    Absent(String),
    Failed(String),
}

/// What resetting every replica of a run needs.
pub struct Replicas<'a> {
    pub cfg: &'a super::config::RunConfig,
    pub auth: Option<&'a HeaderValue>,
    pub opts: &'a RequestOptions,
    /// The server's `/v1/models` `owned_by`.
    pub owner: Option<&'a str>,
    /// The run's salt (the probe's text is the run's own).
    pub salt: &'a str,
    pub stop: &'a super::hotpath::Cancel,
    pub notices: &'a crate::notice::Notices,
}

/// Reset every replica's cache in turn: what each reset did, and why the run must fail (a
/// replica that stayed busy or answered an error), if it must. A stop leaves the rest
/// untried.
pub async fn reset_replicas(r: &Replicas<'_>) -> (Vec<CacheReset>, Option<String>) {
    let cfg = r.cfg;
    let probe = PromptContent::single(
        cfg.api.prompt_form(),
        "user",
        format!(
            "Cache reset probe {}. {}\n\nReply with one word.",
            r.salt,
            crate::workload::filler::filler(cfg.manifest.selection.random_prefix_seed, 300)
        ),
    );
    let timeout = Duration::from_secs_f64(
        cfg.cache
            .reset_timeout_s
            .unwrap_or(super::request::DEFAULT_RESET_TIMEOUT_S),
    );
    let (mut resets, mut failure) = (Vec::new(), None);
    for ep in &cfg.endpoints {
        let inputs = ResetInputs {
            endpoint: ep,
            auth: r.auth,
            opts: r.opts,
            probe: &probe,
            owner: r.owner,
            timeout,
        };
        let done = tokio::select! {
            biased;
            () = r.stop.cancelled() => break,
            done = reset(&inputs, ep.replica) => done,
        };
        let said = done.detail.clone().unwrap_or_default();
        match done.outcome.as_str() {
            "reset" if done.verified == Some(false) => r.notices.say(&format!(
                "anvil-capture: warning: `{}`: the prefix cache was reset, but the probe still \
                 found {} of its tokens cached",
                ep.url,
                done.probe_cached_after.unwrap_or(0)
            )),
            "reset" => {}
            "not_available" => r.notices.say(&format!(
                "anvil-capture: warning: `{}`: no prefix-cache reset endpoint answered ({said}); \
                 the run goes on with the cache as it is (run.json cache_hygiene says so)",
                ep.url
            )),
            _ => {
                failure.get_or_insert(format!(
                    "--reset-cache: the prefix cache of replica {} (`{}`) could not be reset: \
                     {said}",
                    ep.replica, ep.url
                ));
            }
        }
        resets.push(done);
    }
    (resets, failure)
}

/// Reset one replica's prefix cache and verify it.
pub async fn reset(i: &ResetInputs<'_>, replica: u32) -> CacheReset {
    let mut out = CacheReset {
        replica,
        outcome: "failed".to_owned(),
        method: None,
        attempts: 0,
        waited_ms: 0.0,
        probe_cached_before: None,
        probe_cached_after: None,
        verified: None,
        detail: None,
    };
    let body = match request::body_json(i.opts, 0, i.probe, false, Some(1), false) {
        Ok(b) => Bytes::from(b),
        Err(e) => {
            out.detail = Some(format!("building the probe: {e}"));
            return out;
        }
    };
    // Sent twice: the second finds it cached.
    let _ = probe(i, &body).await;
    let before = probe(i, &body).await;
    match &before {
        Ok(c) => out.probe_cached_before = *c,
        Err(e) => {
            out.detail = Some(format!("the probe before the reset: {e}"));
            return out;
        }
    }
    let owner = i.owner.unwrap_or("").to_ascii_lowercase();
    let order: [Method; 3] = if owner.contains("llama") {
        [Method::LlamaSlots, Method::Vllm, Method::Sglang]
    } else if owner.contains("sglang") {
        [Method::Sglang, Method::Vllm, Method::LlamaSlots]
    } else {
        [Method::Vllm, Method::Sglang, Method::LlamaSlots]
    };
    let start = Instant::now();
    let mut absent = Vec::new();
    let mut chosen = None;
    for m in order {
        out.attempts += 1;
        match attempt(i, m).await {
            Attempt::Absent(why) => absent.push(why),
            a => {
                chosen = Some((m, a));
                break;
            }
        }
    }
    let Some((method, mut last)) = chosen else {
        out.outcome = "not_available".to_owned();
        out.waited_ms = start.elapsed().as_secs_f64() * 1e3;
        out.detail = Some(absent.join("; "));
        return out;
    };
    out.method = Some(method_name(method).to_owned());
    while let Attempt::Busy(_) = last {
        if start.elapsed() + RETRY > i.timeout {
            break;
        }
        tokio::time::sleep(RETRY).await;
        out.attempts += 1;
        last = attempt(i, method).await;
    }
    out.waited_ms = start.elapsed().as_secs_f64() * 1e3;
    match last {
        Attempt::Done(said) => {
            out.outcome = "reset".to_owned();
            out.detail = Some(said).filter(|s| !s.is_empty());
        }
        Attempt::Busy(said) => {
            out.detail = Some(format!(
                "the server was still busy after {:.1} s ({} attempts): {said}",
                i.timeout.as_secs_f64(),
                out.attempts
            ));
            return out;
        }
        Attempt::Absent(why) | Attempt::Failed(why) => {
            out.detail = Some(why);
            return out;
        }
    }
    match probe(i, &body).await {
        Ok(after) => {
            out.probe_cached_after = after;
            out.verified = match (out.probe_cached_before, after) {
                (Some(b), Some(a)) if b >= BLOCK => Some(a < BLOCK),
                (Some(_), Some(_)) => {
                    out.detail = Some(
                        "the probe was not cached before the reset (prefix caching off?): \
                         nothing to verify"
                            .to_owned(),
                    );
                    None
                }
                _ => None,
            };
        }
        Err(e) => out.detail = Some(format!("the probe after the reset: {e}")),
    }
    out
}

fn method_name(m: Method) -> &'static str {
    match m {
        Method::LlamaSlots => "POST /slots/{id}?action=erase",
        Method::Vllm => "POST /reset_prefix_cache",
        Method::Sglang => "POST /flush_cache",
    }
}

/// The probe's cached prompt tokens, as the server reports them (`None`: it reports none).
async fn probe(i: &ResetInputs<'_>, body: &Bytes) -> Result<Option<u64>, String> {
    let (status, answer) = http::post_json(
        i.endpoint,
        i.opts.api.path(),
        body.clone(),
        i.auth,
        EXCHANGE,
    )
    .await
    .map_err(|e| e.to_string())?;
    if status != 200 {
        return Err(format!("HTTP {status}: {}", http::body_summary(&answer)));
    }
    let v: Value = serde_json::from_slice(&answer).map_err(|e| format!("not JSON: {e}"))?;
    Ok(cached_tokens(&v))
}

/// Cached prompt tokens in a non-streamed answer: the API's usage, else llama.cpp's timings.
pub fn cached_tokens(v: &Value) -> Option<u64> {
    v.pointer("/usage/prompt_tokens_details/cached_tokens")
        .or_else(|| v.pointer("/usage/input_tokens_details/cached_tokens"))
        .or_else(|| v.pointer("/timings/cache_n"))
        .and_then(Value::as_u64)
}

/// One try of `m`.
async fn attempt(i: &ResetInputs<'_>, m: Method) -> Attempt {
    let post = |path: String| async move {
        http::post_json(i.endpoint, &path, Bytes::new(), i.auth, EXCHANGE).await
    };
    match m {
        Method::Vllm => match post("/reset_prefix_cache".to_owned()).await {
            Ok((200, body)) => {
                let v: Option<Value> = serde_json::from_slice(&body).ok();
                if v.as_ref().and_then(|v| v.get("success")) == Some(&Value::Bool(false)) {
                    Attempt::Busy("{\"success\": false}: requests still hold blocks".to_owned())
                } else {
                    Attempt::Done(http::body_summary(&body))
                }
            }
            Ok((404, _)) => Attempt::Absent(
                "POST /reset_prefix_cache: 404 (vLLM mounts it only with \
                 VLLM_SERVER_DEV_MODE=1)"
                    .to_owned(),
            ),
            Ok((s, body)) => Attempt::Failed(format!(
                "POST /reset_prefix_cache: HTTP {s}: {}",
                http::body_summary(&body)
            )),
            Err(e) => Attempt::Failed(e.to_string()),
        },
        Method::Sglang => match post("/flush_cache".to_owned()).await {
            Ok((200, body)) => Attempt::Done(http::body_summary(&body)),
            Ok((400, body)) => Attempt::Busy(format!(
                "POST /flush_cache: HTTP 400: {}",
                http::body_summary(&body)
            )),
            Ok((s @ (404 | 405), _)) => Attempt::Absent(format!("POST /flush_cache: {s}")),
            Ok((s, body)) => Attempt::Failed(format!(
                "POST /flush_cache: HTTP {s}: {}",
                http::body_summary(&body)
            )),
            Err(e) => Attempt::Failed(e.to_string()),
        },
        Method::LlamaSlots => {
            let slots = match http::get(i.endpoint, "/slots", i.auth, EXCHANGE).await {
                Ok((200, body)) => serde_json::from_slice::<Value>(&body)
                    .ok()
                    .and_then(|v| {
                        v.as_array().map(|a| {
                            a.iter()
                                .filter_map(|s| s.get("id").and_then(Value::as_u64))
                                .collect::<Vec<_>>()
                        })
                    })
                    .filter(|ids| !ids.is_empty()),
                Ok(_) | Err(_) => None,
            };
            let Some(slots) = slots else {
                return Attempt::Absent("GET /slots: no slot list".to_owned());
            };
            for id in &slots {
                match post(format!("/slots/{id}?action=erase")).await {
                    Ok((200, _)) => {}
                    // llama-server answers slot actions, erase included, only when started
                    // with `--slot-save-path` (501 otherwise).
                    Ok((s @ (404 | 501), body)) => {
                        return Attempt::Absent(format!(
                            "POST /slots/{id}?action=erase: HTTP {s}: {}",
                            http::body_summary(&body)
                        ));
                    }
                    Ok((s, body)) => {
                        let said = format!(
                            "POST /slots/{id}?action=erase: HTTP {s}: {}",
                            http::body_summary(&body)
                        );
                        // A slot still processing refuses; anything else is a failure.
                        return if said.contains("busy") || said.contains("processing") {
                            Attempt::Busy(said)
                        } else {
                            Attempt::Failed(said)
                        };
                    }
                    Err(e) => return Attempt::Failed(e.to_string()),
                }
            }
            Attempt::Done(format!("{} slots erased", slots.len()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_tokens_are_read_from_usage_or_llama_cpp_timings() {
        let usage = serde_json::json!({"usage": {"prompt_tokens": 40,
            "prompt_tokens_details": {"cached_tokens": 32}}});
        assert_eq!(cached_tokens(&usage), Some(32));
        let llama = serde_json::json!({"usage": {"prompt_tokens": 40},
            "timings": {"cache_n": 39, "prompt_n": 1}});
        assert_eq!(cached_tokens(&llama), Some(39));
        assert_eq!(cached_tokens(&serde_json::json!({"usage": {}})), None);
    }
}
