//! Capacity search: the largest load (requests in flight per replica, or an open loop's
//! request rate; for a session workload, sessions in flight per replica or sessions arriving
//! per second) at which an arm's attainment of its SLOs meets a target, found by bisection
//! through the campaign runner. Each load tried is a probe: an ordinary artifact recorded by
//! the `anvil-capture run` code path, marked `--probe capacity` (part of its workload, so a
//! probe never matches a manifest cell's fingerprint), one journal line each.
//!
//! A load meets the target when its attainment's point estimate does (the runs of a load
//! pooled). Bisection narrows the bracket to neighbouring integers (concurrency) or to the
//! file's relative resolution (rate); then each side of the bracket is recorded `repeats`
//! times, and a side whose interval does not clear the target widens away from the other
//! (10% steps) until one does or the range ends. The result is resolved only when the passing side's exact (Clopper–Pearson) 95%
//! interval lies above the target and the failing side's below it; otherwise it says "not
//! resolved at this sample size". [`next_step`] is the whole decision, a pure function of
//! what has been observed, so `--resume` replays a search from its recorded probes and
//! continues where it stopped.
//!
//! A session workload's search judges sessions, not requests: a session attains when every
//! turn does (the `session_goodput` view), and each probe measures the class's declared
//! sessions. A trace replays at its own times, so no load of it can be varied: a search
//! refuses a trace class.

use serde::Deserialize;

pub use crate::artifact::capacity::{
    Bracket, CAPACITY_JSON, CAPACITY_SCHEMA, CapacityResult, CapacityStatus, Judged, Observation,
    PerGpu, Side, Vary, Window,
};
use crate::figure::count_or_sig3 as trim;
use crate::manifest::Problem;
use crate::slo::Slo;

/// The probe marker of a capacity search's runs (`--probe capacity`).
pub const PROBE: &str = "capacity";

/// A capacity search as the campaign file asks for it (an arm's `search`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapacitySearch {
    /// The workload class of every probe, e.g. `headline-sustained-output`.
    pub class: String,
    /// Its prompt length in tokens.
    pub context: u64,
    /// What is varied.
    pub vary: Vary,
    /// The smallest load tried.
    pub min: f64,
    /// The largest load tried.
    pub max: f64,
    /// Measured requests per probe (all replicas together); or give `window_requests`.
    #[serde(default)]
    pub requests: Option<u64>,
    /// Closed loop, `after_first_wave` window only: the requests each probe measures after
    /// its first wave; a probe at c in flight per replica then sends c × replicas + this
    /// many, so every load is judged on the same number of steady-state requests.
    #[serde(default)]
    pub window_requests: Option<u64>,
    /// The attainment a load must reach, e.g. 0.99.
    pub target: f64,
    #[serde(default)]
    pub window: Window,
    /// The SLOs to attain (`"ttft_ms<=2000"`, …); empty: the campaign's `slo`.
    #[serde(default, deserialize_with = "crate::slo::deserialize_list")]
    pub slo: Vec<Slo>,
    /// Runs of each side of the final bracket (their requests pooled).
    #[serde(default = "one")]
    pub repeats: u32,
    /// `rate` only: stop when max/min of the bracket is within 1 + this (e.g. 0.1).
    #[serde(default)]
    pub resolution: Option<f64>,
    /// `rate` only: the most requests in flight per replica (the open loop's cap).
    #[serde(default)]
    pub concurrency: Option<u32>,
}

fn one() -> u32 {
    1
}

/// The kind of workload class a search probes, as the campaign declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassKind {
    /// The manifest's classes and declared prefix groups: one-shot requests.
    Requests,
    /// A declared session class: `sessions` conversations per probe of at most `turns`
    /// turns; `open`: its sessions arrive at a declared rate.
    Sessions {
        sessions: u32,
        turns: u32,
        open: bool,
    },
    /// A declared trace class: replayed at its own times.
    Trace,
}

impl ClassKind {
    /// What attainment counts for this kind.
    pub const fn judged(self) -> Judged {
        match self {
            ClassKind::Sessions { .. } => Judged::Sessions,
            _ => Judged::Requests,
        }
    }
}

