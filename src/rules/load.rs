//! Equal load, or no verdict: the load each arm of a comparison was offered (requests in
//! flight per deployment, per replica and per GPU; requests per replica; the first wave's
//! share of the sample), and whether two arms' loads are equal on the basis a verdict
//! depends on.
//!
//! - aggregate throughput and goodput: equal requests in flight on equal GPUs, and equal
//!   requests per replica;
//! - per-GPU figures: equal requests in flight per GPU, and equal requests per replica;
//! - latency and attainment: equal requests in flight per replica, and equal requests per
//!   replica;
//! - the cold-start burst: first waves of equal size.
//!
//! Matched arms share a workload (concurrency per replica and total requests are in its
//! fingerprint), so their loads differ exactly where their replicas or GPUs do: a DP2 arm
//! at the headline's "C8 per replica, 100 total" holds 16 in flight with 50 requests per
//! replica against a TP1 arm's 8 and 100, a TP2 arm 8 in flight on 2 GPUs (4 per GPU).
//! Where the load a verdict depends on differs, the verdict is "load differs" with both
//! loads: never resolved and never a claim's support.

use serde::Serialize;

use super::input::{Artifact, Gpus};
use crate::figure::count_or_sig3 as short;

/// The load one arm was offered, from its first run (its repeats share the workload).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmLoad {
    pub arm: String,
    /// Requests in flight at once, all replicas together (closed loop).
    pub in_flight: u64,
    pub replicas: u32,
    /// The GPUs it uses, when known.
    pub gpus: Option<Gpus>,
    /// The workload's requests, all replicas together.
    pub requests: u64,
}

/// What a verdict's load must hold equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum LoadBasis {
    /// Aggregate throughput or goodput: in flight and GPUs, and requests per replica.
    Aggregate,
    /// A per-GPU figure: in flight per GPU, and requests per replica.
    PerGpu,
    /// Latency or attainment: in flight per replica, and requests per replica.
    PerReplica,
    /// The cold-start burst: the first wave's size.
    Burst,
}

impl ArmLoad {
    /// The load of `arm` from its runs (`None` without a run).
    pub fn of(arm: &str, runs: &[&Artifact]) -> Option<Self> {
        let first = runs.first()?;
        Some(Self {
            arm: arm.to_owned(),
            in_flight: first.facts.in_flight(),
            replicas: first.facts.replica_count.max(1),
            gpus: first.facts.gpus(),
            requests: first.facts.workload.total_requests,
        })
    }

    /// Requests in flight per replica.
    pub fn per_replica(&self) -> f64 {
        self.in_flight as f64 / f64::from(self.replicas)
    }

    /// Requests in flight per GPU, when the GPUs are known.
    pub fn per_gpu(&self) -> Option<f64> {
        self.gpus
            .filter(|g| g.count > 0)
            .map(|g| self.in_flight as f64 / f64::from(g.count))
    }

    /// Requests per replica.
    pub fn requests_per_replica(&self) -> f64 {
        self.requests as f64 / f64::from(self.replicas)
    }

