//! The campaign's objectives on the headline comparison: which arm leads on aggregate
//! throughput, throughput per GPU, latency (median TPOT, TTFT p95) and goodput under the
//! SLOs in force, by how much over the runner-up, and whether that lead is resolved (Welch's
//! 95% interval of the difference, runs as the sample, excludes zero).
//!
//! A lead smaller than the smallest effect that matters (2% of the runner-up's figure) is
//! negligible and one whose interval includes zero a tie: neither names a winner.
//!
//! A lead is resolved only with repeats on both sides: single runs carry no run-to-run
//! variation, so the lead of one run over another is a point estimate and is said to be one.
//! Percentile objectives take each run's percentile as one observation (the mean of the
//! runs' p50, its t interval across runs), as the comparisons do with repeats.
//!
//! Each objective names its window: latency and goodput are decided after the first wave
//! (the start-up burst is an objective of its own: the first wave's worst TTFT and its
//! makespan, first send to the wave's last first token), with the
//! figure over every request beside it; throughput is the run's aggregate over all
//! requests. A lead stands only between arms offered equal load on the objective's basis
//! ([`super::load`]): otherwise it is "load differs", both loads named, and no winner.

use serde::Serialize;

use super::compare::{Comparison, ThroughputEstimate};
use super::effect::Effect;
use super::input::{MetricId, Window};
use super::load::LoadBasis;
use crate::stats::sample::{Interval, Moments, Sample, mean_interval};
use crate::stats::welch_interval;

/// What an objective ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ObjectiveKind {
    /// Aggregate output tokens per second of the run.
    Throughput,
    /// Aggregate output tokens per second per GPU.
    ThroughputPerGpu,
    /// Median time per output token (per-user decode latency).
    TpotP50,
    /// 95th percentile of TTFT.
    TtftP95,
    /// Output tokens per second of the requests that met every SLO.
    Goodput,
    /// The cold-start burst: the worst TTFT of the first wave.
    BurstTtft,
    /// The cold-start burst's makespan: first send to the first wave's last first token.
    BurstMakespan,
    /// The share of requests that met every SLO. An arm at or above the campaign's
    /// `slo_target` attains; when every arm attains, attainment decides nothing.
    Attainment,
}

impl ObjectiveKind {
    /// Every objective, in the order a report states them.
    pub const ALL: [ObjectiveKind; 8] = [
        ObjectiveKind::Throughput,
        ObjectiveKind::ThroughputPerGpu,
        ObjectiveKind::TpotP50,
        ObjectiveKind::TtftP95,
        ObjectiveKind::Attainment,
        ObjectiveKind::Goodput,
        ObjectiveKind::BurstTtft,
        ObjectiveKind::BurstMakespan,
    ];

    /// The window its verdict is made over: latency and goodput after the first wave,
    /// throughput over the run, the burst over its first wave (the `all` window's requests).
    pub fn window(self) -> Window {
        match self {
            ObjectiveKind::TpotP50
            | ObjectiveKind::TtftP95
            | ObjectiveKind::Goodput
            | ObjectiveKind::Attainment => Window::AfterFirstWave,
            ObjectiveKind::Throughput
            | ObjectiveKind::ThroughputPerGpu
            | ObjectiveKind::BurstTtft
            | ObjectiveKind::BurstMakespan => Window::All,
        }
    }

