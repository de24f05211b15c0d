//! Tests of plan coverage: each stage's claims labelled from fixture comparisons.

use super::super::fixtures::{
    artifact, at_equal_load, full_stats, plan, repeated_topology_stage, screen_artifact, selection,
    topology_stage,
};
use super::super::stage::{headline_comparison, stage_comparisons};
use super::*;

fn coverage_of(artifacts: &[Artifact]) -> PlanCoverage {
    coverage_with_capacity(artifacts, &[])
}

fn coverage_with_capacity(artifacts: &[Artifact], capacity: &[CapacityResult]) -> PlanCoverage {
    coverage_with(artifacts, capacity, &[])
}

fn coverage_with(
    artifacts: &[Artifact],
    capacity: &[CapacityResult],
    aliases: &[(String, String)],
) -> PlanCoverage {
    let stages = stage_comparisons(artifacts, &selection(), &plan(), None);
    let headline = headline_comparison(artifacts, &selection(), &plan());
    plan_coverage(
        &plan(),
        Evidence {
            artifacts,
            stages: &stages,
            headline: headline.as_ref().and_then(|h| h.as_ref().ok()),
            capacity,
            aliases,
            claims: &[],
        },
    )
}

fn stage<'a>(coverage: &'a PlanCoverage, name: &str) -> &'a StageCoverage {
    coverage.stages.iter().find(|s| s.stage == name).unwrap()
}

/// The headline's topologies are offered different loads (DP2: 16 in flight, 50 requests
/// per replica; TP2: 4 in flight per GPU): a throughput claim between them is not testable
/// at equal load, whatever the figures, and points to the capacity search.
#[test]
fn a_topology_claim_at_unequal_load_is_not_testable_and_points_to_capacity() {
    let coverage = coverage_of(&repeated_topology_stage(1900.0));
    let topology = stage(&coverage, "matched topology");
    for claim in topology.selected.iter().chain(&topology.rejected) {
        assert_eq!(claim.verdict, ClaimVerdict::NotTestable, "{}", claim.reason);
        assert!(
            claim
                .reason
                .contains("aggregate throughput not testable at equal load: load differs"),
            "{}",
            claim.reason
        );
        assert!(claim.reason.contains("capacity"), "{}", claim.reason);
    }
    let selected = &topology.selected[0].reason;
    assert!(
        selected.contains(
            "two independent TP1 replicas 16 in flight (8 per replica × 2 replicas, 8 per GPU on \
             2 GPUs), 50 requests per replica"
        ),
        "{selected}"
    );
}

/// A resolved capacity search of `arm` on `gpus` GPUs and `replicas` replicas: capacity
/// `load` per replica, its passing load's three runs of aggregate goodput `goodput` ± 10.
fn search(arm: &str, gpus: u32, replicas: u32, load: f64, goodput: f64) -> CapacityResult {
    super::super::fixtures::capacity_search(
        arm,
        gpus,
        replicas,
        Some(load),
        &[goodput - 10.0, goodput, goodput + 10.0],
    )
}

/// Where the topologies were offered different load, their searches decide a throughput
/// claim: aggregate goodput at capacity between the 2-GPU arms, per GPU against TP1.
#[test]
fn a_topology_claim_is_judged_at_each_arm_s_capacity_when_searched() {
    let artifacts = repeated_topology_stage(1900.0);
    let capacity = [
        search("TP1", 1, 1, 18.0, 400.0),
        search("TP2", 2, 1, 30.0, 700.0),
        search("two independent TP1 replicas", 2, 2, 18.0, 900.0),
    ];
    let coverage = coverage_with_capacity(&artifacts, &capacity);
    let topology = stage(&coverage, "matched topology");
    let selected = &topology.selected[0];
    assert_eq!(
        selected.verdict,
        ClaimVerdict::Supported,
        "{}",
        selected.reason
    );
    assert!(
        selected.reason.contains("judged at each arm's capacity"),
        "{}",
        selected.reason
    );
    // Against TP1 per GPU (450 against 400), against TP2 aggregate (900 against 700).
    assert!(
        selected.reason.contains(
            "TP1 at capacity 400 [375, 425] tok/s per GPU at 18 in flight per GPU (3 runs) (+50"
        ),
        "{}",
        selected.reason
    );
    assert!(
        selected.reason.contains(
            "TP2 at capacity 700 [675, 725] tok/s at 15 in flight per GPU (3 runs) (+200"
        ),
        "{}",
        selected.reason
    );
    // TP2 ahead at capacity contradicts the selection; a search missing leaves it untested.
    let capacity = [
        search("TP1", 1, 1, 18.0, 300.0),
        search("TP2", 2, 1, 30.0, 900.0),
        search("two independent TP1 replicas", 2, 2, 18.0, 800.0),
    ];
    let coverage = coverage_with_capacity(&artifacts, &capacity);
    let selected = &stage(&coverage, "matched topology").selected[0];
    assert_eq!(
        selected.verdict,
        ClaimVerdict::Contradicted,
        "{}",
        selected.reason
    );
    let coverage = coverage_with_capacity(&artifacts, &capacity[..2]);
    let selected = &stage(&coverage, "matched topology").selected[0];
    assert_eq!(
        selected.verdict,
        ClaimVerdict::NotTestable,
        "{}",
        selected.reason
    );
}

