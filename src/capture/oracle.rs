//! Token-count oracles for prompt calibration: what the server says a prompt costs.
//!
//! - [`TokenizeOracle`]: vLLM-style `POST /tokenize` with `{"model","messages"}` (chat, so the
//!   chat template is applied) or `{"model","prompt"}`, answering `{"count": N}` (a `tokens`
//!   array is accepted too, as llama.cpp answers).
//! - [`ProbeOracle`]: for servers without `/tokenize`, a non-streaming request of the cell's own
//!   API with a one-token ceiling, reading `usage.prompt_tokens` (`usage.input_tokens` for the
//!   Responses API). A probe puts the prompt into the server's prefix cache, so calibrate a
//!   `unique` cell with a different salt than the run's (`PromptBuilder::with_salt`).
//!
//! Both run before the measured run, on their own short-lived connection; neither is on the
//! hot path.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use serde_json::{Map, Value, json};

use super::endpoint::Endpoint;
use super::prompt::PromptContent;
use super::request::{self, Api, ApiKey, RequestOptions};

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

/// Truncate a response body for an error message.
fn excerpt(body: &[u8]) -> String {
    let s = String::from_utf8_lossy(&body[..body.len().min(1024)]);
    if body.len() > 1024 {
        format!("{s}… ({} bytes)", body.len())
    } else {
        s.into_owned()
    }
}

/// POST a JSON body on a fresh connection and read the whole answer.
async fn post_json(
    endpoint: &Endpoint,
    uri: Uri,
    body: Vec<u8>,
    auth: Option<&HeaderValue>,
    timeout: Duration,
) -> Result<(u16, Bytes), OracleError> {
    let url = format!("{}{}", endpoint.url.trim_end_matches('/'), uri.path());
    let exchange = async {
        let stream = endpoint.connect(timeout).await?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| OracleError::Http {
                url: url.clone(),
                detail: e.to_string(),
            })?;
        let conn = tokio::spawn(conn);
        let mut req = Request::builder()
            .method(Method::POST)
            .uri(uri)
            .header(header::HOST, endpoint.host_header())
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json");
        if let Some(a) = auth {
            req = req.header(header::AUTHORIZATION, a);
        }
        let req = req
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| OracleError::Http {
                url: url.clone(),
                detail: e.to_string(),
            })?;
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| OracleError::Http {
                url: url.clone(),
                detail: e.to_string(),
            })?;
        let status = resp.status().as_u16();
        let bytes = Limited::new(resp.into_body(), MAX_RESPONSE_BYTES)
            .collect()
            .await
            .map_err(|e| OracleError::Http {
                url: url.clone(),
                detail: format!("reading the answer: {e}"),
            })?
            .to_bytes();
        conn.abort();
        Ok((status, bytes))
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(r) => r,
        Err(_) => Err(OracleError::Timeout {
            url,
            after_ms: timeout.as_millis(),
        }),
    }
}

fn parse_answer(url: &str, status: u16, body: &[u8]) -> Result<Value, OracleError> {
    if !(200..300).contains(&status) {
        return Err(OracleError::Status {
            url: url.to_owned(),
            status,
            body: excerpt(body),
        });
    }
    serde_json::from_slice(body).map_err(|e| OracleError::Answer {
        url: url.to_owned(),
        detail: format!("not JSON: {e}"),
        body: excerpt(body),
    })
}

/// Token counts from the server's `POST /tokenize`.
#[derive(Debug, Clone)]
pub struct TokenizeOracle {
    pub endpoint: Endpoint,
    pub model: String,
    pub api_key: Option<ApiKey>,
    /// Extra top-level fields for chat prompts, e.g.
    /// `chat_template_kwargs: {"enable_thinking": false}` so the template matches the run's.
    pub chat_extra: Map<String, Value>,
    pub timeout: Duration,
}

