//! The campaign journal (`campaign-journal.jsonl`): append-only, one JSON object per line per
//! step (`campaign_started`, `launched`, `ready`, `not_ready`, `recording`, `recorded`,
//! `failed`, `died`, `stop_rule`, `stopped`, `skipped`, `superseded`, `interrupted`,
//! `fingerprint`, `restored`, `not_restored`, `campaign_ended`, …), each with its UTC time.
//! Every line is written and synced before the step it reports goes on, so a runner killed
//! at any point leaves a journal that says how far it got; `--resume` reads it back.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// The journal's file name in the campaign folder.
pub const JOURNAL: &str = "campaign-journal.jsonl";

/// An open journal.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: File,
}

impl Journal {
    /// Open (create or append to) the journal at `path`.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = File::options().create(true).append(true).open(path)?;
        Ok(Self {
            path: path.to_owned(),
            file,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one step: `{"t": …, "step": step, …fields}`, synced to disk.
    pub fn write(&mut self, step: &str, fields: Value) -> std::io::Result<()> {
        let mut line = Map::new();
        line.insert("t".into(), Value::from(crate::clock::utc_now()));
        line.insert("step".into(), Value::from(step));
        if let Value::Object(more) = fields {
            line.extend(more);
        }
        let mut text = Value::Object(line).to_string();
        text.push('\n');
        self.file.write_all(text.as_bytes())?;
        self.file.sync_data()
    }

    /// Every complete line of the journal at `path` (a line cut short by a kill is skipped).
    pub fn read(path: &Path) -> Result<Vec<Value>, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot be read: {e}", path.display()))?;
        Ok(text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v.get("step").is_some())
            .collect())
    }
}

/// The `step` of a journal line.
pub fn step(line: &Value) -> &str {
    line.get("step").and_then(Value::as_str).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_append_and_a_cut_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(JOURNAL);
        let mut j = Journal::open(&path).unwrap();
        j.write("launched", serde_json::json!({"arm": "K4", "pids": [1]}))
            .unwrap();
        drop(j);
        let mut j = Journal::open(&path).unwrap();
        j.write("ready", serde_json::json!({"arm": "K4"})).unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"t\": \"2026")
            .unwrap();
        let lines = Journal::read(&path).unwrap();
        assert_eq!(
            lines.iter().map(step).collect::<Vec<_>>(),
            ["launched", "ready"]
        );
        assert_eq!(lines[0]["arm"], "K4");
    }
}
