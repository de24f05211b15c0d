//! The run plan's five advance rules, evaluated per arm over all of the arm's artifacts.
//!
//! Each rule is a small function returning a [`Verdict`]: `Pass`, `Fail(reason)` when the
//! evidence contradicts the rule, `NotRun(reason)` when the evidence the rule needs was not
//! recorded, or `NotTestable(reason)` when the rule asks for a quantity anvil does not
//! record at all (a topology winner's communication overhead). Missing evidence is never a
//! pass, and neither is a quantity nothing measured.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::artifact::run::Status;

use super::headline::FUNCTIONAL_CLASS;
use super::input::{Artifact, MetricId, REQUIRED_FUNCTIONAL_CHECKS, Stats};

/// The verdict of one advance rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Verdict {
    Pass,
    /// The evidence contradicts the rule.
    Fail(String),
    /// The evidence the rule needs was not recorded.
    NotRun(String),
    /// The rule is about something this arm is not (e.g. the topology rule for an arm no
    /// topology comparison holds); neither a pass nor missing evidence.
    NotApplicable(String),
    /// The rule asks for a quantity anvil does not record, so no recording could satisfy
    /// it: neither a pass nor missing evidence, and said wherever the outcome is.
    NotTestable(String),
}

/// The five advance rules, in the run plan's order. Shown by its [`AdvanceRule::label`]
/// (`Display`) in `check`, the report and the Markdown alike; named in JSON by
/// [`AdvanceRule::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AdvanceRule {
    /// All requests complete without restart or unexplained loss.
    Completion,
    /// Every request returns its own canary and no other.
    Canaries,
    /// Structured JSON, tools and Responses pass.
    Functional,
    /// The performance claim shows mean, p50, p95, p99 of every metric.
    PerformanceClaim,
    /// A topology winner accounts for throughput and communication overhead.
    Topology,
}

impl std::fmt::Display for AdvanceRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

impl AdvanceRule {
    pub const ALL: [AdvanceRule; 5] = [
        AdvanceRule::Completion,
        AdvanceRule::Canaries,
        AdvanceRule::Functional,
        AdvanceRule::PerformanceClaim,
        AdvanceRule::Topology,
    ];

    /// The rule in words, wherever a person reads it.
    pub fn label(self) -> &'static str {
        match self {
            AdvanceRule::Completion => "completion",
            AdvanceRule::Canaries => "canaries",
            AdvanceRule::Functional => "functional",
            AdvanceRule::PerformanceClaim => "performance claim",
            AdvanceRule::Topology => "topology",
        }
    }

    /// Its machine name, as JSON writes it.
    pub fn name(self) -> &'static str {
        match self {
            AdvanceRule::Completion => "completion",
            AdvanceRule::Canaries => "canaries",
            AdvanceRule::Functional => "functional",
            AdvanceRule::PerformanceClaim => "performance_claim",
            AdvanceRule::Topology => "topology",
        }
    }

    /// Position in the run plan's `advance_rules` list (0-based).
    pub fn index(self) -> usize {
        match self {
            AdvanceRule::Completion => 0,
            AdvanceRule::Canaries => 1,
            AdvanceRule::Functional => 2,
            AdvanceRule::PerformanceClaim => 3,
            AdvanceRule::Topology => 4,
        }
    }
}

/// Rule 1: every run complete, every planned request measured and `ok`, no restart.
pub fn completion(runs: &[&Artifact]) -> Verdict {
    if runs.is_empty() {
        return Verdict::NotRun("no artifacts for this arm".to_owned());
    }
    let mut problems = Vec::new();
    let mut missing = Vec::new();
    for run in runs {
        let id = &run.facts.run_id;
        let figures = &run.figures;
        if run.facts.status != Status::Complete {
            problems.push(format!("run {id}: status {}", run.facts.status.as_str()));
        }
        let planned = run.facts.workload.total_requests;
        let measured = figures.requests.measured;
        if measured < planned {
            problems.push(format!(
                "run {id}: {} of {planned} requests lost ({measured} recorded)",
                planned - measured
            ));
        }
        let failed = figures.requests.failed_total();
        if failed > 0 || figures.requests.ok.saturating_add(failed) < measured {
            problems.push(format!(
                "run {id}: {} of {measured} measured requests did not complete ({})",
                measured.saturating_sub(figures.requests.ok),
                outcomes(&figures.requests.failed)
            ));
        }
        for restart in &figures.restarts {
            problems.push(format!(
                "run {id}: replica {} {} ({})",
                restart.replica,
                restart.what(),
                restart.evidence()
            ));
        }
        for (replica, scraped) in &figures.restart_undetectable {
            let why = if *scraped {
                "its scrapes carry neither process_start_time_seconds nor a counter"
            } else {
                "no scrape of its metrics was recorded"
            };
            missing.push(format!(
                "run {id}: replica {replica}: restart detection not possible ({why})"
            ));
        }
    }
    verdict(problems, missing)
}

