//! The campaign file's checks and its plan: sweeps, arms the plan does not name, fields
//! stated wrongly, timeouts, repeats and defaults reaching each cell's request.

use std::path::PathBuf;

use super::*;

const MANIFEST: &str = include_str!("../../sample-data/workload-manifest.json");
const PLAN: &str = include_str!("../../sample-data/run-plan.json");

/// A campaign of the seeds: one launched arm, a depth sweep, a starting service running.
fn campaign_json(extra_arm: &str) -> String {
    format!(
        r#"{{
  "schema": "anvil-serving.benchmark-campaign/v1",
  "campaign_id": "2026-09-04-qwen38-27b-pro6000-possibility",
  "manifest": "workload-manifest.json",
  "plan": "run-plan.json",
  "starting_service": {{
"endpoints": ["http://127.0.0.1:8000"], "runtime": "sglang 0.6.1", "model": "qwen"
  }},
  "arms": [
{{
  "arm": "{extra_arm}",
  "launch": {{ "argv": ["anvil-sim", "--port", "{{port}}", "--profile", "no-spec"] }},
  "ports": [8101],
  "config": {{ "spec_depth": "0" }},
  "runtime": "sglang (anvil-sim)",
  "cells": {{ "classes": ["headline-sustained-output", "functional"] }}
}}
  ],
  "sweeps": [
{{
  "key": "spec_depth",
  "values": ["4", "12", "16"],
  "template": {{
    "arm": "K{{value}}",
    "launch": {{ "argv": ["anvil-sim", "--port", "{{port}}", "--profile", "spec-k{{value}}"] }},
    "ports": [8102],
    "config": {{ "chunked_prefill": "2048" }},
    "runtime": "sglang (anvil-sim)",
    "cells": {{ "classes": ["optimization-screen"] }}
  }}
}}
  ]
}}"#
    )
}

/// The seeds' campaign with one more top-level `key` holding the JSON `value`.
fn with_key(key: &str, value: &str) -> String {
    campaign_json("Inferact target-only").replacen(
        "\"arms\":",
        &format!("\"{key}\": {value},\n  \"arms\":"),
        1,
    )
}

fn write_campaign(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("workload-manifest.json"), MANIFEST).unwrap();
    std::fs::write(dir.path().join("run-plan.json"), PLAN).unwrap();
    let file = dir.path().join("campaign.json");
    std::fs::write(&file, text).unwrap();
    (dir, file)
}

#[test]
fn a_sweep_expands_into_one_variable_arms() {
    let (_dir, file) = write_campaign(&campaign_json("Inferact target-only"));
    let (campaign, _, _) = CampaignFile::load_checked(&file).unwrap();
    let arms = campaign.all_arms();
    let names: Vec<&str> = arms.iter().map(|a| a.arm.as_str()).collect();
    assert_eq!(names, ["Inferact target-only", "K4", "K12", "K16"]);
    let k12 = &arms[2];
    assert_eq!(
        k12.service.launch.as_ref().unwrap().argv,
        ["anvil-sim", "--port", "{port}", "--profile", "spec-k12"]
    );
    // Every pair of sweep arms differs in exactly the swept key.
    for (a, b) in [(&arms[1], &arms[2]), (&arms[2], &arms[3])] {
        let differing: Vec<&String> = a
            .service
            .config
            .iter()
            .filter(|(k, v)| b.service.config.get(*k) != Some(v))
            .map(|(k, _)| k)
            .collect();
        assert_eq!(differing, ["spec_depth"]);
    }
}

#[test]
fn arms_the_plan_does_not_name_are_refused_by_name() {
    let (_dir, file) = write_campaign(&campaign_json("K99 turbo"));
    let err = CampaignFile::load_checked(&file).unwrap_err().to_string();
    assert!(
        err.contains("not arms of the run plan: `K99 turbo`"),
        "{err}"
    );
    assert!(
        err.contains("`Inferact target-only`"),
        "lists the plan's arms: {err}"
    );
}

#[test]
fn what_the_file_states_wrongly_is_named_by_field() {
    let text = campaign_json("Inferact target-only")
        .replace("\"{port}\", \"--profile\", \"no-spec\"", "\"{prot}\"")
        .replace("\"ports\": [8101],", "")
        .replace("\"K{value}\"", "\"K\"");
    let (_dir, file) = write_campaign(&text);
    let err = CampaignFile::load(&file).unwrap_err().to_string();
    assert!(
        err.contains("arms[0].launch.argv[2]") && err.contains("`{prot}`"),
        "{err}"
    );
    assert!(err.contains("arms[0].ports"), "{err}");
    assert!(err.contains("sweeps[0].template.arm"), "{err}");
    // An unknown field is refused with its path, a duplicate key with its name.
    let (_dir, file) = write_campaign(&campaign_json("x").replace("\"sweeps\"", "\"sweep\""));
    let err = CampaignFile::load(&file).unwrap_err().to_string();
    assert!(err.contains("sweep"), "{err}");
    // Inside an arm too (its service fields are flattened into it).
    let misspelt =
        campaign_json("Inferact target-only").replace("\"ports\": [8101]", "\"prots\": [8101]");
    let (_dir, file) = write_campaign(&misspelt);
    let err = CampaignFile::load(&file).unwrap_err().to_string();
    assert!(err.contains("prots"), "{err}");
}

