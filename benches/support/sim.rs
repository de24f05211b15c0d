//! What the benchmarks share: `anvil-sim` started on a free port with the saturation timing
//! (50 decode steps per second per sequence, no batch cost, room for 4,096 sequences, a
//! prefill that never waits), and the port it printed.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// `bin` (the simulator) started with the saturation timing and `extra` arguments, its
/// standard error sent to `stderr`; the child and its port.
pub fn start(bin: &str, extra: &[String], stderr: Stdio) -> (Child, u16) {
    let timing = [
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
    ];
    let mut sim = Command::new(bin)
        .args(timing)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("start anvil-sim");
    let mut line = String::new();
    BufReader::new(sim.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the listening line");
    let port: u16 = line
        .trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a port in the listening line");
    (sim, port)
}