/// Failed outcomes as `timeout_idle 2, http_error 1`.
pub(crate) fn outcomes(failed: &BTreeMap<crate::artifact::run::Outcome, u64>) -> String {
    if failed.is_empty() {
        return "no outcome recorded".to_owned();
    }
    failed
        .iter()
        .map(|(outcome, count)| format!("{} {count}", outcome.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Request indices as `3, 7, 12`.
pub(crate) fn indices(list: impl IntoIterator<Item = i64>) -> String {
    list.into_iter()
        .map(|index| index.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn verdict(failures: Vec<String>, missing: Vec<String>) -> Verdict {
    if !failures.is_empty() {
        Verdict::Fail(failures.join("; "))
    } else if !missing.is_empty() {
        Verdict::NotRun(missing.join("; "))
    } else {
        Verdict::Pass
    }
}

/// Rule 2: in every run with canaries, each successful request returned its own canary and
/// no other (in content or tool-call arguments).
pub fn canaries(runs: &[&Artifact]) -> Verdict {
    let with_canaries: Vec<&&Artifact> =
        runs.iter().filter(|r| r.facts.workload.canaries).collect();
    if with_canaries.is_empty() {
        return Verdict::NotRun("no run of this arm carries canaries".to_owned());
    }
    let (mut failures, mut missing) = (Vec::new(), Vec::new());
    for run in with_canaries {
        let id = &run.facts.run_id;
        let results = &run.figures.canaries;
        // The successful requests that carry a canary must each have a result.
        let ok = run.figures.requests.ok_with_canary;
        if (results.len() as u64) < ok {
            missing.push(format!(
                "run {id}: canary results for {} of {ok} successful requests with a canary",
                results.len()
            ));
        }
        let lacking: Vec<i64> = results
            .iter()
            .filter(|r| !r.own_present)
            .map(|r| r.request_index)
            .collect();
        if !lacking.is_empty() {
            failures.push(format!(
                "run {id}: requests {} did not return their own canary",
                indices(lacking)
            ));
        }
        for result in results {
            let foreign: Vec<&str> = result
                .foreign
                .iter()
                .chain(&result.foreign_in_tool_arguments)
                .map(String::as_str)
                .collect();
            if !foreign.is_empty() {
                failures.push(format!(
                    "run {id}: request {} returned canary markers other than its own: {}",
                    result.request_index,
                    foreign.join(", ")
                ));
            }
        }
    }
    verdict(failures, missing)
}

/// Rule 3: structured JSON, tools and Responses all have results and all passed. An arm
/// without functional results is "not run", never a pass.
pub fn functional(runs: &[&Artifact]) -> Verdict {
    let results: Vec<_> = runs.iter().flat_map(|r| &r.figures.functional).collect();
    if results.is_empty() {
        return Verdict::NotRun("no functional results for this arm".to_owned());
    }
    let failures: Vec<String> = results
        .iter()
        .filter(|r| !r.passed)
        .map(|r| {
            let at = r
                .request_index
                .map_or_else(String::new, |index| format!(" (request {index})"));
            let why = r.reason.as_deref().unwrap_or("no reason recorded");
            format!("{} failed{at}: {why}", r.check)
        })
        .collect();
    let absent: Vec<&str> = REQUIRED_FUNCTIONAL_CHECKS
        .into_iter()
        .filter(|check| !results.iter().any(|r| r.check == *check))
        .collect();
    let missing = if absent.is_empty() {
        Vec::new()
    } else {
        vec![format!("no result for {}", absent.join(", "))]
    };
    verdict(failures, missing)
}

/// The statistics a performance claim must show for each metric.
fn claim_gaps(metric: MetricId, stats: Option<&Stats>) -> Option<String> {
    let Some(stats) = stats else {
        return Some(format!("{metric} (all)"));
    };
    let absent: Vec<&str> = [
        ("mean", stats.mean),
        ("p50", stats.p50),
        ("p95", stats.p95),
        ("p99", stats.p99),
    ]
    .into_iter()
    .filter(|(_, value)| !value.is_some_and(f64::is_finite))
    .map(|(name, _)| name)
    .collect();
    (!absent.is_empty()).then(|| format!("{metric} {}", absent.join(", ")))
}

/// Rule 4: every performance run of the arm shows mean, p50, p95 and p99 for TTFT,
/// effective prefill, decode, TPOT, ITL and E2E; a claim missing any fails, naming it.
pub fn performance_claim(runs: &[&Artifact]) -> Verdict {
    let performance: Vec<&&Artifact> = runs
        .iter()
        .filter(|r| r.facts.workload.class != FUNCTIONAL_CLASS)
        .collect();
    if performance.is_empty() {
        return Verdict::NotRun("no performance run for this arm".to_owned());
    }
    let failures: Vec<String> = performance
        .iter()
        .filter_map(|run| {
            let gaps: Vec<String> = MetricId::ALL
                .into_iter()
                .filter_map(|metric| claim_gaps(metric, run.figures.metrics.get(&metric)))
                .collect();
            let lacking = (!gaps.is_empty())
                .then(|| format!("run {}: claim lacks {}", run.facts.run_id, gaps.join("; ")));
            let usage = run.figures.usage_gap(&run.facts.run_id);
            match (lacking, usage) {
                (Some(a), Some(b)) => Some(format!("{a}; {b}")),
                (a, b) => a.or(b),
            }
        })
        .collect();
    verdict(failures, Vec::new())
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{artifact, fail_requests, full_stats};
    use super::super::input::{CanaryResult, FunctionalResult, Restart, RestartSignal};
    use super::*;
    use crate::artifact::run::Outcome;

    #[test]
    fn a_clean_arm_passes_rules_one_to_four() {
        let a = artifact("r-a", "A", &[], 1000.0);
        let runs = [&a];
        assert_eq!(completion(&runs), Verdict::Pass);
        assert_eq!(canaries(&runs), Verdict::Pass);
        assert_eq!(functional(&runs), Verdict::Pass);
        assert_eq!(performance_claim(&runs), Verdict::Pass);
    }

    #[test]
    fn restart_and_loss_fail_completion() {
        let mut a = artifact("r-a", "A", &[], 1000.0);
        a.figures.requests.measured = 97;
        a.figures.requests.ok = 97;
        fail_requests(&mut a, Outcome::TimeoutIdle, 2);
        a.figures.restarts.push(Restart {
            replica: 1,
            signal: RestartSignal::StartTime {
                before_s: 1_790_000_000.0,
                after_s: 1_790_000_420.0,
            },
        });
        assert_eq!(
            completion(&[&a]),
            Verdict::Fail(
                "run r-a: 3 of 100 requests lost (97 recorded); \
                 run r-a: 2 of 97 measured requests did not complete (timeout_idle 2); \
                 run r-a: replica 1 restarted (process_start_time_seconds 1790000000 → 1790000420)"
                    .to_owned()
            )
        );
    }

    #[test]
    fn interrupted_run_fails_completion() {
        let mut a = artifact("r-a", "A", &[], 1000.0);
        a.facts.status = Status::Interrupted;
        assert_eq!(
            completion(&[&a]),
            Verdict::Fail("run r-a: status interrupted".to_owned())
        );
    }

    #[test]
    fn missing_or_foreign_canaries_fail_and_missing_results_are_not_run() {
        let mut a = artifact("r-a", "A", &[], 1000.0);
        a.figures.canaries[3].own_present = false;
        a.figures.canaries[7].foreign = vec!["ANV-0000000000aa".to_owned()];
        assert_eq!(
            canaries(&[&a]),
            Verdict::Fail(
                "run r-a: requests 3 did not return their own canary; \
                 run r-a: request 7 returned canary markers other than its own: ANV-0000000000aa"
                    .to_owned()
            )
        );
        let mut b = artifact("r-b", "B", &[], 1000.0);
        b.figures.canaries.truncate(98);
        assert_eq!(
            canaries(&[&b]),
            Verdict::NotRun(
                "run r-b: canary results for 98 of 100 successful requests with a canary"
                    .to_owned()
            )
        );
        b.facts.workload.canaries = false;
        assert_eq!(
            canaries(&[&b]),
            Verdict::NotRun("no run of this arm carries canaries".to_owned())
        );
    }

    #[test]
    fn functional_is_not_run_without_results_and_fails_on_a_failed_check() {
        let mut a = artifact("r-a", "A", &[], 1000.0);
        a.figures.functional.clear();
        assert_eq!(
            functional(&[&a]),
            Verdict::NotRun("no functional results for this arm".to_owned())
        );
        a.figures.functional.push(FunctionalResult {
            check: "structured_json".to_owned(),
            request_index: Some(4),
            passed: true,
            reason: None,
            failure: None,
        });
        assert_eq!(
            functional(&[&a]),
            Verdict::NotRun("no result for tools, responses".to_owned())
        );
        a.figures.functional.push(FunctionalResult {
            check: "tools".to_owned(),
            request_index: Some(5),
            passed: false,
            reason: Some("arguments are not valid JSON".to_owned()),
            failure: Some(crate::rules::FunctionalFailure::Invalid),
        });
        assert_eq!(
            functional(&[&a]),
            Verdict::Fail("tools failed (request 5): arguments are not valid JSON".to_owned())
        );
    }

    #[test]
    fn a_claim_missing_statistics_fails_naming_them() {
        let mut a = artifact("r-a", "A", &[], 1000.0);
        a.figures.metrics.remove(&MetricId::DecodeTps);
        let mut ttft = full_stats(100, 1.0, 0.1);
        ttft.p99 = None;
        ttft.p95 = Some(f64::NAN);
        a.figures.metrics.insert(MetricId::TtftMs, ttft);
        assert_eq!(
            performance_claim(&[&a]),
            Verdict::Fail("run r-a: claim lacks ttft_ms p95, p99; decode_tps (all)".to_owned())
        );
    }

    #[test]
    fn canary_result_default_is_a_miss() {
        assert!(!CanaryResult::default().own_present);
    }
}