    /// The window in words, as a verdict names it.
    pub fn window_label(self) -> &'static str {
        match self {
            ObjectiveKind::BurstTtft | ObjectiveKind::BurstMakespan => "the first wave",
            _ => match self.window() {
                Window::All => "all requests",
                Window::AfterFirstWave => "after the first wave",
            },
        }
    }

    /// What the load of two arms must hold equal for a lead on it to stand.
    pub fn basis(self) -> LoadBasis {
        match self {
            ObjectiveKind::Throughput | ObjectiveKind::Goodput => LoadBasis::Aggregate,
            ObjectiveKind::ThroughputPerGpu => LoadBasis::PerGpu,
            ObjectiveKind::TpotP50 | ObjectiveKind::TtftP95 | ObjectiveKind::Attainment => {
                LoadBasis::PerReplica
            }
            ObjectiveKind::BurstTtft | ObjectiveKind::BurstMakespan => LoadBasis::Burst,
        }
    }

    /// The objective in words.
    pub fn label(self) -> &'static str {
        match self {
            ObjectiveKind::Throughput => "aggregate output throughput",
            ObjectiveKind::ThroughputPerGpu => "output throughput per GPU",
            ObjectiveKind::TpotP50 => "latency: median TPOT",
            ObjectiveKind::TtftP95 => "latency: TTFT p95",
            ObjectiveKind::Goodput => "goodput under the SLOs",
            ObjectiveKind::BurstTtft => "cold-start burst: worst TTFT",
            ObjectiveKind::BurstMakespan => "cold-start burst: makespan",
            ObjectiveKind::Attainment => "attainment of the SLOs",
        }
    }

    /// The unit of its figures.
    pub fn unit(self) -> &'static str {
        match self {
            ObjectiveKind::Throughput | ObjectiveKind::Goodput => "tok/s",
            ObjectiveKind::ThroughputPerGpu => "tok/s per GPU",
            ObjectiveKind::TpotP50
            | ObjectiveKind::TtftP95
            | ObjectiveKind::BurstTtft
            | ObjectiveKind::BurstMakespan => "ms",
            ObjectiveKind::Attainment => "%",
        }
    }

    /// The figure its smallest effect that matters is named by in the campaign's
    /// `min_effect` (`output_tps`, `tpot_ms`, …).
    pub fn figure(self) -> &'static str {
        match self {
            ObjectiveKind::Throughput | ObjectiveKind::ThroughputPerGpu => "output_tps",
            ObjectiveKind::TpotP50 => "tpot_ms",
            ObjectiveKind::TtftP95 | ObjectiveKind::BurstTtft | ObjectiveKind::BurstMakespan => {
                "ttft_ms"
            }
            ObjectiveKind::Goodput | ObjectiveKind::Attainment => "goodput_tps",
        }
    }

    /// Whether a higher figure is better.
    pub fn higher_is_better(self) -> bool {
        matches!(
            self,
            ObjectiveKind::Throughput
                | ObjectiveKind::ThroughputPerGpu
                | ObjectiveKind::Goodput
                | ObjectiveKind::Attainment
        )
    }
}

/// One arm's figure on an objective.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObjectiveFigure {
    pub arm: String,
    /// Mean across runs (the one run's figure with a single run).
    pub value: f64,
    pub runs: usize,
    /// The t interval across runs, with repeats.
    pub interval: Option<Interval>,
    /// Requests in flight (all replicas), for throughput objectives.
    pub in_flight: Option<u64>,
    /// The same figure over every request, beside a verdict made after the first wave.
    pub all_requests: Option<f64>,
    moments: Option<Moments>,
}

/// The leader on one objective.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Objective {
    pub kind: ObjectiveKind,
    /// The window the figures and the verdict are over.
    pub window: Window,
    /// Why the leader's and the runner-up's loads are not equal on the objective's basis,
    /// both named; the lead then stands for nothing.
    pub load_differs: Option<String>,
    /// The arm with the best figure.
    pub leader: ObjectiveFigure,
    /// The next best arm, when there is one.
    pub runner_up: Option<ObjectiveFigure>,
    /// Leader − runner-up with Welch's interval across runs, when both have repeats.
    pub lead: Option<Interval>,
    /// The lead's 95% interval excludes zero in the leader's favour.
    pub resolved: bool,
    /// Why the lead is not resolved, when it is not.
    pub unresolved: Option<String>,
    /// Attainment only: every arm meets the campaign's `slo_target`, so no arm wins on it.
    pub every_arm_attains: bool,
}

impl Objective {
    /// The leader, named only when the lead is resolved (or there is no other arm).
    pub fn winner(&self) -> Option<&str> {
        (self.resolved || self.runner_up.is_none()).then_some(self.leader.arm.as_str())
    }
}

