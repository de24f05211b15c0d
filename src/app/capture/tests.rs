//! `anvil-capture`'s command line against what it means: flags parsed into requests and
//! configurations, each bad flag named, and the canonical command line parsed back.

use super::*;
use clap::Parser;

/// The configuration of `anvil-capture run` with `extra` flags, or why clap or the
/// check refused them.
/// [`parse`] of a headline-class run against one local endpoint, with `extra`.
fn headline(extra: &[&str]) -> Result<RunConfig, String> {
    let endpoint = ["--endpoint", "http://127.0.0.1:8000/v1"];
    parse(
        &[
            &["--class", "headline-sustained-output"][..],
            &endpoint,
            extra,
        ]
        .concat(),
    )
}

fn parse(extra: &[&str]) -> Result<RunConfig, String> {
    let manifest = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/sample-data/workload-manifest.json"
    );
    let out = std::env::temp_dir().join("anvil-capture-config-test");
    let mut argv = vec![
        "anvil-capture",
        "run",
        "--manifest",
        manifest,
        "--arm",
        "K12",
        "--out",
        out.to_str().unwrap(),
    ];
    argv.extend_from_slice(extra);
    let cli = Cli::try_parse_from(&argv).map_err(|e| e.to_string())?;
    let Command::Run(a) = cli.command else {
        panic!("not run")
    };
    let env = |k: &str| (k == "KEY").then(|| "s3cret-token".to_owned());
    RunConfig::from_request((*a).into(), &env).map_err(|e: ConfigError| e.to_string())
}

/// The request `anvil-capture run` builds from `argv`.
fn request_of<S: AsRef<str>>(argv: &[S]) -> RunRequest {
    let cli = Cli::try_parse_from(argv.iter().map(|a| a.as_ref())).unwrap();
    let Command::Run(a) = cli.command else {
        panic!("not run")
    };
    (*a).into()
}

/// `to_argv` is the one writer of the recorder's command line: parsed back, it gives the
/// request it was written from, every flag set.
#[test]
fn the_canonical_command_line_parses_back_to_its_request() {
    let argv = [
        "anvil-capture",
        "run",
        "--cpu",
        "any",
        "--set",
        "runtime=vllm 0.11",
        "--out",
        "o",
        "--manifest",
        "m.json",
        "--class",
        "headline-sustained-output",
        "--context",
        "4096",
        "--concurrency",
        "8",
        "--requests",
        "100",
        "--off-manifest",
        "--arm",
        "TP2",
        "--stage",
        "matched topology",
        "--set",
        "topology=TP2",
        "--set",
        "hf_token=x",
        "--default",
        "torch_compile=off",
        "--repeat",
        "3",
        "--repeat-index",
        "2",
        "--shard",
        "auto/4",
        "--start-at",
        "2026-12-06T10:00:00Z",
        "--start-margin",
        "2",
        "--run-group",
        "g1",
        "--endpoint",
        "http://127.0.0.1:8000",
        "--endpoint",
        "http://127.0.0.1:8001",
        "--model",
        "qwen",
        "--api",
        "completions",
        "--api-key-env",
        "KEY",
        "--rate",
        "2.5",
        "--poisson",
        "--ramp",
        "3",
        "--probe",
        "capacity",
        "--warmup",
        "5",
        "--metrics-url",
        "http://127.0.0.1:9000/m",
        "--metrics-url",
        "http://127.0.0.1:9001/m",
        "--telemetry",
        "dcgm=http://gpu-host:9400/metrics",
        "--telemetry",
        "nvidia-smi",
        "--telemetry-gpus",
        "0,1",
        "--telemetry-gpus",
        "2",
        "--telemetry-interval",
        "1",
        "--telemetry-every",
        "0.5",
        "--timeout-first-byte",
        "240",
        "--timeout-idle",
        "30",
        "--timeout-total",
        "900",
        "--quiet",
        "--no-thinking-switch",
        "--no-realtime",
    ];
    let request = request_of(&argv);
    assert_eq!(request.arm.runtime.as_deref(), Some("vllm 0.11"));
    let canonical = request.to_argv();
    assert_eq!(request_of(&canonical), request);
    assert_eq!(canonical.len(), argv.len(), "{canonical:?}");
    assert_eq!(
        canonical[..8],
        [
            "anvil-capture",
            "run",
            "--manifest",
            "m.json",
            "--class",
            "headline-sustained-output",
            "--context",
            "4096"
        ]
    );
}

fn err(extra: &[&str]) -> String {
    parse(extra).unwrap_err().to_string()
}

#[test]
fn cpu_is_one_the_process_may_use_start_or_any() {
    use crate::capture::config::CpuPlacement;
    let base = [
        "--class",
        "headline-sustained-output",
        "--endpoint",
        "http://127.0.0.1:8000/v1",
    ];
    let with = |cpu: &str| {
        let mut v = base.to_vec();
        v.extend(["--cpu", cpu]);
        parse(&v)
    };
    assert_eq!(parse(&base).unwrap().cpu, CpuPlacement::Start);
    assert_eq!(with("start").unwrap().cpu, CpuPlacement::Start);
    assert_eq!(with("any").unwrap().cpu, CpuPlacement::Any);
    let mine = *crate::realtime::allowed_cpus().last().unwrap();
    assert_eq!(
        with(&mine.to_string()).unwrap().cpu,
        CpuPlacement::Cpu(mine)
    );
    let e = with("1000").unwrap_err().to_string();
    assert!(
        e.starts_with("--cpu `1000`: not among the CPUs this process may use ("),
        "{e}"
    );
    let e = Cli::try_parse_from([
        "anvil-capture",
        "run",
        "--manifest",
        "m.json",
        "--arm",
        "K12",
        "--out",
        "out",
        "--cpu",
        "fast",
    ])
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("--cpu") && e.contains("`fast` is not a CPU number"),
        "{e}"
    );
}

