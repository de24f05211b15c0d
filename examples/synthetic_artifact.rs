//! Write a large synthetic artifact with the real [`ArtifactWriter`], for benchmarking the
//! query layer (`just bench-sql`).
//!
//! ```text
//! cargo run --example synthetic_artifact -- OUT_ROOT [--requests N] [--events-per-request K] [--replicas R] [--cell ID]
//! ```
//!
//! Defaults: 40,000 measured requests × 250 events = 10,000,000 events over 2 replicas. Each
//! request streams a role-only chunk, K − 3 content chunks (chat-completion JSON in `data`,
//! parsed columns filled as `parse_event` would fill them), a usage chunk and `[DONE]`, with
//! deterministic pseudo-random TTFT and inter-chunk gaps. The batches are appended directly
//! (no JSON parsing), so the time goes to Parquet encoding as in a real recorder's writer.

use std::path::PathBuf;
use std::sync::Arc;

use anvil::artifact::run::utc_now;
use anvil::artifact::testing;
use anvil::artifact::{
    Api, Arm, ArtifactWriter, Outcome, RequestKind, RequestRow, RunJson, ScrapePhase, ScrapeRow,
    Status, Tool, Workload, events_schema,
};
use arrow_array::{ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray};

const MS: i64 = 1_000_000;

struct Args {
    out: PathBuf,
    requests: u32,
    events_per_request: u32,
    replicas: u32,
    /// The cell's id (many small artifacts side by side: one cell each, each its own run).
    cell: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mut out = None;
    let mut args = Args {
        out: PathBuf::new(),
        requests: 40_000,
        events_per_request: 250,
        replicas: 2,
        cell: None,
    };
    while let Some(a) = it.next() {
        let mut number = |name: &str| -> Result<u32, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{name} needs a positive integer"))
        };
        match a.as_str() {
            "--requests" => args.requests = number("--requests")?,
            "--events-per-request" => args.events_per_request = number("--events-per-request")?,
            "--replicas" => args.replicas = number("--replicas")?,
            "--cell" => args.cell = Some(it.next().ok_or("--cell needs an id")?),
            _ if a.starts_with("--") => return Err(format!("unknown flag {a}")),
            _ => out = Some(PathBuf::from(a)),
        }
    }
    args.out = out.ok_or(
        "usage: synthetic_artifact OUT_ROOT [--requests N] [--events-per-request K] [--replicas R] [--cell ID]",
    )?;
    if args.events_per_request < 4 || args.requests == 0 || args.replicas == 0 {
        return Err("need --events-per-request >= 4, --requests >= 1, --replicas >= 1".into());
    }
    Ok(args)
}

/// A small deterministic generator (SplitMix64), so runs are reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [lo, hi).
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo) as u64) as i64
    }
}

fn run_json(args: &Args) -> RunJson {
    let workload = Workload {
        total_requests: u64::from(args.requests),
        off_manifest: true,
        ..testing::workload()
    };
    let mut run = testing::with_workload(
        testing::run_json(&match &args.cell {
            Some(cell) => format!("synthetic-{}-{cell}", args.requests),
            None => format!("synthetic-{}", args.requests),
        }),
        workload,
    );
    run.campaign_id = "bench-synthetic".into();
    run.arm = Arm {
        name: "SYN".into(),
        stage: "benchmark".into(),
        runtime: "synthetic".into(),
        config: [("dp", args.replicas.to_string())].into_iter().collect(),
        defaults: Default::default(),
    };
    run.cell_id = args
        .cell
        .clone()
        .unwrap_or_else(|| "synthetic-4k-c8".into());
    run.topology = testing::topology(args.replicas, 8000, "synthetic");
    run.prompt_salt = "bench".into();
    run.tool = Tool::this("synthetic_artifact");
    run.command_line = std::env::args().collect();
    run
}

/// Column buffers of one events batch.
#[derive(Default)]
struct EventColumns {
    request_index: Vec<i64>,
    seq: Vec<i64>,
    t_ns: Vec<i64>,
    data: Vec<String>,
    content: Vec<Option<String>>,
    finish: Vec<Option<&'static str>>,
    usage_prompt: Vec<Option<i64>>,
    usage_completion: Vec<Option<i64>>,
    usage_cached: Vec<Option<i64>>,
    done: Vec<bool>,
}