/// At equal load (the fixture's arms on one replica and 2 GPUs each) the figures decide.
#[test]
fn a_selection_is_supported_only_by_intervals_that_exclude_zero() {
    let coverage = coverage_of(&at_equal_load(repeated_topology_stage(1900.0)));
    let topology = stage(&coverage, "matched topology");
    assert!(topology.without_evidence.is_empty());
    let selected = &topology.selected[0];
    assert_eq!(selected.clause, "DP2 for aggregate throughput");
    assert_eq!(
        selected.verdict,
        ClaimVerdict::Supported,
        "{}",
        selected.reason
    );
    // Means 1000, 1500, 1900 over three runs each, sd 10: DP2 − TP1 = +900 ± 22.7.
    assert_eq!(
        selected.reason,
        "selection supported: headline, 4096 tokens, C8 per replica: aggregate throughput \
         over all requests, two independent TP1 replicas 1900 [1875, 1925] tok/s vs TP1 1000 \
         [975, 1025] (+900 [+877, +923] tok/s, better), TP2 1500 [1475, 1525] (+400 [+377, +423] tok/s, better) \
         (differences with Welch's 95% CI across runs): better than each by a 95% interval \
         excluding zero, Holm-corrected (2 of the plan's 4 claim differences, \
         Holm-corrected)"
    );
    assert_eq!(selected.differences, 2);
    assert_eq!(coverage.family, 4);
    // The rejection of TP2 is judged on the selection's metric: DP2 beats it.
    assert_eq!(topology.rejected[0].verdict, ClaimVerdict::Supported);
    assert!(!coverage.promotion_authorized);
    assert_eq!(coverage.post_campaign_open_gates.len(), 6);
}

#[test]
fn single_runs_cannot_test_a_throughput_claim() {
    let coverage = coverage_of(&at_equal_load(topology_stage(1900.0)));
    let selected = &stage(&coverage, "matched topology").selected[0];
    assert_eq!(selected.verdict, ClaimVerdict::NotTestable);
    assert!(
        selected
            .reason
            .contains("TP1: single runs, no run-to-run uncertainty"),
        "{}",
        selected.reason
    );
}

#[test]
fn a_faster_rejected_arm_contradicts_the_selection() {
    let coverage = coverage_of(&at_equal_load(repeated_topology_stage(1400.0)));
    let topology = stage(&coverage, "matched topology");
    assert_eq!(topology.selected[0].verdict, ClaimVerdict::Contradicted);
    assert!(
        topology.selected[0]
            .reason
            .contains("TP2 better by a 95% interval excluding zero, Holm-corrected"),
        "{}",
        topology.selected[0].reason
    );
    assert_eq!(topology.rejected[0].verdict, ClaimVerdict::Contradicted);
}

#[test]
fn a_lower_ttft_claim_is_judged_on_mean_ttft() {
    let ttft = |run: &str, arm: &str, config: &[(&str, &str)], mean: f64| {
        let mut a = artifact(run, arm, config, 1000.0);
        a.facts.stage = "target checkpoint".to_owned();
        a.figures
            .metrics
            .insert(MetricId::TtftMs, full_stats(100, mean, 5.0));
        a
    };
    let artifacts = [
        ttft("r1", "RadixArk target-only", &[("spec", "none")], 120.0),
        ttft(
            "r2",
            "RadixArk DFlash2 K8",
            &[("spec", "dflash2"), ("k", "8")],
            90.0,
        ),
        ttft(
            "r3",
            "RadixArk DFlash2 K12 chunk1K",
            &[("spec", "dflash2"), ("k", "12")],
            100.0,
        ),
    ];
    let coverage = coverage_of(&artifacts);
    let checkpoint = stage(&coverage, "target checkpoint");
    let claim = &checkpoint.selected[0];
    assert_eq!(claim.clause, "K8 as lower-TTFT tradeoff");
    // K8's control is K12 (one key apart); both are checked against K8's sweep.
    assert_eq!(claim.verdict, ClaimVerdict::Supported, "{}", claim.reason);
    assert!(
        claim
            .reason
            .contains("mean TTFT over all requests, RadixArk DFlash2 K8 90"),
        "{}",
        claim.reason
    );
    // One sign convention everywhere: arm − other in the unit, the word saying which way is
    // better (a lower TTFT is a negative difference, and better).
    assert!(
        claim.reason.contains("ms, better)") && claim.reason.contains("(−10"),
        "{}",
        claim.reason
    );
}

