//! Plan coverage: each stage's arms mapped to artifacts by arm name, which arms have
//! evidence, and each stage's `selected` / `rejected` claim checked against the stage's
//! comparisons and labelled **supported**, **contradicted** or **not testable**, with the
//! figures.
//!
//! A claim is read clause by clause (clauses split at `;`). A clause names an arm when it
//! contains the arm's whole name, a word of the arm's name no other arm of the stage has
//! (`K8` → `RadixArk DFlash2 K8`), or a configuration value only that arm has (`DP2` → the
//! arm whose config says `topology=DP2`); a word with a digit or an underscore that names
//! no recorded arm or setting (`Mamba96`, `extra_buffer`) is a component nothing recorded can
//! test. It names a metric by its words: `TTFT` (mean TTFT, lower is better), `throughput`,
//! `output` or `faster` (aggregate output throughput, higher is better); a clause naming none
//! is judged on the mean decode rate (the figure speculative depth and chunked prefill move,
//! per request, so one run carries its uncertainty), and says so.
//!
//! Each named arm is checked against its sweep in the stage's comparisons (every
//! performance workload the stage recorded, the `all` window: the plan's figures): the arms
//! differing from it in one key — in a selection combining several sweeps' winners (`K12
//! chunk1K …`), only the key no other component of the clause already covers (K12 against
//! K4 and K16, chunk1K against K12 and chunk8K). The selected arm is **supported** when it is
//! better than every other arm of its sweep with a 95% interval of the difference that
//! excludes zero (Welch's interval of the means: across runs where both arms have repeats,
//! over requests where an arm is one run, and said so; for throughput always across runs,
//! which needs repeats); **contradicted** when another arm is better by such an interval;
//! **not testable** otherwise (within the uncertainty, single runs, no artifact, nothing
//! recorded to name, no arm one key apart), saying which way the point estimates lean. An
//! arm never falls back to arms differing from it in several keys: they confound them.
//! A rejection is the mirror image. A clause naming a runtime (`SGLang remains faster …`) is
//! checked on the headline workload across runtimes, the best arm of that runtime against the
//! stage's arms, and says it is not a one-variable control. Not testable is information, not
//! missing evidence; a contradicted claim fails the check.
//!
//! A selected arm whose stage holds the configuration it would replace (the arm realising
//! the most recent earlier selection on the same checkpoint) is tested against that arm
//! instead, on every headline statistic of the metric (`incumbent.rs`).
//!
//! Every difference a claim check tests belongs to one family: it counts as better or worse
//! only below Holm's step-down cut-off over all of the plan's claim differences (family-wise
//! error 5%), and each verdict says how many differences it was chosen from.
//!
//! `sweep.rs` judges one arm against its sweep on one comparison; `alias.rs` reads plan words
//! that name a setting rather than an arm.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::manifest::{RunPlan, Stage};
use std::cell::RefCell;

use crate::stats::{
    Interval, LEVEL, Moments, Percentile, Sample, holm_cutoff, mean_interval, welch_interval,
};

use super::compare::ArmMetric;
use super::compare::{Comparison, ThroughputEstimate};
use super::control::{Control, control};
use super::input::{Artifact, MetricId, Window, num};
use super::load::LoadBasis;
use super::naming::{config_values, named_arms, words};
use super::stage::StageComparison;

mod alias;
mod declared;
mod incumbent;
mod sweep;

use self::alias::aliased_component;
pub use self::declared::{DeclaredClaim, METRICS as CLAIM_METRICS};
use self::incumbent::{Question, against_comparator, incumbent, own_keys, together};
use self::sweep::{against_sweep, signed};
use crate::artifact::capacity::CapacityResult;

/// The figure a claim is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ClaimMetric {
    /// Aggregate output throughput, tokens per second; higher is better.
    AggregateThroughput,
    /// Mean TTFT, milliseconds; lower is better.
    Ttft,
    /// Mean per-request decode rate, tokens per second; higher is better.
    Decode,
}

