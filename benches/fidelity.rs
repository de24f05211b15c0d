//! The recorder's own timing error, measured against the simulator's ground truth.
//!
//! For each level (16, 64 and 256 concurrent streams of ~50 tokens/s, about 20 s each) this
//! starts `anvil-sim --truth FILE` (SCHED_FIFO when permitted) and runs the real
//! `anvil-capture` binary against it (closed loop, one replica, C = streams, 4 requests per
//! stream of ~250 tokens), then joins every recorded event with the simulator's write of
//! the same event on (`x-request-id` = `run_id-request_index`, `seq`) and prints:
//!
//! - events/s recorded during the measured window;
//! - receive lag = recorded receive time − simulator write time (p50/p99/max, µs): kernel,
//!   hyper, SSE framing and the timestamp, on loopback;
//! - TTFT error = anvil's TTFT (first content event − `t_sent_ns`) minus the true TTFT (the
//!   simulator's first content write − its request read), mean and p99, µs, for the first
//!   wave (the first C requests, released together into an idle server) and the rest apart;
//! - `t_sent_ns` minus the simulator's request read (how late the client's send stamp is;
//!   negative when the client's write returned after the server had already read it);
//! - recorder CPU per event (user + system time of the whole `anvil-capture` process, and of
//!   its writer thread alone, over the measured window, sampled from /proc every 50 ms,
//!   divided by the events);
//! - the whole process's CPU, start to exit (start-up, calibration and finalising included:
//!   getrusage of the child), for anvil-capture and the peer;
//! - peak RSS of each recorder (its `VmHWM`, sampled with the CPU);
//! - events lost (written by the simulator for a measured request, never recorded), requests
//!   failed, and recorded events the simulator never wrote.
//!
//! The same level is then driven by a peer client, `bench/peer_client.py` (aiohttp, written
//! as vLLM's benchmark client is), over the same request bodies against a fresh simulator,
//! and scored the same way; anvil's CPU per event is printed as a ratio to the peer's. The
//! peer needs aiohttp (`just bench-fidelity` installs it into `target/bench-venv`); without it
//! the peer rows are skipped with a message saying so.
//!
//! Last, a floor: a thread of the benchmark drives the same bodies with nothing but an
//! edge-triggered epoll set looked at once a millisecond and `recvmsg` with kernel receive
//! timestamps, as anvil-capture reads, and no framing, parsing or recording (`run_floor`).
//! Its CPU per event is what reading these streams costs on this machine before any work of
//! a recorder's own, and anvil's CPU is printed as a ratio to it too.
//!
//! Run: `just bench-fidelity`, or `cargo bench --profile release --no-default-features --bench
//! fidelity`. Environment: `FIDELITY_LEVELS` (default `16,64,256`), `FIDELITY_ROUNDS`
//! (requests per stream, default 4), `FIDELITY_WORDS` (tokens each request asks for, default
//! 250), `FIDELITY_REPEATS` (runs per level, default 1: anvil, peer and floor alternate, and a
//! table of medians over the runs follows), `FIDELITY_SIM_ARGS` (extra simulator flags),
//! `FIDELITY_PEER_PYTHON` (the peer's interpreter), `FIDELITY_ONLY_ANVIL=1` (no peer and no
//! floor: a long run of the recorder alone), `FIDELITY_CAPTURE` (the path of another build's
//! `anvil-capture` to measure instead of this build's).
//!
//! A second table gives each recorder's smallest and largest resident set sampled during each
//! tenth of the events (from `/proc`, with the CPU) and their change from the second tenth to
//! the last: memory that grows with the run's length shows there. `just bench-soak` runs the 256
//! level alone for 16 requests per stream (about a million events, 90 s).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anvil::artifact::{RunJson, open_table};
use anvil::clock::monotonic_ns;
use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;

#[path = "support/sim.rs"]
mod support;

const SIM: &str = env!("CARGO_BIN_EXE_anvil-sim");
const CAPTURE: &str = env!("CARGO_BIN_EXE_anvil-capture");
/// Words each request asks for unless `FIDELITY_WORDS` says otherwise: ~250 tokens at 50
/// tok/s is a 5 s stream.
const WORDS: u64 = 250;

fn words() -> u64 {
    std::env::var("FIDELITY_WORDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(WORDS)
}

fn manifest(dir: &Path) -> PathBuf {
    let src = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/sample-data/workload-manifest.json"
    );
    let text = std::fs::read_to_string(src).expect("sample manifest");
    let mut v: serde_json::Value = serde_json::from_str(&text).expect("manifest JSON");
    v["selection"]["headline_response_words"] = words().into();
    v["selection"]["headline_max_tokens"] = (words() + 50).into();
    let p = dir.join("manifest.json");
    std::fs::write(&p, v.to_string()).expect("write manifest");
    p
}

