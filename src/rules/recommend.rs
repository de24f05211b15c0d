//! The first screen's recommendation: the configuration the data supports under the
//! campaign's declared objective (`objective: {text, priority}` in the campaign file), its
//! lead with its interval and window, and the caveats that would change it.
//!
//! The criteria are tried in priority order. `capacity_per_gpu` ranks the arms a capacity
//! search resolved ([`super::capacity`]); every other criterion is a headline objective
//! ([`super::objective`]) among the arms still level. A criterion that names a winner ends
//! the search; one that leaves arms level (equal capacity per GPU, a tie, a lead at a
//! different load) hands those arms to the next; with none left the recommendation says no
//! single configuration is supported, and why.

use serde::{Deserialize, Serialize};

use super::capacity::CapacityDecision;
use super::compare::Comparison;
use super::objective::{ObjectiveKind, objective_among};

/// One criterion of a declared objective.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Criterion {
    /// Users per GPU under the SLOs: the capacity searches' ranking.
    CapacityPerGpu,
    Throughput,
    ThroughputPerGpu,
    TpotP50,
    TtftP95,
    Goodput,
    BurstTtft,
}

impl Criterion {
    /// The headline objective it is, when it is one.
    fn objective(self) -> Option<ObjectiveKind> {
        Some(match self {
            Criterion::CapacityPerGpu => return None,
            Criterion::Throughput => ObjectiveKind::Throughput,
            Criterion::ThroughputPerGpu => ObjectiveKind::ThroughputPerGpu,
            Criterion::TpotP50 => ObjectiveKind::TpotP50,
            Criterion::TtftP95 => ObjectiveKind::TtftP95,
            Criterion::Goodput => ObjectiveKind::Goodput,
            Criterion::BurstTtft => ObjectiveKind::BurstTtft,
        })
    }

    /// In words.
    pub fn label(self) -> &'static str {
        match self.objective() {
            Some(kind) => kind.label(),
            None => "capacity per GPU under the SLOs",
        }
    }
}

/// The decision's objective as the campaign file declares it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredObjective {
    /// The objective in the team's words, e.g. "capacity per GPU under the SLOs, then median
    /// TPOT".
    pub text: String,
    /// The criteria in priority order.
    pub priority: Vec<Criterion>,
}

/// What the first screen opens with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recommendation {
    /// The configuration supported, when one is.
    pub arm: Option<String>,
    /// One paragraph: the configuration, its lead with interval and window, on what.
    pub text: String,
    /// What would change it.
    pub caveats: Vec<String>,
}

