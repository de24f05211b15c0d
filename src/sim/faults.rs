//! Fault injection: the kinds, their wire behaviour, and the seeded per-request draw.
//!
//! Each `--fault KIND=RATE` is drawn independently per request from a generator seeded by
//! the server seed, the replica and the request's arrival index on that replica, so a run
//! with the same seed and arrival order faults the same requests. Wire behaviour:
//!
//! | kind | what the client sees |
//! |---|---|
//! | `contaminate` | the reply carries another in-flight request's canary (a fabricated one when none is in flight), right after its own |
//! | `disconnect` | the connection is closed mid-stream: no terminating chunk, no `[DONE]` |
//! | `http500` | HTTP 500 with an OpenAI-style JSON error, before any streaming |
//! | `http429` | HTTP 429 with `Retry-After: 1` and a JSON error |
//! | `malformed` | one extra SSE `data:` line mid-stream that is not valid JSON; the stream continues |
//! | `stall` | no bytes for `--stall-ms` mid-stream, then the stream continues (the sequence keeps its batch slot) |
//! | `no-usage` | no usage chunk (streaming) / no `usage` field (non-streaming, Responses) |
//! | `bad-json` | under `response_format` json_schema, the content is invalid JSON (truncated) |
//! | `restart` | mid-stream, the replica drops every in-flight and waiting stream (connections closed), clears its prefix cache, resets its counters and changes `process_start_time_seconds` |
//! | `wrong-tool` | the tool call names a function that was not offered (requests with `tools` only) |
//! | `tool-contaminate` | the tool call's first string argument carries another request's canary (requests with `tools` only) |
//! | `responses-malformed` | on `/v1/responses`, one `response.output_text.delta` event's data is not valid JSON (other endpoints unaffected) |
//! | `abort` | mid-stream, the stream ends cleanly as vLLM ends a request it aborts (e.g. when the server is stopped): a last chunk with `finish_reason: "abort"` and no usage, then `data: [DONE]` (Responses: `response.completed` with status `cancelled`) |
//! | `stream-error` | mid-stream, an error event `data: {"error": {"message": "CUDA error: an illegal memory access was encountered", ...}}` (Responses: an `error` event), then the stream ends without its terminal event, as llama.cpp's server ends a generation that failed |
//! | `cache-leak` | the reply carries, right after its own canary, the canary of an earlier prompt this replica served that this prompt does not hold: another session's cached content served into this one's reply (nothing when the replica has served no other canary) |
//!
//! "Mid-stream" is the middle decode step of the reply. `http500`/`http429` come after the
//! body is read and validated (a `request_read` truth row exists), before any generation;
//! `bad-json` applies only under `response_format`.

use rand::{Rng, SeedableRng, rngs::StdRng};

/// One kind of injected fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultKind {
    Contaminate,
    Disconnect,
    Http500,
    Http429,
    Malformed,
    Stall,
    NoUsage,
    BadJson,
    Restart,
    WrongTool,
    ToolContaminate,
    ResponsesMalformed,
    Abort,
    StreamError,
    CacheLeak,
}

