//! Matching: two or more artifacts may be compared head to head only when their workload
//! fingerprints are equal, every run is `complete`, they drove the same API, and, where
//! their GPUs' telemetry says, their GPUs' power limits are within 1% of each other (the
//! limit is an observed fact of the arm, not part of its configuration).
//!
//! [`MatchedSet`] has private fields and no public constructor: the only way to obtain one
//! is [`match_artifacts`], so holding a `MatchedSet` proves the check passed.
//!
//! ```compile_fail
//! // A matched set cannot be built by hand outside this module.
//! let set = anvil::rules::MatchedSet { members: Vec::new(), fingerprint: String::new() };
//! ```

use crate::artifact::run::{Api, Status};

use super::input::{Artifact, show};
use super::refusal::{FieldDifference, Refusal, RefusalKind};

/// How far apart two runs' GPU power limits may be (of the lower) and still match.
pub const POWER_LIMIT_TOLERANCE: f64 = 0.01;

/// Artifacts that passed the matching check: equal fingerprints, all complete, one API.
#[derive(Debug, Clone)]
pub struct MatchedSet<'a> {
    members: Vec<&'a Artifact>,
    fingerprint: String,
}

impl<'a> MatchedSet<'a> {
    /// The matched artifacts, in the order given.
    pub fn members(&self) -> &[&'a Artifact] {
        &self.members
    }

    /// The fingerprint they share.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The API they all drove.
    pub fn api(&self) -> Api {
        // A matched set has at least two members (checked by `match_artifacts`).
        self.members[0].facts.api()
    }

    /// Names of the arms in the set, in first-seen order, without duplicates.
    pub fn arms(&self) -> Vec<&'a str> {
        let mut arms: Vec<&str> = Vec::new();
        for member in &self.members {
            if !arms.contains(&member.facts.arm.as_str()) {
                arms.push(member.facts.arm.as_str());
            }
        }
        arms
    }

    /// The members of one arm (several when the arm was repeated).
    pub fn arm(&self, name: &str) -> Vec<&'a Artifact> {
        self.members
            .iter()
            .copied()
            .filter(|member| member.facts.arm == name)
            .collect()
    }
}

