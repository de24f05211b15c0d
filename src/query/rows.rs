//! Columns of a query result as Rust values: the one place that turns Arrow arrays of a
//! [`StatementResult`] into `f64`, `i64` and `String` (cast first, so a view may widen a
//! type without breaking its readers).

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type};
use datafusion::error::DataFusionError;

use super::{QueryError, StatementResult};
use crate::stats::{STATISTICS, Stats};

/// Column `name` as `f64`s (null as `None`).
pub fn column_f64(r: &StatementResult, name: &str) -> Result<Vec<Option<f64>>, QueryError> {
    let mut out = Vec::with_capacity(r.num_rows());
    for b in &r.batches {
        let col = b.column_by_name(name).ok_or_else(|| missing(name))?;
        let col = cast(col, &DataType::Float64).map_err(DataFusionError::from)?;
        out.extend(col.as_primitive::<Float64Type>().iter());
    }
    Ok(out)
}

/// Column `name` as `i64`s (null as `None`).
pub fn column_i64(r: &StatementResult, name: &str) -> Result<Vec<Option<i64>>, QueryError> {
    let mut out = Vec::with_capacity(r.num_rows());
    for b in &r.batches {
        let col = b.column_by_name(name).ok_or_else(|| missing(name))?;
        let col = cast(col, &DataType::Int64).map_err(DataFusionError::from)?;
        out.extend(col.as_primitive::<Int64Type>().iter());
    }
    Ok(out)
}

/// Column `name` as text (null as the empty string).
pub fn column_str(r: &StatementResult, name: &str) -> Result<Vec<String>, QueryError> {
    let mut out = Vec::with_capacity(r.num_rows());
    for b in &r.batches {
        let col = b.column_by_name(name).ok_or_else(|| missing(name))?;
        let col = cast(col, &DataType::Utf8).map_err(DataFusionError::from)?;
        let col = col.as_string::<i32>();
        out.extend((0..col.len()).map(|i| {
            if col.is_null(i) {
                String::new()
            } else {
                col.value(i).to_owned()
            }
        }));
    }
    Ok(out)
}

fn missing(name: &str) -> QueryError {
    QueryError::Sql {
        message: format!("column `{name}` missing from the query result"),
        hint: None,
    }
}

/// The [`Stats`] of each row: the columns named by [`STATISTICS`] (`cell_stats`'s).
pub fn column_stats(r: &StatementResult) -> Result<Vec<Stats>, QueryError> {
    let n = column_i64(r, STATISTICS[0])?;
    let values = STATISTICS[1..]
        .iter()
        .map(|c| column_f64(r, c))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((0..n.len())
        .map(|i| {
            let count = n[i].map_or(0, |v| u64::try_from(v).unwrap_or(0));
            Stats::from_values(count, std::array::from_fn(|k| values[k][i]))
        })
        .collect())
}