impl CapacitySearch {
    /// What the search states wrongly on its own; `at` is its JSON path, `replicas` the
    /// arm's replica count, `campaign_slo` the campaign's `slo` section, `kind` what its
    /// class is.
    pub fn problems(
        &self,
        at: &str,
        replicas: usize,
        campaign_slo: &crate::slo::SloSpec,
        kind: ClassKind,
    ) -> Vec<Problem> {
        let mut out = Vec::new();
        let mut bad =
            |field: &str, why: String| out.push(Problem::new(format!("{at}.{field}"), why));
        if self.class.trim().is_empty() {
            bad("class", "must name a workload class".to_owned());
        }
        match kind {
            ClassKind::Trace => bad(
                "class",
                format!(
                    "`{}` replays a trace at its own times, so no load of it can be varied: \
                     search a session, prefix-group or manifest class (or declare the trace \
                     at several time_scale values as cells)",
                    self.class
                ),
            ),
            ClassKind::Sessions { open: true, .. } if self.vary == Vary::Concurrency => bad(
                "vary",
                format!(
                    "`{}` declares `session.rate_per_s` (an open loop): a concurrency search \
                     varies closed-loop sessions in flight; search `vary: rate` (sessions \
                     per second) or declare the class without a rate",
                    self.class
                ),
            ),
            _ => {}
        }
        // A bound that applies to no turn the class can have judges nothing: every request
        // that succeeded would attain.
        let last_turn = match kind {
            ClassKind::Sessions { turns, .. } => turns.saturating_sub(1),
            _ => 0,
        };
        let slos = self.slos(campaign_slo);
        if !slos.is_empty() && !slos.iter().any(|s| s.turns.first <= last_turn) {
            bad(
                "slo",
                format!(
                    "no bound applies to a turn `{}` has (turns 0 to {last_turn}): the search \
                     would judge nothing but success; scope a bound to turn 0 or leave it \
                     unscoped",
                    self.class
                ),
            );
        }
        if let (ClassKind::Sessions { sessions, .. }, Vary::Rate) = (kind, self.vary) {
            if self.max > crate::workload::session::MAX_SESSION_RATE {
                bad(
                    "max",
                    format!(
                        "{}: sessions arrive at most {} per second",
                        self.max,
                        crate::workload::session::MAX_SESSION_RATE
                    ),
                );
            }
            if self.min > 0.0
                && f64::from(sessions) / self.min > crate::workload::session::MAX_ARRIVAL_SPAN_S
            {
                bad(
                    "min",
                    format!(
                        "{}: {sessions} sessions arriving at that rate take over a day; give a \
                         higher minimum rate",
                        self.min
                    ),
                );
            }
        }
        if self.context == 0 {
            bad(
                "context",
                "must be a positive number of prompt tokens".to_owned(),
            );
        } else if self.context > crate::manifest::MAX_PROMPT_TOKEN_TARGET {
            bad(
                "context",
                format!(
                    "{} tokens is above the largest prompt target anvil accepts, {} (2^24): \
                     no served model reads a prompt that long",
                    self.context,
                    crate::manifest::MAX_PROMPT_TOKEN_TARGET
                ),
            );
        }
        let finite = self.min.is_finite() && self.max.is_finite();
        if !finite || self.min <= 0.0 || self.max <= self.min {
            bad(
                "max",
                format!(
                    "min {} and max {} must be positive with min < max",
                    self.min, self.max
                ),
            );
        }
        if self.vary == Vary::Concurrency
            && (self.min.fract() != 0.0 || self.max.fract() != 0.0 || self.max > 100_000.0)
        {
            bad(
                "min",
                "concurrency bounds are whole numbers of requests in flight per replica".to_owned(),
            );
        }
        if self.vary == Vary::Rate {
            match self.resolution {
                Some(r) if r > 0.0 && r <= 1.0 => {}
                _ => bad(
                    "resolution",
                    "a rate search needs a relative resolution in (0, 1], e.g. 0.1 (stop when the bracket's ends are within 10%)"
                        .to_owned(),
                ),
            }
            if self.concurrency.is_none_or(|c| c == 0) {
                bad(
                    "concurrency",
                    "a rate search needs the most requests in flight per replica (the open loop's cap)"
                        .to_owned(),
                );
            }
        }
        if !(self.target > 0.0 && self.target < 1.0) {
            bad(
                "target",
                format!("{} must lie strictly between 0 and 1", self.target),
            );
        } else if let (Some(need), ClassKind::Sessions { sessions, .. }) =
            (crate::stats::min_requests_to_resolve(self.target), kind)
        {
            if self.requests.is_some() || self.window_requests.is_some() {
                bad(
                    "requests",
                    format!(
                        "a session search's probes each measure the class's declared sessions \
                         ({sessions}), judged per session: leave `requests` and \
                         `window_requests` out"
                    ),
                );
            }
            let lost = self.first_wave_loss(replicas);
            if u64::from(sessions) < need + lost {
                bad(
                    "class",
                    format!(
                        "`{}` declares {sessions} sessions per probe, which cannot resolve target \
                         {}: even with every session attained, the exact 95% lower bound exceeds \
                         it only from {need} sessions in the window{}; declare at least {}",
                        self.class,
                        self.target,
                        if lost > 0 {
                            format!(" (after a first wave of up to {lost})")
                        } else {
                            String::new()
                        },
                        need + lost
                    ),
                );
            }
        } else if let Some(need) = crate::stats::min_requests_to_resolve(self.target) {
            match (self.requests, self.window_requests) {
                (Some(_), Some(_)) | (None, None) => bad(
                    "requests",
                    "give either `requests` (measured requests per probe) or `window_requests` (requests after the first wave per probe), not both and not neither"
                        .to_owned(),
                ),
                (None, Some(window)) => {
                    if self.vary != Vary::Concurrency || self.window != Window::AfterFirstWave {
                        bad(
                            "window_requests",
                            "counts the requests after a closed loop's first wave: it needs `vary: concurrency` and `window: after_first_wave`"
                                .to_owned(),
                        );
                    } else if window < need {
                        bad(
                            "window_requests",
                            format!(
                                "{window} requests after the first wave cannot resolve target {}: even with every request attained, the exact 95% lower bound exceeds {} only from {need}; give at least {need}",
                                self.target, self.target
                            ),
                        );
                    }
                }
                (Some(requests), None) => {
                    let lost = self.first_wave_loss(replicas);
                    if requests < need + lost {
                        bad(
                            "requests",
                            format!(
                                "{requests} requests per probe cannot resolve target {}: even with every request attained, the exact 95% lower bound exceeds {} only from {need} requests in the window{}; give at least {}",
                                self.target,
                                self.target,
                                if lost > 0 {
                                    format!(" (after a first wave of up to {lost})")
                                } else {
                                    String::new()
                                },
                                need + lost
                            ),
                        );
                    }
                }
            }
        }
        if self.repeats == 0 || self.repeats > 100 {
            bad("repeats", "must be between 1 and 100".to_owned());
        }
        if self.slos(campaign_slo).is_empty() {
            bad(
                "slo",
                format!(
                    "a capacity search needs SLOs: give them here or in the campaign's `slo` \
                     (for the class `{}` or as its default)",
                    self.class
                ),
            );
        }
        out
    }

