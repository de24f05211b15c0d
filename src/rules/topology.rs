//! Rule 5, the topology rule: arms that differ in topology alone (TP1, TP2, DP2), their
//! throughput per GPU and scaling efficiency against the matched single-GPU arm, the winner
//! only where its lead across runs is established, and what the comparison could and could
//! not measure of communication overhead. Returns the same [`Verdict`] as the other
//! advance rules.

use std::collections::BTreeSet;

use serde::Serialize;

use super::advance::Verdict;
use super::compare::{Comparison, ThroughputEstimate};
use super::control::Control;
use super::input::{Artifact, Gpus, TOPOLOGY_KEY, Topology, Window, num};
use super::stage::StageComparison;
use crate::stats::{Moments, welch_interval};

/// One arm's row of a topology comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TopologyRow {
    pub arm: String,
    pub topology: Option<Topology>,
    /// GPUs the arm uses (recorded, or derived from its topology).
    pub gpus: Option<Gpus>,
    /// Requests in flight at once (concurrency per replica × replicas).
    pub in_flight: u64,
    /// Runs behind the throughput.
    pub runs: usize,
    /// Aggregate output throughput (the mean across runs with repeats), tokens per second.
    pub output_tps: Option<f64>,
    /// Its 95% interval across runs, with repeats.
    pub output_tps_ci: Option<(f64, f64)>,
    /// Aggregate throughput / GPUs, tokens per second per GPU.
    pub output_tps_per_gpu: Option<f64>,
    /// throughput / (GPUs × the matched single-GPU arm's throughput): 1 is perfect scaling.
    pub scaling_efficiency: Option<f64>,
    /// The single-GPU arm the efficiency is against.
    pub against: Option<String>,
    pub verdict: Verdict,
}

/// A stage's comparison of arms that differ in topology alone.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TopologyAssessment {
    /// The stage comparison, `stage: workload`.
    pub name: String,
    pub rows: Vec<TopologyRow>,
    /// The arm with the highest aggregate throughput, declared only when every row shows
    /// throughput per GPU and, for multi-GPU arms, the scaling efficiency.
    pub winner: Option<String>,
    pub reason: String,
    /// What the comparison could and could not measure of communication overhead, and the
    /// loads the arms ran at.
    pub overhead: Vec<String>,
}