/// A plan word the campaign file maps to a setting is checked as that setting: the arm the
/// clause names that holds it against the arms one key apart in that key; a word equal to a
/// recorded value is inferred and says so.
#[test]
fn an_aliased_word_is_checked_as_its_setting() {
    let screen = |run: &str, arm: &str, depth: &str, chunk: &str, decode: f64| {
        let mut a = screen_artifact(run, arm, depth, chunk);
        a.figures
            .metrics
            .insert(MetricId::DecodeTps, full_stats(100, decode, 2.0));
        a
    };
    let artifacts = [
        screen("r2", "K12", "12", "2048", 50.0),
        screen("r4", "chunk1K", "12", "1024", 48.0),
        screen("r5", "chunk8K", "12", "8192", 52.0),
    ];
    let aliases = [("Mamba96".to_owned(), "chunked_prefill=2048".to_owned())];
    let coverage = coverage_with(&artifacts, &[], &aliases);
    let claim = &stage(&coverage, "SGLang optimization").selected[0];
    let mamba = claim
        .components
        .iter()
        .find(|c| c.component.starts_with("Mamba96"))
        .unwrap();
    assert_eq!(
        mamba.component,
        "Mamba96 (chunked_prefill=2048, declared alias)"
    );
    // K12 (chunked_prefill=2048) against chunk1K and chunk8K, one key apart in it: chunk8K
    // is faster by an interval excluding zero.
    assert_eq!(
        mamba.verdict,
        ClaimVerdict::Contradicted,
        "{}",
        mamba.reason
    );
    assert!(
        mamba.reason.starts_with("K12 holds chunked_prefill=2048: "),
        "{}",
        mamba.reason
    );
    let other = claim
        .components
        .iter()
        .find(|c| c.component == "extra_buffer")
        .unwrap();
    assert_eq!(other.verdict, ClaimVerdict::NotRead);
    assert!(other.reason.contains("aliases"), "{}", other.reason);
}

#[test]
fn a_selection_of_several_sweeps_is_checked_component_by_component() {
    let screen = |run: &str, arm: &str, depth: &str, chunk: &str, decode: f64| {
        let mut a = screen_artifact(run, arm, depth, chunk);
        a.figures
            .metrics
            .insert(MetricId::DecodeTps, full_stats(100, decode, 2.0));
        a
    };
    let artifacts = [
        screen("r1", "K4", "4", "2048", 40.0),
        screen("r2", "K12", "12", "2048", 50.0),
        screen("r3", "K16", "16", "2048", 45.0),
        screen("r4", "chunk1K", "12", "1024", 48.0),
        screen("r5", "chunk8K", "12", "8192", 52.0),
    ];
    let coverage = coverage_of(&artifacts);
    let claim = &stage(&coverage, "SGLang optimization").selected[0];
    let components: Vec<(&str, ClaimVerdict)> = claim
        .components
        .iter()
        .map(|c| (c.component.as_str(), c.verdict))
        .collect();
    // K12 beats K4 and K16 on decode; chunk1K loses to chunk8K and K12; the other two
    // words name nothing recorded: plan text not read.
    assert_eq!(
        components,
        [
            ("K12", ClaimVerdict::Supported),
            ("chunk1K", ClaimVerdict::Contradicted),
            ("extra_buffer", ClaimVerdict::NotRead),
            ("Mamba96", ClaimVerdict::NotRead),
        ]
    );
    assert_eq!(claim.verdict, ClaimVerdict::Contradicted);
    assert!(
        claim.reason.starts_with(
            "selection contradicted (no metric named: judged on the mean decode rate), component \
         by component: K12 supported"
        ),
        "{}",
        claim.reason
    );
    let k12 = &claim.components[0].reason;
    assert!(
        k12.contains("vs K4") && k12.contains("K16") && !k12.contains("chunk"),
        "{k12}"
    );
}

