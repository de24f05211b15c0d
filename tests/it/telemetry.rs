//! GPU telemetry end to end: the simulator's DCGM exporter read by anvil's DCGM reader, a
//! capture that reads it beside the run (every recorded value one the exporter held, per
//! the simulator's GPU truth), and a source that dies mid-run (a recorded gap; the run
//! unaffected).

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use anvil::artifact::telemetry::Field;
use anvil::capture::telemetry::dcgm;

use super::common::{Recording, Sim, artifact_of, run_jsons, small_manifest, sql_rows};
use super::sim::get;

/// The GPU flags of a simulator whose fast profile (2,000 decode and 400,000 prefill tokens
/// per second per sequence) stays under its power limit.
const COOL: [&str; 4] = [
    "--gpu-w-per-decode-tps",
    "0.02",
    "--gpu-w-per-kprefill-tps",
    "1",
];

#[test]
fn the_simulators_exporter_reads_as_a_dcgm_exporters_default_and_extended_sets() {
    let sim = Sim::start(&["--dcgm", "--gpus-per-replica", "2", "--first-gpu", "4"]);
    let r = dcgm::read(get(&format!("{}/dcgm/metrics", sim.url(0))).as_bytes());
    assert_eq!(r.bad_lines, 0, "{:?}", r.first_error);
    let gpus: Vec<u32> = r.gpus().iter().map(|g| g.index).collect();
    assert_eq!(gpus, [4, 5]);
    assert!(
        r.gpus()[0]
            .uuid
            .as_deref()
            .is_some_and(|u| u.starts_with("GPU-"))
    );
    assert_eq!(r.get(4, Field::PowerW), Some(90.0), "idle");
    assert_eq!(
        r.absent(),
        [
            Field::MaxSmClockMhz,
            Field::PowerLimitW,
            Field::SlowdownTempC,
            Field::ClockEventReasons,
            Field::PowerViolationNs,
            Field::ThermalViolationNs
        ],
        "the exporter's default counters lack what the collectors file adds"
    );
    drop(sim);
    let sim = Sim::start(&[
        "--dcgm",
        "--dcgm-counters",
        "extended",
        "--gpu-power-limit",
        "450",
    ]);
    let r = dcgm::read(get(&format!("{}/dcgm/metrics", sim.url(0))).as_bytes());
    assert!(r.absent().is_empty(), "{:?}", r.absent());
    assert_eq!(r.get(0, Field::PowerLimitW), Some(450.0));
    assert_eq!(r.get(0, Field::ClockEventReasons), Some(1.0), "idle");
    // Without --dcgm there is no exporter, and the answer says how to get one.
    let plain = Sim::start(&[]);
    let e = ureq::get(&format!("{}/dcgm/metrics", plain.url(0))).call();
    assert!(matches!(e, Err(ureq::Error::StatusCode(404))), "{e:?}");
}

/// What `anvil summary` says of the artifacts beneath `data`.
fn summary(data: &Path) -> String {
    let o = super::common::run(
        super::common::ANVIL,
        &["summary", "--data", data.to_str().unwrap()],
        &[],
    );
    assert!(o.status.success(), "{}", super::common::output_text(&o));
    super::common::output_text(&o)
}

/// The simulator's GPU truth rows taken at the exporter's snapshots: (energy floored to mJ,
/// power) per GPU.
fn snapshots(truth: &Path) -> HashMap<i64, Vec<(f64, f64)>> {
    let text = std::fs::read_to_string(truth).unwrap();
    let mut out: HashMap<i64, Vec<(f64, f64)>> = HashMap::new();
    for line in text.lines().skip(1) {
        let cells: Vec<&str> = line.split(',').collect();
        if cells[9] == "1" {
            let gpu: i64 = cells[1].parse().unwrap();
            let energy: f64 = cells[5].parse().unwrap();
            let power: f64 = cells[4].parse().unwrap();
            out.entry(gpu).or_default().push((energy.floor(), power));
        }
    }
    out
}

