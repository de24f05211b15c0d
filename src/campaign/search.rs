//! Capacity search: the largest load (requests in flight per replica, or an open loop's
//! request rate) at which an arm's attainment of its SLOs meets a target, found by bisection
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

use serde::Deserialize;

pub use crate::artifact::capacity::{
    Bracket, CAPACITY_JSON, CAPACITY_SCHEMA, CapacityResult, CapacityStatus, Observation, PerGpu,
    Side, Vary, Window,
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

impl CapacitySearch {
    /// What the search states wrongly on its own; `at` is its JSON path, `replicas` the
    /// arm's replica count, `campaign_slo` the campaign's `slo` section.
    pub fn problems(
        &self,
        at: &str,
        replicas: usize,
        campaign_slo: &crate::slo::SloSpec,
    ) -> Vec<Problem> {
        let mut out = Vec::new();
        let mut bad =
            |field: &str, why: String| out.push(Problem::new(format!("{at}.{field}"), why));
        if self.class.trim().is_empty() {
            bad("class", "must name a workload class".to_owned());
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
                    // After the first wave a closed-loop probe loses concurrency × replicas.
                    let lost = match (self.window, self.vary) {
                        (Window::AfterFirstWave, Vary::Concurrency) => {
                            self.max.max(0.0) as u64 * replicas.max(1) as u64
                        }
                        _ => 0,
                    };
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
pub fn result(
    arm: &str,
    search: &CapacitySearch,
    slo: &[String],
    probes: Vec<Observation>,
    ended: Result<Bracket, String>,
    shape: ArmShape,
    mean_interval: &MeanInterval,
) -> CapacityResult {
    let unit = match search.vary {
        Vary::Concurrency => "requests in flight per replica",
        Vary::Rate => "requests/s",
    };
    let show = |s: &Side| {
        format!(
            "{} {unit}: {:.1}% [{:.1}%, {:.1}%] of {} requests attained",
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
                        "not resolved at this sample size: the bracket's intervals straddle {target} ({}); record more requests per probe or more repeats",
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
            "; {} in flight per GPU ({} × {} replica{} on {gpus} GPU{})",
            trim(c),
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
mod tests {
    use super::*;

    fn search(min: f64, max: f64, repeats: u32) -> CapacitySearch {
        CapacitySearch {
            class: "headline-sustained-output".into(),
            context: 512,
            vary: Vary::Concurrency,
            min,
            max,
            requests: Some(400),
            window_requests: None,
            target: 0.9,
            window: Window::All,
            slo: vec![Slo::parse("ttft_ms<=2000").unwrap()],
            repeats,
            resolution: None,
            concurrency: None,
        }
    }

    /// Drive the search against a server whose attainment at load c is `attained(c)` of
    /// 400; the exact interval here is a fixed ±2 points, enough to test the logic.
    fn drive(s: &CapacitySearch, attained: impl Fn(f64) -> u64) -> (Vec<f64>, Bracket) {
        let interval = |k: u64, n: u64| {
            let p = k as f64 / n as f64;
            ((p - 0.02).max(0.0), (p + 0.02).min(1.0))
        };
        let mut seen: Vec<Observation> = Vec::new();
        loop {
            match next_step(s, &seen, &interval) {
                Step::Probe { load, repeat } => seen.push(Observation {
                    load,
                    repeat,
                    run_id: format!("r{}", seen.len()),
                    dir: std::path::PathBuf::new(),
                    attained: attained(load),
                    requests: 400,
                    goodput_tps: None,
                }),
                Step::Done(b) => return (seen.iter().map(|o| o.load).collect(), b),
            }
            assert!(seen.len() < 50, "the search does not end: {seen:?}");
        }
    }

    #[test]
    fn bisection_finds_the_last_load_that_meets_the_target() {
        // Attainment 100% up to 5 in flight, 50% beyond.
        let s = search(1.0, 32.0, 1);
        let (order, b) = drive(&s, |c| if c <= 5.0 { 400 } else { 200 });
        assert_eq!(order, [1.0, 32.0, 16.0, 8.0, 4.0, 6.0, 5.0]);
        assert_eq!(b.passing.as_ref().unwrap().load, 5.0);
        assert_eq!(b.failing.as_ref().unwrap().load, 6.0);
        assert!(b.resolved);
    }

    #[test]
    fn repeats_at_the_boundary_pool_and_a_straddle_is_not_resolved() {
        // 90.5% up to 3 (interval straddles 0.9), 50% beyond: the passing side widens down
        // to the range's minimum without ever clearing the target.
        let s = search(1.0, 8.0, 2);
        let (order, b) = drive(&s, |c| if c <= 3.0 { 362 } else { 200 });
        assert_eq!(order, [1.0, 8.0, 4.0, 2.0, 3.0, 3.0, 4.0, 2.0, 1.0]);
        let p = b.passing.unwrap();
        assert_eq!(
            (p.load, p.runs.len(), p.attained, p.requests),
            (1.0, 2, 724, 800)
        );
        assert!(!b.resolved);
    }

    /// The minimum misses the target by its point estimate but not by its interval, and the
    /// failing side widens up to a load shown to miss it: the loads below stay unresolved,
    /// so the search must not say that no load meets the target.
    #[test]
    fn a_minimum_missing_only_by_its_point_estimate_is_not_resolved() {
        let s = search(3.0, 8.0, 1);
        // 89.5% at 3 and 4 (intervals straddle 0.9), 10% from 5 on.
        let (order, b) = drive(&s, |c| if c <= 4.0 { 358 } else { 40 });
        assert_eq!(order, [3.0, 4.0, 5.0]);
        assert!(b.passing.is_none());
        assert_eq!(b.failing.as_ref().unwrap().load, 5.0);
        assert!(!b.resolved, "{b:?}");
        // Shown to miss at the minimum itself: resolved, no capacity in the range.
        let (_, b) = drive(&s, |_| 40);
        assert!(b.passing.is_none() && b.resolved);
    }

    /// Attainment falling gradually: 16 meets the target by its point estimate but not by
    /// its interval, 17 misses it but not by its interval. The bracket widens to 15 (shown
    /// to meet) and 18 (shown to miss): resolved, capacity 15.
    #[test]
    fn a_gradual_boundary_widens_the_bracket_until_each_side_resolves() {
        let s = search(1.0, 32.0, 1);
        let share = |c: f64| -> u64 {
            match c as u64 {
                0..=14 => 400,
                15 => 372, // 93%: [91, 95]
                16 => 364, // 91%: [89, 93]
                17 => 356, // 89%: [87, 91]
                _ => 348,  // 87%: [85, 89]
            }
        };
        let (order, b) = drive(&s, share);
        assert_eq!(
            order,
            [1.0, 32.0, 16.0, 24.0, 20.0, 18.0, 17.0, 15.0],
            "{order:?}"
        );
        assert!(b.resolved, "{b:?}");
        assert_eq!(b.passing.as_ref().unwrap().load, 15.0);
        assert_eq!(b.failing.as_ref().unwrap().load, 18.0);
        let r = result(
            "TP1",
            &s,
            &[],
            Vec::new(),
            Ok(b),
            ArmShape {
                replicas: 1,
                gpus: Some(1),
            },
            &|_| None,
        );
        assert_eq!(r.status, CapacityStatus::Resolved);
        assert_eq!(r.capacity, Some(15.0));
    }

    #[test]
    fn out_of_range_ends_say_so() {
        let s = search(2.0, 16.0, 1);
        let (order, b) = drive(&s, |_| 100);
        assert_eq!(order, [2.0]);
        assert!(b.passing.is_none() && b.resolved);
        let (order, b) = drive(&s, |_| 400);
        assert_eq!(order, [2.0, 16.0]);
        assert_eq!(b.passing.unwrap().load, 16.0);
        assert!(b.failing.is_none());
    }

    #[test]
    fn rates_bisect_geometrically_to_the_resolution() {
        let mut s = search(1.0, 16.0, 1);
        s.vary = Vary::Rate;
        s.resolution = Some(0.25);
        s.concurrency = Some(8);
        let (order, b) = drive(&s, |r| if r <= 5.0 { 400 } else { 0 });
        assert_eq!(order, [1.0, 16.0, 4.0, 8.0, 5.657, 4.757]);
        let (p, f) = (b.passing.unwrap().load, b.failing.unwrap().load);
        assert!(f / p <= 1.25, "{p} {f}");
    }

    #[test]
    fn a_probe_too_small_to_resolve_the_target_is_refused_naming_the_minimum() {
        let mut s = search(1.0, 8.0, 1);
        s.target = 0.99;
        s.requests = Some(300);
        let problems = s.problems("arms[0].search", 1, &Default::default());
        let text = format!("{problems:?}");
        assert!(text.contains("only from 368 requests"), "{text}");
        s.requests = Some(368);
        assert!(
            s.problems("arms[0].search", 1, &Default::default())
                .is_empty()
        );
        s.window = Window::AfterFirstWave;
        let text = format!("{:?}", s.problems("arms[0].search", 2, &Default::default()));
        assert!(text.contains("give at least 384"), "{text}");
    }

    #[test]
    fn window_requests_size_each_probe_by_its_first_wave_and_are_checked() {
        let mut s = search(4.0, 64.0, 3);
        s.requests = None;
        s.window_requests = Some(60);
        let text = format!("{:?}", s.problems("arms[0].search", 2, &Default::default()));
        assert!(
            text.contains("needs `vary: concurrency` and `window: after_first_wave`"),
            "{text}"
        );
        s.window = Window::AfterFirstWave;
        assert!(
            s.problems("arms[0].search", 2, &Default::default())
                .is_empty()
        );
        // Two replicas at 12 in flight each: a first wave of 24, then 60 measured.
        assert_eq!(s.probe_requests(12.0, 2), 84);
        assert_eq!(s.probe_requests(4.0, 1), 64);
        s.window_requests = Some(20);
        let text = format!("{:?}", s.problems("arms[0].search", 2, &Default::default()));
        assert!(text.contains("give at least 36"), "{text}");
        s.requests = Some(400);
        let text = format!("{:?}", s.problems("arms[0].search", 2, &Default::default()));
        assert!(text.contains("not both and not neither"), "{text}");
    }

    #[test]
    fn capacity_is_stated_per_gpu_with_goodput_per_gpu_across_the_passing_runs() {
        let s = search(1.0, 32.0, 3);
        let (_, bracket) = drive(&s, |c| if c <= 5.0 { 400 } else { 200 });
        let mut bracket = bracket;
        // Goodput of the passing load's three runs: 300, 330, 360 tok/s.
        for (i, run) in bracket
            .passing
            .as_mut()
            .unwrap()
            .runs
            .iter_mut()
            .enumerate()
        {
            run.goodput_tps = Some(300.0 + 30.0 * i as f64);
        }
        let mean_interval = |v: &[f64]| (v.len() > 1).then_some((-1.0, 1.0));
        let shape = ArmShape {
            replicas: 2,
            gpus: Some(2),
        };
        let r = result(
            "DP2",
            &s,
            &[],
            Vec::new(),
            Ok(bracket.clone()),
            shape,
            &mean_interval,
        );
        assert_eq!(r.capacity, Some(5.0));
        assert_eq!(r.capacity_per_gpu, Some(5.0));
        let g = r.goodput_per_gpu.as_ref().unwrap();
        assert_eq!(
            (g.mean, g.runs, g.low, g.high),
            (165.0, 3, Some(-1.0), Some(1.0))
        );
        assert!(
            r.verdict
                .contains("5 in flight per GPU (5 × 2 replicas on 2 GPUs)"),
            "{}",
            r.verdict
        );
        assert!(
            r.verdict
                .contains("goodput there 165.0 [-1.0, 1.0] tok/s per GPU over 3 runs"),
            "{}",
            r.verdict
        );
        // TP2: one replica over two GPUs holds half as many per GPU.
        let tp2 = ArmShape {
            replicas: 1,
            gpus: Some(2),
        };
        let r = result(
            "TP2",
            &s,
            &[],
            Vec::new(),
            Ok(bracket.clone()),
            tp2,
            &mean_interval,
        );
        assert_eq!(r.capacity_per_gpu, Some(2.5));
        // GPUs unknown: no per-GPU figure is invented.
        let unknown = ArmShape {
            replicas: 1,
            gpus: None,
        };
        let r = result(
            "X",
            &s,
            &[],
            Vec::new(),
            Ok(bracket),
            unknown,
            &mean_interval,
        );
        assert_eq!((r.capacity_per_gpu, r.goodput_per_gpu), (None, None));
    }

    #[test]
    fn a_context_above_the_largest_prompt_target_is_refused() {
        let mut s = search(1.0, 8.0, 1);
        s.context = crate::manifest::MAX_PROMPT_TOKEN_TARGET;
        assert!(
            s.problems("arms[0].search", 1, &Default::default())
                .is_empty()
        );
        s.context = i64::MAX as u64;
        let problems = s.problems("arms[0].search", 1, &Default::default());
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].field, "arms[0].search.context");
        assert!(problems[0].message.contains("16777216"), "{problems:?}");
    }
}
