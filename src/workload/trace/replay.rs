//! A trace's rows as requests: when each is sent and what its prompt says.
//!
//! - **When**: row `i` is due `start_offset + t_ms(i) × time_scale` after the replay's start
//!   (a scale of 0.5 replays twice as fast); rows keep their file order, so a row out of time
//!   order is sent at its own time.
//! - **What**: the prompt is one user message (one string on the completions API): the
//!   row's blocks in order, then the request's canary instruction. Block `id` is the same
//!   text wherever it appears in the run ([`SharedContent::block`], seeded by the run's
//!   salt), `units_per_block` filler words long, so rows with equal leading `hash_ids` start
//!   with byte-identical text and a prefix cache can serve it; a row's last block is cut to
//!   what is left of its length. A format without `hash_ids` (Azure, BurstGPT) gets ids
//!   that no other row uses: every prompt unique. Lengths are in filler words at the
//!   density calibration found ([`Density`]); the realised prompt tokens come back in usage
//!   and are reported beside the trace's.
//! - **How long a reply**: the row's output tokens as `max_tokens`, with `ignore_eos` so the
//!   server generates that many (not on the Responses API, which has no such field).

use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::Trace;
use crate::workload::prompt::{Prompt, PromptBuilder, PromptContent};
use crate::workload::shared::SharedContent;

/// How a trace's times are replayed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// Multiplies every gap (1: as recorded; 0.5: twice as fast).
    pub time_scale: f64,
    /// Seconds from the replay's start to the trace's first row.
    pub start_offset_s: f64,
}

impl Timing {
    /// When `t_ms` (a trace time) is due, in nanoseconds after the replay's start.
    pub fn offset_ns(&self, t_ms: f64) -> i64 {
        ((self.start_offset_s * 1e3 + t_ms * self.time_scale) * 1e6).round() as i64
    }
}

/// A trace class's replay, as its cell carries it: the trace as read (its first rows), when
/// its rows are due, and whether the declaration capped the requests in flight. Two are
/// equal when they replay the same bytes' same rows the same way.
#[derive(Debug, Clone)]
pub struct TraceCell {
    pub trace: Arc<Trace>,
    pub timing: Timing,
    pub capped: bool,
}

impl PartialEq for TraceCell {
    fn eq(&self, other: &Self) -> bool {
        self.trace.sha256 == other.trace.sha256
            && self.trace.rows.len() == other.trace.rows.len()
            && self.timing == other.timing
            && self.capped == other.capped
    }
}

impl Eq for TraceCell {}

impl TraceCell {
    /// What run.json's workload records of it (part of the fingerprint).
    pub fn record(&self) -> crate::artifact::TraceRecord {
        crate::artifact::TraceRecord {
            file: self
                .trace
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            format: self.trace.format.name().to_owned(),
            sha256: self.trace.sha256.clone(),
            rows: self.trace.rows.len() as u64,
            time_scale: self.timing.time_scale,
            start_offset_s: self.timing.start_offset_s,
            capped: self.capped,
        }
    }

    /// Every row's send time, nanoseconds after the replay's start, in row order.
    pub fn offsets_ns(&self) -> Vec<i64> {
        self.trace
            .rows
            .iter()
            .map(|r| self.timing.offset_ns(r.t_ms))
            .collect()
    }
}

/// Filler words per token, as calibration measured them: `units_per_block` words make
/// `block_tokens` tokens, and the prompt without blocks (instruction, template) is
/// `overhead_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Density {
    pub units_per_block: u32,
    pub block_tokens: u32,
    pub overhead_tokens: u64,
}

impl Density {
    /// Filler words for `tokens` tokens of blocks.
    pub fn units_for(&self, tokens: u64) -> u32 {
        if self.block_tokens == 0 {
            return 0;
        }
        let units = tokens as f64 * f64::from(self.units_per_block) / f64::from(self.block_tokens);
        units.round().min(f64::from(u32::MAX)) as u32
    }
}

/// Blocks counted together to find the density.
/// The fewest reply tokens a trace row must ask for to carry a canary: a marker (`ANV-` and
/// 12 hex digits) costs 5 to 9 tokens with the usual tokenizers, and a reply cut inside it
/// would fail its check for nothing.
pub const MIN_CANARY_REPLY_TOKENS: u32 = 16;

pub const SAMPLE_BLOCKS: u32 = 8;

/// Ids of synthetic blocks (rows of a format without `hash_ids`) start here, far above any
/// published trace's ids.
const SYNTHETIC_IDS: u64 = 1 << 62;

/// Builds the prompts of one trace for one run.
#[derive(Debug, Clone)]
pub struct TracePrompts<'a> {
    trace: &'a Trace,
    /// The cell's builder: its seed, salt, canaries and API form (the instruction).
    builder: &'a PromptBuilder,
    density: Density,
}