#[test]
fn a_capture_records_what_the_exporter_held_at_each_reading() {
    let dir = tempfile::tempdir().unwrap();
    let truth_path = dir.path().join("gpu-truth.csv");
    let truth_s = truth_path.to_str().unwrap();
    let mut args = vec![
        "--dcgm",
        "--dcgm-counters",
        "extended",
        "--dcgm-interval-ms",
        "200",
    ];
    args.extend(["--gpus-per-replica", "2", "--gpu-truth", truth_s]);
    args.extend(COOL);
    let sim = Sim::start(&args);
    let manifest = small_manifest(dir.path(), |_| {});
    let out = dir.path().join("runs");
    let exporter = format!("dcgm={}/dcgm/metrics", sim.url(0));
    let o = Recording::cell(&manifest, &out, 4, 480)
        .arm("A")
        .endpoint(&sim.url(0))
        .args(&["--telemetry", &exporter, "--telemetry-gpus", "1"])
        .args(&["--telemetry-interval", "0.1", "--telemetry-every", "0.1"])
        .run();
    let artifact = artifact_of(&o);
    sim.terminate();
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(artifact.join("run.json")).unwrap()).unwrap();
    let source = &run["telemetry"][0];
    assert_eq!(source["source"], "dcgm");
    assert_eq!(source["gpus"], serde_json::json!([1]), "{source}");
    assert_eq!(source["other_gpus"], serde_json::json!([0]), "{source}");
    assert_eq!(source["absent"], serde_json::json!([]), "{source}");
    assert_eq!(source["failed_readings"], 0, "{source}");
    let rows = sql_rows(
        &out,
        "SELECT phase, gpu, arm_gpu, energy_mj, power_w, error FROM telemetry ORDER BY t_ns, gpu",
    );
    let during = rows.iter().filter(|r| r["phase"] == "during").count();
    assert!(during >= 2 * 10, "{during} rows during the run");
    assert_eq!(rows.first().unwrap()["phase"], "before");
    assert_eq!(rows.last().unwrap()["phase"], "after");
    let truth = snapshots(&truth_path);
    let mut moved = 0;
    for r in &rows {
        assert!(r["error"].is_null(), "{r}");
        let gpu = r["gpu"].as_i64().unwrap();
        assert_eq!(r["arm_gpu"], gpu == 1, "{r}");
        let (energy, power) = (
            r["energy_mj"].as_f64().unwrap(),
            r["power_w"].as_f64().unwrap(),
        );
        let held = truth[&gpu]
            .iter()
            .any(|(e, p)| *e == energy && (p - power).abs() < 5e-4);
        assert!(held, "{r}: not a value the exporter held");
        moved += usize::from(power > 90.0);
    }
    assert!(moved > 0, "the GPUs did work");

    // The energy over the measured window, against the truth: within the bound stated.
    let origin = run["clock"]["monotonic_origin_ns"].as_i64().unwrap();
    let e = sql_rows(
        &out,
        "SELECT e.window, e.gpus, e.method, e.energy_j, e.bound_j, e.too_coarse, e.partial, \
         e.j_per_output_token, a.completion_tokens, a.t_first_sent_ns, a.t_last_done_ns \
         FROM run_energy e JOIN aggregate_throughput a ON a.run_id = e.run_id \
         AND a.window = e.window AND a.scope = 'run' ORDER BY e.window",
    );
    assert_eq!(e.len(), 2, "{e:?}");
    for w in &e {
        assert_eq!(
            (w["gpus"].as_i64(), w["method"].as_str()),
            (Some(1), Some("counter"))
        );
        assert_eq!(
            (w["partial"].as_bool(), w["too_coarse"].as_bool()),
            (Some(false), Some(false))
        );
        let at = |k: &str| origin + w[k].as_i64().unwrap();
        let truth_j = truth_energy_j(&truth_path, 1, at("t_last_done_ns"))
            - truth_energy_j(&truth_path, 1, at("t_first_sent_ns"));
        let (sql_j, bound) = (
            w["energy_j"].as_f64().unwrap(),
            w["bound_j"].as_f64().unwrap(),
        );
        assert!((sql_j - truth_j).abs() <= bound, "{w}: truth {truth_j} J");
        assert!(bound < truth_j, "a bound that says something: {w}");
        let tokens = w["completion_tokens"].as_f64().unwrap();
        assert!((w["j_per_output_token"].as_f64().unwrap() - sql_j / tokens).abs() < 1e-9);
    }
    // Cool and under its limit: not throttled, judged from its reasons, never at the limit.
    let t = sql_rows(
        &out,
        "SELECT throttled, judged_by, at_power_limit_share FROM gpu_throttle WHERE window = 'all'",
    );
    assert_eq!(t[0]["throttled"], false, "{t:?}");
    assert_eq!(t[0]["judged_by"], "reasons and SM clock", "{t:?}");
    assert_eq!(t[0]["at_power_limit_share"].as_f64(), Some(0.0), "{t:?}");
    // anvil summary states the GPUs' energy beside the run's figures.
    let said = summary(&out);
    assert!(
        said.contains("GPUs (1 counter): ") && said.contains("J per output token"),
        "{said}"
    );
    assert!(!said.contains("throttled"), "{said}");
    // anvil verify recomputes the energy with polars and agrees.
    let o = super::common::run(
        super::common::ANVIL,
        &["verify", "--data", out.to_str().unwrap()],
        &[],
    );
    let said = super::common::output_text(&o);
    assert!(o.status.success() && said.contains("run_energy"), "{said}");
}