/// Rule 5 over one stage comparison: the arms whose control differs from them in the
/// `topology` key alone, and those controls. Each needs a parseable `topology` agreeing with
/// its recorded replica count (`TPn` → 1, `DPn` → n) and a throughput; a multi-GPU arm, the
/// matched single-GPU arm to compute its per-GPU scaling efficiency against. `None` when no
/// pair of the comparison differs in topology alone.
pub fn topology(stage: &StageComparison, artifacts: &[Artifact]) -> Option<TopologyAssessment> {
    let Ok(c) = &stage.result else { return None };
    let mut arms: Vec<&str> = Vec::new();
    for v in &c.controls {
        if let Control::OneVariable { key, .. } = &v.control
            && key == TOPOLOGY_KEY
        {
            for arm in [v.reference.as_str(), v.arm.as_str()] {
                if !arms.contains(&arm) {
                    arms.push(arm);
                }
            }
        }
    }
    if arms.is_empty() {
        return None;
    }
    arms.sort_by_key(|a| c.arms.iter().position(|x| x == a));
    let runs_of = |arm: &str| -> Vec<&Artifact> {
        artifacts
            .iter()
            .filter(|a| a.facts.arm == arm && a.facts.fingerprint == c.fingerprint)
            .collect()
    };
    let rows: Vec<TopologyRow> = arms
        .iter()
        .map(|arm| {
            let runs = runs_of(arm);
            let t = c.throughput(arm, Window::All);
            let estimate = t.map(|t| &t.estimate);
            let mut row = TopologyRow {
                arm: (*arm).to_owned(),
                topology: None,
                gpus: t.and_then(|t| t.gpus),
                in_flight: t.map_or(0, |t| t.in_flight),
                runs: runs.len(),
                output_tps: estimate.and_then(|e| e.value()),
                output_tps_ci: estimate.and_then(|e| e.interval()).map(|i| (i.low, i.high)),
                output_tps_per_gpu: t.and_then(|t| t.per_gpu),
                scaling_efficiency: t
                    .and_then(|t| t.scaling_efficiency.as_ref())
                    .map(|e| e.value),
                against: t
                    .and_then(|t| t.scaling_efficiency.as_ref())
                    .map(|e| e.against.clone()),
                verdict: Verdict::Pass,
            };
            let topology = match runs.first().and_then(|r| r.facts.topology()) {
                None => {
                    row.verdict = Verdict::Fail("no `topology` key in the arm's config".to_owned());
                    return row;
                }
                Some(Err(reason)) => {
                    row.verdict = Verdict::Fail(reason);
                    return row;
                }
                Some(Ok(topology)) => topology,
            };
            row.topology = Some(topology);
            let disagreeing: Vec<String> = runs
                .iter()
                .filter(|r| r.facts.replica_count != topology.replicas())
                .map(|r| {
                    format!(
                        "config says {topology} ({} replica(s)) but run {} recorded {} replica(s)",
                        topology.replicas(),
                        r.facts.run_id,
                        r.facts.replica_count
                    )
                })
                .collect();
            let multi_gpu = row.gpus.is_some_and(|g| g.count > 1);
            row.verdict = if !disagreeing.is_empty() {
                Verdict::Fail(disagreeing.join("; "))
            } else if row.output_tps.is_none() {
                Verdict::NotRun("no aggregate throughput recorded".to_owned())
            } else if row.gpus.is_none() {
                Verdict::NotRun("GPUs not known (no `gpus` key, no TPn/DPn topology)".to_owned())
            } else if multi_gpu && row.scaling_efficiency.is_none() {
                Verdict::NotRun(
                    "no matched single-GPU arm (one key apart) to compute scaling efficiency against"
                        .to_owned(),
                )
            } else {
                Verdict::Pass
            };
            row
        })
        .collect();
    let complete = rows.iter().all(|r| r.verdict == Verdict::Pass);
    let Lead {
        winner,
        reason,
        unestablished,
    } = if complete {
        lead(c, &rows)
    } else {
        Lead {
            winner: None,
            reason: "no topology winner: throughput per GPU and scaling efficiency are not \
                     known for every arm"
                .to_owned(),
            unestablished: None,
        }
    };
    let mut rows = rows;
    if complete {
        match &winner {
            // Without an established lead the rule has no winner to account for.
            None => {
                let why = unestablished.unwrap_or_else(|| reason.clone());
                for row in &mut rows {
                    row.verdict = Verdict::NotRun(format!(
                        "no topology winner established in {}: {why}",
                        stage.name()
                    ));
                }
            }
            // The winner accounts for throughput; its communication overhead is a quantity
            // anvil does not record (a tensor-parallel arm's is inside its per-GPU
            // shortfall, mixed with sharding; independent replicas' is the spreading of
            // requests and the shared start and end): the rule's second half is not testable.
            Some(arm) => {
                if let Some(row) = rows.iter_mut().find(|r| &r.arm == arm) {
                    let why = match row.topology {
                        Some(Topology::Tp(n)) if n > 1 => {
                            "its tensor-parallel communication overhead is not measured \
                             separately (anvil records no collective-communication time; its \
                             per-GPU shortfall mixes communication and sharding)"
                        }
                        _ => {
                            "its communication overhead is not measured (anvil records no \
                             collective-communication or request-spreading time; its per-GPU \
                             figures mix them with the run's shared start and end)"
                        }
                    };
                    row.verdict =
                        Verdict::NotTestable(format!("{arm} wins on throughput but {why}"));
                }
            }
        }
    }
    Some(TopologyAssessment {
        name: stage.name(),
        overhead: overhead(&rows),
        rows,
        winner,
        reason,
    })
}

/// The outcome of ranking a topology comparison's arms by throughput.
struct Lead {
    /// The arm whose lead is established.
    winner: Option<String>,
    /// The ranking with its figures.
    reason: String,
    /// Why the leader's lead is not established, in a clause (for each arm's verdict).
    unestablished: Option<String>,
}

