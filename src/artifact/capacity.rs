//! `capacity.json` (`anvil-serving.capacity/v1`): each capacity search's result, written by
//! `anvil campaign run` in the campaign folder beside `restoration.json`, read by the report
//! and by `anvil validate` through the one type here, [`Capacity`].
//!
//! A search's result names what was varied between which bounds, the attainment target and
//! window, the SLOs, every probe recorded (its load, run, folder and what it attained), the
//! bracket it ended with, its status and one sentence a reader can quote. How a search
//! decides is `crate::campaign::search`'s; this is what it leaves on disk.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use crate::metric::Window;

/// The capacity searches' results, in the campaign folder.
pub const CAPACITY_JSON: &str = "capacity.json";

/// Schema of `capacity.json`.
pub const CAPACITY_SCHEMA: &str = "anvil-serving.capacity/v1";

/// The contents of `capacity.json`: one result per arm searched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Capacity {
    pub schema: String,
    pub campaign_id: String,
    pub searches: Vec<CapacityResult>,
}

impl Capacity {
    /// An empty document of `campaign_id`.
    pub fn new(campaign_id: &str) -> Self {
        Self {
            schema: CAPACITY_SCHEMA.to_owned(),
            campaign_id: campaign_id.to_owned(),
            searches: Vec::new(),
        }
    }

    /// Parse and check a `capacity.json`; the error names the field (JSON path) that does
    /// not hold.
    pub fn parse(text: &str) -> Result<Self, String> {
        let doc: Capacity =
            serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(text))
                .map_err(|e| match e.path().to_string().as_str() {
                    "." => e.inner().to_string(),
                    path => format!("{path}: {}", e.inner()),
                })?;
        if doc.schema != CAPACITY_SCHEMA {
            return Err(format!("schema: `{}` is not {CAPACITY_SCHEMA}", doc.schema));
        }
        Ok(doc)
    }

    /// Put `result` in place of the arm's earlier result, if any (other arms' kept).
    pub fn upsert(&mut self, result: CapacityResult) {
        self.searches.retain(|s| s.arm != result.arm);
        self.searches.push(result);
    }

    /// The document as written: pretty JSON and a final newline.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self)
            .unwrap_or_else(|e| unreachable!("capacity.json's types always serialise: {e}"));
        text.push('\n');
        text
    }
}

/// What a search varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Vary {
    /// Requests in flight per replica, closed loop (integers: exact bisection).
    Concurrency,
    /// Requests per second released, open loop (all replicas together).
    Rate,
}

impl Vary {
    /// Its name in the file, the journal and the report.
    pub const fn as_str(self) -> &'static str {
        match self {
            Vary::Concurrency => "concurrency",
            Vary::Rate => "rate",
        }
    }
}

impl std::fmt::Display for Vary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a search's attainment counts: requests, or for a session workload sessions (a
/// session attains when every turn does; the load is then sessions in flight per replica,
/// or sessions arriving per second).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Judged {
    #[default]
    Requests,
    Sessions,
}

impl Judged {
    /// `requests` or `sessions`: the unit attainment counts and a load is stated in.
    pub const fn as_str(self) -> &'static str {
        match self {
            Judged::Requests => "requests",
            Judged::Sessions => "sessions",
        }
    }

    fn is_requests(&self) -> bool {
        *self == Judged::Requests
    }
}

/// How a search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CapacityStatus {
    /// The bracket's intervals lie on either side of the target.
    #[serde(rename = "resolved")]
    Resolved,
    /// The bracket's intervals straddle the target.
    #[serde(rename = "not resolved at this sample size")]
    NotResolved,
    /// The search stopped before its bracket: an interrupt, a stop rule, a probe that was
    /// not recorded.
    #[serde(rename = "incomplete")]
    Incomplete,
}

impl CapacityStatus {
    /// Its words in the file and the report.
    pub const fn as_str(self) -> &'static str {
        match self {
            CapacityStatus::Resolved => "resolved",
            CapacityStatus::NotResolved => "not resolved at this sample size",
            CapacityStatus::Incomplete => "incomplete",
        }
    }
}

impl std::fmt::Display for CapacityStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One recorded probe: its load, which run of that load it is, and what it attained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observation {
    pub load: f64,
    pub repeat: u32,
    pub run_id: String,
    pub dir: PathBuf,
    /// Requests (a session search: sessions) in the window that succeeded and met every SLO.
    pub attained: u64,
    /// Measured requests (a session search: sessions) in the window.
    pub requests: u64,
    /// Goodput over the window (tok/s of the attained requests, the `goodput` view's
    /// `goodput_tps`), when the probe's usage reported tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_tps: Option<f64>,
}

/// The bracket a search ended with: the largest load that met the target and the smallest
/// that did not (either absent when the range holds none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bracket {
    pub passing: Option<Side>,
    pub failing: Option<Side>,
    /// The passing side's interval lies above the target and the failing side's below.
    pub resolved: bool,
}