/// The exact energy of GPU `gpu` at CLOCK_MONOTONIC `t_ns`, J, from the simulator's truth:
/// power is constant over each tick, so energy is linear between two rows.
fn truth_energy_j(truth: &Path, gpu: i64, t_ns: i64) -> f64 {
    let text = std::fs::read_to_string(truth).unwrap();
    let rows: Vec<(i64, f64)> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|c| c[1].parse::<i64>().unwrap() == gpu)
        .map(|c| (c[0].parse().unwrap(), c[5].parse::<f64>().unwrap() / 1000.0))
        .collect();
    let after = rows
        .iter()
        .position(|(t, _)| *t >= t_ns)
        .expect("truth covers the time");
    let (t1, e1) = rows[after];
    let Some(&(t0, e0)) = after.checked_sub(1).map(|i| &rows[i]) else {
        return e1;
    };
    e0 + (e1 - e0) * (t_ns - t0) as f64 / (t1 - t0) as f64
}

/// Whether a complete part file of a telemetry table is beneath `dir` (tolerating folders
/// that appear and go while the recorder works).
fn telemetry_part_written(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        let path = e.path();
        if path.ends_with("telemetry.parts") {
            std::fs::read_dir(&path).is_ok_and(|parts| {
                parts.flatten().any(|p| {
                    let name = p.file_name();
                    let name = name.to_string_lossy();
                    name.ends_with(".parquet") && !name.starts_with('_')
                })
            })
        } else {
            path.is_dir() && telemetry_part_written(&path)
        }
    })
}

