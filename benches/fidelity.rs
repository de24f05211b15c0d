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
//!   simulator's first content write − its request read), mean and p99, µs;
//! - `t_sent_ns` minus the simulator's request read (how late the client's send stamp is;
//!   negative when the client's write returned after the server had already read it);
//! - recorder CPU per event (user + system time of the whole `anvil-capture` process, and of
//!   its writer thread alone, over the measured window, sampled from /proc every 50 ms,
//!   divided by the events);
//! - peak RSS of `anvil-capture` (getrusage of the child).
//!
//! Run: `just bench-fidelity`, or `cargo bench --profile release --no-default-features --bench
//! fidelity`. Environment: `FIDELITY_LEVELS` (default `16,64,256`), `FIDELITY_ROUNDS`
//! (requests per stream, default 4), `FIDELITY_SIM_ARGS` (extra simulator flags).

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anvil::artifact::{RunJson, open_table};
use anvil::clock::monotonic_ns;
use arrow::array::{Array, AsArray};
use arrow::datatypes::Int64Type;

const SIM: &str = env!("CARGO_BIN_EXE_anvil-sim");
const CAPTURE: &str = env!("CARGO_BIN_EXE_anvil-capture");
/// Words each request asks for: ~250 tokens at 50 tok/s is a 5 s stream.
const WORDS: u64 = 250;

fn manifest(dir: &Path) -> PathBuf {
    let src = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/sample-data/workload-manifest.json"
    );
    let text = std::fs::read_to_string(src).expect("sample manifest");
    let mut v: serde_json::Value = serde_json::from_str(&text).expect("manifest JSON");
    v["selection"]["headline_response_words"] = WORDS.into();
    v["selection"]["headline_max_tokens"] = (WORDS + 50).into();
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

struct Level {
    streams: usize,
    events: usize,
    window_s: f64,
    lag_us: Vec<i64>,
    ttft_err_us: Vec<i64>,
    cpu_us_per_event: f64,
    writer_cpu_us_per_event: f64,
    /// Client `t_sent_ns` minus the simulator's request read, µs, sorted.
    sent_minus_read_us: Vec<i64>,
    peak_rss_mb: f64,
    unmatched: usize,
    failed: u64,
}