    /// What a probe judged after its first wave can lose to it at most: a closed loop's
    /// first wave is the load (in flight per replica) × replicas, at most `max` × replicas;
    /// an open loop has none, and the `all` window loses nothing.
    fn first_wave_loss(&self, replicas: usize) -> u64 {
        match (self.window, self.vary) {
            (Window::AfterFirstWave, Vary::Concurrency) => {
                self.max.max(0.0) as u64 * replicas.max(1) as u64
            }
            _ => 0,
        }
    }

    /// The measured requests of a probe at `load` on an arm of `replicas` replicas: the fixed
    /// `requests`, or the first wave (load × replicas) plus `window_requests`.
    pub fn probe_requests(&self, load: f64, replicas: usize) -> u64 {
        match (self.requests, self.window_requests) {
            (Some(n), _) => n,
            (None, Some(w)) => load.max(0.0) as u64 * replicas.max(1) as u64 + w,
            (None, None) => 0,
        }
    }

    /// The SLOs in force: the search's own, else the campaign's for the search's class.
    pub fn slos<'a>(&'a self, campaign_slo: &'a crate::slo::SloSpec) -> &'a [Slo] {
        if self.slo.is_empty() {
            campaign_slo.for_class(&self.class)
        } else {
            &self.slo
        }
    }

