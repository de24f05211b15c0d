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
    /// Open (create or append to) the journal at `path`, holding an exclusive lock on it
    /// while it is open: two runners never work on one campaign folder. A last line cut short
    /// by a kill is ended, so the next line stands on its own.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        use std::io::{Read, Seek, SeekFrom};
        use std::os::fd::AsRawFd;
        let mut file = File::options()
            .create(true)
            .read(true)
            .append(true)
            .open(path)?;
        // SAFETY: flock(2) on a descriptor this function owns; released when it is closed.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::WouldBlock,
                "another `anvil campaign run` is using this campaign folder (its journal is locked); wait for it, or stop it",
            ));
        }
        let len = file.metadata()?.len();
        if len > 0 {
            let mut last = [0u8; 1];
            file.seek(SeekFrom::Start(len - 1))?;
            file.read_exact(&mut last)?;
            if last[0] != b'\n' {
                file.write_all(b"\n")?;
            }
        }
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
        let bytes =
            std::fs::read(path).map_err(|e| format!("{}: cannot be read: {e}", path.display()))?;
        Ok(bytes
            .split(|b| *b == b'\n')
            .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
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
        drop(j);
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
        // The next runner's first line is not glued to the cut one.
        let mut j = Journal::open(&path).unwrap();
        j.write("campaign_started", serde_json::json!({})).unwrap();
        let lines = Journal::read(&path).unwrap();
        assert_eq!(
            lines.iter().map(step).collect::<Vec<_>>(),
            ["launched", "ready", "campaign_started"]
        );
        // A second runner is refused while the first holds the journal.
        let err = Journal::open(&path).unwrap_err();
        assert!(
            err.to_string().contains("another `anvil campaign run`"),
            "{err}"
        );
    }
}
