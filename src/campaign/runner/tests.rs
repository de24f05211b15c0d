//! The runner's decisions, each on its own: which arms run in which order, which journaled
//! servers an earlier run left behind, what "restored" means, where the restoration evidence
//! goes, which fingerprint a resumed run reuses, and what a launch keeps secret.

use std::path::Path;

use serde_json::json;

use super::capacity::exact_interval;
use super::cells::{Visit, arm_order, visits};
use super::restore::all_passed;
use super::service::{configuration, launch_secrets, orphan_candidates};
use super::{RESTORATION_JSON, earlier_fingerprint, restoration_file};
use crate::artifact::restoration::RestorationCheck;
use crate::campaign::file::Order;
use crate::campaign::{CampaignFile, CellState};

fn sample() -> (
    CampaignFile,
    crate::manifest::WorkloadManifest,
    crate::manifest::RunPlan,
) {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-data/campaign.json");
    CampaignFile::load_checked(file).unwrap()
}

/// The plan's stages in order, each arm once per stage it has cells in; a topology arm's
/// capacity search runs with the first stage naming it; an arm with nothing to do is left out.
#[test]
fn arms_run_stage_by_stage_and_a_search_with_its_arm_s_first_stage() {
    let (campaign, manifest, plan) = sample();
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-data/campaign.json");
    let out = tempfile::tempdir().unwrap();
    let cells = campaign.plan(&file, &manifest, &plan, out.path());
    assert!(cells.iter().all(|c| c.state == CellState::Missing));
    let arms = campaign.all_arms();
    let order = arm_order(&plan, &cells, &arms);
    assert_eq!(order.first(), Some(&("baseline", "Inferact target-only")));
    let stages: Vec<&str> = order.iter().map(|(s, _)| *s).collect();
    let mut sorted = stages.clone();
    sorted.dedup();
    let positions: Vec<usize> = sorted
        .iter()
        .map(|s| {
            plan.execution_order
                .iter()
                .position(|x| x.stage == *s)
                .unwrap()
        })
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{order:?}");
    assert!(order.contains(&("matched topology", "TP1")));
    assert!(!order.iter().any(|(s, _)| *s == "restore"));
    // Without cells, only the searching arms are left (the three topologies), in the first
    // stage naming them.
    let order = arm_order(&plan, &[], &arms);
    assert_eq!(
        order,
        vec![
            ("matched topology", "TP1"),
            ("matched topology", "TP2"),
            ("matched topology", "two independent TP1 replicas")
        ]
    );
}

/// Repeats interleaved: within a stage every arm's repeat 1 (with its cells recorded once),
/// then every arm's repeat 2, …, each a launch of its own; blocked keeps each arm's launches
/// together, one per repeat only when its command holds `{repeat}`.
#[test]
fn repeats_are_interleaved_across_a_stage_s_arms_unless_blocked() {
    let (mut campaign, manifest, plan) = sample();
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-data/campaign.json");
    let out = tempfile::tempdir().unwrap();
    let cells = campaign.plan(&file, &manifest, &plan, out.path());
    let arms = campaign.all_arms();
    let stage = "matched topology";
    let of_stage = |v: &[Visit<'_>]| -> Vec<(String, u32)> {
        v.iter()
            .filter(|v| v.stage == stage)
            .map(|v| (v.arm.to_owned(), v.round))
            .collect()
    };
    let interleaved = visits(&plan, &cells, &arms, Order::Interleaved);
    let tp = ["TP1", "TP2", "two independent TP1 replicas"];
    let want: Vec<(String, u32)> = (1..=3)
        .flat_map(|r| tp.iter().map(move |a| (a.to_string(), r)))
        .collect();
    assert_eq!(of_stage(&interleaved), want);
    // Every planned cell is recorded by exactly one launch.
    for c in &cells {
        let n = interleaved.iter().filter(|v| v.holds(c)).count();
        assert_eq!(n, 1, "{} {}", c.arm, c.name());
    }
    // Cells recorded once (the functional checks) go with repeat 1.
    let round_one = interleaved
        .iter()
        .find(|v| v.stage == stage && v.arm == "TP1" && v.round == 1)
        .unwrap();
    assert!(cells.iter().any(|c| round_one.holds(c) && c.repeat.of == 1));
    // The screen's arms are recorded once: one launch each, not per repeat.
    assert!(
        interleaved
            .iter()
            .filter(|v| v.arm == "chunk1K")
            .all(|v| v.round == 1 && !v.per_repeat)
    );
    // Blocked, with the sample's `{repeat}` commands: each arm's launches back to back.
    let blocked = visits(&plan, &cells, &arms, Order::Blocked);
    let want: Vec<(String, u32)> = tp
        .iter()
        .flat_map(|a| (1..=3).map(move |r| (a.to_string(), r)))
        .collect();
    assert_eq!(of_stage(&blocked), want);
    // Blocked, with no `{repeat}` in any command: one launch per arm, its repeats in it.
    for arm in &mut campaign.arms {
        let launch = arm.service.launch.as_mut().unwrap();
        if let Some(at) = launch.argv.iter().position(|a| a == "--run-seed") {
            launch.argv.drain(at..at + 2);
        }
    }
    let arms = campaign.all_arms();
    let blocked = visits(&plan, &cells, &arms, Order::Blocked);
    let want: Vec<(String, u32)> = tp.iter().map(|a| (a.to_string(), 1)).collect();
    assert_eq!(of_stage(&blocked), want);
    assert!(blocked.iter().all(|v| !v.per_repeat));
    // Blocked, with `{repeat}` in TP2's command: TP2's three launches back to back.
    let tp2 = campaign.arms.iter_mut().find(|a| a.arm == "TP2").unwrap();
    let launch = tp2.service.launch.as_mut().unwrap();
    launch
        .argv
        .extend(["--run-seed".into(), "tp2-{repeat}".into()]);
    let arms = campaign.all_arms();
    let blocked = visits(&plan, &cells, &arms, Order::Blocked);
    let want: Vec<(String, u32)> = [("TP1", 1), ("TP2", 1), ("TP2", 2), ("TP2", 3)]
        .iter()
        .map(|(a, r)| (a.to_string(), *r))
        .chain([("two independent TP1 replicas".to_owned(), 1)])
        .collect();
    assert_eq!(of_stage(&blocked), want);
}

