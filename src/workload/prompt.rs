//! Deterministic prompts: the same request index gets the same body in every arm and at every
//! concurrency, so arms can be paired request by request.
//!
//! A prompt has three parts, in this order:
//!
//! 1. In `unique` prompt-cache mode, a short random prefix derived from the manifest seed, the
//!    request index and the run's salt. It comes first because prefix caches key on the start
//!    of the prompt: with it no two requests share a cacheable prefix, in this run or any other.
//!    `shared` mode has no prefix.
//! 2. The body: natural-looking filler text. Word choice is seeded from (manifest seed, workload
//!    class, context target, request index) only, never from the run's salt, so the body is a
//!    property of the cell and the index. Its size is `filler_units` words; the text of `n + 1`
//!    units extends the text of `n` units, so the token count grows with the units and
//!    [`calibrate`] can search it.
//! 3. The instruction, last: begin the reply with the request's canary exactly, then (headline
//!    style cells) summarise "in `about {N} words`" — the simulator parses that phrase — or
//!    (natural-completion cells) summarise without a length.
//!
//! Chat requests get a system message (prefix + a fixed system text) and a user message (body +
//! instruction); the completions and Responses APIs get the same parts joined into one string.

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::artifact::canary;

/// The manifest's `prompt_cache_mode`: the manifest's own type, not a copy of it.
pub use crate::manifest::PromptCacheMode;

/// How long a reply the prompt asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseLength {
    /// Headline-style cells: "about N words" (max_tokens is the ceiling).
    AboutWords(u32),
    /// Natural-completion cells: no length requested.
    Natural,
}

/// Whether the prompt is sent as chat messages or as one string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptForm {
    /// `messages` for `/v1/chat/completions`.
    Messages,
    /// `prompt` for `/v1/completions`, `input` for `/v1/responses`.
    Text,
}

/// One chat message as it is serialised into the request body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChatMessage {
    pub role: &'static str,
    pub content: String,
}

/// The prompt as sent: chat messages or one string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptContent {
    /// System message then user message.
    Messages(Vec<ChatMessage>),
    Text(String),
}

impl PromptContent {
    /// The exact bytes this prompt occupies in the request body: the JSON `messages` array for
    /// chat, the UTF-8 text otherwise. The prompt's sha256 is taken over these bytes.
    pub fn sent_bytes(&self) -> Vec<u8> {
        match self {
            // Serialising a Vec of plain string structs cannot fail.
            Self::Messages(m) => serde_json::to_vec(m).unwrap_or_default(),
            Self::Text(t) => t.as_bytes().to_vec(),
        }
    }

    /// Whitespace-separated words of prompt text (message contents summed for chat). No
    /// tokenizer in use gives fewer tokens than words (BPE and SentencePiece split at
    /// whitespace before merging), so this is a lower bound of the prompt's token count.
    pub fn words(&self) -> u64 {
        match self {
            Self::Messages(m) => m
                .iter()
                .map(|m| m.content.split_whitespace().count() as u64)
                .sum(),
            Self::Text(t) => t.split_whitespace().count() as u64,
        }
    }

    /// Characters of prompt text (message contents summed for chat).
    pub fn chars(&self) -> u64 {
        match self {
            Self::Messages(m) => m.iter().map(|m| m.content.chars().count() as u64).sum(),
            Self::Text(t) => t.chars().count() as u64,
        }
    }
}

/// One request's prompt and what the recorder stores about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    pub request_index: u32,
    /// Filler size in words (the calibrated quantity).
    pub filler_units: u32,
    /// The canary the reply must begin with, when the cell uses canaries.
    pub canary: Option<String>,
    pub content: PromptContent,
    /// Lowercase hex sha256 of [`PromptContent::sent_bytes`].
    pub sha256: String,
    /// [`PromptContent::chars`].
    pub chars: u64,
}

/// What determines a cell's prompts.
#[derive(Debug, Clone)]
pub struct PromptSpec {
    /// The manifest's `random_prefix_seed`.
    pub seed: u64,
    /// Per-run salt (e.g. the run id): makes unique prefixes and canaries differ between runs.
    pub run_salt: String,
    /// Workload class id, e.g. `headline-sustained-output`.
    pub workload_class: String,
    /// The prompt token target of the cell (part of the body's seed).
    pub context_target: u64,
    pub cache_mode: PromptCacheMode,
    pub response_length: ResponseLength,
    /// Whether each request carries a canary.
    pub canaries: bool,
    pub form: PromptForm,
}

