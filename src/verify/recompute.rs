//! The independent recomputation: per-request TTFT, effective prefill, decode, TPOT, E2E, the
//! first wave, and per window (`all`, `after_first_wave`) their statistics, the percentiles'
//! distribution-free intervals and the aggregate output throughput, with polars reading the
//! Parquet files itself (its eager reader, one file at a time, only the columns used) and
//! computing the statistics; the per-request join of events to requests is a loop here. No
//! DataFusion, no `queries/` SQL and no [`crate::stats`] code on this path: the definitions
//! are written out again here from the manifest and docs/artifact.md (the binomial CDF of
//! the intervals summed term by term here, where the SQL inverts statrs' incomplete beta
//! function), so a mistake in one path shows as a difference.

use std::collections::BTreeMap;

use polars_core::prelude::*;

use super::frame::{i64_column, read, str_column};
use crate::query::ArtifactSource;

/// Per-request figures of one measured request (NULL where the definition has no value).
#[derive(Debug, Clone, PartialEq)]
pub struct RequestFigures {
    pub request_index: i64,
    pub ok: bool,
    /// In the run's first wave (left out of `after_first_wave`).
    pub first_wave: bool,
    /// ttft_ms, effective_prefill_tps, decode_tps, tpot_ms, itl_ms, e2e_ms.
    pub metrics: [Option<f64>; 6],
    /// Succeeded and met every SLO given (false with none given).
    pub attained: bool,
}

/// One SLO as the recomputation applies it: the metric's place in [`METRICS`], whether the
/// bound is an upper one (`<=`), the bound, and the turns it holds for (`first ..= last`,
/// no `last`: every later turn; a request outside a session is turn 0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bound {
    pub metric: usize,
    pub upper: bool,
    pub value: f64,
    pub first_turn: i64,
    pub last_turn: Option<i64>,
}

impl Bound {
    /// The SLOs runs of workload class `class` are judged by (the class's own list where the
    /// campaign gives one, else the default), as bounds.
    pub fn of_class(slos: &crate::slo::Slos, class: &str) -> Vec<Bound> {
        slos.for_class(class)
            .iter()
            .map(|s| Bound {
                metric: METRICS
                    .iter()
                    .position(|m| *m == s.metric.as_str())
                    .unwrap_or(0),
                upper: s.op() == "<=",
                value: s.bound,
                first_turn: i64::from(s.turns.first),
                last_turn: s.turns.last.map(i64::from),
            })
            .collect()
    }
}

/// Session goodput of one window (a session workload's run with SLOs given): its sessions,
/// those whose every turn attained, their turns, the share's exact 95% interval and goodput
/// per second of the window's sessions' span.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SessionGoodput {
    pub sessions: f64,
    pub attained: f64,
    pub turns: f64,
    pub turns_attained: f64,
    pub share: Option<f64>,
    pub low: Option<f64>,
    pub high: Option<f64>,
    pub sps: Option<f64>,
    pub tps: Option<f64>,
}

/// Goodput of one window: the requests, those attained, their share's exact 95% interval
/// and goodput per second of the window's span.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Goodput {
    pub requests: f64,
    pub attained: f64,
    pub share: Option<f64>,
    pub low: Option<f64>,
    pub high: Option<f64>,
    pub rps: Option<f64>,
    pub tps: Option<f64>,
}

/// Metric names, in [`RequestFigures::metrics`] order (the catalogue's columns).
pub const METRICS: [&str; 6] = crate::metric::MetricId::COLUMNS;

/// Statistic names, in [`Figures`] order: the point statistics, then the percentiles'
/// interval ends (the lists of `crate::stats`).
pub const STATISTICS: [&str; 31] = {
    let mut out = [""; 31];
    let mut k = 0;
    while k < 15 {
        out[k] = crate::stats::STATISTICS[k];
        k += 1;
    }
    while k < 31 {
        out[k] = crate::stats::INTERVAL_COLUMNS[k - 15];
        k += 1;
    }
    out
};

/// The windows, as the `window` column names them.
pub const WINDOWS: [&str; 2] = ["all", "after_first_wave"];

/// The statistics of one metric of one artifact over one window, in [`STATISTICS`] order.
pub type Figures = [Option<f64>; 31];

