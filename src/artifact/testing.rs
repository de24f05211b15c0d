//! Fixtures for tests, fuzz targets and benchmarks: a valid `run.json` and its parts, built
//! once here so that every test that writes an artifact by hand starts from the same
//! contract and changes only what it is about.

use std::collections::BTreeMap;

use super::run::{Arm, Clock, Counts, Endpoint, RunJson, Status, Tool, Topology, format_utc_ns};
use super::{Api, SCHEMA, Schedule, Workload};
use crate::clock::Origin;

/// The seed campaign's id.
pub const CAMPAIGN: &str = "2026-09-04-qwen38-27b-pro6000-possibility";

/// The headline workload: 4096-token prompts, C8 per replica, 100 requests, 256 words
/// under a 512-token ceiling, unique prompts with canaries, seed 38027, thinking disabled,
/// chat, closed loop.
pub fn workload() -> Workload {
    Workload {
        class: "headline-sustained-output".to_owned(),
        prompt_tokens_target: 4096,
        concurrency_per_replica: 8,
        total_requests: 100,
        response_words: Some(256),
        max_tokens: 512,
        prompt_cache_mode: "unique".to_owned(),
        prefix_groups: None,
        trace: None,
        sessions: None,
        cache: None,
        canaries: true,
        seed: 38027,
        thinking: "disabled".to_owned(),
        api: Api::Chat,
        schedule: Schedule::Closed,
        ramp_s: None,
        off_manifest: false,
        probe: None,
    }
}

/// `replicas` endpoints, replica r on `http://127.0.0.1:{first_port + r}`, serving `model`,
/// with no server facts and no metrics URL.
pub fn topology(replicas: u32, first_port: u32, model: &str) -> Topology {
    Topology {
        replica_count: replicas,
        endpoints: (0..replicas)
            .map(|replica| Endpoint {
                replica,
                url: format!("http://127.0.0.1:{}", first_port + replica),
                model: model.to_owned(),
                server_info: BTreeMap::new(),
                metrics_url: None,
            })
            .collect(),
    }
}

/// A valid `run.json` of a run still recording: arm `K12` of the stage `SGLang
/// optimization` (runtime `sglang`, no configuration), cell `headline-4k-c8`, the headline
/// [`workload`], one replica on port 8000, its clock starting now.
pub fn run_json(run_id: &str) -> RunJson {
    let origin = Origin::now();
    let workload = workload();
    RunJson {
        schema: SCHEMA.to_owned(),
        campaign_id: CAMPAIGN.to_owned(),
        arm: Arm {
            name: "K12".to_owned(),
            stage: "SGLang optimization".to_owned(),
            runtime: "sglang".to_owned(),
            config: Default::default(),
            defaults: Default::default(),
        },
        cell_id: "headline-4k-c8".to_owned(),
        run_id: run_id.to_owned(),
        repeat: Default::default(),
        shard: None,
        workload_fingerprint: workload.fingerprint(),
        workload,
        topology: topology(1, 8000, "qwen"),
        calibration: super::Calibration::none(),
        thinking_switch: Default::default(),
        prompt_salt: format!("salt-{run_id}"),
        clock: Clock::from_origin(&origin),
        started_utc: format_utc_ns(origin.utc_unix_ns),
        ended_utc: None,
        tool: Tool::this("anvil-capture"),
        command_line: vec!["anvil-capture".to_owned()],
        status: Status::Running,
        status_reason: None,
        counts: Counts::default(),
        cache_hygiene: Some(super::run::CacheHygiene {
            salted: true,
            resets: Vec::new(),
        }),
        telemetry: None,
    }
}

/// `run` recording `workload` instead (the fingerprint follows it).
pub fn with_workload(mut run: RunJson, workload: Workload) -> RunJson {
    run.workload_fingerprint = workload.fingerprint();
    run.workload = workload;
    run
}

/// `run` as a run that finished: status `complete`, its end time now.
pub fn finished(mut run: RunJson) -> RunJson {
    run.status = Status::Complete;
    run.ended_utc = Some(super::run::utc_now());
    run
}

/// Request `index` of kind `kind`, sent to `replica`, ended with `outcome`: a chat request
/// of 1,000 target prompt tokens sent at `index` ms and done 100 ms later, every column
/// filled, for tests to override what they are about.
pub fn request_row(
    index: u32,
    kind: super::RequestKind,
    replica: u32,
    outcome: super::Outcome,
) -> super::RequestRow {
    let t = i64::from(index) * 1_000_000;
    super::RequestRow {
        request_index: index,
        kind,
        check: None,
        replica,
        endpoint: format!("http://127.0.0.1:{}", 9000 + replica),
        api: Api::Chat,
        model: "m".into(),
        canary: None,
        prompt_sha256: super::prompt_sha256(&format!("prompt {index}")),
        prompt_chars: 4000,
        prompt_tokens_target: 1000,
        prompt_tokens_calibrated: Some(990),
        max_tokens: Some(512),
        request_body: None,
        t_intended_ns: t,
        t_sent_ns: Some(t),
        t_first_byte_ns: Some(t + 1_000_000),
        t_done_ns: t + 100_000_000,
        http_status: Some(200),
        outcome,
        error: None,
        events: 0,
        new_connection: false,
        resent: false,
        session: None,
        ignore_eos: Some(false),
        t_released_ns: Some(t),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixture_is_a_valid_run_json() {
        let run = finished(run_json("run-1"));
        let text = serde_json::to_string(&run).unwrap();
        let back = RunJson::parse(&text, std::path::Path::new("run.json")).unwrap();
        assert_eq!(back, run);
        assert_eq!(back.workload_fingerprint, workload().fingerprint());
    }
}
