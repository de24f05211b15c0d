//! `run.json` (`anvil-serving.capture-run/v4`): who ran what, when, against what, which
//! repeat of its cell it is, what was done about the servers' caches, and how it ended.
//! Version 3 files (no `cache_hygiene`) are read as salted runs with no reset; version 2
//! files (no repeat, no inherited defaults) as the one run of their cell.
//!
//! The workload section is what makes two artifacts comparable and is hashed into the
//! workload fingerprint; the arm and its topology (replica count, endpoints) are recorded
//! beside it but stay out of the fingerprint, so TP1, TP2 and DP2 arms running the same cell
//! match. Secrets never reach this file: the command line goes through [`redact_args`] and
//! endpoint URLs through [`redact_url`].

mod arm;
mod cache;
mod host;
mod outcome;
mod workload;

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use self::arm::{Arm, ArmConfig, Repeat, repeat_folder};
pub use self::cache::{CacheHygiene, CacheReset};
pub use self::host::{
    Calibration, CalibrationMethod, Clock, Endpoint, GroupPrefixSize, Tool, Topology, TraceDensity,
};
pub use self::outcome::{Counts, NORMAL_FINISH_REASONS, Outcome, RequestKind, Status};
pub use self::workload::{
    Api, Arrivals, PROMPT_CACHE_GROUPS, PrefixGroupsRecord, Schedule, SessionsRecord, TraceRecord,
    WARM_CACHE, Workload, probe_cell_id_suffix, ramp_cell_id_suffix,
};
use super::error::{ArtifactError, Result};

/// The `schema` value of every `run.json` this version writes.
pub const SCHEMA: &str = "anvil-serving.capture-run/v4";

/// The version before `cache_hygiene`, still read.
pub const SCHEMA_V3: &str = "anvil-serving.capture-run/v3";

/// The earlier version this version still reads: a cell's one run, no inherited defaults.
pub const SCHEMA_V2: &str = "anvil-serving.capture-run/v2";

/// The contents of `run.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunJson {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The campaign this run belongs to (the manifest's `campaign_id`).
    pub campaign_id: String,
    /// The arm (server configuration) that was measured.
    pub arm: Arm,
    /// The manifest cell this run executed, e.g. `headline-4k-c8`.
    pub cell_id: String,
    /// Unique id of this run (also the `run_id` column of every table).
    pub run_id: String,
    /// Which of its cell's repeats this run is (`1 of 1` for a cell recorded once).
    #[serde(default)]
    pub repeat: Repeat,
    /// Which shard of its run group this artifact is, when the run was driven from several
    /// client hosts (absent for a run from one host). Not part of the workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<super::shard::Shard>,
    /// What was asked of the server; hashed into `workload_fingerprint`.
    pub workload: Workload,
    /// `sha256:` + hex of the canonical JSON of `workload` (see [`fingerprint`]).
    pub workload_fingerprint: String,
    /// Where the requests went: the arm's replicas. Not part of the workload.
    pub topology: Topology,
    /// How prompt lengths were calibrated: which oracle counted the tokens, and how it was
    /// checked against the server's own usage.
    pub calibration: Calibration,
    /// Per API the run sent, the thinking switch that went with its requests (the JSON
    /// fields added to each body, e.g. `{"chat_template_kwargs": {"enable_thinking":
    /// false}}`), or `null` where nothing was sent (completions prompts have no chat
    /// template).
    pub thinking_switch: BTreeMap<String, Option<serde_json::Value>>,
    /// Per-run salt mixed into prompts and canaries so runs never share a prompt cache.
    /// Never part of the fingerprint.
    pub prompt_salt: String,
    /// The run's time origin: every `*_ns` column is nanoseconds since it.
    pub clock: Clock,
    /// UTC time the run started (RFC 3339).
    pub started_utc: String,
    /// UTC time the run ended (RFC 3339); absent while running.
    pub ended_utc: Option<String>,
    /// The program that recorded the run.
    pub tool: Tool,
    /// The command line, with secrets removed by [`redact_args`].
    pub command_line: Vec<String>,
    /// How the run ended.
    pub status: Status,
    /// Why the run ended this way (required for `interrupted` and `failed`).
    pub status_reason: Option<String>,
    /// Row and outcome counts.
    pub counts: Counts,
    /// What was done about the servers' prefix caches before the run (v4; absent in older
    /// files: salted, no reset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_hygiene: Option<CacheHygiene>,
    /// The GPU telemetry sources read (`--telemetry`); absent when none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<Vec<crate::artifact::telemetry::TelemetrySource>>,
}

