//! The trace readers against excerpts of the published traces (`sample-data/traces/`)
//! and against the malformed rows a user's file can hold.

use std::path::{Path, PathBuf};

use super::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("sample-data/traces")
        .join(name)
}

fn parse_text(text: &str, format: Option<TraceFormat>) -> Result<Trace, TraceError> {
    parse(Path::new("t.txt"), text.as_bytes(), format)
}

#[test]
fn mooncake_excerpt_reads_times_lengths_and_shared_blocks() {
    let t = read(&fixture("mooncake_conversation_head.jsonl"), None).unwrap();
    assert_eq!(t.format, TraceFormat::Mooncake);
    assert_eq!(t.rows.len(), 120);
    assert!(t.skipped.is_empty());
    assert_eq!(t.block_tokens, 512);
    let first = &t.rows[0];
    assert_eq!(
        (first.t_ms, first.input_tokens, first.output_tokens),
        (0.0, 6758, 500)
    );
    assert_eq!(first.hash_ids, (0..14).collect::<Vec<u64>>());
    // The 11th row is the first of the second 3 s step.
    assert_eq!(t.rows[10].t_ms, 3000.0);
    assert_eq!(t.rows[10].input_tokens, 13544);
    // Every row of the excerpt opens with block 0, and only block 0 is shared.
    assert!(t.rows.iter().all(|r| r.hash_ids[0] == 0));
    assert_eq!(
        t.shared_block_ids().into_iter().collect::<Vec<_>>(),
        vec![0]
    );
    // 120 rows repeat block 0 after the first: 119 of all blocks.
    let blocks: usize = t.rows.iter().map(|r| r.hash_ids.len()).sum();
    let share = t.repeated_block_share().unwrap();
    assert!((share - 119.0 / blocks as f64).abs() < 1e-12);
    assert_eq!(t.span_ms(), 41999.0);
    assert_eq!(t.sha256.len(), 64);
}

#[test]
fn azure_excerpt_reads_wall_clock_times_as_offsets() {
    let t = read(&fixture("azure_conv_head.csv"), None).unwrap();
    assert_eq!(t.format, TraceFormat::Azure);
    assert_eq!(t.rows.len(), 200);
    assert_eq!(t.block_tokens, 0);
    assert_eq!(
        (t.rows[0].line, t.rows[1].line, t.rows[199].line),
        (2, 3, 201)
    );
    assert_eq!((t.rows[0].input_tokens, t.rows[0].output_tokens), (374, 44));
    // 18:15:50.9951690 − 18:15:46.6805900 = 4.314579 s, exact to the 100 ns the file gives.
    assert!(
        (t.rows[1].t_ms - 4314.579).abs() < 1e-9,
        "{}",
        t.rows[1].t_ms
    );
    assert!(t.rows.iter().all(|r| r.hash_ids.is_empty()));
    assert_eq!(t.repeated_block_share(), None);
}

#[test]
fn burstgpt_quoted_rows_read_and_failed_rows_are_counted_out() {
    let t = read(&fixture("burstgpt_quoted_head.csv"), None).unwrap();
    assert_eq!(t.format, TraceFormat::Burstgpt);
    let got: Vec<(f64, u32, u32)> = t
        .rows
        .iter()
        .map(|r| (r.t_ms, r.input_tokens, r.output_tokens))
        .collect();
    assert_eq!(
        got,
        vec![(0.0, 472, 18), (40_000.0, 1087, 230), (113_000.0, 417, 276)]
    );
    let with_sessions = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type,Session ID,Elapsed time\n\
                         5,ChatGPT,472,18,490,Conversation log,s-1,2.5\n\
                         6,ChatGPT,500,0,500,Conversation log,s-1,1.0\n\
                         7.5,GPT-4,417,276,693,API log,,9.0\n";
    let t = parse_text(with_sessions, None).unwrap();
    assert_eq!(t.rows.len(), 2);
    assert_eq!(t.rows[0].session.as_deref(), Some("s-1"));
    assert_eq!(t.rows[1].session, None);
    assert_eq!(t.rows[1].t_ms, 2500.0);
    assert_eq!(t.skipped.len(), 1);
    assert_eq!(t.skipped[0].line, 3);
    assert!(
        t.skipped[0].reason.contains("failed in the trace"),
        "{:?}",
        t.skipped
    );
}

#[test]
fn equal_files_hash_equal_and_a_changed_byte_changes_the_hash() {
    let a = parse_text(
        "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [1]}\n",
        None,
    )
    .unwrap();
    let b = parse_text(
        "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [1]}\n",
        None,
    )
    .unwrap();
    let c = parse_text(
        "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 6, \"hash_ids\": [1]}\n",
        None,
    )
    .unwrap();
    assert_eq!(a.sha256, b.sha256);
    assert_ne!(a.sha256, c.sha256);
}

#[test]
fn malformed_traces_name_the_line_and_field() {
    let cases: [(&str, Option<TraceFormat>, &str); 8] = [
        ("hello\n", None, "neither a Mooncake JSON object"),
        (
            "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5}\n{\"timestamp\": 1}\n",
            None,
            "line 2: not a Mooncake row",
        ),
        (
            "{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 5, \"hash_ids\": [1]}\n",
            None,
            "line 1: `hash_ids` names 1 blocks for input_length 1000: 512-token blocks make 2",
        ),
        (
            "{\"timestamp\": -3, \"input_length\": 10, \"output_length\": 5}\n",
            None,
            "line 1: `timestamp` -3 is not a time in ms",
        ),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,44\nyesterday,1,2\n",
            None,
            "line 3: `TIMESTAMP` is `yesterday`",
        ),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,many,44\n",
            None,
            "line 2: `ContextTokens` is `many`, not a number",
        ),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374\n",
            None,
            "line 2:",
        ),
        (
            "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n1,ChatGPT,0,5,5,API log\n",
            None,
            "no row to replay (1 left out: line 2: 0 input tokens",
        ),
    ];
    for (text, format, want) in cases {
        let err = parse_text(text, format).unwrap_err().to_string();
        assert!(err.starts_with("trace t.txt"), "{err}");
        assert!(err.contains(want), "{err}\n  wanted: {want}");
    }
    // A named format is held to its header.
    let err = parse_text(
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n1,a,2,3,5,x\n",
        Some(TraceFormat::Azure),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("line 1: header column 1 is `Timestamp`, expected `TIMESTAMP`"),
        "{err}"
    );
    let err = read(Path::new("/nonexistent/trace.jsonl"), None)
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("trace /nonexistent/trace.jsonl: "), "{err}");
    assert_eq!(
        "sharegpt".parse::<TraceFormat>().unwrap_err(),
        "unknown trace format `sharegpt`: use mooncake, azure or burstgpt"
    );
}
