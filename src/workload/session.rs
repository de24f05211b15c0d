//! Session workloads: N conversations of T turns each, every turn after the first carrying
//! the conversation so far (the earlier user messages and the assistant's **actual**
//! replies, read back from the recorded stream) and a new user message with its own canary.
//!
//! What is fixed before the run, seeded by the manifest seed and the class id, is the
//! [`SessionPlan`]: each session's turn count (fixed, or drawn uniformly from a range), the
//! think time before each later turn (fixed, or exponential with a stated mean), and in open
//! loop each session's arrival offset (a Poisson process at `rate_per_s`). Request indices
//! are session-major: session `s`'s turns are `first_index[s] .. first_index[s] + turns[s]`,
//! so the measured requests are `0 .. Σ turns`.
//!
//! What depends on the server is the history: [`Conversation::next_turn`] appends the
//! previous turn's reply (its content; its reasoning only when `keep_reasoning` is set: the
//! engines' chat templates drop earlier reasoning, and a client that resends it pays its
//! prefill) and the next user message. The next prompt starts with the previous one byte for
//! byte, so a server's prefix cache can serve the whole history.
//!
//! ```json
//! "workloads": [{
//!   "class": "chat-sessions", "gate": "broad repeated quality, agentic, SWE, and endurance",
//!   "context": 1024, "concurrency": 4, "reply_words": 48, "max_tokens": 128,
//!   "session": {"sessions": 24, "turns": {"min": 2, "max": 4}, "turn_words": 64,
//!               "think_time_s": {"mean_s": 0.5}}
//! }]
//! ```

use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::prompt::{ChatMessage, Prompt, PromptBuilder, PromptContent};
use crate::manifest::Problem;

/// How many turns a session has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TurnCount {
    /// Every session the same.
    Fixed(u32),
    /// Drawn uniformly from `min ..= max` per session (seeded).
    Range { min: u32, max: u32 },
}

/// The pause between a reply's last byte and the next turn's send.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ThinkTime {
    /// Always this many seconds.
    Fixed(f64),
    /// Exponential with this mean, seconds (seeded).
    Exponential { mean_s: f64 },
}

impl Eq for ThinkTime {}

fn no_think() -> ThinkTime {
    ThinkTime::Fixed(0.0)
}

fn default_turn_words() -> u32 {
    64
}

/// A declared session workload (a class's `session`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionSpec {
    /// N: the sessions measured, all replicas together.
    pub sessions: u32,
    /// T: turns per session.
    pub turns: TurnCount,
    /// Filler words of each later turn's new user message (default 64); the first turn is
    /// sized to the class's `context`.
    #[serde(default = "default_turn_words")]
    pub turn_words: u32,
    /// Think time before each later turn (default 0).
    #[serde(default = "no_think")]
    pub think_time_s: ThinkTime,
    /// Open loop: sessions arrive at this mean rate per second (Poisson), at most
    /// `concurrency` of them in flight per replica. Absent: closed loop, `concurrency`
    /// sessions in flight per replica, the next one starting when one ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_s: Option<f64>,
    /// Keep each reply's reasoning in the history (as the assistant message's
    /// `reasoning_content`); default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_reasoning: bool,
    /// Agentic loops: every k-th later turn (turn k, 2k, …) is a tool turn, whose new
    /// message is not the user's but a tool's result: the history gains the assistant's
    /// reply with a `tool_calls` entry and a `tool` message answering it. Absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_every: Option<u32>,
}

impl Eq for SessionSpec {}

/// The most turns a session may have.
pub const MAX_TURNS: u32 = 64;
/// The most sessions a class may declare.
pub const MAX_SESSIONS: u32 = 100_000;
/// The fastest session arrival rate, per second.
pub const MAX_SESSION_RATE: f64 = 1e5;
/// The longest the sessions of an open loop may take to arrive, on average (a day).
pub const MAX_ARRIVAL_SPAN_S: f64 = 86_400.0;