/// The SGLang optimization sweep's depth arms on decode, `runs` runs each, every run of
/// an arm at its mean + the run's offset.
fn decode_sweep(means: [f64; 3], offsets: &[f64]) -> Vec<Artifact> {
    let mut out = Vec::new();
    for (k, offset) in offsets.iter().enumerate() {
        for (arm, depth, mean) in [("K4", "4", means[0]), ("K12", "12", means[1])]
            .into_iter()
            .chain([("K16", "16", means[2])])
        {
            let mut a = screen_artifact(&format!("{arm}-{k}"), arm, depth, "2048");
            a.figures
                .metrics
                .insert(MetricId::DecodeTps, full_stats(100, mean + offset, 2.0));
            out.push(a);
        }
    }
    out
}

#[test]
fn with_repeats_a_per_request_mean_is_judged_across_runs() {
    // One run each: 100 requests of sd 2 put K12 (50) clear of K16 (49) over requests.
    let single = coverage_of(&decode_sweep([40.0, 50.0, 49.0], &[0.0]));
    let k12 = &stage(&single, "SGLang optimization").selected[0].components[0];
    assert_eq!(k12.verdict, ClaimVerdict::Supported, "{}", k12.reason);
    assert!(
        k12.reason
            .contains("over requests; one run each: no run-to-run variation"),
        "{}",
        k12.reason
    );
    // Three runs each whose means move by ±3 together: across runs K12 − K16 = +1 with
    // sd 3 on both sides, an interval including zero: tested, not resolved. The point
    // estimates still lean.
    let repeats = coverage_of(&decode_sweep([40.0, 50.0, 49.0], &[-3.0, 0.0, 3.0]));
    let k12 = &stage(&repeats, "SGLang optimization").selected[0].components[0];
    assert_eq!(k12.verdict, ClaimVerdict::NotResolved, "{}", k12.reason);
    assert_eq!(k12.verdict.to_string(), "tested, not resolved");
    assert!(
        k12.reason
            .contains("(differences with Welch's 95% CI across runs)")
            && k12.reason.ends_with(
                "the differences are within their 95% intervals or not significant after \
                 Holm's correction; the point estimates put K12 ahead of K4, K16; more runs \
                 would resolve it"
            ),
        "{}",
        k12.reason
    );
}

#[test]
fn an_arm_without_a_one_key_neighbour_is_not_compared_with_confounded_arms() {
    // K12 differs from the only other arm in two keys: no fallback to that comparison.
    let mut artifacts = decode_sweep([40.0, 50.0, 49.0], &[0.0]);
    artifacts.retain(|a| a.facts.arm != "K16");
    let k4 = artifacts.iter_mut().find(|a| a.facts.arm == "K4").unwrap();
    k4.facts.config = [("spec_depth", "4"), ("chunked_prefill", "1024")]
        .into_iter()
        .collect();
    let coverage = coverage_of(&artifacts);
    let k12 = &stage(&coverage, "SGLang optimization").selected[0].components[0];
    assert_eq!(k12.verdict, ClaimVerdict::NotTestable);
    assert!(
        k12.reason.contains("no arm one key apart from K12"),
        "{}",
        k12.reason
    );
}

#[test]
fn claims_about_unrecorded_arms_are_not_testable() {
    let coverage = coverage_of(&[]);
    let checkpoint = stage(&coverage, "target checkpoint");
    assert_eq!(checkpoint.selected[0].verdict, ClaimVerdict::NotTestable);
    assert_eq!(
        checkpoint.selected[0].reason,
        "selection not testable: no artifact for RadixArk DFlash2 K8"
    );
    let runtime = stage(&coverage, "alternate runtime");
    assert_eq!(
        runtime.selected[1].reason,
        "no artifact for kelnei vLLM 0.27.1 MTP2, matched no-spec"
    );
}

