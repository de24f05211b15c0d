//! Writing statement results as a text table, CSV or JSON (an array of objects).

use std::io::Write;

use datafusion::arrow::util::pretty::pretty_format_batches_with_schema;

use super::QueryError;
use super::exec::StatementResult;

/// Output format of `anvil sql` and `anvil summary`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A boxed text table.
    Table,
    /// CSV with a header row.
    Csv,
    /// A JSON array of objects, one per row.
    Json,
}

fn out_err(e: impl std::fmt::Display) -> QueryError {
    QueryError::Output {
        context: "writing the result".to_owned(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// Write `result` to `out` in `format`.
pub fn write_result(
    out: &mut dyn Write,
    format: Format,
    result: &StatementResult,
) -> Result<(), QueryError> {
    match format {
        Format::Table => {
            let table = pretty_format_batches_with_schema(result.schema.clone(), &result.batches)
                .map_err(out_err)?;
            writeln!(out, "{table}").map_err(out_err)?;
        }
        Format::Csv => {
            let mut writer = datafusion::arrow::csv::WriterBuilder::new()
                .with_header(true)
                .build(&mut *out);
            if result.batches.is_empty() {
                let empty =
                    datafusion::arrow::record_batch::RecordBatch::new_empty(result.schema.clone());
                writer.write(&empty).map_err(out_err)?;
            }
            for batch in &result.batches {
                writer.write(batch).map_err(out_err)?;
            }
        }
        Format::Json => {
            if result.num_rows() == 0 {
                writeln!(out, "[]").map_err(out_err)?;
            } else {
                let mut writer = datafusion::arrow::json::ArrayWriter::new(&mut *out);
                let batches: Vec<_> = result.batches.iter().collect();
                writer.write_batches(&batches).map_err(out_err)?;
                writer.finish().map_err(out_err)?;
                drop(writer);
                writeln!(out).map_err(out_err)?;
            }
        }
    }
    Ok(())
}