impl SessionSpec {
    /// What the declaration states wrongly, fields under `at` (e.g. `workloads[0].session`).
    pub fn problems(&self, at: &str) -> Vec<Problem> {
        let mut out = Vec::new();
        let mut say =
            |field: &str, what: String| out.push(Problem::new(format!("{at}.{field}"), what));
        if self.sessions == 0 || self.sessions > MAX_SESSIONS {
            say(
                "sessions",
                format!("{}: give 1 to {MAX_SESSIONS} sessions", self.sessions),
            );
        }
        let (lo, hi) = self.turn_bounds();
        if lo == 0 || hi > MAX_TURNS || lo > hi {
            say(
                "turns",
                format!(
                    "{lo}..{hi}: a session has 1 to {MAX_TURNS} turns (a number, or \
                     {{\"min\": a, \"max\": b}} with a ≤ b)"
                ),
            );
        }
        if self.turn_words == 0 {
            say(
                "turn_words",
                "0: a later turn's message needs words of its own".into(),
            );
        }
        let think = match self.think_time_s {
            ThinkTime::Fixed(s) | ThinkTime::Exponential { mean_s: s } => s,
        };
        if !think.is_finite() || !(0.0..=3600.0).contains(&think) {
            say(
                "think_time_s",
                format!("{think}: give 0 to 3600 seconds (or {{\"mean_s\": s}})"),
            );
        }
        if self.tool_every == Some(0) {
            say(
                "tool_every",
                "0: give k ≥ 1 (every k-th later turn a tool turn), or leave it out".into(),
            );
        }
        if let Some(Err(why)) = self.rate_per_s.map(|r| self.arrival_rate_problem(r)) {
            say("rate_per_s", why);
        }
        out
    }

    /// Why `rate` cannot be these sessions' arrival rate: not above 0, above
    /// [`MAX_SESSION_RATE`], or so slow the sessions take over a day to arrive.
    pub fn arrival_rate_problem(&self, rate: f64) -> Result<(), String> {
        if !rate.is_finite() || rate <= 0.0 || rate > MAX_SESSION_RATE {
            return Err(format!(
                "{rate}: a session arrival rate is above 0 and at most {MAX_SESSION_RATE} per \
                 second"
            ));
        }
        if f64::from(self.sessions) / rate > MAX_ARRIVAL_SPAN_S {
            return Err(format!(
                "{rate}: {} sessions arriving at that rate take over a day on average; give a \
                 higher rate",
                self.sessions
            ));
        }
        Ok(())
    }

    /// Whether later turn `turn` is a tool turn.
    pub fn tool_turn(&self, turn: u32) -> bool {
        turn > 0
            && self
                .tool_every
                .is_some_and(|k| k > 0 && turn.is_multiple_of(k))
    }

    /// The fewest and most turns a session can have.
    pub fn turn_bounds(&self) -> (u32, u32) {
        match self.turns {
            TurnCount::Fixed(t) => (t, t),
            TurnCount::Range { min, max } => (min, max),
        }
    }

    /// The plan of one run's sessions, seeded by `seed` and the class id.
    pub fn plan(&self, seed: u64, class: &str) -> SessionPlan {
        let mut h = Sha256::new();
        h.update(b"anvil-sessions/v1\0");
        h.update(seed.to_le_bytes());
        h.update(class.as_bytes());
        let d = h.finalize();
        let mut s = [0u8; 8];
        s.copy_from_slice(&d[..8]);
        let mut rng = rand::rngs::StdRng::seed_from_u64(u64::from_le_bytes(s));
        let (lo, hi) = self.turn_bounds();
        let mut turns = Vec::with_capacity(self.sessions as usize);
        let mut first_index = Vec::with_capacity(self.sessions as usize);
        let mut think_ns = Vec::new();
        let mut next = 0u32;
        for _ in 0..self.sessions {
            let t = if hi > lo {
                rng.random_range(lo..=hi)
            } else {
                lo.max(1)
            };
            turns.push(t);
            first_index.push(next);
            next += t;
            for k in 0..t {
                let secs = match self.think_time_s {
                    _ if k == 0 => 0.0,
                    ThinkTime::Fixed(s) => s,
                    ThinkTime::Exponential { mean_s } if mean_s > 0.0 => {
                        rand_distr::Distribution::sample(
                            &rand_distr::Exp::new(1.0 / mean_s).expect("a positive rate"),
                            &mut rng,
                        )
                    }
                    ThinkTime::Exponential { .. } => 0.0,
                };
                think_ns.push((secs * 1e9).round() as i64);
            }
        }
        let arrivals_ns = self.rate_per_s.map(|rate| {
            let exp = rand_distr::Exp::new(rate).expect("a positive rate");
            let mut at = 0.0f64;
            (0..self.sessions)
                .map(|s| {
                    if s > 0 {
                        at += rand_distr::Distribution::sample(&exp, &mut rng);
                    }
                    (at * 1e9).round() as i64
                })
                .collect()
        });
        SessionPlan {
            turns,
            first_index,
            think_ns,
            arrivals_ns,
        }
    }
}

/// One run's sessions, fixed before it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionPlan {
    /// Turns of session `s`.
    pub turns: Vec<u32>,
    /// The request index of session `s`'s first turn.
    pub first_index: Vec<u32>,
    /// Per request index: the think time before it, ns (0 for a first turn).
    pub think_ns: Vec<i64>,
    /// Open loop: session `s`'s arrival, ns after the release.
    pub arrivals_ns: Option<Vec<i64>>,
}

