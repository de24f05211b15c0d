//! `anvil campaign plan` over a campaign file of the seeds: the arm × cell matrix in the
//! plan's order, and a cell recorded by `anvil-capture` against `anvil-sim` counted as
//! recorded (a complete artifact with the cell's workload fingerprint).

use std::path::{Path, PathBuf};

use serde_json::json;

use super::common::{ANVIL, CAPTURE, Sim, run};

const SAMPLE_DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/sample-data");
const FUNCTIONAL: &str = "functional.ctx4096.c1.n8";

/// A campaign file beside copies of the seeds: arm `TP2` on `url` recording the functional
/// cell, and a K4/K12 sweep recording the same cell.
fn campaign_file(dir: &Path, url: &str) -> PathBuf {
    for name in ["workload-manifest.json", "run-plan.json"] {
        std::fs::copy(Path::new(SAMPLE_DATA).join(name), dir.join(name)).unwrap();
    }
    let campaign = json!({
        "schema": "anvil-serving.benchmark-campaign/v1",
        "campaign_id": "2026-09-04-qwen38-27b-pro6000-possibility",
        "manifest": "workload-manifest.json",
        "plan": "run-plan.json",
        "starting_service": {"endpoints": [url], "runtime": "anvil-sim", "model": "anvil-sim"},
        "arms": [{
            "arm": "TP2", "endpoints": [url], "runtime": "anvil-sim",
            "config": {"topology": "TP2"}, "cells": {"ids": [FUNCTIONAL]}
        }],
        "sweeps": [{
            "key": "spec_depth", "values": ["4", "12"],
            "template": {
                "arm": "K{value}",
                "launch": {"argv": ["anvil-sim", "--port", "{port}", "--profile", "spec-k{value}"]},
                "ports": [18123], "runtime": "anvil-sim", "cells": {"ids": [FUNCTIONAL]}
            }
        }]
    });
    let file = dir.join("campaign.json");
    std::fs::write(&file, serde_json::to_string_pretty(&campaign).unwrap()).unwrap();
    file
}

