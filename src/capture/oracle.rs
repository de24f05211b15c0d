//! Token-count oracles for prompt calibration: what the server says a prompt costs.
//!
//! - [`TokenizeOracle`]: the server's own tokenizer endpoints, in one of the
//!   [`TokenizeDialect`]s: vLLM's `POST /tokenize` with `{"model","messages"}` (chat, so the
//!   chat template is applied) or `{"model","prompt"}`, answering `{"count": N}`; llama.cpp's
//!   `POST /apply-template` then `POST /tokenize {"content"}`, answering `{"tokens": [...]}`.
//!   Chat and Responses prompts are counted through the chat template (servers turn a
//!   Responses `input` into a user message), completions prompts as raw text.
//! - [`ProbeOracle`]: the check of the tokenizer's count, and the count itself for servers
//!   without a usable tokenizer endpoint: a non-streaming request of the cell's own
//!   API with a one-token ceiling, reading `usage.prompt_tokens` (`usage.input_tokens` for the
//!   Responses API). A probe puts the prompt into the server's prefix cache, so calibrate a
//!   `unique` cell with a different salt than the run's (`PromptBuilder::with_salt`).
//!
//! Both run before the measured run, on their own short-lived connection; neither is on the
//! hot path.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1;
use hyper::header;
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Map, Value, json};
use tokio::net::TcpStream;

use super::endpoint::Endpoint;
use super::http::body_summary;
use crate::workload::prompt::{ChatMessage, PromptContent};
use crate::workload::request::{self, Api, ApiKey, RequestOptions};

/// Largest oracle response read (a `/tokenize` answer lists every token id).
const MAX_RESPONSE_BYTES: usize = 64 << 20;

/// Why a token count could not be had.
#[derive(Debug, thiserror::Error)]
pub enum OracleError {
    #[error(transparent)]
    Endpoint(#[from] super::endpoint::EndpointError),
    #[error("{url}: {detail}")]
    Http { url: String, detail: String },
    #[error("{url}: timed out after {after_ms} ms")]
    Timeout { url: String, after_ms: u128 },
    /// `body` is [`body_summary`]'s one line.
    #[error("{url}: HTTP {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
    #[error("{url}: unexpected answer ({detail}): {body}")]
    Answer {
        url: String,
        detail: String,
        body: String,
    },
    #[error("preparing the probe request: {0}")]
    Request(#[from] request::RequestError),
}

/// A client connection's sending half.
type Sender = http1::SendRequest<Full<Bytes>>;

/// A client connection's driver: the future that does its reads and writes.
type Driver = Pin<Box<http1::Connection<TokioIo<TcpStream>, Full<Bytes>>>>;

/// One connection kept across a run of tokenizer calls (calibration makes one per request):
/// a fresh TCP connection, handshake and connection task per call cost the client more than
/// the call itself. Clones share it; calls take it out and put it back, one at a time.
///
/// The connection's driver is kept with it and polled by each call ([`during`]), on the
/// caller's thread, rather than spawned: the recorder calibrates on its main thread while its
/// runtime's worker runs spawned tasks, so a spawned driver made every call hand off between
/// the two threads several times (about 4,700 context switches for 768 calls, each an
/// eventfd write or a futex wake). Between calls nothing polls it; a server that closed it
/// meanwhile is seen by the next call, which then goes on a fresh connection.
#[derive(Default, Clone)]
pub struct KeptConnection(Arc<Mutex<Option<(Sender, Driver)>>>);

impl std::fmt::Debug for KeptConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.0.lock().map(|k| k.is_some()).unwrap_or(false);
        f.debug_tuple("KeptConnection").field(&kept).finish()
    }
}

impl KeptConnection {
    fn take(&self) -> Option<(Sender, Driver)> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .filter(|(s, _)| !s.is_closed())
    }

    fn put(&self, sender: Sender, driver: Driver) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some((sender, driver));
    }
}

/// Run `call` while `driver` does its connection's I/O, both polled by the caller's task;
/// the driver comes back unless the connection ended meanwhile. A call whose connection
/// ended still completes: hyper ends its response (or its error) with the connection.
async fn during<T>(driver: Driver, call: impl Future<Output = T>) -> (T, Option<Driver>) {
    let mut driver = Some(driver);
    let mut call = std::pin::pin!(call);
    let out = std::future::poll_fn(|cx| {
        if let Some(d) = driver.as_mut()
            && d.as_mut().poll(cx).is_ready()
        {
            driver = None;
        }
        call.as_mut().poll(cx)
    })
    .await;
    (out, driver)
}