#[test]
fn timeouts_reach_the_named_cells_commands_and_bad_ones_are_named() {
    let text = campaign_json("Inferact target-only").replace(
        r#""cells": { "classes": ["headline-sustained-output", "functional"] }"#,
        r#""cells": { "classes": ["headline-sustained-output", "functional"],
                     "timeouts": { "headline-sustained-output": { "idle_s": 180, "first_byte_s": 240 } } }"#,
    );
    let (dir, file) = write_campaign(&text);
    let (campaign, manifest, plan) = CampaignFile::load_checked(&file).unwrap();
    let cells = campaign.plan(&file, &manifest, &plan, &dir.path().join("out"));
    for c in cells.iter().filter(|c| c.arm == "Inferact target-only") {
        let line = c.request.to_argv().join(" ");
        let headline = c.cell_id.starts_with("headline-sustained-output");
        assert_eq!(
            line.contains("--timeout-first-byte 240 --timeout-idle 180"),
            headline,
            "{line}"
        );
    }
    let bad = campaign_json("Inferact target-only").replace(
        r#""cells": { "classes": ["headline-sustained-output", "functional"] }"#,
        r#""cells": { "classes": ["functional"],
                     "timeouts": { "no-such-class": { "idle_s": 0 } } }"#,
    );
    let (_dir, file) = write_campaign(&bad);
    let err = CampaignFile::load_checked(&file).unwrap_err().to_string();
    assert!(
        err.contains("cells.timeouts") && err.contains("`no-such-class` is neither"),
        "{err}"
    );
    assert!(
        err.contains("idle_s: 0 is not a positive number of seconds"),
        "{err}"
    );
}

#[test]
fn repeats_plan_one_folder_and_command_per_run_and_defaults_are_inherited() {
    let text = campaign_json("Inferact target-only")
        .replace(
            r#""cells": { "classes": ["headline-sustained-output", "functional"] }"#,
            r#""cells": { "classes": ["headline-sustained-output", "functional"],
                         "repeats": { "headline-sustained-output": 3 } }"#,
        )
        .replace(
            r#""plan": "run-plan.json","#,
            r#""plan": "run-plan.json", "defaults": { "spec_depth": "9", "torch_compile": "off" },"#,
        );
    let (dir, file) = write_campaign(&text);
    let (campaign, manifest, plan) = CampaignFile::load_checked(&file).unwrap();
    let out = dir.path().join("out");
    let cells = campaign.plan(&file, &manifest, &plan, &out);
    let target: Vec<&PlannedCell> = cells
        .iter()
        .filter(|c| c.arm == "Inferact target-only")
        .collect();
    let names: Vec<String> = target.iter().map(|c| c.name()).collect();
    let headline = "headline-sustained-output.ctx4096.c8.n100";
    assert_eq!(
        &names[..3],
        [1, 2, 3].map(|k| format!("{headline}/repeat-{k}"))
    );
    assert!(
        names[3..].iter().all(|n| !n.contains("repeat")),
        "{names:?}"
    );
    assert_eq!(
        target[1].dir,
        out.join(&campaign.campaign_id)
            .join("Inferact target-only")
            .join(headline)
            .join("repeat-2")
    );
    let command = target[1].request.to_argv().join(" ");
    assert!(
        command.ends_with("--repeat 3 --repeat-index 2"),
        "{command}"
    );
    // Every default goes with the command; the arm declares spec_depth, so it inherits
    // only torch_compile (run.json records both defaults).
    assert!(command.contains("--set spec_depth=0"), "{command}");
    assert!(command.contains("--default torch_compile=off"), "{command}");
    assert!(command.contains("--default spec_depth=9"), "{command}");
    // Counts out of range and names that are neither cell nor class are refused.
    let bad = text.replace(r#""headline-sustained-output": 3"#, r#""no-such-cell": 0"#);
    let (_dir, file) = write_campaign(&bad);
    let err = CampaignFile::load_checked(&file).unwrap_err().to_string();
    assert!(
        err.contains("cells.repeats") && err.contains("no-such-cell: 0 runs"),
        "{err}"
    );
    assert!(
        err.contains("is neither a cell id nor a workload class"),
        "{err}"
    );
}

