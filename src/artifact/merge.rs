//! Part files into final tables: list a table's complete parts, check each, and stream them
//! into its final file (memory bounded by one row group), shared by a run's finish and the
//! recovery of a killed one.

use std::fs::{self};
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use parquet::basic::Compression;

use super::error::{ArtifactError, Result};
use super::files::{
    FINAL_ROW_GROUP_BYTES, FINAL_ROW_GROUP_ROWS, write_parquet_atomically, writer_properties,
};
use super::reader::open_table;
use super::schema::Table;

/// Check that `part` is a complete part of `table` of run `run_id`; with `decode`, also read
/// every row (recovery cannot afford to fail halfway through a merge on a damaged page).
pub(super) fn check_part(part: &Path, table: Table, run_id: &str, decode: bool) -> Result<()> {
    let opened = open_table(part)?;
    let problem = if opened.table != table {
        Some(format!(
            "holds table `{}`, not `{}`",
            opened.table.name(),
            table.name()
        ))
    } else if opened.run_id.as_deref().is_some_and(|id| id != run_id) {
        Some(format!(
            "belongs to run `{}`, not `{run_id}`",
            opened.run_id.as_deref().unwrap_or_default()
        ))
    } else {
        None
    };
    if let Some(problem) = problem {
        return Err(ArtifactError::Inconsistent {
            path: part.to_owned(),
            problem,
        });
    }
    if decode {
        for batch in opened.reader()? {
            batch.map_err(|source| ArtifactError::Arrow {
                path: part.to_owned(),
                source,
            })?;
        }
    }
    Ok(())
}

/// What merging one table's parts did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeOutcome {
    /// Part files merged.
    pub parts: usize,
    /// Rows in the final file.
    pub rows: u64,
    /// Part files skipped (unreadable), with why.
    pub skipped: Vec<String>,
    /// Largest time column value seen (`t_ns` or `t_done_ns`).
    pub max_t_ns: Option<i64>,
}

/// Sorted complete part files of `table`, and leftover temporary files.
pub(super) fn list_parts(dir: &Path, table: Table) -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let parts_dir = dir.join(table.parts_dir_name());
    let mut parts = Vec::new();
    let mut temps = Vec::new();
    let entries = match fs::read_dir(&parts_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((parts, temps)),
        Err(e) => return Err(ArtifactError::io(&parts_dir, "cannot list", e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| ArtifactError::io(&parts_dir, "cannot list", e))?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_part = name.len() == "000000.parquet".len()
            && name.ends_with(".parquet")
            && name[..6].bytes().all(|b| b.is_ascii_digit());
        if is_part {
            parts.push(path);
        } else {
            temps.push(path);
        }
    }
    parts.sort();
    temps.sort();
    Ok((parts, temps))
}

/// Merge the parts of `table` into its final file and remove the parts folder.
///
/// With `lenient` (recovery), unreadable parts are skipped and reported; otherwise they are
/// an error. If the final file already exists (a merge completed before a kill), the parts
/// are simply removed. If there are no parts and no final file, an empty table is written.
pub(super) fn merge_parts(
    dir: &Path,
    table: Table,
    run_id: &str,
    compression: Compression,
    lenient: bool,
) -> Result<MergeOutcome> {
    let final_path = dir.join(table.file_name());
    let parts_dir = dir.join(table.parts_dir_name());
    let mut outcome = MergeOutcome::default();
    let (parts, temps) = list_parts(dir, table)?;
    if final_path.exists() {
        // The rename into place happens before parts are removed: the final file is whole.
        let opened = open_table(&final_path)?;
        outcome.rows = opened.num_rows;
        outcome.max_t_ns = max_time(&final_path, table)?;
        remove_dir_if_exists(&parts_dir)?;
        return Ok(outcome);
    }
    for t in &temps {
        outcome.skipped.push(format!(
            "{}: incomplete part (the writer was killed while writing it), skipped",
            t.display()
        ));
    }
    let mut readable = Vec::new();
    for part in parts {
        match check_part(&part, table, run_id, lenient) {
            Ok(()) => readable.push(part),
            Err(e) if lenient => outcome.skipped.push(format!("{e}; skipped")),
            Err(e) => return Err(e),
        }
    }
    outcome.parts = readable.len();
    let time_col = time_column(table);
    let mut max_t: Option<i64> = None;
    let batches = readable.iter().flat_map(|part| {
        let reader = open_table(part).and_then(|o| o.reader());
        let iter: Box<dyn Iterator<Item = Result<RecordBatch>>> = match reader {
            Ok(r) => Box::new(r.map(move |b| {
                b.map_err(|source| ArtifactError::Arrow {
                    path: part.clone(),
                    source,
                })
            })),
            Err(e) => Box::new(std::iter::once(Err(e))),
        };
        iter
    });
    let batches = batches.inspect(|b| {
        if let Ok(b) = b
            && let Some(col) = b.column_by_name(time_col)
        {
            let arr = col.as_primitive::<Int64Type>();
            if let Some(m) = arr.iter().flatten().max() {
                max_t = Some(max_t.map_or(m, |x| x.max(m)));
            }
        }
    });
    let props = writer_properties(
        table,
        run_id,
        compression,
        Some(FINAL_ROW_GROUP_ROWS),
        Some(FINAL_ROW_GROUP_BYTES),
    );
    outcome.rows = write_parquet_atomically(&final_path, table, props, batches, true)?;
    outcome.max_t_ns = max_t;
    remove_dir_if_exists(&parts_dir)?;
    Ok(outcome)
}

pub(super) fn time_column(table: Table) -> &'static str {
    match table {
        Table::Requests => "t_done_ns",
        Table::Events | Table::Scrapes | Table::Telemetry => "t_ns",
    }
}

pub(super) fn max_time(path: &Path, table: Table) -> Result<Option<i64>> {
    let reader = open_table(path)?.reader_with_columns(&[time_column(table)])?;
    let mut max_t: Option<i64> = None;
    for b in reader {
        let b = b.map_err(|source| ArtifactError::Arrow {
            path: path.to_owned(),
            source,
        })?;
        if let Some(m) = b
            .column(0)
            .as_primitive::<Int64Type>()
            .iter()
            .flatten()
            .max()
        {
            max_t = Some(max_t.map_or(m, |x| x.max(m)));
        }
    }
    Ok(max_t)
}

pub(super) fn remove_dir_if_exists(path: &Path) -> Result<()> {
    match fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(ArtifactError::io(path, "cannot remove", e)),
    }
}