/// POST a JSON body and read the whole answer. With `kept`, the call goes on the kept
/// connection when there is a live one, and the connection is kept for the next call; a call
/// that fails on a kept connection (the server closed it meanwhile) is made once more on a
/// fresh one, so `kept` is only for idempotent calls. Without, a fresh connection is opened
/// and closed. With `key`, the request carries its bearer header. Returns the URL (for
/// messages), the status and the answer.
async fn post_json(
    endpoint: &Endpoint,
    uri: Uri,
    body: Vec<u8>,
    key: Option<&ApiKey>,
    timeout: Duration,
    kept: Option<&KeptConnection>,
) -> Result<(String, u16, Bytes), OracleError> {
    let url = format!("{}{}", endpoint.url.trim_end_matches('/'), uri.path());
    let auth = key.map(ApiKey::header_value).transpose()?;
    let auth = auth.as_ref();
    let http = |detail: String| OracleError::Http {
        url: url.clone(),
        detail,
    };
    let body = Bytes::from(body);
    let request = || {
        let mut req = Request::builder()
            .method(Method::POST)
            .uri(uri.clone())
            .header(header::HOST, endpoint.host_header())
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json");
        if let Some(a) = auth {
            req = req.header(header::AUTHORIZATION, a);
        }
        req.body(Full::new(body.clone()))
            .map_err(|e| http(e.to_string()))
    };
    let answer = async |sender: &mut http1::SendRequest<Full<Bytes>>| {
        let resp = sender
            .send_request(request()?)
            .await
            .map_err(|e| http(e.to_string()))?;
        let status = resp.status().as_u16();
        let bytes = Limited::new(resp.into_body(), MAX_RESPONSE_BYTES)
            .collect()
            .await
            .map_err(|e| http(format!("reading the answer: {e}")))?
            .to_bytes();
        Ok::<_, OracleError>((status, bytes))
    };
    let exchange = async {
        if let Some(k) = kept
            && let Some((mut sender, driver)) = k.take()
        {
            let s = &mut sender;
            let call = async {
                s.ready().await.map_err(|e| http(e.to_string()))?;
                answer(s).await
            };
            if let (Ok(r), driver) = during(driver, call).await {
                if let Some(d) = driver {
                    k.put(sender, d);
                }
                return Ok(r);
            }
        }
        let stream = endpoint.connect(timeout).await?;
        let (mut sender, driver) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| http(e.to_string()))?;
        // Without `kept`, the connection closes when its driver is dropped.
        let (r, driver) = during(Box::pin(driver), answer(&mut sender)).await;
        let r = r?;
        if let (Some(k), Some(d)) = (kept, driver) {
            k.put(sender, d);
        }
        Ok(r)
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(r) => r.map(|(status, answer)| (url.clone(), status, answer)),
        Err(_) => Err(OracleError::Timeout {
            url,
            after_ms: timeout.as_millis(),
        }),
    }
}

/// A `/tokenize` answer, read for its count only: `count` (vLLM), else the length of
/// `tokens` (llama.cpp; vLLM sends both), without building the token list.
#[derive(Deserialize)]
struct TokenizeAnswer {
    count: Option<Value>,
    tokens: Option<Length>,
}

/// The number of elements of a JSON array; `None` for any other value.
struct Length(Option<u64>);

