//! The report's first screen: what a reviewer decides from. Whether the data is synthetic
//! (from what the servers said about themselves, never from a flag), what was tested, each
//! objective's leader on the headline comparison with its figure, interval and whether the
//! lead is resolved, each stage's claim checked, what may not be claimed, the evidence
//! coverage (plan arms × cells, manifest levels), and the gaps split into evidence that is
//! missing (with the command that records it) and plan text anvil could not read (with what
//! to write instead).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::report::format::fmt_num;
pub use crate::report::input::PlannedCells;
use crate::report::input::ReportInput;
use crate::rules::Outcome;
use crate::rules::coverage::{ClaimCheck, ClaimVerdict, UNNAMED_COMPONENT};
use crate::rules::input::Artifact;
use crate::rules::objective::{Objective, objectives};

use super::objectives::{CapacityRowView, ObjectiveView, capacity_row, objective_views};

/// What the simulator reports as the owner of its model (`/v1/models` `owned_by`).
pub const SIMULATOR_OWNER: &str = "anvil-sim";

/// The first screen.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DecisionView {
    /// Said when any server that answered was the simulator.
    pub synthetic: Option<String>,
    /// Arms, cells, runs, GPUs, SLOs.
    pub tested: String,
    /// `complete`, `incomplete`, `stop rule fired`, `rule failed`, and its CSS class.
    pub outcome: String,
    pub outcome_class: String,
    /// One sentence: why the outcome is what it is.
    pub outcome_reason: String,
    /// The opening paragraph: the configuration the data supports under the declared
    /// objective, or that none is declared.
    pub recommendation: String,
    /// What would change it.
    pub recommendation_caveats: Vec<String>,
    /// `pass` when a configuration is supported, else `missing`.
    pub recommendation_class: String,
    /// The workload the objectives are ranked on.
    pub objectives_scope: String,
    pub objectives: Vec<ObjectiveView>,
    /// The topology decision at capacity: its verdict and the ranked searches.
    pub capacity_verdict: String,
    pub capacity: Vec<CapacityRowView>,
    pub claims: Vec<StageClaimView>,
    pub not_claimable: Vec<String>,
    pub coverage: CoverageView,
    pub gaps: Vec<GapView>,
    pub unread: Vec<UnreadView>,
}

/// One stage claim, checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageClaimView {
    pub stage: String,
    /// `selected` or `rejected`.
    pub side: String,
    pub clause: String,
    pub verdict: String,
    pub verdict_class: String,
    /// The deciding sentence, short.
    pub basis: String,
    /// The full reason (a tooltip, and the stage section).
    pub reason: String,
}

/// The evidence-coverage grid.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoverageView {
    /// Column headings: the cells recorded or planned, short.
    pub cells: Vec<String>,
    /// The full cell id of each column (tooltips).
    pub cell_ids: Vec<String>,
    pub rows: Vec<CoverageRow>,
    /// The manifest's levels: `context 81,920 tokens` → `✓ 2 arms` / `not recorded`.
    pub levels: Vec<LevelView>,
    /// Where "required" comes from: the campaign file, or the stage's other arms.
    pub basis: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoverageRow {
    pub stage: String,
    pub arm: String,
    /// Per column: `✓`, `✓ 3` (runs), `✗`, or `–` (not required).
    pub marks: Vec<CoverageMark>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoverageMark {
    pub text: String,
    /// `pass`, `fail`, `na`.
    pub class: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelView {
    pub level: String,
    pub covered: String,
    pub class: String,
}

/// Evidence that is missing, with the command that records it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GapView {
    pub what: String,
    pub command: String,
}

/// Plan text that could not be read, with what to write instead.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnreadView {
    pub stage: String,
    pub text: String,
    pub why: String,
    pub instead: String,
}