/// A declared claim's metric, statistic and comparator are checked where the file is read,
/// each named by its field.
#[test]
fn a_declared_claim_names_what_it_cannot_read() {
    let claims = r#""claims": [
    {"stage": "target checkpoint", "text": "K8 as lower-TTFT tradeoff", "against": "K12", "metric": "ttft", "statistic": "p50"},
    {"stage": "target checkpoint", "text": "K8", "against": "K99", "metric": "latency", "statistic": "p42"}
  ],
  "arms":"#;
    let text = campaign_json("Inferact target-only").replacen("\"arms\":", claims, 1);
    let (_dir, file) = write_campaign(&text);
    let err = CampaignFile::load(&file).unwrap_err().to_string();
    assert!(!err.contains("claims[0]"), "{err}");
    assert!(
        err.contains("claims[1].metric") && err.contains("`latency` is not a claim metric"),
        "{err}"
    );
    assert!(
        err.contains("claims[1].statistic") && err.contains("`p42`"),
        "{err}"
    );
    assert!(
        err.contains("claims[1].against") && err.contains("`K99` is no arm of the campaign"),
        "{err}"
    );
}

/// `min_effect` is one share or one per figure; a figure it cannot name and a share outside
/// (0, 1) are refused by key.
#[test]
fn min_effect_per_figure_is_read_and_checked_by_key() {
    let with = |m: &str| {
        let (_dir, file) = write_campaign(&with_key("min_effect", m));
        CampaignFile::load(&file).map_err(|e| e.to_string())
    };
    let ok = with(r#"{"default": 0.02, "ttft_ms": 0.05}"#).unwrap();
    let m = ok.min_effect.unwrap();
    assert_eq!(m.default_share(), Some(0.02));
    assert_eq!(m.by_metric().get("ttft_ms"), Some(&0.05));
    let err = with(r#"{"latency": 0.05, "tpot_ms": 2}"#).unwrap_err();
    assert!(
        err.contains("min_effect.latency") && err.contains("`latency` names no figure"),
        "{err}"
    );
    assert!(err.contains("min_effect.tpot_ms"), "{err}");
    assert!(with("1.5").unwrap_err().contains("min_effect"));
}

/// `slo` is a list (every class) or a map of workload class to list; a class the manifest
/// does not define, `functional` and a malformed bound are refused by key.
#[test]
fn slos_per_workload_class_are_read_and_checked_against_the_manifest() {
    let with = |slo: &str| {
        let (_dir, file) = write_campaign(&with_key("slo", slo));
        CampaignFile::load_checked(&file)
            .map(|(c, _, _)| c)
            .map_err(|e| e.to_string())
    };
    let list = with(r#"["ttft_ms<=2000", "tpot_ms<=50"]"#).unwrap();
    assert_eq!(list.slo.for_class("context-curve").len(), 2);
    let map =
        with(r#"{"default": ["ttft_ms<=2000"], "context-curve": ["ttft_ms<=20000"]}"#).unwrap();
    assert_eq!(
        crate::slo::texts(map.slo.for_class("context-curve")),
        ["ttft_ms<=20000"]
    );
    assert_eq!(
        crate::slo::texts(map.slo.for_class("headline-sustained-output")),
        ["ttft_ms<=2000"]
    );
    let err =
        with(r#"{"default": ["ttft_ms<=2000"], "long-context": ["ttft_ms<=20000"]}"#).unwrap_err();
    assert!(
        err.contains("slo.long-context")
            && err.contains("not a workload class of the manifest")
            && err.contains("`context-curve`"),
        "{err}"
    );
    let err = with(r#"{"functional": ["ttft_ms<=2000"]}"#).unwrap_err();
    assert!(
        err.contains("slo.functional") && err.contains("count in no attainment"),
        "{err}"
    );
    let err = with(r#"{"context-curve": ["ttft<=20000"]}"#).unwrap_err();
    assert!(
        err.contains("`context-curve`: SLO `ttft<=20000`: unknown metric"),
        "{err}"
    );
    // Every request of a one-shot class is turn 0: a list bounding later turns only would
    // let every request that succeeds attain.
    let err = with(r#"{"context-curve": ["turns 1+: ttft_ms<=20000"]}"#).unwrap_err();
    assert!(
        err.contains("slo.context-curve") && err.contains("is not a session class"),
        "{err}"
    );
    let err = with(r#"["turns 1+: ttft_ms<=2000"]"#).unwrap_err();
    assert!(
        err.contains("slo.default") && err.contains("give a bound for turn 0"),
        "{err}"
    );
    let scoped = with(r#"["turn 0: ttft_ms<=2000", "turns 1+: ttft_ms<=800"]"#).unwrap();
    assert_eq!(
        crate::slo::texts(scoped.slo.for_class("context-curve")),
        ["turn 0: ttft_ms<=2000", "turns 1+: ttft_ms<=800"]
    );
}

/// A declared workload class is checked against the plan's open gates and the manifest's
/// classes, planned for the arms that list it, and its command names the campaign file.
#[test]
fn declared_workloads_are_checked_planned_and_recorded_through_the_campaign_file() {
    let declared = r#"[{"class": "prefix-groups",
        "gate": "broad repeated quality, agentic, SWE, and endurance",
        "context": 4096, "concurrency": 8, "requests": 96, "reply_words": 128,
        "prefix_groups": {"groups": 4, "shared_tokens": 2048}}]"#;
    let text = with_key("workloads", declared).replace(
        r#""cells": { "classes": ["headline-sustained-output", "functional"] }"#,
        r#""cells": { "classes": ["headline-sustained-output", "prefix-groups"] }"#,
    );
    let (dir, file) = write_campaign(&text);
    let (campaign, manifest, plan) = CampaignFile::load_checked(&file).unwrap();
    let cells = campaign.plan(&file, &manifest, &plan, &dir.path().join("out"));
    let groups: Vec<&PlannedCell> = cells
        .iter()
        .filter(|c| c.cell_id == "prefix-groups.ctx4096.c8.n96")
        .collect();
    assert_eq!(
        groups.len(),
        1,
        "{:?}",
        cells.iter().map(|c| &c.cell_id).collect::<Vec<_>>()
    );
    let command = groups[0].request.to_argv().join(" ");
    assert!(
        command.contains(&format!(
            "--workloads {} --class prefix-groups",
            file.display()
        )),
        "{command}"
    );
    // The manifest's cells name no workloads file.
    assert!(
        cells
            .iter()
            .filter(|c| c.cell_id.starts_with("headline"))
            .all(|c| c.request.cell.workloads.is_none())
    );

    let refused = |from: &str, to: &str| {
        let (_dir, file) = write_campaign(&text.replace(from, to));
        CampaignFile::load_checked(&file).unwrap_err().to_string()
    };
    let err = refused("broad repeated quality", "long-horizon quality");
    assert!(
        err.contains("workloads[0].gate") && err.contains("not an open gate of the run plan"),
        "{err}"
    );
    let err = refused(r#""class": "prefix-groups""#, r#""class": "context-curve""#);
    assert!(err.contains("is a class of the manifest"), "{err}");
    let err = refused(r#""groups": 4"#, r#""groups": 0"#);
    assert!(err.contains("workloads[0].prefix_groups.groups"), "{err}");
    let err = refused(
        r#""shared_tokens": 2048"#,
        r#""shared_tokens": 2048, "depth": 2"#,
    );
    assert!(err.contains("workloads[0].prefix_groups"), "{err}");
}

#[test]
fn an_arms_telemetry_reaches_its_commands_one_source_per_replica_port() {
    let telemetry = r#""ports": [8101, 8103],
  "telemetry": [{ "source": "dcgm=http://127.0.0.1:{port}/dcgm/metrics", "interval_s": 1 }],"#;
    let text = campaign_json("Inferact target-only").replacen("\"ports\": [8101],", telemetry, 1);
    let (dir, file) = write_campaign(&text);
    let (campaign, manifest, plan) = CampaignFile::load_checked(&file).unwrap();
    let cells = campaign.plan(&file, &manifest, &plan, &dir.path().join("out"));
    let cell = cells
        .iter()
        .find(|c| c.arm == "Inferact target-only")
        .unwrap();
    let line = cell.request.to_argv().join(" ");
    assert!(
        line.contains(
            "--telemetry dcgm=http://127.0.0.1:8101/dcgm/metrics \
             --telemetry dcgm=http://127.0.0.1:8103/dcgm/metrics --telemetry-interval 1 \
             --telemetry-interval 1"
        ),
        "{line}"
    );
    // GPUs given for some sources only, and a bad source, are named by field.
    let bad = r#""ports": [8101],
  "telemetry": [{ "source": "dcgm=http://h:9400/metrics", "gpus": [0] }, { "source": "smi" }],"#;
    let text = campaign_json("Inferact target-only").replacen("\"ports\": [8101],", bad, 1);
    let (_dir, file) = write_campaign(&text);
    let err = CampaignFile::load(&file).unwrap_err().to_string();
    assert!(
        err.contains("arms[0].telemetry") && err.contains("`gpus`"),
        "{err}"
    );
    assert!(err.contains("`smi`"), "{err}");
}