fn plan(file: &Path, out: &Path) -> String {
    let o = run(
        ANVIL,
        &[
            "campaign",
            "plan",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn campaign_plan_lists_the_matrix_in_plan_order_and_sees_a_recorded_cell() {
    let sim = Sim::start(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let file = campaign_file(tmp.path(), &sim.url(0));
    let out = tmp.path().join("data");

    let before = plan(&file, &out);
    assert!(before.contains("3 cells over 3 arms"), "{before}");
    // Execution order: the optimization stage (K4, K12) before the topology stage (TP2).
    let (k4, tp2) = (before.find("K4").unwrap(), before.find("TP2").unwrap());
    assert!(k4 < tp2, "{before}");
    assert!(before.contains("0 recorded, 3 to record"), "{before}");
    assert!(
        before.contains("--arm K12 --stage 'SGLang optimization' --set spec_depth=12"),
        "{before}"
    );
    assert!(
        before.contains("--endpoint http://127.0.0.1:18123"),
        "{before}"
    );

    // Record TP2's cell with the command line the plan printed.
    let line = before
        .lines()
        .find(|l| l.contains("--arm TP2"))
        .expect("TP2's command line");
    let argv = shell_words(line.trim());
    assert_eq!(argv[0], "anvil-capture");
    let mut args: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
    args.extend(["--quiet", "--no-realtime"]);
    let o = run(CAPTURE, &args, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let after = plan(&file, &out);
    assert!(after.contains("1 recorded, 2 to record"), "{after}");
    let row = after
        .lines()
        .find(|l| l.contains("TP2") && l.contains(FUNCTIONAL))
        .unwrap();
    assert!(row.trim_end().ends_with("recorded"), "{after}");
}

/// Split a command line the plan printed (words, with '…' quoting) into arguments.
fn shell_words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in line.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any || !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
                any = false;
            }
            c => word.push(c),
        }
    }
    if any || !word.is_empty() {
        out.push(word);
    }
    out
}

/// The README's campaign file for real servers (vLLM and SGLang launch lines, a TP2 arm, a
/// DP2 arm of two replicas, a depth sweep) is valid against the seeds.
#[test]
fn the_readme_campaign_file_for_real_servers_validates() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let section = &readme[readme.find("## Running a campaign").expect("the section")..];
    let start = section.find("```json\n").unwrap() + "```json\n".len();
    let end = start + section[start..].find("\n```").unwrap();
    let doc: serde_json::Value = serde_json::from_str(&section[start..end]).unwrap();
    let arms: Vec<&str> = doc["arms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["arm"].as_str().unwrap())
        .collect();
    assert!(arms.contains(&"two independent TP1 replicas"), "{arms:?}");
    let dp2 = &doc["arms"][2];
    assert_eq!(dp2["ports"].as_array().unwrap().len(), 2);
    let tmp = tempfile::tempdir().unwrap();
    for name in ["workload-manifest.json", "run-plan.json"] {
        std::fs::copy(Path::new(SAMPLE_DATA).join(name), tmp.path().join(name)).unwrap();
    }
    let file = tmp.path().join("campaign.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    let o = run(ANVIL, &["validate", file.to_str().unwrap()], &[]);
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("6 arms: ok"));
}

/// `campaign plan` without --out reads the campaign file's own folder (the sample campaign
/// is recorded beside its file), and each command's help lists its own exit codes only.
#[test]
fn campaign_plan_defaults_to_the_files_folder_and_helps_list_their_own_exit_codes() {
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/sample-data/campaign.json");
    let o = run(ANVIL, &["campaign", "plan", file], &[]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        stdout.contains(concat!(
            "recording into ",
            env!("CARGO_MANIFEST_DIR"),
            "/sample-data"
        )),
        "{stdout}"
    );
    assert!(stdout.contains("0 to record"), "{stdout}");
    for (command, codes) in [
        (&["validate", "--help"][..], &["0", "2"][..]),
        (&["campaign", "plan", "--help"][..], &["0", "2"][..]),
        (
            &["campaign", "run", "--help"][..],
            &["0", "1", "2", "4", "5", "130"][..],
        ),
    ] {
        let o = run(ANVIL, command, &[]);
        let help = String::from_utf8_lossy(&o.stdout);
        let listed: Vec<&str> = help
            .split("Exit codes:")
            .nth(1)
            .unwrap_or_else(|| panic!("{command:?}: no exit codes in {help}"))
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert_eq!(listed, codes, "{command:?}: {help}");
    }
}

/// The sample campaign's journal holds the command line each of its cells and probes was
/// recorded with: planning the same campaign file today gives each of them, word for word
/// (`RunRequest::to_argv` keeps the order the recorder was driven in), but for the warm-up a
/// relaunched server gets before its first measured cell. Where a cell was recorded again on
/// a resumed run, its last recording is the one the data holds.
#[test]
fn the_sample_journal_s_recorded_commands_are_what_the_plan_builds_today() {
    use anvil::campaign::CampaignFile;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cwd = std::env::current_dir().unwrap();
    // The journal names files as the campaign was run, from the repository's root.
    assert_eq!(
        cwd, root,
        "cargo runs integration tests from the package root"
    );
    let file = Path::new("sample-data/campaign.json");
    let (campaign, manifest, plan) = CampaignFile::load_checked(file).unwrap();
    let out = Path::new("sample-data");
    let planned = campaign.plan(file, &manifest, &plan, out);
    let journal = std::fs::read_to_string(
        out.join(&campaign.campaign_id)
            .join("campaign-journal.jsonl"),
    )
    .unwrap();
    let lines: Vec<serde_json::Value> = journal
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut last: std::collections::BTreeMap<(String, String), &serde_json::Value> =
        Default::default();
    for line in lines.iter().filter(|l| l["step"] == "recording") {
        let key = (line["arm"].to_string(), line["cell"].to_string());
        last.insert(key, line);
    }
    let mut checked = (0, 0);
    let mut warmed = 0;
    for line in last.into_values() {
        let mut recorded: Vec<String> = serde_json::from_value(line["command"].clone()).unwrap();
        // A launch per repeat warms its server up before its first measured cell: that cell
        // was recorded with `--warmup N` (one wave: concurrency × replicas), which the plan
        // of the cell itself does not hold.
        if let Some(at) = recorded.iter().position(|w| w == "--warmup") {
            let n: u64 = recorded[at + 1].parse().unwrap();
            assert!(n > 0, "{recorded:?}");
            recorded.drain(at..at + 2);
            warmed += 1;
        }
        let (arm, cell, dir) = (
            line["arm"].as_str().unwrap(),
            line["cell"].as_str().unwrap(),
            line["dir"].as_str().unwrap(),
        );
        let built = match planned.iter().find(|c| c.arm == arm && c.name() == cell) {
            Some(c) => {
                checked.0 += 1;
                c.request.to_argv()
            }
            None => {
                // A probe of the arm's capacity search, at the load its result line names.
                let probe = lines
                    .iter()
                    .find(|l| l["step"] == "search_probe" && l["dir"] == dir)
                    .unwrap_or_else(|| panic!("{arm} {cell}: neither planned nor a probe"));
                let spec = campaign
                    .all_arms()
                    .into_iter()
                    .find(|a| a.arm == arm)
                    .unwrap();
                let stage = plan
                    .stages_in_order()
                    .into_iter()
                    .find(|s| s.arms.iter().flatten().any(|a| a == arm))
                    .unwrap();
                let search = spec.search.as_ref().unwrap();
                let c = campaign
                    .probe(
                        file,
                        &manifest,
                        &stage.stage,
                        &spec,
                        search,
                        probe["load"].as_f64().unwrap(),
                        probe["repeat"].as_u64().unwrap() as u32,
                        out,
                    )
                    .unwrap();
                checked.1 += 1;
                c.request.to_argv()
            }
        };
        assert_eq!(built, recorded, "{arm} {cell}");
    }
    assert!(checked.0 >= 60 && checked.1 >= 7, "{checked:?}");
    // Every launch of a repeated arm but the first of its stage's round was warmed.
    assert!(warmed >= 20, "{warmed} warmed cells");
}
