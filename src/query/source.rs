//! Finding the artifacts to query: every folder holding `run.json` beneath each `--data`
//! directory, with the Parquet files of each table (the final file, or the complete part
//! files of a run still being recorded).

use std::fs;
use std::path::{Path, PathBuf};

use crate::artifact::{RUN_JSON, RunJson, Table};

use super::QueryError;

/// One artifact folder and the files of its tables.
#[derive(Debug, Clone)]
pub struct ArtifactSource {
    pub dir: PathBuf,
    pub run: RunJson,
    /// Parquet files per table, in [`Table::ALL`] order.
    pub files: [Vec<PathBuf>; 3],
}

impl ArtifactSource {
    /// The files of `table`.
    pub fn files(&self, table: Table) -> &[PathBuf] {
        &self.files[table as usize]
    }

    /// Read `dir/run.json`, list the table files and check them with the checks of `anvil
    /// validate` ([`crate::artifact::validate`]), so that nothing computes figures over a
    /// damaged or mixed artifact: a finished artifact is validated whole (run.json and its
    /// fingerprint, each table's footer, version, columns and run id, the counts); a run still
    /// being recorded (its tables only in `*.parts`) has run.json and every part file checked.
    pub fn open(dir: &Path) -> Result<Self, QueryError> {
        let refused = |e: crate::artifact::ArtifactError| QueryError::Artifact {
            dir: dir.to_owned(),
            message: e.to_string(),
        };
        let run_path = dir.join(RUN_JSON);
        let run = RunJson::read(&run_path).map_err(refused)?;
        let files = Table::ALL.map(|table| table_files(dir, table));
        let finished = Table::ALL
            .iter()
            .all(|table| dir.join(table.file_name()).is_file());
        // Only a run whose run.json says it is still being recorded is read from its parts; a
        // finished one is validated whole (a missing table with an empty parts folder beside
        // it is a damaged artifact, not a live one).
        let recording = !finished
            && run.status == crate::artifact::Status::Running
            && Table::ALL
                .iter()
                .any(|table| dir.join(table.parts_dir_name()).is_dir());
        if recording && !crate::artifact::files::writer_alive(dir) {
            // Killed and not yet recovered: refused as `anvil validate` refuses it.
            return Err(QueryError::Artifact {
                dir: dir.to_owned(),
                message: format!(
                    "{}: status: is `running` but no recorder is writing it (it was killed): run \
                     `anvil-capture recover {}`, then read it",
                    run_path.display(),
                    dir.display()
                ),
            });
        }
        if recording {
            run.check_recorded(&run_path).map_err(refused)?;
            for path in files.iter().flatten() {
                let table = crate::artifact::open_table(path).map_err(refused)?;
                table.check_run(&run.run_id).map_err(refused)?;
            }
        } else {
            crate::artifact::validate(dir).map_err(refused)?;
        }
        Ok(Self {
            dir: dir.to_owned(),
            run,
            files,
        })
    }
}

/// The final `<table>.parquet` if present; otherwise the complete parts
/// (`<table>.parts/*.parquet`, never the `_*.tmp` being written), in name order.
fn table_files(dir: &Path, table: Table) -> Vec<PathBuf> {
    let final_file = dir.join(table.file_name());
    if final_file.is_file() {
        return vec![final_file];
    }
    let mut parts: Vec<PathBuf> = fs::read_dir(dir.join(table.parts_dir_name()))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "parquet")
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| !n.starts_with('_'))
        })
        .collect();
    parts.sort();
    parts
}

/// Every artifact folder at or beneath each of `roots`, sorted by path. A root that does
/// not exist is an error; a root without artifacts gives none.
pub fn find_artifacts(roots: &[PathBuf]) -> Result<Vec<ArtifactSource>, QueryError> {
    let mut dirs = Vec::new();
    for root in roots {
        if !root.is_dir() {
            return Err(QueryError::DataDir {
                dir: root.clone(),
                problem: if root.exists() {
                    "is not a directory".to_owned()
                } else {
                    "does not exist".to_owned()
                },
            });
        }
        collect_dirs(root, &mut dirs).map_err(|(dir, e)| QueryError::DataDir {
            dir,
            problem: format!("cannot be read: {e}"),
        })?;
    }
    dirs.sort();
    dirs.dedup();
    let sources = dirs
        .iter()
        .map(|d| ArtifactSource::open(d))
        .collect::<Result<Vec<_>, _>>()?;
    let mut seen = std::collections::BTreeMap::new();
    for s in &sources {
        if let Some(first) = seen.insert(s.run.run_id.clone(), s.dir.clone()) {
            return Err(QueryError::DuplicateRun {
                run_id: s.run.run_id.clone(),
                first,
                second: s.dir.clone(),
            });
        }
    }
    Ok(sources)
}

/// Whether a folder is hidden (its name starts with `.`): not searched for artifacts or
/// evidence. A campaign keeps the attempts it superseded there (`.superseded/`).
pub fn is_hidden(dir: &Path) -> bool {
    dir.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with('.'))
}

/// Folders holding `run.json` under `dir` (an artifact folder's own subfolders, such as its
/// `*.parts`, are not searched further).
fn collect_dirs(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), (PathBuf, std::io::Error)> {
    if dir.join(RUN_JSON).is_file() {
        out.push(dir.to_owned());
        return Ok(());
    }
    let entries = fs::read_dir(dir).map_err(|e| (dir.to_owned(), e))?;
    let mut subdirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| (dir.to_owned(), e))?;
        let path = entry.path();
        if entry.file_type().map_err(|e| (path.clone(), e))?.is_dir() {
            subdirs.push(path);
        }
    }
    subdirs.sort();
    for sub in subdirs.iter().filter(|d| !is_hidden(d)) {
        collect_dirs(sub, out)?;
    }
    Ok(())
}