#[test]
fn secrets_passed_through_set_are_kept_out_of_the_arm_config() {
    let c = headline(&[
        "--set",
        "auth=Bearer s3cret-token",
        "--set",
        "hf_token=hf_abcdef",
        "--set",
        "max_tokens=64",
        "--api-key-env",
        "KEY",
    ])
    .unwrap();
    // The key's value wherever it appears; values under secret-like names whatever they are.
    assert_eq!(c.arm.config.get("auth"), Some("<redacted>"));
    assert_eq!(c.arm.config.get("hf_token"), Some("<redacted>"));
    assert_eq!(c.arm.config.get("max_tokens"), Some("64"));
    let c = headline(&["--set", "note=key is s3cret-token", "--api-key-env", "KEY"]).unwrap();
    assert_eq!(c.arm.config.get("note"), Some("key is <redacted>"));
    assert!(!c.command_line.join(" ").contains("s3cret"));
}

#[test]
fn the_headline_run_is_accepted_with_its_defaults() {
    let c = headline(&["--set", "spec_depth=12", "--api-key-env", "KEY"]).unwrap();
    assert_eq!(c.cell.id(), "headline-sustained-output.ctx4096.c8.n100");
    assert_eq!(c.metrics[0].url, "http://127.0.0.1:8000/metrics");
    assert_eq!(c.arm.config.get("spec_depth"), Some("12"));
    assert!(c.artifact_dir.ends_with(
        "2026-09-04-qwen38-27b-pro6000-possibility/K12/headline-sustained-output.ctx4096.c8.n100"
    ));
    assert!(!c.command_line.join(" ").contains("s3cret"));
    assert_eq!(c.schedule, Schedule::Closed);
    let c = parse(&[
        "--class",
        "headline-sustained-output",
        "--endpoint",
        "http://127.0.0.1:8000",
        "--rate",
        "2.5",
        "--poisson",
    ])
    .unwrap();
    assert_eq!(
        c.cell_id,
        "headline-sustained-output.ctx4096.c8.n100.poisson2.5"
    );
    assert!(
        c.artifact_dir
            .ends_with("K12/headline-sustained-output.ctx4096.c8.n100.poisson2.5")
    );
    assert_eq!(c.schedule.rate_per_s(), Some(2.5));
}

/// A Responses or completions run of a cell never shares the chat run's folder; a chat
/// run keeps the manifest's id.
#[test]
fn the_api_is_in_the_cell_id_unless_it_is_chat() {
    let with = |api: &str, more: &[&str]| {
        let mut v = vec![
            "--class",
            "headline-sustained-output",
            "--endpoint",
            "http://127.0.0.1:8000",
            "--api",
            api,
        ];
        v.extend_from_slice(more);
        parse(&v).unwrap()
    };
    let chat = with("chat", &[]);
    assert_eq!(chat.cell_id, "headline-sustained-output.ctx4096.c8.n100");
    let responses = with("responses", &[]);
    assert_eq!(
        responses.cell_id,
        "headline-sustained-output.ctx4096.c8.n100.responses"
    );
    assert!(
        responses
            .artifact_dir
            .ends_with("K12/headline-sustained-output.ctx4096.c8.n100.responses")
    );
    assert_ne!(responses.artifact_dir, chat.artifact_dir);
    let completions = with("completions", &["--rate", "2", "--ramp", "3"]);
    assert_eq!(
        completions.cell_id,
        "headline-sustained-output.ctx4096.c8.n100.completions.rate2.ramp3"
    );
}

#[test]
fn each_bad_flag_is_named() {
    let ep = ["--endpoint", "http://127.0.0.1:8000"];
    let with = |more: &[&str]| {
        let mut v = vec!["--class", "headline-sustained-output"];
        v.extend_from_slice(&ep);
        v.extend_from_slice(more);
        err(&v)
    };
    assert!(with(&["--context", "1000"]).contains("--context 1000"));
    let e = with(&["--context", "32", "--off-manifest"]);
    assert!(e.contains("--context `32`: the prompt's fixed part"), "{e}");
    assert!(e.contains("already 4"), "{e}");
    assert!(with(&["--rate", "-1"]).contains("--rate"));
    assert!(with(&["--timeout-idle", "0"]).contains("--timeout-idle"));
    assert!(with(&["--set", "novalue"]).contains("--set"));
    assert!(with(&["--api", "grpc"]).contains("--api"));
    assert!(with(&["--api-key-env", "MISSING"]).contains("--api-key-env"));
    assert!(with(&["--metrics-url", "a", "--metrics-url", "b"]).contains("--metrics-url"));
    let e = err(&["--class", "nope", "--endpoint", "http://h:1"]);
    assert!(e.contains("--class `nope`"), "{e}");
    let e = err(&[
        "--class",
        "headline-sustained-output",
        "--endpoint",
        "localhost:8000",
    ]);
    assert!(e.contains("--endpoint"), "{e}");
}