impl RunJson {
    /// Read and check a `run.json`: refuses unknown schema versions and malformed fields,
    /// naming the file and the field.
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                ArtifactError::Missing {
                    path: path.to_owned(),
                    hint: "every artifact folder needs the run.json anvil-capture writes at start"
                        .to_owned(),
                }
            } else {
                ArtifactError::io(path, "cannot read", e)
            }
        })?;
        Self::parse(&text, path)
    }

    /// Parse `run.json` text; `path` is used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        let value: serde_json::Value = crate::json::parse_strict(text)
            .map_err(|e| ArtifactError::run_json(path, "(document)", format!("not JSON: {e}")))?;
        match value.get("schema") {
            Some(serde_json::Value::String(s))
                if s == SCHEMA || s == SCHEMA_V3 || s == SCHEMA_V2 => {}
            Some(serde_json::Value::String(s)) => {
                return Err(ArtifactError::run_json(
                    path,
                    "schema",
                    format!(
                        "unknown schema version `{s}`; this anvil reads `{SCHEMA}`, `{SCHEMA_V3}` and `{SCHEMA_V2}`: use the anvil version that wrote it"
                    ),
                ));
            }
            Some(_) => {
                return Err(ArtifactError::run_json(
                    path,
                    "schema",
                    format!("must be the string `{SCHEMA}`"),
                ));
            }
            None => {
                return Err(ArtifactError::run_json(
                    path,
                    "schema",
                    format!("missing; expected `{SCHEMA}`"),
                ));
            }
        }
        // Deserialise from the text (not the parsed value) so duplicate keys are seen.
        let mut de = serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize::<_, RunJson>(&mut de).map_err(|e| {
            let field = e.path().to_string();
            ArtifactError::run_json(path, field, e.into_inner().to_string())
        })
    }

    /// Check the invariants a finished artifact's `run.json` must hold: the fingerprint
    /// matches the workload, times parse, topology is consistent, status is final.
    pub fn check(&self, path: &Path) -> Result<()> {
        self.check_recorded(path)?;
        self.check_ended(path)
    }

    /// The checks of [`RunJson::check`] that hold while the run is still being recorded:
    /// fingerprint, identifiers, times, topology (not the final status).
    pub fn check_recorded(&self, path: &Path) -> Result<()> {
        let computed = self.workload.fingerprint();
        if self.workload_fingerprint != computed {
            return Err(ArtifactError::Fingerprint {
                path: path.to_owned(),
                stored: self.workload_fingerprint.clone(),
                computed,
            });
        }
        for (field, value) in [
            ("campaign_id", &self.campaign_id),
            ("cell_id", &self.cell_id),
            ("run_id", &self.run_id),
            ("arm.name", &self.arm.name),
            ("tool.name", &self.tool.name),
        ] {
            if value.trim().is_empty() {
                return Err(ArtifactError::run_json(path, field, "must not be empty"));
            }
        }
        if parse_utc(&self.clock.utc_origin).is_none() {
            return Err(ArtifactError::run_json(
                path,
                "clock.utc_origin",
                format!("`{}` is not an RFC 3339 time", self.clock.utc_origin),
            ));
        }
        if parse_utc(&self.started_utc).is_none() {
            return Err(ArtifactError::run_json(
                path,
                "started_utc",
                format!("`{}` is not an RFC 3339 time", self.started_utc),
            ));
        }
        let topo = &self.topology;
        if topo.replica_count as usize != topo.endpoints.len() || topo.replica_count == 0 {
            return Err(ArtifactError::run_json(
                path,
                "topology.replica_count",
                format!(
                    "is {} but {} endpoints are listed (need one endpoint per replica, at least one)",
                    topo.replica_count,
                    topo.endpoints.len()
                ),
            ));
        }
        for (i, ep) in topo.endpoints.iter().enumerate() {
            if ep.replica as usize != i {
                return Err(ArtifactError::run_json(
                    path,
                    format!("topology.endpoints[{i}].replica"),
                    format!("is {} but must equal its position {i}", ep.replica),
                ));
            }
        }
        Ok(())
    }

    /// The final status and its companions (reason, end time).
    fn check_ended(&self, path: &Path) -> Result<()> {
        match self.status {
            Status::Running => {
                return Err(ArtifactError::run_json(
                    path,
                    "status",
                    format!(
                        "is `running`: the recorder did not finish; if it is no longer running, run `anvil-capture recover {}`",
                        path.parent().unwrap_or(path).display()
                    ),
                ));
            }
            Status::Complete => {}
            Status::Interrupted | Status::Failed => {
                if self
                    .status_reason
                    .as_deref()
                    .is_none_or(|r| r.trim().is_empty())
                {
                    return Err(ArtifactError::run_json(
                        path,
                        "status_reason",
                        format!("required when status is `{}`", self.status.as_str()),
                    ));
                }
            }
        }
        match &self.ended_utc {
            Some(t) if parse_utc(t).is_some() => {}
            Some(t) => {
                return Err(ArtifactError::run_json(
                    path,
                    "ended_utc",
                    format!("`{t}` is not an RFC 3339 time"),
                ));
            }
            None => {
                return Err(ArtifactError::run_json(
                    path,
                    "ended_utc",
                    "required once the run has ended",
                ));
            }
        }
        Ok(())
    }

    /// The same run with every secret of `redactor` removed from every string it holds
    /// (server facts, URLs, notes, reasons, configuration), the fingerprint recomputed.
    pub fn redacted(self, redactor: &super::Redactor) -> Self {
        if redactor.is_empty() {
            return self;
        }
        let Ok(mut value) = serde_json::to_value(&self) else {
            return self;
        };
        redactor.json(&mut value);
        match serde_json::from_value::<RunJson>(value) {
            Ok(mut run) => {
                run.workload_fingerprint = run.workload.fingerprint();
                run
            }
            // Replacing text inside strings keeps every field's type; not reached.
            Err(_) => self,
        }
    }

    /// Serialise as pretty JSON (the on-disk form).
    pub fn to_json_pretty(&self) -> String {
        // A struct of strings, numbers and maps with string keys always serialises.
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }
}

pub use super::redact::{is_secret_name, redact_args, redact_url};
pub use crate::clock::{format_utc_ns, parse_utc, utc_now};

#[cfg(test)]
pub(crate) mod tests;
