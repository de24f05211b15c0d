//! Parquet columns as polars reads them: one file's chosen columns as a frame, and a column
//! as a vector of options (the independent recomputation's reading layer).

use std::path::Path;

use polars_core::prelude::*;
use polars_io::prelude::{ParquetReader, SerReader};

/// One Parquet file's `columns` as a polars frame (polars' own reader, eager).
pub fn read(path: &Path, columns: &[&str]) -> PolarsResult<DataFrame> {
    let file = std::fs::File::open(path)
        .map_err(|e| PolarsError::ComputeError(format!("{}: {e}", path.display()).into()))?;
    ParquetReader::new(file)
        .with_columns(Some(columns.iter().map(|c| c.to_string()).collect()))
        .finish()
}

/// Column `name` as integers (cast from whatever integer type it has).
pub fn i64_column(df: &DataFrame, name: &str) -> PolarsResult<Vec<Option<i64>>> {
    Ok(df
        .column(name)?
        .cast(&DataType::Int64)?
        .i64()?
        .iter()
        .collect())
}

/// Column `name` as strings.
pub fn str_column(df: &DataFrame, name: &str) -> PolarsResult<Vec<Option<String>>> {
    Ok(df
        .column(name)?
        .str()?
        .iter()
        .map(|s| s.map(str::to_owned))
        .collect())
}
