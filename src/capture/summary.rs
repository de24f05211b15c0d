//! The quick look printed after a run: counts, failures by outcome, TTFT p50/p95 and
//! aggregate output tok/s, from what the writer thread saw in memory. It is labelled as not
//! being the report's figures: those come from the SQL in `queries/` over the artifact.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::artifact::{Outcome, RequestKind};

/// What the writer thread knows about one request (times in ns since the run origin).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestFacts {
    pub kind: Option<RequestKind>,
    pub outcome: Option<Outcome>,
    /// When the schedule meant the request to go.
    pub t_intended_ns: Option<i64>,
    pub t_sent_ns: Option<i64>,
    pub t_done_ns: Option<i64>,
    pub first_content_ns: Option<i64>,
    pub completion_tokens: Option<i64>,
    pub prompt_tokens: Option<i64>,
    /// Reasoning tokens among the completion tokens, where the usage counts them.
    pub reasoning_tokens: Option<i64>,
    /// The last finish reason its stream carried.
    pub finish_reason: Option<String>,
    /// The first error its stream reported.
    pub stream_error: Option<String>,
}

/// Nearest-rank percentile (the value at rank ⌈p·n⌉ of the sorted values), as the manifest's
/// statistics define it. `sorted` must be sorted and non-empty.
fn nearest_rank(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    let rank = ((p * n as f64).ceil() as usize).clamp(1, n);
    sorted[rank - 1]
}

/// TTFT of the successful requests among `facts`, ms, sorted.
fn ttft_ms<'a>(facts: impl Iterator<Item = &'a RequestFacts>) -> Vec<f64> {
    let mut ttft: Vec<f64> = facts
        .filter(|f| f.outcome == Some(Outcome::Ok))
        .filter_map(|f| Some((f.first_content_ns? - f.t_sent_ns?) as f64 / 1e6))
        .collect();
    ttft.sort_by(f64::total_cmp);
    ttft
}

/// `p50 X ms, p95 Y ms (N requests)` of sorted TTFTs.
fn ttft_text(ttft: &[f64]) -> String {
    format!(
        "p50 {:.1} ms, p95 {:.1} ms ({} requests)",
        nearest_rank(ttft, 0.50),
        nearest_rank(ttft, 0.95),
        ttft.len()
    )
}

/// The measured requests of a Responses run that succeeded with status `completed` but fewer
/// usage output tokens than the `words` their prompt asked for (a word is at least one token):
/// `(request_index, output tokens)` in index order. vLLM ends a Responses stream it aborted
/// this way (`completed`, no `incomplete_details`), where chat says `abort`; the SQL's
/// `request_metrics.short_completion` flags the same requests.
pub fn short_completions(facts: &[RequestFacts], words: u32) -> Vec<(usize, i64)> {
    facts
        .iter()
        .enumerate()
        .filter(|(_, f)| {
            f.kind == Some(RequestKind::Measured)
                && f.outcome == Some(Outcome::Ok)
                && f.finish_reason.as_deref() == Some("completed")
        })
        .filter_map(|(i, f)| {
            let tokens = f.completion_tokens?;
            (tokens < i64::from(words)).then_some((i, tokens))
        })
        .collect()
}

/// How the first wave was started, for the quick look.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FirstWave {
    /// Its size: concurrency × replicas (0: no wave is shown apart).
    pub requests: usize,
    /// The start ramp, seconds.
    pub ramp_s: Option<f64>,
}