/// One figure per arm of `c` on `kind` over `window` (arms without it are left out).
fn figures_over(c: &Comparison, kind: ObjectiveKind, window: Window) -> Vec<ObjectiveFigure> {
    let from_estimate = |arm: &str, e: &ThroughputEstimate, scale: f64, in_flight: Option<u64>| {
        let value = e.value()? / scale;
        let (runs, moments, interval) = match e {
            ThroughputEstimate::Repeats {
                runs,
                mean,
                sd,
                interval,
            } => (
                *runs,
                sd.and_then(|sd| Moments::new(*runs as u64, mean / scale, sd / scale).ok()),
                interval.map(|i| Interval {
                    estimate: i.estimate / scale,
                    low: i.low / scale,
                    high: i.high / scale,
                    df: i.df,
                }),
            ),
            _ => (1, None, None),
        };
        Some(ObjectiveFigure {
            arm: arm.to_owned(),
            value,
            runs,
            interval,
            in_flight,
            all_requests: None,
            moments,
        })
    };
    let per_run = |arm: &str, values: Vec<f64>| {
        let runs = values.len();
        let value = values.iter().sum::<f64>() / runs as f64;
        let moments = Sample::new(values).ok().and_then(|s| s.moments());
        ObjectiveFigure {
            arm: arm.to_owned(),
            value,
            runs,
            interval: moments.and_then(mean_interval),
            in_flight: None,
            all_requests: None,
            moments,
        }
    };
    match kind {
        ObjectiveKind::Throughput | ObjectiveKind::ThroughputPerGpu => c
            .arms
            .iter()
            .filter_map(|arm| {
                let t = c.throughput(arm, window)?;
                let scale = match kind {
                    ObjectiveKind::ThroughputPerGpu => f64::from(t.gpus?.count),
                    _ => 1.0,
                };
                from_estimate(arm, &t.estimate, scale, Some(t.in_flight))
            })
            .collect(),
        ObjectiveKind::Goodput => c
            .goodput
            .iter()
            .filter(|g| g.window == window)
            .filter_map(|g| from_estimate(&g.arm, &g.goodput_tps, 1.0, None))
            .collect(),
        ObjectiveKind::TpotP50 | ObjectiveKind::TtftP95 => {
            let (metric, pick): (MetricId, fn(&crate::stats::Stats) -> Option<f64>) = match kind {
                ObjectiveKind::TpotP50 => (MetricId::TpotMs, |s| s.p50),
                _ => (MetricId::TtftMs, |s| s.p95),
            };
            let Some(m) = c.metrics.iter().find(|m| m.metric == metric) else {
                return Vec::new();
            };
            c.arms
                .iter()
                .filter_map(|arm| {
                    let a = m.arm(arm, window)?;
                    let values: Vec<f64> = a.runs.iter().filter_map(|r| pick(&r.stats)).collect();
                    if values.is_empty() || values.len() != a.runs.len() {
                        return None;
                    }
                    Some(per_run(arm, values))
                })
                .collect()
        }
        ObjectiveKind::Attainment => c
            .goodput
            .iter()
            .filter(|g| g.window == window)
            .filter_map(|g| {
                let share = g.share?;
                Some(ObjectiveFigure {
                    arm: g.arm.clone(),
                    value: share.share * 100.0,
                    runs: g.runs,
                    // The exact (Clopper–Pearson) interval of the pooled share.
                    interval: Some(Interval {
                        estimate: share.share * 100.0,
                        low: share.low * 100.0,
                        high: share.high * 100.0,
                        df: f64::NAN,
                    }),
                    in_flight: None,
                    all_requests: None,
                    moments: None,
                })
            })
            .collect(),
        ObjectiveKind::BurstTtft => c
            .burst
            .iter()
            .filter(|b| !b.worst_ttft_ms.is_empty())
            .map(|b| per_run(&b.arm, b.worst_ttft_ms.clone()))
            .collect(),
        ObjectiveKind::BurstMakespan => c
            .burst
            .iter()
            .filter(|b| !b.makespan_ms.is_empty())
            .map(|b| per_run(&b.arm, b.makespan_ms.clone()))
            .collect(),
    }
}

/// One figure per arm of `c` on `kind`, over the objective's window, with the figure over
/// every request beside it where the window is another.
fn figures(c: &Comparison, kind: ObjectiveKind) -> Vec<ObjectiveFigure> {
    let window = kind.window();
    let mut out = figures_over(c, kind, window);
    if window != Window::All {
        let all = figures_over(c, kind, Window::All);
        for f in &mut out {
            f.all_requests = all.iter().find(|a| a.arm == f.arm).map(|a| a.value);
        }
    }
    out
}

