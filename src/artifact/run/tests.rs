//! `run.json` read and written: the versions it accepts, the fields it refuses by name, the
//! fingerprint, the redaction of secrets, and the fixtures other tests build on.

use super::*;

/// A complete, valid run.json for tests: the fixture, finished, with a configuration and
/// the server's facts.
pub(crate) fn sample_run() -> RunJson {
    let mut run =
        crate::artifact::testing::finished(crate::artifact::testing::run_json("run-0001"));
    run.arm.config = [
        ("speculative_num_steps", "12"),
        ("chunked_prefill_size", "1024"),
    ]
    .into_iter()
    .collect();
    let endpoint = &mut run.topology.endpoints[0];
    endpoint.server_info =
        BTreeMap::from([("server_version".to_owned(), serde_json::json!("0.6.1"))]);
    endpoint.metrics_url = Some("http://127.0.0.1:8000/metrics".to_owned());
    run.prompt_salt = "salt-1".to_owned();
    run
}

pub(crate) fn sample_workload() -> Workload {
    crate::artifact::testing::workload()
}

#[test]
fn run_json_round_trips_and_keeps_config_order() {
    let run = sample_run();
    let text = run.to_json_pretty();
    let back = RunJson::parse(&text, Path::new("run.json")).unwrap();
    assert_eq!(back, run);
    let k = text.find("speculative_num_steps").unwrap();
    let c = text.find("chunked_prefill_size").unwrap();
    assert!(k < c, "config order must be kept");
    back.check(Path::new("run.json")).unwrap();
}

