//! Topology decided at capacity: the arms a capacity search resolved, ranked by capacity
//! per GPU (the largest requests in flight per GPU that met the SLOs at the target
//! attainment: users per GPU under the SLOs), goodput per GPU at that load the tie-breaker.
//!
//! A search that did not resolve ranks nowhere and says so. An arm serves more users per GPU
//! than another only where their brackets do not overlap: it met the SLOs at a load per GPU
//! at which the other was shown to miss them. Where they overlap, the leader leads only
//! where goodput per GPU there differs by Welch's 95% interval across the passing load's
//! runs; else neither leads. Unlike the headline's
//! objectives, the arms here are compared each at its own load: that is the point.

use serde::Serialize;

use crate::artifact::capacity::{CapacityResult, CapacityStatus, Judged, PerGpu};
use crate::stats::{Interval, Sample, welch_interval};

/// One arm's place in the ranking.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CapacityRow {
    pub arm: String,
    pub gpus: Option<u32>,
    pub replicas: Option<u32>,
    pub status: CapacityStatus,
    /// Requests in flight per replica at capacity.
    pub capacity: Option<f64>,
    pub capacity_per_gpu: Option<f64>,
    /// The passing load's attainment with its exact interval.
    pub passing: Option<(f64, f64, f64)>,
    /// The failing load (per replica) and its attainment with its exact interval.
    pub failing: Option<(f64, f64, f64, f64)>,
    /// Goodput per GPU at capacity: mean and its interval across runs.
    pub goodput_per_gpu: Option<PerGpu>,
    /// The search's own sentence.
    pub verdict: String,
    /// The failing load as requests in flight per GPU, when there is one.
    pub failing_per_gpu: Option<f64>,
    /// What attainment counted: requests, or a session workload's sessions.
    pub judged: Judged,
    /// Goodput per GPU of each passing run, for the tie-breaker.
    #[serde(skip)]
    runs: Vec<f64>,
}

impl CapacityRow {
    /// Whether this arm is shown to serve more users per GPU than `other`: it met the SLOs
    /// at a load per GPU at which `other` was shown to miss them (their brackets do not
    /// overlap).
    pub fn beats(&self, other: &CapacityRow) -> bool {
        match (self.capacity_per_gpu, other.failing_per_gpu) {
            (Some(mine), Some(theirs)) => mine >= theirs,
            _ => false,
        }
    }
}

/// The ranking and its one-sentence verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CapacityDecision {
    /// Resolved arms with a capacity first, best first; then the rest in file order.
    pub rows: Vec<CapacityRow>,
    /// The arm with the most users per GPU under the SLOs, when the ranking names one.
    pub winner: Option<String>,
    pub verdict: String,
}

fn row(r: &CapacityResult) -> CapacityRow {
    let passing = r
        .bracket
        .as_ref()
        .and_then(|b| b.passing.as_ref())
        .filter(|_| r.capacity.is_some());
    let runs: Vec<f64> = match (passing, r.gpus.filter(|g| *g > 0)) {
        (Some(p), Some(g)) => p
            .runs
            .iter()
            .filter_map(|o| o.goodput_tps.map(|t| t / f64::from(g)))
            .collect(),
        _ => Vec::new(),
    };
    CapacityRow {
        arm: r.arm.clone(),
        gpus: r.gpus,
        replicas: r.replicas,
        status: r.status,
        capacity: r.capacity,
        capacity_per_gpu: r.capacity_per_gpu,
        passing: passing.map(|p| (p.share, p.low, p.high)),
        failing: r
            .bracket
            .as_ref()
            .and_then(|b| b.failing.as_ref())
            .map(|f| (f.load, f.share, f.low, f.high)),
        goodput_per_gpu: r.goodput_per_gpu.clone(),
        verdict: r.verdict.clone(),
        failing_per_gpu: match (
            r.bracket.as_ref().and_then(|b| b.failing.as_ref()),
            r.replicas,
            r.gpus.filter(|g| *g > 0),
        ) {
            (Some(f), Some(rep), Some(g)) => Some(f.load * f64::from(rep) / f64::from(g)),
            _ => None,
        },
        judged: r.judged,
        runs,
    }
}

/// Welch's interval of a − b over the runs' goodput per GPU, when both have two or more.
fn goodput_lead(a: &CapacityRow, b: &CapacityRow) -> Option<Interval> {
    let m = |v: &[f64]| Sample::new(v.to_vec()).ok().and_then(|s| s.moments());
    welch_interval(m(&b.runs)?, m(&a.runs)?)
}