impl<'a> TracePrompts<'a> {
    pub fn new(trace: &'a Trace, builder: &'a PromptBuilder, density: Density) -> Self {
        TracePrompts {
            trace,
            builder,
            density,
        }
    }

    /// Tokens per block: the trace's (512 for Mooncake), else 512 for synthetic blocks.
    pub fn block_tokens(trace: &Trace) -> u32 {
        if trace.block_tokens > 0 {
            trace.block_tokens
        } else {
            512
        }
    }

    /// Row `row`'s block ids: the trace's, or (a format without them) ids of its own, one
    /// per started block of its length.
    pub fn hash_ids(&self, row: usize) -> Vec<u64> {
        let r = &self.trace.rows[row];
        if !r.hash_ids.is_empty() {
            return r.hash_ids.clone();
        }
        let block = u64::from(Self::block_tokens(self.trace));
        let blocks = u64::from(r.input_tokens).div_ceil(block).max(1);
        let base = SYNTHETIC_IDS + row as u64 * 1_000_000;
        (0..blocks).map(|k| base + k).collect()
    }

    /// The shared content of the run (the builder's seed and salt).
    fn shared(&self) -> SharedContent {
        self.builder.shared_content()
    }

    /// Row `row`'s blocks as text, its length the row's input tokens less the prompt's
    /// fixed part.
    pub fn body(&self, row: usize) -> String {
        let r = &self.trace.rows[row];
        let tokens = u64::from(r.input_tokens).saturating_sub(self.density.overhead_tokens);
        let units = self.density.units_for(tokens);
        self.shared()
            .trace_body(&self.hash_ids(row), self.density.units_per_block, units)
    }

    /// The prompt of row `row` sent as request `index` (its canary's): its blocks, then its
    /// instruction.
    pub fn build(&self, row: usize, index: u32, reply_tokens: u32) -> Prompt {
        let body = self.body(row);
        // A reply too short to hold a marker (a trace row asking for a few tokens) is asked
        // for none, and carries no canary to check.
        let canary = self
            .builder
            .canary(index)
            .filter(|_| reply_tokens >= MIN_CANARY_REPLY_TOKENS);
        let instruction = self.builder.instruction_with(canary.clone());
        let text = if body.is_empty() {
            instruction
        } else {
            format!("{body}\n\n{instruction}")
        };
        let content = PromptContent::single(self.builder.spec().form, "user", text);
        let sha256 = hex::encode(Sha256::digest(content.sent_bytes()));
        let chars = content.chars();
        Prompt {
            request_index: index,
            filler_units: self
                .density
                .units_for(u64::from(self.trace.rows[row].input_tokens)),
            canary,
            content,
            sha256,
            chars,
        }
    }

    /// The prompt of a row with no blocks: its instruction alone, in the cell's API form
    /// (what calibration counts as every prompt's fixed part).
    pub fn without_blocks(builder: &PromptBuilder) -> PromptContent {
        let text = builder.instruction(0);
        PromptContent::single(builder.spec().form, "user", text)
    }