/// The plan's stage 2 (K4, K12, chunk1K on the screen) and stage 4 (RadixArk target-only,
/// K8, K12 chunk1K on the headline, three runs each), TTFT after the first wave per run:
/// K8's `(mean, p50)` and K12 chunk1K's, run by run; p95 is the mean + 18.
fn checkpoint_stage(k8: [(f64, f64); 3], k12_chunk1k: [(f64, f64); 3]) -> Vec<Artifact> {
    let mut out = vec![
        screen_artifact("s-k4", "K4", "4", "2048"),
        screen_artifact("s-k12", "K12", "12", "2048"),
        screen_artifact("s-c1", "chunk1K", "12", "1024"),
    ];
    for k in 0..3 {
        for (arm, depth, chunk, (mean, p50)) in [
            ("RadixArk target-only", "0", "2048", (150.0, 150.0)),
            ("RadixArk DFlash2 K8", "8", "2048", k8[k]),
            ("RadixArk DFlash2 K12 chunk1K", "12", "1024", k12_chunk1k[k]),
        ] {
            let config = [
                ("checkpoint", "RadixArk"),
                ("spec_depth", depth),
                ("chunked_prefill", chunk),
            ];
            let mut a = artifact(&format!("{arm}-{k}"), arm, &config, 1000.0);
            a.facts.stage = "target checkpoint".to_owned();
            let mut stats = full_stats(100, mean, 10.0);
            stats.p50 = Some(p50);
            a.figures
                .after_first_wave
                .metrics
                .insert(MetricId::TtftMs, stats);
            out.push(a);
        }
    }
    out
}

/// "K8 as lower-TTFT tradeoff" names no comparator: it is tested against the arm realising
/// stage 2's selection on its checkpoint (K12 chunk1K), not against the target-only arm one
/// key apart, on mean, p50 and p95 after the first wave.
#[test]
fn a_selection_is_tested_against_the_earlier_selection_it_would_replace() {
    let coverage = coverage_of(&checkpoint_stage(
        [(90.0, 90.0), (92.0, 92.0), (94.0, 94.0)],
        [(120.0, 120.0), (122.0, 122.0), (124.0, 124.0)],
    ));
    let claim = &stage(&coverage, "target checkpoint").selected[0];
    assert_eq!(claim.verdict, ClaimVerdict::Supported, "{}", claim.reason);
    assert!(
        claim.reason.contains(
            "against RadixArk DFlash2 K12 chunk1K, the configuration it would replace \
             (stage 2 (SGLang optimization) selected \"K12 chunk1K extra_buffer Mamba96\", \
             realised here as chunked_prefill=1024, spec_depth=12), on TTFT (ms)"
        ),
        "{}",
        claim.reason
    );
    assert!(
        claim.reason.contains(
            "RadixArk DFlash2 K8 − RadixArk DFlash2 K12 chunk1K after the first wave: mean −30"
        ) && claim.reason.contains("p50 −30")
            && claim.reason.contains("p95 −30"),
        "{}",
        claim.reason
    );
    assert!(
        !claim.reason.contains("RadixArk target-only"),
        "{}",
        claim.reason
    );
    assert_eq!(claim.differences, 3);
}

/// Resolved on one statistic and not the others: "tested, not resolved", statistic by
/// statistic, with the runs that would resolve the rest (a difference of 10 with an sd of
/// 20 across runs on each side: 32 runs per arm put Welch's interval clear of zero).
#[test]
fn a_claim_resolved_on_some_statistics_says_which_and_what_would_resolve_the_rest() {
    let coverage = coverage_of(&checkpoint_stage(
        [(90.0, 80.0), (110.0, 81.0), (130.0, 82.0)],
        [(100.0, 110.0), (120.0, 111.0), (140.0, 112.0)],
    ));
    let claim = &stage(&coverage, "target checkpoint").selected[0];
    assert_eq!(claim.verdict, ClaimVerdict::NotResolved, "{}", claim.reason);
    assert!(
        claim.reason.contains("resolved on p50; not on mean, p95"),
        "{}",
        claim.reason
    );
    assert!(
        claim.reason.contains("p50 −30 [")
            && claim.reason.contains("ms, better")
            && claim.reason.contains("mean −10 ["),
        "{}",
        claim.reason
    );
    assert!(
        claim
            .reason
            .contains("an uncorrected 95% interval clears zero with mean about 32 runs per arm, p95 about 32 runs per arm"),
        "{}",
        claim.reason
    );
    // Worse on a statistic contradicts the claim.
    let coverage = coverage_of(&checkpoint_stage(
        [(120.0, 120.0), (122.0, 122.0), (124.0, 124.0)],
        [(90.0, 90.0), (92.0, 92.0), (94.0, 94.0)],
    ));
    let claim = &stage(&coverage, "target checkpoint").selected[0];
    assert_eq!(
        claim.verdict,
        ClaimVerdict::Contradicted,
        "{}",
        claim.reason
    );
}

