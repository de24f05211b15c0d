//! HTTP side: listeners (one per replica), routing, and the endpoint handlers.
//!
//! Handlers read the whole request body (its end is the `request_read` time), parse it,
//! draw the request's faults, generate and pre-render the reply, and hand it to the timer
//! thread; the response returns at once with a body the timer thread feeds. Every response
//! echoes `x-request-id` (or carries a simulator-made one); every bad request gets an
//! OpenAI-style JSON error, never a crash.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde_json::json;
use tokio::net::TcpListener;

use super::api::{self, Api, ApiError};
use super::body::{Inflight, InflightGuard, SimBody, StreamState};
use super::config::Config;
use super::engine::{EngineHandle, Job, ReplicaShared};
use super::faults::FaultKind;
use super::render::{RenderCtx, render};
use super::reply::{ReplyInputs, generate};
use super::truth::{Record, TruthSink};
use crate::artifact::canary;
use crate::clock::monotonic_ns;

/// Largest request body accepted.
const MAX_BODY: usize = 64 << 20;

/// State every replica's handlers share.
pub struct ServerState {
    pub cfg: Config,
    pub engine: EngineHandle,
    pub truth: TruthSink,
    pub inflight: Inflight,
    pub next_key: AtomicU64,
    /// Where the operator is told what happens (failed accepts).
    pub notices: crate::notice::Notices,
    /// The DCGM exporter's text (`--dcgm`).
    pub dcgm: Option<super::dcgm::Exporter>,
}

/// One replica's handler context.
pub struct ReplicaCtx {
    pub server: Arc<ServerState>,
    pub rep: Arc<ReplicaShared>,
    /// Every request (for simulator-made request ids).
    pub requests: AtomicU64,
    /// Generation requests in arrival order (the fault draw's index).
    pub generations: AtomicU64,
}

/// Bind every replica's listener (port 0 = any free port).
pub async fn bind(cfg: &Config) -> anyhow::Result<Vec<TcpListener>> {
    let mut out = Vec::new();
    for i in 0..cfg.replicas {
        let port = if cfg.port == 0 {
            0
        } else {
            cfg.port + i as u16
        };
        let l = TcpListener::bind((cfg.host.as_str(), port))
            .await
            .map_err(|e| {
                anyhow::anyhow!("replica {i}: cannot listen on {}:{port}: {e}", cfg.host)
            })?;
        out.push(l);
    }
    Ok(out)
}

/// Accept connections for one replica forever.
pub async fn serve_replica(listener: TcpListener, ctx: Arc<ReplicaCtx>) {
    loop {
        let (stream, _peer): (_, SocketAddr) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                ctx.server.notices.say(&format!(
                    "anvil-sim: replica {}: accept failed: {e}",
                    ctx.rep.index
                ));
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let ctx = ctx.clone();
        tokio::spawn(async move {
            // `--close-after-stream`: the end of a streamed body asks the connection to close
            // once that response is written (the head already went out without
            // `Connection: close`, as llama.cpp's server does).
            let close = ctx
                .server
                .cfg
                .close_after_stream
                .then(|| Arc::new(tokio::sync::Notify::new()));
            let svc = {
                let close = close.clone();
                hyper::service::service_fn(move |req| handle(ctx.clone(), req, close.clone()))
            };
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc);
            let mut conn = std::pin::pin!(conn);
            match close {
                None => {
                    let _ = conn.await;
                }
                Some(close) => {
                    tokio::select! {
                        _ = conn.as_mut() => {}
                        () = close.notified() => {
                            conn.as_mut().graceful_shutdown();
                            let _ = conn.await;
                        }
                    }
                }
            }
        });
    }
}

/// What the reset endpoints touch of a replica.
fn reset_target(ctx: &ReplicaCtx) -> super::reset::Target<'_> {
    super::reset::Target {
        rep: &ctx.rep,
        truth: &ctx.server.truth,
        dev_mode: ctx.server.cfg.dev_mode,
    }
}

