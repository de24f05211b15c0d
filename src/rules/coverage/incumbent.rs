//! A selection against the configuration it would replace. Without a declared comparator, a
//! selected arm is tested against the **incumbent**: the arm of its own stage that realises
//! the most recent earlier stage's selection on the same checkpoint (stage 4's `K8 as
//! lower-TTFT tradeoff` against `RadixArk DFlash2 K12 chunk1K`, which realises stage 2's
//! `K12 chunk1K extra_buffer Mamba96` on the RadixArk checkpoint). An earlier selection
//! stands for settings: each arm its clause names, in the keys it was one key apart from its
//! sweep in (less the keys another component of the clause stands for), and each word the
//! campaign's `aliases` map to a setting. An arm realises the selection when its
//! configuration holds every one of them.
//!
//! The test runs on every headline statistic of the claim's metric (mean, p50 and the tail
//! that hurts: p95 for TTFT, p5 for a rate), each in the decision window (after the first
//! wave), runs as the sample where both arms have repeats: **supported** when every tested
//! statistic agrees, **contradicted** when one is resolved the other way, **tested, not
//! resolved** with per-statistic detail and the runs per arm that would resolve each
//! difference of the size observed.

use super::*;
use crate::stats::runs_to_resolve;

/// The arm a selection would replace, and the earlier selection it realises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Incumbent {
    pub arm: String,
    /// `stage 2 (SGLang optimization) selected "K12 chunk1K extra_buffer Mamba96"`.
    pub selection: String,
    /// The settings it realises, `key=value`.
    pub settings: Vec<String>,
}