/// The system message text that follows the unique prefix.
pub const SYSTEM_TEXT: &str = "You are a careful assistant taking part in a measured test. \
Follow the instruction at the end of the user's message exactly.";

/// Builds prompts for one cell.
#[derive(Debug, Clone)]
pub struct PromptBuilder {
    spec: PromptSpec,
}

impl PromptBuilder {
    pub fn new(spec: PromptSpec) -> Self {
        Self { spec }
    }

    pub fn spec(&self) -> &PromptSpec {
        &self.spec
    }

    /// The same builder with another run salt. Calibrating through a live probe request puts
    /// the prompt into the server's prefix cache; calibrate with a different salt so the
    /// measured request's unique prefix has never been seen.
    pub fn with_salt(&self, run_salt: &str) -> Self {
        let mut spec = self.spec.clone();
        spec.run_salt = run_salt.to_owned();
        Self { spec }
    }

    /// The canary of `request_index`, if the cell uses canaries.
    pub fn canary(&self, request_index: u32) -> Option<String> {
        self.spec.canaries.then(|| {
            canary::make(
                self.spec.seed,
                &self.spec.run_salt,
                u64::from(request_index),
            )
        })
    }

    /// The unique prefix of `request_index` (empty in `shared` mode).
    pub fn unique_prefix(&self, request_index: u32) -> String {
        if self.spec.cache_mode == PromptCacheMode::Shared {
            return String::new();
        }
        let mut h = Sha256::new();
        h.update(b"anvil-prompt-prefix/v1\0");
        h.update(self.spec.seed.to_le_bytes());
        h.update(self.spec.run_salt.as_bytes());
        h.update([0]);
        h.update(u64::from(request_index).to_le_bytes());
        let hex = hex::encode(h.finalize());
        format!("Session {}-{}-{}. ", &hex[0..8], &hex[8..16], &hex[16..24])
    }

    /// The filler body of `request_index` with `filler_units` words.
    pub fn body(&self, request_index: u32, filler_units: u32) -> String {
        let mut h = Sha256::new();
        h.update(b"anvil-prompt-body/v1\0");
        h.update(self.spec.seed.to_le_bytes());
        h.update(self.spec.workload_class.as_bytes());
        h.update([0]);
        h.update(self.spec.context_target.to_le_bytes());
        h.update(u64::from(request_index).to_le_bytes());
        let d = h.finalize();
        let mut seed = [0u8; 8];
        seed.copy_from_slice(&d[..8]);
        filler(u64::from_le_bytes(seed), filler_units)
    }

    /// The closing instruction of `request_index`.
    pub fn instruction(&self, request_index: u32) -> String {
        let length = match self.spec.response_length {
            ResponseLength::AboutWords(n) => format!(" in about {n} words"),
            ResponseLength::Natural => String::new(),
        };
        match self.canary(request_index) {
            Some(c) => format!(
                "Begin your reply with the marker {c} exactly as written, then summarise the text above{length}."
            ),
            None => format!("Summarise the text above{length}."),
        }
    }

    /// The prompt of `request_index` with a body of `filler_units` words.
    pub fn build(&self, request_index: u32, filler_units: u32) -> Prompt {
        let prefix = self.unique_prefix(request_index);
        let body = self.body(request_index, filler_units);
        let instruction = self.instruction(request_index);
        let content = match self.spec.form {
            PromptForm::Messages => PromptContent::Messages(vec![
                ChatMessage {
                    role: "system",
                    content: format!("{prefix}{SYSTEM_TEXT}"),
                },
                ChatMessage {
                    role: "user",
                    content: join_body(&body, &instruction),
                },
            ]),
            PromptForm::Text => PromptContent::Text(format!(
                "{prefix}{SYSTEM_TEXT}\n\n{}\n",
                join_body(&body, &instruction)
            )),
        };
        let sha256 = hex::encode(Sha256::digest(content.sent_bytes()));
        let chars = content.chars();
        Prompt {
            request_index,
            filler_units,
            canary: self.canary(request_index),
            content,
            sha256,
            chars,
        }
    }
}

fn join_body(body: &str, instruction: &str) -> String {
    if body.is_empty() {
        instruction.to_owned()
    } else {
        format!("{body}\n\n{instruction}")
    }
}

