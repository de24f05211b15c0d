//! The Azure LLM inference trace (`Azure/AzurePublicDataset`,
//! `data/AzureLLMInferenceTrace_{conv,code}.csv`): `TIMESTAMP,ContextTokens,GeneratedTokens`,
//! the time as `2023-11-16 18:15:46.6805900` (UTC wall clock, up to nanoseconds). No prompt
//! content or sharing is recorded: every prompt is unique.

use time::PrimitiveDateTime;
use time::macros::format_description;

use super::{Parsed, Skipped, TraceRow, csv_number, csv_records, lengths};

/// The header, as published.
pub const HEADER: [&str; 3] = ["TIMESTAMP", "ContextTokens", "GeneratedTokens"];

/// `2023-11-16 18:15:46.6805900` as nanoseconds since the Unix epoch.
fn timestamp_ns(text: &str) -> Result<i128, String> {
    let f = format_description!("[year]-[month]-[day] [hour]:[minute]:[second].[subsecond]");
    let whole = format_description!("[year]-[month]-[day] [hour]:[minute]:[second]");
    PrimitiveDateTime::parse(text, f)
        .or_else(|_| PrimitiveDateTime::parse(text, whole))
        .map(|t| t.assume_utc().unix_timestamp_nanos())
        .map_err(|_| format!("`TIMESTAMP` is `{text}`, not `YYYY-MM-DD hh:mm:ss.fffffff`"))
}

pub(crate) fn parse(text: &str) -> Parsed {
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    let mut origin: Option<i128> = None;
    for (line, record) in csv_records(text, &HEADER)? {
        let t = timestamp_ns(record.get(0).unwrap_or("")).map_err(|m| (line, m))?;
        let input: u64 = csv_number(&record, &HEADER, "ContextTokens").map_err(|m| (line, m))?;
        let output: u64 = csv_number(&record, &HEADER, "GeneratedTokens").map_err(|m| (line, m))?;
        let (input, output) = match lengths(input, output, "GeneratedTokens") {
            Ok(l) => l,
            Err(reason) => {
                skipped.push(Skipped { line, reason });
                continue;
            }
        };
        // Offsets from the first row kept, in ms: exact to the nanosecond for spans of days.
        let origin = *origin.get_or_insert(t);
        rows.push(TraceRow {
            line,
            t_ms: (t - origin) as f64 / 1e6,
            input_tokens: input,
            output_tokens: output,
            hash_ids: Vec::new(),
            session: None,
        });
    }
    Ok((rows, skipped))
}