impl EventColumns {
    fn len(&self) -> usize {
        self.seq.len()
    }

    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        request_index: u32,
        seq: u32,
        t_ns: i64,
        data: String,
        content: Option<String>,
        finish: Option<&'static str>,
        usage: Option<(i64, i64)>,
        done: bool,
    ) {
        self.request_index.push(i64::from(request_index));
        self.seq.push(i64::from(seq));
        self.t_ns.push(t_ns);
        self.data.push(data);
        self.content.push(content);
        self.finish.push(finish);
        self.usage_prompt.push(usage.map(|u| u.0));
        self.usage_completion.push(usage.map(|u| u.1));
        self.usage_cached.push(usage.map(|_| 0));
        self.done.push(done);
    }

    fn take_batch(&mut self, run_id: &str) -> Result<RecordBatch, arrow_schema::ArrowError> {
        let c = std::mem::take(self);
        let n = c.seq.len();
        let none = || -> ArrayRef { Arc::new(StringArray::from(vec![None::<&str>; n])) };
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec![run_id; n])),
            Arc::new(Int64Array::from(c.request_index)),
            Arc::new(Int64Array::from(c.seq)),
            Arc::new(Int64Array::from(c.t_ns)),
            none(),
            Arc::new(StringArray::from(c.data)),
            Arc::new(StringArray::from(c.content)),
            none(),
            none(),
            Arc::new(StringArray::from(c.finish)),
            Arc::new(Int64Array::from(c.usage_prompt)),
            Arc::new(Int64Array::from(c.usage_completion)),
            Arc::new(Int64Array::from(c.usage_cached)),
            none(),
            Arc::new(BooleanArray::from(c.done)),
            none(),
        ];
        RecordBatch::try_new(events_schema(), columns)
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let run = run_json(&args);
    let dir =
        anvil::artifact::artifact_dir(&args.out, &run.campaign_id, &run.arm.name, &run.cell_id)?;
    let run_id = run.run_id.clone();
    let started = std::time::Instant::now();
    let mut writer = ArtifactWriter::create(&dir, run.clone())?;
    let mut rng = Rng(38027);
    let mut events = EventColumns::default();
    let k = args.events_per_request;
    let content_chunks = k - 3;
    let concurrency = 8 * i64::from(args.replicas);
    let mut total_events = 0u64;
    // The `after` scrape follows the last request (an instant the reader accepts).
    let mut last_done = 0i64;
    for i in 0..args.requests {
        let replica = i % args.replicas;
        // Requests start in waves of `concurrency`, one wave every ~5 s of streaming.
        let t_sent = i64::from(i) / concurrency * 5_000 * MS + rng.range(0, 50) * MS;
        let mut t = t_sent + rng.range(80, 400) * MS;
        let t_first = t;
        events.push(i, 0, t - MS, r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}]}"#.to_owned(), None, None, None, false);
        let mut tokens = 0i64;
        for c in 0..content_chunks {
            let word = format!(" w{}", rng.range(0, 10_000));
            let data = format!(
                r#"{{"id":"chatcmpl-{i}","object":"chat.completion.chunk","choices":[{{"index":0,"delta":{{"content":"{word}"}},"finish_reason":null}}]}}"#
            );
            // One to three tokens per chunk (speculative decoding).
            tokens += rng.range(1, 4);
            events.push(i, c + 1, t, data, Some(word), None, None, false);
            t += rng.range(10, 30) * MS;
        }
        let prompt = 4096 + rng.range(-40, 40);
        events.push(
            i,
            k - 2,
            t,
            format!(r#"{{"choices":[],"usage":{{"prompt_tokens":{prompt},"completion_tokens":{tokens}}}}}"#),
            None,
            Some("stop"),
            Some((prompt, tokens)),
            false,
        );
        events.push(
            i,
            k - 1,
            t + MS / 10,
            "[DONE]".to_owned(),
            None,
            None,
            None,
            true,
        );
        let t_done = t + MS / 10;
        last_done = last_done.max(t_done);
        debug_assert!(t_first > t_sent);
        if events.len() >= 50_000 {
            total_events += events.len() as u64;
            writer.append_events(events.take_batch(&run_id)?)?;
            writer.flush_if_due()?;
        }
        writer.push_request(RequestRow {
            request_index: i,
            kind: RequestKind::Measured,
            check: None,
            replica,
            endpoint: format!("http://127.0.0.1:{}", 8000 + replica),
            api: Api::Chat,
            model: "synthetic".into(),
            canary: Some(anvil::artifact::canary::make(38027, "bench", u64::from(i))),
            prompt_sha256: format!("{:064x}", u64::from(i)),
            prompt_chars: 16_000,
            prompt_tokens_target: 4096,
            prompt_tokens_calibrated: Some(4090),
            max_tokens: Some(512),
            request_body: None,
            t_intended_ns: t_sent,
            t_sent_ns: Some(t_sent),
            t_first_byte_ns: Some(t_sent + MS),
            t_done_ns: t_done,
            http_status: Some(200),
            outcome: Outcome::Ok,
            error: None,
            events: k,
            new_connection: false,
            resent: false,
            session: None,
            ignore_eos: Some(false),
            t_released_ns: None,
        })?;
    }
    total_events += events.len() as u64;
    if events.len() != 0 {
        writer.append_events(events.take_batch(&run_id)?)?;
    }
    for replica in 0..args.replicas {
        for (phase, t) in [(ScrapePhase::Before, 0), (ScrapePhase::After, last_done)] {
            writer.push_scrape(ScrapeRow {
                replica,
                t_ns: t,
                phase,
                metric: "process_start_time_seconds".into(),
                labels: String::new(),
                metric_type: String::new(),
                value: 1.7e9,
            })?;
        }
    }
    let mut done = run;
    done.status = Status::Complete;
    done.ended_utc = Some(utc_now());
    writer.finish(done)?;
    eprintln!(
        "wrote {} ({} requests, {total_events} events) in {:.1} s",
        dir.display(),
        args.requests,
        started.elapsed().as_secs_f64()
    );
    println!("{}", dir.display());
    Ok(())
}