/// SplitMix64: a tiny generator whose output is fixed by this code forever, unlike library
/// generators that may change between versions (prompts must stay comparable across releases).
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, list: &[&'a str]) -> &'a str {
        list[self.below(list.len())]
    }
}

#[rustfmt::skip]
const ADJECTIVES: &[&str] = &[
    "quiet", "narrow", "ancient", "bright", "careful", "distant", "early", "gentle", "heavy",
    "hidden", "large", "little", "local", "modern", "northern", "old", "open", "patient", "plain",
    "private", "public", "quick", "rare", "rough", "simple", "small", "steady", "strange", "sudden",
    "tall", "thin", "warm", "wide", "wooden", "young", "busy", "cold", "dry", "empty", "fresh",
    "golden", "green", "honest", "loud", "pale", "silver", "soft", "southern", "stone",
];

#[rustfmt::skip]
const NOUNS: &[&str] = &[
    "river", "market", "engine", "garden", "harbour", "library", "village", "bridge", "station",
    "teacher", "farmer", "painter", "engineer", "merchant", "traveller", "window", "lantern",
    "valley", "mountain", "forest", "island", "road", "tower", "kitchen", "workshop", "letter",
    "map", "clock", "ship", "train", "field", "orchard", "council", "festival", "storm", "season",
    "museum", "school", "harvest", "castle", "shadow", "signal", "ledger", "compass", "journey",
    "meadow", "quarry", "canal", "mill", "lighthouse", "courtyard", "archive", "caravan",
    "observatory", "village square", "ferry", "bakery", "notebook", "instrument", "cathedral",
];

#[rustfmt::skip]
const VERBS: &[&str] = &[
    "follows", "carries", "watches", "crosses", "reaches", "builds", "repairs", "visits",
    "describes", "measures", "guards", "shelters", "records", "gathers", "answers", "remembers",
    "studies", "passes", "finds", "shapes", "supports", "changes", "protects", "welcomes",
    "explains", "surrounds", "connects", "overlooks", "replaces", "collects", "mentions",
    "imagines", "considers", "resembles", "inspects", "borrows", "paints", "counts", "opens",
];

#[rustfmt::skip]
const ADVERBS: &[&str] = &[
    "slowly", "quietly", "often", "rarely", "suddenly", "carefully", "gradually", "eventually",
    "happily", "patiently", "briefly", "openly", "politely", "steadily", "gently", "clearly",
    "usually", "seldom", "finally", "early",
];

#[rustfmt::skip]
const PREPOSITIONS: &[&str] = &[
    "near", "beyond", "behind", "beside", "above", "below", "across", "along", "inside", "outside",
    "around", "under", "past", "toward", "between the hills and",
];

#[rustfmt::skip]
const NUMBERS: &[&str] = &[
    "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "twelve", "twenty",
];

#[rustfmt::skip]
const PLURAL_NOUNS: &[&str] = &[
    "stories", "lamps", "boats", "songs", "windows", "letters", "maps", "bells", "paths", "gardens",
    "ideas", "voices", "reports", "questions", "bridges", "visitors", "seasons",
];