impl SessionPlan {
    /// Measured requests: every session's turns.
    pub fn requests(&self) -> u64 {
        self.turns.iter().map(|t| u64::from(*t)).sum()
    }

    /// (session, turn) of request `index`, if it is a measured one.
    pub fn turn_of(&self, index: u32) -> Option<(u32, u32)> {
        let s = self
            .first_index
            .partition_point(|f| *f <= index)
            .checked_sub(1)?;
        let turn = index - self.first_index[s];
        (turn < self.turns[s]).then_some((s as u32, turn))
    }
}

/// A session class's cell: what was declared and the plan it gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCell {
    pub spec: SessionSpec,
    pub plan: std::sync::Arc<SessionPlan>,
}

impl SessionCell {
    /// What `run.json` says of the sessions (part of the workload fingerprint).
    pub fn record(&self) -> crate::artifact::SessionsRecord {
        let (turns_min, turns_max) = self.spec.turn_bounds();
        let (think_time, think_time_s) = match self.spec.think_time_s {
            ThinkTime::Fixed(s) => ("fixed", s),
            ThinkTime::Exponential { mean_s } => ("exponential", mean_s),
        };
        crate::artifact::SessionsRecord {
            sessions: self.spec.sessions,
            turns_min,
            turns_max,
            turn_words: self.spec.turn_words,
            think_time: think_time.to_owned(),
            think_time_s,
            rate_per_s: self.spec.rate_per_s,
            keep_reasoning: self.spec.keep_reasoning,
            tool_every: self.spec.tool_every,
        }
    }

    /// How the sessions are released: at their arrival rate (open loop), or `concurrency`
    /// at a time per replica (closed loop).
    pub fn schedule(&self) -> crate::artifact::Schedule {
        match self.spec.rate_per_s {
            Some(rate_per_s) => crate::artifact::Schedule::Open {
                rate_per_s,
                arrivals: crate::artifact::Arrivals::Poisson,
            },
            None => crate::artifact::Schedule::Closed,
        }
    }
}

/// The function a tool turn's call names.
pub const TOOL_NAME: &str = "lookup";

/// What a reply gave the conversation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reply {
    /// The content deltas in order.
    pub content: String,
    /// The reasoning deltas in order.
    pub reasoning: String,
}

/// One session's conversation: the prompt its last turn sent.
#[derive(Debug, Clone)]
pub struct Conversation {
    content: PromptContent,
}

impl Conversation {
    /// A conversation opened by its first turn's prompt.
    pub fn open(first: &Prompt) -> Self {
        Self {
            content: first.content.clone(),
        }
    }