    /// The first wave's share of the sample: in flight ÷ requests (closed loop).
    pub fn first_wave_share(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.in_flight as f64 / self.requests as f64
        }
    }

    /// `16 in flight (8 per replica × 2 replicas, 8 per GPU on 2 GPUs), 50 requests per
    /// replica, first wave 16% of the sample`.
    pub fn describe(&self) -> String {
        let gpus = match (self.gpus, self.per_gpu()) {
            (Some(g), Some(per)) => format!(
                ", {} per GPU on {} GPU{}",
                short(per),
                g.count,
                if g.count == 1 { "" } else { "s" }
            ),
            _ => ", GPUs unknown".to_owned(),
        };
        format!(
            "{} in flight ({} per replica × {} replica{}{gpus}), {} requests per replica, first wave {:.0}% of the sample",
            self.in_flight,
            short(self.per_replica()),
            self.replicas,
            if self.replicas == 1 { "" } else { "s" },
            short(self.requests_per_replica()),
            self.first_wave_share() * 100.0
        )
    }

    /// `16 in flight, 8 per GPU, 50 requests per replica`: the load in a table cell.
    pub fn short(&self) -> String {
        let per_gpu = self
            .per_gpu()
            .map(|g| format!(", {} per GPU", short(g)))
            .unwrap_or_default();
        format!(
            "{} in flight{per_gpu}, {} requests per replica",
            self.in_flight,
            short(self.requests_per_replica())
        )
    }

    /// Why `self` and `other` were not offered the same load on `basis`, naming both loads;
    /// `None` when it is equal.
    pub fn differs(&self, other: &ArmLoad, basis: LoadBasis) -> Option<String> {
        let same = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
        let per_replica_requests = same(self.requests_per_replica(), other.requests_per_replica());
        let (what, equal) = match basis {
            LoadBasis::Aggregate => (
                "in flight on equal GPUs and requests per replica",
                self.in_flight == other.in_flight
                    && self.gpus.map(|g| g.count) == other.gpus.map(|g| g.count)
                    && per_replica_requests,
            ),
            LoadBasis::PerGpu => (
                "in flight per GPU and requests per replica",
                matches!((self.per_gpu(), other.per_gpu()), (Some(a), Some(b)) if same(a, b))
                    && per_replica_requests,
            ),
            LoadBasis::PerReplica => (
                "in flight per replica and requests per replica",
                same(self.per_replica(), other.per_replica()) && per_replica_requests,
            ),
            LoadBasis::Burst => ("first-wave size", self.in_flight == other.in_flight),
        };
        (!equal).then(|| {
            format!(
                "load differs ({what}): {} {}; {} {}",
                self.arm,
                self.describe(),
                other.arm,
                other.describe()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(arm: &str, concurrency: u64, replicas: u32, gpus: u32) -> ArmLoad {
        ArmLoad {
            arm: arm.into(),
            in_flight: concurrency * u64::from(replicas),
            replicas,
            gpus: Some(Gpus {
                count: gpus,
                derived: true,
            }),
            requests: 100,
        }
    }

    /// The headline's "C8 per replica, 100 total": every topology pair differs on the
    /// aggregate; TP2 and TP1 are equal per replica (latency) but not per GPU; DP2 differs
    /// from TP1 everywhere (50 against 100 requests per replica, a first wave twice the size).
    #[test]
    fn the_headline_topologies_differ_where_the_issue_says() {
        let (tp1, tp2, dp2) = (
            load("TP1", 8, 1, 1),
            load("TP2", 8, 1, 2),
            load("DP2", 8, 2, 2),
        );
        let other_tp1 = load("K8", 8, 1, 1);
        for basis in [
            LoadBasis::Aggregate,
            LoadBasis::PerGpu,
            LoadBasis::PerReplica,
            LoadBasis::Burst,
        ] {
            assert_eq!(tp1.differs(&other_tp1, basis), None, "{basis:?}");
            assert!(tp1.differs(&dp2, basis).is_some(), "{basis:?}");
        }
        assert!(tp1.differs(&tp2, LoadBasis::Aggregate).is_some());
        assert!(tp1.differs(&tp2, LoadBasis::PerGpu).is_some());
        assert_eq!(tp1.differs(&tp2, LoadBasis::PerReplica), None);
        assert_eq!(tp1.differs(&tp2, LoadBasis::Burst), None);
        let why = dp2.differs(&tp1, LoadBasis::Aggregate).unwrap();
        assert_eq!(
            why,
            "load differs (in flight on equal GPUs and requests per replica): DP2 16 in flight \
             (8 per replica × 2 replicas, 8 per GPU on 2 GPUs), 50 requests per replica, first \
             wave 16% of the sample; TP1 8 in flight (8 per replica × 1 replica, 8 per GPU on 1 \
             GPU), 100 requests per replica, first wave 8% of the sample"
        );
    }

    /// GPUs recorded on neither side: the same deployment shape as far as anything says
    /// (equal aggregate), but no per-GPU figure to hold equal; recorded on one side only:
    /// not equal.
    #[test]
    fn unknown_gpus_are_equal_only_to_unknown_gpus() {
        let mut a = load("A", 8, 1, 1);
        let mut b = load("B", 8, 1, 1);
        a.gpus = None;
        assert!(a.differs(&b, LoadBasis::Aggregate).is_some());
        b.gpus = None;
        assert_eq!(a.differs(&b, LoadBasis::Aggregate), None);
        assert!(a.differs(&b, LoadBasis::PerGpu).is_some());
        assert_eq!(a.differs(&b, LoadBasis::PerReplica), None);
    }
}