/// The arm with the highest aggregate throughput, declared the winner only when its lead
/// over the runner-up is established: Welch's 95% interval across runs (both arms with
/// repeats) excludes zero. Single runs, or an interval including zero, name no winner; the
/// reason gives the figures either way.
fn lead(c: &Comparison, rows: &[TopologyRow]) -> Lead {
    let mut ranked: Vec<(&TopologyRow, f64)> = rows
        .iter()
        .filter_map(|r| r.output_tps.map(|tps| (r, tps)))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    let Some((best, tps)) = ranked.first() else {
        return Lead {
            winner: None,
            reason: "no arm recorded a throughput".to_owned(),
            unestablished: None,
        };
    };
    let shown = |r: &TopologyRow, tps: f64| match r.output_tps_ci {
        Some((low, high)) => format!(
            "{} [{}, {}] tok/s across {} runs",
            num(tps.round()),
            num(low.round()),
            num(high.round()),
            r.runs
        ),
        None => format!("{} tok/s, a single run", num(tps.round())),
    };
    let mut reason = format!(
        "{} has the highest aggregate throughput, {}",
        best.arm,
        shown(best, *tps)
    );
    let mut established = false;
    let mut unestablished = None;
    if let Some((second, second_tps)) = ranked.get(1) {
        let moments = |arm: &str| match c.throughput(arm, Window::All).map(|t| &t.estimate) {
            Some(ThroughputEstimate::Repeats { runs, mean, sd, .. }) => {
                sd.and_then(|sd| Moments::new(*runs as u64, *mean, sd).ok())
            }
            _ => None,
        };
        let lead = tps - second_tps;
        match moments(&second.arm)
            .zip(moments(&best.arm))
            .and_then(|(b, a)| welch_interval(b, a))
        {
            Some(i) => {
                established = i.low > 0.0;
                if !established {
                    unestablished = Some(format!(
                        "{} leads {} by +{} [{}, {}] tok/s across runs: the interval \
                         includes zero",
                        best.arm,
                        second.arm,
                        num(lead.round()),
                        num(i.low.round()),
                        num(i.high.round())
                    ));
                }
                reason.push_str(&format!(
                    "; ahead of {} by +{} [{}, {}] tok/s (Welch, across runs){}",
                    second.arm,
                    num(lead.round()),
                    num(i.low.round()),
                    num(i.high.round()),
                    if established {
                        ""
                    } else {
                        ": the interval includes zero, the lead is not established"
                    }
                ));
            }
            None => {
                unestablished = Some(format!(
                    "{} leads {} by +{} tok/s in single runs, with no run-to-run \
                     uncertainty; record ≥ 3 repeats of each arm",
                    best.arm,
                    second.arm,
                    num(lead.round())
                ));
                reason.push_str(&format!(
                    "; ahead of {} by +{} tok/s with no run-to-run uncertainty (single runs: \
                     the lead is not established; record ≥ 3 repeats of each arm)",
                    second.arm,
                    num(lead.round())
                ));
            }
        }
    }
    if let (Some(gpu), Some(eff)) = (best.output_tps_per_gpu, best.scaling_efficiency) {
        reason.push_str(&format!(
            "; {} tok/s per GPU, scaling efficiency {}% of {} per GPU",
            num(gpu.round()),
            num((eff * 1000.0).round() / 10.0),
            best.against.as_deref().unwrap_or("the single-GPU arm")
        ));
    }
    if established {
        Lead {
            winner: Some(best.arm.clone()),
            reason,
            unestablished: None,
        }
    } else {
        Lead {
            winner: None,
            reason: format!("no topology winner established: {reason}"),
            unestablished,
        }
    }
}