#[test]
fn a_source_that_dies_mid_run_leaves_a_recorded_gap_and_the_run_completes() {
    let dir = tempfile::tempdir().unwrap();
    let server = Sim::start(&[]);
    let exporter = Sim::start(&["--dcgm", "--dcgm-interval-ms", "100"]);
    let manifest = small_manifest(dir.path(), |_| {});
    let out = dir.path().join("runs");
    let source = format!("dcgm={}/dcgm/metrics", exporter.url(0));
    let child = Recording::cell(&manifest, &out, 2, 400)
        .arm("A")
        .endpoint(&server.url(0))
        .args(&["--telemetry", &source, "--telemetry-every", "0.1"])
        // Declared 1 s: a run of a few seconds is shorter than 20 intervals.
        .args(&["--telemetry-interval", "1"])
        .spawn();
    // Killed once readings are on disk (a part file of the telemetry table).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !telemetry_part_written(&out) {
        assert!(
            std::time::Instant::now() < deadline,
            "no telemetry recorded"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    exporter.signal(libc::SIGKILL);
    let o = child.wait_with_output().unwrap();
    let artifact = artifact_of(&o);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("the gap is recorded"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(artifact.join("run.json")).unwrap()).unwrap();
    assert_eq!(run["status"], "complete");
    assert_eq!(run["counts"]["succeeded"], 400);
    let source = &run["telemetry"][0];
    assert!(source["failed_readings"].as_u64().unwrap() >= 1, "{source}");
    let (readings, failed) = (
        source["readings"].as_u64().unwrap(),
        source["failed_readings"].as_u64().unwrap(),
    );
    assert!(readings > failed, "{source}");
    let gaps = sql_rows(
        &out,
        "SELECT count(*) AS n, bool_and(gpu IS NULL) AS no_gpu FROM telemetry WHERE error IS NOT NULL",
    );
    assert!(gaps[0]["n"].as_i64().unwrap() >= 1, "{gaps:?}");
    assert_eq!(gaps[0]["no_gpu"], true);
    let energy = sql_rows(
        &out,
        "SELECT partial, too_coarse FROM run_energy WHERE window = 'all'",
    );
    assert_eq!(energy[0]["partial"], true, "{energy:?}");
    assert_eq!(energy[0]["too_coarse"], true, "{energy:?}");
    assert_eq!(run_jsons(&out).len(), 1);
}

/// The README gives the collectors-file lines anvil's reader knows, exactly.
#[test]
fn the_readme_gives_the_exporter_lines_anvil_reads() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    assert!(
        readme.contains(dcgm::EXTRA_COLLECTORS),
        "README lacks:\n{}",
        dcgm::EXTRA_COLLECTORS
    );
    assert!(readme.contains("dcgm-exporter -c 1000"));
}

/// One capture against a simulator whose GPU runs hot (70 °C ambient, 2 s thermal time
/// constant: past its 87 °C slowdown temperature within seconds of load), reading its
/// exporter with `counters`; the `gpu_throttle` row of window `all` and the truth's reasons.
fn hot_run(counters: &str) -> (serde_json::Value, Vec<i64>) {
    let dir = tempfile::tempdir().unwrap();
    let truth_path = dir.path().join("gpu-truth.csv");
    let mut args = vec![
        "--dcgm",
        "--dcgm-counters",
        counters,
        "--dcgm-interval-ms",
        "100",
    ];
    args.extend([
        "--gpu-ambient-c",
        "70",
        "--gpu-c-per-w",
        "0.1",
        "--gpu-tau-s",
        "2",
    ]);
    args.extend(["--gpu-truth", truth_path.to_str().unwrap()]);
    args.extend(COOL);
    let sim = Sim::start(&args);
    let manifest = small_manifest(dir.path(), |_| {});
    let out = dir.path().join("runs");
    let exporter = format!("dcgm={}/dcgm/metrics", sim.url(0));
    artifact_of(
        &Recording::cell(&manifest, &out, 4, 480)
            .arm("A")
            .endpoint(&sim.url(0))
            .args(&["--telemetry", &exporter, "--telemetry-interval", "0.1"])
            .args(&["--telemetry-every", "0.1"])
            .run(),
    );
    sim.terminate();
    let said = summary(&out);
    assert!(
        said.contains("its GPUs were throttled in the measured window"),
        "{said}"
    );
    let row = sql_rows(&out, "SELECT * FROM gpu_throttle WHERE window = 'all'");
    assert_eq!(row.len(), 1, "{row:?}");
    // The reasons of every snapshot the exporter took.
    let text = std::fs::read_to_string(&truth_path).unwrap();
    let reasons = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|c| c[9] == "1")
        .map(|c| c[8].parse().unwrap())
        .collect();
    (row[0].clone(), reasons)
}

