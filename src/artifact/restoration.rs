//! `restoration.json` (`anvil-serving.restoration/v1`): the evidence of a campaign's
//! `restore` stage. After the last arm, `anvil campaign run` brings the starting service back
//! through the managed path (the campaign file's launch command, or the endpoints of a service
//! it does not manage), takes the service's fingerprint again and compares it with the one
//! taken before the first arm. This file says what was started, what was checked, each
//! check's result and when; the rules read it (a missing file, an unreadable one, or one whose
//! `restored` is false fires the plan's "service not restored" stop rule).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The `schema` value of every `restoration.json`.
pub const RESTORATION_SCHEMA: &str = "anvil-serving.restoration/v1";

/// The contents of `restoration.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Restoration {
    pub schema: String,
    pub campaign_id: String,
    /// Every check passed.
    pub restored: bool,
    /// `launch` (started with the campaign file's launch command) or `endpoints` (a service
    /// anvil does not manage, only checked).
    pub managed_path: String,
    /// The command line of each replica started (secrets redacted); empty for `endpoints`.
    pub argv: Vec<Vec<String>>,
    /// The base URLs checked.
    pub endpoints: Vec<String>,
    /// The process ids started; they are left running (the service is restored) unless the
    /// campaign was run with `--stop-after-restore`.
    pub pids: Vec<u32>,
    /// UTC times: the restore began, the service answered its readiness check, it ended.
    pub started_at: String,
    pub ready_at: Option<String>,
    pub finished_at: String,
    /// The fingerprint taken before the first arm, and the one taken after the restore.
    pub before: Option<ServiceFingerprint>,
    pub after: Option<ServiceFingerprint>,
    /// Each check, in order.
    pub checks: Vec<RestorationCheck>,
}

/// What shows which service answers at a set of endpoints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceFingerprint {
    pub taken_at: String,
    /// The model ids `GET /v1/models` lists, per replica in replica order, sorted.
    pub models: Vec<Vec<String>>,
    /// `GET /version`'s `version`, where the server answers it.
    pub server_version: Option<String>,
    /// What `GET /v1/models` says of the first model beside its id (`max_model_len`,
    /// `owned_by`, `root`).
    pub model_facts: BTreeMap<String, Value>,
    /// The HTTP status of one small non-streamed chat completion and the shape of its reply:
    /// every key path of the JSON (`choices[].message.content`, `usage.prompt_tokens`, …),
    /// sorted; values are not compared (the text may differ).
    pub smoke_status: Option<u16>,
    pub smoke_reply_shape: Vec<String>,
    /// The configuration keys and runtime the campaign file declares for the service.
    pub configuration: BTreeMap<String, String>,
}

/// One comparison of the restored service with the starting one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestorationCheck {
    /// `ready`, `models`, `model`, `server_version`, `model_facts`, `smoke_reply`,
    /// `configuration`.
    pub check: String,
    pub passed: bool,
    pub expected: Value,
    pub observed: Value,
    /// What the check compared, in words.
    pub detail: String,
}

impl Restoration {
    /// Read and parse `path` (a wrong schema or an unknown field is an error naming it).
    pub fn read(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot be read: {e}"))?;
        let value: Value =
            serde_json::from_str(&text).map_err(|e| format!("is not valid JSON: {e}"))?;
        let schema = value.get("schema").and_then(Value::as_str).unwrap_or("");
        if schema != RESTORATION_SCHEMA {
            return Err(format!(
                "has schema `{schema}`, expected `{RESTORATION_SCHEMA}`"
            ));
        }
        serde_path_to_error::deserialize(value).map_err(|e| format!("at {}: {}", e.path(), e))
    }

    /// The checks that failed.
    pub fn failed_checks(&self) -> Vec<&RestorationCheck> {
        self.checks.iter().filter(|c| !c.passed).collect()
    }

    /// One line: `restored (6 checks passed)` or the failing checks.
    pub fn verdict(&self) -> String {
        let failed = self.failed_checks();
        if self.restored && failed.is_empty() {
            format!("restored ({} checks passed)", self.checks.len())
        } else if failed.is_empty() {
            "not restored (no check ran)".to_owned()
        } else {
            let each: Vec<String> = failed
                .iter()
                .map(|c| format!("check {} failed: {}", c.check, c.detail))
                .collect();
            format!("not restored: {}", each.join("; "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(passed: bool) -> Restoration {
        Restoration {
            schema: RESTORATION_SCHEMA.to_owned(),
            campaign_id: "c".to_owned(),
            restored: passed,
            managed_path: "launch".to_owned(),
            argv: vec![vec!["anvil-sim".to_owned()]],
            endpoints: vec!["http://127.0.0.1:1".to_owned()],
            pids: vec![7],
            started_at: "2026-01-01T00:00:00Z".to_owned(),
            ready_at: None,
            finished_at: "2026-01-01T00:00:01Z".to_owned(),
            before: None,
            after: None,
            checks: vec![RestorationCheck {
                check: "models".to_owned(),
                passed,
                expected: Value::from("a"),
                observed: Value::from(if passed { "a" } else { "b" }),
                detail: "the model list before [a], after [b]".to_owned(),
            }],
        }
    }

    #[test]
    fn round_trips_and_names_a_failing_check() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("restoration.json");
        std::fs::write(&path, serde_json::to_string(&sample(false)).unwrap()).unwrap();
        let back = Restoration::read(&path).unwrap();
        assert_eq!(back, sample(false));
        assert_eq!(
            back.verdict(),
            "not restored: check models failed: the model list before [a], after [b]"
        );
        assert_eq!(sample(true).verdict(), "restored (1 checks passed)");
        std::fs::write(&path, r#"{"schema": "other/v1"}"#).unwrap();
        assert!(Restoration::read(&path).unwrap_err().contains("other/v1"));
    }
}