/// The short column name of a cell: `headline`, `screen 4K C4`, `context 80K C8`,
/// `functional`, with the API after it when the cell id names one (`headline responses`).
pub fn cell_label(cell_id: &str) -> String {
    let mut parts = cell_id.split('.');
    let class = parts.next().unwrap_or(cell_id);
    let (mut ctx, mut conc, mut api) = (None, None, None);
    for p in parts {
        if let Some(v) = p.strip_prefix("ctx").and_then(|v| v.parse::<u64>().ok()) {
            ctx = Some(v);
        } else if let Some(v) = p.strip_prefix('c').and_then(|v| v.parse::<u64>().ok()) {
            conc = Some(v);
        } else if let Some(a) = api_of_part(p) {
            api = Some(a);
        }
    }
    let k = ctx
        .map(|c| format!("{}K", (c as f64 / 1024.0).round()))
        .unwrap_or_default();
    let c = conc.map(|c| format!("C{c}")).unwrap_or_default();
    let label = match class {
        crate::rules::headline::HEADLINE_CLASS => "headline".to_owned(),
        crate::rules::headline::FUNCTIONAL_CLASS => "functional".to_owned(),
        crate::rules::headline::CONTEXT_CURVE_CLASS => format!("context {k} {c}"),
        "optimization-screen" => format!("screen {k} {c}"),
        other => format!("{other} {k} {c}"),
    };
    let label = label.trim();
    match api {
        Some(api) => format!("{label} {}", api.as_str()),
        None => label.to_owned(),
    }
}

/// The API a part of a cell id names (`Api::cell_id_suffix` without its dot): `responses`
/// or `completions`; chat cells carry none.
fn api_of_part(part: &str) -> Option<crate::artifact::Api> {
    crate::artifact::Api::parse(part).filter(|a| *a != crate::artifact::Api::Chat)
}

/// Whether any run was served by the simulator, and the banner that says so.
fn synthetic(input: &ReportInput<'_>) -> Option<String> {
    let total = input.runs.len();
    let simulated = input
        .runs
        .iter()
        .filter(|r| r.owners.iter().any(|o| o == SIMULATOR_OWNER))
        .count();
    if simulated == 0 {
        return None;
    }
    let runtimes: BTreeSet<&str> = input
        .artifacts
        .iter()
        .map(|a| a.facts.runtime.as_str())
        .collect();
    let runtimes: Vec<&str> = runtimes.into_iter().collect();
    let scope = if simulated == total {
        format!("every one of the {total} runs")
    } else {
        format!("{simulated} of the {total} runs")
    };
    Some(format!(
        "SIMULATED DATA: {scope} was served by {SIMULATOR_OWNER}, anvil's simulator (the \
         servers' model list says owned_by {SIMULATOR_OWNER}; runtimes as labelled: {}). Its \
         timing model decides every figure: nothing here measures a model, a serving runtime \
         or a GPU.",
        runtimes.join(", ")
    ))
}

fn tested(input: &ReportInput<'_>) -> String {
    let plan_arms: Vec<String> = input
        .plan
        .stages_in_order()
        .iter()
        .flat_map(|s| s.arms().to_vec())
        .collect();
    let recorded: BTreeSet<&str> = input
        .artifacts
        .iter()
        .map(|a| a.facts.arm.as_str())
        .collect();
    let planned_recorded = plan_arms
        .iter()
        .filter(|a| recorded.contains(a.as_str()))
        .count();
    let cells: BTreeSet<(&str, &str)> = input
        .runs
        .iter()
        .filter_map(|r| {
            let arm = input
                .artifacts
                .iter()
                .find(|a| a.facts.run_id == r.run_id)?;
            Some((arm.facts.arm.as_str(), r.cell_id.as_str()))
        })
        .collect();
    let requests: u64 = input
        .artifacts
        .iter()
        .map(|a| a.facts.workload.total_requests)
        .sum();
    let gpus: BTreeSet<u32> = input
        .artifacts
        .iter()
        .filter_map(|a| a.facts.gpus().map(|g| g.count))
        .collect();
    let gpus = match (gpus.first(), gpus.last()) {
        (Some(a), Some(b)) if a == b => format!("{a} GPU per arm"),
        (Some(a), Some(b)) => format!("{a}–{b} GPUs per arm"),
        _ => "GPUs not stated".to_owned(),
    };
    let slos = if input.slos.is_empty() {
        "no SLOs given".to_owned()
    } else {
        format!("SLOs {}", input.slos)
    };
    // How repeats were ordered: interleaved across arms keeps drift off any one arm.
    let order = match input.planned.map(|p| p.order.as_str()) {
        Some("interleaved") => "; repeats interleaved across each stage's arms",
        Some("blocked") => "; repeats back to back per arm (order: blocked)",
        _ => "",
    };
    format!(
        "{planned_recorded} of the plan's {} arms recorded, {} cells, {} runs, {} measured \
         requests, {gpus}; {slos}{order}.",
        plan_arms.len(),
        cells.len(),
        input.artifacts.len(),
        crate::report::format::fmt_count(requests),
    )
}

