//! Mooncake's trace JSONL (`kvcache-ai/Mooncake`, `FAST25-release/traces/*.jsonl`): one JSON
//! object per line, `{"timestamp": ms, "input_length": tokens, "output_length": tokens,
//! "hash_ids": [...]}`. `hash_ids` names the prompt's 512-token blocks in order; equal ids
//! are the same content (a shared system prompt, an earlier turn), so a replay realises them
//! as byte-identical blocks. The last block may be partial: a row has
//! ⌈input_length ÷ 512⌉ ids.

use serde::Deserialize;

use super::{Parsed, Skipped, TraceRow, lengths};

/// Tokens per `hash_ids` block.
pub const BLOCK_TOKENS: u32 = 512;

#[derive(Deserialize)]
struct Row {
    timestamp: f64,
    input_length: u64,
    output_length: u64,
    #[serde(default)]
    hash_ids: Vec<u64>,
}

pub(crate) fn parse(text: &str) -> Parsed {
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let line = line.trim_start_matches('\u{feff}').trim();
        if line.is_empty() {
            continue;
        }
        let row: Row = serde_json::from_str(line).map_err(|e| {
            (
                n,
                format!("not a Mooncake row ({{\"timestamp\", \"input_length\", \"output_length\", \"hash_ids\"}}): {e}"),
            )
        })?;
        if !row.timestamp.is_finite() || row.timestamp < 0.0 {
            return Err((
                n,
                format!("`timestamp` {} is not a time in ms", row.timestamp),
            ));
        }
        let (input, output) = match lengths(row.input_length, row.output_length, "output_length") {
            Ok(l) => l,
            Err(reason) => {
                skipped.push(Skipped { line: n, reason });
                continue;
            }
        };
        let blocks = input.div_ceil(BLOCK_TOKENS) as usize;
        if !row.hash_ids.is_empty() && row.hash_ids.len() != blocks {
            return Err((
                n,
                format!(
                    "`hash_ids` names {} blocks for input_length {input}: {BLOCK_TOKENS}-token \
                     blocks make {blocks}",
                    row.hash_ids.len()
                ),
            ));
        }
        rows.push(TraceRow {
            line: n,
            t_ms: row.timestamp,
            input_tokens: input,
            output_tokens: output,
            hash_ids: row.hash_ids,
            session: None,
        });
    }
    Ok((rows, skipped))
}
