//! Test inputs: the campaign seeds loaded through the manifest module, and artifacts built
//! on the headline workload with figures that satisfy every rule, for tests to break one
//! field at a time.

use std::collections::BTreeMap;

use crate::artifact::run::{ArmConfig, Outcome, Status, Workload};
use crate::manifest::{RunPlan, WorkloadManifest};

use super::headline::HeadlineSelection;
use super::input::{
    Artifact, ArtifactFacts, ArtifactFigures, CanaryResult, FunctionalResult, MetricId,
    RequestCounts, RequestValue, Stats,
};

pub fn manifest() -> WorkloadManifest {
    WorkloadManifest::load(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/sample-data/workload-manifest.json"
    ))
    .unwrap()
}

pub fn plan() -> RunPlan {
    RunPlan::load(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/sample-data/run-plan.json"
    ))
    .unwrap()
}

pub fn selection() -> HeadlineSelection {
    HeadlineSelection::from_manifest(&manifest()).unwrap()
}

/// The headline workload of the seeds.
pub fn headline_workload() -> Workload {
    crate::artifact::testing::workload()
}

/// A screen workload (natural completion, 4K C4, 8 requests).
pub fn screen_workload() -> Workload {
    Workload {
        class: "optimization-screen".to_owned(),
        concurrency_per_replica: 4,
        total_requests: 8,
        response_words: None,
        canaries: false,
        ..headline_workload()
    }
}

/// Stats whose every field is set, centred on `mean`.
pub fn full_stats(n: u64, mean: f64, sd: f64) -> Stats {
    Stats {
        n,
        mean: Some(mean),
        sd: Some(sd),
        ci95_low: Some(mean - sd / 5.0),
        ci95_high: Some(mean + sd / 5.0),
        min: Some(mean - 2.0 * sd),
        p1: Some(mean - 2.0 * sd),
        p5: Some(mean - 1.8 * sd),
        p25: Some(mean - sd),
        p50: Some(mean),
        p75: Some(mean + sd),
        p90: Some(mean + 1.5 * sd),
        p95: Some(mean + 1.8 * sd),
        p99: Some(mean + 2.0 * sd),
        max: Some(mean + 2.0 * sd),
        intervals: Default::default(),
    }
}

/// A complete headline artifact of `arm` with `config`, 100 requests all ok, own canaries,
/// full statistics, all functional checks passed, throughput `tps`.
pub fn artifact(run_id: &str, arm: &str, config: &[(&str, &str)], tps: f64) -> Artifact {
    let metrics = MetricId::ALL
        .into_iter()
        .map(|metric| (metric, full_stats(100, 100.0, 10.0)))
        .collect();
    let facts = facts(run_id, arm, "matched topology", config, headline_workload());
    artifact_of(facts, metrics, tps)
}

/// The facts of a complete run `run_id` of `arm` with `config` in `stage` on `workload`.
pub fn facts(
    run_id: &str,
    arm: &str,
    stage: &str,
    config: &[(&str, &str)],
    workload: Workload,
) -> ArtifactFacts {
    ArtifactFacts {
        run_id: run_id.to_owned(),
        campaign_id: "2026-09-04-qwen38-27b-pro6000-possibility".to_owned(),
        arm: arm.to_owned(),
        stage: stage.to_owned(),
        config: config.iter().copied().collect::<ArmConfig>(),
        defaults: ArmConfig::default(),
        runtime: "sglang 0.6.1".to_owned(),
        fingerprint: workload.fingerprint(),
        workload,
        status: Status::Complete,
        replica_count: 1,
    }
}