/// The deciding part of a claim's reason: the text after its last `: `, at most 160
/// characters.
fn basis(reason: &str) -> String {
    let tail = reason.rsplit_once("): ").map_or(reason, |(_, t)| t);
    let tail = tail.trim_end_matches(')');
    if tail.chars().count() > 160 {
        let cut: String = tail.chars().take(159).collect();
        format!("{cut}…")
    } else {
        tail.to_owned()
    }
}

fn claim_basis(claim: &ClaimCheck) -> String {
    if claim.components.len() > 1 {
        claim
            .components
            .iter()
            .map(|c| {
                let v = if c.reason.starts_with(UNNAMED_COMPONENT) {
                    "not read".to_owned()
                } else {
                    c.verdict.to_string()
                };
                format!("{} {v}", c.component)
            })
            .collect::<Vec<_>>()
            .join(", ")
    } else {
        basis(&claim.reason)
    }
}

/// The CSS class of a claim's verdict: `pass`, `fail`, `missing`.
pub fn claim_class(v: ClaimVerdict) -> &'static str {
    match v {
        ClaimVerdict::Supported => "pass",
        ClaimVerdict::Contradicted => "fail",
        ClaimVerdict::NotResolved | ClaimVerdict::NotTestable | ClaimVerdict::NotRead => "missing",
    }
}

/// The cell id of each run (from `run.json`).
fn cell_of<'a>(input: &'a ReportInput<'_>, run_id: &str) -> Option<&'a str> {
    input
        .runs
        .iter()
        .find(|r| r.run_id == run_id)
        .map(|r| r.cell_id.as_str())
}

/// Probe cells of a capacity search are shown as one column per arm elsewhere.
pub fn is_probe(cell_id: &str) -> bool {
    cell_id.contains(".probe-")
}