/// One slot of a sentence template.
#[derive(Clone, Copy)]
enum Slot {
    Lit(&'static str),
    Adj,
    Noun,
    Verb,
    Adv,
    Prep,
    Num,
    Plural,
}

use Slot::*;

/// Sentence templates; a trailing comma is part of the literal word before it.
#[rustfmt::skip]
const TEMPLATES: &[&[Slot]] = &[
    &[Lit("The"), Adj, Noun, Verb, Lit("the"), Noun, Prep, Lit("the"), Adj, Noun],
    &[Adv, Lit("the"), Noun, Verb, Lit("every"), Adj, Noun],
    &[Lit("In"), Lit("the"), Adj, Noun, Lit("each"), Noun, Verb, Lit("the"), Noun, Lit("and"), Lit("the"), Noun],
    &[Lit("Nobody"), Lit("expected"), Lit("that"), Lit("the"), Noun, Prep, Lit("the"), Noun, Lit("would"), Lit("keep"), Num, Adj, Plural],
    &[Lit("Every"), Lit("morning"), Lit("the"), Adj, Noun, Adv, Verb, Lit("the"), Noun],
    &[Lit("According"), Lit("to"), Lit("the"), Noun, Lit("the"), Noun, Verb, Num, Plural, Prep, Lit("the"), Noun],
];

/// The first `units` words of the filler stream seeded by `seed`. Sentences end with a full
/// stop; paragraphs of four to eight sentences are separated by a blank line. If `units` ends
/// mid-sentence, the cut sentence still gets its full stop, so `n + 1` units only ever add a word.
pub(crate) fn filler(seed: u64, units: u32) -> String {
    let mut rng = SplitMix64(seed);
    let mut out = String::with_capacity(units as usize * 8);
    let mut left = units;
    let mut sentences_in_paragraph = 0;
    let mut paragraph_len = 4 + rng.below(5);
    let mut words: Vec<&str> = Vec::with_capacity(16);
    while left > 0 {
        let template = TEMPLATES[rng.below(TEMPLATES.len())];
        words.clear();
        for slot in template {
            words.push(match *slot {
                Lit(w) => w,
                Adj => rng.pick(ADJECTIVES),
                Noun => rng.pick(NOUNS),
                Verb => rng.pick(VERBS),
                Adv => rng.pick(ADVERBS),
                Prep => rng.pick(PREPOSITIONS),
                Num => rng.pick(NUMBERS),
                Plural => rng.pick(PLURAL_NOUNS),
            });
        }
        // A multi-word entry ("village square") counts as one unit: units count choices.
        let take = (words.len() as u32).min(left) as usize;
        left -= take as u32;
        if !out.is_empty() {
            if sentences_in_paragraph == paragraph_len {
                out.push_str("\n\n");
                sentences_in_paragraph = 0;
                paragraph_len = 4 + rng.below(5);
            } else {
                out.push(' ');
            }
        }
        for (i, w) in words[..take].iter().enumerate() {
            if i == 0 {
                let mut c = w.chars();
                if let Some(first) = c.next() {
                    out.extend(first.to_uppercase());
                    out.push_str(c.as_str());
                }
            } else {
                out.push(' ');
                out.push_str(w);
            }
            if i == 0 && take > 1 && matches!(template[0], Adv) {
                out.push(',');
            }
        }
        out.push('.');
        sentences_in_paragraph += 1;
    }
    out
}

/// How close calibration must get: max(1% of the target, 8 tokens).
pub fn tolerance(target_tokens: u64) -> u64 {
    target_tokens.div_ceil(100).max(8)
}

/// The result of calibrating one request's filler size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Calibration {
    pub filler_units: u32,
    /// Prompt tokens the oracle reported at `filler_units`.
    pub prompt_tokens: u64,
    pub target_tokens: u64,
    /// Oracle calls spent.
    pub oracle_calls: u32,
}

/// Why calibration failed.
#[derive(Debug, thiserror::Error)]
pub enum CalibrationError {
    #[error(
        "request {request_index}: the prompt without filler is already {overhead_tokens} tokens, \
         above the target {target_tokens} (+{tolerance}); raise the context target"
    )]
    TargetBelowOverhead {
        request_index: u32,
        overhead_tokens: u64,
        target_tokens: u64,
        tolerance: u64,
    },
    #[error(
        "request {request_index}: no filler size reaches {target_tokens} ± {tolerance} tokens: \
         {below_units} words give {below_tokens} tokens and {above_units} words give \
         {above_tokens}; check the token-count oracle"
    )]
    Unreachable {
        request_index: u32,
        target_tokens: u64,
        tolerance: u64,
        below_units: u32,
        below_tokens: u64,
        above_units: u32,
        above_tokens: u64,
    },
    #[error(
        "request {request_index}: {max_units} words give only {tokens} tokens, below the target \
         {target_tokens}; the target exceeds the calibration limit"
    )]
    TooLarge {
        request_index: u32,
        target_tokens: u64,
        max_units: u32,
        tokens: u64,
    },
    #[error(
        "request {request_index}: no filler size within {tolerance} tokens of {target_tokens} \
         after {calls} token counts (closest: {closest_units} words, {closest_tokens} tokens); \
         the oracle's counts are not monotone in the prompt length"
    )]
    NotConverged {
        request_index: u32,
        target_tokens: u64,
        tolerance: u64,
        calls: u32,
        closest_units: u32,
        closest_tokens: u64,
    },
    #[error("request {request_index}: token count failed after {calls} calls: {source}")]
    Oracle {
        request_index: u32,
        calls: u32,
        /// The token counter's own error (the oracle's; this module does not know its type).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Most oracle calls one calibration may spend before giving up.
pub const MAX_ORACLE_CALLS: u32 = 40;
/// Largest filler calibration will try (about 5M tokens, beyond any context window).
pub const MAX_FILLER_UNITS: u32 = 4_000_000;

/// Find the filler size of `request_index` whose prompt is within [`tolerance`] of
/// `target_tokens` according to `oracle` (a token count of the prompt as it would be sent).
///
/// The count is treated as monotone in the filler size: a secant step inside a bracket that
/// shrinks every call (falling back to bisection when the secant stalls), so a 4K target
/// typically takes three or four calls. A target that no size can hit (the count jumps over
/// the window), one below the fixed overhead, or one beyond [`MAX_FILLER_UNITS`] is an error,
/// never a loop.
pub async fn calibrate<F, E>(
    builder: &PromptBuilder,
    request_index: u32,
    target_tokens: u64,
    oracle: F,
) -> Result<Calibration, CalibrationError>
where
    F: AsyncFnMut(&PromptContent) -> Result<u64, E>,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    calibrate_from(builder, request_index, target_tokens, None, oracle).await
}