impl TokenizeOracle {
    /// Prompt tokens of `content` as the server would count them.
    pub async fn count(&self, content: &PromptContent) -> Result<u64, OracleError> {
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model));
        match content {
            PromptContent::Messages(m) => {
                body.insert("messages".into(), json!(m));
                body.extend(self.chat_extra.clone());
            }
            PromptContent::Text(t) => {
                body.insert("prompt".into(), json!(t));
            }
        }
        let uri = self.endpoint.path_uri("/tokenize")?;
        let url = format!("{}{}", self.endpoint.url.trim_end_matches('/'), uri.path());
        let auth = self
            .api_key
            .as_ref()
            .map(ApiKey::header_value)
            .transpose()?;
        let payload = serde_json::to_vec(&Value::Object(body)).unwrap_or_default();
        let (status, answer) =
            post_json(&self.endpoint, uri, payload, auth.as_ref(), self.timeout).await?;
        let v = parse_answer(&url, status, &answer)?;
        if let Some(n) = v.get("count").and_then(Value::as_u64) {
            return Ok(n);
        }
        if let Some(tokens) = v.get("tokens").and_then(Value::as_array) {
            return Ok(tokens.len() as u64);
        }
        Err(OracleError::Answer {
            url,
            detail: "no `count` number or `tokens` array".into(),
            body: excerpt(&answer),
        })
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
        let body = request::body_json(&self.options, 0, content, false, Some(1))?;
        let uri = self.endpoint.uri(self.options.api).clone();
        let url = format!("{}{}", self.endpoint.url.trim_end_matches('/'), uri.path());
        let auth = self
            .api_key
            .as_ref()
            .map(ApiKey::header_value)
            .transpose()?;
        let (status, answer) =
            post_json(&self.endpoint, uri, body, auth.as_ref(), self.timeout).await?;
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
                body: excerpt(&answer),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::prompt::ChatMessage;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A one-shot HTTP server: answers the first request with `status` and `body`, and hands
    /// back the request it read.
    async fn one_shot(
        status: u16,
        body: &'static str,
    ) -> (Endpoint, tokio::task::JoinHandle<String>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let h = tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                let n = s.read(&mut buf).await.unwrap();
                got.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&got);
                if let Some(end) = text.find("\r\n\r\n") {
                    let len: usize = text
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length: ")
                                .map(|v| v.trim().parse().unwrap())
                        })
                        .unwrap_or(0);
                    if got.len() >= end + 4 + len || n == 0 {
                        break;
                    }
                }
            }
            let resp = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            s.write_all(resp.as_bytes()).await.unwrap();
            String::from_utf8_lossy(&got).into_owned()
        });
        (Endpoint::parse(0, &format!("http://{addr}")).unwrap(), h)
    }

    fn chat() -> PromptContent {
        PromptContent::Messages(vec![ChatMessage {
            role: "user",
            content: "hello there".into(),
        }])
    }

    #[tokio::test]
    async fn tokenize_oracle_posts_messages_and_reads_count() {
        let (ep, server) = one_shot(200, r#"{"count":17,"max_model_len":4096}"#).await;
        let mut extra = Map::new();
        extra.insert(
            "chat_template_kwargs".into(),
            json!({"enable_thinking": false}),
        );
        let o = TokenizeOracle {
            endpoint: ep,
            model: "m".into(),
            api_key: Some(ApiKey::new("sk-x")),
            chat_extra: extra,
            timeout: Duration::from_secs(5),
        };
        assert_eq!(o.count(&chat()).await.unwrap(), 17);
        let req = server.await.unwrap();
        assert!(req.starts_with("POST /tokenize HTTP/1.1\r\n"), "{req}");
        assert!(req.contains("authorization: Bearer sk-x"));
        assert!(req.contains(r#""messages":[{"role":"user","content":"hello there"}]"#));
        assert!(req.contains(r#""chat_template_kwargs":{"enable_thinking":false}"#));

        let (ep, server) = one_shot(200, r#"{"tokens":[1,2,3]}"#).await;
        let o = TokenizeOracle {
            endpoint: ep,
            model: "m".into(),
            api_key: None,
            chat_extra: Map::new(),
            timeout: Duration::from_secs(5),
        };
        assert_eq!(
            o.count(&PromptContent::Text("a b c".into())).await.unwrap(),
            3
        );
        assert!(server.await.unwrap().contains(r#""prompt":"a b c""#));
    }

    #[tokio::test]
    async fn tokenize_oracle_reports_http_errors() {
        let (ep, _server) = one_shot(404, r#"{"detail":"Not Found"}"#).await;
        let o = TokenizeOracle {
            endpoint: ep,
            model: "m".into(),
            api_key: None,
            chat_extra: Map::new(),
            timeout: Duration::from_secs(5),
        };
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
        let o = TokenizeOracle {
            endpoint: Endpoint::parse(0, &format!("http://{addr}")).unwrap(),
            model: "m".into(),
            api_key: None,
            chat_extra: Map::new(),
            timeout: Duration::from_millis(200),
        };
        let err = o.count(&chat()).await.unwrap_err();
        assert!(matches!(err, OracleError::Timeout { .. }), "{err}");
    }
}