// The capture child is reaped with wait4 (for its rusage), not Child::wait.
#[allow(clippy::zombie_processes)]
fn run_level(streams: usize, rounds: usize, extra: &[String], tmp: &Path) -> Level {
    let truth = tmp.join(format!("truth-{streams}.csv"));
    let out = tmp.join(format!("out-{streams}"));
    let mut args: Vec<String> = [
        "--port",
        "0",
        "--profile",
        "fast",
        "--decode-tps",
        "50",
        "--batch-cost",
        "0",
        "--max-batch",
        "4096",
        "--prefill-tps",
        "1000000",
        "--chunked-prefill",
        "0",
        "--truth",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(truth.display().to_string());
    args.extend(extra.iter().cloned());
    let mut sim = Command::new(SIM)
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start anvil-sim");
    let mut line = String::new();
    BufReader::new(sim.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("listening line");
    let port: u16 = line
        .trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port");

    let manifest = manifest(tmp);
    let c = streams.to_string();
    let n = (streams * rounds).to_string();
    let url = format!("http://127.0.0.1:{port}");
    let capture = Command::new(CAPTURE)
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
    let pid = capture.id() as i32;
    let mut samples: Vec<(i64, (u64, u64))> = Vec::new();
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        if let Some(t) = cpu_ticks(pid) {
            samples.push((monotonic_ns(), t));
        }
        let mut status = 0;
        // SAFETY: wait4 on our own child with valid out-pointers.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut stdout = String::new();
    if let Some(mut o) = capture.stdout {
        use std::io::Read;
        let _ = o.read_to_string(&mut stdout);
    }
    // SAFETY: kill(2) on our own child's pid; the simulator flushes its truth on SIGTERM.
    unsafe { libc::kill(sim.id() as i32, libc::SIGTERM) };
    let _ = sim.wait();
    let dir = PathBuf::from(stdout.lines().last().expect("artifact path").trim());
    let run = RunJson::read(&dir.join("run.json")).expect("run.json");
    let origin = run.clock.monotonic_origin_ns;

    // Truth: write time per (request id, seq), request read time, first content write.
    let mut write: HashMap<(String, i64), i64> = HashMap::new();
    let mut read: HashMap<String, i64> = HashMap::new();
    let mut first_content: HashMap<String, i64> = HashMap::new();
    let text = std::fs::read_to_string(&truth).expect("truth file");
    for l in text.lines().skip(1) {
        let f: Vec<&str> = l.split(',').collect();
        let (id, seq, tokens, kind, t) = (f[0], f[2], f[3], f[4], f[6]);
        let Ok(t) = t.parse::<i64>() else { continue };
        if kind == "request_read" {
            read.insert(id.to_owned(), t);
            continue;
        }
        if let Ok(s) = seq.parse::<i64>() {
            write.insert((id.to_owned(), s), t);
        }
        if kind == "content" && tokens != "0" {
            let e = first_content.entry(id.to_owned()).or_insert(t);
            *e = (*e).min(t);
        }
    }

    let ev: Vec<_> = open_table(&dir.join("events.parquet"))
        .expect("events")
        .reader()
        .expect("reader")
        .map(|b| b.expect("batch"))
        .collect();
    let req: Vec<_> = open_table(&dir.join("requests.parquet"))
        .expect("requests")
        .reader()
        .expect("reader")
        .map(|b| b.expect("batch"))
        .collect();
    let mut sent: HashMap<i64, i64> = HashMap::new();
    let (mut t_min, mut t_max) = (i64::MAX, i64::MIN);
    for b in &req {
        let idx = b
            .column_by_name("request_index")
            .unwrap()
            .as_primitive::<Int64Type>();
        let s = b
            .column_by_name("t_sent_ns")
            .unwrap()
            .as_primitive::<Int64Type>();
        let d = b
            .column_by_name("t_done_ns")
            .unwrap()
            .as_primitive::<Int64Type>();
        for i in 0..b.num_rows() {
            if s.is_valid(i) {
                sent.insert(idx.value(i), s.value(i));
                t_min = t_min.min(s.value(i));
            }
            t_max = t_max.max(d.value(i));
        }
    }
    let mut lag = Vec::new();
    let mut unmatched = 0;
    let mut first_recv: HashMap<i64, i64> = HashMap::new();
    for b in &ev {
        let idx = b
            .column_by_name("request_index")
            .unwrap()
            .as_primitive::<Int64Type>();
        let seq = b.column_by_name("seq").unwrap().as_primitive::<Int64Type>();
        let t = b
            .column_by_name("t_ns")
            .unwrap()
            .as_primitive::<Int64Type>();
        let content = b
            .column_by_name("content_delta")
            .unwrap()
            .as_string::<i32>();
        for i in 0..b.num_rows() {
            let id = format!("{}-{}", run.run_id, idx.value(i));
            match write.get(&(id, seq.value(i))) {
                Some(w) => lag.push(origin + t.value(i) - w),
                None => unmatched += 1,
            }
            if content.is_valid(i) && !content.value(i).is_empty() {
                let e = first_recv.entry(idx.value(i)).or_insert(t.value(i));
                *e = (*e).min(t.value(i));
            }
        }
    }
    let mut ttft_err = Vec::new();
    let mut skew = Vec::new();
    for (idx, recv) in &first_recv {
        let id = format!("{}-{idx}", run.run_id);
        if let (Some(s), Some(r), Some(w)) = (sent.get(idx), read.get(&id), first_content.get(&id))
        {
            ttft_err.push((recv - s) - (w - r));
            skew.push((origin + s - r) / 1000);
        }
    }
    skew.sort_unstable();
    // CPU over the measured window (first send to last completion).
    let (a, b) = (origin + t_min, origin + t_max);
    let before = samples
        .iter()
        .rev()
        .find(|(t, _)| *t <= a)
        .or(samples.first());
    let after = samples.iter().find(|(t, _)| *t >= b).or(samples.last());
    let tck = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    // The writer thread ends soon after the last request: read its ticks at the last sample
    // inside the window.
    let writer_end = samples.iter().rev().find(|(t, _)| *t <= b);
    let (cpu_s, writer_s) = match (before, after, writer_end) {
        (Some(x), Some(y), Some(z)) => (
            (y.1.0.saturating_sub(x.1.0)) as f64 / tck,
            (z.1.1.saturating_sub(x.1.1)) as f64 / tck,
        ),
        _ => (0.0, 0.0),
    };
    let events = lag.len() + unmatched;
    lag.sort_unstable();
    ttft_err.sort_unstable();
    Level {
        streams,
        events,
        window_s: (t_max - t_min) as f64 / 1e9,
        lag_us: lag.iter().map(|x| x / 1000).collect(),
        ttft_err_us: ttft_err.iter().map(|x| x / 1000).collect(),
        cpu_us_per_event: cpu_s * 1e6 / events.max(1) as f64,
        writer_cpu_us_per_event: writer_s * 1e6 / events.max(1) as f64,
        sent_minus_read_us: skew,
        peak_rss_mb: usage.ru_maxrss as f64 / 1024.0,
        unmatched,
        failed: run.counts.failed_total(),
    }
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
    println!(
        "| streams | events/s | receive lag p50 / p99 / max (µs) | TTFT error mean / p99 (µs) | t_sent − sim read p50 / p99 (µs) | recorder CPU/event, all / writer thread (µs) | peak RSS (MB) | failed | unmatched |"
    );
    println!("|---:|---:|---|---|---|---|---:|---:|---:|");
    for streams in levels {
        let l = run_level(streams, rounds, &extra, &tmp);
        let mean = if l.ttft_err_us.is_empty() {
            0.0
        } else {
            l.ttft_err_us.iter().sum::<i64>() as f64 / l.ttft_err_us.len() as f64
        };
        println!(
            "| {} | {:.0} | {} / {} / {} | {:.0} / {} | {} / {} | {:.1} / {:.1} | {:.1} | {} | {} |",
            l.streams,
            l.events as f64 / l.window_s.max(1e-9),
            pct(&l.lag_us, 0.50),
            pct(&l.lag_us, 0.99),
            l.lag_us.last().copied().unwrap_or(0),
            mean,
            pct(&l.ttft_err_us, 0.99),
            pct(&l.sent_minus_read_us, 0.50),
            pct(&l.sent_minus_read_us, 0.99),
            l.cpu_us_per_event,
            l.writer_cpu_us_per_event,
            l.peak_rss_mb,
            l.failed,
            l.unmatched
        );
    }
    let _ = std::fs::remove_dir_all(&tmp);
}