#[test]
fn a_thermally_slowed_gpu_is_found_throttled_from_its_reasons_or_its_clock_alone() {
    let (row, truth) = hot_run("extended");
    assert!(
        truth.iter().any(|r| r & 0x40 != 0),
        "the truth has a thermal slowdown"
    );
    assert_eq!(row["throttled"], true, "{row}");
    assert_eq!(row["judged_by"], "reasons and SM clock", "{row}");
    assert_eq!(
        row["throttle_reasons"], "hw_slowdown,hw_thermal_slowdown",
        "{row}"
    );
    assert!(row["throttle_readings"].as_i64().unwrap() > 0, "{row}");
    // The default counters give no reasons: the halved SM clock alone says it.
    let (row, truth) = hot_run("default");
    assert!(truth.iter().any(|r| r & 0x40 != 0));
    assert_eq!(row["judged_by"], "SM clock only", "{row}");
    assert_eq!(row["max_clock_source"], "highest seen", "{row}");
    assert_eq!(row["throttled"], true, "{row}");
    assert!(row["low_clock_share"].as_f64().unwrap() > 0.1, "{row}");
}

/// Local sources on a machine without the NVIDIA driver: the run completes, each source is
/// tried once, said to be absent with what to install, and not read again. On a machine
/// with the driver, both read its GPUs.
#[test]
fn local_sources_without_the_driver_are_named_and_the_run_goes_on() {
    let driver = std::process::Command::new("nvidia-smi").output().is_ok();
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::start(&[]);
    let manifest = small_manifest(dir.path(), |_| {});
    let out = dir.path().join("runs");
    let o = Recording::cell(&manifest, &out, 2, 8)
        .arm("A")
        .endpoint(&sim.url(0))
        .args(&["--telemetry", "nvidia-smi", "--telemetry", "nvml"])
        .loud()
        .run();
    let artifact = artifact_of(&o);
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(artifact.join("run.json")).unwrap()).unwrap();
    if driver {
        for source in run["telemetry"].as_array().unwrap() {
            assert_eq!(source["failed_readings"], 0, "{source}");
            assert!(!source["gpus"].as_array().unwrap().is_empty(), "{source}");
        }
        return;
    }
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("nvidia-smi is not on the PATH"), "{said}");
    assert!(
        said.contains("NVML not loaded") && said.contains("libnvidia-ml.so.1"),
        "{said}"
    );
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(artifact.join("run.json")).unwrap()).unwrap();
    assert_eq!(run["status"], "complete");
    for source in run["telemetry"].as_array().unwrap() {
        assert_eq!(source["readings"], 1, "tried once: {source}");
        assert_eq!(source["failed_readings"], 1, "{source}");
    }
}

/// `anvil-capture gpu-check` against the simulator's exporter: each GPU's counter and
/// integrated power agree within 5% (exit 0); with no source that answers, exit 5.
#[test]
fn the_gpu_check_holds_the_counter_against_integrated_power() {
    let sim = Sim::start(&[
        "--dcgm",
        "--dcgm-interval-ms",
        "100",
        "--gpus-per-replica",
        "2",
    ]);
    let source = format!("dcgm={}/dcgm/metrics", sim.url(0));
    let o = super::common::run(
        super::common::CAPTURE,
        &[
            "gpu-check",
            "--telemetry",
            &source,
            "--seconds",
            "2",
            "--every",
            "0.1",
        ],
        &[],
    );
    let said = super::common::output_text(&o);
    assert_eq!(o.status.code(), Some(0), "{said}");
    assert!(said.contains("2 of 2 within it"), "{said}");
    drop(sim);
    let o = super::common::run(
        super::common::CAPTURE,
        &["gpu-check", "--telemetry", &source, "--seconds", "1"],
        &[],
    );
    let said = super::common::output_text(&o);
    assert_eq!(o.status.code(), Some(5), "{said}");
    assert!(said.contains("no GPU with an energy counter"), "{said}");
}