/// Nearest-rank percentile of sorted values.
fn pct(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// User + system clock ticks and the command name from a /proc `stat` file.
fn stat_ticks(path: &str) -> Option<(String, u64)> {
    let stat = std::fs::read_to_string(path).ok()?;
    let comm = stat[stat.find('(')? + 1..stat.rfind(')')?].to_owned();
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some((
        comm,
        f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?,
    ))
}

/// CPU clock ticks of the whole process `pid` and of its writer thread (`anvil-writer`),
/// or `None` once it is gone.
fn cpu_ticks(pid: i32) -> Option<(u64, u64)> {
    let (_, total) = stat_ticks(&format!("/proc/{pid}/stat"))?;
    let mut writer = 0;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Some((comm, ticks)) = stat_ticks(&format!("{}/stat", t.path().display()))
                && comm == "anvil-writer"
            {
                writer = ticks;
            }
        }
    }
    Some((total, writer))
}

/// What one recorder (anvil-capture or the peer) did at one level.
struct Level {
    events: usize,
    window_s: f64,
    lag_us: Vec<i64>,
    /// TTFT error, µs, sorted: the first wave (the first C request indices) and the rest.
    ttft_err_first_us: Vec<i64>,
    ttft_err_rest_us: Vec<i64>,
    cpu_us_per_event: f64,
    /// The writer thread alone (anvil-capture only).
    writer_cpu_us_per_event: Option<f64>,
    /// Client send stamp minus the simulator's request read, µs, sorted.
    sent_minus_read_us: Vec<i64>,
    peak_rss_mb: f64,
    /// Smallest and largest resident set (MB) sampled during each tenth of the events.
    rss_by_events_mb: Vec<(f64, f64)>,
    unmatched: usize,
    /// Events the simulator wrote for the measured requests that the recorder has not.
    lost: usize,
    failed: u64,
    /// User + system CPU seconds of the whole process, start to exit (start-up, calibration
    /// and finalising included); 0 for the floor, a thread of this process.
    process_cpu_s: f64,
    /// Of which before the measured window (start-up, calibration, preparing requests) and
    /// after it (finishing: merging the parts, the quick look), from the /proc samples.
    process_before_s: f64,
    process_after_s: f64,
}

/// The simulator's ground truth: write time per (request id, seq), request read times, first
/// content write per request.
#[derive(Default)]
struct Truth {
    write: HashMap<(String, i64), i64>,
    read: HashMap<String, i64>,
    first_content: HashMap<String, i64>,
}

fn read_truth(path: &Path) -> Truth {
    let mut t = Truth::default();
    let text = std::fs::read_to_string(path).expect("truth file");
    for l in text.lines().skip(1) {
        let f: Vec<&str> = l.split(',').collect();
        let (id, seq, tokens, kind, at) = (f[0], f[2], f[3], f[4], f[6]);
        let Ok(at) = at.parse::<i64>() else { continue };
        if kind == "request_read" {
            t.read.insert(id.to_owned(), at);
            continue;
        }
        if let Ok(s) = seq.parse::<i64>() {
            t.write.insert((id.to_owned(), s), at);
        }
        if kind == "content" && tokens != "0" {
            let e = t.first_content.entry(id.to_owned()).or_insert(at);
            *e = (*e).min(at);
        }
    }
    t
}

/// A running simulator writing its truth to `truth`, and its port.
fn start_sim(truth: &Path, extra: &[String]) -> (std::process::Child, u16) {
    let mut args = vec!["--truth".to_owned(), truth.display().to_string()];
    args.extend(extra.iter().cloned());
    support::start(SIM, &args, Stdio::null())
}

/// Stop the simulator (it flushes its truth on SIGTERM).
fn stop_sim(mut sim: std::process::Child) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(sim.id() as i32, libc::SIGTERM) };
    let _ = sim.wait();
}

/// One look at a running child: when, its CPU clock ticks (whole process and writer thread),
/// and its resident set.
#[derive(Clone, Copy)]
struct Sample {
    t_ns: i64,
    ticks: u64,
    writer_ticks: u64,
    rss_kb: u64,
    /// The process's own high-water mark so far (`VmHWM`; `ru_maxrss` of a child also counts
    /// the parent's resident set at the fork, which grows as this benchmark reads results).
    hwm_kb: u64,
}

/// `VmHWM` of `/proc/PID/status`, KiB.
fn hwm_kb(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The child's resident set in KiB (`/proc/PID/statm`, second field, in pages).
fn rss_kb(pid: i32) -> Option<u64> {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no memory effects.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
    Some(pages * page / 1024)
}

/// Samples of a child until it exits (every 50 ms), and its rusage.
fn sample_until_exit(child: &std::process::Child) -> (Vec<Sample>, libc::rusage) {
    let pid = child.id() as i32;
    let mut samples = Vec::new();
    // SAFETY: an all-zero rusage is a valid value to be overwritten.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        if let (Some((ticks, writer_ticks)), Some(rss_kb)) = (cpu_ticks(pid), rss_kb(pid)) {
            samples.push(Sample {
                t_ns: monotonic_ns(),
                ticks,
                writer_ticks,
                rss_kb,
                hwm_kb: hwm_kb(pid).unwrap_or(rss_kb),
            });
        }
        let mut status = 0;
        // SAFETY: wait4 on our own child with valid out-pointers.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (samples, usage)
}