/// The leader of `c` on `kind`, or `None` when no arm has the figure.
pub fn objective(c: &Comparison, kind: ObjectiveKind) -> Option<Objective> {
    rank(c, kind, figures(c, kind))
}

/// [`objective`] among `arms` only (a tie-break between arms an earlier criterion left
/// level).
pub fn objective_among(c: &Comparison, kind: ObjectiveKind, arms: &[String]) -> Option<Objective> {
    let among = figures(c, kind)
        .into_iter()
        .filter(|f| arms.contains(&f.arm))
        .collect();
    rank(c, kind, among)
}

fn rank(c: &Comparison, kind: ObjectiveKind, figures: Vec<ObjectiveFigure>) -> Option<Objective> {
    let mut ranked = figures;
    ranked.sort_by(|a, b| {
        if kind.higher_is_better() {
            b.value.total_cmp(&a.value)
        } else {
            a.value.total_cmp(&b.value)
        }
    });
    let mut ranked = ranked.into_iter();
    let leader = ranked.next()?;
    let runner_up = ranked.next();
    let rest: Vec<ObjectiveFigure> = runner_up.iter().cloned().chain(ranked).collect();
    let load_differs = runner_up
        .as_ref()
        .and_then(|r| c.load_differs(&leader.arm, &r.arm, kind.basis()));
    let (lead, resolved, unresolved) = match &runner_up {
        None => (None, true, None),
        Some(second) => match leader
            .moments
            .zip(second.moments)
            .and_then(|(a, b)| welch_interval(b, a))
        {
            Some(i) => {
                // Leader − runner-up: read against the runner-up's figure, so a lead under
                // the smallest effect that matters is negligible, and one whose interval
                // includes zero is a tie.
                let effect = Effect::with_share(
                    i.estimate,
                    Some((i.low, i.high)),
                    Some(second.value),
                    kind.higher_is_better(),
                    c.min_effect_for(kind.figure()),
                );
                let why = match effect {
                    Effect::Better | Effect::Worse => None,
                    Effect::Negligible => Some(format!(
                        "negligible: the lead is under {}% of the runner-up's figure",
                        c.min_effect_for(kind.figure()) * 100.0
                    )),
                    Effect::NotResolved | Effect::NoInterval => Some(
                        "a tie: the 95% interval of the lead across runs includes zero".to_owned(),
                    ),
                };
                (Some(i), effect == Effect::Better, why)
            }
            None => (
                None,
                false,
                Some(if leader.runs < 2 || second.runs < 2 {
                    "single runs: no run-to-run uncertainty; record ≥ 3 repeats of each arm"
                        .to_owned()
                } else {
                    "no interval across runs".to_owned()
                }),
            ),
        },
    };
    let (lead, resolved, unresolved, every_arm_attains) = if kind == ObjectiveKind::Attainment {
        attainment_lead(
            c,
            &leader,
            runner_up.as_ref(),
            std::iter::once(&leader).chain(&rest),
        )
    } else {
        (lead, resolved, unresolved, false)
    };
    // The output-length guard: a throughput or goodput lead between arms whose replies
    // differ in length beyond the guard is not comparable.
    let output_differs = runner_up
        .as_ref()
        .filter(|_| {
            matches!(
                kind,
                ObjectiveKind::Throughput
                    | ObjectiveKind::ThroughputPerGpu
                    | ObjectiveKind::Goodput
            )
        })
        .and_then(|r| c.output_differs(&leader.arm, &r.arm));
    let (resolved, unresolved) = match (&load_differs, &output_differs) {
        (Some(why), _) if !every_arm_attains => (false, Some(why.clone())),
        (_, Some(why)) => (false, Some(format!("not comparable: {why}"))),
        _ => (resolved, unresolved),
    };
    Some(Objective {
        kind,
        window: kind.window(),
        load_differs,
        leader,
        runner_up,
        lead,
        resolved,
        unresolved,
        every_arm_attains,
    })
}

