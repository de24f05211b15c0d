//! The engines' prefix-cache reset endpoints, answered as each engine answers them, so a
//! campaign's cache reset can be tested against the truth.
//!
//! - vLLM: `POST /reset_prefix_cache`, mounted only in development mode
//!   (`VLLM_SERVER_DEV_MODE=1`; here `--dev-mode`), else 404 `{"detail":"Not Found"}`. It
//!   answers 200 `{"success": true}`, or 200 `{"success": false}` while any request holds
//!   blocks (running or waiting): vLLM's block pool refuses to reset then, and the caller
//!   retries.
//! - SGLang: `GET` or `POST /flush_cache[?timeout=S]`: 200 with a plain-text "Cache
//!   flushed." when the replica is idle; 400 "Flush cache failed." while requests are
//!   running or waiting; with `timeout`, it waits up to S seconds for the replica to go idle
//!   and then answers 400 "Timed out waiting for idle state." if it did not.
//!
//! A reset empties the replica's whole prefix cache and writes a `cache_reset` truth row
//! with the tokens dropped. llama.cpp's per-slot erase (`POST /slots/{id}?action=erase`) is
//! not imitated: the real `llama-server` in the test suite is its ground truth.

use std::sync::Arc;
use std::time::Duration;

use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Response, StatusCode};

use super::body::SimBody;
use super::engine::ReplicaShared;
use super::truth::{Record, TruthSink};
use crate::clock::monotonic_ns;

/// What a reset touches: the replica, where its truth rows go, and whether vLLM's
/// development endpoints are mounted.
pub struct Target<'a> {
    pub rep: &'a ReplicaShared,
    pub truth: &'a TruthSink,
    pub dev_mode: bool,
}

/// Whether no request is running or waiting on the replica.
fn idle(ctx: &Target<'_>) -> bool {
    let m = ctx.rep.metrics();
    m.running.get() == 0 && m.waiting.get() == 0
}

/// Empty the replica's cache and write the truth row.
fn reset(ctx: &Target<'_>, id: &str) {
    let dropped = ctx.rep.reset_prefix_cache();
    ctx.truth.send(Record::mark(
        Arc::from(id),
        ctx.rep.index,
        "cache_reset",
        u32::try_from(dropped).unwrap_or(u32::MAX),
        monotonic_ns(),
    ));
}

fn response(status: StatusCode, content_type: &'static str, body: String) -> Response<SimBody> {
    let mut r = Response::new(SimBody::full(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// vLLM's `POST /reset_prefix_cache`.
pub fn vllm(ctx: &Target<'_>, id: &str) -> Response<SimBody> {
    if !ctx.dev_mode {
        return response(
            StatusCode::NOT_FOUND,
            "application/json",
            "{\"detail\":\"Not Found\"}".to_owned(),
        );
    }
    let success = idle(ctx);
    if success {
        reset(ctx, id);
    }
    response(
        StatusCode::OK,
        "application/json",
        format!("{{\"success\":{success}}}"),
    )
}

/// The `timeout` query parameter of SGLang's `/flush_cache`, in seconds (0 when absent).
pub fn flush_timeout(query: Option<&str>) -> Result<f64, String> {
    let Some(v) = query
        .unwrap_or("")
        .split('&')
        .find_map(|kv| kv.strip_prefix("timeout="))
    else {
        return Ok(0.0);
    };
    match v.parse::<f64>() {
        Ok(t) if t.is_finite() && t >= 0.0 => Ok(t),
        _ => Err(format!("timeout `{v}` is not a number of seconds >= 0")),
    }
}

/// SGLang's `/flush_cache`.
pub async fn sglang(ctx: &Target<'_>, id: &str, query: Option<&str>) -> Response<SimBody> {
    let timeout = match flush_timeout(query) {
        Ok(t) => t,
        Err(e) => {
            return response(
                StatusCode::UNPROCESSABLE_ENTITY,
                "application/json",
                serde_json::json!({"detail": e}).to_string(),
            );
        }
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(timeout.min(86_400.0));
    while !idle(ctx) {
        if timeout == 0.0 {
            return response(
                StatusCode::BAD_REQUEST,
                "text/plain; charset=utf-8",
                "Flush cache failed.\n".to_owned(),
            );
        }
        if tokio::time::Instant::now() >= deadline {
            return response(
                StatusCode::BAD_REQUEST,
                "text/plain; charset=utf-8",
                "Timed out waiting for idle state.".to_owned(),
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    reset(ctx, id);
    response(
        StatusCode::OK,
        "text/plain; charset=utf-8",
        "Cache flushed.\nPlease check backend logs for more details. (When there are running \
         or waiting requests, the operation will not be performed.)\n"
            .to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flush_timeout_reads_the_query() {
        assert_eq!(flush_timeout(None), Ok(0.0));
        assert_eq!(flush_timeout(Some("a=1&timeout=2.5")), Ok(2.5));
        assert!(flush_timeout(Some("timeout=-1")).is_err());
        assert!(flush_timeout(Some("timeout=soon")).is_err());
    }
}
