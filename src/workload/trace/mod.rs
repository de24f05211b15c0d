//! Timed traces of production traffic, read as their publishers wrote them, into one
//! [`Trace`]: a row per request with its scheduled time, its input and output lengths and,
//! where the format has them, the ids of its shared prompt blocks.
//!
//! One file per published format:
//! - [`mooncake`]: Mooncake's JSONL (`timestamp` in ms, `input_length`, `output_length`,
//!   `hash_ids` of 512-token blocks; equal ids are the same content);
//! - [`azure`]: the Azure LLM inference trace CSV (`TIMESTAMP`, `ContextTokens`,
//!   `GeneratedTokens`);
//! - [`burstgpt`]: BurstGPT's CSV (`Timestamp` in seconds, `Model`, `Request tokens`,
//!   `Response tokens`, `Total tokens`, `Log Type`, and in its later releases `Session ID`
//!   and `Elapsed time`).
//!
//! [`replay`] turns a trace's rows into requests: send times and prompts whose shared
//! blocks are byte-identical.
//!
//! Times are kept as offsets from the trace's earliest row, in file order (a replay sorts
//! nothing away: rows out of time order are sent at their own times). A row the trace
//! itself marks as failed (BurstGPT's zero `Response tokens`) or that asks for nothing (zero
//! input or output tokens) is left out and counted in [`Trace::skipped`] with the reason,
//! since no request can ask for zero tokens. The file's SHA-256 is kept: it belongs to the
//! workload's fingerprint, so two different traces never match.

pub mod azure;
pub mod burstgpt;
pub mod mooncake;
pub mod replay;

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The published trace formats anvil reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceFormat {
    Mooncake,
    Azure,
    Burstgpt,
}

impl TraceFormat {
    /// Every format, in the order the error messages name them.
    pub const ALL: [TraceFormat; 3] = [
        TraceFormat::Mooncake,
        TraceFormat::Azure,
        TraceFormat::Burstgpt,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Mooncake => "mooncake",
            TraceFormat::Azure => "azure",
            TraceFormat::Burstgpt => "burstgpt",
        }
    }

    /// The format a file's first line announces: a JSON object is Mooncake's JSONL, a CSV
    /// header is Azure's or BurstGPT's.
    pub fn detect(first_line: &str) -> Option<TraceFormat> {
        let line = first_line.trim_start_matches('\u{feff}').trim();
        if line.starts_with('{') {
            return Some(TraceFormat::Mooncake);
        }
        let header: Vec<&str> = line.split(',').map(str::trim).collect();
        if header.starts_with(&azure::HEADER) {
            Some(TraceFormat::Azure)
        } else if header.starts_with(&burstgpt::HEADER) {
            Some(TraceFormat::Burstgpt)
        } else {
            None
        }
    }
}

impl std::str::FromStr for TraceFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        TraceFormat::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| format!("unknown trace format `{s}`: use mooncake, azure or burstgpt"))
    }
}

/// One request of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRow {
    /// 1-based line of the file the row came from (the header is line 1 of a CSV).
    pub line: usize,
    /// When to send it: milliseconds after the trace's earliest row.
    pub t_ms: f64,
    /// Prompt tokens the trace recorded.
    pub input_tokens: u32,
    /// Generated tokens the trace recorded: the length to ask for.
    pub output_tokens: u32,
    /// Ids of the prompt's blocks of [`Trace::block_tokens`] tokens, in order (Mooncake);
    /// empty where the format records no sharing.
    pub hash_ids: Vec<u64>,
    /// The conversation the row belongs to, where the trace says (BurstGPT's `Session ID`).
    pub session: Option<String>,
}

/// A row left out of the replay and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub line: usize,
    pub reason: String,
}

/// A trace as read.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    pub path: PathBuf,
    pub format: TraceFormat,
    /// SHA-256 of the file's bytes, hex.
    pub sha256: String,
    /// Tokens per shared block (`hash_ids`): 512 for Mooncake; 0 where the format has none.
    pub block_tokens: u32,
    pub rows: Vec<TraceRow>,
    pub skipped: Vec<Skipped>,
}

impl Trace {
    /// The trace's span, first to last scheduled time, in milliseconds.
    pub fn span_ms(&self) -> f64 {
        self.rows.iter().map(|r| r.t_ms).fold(0.0, f64::max)
    }

    /// Block ids used by more than one row: the content the trace shares.
    pub fn shared_block_ids(&self) -> std::collections::BTreeSet<u64> {
        let mut seen = std::collections::BTreeSet::new();
        let mut shared = std::collections::BTreeSet::new();
        for id in self.rows.iter().flat_map(|r| r.hash_ids.iter().copied()) {
            if !seen.insert(id) {
                shared.insert(id);
            }
        }
        shared
    }

    /// The share of all prompt blocks that repeat a block an earlier row already sent: the
    /// cacheable share an unbounded prefix cache would hit, by blocks.
    pub fn repeated_block_share(&self) -> Option<f64> {
        let mut seen = std::collections::HashSet::new();
        let (mut total, mut repeated) = (0u64, 0u64);
        for row in &self.rows {
            for id in &row.hash_ids {
                total += 1;
                if !seen.insert(*id) {
                    repeated += 1;
                }
            }
        }
        (total > 0).then(|| repeated as f64 / total as f64)
    }
}