/// Attainment's lead: no Welch interval (each share is pooled over the runs' requests, with
/// its exact interval; the lead is read as percentage points). When every arm meets the `slo_target` no arm wins;
/// otherwise the leader wins only where it attains and its exact interval lies wholly
/// above the runner-up's.
fn attainment_lead<'a>(
    c: &Comparison,
    leader: &ObjectiveFigure,
    runner_up: Option<&ObjectiveFigure>,
    all: impl Iterator<Item = &'a ObjectiveFigure>,
) -> (Option<Interval>, bool, Option<String>, bool) {
    let target = c.slo_target * 100.0;
    let all: Vec<&ObjectiveFigure> = all.collect();
    let Some(second) = runner_up else {
        return (None, leader.value >= target, None, false);
    };
    if all.iter().all(|f| f.value >= target) {
        let lowest = all
            .iter()
            .min_by(|a, b| a.value.total_cmp(&b.value))
            .map(|f| {
                format!(
                    " (lowest: {} {}%)",
                    f.arm,
                    crate::figure::count_or_sig3(f.value)
                )
            })
            .unwrap_or_default();
        return (
            None,
            false,
            Some(format!(
                "every arm attains the {}% target after the first wave{lowest}: no winner",
                crate::figure::count_or_sig3(target)
            )),
            true,
        );
    }
    let apart = match (leader.interval, second.interval) {
        (Some(a), Some(b)) => a.low > b.high,
        _ => false,
    };
    let why = if leader.value < target {
        Some(format!(
            "no arm attains the {}% target after the first wave",
            crate::figure::count_or_sig3(target)
        ))
    } else if !apart {
        Some("a tie: the exact 95% intervals of the two shares overlap".to_owned())
    } else {
        None
    };
    (None, why.is_none(), why, false)
}