/// The matching check. Refuses fewer than two artifacts, and otherwise lists every
/// difference from the first artifact: each workload field with both values, the
/// fingerprint when the fields agree but the recorded fingerprints do not, and every run
/// whose status is not `complete`.
pub fn match_artifacts(artifacts: &[Artifact]) -> Result<MatchedSet<'_>, Refusal> {
    let refuse = |reason: String, differences: Vec<FieldDifference>| Refusal {
        kind: RefusalKind::NotMatched,
        reason,
        differences,
        rule: None,
    };
    let [first, rest @ ..] = artifacts else {
        return Err(refuse(
            "matching needs two or more artifacts, found none".to_owned(),
            Vec::new(),
        ));
    };
    if rest.is_empty() {
        return Err(refuse(
            format!(
                "matching needs two or more artifacts, found one ({})",
                first.facts.run_id
            ),
            Vec::new(),
        ));
    }
    let mut differences = Vec::new();
    let first_workload = serde_json::to_value(&first.facts.workload).unwrap_or_default();
    for other in rest {
        let workload = serde_json::to_value(&other.facts.workload).unwrap_or_default();
        let before = differences.len();
        if let (Some(a), Some(b)) = (first_workload.as_object(), workload.as_object()) {
            // Every field either has: an optional one absent from one side (a warm run's
            // `cache`, a trace's `trace`) differs from its presence on the other.
            let fields = a.keys().chain(b.keys().filter(|k| !a.contains_key(*k)));
            for field in fields {
                let a_value = a.get(field).unwrap_or(&serde_json::Value::Null);
                let b_value = b.get(field).cloned().unwrap_or(serde_json::Value::Null);
                if *a_value != b_value {
                    differences.push(FieldDifference {
                        run_id: other.facts.run_id.clone(),
                        field: field.clone(),
                        first: show(a_value),
                        other: show(&b_value),
                    });
                }
            }
        }
        if differences.len() == before && other.facts.fingerprint != first.facts.fingerprint {
            differences.push(FieldDifference {
                run_id: other.facts.run_id.clone(),
                field: "workload_fingerprint".to_owned(),
                first: first.facts.fingerprint.clone(),
                other: other.facts.fingerprint.clone(),
            });
        }
    }
    // The GPUs' power limits, as read: the lowest and the highest over every run that read
    // them (a run's GPUs at different limits count with both); more than 1% apart, the runs
    // are not matched. A limit read as 0 or less is no reading.
    let limits: Vec<(&Artifact, f64, f64)> = artifacts
        .iter()
        .filter_map(|a| {
            let e = a.figures.energy.get(&super::input::Window::All)?;
            let high = e.power_limit_w.filter(|w| *w > 0.0)?;
            let low = e.power_limit_min_w.filter(|w| *w > 0.0).unwrap_or(high);
            Some((a, low, high))
        })
        .collect();
    let lowest = limits.iter().min_by(|x, y| x.1.total_cmp(&y.1));
    let highest = limits.iter().max_by(|x, y| x.2.total_cmp(&y.2));
    if let (Some((low_run, low, _)), Some((high_run, _, high))) = (lowest, highest)
        && high - low > POWER_LIMIT_TOLERANCE * low
    {
        let same = low_run.facts.run_id == high_run.facts.run_id;
        differences.push(FieldDifference {
            run_id: high_run.facts.run_id.clone(),
            field: if same {
                "power_limit_w (read, its GPUs)".to_owned()
            } else {
                "power_limit_w (read)".to_owned()
            },
            first: format!(
                "{} W (run {})",
                super::input::num(*low),
                low_run.facts.run_id
            ),
            other: format!("{} W", super::input::num(*high)),
        });
    }
    for artifact in artifacts {
        if artifact.facts.status != Status::Complete {
            differences.push(FieldDifference {
                run_id: artifact.facts.run_id.clone(),
                field: "status".to_owned(),
                first: Status::Complete.as_str().to_owned(),
                other: artifact.facts.status.as_str().to_owned(),
            });
        }
    }
    if differences.is_empty() {
        return Ok(MatchedSet {
            members: artifacts.iter().collect(),
            fingerprint: first.facts.fingerprint.clone(),
        });
    }
    let mut parts = Vec::new();
    let mut runs: Vec<&str> = Vec::new();
    for difference in &differences {
        if !runs.contains(&difference.run_id.as_str()) {
            runs.push(difference.run_id.as_str());
        }
    }
    for run in runs {
        let listed: Vec<String> = differences
            .iter()
            .filter(|d| d.run_id == run)
            .map(|d| {
                if d.field == "status" {
                    format!("status: {} (must be complete)", d.other)
                } else {
                    d.to_string()
                }
            })
            .collect();
        parts.push(format!("{run}: {}", listed.join("; ")));
    }
    Err(refuse(
        format!(
            "artifacts are not matched (compared with {}): {}",
            first.facts.run_id,
            parts.join(" | ")
        ),
        differences,
    ))
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{artifact, screen_workload};
    use super::*;
    use crate::artifact::run::Api;

    #[test]
    fn equal_fingerprints_complete_and_same_api_are_matched() {
        let artifacts = [
            artifact("r-tp1", "TP1", &[("topology", "TP1")], 1000.0),
            artifact("r-tp2", "TP2", &[("topology", "TP2")], 1500.0),
        ];
        let set = match_artifacts(&artifacts).unwrap();
        assert_eq!(set.arms(), ["TP1", "TP2"]);
        assert_eq!(set.api(), Api::Chat);
        assert_eq!(set.fingerprint(), artifacts[0].facts.fingerprint);
        assert_eq!(set.arm("TP2").len(), 1);
    }

    #[test]
    fn unmatched_fingerprints_are_refused_listing_every_differing_field() {
        let mut screen = artifact("r-screen", "K12", &[], 900.0);
        screen.facts.workload = screen_workload();
        screen.facts.fingerprint = screen.facts.workload.fingerprint();
        let artifacts = [artifact("r-head", "TP1", &[], 1000.0), screen];
        let refusal = match_artifacts(&artifacts).unwrap_err();
        assert_eq!(refusal.kind, RefusalKind::NotMatched);
        assert_eq!(
            refusal.reason,
            "artifacts are not matched (compared with r-head): r-screen: \
             class: headline-sustained-output vs optimization-screen; \
             concurrency_per_replica: 8 vs 4; total_requests: 100 vs 8; \
             response_words: 256 vs null; canaries: true vs false"
        );
        assert_eq!(refusal.differences.len(), 5);
    }

    #[test]
    fn status_and_api_differences_are_refused() {
        let mut interrupted = artifact("r-b", "TP2", &[], 1000.0);
        interrupted.facts.status = Status::Interrupted;
        interrupted.facts.workload.api = Api::Responses;
        interrupted.facts.fingerprint = interrupted.facts.workload.fingerprint();
        let artifacts = [artifact("r-a", "TP1", &[], 1000.0), interrupted];
        let refusal = match_artifacts(&artifacts).unwrap_err();
        assert_eq!(
            refusal.reason,
            "artifacts are not matched (compared with r-a): r-b: api: chat vs responses; \
             status: interrupted (must be complete)"
        );
    }

    #[test]
    fn edited_fingerprint_with_equal_fields_is_refused() {
        let mut edited = artifact("r-b", "TP2", &[], 1000.0);
        edited.facts.fingerprint = "sha256:00".to_owned();
        let artifacts = [artifact("r-a", "TP1", &[], 1000.0), edited];
        let refusal = match_artifacts(&artifacts).unwrap_err();
        assert_eq!(
            refusal.reason,
            format!(
                "artifacts are not matched (compared with r-a): r-b: workload_fingerprint: {} vs sha256:00",
                artifacts[0].facts.fingerprint
            )
        );
    }

    #[test]
    fn fewer_than_two_artifacts_are_refused() {
        assert_eq!(
            match_artifacts(&[]).unwrap_err().reason,
            "matching needs two or more artifacts, found none"
        );
        assert_eq!(
            match_artifacts(&[artifact("r-a", "TP1", &[], 1.0)])
                .unwrap_err()
                .reason,
            "matching needs two or more artifacts, found one (r-a)"
        );
    }

    #[test]
    fn arms_at_power_limits_more_than_one_percent_apart_are_not_matched() {
        use crate::rules::input::Window;
        let with_limit = |id: &str, arm: &str, limit: f64| {
            let mut a = artifact(id, arm, &[], 1000.0);
            a.figures
                .energy
                .insert(Window::All, super::super::fixtures::energy(limit, false));
            a
        };
        let close = [with_limit("r-a", "A", 700.0), with_limit("r-b", "B", 695.0)];
        assert!(match_artifacts(&close).is_ok());
        let apart = [with_limit("r-a", "A", 700.0), with_limit("r-b", "B", 450.0)];
        let refusal = match_artifacts(&apart).unwrap_err();
        assert!(
            refusal
                .reason
                .contains("r-a: power_limit_w (read): 450 W (run r-b) vs 700 W"),
            "{}",
            refusal.reason
        );
        // Each within 1% of the first, 2% apart from each other.
        let spread = [
            with_limit("r-a", "A", 700.0),
            with_limit("r-b", "B", 693.0),
            with_limit("r-c", "C", 707.0),
        ];
        assert!(match_artifacts(&spread).is_err());
        // A run whose own GPUs are at different limits, beside one at the higher.
        let mut mixed = with_limit("r-b", "B", 700.0);
        if let Some(e) = mixed.figures.energy.get_mut(&Window::All) {
            e.power_limit_min_w = Some(450.0);
        }
        let within = [with_limit("r-a", "A", 700.0), mixed];
        let refusal = match_artifacts(&within).unwrap_err();
        assert!(
            refusal.reason.contains("(read, its GPUs)"),
            "{}",
            refusal.reason
        );
        // A run without telemetry says nothing of its limit: no difference.
        let unknown = [
            with_limit("r-a", "A", 700.0),
            artifact("r-b", "B", &[], 1000.0),
        ];
        assert!(match_artifacts(&unknown).is_ok());
    }
}