/// Everything recomputed for one artifact.
#[derive(Debug, Clone)]
pub struct Recomputed {
    pub run_id: String,
    pub requests: Vec<RequestFigures>,
    /// Per (window, metric name).
    pub stats: BTreeMap<(&'static str, &'static str), Figures>,
    /// Aggregate output throughput of the whole run per window, tokens per second.
    pub output_tps: BTreeMap<&'static str, Option<f64>>,
    /// Goodput per window; empty with no SLO given.
    pub goodput: BTreeMap<&'static str, Goodput>,
    /// Session goodput per window; empty with no SLO given or for any other workload.
    pub session_goodput: BTreeMap<&'static str, SessionGoodput>,
    /// The arm's GPU energy per window; empty without telemetry.
    pub energy: BTreeMap<&'static str, super::energy::Energy>,
}

/// What one request's events say: the first non-empty content delta's time and the largest
/// usage figures any event carries.
#[derive(Debug, Default, Clone, Copy)]
struct EventFacts {
    first_content_ns: Option<i64>,
    prompt_tokens: Option<i64>,
    completion_tokens: Option<i64>,
}

/// One measured request's row.
#[derive(Debug, Clone)]
struct MeasuredRequest {
    index: Option<i64>,
    /// A session workload's (session, turn).
    session: Option<(i64, i64)>,
    outcome: Option<String>,
    intended: Option<i64>,
    sent: Option<i64>,
    done: Option<i64>,
}

fn no_data(table: &str) -> PolarsError {
    PolarsError::NoData(format!("no Parquet file for the {table} table").into())
}