/// The artifact of `facts` whose every rule passes: every request of its workload ok (with
/// its own canary where the workload has canaries), `metrics` in both windows, all
/// functional checks passed, throughput `tps`.
pub fn artifact_of(facts: ArtifactFacts, metrics: BTreeMap<MetricId, Stats>, tps: f64) -> Artifact {
    let n = facts.workload.total_requests;
    let canaries = facts.workload.canaries;
    let figures = ArtifactFigures {
        after_first_wave: crate::rules::WindowFigures {
            metrics: metrics.clone(),
            aggregate_output_tps: Some(tps),
        },
        first_wave: Default::default(),
        first_wave_makespan_ms: None,
        metrics,
        per_request: BTreeMap::new(),
        aggregate_output_tps: Some(tps),
        aggregate_output_tps_per_replica: Vec::new(),
        succeeded_without_usage: 0,
        parse_errors: Vec::new(),
        completion_tokens_p50: Some(340.0),
        completion_tokens_mean: Some(340.0),
        completion_tokens_total: Some(34_000.0),
        finish_reasons: [("stop".to_owned(), n)].into_iter().collect(),
        requests: RequestCounts {
            measured: n,
            ok: n,
            failed: BTreeMap::new(),
            ok_with_canary: if canaries { n } else { 0 },
        },
        canaries: (0..n as i64)
            .filter(|_| canaries)
            .map(|request_index| CanaryResult {
                request_index,
                own_present: true,
                ..CanaryResult::default()
            })
            .collect(),
        restarts: Vec::new(),
        restart_undetectable: Vec::new(),
        server_errors: Vec::new(),
        spec_decode: Vec::new(),
        functional: ["structured_json", "tools", "responses"]
            .into_iter()
            .map(|check| FunctionalResult {
                check: check.to_owned(),
                request_index: None,
                passed: true,
                reason: None,
                failure: None,
            })
            .collect(),
        goodput: Default::default(),
        energy: Default::default(),
    };
    Artifact { facts, figures }
}

/// Per-request values `index → f(index)` for indices 0..n.
pub fn per_request(n: i64, f: impl Fn(i64) -> f64) -> Vec<RequestValue> {
    (0..n)
        .map(|request_index| RequestValue {
            request_index,
            value: f(request_index),
        })
        .collect()
}
/// An optimization-screen artifact of `arm` in the plan's `SGLang optimization` stage, at
/// speculative depth `depth` and chunked-prefill size `chunk`.
pub fn screen_artifact(run_id: &str, arm: &str, depth: &str, chunk: &str) -> Artifact {
    let mut a = artifact(
        run_id,
        arm,
        &[("spec_depth", depth), ("chunked_prefill", chunk)],
        100.0,
    );
    a.facts.stage = "SGLang optimization".to_owned();
    a.facts.workload = screen_workload();
    a.facts.fingerprint = a.facts.workload.fingerprint();
    a
}

/// Mark `count` requests failed with `outcome` (no server error bodies).
pub fn fail_requests(artifact: &mut Artifact, outcome: Outcome, count: u64) {
    let requests = &mut artifact.figures.requests;
    requests.ok -= count;
    *requests.failed.entry(outcome).or_default() += count;
}

/// Record that request `index` of `artifact` ended with `outcome` and the error text `body`.
pub fn server_error(artifact: &mut Artifact, index: i64, outcome: Outcome, body: &str) {
    artifact
        .figures
        .server_errors
        .push(super::input::ServerError {
            request_index: index,
            outcome,
            body: body.to_owned(),
        });
}

/// The three arms of the seed plan's `matched topology` stage, throughputs TP1 1000,
/// TP2 1500 and DP2 (two TP1 replicas) `dp2_tps`.
pub fn topology_stage(dp2_tps: f64) -> Vec<Artifact> {
    let mut dp2 = artifact(
        "r-dp2",
        "two independent TP1 replicas",
        &[("topology", "DP2")],
        dp2_tps,
    );
    dp2.facts.replica_count = 2;
    vec![
        artifact("r-tp1", "TP1", &[("topology", "TP1")], 1000.0),
        artifact("r-tp2", "TP2", &[("topology", "TP2")], 1500.0),
        dp2,
    ]
}

/// `artifacts` made to hold one load: one replica on 2 GPUs each (a `gpus` key, which is
/// never a difference), so a claim's figures are judged rather than refused as "load
/// differs" (what the topology fixtures are otherwise). A `DP2` arm then records one
/// replica, which its own consistency rule reports.
pub fn at_equal_load(artifacts: Vec<Artifact>) -> Vec<Artifact> {
    artifacts
        .into_iter()
        .map(|mut a| {
            a.facts.replica_count = 1;
            a.facts.config.0.push(("gpus".to_owned(), "2".to_owned()));
            a
        })
        .collect()
}

