//! Trace replay fidelity: how late `anvil-capture` sends each row of a timed trace.
//!
//! A synthetic Mooncake-format trace of `REPLAY_ROWS` rows (default 10,000) with distinct
//! timestamps is drawn as a Poisson process at `REPLAY_RATE` requests per second (default
//! 600, so every second of it peaks above 500), each row 128 prompt tokens (one block of its
//! own) and 4 reply tokens; `anvil-sim` runs the saturation timing (room for 4,096
//! sequences, a prefill that never waits) so the server keeps up. The real `anvil-capture`
//! replays it uncapped (256 in flight), and for every measured request the benchmark reads
//! `t_sent_ns − t_intended_ns` (the first request byte written minus the trace's time, on the
//! one `CLOCK_MONOTONIC` clock) from `requests.parquet`.
//!
//! Printed: the machine's load average and file-descriptor limit, the rows sent, their
//! lateness p50 / p90 / p99 / p99.9 / max in microseconds, and the same for a floor run in
//! the same process: a thread sleeping to each row's time exactly as the recorder's trace
//! dispatcher does, measuring only its own wake-up (no socket, no worker hand-over), so the
//! ratio of anvil's p99 to the floor's says what the hand-over and the request write add on
//! this machine. The target is p99 ≤ 1 ms.
//!
//! Run: `cargo bench --profile release --no-default-features --bench replay_lateness`.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anvil::artifact::open_table;
use anvil::clock::monotonic_ns;
use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use rand::SeedableRng;
use rand_distr::Distribution;

#[path = "support/sim.rs"]
mod support;

const SIM: &str = env!("CARGO_BIN_EXE_anvil-sim");
const CAPTURE: &str = env!("CARGO_BIN_EXE_anvil-capture");

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Nearest-rank percentile of sorted values.
fn pct(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Poisson arrival times in ms (strictly increasing, so no two rows share a time).
fn arrivals(rows: usize, rate: f64) -> Vec<f64> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(38027);
    let gaps = rand_distr::Exp::new(rate).expect("a positive rate");
    let mut t = 0.0f64;
    (0..rows)
        .map(|_| {
            t += gaps.sample(&mut rng).max(1e-6) * 1e3;
            t
        })
        .collect()
}

fn write_trace(dir: &Path, times_ms: &[f64]) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join("poisson.jsonl")).unwrap());
    for (i, t) in times_ms.iter().enumerate() {
        writeln!(
            f,
            "{{\"timestamp\": {t:.6}, \"input_length\": 128, \"output_length\": 4, \"hash_ids\": [{i}]}}"
        )
        .unwrap();
    }
    let workloads = serde_json::json!({"workloads": [{
        "class": "poisson-replay",
        "gate": "broad repeated quality, agentic, SWE, and endurance",
        "trace": {"file": "poisson.jsonl"}
    }]});
    std::fs::write(dir.join("workloads.json"), workloads.to_string()).unwrap();
}

fn summary(label: &str, late_ns: &mut [i64]) -> i64 {
    late_ns.sort_unstable();
    let us = |v: i64| v as f64 / 1e3;
    println!(
        "{label:<28} n {:>6}  p50 {:>8.1}  p90 {:>8.1}  p99 {:>8.1}  p99.9 {:>8.1}  max {:>9.1} µs",
        late_ns.len(),
        us(pct(late_ns, 0.5)),
        us(pct(late_ns, 0.9)),
        us(pct(late_ns, 0.99)),
        us(pct(late_ns, 0.999)),
        us(*late_ns.last().unwrap_or(&0)),
    );
    pct(late_ns, 0.99)
}

/// The floor: the recorder's dispatcher loop alone (sleep to 60 µs before, spin the rest),
/// measuring its own wake-up against each time.
fn floor(times_ms: &[f64]) -> Vec<i64> {
    let start = monotonic_ns() + 50_000_000;
    let mut late = Vec::with_capacity(times_ms.len());
    for t in times_ms {
        let intended = start + (t * 1e6) as i64;
        loop {
            let left = intended - monotonic_ns();
            if left <= 0 {
                break;
            }
            if left > 60_000 {
                std::thread::sleep(Duration::from_nanos((left - 60_000) as u64));
            } else {
                std::hint::spin_loop();
            }
        }
        late.push(monotonic_ns() - intended);
    }
    late
}

fn main() {
    let rows: usize = env_or("REPLAY_ROWS", 10_000);
    let rate: f64 = env_or("REPLAY_RATE", 600.0);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    println!(
        "replay lateness: {rows} rows, Poisson at {rate}/s; load average {}; open files limit {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        limit.rlim_cur
    );
    let dir = tempfile::tempdir().unwrap();
    let times = arrivals(rows, rate);
    let peak = times
        .windows(2)
        .map(|w| w[1] - w[0])
        .fold(f64::MAX, f64::min);
    println!(
        "trace span {:.1} s, smallest gap {:.3} ms",
        times.last().unwrap() / 1e3,
        peak
    );
    write_trace(dir.path(), &times);
    let manifest = dir.path().join("manifest.json");
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/sample-data/workload-manifest.json"
        ),
        &manifest,
    )
    .unwrap();
    let (mut sim, port) = support::start(SIM, &[], Stdio::null());
    let out = dir.path().join("out");
    let status = Command::new(CAPTURE)
        .args(["run", "--manifest"])
        .arg(&manifest)
        .args(["--workloads"])
        .arg(dir.path().join("workloads.json"))
        .args(["--class", "poisson-replay", "--arm", "bench", "--quiet"])
        .args(["--endpoint", &format!("http://127.0.0.1:{port}")])
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::piped())
        .output()
        .expect("run anvil-capture");
    let _ = sim.kill();
    let _ = sim.wait();
    assert!(
        status.status.success(),
        "anvil-capture failed: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    let artifact = String::from_utf8_lossy(&status.stdout)
        .lines()
        .last()
        .expect("the artifact folder")
        .to_owned();
    let batches: Vec<arrow_array::RecordBatch> =
        open_table(&Path::new(&artifact).join("requests.parquet"))
            .expect("requests.parquet")
            .reader()
            .expect("reader")
            .map(|b| b.expect("batch"))
            .collect();
    let mut late = Vec::new();
    for batch in batches {
        let kind = batch
            .column_by_name("kind")
            .unwrap()
            .as_string::<i32>()
            .clone();
        let intended = batch
            .column_by_name("t_intended_ns")
            .unwrap()
            .as_primitive::<Int64Type>()
            .clone();
        let sent = batch
            .column_by_name("t_sent_ns")
            .unwrap()
            .as_primitive::<Int64Type>()
            .clone();
        for i in 0..batch.num_rows() {
            if kind.value(i) == "measured" && !sent.is_null(i) {
                late.push(sent.value(i) - intended.value(i));
            }
        }
    }
    let anvil_p99 = summary("anvil-capture (sent − due)", &mut late);
    let mut floor_late = floor(&times);
    let floor_p99 = summary("floor (wake-up − due)", &mut floor_late);
    println!(
        "p99 {:.1} µs (target ≤ 1000 µs): {}; {:.2}× the floor's p99",
        anvil_p99 as f64 / 1e3,
        if anvil_p99 <= 1_000_000 {
            "met"
        } else {
            "NOT met"
        },
        anvil_p99 as f64 / floor_p99.max(1) as f64
    );
}