/// CPU seconds of the whole process and of its writer thread between the absolute
/// monotonic times `a` and `b`.
fn cpu_between(samples: &[Sample], a: i64, b: i64) -> (f64, f64) {
    let before = samples
        .iter()
        .rev()
        .find(|s| s.t_ns <= a)
        .or(samples.first());
    let after = samples.iter().find(|s| s.t_ns >= b).or(samples.last());
    // SAFETY: sysconf has no memory effects.
    let tck = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    // The writer thread ends soon after the last request: read its ticks at the last sample
    // inside the window.
    let writer_end = samples.iter().rev().find(|s| s.t_ns <= b);
    match (before, after, writer_end) {
        (Some(x), Some(y), Some(z)) => (
            y.ticks.saturating_sub(x.ticks) as f64 / tck,
            z.writer_ticks.saturating_sub(x.writer_ticks) as f64 / tck,
        ),
        _ => (0.0, 0.0),
    }
}

/// Per request of one recorder (absolute monotonic times): send stamp, first content
/// receive, and whether it is of the first wave; plus every (id, seq, receive time).
struct Recorded {
    requests: Vec<(String, i64, Option<i64>, bool)>,
    events: Vec<(String, i64, i64)>,
    window: (i64, i64),
}

/// Lag, TTFT error and skew of `rec` against `truth`.
fn score(rec: &Recorded, truth: &Truth, samples: &[Sample], usage: &libc::rusage) -> Level {
    let mut lag = Vec::new();
    let mut unmatched = 0;
    let mut seen = std::collections::HashSet::new();
    for (id, seq, t) in &rec.events {
        match truth.write.get(&(id.clone(), *seq)) {
            Some(w) => {
                lag.push((t - w) / 1000);
                seen.insert((id.as_str(), *seq));
            }
            None => unmatched += 1,
        }
    }
    let ids: std::collections::HashSet<&str> = rec.requests.iter().map(|r| r.0.as_str()).collect();
    let lost = truth
        .write
        .keys()
        .filter(|(id, seq)| ids.contains(id.as_str()) && !seen.contains(&(id.as_str(), *seq)))
        .count();
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    let (mut first, mut rest, mut skew) = (Vec::new(), Vec::new(), Vec::new());
    for (id, sent, recv, wave) in &rec.requests {
        if let (Some(recv), Some(r), Some(w)) =
            (recv, truth.read.get(id), truth.first_content.get(id))
        {
            let err = ((recv - sent) - (w - r)) / 1000;
            if *wave {
                first.push(err)
            } else {
                rest.push(err)
            }
            skew.push((sent - r) / 1000);
        }
    }
    lag.sort_unstable();
    first.sort_unstable();
    rest.sort_unstable();
    skew.sort_unstable();
    let (a, b) = rec.window;
    let (cpu_s, writer_s) = cpu_between(samples, a, b);
    // SAFETY: sysconf has no memory effects.
    let tck = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let before_s = samples
        .iter()
        .rev()
        .find(|s| s.t_ns <= a)
        .map_or(0.0, |s| s.ticks as f64 / tck);
    let events = rec.events.len();
    let mut arrivals: Vec<i64> = rec.events.iter().map(|e| e.2).collect();
    arrivals.sort_unstable();
    Level {
        events,
        window_s: (b - a) as f64 / 1e9,
        lag_us: lag,
        ttft_err_first_us: first,
        ttft_err_rest_us: rest,
        cpu_us_per_event: cpu_s * 1e6 / events.max(1) as f64,
        writer_cpu_us_per_event: Some(writer_s * 1e6 / events.max(1) as f64),
        sent_minus_read_us: skew,
        peak_rss_mb: samples.iter().map(|s| s.hwm_kb).max().unwrap_or(0) as f64 / 1024.0,
        rss_by_events_mb: rss_by_events(samples, &arrivals),
        unmatched,
        lost,
        failed: 0,
        process_cpu_s: tv(usage.ru_utime) + tv(usage.ru_stime),
        process_before_s: before_s,
        process_after_s: (tv(usage.ru_utime) + tv(usage.ru_stime) - before_s - cpu_s).max(0.0),
    }
}

/// The smallest and the largest resident set sampled while each tenth of the events
/// (`arrivals`, sorted receive times) arrived, MB. The set swings by megabytes within each
/// second as the writer rolls its rows into a part file: the smallest sample of a tenth is
/// what the process keeps between rolls, the largest its high-water mark; a run whose memory
/// grows with its length raises both, tenth after tenth.
fn rss_by_events(samples: &[Sample], arrivals: &[i64]) -> Vec<(f64, f64)> {
    if arrivals.is_empty() {
        return Vec::new();
    }
    let at = |k: usize| arrivals[k.clamp(1, arrivals.len()) - 1];
    (1..=10)
        .map(|tenth| {
            let from = at(arrivals.len() * (tenth - 1) / 10 + 1);
            let to = at((arrivals.len() * tenth).div_ceil(10));
            let within = || {
                samples
                    .iter()
                    .filter(move |s| s.t_ns >= from && s.t_ns <= to)
                    .map(|s| s.rss_kb as f64 / 1024.0)
            };
            (
                within().fold(f64::INFINITY, f64::min),
                within().fold(0.0, f64::max),
            )
        })
        .collect()
}