#[test]
fn only_servers_launched_on_this_boot_are_orphans_to_stop() {
    let earlier = vec![
        json!({"step": "launched", "who": "arm TP1", "boot_id": "b1",
               "replicas": [{"pid": 10, "start_ticks": 7}, {"pid": 11, "start_ticks": 8}]}),
        json!({"step": "launched", "who": "arm TP2", "boot_id": "b0",
               "replicas": [{"pid": 12, "start_ticks": 9}]}),
        json!({"step": "launched", "who": "arm K4", "boot_id": "b1",
               "replicas": [{"pid": "x", "start_ticks": 9}]}),
        json!({"step": "ready", "boot_id": "b1", "replicas": [{"pid": 13, "start_ticks": 1}]}),
    ];
    let found: Vec<(u32, u64)> = orphan_candidates(&earlier, Some("b1"))
        .into_iter()
        .map(|(_, pid, ticks)| (pid, ticks))
        .collect();
    assert_eq!(found, vec![(10, 7), (11, 8)]);
    assert!(orphan_candidates(&earlier, None).is_empty());
}

#[test]
fn restored_means_checked_and_every_check_passed() {
    let check = |passed| RestorationCheck {
        check: "ready".into(),
        passed,
        expected: json!(1),
        observed: json!(1),
        detail: String::new(),
    };
    assert!(!all_passed(&[]));
    assert!(all_passed(&[check(true), check(true)]));
    assert!(!all_passed(&[check(true), check(false)]));
}

#[test]
fn the_restoration_evidence_is_the_file_the_restore_stage_names() {
    let (_, _, plan) = sample();
    let named = plan
        .stages_in_order()
        .into_iter()
        .find(|s| s.stage == crate::rules::stop::RESTORE_STAGE)
        .and_then(|s| s.evidence.clone());
    assert_eq!(
        restoration_file(&plan),
        named.unwrap_or_else(|| RESTORATION_JSON.to_owned())
    );
}

#[test]
fn a_resumed_run_reuses_the_last_before_fingerprint_journaled() {
    let journal = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("sample-data/2026-09-04-qwen38-27b-pro6000-possibility/campaign-journal.jsonl"),
    )
    .unwrap();
    let lines: Vec<serde_json::Value> = journal
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let fp = earlier_fingerprint(&lines).unwrap();
    assert_eq!(fp.models, vec![vec!["qwen3.8-27b".to_owned()]]);
    assert!(earlier_fingerprint(&lines[..3]).is_none());
}

#[test]
fn a_launch_keeps_its_secret_environment_out_and_records_its_runtime() {
    let (campaign, _, _) = sample();
    let mut service = campaign.starting_service.service.clone();
    if let Some(launch) = service.launch.as_mut() {
        launch.env.insert("HF_TOKEN".into(), "hf_secret".into());
        launch.env.insert("CUDA_VISIBLE_DEVICES".into(), "0".into());
    }
    assert_eq!(launch_secrets(&service), vec!["hf_secret"]);
    let keys = configuration(&service);
    assert_eq!(keys.get("runtime"), Some(&service.runtime));
}

#[test]
fn the_search_judges_a_load_by_its_exact_interval() {
    let (low, high) = exact_interval(39, 40);
    assert!(low > 0.86 && low < 0.87 && high > 0.999, "{low} {high}");
    assert_eq!(exact_interval(0, 0), (0.0, 1.0));
}