/// Recompute one artifact's figures.
pub fn recompute(artifact: &ArtifactSource, slos: &[Bound]) -> PolarsResult<Recomputed> {
    use crate::artifact::Table;

    // Measured requests, in request order.
    let mut requests: Vec<MeasuredRequest> = Vec::new();
    let files = artifact.files(Table::Requests);
    if files.is_empty() {
        return Err(no_data("requests"));
    }
    // A session workload's runs are anvil-artifact/3, which has the session columns.
    let sessions = artifact.run.workload.sessions.is_some();
    // Per session: its turns never sent because an earlier one failed.
    let mut cut_turns: BTreeMap<i64, u64> = BTreeMap::new();
    for f in files {
        let mut columns = vec![
            "request_index",
            "kind",
            "outcome",
            "t_intended_ns",
            "t_sent_ns",
            "t_done_ns",
        ];
        if sessions {
            columns.extend(["session_id", "turn", "error"]);
        }
        let df = read(f, &columns)?;
        let (session, turn, error) = if sessions {
            (
                i64_column(&df, "session_id")?,
                i64_column(&df, "turn")?,
                str_column(&df, "error")?,
            )
        } else {
            let none = vec![None; df.height()];
            (none.clone(), none, vec![None; df.height()])
        };
        let index = i64_column(&df, "request_index")?;
        let kind = str_column(&df, "kind")?;
        let outcome = str_column(&df, "outcome")?;
        let intended = i64_column(&df, "t_intended_ns")?;
        let sent = i64_column(&df, "t_sent_ns")?;
        let done = i64_column(&df, "t_done_ns")?;
        for i in 0..df.height() {
            // A session's turn never sent because an earlier one failed is not a request of
            // the statistics (the failed turn is the failure).
            let cut = session[i].is_some()
                && sent[i].is_none()
                && error[i]
                    .as_deref()
                    .is_some_and(|e| e.starts_with("never sent: turn "));
            if kind[i].as_deref() == Some("measured") && cut {
                *cut_turns.entry(session[i].unwrap_or(-1)).or_default() += 1;
            }
            if kind[i].as_deref() == Some("measured") && !cut {
                requests.push(MeasuredRequest {
                    index: index[i],
                    session: session[i].zip(turn[i]),
                    outcome: outcome[i].clone(),
                    intended: intended[i],
                    sent: sent[i],
                    done: done[i],
                });
            }
        }
    }
    requests.sort_by_key(|r| r.index);

    // First non-empty content delta (NULL and '' excluded; reasoning deltas are another
    // column) and the usage of whichever event carries it.
    let mut events: BTreeMap<i64, EventFacts> = BTreeMap::new();
    let files = artifact.files(Table::Events);
    if files.is_empty() {
        return Err(no_data("events"));
    }
    for f in files {
        let df = read(
            f,
            &[
                "request_index",
                "t_ns",
                "content_delta",
                "usage_prompt_tokens",
                "usage_completion_tokens",
            ],
        )?;
        // Walked as they are read (10M events would be 640 MB as four vectors of options).
        let as_i64 = |name: &str| df.column(name)?.cast(&DataType::Int64);
        let (index, t) = (as_i64("request_index")?, as_i64("t_ns")?);
        let (prompt, completion) = (
            as_i64("usage_prompt_tokens")?,
            as_i64("usage_completion_tokens")?,
        );
        let content = df.column("content_delta")?.str()?;
        let rows = index.i64()?.iter().zip(t.i64()?.iter()).zip(
            content
                .iter()
                .zip(prompt.i64()?.iter().zip(completion.i64()?.iter())),
        );
        for ((request, t), (delta, (prompt, completion))) in rows {
            let Some(request) = request else { continue };
            let e = events.entry(request).or_default();
            if delta.is_some_and(|d| !d.is_empty()) {
                e.first_content_ns = e.first_content_ns.into_iter().chain(t).min();
            }
            // `None` orders below every `Some`: the largest value present, or none.
            e.prompt_tokens = e.prompt_tokens.max(prompt);
            e.completion_tokens = e.completion_tokens.max(completion);
        }
    }

    // The first wave (docs/artifact.md "Windows"): with a ramp, the requests meant to start
    // before it ended; closed loop, the first C x replicas by index; open loop, none.
    let run = &artifact.run;
    let release = requests.iter().filter_map(|r| r.intended).min();
    let wave_size =
        u64::from(run.workload.concurrency_per_replica) * u64::from(run.topology.replica_count);
    let in_first_wave = |position: usize, r: &MeasuredRequest| match run.workload.ramp_s {
        Some(ramp) => r
            .intended
            .zip(release)
            .is_some_and(|(t, t0)| ((t - t0) as f64) < ramp * 1e9),
        // A session workload: the first turns of the first wave's sessions.
        None if run.workload.schedule.kind() == "closed" && run.workload.sessions.is_some() => r
            .session
            .is_some_and(|(s, turn)| turn == 0 && (s as u64) < wave_size),
        None if run.workload.schedule.kind() == "closed" => (position as u64) < wave_size,
        None => false,
    };

    let mut figures = Vec::with_capacity(requests.len());
    let mut tokens: Vec<Span> = Vec::new();
    for (position, r) in requests.iter().enumerate() {
        let facts = r
            .index
            .and_then(|i| events.get(&i).copied())
            .unwrap_or_default();
        let (first, sent, done) = (facts.first_content_ns, r.sent, r.done);
        // Recorded instants are whatever the file holds: a difference that overflows is no
        // figure (the SQL side refuses the same artifact with an overflow error).
        let ttft_ns = first.zip(sent).and_then(|(f, s)| f.checked_sub(s));
        let generation_ns = done.zip(first).and_then(|(d, f)| d.checked_sub(f));
        let e2e_ns = done.zip(sent).and_then(|(d, s)| d.checked_sub(s));
        let after_first = facts.completion_tokens.filter(|c| *c > 1).map(|c| c - 1);
        let nonzero = |v: Option<i64>| v.filter(|v| *v != 0);
        // TTFT = first content − start; prefill = usage prompt tokens / TTFT (s);
        // decode = (completion − 1) / generation (s); TPOT = ITL = generation (ms) /
        // (completion − 1); E2E = completion of stream − start.
        let ttft_ms = ttft_ns.map(|t| t as f64 / 1e6);
        let prefill = facts
            .prompt_tokens
            .zip(nonzero(ttft_ns))
            .map(|(p, t)| p as f64 / (t as f64 / 1e9));
        let decode = after_first
            .zip(nonzero(generation_ns))
            .map(|(k, g)| k as f64 / (g as f64 / 1e9));
        let tpot = after_first
            .zip(nonzero(generation_ns))
            .map(|(k, g)| (g as f64 / 1e6) / k as f64);
        let e2e = e2e_ns.map(|t| t as f64 / 1e6);
        let first_wave = in_first_wave(position, r);
        let metrics = [ttft_ms, prefill, decode, tpot, tpot, e2e];
        let ok = r.outcome.as_deref() == Some("ok");
        // Attained: succeeded, and every bound for its turn holds (a metric without a value
        // does not).
        let turn = r.session.map_or(0, |(_, t)| t);
        let attained = !slos.is_empty()
            && ok
            && slos
                .iter()
                .filter(|b| turn >= b.first_turn && b.last_turn.is_none_or(|l| turn <= l))
                .all(|b| {
                    metrics[b.metric]
                        .is_some_and(|v| if b.upper { v <= b.value } else { v >= b.value })
                });
        tokens.push((first_wave, facts.completion_tokens, sent, done, attained));
        figures.push(RequestFigures {
            request_index: r.index.unwrap_or(-1),
            ok,
            first_wave,
            metrics,
            attained,
        });
    }

    let mut stats = BTreeMap::new();
    let mut output_tps = BTreeMap::new();
    let mut goodput = BTreeMap::new();
    let mut spans = BTreeMap::new();
    let mut intervals = Intervals::default();
    // A functional cell counts in no attainment or goodput (it checks tools and formats).
    let slos: &[Bound] = if artifact.run.workload.class == crate::rules::headline::FUNCTIONAL_CLASS
    {
        &[]
    } else {
        slos
    };
    for window in WINDOWS {
        let keep = |first_wave: bool| window == "all" || !first_wave;
        for (m, name) in METRICS.iter().enumerate() {
            let values: Vec<f64> = figures
                .iter()
                .filter(|r| r.ok && keep(r.first_wave))
                .filter_map(|r| r.metrics[m])
                .collect();
            stats.insert((window, *name), describe(values, &mut intervals)?);
        }
        // Sum of usage completion tokens / (last completion - first send) of the window's
        // measured requests, failed ones included.
        let rows: Vec<_> = tokens.iter().filter(|t| keep(t.0)).collect();
        let sum: Option<i64> = rows.iter().filter_map(|t| t.1).reduce(|a, b| a + b);
        let first = rows.iter().filter_map(|t| t.2).min();
        let last = rows.iter().filter_map(|t| t.3).max();
        let span = last.zip(first).map(|(l, f)| l - f).filter(|s| *s != 0);
        if let (Some(a), Some(b)) = (first, last) {
            let completion_tokens = sum;
            spans.insert(
                window,
                super::energy::Window {
                    a,
                    b,
                    completion_tokens,
                },
            );
        }
        output_tps.insert(
            window,
            sum.zip(span).map(|(k, s)| k as f64 / (s as f64 / 1e9)),
        );
        // Goodput: attained requests (and their usage completion tokens) over the same span;
        // every measured request of the window in the denominator of the share.
        // A window without requests (a cell whose first wave is all of it) has a row with no
        // figures, as the goodput view has.
        if !slos.is_empty() && rows.is_empty() {
            goodput.insert(
                window,
                Goodput {
                    requests: 0.0,
                    attained: 0.0,
                    share: None,
                    low: None,
                    high: None,
                    rps: None,
                    tps: None,
                },
            );
        }
        if !slos.is_empty() && !rows.is_empty() {
            let attained: Vec<_> = rows.iter().filter(|t| t.4).collect();
            let k = attained.len() as u64;
            let n = rows.len() as u64;
            // None attained: 0 tokens; some attained without usage: no figure.
            let good_tokens: Option<i64> = if attained.is_empty() {
                Some(0)
            } else {
                attained.iter().filter_map(|t| t.1).reduce(|a, b| a + b)
            };
            let seconds = span.map(|s| s as f64 / 1e9);
            let (low, high) = exact_interval(k, n);
            goodput.insert(
                window,
                Goodput {
                    requests: n as f64,
                    attained: k as f64,
                    share: Some(k as f64 / n as f64),
                    low: Some(low),
                    high: Some(high),
                    rps: seconds.map(|s| k as f64 / s),
                    tps: good_tokens.zip(seconds).map(|(g, s)| g as f64 / s),
                },
            );
        }
    }
    let session_goodput = if slos.is_empty() {
        BTreeMap::new()
    } else {
        sessions_goodput(&requests, &tokens, &cut_turns)
    };
    // The sources' declared update intervals (a sharded run's are its shards').
    let declared: BTreeMap<(String, String), f64> = std::iter::once(&artifact.run)
        .chain(artifact.shards.iter().map(|s| &s.run))
        .flat_map(|run| run.telemetry.iter().flatten())
        .filter_map(|t| Some(((t.source.clone(), t.endpoint.clone()), t.interval_s?)))
        .collect();
    let energy = super::energy::energy(artifact.files(Table::Telemetry), &declared, &spans)?;
    Ok(Recomputed {
        run_id: artifact.run.run_id.clone(),
        requests: figures,
        stats,
        output_tps,
        goodput,
        session_goodput,
        energy,
    })
}