/// Rank `results` (one per arm searched) by capacity per GPU, goodput per GPU the
/// tie-breaker.
pub fn decide(results: &[CapacityResult]) -> CapacityDecision {
    let mut ranked: Vec<CapacityRow> = Vec::new();
    let mut rest: Vec<CapacityRow> = Vec::new();
    for r in results {
        let row = row(r);
        if row.status == CapacityStatus::Resolved && row.capacity_per_gpu.is_some() {
            ranked.push(row);
        } else {
            rest.push(row);
        }
    }
    let goodput = |r: &CapacityRow| {
        r.goodput_per_gpu
            .as_ref()
            .map_or(f64::NEG_INFINITY, |g| g.mean)
    };
    // Sessions in flight and requests in flight are different loads: grouped by unit, and
    // ranked only when one unit is all there is.
    ranked.sort_by(|a, b| {
        (a.judged as u8)
            .cmp(&(b.judged as u8))
            .then(
                b.capacity_per_gpu
                    .unwrap_or(0.0)
                    .total_cmp(&a.capacity_per_gpu.unwrap_or(0.0)),
            )
            .then(goodput(b).total_cmp(&goodput(a)))
    });
    let mixed = ranked.iter().any(|r| r.judged != ranked[0].judged);
    let unresolved: Vec<String> = rest
        .iter()
        .map(|r| format!("{} ({})", r.arm, r.status.as_str()))
        .collect();
    let caveat = if unresolved.is_empty() {
        String::new()
    } else {
        format!(
            "; not ranked: {} (record more requests per probe or more repeats)",
            unresolved.join(", ")
        )
    };
    let describe = |r: &CapacityRow| {
        let goodput = match &r.goodput_per_gpu {
            Some(PerGpu {
                mean,
                low: Some(low),
                high: Some(high),
                runs,
            }) => format!(
                ", goodput {} [{}, {}] tok/s per GPU over {runs} runs",
                crate::figure::sig3(*mean),
                crate::figure::sig3(*low),
                crate::figure::sig3(*high)
            ),
            Some(g) => format!(
                ", goodput {} tok/s per GPU (one run)",
                crate::figure::sig3(g.mean)
            ),
            None => String::new(),
        };
        format!(
            "{} {}{} in flight per GPU{goodput}",
            r.arm,
            crate::figure::count_or_sig3(r.capacity_per_gpu.unwrap_or(0.0)),
            if r.judged == Judged::Sessions {
                " sessions"
            } else {
                ""
            }
        )
    };
    let (winner, verdict) = match ranked.as_slice() {
        _ if mixed => (
            None,
            format!(
                "no ranking: the searches judge different units ({}); sessions in flight and \
                 requests in flight are different loads, so search every arm over one class{caveat}",
                ranked
                    .iter()
                    .map(|r| format!("{}: {}", r.judged.as_str(), describe(r)))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        ),
        [] => (
            None,
            format!("no capacity search resolved: no topology is ranked at capacity{caveat}"),
        ),
        [only] => (
            None,
            format!(
                "only {} has a resolved capacity: nothing to rank it against{caveat}",
                describe(only)
            ),
        ),
        [first, second, ..] => {
            // More users per GPU only where the brackets do not overlap: the leader met the
            // SLOs at a load per GPU at which every other arm was shown to miss them.
            let more = ranked[1..].iter().all(|other| first.beats(other));
            let lead = goodput_lead(first, second);
            let by_goodput = !more && lead.is_some_and(|i| i.low > 0.0);
            if more || by_goodput {
                let basis = if more {
                    "more users per GPU under the SLOs".to_owned()
                } else {
                    let i = lead.unwrap_or(Interval {
                        estimate: 0.0,
                        low: 0.0,
                        high: 0.0,
                        df: 0.0,
                    });
                    format!(
                        "as many users per GPU, more goodput per GPU there (+{} [+{}, +{}] tok/s per GPU, Welch across runs)",
                        crate::figure::sig3(i.estimate),
                        crate::figure::sig3(i.low),
                        crate::figure::sig3(i.high)
                    )
                };
                (
                    Some(first.arm.clone()),
                    format!(
                        "{} leads at capacity: {basis}: {} against {}{caveat}",
                        first.arm,
                        describe(first),
                        ranked[1..]
                            .iter()
                            .map(describe)
                            .collect::<Vec<_>>()
                            .join("; ")
                    ),
                )
            } else {
                (
                    None,
                    format!(
                        "no lead at capacity: {} and {} (their capacity brackets overlap, and goodput per GPU there is within its interval){caveat}",
                        describe(first),
                        describe(second)
                    ),
                )
            }
        }
    };
    ranked.extend(rest);
    CapacityDecision {
        rows: ranked,
        winner,
        verdict,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A search of `arm` on `gpus` GPUs and one replica, resolved at `per_gpu` in flight per
    /// GPU (or not), its passing runs' aggregate goodput `goodput`.
    fn search(arm: &str, gpus: u32, per_gpu: Option<f64>, goodput: &[f64]) -> CapacityResult {
        crate::rules::fixtures::capacity_search(
            arm,
            gpus,
            1,
            per_gpu.map(|p| p * f64::from(gpus)),
            goodput,
        )
    }

    #[test]
    fn more_users_per_gpu_lead_and_an_unresolved_search_ranks_nowhere() {
        let d = decide(&[
            search("TP1", 1, Some(18.0), &[390.0, 400.0, 410.0]),
            search("TP2", 2, Some(10.0), &[700.0, 710.0, 720.0]),
            search("DP2", 2, None, &[780.0, 800.0, 820.0]),
        ]);
        assert_eq!(d.winner.as_deref(), Some("TP1"));
        let order: Vec<&str> = d.rows.iter().map(|r| r.arm.as_str()).collect();
        assert_eq!(order, ["TP1", "TP2", "DP2"]);
        assert!(d.verdict.starts_with("TP1 leads at capacity: more users per GPU under the SLOs: TP1 18 in flight per GPU, goodput 400 [399, 401] tok/s per GPU over 3 runs against TP2 10 in flight per GPU"), "{}", d.verdict);
        assert!(d.verdict.ends_with("not ranked: DP2 (not resolved at this sample size) (record more requests per probe or more repeats)"), "{}", d.verdict);
    }

    #[test]
    fn sessions_in_flight_and_requests_in_flight_are_not_ranked_together() {
        let mut sessions = search("DP2", 2, Some(30.0), &[780.0, 800.0, 820.0]);
        sessions.judged = Judged::Sessions;
        for results in [
            vec![
                search("TP1", 1, Some(18.0), &[390.0, 400.0, 410.0]),
                sessions.clone(),
                search("TP2", 2, Some(10.0), &[700.0, 710.0, 720.0]),
            ],
            vec![
                sessions.clone(),
                search("TP2", 2, Some(10.0), &[700.0, 710.0, 720.0]),
                search("TP1", 1, Some(18.0), &[390.0, 400.0, 410.0]),
            ],
        ] {
            let d = decide(&results);
            assert_eq!(d.winner, None, "{}", d.verdict);
            let order: Vec<&str> = d.rows.iter().map(|r| r.arm.as_str()).collect();
            assert_eq!(order, ["TP1", "TP2", "DP2"]);
            assert!(
                d.verdict.starts_with(
                    "no ranking: the searches judge different units (requests: TP1 18 in flight per GPU"
                ),
                "{}",
                d.verdict
            );
            assert!(
                d.verdict
                    .contains("sessions: DP2 30 sessions in flight per GPU"),
                "{}",
                d.verdict
            );
        }
    }

    /// 19 against 18 in flight per GPU is no lead where the 18's arm was never shown to miss
    /// below 22: the brackets overlap, and goodput per GPU decides or nothing does.
    #[test]
    fn overlapping_brackets_are_no_lead_on_capacity() {
        let d = decide(&[
            search("DP2", 2, Some(19.0), &[770.0, 760.0, 750.0]),
            search("TP1", 1, Some(18.0), &[370.0, 380.0, 390.0]),
        ]);
        assert_eq!(d.winner, None, "{}", d.verdict);
        assert!(
            d.verdict.starts_with("no lead at capacity"),
            "{}",
            d.verdict
        );
    }

    #[test]
    fn equal_capacity_is_decided_by_goodput_per_gpu_or_is_a_tie() {
        let d = decide(&[
            search("TP1", 1, Some(8.0), &[390.0, 400.0, 410.0]),
            search("DP2", 2, Some(8.0), &[880.0, 900.0, 920.0]),
        ]);
        assert_eq!(d.winner.as_deref(), Some("DP2"), "{}", d.verdict);
        assert!(
            d.verdict
                .contains("as many users per GPU, more goodput per GPU there (+50"),
            "{}",
            d.verdict
        );
        let d = decide(&[
            search("TP1", 1, Some(8.0), &[390.0, 400.0, 410.0]),
            search("DP2", 2, Some(8.0), &[780.0, 800.0, 830.0]),
        ]);
        assert_eq!(d.winner, None);
        assert!(
            d.verdict.starts_with("no lead at capacity"),
            "{}",
            d.verdict
        );
        let d = decide(&[search("TP1", 1, None, &[400.0])]);
        assert_eq!(d.winner, None);
        assert!(
            d.verdict.starts_with("no capacity search resolved"),
            "{}",
            d.verdict
        );
    }
}