/// [`topology_stage`] recorded three times, each arm's throughputs spread by ±10 around
/// its figure (sd 10 across runs).
pub fn repeated_topology_stage(dp2_tps: f64) -> Vec<Artifact> {
    let mut out = Vec::new();
    for (k, delta) in [-10.0, 0.0, 10.0].into_iter().enumerate() {
        for mut a in topology_stage(dp2_tps) {
            a.facts.run_id = format!("{}-{k}", a.facts.run_id);
            a.figures.aggregate_output_tps = a.figures.aggregate_output_tps.map(|t| t + delta);
            out.push(a);
        }
    }
    out
}

/// A capacity search of `arm` on `gpus` GPUs and `replicas` replicas: resolved at
/// `capacity` requests in flight per replica (shown to miss at 4 more per GPU), or not
/// resolved without one; its passing load's runs reached aggregate goodput `goodput` (one
/// value per run), and goodput per GPU is their mean ÷ GPUs, ±1.
pub fn capacity_search(
    arm: &str,
    gpus: u32,
    replicas: u32,
    capacity: Option<f64>,
    goodput: &[f64],
) -> crate::artifact::capacity::CapacityResult {
    use crate::artifact::capacity::{
        Bracket, CapacityResult, CapacityStatus, Observation, PerGpu, Side, Vary, Window,
    };
    let per_gpu = |load: f64| load * f64::from(replicas) / f64::from(gpus);
    let load = capacity.unwrap_or(8.0);
    let runs: Vec<Observation> = goodput
        .iter()
        .enumerate()
        .map(|(i, g)| Observation {
            load,
            repeat: i as u32 + 1,
            run_id: format!("{arm}-{i}"),
            dir: Default::default(),
            attained: 60,
            requests: 60,
            goodput_tps: Some(*g),
        })
        .collect();
    let mean = goodput.iter().sum::<f64>() / goodput.len() as f64 / f64::from(gpus);
    CapacityResult {
        arm: arm.into(),
        vary: Vary::Concurrency,
        min: 4.0,
        max: 64.0,
        target: 0.9,
        window: Window::AfterFirstWave,
        judged: Default::default(),
        slo: vec!["ttft_ms<=2000".into()],
        requests_per_probe: None,
        window_requests: Some(60),
        repeats: 3,
        replicas: Some(replicas),
        gpus: Some(gpus),
        status: if capacity.is_some() {
            CapacityStatus::Resolved
        } else {
            CapacityStatus::NotResolved
        },
        capacity,
        capacity_per_gpu: capacity.map(per_gpu),
        goodput_per_gpu: Some(PerGpu {
            mean,
            low: Some(mean - 1.0),
            high: Some(mean + 1.0),
            runs: goodput.len() as u32,
        }),
        bracket: Some(Bracket {
            passing: Some(Side {
                load,
                runs: runs.clone(),
                attained: 180,
                requests: 180,
                share: 1.0,
                low: 0.98,
                high: 1.0,
            }),
            // Shown to miss 4 requests per GPU above the capacity.
            failing: capacity.map(|c| Side {
                load: (per_gpu(c) + 4.0) * f64::from(gpus) / f64::from(replicas),
                runs: Vec::new(),
                attained: 100,
                requests: 180,
                share: 0.55,
                low: 0.48,
                high: 0.63,
            }),
            resolved: capacity.is_some(),
        }),
        probes: runs,
        verdict: String::new(),
    }
}

/// The arm's GPUs over a window: 1,000 J, at a `limit_w` power limit, throttled or not.
pub fn energy(limit_w: f64, throttled: bool) -> super::input::EnergyFigures {
    super::input::EnergyFigures {
        energy_j: 1000.0,
        bound_j: Some(10.0),
        j_per_output_token: Some(0.5),
        throttled: Some(throttled),
        throttle_judged_by: Some("reasons and SM clock".to_owned()),
        at_power_limit_share: Some(0.0),
        power_limit_w: Some(limit_w),
        power_limit_min_w: Some(limit_w),
        too_coarse: false,
        partial: false,
    }
}