impl ClaimMetric {
    fn name(self) -> &'static str {
        match self {
            ClaimMetric::AggregateThroughput => "aggregate throughput",
            ClaimMetric::Ttft => "mean TTFT",
            ClaimMetric::Decode => "mean decode rate",
        }
    }

    /// The quantity without its statistic, for a test on several statistics.
    fn quantity(self) -> &'static str {
        match self {
            ClaimMetric::AggregateThroughput => "aggregate throughput",
            ClaimMetric::Ttft => "TTFT",
            ClaimMetric::Decode => "decode rate",
        }
    }

    fn unit(self) -> &'static str {
        match self {
            ClaimMetric::AggregateThroughput | ClaimMetric::Decode => "tok/s",
            ClaimMetric::Ttft => "ms",
        }
    }

    fn higher_is_better(self) -> bool {
        !matches!(self, ClaimMetric::Ttft)
    }

    /// What two arms' loads must hold equal for a difference of this figure to speak.
    fn basis(self) -> LoadBasis {
        match self {
            ClaimMetric::AggregateThroughput => LoadBasis::Aggregate,
            ClaimMetric::Ttft | ClaimMetric::Decode => LoadBasis::PerReplica,
        }
    }

    /// The interval a difference of this figure carries: across runs for throughput and
    /// wherever both arms have repeats; over requests otherwise.
    fn interval_method(self, across_runs: bool) -> &'static str {
        match (self, across_runs) {
            (ClaimMetric::AggregateThroughput, _) | (_, true) => "Welch's 95% CI across runs",
            _ => {
                "Welch's 95% CI over requests; one run each: no run-to-run variation in the \
                 interval"
            }
        }
    }

    /// The metric a clause names, if any.
    pub fn from_words(clause: &str) -> Option<Self> {
        let lower = clause.to_lowercase();
        if lower.contains("ttft") {
            Some(ClaimMetric::Ttft)
        } else if lower.contains("throughput")
            || lower.contains("output")
            || lower.contains("faster")
        {
            Some(ClaimMetric::AggregateThroughput)
        } else if lower.contains("decode") {
            Some(ClaimMetric::Decode)
        } else {
            None
        }
    }

    /// An arm's estimate with the moments a difference's interval needs (`None` for a
    /// single-run throughput: no run-to-run spread). A per-request mean takes the runs'
    /// means as its sample when `across_runs` (both arms of the difference have repeats),
    /// else the pooled requests.
    fn estimate(
        self,
        c: &Comparison,
        arm: &str,
        across_runs: bool,
    ) -> Option<(f64, Option<Moments>, String)> {
        match self {
            ClaimMetric::AggregateThroughput => {
                let t = c.throughput(arm, Window::All)?;
                match &t.estimate {
                    ThroughputEstimate::SingleRun { output_tps, .. } => {
                        Some((*output_tps, None, num_short(*output_tps)))
                    }
                    ThroughputEstimate::Repeats {
                        runs,
                        mean,
                        sd,
                        interval,
                    } => Some((
                        *mean,
                        sd.and_then(|sd| Moments::new(*runs as u64, *mean, sd).ok()),
                        with_interval(*mean, *interval),
                    )),
                    ThroughputEstimate::Missing => None,
                }
            }
            ClaimMetric::Ttft | ClaimMetric::Decode => {
                let metric = if self == ClaimMetric::Ttft {
                    MetricId::TtftMs
                } else {
                    MetricId::DecodeTps
                };
                let m = c.metrics.iter().find(|m| m.metric == metric)?;
                let a = m.arm(arm, Window::All)?;
                if across_runs {
                    let means: Vec<f64> = a.runs.iter().filter_map(|r| r.stats.mean).collect();
                    if means.len() != a.runs.len() {
                        return None;
                    }
                    let moments = Sample::new(means).ok()?.moments()?;
                    let text = with_interval(moments.mean(), mean_interval(moments));
                    return Some((moments.mean(), Some(moments), text));
                }
                let pooled = a.pooled?;
                let text = with_interval(pooled.mean(), a.pooled_ci);
                Some((pooled.mean(), Some(pooled), text))
            }
        }
    }
}

/// An estimate with its interval, when it has one: `58.3 [47.2, 69.5]`.
fn with_interval(estimate: f64, interval: Option<Interval>) -> String {
    match interval {
        Some(i) => format!(
            "{} [{}, {}]",
            num_short(estimate),
            num_short(i.low),
            num_short(i.high)
        ),
        None => num_short(estimate),
    }
}