fn coverage(input: &ReportInput<'_>) -> CoverageView {
    let stages = input.plan.stages_in_order();
    // Recorded (arm, cell) → runs.
    let mut recorded: BTreeMap<(String, String), usize> = BTreeMap::new();
    for a in input.artifacts {
        if let Some(cell) = cell_of(input, &a.facts.run_id).filter(|c| !is_probe(c)) {
            *recorded
                .entry((a.facts.arm.clone(), cell.to_owned()))
                .or_default() += 1;
        }
    }
    let planned: Option<BTreeSet<(String, String)>> = input.planned.map(|p| {
        p.cells
            .iter()
            .filter(|(_, _, c)| !is_probe(c))
            .map(|(_, a, c)| (a.clone(), c.clone()))
            .collect()
    });
    let mut cells: Vec<String> = recorded.keys().map(|(_, c)| c.clone()).collect();
    if let Some(p) = &planned {
        cells.extend(p.iter().map(|(_, c)| c.clone()));
    }
    cells.sort_by_key(|c| column_rank(c));
    cells.dedup();
    let mut rows = Vec::new();
    for stage in &stages {
        let arms = stage.arms();
        // Without a campaign file: a cell is required of an arm when another arm of its
        // stage recorded it (the stage compares its arms on it).
        let stage_cells: BTreeSet<&String> = recorded
            .keys()
            .filter(|(a, _)| arms.contains(a))
            .map(|(_, c)| c)
            .collect();
        for arm in arms {
            let marks = cells
                .iter()
                .map(|cell| {
                    let key = (arm.clone(), cell.clone());
                    let required = match &planned {
                        Some(p) => p.contains(&key),
                        None => stage_cells.contains(cell),
                    };
                    match (recorded.get(&key), required) {
                        (Some(1), _) => mark("✓", "pass"),
                        (Some(n), _) => mark(&format!("✓ {n}"), "pass"),
                        (None, true) => mark("✗", "fail"),
                        (None, false) => mark("–", "na"),
                    }
                })
                .collect();
            rows.push(CoverageRow {
                stage: stage.stage.clone(),
                arm: arm.clone(),
                marks,
            });
        }
    }
    let arms_at = |pred: &dyn Fn(&Artifact) -> bool| -> usize {
        input
            .artifacts
            .iter()
            .filter(|a| pred(a))
            .map(|a| a.facts.arm.as_str())
            .collect::<BTreeSet<_>>()
            .len()
    };
    let level = |name: String, n: usize| LevelView {
        level: name,
        covered: match n {
            0 => "not recorded".to_owned(),
            1 => "✓ 1 arm".to_owned(),
            n => format!("✓ {n} arms"),
        },
        class: if n == 0 { "missing" } else { "pass" }.to_owned(),
    };
    let selection = &input.manifest.selection;
    let mut levels: Vec<LevelView> = selection
        .contexts_actual_prompt_token_targets
        .iter()
        .map(|c| {
            let c = c.get();
            level(
                format!("context {} tokens", fmt_num(Some(c as f64))),
                arms_at(&|a| a.facts.workload.prompt_tokens_target == c),
            )
        })
        .collect();
    levels.extend(selection.concurrency.iter().map(|c| {
        let c = c.get();
        level(
            format!("concurrency {c} per replica"),
            arms_at(&|a| u64::from(a.facts.workload.concurrency_per_replica) == c),
        )
    }));
    CoverageView {
        cell_ids: cells.clone(),
        cells: cells.iter().map(|c| cell_label(c)).collect(),
        rows,
        levels,
        basis: match input.planned {
            Some(p) => format!("✗ = planned in {} and not recorded", p.file),
            None => {
                "✗ = another arm of the stage recorded it (no campaign file found beside the data)"
                    .to_owned()
            }
        },
    }
}

fn mark(text: &str, class: &str) -> CoverageMark {
    CoverageMark {
        text: text.to_owned(),
        class: class.to_owned(),
    }
}

/// Columns: headline first, then screens, contexts by size, functional last.
fn column_rank(cell: &str) -> (u8, u64, u64, String) {
    let class = cell.split('.').next().unwrap_or(cell);
    let rank = match class {
        crate::rules::headline::HEADLINE_CLASS => 0,
        "optimization-screen" => 1,
        crate::rules::headline::CONTEXT_CURVE_CLASS => 2,
        crate::rules::headline::FUNCTIONAL_CLASS => 4,
        _ => 3,
    };
    let num = |prefix: &str| {
        cell.split('.')
            .find_map(|p| p.strip_prefix(prefix).and_then(|v| v.parse::<u64>().ok()))
            .unwrap_or(0)
    };
    (rank, num("ctx"), num("c"), cell.to_owned())
}

