//! Writing statement results as a text table, CSV or JSON (an array of objects).
//!
//! CSV has no nested values: a list, struct or map column (e.g. `foreign_canaries`) is
//! written as each value's JSON text, `["ANV-0123456789ab"]`, empty for NULL.

use std::io::Write;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::json::LineDelimitedWriter;
use datafusion::arrow::record_batch::RecordBatch;
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

/// A failed write as an I/O error that keeps its kind (a closed pipe stays `BrokenPipe`,
/// which the edge treats as success), whether it came from `write!` or an Arrow writer.
fn out_err(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> QueryError {
    let source = match e.into().downcast::<std::io::Error>() {
        Ok(io) => *io,
        Err(other) => match other.downcast::<datafusion::arrow::error::ArrowError>() {
            Ok(arrow) => match *arrow {
                datafusion::arrow::error::ArrowError::IoError(text, io) => {
                    std::io::Error::new(io.kind(), text)
                }
                arrow => std::io::Error::other(arrow.to_string()),
            },
            Err(other) => std::io::Error::other(other.to_string()),
        },
    };
    QueryError::Output {
        context: "writing the result".to_owned(),
        source,
    }
}

/// Text for a terminal: control characters other than line ends and tabs (an escape
/// sequence a model streamed, a carriage return) become U+FFFD, one column wide like the
/// character they replace, so recorded text can neither drive the terminal nor misalign a
/// table. CSV and JSON keep the recorded bytes.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if !text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return std::borrow::Cow::Borrowed(text);
    }
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                '\u{fffd}'
            } else {
                c
            }
        })
        .collect()
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
            writeln!(out, "{}", printable(&table.to_string())).map_err(out_err)?;
        }
        Format::Csv => {
            let mut writer = datafusion::arrow::csv::WriterBuilder::new()
                .with_header(true)
                .build(&mut *out);
            if result.batches.is_empty() {
                let empty = RecordBatch::new_empty(result.schema.clone());
                writer.write(&nested_as_json(&empty)?).map_err(out_err)?;
            }
            for batch in &result.batches {
                writer.write(&nested_as_json(batch)?).map_err(out_err)?;
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

/// `batch` with every nested column replaced by the JSON text of its values (NULL stays
/// NULL), so that the CSV writer, which has no nested values, can write it.
fn nested_as_json(batch: &RecordBatch) -> Result<RecordBatch, QueryError> {
    let schema = batch.schema();
    if !schema.fields().iter().any(|f| f.data_type().is_nested()) {
        return Ok(batch.clone());
    }
    let mut fields = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        if !field.data_type().is_nested() {
            fields.push(field.as_ref().clone());
            columns.push(column.clone());
            continue;
        }
        // One JSON object per row, holding the value under the column's name (absent when
        // NULL).
        let single = RecordBatch::try_new(
            Arc::new(Schema::new(vec![field.as_ref().clone()])),
            vec![column.clone()],
        )
        .map_err(out_err)?;
        let mut writer = LineDelimitedWriter::new(Vec::new());
        writer.write(&single).map_err(out_err)?;
        writer.finish().map_err(out_err)?;
        let lines = String::from_utf8(writer.into_inner()).map_err(out_err)?;
        let values = lines
            .lines()
            .map(|line| {
                let object: serde_json::Value = serde_json::from_str(line).map_err(out_err)?;
                Ok(object.get(field.name()).map(|value| value.to_string()))
            })
            .collect::<Result<StringArray, QueryError>>()?;
        fields.push(Field::new(field.name(), DataType::Utf8, true));
        columns.push(Arc::new(values));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(out_err)
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{ListBuilder, StringBuilder};

    use super::*;
    use crate::query::exec::StatementResult;

    #[test]
    fn terminal_text_has_no_control_characters() {
        assert_eq!(
            printable("a\u{1b}[31mred\r\n\tb"),
            "a\u{fffd}[31mred\u{fffd}\n\tb"
        );
        assert!(matches!(
            printable("plain\n"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn csv_writes_lists_as_json_text() {
        let mut lists = ListBuilder::new(StringBuilder::new());
        lists.append_value([Some("ANV-0123456789ab"), Some("a,\"b")]);
        lists.append_value::<[Option<&str>; 0], _>([]);
        lists.append_null();
        let lists: ArrayRef = Arc::new(lists.finish());
        let ids: ArrayRef = Arc::new(StringArray::from(vec!["r1", "r2", "r3"]));
        let batch = RecordBatch::try_from_iter([("run_id", ids), ("foreign", lists)]).unwrap();
        let result = StatementResult {
            schema: batch.schema(),
            batches: vec![batch],
        };
        let mut out = Vec::new();
        write_result(&mut out, Format::Csv, &result).unwrap();
        // JSON ["ANV-0123456789ab","a,\"b"], quoted for CSV; an empty list; NULL empty.
        let expected = r#"run_id,foreign
r1,"[""ANV-0123456789ab"",""a,\""b""]"
r2,[]
r3,
"#;
        assert_eq!(String::from_utf8(out).unwrap(), expected);
    }
}