fn request_id_header(req: &Request<Incoming>) -> Option<String> {
    req.headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

fn with_id(mut r: Response<SimBody>, id: &str) -> Response<SimBody> {
    if let Ok(v) = HeaderValue::from_str(id) {
        r.headers_mut().insert("x-request-id", v);
    }
    r
}

fn json_response(status: u16, body: String) -> Response<SimBody> {
    let mut r = Response::new(SimBody::full(body));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

fn error_response(e: &ApiError) -> Response<SimBody> {
    json_response(e.status, e.body())
}

async fn read_body(req: Request<Incoming>) -> Result<Bytes, ApiError> {
    Limited::new(req.into_body(), MAX_BODY)
        .collect()
        .await
        .map(|c| c.to_bytes())
        .map_err(|e| ApiError::bad(format!("could not read the request body: {e}"), None))
}

/// Route one request.
pub async fn handle(
    ctx: Arc<ReplicaCtx>,
    req: Request<Incoming>,
    close_after_stream: Option<Arc<tokio::sync::Notify>>,
) -> Result<Response<SimBody>, Infallible> {
    let n = ctx.requests.fetch_add(1, Ordering::Relaxed);
    let id = request_id_header(&req).unwrap_or_else(|| format!("sim-{}-{n}", ctx.rep.index));
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    let resp = match (method, path.as_str()) {
        (Method::POST, "/v1/chat/completions") => {
            generate_handler(&ctx, Api::Chat, req, &id, close_after_stream).await
        }
        (Method::POST, "/v1/completions") => {
            generate_handler(&ctx, Api::Completions, req, &id, close_after_stream).await
        }
        (Method::POST, "/v1/responses") => {
            generate_handler(&ctx, Api::Responses, req, &id, close_after_stream).await
        }
        (Method::POST, "/tokenize") => tokenize_handler(&ctx, req).await,
        (Method::POST, "/reset_prefix_cache") => super::reset::vllm(&reset_target(&ctx), &id),
        (Method::GET | Method::POST, "/flush_cache") => {
            super::reset::sglang(&reset_target(&ctx), &id, req.uri().query()).await
        }
        (Method::GET, "/v1/models") => models(&ctx),
        (Method::GET, "/metrics") => {
            let mut r = Response::new(SimBody::full(ctx.rep.metrics().encode()));
            r.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static(
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                ),
            );
            r
        }
        (Method::GET, "/health") => json_response(200, "{}".into()),
        (Method::GET, "/dcgm/metrics") => match &ctx.server.dcgm {
            Some(exporter) => {
                let mut r = Response::new(SimBody::full(exporter.text()));
                r.headers_mut().insert(
                    CONTENT_TYPE,
                    HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
                );
                r
            }
            None => error_response(&ApiError::new(
                404,
                "not_found_error",
                Some("not_found"),
                "no GPUs simulated: start anvil-sim with --dcgm for a DCGM exporter here"
                    .to_owned(),
            )),
        },
        // As vLLM answers it.
        (Method::GET, "/version") => json_response(
            200,
            format!("{{\"version\":\"{}\"}}", env!("CARGO_PKG_VERSION")),
        ),
        (_, "/v1/chat/completions" | "/v1/completions" | "/v1/responses" | "/tokenize") => {
            error_response(&ApiError::new(
                405,
                "invalid_request_error",
                None,
                format!("method not allowed on {path}"),
            ))
        }
        (_, "/v1/models" | "/metrics" | "/health" | "/version" | "/flush_cache") => {
            error_response(&ApiError::new(
                405,
                "invalid_request_error",
                None,
                format!("method not allowed on {path}"),
            ))
        }
        _ => error_response(&ApiError::new(
            404,
            "not_found_error",
            Some("not_found"),
            format!("unknown path {path}"),
        )),
    };
    Ok(with_id(resp, &id))
}

fn models(ctx: &ReplicaCtx) -> Response<SimBody> {
    let cfg = &ctx.server.cfg;
    let created = ctx.rep.metrics().start_time_seconds() as u64;
    json_response(
        200,
        json!({"object": "list", "data": [{
            "id": cfg.model, "object": "model", "created": created, "owned_by": "anvil-sim",
            "root": cfg.model, "max_model_len": cfg.max_model_len,
        }]})
        .to_string(),
    )
}

fn check_model(cfg: &Config, model: Option<&str>) -> Result<(), ApiError> {
    match model {
        Some(m) if cfg.strict_model && m != cfg.model => Err(ApiError {
            status: 400,
            message: format!(
                "The model `{m}` does not exist; this server serves `{}`",
                cfg.model
            ),
            kind: "invalid_request_error",
            param: Some("model"),
            code: Some("model_not_found"),
        }),
        _ => Ok(()),
    }
}

async fn tokenize_handler(ctx: &ReplicaCtx, req: Request<Incoming>) -> Response<SimBody> {
    let result = async {
        let body = read_body(req).await?;
        let (model, ids) = api::parse_tokenize(&body)?;
        check_model(&ctx.server.cfg, model.as_deref())?;
        Ok::<_, ApiError>(json!({
            "count": ids.len(), "max_model_len": ctx.server.cfg.max_model_len, "tokens": ids,
        }))
    }
    .await;
    match result {
        Ok(v) => json_response(200, v.to_string()),
        Err(e) => error_response(&e),
    }
}

/// FNV-1a over the seed and the request body: the reply's seed.
fn body_seed(seed: u64, body: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for b in body {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Another request's canary: one in flight, else a fabricated one; never `own`.
fn foreign_canary(inflight: &Inflight, own: Option<&str>, rng: &mut StdRng) -> String {
    let map = inflight.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = map.values().find(|c| Some(c.as_str()) != own) {
        return c.clone();
    }
    drop(map);
    loop {
        let c = format!(
            "{}{:012x}",
            canary::PREFIX,
            rng.random::<u64>() & 0xffff_ffff_ffff
        );
        if Some(c.as_str()) != own {
            return c;
        }
    }
}

async fn generate_handler(
    ctx: &Arc<ReplicaCtx>,
    api: Api,
    req: Request<Incoming>,
    id: &str,
    close_after_stream: Option<Arc<tokio::sync::Notify>>,
) -> Response<SimBody> {
    let n = ctx.generations.fetch_add(1, Ordering::Relaxed);
    let body = match read_body(req).await {
        Ok(b) => b,
        Err(e) => return error_response(&e),
    };
    let t_read = monotonic_ns();
    let request_id: Arc<str> = Arc::from(id);
    ctx.server.truth.send(Record::mark(
        request_id.clone(),
        ctx.rep.index,
        "request_read",
        0,
        t_read,
    ));
    // Parsing, generation and rendering run off the HTTP workers, below their priority,
    // so they never delay another stream's write.
    let ctx = ctx.clone();
    tokio::task::spawn_blocking(move || {
        super::realtime::lower_fifo(super::realtime::PLANNER_PRIORITY);
        plan(&ctx, api, &body, request_id, close_after_stream, n)
    })
    .await
    .unwrap_or_else(|e| {
        error_response(&ApiError::new(
            500,
            "internal_server_error",
            None,
            format!("planning the reply failed: {e}"),
        ))
    })
}

/// Parse, draw faults, generate and pre-render one reply, and hand it to the engine.
fn plan(
    ctx: &ReplicaCtx,
    api: Api,
    body: &[u8],
    request_id: Arc<str>,
    close_after_stream: Option<Arc<tokio::sync::Notify>>,
    n: u64,
) -> Response<SimBody> {
    let st = &ctx.server;
    let cfg = &st.cfg;
    let id: &str = &request_id;
    let g = match api::parse_gen(api, body) {
        Ok(g) => g,
        Err(e) => return error_response(&e),
    };
    if let Err(e) = check_model(cfg, g.model.as_deref()) {
        return error_response(&e);
    }
    let prompt_tokens = g.prompt_ids.len() as u32;
    if prompt_tokens >= cfg.max_model_len {
        return error_response(&ApiError::bad(
            format!(
                "This model's maximum context length is {} tokens; the prompt has {prompt_tokens}",
                cfg.max_model_len
            ),
            Some("messages"),
        ));
    }
    let room = cfg.max_model_len - prompt_tokens;
    if let Some(m) = g.max_tokens.filter(|m| *m > room) {
        return error_response(&ApiError::bad(
            format!(
                "max_tokens {m} + prompt {prompt_tokens} tokens exceeds the context length {}",
                cfg.max_model_len
            ),
            Some("max_tokens"),
        ));
    }
    let faults = cfg.faults.draw(cfg.seed, ctx.rep.index, n);
    if faults.has(FaultKind::Http500) {
        return error_response(&ApiError::new(
            500,
            "internal_server_error",
            Some("injected_fault"),
            "injected fault: internal server error",
        ));
    }
    if faults.has(FaultKind::Http429) {
        let mut r = error_response(&ApiError::new(
            429,
            "rate_limit_exceeded",
            Some("injected_fault"),
            "injected fault: too many requests",
        ));
        r.headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from_static("1"));
        return r;
    }

    let mut rng = StdRng::seed_from_u64(body_seed(cfg.seed, body));
    // The last marker asked for: a conversation's earlier turns hold their own markers, and
    // the newest message is the one to answer.
    let own = canary::find_all(&g.prompt_text)
        .last()
        .map(|c| (*c).to_string());
    let mut fault_rng = StdRng::seed_from_u64(body_seed(cfg.seed ^ n, id.as_bytes()));
    let leaked = ctx.rep.seen_canary(
        own.as_deref(),
        &g.prompt_text,
        faults.has(FaultKind::CacheLeak),
    );
    let foreign = faults
        .has(FaultKind::Contaminate)
        .then(|| foreign_canary(&st.inflight, own.as_deref(), &mut fault_rng))
        .or(leaked);
    let tool_foreign = faults
        .has(FaultKind::ToolContaminate)
        .then(|| foreign_canary(&st.inflight, own.as_deref(), &mut fault_rng));
    let guard = own.as_ref().map(|c| {
        let key = st.next_key.fetch_add(1, Ordering::Relaxed);
        st.inflight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, c.clone());
        InflightGuard {
            map: st.inflight.clone(),
            key,
        }
    });

    let reply = generate(
        &ReplyInputs {
            canary: own.as_deref(),
            foreign_canary: foreign.as_deref(),
            tool_foreign_canary: tool_foreign.as_deref(),
            requested_words: api::requested_words(&g.prompt_text),
            ignore_eos: g.ignore_eos,
            min_tokens: g.min_tokens,
            code_function: api::requested_function(&g.prompt_text),
            cap: g.max_tokens.unwrap_or(room).min(room),
            mean_words: cfg.mean_words,
            thinking: g.thinking && api != Api::Completions,
            json_schema: g.json_schema.as_ref(),
            tools: &g.tools,
            forced_tool: g.forced_tool.as_deref(),
            bad_json: faults.has(FaultKind::BadJson),
            wrong_tool: faults.has(FaultKind::WrongTool),
        },
        &mut rng,
    );
    let lookup = ctx.rep.prefix_lookup(&g.prompt_ids);
    let cached = lookup.cached;
    let t_lookup = monotonic_ns();
    let mark = |kind, tokens| {
        st.truth.send(Record::mark(
            request_id.clone(),
            ctx.rep.index,
            kind,
            tokens,
            t_lookup,
        ))
    };
    mark("cache_hit", cached);
    if lookup.evicted > 0 {
        mark(
            "cache_evict",
            u32::try_from(lookup.evicted).unwrap_or(u32::MAX),
        );
    }
    {
        let m = ctx.rep.metrics();
        m.prompt_tokens.inc_by(prompt_tokens as u64);
        m.prefix_cache_queries.inc_by(prompt_tokens as u64);
        m.prefix_cache_hits.inc_by(cached as u64);
    }
    let resp_id = format!(
        "{:016x}",
        body_seed(cfg.seed ^ ((ctx.rep.index as u64) << 40), &n.to_le_bytes())
    );
    let created = time::OffsetDateTime::now_utc().unix_timestamp().max(0) as u64;
    let events = render(
        &RenderCtx {
            api,
            stream: g.stream,
            include_usage: g.include_usage,
            id: &resp_id,
            model: g.model.as_deref().unwrap_or(&cfg.model),
            created,
            prompt_tokens,
            cached_tokens: cached,
            faults,
            stall_ns: cfg.stall_ms as i64 * 1_000_000,
            spec_depth: cfg.timing.spec_depth,
            spec_accept: cfg.timing.spec_accept,
        },
        &reply,
        &mut rng,
    );
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    st.engine.submit(Job {
        request_id: request_id.clone(),
        replica: ctx.rep.index,
        t_arrival_ns: monotonic_ns(),
        prefill_tokens: prompt_tokens - cached,
        prompt_tokens,
        events,
        tx,
        jitter_seed: rng.random(),
    });
    let mut r = Response::new(SimBody::Stream(Box::new(StreamState {
        rx,
        request_id,
        replica: ctx.rep.index as u16,
        truth: st.truth.clone(),
        _inflight: guard,
        close_after: close_after_stream.filter(|_| g.stream),
    })));
    let ct = if g.stream {
        "text/event-stream"
    } else {
        "application/json"
    };
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(ct));
    r.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}