/// One side of the bracket: a load, its runs, and their pooled attainment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Side {
    pub load: f64,
    pub runs: Vec<Observation>,
    pub attained: u64,
    pub requests: u64,
    pub share: f64,
    /// The exact 95% interval of the share.
    pub low: f64,
    pub high: f64,
}

/// A per-GPU figure at the capacity over the passing load's runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerGpu {
    /// tok/s per GPU, the mean over the runs.
    pub mean: f64,
    /// Its Student t 95% interval across runs; absent with one run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high: Option<f64>,
    /// The runs it is the mean of.
    pub runs: u32,
}

/// What `capacity.json` says of one arm's search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapacityResult {
    pub arm: String,
    pub vary: Vary,
    pub min: f64,
    pub max: f64,
    pub target: f64,
    /// The requests attainment is computed over.
    pub window: Window,
    /// What attainment counts: requests, or sessions for a session workload's search (the
    /// probes' and bracket sides' `attained` and `requests` then count sessions).
    #[serde(default, skip_serializing_if = "Judged::is_requests")]
    pub judged: Judged,
    pub slo: Vec<String>,
    /// Measured requests per probe, when the search fixed them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_probe: Option<u64>,
    /// Requests after the first wave per probe, when the search gave those instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_requests: Option<u64>,
    pub repeats: u32,
    /// The arm's replicas (a load is requests in flight per replica).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u32>,
    /// The GPUs the arm uses (its `gpus` key, else its topology), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<u32>,
    pub status: CapacityStatus,
    /// The largest load that met the target, when resolved and one did.
    pub capacity: Option<f64>,
    /// Concurrency searches with the GPUs known: the capacity as requests in flight per GPU
    /// (capacity × replicas ÷ GPUs), the figure arms of different topologies are ranked by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_per_gpu: Option<f64>,
    /// Goodput per GPU at the capacity: the mean over the passing load's runs, with its
    /// across-run interval when there are two runs or more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_per_gpu: Option<PerGpu>,
    pub bracket: Option<Bracket>,
    /// Every probe, in the order recorded.
    pub probes: Vec<Observation>,
    /// One sentence a reader can quote.
    pub verdict: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/sample-data/2026-09-04-qwen38-27b-pro6000-possibility/capacity.json"
    );

    #[test]
    fn the_sample_file_reads_and_writes_back_byte_for_byte() {
        let text = std::fs::read_to_string(SAMPLE).unwrap();
        let doc = Capacity::parse(&text).unwrap();
        // The three topologies' searches, each resolved.
        assert_eq!(doc.searches.len(), 3);
        assert!(
            doc.searches
                .iter()
                .all(|s| s.status == CapacityStatus::Resolved && s.capacity_per_gpu.is_some())
        );
        assert_eq!(doc.to_json(), text);
    }

    #[test]
    fn what_does_not_hold_is_named_by_its_path() {
        let text = std::fs::read_to_string(SAMPLE).unwrap();
        let bad = text.replacen("\"status\": \"resolved\"", "\"status\": \"done\"", 1);
        let e = Capacity::parse(&bad).unwrap_err();
        assert!(
            e.starts_with("searches[0].status: unknown variant `done`"),
            "{e}"
        );
        let e = Capacity::parse(&text.replacen(CAPACITY_SCHEMA, "x/v9", 1)).unwrap_err();
        assert_eq!(e, "schema: `x/v9` is not anvil-serving.capacity/v1");
        assert!(Capacity::parse("[").unwrap_err().contains("EOF"));
    }

    #[test]
    fn a_search_s_new_result_replaces_only_its_own() {
        let text = std::fs::read_to_string(SAMPLE).unwrap();
        let mut doc = Capacity::parse(&text).unwrap();
        let before = doc.searches.len();
        let mut tp1 = doc
            .searches
            .iter()
            .find(|s| s.arm == "TP1")
            .unwrap()
            .clone();
        tp1.verdict = "again".into();
        doc.upsert(tp1);
        let mut new = doc.searches[0].clone();
        new.arm = "TP4".into();
        new.verdict = "new".into();
        doc.upsert(new);
        let verdict = |arm: &str| {
            doc.searches
                .iter()
                .filter(|s| s.arm == arm)
                .map(|s| s.verdict.as_str())
                .collect::<Vec<_>>()
        };
        // TP1's result replaced (once), TP4's added, the others kept as they were.
        assert_eq!(verdict("TP1"), ["again"]);
        assert_eq!(verdict("TP4"), ["new"]);
        assert_eq!(doc.searches.len(), before + 1);
        assert!(
            verdict("TP2")[0].starts_with("capacity 33"),
            "{:?}",
            verdict("TP2")
        );
    }
}