/// Three significant figures for a reason text.
fn num_short(value: f64) -> String {
    let a = value.abs();
    let rounded = if a >= 100.0 {
        value.round()
    } else if a >= 10.0 {
        (value * 10.0).round() / 10.0
    } else {
        (value * 100.0).round() / 100.0
    };
    num(rounded)
}

/// Which way a difference is resolved, after the correction for multiplicity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resolved {
    Better,
    Worse,
    Unresolved,
}

/// The claims' differences as one family: every difference a claim check tests (arm against
/// arm, statistic by statistic) is significant only below Holm's step-down cut-off over the
/// whole plan's differences, so that the family-wise chance of any false "better" or "worse"
/// stays at 5%. The first pass ([`Holm::collecting`]) uses each interval as it is and keeps
/// the p-values; the second is judged at the cut-off they give.
#[derive(Debug)]
struct Holm {
    cutoff: f64,
    /// The family's size (the first pass's count; 0 while collecting).
    family: usize,
    p_values: RefCell<Vec<f64>>,
}

impl Holm {
    /// Uncorrected (p < 5%, the interval excluding zero), keeping every p-value.
    fn collecting() -> Self {
        Holm {
            cutoff: 1.0 - LEVEL,
            family: 0,
            p_values: RefCell::new(Vec::new()),
        }
    }

    /// Corrected over the p-values a first pass collected.
    fn corrected(first: &Holm) -> Self {
        Holm {
            cutoff: holm_cutoff(&first.p_values.borrow(), 1.0 - LEVEL),
            family: first.tested(),
            p_values: RefCell::new(Vec::new()),
        }
    }

    /// How a difference oriented better-positive is resolved, counted in the family.
    fn side(&self, oriented: &Interval) -> Resolved {
        let p = oriented.p_value().unwrap_or(1.0);
        self.p_values.borrow_mut().push(p);
        if p < self.cutoff && oriented.estimate > 0.0 {
            Resolved::Better
        } else if p < self.cutoff && oriented.estimate < 0.0 {
            Resolved::Worse
        } else {
            Resolved::Unresolved
        }
    }

    /// Differences tested so far.
    fn tested(&self) -> usize {
        self.p_values.borrow().len()
    }
}

/// What the evidence says of a claim: one of five labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ClaimVerdict {
    /// Every tested difference agrees with the claim by a 95% interval excluding zero.
    Supported,
    /// The recorded figures contradict the claim (a 95% interval excludes it).
    Contradicted,
    /// Tested, with intervals on every side, but some include zero: more runs or requests
    /// could resolve it.
    NotResolved,
    /// The data cannot speak to it: single runs, no artifact, arms offered different load,
    /// no arm one key apart.
    NotTestable,
    /// Plan text anvil could not read as an arm or a recorded setting (say what to write
    /// instead: an arm's name, a setting, or an alias in the campaign file).
    NotRead,
}

impl std::fmt::Display for ClaimVerdict {
    /// The verdict's name as `check` prints it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ClaimVerdict::Supported => "supported",
            ClaimVerdict::Contradicted => "contradicted",
            ClaimVerdict::NotResolved => "tested, not resolved",
            ClaimVerdict::NotTestable => "not testable",
            ClaimVerdict::NotRead => "plan text not read",
        })
    }
}

/// How a claim component that names no arm or recorded setting begins its reason (plan
/// text that could not be read, as opposed to evidence that is missing).
pub const UNNAMED_COMPONENT: &str = "no recorded arm or setting is named";

/// One component of a clause (an arm, or a word naming something not recorded), checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ComponentCheck {
    pub component: String,
    pub verdict: ClaimVerdict,
    pub reason: String,
}

/// One clause of a `selected` or `rejected` claim, checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClaimCheck {
    /// The clause as the plan writes it.
    pub clause: String,
    pub verdict: ClaimVerdict,
    pub reason: String,
    /// Each component's verdict, when the clause names several.
    pub components: Vec<ComponentCheck>,
    /// The differences (arm against arm, statistic by statistic) the verdict was chosen
    /// from; each is significant only after Holm's correction over the plan's family.
    pub differences: usize,
}

