//! The evidence files a plan names (`restoration.json`, …) are matched by file name: every
//! file name at or beneath the data folders.

use std::path::{Path, PathBuf};

use anyhow::Context;

/// Names of every file at or beneath each of `data` (sorted per folder).
pub fn evidence_files(data: &[PathBuf]) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::new();
    for dir in data {
        file_names(dir, &mut names)
            .with_context(|| format!("--data {}: listing files", dir.display()))?;
    }
    Ok(names)
}

fn file_names(dir: &Path, out: &mut Vec<String>) -> std::io::Result<()> {
    if dir.is_file() {
        if let Some(name) = dir.file_name().and_then(|n| n.to_str()) {
            out.push(name.to_owned());
        }
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    entries.sort();
    for path in entries {
        file_names(&path, out)?;
    }
    Ok(())
}