/// A difference whose own interval excludes zero is not "better" once the plan's claims test
/// several: Holm's step-down correction over the family decides. K12 − K4 = +7.5 across
/// three runs each (p ≈ 0.04) is better alone, not resolved beside K12 − K16 (m = 2,
/// threshold 0.025 for the smaller p-value).
#[test]
fn claim_differences_are_corrected_for_multiplicity() {
    let family = coverage_of(&decode_sweep([42.5, 50.0, 49.0], &[-3.0, 0.0, 3.0]));
    let k12 = &stage(&family, "SGLang optimization").selected[0].components[0];
    assert_eq!(k12.verdict, ClaimVerdict::NotResolved, "{}", k12.reason);
    assert!(
        k12.reason.contains("K4 42.5 [")
            && k12
                .reason
                .contains("(+7.50 [+0.700, +14.3] tok/s, not resolved)"),
        "{}",
        k12.reason
    );
    assert_eq!(family.family, 2);

    let mut alone = decode_sweep([42.5, 50.0, 49.0], &[-3.0, 0.0, 3.0]);
    alone.retain(|a| a.facts.arm != "K16");
    let alone = coverage_of(&alone);
    let k12 = &stage(&alone, "SGLang optimization").selected[0].components[0];
    assert_eq!(k12.verdict, ClaimVerdict::Supported, "{}", k12.reason);
    assert_eq!(alone.family, 1);
}

/// A claim the campaign file maps is tested as declared: against the named arm, on the named
/// metric and statistic, in place of the incumbent.
#[test]
fn a_declared_claim_is_tested_against_its_declared_comparator() {
    let artifacts = checkpoint_stage(
        [(90.0, 90.0), (92.0, 92.0), (94.0, 94.0)],
        [(120.0, 120.0), (122.0, 122.0), (124.0, 124.0)],
    );
    let stages = stage_comparisons(&artifacts, &selection(), &plan(), None);
    let declared = [DeclaredClaim {
        stage: "target checkpoint".to_owned(),
        text: "k8 as lower-ttft tradeoff ".to_owned(),
        against: Some("RadixArk target-only".to_owned()),
        metric: Some("ttft".to_owned()),
        statistic: Some("p50".to_owned()),
    }];
    let coverage = plan_coverage(
        &plan(),
        Evidence {
            artifacts: &artifacts,
            stages: &stages,
            headline: None,
            capacity: &[],
            aliases: &[],
            claims: &declared,
        },
    );
    let claim = &stage(&coverage, "target checkpoint").selected[0];
    assert_eq!(claim.verdict, ClaimVerdict::Supported, "{}", claim.reason);
    assert!(
        claim.reason.contains(
            "against RadixArk target-only, as the campaign file's claims declare, on p50 TTFT \
             (ms)"
        ) && claim.reason.contains("p50 −58"),
        "{}",
        claim.reason
    );
    assert_eq!(claim.differences, 1);
}

/// A rejection tested against a declared comparator is the mirror image of a selection: the
/// rejected arm worse than it supports the rejection, better contradicts it; a comparator
/// naming the arm itself is ignored.
#[test]
fn a_declared_comparator_judges_a_rejection_as_its_mirror_image() {
    let artifacts = at_equal_load(repeated_topology_stage(1900.0));
    let stages = stage_comparisons(&artifacts, &selection(), &plan(), None);
    let rejected = |against: &str| {
        let declared = [DeclaredClaim {
            stage: "matched topology".to_owned(),
            text: "TP2".to_owned(),
            against: Some(against.to_owned()),
            metric: Some("throughput".to_owned()),
            statistic: None,
        }];
        let coverage = plan_coverage(
            &plan(),
            Evidence {
                artifacts: &artifacts,
                stages: &stages,
                headline: None,
                capacity: &[],
                aliases: &[],
                claims: &declared,
            },
        );
        stage(&coverage, "matched topology").rejected[0].clone()
    };
    // TP2 1500 against DP2 1900: worse, the rejection holds.
    let c = rejected("two independent TP1 replicas");
    assert_eq!(c.verdict, ClaimVerdict::Supported, "{}", c.reason);
    assert!(
        c.reason.contains("as the campaign file's claims declare"),
        "{}",
        c.reason
    );
    // Against TP1 1000: better, the rejection is contradicted.
    let c = rejected("TP1");
    assert_eq!(c.verdict, ClaimVerdict::Contradicted, "{}", c.reason);
    // Against itself: ignored, the sweep decides.
    let c = rejected("TP2");
    assert!(
        !c.reason.contains("as the campaign file's claims declare"),
        "{}",
        c.reason
    );
}