fn gaps(input: &ReportInput<'_>) -> Vec<GapView> {
    let mut out = Vec::new();
    let recorded: BTreeSet<(String, String)> = input
        .artifacts
        .iter()
        .filter_map(|a| {
            cell_of(input, &a.facts.run_id).map(|c| (a.facts.arm.clone(), c.to_owned()))
        })
        .collect();
    if let Some(planned) = input.planned {
        // Missing planned cells, grouped by cell: "record A, B on <cell>".
        let mut by_cell: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        for (stage, arm, cell) in &planned.cells {
            if !recorded.contains(&(arm.clone(), cell.clone())) {
                let arms = by_cell.entry((stage.clone(), cell.clone())).or_default();
                if !arms.contains(arm) {
                    arms.push(arm.clone());
                }
            }
        }
        for ((stage, cell), arms) in by_cell {
            out.push(GapView {
                what: format!("stage {stage}: {} on {cell}", arms.join(", ")),
                command: format!(
                    "anvil campaign run {} --out {} --resume",
                    crate::shell::quote(&planned.file),
                    crate::shell::quote(&planned.out)
                ),
            });
        }
        return out;
    }
    for stage in &input.check.coverage.stages {
        if stage.without_evidence.is_empty() {
            continue;
        }
        // The cells the stage's other arms recorded, with their workloads: what the missing
        // arms need to be compared on them.
        let siblings: BTreeMap<String, &crate::artifact::Workload> = input
            .artifacts
            .iter()
            .filter(|a| stage.arms.iter().any(|x| x.arm == a.facts.arm))
            .filter_map(|a| {
                cell_of(input, &a.facts.run_id)
                    .filter(|c| !is_probe(c))
                    .map(|c| (c.to_owned(), &a.facts.workload))
            })
            .collect();
        for arm in &stage.without_evidence {
            if siblings.is_empty() {
                out.push(GapView {
                    what: format!("stage {}: {arm} (no arm of the stage recorded a cell)", stage.stage),
                    command: format!(
                        "anvil-capture cells --manifest {} (then anvil-capture run … --arm {} --stage {})",
                        crate::shell::quote(input.manifest_file),
                        crate::shell::quote(arm),
                        crate::shell::quote(&stage.stage)
                    ),
                });
                continue;
            }
            for (cell, workload) in &siblings {
                out.push(GapView {
                    what: format!("stage {}: {arm} on {cell}", stage.stage),
                    command: capture_command(input, arm, &stage.stage, workload),
                });
            }
        }
    }
    out
}

/// The `anvil-capture run` command line that records the cell of `workload` for `arm` (the
/// arm's server URL is the one thing left to fill in; a class declared beside the manifest
/// is read from the data folder's `campaign.json`, else from `CAMPAIGN_FILE` to fill in).
fn capture_command(
    input: &ReportInput<'_>,
    arm: &str,
    stage: &str,
    workload: &crate::artifact::Workload,
) -> String {
    let mut request = crate::capture::request::RunRequest::for_workload(workload);
    let data = input.data_folder.split(", ").next().unwrap_or(".");
    request.manifest = input.manifest_file.into();
    request.arm.name = arm.to_owned();
    request.arm.stage = Some(stage.to_owned());
    request.endpoints = vec!["URL".to_owned()];
    request.out = data.into();
    if workload.is_declared_class() {
        let beside = std::path::Path::new(data).join("campaign.json");
        request.cell.workloads = Some(if beside.is_file() {
            beside
        } else {
            "CAMPAIGN_FILE".into()
        });
    }
    crate::shell::join(&request.to_argv())
}

fn unread(input: &ReportInput<'_>) -> Vec<UnreadView> {
    let mut out = Vec::new();
    for stage in &input.check.coverage.stages {
        let arms: Vec<String> = stage.arms.iter().map(|a| a.arm.clone()).collect();
        for (side, claim) in stage
            .selected
            .iter()
            .map(|c| ("selected", c))
            .chain(stage.rejected.iter().map(|c| ("rejected", c)))
        {
            let words: Vec<&str> = claim
                .components
                .iter()
                .filter(|c| c.reason.starts_with(UNNAMED_COMPONENT))
                .map(|c| c.component.as_str())
                .collect();
            if words.is_empty() {
                continue;
            }
            out.push(UnreadView {
                stage: stage.stage.clone(),
                text: format!("{side} \"{}\": {}", claim.clause, words.join(", ")),
                why: "names no arm of the stage and no recorded setting".to_owned(),
                instead: format!(
                    "name the arms as the stage lists them ({}), or a setting as key=value \
                     that an arm's config carries",
                    arms.join(", ")
                ),
            });
        }
    }
    out
}

/// How a first-screen verdict resting on one run per arm is flagged.
const SINGLE_RUN_FLAG: &str = "single runs: understates uncertainty";

/// Whether a claim's reason rests on one run per arm (intervals over requests, no
/// run-to-run variation in them).
fn single_runs(reason: &str) -> bool {
    reason.contains("one run each") || reason.contains("single runs")
}