    /// The prompt of turn `turn` (request `index`): the last prompt, `reply` as the
    /// assistant's message, then a new message of `turn_words` filler words with its own
    /// canary and instruction: the user's, or with `tool` a tool's result, the assistant's
    /// message then carrying the call it answers.
    #[allow(clippy::too_many_arguments)]
    pub fn next_turn(
        &mut self,
        builder: &PromptBuilder,
        reply: &Reply,
        keep_reasoning: bool,
        index: u32,
        turn: u32,
        turn_words: u32,
        tool: bool,
    ) -> Prompt {
        let message = format!(
            "{} {turn}. {}\n\n{}",
            if tool { "Tool result for turn" } else { "Turn" },
            builder.body(index, turn_words),
            builder.instruction(index)
        );
        match &mut self.content {
            PromptContent::Messages(m) => {
                let call_id = format!("call_{index}");
                m.push(ChatMessage {
                    reasoning_content: (keep_reasoning && !reply.reasoning.is_empty())
                        .then(|| reply.reasoning.clone()),
                    tool_calls: tool.then(|| {
                        serde_json::json!([{
                            "id": call_id,
                            "type": "function",
                            "function": {
                                "name": TOOL_NAME,
                                "arguments": format!("{{\"turn\": {turn}}}"),
                            }
                        }])
                    }),
                    ..ChatMessage::new("assistant", reply.content.clone())
                });
                if tool {
                    m.push(ChatMessage {
                        tool_call_id: Some(call_id),
                        ..ChatMessage::new("tool", message)
                    });
                } else {
                    m.push(ChatMessage::new("user", message));
                }
            }
            PromptContent::Text(t) => {
                // The completions and Responses prompt is one text: the reply continues it.
                if keep_reasoning && !reply.reasoning.is_empty() {
                    t.push_str(&reply.reasoning);
                }
                t.push_str(&reply.content);
                t.push_str("\n\n");
                t.push_str(&message);
                t.push('\n');
            }
        }
        let sha256 = hex::encode(Sha256::digest(self.content.sent_bytes()));
        Prompt {
            request_index: index,
            filler_units: turn_words,
            canary: builder.canary(index),
            chars: self.content.chars(),
            content: self.content.clone(),
            sha256,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::prompt::tests::spec;
    use crate::workload::prompt::{PromptCacheMode, PromptForm};

    fn declared(turns: TurnCount, think: ThinkTime, rate: Option<f64>) -> SessionSpec {
        SessionSpec {
            sessions: 20,
            turns,
            turn_words: 32,
            think_time_s: think,
            rate_per_s: rate,
            keep_reasoning: false,
            tool_every: None,
        }
    }

    #[test]
    fn the_plan_is_seeded_and_session_major() {
        let s = declared(
            TurnCount::Range { min: 2, max: 5 },
            ThinkTime::Exponential { mean_s: 0.5 },
            Some(4.0),
        );
        let a = s.plan(7, "chat");
        assert_eq!(a, s.plan(7, "chat"));
        assert_ne!(a, s.plan(8, "chat"));
        assert!(a.turns.iter().all(|t| (2..=5).contains(t)));
        assert!(a.turns.iter().any(|t| *t != a.turns[0]), "{:?}", a.turns);
        assert_eq!(a.think_ns.len() as u64, a.requests());
        for (s, f) in a.first_index.iter().enumerate() {
            assert_eq!(a.turn_of(*f), Some((s as u32, 0)));
            assert_eq!(a.think_ns[*f as usize], 0);
            let last = f + a.turns[s] - 1;
            assert_eq!(a.turn_of(last), Some((s as u32, a.turns[s] - 1)));
        }
        assert_eq!(a.turn_of(a.requests() as u32), None);
        let arrivals = a.arrivals_ns.unwrap();
        assert_eq!(arrivals[0], 0);
        assert!(arrivals.windows(2).all(|w| w[0] <= w[1]));
        let fixed = declared(TurnCount::Fixed(3), ThinkTime::Fixed(0.25), None).plan(7, "c");
        assert_eq!(fixed.requests(), 60);
        assert_eq!(fixed.think_ns[1], 250_000_000);
        assert!(fixed.arrivals_ns.is_none());
    }

    #[test]
    fn bad_declarations_name_their_field() {
        let mut s = declared(
            TurnCount::Range { min: 4, max: 2 },
            ThinkTime::Fixed(-1.0),
            Some(0.0),
        );
        s.sessions = 0;
        s.turn_words = 0;
        let fields: Vec<String> = s.problems("w").into_iter().map(|p| p.field).collect();
        assert_eq!(
            fields,
            [
                "w.sessions",
                "w.turns",
                "w.turn_words",
                "w.think_time_s",
                "w.rate_per_s"
            ]
        );
    }

    #[test]
    fn each_turn_extends_the_last_prompt_byte_for_byte() {
        for form in [PromptForm::Messages, PromptForm::Text] {
            let b = PromptBuilder::new(spec(PromptCacheMode::Unique, form));
            let first = b.build(0, 40);
            let mut c = Conversation::open(&first);
            let reply = Reply {
                content: "ANV-0123456789ab the reply".into(),
                reasoning: "thinking it over".into(),
            };
            let second = c.next_turn(&b, &reply, false, 1, 1, 16, false);
            let (a, z) = (first.content.sent_bytes(), second.content.sent_bytes());
            match form {
                // The messages array gains two messages after the first ones.
                PromptForm::Messages => {
                    let PromptContent::Messages(m) = &second.content else {
                        panic!()
                    };
                    assert_eq!(m.len(), 4);
                    assert_eq!(m[2].content, reply.content);
                    assert_eq!(m[2].reasoning_content, None);
                    assert_eq!(&z[..a.len() - 1], &a[..a.len() - 1]);
                }
                PromptForm::Text => assert!(z.starts_with(&a)),
            }
            assert_eq!(second.canary, b.canary(1));
            assert_ne!(second.canary, first.canary);
            let text = String::from_utf8(z).unwrap();
            assert!(text.contains(second.canary.as_deref().unwrap()));
            assert!(!text.contains("thinking it over"));
            let third = c.next_turn(&b, &reply, true, 2, 2, 16, true);
            let text = String::from_utf8(third.content.sent_bytes()).unwrap();
            assert!(text.contains("thinking it over"), "{text}");
            assert!(text.contains("Tool result for turn 2."));
            if let PromptContent::Messages(m) = &third.content {
                assert_eq!(m[4].tool_calls.as_ref().unwrap()[0]["id"], "call_2");
                assert_eq!(m[5].role, "tool");
                assert_eq!(m[5].tool_call_id.as_deref(), Some("call_2"));
            }
        }
    }
}
