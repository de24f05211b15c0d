//! The comparison over hand-built artifacts: references and controls, Welch and paired
//! intervals, differences of percentiles, throughput across repeats, goodput, scaling
//! efficiency and output-length realization.

use super::super::fixtures::{artifact, full_stats, per_request, plan, screen_workload, selection};
use super::super::matching::match_artifacts;
use super::*;

fn close(a: f64, b: f64, tolerance: f64) -> bool {
    (a - b).abs() <= tolerance
}

/// Give `a` 100 requests whose TTFT is `value(request index)`, and their statistics.
fn with_ttft(a: &mut Artifact, value: impl Fn(i64) -> f64) {
    let values = per_request(100, &value);
    let mut sample = Sample::new(values.iter().map(|v| v.value).collect()).unwrap();
    a.figures.per_request.insert(MetricId::TtftMs, values);
    a.figures
        .metrics
        .insert(MetricId::TtftMs, sample.describe());
}

#[test]
fn welch_and_paired_differences_against_the_baseline() {
    let mut base = artifact("r-k8", "K8", &[("spec_k", "8")], 1000.0);
    let mut k12 = artifact("r-k12", "K12", &[("spec_k", "12")], 1100.0);
    k12.figures
        .metrics
        .insert(MetricId::TtftMs, full_stats(100, 90.0, 10.0));
    base.figures
        .per_request
        .insert(MetricId::TtftMs, per_request(5, |i| 100.0 + i as f64));
    // Differences 1, 2, 3, 4, 5 → paired interval (1.036757, 4.963243) (see stats tests).
    k12.figures.per_request.insert(
        MetricId::TtftMs,
        per_request(5, |i| 100.0 + 2.0 * i as f64 + 1.0),
    );
    let artifacts = [base, k12];
    let set = match_artifacts(&artifacts).unwrap();
    let comparison = compare(
        &set,
        &References::Baseline("K8".to_owned()),
        Scope::Headline,
    )
    .unwrap();
    assert_eq!(
        comparison.label,
        "headline: matched sustained-output artifacts"
    );
    let ttft = &comparison.metrics[0];
    assert_eq!(ttft.metric, MetricId::TtftMs);
    assert_eq!(
        ttft.arm("K12", Window::All).unwrap().runs[0].stats.p99,
        Some(110.0)
    );
    let diff = &ttft.differences[0];
    assert_eq!(diff.arm, "K12");
    assert_eq!(diff.difference, Some(-10.0));
    assert_eq!(diff.ratio, Some(0.9));
    // n = 100 each, sd 10 each: se = √(100/100 + 100/100) = 1.414214,
    // df = 4 / (1/99 + 1/99) = 198, t(0.975, 198) = 1.97202 (tables):
    // −10 ± 2.78885 → (−12.78885, −7.21115).
    let welch = diff.welch.unwrap();
    assert!(close(welch.df, 198.0, 1e-9), "{welch:?}");
    assert!(close(welch.low, -12.78885, 1e-4), "{welch:?}");
    assert!(close(welch.high, -7.21115, 1e-4), "{welch:?}");
    match &diff.paired {
        Paired::Interval { pairs, interval } => {
            assert_eq!(*pairs, 5);
            assert!(close(interval.estimate, 3.0, 1e-12));
            assert!(close(interval.low, 1.036757, 1e-5));
        }
        other => panic!("{other:?}"),
    }
    // Other metrics have no per-request values.
    assert_eq!(
        comparison.metrics[1].differences[0].paired,
        Paired::NotPaired {
            reason: "per-request values not recorded".to_owned()
        }
    );
    assert_eq!(comparison.throughput[0].estimate.label(), SINGLE_RUN);
    assert_eq!(
        comparison.controls[0].control.reason(),
        "one variable: spec_k = 8 vs 12"
    );
    assert!(comparison.warnings.is_empty(), "{:?}", comparison.warnings);
    // Five values bound no side of p50's interval (it needs 6): no percentile CI.
    let p50 = &diff.percentiles[0];
    assert_eq!(p50.percentile, Percentile::P50);
    assert_eq!(
        p50.comparison,
        PercentileComparison::NoInterval {
            estimate: Some(-10.0),
            reason: "n = 5 is too few for a bounded p50 (needs 6)".to_owned()
        }
    );
}