/// An Int64 column of a recorded batch.
fn int64_column(b: &arrow_array::RecordBatch, name: &str) -> arrow_array::Int64Array {
    b.column_by_name(name)
        .unwrap_or_else(|| panic!("column {name}"))
        .as_primitive::<Int64Type>()
        .clone()
}

/// Record one level with anvil-capture; also returns the measured requests' bodies (for the
/// peer) by index.
// The capture child is reaped with wait4 (for its rusage), not Child::wait.
#[allow(clippy::zombie_processes)]
fn run_anvil(
    streams: usize,
    rounds: usize,
    extra: &[String],
    tmp: &Path,
) -> (Level, Vec<(i64, String)>) {
    let truth_path = tmp.join(format!("truth-{streams}.csv"));
    // A fresh output folder per run: a level may be run several times.
    let out = tmp.join(format!("out-{streams}-{}", monotonic_ns()));
    let (sim, port) = start_sim(&truth_path, extra);
    let manifest = manifest(tmp);
    let c = streams.to_string();
    let n = (streams * rounds).to_string();
    let url = format!("http://127.0.0.1:{port}");
    let capture = Command::new(capture_binary())
        .args([
            "run",
            "--manifest",
            manifest.to_str().unwrap_or_default(),
            "--class",
            "headline-sustained-output",
            "--context",
            "512",
            "--concurrency",
            &c,
            "--requests",
            &n,
            "--off-manifest",
            "--arm",
            "fidelity",
            "--endpoint",
            &url,
            "--quiet",
            "--out",
            out.to_str().unwrap_or_default(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start anvil-capture");
    let (samples, usage) = sample_until_exit(&capture);
    let mut stdout = String::new();
    if let Some(mut o) = capture.stdout {
        use std::io::Read;
        let _ = o.read_to_string(&mut stdout);
    }
    stop_sim(sim);
    let dir = PathBuf::from(stdout.lines().last().expect("artifact path").trim());
    let run = RunJson::read(&dir.join("run.json")).expect("run.json");
    let origin = run.clock.monotonic_origin_ns;
    let truth = read_truth(&truth_path);

    let batches = |name: &str| -> Vec<arrow_array::RecordBatch> {
        open_table(&dir.join(name))
            .expect(name)
            .reader()
            .expect("reader")
            .map(|b| b.expect("batch"))
            .collect()
    };
    let (ev, req) = (batches("events.parquet"), batches("requests.parquet"));
    let id = |idx: i64| format!("{}-{idx}", run.run_id);
    // Measured requests by index: (send, body); the first `streams` indices are the first wave.
    let mut measured: Vec<(i64, i64, String)> = Vec::new();
    let (mut t_min, mut t_max) = (i64::MAX, i64::MIN);
    for b in &req {
        let col = |n: &str| int64_column(b, n);
        let (idx, sent, done) = (col("request_index"), col("t_sent_ns"), col("t_done_ns"));
        let kind = b.column_by_name("kind").unwrap().as_string::<i32>();
        let body = b.column_by_name("request_body").unwrap().as_string::<i32>();
        for i in 0..b.num_rows() {
            if kind.value(i) != "measured" || !sent.is_valid(i) {
                continue;
            }
            measured.push((
                idx.value(i),
                origin + sent.value(i),
                body.value(i).to_owned(),
            ));
            t_min = t_min.min(sent.value(i));
            t_max = t_max.max(done.value(i));
        }
    }
    measured.sort_by_key(|m| m.0);
    let mut first_recv: HashMap<i64, i64> = HashMap::new();
    let mut events = Vec::new();
    for b in &ev {
        let col = |n: &str| int64_column(b, n);
        let (idx, seq, t) = (col("request_index"), col("seq"), col("t_ns"));
        let content = b
            .column_by_name("content_delta")
            .unwrap()
            .as_string::<i32>();
        for i in 0..b.num_rows() {
            events.push((id(idx.value(i)), seq.value(i), origin + t.value(i)));
            if content.is_valid(i) && !content.value(i).is_empty() {
                let e = first_recv
                    .entry(idx.value(i))
                    .or_insert(origin + t.value(i));
                *e = (*e).min(origin + t.value(i));
            }
        }
    }
    let rec = Recorded {
        requests: measured
            .iter()
            .enumerate()
            .map(|(rank, (idx, sent, _))| {
                (
                    id(*idx),
                    *sent,
                    first_recv.get(idx).copied(),
                    rank < streams,
                )
            })
            .collect(),
        events,
        window: (origin + t_min, origin + t_max),
    };
    let mut level = score(&rec, &truth, &samples, &usage);
    level.failed = run.counts.failed_total();
    let bodies = measured.into_iter().map(|(i, _, b)| (i, b)).collect();
    (level, bodies)
}

/// The recorder under test: `FIDELITY_CAPTURE` (another build's `anvil-capture`, to compare
/// builds on the same machine in the same hour), else this build's.
fn capture_binary() -> String {
    std::env::var("FIDELITY_CAPTURE").unwrap_or_else(|_| CAPTURE.to_owned())
}

/// Where the peer's Python is: `FIDELITY_PEER_PYTHON`, else the bench venv the Justfile
/// recipe makes (`target/bench-venv`), else `python3`.
fn peer_python() -> String {
    if let Ok(p) = std::env::var("FIDELITY_PEER_PYTHON") {
        return p;
    }
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/target/bench-venv/bin/python3");
    if Path::new(venv).exists() {
        return venv.to_owned();
    }
    "python3".to_owned()
}

/// Why the peer cannot run, if it cannot (aiohttp missing).
fn peer_unavailable(python: &str) -> Option<String> {
    match Command::new(python).args(["-c", "import aiohttp"]).output() {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or("")
                .to_owned(),
        ),
        Err(e) => Some(format!("{python}: {e}")),
    }
}

/// The peer client over the same bodies, closed loop at `streams`, against a fresh simulator.
// The peer is reaped with wait4 (for its rusage), not Child::wait.
#[allow(clippy::zombie_processes)]
fn run_peer(
    python: &str,
    streams: usize,
    bodies: &[(i64, String)],
    extra: &[String],
    tmp: &Path,
) -> Level {
    let truth_path = tmp.join(format!("truth-peer-{streams}.csv"));
    let (sim, port) = start_sim(&truth_path, extra);
    let work = tmp.join(format!("peer-bodies-{streams}.jsonl"));
    let lines: Vec<String> = bodies
        .iter()
        .map(|(i, b)| serde_json::json!({"id": format!("peer-{i}"), "body": b}).to_string())
        .collect();
    std::fs::write(&work, lines.join("\n")).expect("peer bodies");
    let out = tmp.join(format!("peer-{streams}.csv"));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/bench/peer_client.py");
    let url = format!("http://127.0.0.1:{port}/v1/chat/completions");
    let child = Command::new(python)
        .args([
            script,
            &url,
            &streams.to_string(),
            work.to_str().unwrap_or_default(),
            out.to_str().unwrap_or_default(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the peer client");
    let (samples, usage) = sample_until_exit(&child);
    stop_sim(sim);
    let truth = read_truth(&truth_path);
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let (mut sent, mut first_recv) = (HashMap::new(), HashMap::<String, i64>::new());
    let mut events = Vec::new();
    let (mut t_min, mut t_max) = (i64::MAX, i64::MIN);
    for l in text.lines() {
        let f: Vec<&str> = l.split(',').collect();
        if f.len() < 4 {
            continue;
        }
        let (Ok(seq), Ok(t)) = (f[1].parse::<i64>(), f[2].parse::<i64>()) else {
            continue;
        };
        if seq < 0 {
            sent.insert(f[0].to_owned(), t);
            t_min = t_min.min(t);
            continue;
        }
        t_max = t_max.max(t);
        events.push((f[0].to_owned(), seq, t));
        if f[3] == "1" {
            let e = first_recv.entry(f[0].to_owned()).or_insert(t);
            *e = (*e).min(t);
        }
    }
    let rec = Recorded {
        requests: bodies
            .iter()
            .enumerate()
            .filter_map(|(rank, (i, _))| {
                let id = format!("peer-{i}");
                let s = *sent.get(&id)?;
                let r = first_recv.get(&id).copied();
                Some((id, s, r, rank < streams))
            })
            .collect(),
        events,
        window: (t_min, t_max),
    };
    let mut level = score(&rec, &truth, &samples, &usage);
    level.writer_cpu_us_per_event = None;
    level.failed = (bodies.len() - sent.len()) as u64;
    level
}

fn mean(v: &[i64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<i64>() as f64 / v.len() as f64
    }
}

/// A floor for the CPU column: the least any recorder must spend per event here. One thread
/// of this process drives the same bodies, closed loop at `streams`, against a fresh
/// simulator with nothing but non-blocking sockets in an edge-triggered epoll set looked at
/// once a millisecond and `recvmsg` with kernel receive timestamps (as anvil-capture reads);
/// it frames nothing, parses nothing and records nothing (it counts `\n\n` for events and
/// watches for the chunked body's last chunk). Its level has events, the run's seconds, CPU
/// per event and the responses that did not start `200`; nothing else is measured.
fn run_floor(streams: usize, bodies: &[(i64, String)], extra: &[String], tmp: &Path) -> Level {
    let truth_path = tmp.join(format!("truth-floor-{streams}.csv"));
    let (sim, port) = start_sim(&truth_path, extra);
    let requests: Vec<Vec<u8>> = bodies
        .iter()
        .map(|(_, b)| {
            format!(
                "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n\
                 content-type: application/json\r\naccept: text/event-stream\r\n\
                 content-length: {}\r\n\r\n{b}",
                b.len()
            )
            .into_bytes()
        })
        .collect();
    let level = std::thread::scope(|s| {
        s.spawn(|| floor_reader(port, streams, &requests))
            .join()
            .expect("floor reader")
    });
    stop_sim(sim);
    level
}

/// The floor reader's loop (see [`run_floor`]); CPU is this thread's own (RUSAGE_THREAD).
fn floor_reader(port: u16, streams: usize, requests: &[Vec<u8>]) -> Level {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    struct Conn {
        socket: std::net::TcpStream,
        /// The last bytes read (a terminator or `\n\n` may straddle two reads).
        tail: Vec<u8>,
        head_seen: bool,
        /// Closed, failed or out of work: never read again.
        done: bool,
    }
    fn thread_cpu_s() -> f64 {
        // SAFETY: an all-zero rusage is valid to be overwritten; getrusage writes it.
        let mut r: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut r) };
        let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
        s(r.ru_utime) + s(r.ru_stime)
    }
    // SAFETY: epoll_create1 has no memory effects.
    let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    assert!(epfd >= 0, "epoll_create1");
    let mut next = 0;
    let mut failed = 0u64;
    let mut conns = Vec::new();
    let start = monotonic_ns();
    let cpu0 = thread_cpu_s();
    for i in 0..streams.min(requests.len()) {
        let mut socket = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        socket.set_nodelay(true).expect("nodelay");
        let on: libc::c_int = 1;
        // SAFETY: setsockopt with a valid int option on our own socket.
        unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        socket.write_all(&requests[next]).expect("send");
        next += 1;
        socket.set_nonblocking(true).expect("nonblocking");
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET) as u32,
            u64: i as u64,
        };
        // SAFETY: adding our own open socket to our own epoll set.
        unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, socket.as_raw_fd(), &mut ev) };
        conns.push(Conn {
            socket,
            tail: Vec::new(),
            head_seen: false,
            done: false,
        });
    }
    let mut open = conns.len();
    let mut events = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    let mut control = [0u8; 64];
    let mut ready = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    while open > 0 {
        std::thread::sleep(Duration::from_millis(1));
        // SAFETY: epoll_wait into our own buffer of `ready.len()` entries.
        let n = unsafe { libc::epoll_wait(epfd, ready.as_mut_ptr(), ready.len() as i32, 0) };
        for e in &ready[..n.max(0) as usize] {
            let c = &mut conns[e.u64 as usize];
            while !c.done {
                let mut iov = libc::iovec {
                    iov_base: buf.as_mut_ptr().cast(),
                    iov_len: buf.len(),
                };
                // SAFETY: an all-zero msghdr is valid; its pointers are set to live buffers.
                let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
                msg.msg_iov = &mut iov;
                msg.msg_iovlen = 1;
                msg.msg_control = control.as_mut_ptr().cast();
                msg.msg_controllen = control.len() as _;
                // SAFETY: recvmsg into the buffers above on our own socket.
                let r = unsafe { libc::recvmsg(c.socket.as_raw_fd(), &mut msg, 0) };
                if r < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock
                {
                    break;
                }
                if r <= 0 {
                    // The server closed the connection or the read failed: that stream ends.
                    failed += 1;
                    c.done = true;
                    open -= 1;
                    break;
                }
                let data = &buf[..r as usize];
                if !c.head_seen {
                    c.head_seen = true;
                    if !data.starts_with(b"HTTP/1.1 200") {
                        failed += 1;
                    }
                }
                let carried = c.tail.len();
                c.tail.extend_from_slice(data);
                events += c.tail[carried.saturating_sub(1)..]
                    .windows(2)
                    .filter(|w| w == b"\n\n")
                    .count();
                let finished = c.tail.ends_with(b"\r\n0\r\n\r\n");
                let keep = c.tail.len().saturating_sub(8);
                c.tail.drain(..keep);
                if finished {
                    c.tail.clear();
                    c.head_seen = false;
                    if next < requests.len() {
                        // The socket is non-blocking; a request body fits the send buffer.
                        next += 1;
                        if c.socket.write_all(&requests[next - 1]).is_err() {
                            failed += 1;
                            c.done = true;
                            open -= 1;
                        }
                    } else {
                        c.done = true;
                        open -= 1;
                    }
                }
                if (r as usize) < buf.len() {
                    break;
                }
            }
        }
    }
    let cpu = thread_cpu_s() - cpu0;
    // SAFETY: closing the epoll descriptor we created.
    unsafe { libc::close(epfd) };
    Level {
        events,
        window_s: (monotonic_ns() - start) as f64 / 1e9,
        lag_us: Vec::new(),
        ttft_err_first_us: Vec::new(),
        ttft_err_rest_us: Vec::new(),
        cpu_us_per_event: cpu * 1e6 / events.max(1) as f64,
        writer_cpu_us_per_event: None,
        sent_minus_read_us: Vec::new(),
        peak_rss_mb: 0.0,
        rss_by_events_mb: Vec::new(),
        unmatched: 0,
        lost: 0,
        failed,
        process_cpu_s: 0.0,
        process_before_s: 0.0,
        process_after_s: 0.0,
    }
}