#[test]
fn unknown_schema_version_is_refused_naming_file_and_field() {
    let text = sample_run()
        .to_json_pretty()
        .replace(SCHEMA, "anvil-serving.capture-run/v9");
    let err = RunJson::parse(&text, Path::new("/a/run.json"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("/a/run.json"), "{err}");
    assert!(err.contains("field `schema`"), "{err}");
    assert!(err.contains("capture-run/v9"), "{err}");
}

#[test]
fn malformed_field_is_named_with_its_path() {
    let text = sample_run()
        .to_json_pretty()
        .replace("\"max_tokens\": 512", "\"max_tokens\": \"lots\"");
    let err = RunJson::parse(&text, Path::new("run.json"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("workload.max_tokens"), "{err}");
}

#[test]
fn duplicate_config_keys_are_refused() {
    let text = sample_run()
        .to_json_pretty()
        .replace("\"chunked_prefill_size\"", "\"speculative_num_steps\"");
    let err = RunJson::parse(&text, Path::new("run.json"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("duplicate key"), "{err}");
}

#[test]
fn failed_counts_use_outcome_names() {
    let mut run = sample_run();
    run.counts.failed.insert(Outcome::TimeoutIdle, 2);
    let text = run.to_json_pretty();
    assert!(text.contains("\"timeout_idle\": 2"), "{text}");
    assert_eq!(RunJson::parse(&text, Path::new("r")).unwrap(), run);
}

#[test]
fn workload_fingerprint_ignores_field_order() {
    let a: Workload = serde_json::from_str(
        r#"{"class":"headline-sustained-output","prompt_tokens_target":4096,
            "concurrency_per_replica":8,"total_requests":100,"response_words":256,
            "max_tokens":512,"prompt_cache_mode":"unique","canaries":true,"seed":38027,
            "thinking":"disabled","api":"chat","schedule":{"kind":"closed"},
            "off_manifest":false}"#,
    )
    .unwrap();
    let b: Workload = serde_json::from_str(
        r#"{"off_manifest":false,"schedule":{"kind":"closed"},"api":"chat",
            "thinking":"disabled","seed":38027,
            "canaries":true,"prompt_cache_mode":"unique","max_tokens":512,
            "response_words":256,"total_requests":100,"concurrency_per_replica":8,
            "prompt_tokens_target":4096,"class":"headline-sustained-output"}"#,
    )
    .unwrap();
    assert_eq!(a.fingerprint(), b.fingerprint());
    assert_eq!(a.fingerprint(), sample_workload().fingerprint());
}

#[test]
fn workload_fingerprint_changes_with_every_workload_value() {
    let base = sample_workload();
    let f0 = base.fingerprint();
    type Change = Box<dyn Fn(&mut Workload)>;
    let variants: Vec<(&str, Change)> = vec![
        ("class", Box::new(|w| w.class = "context-curve".into())),
        (
            "prompt_tokens_target",
            Box::new(|w| w.prompt_tokens_target = 32768),
        ),
        (
            "concurrency_per_replica",
            Box::new(|w| w.concurrency_per_replica = 4),
        ),
        ("total_requests", Box::new(|w| w.total_requests = 99)),
        ("response_words", Box::new(|w| w.response_words = None)),
        ("response_words", Box::new(|w| w.response_words = Some(255))),
        ("max_tokens", Box::new(|w| w.max_tokens = 1024)),
        (
            "prompt_cache_mode",
            Box::new(|w| w.prompt_cache_mode = "shared".into()),
        ),
        ("canaries", Box::new(|w| w.canaries = false)),
        ("seed", Box::new(|w| w.seed = 1)),
        ("thinking", Box::new(|w| w.thinking = "enabled".into())),
        ("api", Box::new(|w| w.api = Api::Responses)),
        ("off_manifest", Box::new(|w| w.off_manifest = true)),
        ("ramp_s", Box::new(|w| w.ramp_s = Some(2.0))),
    ];
    for (field, change) in variants {
        let mut w = base.clone();
        change(&mut w);
        assert_ne!(
            w.fingerprint(),
            f0,
            "changing {field} must change the fingerprint"
        );
    }
}

#[test]
fn arm_topology_and_salt_stay_out_of_the_fingerprint() {
    let a = sample_run();
    let mut b = sample_run();
    b.arm.name = "TP2".into();
    b.arm.config = [("tp", "2")].into_iter().collect();
    b.topology.replica_count = 2;
    b.topology.endpoints.push(Endpoint {
        replica: 1,
        url: "http://10.0.0.2:8000".into(),
        model: "other".into(),
        server_info: BTreeMap::new(),
        metrics_url: None,
    });
    b.prompt_salt = "different".into();
    assert_eq!(a.workload.fingerprint(), b.workload.fingerprint());
}

#[test]
fn check_catches_edited_workload_and_running_status() {
    let mut run = sample_run();
    run.workload.max_tokens = 1024;
    let err = run.check(Path::new("d/run.json")).unwrap_err().to_string();
    assert!(err.contains("workload_fingerprint"), "{err}");
    let mut run = sample_run();
    run.status = Status::Running;
    let err = run.check(Path::new("d/run.json")).unwrap_err().to_string();
    assert!(err.contains("anvil-capture recover d"), "{err}");
    let mut run = sample_run();
    run.status = Status::Failed;
    let err = run.check(Path::new("d/run.json")).unwrap_err().to_string();
    assert!(err.contains("status_reason"), "{err}");
}

#[test]
fn redact_args_drops_key_values_and_known_secrets() {
    let args = [
        "anvil-capture",
        "--api-key",
        "sk-123",
        "--api-key-file=/k",
        "--endpoint",
        "https://user:pw@host:8000/v1",
        "--header",
        "Authorization: Bearer sk-secret",
        "--concurrency",
        "8",
        "--tokenizer",
        "qwen",
        "--hf-token",
        "hf_abc",
    ];
    let out = redact_args(&args, &["sk-secret"]);
    assert_eq!(
        out,
        vec![
            "anvil-capture",
            "--api-key",
            "<redacted>",
            "--api-key-file=<redacted>",
            "--endpoint",
            "https://<redacted>@host:8000/v1",
            "--header",
            "Authorization: Bearer <redacted>",
            "--concurrency",
            "8",
            "--tokenizer",
            "qwen",
            "--hf-token",
            "<redacted>",
        ]
    );
    let out = redact_args(&["-H", "authorization: bearer sk-x"], &[]);
    assert_eq!(out, vec!["-H", "authorization: bearer <redacted>"]);
    assert!(!out.join(" ").contains("sk-"));
}

/// Pins the run.json layout: changing it means a new `SCHEMA`.
#[test]
fn run_json_layout_is_pinned_and_documented() {
    assert_eq!(SCHEMA, "anvil-serving.capture-run/v4");
    let v = serde_json::to_value(sample_run()).unwrap();
    let keys =
        |v: &serde_json::Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
    assert_eq!(
        keys(&v).join(" "),
        "schema campaign_id arm cell_id run_id repeat workload workload_fingerprint topology \
         calibration thinking_switch prompt_salt clock started_utc ended_utc tool command_line \
         status status_reason counts cache_hygiene"
    );
    assert_eq!(
        keys(&v["workload"]).join(" "),
        "class prompt_tokens_target concurrency_per_replica total_requests response_words \
         max_tokens prompt_cache_mode canaries seed thinking api schedule off_manifest"
    );
    assert_eq!(
        keys(&v["calibration"]).join(" "),
        "method dialect replica tokenize_tokens usage_prompt_tokens note"
    );
    assert_eq!(
        keys(&v["arm"]).join(" "),
        "name stage runtime config defaults"
    );
    assert_eq!(keys(&v["repeat"]).join(" "), "index of");
    assert_eq!(
        keys(&v["clock"]).join(" "),
        "monotonic_origin_ns utc_origin"
    );
    assert_eq!(
        keys(&v["topology"]["endpoints"][0]).join(" "),
        "replica url model server_info metrics_url"
    );
    assert_eq!(
        keys(&v["counts"]).join(" "),
        "requests_measured requests_warmup requests_calibration succeeded failed events \
         scrapes channel_full"
    );
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/artifact.md")).unwrap();
    for section in [
        &v,
        &v["arm"],
        &v["repeat"],
        &v["workload"],
        &v["counts"],
        &v["clock"],
        &v["calibration"],
        &v["topology"]["endpoints"][0],
        &v["cache_hygiene"],
    ] {
        for key in keys(section) {
            assert!(
                doc.contains(&format!("`{key}`")),
                "docs/artifact.md lacks `{key}`"
            );
        }
    }
}

#[test]
fn a_version_3_run_json_reads_as_a_salted_run_without_a_reset() {
    let mut v = serde_json::to_value(sample_run()).unwrap();
    v["schema"] = SCHEMA_V3.into();
    v.as_object_mut().unwrap().remove("cache_hygiene");
    let run = RunJson::parse(&v.to_string(), Path::new("old/run.json")).unwrap();
    assert_eq!(run.cache_hygiene, None);
    assert_eq!(run.schema, SCHEMA_V3);
    let reset = super::CacheReset {
        replica: 0,
        outcome: "reset".into(),
        method: Some("POST /flush_cache".into()),
        attempts: 2,
        waited_ms: 200.5,
        probe_cached_before: Some(512),
        probe_cached_after: Some(0),
        verified: Some(true),
        detail: None,
    };
    let keys = serde_json::to_value(&reset).unwrap();
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/artifact.md")).unwrap();
    for key in keys.as_object().unwrap().keys() {
        assert!(
            doc.contains(&format!("`{key}`")),
            "docs/artifact.md lacks `{key}`"
        );
    }
}

#[test]
fn a_version_2_run_json_reads_as_the_one_run_of_its_cell() {
    let mut v = serde_json::to_value(sample_run()).unwrap();
    v["schema"] = SCHEMA_V2.into();
    let object = v.as_object_mut().unwrap();
    object.remove("repeat");
    object["arm"].as_object_mut().unwrap().remove("defaults");
    let run = RunJson::parse(&v.to_string(), Path::new("old/run.json")).unwrap();
    assert_eq!(run.repeat, Repeat { index: 1, of: 1 });
    assert!(run.arm.defaults.0.is_empty());
    assert_eq!(run.schema, SCHEMA_V2);
    assert_eq!(repeat_folder(2), "repeat-2");
}

#[test]
fn utc_format_has_nanoseconds_and_parses_back() {
    let s = format_utc_ns(1_700_000_000_123_456_789);
    assert_eq!(s, "2023-11-14T22:13:20.123456789Z");
    assert_eq!(parse_utc(&s), Some(1_700_000_000_123_456_789));
}