#[test]
fn percentile_differences_are_bootstrapped_paired_where_the_requests_agree() {
    // 100 requests each, the arm 5 ms slower on every request: the paired bootstrap of
    // p50 and p95 is exactly +5; p99 of 100 values has no bounded interval.
    let mut base = artifact("r-a", "A", &[("k", "1")], 1.0);
    let mut arm = artifact("r-b", "B", &[("k", "2")], 1.0);
    let value = |i: i64| 100.0 + ((i * 37) % 100) as f64;
    with_ttft(&mut base, value);
    with_ttft(&mut arm, |i| value(i) + 5.0);
    let artifacts = [base, arm];
    let comparison = compare(
        &match_artifacts(&artifacts).unwrap(),
        &References::Baseline("A".to_owned()),
        Scope::Headline,
    )
    .unwrap();
    let d = comparison.metrics[0].difference("B", Window::All).unwrap();
    let [p50, p95, p99] = [&d.percentiles[0], &d.percentiles[1], &d.percentiles[2]];
    for (p, q) in [(p50, Percentile::P50), (p95, Percentile::P95)] {
        assert_eq!(p.percentile, q);
        match &p.comparison {
            PercentileComparison::Bootstrap(b) => {
                assert!(b.paired);
                assert_eq!((b.estimate, b.low, b.high), (5.0, 5.0, 5.0));
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        p99.comparison.method(),
        "n = 100 is too few for a bounded p99 (needs 368)"
    );
    assert_eq!(p99.comparison.estimate(), Some(5.0));
}

#[test]
fn paired_differences_use_the_requests_both_arms_have() {
    let mut base = artifact("r-a", "A", &[("k", "1")], 1.0);
    let mut other = artifact("r-b", "B", &[("k", "2")], 1.0);
    base.figures
        .per_request
        .insert(MetricId::E2eMs, per_request(5, |i| i as f64));
    other
        .figures
        .per_request
        .insert(MetricId::E2eMs, per_request(4, |i| i as f64));
    let artifacts = [base, other];
    let comparison = compare(
        &match_artifacts(&artifacts).unwrap(),
        &References::Baseline("A".to_owned()),
        Scope::Headline,
    )
    .unwrap();
    // Request 4 only the reference has: four pairs, each difference 0.
    match &comparison.metrics[5].differences[0].paired {
        Paired::Interval { pairs, interval } => {
            assert_eq!(*pairs, 4);
            assert_eq!((interval.low, interval.high), (0.0, 0.0));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn arms_at_different_loads_are_not_paired() {
    // DP2 keeps 16 requests in flight, TP1 8: request i is elsewhere in each schedule.
    let mut base = artifact("r-a", "TP1", &[("topology", "TP1")], 1.0);
    let mut dp2 = artifact("r-b", "DP2", &[("topology", "DP2")], 1.0);
    dp2.facts.replica_count = 2;
    let value = |i: i64| 100.0 + ((i * 37) % 100) as f64;
    with_ttft(&mut base, value);
    with_ttft(&mut dp2, value);
    let artifacts = [base, dp2];
    let comparison = compare(
        &match_artifacts(&artifacts).unwrap(),
        &References::Baseline("TP1".to_owned()),
        Scope::Headline,
    )
    .unwrap();
    let d = comparison.metrics[0]
        .difference("DP2", Window::All)
        .unwrap();
    assert_eq!(
        d.paired,
        Paired::NotPaired {
            reason: "16 vs 8 requests in flight: request i holds a different place in each \
                     schedule"
                .to_owned()
        }
    );
    match &d.percentiles[0].comparison {
        PercentileComparison::Bootstrap(b) => assert!(!b.paired),
        other => panic!("{other:?}"),
    }
}

#[test]
fn repeated_runs_give_a_throughput_interval_across_runs() {
    let artifacts = [
        artifact("r-a1", "A", &[("k", "1")], 1000.0),
        artifact("r-a2", "A", &[("k", "1")], 1100.0),
        artifact("r-a3", "A", &[("k", "1")], 1200.0),
        artifact("r-b", "B", &[("k", "2")], 900.0),
    ];
    let comparison = compare(
        &match_artifacts(&artifacts).unwrap(),
        &References::Baseline("A".to_owned()),
        Scope::Headline,
    )
    .unwrap();
    let a = &comparison.throughput[0];
    assert_eq!(a.estimate.label(), "3 runs, 95% CI across runs");
    // Mean 1100, sd 100, se 57.735027, t(0.975, 2) = 4.302653: ± 248.414 →
    // (851.586, 1348.414).
    match &a.estimate {
        ThroughputEstimate::Repeats {
            runs,
            mean,
            interval: Some(ci),
            ..
        } => {
            assert_eq!((*runs, *mean), (3, 1100.0));
            assert!(close(ci.low, 851.586, 1e-3), "{ci:?}");
            assert!(close(ci.high, 1348.414, 1e-3), "{ci:?}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(comparison.throughput[1].estimate.label(), SINGLE_RUN);
    // Repeats on one side only: a difference without an interval across runs.
    let b = comparison.throughput("B", Window::All).unwrap();
    assert_eq!(b.reference.as_deref(), Some("A"));
    assert_eq!(
        b.difference
            .as_ref()
            .map(|d| (d.estimate, d.interval, d.no_interval.as_deref())),
        Some((-200.0, None, Some("repeats on one side only: no CI")))
    );
    // The percentiles' point estimates stay (B's p50 − the mean of A's three p50s).
    let p50 = &comparison.metrics[0].differences[0].percentiles[0];
    assert_eq!(p50.comparison.estimate(), Some(0.0));
    assert!(
        p50.comparison
            .method()
            .starts_with("repeats on one side only")
    );
    // Paired differences are not taken across repeats.
    assert_eq!(
        comparison.metrics[0].differences[0].paired,
        Paired::NotPaired {
            reason: "paired differences need exactly one run per arm".to_owned()
        }
    );
}

#[test]
fn topology_arms_get_per_gpu_figures_and_efficiency_against_the_single_gpu_arm() {
    // TP1 at 1000, 1010, 990; TP2 at 1700, 1690, 1710; DP2 (two replicas) at 1960 once.
    let mut artifacts = vec![
        artifact("t1a", "TP1", &[("topology", "TP1")], 1000.0),
        artifact("t1b", "TP1", &[("topology", "TP1")], 1010.0),
        artifact("t1c", "TP1", &[("topology", "TP1")], 990.0),
        artifact("t2a", "TP2", &[("topology", "TP2")], 1700.0),
        artifact("t2b", "TP2", &[("topology", "TP2")], 1690.0),
        artifact("t2c", "TP2", &[("topology", "TP2"), ("gpus", "2")], 1710.0),
        artifact("d2", "DP2", &[("topology", "DP2")], 1960.0),
    ];
    artifacts[6].facts.replica_count = 2;
    // The recorded `gpus` key is derived: it is no second variable, and no other config.
    artifacts[5].facts.config = [("topology", "TP2")].into_iter().collect();
    let references = References::Controls {
        stage: Some("matched topology".to_owned()),
        controls: vec![
            ("TP1".to_owned(), None),
            ("TP2".to_owned(), Some("TP1".to_owned())),
            ("DP2".to_owned(), Some("TP1".to_owned())),
        ],
    };
    let c = compare(
        &match_artifacts(&artifacts).unwrap(),
        &references,
        Scope::Headline,
    )
    .unwrap();
    let tp2 = c.throughput("TP2", Window::All).unwrap();
    assert_eq!(
        tp2.gpus,
        Some(Gpus {
            count: 2,
            derived: true
        })
    );
    assert_eq!(tp2.per_gpu, Some(850.0));
    assert_eq!(tp2.in_flight, 8);
    let e = tp2.scaling_efficiency.as_ref().unwrap();
    assert_eq!(e.against, "TP1");
    assert!(close(e.value, 1700.0 / 2000.0, 1e-12), "{e:?}");
    // Both arms repeated: Welch across runs. Means 1000 and 1700, sd 10 each, n 3:
    // se = √(100/3 + 100/3) = 8.164966, df = 4, t = 2.776445: 700 ± 22.6697.
    let d = tp2.difference.as_ref().unwrap();
    assert_eq!(d.estimate, 700.0);
    let ci = d.interval.unwrap();
    assert!(
        close(ci.low, 677.3303, 1e-3) && close(ci.high, 722.6697, 1e-3),
        "{ci:?}"
    );
    let dp2 = c.throughput("DP2", Window::All).unwrap();
    assert_eq!((dp2.in_flight, dp2.per_gpu), (16, Some(980.0)));
    assert!(close(
        dp2.scaling_efficiency.as_ref().unwrap().value,
        0.98,
        1e-12
    ));
    assert_eq!(dp2.difference.as_ref().unwrap().interval, None);
    assert_eq!(
        c.throughput("TP1", Window::All).unwrap().scaling_efficiency,
        None
    );
    assert_eq!(c.references.of("TP1"), None);
    // Percentiles of repeated arms are compared across runs.
    let p50 = &c.metrics[0]
        .difference("TP2", Window::All)
        .unwrap()
        .percentiles[0];
    assert!(
        matches!(
            p50.comparison,
            PercentileComparison::AcrossRuns { runs: (3, 3), .. }
        ),
        "{p50:?}"
    );
    // p99 of each run's 100 requests is unbounded: no interval across runs either.
    let p99 = &c.metrics[0]
        .difference("TP2", Window::All)
        .unwrap()
        .percentiles[2];
    assert_eq!(
        p99.comparison.method(),
        "run t1a: n = 100 is too few for a bounded p99 (needs 368)"
    );
    // Means compared across runs, runs the sample: equal runs, a zero-width interval.
    let ttft = c.metrics[0].difference("TP2", Window::All).unwrap();
    assert_eq!(ttft.welch_runs, Some((3, 3)));
    assert_eq!(ttft.welch_method(), "across runs (3 vs 3)");
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
}

#[test]
fn output_length_mismatch_warns_that_throughput_is_not_comparable() {
    let base = artifact("r-a", "A", &[("k", "1")], 1000.0);
    let mut long = artifact("r-b", "B", &[("k", "2")], 1300.0);
    long.figures.completion_tokens_p50 = Some(410.0);
    long.figures.finish_reasons = [("stop".to_owned(), 60), ("length".to_owned(), 40)]
        .into_iter()
        .collect();
    let artifacts = [base, long];
    let comparison = compare(
        &match_artifacts(&artifacts).unwrap(),
        &References::Baseline("A".to_owned()),
        Scope::Headline,
    )
    .unwrap();
    let warning = "B vs A: output-length realization differs (completion tokens p50 410 vs \
                   340 (+20.6%); finish reasons length 40%, stop 60% vs stop 100%); \
                   throughput is not comparable as it stands";
    assert_eq!(comparison.warnings, [warning]);
    assert_eq!(
        comparison.output_length[0].2,
        OutputLength::NotComparable {
            warning: warning.to_owned()
        }
    );
}

/// Mamba lazy96's trap: a median 8.7% longer (within the guard) but a tail of long replies
/// that makes 40.6% more tokens in total: its throughput lead is longer replies, and the
/// guard says so.
#[test]
fn a_longer_tail_with_a_near_median_is_caught_by_the_mean_and_total() {
    let base = artifact("r-a", "A", &[("k", "1")], 1000.0);
    let mut tail = artifact("r-b", "B", &[("k", "2")], 1400.0);
    tail.figures.completion_tokens_p50 = Some(369.6); // +8.7%
    tail.figures.completion_tokens_mean = Some(478.0); // +40.6%
    tail.figures.completion_tokens_total = Some(47_804.0); // +40.6%
    let artifacts = [base, tail];
    let comparison = compare(
        &match_artifacts(&artifacts).unwrap(),
        &References::Baseline("A".to_owned()),
        Scope::Headline,
    )
    .unwrap();
    let OutputLength::NotComparable { warning } = &comparison.output_length[0].2 else {
        panic!("{:?}", comparison.output_length);
    };
    assert_eq!(
        warning,
        "B vs A: output-length realization differs (completion tokens mean 478 vs 340 \
         (+40.6%); completion tokens total per run 47,804 vs 34,000 (+40.6%)); throughput is \
         not comparable as it stands"
    );
}

#[test]
fn equal_output_lengths_within_tolerance_are_comparable() {
    let base = artifact("r-a", "A", &[("k", "1")], 1000.0);
    let mut near = artifact("r-b", "B", &[("k", "2")], 1010.0);
    near.figures.completion_tokens_p50 = Some(360.0); // +5.9%
    near.figures.finish_reasons = [("stop".to_owned(), 97), ("length".to_owned(), 3)]
        .into_iter()
        .collect();
    let artifacts = [base, near];
    let comparison = compare(
        &match_artifacts(&artifacts).unwrap(),
        &References::Baseline("A".to_owned()),
        Scope::Headline,
    )
    .unwrap();
    assert_eq!(comparison.output_length[0].2, OutputLength::Comparable);
}

#[test]
fn compare_artifacts_gates_then_matches_then_compares() {
    let plan = plan();
    let selection = selection();
    let artifacts = [
        artifact("r-a", "A", &[("k", "1")], 1000.0),
        artifact("r-b", "B", &[("k", "2")], 1100.0),
    ];
    let comparison = compare_artifacts(
        &artifacts,
        &[],
        &References::Baseline("A".to_owned()),
        &selection,
        &plan,
    )
    .unwrap();
    assert_eq!(
        comparison.label,
        "headline: matched sustained-output artifacts"
    );
    let refusal = compare_artifacts(
        &artifacts,
        &["vendor blog"],
        &References::Baseline("A".to_owned()),
        &selection,
        &plan,
    )
    .unwrap_err();
    assert_eq!(
        refusal.rule.as_deref(),
        Some(plan.headline_comparison_rule.as_str())
    );
    let mut screens = artifacts.clone();
    for screen in &mut screens {
        screen.facts.workload = screen_workload();
        screen.facts.fingerprint = screen.facts.workload.fingerprint();
    }
    let comparison = compare_artifacts(
        &screens,
        &[],
        &References::Baseline("A".to_owned()),
        &selection,
        &plan,
    )
    .unwrap();
    assert_eq!(comparison.label, "within-screen selection only");
}

#[test]
fn repeats_with_different_configs_are_warned() {
    let artifacts = [
        artifact("r-a1", "A", &[("k", "1")], 1000.0),
        artifact("r-a2", "A", &[("k", "3")], 1000.0),
        artifact("r-b", "B", &[("k", "2")], 1000.0),
    ];
    let comparison = compare(
        &match_artifacts(&artifacts).unwrap(),
        &References::Baseline("A".to_owned()),
        Scope::Headline,
    )
    .unwrap();
    assert_eq!(
        comparison.warnings,
        [
            "A: runs r-a1 and r-a2 record different configurations (one variable: k = 1 vs 3); \
             they are not repeats of one cell"
        ]
    );
}

#[test]
fn confounded_arm_is_warned_and_missing_baseline_refused() {
    let artifacts = [
        artifact("r-a", "A", &[("spec_k", "8"), ("chunk", "2048")], 1.0),
        artifact("r-b", "B", &[("spec_k", "12"), ("chunk", "1024")], 1.0),
    ];
    let set = match_artifacts(&artifacts).unwrap();
    let comparison = compare(&set, &References::Baseline("A".to_owned()), Scope::Headline).unwrap();
    assert_eq!(
        comparison.warnings,
        ["B vs A: confounded: differs in chunk, spec_k"]
    );
    let refusal =
        compare(&set, &References::Baseline("C".to_owned()), Scope::Headline).unwrap_err();
    assert_eq!(
        refusal.reason,
        "baseline arm C is not in the matched set (arms: A, B)"
    );
}

#[test]
fn a_comparison_standing_on_a_throttled_run_says_so() {
    let base = artifact("r-a", "A", &[("k", "1")], 1000.0);
    let mut hot = artifact("r-b", "B", &[("k", "2")], 900.0);
    hot.figures
        .energy
        .insert(Window::All, super::super::fixtures::energy(700.0, true));
    let artifacts = [base, hot];
    let comparison = compare(
        &match_artifacts(&artifacts).unwrap(),
        &References::Baseline("A".to_owned()),
        Scope::Headline,
    )
    .unwrap();
    assert_eq!(
        comparison.warnings,
        [
            "run r-b: its GPUs were throttled in the measured window (judged by reasons and SM \
          clock): its figures stand on slowed GPUs"
        ]
    );
}