/// The recommendation under `declared`, from the capacity ranking and the headline
/// comparison.
pub fn recommend(
    declared: &DeclaredObjective,
    capacity: &CapacityDecision,
    headline: Option<&Comparison>,
) -> Recommendation {
    let mut caveats = Vec::new();
    let mut level: Option<Vec<String>> = None;
    let mut steps: Vec<String> = Vec::new();
    for criterion in &declared.priority {
        match criterion.objective() {
            None => {
                let ranked: Vec<&super::capacity::CapacityRow> = capacity
                    .rows
                    .iter()
                    .filter(|r| r.capacity_per_gpu.is_some())
                    .filter(|r| level.as_ref().is_none_or(|l| l.contains(&r.arm)))
                    .collect();
                let unranked: Vec<&str> = capacity
                    .rows
                    .iter()
                    .filter(|r| r.capacity_per_gpu.is_none())
                    .map(|r| r.arm.as_str())
                    .collect();
                if !unranked.is_empty() {
                    caveats.push(format!(
                        "capacity not resolved for {}: a resolving search could rank it first",
                        unranked.join(", ")
                    ));
                }
                if let Some(winner) = &capacity.winner
                    && ranked.iter().any(|r| &r.arm == winner)
                {
                    return Recommendation {
                        arm: Some(winner.clone()),
                        text: format!(
                            "Under the declared objective ({}), the data supports {winner}: {} (after the first wave, each arm at its own capacity).",
                            declared.text, capacity.verdict
                        ),
                        caveats,
                    };
                }
                // The arms level with the first: those it is not shown to beat.
                let tied: Vec<String> = match ranked.first() {
                    Some(top) => ranked
                        .iter()
                        .filter(|r| r.arm == top.arm || !top.beats(r))
                        .map(|r| r.arm.clone())
                        .collect(),
                    None => Vec::new(),
                };
                // Short on the first screen: the arms left level and their capacities (the
                // topology section gives the brackets and goodput).
                let brief = if tied.len() >= 2 {
                    let head = capacity.verdict.split(':').next().unwrap_or_default();
                    let arms: Vec<String> = ranked
                        .iter()
                        .filter(|r| tied.contains(&r.arm))
                        .map(|r| {
                            format!(
                                "{} ({} in flight per GPU)",
                                r.arm,
                                r.capacity_per_gpu
                                    .map_or_else(|| "?".to_owned(), crate::figure::count_or_sig3)
                            )
                        })
                        .collect();
                    format!(
                        "{head} between {} (brackets and goodput per GPU under Topology at capacity)",
                        arms.join(" and ")
                    )
                } else {
                    capacity.verdict.clone()
                };
                steps.push(format!("{}: {brief}", criterion.label()));
                if tied.len() >= 2 {
                    level = Some(tied);
                }
            }
            Some(kind) => {
                let Some(c) = headline else {
                    steps.push(format!("{}: no headline comparison", criterion.label()));
                    continue;
                };
                let among = level.clone().unwrap_or_else(|| c.arms.clone());
                let Some(o) = objective_among(c, kind, &among) else {
                    continue;
                };
                // A winner among level arms stands only at equal load with each of them.
                let unequal: Vec<&String> = among
                    .iter()
                    .filter(|a| **a != o.leader.arm)
                    .filter(|a| c.load_differs(&o.leader.arm, a, kind.basis()).is_some())
                    .collect();
                if level.is_some() && !unequal.is_empty() {
                    steps.push(format!(
                        "{}: {} leads, but at a different load from {}",
                        criterion.label(),
                        o.leader.arm,
                        unequal
                            .iter()
                            .map(|a| a.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                    continue;
                }
                if let Some(winner) = o.winner().filter(|_| o.runner_up.is_some()) {
                    let lead = o
                        .lead
                        .map(|i| {
                            format!(
                                "{} [{}, {}] {}",
                                crate::figure::sig3(i.estimate),
                                crate::figure::sig3(i.low),
                                crate::figure::sig3(i.high),
                                kind.unit()
                            )
                        })
                        .unwrap_or_default();
                    let runner = o.runner_up.as_ref().map_or("", |r| r.arm.as_str());
                    // What the earlier criteria left undecided is a caveat: it could decide.
                    caveats.extend(steps.iter().map(|s| format!("{s} (it did not decide)")));
                    return Recommendation {
                        arm: Some(winner.to_owned()),
                        text: format!(
                            "Under the declared objective ({}), the data supports {winner}: it leads {runner} on {} by {lead} ({}, 95% CI across runs, equal load).",
                            declared.text,
                            kind.label(),
                            kind.window_label()
                        ),
                        caveats,
                    };
                }
                steps.push(format!(
                    "{}: {} leads, {}",
                    criterion.label(),
                    o.leader.arm,
                    o.unresolved.as_deref().unwrap_or("not resolved")
                ));
                if let Some(r) = &o.runner_up
                    && o.load_differs.is_none()
                {
                    level = Some(vec![o.leader.arm.clone(), r.arm.clone()]);
                }
            }
        }
    }
    Recommendation {
        arm: None,
        text: format!(
            "Under the declared objective ({}), the data supports no single configuration: {}.",
            declared.text,
            if steps.is_empty() {
                "no criterion had figures".to_owned()
            } else {
                steps.join("; ")
            }
        ),
        caveats,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::capacity::decide;

    #[test]
    fn the_declared_objective_deserialises_and_names_its_criteria() {
        let d: DeclaredObjective = serde_json::from_str(
            r#"{"text": "capacity per GPU under the SLOs, then median TPOT",
                "priority": ["capacity_per_gpu", "tpot_p50"]}"#,
        )
        .unwrap();
        assert_eq!(d.priority, [Criterion::CapacityPerGpu, Criterion::TpotP50]);
        assert_eq!(Criterion::TpotP50.label(), "latency: median TPOT");
        assert!(
            serde_json::from_str::<DeclaredObjective>(r#"{"text": "x", "priority": ["speed"]}"#)
                .is_err()
        );
    }

    #[test]
    fn no_resolved_capacity_and_no_headline_supports_nothing_and_says_why() {
        let d = DeclaredObjective {
            text: "capacity".into(),
            priority: vec![Criterion::CapacityPerGpu, Criterion::TpotP50],
        };
        let r = recommend(&d, &decide(&[]), None);
        assert_eq!(r.arm, None);
        assert_eq!(
            r.text,
            "Under the declared objective (capacity), the data supports no single configuration: capacity per GPU under the SLOs: no capacity search resolved: no topology is ranked at capacity; latency: median TPOT: no headline comparison."
        );
    }
}
