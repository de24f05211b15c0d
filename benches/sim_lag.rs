//! How precisely `anvil-sim` keeps its own schedule: lag (actual write − scheduled
//! deadline) at 16, 64 and 256 concurrent streams of ~50 tokens/s each.
//!
//! Each level starts the real binary (SCHED_FIFO when permitted), drives it with a small
//! raw HTTP/1.1 client on one thread (ordinary priority), stops it with SIGTERM and reads
//! the lag report it prints. Run: `cargo bench --profile fast --no-default-features --bench
//! sim_lag`. Environment: `SIM_LAG_LEVELS` (default `16,64,256`), `SIM_LAG_SECS` (default
//! 15), `SIM_LAG_ARGS` (extra simulator flags, e.g. `--no-realtime`).

use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[path = "support/sim.rs"]
mod support;

const BIN: &str = env!("CARGO_BIN_EXE_anvil-sim");
/// Tokens per request: 250 at 50 tok/s is a 5 s stream.
const MAX_TOKENS: u32 = 250;

/// One streamed request over its own connection; returns the bytes received.
async fn one_request(port: u16, id: String) -> std::io::Result<usize> {
    let body = format!(
        r#"{{"messages":[{{"role":"user","content":"{id}: tell a long story"}}],"stream":true,"max_tokens":{MAX_TOKENS},"stream_options":{{"include_usage":true}}}}"#
    );
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
         x-request-id: {id}\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut s = TcpStream::connect(("127.0.0.1", port)).await?;
    s.set_nodelay(true)?;
    s.write_all(req.as_bytes()).await?;
    let mut buf = vec![0u8; 16 * 1024];
    let mut total = 0;
    loop {
        let n = s.read(&mut buf).await?;
        if n == 0 {
            return Ok(total);
        }
        total += n;
    }
}

/// Keep `streams` requests open for `secs` seconds (starts staggered over the first second).
async fn drive(port: u16, streams: usize, secs: u64) -> (usize, usize) {
    let end = Instant::now() + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for s in 0..streams {
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_micros(
                (s as u64 * 1_000_000) / streams as u64,
            ))
            .await;
            let (mut ok, mut bytes) = (0usize, 0usize);
            let mut i = 0;
            while Instant::now() + Duration::from_secs(MAX_TOKENS as u64 / 50) <= end {
                if let Ok(n) = one_request(port, format!("bench-{s}-{i}")).await {
                    ok += 1;
                    bytes += n;
                }
                i += 1;
            }
            (ok, bytes)
        }));
    }
    let mut out = (0, 0);
    for t in tasks {
        if let Ok((a, b)) = t.await {
            out.0 += a;
            out.1 += b;
        }
    }
    out
}

fn level(streams: usize, secs: u64, extra: &[String]) -> String {
    let (child, port) = support::start(BIN, extra, Stdio::piped());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    let t0 = Instant::now();
    let (ok, bytes) = rt.block_on(drive(port, streams, secs));
    let wall = t0.elapsed().as_secs_f64();
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let output = child.wait_with_output().expect("wait for anvil-sim");
    let err = String::from_utf8_lossy(&output.stderr);
    // "timer lag" (hand-over to the stream) and "lag" (actual write), both − deadline.
    let report = err
        .lines()
        .filter(|l| l.contains("lag: events"))
        .map(|l| l.trim_start_matches("anvil-sim "))
        .collect::<Vec<_>>()
        .join("\n    ");
    let sched =
        if err.contains("SCHED_FIFO not permitted") || extra.iter().any(|a| a == "--no-realtime") {
            "ordinary"
        } else {
            "fifo"
        };
    format!(
        "streams {streams:>4}  requests {ok:>5}  {:>6.1} MB in {wall:>5.1} s  sched {sched}\n    {report}",
        bytes as f64 / 1e6
    )
}

fn main() {
    // `cargo bench` passes `--bench`; ignore arguments.
    let levels: Vec<usize> = std::env::var("SIM_LAG_LEVELS")
        .unwrap_or_else(|_| "16,64,256".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let secs: u64 = std::env::var("SIM_LAG_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(15);
    let extra: Vec<String> = std::env::var("SIM_LAG_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    println!(
        "anvil-sim lag benchmark: ~50 tok/s per stream, {secs} s per level, extra flags {extra:?}"
    );
    for n in levels {
        println!("{}", level(n, secs, &extra));
    }
}