/// One arm of a stage and its artifacts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArmEvidence {
    pub arm: String,
    /// Run ids of the arm's artifacts; empty when it has none.
    pub run_ids: Vec<String>,
}

/// One stage's coverage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StageCoverage {
    pub order: u64,
    pub stage: String,
    pub status: String,
    pub arms: Vec<ArmEvidence>,
    /// Arms of the stage with no artifact.
    pub without_evidence: Vec<String>,
    pub selected: Vec<ClaimCheck>,
    pub rejected: Vec<ClaimCheck>,
}

/// The whole plan's coverage, with the plan's promotion flag and open gates as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlanCoverage {
    pub stages: Vec<StageCoverage>,
    /// Every difference the claim checks tested: the family Holm's correction is over.
    pub family: usize,
    pub promotion_authorized: bool,
    pub post_campaign_open_gates: Vec<String>,
}

impl PlanCoverage {
    /// Every claim check of every stage.
    pub fn claims(&self) -> impl Iterator<Item = &ClaimCheck> {
        self.stages
            .iter()
            .flat_map(|s| s.selected.iter().chain(&s.rejected))
    }
}

/// What claims are checked against: every stage's comparisons and the headline comparison.
#[derive(Debug, Clone, Copy)]
pub struct Evidence<'a> {
    pub artifacts: &'a [Artifact],
    pub stages: &'a [StageComparison],
    pub headline: Option<&'a Comparison>,
    /// The capacity searches' results: where arms were offered different load, a throughput
    /// claim between them is judged at each arm's capacity.
    pub capacity: &'a [CapacityResult],
    /// Plan words mapped to a recorded setting (`"Mamba96"` → `"mamba=extra_buffer96"`), as
    /// the campaign file's `aliases` declare them.
    pub aliases: &'a [(String, String)],
    /// Claims mapped to a comparator, metric and statistic, as the campaign file declares
    /// them (`claims`).
    pub claims: &'a [DeclaredClaim],
}

impl<'a> Evidence<'a> {
    /// The comparisons of `stage`.
    fn comparisons_of(&self, stage: &Stage) -> Vec<&'a StageComparison> {
        self.stages
            .iter()
            .filter(|s| s.stage == stage.stage)
            .collect()
    }
}

/// Map the plan's stages to artifacts and check their claims against the comparisons.
///
/// Two passes: the first collects every difference's p-value, the second judges each at
/// Holm's cut-off over all of them (see [`Holm`]).
pub fn plan_coverage(plan: &RunPlan, evidence: Evidence<'_>) -> PlanCoverage {
    let order = plan.stages_in_order();
    let pass = |holm: &Holm| -> Vec<StageCoverage> {
        order
            .iter()
            .enumerate()
            .map(|(i, stage)| stage_coverage(stage, &order[..i], evidence, holm))
            .collect()
    };
    let first = Holm::collecting();
    pass(&first);
    let holm = Holm::corrected(&first);
    let stages = pass(&holm);
    PlanCoverage {
        stages,
        family: holm.family,
        promotion_authorized: plan.promotion_authorized,
        post_campaign_open_gates: plan.post_campaign_open_gates.clone(),
    }
}