    /// Whether two loads are the neighbours the search stops at.
    fn converged(&self, lo: f64, hi: f64) -> bool {
        match self.vary {
            Vary::Concurrency => hi - lo <= 1.0,
            Vary::Rate => hi <= lo * (1.0 + self.resolution.unwrap_or(0.1)),
        }
    }

    /// The load between `lo` and `hi` to try next: the integer midpoint for concurrency; for
    /// a rate the geometric mean rounded to four significant digits. `None` when nothing
    /// lies strictly between.
    fn midpoint(&self, lo: f64, hi: f64) -> Option<f64> {
        let mid = match self.vary {
            Vary::Concurrency => ((lo + hi) / 2.0).floor(),
            Vary::Rate => {
                let m = (lo * hi).sqrt();
                let scale = 10f64.powi(3 - m.log10().floor() as i32);
                (m * scale).round() / scale
            }
        };
        (mid > lo && mid < hi).then_some(mid)
    }

    /// The load one widening step below (`up`: above) `load` within the range: 10% of it
    /// (at least one request in flight) for concurrency, one resolution step for a rate;
    /// `None` past a bound.
    fn step(&self, load: f64, up: bool) -> Option<f64> {
        let next = match self.vary {
            Vary::Concurrency => {
                let by = (load * 0.1).floor().max(1.0);
                if up { load + by } else { load - by }
            }
            Vary::Rate => {
                let factor = 1.0 + self.resolution.unwrap_or(0.1);
                let v = if up { load * factor } else { load / factor };
                let scale = 10f64.powi(3 - v.log10().floor() as i32);
                (v * scale).round() / scale
            }
        };
        (next >= self.min && next <= self.max && next != load).then_some(next)
    }

    /// The most probes a search can record: both bounds, the bisection, the repeats of the
    /// bracket's two sides, and up to three widening steps on each side.
    pub fn most_probes(&self) -> u64 {
        let steps = match self.vary {
            Vary::Concurrency => (self.max - self.min).max(1.0).log2().ceil() as u64,
            Vary::Rate => {
                ((self.max / self.min).ln() / (1.0 + self.resolution.unwrap_or(0.1)).ln())
                    .max(1.0)
                    .log2()
                    .ceil() as u64
            }
        };
        2 + steps + 2 * u64::from(self.repeats.saturating_sub(1)) + 6 * u64::from(self.repeats)
    }
}

/// What to do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Record run `repeat` (1-based) of `load`.
    Probe { load: f64, repeat: u32 },
    /// The search is over.
    Done(Bracket),
}

/// The exact 95% interval of k of n, as `clopper_pearson` gives it (the runner passes it in
/// so that this module stays free of the statistics' dependencies).
pub type Interval = dyn Fn(u64, u64) -> (f64, f64);

/// The next step of `search` after `seen` (every probe recorded so far, in any order).
pub fn next_step(search: &CapacitySearch, seen: &[Observation], interval: &Interval) -> Step {
    let pooled = |load: f64| -> Option<(u64, u64)> {
        let runs: Vec<&Observation> = seen.iter().filter(|o| o.load == load).collect();
        (!runs.is_empty()).then(|| {
            runs.iter()
                .fold((0, 0), |(k, n), o| (k + o.attained, n + o.requests))
        })
    };
    let meets =
        |load: f64| pooled(load).map(|(k, n)| n > 0 && k as f64 / n as f64 >= search.target);
    let (min, max) = (search.min, search.max);
    let probe = |load: f64| Step::Probe { load, repeat: 1 };
    match meets(min) {
        None => return probe(min),
        Some(false) => return boundary(search, seen, None, Some(min), interval),
        Some(true) => {}
    }
    match meets(max) {
        None => return probe(max),
        Some(true) => return boundary(search, seen, Some(max), None, interval),
        Some(false) => {}
    }
    let (mut lo, mut hi) = (min, max);
    while !search.converged(lo, hi) {
        let Some(mid) = search.midpoint(lo, hi) else {
            break;
        };
        match meets(mid) {
            None => return probe(mid),
            Some(true) => lo = mid,
            Some(false) => hi = mid,
        }
    }
    boundary(search, seen, Some(lo), Some(hi), interval)
}