/// One table row; `versus` follows the CPU figure (anvil's ratios to the peer and the floor).
fn row(streams: usize, who: &str, l: &Level, versus: &str) {
    println!(
        "| {streams} | {who} | {:.0} | {} / {} / {} | {:.0} / {} | {:.0} / {} | {} / {} | {:.1}{} | {} | {:.2} ({:.2} + {:.2} + {:.2}) | {:.1} | {} / {} / {} |",
        l.events as f64 / l.window_s.max(1e-9),
        pct(&l.lag_us, 0.50),
        pct(&l.lag_us, 0.99),
        l.lag_us.last().copied().unwrap_or(0),
        mean(&l.ttft_err_first_us),
        pct(&l.ttft_err_first_us, 0.99),
        mean(&l.ttft_err_rest_us),
        pct(&l.ttft_err_rest_us, 0.99),
        pct(&l.sent_minus_read_us, 0.50),
        pct(&l.sent_minus_read_us, 0.99),
        l.cpu_us_per_event,
        versus,
        l.writer_cpu_us_per_event
            .map(|w| format!("{w:.1}"))
            .unwrap_or_else(|| "–".into()),
        l.process_cpu_s,
        l.process_before_s,
        l.process_cpu_s - l.process_before_s - l.process_after_s,
        l.process_after_s,
        l.peak_rss_mb,
        l.lost,
        l.failed,
        l.unmatched
    );
}