fn not_claimable(
    input: &ReportInput<'_>,
    objectives: &[Objective],
    synthetic: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    if synthetic {
        out.push(
            "anything about the named model, runtimes or GPUs: the data is simulated".to_owned(),
        );
    }
    if !input.plan.promotion_authorized {
        out.push(
            "promotion of any configuration: the run plan does not authorize it \
             (promotion_authorized: false)"
                .to_owned(),
        );
    }
    for stop in &input.check.stops {
        out.push(format!(
            "anything past the stop rule that fired: {}",
            stop.reason
        ));
    }
    for stage in &input.check.coverage.stages {
        if !stage.without_evidence.is_empty() {
            out.push(format!(
                "stage {}: its arms {} have no artifacts (the plan says \"{}\")",
                stage.stage,
                stage.without_evidence.join(", "),
                stage.status
            ));
        }
    }
    // The plan's claims the data does not support, in one line: each with its label, and
    // flagged where it rests on single runs (its intervals hold no run-to-run variation).
    let unsupported: Vec<String> = input
        .check
        .coverage
        .claims()
        .filter(|c| c.verdict != ClaimVerdict::Supported)
        .map(|c| {
            let single = if single_runs(&c.reason) {
                "; single runs: understates uncertainty"
            } else {
                ""
            };
            format!("\"{}\" ({}{single})", c.clause, c.verdict)
        })
        .collect();
    if !unsupported.is_empty() {
        out.push(format!("the plan's claims {}", unsupported.join(", ")));
    }
    let undecided = |at_other_load: bool| -> Vec<String> {
        objectives
            .iter()
            .filter(|o| o.runner_up.is_some() && !o.resolved && !o.every_arm_attains)
            .filter(|o| o.load_differs.is_some() == at_other_load)
            .map(|o| format!("{} ({} leads)", o.kind.label(), o.leader.arm))
            .collect()
    };
    let other_load = undecided(true);
    if !other_load.is_empty() {
        out.push(format!(
            "a winner on {}: the runner-up ran at a different load",
            other_load.join(", ")
        ));
    }
    let unresolved = undecided(false);
    if !unresolved.is_empty() {
        out.push(format!(
            "a winner on {}: not resolved",
            unresolved.join(", ")
        ));
    }
    let gates = &input.plan.post_campaign_open_gates;
    if !gates.is_empty() {
        out.push(format!(
            "what the plan's {} open gates leave open (listed under Plan)",
            gates.len()
        ));
    }
    out
}