/// Why a trace could not be read: the file, the line and the field, and what to do.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("trace {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "trace {path}: the first line is neither a Mooncake JSON object nor an Azure \
         (TIMESTAMP,ContextTokens,GeneratedTokens) or BurstGPT (Timestamp,Model,Request \
         tokens,Response tokens,Total tokens,Log Type) header; name the format with \
         `format` if the file has another header"
    )]
    Unknown { path: PathBuf },
    #[error("trace {path}, line {line}: {message}")]
    Row {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("trace {path}: no row to replay ({skipped} left out: {first})")]
    Empty {
        path: PathBuf,
        skipped: usize,
        first: String,
    },
}

/// Read a trace file, its format named or detected from its first line.
pub fn read(path: &Path, format: Option<TraceFormat>) -> Result<Trace, TraceError> {
    let bytes = std::fs::read(path).map_err(|source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse(path, &bytes, format)
}

/// Parse a trace's bytes (`path` names it in errors).
pub fn parse(path: &Path, bytes: &[u8], format: Option<TraceFormat>) -> Result<Trace, TraceError> {
    let text = std::str::from_utf8(bytes).map_err(|e| TraceError::Row {
        path: path.to_path_buf(),
        line: 1 + bytes[..e.valid_up_to()]
            .iter()
            .filter(|b| **b == b'\n')
            .count(),
        message: "not UTF-8 text".to_owned(),
    })?;
    let first = text.lines().next().unwrap_or("");
    let format = match format.or_else(|| TraceFormat::detect(first)) {
        Some(f) => f,
        None => {
            return Err(TraceError::Unknown {
                path: path.to_path_buf(),
            });
        }
    };
    let row_error = |line: usize, message: String| TraceError::Row {
        path: path.to_path_buf(),
        line,
        message,
    };
    let parsed = match format {
        TraceFormat::Mooncake => mooncake::parse(text),
        TraceFormat::Azure => azure::parse(text),
        TraceFormat::Burstgpt => burstgpt::parse(text),
    }
    .map_err(|(line, message)| row_error(line, message))?;
    let (mut rows, skipped) = parsed;
    if rows.is_empty() {
        return Err(TraceError::Empty {
            path: path.to_path_buf(),
            skipped: skipped.len(),
            first: skipped
                .first()
                .map(|s| format!("line {}: {}", s.line, s.reason))
                .unwrap_or_else(|| "the file has no rows".to_owned()),
        });
    }
    let start = rows.iter().map(|r| r.t_ms).fold(f64::INFINITY, f64::min);
    for r in &mut rows {
        r.t_ms -= start;
    }
    Ok(Trace {
        path: path.to_path_buf(),
        format,
        sha256: hex::encode(Sha256::digest(bytes)),
        block_tokens: if format == TraceFormat::Mooncake {
            mooncake::BLOCK_TOKENS
        } else {
            0
        },
        rows,
        skipped,
    })
}

/// What a format's parser returns: rows (times not yet offset) and skipped rows, or the
/// 1-based line and message of the first error.
pub(crate) type Parsed = Result<(Vec<TraceRow>, Vec<Skipped>), (usize, String)>;

/// A row's lengths, or why it is left out: no request can ask for zero tokens.
pub(crate) fn lengths(input: u64, output: u64, what_output: &str) -> Result<(u32, u32), String> {
    if input == 0 {
        return Err("0 input tokens: nothing to send".to_owned());
    }
    if output == 0 {
        return Err(format!("0 {what_output}: nothing to ask for"));
    }
    let input = u32::try_from(input).map_err(|_| format!("{input} input tokens: too many"))?;
    let output = u32::try_from(output).map_err(|_| format!("{output} output tokens: too many"))?;
    Ok((input, output))
}

/// Read one CSV file's records with the `csv` crate: each record with its 1-based line.
pub(crate) fn csv_records(
    text: &str,
    header: &[&str],
) -> Result<Vec<(usize, csv::StringRecord)>, (usize, String)> {
    let text = text.trim_start_matches('\u{feff}');
    // The lines records start on: these formats hold one record per line, and the reader
    // skips blank lines as this does (the crate's own positions drift across CRLF ends).
    let mut lines = text
        .lines()
        .enumerate()
        .skip(1)
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, _)| i + 1);
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .flexible(false)
        .from_reader(text.as_bytes());
    let found = reader
        .headers()
        .map_err(|e| (1, format!("unreadable header: {e}")))?
        .clone();
    for (i, want) in header.iter().enumerate() {
        if found.get(i) != Some(want) {
            return Err((
                1,
                format!(
                    "header column {} is `{}`, expected `{want}` (the header is `{}`)",
                    i + 1,
                    found.get(i).unwrap_or(""),
                    found.iter().collect::<Vec<_>>().join(",")
                ),
            ));
        }
    }
    let mut out = Vec::new();
    loop {
        let line = lines.next().unwrap_or(0);
        let mut record = csv::StringRecord::new();
        match reader.read_record(&mut record) {
            Ok(true) => out.push((line, record)),
            Ok(false) => return Ok(out),
            Err(e) => return Err((line, format!("{e}"))),
        }
    }
}

/// Field `name` of a CSV record as a number.
pub(crate) fn csv_number<T: std::str::FromStr>(
    record: &csv::StringRecord,
    headers: &[&str],
    name: &str,
) -> Result<T, String> {
    let i = headers
        .iter()
        .position(|h| *h == name)
        .unwrap_or(usize::MAX);
    let v = record.get(i).unwrap_or("");
    v.parse::<T>()
        .map_err(|_| format!("`{name}` is `{v}`, not a number"))
}

#[cfg(test)]
mod tests;