/// A row of the resident-set table: the low and high water of each tenth of the events, and
/// their change from the second tenth (start-up done) to the last.
fn rss_row(streams: usize, who: &str, l: &Level) -> String {
    let tenths: Vec<String> = l
        .rss_by_events_mb
        .iter()
        .map(|(lo, hi)| format!("{lo:.0}–{hi:.0}"))
        .collect();
    let change = match (l.rss_by_events_mb.get(1), l.rss_by_events_mb.last()) {
        (Some(a), Some(b)) => format!("{:+.1} / {:+.1} MB", b.0 - a.0, b.1 - a.1),
        _ => "–".to_owned(),
    };
    format!(
        "| {streams} | {who} | {} | {} | {change} |",
        l.events,
        tenths.join(" · ")
    )
}

/// The floor's row: only events/s, CPU per event and failures mean anything for it.
fn floor_row(streams: usize, who: &str, l: &Level) {
    println!(
        "| {streams} | {who} | {:.0} | – | – | – | – | {:.1} | – | – | – | – / {} / – |",
        l.events as f64 / l.window_s.max(1e-9),
        l.cpu_us_per_event,
        l.failed
    );
}

/// The median of `v` (the mean of the middle two for an even count) and its range.
fn median_range(mut v: Vec<f64>) -> (f64, f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let mid = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    (mid, v[0], v[n - 1])
}