/// Record the bracket's sides until each has `repeats` runs; then, while the passing side's
/// interval does not clear the target, step down (and while the failing side's does not
/// fall below it, step up), each new load recorded `repeats` times, until both sides
/// resolve or a bound of the range is reached. Where attainment falls gradually with load
/// the neighbouring loads bisection ends at cannot be told apart at any sample size; the
/// widened bracket says what can: the largest load shown to meet the target, the smallest
/// shown to miss it, and the loads between them unresolved.
fn boundary(
    search: &CapacitySearch,
    seen: &[Observation],
    passing: Option<f64>,
    failing: Option<f64>,
    interval: &Interval,
) -> Step {
    let runs_at = |load: f64| seen.iter().filter(|o| o.load == load).count() as u32;
    for load in [passing, failing].into_iter().flatten() {
        let runs = runs_at(load);
        if runs < search.repeats {
            return Step::Probe {
                load,
                repeat: runs + 1,
            };
        }
    }
    let side = |load: f64| {
        let mut runs: Vec<Observation> = seen.iter().filter(|o| o.load == load).cloned().collect();
        runs.sort_by_key(|o| o.repeat);
        let (attained, requests) = runs
            .iter()
            .fold((0, 0), |(k, n), o| (k + o.attained, n + o.requests));
        let (low, high) = interval(attained, requests);
        Side {
            load,
            share: if requests == 0 {
                0.0
            } else {
                attained as f64 / requests as f64
            },
            runs,
            attained,
            requests,
            low,
            high,
        }
    };
    // Widen each side until it resolves or meets a bound of the range.
    let mut passing = passing;
    while let Some(load) = passing {
        if side(load).low > search.target {
            break;
        }
        match search.step(load, false) {
            Some(next) if runs_at(next) < search.repeats => {
                return Step::Probe {
                    load: next,
                    repeat: runs_at(next) + 1,
                };
            }
            Some(next) => passing = Some(next),
            None => break,
        }
    }
    let mut failing = failing;
    while let Some(load) = failing {
        if side(load).high < search.target {
            break;
        }
        match search.step(load, true) {
            Some(next) if runs_at(next) < search.repeats => {
                return Step::Probe {
                    load: next,
                    repeat: runs_at(next) + 1,
                };
            }
            Some(next) => failing = Some(next),
            None => break,
        }
    }
    let (passing, failing) = (passing.map(side), failing.map(side));
    // Without a passing side, "no load meets the target" holds only if the range's minimum
    // itself is shown to miss it: a failing side widened up from the minimum leaves the
    // loads below it unresolved. Likewise "every load meets it" needs the maximum shown to.
    let resolved = passing.as_ref().is_none_or(|p| p.low > search.target)
        && failing.as_ref().is_none_or(|f| f.high < search.target)
        && (passing.is_some() || failing.as_ref().is_none_or(|f| f.load == search.min))
        && (failing.is_some() || passing.as_ref().is_none_or(|p| p.load == search.max));
    Step::Done(Bracket {
        passing,
        failing,
        resolved,
    })
}

/// The arm a search ran on: its replicas, and its GPUs when known.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArmShape {
    pub replicas: u32,
    pub gpus: Option<u32>,
}

/// The Student t 95% interval of a mean over runs (the runner passes the statistics in);
/// `None` with fewer than two values.
pub type MeanInterval = dyn Fn(&[f64]) -> Option<(f64, f64)>;