/// (first wave, usage completion tokens, t_sent, t_done, attained) of a measured request.
type Span = (bool, Option<i64>, Option<i64>, Option<i64>, bool);

/// One session as its turns give it.
#[derive(Debug, Clone, Copy)]
struct SessionFacts {
    first_wave: bool,
    turns: u64,
    turns_attained: u64,
    attained: bool,
    tokens: Option<i64>,
    first_sent: Option<i64>,
    last_done: Option<i64>,
}

/// Session goodput per window: a session attains when every turn does (a cut turn never
/// does); the `after_first_wave` window leaves out the sessions whose first turn is in the
/// first wave; the span runs from the window's first turn sent to its last stream completion.
fn sessions_goodput(
    requests: &[MeasuredRequest],
    spans: &[Span],
    cut_turns: &BTreeMap<i64, u64>,
) -> BTreeMap<&'static str, SessionGoodput> {
    let mut by_session: BTreeMap<i64, SessionFacts> = BTreeMap::new();
    for (r, &(first_wave, tokens, sent, done, attained)) in requests.iter().zip(spans) {
        let Some((session, turn)) = r.session else {
            continue;
        };
        let e = by_session.entry(session).or_insert(SessionFacts {
            first_wave: false,
            turns: 0,
            turns_attained: 0,
            attained: true,
            tokens: None,
            first_sent: None,
            last_done: None,
        });
        e.first_wave |= turn == 0 && first_wave;
        e.turns += 1;
        e.turns_attained += u64::from(attained);
        e.attained &= attained;
        e.tokens = match (e.tokens, tokens) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        e.first_sent = e.first_sent.into_iter().chain(sent).min();
        if sent.is_some() {
            e.last_done = e.last_done.max(done);
        }
    }
    for (session, cut) in cut_turns {
        if let Some(e) = by_session.get_mut(session) {
            e.turns += cut;
            e.attained = false;
        }
    }
    let mut out = BTreeMap::new();
    if by_session.is_empty() {
        return out;
    }
    for window in WINDOWS {
        let kept: Vec<&SessionFacts> = by_session
            .values()
            .filter(|s| window == "all" || !s.first_wave)
            .collect();
        let n = kept.len() as u64;
        let attained: Vec<&&SessionFacts> = kept.iter().filter(|s| s.attained).collect();
        let k = attained.len() as u64;
        let first = kept.iter().filter_map(|s| s.first_sent).min();
        let last = kept.iter().filter_map(|s| s.last_done).max();
        let seconds = last
            .zip(first)
            .map(|(l, f)| l - f)
            .filter(|s| *s != 0)
            .map(|s| s as f64 / 1e9);
        let tokens: Option<i64> = if attained.is_empty() {
            Some(0)
        } else {
            attained
                .iter()
                .filter_map(|s| s.tokens)
                .reduce(|a, b| a + b)
        };
        let (low, high) = if n > 0 {
            let (l, h) = exact_interval(k, n);
            (Some(l), Some(h))
        } else {
            (None, None)
        };
        out.insert(
            window,
            SessionGoodput {
                sessions: n as f64,
                attained: k as f64,
                turns: kept.iter().map(|s| s.turns).sum::<u64>() as f64,
                turns_attained: kept.iter().map(|s| s.turns_attained).sum::<u64>() as f64,
                share: (n > 0).then(|| k as f64 / n as f64),
                low,
                high,
                sps: seconds.map(|s| k as f64 / s),
                tps: tokens.zip(seconds).map(|(g, s)| g as f64 / s),
            },
        );
    }
    out
}