impl<'de> Deserialize<'de> for Length {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Counter;
        impl<'de> serde::de::Visitor<'de> for Counter {
            type Value = Length;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Length, A::Error> {
                let mut n = 0u64;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(Length(Some(n)))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Length, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Length(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Length, E> {
                Ok(Length(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Length, E> {
                Ok(Length(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Length, E> {
                Ok(Length(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Length, E> {
                Ok(Length(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<Length, E> {
                Ok(Length(None))
            }
            fn visit_unit<E>(self) -> Result<Length, E> {
                Ok(Length(None))
            }
        }
        d.deserialize_any(Counter)
    }
}

fn parse_answer(url: &str, status: u16, body: &[u8]) -> Result<Value, OracleError> {
    if !(200..300).contains(&status) {
        return Err(OracleError::Status {
            url: url.to_owned(),
            status,
            body: body_summary(body),
        });
    }
    serde_json::from_slice(body).map_err(|e| OracleError::Answer {
        url: url.to_owned(),
        detail: format!("not JSON: {e}"),
        body: body_summary(body),
    })
}

/// How a server's tokenizer endpoints count a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenizeDialect {
    /// vLLM (and SGLang): `POST /tokenize` with `{"model", "messages"}` (the chat template
    /// applied) or `{"model", "prompt"}`, answering `{"count": N, "tokens": [...]}`.
    Vllm,
    /// llama.cpp's `llama-server`: `POST /apply-template {"messages"}` → `{"prompt"}` (the
    /// chat template applied as the server will), then `POST /tokenize {"content",
    /// "add_special", "parse_special": true}` → `{"tokens": [...]}`. Its `/tokenize` reads only
    /// `content`: any other body is answered `{"tokens": []}`.
    LlamaCpp,
}

impl TokenizeDialect {
    /// Every dialect, in the order they are tried.
    pub const ALL: [TokenizeDialect; 2] = [Self::Vllm, Self::LlamaCpp];

    /// `vllm` or `llama.cpp`, as run.json records it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Vllm => "vllm",
            Self::LlamaCpp => "llama.cpp",
        }
    }
}

/// The prompt as the server's chat template sees it: the chat messages of a chat request,
/// the one user message servers make of a Responses `input`; `None` for a completions
/// prompt, which is tokenized as raw text.
fn templated_messages(api: Api, content: &PromptContent) -> Option<Vec<ChatMessage>> {
    match (api, content) {
        (Api::Completions, _) => None,
        (_, PromptContent::Messages(m)) => Some(m.clone()),
        (_, PromptContent::Text(t)) => Some(vec![ChatMessage::new("user", t.clone())]),
    }
}

/// Token counts from the server's tokenizer endpoints, in one [`TokenizeDialect`].
#[derive(Debug, Clone)]
pub struct TokenizeOracle {
    pub endpoint: Endpoint,
    pub model: String,
    pub api_key: Option<ApiKey>,
    /// The API of the requests being calibrated: chat and Responses prompts are counted
    /// through the chat template, completions prompts as raw text.
    pub api: Api,
    pub dialect: TokenizeDialect,
    /// Extra top-level fields for templated prompts, e.g.
    /// `chat_template_kwargs: {"enable_thinking": false}` so the template matches the run's.
    pub chat_extra: Map<String, Value>,
    pub timeout: Duration,
    /// The connection the calls go on, kept between them.
    pub kept: KeptConnection,
}

impl TokenizeOracle {
    /// POST `body` to `path` and return the URL, the status and the answer.
    async fn post_raw(&self, path: &str, body: Value) -> Result<(String, u16, Bytes), OracleError> {
        let uri = self.endpoint.path_uri(path)?;
        let payload = serde_json::to_vec(&body).unwrap_or_default();
        let key = self.api_key.as_ref();
        post_json(
            &self.endpoint,
            uri,
            payload,
            key,
            self.timeout,
            Some(&self.kept),
        )
        .await
    }

    /// POST `body` to `/tokenize` and read the answer's count (see [`TokenizeAnswer`]).
    async fn tokenize(&self, body: Value) -> Result<(String, Option<u64>, Bytes), OracleError> {
        let (url, status, answer) = self.post_raw("/tokenize", body).await?;
        let object = answer.trim_ascii_start().first() == Some(&b'{');
        let n = match serde_json::from_slice::<TokenizeAnswer>(&answer) {
            Ok(a) if object && status / 100 == 2 => a
                .count
                .as_ref()
                .and_then(Value::as_u64)
                .or(a.tokens.and_then(|t| t.0)),
            // An error status, or not an object: said as the general reading says it.
            _ => {
                let v = parse_answer(&url, status, &answer)?;
                v.get("count").and_then(Value::as_u64).or(v
                    .get("tokens")
                    .and_then(Value::as_array)
                    .map(|t| t.len() as u64))
            }
        };
        Ok((url, n, answer))
    }

    async fn post(&self, path: &str, body: Value) -> Result<(String, Value, Bytes), OracleError> {
        let (url, status, answer) = self.post_raw(path, body).await?;
        let v = parse_answer(&url, status, &answer)?;
        Ok((url, v, answer))
    }

    /// Prompt tokens of `content` as the server would count them. A count of 0 for a
    /// non-empty prompt is an error (llama.cpp answers `{"tokens": []}` to a body it does not
    /// read): the caller must not mistake it for a count.
    pub async fn count(&self, content: &PromptContent) -> Result<u64, OracleError> {
        let messages = templated_messages(self.api, content);
        let (url, n, answer) = match (self.dialect, &messages, content) {
            (TokenizeDialect::Vllm, Some(m), _) => {
                let mut body = Map::new();
                body.insert("model".into(), json!(self.model));
                body.insert("messages".into(), json!(m));
                body.extend(self.chat_extra.clone());
                self.tokenize(Value::Object(body)).await?
            }
            (TokenizeDialect::Vllm, None, _) => {
                let text = match content {
                    PromptContent::Text(t) => t.clone(),
                    PromptContent::Messages(m) => m
                        .iter()
                        .map(|m| m.content.as_str())
                        .collect::<Vec<_>>()
                        .join("\n"),
                };
                self.tokenize(json!({"model": self.model, "prompt": text}))
                    .await?
            }
            (TokenizeDialect::LlamaCpp, Some(m), _) => {
                let mut body = Map::new();
                body.insert("messages".into(), json!(m));
                body.extend(self.chat_extra.clone());
                let (url, v, answer) = self.post("/apply-template", Value::Object(body)).await?;
                let Some(prompt) = v.get("prompt").and_then(Value::as_str) else {
                    return Err(OracleError::Answer {
                        url,
                        detail: "no `prompt` string".into(),
                        body: body_summary(&answer),
                    });
                };
                self.tokenize(
                    json!({"content": prompt, "add_special": false, "parse_special": true}),
                )
                .await?
            }
            (TokenizeDialect::LlamaCpp, None, PromptContent::Text(t)) => {
                self.tokenize(json!({"content": t, "add_special": true, "parse_special": true}))
                    .await?
            }
            (TokenizeDialect::LlamaCpp, None, PromptContent::Messages(_)) => {
                return Err(OracleError::Answer {
                    url: self.endpoint.url.clone(),
                    detail: "a completions prompt must be text".into(),
                    body: String::new(),
                });
            }
        };
        let Some(n) = n else {
            return Err(OracleError::Answer {
                url,
                detail: "no `count` number or `tokens` array".into(),
                body: body_summary(&answer),
            });
        };
        if n == 0 && content.chars() > 0 {
            return Err(OracleError::Answer {
                url,
                detail: format!(
                    "0 tokens for a prompt of {} characters: the server did not read this request ({} dialect)",
                    content.chars(),
                    self.dialect.as_str()
                ),
                body: body_summary(&answer),
            });
        }
        Ok(n)
    }
}

/// Token counts from a one-token, non-streaming request of the cell's API.
#[derive(Debug, Clone)]
pub struct ProbeOracle {
    pub endpoint: Endpoint,
    pub options: RequestOptions,
    pub api_key: Option<ApiKey>,
    pub timeout: Duration,
}

impl ProbeOracle {
    /// Prompt tokens of `content` from the probe's `usage`.
    pub async fn count(&self, content: &PromptContent) -> Result<u64, OracleError> {
        let body = request::body_json(&self.options, 0, content, false, Some(1), false)?;
        let uri = self.endpoint.uri(self.options.api).clone();
        let key = self.api_key.as_ref();
        let (url, status, answer) =
            post_json(&self.endpoint, uri, body, key, self.timeout, None).await?;
        let v = parse_answer(&url, status, &answer)?;
        let field = match self.options.api {
            Api::Chat | Api::Completions => "prompt_tokens",
            Api::Responses => "input_tokens",
        };
        v.get("usage")
            .and_then(|u| u.get(field))
            .and_then(Value::as_u64)
            .ok_or_else(|| OracleError::Answer {
                url,
                detail: format!("no `usage.{field}` number"),
                body: body_summary(&answer),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// The length of the request at the start of `got` (its head and the body its
    /// `content-length` announces), once the whole head is buffered.
    fn request_len(got: &[u8]) -> Option<usize> {
        let text = String::from_utf8_lossy(got);
        let end = text.find("\r\n\r\n")?;
        let len: usize = text[..end]
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length: ")
                    .map(|v| v.trim().parse().unwrap())
            })
            .unwrap_or(0);
        Some(end + 4 + len)
    }

    /// A scripted HTTP server: answers the i-th connection's request with `answers[i]`, and
    /// hands back the requests it read, in order.
    async fn scripted(
        answers: Vec<(u16, &'static str)>,
    ) -> (Endpoint, tokio::task::JoinHandle<Vec<String>>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let h = tokio::spawn(async move {
            let mut requests = Vec::new();
            for (status, body) in answers {
                let (mut s, _) = l.accept().await.unwrap();
                let mut got = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    let n = s.read(&mut buf).await.unwrap();
                    got.extend_from_slice(&buf[..n]);
                    if let Some(total) = request_len(&got)
                        && (got.len() >= total || n == 0)
                    {
                        break;
                    }
                }
                let resp = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                s.write_all(resp.as_bytes()).await.unwrap();
                requests.push(String::from_utf8_lossy(&got).into_owned());
            }
            requests
        });
        (Endpoint::parse(0, &format!("http://{addr}")).unwrap(), h)
    }

    /// [`scripted`] with one answer.
    async fn one_shot(
        status: u16,
        body: &'static str,
    ) -> (Endpoint, tokio::task::JoinHandle<String>) {
        let (ep, h) = scripted(vec![(status, body)]).await;
        (ep, tokio::spawn(async move { h.await.unwrap().remove(0) }))
    }

    /// The count a tokenize oracle of `api` and `dialect` takes from a server answering
    /// `answer` for the text prompt `text`, and the request it sent.
    async fn count_text(
        answer: &'static str,
        api: Api,
        dialect: TokenizeDialect,
        text: &str,
    ) -> (u64, String) {
        let (ep, server) = one_shot(200, answer).await;
        let n = oracle(ep, api, dialect)
            .count(&PromptContent::Text(text.into()))
            .await
            .unwrap();
        (n, server.await.unwrap())
    }

    fn oracle(ep: Endpoint, api: Api, dialect: TokenizeDialect) -> TokenizeOracle {
        TokenizeOracle {
            endpoint: ep,
            model: "m".into(),
            api_key: None,
            api,
            dialect,
            chat_extra: Map::new(),
            timeout: Duration::from_secs(5),
            kept: KeptConnection::default(),
        }
    }

    fn chat() -> PromptContent {
        PromptContent::Messages(vec![ChatMessage::new("user", "hello there".into())])
    }

    #[tokio::test]
    async fn vllm_dialect_posts_messages_and_reads_count() {
        let (ep, server) = one_shot(200, r#"{"count":17,"max_model_len":4096}"#).await;
        let mut o = oracle(ep, Api::Chat, TokenizeDialect::Vllm);
        o.api_key = Some(ApiKey::new("sk-x"));
        o.chat_extra.insert(
            "chat_template_kwargs".into(),
            json!({"enable_thinking": false}),
        );
        assert_eq!(o.count(&chat()).await.unwrap(), 17);
        let req = server.await.unwrap();
        assert!(req.starts_with("POST /tokenize HTTP/1.1\r\n"), "{req}");
        assert!(req.contains("authorization: Bearer sk-x"));
        assert!(req.contains(r#""messages":[{"role":"user","content":"hello there"}]"#));
        assert!(req.contains(r#""chat_template_kwargs":{"enable_thinking":false}"#));

        // Completions: the raw prompt.
        let answer = r#"{"count":3,"tokens":[1,2,3]}"#;
        let (n, req) = count_text(answer, Api::Completions, TokenizeDialect::Vllm, "a b c").await;
        assert_eq!(n, 3);
        assert!(req.contains(r#""prompt":"a b c""#));

        // Responses: counted as the user message the server's chat template will see.
        let answer = r#"{"count":9}"#;
        let (n, req) = count_text(answer, Api::Responses, TokenizeDialect::Vllm, "a b c").await;
        assert_eq!(n, 9);
        assert!(req.contains(r#""messages":[{"role":"user","content":"a b c"}]"#));
    }

    /// A keep-alive server: answers every request of every connection with `answer`, and
    /// says how many connections it accepted and how many requests it answered.
    async fn keep_alive(
        answer: &'static str,
    ) -> (
        Endpoint,
        Arc<std::sync::atomic::AtomicUsize>,
        Arc<std::sync::atomic::AtomicUsize>,
    ) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (conns, reqs) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (c, r) = (conns.clone(), reqs.clone());
        tokio::spawn(async move {
            loop {
                let (mut s, _) = l.accept().await.unwrap();
                c.fetch_add(1, Ordering::SeqCst);
                let r = r.clone();
                tokio::spawn(async move {
                    let mut got = Vec::new();
                    let mut buf = [0u8; 4096];
                    loop {
                        if let Some(total) = request_len(&got)
                            && got.len() >= total
                        {
                            got.drain(..total);
                            let resp = format!(
                                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
                                answer.len()
                            );
                            s.write_all(resp.as_bytes()).await.unwrap();
                            r.fetch_add(1, Ordering::SeqCst);
                            continue;
                        }
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => got.extend_from_slice(&buf[..n]),
                        }
                    }
                });
            }
        });
        (
            Endpoint::parse(0, &format!("http://{addr}")).unwrap(),
            conns,
            reqs,
        )
    }

    #[tokio::test]
    async fn tokenizer_calls_share_one_kept_connection() {
        use std::sync::atomic::Ordering;
        let (ep, conns, reqs) = keep_alive(r#"{"count":9,"tokens":[1,2,3,4,5,6,7,8,9]}"#).await;
        let o = oracle(ep, Api::Chat, TokenizeDialect::Vllm);
        for _ in 0..5 {
            assert_eq!(o.count(&chat()).await.unwrap(), 9);
        }
        assert_eq!(reqs.load(Ordering::SeqCst), 5);
        assert_eq!(
            conns.load(Ordering::SeqCst),
            1,
            "one connection for five calls"
        );
    }

    /// A server that closes after each answer (as the scripted one does): every call after
    /// the first finds the kept connection closed and is made on a fresh one.
    #[tokio::test]
    async fn a_kept_connection_the_server_closed_is_replaced() {
        let (ep, server) = scripted(vec![
            (200, r#"{"count":4}"#),
            (200, r#"{"count":5}"#),
            (200, r#"{"count":6}"#),
        ])
        .await;
        let o = oracle(ep, Api::Chat, TokenizeDialect::Vllm);
        let mut counts = Vec::new();
        for _ in 0..3 {
            counts.push(o.count(&chat()).await.unwrap());
        }
        assert_eq!(counts, [4, 5, 6]);
        assert_eq!(server.await.unwrap().len(), 3);
    }

    /// The count is read without building the token list, and reads as before: `count` first,
    /// else the length of `tokens`; neither is an error naming the answer.
    #[tokio::test]
    async fn tokenize_answers_are_read_for_their_count() {
        for (answer, expected) in [
            (r#"{"tokens":[5,6,7],"count":3}"#, Ok(3)),
            (r#"{"tokens":[[1],{"a":2},"x",null,4.5]}"#, Ok(5)),
            (r#"{"count":2.5,"tokens":[1,2]}"#, Ok(2)),
            (
                r#"{"count":null,"tokens":{"n":3}}"#,
                Err("no `count` number or `tokens` array"),
            ),
            (r#"[3]"#, Err("no `count` number or `tokens` array")),
            (r#"{"tokens":[1,2"#, Err("not JSON")),
        ] {
            let (ep, _server) = one_shot(200, answer).await;
            let o = oracle(ep, Api::Chat, TokenizeDialect::Vllm);
            match (o.count(&chat()).await, expected) {
                (Ok(n), Ok(e)) => assert_eq!(n, e, "{answer}"),
                (Err(err), Err(e)) => assert!(err.to_string().contains(e), "{answer}: {err}"),
                (got, e) => panic!("{answer}: got {got:?}, expected {e:?}"),
            }
        }
    }

    #[tokio::test]
    async fn llama_cpp_dialect_applies_the_template_then_tokenizes_its_prompt() {
        let (ep, server) = scripted(vec![
            (
                200,
                r#"{"prompt":"<|im_start|>user\nhello there<|im_end|>\n<|im_start|>assistant\n"}"#,
            ),
            (200, r#"{"tokens":[1,2,3,4,5,6,7]}"#),
        ])
        .await;
        let o = oracle(ep, Api::Chat, TokenizeDialect::LlamaCpp);
        assert_eq!(o.count(&chat()).await.unwrap(), 7);
        let reqs = server.await.unwrap();
        assert!(reqs[0].starts_with("POST /apply-template "), "{}", reqs[0]);
        assert!(reqs[0].contains(r#""messages":[{"role":"user","content":"hello there"}]"#));
        assert!(reqs[1].starts_with("POST /tokenize "), "{}", reqs[1]);
        assert!(
            reqs[1].contains(r#""content":"<|im_start|>user\nhello there<|im_end|>\n<|im_start|>assistant\n","add_special":false,"parse_special":true"#),
            "{}",
            reqs[1]
        );

        // Completions: the text itself, with the special tokens the server adds.
        let answer = r#"{"tokens":[1,2]}"#;
        let (n, req) = count_text(answer, Api::Completions, TokenizeDialect::LlamaCpp, "a b").await;
        assert_eq!(n, 2);
        assert!(req.contains(r#""content":"a b","add_special":true,"parse_special":true"#));
    }

    /// llama.cpp answers a body it does not read with `{"tokens": []}`: that is no count.
    #[tokio::test]
    async fn zero_tokens_for_a_non_empty_prompt_is_an_error() {
        let (ep, _server) = one_shot(200, r#"{"tokens":[]}"#).await;
        let o = oracle(ep, Api::Chat, TokenizeDialect::Vllm);
        let err = o.count(&chat()).await.unwrap_err();
        assert!(matches!(err, OracleError::Answer { .. }), "{err}");
        assert!(
            err.to_string()
                .contains("0 tokens for a prompt of 11 characters"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn tokenize_oracle_reports_http_errors() {
        let (ep, _server) = one_shot(404, r#"{"detail":"Not Found"}"#).await;
        let o = oracle(ep, Api::Chat, TokenizeDialect::Vllm);
        let err = o.count(&chat()).await.unwrap_err();
        assert!(
            matches!(err, OracleError::Status { status: 404, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("/tokenize"));
    }

    #[tokio::test]
    async fn probe_oracle_reads_usage() {
        let (ep, server) = one_shot(
            200,
            r#"{"choices":[{"message":{"content":"A"}}],"usage":{"prompt_tokens":4099,"completion_tokens":1}}"#,
        )
        .await;
        let o = ProbeOracle {
            endpoint: ep,
            options: RequestOptions {
                api: Api::Chat,
                model: "m".into(),
                max_tokens: Some(512),
                thinking_disabled: true,
                omit_thinking_kwarg: false,
            },
            api_key: None,
            timeout: Duration::from_secs(5),
        };
        assert_eq!(o.count(&chat()).await.unwrap(), 4099);
        let req = server.await.unwrap();
        assert!(req.starts_with("POST /v1/chat/completions "));
        assert!(req.contains(r#""stream":false"#));
        assert!(req.contains(r#""max_tokens":1"#));

        let (ep, _server) = one_shot(200, r#"{"usage":{"input_tokens":12}}"#).await;
        let mut o = o.clone();
        o.endpoint = ep;
        o.options.api = Api::Responses;
        assert_eq!(
            o.count(&PromptContent::Text("hi".into())).await.unwrap(),
            12
        );

        let (ep, _server) = one_shot(200, r#"{"choices":[]}"#).await;
        o.endpoint = ep;
        let err = o
            .count(&PromptContent::Text("hi".into()))
            .await
            .unwrap_err();
        assert!(matches!(err, OracleError::Answer { .. }), "{err}");
    }

    #[tokio::test]
    async fn oracle_times_out_on_a_silent_server() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let _hold = tokio::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            tokio::time::sleep(Duration::from_secs(10)).await;
            drop(s);
        });
        let mut o = oracle(
            Endpoint::parse(0, &format!("http://{addr}")).unwrap(),
            Api::Chat,
            TokenizeDialect::Vllm,
        );
        o.timeout = Duration::from_millis(200);
        let err = o.count(&chat()).await.unwrap_err();
        assert!(matches!(err, OracleError::Timeout { .. }), "{err}");
    }
}