/// What the topology comparison measured of communication overhead, what it could not, and
/// the loads the arms ran at.
fn overhead(rows: &[TopologyRow]) -> Vec<String> {
    let mut out = Vec::new();
    for r in rows {
        let (Some(topology), Some(eff), Some(against)) =
            (r.topology, r.scaling_efficiency, r.against.as_deref())
        else {
            continue;
        };
        let percent = |v: f64| num((v * 1000.0).round() / 10.0);
        out.push(match topology {
            Topology::Tp(_) => format!(
                "{}: per-GPU throughput {}% of {against}'s; the {}% shortfall is tensor-parallel \
                 communication and sharding together: anvil records no collective-communication \
                 time, so communication alone is not measured",
                r.arm,
                percent(eff),
                percent(1.0 - eff)
            ),
            Topology::Dp(_) => format!(
                "{}: independent replicas, no inter-GPU communication to measure; per-GPU \
                 throughput {}% of {against}'s (the shortfall is load balance across replicas \
                 and the run's shared start and end, not communication)",
                r.arm,
                percent(eff)
            ),
        });
    }
    // Offered load in total and per GPU (in flight ÷ GPUs), each as a share of a GPU's
    // requests: a lead at a higher load, or at a different load per GPU, is partly a load
    // difference.
    let per_gpu = |r: &TopologyRow| r.gpus.map(|g| r.in_flight as f64 / f64::from(g.count));
    let loads: BTreeSet<u64> = rows.iter().map(|r| r.in_flight).collect();
    let per_gpu_loads: BTreeSet<u64> = rows
        .iter()
        .filter_map(|r| per_gpu(r).map(f64::to_bits))
        .collect();
    if loads.len() > 1 || per_gpu_loads.len() > 1 {
        out.push(format!(
            "in flight: {}: the arms ran at different offered loads (concurrency is per \
             replica), in total or per GPU, so a throughput lead is partly a load difference",
            rows.iter()
                .map(|r| format!(
                    "{} {} ({} per GPU)",
                    r.arm,
                    r.in_flight,
                    per_gpu(r).map_or_else(
                        || "n/a".to_owned(),
                        |v| if v.fract() == 0.0 {
                            format!("{v:.0}")
                        } else {
                            num(v)
                        }
                    )
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{artifact, plan, selection};
    use super::*;

    fn topo(run: &str, arm: &str, topology: &str, replicas: u32, tps: f64) -> Artifact {
        let mut a = artifact(run, arm, &[("topology", topology)], tps);
        a.facts.replica_count = replicas;
        a
    }

    /// The topology assessment of the `matched topology` stage over `artifacts`.
    fn assess(artifacts: &[Artifact]) -> Option<TopologyAssessment> {
        let stages = crate::rules::stage::stage_comparisons(
            artifacts,
            &selection(),
            &plan(),
            Some("matched topology"),
        );
        topology(stages.first()?, artifacts)
    }

    #[test]
    fn topology_efficiency_by_hand_and_no_winner_from_single_runs() {
        // TP1 1000 tok/s on 1 GPU. TP2 1500 tok/s on 2 GPUs: 750 per GPU,
        // 1500 / (2 × 1000) = 0.75. DP2 1900 tok/s on 2 GPUs: 950 per GPU,
        // 1900 / (2 × 1000) = 0.95. Highest throughput: DP2, but single runs cannot
        // establish its lead.
        let artifacts = [
            topo("r1", "TP1", "TP1", 1, 1000.0),
            topo("r2", "TP2", "TP2", 1, 1500.0),
            topo("r3", "two independent TP1 replicas", "DP2", 2, 1900.0),
        ];
        let assessment = assess(&artifacts).unwrap();
        let figures: Vec<_> = assessment
            .rows
            .iter()
            .map(|r| {
                (
                    r.gpus.map(|g| g.count),
                    r.in_flight,
                    r.output_tps_per_gpu,
                    r.scaling_efficiency,
                )
            })
            .collect();
        assert_eq!(
            figures,
            [
                (Some(1), 8, Some(1000.0), None),
                (Some(2), 8, Some(750.0), Some(0.75)),
                (Some(2), 16, Some(950.0), Some(0.95)),
            ]
        );
        assert_eq!(assessment.winner, None);
        assert_eq!(
            assessment.reason,
            "no topology winner established: two independent TP1 replicas has the highest \
             aggregate throughput, 1900 tok/s, a single run; ahead of TP2 by +400 tok/s with no \
             run-to-run uncertainty (single runs: the lead is not established; record ≥ 3 \
             repeats of each arm); 950 tok/s per GPU, scaling efficiency 95% of TP1 per GPU"
        );
        assert_eq!(
            assessment.overhead,
            [
                "TP2: per-GPU throughput 75% of TP1's; the 25% shortfall is tensor-parallel \
                 communication and sharding together: anvil records no collective-communication \
                 time, so communication alone is not measured",
                "two independent TP1 replicas: independent replicas, no inter-GPU communication \
                 to measure; per-GPU throughput 95% of TP1's (the shortfall is load balance \
                 across replicas and the run's shared start and end, not communication)",
                "in flight: TP1 8 (8 per GPU), TP2 8 (4 per GPU), two independent TP1 replicas \
                 16 (8 per GPU): the arms ran at different offered loads (concurrency is per \
                 replica), in total or per GPU, so a throughput lead is partly a load difference",
            ]
        );
        // No winner to account for: the rule is not run for any arm.
        let why = "no topology winner established in matched topology: headline, 4096 tokens, \
                   C8 per replica: two independent TP1 replicas leads TP2 by +400 tok/s in single \
                   runs, with no run-to-run uncertainty; record ≥ 3 repeats of each arm";
        for row in &assessment.rows {
            assert_eq!(row.verdict, Verdict::NotRun(why.to_owned()));
        }
    }

    /// Three runs of each arm, throughputs spread by ±`spread` around `tps`.
    fn repeated(arm: &str, topology: &str, replicas: u32, tps: f64, spread: f64) -> Vec<Artifact> {
        [-spread, 0.0, spread]
            .into_iter()
            .enumerate()
            .map(|(k, d)| topo(&format!("{topology}-{k}"), arm, topology, replicas, tps + d))
            .collect()
    }

    /// TP1, TP2 and DP2 at the given throughputs, three runs each spread by ±`spread`.
    fn three_topologies(tps: [f64; 3], spread: f64) -> Vec<Artifact> {
        let mut artifacts = repeated("TP1", "TP1", 1, tps[0], spread);
        artifacts.extend(repeated("TP2", "TP2", 1, tps[1], spread));
        let dp2 = "two independent TP1 replicas";
        artifacts.extend(repeated(dp2, "DP2", 2, tps[2], spread));
        artifacts
    }

    #[test]
    fn a_winner_needs_a_lead_whose_interval_across_runs_excludes_zero() {
        // Means 1000, 1500, 1900, sd 10 over three runs: DP2 − TP2 = +400, Welch df 4,
        // half-width t(0.975, 4) × sqrt(2 × 100 / 3) = 2.776 × 8.165 = 22.7.
        let assessment = assess(&three_topologies([1000.0, 1500.0, 1900.0], 10.0)).unwrap();
        assert_eq!(
            assessment.winner.as_deref(),
            Some("two independent TP1 replicas")
        );
        assert!(
            assessment
                .reason
                .contains("ahead of TP2 by +400 [377, 423] tok/s (Welch, across runs)"),
            "{}",
            assessment.reason
        );
        // The winner's communication overhead is not recorded: not testable, never a pass;
        // the other arms pass.
        for row in &assessment.rows {
            if row.arm == "two independent TP1 replicas" {
                assert!(
                    matches!(&row.verdict, Verdict::NotTestable(reason)
                        if reason.contains("its communication overhead is not measured")),
                    "{:?}",
                    row.verdict
                );
            } else {
                assert_eq!(row.verdict, Verdict::Pass, "{}", row.arm);
            }
        }

        // Runs spread by ±300: the same means, an interval including zero, no winner.
        let assessment = assess(&three_topologies([1000.0, 1500.0, 1900.0], 300.0)).unwrap();
        assert_eq!(assessment.winner, None);
        assert!(
            assessment
                .reason
                .contains("the interval includes zero, the lead is not established"),
            "{}",
            assessment.reason
        );

        // A tensor-parallel winner: its communication overhead is not measured on its own.
        let artifacts = three_topologies([1000.0, 1900.0, 1500.0], 10.0);
        let assessment = assess(&artifacts).unwrap();
        assert_eq!(assessment.winner.as_deref(), Some("TP2"));
        let tp2 = assessment.rows.iter().find(|r| r.arm == "TP2").unwrap();
        assert!(
            matches!(&tp2.verdict, Verdict::NotTestable(reason)
                if reason.contains("communication overhead is not measured separately")),
            "{:?}",
            tp2.verdict
        );
    }

    #[test]
    fn replica_count_disagreeing_with_dp_fails_and_no_winner_is_declared() {
        let artifacts = [
            topo("r1", "TP1", "TP1", 1, 1000.0),
            topo("r3", "two independent TP1 replicas", "DP2", 1, 1900.0),
        ];
        let assessment = assess(&artifacts).unwrap();
        assert_eq!(
            assessment.rows[1].verdict,
            Verdict::Fail(
                "config says DP2 (2 replica(s)) but run r3 recorded 1 replica(s)".to_owned()
            )
        );
        assert_eq!(assessment.winner, None);
    }

    #[test]
    fn without_a_single_gpu_arm_efficiency_is_not_run() {
        let artifacts = [
            topo("r2", "TP2", "TP2", 1, 1500.0),
            topo("r3", "two independent TP1 replicas", "DP2", 2, 1900.0),
        ];
        let assessment = assess(&artifacts).unwrap();
        assert_eq!(
            assessment.rows[0].verdict,
            Verdict::NotRun(
                "no matched single-GPU arm (one key apart) to compute scaling efficiency against"
                    .to_owned()
            )
        );
        assert_eq!(assessment.winner, None);
        // Arms that do not differ in topology alone are no topology comparison.
        let same = [
            topo("r2", "TP2", "TP2", 1, 1500.0),
            topo("r4", "TP2b", "TP2", 1, 1400.0),
        ];
        assert_eq!(assess(&same), None);
    }
}