/// The exact (Clopper–Pearson) 95% interval of k successes in n, written out from its
/// definition: the low end is the p at which P(X ≥ k) = 0.025, the high end the p at which
/// P(X ≤ k) = 0.025, X ~ Binomial(n, p), each tail summed term by term and p found by
/// bisection (0 and 1 for k = 0 and k = n).
pub(crate) fn exact_interval(k: u64, n: u64) -> (f64, f64) {
    // ln C(n, i) for i = 0..=n.
    let mut ln_choose = vec![0.0f64; n as usize + 1];
    for i in 1..=n as usize {
        ln_choose[i] = ln_choose[i - 1] + ((n as usize - i + 1) as f64).ln() - (i as f64).ln();
    }
    let tail = |p: f64, from: u64, to: u64| -> f64 {
        (from..=to)
            .map(|i| {
                let i_f = i as f64;
                (ln_choose[i as usize] + i_f * p.ln() + (n as f64 - i_f) * (1.0 - p).ln()).exp()
            })
            .sum()
    };
    // Bisection on a tail that rises (or falls) with p, to the last representable step.
    let solve = |f: &dyn Fn(f64) -> f64, rising: bool| -> f64 {
        let (mut lo, mut hi) = (0.0f64, 1.0f64);
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if mid <= lo || mid >= hi {
                break;
            }
            if (f(mid) < 0.025) == rising {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        0.5 * (lo + hi)
    };
    let low = if k == 0 {
        0.0
    } else {
        solve(&|p| tail(p, k, n), true)
    };
    let high = if k == n {
        1.0
    } else {
        solve(&|p| tail(p, 0, k), false)
    };
    (low, high)
}

/// The 1-based ranks (l, u) of the 95% interval of the nearest-rank percentile p of n values
/// (0 and n + 1 for an unbounded side), per (n, p), computed once each.
#[derive(Default)]
struct Intervals(BTreeMap<(usize, u64), (usize, usize)>);

impl Intervals {
    /// l = the largest i with P(B <= i - 1) <= 0.025, u = the smallest i with
    /// P(B <= i - 1) >= 0.975, B ~ Binomial(n, p): the CDF summed term by term, each term
    /// exp(ln C(n, k) + k ln p + (n - k) ln(1 - p)) with ln C(n, k) from ln Gamma.
    fn ranks(&mut self, n: usize, p: f64) -> (usize, usize) {
        *self.0.entry((n, p.to_bits())).or_insert_with(|| {
            use statrs::function::gamma::ln_gamma;
            let ln_n = ln_gamma(n as f64 + 1.0);
            let mut cdf = 0.0; // P(B <= i - 1) for i = 0
            let (mut l, mut u) = (0, n + 1);
            let mut found_u = false;
            for i in 0..=n {
                if cdf <= 0.025 {
                    l = i;
                }
                if !found_u && cdf >= 0.975 && i >= 1 {
                    u = i;
                    found_u = true;
                }
                let k = i as f64;
                let ln_pmf = ln_n - ln_gamma(k + 1.0) - ln_gamma(n as f64 - k + 1.0)
                    + k * p.ln()
                    + (n as f64 - k) * (1.0 - p).ln();
                cdf += ln_pmf.exp();
            }
            if !found_u && cdf >= 0.975 {
                u = n + 1;
            }
            (l, u)
        })
    }
}

/// The manifest's statistics of `values` with polars: mean, sample standard deviation
/// (ddof 1), the Student t 95% interval of the mean, nearest-rank percentiles (the value at
/// 1-based rank ⌈p·n⌉ of the sorted values, p·n within 1e-9 of an integer taken as it), and
/// each percentile's distribution-free interval [X(l), X(u)] ([`Intervals::ranks`]).
fn describe(values: Vec<f64>, intervals: &mut Intervals) -> PolarsResult<Figures> {
    let n = values.len();
    let series = Float64Chunked::from_vec("v".into(), values);
    let sorted: Vec<f64> = series.sort(false).iter().flatten().collect();
    let mean = series.mean();
    let sd = if n >= 2 { series.std(1) } else { None };
    let ci = match (mean, sd) {
        (Some(mean), Some(sd)) if n >= 2 => {
            use statrs::distribution::{ContinuousCDF, StudentsT};
            let t = StudentsT::new(0.0, 1.0, (n - 1) as f64)
                .map_err(|e| PolarsError::ComputeError(e.to_string().into()))?
                .inverse_cdf(0.975);
            let half = t * sd / (n as f64).sqrt();
            Some((mean - half, mean + half))
        }
        _ => None,
    };
    let rank = |p: f64| -> Option<f64> {
        if sorted.is_empty() {
            return None;
        }
        let x = p * n as f64;
        let r = if (x - x.round()).abs() <= 1e-9 * x.max(1.0) {
            x.round()
        } else {
            x.ceil()
        };
        let r = (r as usize).clamp(1, n);
        Some(sorted[r - 1])
    };
    const PERCENTILES: [f64; 8] = [0.01, 0.05, 0.25, 0.50, 0.75, 0.90, 0.95, 0.99];
    let mut out: Figures = [None; 31];
    let points = [
        Some(n as f64),
        mean,
        sd,
        ci.map(|c| c.0),
        ci.map(|c| c.1),
        sorted.first().copied(),
    ];
    out[..6].copy_from_slice(&points);
    for (k, p) in PERCENTILES.into_iter().enumerate() {
        out[6 + k] = rank(p);
        if n > 0 {
            let (l, u) = intervals.ranks(n, p);
            out[15 + 2 * k] = (l >= 1).then(|| sorted[l - 1]);
            out[16 + 2 * k] = (u <= n).then(|| sorted[u - 1]);
        }
    }
    out[14] = sorted.last().copied();
    Ok(out)
}
