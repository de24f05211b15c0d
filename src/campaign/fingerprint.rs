//! What shows which service answers at a set of endpoints, and whether the restored starting
//! service is the one that ran before the campaign: the model list (`GET /v1/models`), the
//! server version (`GET /version`, where the server says it), the first model's facts, the
//! shape of the reply to one small non-streamed chat completion, and the configuration keys
//! the campaign file declares.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use serde_json::{Value, json};

use crate::artifact::restoration::{RestorationCheck, ServiceFingerprint};
use crate::capture::endpoint::Endpoint;
use crate::capture::http::{self, SIDE_TIMEOUT};

/// The smoke request's prompt.
const SMOKE_PROMPT: &str = "Reply with the single word: ready.";

/// Take the fingerprint of the service at `urls` (one per replica), asking for `model`.
pub async fn take(
    urls: &[String],
    model: &str,
    configuration: BTreeMap<String, String>,
) -> ServiceFingerprint {
    let mut fp = ServiceFingerprint {
        taken_at: crate::clock::utc_now(),
        models: Vec::new(),
        server_version: None,
        model_facts: BTreeMap::new(),
        smoke_status: None,
        smoke_reply_shape: Vec::new(),
        configuration,
    };
    let endpoints: Vec<Endpoint> = urls
        .iter()
        .enumerate()
        .filter_map(|(i, u)| Endpoint::parse(u32::try_from(i).unwrap_or(0), u).ok())
        .collect();
    for (i, ep) in endpoints.iter().enumerate() {
        let mut ids = Vec::new();
        if let Ok((200, body)) = http::get(ep, "/v1/models", None, SIDE_TIMEOUT).await
            && let Ok(v) = serde_json::from_slice::<Value>(&body)
            && let Some(data) = v.get("data").and_then(Value::as_array)
        {
            for (k, m) in data.iter().enumerate() {
                if let Some(id) = m.get("id").and_then(Value::as_str) {
                    ids.push(id.to_owned());
                }
                if i == 0 && k == 0 {
                    for key in ["max_model_len", "owned_by", "root"] {
                        if let Some(x) = m.get(key) {
                            fp.model_facts.insert(key.to_owned(), x.clone());
                        }
                    }
                }
            }
        }
        ids.sort();
        fp.models.push(ids);
    }
    let Some(first) = endpoints.first() else {
        return fp;
    };
    if let Ok((200, body)) = http::get(first, "/version", None, SIDE_TIMEOUT).await
        && let Ok(v) = serde_json::from_slice::<Value>(&body)
        && let Some(version) = v.get("version")
    {
        fp.server_version = Some(match version {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        });
    }
    let smoke = json!({
        "model": model,
        "messages": [{"role": "user", "content": SMOKE_PROMPT}],
        "max_tokens": 8,
        "temperature": 0,
        "stream": false,
    });
    if let Ok((status, body)) = http::post_json(
        first,
        "/v1/chat/completions",
        Bytes::from(smoke.to_string()),
        None,
        SIDE_TIMEOUT,
    )
    .await
    {
        fp.smoke_status = Some(status);
        if let Ok(v) = serde_json::from_slice::<Value>(&body) {
            let mut paths = BTreeSet::new();
            shape(&v, "", &mut paths);
            fp.smoke_reply_shape = paths.into_iter().collect();
        }
    }
    fp
}

/// Every key path of `v` below `prefix` (`a.b`, arrays as `a[]`), leaves only.
fn shape(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(map) if !map.is_empty() => {
            for (k, x) in map {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                shape(x, &path, out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for x in items {
                shape(x, &format!("{prefix}[]"), out);
            }
        }
        _ => {
            out.insert(prefix.to_owned());
        }
    }
}

/// Compare the restored service's fingerprint with the starting one's; `model` must be
/// listed by every replica.
pub fn compare(
    before: &ServiceFingerprint,
    after: &ServiceFingerprint,
    model: &str,
) -> Vec<RestorationCheck> {
    let check = |name: &str, expected: Value, observed: Value, what: &str| {
        let passed = expected == observed;
        RestorationCheck {
            check: name.to_owned(),
            passed,
            detail: if passed {
                format!("{what}: {}", compact(&observed))
            } else {
                format!(
                    "{what}: before {}, after {}",
                    compact(&expected),
                    compact(&observed)
                )
            },
            expected,
            observed,
        }
    };
    let lists_model =
        !after.models.is_empty() && after.models.iter().all(|m| m.iter().any(|id| id == model));
    vec![
        RestorationCheck {
            check: "model".to_owned(),
            passed: lists_model,
            expected: Value::from(model),
            observed: json!(after.models),
            detail: if lists_model {
                format!("every replica lists `{model}`")
            } else {
                format!(
                    "`{model}` is not listed by every replica (GET /v1/models: {})",
                    compact(&json!(after.models))
                )
            },
        },
        check(
            "models",
            json!(before.models),
            json!(after.models),
            "the model list of each replica",
        ),
        check(
            "server_version",
            json!(before.server_version),
            json!(after.server_version),
            "GET /version",
        ),
        check(
            "model_facts",
            json!(before.model_facts),
            json!(after.model_facts),
            "the first model's facts",
        ),
        check(
            "smoke_reply",
            json!({"status": before.smoke_status, "shape": before.smoke_reply_shape}),
            json!({"status": after.smoke_status, "shape": after.smoke_reply_shape}),
            "a small chat completion's status and reply shape",
        ),
        check(
            "configuration",
            json!(before.configuration),
            json!(after.configuration),
            "the configuration keys declared",
        ),
    ]
}

fn compact(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() > 200 {
        format!("{}…", text.chars().take(200).collect::<String>())
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fingerprint(models: &[&str]) -> ServiceFingerprint {
        ServiceFingerprint {
            taken_at: String::new(),
            models: vec![models.iter().map(|m| (*m).to_owned()).collect()],
            server_version: Some("1".to_owned()),
            model_facts: BTreeMap::new(),
            smoke_status: Some(200),
            smoke_reply_shape: vec!["choices[].message.content".to_owned()],
            configuration: BTreeMap::new(),
        }
    }

    #[test]
    fn a_reply_shape_lists_leaf_paths() {
        let mut out = BTreeSet::new();
        shape(
            &json!({"choices": [{"message": {"content": "x", "role": "assistant"}}], "usage": {"prompt_tokens": 3}, "tags": []}),
            "",
            &mut out,
        );
        assert_eq!(
            out.into_iter().collect::<Vec<_>>(),
            [
                "choices[].message.content",
                "choices[].message.role",
                "tags",
                "usage.prompt_tokens"
            ]
        );
    }

    #[test]
    fn another_model_fails_the_model_checks() {
        let checks = compare(&fingerprint(&["qwen"]), &fingerprint(&["llama"]), "qwen");
        let failed: Vec<&str> = checks
            .iter()
            .filter(|c| !c.passed)
            .map(|c| c.check.as_str())
            .collect();
        assert_eq!(failed, ["model", "models"]);
        let same = compare(&fingerprint(&["qwen"]), &fingerprint(&["qwen"]), "qwen");
        assert!(same.iter().all(|c| c.passed), "{same:?}");
    }
}