/// [`calibrate`], trying `hint` words first (e.g. the size found for the previous request:
/// every request's filler has about the same token density, so the hint usually lands inside
/// the tolerance and one count settles it). A miss costs that one count, then the search runs
/// as without a hint.
pub async fn calibrate_from<F, E>(
    builder: &PromptBuilder,
    request_index: u32,
    target_tokens: u64,
    hint: Option<u32>,
    mut oracle: F,
) -> Result<Calibration, CalibrationError>
where
    F: AsyncFnMut(&PromptContent) -> Result<u64, E>,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let tol = tolerance(target_tokens);
    let within = |tokens: u64| tokens.abs_diff(target_tokens) <= tol;
    let mut calls = 0u32;
    let mut closest = (0u32, 0u64);
    macro_rules! count {
        ($units:expr) => {{
            let units: u32 = $units;
            let prompt = builder.build(request_index, units);
            calls += 1;
            let tokens =
                oracle(&prompt.content)
                    .await
                    .map_err(|source| CalibrationError::Oracle {
                        request_index,
                        calls,
                        source: source.into(),
                    })?;
            if calls == 1 || tokens.abs_diff(target_tokens) < closest.1.abs_diff(target_tokens) {
                closest = (units, tokens);
            }
            tokens
        }};
    }
    let done = |units: u32, tokens: u64, calls: u32| Calibration {
        filler_units: units,
        prompt_tokens: tokens,
        target_tokens,
        oracle_calls: calls,
    };

    if let Some(units) = hint.filter(|u| *u > 0 && *u <= MAX_FILLER_UNITS) {
        let tokens = count!(units);
        if within(tokens) {
            return Ok(done(units, tokens, calls));
        }
    }
    let overhead = count!(0);
    if within(overhead) {
        return Ok(done(0, overhead, calls));
    }
    if overhead > target_tokens {
        return Err(CalibrationError::TargetBelowOverhead {
            request_index,
            overhead_tokens: overhead,
            target_tokens,
            tolerance: tol,
        });
    }
    // Bracket: `lo` is below the window, `hi` (once found) above it.
    let mut lo = (0u32, overhead);
    let mut hi: Option<(u32, u64)> = None;
    // First guess: English filler runs about 1.3 tokens per word.
    let mut guess = ((target_tokens - overhead) as f64 / 1.3).round();
    let mut last_side_low: Option<bool> = None;
    let mut same_side_moves = 0u32;
    loop {
        let upper = hi.map_or(MAX_FILLER_UNITS, |h| h.0 - 1);
        let units = (guess.max(0.0) as u64).clamp(u64::from(lo.0) + 1, u64::from(upper)) as u32;
        let tokens = count!(units);
        if within(tokens) {
            return Ok(done(units, tokens, calls));
        }
        let moved_low = tokens < target_tokens;
        if moved_low {
            lo = (units, tokens);
        } else {
            hi = Some((units, tokens));
        }
        same_side_moves = if last_side_low == Some(moved_low) {
            same_side_moves + 1
        } else {
            0
        };
        last_side_low = Some(moved_low);
        match hi {
            Some(h) if h.0 <= lo.0 + 1 => {
                return Err(CalibrationError::Unreachable {
                    request_index,
                    target_tokens,
                    tolerance: tol,
                    below_units: lo.0,
                    below_tokens: lo.1,
                    above_units: h.0,
                    above_tokens: h.1,
                });
            }
            None if lo.0 >= MAX_FILLER_UNITS => {
                return Err(CalibrationError::TooLarge {
                    request_index,
                    target_tokens,
                    max_units: MAX_FILLER_UNITS,
                    tokens: lo.1,
                });
            }
            _ => {}
        }
        if calls >= MAX_ORACLE_CALLS {
            return Err(CalibrationError::NotConverged {
                request_index,
                target_tokens,
                tolerance: tol,
                calls,
                closest_units: closest.0,
                closest_tokens: closest.1,
            });
        }
        guess = match hi {
            // Secant inside the bracket; bisect when one end has moved twice in a row (the
            // secant is creeping) or the counts are not increasing.
            Some(h) if h.1 > lo.1 && same_side_moves < 2 => {
                let slope = (h.1 - lo.1) as f64 / f64::from(h.0 - lo.0);
                f64::from(lo.0) + (target_tokens - lo.1) as f64 / slope
            }
            Some(h) => (f64::from(lo.0) + f64::from(h.0)) / 2.0,
            // No upper end yet: extrapolate the slope from the overhead point, overshooting
            // slightly so the next count likely brackets the target.
            None => {
                let slope = if lo.1 > overhead && lo.0 > 0 {
                    (lo.1 - overhead) as f64 / f64::from(lo.0)
                } else {
                    0.0
                };
                if slope > 0.0 {
                    f64::from(lo.0) + (target_tokens - lo.1) as f64 / slope * 1.02 + 1.0
                } else {
                    f64::from(lo.0) * 2.0 + 1.0
                }
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::oracle::OracleError;

    fn spec(mode: PromptCacheMode, form: PromptForm) -> PromptSpec {
        PromptSpec {
            seed: 38027,
            run_salt: "run-a".into(),
            workload_class: "headline-sustained-output".into(),
            context_target: 4096,
            cache_mode: mode,
            response_length: ResponseLength::AboutWords(256),
            canaries: true,
            form,
        }
    }

    fn text_of(p: &Prompt) -> String {
        match &p.content {
            PromptContent::Messages(m) => m
                .iter()
                .map(|m| m.content.as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            PromptContent::Text(t) => t.clone(),
        }
    }

    /// A deterministic stand-in tokenizer: each whitespace-separated word costs one token per
    /// started 4 characters, plus 4 tokens of template per chat message.
    fn toy_tokens(content: &PromptContent) -> u64 {
        let words = |s: &str| -> u64 {
            s.split_whitespace()
                .map(|w| w.len().div_ceil(4) as u64)
                .sum()
        };
        match content {
            PromptContent::Messages(m) => m.iter().map(|m| 4 + words(&m.content)).sum(),
            PromptContent::Text(t) => words(t),
        }
    }

    #[test]
    fn same_index_gets_the_same_body_across_runs_and_modes() {
        let a = PromptBuilder::new(spec(PromptCacheMode::Unique, PromptForm::Messages));
        let b = a.with_salt("run-b");
        let shared = PromptBuilder::new(spec(PromptCacheMode::Shared, PromptForm::Text));
        for i in [0, 1, 57, 99] {
            assert_eq!(a.body(i, 500), b.body(i, 500));
            assert_eq!(a.body(i, 500), shared.body(i, 500));
        }
        assert_ne!(a.body(0, 500), a.body(1, 500));
        let mut other_class = spec(PromptCacheMode::Unique, PromptForm::Messages);
        other_class.workload_class = "context-curve".into();
        assert_ne!(PromptBuilder::new(other_class).body(0, 500), a.body(0, 500));
    }

    /// Bodies are a contract across releases: arms recorded months apart must get the same
    /// text for the same index. Changing the word lists, templates or generator breaks this.
    #[test]
    fn prompt_body_text_is_pinned_across_releases() {
        let b = PromptBuilder::new(spec(PromptCacheMode::Unique, PromptForm::Messages));
        let body = b.body(0, 300);
        assert_eq!(
            hex::encode(Sha256::digest(body.as_bytes())),
            "42c278ace3f3cc381c0868fd1b0c9184f6821b381e64282881bc3fcb41832f5a"
        );
        assert_eq!(&body[..40], "According to the castle the clock collec");
    }

    #[test]
    fn body_grows_one_word_per_unit() {
        let b = PromptBuilder::new(spec(PromptCacheMode::Unique, PromptForm::Messages));
        let mut prev = b.body(3, 0);
        assert!(prev.is_empty());
        for n in 1..400 {
            let cur = b.body(3, n);
            let count = cur.split_whitespace().count();
            // "village square" and "between the hills and" are one unit of several words.
            assert!(count >= n as usize, "{n} units gave {count} words");
            let stem = prev.trim_end_matches('.');
            assert!(cur.starts_with(stem), "{n} units do not extend {}", n - 1);
            assert!(cur.ends_with('.'));
            prev = cur;
        }
        assert!(b.body(3, 2000).contains("\n\n"), "paragraphs expected");
    }

    #[test]
    fn unique_prefix_comes_first_and_differs_per_request_and_run() {
        let a = PromptBuilder::new(spec(PromptCacheMode::Unique, PromptForm::Messages));
        let b = a.with_salt("run-b");
        let p0 = a.build(0, 100);
        let p1 = a.build(1, 100);
        let PromptContent::Messages(m) = &p0.content else {
            panic!("chat form expected")
        };
        assert_eq!(m[0].role, "system");
        assert_eq!(m[1].role, "user");
        let prefix = a.unique_prefix(0);
        assert!(prefix.starts_with("Session "));
        assert!(m[0].content.starts_with(&prefix));
        assert_ne!(a.unique_prefix(0), a.unique_prefix(1));
        assert_ne!(a.unique_prefix(0), b.unique_prefix(0));
        assert!(canary::find_first(&prefix).is_none());
        // The first 40 characters already differ between requests.
        assert_ne!(&text_of(&p0)[..40], &text_of(&p1)[..40]);

        let text = PromptBuilder::new(spec(PromptCacheMode::Unique, PromptForm::Text)).build(5, 50);
        let PromptContent::Text(t) = &text.content else {
            panic!("text form expected")
        };
        assert!(t.starts_with("Session "));
    }

    #[test]
    fn shared_mode_has_no_prefix_and_a_common_start() {
        let s = PromptBuilder::new(spec(PromptCacheMode::Shared, PromptForm::Messages));
        assert_eq!(s.unique_prefix(4), "");
        let (PromptContent::Messages(a), PromptContent::Messages(b)) =
            (s.build(0, 50).content, s.build(1, 50).content)
        else {
            panic!("chat form expected")
        };
        assert_eq!(a[0], b[0]);
        assert_eq!(a[0].content, SYSTEM_TEXT);
    }

    #[test]
    fn canary_and_length_instruction() {
        let b = PromptBuilder::new(spec(PromptCacheMode::Unique, PromptForm::Messages));
        let p = b.build(7, 80);
        let c = p.canary.clone().unwrap();
        assert_eq!(c, canary::make(38027, "run-a", 7));
        let text = text_of(&p);
        assert_eq!(canary::find_all(&text), vec![c.as_str()]);
        assert!(text.contains("about 256 words"));
        assert!(text.trim_end().ends_with("in about 256 words."));

        let mut natural = spec(PromptCacheMode::Unique, PromptForm::Text);
        natural.response_length = ResponseLength::Natural;
        let t = text_of(&PromptBuilder::new(natural).build(7, 80));
        assert!(!t.contains("about"));
        assert!(t.contains(&c));

        let mut plain = spec(PromptCacheMode::Shared, PromptForm::Text);
        plain.canaries = false;
        let p = PromptBuilder::new(plain).build(7, 80);
        assert!(p.canary.is_none());
        assert!(canary::find_first(&text_of(&p)).is_none());
    }

    #[test]
    fn sha256_and_chars_cover_exactly_what_is_sent() {
        let b = PromptBuilder::new(spec(PromptCacheMode::Unique, PromptForm::Messages));
        let p = b.build(2, 64);
        let sent = p.content.sent_bytes();
        assert!(sent.starts_with(b"[{\"role\":\"system\",\"content\":\"Session "));
        assert_eq!(p.sha256, hex::encode(Sha256::digest(&sent)));
        let PromptContent::Messages(m) = &p.content else {
            panic!()
        };
        assert_eq!(
            p.chars,
            (m[0].content.chars().count() + m[1].content.chars().count()) as u64
        );
        assert_eq!(b.build(2, 64), p, "deterministic");
        assert_ne!(b.build(2, 65).sha256, p.sha256);
    }

    #[tokio::test]
    async fn calibration_hits_targets_with_few_calls() {
        for form in [PromptForm::Messages, PromptForm::Text] {
            let b = PromptBuilder::new(spec(PromptCacheMode::Unique, form));
            for target in [200u64, 512, 4096, 32768, 131072] {
                for index in [0u32, 41] {
                    let c = calibrate::<_, OracleError>(
                        &b,
                        index,
                        target,
                        async |p: &PromptContent| Ok(toy_tokens(p)),
                    )
                    .await
                    .unwrap();
                    let actual = toy_tokens(&b.build(index, c.filler_units).content);
                    assert_eq!(actual, c.prompt_tokens);
                    assert!(
                        actual.abs_diff(target) <= tolerance(target),
                        "{form:?} target {target}: {actual}"
                    );
                    assert!(c.oracle_calls <= 8, "{target}: {} calls", c.oracle_calls);
                }
            }
        }
    }

    #[tokio::test]
    async fn a_good_hint_settles_calibration_in_one_count_and_a_bad_one_still_converges() {
        let b = PromptBuilder::new(spec(PromptCacheMode::Unique, PromptForm::Messages));
        let first =
            calibrate::<_, OracleError>(&b, 0, 4096, async |p: &PromptContent| Ok(toy_tokens(p)))
                .await
                .unwrap();
        let next = calibrate_from::<_, OracleError>(
            &b,
            1,
            4096,
            Some(first.filler_units),
            async |p: &PromptContent| Ok(toy_tokens(p)),
        )
        .await
        .unwrap();
        assert_eq!(next.oracle_calls, 1);
        assert!(next.prompt_tokens.abs_diff(4096) <= tolerance(4096));
        let far =
            calibrate_from::<_, OracleError>(&b, 2, 4096, Some(5), async |p: &PromptContent| {
                Ok(toy_tokens(p))
            })
            .await
            .unwrap();
        assert!(far.prompt_tokens.abs_diff(4096) <= tolerance(4096));
    }

    #[tokio::test]
    async fn calibration_refuses_unreachable_targets() {
        let b = PromptBuilder::new(spec(PromptCacheMode::Unique, PromptForm::Text));
        // The count jumps by 1000 tokens past 4000: the 4096 ± 41 window falls in the gap.
        let jumpy = async |p: &PromptContent| {
            let t = toy_tokens(p);
            Ok(if t < 4000 { t } else { t + 1000 })
        };
        let err = calibrate::<_, OracleError>(&b, 0, 4096, jumpy)
            .await
            .unwrap_err();
        assert!(matches!(err, CalibrationError::Unreachable { .. }), "{err}");

        let err =
            calibrate::<_, OracleError>(&b, 0, 10, async |p: &PromptContent| Ok(toy_tokens(p)))
                .await
                .unwrap_err();
        assert!(
            matches!(err, CalibrationError::TargetBelowOverhead { .. }),
            "{err}"
        );

        // The count never grows: no size reaches the target.
        let flat = async |_: &PromptContent| Ok(100u64);
        let err = calibrate::<_, OracleError>(&b, 0, 4096, flat)
            .await
            .unwrap_err();
        assert!(matches!(err, CalibrationError::TooLarge { .. }), "{err}");

        // The count jumps around: give up after MAX_ORACLE_CALLS, never loop.
        let mut n = 0u64;
        let noisy = async |_: &PromptContent| {
            n += 1;
            Ok(if n.is_multiple_of(2) { 9000 } else { 50 })
        };
        let err = calibrate::<_, OracleError>(&b, 0, 4096, noisy)
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                CalibrationError::NotConverged { .. } | CalibrationError::Unreachable { .. }
            ),
            "{err}"
        );
    }

    #[tokio::test]
    async fn calibration_reports_oracle_failure() {
        let b = PromptBuilder::new(spec(PromptCacheMode::Unique, PromptForm::Text));
        let err = calibrate::<_, OracleError>(&b, 3, 4096, async |_: &PromptContent| {
            Err(OracleError::Status {
                url: "http://127.0.0.1:1/tokenize".into(),
                status: 404,
                body: "not found".into(),
            })
        })
        .await
        .unwrap_err();
        assert!(matches!(err, CalibrationError::Oracle { calls: 1, .. }));
        assert!(err.to_string().contains("request 3"));
    }
}