impl FaultKind {
    /// Every kind, in `--help` order.
    pub const ALL: [FaultKind; 15] = [
        FaultKind::Contaminate,
        FaultKind::Disconnect,
        FaultKind::Http500,
        FaultKind::Http429,
        FaultKind::Malformed,
        FaultKind::Stall,
        FaultKind::NoUsage,
        FaultKind::BadJson,
        FaultKind::Restart,
        FaultKind::WrongTool,
        FaultKind::ToolContaminate,
        FaultKind::ResponsesMalformed,
        FaultKind::Abort,
        FaultKind::StreamError,
        FaultKind::CacheLeak,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Contaminate => "contaminate",
            FaultKind::Disconnect => "disconnect",
            FaultKind::Http500 => "http500",
            FaultKind::Http429 => "http429",
            FaultKind::Malformed => "malformed",
            FaultKind::Stall => "stall",
            FaultKind::NoUsage => "no-usage",
            FaultKind::BadJson => "bad-json",
            FaultKind::Restart => "restart",
            FaultKind::WrongTool => "wrong-tool",
            FaultKind::ToolContaminate => "tool-contaminate",
            FaultKind::ResponsesMalformed => "responses-malformed",
            FaultKind::Abort => "abort",
            FaultKind::StreamError => "stream-error",
            FaultKind::CacheLeak => "cache-leak",
        }
    }

    /// What the client sees, in one short line of `--help` (the module doc has the whole
    /// story): under 58 characters, so the kind's line fits 80 columns.
    pub fn wire_behaviour(self) -> &'static str {
        match self {
            FaultKind::Contaminate => "reply carries another request's canary (or a fake one)",
            FaultKind::Disconnect => "connection closed mid-stream: no final chunk, no [DONE]",
            FaultKind::Http500 => "HTTP 500 with a JSON error, before streaming",
            FaultKind::Http429 => "HTTP 429 with Retry-After: 1 and a JSON error",
            FaultKind::Malformed => "one extra SSE data line that is not JSON; stream goes on",
            FaultKind::Stall => "no bytes for --stall-ms mid-stream, then it goes on",
            FaultKind::NoUsage => "no usage chunk / no usage field",
            FaultKind::BadJson => "under a json_schema response_format, invalid JSON",
            FaultKind::Restart => "replica drops streams, cache, counters; new start time",
            FaultKind::WrongTool => "tool call names a function that was not offered",
            FaultKind::ToolContaminate => "tool arguments carry another request's canary",
            FaultKind::ResponsesMalformed => "/v1/responses: one delta event's data is not JSON",
            FaultKind::Abort => "ends mid-reply with finish_reason abort, then [DONE]",
            FaultKind::StreamError => "mid-stream error event (a CUDA error), then no [DONE]",
            FaultKind::CacheLeak => "reply carries an earlier cached prompt's canary",
        }
    }

    /// Parse a command-line name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == s)
    }

    fn index(self) -> usize {
        Self::ALL.iter().position(|k| *k == self).unwrap_or(0)
    }
}

/// Configured rate per fault kind.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultRates {
    rates: [f64; FaultKind::ALL.len()],
}

impl FaultRates {
    pub fn set(&mut self, kind: FaultKind, rate: f64) {
        self.rates[kind.index()] = rate;
    }

    pub fn rate(&self, kind: FaultKind) -> f64 {
        self.rates[kind.index()]
    }

    /// Draw the faults of one request (each kind independently).
    pub fn draw(&self, seed: u64, replica: usize, request_index: u64) -> Faults {
        let mut rng = StdRng::seed_from_u64(
            seed ^ 0x5eed_fa17_0000_0000
                ^ ((replica as u64) << 48)
                ^ request_index.wrapping_mul(0x9e37_79b9_7f4a_7c15),
        );
        let mut on = [false; FaultKind::ALL.len()];
        for (i, r) in self.rates.iter().enumerate() {
            // Always draw, so one kind's rate does not shift another kind's draws.
            let u: f64 = rng.random();
            on[i] = *r > 0.0 && u < *r;
        }
        Faults { on }
    }
}

/// The faults drawn for one request.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Faults {
    on: [bool; FaultKind::ALL.len()],
}

impl Faults {
    pub fn has(&self, kind: FaultKind) -> bool {
        self.on[kind.index()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_rates_apply() {
        for k in FaultKind::ALL {
            assert_eq!(FaultKind::parse(k.name()), Some(k));
        }
        let mut r = FaultRates::default();
        r.set(FaultKind::Stall, 1.0);
        r.set(FaultKind::Disconnect, 0.5);
        let mut n = 0;
        for i in 0..1000 {
            let f = r.draw(7, 0, i);
            assert!(f.has(FaultKind::Stall));
            assert!(!f.has(FaultKind::Http500));
            n += f.has(FaultKind::Disconnect) as u32;
            assert_eq!(f, r.draw(7, 0, i));
        }
        assert!((400..600).contains(&n), "{n}");
    }

    /// The module doc's table of wire behaviours names exactly the kinds the parser accepts,
    /// in `--help` order.
    #[test]
    fn the_doc_table_lists_every_kind_the_parser_accepts() {
        let documented: Vec<&str> = include_str!("faults.rs")
            .lines()
            .filter_map(|l| l.strip_prefix("//! | `"))
            .filter_map(|l| l.split_once('`').map(|(name, _)| name))
            .collect();
        let parsed: Vec<&str> = FaultKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(documented, parsed);
        for k in FaultKind::ALL {
            assert!(k.wire_behaviour().chars().count() < 58, "{}", k.name());
        }
    }
}