/// One level's alternating runs: anvil, then the peer, then the floor, each run.
struct Runs {
    streams: usize,
    /// Load average (1 min) at the start of each run.
    load: Vec<f64>,
    anvil: Vec<Level>,
    peer: Vec<Level>,
    floor: Vec<Level>,
}

/// The medians over a level's runs: the figures the targets are judged on.
fn summary_row(r: &Runs) {
    let f = |(m, lo, hi): (f64, f64, f64), d: usize| format!("{m:.d$} ({lo:.d$}–{hi:.d$})");
    // anvil's figure over the other recorder's, run by run.
    let ratio = |others: &[Level], of: fn(&Level) -> f64| {
        median_range(
            r.anvil
                .iter()
                .zip(others)
                .map(|(a, o)| of(a) / of(o).max(1e-9))
                .collect(),
        )
    };
    let anvil_cpu = median_range(r.anvil.iter().map(|l| l.cpu_us_per_event).collect());
    let floor_cpu = median_range(r.floor.iter().map(|l| l.cpu_us_per_event).collect());
    let to_floor = ratio(&r.floor, |l| l.cpu_us_per_event);
    let lag99 = median_range(
        r.anvil
            .iter()
            .map(|l| pct(&l.lag_us, 0.99) as f64)
            .collect(),
    );
    let process = median_range(r.anvil.iter().map(|l| l.process_cpu_s).collect());
    let peer_process = median_range(r.peer.iter().map(|l| l.process_cpu_s).collect());
    let to_peer = ratio(&r.peer, |l| l.process_cpu_s);
    let load = median_range(r.load.clone());
    let lost: usize = r.anvil.iter().map(|l| l.lost).sum();
    let failed: u64 = r.anvil.iter().map(|l| l.failed).sum();
    let unmatched: usize = r.anvil.iter().map(|l| l.unmatched).sum();
    let or_dash = |s: String, have: bool| if have { s } else { "–".to_owned() };
    println!(
        "| {} | {} | {} | {} | {} | **{}** | **{}** | {} | {} | **{}** | {lost} / {failed} / {unmatched} | {} |",
        r.streams,
        r.anvil.len(),
        f(anvil_cpu, 1),
        or_dash(f(floor_cpu, 1), !r.floor.is_empty()),
        r.anvil
            .iter()
            .filter_map(|l| l.writer_cpu_us_per_event)
            .map(|w| format!("{w:.1}"))
            .collect::<Vec<_>>()
            .join(" · "),
        or_dash(f(to_floor, 2), !r.floor.is_empty()),
        f(lag99, 0),
        f(process, 2),
        or_dash(f(peer_process, 2), !r.peer.is_empty()),
        or_dash(f(to_peer, 2), !r.peer.is_empty()),
        f(load, 2),
    );
}