/// The quick-look text. The first wave (the first `wave.requests` measured requests by index,
/// which start together or across the ramp into an idle server) is shown apart from the rest.
pub fn quick_look(facts: &[RequestFacts], wave: FirstWave, channel_full: u64) -> String {
    let measured: Vec<&RequestFacts> = facts
        .iter()
        .filter(|f| f.kind == Some(RequestKind::Measured))
        .collect();
    let ok: Vec<&&RequestFacts> = measured
        .iter()
        .filter(|f| f.outcome == Some(Outcome::Ok))
        .collect();
    let mut failed: BTreeMap<&str, usize> = BTreeMap::new();
    for f in &measured {
        if let Some(o) = f.outcome
            && o != Outcome::Ok
        {
            *failed.entry(o.as_str()).or_default() += 1;
        }
    }
    let ttft = ttft_ms(measured.iter().copied());
    let tokens: i64 = ok.iter().filter_map(|f| f.completion_tokens).sum();
    let start = ok.iter().filter_map(|f| f.t_sent_ns).min();
    let end = ok.iter().filter_map(|f| f.t_done_ns).max();

    // Client-side queueing: how long a sent request waited between its intended time and the
    // write that sent it (an open loop whose slots were all busy, or a slow client).
    let mut queued: Vec<f64> = measured
        .iter()
        .filter_map(|f| Some((f.t_sent_ns? - f.t_intended_ns?).max(0) as f64 / 1e6))
        .collect();
    queued.sort_by(f64::total_cmp);

    let mut s = String::from("quick look (not the report's figures):\n");
    let _ = writeln!(
        s,
        "  requests: {} measured, {} ok, {} failed",
        measured.len(),
        ok.len(),
        measured.len() - ok.len()
    );
    if !failed.is_empty() {
        let parts: Vec<String> = failed.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(s, "  failures by class: {}", parts.join(", "));
    }
    if ttft.is_empty() {
        let _ = writeln!(s, "  TTFT: no successful request with content");
    } else {
        let _ = writeln!(s, "  TTFT {}", ttft_text(&ttft));
        let split = wave.requests.min(measured.len());
        if split > 0 && split < measured.len() {
            let first = ttft_ms(measured[..split].iter().copied());
            let rest = ttft_ms(measured[split..].iter().copied());
            let how = match wave.ramp_s {
                Some(r) => format!("started over the {r} s ramp"),
                None => "released together".to_owned(),
            };
            let part = |t: &[f64]| {
                if t.is_empty() {
                    "no successful request".to_owned()
                } else {
                    ttft_text(t)
                }
            };
            let _ = writeln!(
                s,
                "    first wave (first {split}, {how}): {}; later: {}",
                part(&first),
                part(&rest)
            );
        }
    }
    match (start, end) {
        (Some(a), Some(b)) if b > a => {
            let _ = writeln!(
                s,
                "  aggregate output: {:.1} tok/s ({tokens} completion tokens over {:.2} s)",
                tokens as f64 / ((b - a) as f64 / 1e9),
                (b - a) as f64 / 1e9
            );
        }
        _ => {
            let _ = writeln!(s, "  aggregate output: n/a");
        }
    }
    if let Some(max) = queued.last() {
        let _ = writeln!(
            s,
            "  client queueing (sent - intended): p50 {:.1} ms, p95 {:.1} ms, max {max:.1} ms",
            nearest_rank(&queued, 0.50),
            nearest_rank(&queued, 0.95),
        );
    }
    let _ = writeln!(s, "  writer channel full: {channel_full} times");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_matches_the_definition() {
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(nearest_rank(&v, 0.5), 10.0);
        assert_eq!(nearest_rank(&v, 0.95), 19.0);
        assert_eq!(nearest_rank(&[7.0], 0.99), 7.0);
    }

    #[test]
    fn short_completed_replies_are_found_by_their_output_tokens() {
        let reply = |kind, outcome, finish: &str, tokens| RequestFacts {
            kind: Some(kind),
            outcome: Some(outcome),
            completion_tokens: tokens,
            finish_reason: Some(finish.to_owned()),
            ..RequestFacts::default()
        };
        let facts = vec![
            reply(RequestKind::Measured, Outcome::Ok, "completed", Some(300)),
            reply(RequestKind::Measured, Outcome::Ok, "completed", Some(41)),
            // Cut by the ceiling (the server said so), failed, no usage, warm-up: not flagged.
            reply(
                RequestKind::Measured,
                Outcome::Ok,
                "max_output_tokens",
                Some(41),
            ),
            reply(
                RequestKind::Measured,
                Outcome::Aborted,
                "cancelled",
                Some(3),
            ),
            reply(RequestKind::Measured, Outcome::Ok, "completed", None),
            reply(RequestKind::Warmup, Outcome::Ok, "completed", Some(3)),
            reply(RequestKind::Measured, Outcome::Ok, "completed", Some(256)),
        ];
        assert_eq!(short_completions(&facts, 256), [(1, 41)]);
    }

    #[test]
    fn quick_look_counts_only_measured_requests() {
        let mut facts = vec![RequestFacts::default(); 10];
        for i in 0..4u32 {
            facts[i as usize] = RequestFacts {
                kind: Some(RequestKind::Measured),
                outcome: Some(if i == 3 {
                    Outcome::TimeoutIdle
                } else {
                    Outcome::Ok
                }),
                t_intended_ns: Some(-(i64::from(i) * 10_000_000)),
                t_sent_ns: Some(0),
                t_done_ns: Some(1_000_000_000),
                first_content_ns: Some(i64::from(i + 1) * 1_000_000),
                completion_tokens: Some(100),
                prompt_tokens: Some(10),
                reasoning_tokens: None,
                finish_reason: None,
                stream_error: None,
            };
        }
        facts[9] = RequestFacts {
            kind: Some(RequestKind::Warmup),
            outcome: Some(Outcome::HttpError),
            ..RequestFacts::default()
        };
        let s = quick_look(
            &facts,
            FirstWave {
                requests: 2,
                ramp_s: None,
            },
            2,
        );
        assert!(s.contains("4 measured, 3 ok, 1 failed"), "{s}");
        assert!(s.contains("timeout_idle 1"), "{s}");
        assert!(s.contains("TTFT p50 2.0 ms, p95 3.0 ms"), "{s}");
        assert!(
            s.contains(
                "first wave (first 2, released together): p50 1.0 ms, p95 2.0 ms (2 requests); \
                 later: p50 3.0 ms, p95 3.0 ms (1 requests)"
            ),
            "{s}"
        );
        assert!(s.contains("300.0 tok/s"), "{s}");
        assert!(s.contains("not the report's figures"));
        assert!(
            s.contains("client queueing (sent - intended): p50 10.0 ms, p95 30.0 ms, max 30.0 ms"),
            "{s}"
        );
    }
}
