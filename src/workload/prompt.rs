//! Deterministic prompts: the same request index gets the same body in every arm and at every
//! concurrency, so arms can be paired request by request.
//!
//! A prompt has three parts, in this order (after its group's shared prefix in a prefix-group
//! cell: [`GroupPrefix`], text seeded by the run's salt and the group, byte-identical for
//! every request of the group within the run):
//!
//! 1. In `unique` prompt-cache mode, a short random prefix derived from the manifest seed, the
//!    request index and the run's salt. It comes first because prefix caches key on the start
//!    of the prompt: with it no two requests share a cacheable prefix, in this run or any other.
//!    `shared` mode has no prefix.
//! 2. The body: natural-looking filler text. Word choice is seeded from (manifest seed, workload
//!    class, context target, request index) only, never from the run's salt, so the body is a
//!    property of the cell and the index. Its size is `filler_units` words; the text of `n + 1`
//!    units extends the text of `n` units, so the token count grows with the units and
//!    [`super::calibration::calibrate`] can search it.
//! 3. The instruction, last: begin the reply with the request's canary exactly, then (headline
//!    style cells) summarise "in `about {N} words`" — the simulator parses that phrase — or
//!    (natural-completion cells) summarise without a length.
//!
//! Chat requests get a system message (prefix + a fixed system text) and a user message (body +
//! instruction); the completions and Responses APIs get the same parts joined into one string.

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::filler::filler;
use super::shared::{SharedContent, group_of};
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
    /// An assistant message's reasoning, resent in a session's history only when the class
    /// keeps it (`session.keep_reasoning`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// An assistant message's tool calls (a session's tool turn).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<serde_json::Value>,
    /// A `tool` message's answer to this call id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    /// A message of `role` with `content` and nothing else.
    pub fn new(role: &'static str, content: String) -> Self {
        Self {
            role,
            content,
            reasoning_content: None,
            tool_calls: None,
            tool_call_id: None,
        }
    }
}

/// The prompt as sent: chat messages or one string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptContent {
    /// System message then user message.
    Messages(Vec<ChatMessage>),
    Text(String),
}

impl PromptContent {
    /// `text` as one message of `role` (chat), or as the text itself (completions and
    /// Responses).
    pub fn single(form: PromptForm, role: &'static str, text: String) -> Self {
        match form {
            PromptForm::Messages => Self::Messages(vec![ChatMessage::new(role, text)]),
            PromptForm::Text => Self::Text(text),
        }
    }

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
    /// Prefix groups: each request's prompt opens with its group's shared prefix.
    pub groups: Option<GroupPrefix>,
}

/// The shared prefixes of a prefix-group cell: `groups` of them, group `g` `units[g]` filler
/// words (the size calibration found for the declared shared tokens: equal word counts of
/// different text are not equal token counts, so each group is sized on its own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupPrefix {
    pub groups: u32,
    /// Empty until calibration sized them.
    pub units: Vec<u32>,
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

    /// The same builder with group `g`'s prefix `units[g]` words long.
    pub fn with_group_units(&self, units: Vec<u32>) -> Self {
        let mut spec = self.spec.clone();
        if let Some(g) = &mut spec.groups {
            g.units = units;
        }
        Self { spec }
    }

    /// What a run's shared content is seeded by: the manifest seed and this builder's salt.
    pub fn shared_content(&self) -> SharedContent {
        SharedContent {
            seed: self.spec.seed,
            run_salt: self.spec.run_salt.clone(),
        }
    }

    /// The shared prefix of `request_index`'s prefix group, ending in a blank line (empty
    /// without groups).
    pub fn group_prefix(&self, request_index: u32) -> String {
        let Some(g) = &self.spec.groups else {
            return String::new();
        };
        match group_of(request_index, g.groups).and_then(|group| {
            let units = *g.units.get(group as usize)?;
            Some((group, units))
        }) {
            Some((group, units)) if units > 0 => {
                format!("{}\n\n", self.shared_content().group_prefix(group, units))
            }
            _ => String::new(),
        }
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
        self.instruction_with(self.canary(request_index))
    }

    /// The closing instruction asking for `canary` (none: no marker asked).
    pub fn instruction_with(&self, canary: Option<String>) -> String {
        let length = match self.spec.response_length {
            ResponseLength::AboutWords(n) => format!(" in about {n} words"),
            ResponseLength::Natural => String::new(),
        };
        match canary {
            Some(c) => format!(
                "Begin your reply with the marker {c} exactly as written, then summarise the text above{length}."
            ),
            None => format!("Summarise the text above{length}."),
        }
    }

    /// The prompt of `request_index` with a body of `filler_units` words.
    pub fn build(&self, request_index: u32, filler_units: u32) -> Prompt {
        // A group's shared prefix first (caches key on the start of the prompt), then the
        // request's own unique prefix.
        let prefix = format!(
            "{}{}",
            self.group_prefix(request_index),
            self.unique_prefix(request_index)
        );
        let body = self.body(request_index, filler_units);
        let instruction = self.instruction(request_index);
        let content = match self.spec.form {
            PromptForm::Messages => PromptContent::Messages(vec![
                ChatMessage::new("system", format!("{prefix}{SYSTEM_TEXT}")),
                ChatMessage::new("user", join_body(&body, &instruction)),
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn spec(mode: PromptCacheMode, form: PromptForm) -> PromptSpec {
        PromptSpec {
            seed: 38027,
            run_salt: "run-a".into(),
            workload_class: "headline-sustained-output".into(),
            context_target: 4096,
            cache_mode: mode,
            response_length: ResponseLength::AboutWords(256),
            canaries: true,
            form,
            groups: None,
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
}