/// The keys `arm` is one key apart from another arm in, over `comparisons`.
pub(super) fn keys_apart(
    arm: &str,
    comparisons: &[&StageComparison],
    artifacts: &[Artifact],
) -> BTreeSet<String> {
    comparisons
        .iter()
        .filter_map(|s| s.result.as_ref().ok())
        .flat_map(|c| {
            let members: Vec<&Artifact> = artifacts
                .iter()
                .filter(|a| a.facts.fingerprint == c.fingerprint)
                .collect();
            c.arms
                .iter()
                .filter_map(|other| one_key(&members, arm, other))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The keys each named arm of a clause stands for: its own keys apart, less those another
/// component stands for (a key both stand for is kept by each).
pub(super) fn own_keys(
    named: &[&str],
    comparisons: &[&StageComparison],
    artifacts: &[Artifact],
) -> Vec<(String, BTreeSet<String>, BTreeSet<String>)> {
    named
        .iter()
        .map(|arm| {
            let others: BTreeSet<String> = named
                .iter()
                .filter(|o| *o != arm)
                .flat_map(|o| keys_apart(o, comparisons, artifacts))
                .collect();
            let own = keys_apart(arm, comparisons, artifacts);
            let covered = if own.is_subset(&others) {
                BTreeSet::new()
            } else {
                others
            };
            let stands_for = own.difference(&covered).cloned().collect();
            ((*arm).to_owned(), stands_for, covered)
        })
        .collect()
}

/// The effective configuration `arm`'s artifacts record.
pub(super) fn config_of(
    arm: &str,
    artifacts: &[Artifact],
) -> Option<crate::artifact::run::ArmConfig> {
    artifacts
        .iter()
        .find(|a| a.facts.arm == arm)
        .map(|a| a.facts.effective_config())
}

/// The settings an earlier stage's selection stands for (see the module documentation).
fn selection_settings(stage: &Stage, evidence: Evidence<'_>) -> Vec<(String, String)> {
    let Some(selected) = stage.selected.as_deref() else {
        return Vec::new();
    };
    let artifacts = evidence.artifacts;
    let comparisons = evidence.comparisons_of(stage);
    let mut settings: Vec<(String, String)> = Vec::new();
    for clause in selected.split(';').map(str::trim) {
        let named = named_arms(clause, stage, artifacts);
        for (arm, keys, _) in own_keys(&named, &comparisons, artifacts) {
            let Some(config) = config_of(&arm, artifacts) else {
                continue;
            };
            for key in keys {
                if let Some(value) = config.get(&key) {
                    settings.push((key, value.to_owned()));
                }
            }
        }
        for word in unrecorded_components(clause, stage, artifacts) {
            if let Some((k, v)) = evidence
                .aliases
                .iter()
                .find(|(w, _)| w.eq_ignore_ascii_case(&word))
                .and_then(|(_, to)| to.split_once('='))
            {
                settings.push((k.trim().to_owned(), v.trim().to_owned()));
            }
        }
    }
    settings.sort();
    settings.dedup();
    settings
}

/// The incumbent of `arm` in `stage` (see the module documentation); `None` when no earlier
/// selection is realised by another arm of the stage on `arm`'s checkpoint, or `arm` itself
/// realises the most recent one.
pub(super) fn incumbent(
    arm: &str,
    stage: &Stage,
    earlier: &[&Stage],
    evidence: Evidence<'_>,
) -> Option<Incumbent> {
    let artifacts = evidence.artifacts;
    let checkpoint =
        |a: &str| config_of(a, artifacts).and_then(|c| c.get("checkpoint").map(str::to_owned));
    let own_checkpoint = checkpoint(arm);
    for previous in earlier.iter().rev() {
        let settings = selection_settings(previous, evidence);
        if settings.is_empty() {
            continue;
        }
        let realises = |a: &str| {
            config_of(a, artifacts).is_some_and(|c| {
                settings
                    .iter()
                    .all(|(k, v)| c.get(k).is_some_and(|x| x == v))
            })
        };
        if realises(arm) {
            return None;
        }
        let candidates: Vec<&String> = stage
            .arms()
            .iter()
            .filter(|a| *a != arm && checkpoint(a) == own_checkpoint)
            .filter(|a| realises(a))
            .collect();
        if candidates.is_empty() {
            continue;
        }
        // Several arms realising it: the one nearest `arm` (fewest keys apart); none when
        // that is not one arm, rather than a guess.
        let own = config_of(arm, artifacts)?;
        let apart =
            |a: &str| config_of(a, artifacts).map_or(usize::MAX, |c| c.differing_keys(&own).len());
        let nearest = candidates.iter().map(|a| apart(a)).min()?;
        let mut closest = candidates.into_iter().filter(|a| apart(a) == nearest);
        let (Some(found), None) = (closest.next(), closest.next()) else {
            return None;
        };
        {
            return Some(Incumbent {
                arm: found.clone(),
                selection: format!(
                    "stage {} ({}) selected \"{}\"",
                    previous.order.get(),
                    previous.stage,
                    previous.selected.as_deref().unwrap_or_default()
                ),
                settings: settings.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            });
        }
    }
    None
}

/// A headline statistic of a per-request metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Statistic {
    Mean,
    Percentile(Percentile),
}

impl Statistic {
    /// `mean`, or a percentile's column (`p50`, `p95`, …).
    pub(crate) fn parse(text: &str) -> Option<Statistic> {
        let text = text.trim().to_lowercase();
        if text == "mean" {
            return Some(Statistic::Mean);
        }
        Percentile::ALL
            .into_iter()
            .find(|p| p.column() == text)
            .map(Statistic::Percentile)
    }

    fn name(self) -> String {
        match self {
            Statistic::Mean => "mean".to_owned(),
            Statistic::Percentile(p) => p.column().to_owned(),
        }
    }

    fn of(self, stats: &crate::stats::Stats) -> Option<f64> {
        match self {
            Statistic::Mean => stats.mean,
            Statistic::Percentile(p) => stats.percentile(p),
        }
    }
}

/// One statistic's difference (arm − incumbent, in the metric's unit).
struct Tested {
    statistic: String,
    /// `None`: the data cannot give it an interval (the reason).
    outcome: Result<(Interval, Resolved, Option<u64>), String>,
}

/// `arm` against `incumbent` on every headline statistic of `metric` in comparison `c`.
fn statistics(
    c: &Comparison,
    metric: ClaimMetric,
    arm: &str,
    incumbent: &str,
    only: Option<Statistic>,
    holm: &Holm,
) -> Vec<Tested> {
    let id = match metric {
        ClaimMetric::Ttft => MetricId::TtftMs,
        ClaimMetric::Decode => MetricId::DecodeTps,
        ClaimMetric::AggregateThroughput => {
            return vec![Tested {
                statistic: "aggregate".to_owned(),
                outcome: match super::sweep::pairwise(c, metric, arm, incumbent) {
                    Some((_, _, _, Some(i), _)) => {
                        let raw = if metric.higher_is_better() {
                            i
                        } else {
                            negate(i)
                        };
                        Ok((raw, holm.side(&i), None))
                    }
                    Some(_) => Err("single runs: no run-to-run uncertainty".to_owned()),
                    None => Err("not recorded on both".to_owned()),
                },
            }];
        }
    };
    let tail = if metric.higher_is_better() {
        Percentile::P5
    } else {
        Percentile::P95
    };
    let window = Window::AfterFirstWave;
    let Some(m) = c.metrics.iter().find(|m| m.metric == id) else {
        return Vec::new();
    };
    let (Some(a), Some(b)) = (m.arm(arm, window), m.arm(incumbent, window)) else {
        return Vec::new();
    };
    let sign = if metric.higher_is_better() { 1.0 } else { -1.0 };
    let repeated = a.runs.len() >= 2 && b.runs.len() >= 2;
    let headline = [
        Statistic::Mean,
        Statistic::Percentile(Percentile::P50),
        Statistic::Percentile(tail),
    ];
    let chosen: Vec<Statistic> = match only {
        Some(stat) => vec![stat],
        None => headline.to_vec(),
    };
    chosen
        .into_iter()
        .map(|stat| {
            let moments = |arm: &ArmMetric| -> Option<Moments> {
                if repeated {
                    let v: Vec<f64> = arm.runs.iter().filter_map(|r| stat.of(&r.stats)).collect();
                    (v.len() == arm.runs.len()).then_some(())?;
                    Sample::new(v).ok()?.moments()
                } else if stat == Statistic::Mean {
                    arm.pooled
                } else {
                    None
                }
            };
            let outcome = match (moments(a), moments(b)) {
                (Some(am), Some(bm)) => match welch_interval(bm, am) {
                    Some(raw) => {
                        let oriented = if sign > 0.0 { raw } else { negate(raw) };
                        let side = holm.side(&oriented);
                        let need = (side == Resolved::Unresolved && repeated)
                            .then(|| runs_to_resolve(am, bm, 200))
                            .flatten();
                        Ok((raw, side, need))
                    }
                    None => Err("no interval (too few values)".to_owned()),
                },
                _ if !repeated => {
                    Err("one run each: no interval of a percentile across runs".to_owned())
                }
                _ => Err("not recorded on every run".to_owned()),
            };
            Tested {
                // A mean of single runs is judged over requests: said, so the verdict is
                // flagged as resting on single runs.
                statistic: if !repeated && stat == Statistic::Mean {
                    format!("{} (over requests; one run each)", stat.name())
                } else {
                    stat.name()
                },
                outcome,
            }
        })
        .collect()
}

fn negate(i: Interval) -> Interval {
    Interval {
        estimate: -i.estimate,
        low: -i.high,
        high: -i.low,
        df: i.df,
    }
}

impl Incumbent {
    /// The comparator in words, as a verdict's reason opens.
    pub(super) fn describe(&self) -> String {
        format!(
            "against {}, the configuration it would replace ({}, realised here as {})",
            self.arm,
            self.selection,
            self.settings.join(", ")
        )
    }
}

/// What a claim asks of a comparator: the metric, one statistic or every headline one, and
/// whether the claim is a rejection (the arm worse, not better).
#[derive(Debug, Clone, Copy)]
pub(super) struct Question {
    pub metric: ClaimMetric,
    pub only: Option<Statistic>,
    pub rejection: bool,
}

/// Whether `a` and `b` were recorded together on a performance workload of `comparisons`.
pub(super) fn together(a: &str, b: &str, comparisons: &[&StageComparison]) -> bool {
    comparisons
        .iter()
        .filter_map(|s| s.result.as_ref().ok())
        .any(|c| c.arms.iter().any(|x| x == a) && c.arms.iter().any(|x| x == b))
}

/// `arm` against `other` (described by `what`) in every comparison of the stage holding both
/// at equal load, on `only` or every headline statistic of `metric`.
pub(super) fn against_comparator(
    arm: &str,
    other: &str,
    what: &str,
    question: Question,
    comparisons: &[&StageComparison],
    holm: &Holm,
) -> (ClaimVerdict, String) {
    let Question {
        metric,
        only,
        rejection,
    } = question;
    let unit = metric.unit();
    let mut verdicts = Vec::new();
    let mut reasons = Vec::new();
    for s in comparisons {
        let Ok(c) = &s.result else { continue };
        if !(c.arms.iter().any(|a| a == arm) && c.arms.iter().any(|a| a == other)) {
            continue;
        }
        if let Some(why) = c.load_differs(arm, other, metric.basis()) {
            verdicts.push(ClaimVerdict::NotTestable);
            reasons.push(format!("{}: not at equal load: {why}", s.workload));
            continue;
        }
        let tested = statistics(c, metric, arm, other, only, holm);
        let (mut better, mut worse, mut open, mut untestable) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut needs = Vec::new();
        for t in &tested {
            match &t.outcome {
                Ok((i, side, need)) => {
                    let word = match side {
                        Resolved::Better => "better",
                        Resolved::Worse => "worse",
                        Resolved::Unresolved => "not resolved",
                    };
                    let text = format!(
                        "{} {} [{}, {}] {unit}, {word}",
                        t.statistic,
                        signed(i.estimate),
                        signed(i.low),
                        signed(i.high)
                    );
                    match side {
                        Resolved::Better => better.push(text),
                        Resolved::Worse => worse.push(text),
                        Resolved::Unresolved => {
                            open.push(text);
                            match need {
                                Some(n) => {
                                    needs.push(format!("{} about {n} runs per arm", t.statistic))
                                }
                                None if t.statistic.contains("one run each") => {
                                    needs.push(format!(
                                        "{} ≥ 3 runs per arm to test it across runs",
                                        t.statistic
                                    ))
                                }
                                None => needs.push(format!(
                                    "{} more than 200 runs per arm, or none at this difference",
                                    t.statistic
                                )),
                            }
                        }
                    }
                }
                Err(why) => untestable.push(format!("{} {why}", t.statistic)),
            }
        }
        // A rejection is the mirror image: the arm worse on every tested statistic.
        let (agree, disagree) = if rejection {
            (&worse, &better)
        } else {
            (&better, &worse)
        };
        let verdict = if !disagree.is_empty() {
            ClaimVerdict::Contradicted
        } else if agree.is_empty() && open.is_empty() {
            ClaimVerdict::NotTestable
        } else if open.is_empty() {
            ClaimVerdict::Supported
        } else {
            ClaimVerdict::NotResolved
        };
        let mut parts = Vec::new();
        let names = |v: &[String]| {
            v.iter()
                .map(|t| t.split(' ').next().unwrap_or_default().to_owned())
                .collect::<Vec<_>>()
                .join(", ")
        };
        if verdict == ClaimVerdict::NotResolved {
            parts.push(format!(
                "resolved on {}; not on {}",
                if agree.is_empty() {
                    "none".to_owned()
                } else {
                    names(agree)
                },
                names(&open)
            ));
        }
        let figures: Vec<String> = better.iter().chain(&worse).chain(&open).cloned().collect();
        parts.push(format!(
            "{arm} − {other} after the first wave: {}",
            figures.join("; ")
        ));
        if !untestable.is_empty() {
            parts.push(format!("not tested: {}", untestable.join("; ")));
        }
        if !needs.is_empty() {
            parts.push(format!(
                "at the difference and spread observed, an uncorrected 95% interval clears zero with {}",
                needs.join(", ")
            ));
        }
        verdicts.push(verdict);
        reasons.push(format!("{}: {}", s.workload, parts.join("; ")));
    }
    match combine(verdicts) {
        Some(v) => (
            v,
            format!(
                "{what}, on {} ({unit}): {}",
                match only {
                    Some(stat) if metric != ClaimMetric::AggregateThroughput =>
                        format!("{} {}", stat.name(), metric.quantity()),
                    _ => metric.quantity().to_owned(),
                },
                reasons.join("; ")
            ),
        ),
        None => (
            ClaimVerdict::NotTestable,
            format!("{what}: the two were recorded together on no performance workload"),
        ),
    }
}