/// The first screen of `input`.
pub fn decision_view(input: &ReportInput<'_>) -> DecisionView {
    let synthetic = synthetic(input);
    let headline = input.headline.and_then(Result::ok);
    let objectives: Vec<Objective> = headline.map(objectives).unwrap_or_default();
    // When every arm attains, attainment decides nothing: one clause above the table
    // instead of a row.
    let all_attain = objectives.iter().find(|o| o.every_arm_attains);
    let objectives_scope = match headline {
        Some(c) => format!(
            "{}, {} arms{}",
            c.label,
            c.arms.len(),
            all_attain
                .and_then(|o| o.unresolved.as_deref())
                .map(|why| format!("; {why}"))
                .unwrap_or_default()
        ),
        None => "no headline comparison: no objective is ranked".to_owned(),
    };
    let searched: Vec<crate::artifact::capacity::CapacityResult> =
        input.capacity.iter().map(|c| c.search.clone()).collect();
    let capacity = crate::rules::capacity::decide(&searched);
    let declared = input.planned.and_then(|p| p.objective.as_ref());
    let (recommendation, recommendation_caveats, recommendation_class) = match declared {
        Some(d) => {
            let r = crate::rules::recommend::recommend(d, &capacity, headline);
            let mut caveats = r.caveats;
            if let Some(p) = input.planned
                && p.order == "blocked"
            {
                caveats.push(
                    "repeats were recorded back to back (order: blocked): drift over time is confounded with the arm".to_owned(),
                );
            }
            let class = if r.arm.is_some() { "pass" } else { "missing" };
            (r.text, caveats, class.to_owned())
        }
        None => (
            "No decision objective is declared (the campaign file's `objective`): the objectives below are ranked one by one, and no single configuration is recommended.".to_owned(),
            Vec::new(),
            "missing".to_owned(),
        ),
    };
    let not_testable = input.check.not_testable.len();
    let (outcome, outcome_class) = match input.check.outcome {
        Outcome::Holds if not_testable > 0 => (
            format!("complete: every measurable rule holds; {not_testable} not testable"),
            "pass",
        ),
        Outcome::Holds => ("complete: every rule holds".to_owned(), "pass"),
        Outcome::StopRuleFired => ("stop rule fired".to_owned(), "fail"),
        Outcome::RuleFailed => ("a rule failed".to_owned(), "fail"),
        Outcome::Incomplete => ("incomplete: evidence is missing".to_owned(), "missing"),
    };
    let claims = input
        .check
        .coverage
        .stages
        .iter()
        .flat_map(|s| {
            s.selected
                .iter()
                .map(|c| ("selected", c))
                .chain(s.rejected.iter().map(|c| ("rejected", c)))
                .map(|(side, c)| StageClaimView {
                    stage: s.stage.clone(),
                    side: side.to_owned(),
                    clause: c.clause.clone(),
                    verdict: if single_runs(&c.reason) {
                        format!("{} · {SINGLE_RUN_FLAG}", c.verdict)
                    } else {
                        c.verdict.to_string()
                    },
                    verdict_class: claim_class(c.verdict).to_owned(),
                    basis: claim_basis(c),
                    reason: c.reason.clone(),
                })
        })
        .collect();
    // One line on the first screen: a long reason is cut before its parenthesis (the
    // sections below give it whole).
    let brief = |text: &str| -> String {
        if text.chars().count() <= 180 {
            return text.to_owned();
        }
        match text
            .char_indices()
            .find(|(i, _)| *i >= 60 && text[*i..].starts_with(" ("))
        {
            Some((i, _)) if i <= 220 => format!("{}…", &text[..i]),
            _ => format!("{}…", text.chars().take(177).collect::<String>()),
        }
    };
    let outcome_reason = match input.check.reasons.as_slice() {
        [] => "every planned arm has artifacts, every advance rule holds, no stop rule fired"
            .to_owned(),
        [one] => brief(one),
        many => format!("{} (and {} more below)", brief(&many[0]), many.len() - 1),
    };
    DecisionView {
        not_claimable: not_claimable(input, &objectives, synthetic.is_some()),
        synthetic,
        tested: tested(input),
        outcome: outcome.to_owned(),
        outcome_class: outcome_class.to_owned(),
        outcome_reason,
        recommendation,
        recommendation_caveats,
        recommendation_class,
        objectives_scope,
        objectives: objective_views(&objectives, headline),
        capacity_verdict: capacity.verdict.clone(),
        capacity: capacity.rows.iter().map(capacity_row).collect(),
        claims,
        coverage: coverage(input),
        gaps: gaps(input),
        unread: unread(input),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_get_short_column_names() {
        assert_eq!(
            cell_label("headline-sustained-output.ctx4096.c8.n100"),
            "headline"
        );
        assert_eq!(
            cell_label("optimization-screen.ctx4096.c4.n16"),
            "screen 4K C4"
        );
        assert_eq!(
            cell_label("context-curve.ctx253952.c1.n3"),
            "context 248K C1"
        );
        assert_eq!(cell_label("functional.ctx4096.c1.n8"), "functional");
    }

    /// A cell recorded on another API than chat keeps its own column, named with the API.
    #[test]
    fn a_cell_on_another_api_says_which() {
        assert_eq!(
            cell_label("headline-sustained-output.ctx4096.c8.n100.responses"),
            "headline responses"
        );
        assert_eq!(
            cell_label("optimization-screen.ctx4096.c4.n16.completions.rate2.5"),
            "screen 4K C4 completions"
        );
    }

    #[test]
    fn the_basis_is_the_deciding_sentence() {
        assert_eq!(
            basis(
                "selection supported: headline: a 1 vs b 2 (differences …): better than each by a 95% interval excluding zero)"
            ),
            "better than each by a 95% interval excluding zero"
        );
    }
}