/// The 1-minute load average now.
fn load1() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

fn main() {
    let levels: Vec<usize> = std::env::var("FIDELITY_LEVELS")
        .unwrap_or_else(|_| "16,64,256".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let rounds: usize = std::env::var("FIDELITY_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let extra: Vec<String> = std::env::var("FIDELITY_SIM_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let tmp = std::env::temp_dir().join(format!("anvil-fidelity-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("temp dir");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "anvil-capture fidelity vs anvil-sim truth ({} cores, load average at start {})",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let python = peer_python();
    let only_anvil = std::env::var("FIDELITY_ONLY_ANVIL").is_ok_and(|v| v == "1");
    let peer = !only_anvil
        && match peer_unavailable(&python) {
            None => true,
            Some(why) => {
                eprintln!(
                    "fidelity: THE PEER CLIENT IS SKIPPED: aiohttp is not importable by {python} ({why}); \
                     `just bench-fidelity` installs it into target/bench-venv"
                );
                false
            }
        };
    let repeats: usize = std::env::var("FIDELITY_REPEATS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
        .max(1);
    println!(
        "{} requests per stream of about {} tokens; {repeats} run(s) per level, the recorders alternating",
        rounds,
        words()
    );
    println!(
        "| streams | recorder | events/s | receive lag p50 / p99 / max (µs) | TTFT error, first wave: mean / p99 (µs) | TTFT error, later: mean / p99 (µs) | t_sent − sim read p50 / p99 (µs) | CPU/event (µs) | writer thread (µs) | whole process CPU (s): before + during + after the window | peak RSS (MB) | lost / failed / unmatched |"
    );
    println!("|---:|---|---:|---|---|---|---|---:|---:|---:|---:|---:|");
    let mut rss_rows = Vec::new();
    let mut all = Vec::new();
    for streams in levels {
        let mut runs = Runs {
            streams,
            load: Vec::new(),
            anvil: Vec::new(),
            peer: Vec::new(),
            floor: Vec::new(),
        };
        for run in 1..=repeats {
            let load = load1();
            let tag = |who: &str| {
                if repeats > 1 {
                    format!("{who} (run {run}, load {load:.2})")
                } else {
                    who.to_owned()
                }
            };
            let (anvil, bodies) = run_anvil(streams, rounds, &extra, &tmp);
            let peer = peer.then(|| run_peer(&python, streams, &bodies, &extra, &tmp));
            let floor = (!only_anvil).then(|| run_floor(streams, &bodies, &extra, &tmp));
            let times = |other: &Level, name: &str| {
                format!(
                    "{:.2}× the {name}",
                    anvil.cpu_us_per_event / other.cpu_us_per_event.max(1e-9)
                )
            };
            let mut versus: Vec<String> = peer.iter().map(|p| times(p, "peer")).collect();
            versus.extend(floor.iter().map(|f| times(f, "floor")));
            if let Some(p) = &peer {
                versus.push(format!(
                    "whole process {:.2}× the peer",
                    anvil.process_cpu_s / p.process_cpu_s.max(1e-9)
                ));
            }
            let versus = if versus.is_empty() {
                String::new()
            } else {
                format!(" ({})", versus.join(", "))
            };
            row(streams, &tag("anvil-capture"), &anvil, &versus);
            if let Some(p) = &peer {
                row(streams, &tag("peer (aiohttp)"), p, "");
            }
            if let Some(f) = &floor {
                floor_row(streams, &tag("floor (bare paced reader)"), f);
            }
            rss_rows.push(rss_row(streams, &tag("anvil-capture"), &anvil));
            if let Some(p) = &peer {
                rss_rows.push(rss_row(streams, &tag("peer (aiohttp)"), p));
            }
            runs.load.push(load);
            runs.anvil.push(anvil);
            runs.peer.extend(peer);
            runs.floor.extend(floor);
        }
        all.push(runs);
    }
    println!();
    println!(
        "Medians over each level's runs (range in brackets): the figures the recorder's targets are judged on."
    );
    println!(
        "| streams | runs | anvil CPU/event (µs) | floor CPU/event (µs) | writer thread, each run (µs) | anvil ÷ floor | receive lag p99 (µs) | anvil whole process (s) | peer whole process (s) | anvil ÷ peer, whole process | lost / failed / unmatched | load average at run starts |"
    );
    println!("|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in &all {
        summary_row(r);
    }
    println!();
    println!(
        "| streams | recorder | events | resident set (MB), smallest–largest sample in each tenth of the events | 2nd → 10th tenth, smallest / largest |"
    );
    println!("|---:|---|---:|---|---:|");
    for r in rss_rows {
        println!("{r}");
    }
    let _ = std::fs::remove_dir_all(&tmp);
}