    /// The prompt of [`SAMPLE_BLOCKS`] blocks of `units` words each, joined as a row's are
    /// (what calibration counts to find the density: one text's words vary in tokens by a
    /// few percent, several average it out), in the cell's API form.
    pub fn sample_blocks(builder: &PromptBuilder, units: u32) -> PromptContent {
        let ids: Vec<u64> = (1..=u64::from(SAMPLE_BLOCKS))
            .map(|k| SYNTHETIC_IDS - k)
            .collect();
        let text = builder
            .shared_content()
            .trace_body(&ids, units, units * SAMPLE_BLOCKS);
        PromptContent::single(builder.spec().form, "user", text)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::workload::prompt::{PromptCacheMode, PromptForm, PromptSpec, ResponseLength};

    fn builder(salt: &str) -> PromptBuilder {
        PromptBuilder::new(PromptSpec {
            seed: 38027,
            run_salt: salt.into(),
            workload_class: "mooncake-replay".into(),
            context_target: 0,
            cache_mode: PromptCacheMode::Unique,
            response_length: ResponseLength::Natural,
            canaries: true,
            form: PromptForm::Messages,
            groups: None,
        })
    }

    fn mooncake() -> Trace {
        let path = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/sample-data/traces/mooncake_conversation_head.jsonl"
        ));
        super::super::read(path, None).unwrap()
    }

    const DENSITY: Density = Density {
        units_per_block: 390,
        block_tokens: 512,
        overhead_tokens: 30,
    };

    fn text(p: &Prompt) -> &str {
        match &p.content {
            PromptContent::Messages(m) => &m[0].content,
            PromptContent::Text(t) => t,
        }
    }

    #[test]
    fn a_row_asking_too_short_a_reply_for_a_marker_carries_no_canary() {
        let trace = mooncake();
        let b = builder("run-a");
        let prompts = TracePrompts::new(&trace, &b, DENSITY);
        let long = prompts.build(0, 0, MIN_CANARY_REPLY_TOKENS);
        let canary = long.canary.clone().expect("a canary");
        assert!(text(&long).contains(&canary));
        let short = prompts.build(0, 0, MIN_CANARY_REPLY_TOKENS - 1);
        assert_eq!(short.canary, None);
        assert!(!text(&short).contains("ANV-"), "no marker is asked for");
        assert!(text(&short).contains("Summarise the text above"));
    }

    #[test]
    fn every_shared_leading_block_is_a_byte_identical_prefix_and_the_first_difference_shows() {
        let trace = mooncake();
        let b = builder("run-a");
        let prompts = TracePrompts::new(&trace, &b, DENSITY);
        let built: Vec<Prompt> = (0..trace.rows.len())
            .map(|i| prompts.build(i, i as u32, trace.rows[i].output_tokens))
            .collect();
        let block_text_len = |row: usize, blocks: usize| -> usize {
            // Blocks are joined by a blank line.
            prompts.hash_ids(row)[..blocks]
                .iter()
                .map(|id| prompts.shared().block(*id, DENSITY.units_per_block).len() + 2)
                .sum::<usize>()
        };
        let mut pairs_sharing = 0;
        for a in 0..trace.rows.len() {
            for b in (a + 1)..trace.rows.len() {
                let (ia, ib) = (prompts.hash_ids(a), prompts.hash_ids(b));
                let common = ia.iter().zip(&ib).take_while(|(x, y)| x == y).count();
                // Only blocks both rows send whole are shared text.
                let whole = |row: usize, ids: &[u64]| {
                    let tokens = u64::from(trace.rows[row].input_tokens) - DENSITY.overhead_tokens;
                    let units = u64::from(DENSITY.units_for(tokens));
                    // A row's last block takes whatever length is left: not shared text.
                    ((units / u64::from(DENSITY.units_per_block)) as usize).min(ids.len() - 1)
                };
                let shared = common.min(whole(a, &ia)).min(whole(b, &ib));
                let (ta, tb) = (text(&built[a]), text(&built[b]));
                if shared > 0 {
                    pairs_sharing += 1;
                    let n = block_text_len(a, shared);
                    assert_eq!(
                        ta.as_bytes()[..n],
                        tb.as_bytes()[..n],
                        "rows {a} and {b} share {shared} leading blocks"
                    );
                }
                if common == 0 {
                    let n = 300.min(ta.len()).min(tb.len());
                    assert_ne!(ta.as_bytes()[..n], tb.as_bytes()[..n], "rows {a}, {b}");
                }
            }
        }
        assert!(
            pairs_sharing > 10,
            "the excerpt shares blocks: {pairs_sharing} pairs"
        );
        // Another run's salt: the same ids give other text (runs never share a cache).
        let other = builder("run-b");
        let again = TracePrompts::new(&trace, &other, DENSITY).build(0, 0, 64);
        assert_ne!(text(&again)[..200], text(&built[0])[..200]);
        // Canaries differ per row and end the prompt.
        let c0 = built[0].canary.clone().unwrap();
        assert!(text(&built[0]).contains(&c0));
        assert_ne!(built[0].canary, built[1].canary);
    }

    #[test]
    fn lengths_follow_the_row_and_times_the_scale() {
        let trace = mooncake();
        let b = builder("run-a");
        let prompts = TracePrompts::new(&trace, &b, DENSITY);
        let row = &trace.rows[3];
        let words = prompts.body(3).split_whitespace().count() as u64;
        let want = u64::from(DENSITY.units_for(u64::from(row.input_tokens) - 30));
        // A filler unit is a word of the templates; a few carry two (`According to`).
        assert!(
            words.abs_diff(want) <= want / 50 + 1,
            "{words} words for {want} units"
        );
        let t = Timing {
            time_scale: 0.5,
            start_offset_s: 2.0,
        };
        assert_eq!(t.offset_ns(1000.0), 2_500_000_000);
        // Rows of a format without hash_ids get blocks of their own.
        let mut flat = trace.clone();
        flat.block_tokens = 0;
        for r in &mut flat.rows {
            r.hash_ids.clear();
        }
        let p = TracePrompts::new(&flat, &b, DENSITY);
        let (a, c) = (p.hash_ids(0), p.hash_ids(1));
        assert!(a.iter().all(|id| !c.contains(id)));
        assert_eq!(
            a.len() as u64,
            u64::from(flat.rows[0].input_tokens).div_ceil(512)
        );
    }
}