/// The result of a search that ended with `bracket` (or stopped before, `why`), as
/// `capacity.json` states it; `shape` gives the per-GPU figures.
#[allow(clippy::too_many_arguments)]
pub fn result(
    arm: &str,
    search: &CapacitySearch,
    judged: Judged,
    slo: &[String],
    probes: Vec<Observation>,
    ended: Result<Bracket, String>,
    shape: ArmShape,
    mean_interval: &MeanInterval,
) -> CapacityResult {
    let counted = judged.as_str();
    let unit = match search.vary {
        Vary::Concurrency => format!("{counted} in flight per replica"),
        Vary::Rate => format!("{counted}/s"),
    };
    let show = |s: &Side| {
        format!(
            "{} {unit}: {:.1}% [{:.1}%, {:.1}%] of {} {counted} attained",
            s.load,
            s.share * 100.0,
            s.low * 100.0,
            s.high * 100.0,
            s.requests
        )
    };
    let (status, capacity, verdict, bracket) = match ended {
        Err(why) => (
            CapacityStatus::Incomplete,
            None,
            format!("the search stopped before its bracket: {why}; --resume continues it"),
            None,
        ),
        Ok(b) => {
            let target = format!("{:.1}%", search.target * 100.0);
            let (status, capacity, verdict) = match (&b.passing, &b.failing, b.resolved) {
                (Some(p), Some(f), true) => (
                    CapacityStatus::Resolved,
                    Some(p.load),
                    format!(
                        "capacity {} {unit} at {target} attainment: {}; {}",
                        p.load,
                        show(p),
                        show(f)
                    ),
                ),
                (None, Some(f), true) => (
                    CapacityStatus::Resolved,
                    None,
                    format!(
                        "no load from {} meets {target} attainment: {}",
                        search.min,
                        show(f)
                    ),
                ),
                (Some(p), None, true) => (
                    CapacityStatus::Resolved,
                    Some(p.load),
                    format!(
                        "every load up to the maximum {} meets {target} attainment (capacity at least {}): {}",
                        search.max,
                        p.load,
                        show(p)
                    ),
                ),
                (p, f, _) => (
                    CapacityStatus::NotResolved,
                    None,
                    format!(
                        "not resolved at this sample size: the bracket's intervals straddle {target} ({}); record more {counted} per probe or more repeats",
                        [p.as_ref().map(show), f.as_ref().map(show)]
                            .into_iter()
                            .flatten()
                            .collect::<Vec<_>>()
                            .join("; ")
                    ),
                ),
            };
            (status, capacity, verdict, Some(b))
        }
    };
    let per_gpu = |load: f64| -> Option<f64> {
        let gpus = shape.gpus.filter(|g| *g > 0)?;
        (search.vary == Vary::Concurrency).then(|| load * shape.replicas as f64 / gpus as f64)
    };
    let capacity_per_gpu = capacity.and_then(per_gpu);
    let passing_runs: Vec<&Observation> = bracket
        .as_ref()
        .filter(|_| capacity.is_some())
        .and_then(|b| b.passing.as_ref())
        .map(|p| p.runs.iter().collect())
        .unwrap_or_default();
    let goodput_per_gpu = shape.gpus.filter(|g| *g > 0).and_then(|gpus| {
        let values: Vec<f64> = passing_runs
            .iter()
            .map(|o| o.goodput_tps.map(|g| g / gpus as f64))
            .collect::<Option<Vec<f64>>>()?;
        if values.is_empty() {
            return None;
        }
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        let (low, high) = mean_interval(&values).unzip();
        Some(PerGpu {
            mean,
            low,
            high,
            runs: values.len() as u32,
        })
    });
    let mut verdict = verdict;
    if let (Some(c), Some(p)) = (capacity_per_gpu, capacity) {
        let gpus = shape.gpus.unwrap_or(1);
        verdict.push_str(&format!(
            "; {}{} in flight per GPU ({} × {} replica{} on {gpus} GPU{})",
            trim(c),
            if judged == Judged::Sessions {
                " sessions"
            } else {
                ""
            },
            trim(p),
            shape.replicas,
            if shape.replicas == 1 { "" } else { "s" },
            if gpus == 1 { "" } else { "s" },
        ));
    }
    if let Some(g) = &goodput_per_gpu {
        verdict.push_str(&match (g.low, g.high) {
            (Some(low), Some(high)) => format!(
                "; goodput there {:.1} [{low:.1}, {high:.1}] tok/s per GPU over {} runs",
                g.mean, g.runs
            ),
            _ => format!(
                "; goodput there {:.1} tok/s per GPU over one run (no across-run interval)",
                g.mean
            ),
        });
    }
    CapacityResult {
        arm: arm.to_owned(),
        vary: search.vary,
        min: search.min,
        max: search.max,
        target: search.target,
        window: search.window,
        judged,
        slo: slo.to_vec(),
        requests_per_probe: search.requests,
        window_requests: search.window_requests,
        repeats: search.repeats,
        replicas: Some(shape.replicas),
        gpus: shape.gpus,
        status,
        capacity,
        capacity_per_gpu,
        goodput_per_gpu,
        bracket,
        probes,
        verdict,
    }
}

#[cfg(test)]
mod tests;