fn stage_coverage(
    stage: &Stage,
    earlier: &[&Stage],
    evidence: Evidence<'_>,
    holm: &Holm,
) -> StageCoverage {
    let artifacts = evidence.artifacts;
    let arms: Vec<ArmEvidence> = stage
        .arms()
        .iter()
        .map(|arm| ArmEvidence {
            arm: arm.clone(),
            run_ids: artifacts
                .iter()
                .filter(|a| a.facts.arm == *arm)
                .map(|a| a.facts.run_id.clone())
                .collect(),
        })
        .collect();
    let without_evidence = arms
        .iter()
        .filter(|a| a.run_ids.is_empty())
        .map(|a| a.arm.clone())
        .collect();
    let selected_metric = stage
        .selected
        .as_deref()
        .and_then(|claim| claim.split(';').find_map(ClaimMetric::from_words));
    let check = |claim: Option<&str>, rejection: bool| -> Vec<ClaimCheck> {
        claim
            .map(|claim| {
                claim
                    .split(';')
                    .map(str::trim)
                    .filter(|clause| !clause.is_empty())
                    .map(|clause| {
                        let metric = ClaimMetric::from_words(clause).or(if rejection {
                            selected_metric
                        } else {
                            None
                        });
                        let before = holm.tested();
                        let mut check =
                            check_clause(clause, metric, rejection, stage, earlier, evidence, holm);
                        check.differences = holm.tested() - before;
                        if check.differences > 0 && holm.family > 0 {
                            check.reason = format!(
                                "{} ({} of the plan's {} claim difference{}, Holm-corrected)",
                                check.reason,
                                check.differences,
                                holm.family,
                                if holm.family == 1 { "" } else { "s" }
                            );
                        }
                        check
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    StageCoverage {
        order: stage.order.get(),
        stage: stage.stage.clone(),
        status: stage.status.clone(),
        selected: check(stage.selected.as_deref(), false),
        rejected: check(stage.rejected.as_deref(), true),
        arms,
        without_evidence,
    }
}

/// Words of a clause that name something specific (a digit or an underscore in them) but no
/// arm of the stage, no recorded setting and no arm's name word: components nothing
/// recorded can test.
fn unrecorded_components(clause: &str, stage: &Stage, artifacts: &[Artifact]) -> Vec<String> {
    let known: BTreeSet<String> = stage
        .arms()
        .iter()
        .flat_map(|arm| {
            let mut w: Vec<String> = words(arm).into_iter().map(str::to_owned).collect();
            w.extend(config_values(arm, artifacts));
            w
        })
        .collect();
    words(clause)
        .into_iter()
        .filter(|w| w.chars().any(|c| c.is_ascii_digit() || c == '_'))
        .filter(|w| !known.contains(*w))
        .map(str::to_owned)
        .collect()
}

/// The key on which two arms of a comparison differ, when they differ in exactly one.
fn one_key(c: &[&Artifact], a: &str, b: &str) -> Option<String> {
    let config = |arm: &str| {
        c.iter()
            .find(|x| x.facts.arm == arm)
            .map(|x| x.facts.effective_config())
    };
    match control(&config(a)?, &config(b)?) {
        Control::OneVariable { key, .. } => Some(key),
        _ => None,
    }
}

/// The worst of several verdicts: contradicted, then not testable, then plan text not
/// read, then tested but not resolved, then supported.
fn combine(verdicts: impl IntoIterator<Item = ClaimVerdict>) -> Option<ClaimVerdict> {
    let rank = |v: ClaimVerdict| match v {
        ClaimVerdict::Contradicted => 4,
        ClaimVerdict::NotTestable => 3,
        ClaimVerdict::NotRead => 2,
        ClaimVerdict::NotResolved => 1,
        ClaimVerdict::Supported => 0,
    };
    verdicts.into_iter().max_by_key(|v| rank(*v))
}

/// One named arm of a clause against its sweep in every comparison of the stage that holds
/// it; `covered` are the keys other components of the clause stand for.
fn check_arm(
    arm: &str,
    metric: ClaimMetric,
    rejection: bool,
    covered: &BTreeSet<String>,
    comparisons: &[&StageComparison],
    evidence: Evidence<'_>,
    holm: &Holm,
) -> (ClaimVerdict, String) {
    let (artifacts, capacity) = (evidence.artifacts, evidence.capacity);
    let mut verdicts = Vec::new();
    let mut reasons = Vec::new();
    for s in comparisons {
        let Ok(c) = &s.result else { continue };
        if !c.arms.iter().any(|a| a == arm) {
            continue;
        }
        let members: Vec<&Artifact> = artifacts
            .iter()
            .filter(|a| a.facts.fingerprint == s.fingerprint)
            .collect();
        let sweep: Vec<String> = c
            .arms
            .iter()
            .filter(|other| *other != arm)
            .filter(|other| one_key(&members, arm, other).is_some_and(|k| !covered.contains(&k)))
            .cloned()
            .collect();
        if sweep.is_empty() {
            // Arms differing in several keys confound them: no figure here tests the claim.
            if c.arms.iter().any(|o| o != arm) {
                verdicts.push(ClaimVerdict::NotTestable);
                reasons.push(format!(
                    "{}: no arm one key apart from {arm} (the others differ in several keys, \
                     which a comparison cannot separate)",
                    s.workload
                ));
            }
            continue;
        }
        let (v, reason) = against_sweep(c, metric, arm, &sweep, rejection, capacity, holm);
        verdicts.push(v);
        reasons.push(format!("{}: {reason}", s.workload));
    }
    match combine(verdicts) {
        Some(v) => (v, reasons.join("; ")),
        None => (
            ClaimVerdict::NotTestable,
            format!(
                "{arm} was recorded on no performance workload beside another arm of its stage"
            ),
        ),
    }
}

/// A clause naming a runtime the stage's arms do not run: the best arm of that runtime on the
/// headline workload against each of the stage's arms there.
fn check_runtime(
    clause: &str,
    metric: ClaimMetric,
    stage: &Stage,
    evidence: Evidence<'_>,
    holm: &Holm,
) -> Option<ClaimCheck> {
    let runtime_of = |arm: &str| {
        evidence
            .artifacts
            .iter()
            .find(|a| a.facts.arm == arm)
            .map(|a| runtime_word(&a.facts.runtime))
    };
    let stage_runtimes: BTreeSet<String> =
        stage.arms().iter().filter_map(|a| runtime_of(a)).collect();
    let lower: Vec<String> = words(clause).iter().map(|w| w.to_lowercase()).collect();
    let runtime = evidence
        .artifacts
        .iter()
        .map(|a| runtime_word(&a.facts.runtime))
        .find(|r| lower.contains(r) && !stage_runtimes.contains(r))?;
    let result = |verdict, reason: String| ClaimCheck {
        clause: clause.to_owned(),
        verdict,
        reason,
        components: Vec::new(),
        differences: 0,
    };
    let Some(c) = evidence.headline else {
        return Some(result(
            ClaimVerdict::NotTestable,
            format!("no headline comparison to compare {runtime} with the stage's arms on"),
        ));
    };
    let ours: Vec<String> = c
        .arms
        .iter()
        .filter(|a| stage.arms().contains(a))
        .cloned()
        .collect();
    // Matched on GPUs: an arm of the other runtime on as many GPUs as the stage's arms.
    let gpus = |arm: &str| {
        c.throughput(arm, Window::All)
            .and_then(|t| t.gpus)
            .map(|g| g.count)
    };
    let stage_gpus: BTreeSet<Option<u32>> = ours.iter().map(|a| gpus(a)).collect();
    let best = c
        .arms
        .iter()
        .filter(|a| runtime_of(a).as_deref() == Some(runtime.as_str()))
        .filter(|a| stage_gpus.contains(&gpus(a)))
        .filter_map(|a| metric.estimate(c, a, false).map(|(v, _, _)| (a, v)))
        .max_by(|x, y| {
            let order = x.1.total_cmp(&y.1);
            if metric.higher_is_better() {
                order
            } else {
                order.reverse()
            }
        })
        .map(|(a, _)| a.clone());
    let (Some(best), false) = (best, ours.is_empty()) else {
        return Some(result(
            ClaimVerdict::NotTestable,
            format!(
                "{runtime} and the stage's arms are not both recorded on the headline workload"
            ),
        ));
    };
    let (verdict, reason) = against_sweep(c, metric, &best, &ours, false, evidence.capacity, holm);
    Some(result(
        verdict,
        format!(
            "across runtimes on the headline workload (not a one-variable control), the best \
             {runtime} arm on as many GPUs: {reason}"
        ),
    ))
}

/// The first word of a runtime, lower case: `sglang (anvil-sim)` → `sglang`.
fn runtime_word(runtime: &str) -> String {
    runtime
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_lowercase()
}

fn check_clause(
    clause: &str,
    metric: Option<ClaimMetric>,
    rejection: bool,
    stage: &Stage,
    earlier: &[&Stage],
    evidence: Evidence<'_>,
    holm: &Holm,
) -> ClaimCheck {
    let artifacts = evidence.artifacts;
    let named = named_arms(clause, stage, artifacts);
    let declared = evidence
        .claims
        .iter()
        .find(|d| d.maps(&stage.stage, clause));
    let metric = declared.and_then(DeclaredClaim::metric).or(metric);
    let (metric, defaulted) = match metric {
        Some(m) => (m, false),
        None => (ClaimMetric::Decode, true),
    };
    if named.is_empty()
        && let Some(check) = check_runtime(clause, metric, stage, evidence, holm)
    {
        return check;
    }
    let comparisons = evidence.comparisons_of(stage);
    let mut components = Vec::new();
    for (arm, _, covered) in own_keys(&named, &comparisons, artifacts) {
        let arm = arm.as_str();
        let has_artifacts = artifacts.iter().any(|a| a.facts.arm == *arm);
        // The incumbent only where the two were recorded together: else the sweep.
        let incumbent = (!rejection)
            .then(|| incumbent(arm, stage, earlier, evidence))
            .flatten()
            .filter(|i| !named.contains(&i.arm.as_str()))
            .filter(|i| together(arm, &i.arm, &comparisons));
        // A declared comparator that is the arm itself compares nothing: ignored.
        let against = declared
            .and_then(|d| d.against.as_deref())
            .filter(|other| *other != arm);
        let (verdict, reason) = if let (true, Some(other)) = (has_artifacts, against) {
            against_comparator(
                arm,
                other,
                &format!("against {other}, as the campaign file's claims declare"),
                Question {
                    metric,
                    only: declared.and_then(DeclaredClaim::statistic),
                    rejection,
                },
                &comparisons,
                holm,
            )
        } else if let (true, Some(incumbent)) = (has_artifacts, &incumbent) {
            against_comparator(
                arm,
                &incumbent.arm,
                &incumbent.describe(),
                Question {
                    metric,
                    only: None,
                    rejection,
                },
                &comparisons,
                holm,
            )
        } else if has_artifacts {
            check_arm(
                arm,
                metric,
                rejection,
                &covered,
                &comparisons,
                evidence,
                holm,
            )
        } else {
            (ClaimVerdict::NotTestable, format!("no artifact for {arm}"))
        };
        components.push(ComponentCheck {
            component: (*arm).to_owned(),
            verdict,
            reason,
        });
    }
    for word in unrecorded_components(clause, stage, artifacts) {
        if let Some(check) =
            aliased_component(&word, &named, metric, rejection, stage, evidence, holm)
        {
            components.push(check);
            continue;
        }
        components.push(ComponentCheck {
            reason: format!(
                "{UNNAMED_COMPONENT} {word}; write an arm's name or a recorded setting \
                 (key=value) instead, or map it in the campaign file's aliases"
            ),
            component: word,
            verdict: ClaimVerdict::NotRead,
        });
    }
    let what = if rejection { "rejection" } else { "selection" };
    let Some(verdict) = combine(components.iter().map(|c| c.verdict)) else {
        let missing: Vec<&str> = stage
            .arms()
            .iter()
            .filter(|a| !artifacts.iter().any(|x| x.facts.arm == **a))
            .map(String::as_str)
            .collect();
        let reason = if missing.len() == stage.arms().len() && !missing.is_empty() {
            format!("no artifact for {}", missing.join(", "))
        } else {
            format!("\"{clause}\" names none of the stage's arms")
        };
        return ClaimCheck {
            clause: clause.to_owned(),
            verdict: ClaimVerdict::NotTestable,
            reason,
            components,
            differences: 0,
        };
    };
    let note = if defaulted {
        format!(" (no metric named: judged on the {})", metric.name())
    } else {
        String::new()
    };
    let reason = match components.as_slice() {
        [one] => format!("{what} {}{note}: {}", one.verdict, one.reason),
        several => format!(
            "{what} {}{note}, component by component: {}",
            verdict,
            several
                .iter()
                .map(|c| format!("{} {} ({})", c.component, c.verdict, c.reason))
                .collect::<Vec<_>>()
                .join("; ")
        ),
    };
    ClaimCheck {
        clause: clause.to_owned(),
        verdict,
        reason,
        components: if components.len() > 1 {
            components
        } else {
            Vec::new()
        },
        differences: 0,
    }
}

#[cfg(test)]
mod tests;