/// Every objective `c` carries figures for.
pub fn objectives(c: &Comparison) -> Vec<Objective> {
    ObjectiveKind::ALL
        .iter()
        .filter_map(|&k| objective(c, k))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{at_equal_load, plan, repeated_topology_stage, selection};
    use super::super::stage::headline_comparison;
    use super::*;

    fn headline(artifacts: &[super::super::input::Artifact]) -> Comparison {
        headline_comparison(artifacts, &selection(), &plan())
            .unwrap()
            .unwrap()
    }

    /// DP2 leads aggregate throughput at twice TP2's requests in flight: the lead stands for
    /// nothing, both loads are named; at one load the same figures decide.
    #[test]
    fn a_lead_at_a_different_load_is_load_differs_never_resolved() {
        let c = headline(&repeated_topology_stage(1900.0));
        let o = objective(&c, ObjectiveKind::Throughput).unwrap();
        assert_eq!(o.leader.arm, "two independent TP1 replicas");
        assert!(!o.resolved);
        assert_eq!(o.winner(), None);
        let why = o.load_differs.as_deref().unwrap();
        assert!(
            why.starts_with("load differs (in flight on equal GPUs and requests per replica)"),
            "{why}"
        );
        assert!(
            why.contains("16 in flight") && why.contains("TP2 8 in flight"),
            "{why}"
        );
        assert_eq!(o.unresolved.as_deref(), Some(why));

        let c = headline(&at_equal_load(repeated_topology_stage(1900.0)));
        let o = objective(&c, ObjectiveKind::Throughput).unwrap();
        assert_eq!(o.load_differs, None);
        assert!(o.resolved, "{:?}", o.unresolved);
    }

    /// The campaign's `min_effect` sets how large a resolved lead must be to name a winner.
    #[test]
    fn a_lead_under_the_campaign_s_min_effect_is_negligible() {
        let mut c = headline(&at_equal_load(repeated_topology_stage(1900.0)));
        assert!(objective(&c, ObjectiveKind::Throughput).unwrap().resolved);
        // 1900 against 1500: +27%, under a 50% smallest effect.
        // Named for aggregate throughput alone (`{"output_tps": 0.5}`): the same.
        c.min_effect_by.insert("output_tps".to_owned(), 0.5);
        let o = objective(&c, ObjectiveKind::Throughput).unwrap();
        assert!(!o.resolved);
        assert!(
            o.unresolved
                .as_deref()
                .unwrap()
                .starts_with("negligible: the lead is under 50%"),
            "{:?}",
            o.unresolved
        );
        c.min_effect_by.clear();
        c.min_effect = 0.5;
        let o = objective(&c, ObjectiveKind::Throughput).unwrap();
        assert!(!o.resolved);
        assert!(
            o.unresolved
                .as_deref()
                .unwrap()
                .starts_with("negligible: the lead is under 50%"),
            "{:?}",
            o.unresolved
        );
    }

    /// Latency and goodput are decided after the first wave, the figure over every request
    /// beside; throughput over the run; the burst over its first wave.
    #[test]
    fn each_objective_names_its_window() {
        let c = headline(&at_equal_load(repeated_topology_stage(1900.0)));
        for kind in ObjectiveKind::ALL {
            let Some(o) = objective(&c, kind) else {
                continue;
            };
            assert_eq!(o.window, kind.window());
            if o.window == Window::AfterFirstWave {
                assert!(o.leader.all_requests.is_some(), "{kind:?}");
            } else {
                assert_eq!(o.leader.all_requests, None, "{kind:?}");
            }
        }
        assert_eq!(
            ObjectiveKind::TtftP95.window_label(),
            "after the first wave"
        );
        assert_eq!(ObjectiveKind::Goodput.window(), Window::AfterFirstWave);
        assert_eq!(ObjectiveKind::Throughput.window_label(), "all requests");
        assert_eq!(ObjectiveKind::BurstTtft.window_label(), "the first wave");
        assert_eq!(ObjectiveKind::BurstTtft.basis(), LoadBasis::Burst);
        assert_eq!(ObjectiveKind::TpotP50.basis(), LoadBasis::PerReplica);
    }

    /// Attainment after the first wave: when every arm meets the campaign's target, no arm
    /// wins on it; otherwise only a leader that attains, its exact interval clear of the
    /// runner-up's.
    #[test]
    fn when_every_arm_attains_attainment_names_no_winner() {
        use super::super::input::GoodputFigures;
        let with_shares = |shares: &[(&str, u64)]| {
            let mut artifacts = at_equal_load(repeated_topology_stage(1900.0));
            for a in &mut artifacts {
                let attained = shares
                    .iter()
                    .find(|(arm, _)| *arm == a.facts.arm)
                    .map_or(100, |(_, k)| *k);
                for window in Window::ALL {
                    a.figures.goodput.insert(
                        window,
                        GoodputFigures {
                            requests: 100,
                            attained,
                            share: crate::stats::clopper_pearson(attained, 100),
                            goodput_rps: Some(1.0),
                            goodput_tps: Some(300.0),
                        },
                    );
                }
            }
            headline(&artifacts)
        };
        let c = with_shares(&[("TP1", 95)]);
        let o = objective(&c, ObjectiveKind::Attainment).unwrap();
        assert!(o.every_arm_attains);
        assert_eq!(o.winner(), None);
        assert!(
            o.unresolved
                .as_deref()
                .unwrap()
                .starts_with("every arm attains the 90% target after the first wave (lowest: "),
            "{:?}",
            o.unresolved
        );
        // Two arms below the target: the one above it wins, its interval clear of theirs.
        let c = with_shares(&[("TP1", 50), ("TP2", 60)]);
        let o = objective(&c, ObjectiveKind::Attainment).unwrap();
        assert!(!o.every_arm_attains);
        assert_eq!(o.winner(), Some("two independent TP1 replicas"));
        assert_eq!(o.runner_up.as_ref().unwrap().arm, "TP2");
        // Two arms at the top: a tie.
        let c = with_shares(&[("TP1", 50)]);
        let o = objective(&c, ObjectiveKind::Attainment).unwrap();
        assert_eq!(o.winner(), None);
        assert!(o.unresolved.as_deref().unwrap().starts_with("a tie"));
    }

    /// The output-length guard holds on objectives too: a throughput lead between arms whose
    /// replies differ in mean length beyond it is not comparable, whatever the interval.
    #[test]
    fn a_throughput_lead_over_longer_or_shorter_replies_is_not_comparable() {
        let mut artifacts = at_equal_load(repeated_topology_stage(1900.0));
        for a in &mut artifacts {
            if a.facts.arm == "TP2" {
                a.figures.completion_tokens_mean = Some(250.0);
            }
        }
        let c = headline(&artifacts);
        let o = objective(&c, ObjectiveKind::Throughput).unwrap();
        assert_eq!(o.runner_up.as_ref().unwrap().arm, "TP2");
        assert!(!o.resolved);
        let why = o.unresolved.as_deref().unwrap();
        assert!(
            why.starts_with("not comparable: two independent TP1 replicas vs TP2: output-length realization differs (completion tokens mean 340 vs 250"),
            "{why}"
        );
    }
}
