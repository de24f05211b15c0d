//! A query result as Rust values: [`decode`] turns every row into a typed struct (serde, by
//! column name), and the `column_*` readers take one column as `f64`, `i64` or `String` (cast
//! first, so a view may widen a type without breaking its readers).

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type};
use datafusion::error::DataFusionError;

use super::{QueryError, StatementResult};
use crate::stats::{INTERVAL_COLUMNS, STATISTICS, Stats};

/// Every row of `r` as a `T`, its fields named as the columns (a NULL or missing column is
/// `None` for an `Option` field; any other mismatch is an error naming the row). The rows go
/// through Arrow's JSON writer and serde: the views hold numbers, text and booleans, which
/// that round trip keeps exactly (floats in their shortest exact form).
pub fn decode<T: serde::de::DeserializeOwned>(r: &StatementResult) -> Result<Vec<T>, QueryError> {
    let mut writer = datafusion::arrow::json::ArrayWriter::new(Vec::new());
    for batch in &r.batches {
        writer.write(batch).map_err(DataFusionError::from)?;
    }
    writer.finish().map_err(DataFusionError::from)?;
    let bytes = writer.into_inner();
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_slice(&bytes).map_err(|e| QueryError::Sql {
        message: format!(
            "a query result does not have the columns its reader expects ({e}); this is a \
             defect of anvil, please report it"
        ),
        hint: None,
    })
}

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

/// The [`Stats`] of each row: the columns named by [`STATISTICS`] and [`INTERVAL_COLUMNS`]
/// (`cell_stats`'s).
pub fn column_stats(r: &StatementResult) -> Result<Vec<Stats>, QueryError> {
    let n = column_i64(r, STATISTICS[0])?;
    let columns = |names: &[&str]| {
        names
            .iter()
            .map(|c| column_f64(r, c))
            .collect::<Result<Vec<_>, _>>()
    };
    let (values, intervals) = (columns(&STATISTICS[1..])?, columns(&INTERVAL_COLUMNS)?);
    Ok((0..n.len())
        .map(|i| {
            let count = n[i].map_or(0, |v| u64::try_from(v).unwrap_or(0));
            Stats::from_values(
                count,
                std::array::from_fn(|k| values[k][i]),
                std::array::from_fn(|k| intervals[k][i]),
            )
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
    use datafusion::arrow::datatypes::{Field, Schema};

    use super::*;

    #[derive(Debug, PartialEq, serde::Deserialize)]
    struct Row {
        run_id: String,
        n: Option<i64>,
        x: f64,
    }

    fn result() -> StatementResult {
        let schema = Arc::new(Schema::new(vec![
            Field::new("run_id", DataType::Utf8, false),
            Field::new("n", DataType::Int64, true),
            Field::new("x", DataType::Float64, false),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(vec!["a", "b"])),
                Arc::new(Int64Array::from(vec![Some(7), None])),
                Arc::new(Float64Array::from(vec![0.1 + 0.2, 1e-300])),
            ],
        )
        .unwrap();
        StatementResult {
            schema,
            batches: vec![batch.clone(), batch],
        }
    }

    #[test]
    fn rows_decode_by_column_name_with_nulls_and_exact_floats() {
        let rows: Vec<Row> = decode(&result()).unwrap();
        assert_eq!(rows.len(), 4);
        assert_eq!(
            rows[0],
            Row {
                run_id: "a".into(),
                n: Some(7),
                x: 0.1 + 0.2
            }
        );
        assert_eq!((rows[1].n, rows[1].x), (None, 1e-300));
    }

    #[test]
    fn a_column_the_reader_needs_but_the_result_lacks_is_an_error() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Wants {
            missing: String,
        }
        let err = decode::<Wants>(&result()).unwrap_err().to_string();
        assert!(err.contains("missing"), "{err}");
    }
}
