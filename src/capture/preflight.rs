//! Before anything is written: what each replica says about itself (`GET /v1/models`, and
//! `GET /version` where it answers), whether the key is accepted, and whether it closes a
//! connection after a streamed response. A replica that cannot be reached or refuses the
//! key stops the run as bad input, with nothing written.

use std::collections::BTreeMap;

use serde_json::Value;

use super::config::RunConfig;
use super::endpoint::Endpoint;
use super::error::CaptureError;
use super::http::SIDE_TIMEOUT;
use crate::artifact;
use crate::notice::Notices;
use crate::workload::prompt::{self, PromptContent};
use crate::workload::request::{self, RequestOptions};

/// What a replica said about itself before the run.
#[derive(Debug, Default)]
pub struct ServerFacts {
    pub models: Vec<String>,
    pub info: BTreeMap<String, Value>,
}

pub async fn preflight(
    ep: &Endpoint,
    auth: Option<&hyper::header::HeaderValue>,
    redactor: &artifact::Redactor,
) -> Result<ServerFacts, String> {
    let mut facts = ServerFacts::default();
    match super::http::get(ep, "/v1/models", auth, SIDE_TIMEOUT).await {
        Err(e) if e.is_unreachable() => {
            return Err(format!("--endpoint `{}`: unreachable: {e}", ep.url));
        }
        Err(e) => {
            return Err(format!(
                "--endpoint `{}`: GET /v1/models failed: {e}",
                ep.url
            ));
        }
        Ok((status, body)) if (200..300).contains(&status) => {
            let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            if let Some(data) = v.get("data").and_then(Value::as_array) {
                for (i, m) in data.iter().enumerate() {
                    if let Some(id) = m.get("id").and_then(Value::as_str) {
                        facts.models.push(id.to_owned());
                    }
                    if i == 0 {
                        for key in ["owned_by", "created", "max_model_len", "root"] {
                            if let Some(x) = m.get(key) {
                                facts.info.insert(format!("models.{key}"), x.clone());
                            }
                        }
                    }
                }
            }
        }
        Ok((status, body)) if status == 401 || status == 403 => {
            let said = super::http::body_summary(&body);
            let what = if auth.is_some() {
                "refused the API key sent (--api-key-env)"
            } else {
                "wants an API key: name the environment variable holding it with --api-key-env"
            };
            return Err(format!(
                "--endpoint `{}`: GET /v1/models answered {status} ({}): the server {what}",
                ep.url,
                redactor.text(said.trim())
            ));
        }
        Ok((status, _)) => {
            facts
                .info
                .insert("models.status".into(), Value::from(status));
        }
    }
    if let Ok((status, body)) = super::http::get(ep, "/version", auth, SIDE_TIMEOUT).await
        && (200..300).contains(&status)
        && let Ok(v) = serde_json::from_slice::<Value>(&body)
        && let Some(version) = v.get("version")
    {
        facts.info.insert("server_version".into(), version.clone());
    }
    Ok(facts)
}

/// Per replica, whether it closes the connection after a streamed response: one streamed
/// one-token request each (`http::closes_after_stream`), the finding recorded in its server
/// info (`connection_after_stream`: `closed`, `kept`, or `unknown` with why).
pub async fn connection_checks(
    cfg: &RunConfig,
    opts: &RequestOptions,
    auth: Option<&hyper::header::HeaderValue>,
    facts: &mut [ServerFacts],
    notices: &Notices,
) -> Result<Vec<bool>, CaptureError> {
    let content = match cfg.api.prompt_form() {
        prompt::PromptForm::Messages => PromptContent::Messages(vec![prompt::ChatMessage::new(
            "user",
            "Reply with one word.".into(),
        )]),
        prompt::PromptForm::Text => PromptContent::Text("Reply with one word.".into()),
    };
    let body = request::body_json(opts, 0, &content, true, Some(1), false)
        .map_err(|e| CaptureError::Failed(format!("the connection check's request: {e}")))?;
    let body = bytes::Bytes::from(body);
    let mut out = Vec::with_capacity(cfg.endpoints.len());
    for (ep, f) in cfg.endpoints.iter().zip(facts.iter_mut()) {
        let (closes, finding) = match super::http::closes_after_stream(
            ep,
            ep.uri(cfg.api).clone(),
            body.clone(),
            auth,
            super::calibrate::side_timeout(cfg),
        )
        .await
        {
            Ok(true) => (true, "closed".to_owned()),
            Ok(false) => (false, "kept".to_owned()),
            Err(e) => {
                notices.say(&format!(
                    "anvil-capture: warning: `{}`: the connection check failed ({e}); connections will be reused until the server is seen closing one",
                    ep.url
                ));
                (false, format!("unknown: the check failed ({e})"))
            }
        };
        f.info
            .insert("connection_after_stream".into(), Value::from(finding));
        out.push(closes);
    }
    Ok(out)
}
