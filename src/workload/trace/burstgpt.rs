//! BurstGPT (`HPMLL/BurstGPT`, `data/BurstGPT_*.csv`): `Timestamp` (seconds from midnight of
//! the first day), `Model`, `Request tokens`, `Response tokens`, `Total tokens`, `Log Type`,
//! and in later releases `Session ID` (conversation mode only) and `Elapsed time`. A row
//! with 0 `Response tokens` is a request that failed in production (the publishers' own
//! note): it is left out and counted. Prompt content and sharing are not recorded.

use super::{Parsed, Skipped, TraceRow, csv_number, csv_records, lengths};

/// The leading columns every release has.
pub const HEADER: [&str; 6] = [
    "Timestamp",
    "Model",
    "Request tokens",
    "Response tokens",
    "Total tokens",
    "Log Type",
];

pub(crate) fn parse(text: &str) -> Parsed {
    let records = csv_records(text, &HEADER)?;
    let header_line = text.lines().next().unwrap_or("");
    let columns: Vec<&str> = header_line
        .trim_start_matches('\u{feff}')
        .split(',')
        .map(str::trim)
        .collect();
    let session_column = columns.iter().position(|c| *c == "Session ID");
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    for (line, record) in records {
        let t_s: f64 = csv_number(&record, &HEADER, "Timestamp").map_err(|m| (line, m))?;
        if !t_s.is_finite() || t_s < 0.0 {
            return Err((line, format!("`Timestamp` {t_s} is not a time in seconds")));
        }
        let input: u64 = csv_number(&record, &HEADER, "Request tokens").map_err(|m| (line, m))?;
        let output: u64 = csv_number(&record, &HEADER, "Response tokens").map_err(|m| (line, m))?;
        let (input, output) = match lengths(input, output, "Response tokens (failed in the trace)")
        {
            Ok(l) => l,
            Err(reason) => {
                skipped.push(Skipped { line, reason });
                continue;
            }
        };
        let session = session_column
            .and_then(|i| record.get(i))
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        rows.push(TraceRow {
            line,
            t_ms: t_s * 1000.0,
            input_tokens: input,
            output_tokens: output,
            hash_ids: Vec::new(),
            session,
        });
    }
    Ok((rows, skipped))
}
