//! Artifact integration tests: write with the real writer, read back through the reader and
//! validator, break files the ways real runs break them, and SIGKILL a real writer process.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anvil::artifact::reader::read_all;
use anvil::artifact::schema::{META_SCHEMA_VERSION, META_TABLE};
use anvil::artifact::testing;
use anvil::artifact::{
    Arm, ArtifactWriter, Clock, Endpoint, EventRow, Outcome, RequestKind, RequestRow, RunJson,
    SCHEMA_VERSION, ScrapePhase, ScrapeRow, Status, Table, Topology, Workload, WriterOptions,
    open_table, recover, validate, validate_dir,
};
use anvil::clock::{Origin, monotonic_ns};
use arrow::array::{Array, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::compute::concat_batches;
use arrow::datatypes::{DataType, Field, Int64Type, Schema};
use parquet::arrow::ArrowWriter;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

fn workload() -> Workload {
    testing::workload()
}

fn endpoint(replica: u32) -> Endpoint {
    Endpoint {
        replica,
        url: format!("http://127.0.0.1:{}", 8000 + replica),
        model: "qwen3.8-27b".into(),
        server_info: BTreeMap::from([("server_version".into(), serde_json::json!("0.6.1"))]),
        metrics_url: Some(format!("http://127.0.0.1:{}/metrics", 8000 + replica)),
    }
}

fn run_json(run_id: &str, arm: &str, replicas: u32) -> RunJson {
    let mut run = testing::with_workload(testing::run_json(run_id), workload());
    run.arm = Arm {
        name: arm.into(),
        stage: "matched topology".into(),
        runtime: "sglang".into(),
        config: [("tp", "1"), ("dp", replicas.to_string().as_str())]
            .into_iter()
            .collect(),
        defaults: Default::default(),
    };
    run.topology = Topology {
        replica_count: replicas,
        endpoints: (0..replicas).map(endpoint).collect(),
    };
    run.command_line = vec![
        "anvil-capture".into(),
        "--cell".into(),
        "headline-4k-c8".into(),
    ];
    run
}

fn finished(run: RunJson) -> RunJson {
    testing::finished(run)
}

fn chunk(i: u32) -> String {
    format!(
        r#"{{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{{"index":0,"delta":{{"content":"w{i} "}},"finish_reason":null}}]}}"#
    )
}

fn request_row(
    i: u32,
    replica: u32,
    outcome: Outcome,
    events: u32,
    kind: RequestKind,
) -> RequestRow {
    RequestRow {
        endpoint: endpoint(replica).url,
        model: "qwen3.8-27b".into(),
        canary: Some(anvil::artifact::canary::make(38027, "salt", u64::from(i))),
        prompt_sha256: format!("{:064x}", i),
        prompt_chars: 16_000 + u64::from(i),
        prompt_tokens_target: 4096,
        prompt_tokens_calibrated: Some(4090),
        max_tokens: Some(512),
        request_body: Some(format!(
            r#"{{"model":"qwen3.8-27b","stream":true,"i":{i}}}"#
        )),
        t_intended_ns: i64::from(i) * 1000,
        t_sent_ns: Some(i64::from(i) * 1000 + 50),
        t_first_byte_ns: (outcome != Outcome::TimeoutFirstByte)
            .then_some(i64::from(i) * 1000 + 500),
        t_done_ns: i64::from(i) * 1000 + 900,
        http_status: match outcome {
            Outcome::Ok => Some(200),
            Outcome::HttpError => Some(400),
            _ => None,
        },
        outcome,
        error: (outcome != Outcome::Ok).then(|| "server said no".to_owned()),
        events,
        new_connection: i == 0,
        ..anvil::artifact::testing::request_row(i, kind, replica, outcome)
    }
}

/// Writes a small but complete artifact: 2 replicas, 30 requests (one warmup, two failures),
/// 10 events per successful request (with usage and [DONE]), scrapes before/after.
fn write_sample(dir: &Path, run_id: &str) -> (Vec<RequestRow>, Vec<EventRow>, Vec<ScrapeRow>) {
    let opts = WriterOptions {
        max_rows_per_part: 37,
        roll_interval: Duration::from_millis(5),
        ..WriterOptions::default()
    };
    let mut w = ArtifactWriter::with_options(dir, run_json(run_id, "DP2", 2), opts).unwrap();
    let (mut reqs, mut evs, mut scrapes) = (Vec::new(), Vec::new(), Vec::new());
    for replica in 0..2 {
        let s = ScrapeRow {
            replica,
            t_ns: 1,
            phase: ScrapePhase::Before,
            metric: "process_start_time_seconds".into(),
            labels: anvil::artifact::schema::canonical_labels([("model_name", "qwen")]),
            metric_type: String::new(),
            value: 1.7e9 + f64::from(replica),
        };
        w.push_scrape(s.clone()).unwrap();
        scrapes.push(s);
    }
    for i in 0..30u32 {
        let (kind, outcome) = match i {
            0 => (RequestKind::Warmup, Outcome::Ok),
            7 => (RequestKind::Measured, Outcome::HttpError),
            8 => (RequestKind::Measured, Outcome::TimeoutIdle),
            _ => (RequestKind::Measured, Outcome::Ok),
        };
        let n_events = if outcome == Outcome::Ok { 10 } else { 0 };
        for seq in 0..n_events {
            let t = i64::from(i) * 1000 + 500 + i64::from(seq);
            let data = match seq {
                0 => r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}"#.to_owned(),
                8 => r#"{"choices":[],"usage":{"prompt_tokens":4100,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":0}}}"#.to_owned(),
                9 => "[DONE]".to_owned(),
                _ => chunk(seq),
            };
            let row = EventRow::from_raw(i, seq, t, None, data.as_bytes());
            w.push_event(row.clone()).unwrap();
            evs.push(row);
        }
        let r = request_row(i, i % 2, outcome, n_events, kind);
        w.push_request(r.clone()).unwrap();
        reqs.push(r);
        if i.is_multiple_of(10) {
            std::thread::sleep(Duration::from_millis(6));
            w.flush_if_due().unwrap();
        }
    }
    let s = ScrapeRow {
        replica: 0,
        t_ns: 40_000,
        phase: ScrapePhase::After,
        metric: "sglang:num_running_reqs".into(),
        labels: String::new(),
        metric_type: String::new(),
        value: 0.0,
    };
    w.push_scrape(s.clone()).unwrap();
    scrapes.push(s);
    w.finish(finished(run_json(run_id, "DP2", 2))).unwrap();
    (reqs, evs, scrapes)
}

fn read_table(path: &Path) -> RecordBatch {
    let batches = read_all(path).unwrap();
    let table = open_table(path).unwrap().table;
    concat_batches(&table.schema(), &batches).unwrap()
}

#[test]
fn written_artifact_reads_back_with_equal_rows_and_values() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = anvil::artifact::artifact_dir(tmp.path(), "camp", "DP2", "headline-4k-c8").unwrap();
    let (reqs, evs, scrapes) = write_sample(&dir, "run-a");

    let summary = validate_dir(&dir).unwrap();
    assert_eq!(summary.status, "complete");
    assert_eq!(summary.requests, 30);
    assert_eq!(summary.requests_measured, 29);
    assert_eq!(summary.succeeded, 27);
    assert_eq!(summary.events, evs.len() as u64);
    assert_eq!(summary.scrapes, 3);
    for t in Table::ALL {
        assert!(
            !dir.join(t.parts_dir_name()).exists(),
            "parts of {} removed",
            t.name()
        );
    }
    let run = RunJson::read(&dir.join("run.json")).unwrap();
    assert_eq!(run.counts.failed.get(&Outcome::HttpError), Some(&1));
    assert_eq!(run.counts.failed.get(&Outcome::TimeoutIdle), Some(&1));
    assert_eq!(run.counts.requests_warmup, 1);

    // requests: every value as written
    let r = read_table(&dir.join("requests.parquet"));
    assert_eq!(r.num_rows(), reqs.len());
    let idx = r
        .column_by_name("request_index")
        .unwrap()
        .as_primitive::<Int64Type>();
    let outcome = r.column_by_name("outcome").unwrap().as_string::<i32>();
    let canary = r.column_by_name("canary").unwrap().as_string::<i32>();
    let body = r.column_by_name("request_body").unwrap().as_string::<i32>();
    let first = r
        .column_by_name("t_first_byte_ns")
        .unwrap()
        .as_primitive::<Int64Type>();
    let status = r
        .column_by_name("http_status")
        .unwrap()
        .as_primitive::<Int64Type>();
    let run_ids = r.column_by_name("run_id").unwrap().as_string::<i32>();
    for (i, want) in reqs.iter().enumerate() {
        assert_eq!(idx.value(i), i64::from(want.request_index));
        assert_eq!(outcome.value(i), want.outcome.as_str());
        assert_eq!(Some(canary.value(i)), want.canary.as_deref());
        assert_eq!(Some(body.value(i)), want.request_body.as_deref());
        assert_eq!(first.is_null(i), want.t_first_byte_ns.is_none());
        assert_eq!(status.is_null(i), want.http_status.is_none());
        assert_eq!(run_ids.value(i), "run-a");
    }

    // events: raw data kept exactly, parsed columns present
    let e = read_table(&dir.join("events.parquet"));
    assert_eq!(e.num_rows(), evs.len());
    let data = e.column_by_name("data").unwrap().as_string::<i32>();
    let content = e
        .column_by_name("content_delta")
        .unwrap()
        .as_string::<i32>();
    let usage = e
        .column_by_name("usage_completion_tokens")
        .unwrap()
        .as_primitive::<Int64Type>();
    let done = e.column_by_name("done").unwrap().as_boolean();
    let t = e
        .column_by_name("t_ns")
        .unwrap()
        .as_primitive::<Int64Type>();
    for (i, want) in evs.iter().enumerate() {
        assert_eq!(data.value(i), want.data);
        assert_eq!(t.value(i), want.t_ns);
        assert_eq!(
            (!content.is_null(i)).then(|| content.value(i)),
            want.parsed.content_delta.as_deref()
        );
        assert_eq!(
            (!usage.is_null(i)).then(|| usage.value(i)),
            want.parsed.usage_completion_tokens
        );
        assert_eq!(done.value(i), want.parsed.done);
    }
    assert_eq!(done.iter().filter(|d| *d == Some(true)).count(), 28);

    // scrapes
    let s = read_table(&dir.join("scrapes.parquet"));
    assert_eq!(s.num_rows(), scrapes.len());
    let labels = s.column_by_name("labels").unwrap().as_string::<i32>();
    assert_eq!(labels.value(0), r#"model_name="qwen""#);
    let phase = s.column_by_name("phase").unwrap().as_string::<i32>();
    assert_eq!(phase.value(2), "after");
}

#[test]
fn every_table_carries_the_schema_version_metadata() {
    let tmp = tempfile::tempdir().unwrap();
    write_sample(tmp.path(), "run-meta");
    for t in Table::ALL {
        let file = fs::File::open(tmp.path().join(t.file_name())).unwrap();
        let reader = parquet::file::reader::SerializedFileReader::new(file).unwrap();
        use parquet::file::reader::FileReader;
        let kv: BTreeMap<String, Option<String>> = reader
            .metadata()
            .file_metadata()
            .key_value_metadata()
            .unwrap()
            .iter()
            .map(|kv| (kv.key.clone(), kv.value.clone()))
            .collect();
        assert_eq!(kv[META_SCHEMA_VERSION].as_deref(), Some(SCHEMA_VERSION));
        assert_eq!(kv[META_TABLE].as_deref(), Some(t.name()));
    }
}

#[test]
fn matched_topologies_share_a_fingerprint_and_edited_workloads_are_caught() {
    let tp1 = run_json("r1", "TP1", 1);
    let mut dp2 = run_json("r2", "DP2", 2);
    dp2.prompt_salt = "another salt".into();
    assert_eq!(tp1.workload_fingerprint, dp2.workload_fingerprint);
    let mut other = run_json("r3", "TP1", 1);
    other.workload.concurrency_per_replica = 4;
    other.workload_fingerprint = other.workload.fingerprint();
    assert_ne!(tp1.workload_fingerprint, other.workload_fingerprint);

    // The same workload written with its keys in another order and 4096 as 4096.0.
    let text = tp1.to_json_pretty();
    let reordered = text
        .replace(
            "\"class\": \"headline-sustained-output\",",
            "\"thinking\": \"disabled\", \"class\": \"headline-sustained-output\",",
        )
        .replacen("\"thinking\": \"disabled\",\n", "", 1)
        .replace(
            "\"prompt_tokens_target\": 4096",
            "\"prompt_tokens_target\": 4096.0",
        );
    let v: serde_json::Value =
        serde_json::from_str(&reordered).unwrap_or_else(|e| panic!("{e}\n{reordered}"));
    assert_eq!(
        anvil::artifact::fingerprint::fingerprint_value(&v["workload"]),
        tp1.workload_fingerprint
    );

    // validate recomputes the fingerprint from the file.
    let tmp = tempfile::tempdir().unwrap();
    write_sample(tmp.path(), "run-fp");
    let path = tmp.path().join("run.json");
    let edited = fs::read_to_string(&path)
        .unwrap()
        .replace("\"max_tokens\": 512", "\"max_tokens\": 1024");
    fs::write(&path, edited).unwrap();
    let err = validate_dir(tmp.path()).unwrap_err();
    assert!(
        err.contains("run.json") && err.contains("workload_fingerprint"),
        "{err}"
    );
}

#[test]
fn truncated_parquet_gets_the_recover_hint() {
    let tmp = tempfile::tempdir().unwrap();
    write_sample(tmp.path(), "run-trunc");
    let path = tmp.path().join("events.parquet");
    let bytes = fs::read(&path).unwrap();
    fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let err = validate_dir(tmp.path()).unwrap_err();
    assert!(err.contains("events.parquet"), "{err}");
    assert!(
        err.contains("not a complete Parquet file (no footer"),
        "{err}"
    );
    assert!(
        err.contains(&format!("anvil-capture recover {}", tmp.path().display())),
        "{err}"
    );
    fs::write(&path, b"").unwrap();
    let err = validate_dir(tmp.path()).unwrap_err();
    assert!(err.contains("not a complete Parquet file"), "{err}");
}

#[test]
fn non_parquet_file_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    write_sample(tmp.path(), "run-csv");
    let path = tmp.path().join("requests.parquet");
    fs::write(&path, "request_index,outcome\n0,ok\n").unwrap();
    let err = validate_dir(tmp.path()).unwrap_err();
    assert!(
        err.contains("requests.parquet: not a Parquet file"),
        "{err}"
    );
}

fn write_foreign_parquet(path: &Path, metadata: Option<Vec<KeyValue>>, schema: Arc<Schema>) {
    let columns: Vec<Arc<dyn Array>> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Int64 => Arc::new(Int64Array::from(vec![1i64])) as Arc<dyn Array>,
            DataType::Float64 => Arc::new(arrow::array::Float64Array::from(vec![1.0])) as _,
            _ => Arc::new(StringArray::from(vec!["x"])) as _,
        })
        .collect();
    let batch = RecordBatch::try_new(schema.clone(), columns).unwrap();
    let props = WriterProperties::builder()
        .set_key_value_metadata(metadata)
        .build();
    let mut w = ArrowWriter::try_new(fs::File::create(path).unwrap(), schema, Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

#[test]
fn non_anvil_parquet_is_refused_naming_the_missing_metadata() {
    let tmp = tempfile::tempdir().unwrap();
    write_sample(tmp.path(), "run-foreign");
    let path = tmp.path().join("scrapes.parquet");
    let schema = Arc::new(Schema::new(vec![Field::new(
        "metric",
        DataType::Utf8,
        false,
    )]));
    write_foreign_parquet(&path, None, schema);
    let err = validate_dir(tmp.path()).unwrap_err();
    assert!(
        err.contains("scrapes.parquet: not an anvil artifact table"),
        "{err}"
    );
    assert!(err.contains("anvil.schema_version"), "{err}");
}

#[test]
fn other_schema_version_and_missing_columns_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    write_sample(tmp.path(), "run-v0");
    let path = tmp.path().join("scrapes.parquet");
    let meta = |v: &str| {
        Some(vec![
            KeyValue::new(META_SCHEMA_VERSION.into(), v.to_owned()),
            KeyValue::new(META_TABLE.into(), "scrapes".to_owned()),
        ])
    };
    write_foreign_parquet(
        &path,
        meta("anvil-artifact/0"),
        anvil::artifact::scrapes_schema(),
    );
    let err = validate_dir(tmp.path()).unwrap_err();
    assert!(
        err.contains("`anvil-artifact/0`") && err.contains("expected `anvil-artifact/3`"),
        "{err}"
    );

    let partial = Arc::new(Schema::new(
        anvil::artifact::scrapes_schema()
            .fields()
            .iter()
            .filter(|f| f.name() != "labels")
            .cloned()
            .collect::<Vec<_>>(),
    ));
    write_foreign_parquet(&path, meta(SCHEMA_VERSION), partial);
    let err = validate_dir(tmp.path()).unwrap_err();
    assert!(err.contains("column `labels`: missing"), "{err}");
}

#[test]
fn a_running_artifact_is_not_valid_and_recover_fixes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let opts = WriterOptions {
        roll_interval: Duration::from_secs(3600),
        ..WriterOptions::default()
    };
    let mut w = ArtifactWriter::with_options(dir, run_json("run-r", "TP1", 1), opts).unwrap();
    for seq in 0..20 {
        w.push_event(EventRow::from_raw(
            0,
            seq,
            i64::from(seq),
            None,
            chunk(seq).as_bytes(),
        ))
        .unwrap();
    }
    w.push_request(request_row(0, 0, Outcome::Ok, 20, RequestKind::Measured))
        .unwrap();
    w.flush().unwrap();
    // Rows after the last flush are lost with the process, like a kill.
    w.push_event(EventRow::from_raw(1, 0, 99, None, b"[DONE]"))
        .unwrap();
    drop(w);
    // A part the writer was in the middle of, and a damaged complete-looking part.
    fs::write(dir.join("events.parts/_000002.parquet.tmp"), b"PAR1 half").unwrap();
    let part1 = fs::read(dir.join("events.parts/000001.parquet")).unwrap();
    fs::write(
        dir.join("events.parts/000003.parquet"),
        &part1[..part1.len() - 10],
    )
    .unwrap();

    let err = validate_dir(dir).unwrap_err();
    assert!(
        err.contains("`running`") && err.contains("anvil-capture recover"),
        "{err}"
    );

    let report = recover(dir).unwrap();
    assert_eq!(report.status_before, Status::Running);
    assert_eq!(report.status_after, Status::Interrupted);
    assert_eq!(report.rows(Table::Events), 20);
    assert_eq!(report.notes.len(), 2, "{:?}", report.notes);
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("_000002.parquet.tmp")),
        "{:?}",
        report.notes
    );
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("000003.parquet") && n.contains("no footer")),
        "{:?}",
        report.notes
    );
    let summary = validate(dir).unwrap();
    assert_eq!(summary.status, "interrupted");
    assert_eq!(summary.events, 20);
    assert_eq!(summary.requests, 1);
    let run = RunJson::read(&dir.join("run.json")).unwrap();
    assert!(run.status_reason.unwrap().contains("recover"));
    assert!(run.ended_utc.is_some());
    // Running it again changes nothing.
    let again = recover(dir).unwrap();
    assert_eq!(again.status_before, Status::Interrupted);
    validate(dir).unwrap();
}

#[test]
fn recover_without_run_json_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let err = recover(tmp.path()).unwrap_err().to_string();
    assert!(
        err.contains("cannot recover") && err.contains("no run.json"),
        "{err}"
    );
}

// --- SIGKILL: a real writer process killed with kill -9 -------------------------------------

const CHILD_ENV: &str = "ANVIL_IT_SIGKILL_WRITER_DIR";
/// Events the child writes per request (request_index = n / EVENTS_PER_REQUEST).
const EVENTS_PER_REQUEST: u32 = 50;

/// Not a test on its own (ignored, so it never counts as one that passed): run by
/// `sigkill_loses_at_most_the_last_two_seconds` with `ANVIL_IT_SIGKILL_WRITER_DIR` set, this
/// process becomes the writer that test kills. It writes about 2,000 events/s and appends
/// `<events pushed> <CLOCK_MONOTONIC ns>` to `progress.log` every 20 ms.
#[test]
#[ignore = "the child process of sigkill_loses_at_most_the_last_two_seconds"]
fn sigkill_child_writer() {
    let dir = PathBuf::from(
        std::env::var_os(CHILD_ENV).expect("run by sigkill_loses_at_most_the_last_two_seconds"),
    );
    let origin = Origin::now();
    let mut run = run_json("run-kill", "TP1", 1);
    run.clock = Clock::from_origin(&origin);
    let mut w = ArtifactWriter::create(&dir.join("artifact"), run).unwrap();
    let mut log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("progress.log"))
        .unwrap();
    let mut n: u32 = 0;
    let mut last_log = Instant::now();
    let mut last_scrape = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        for _ in 0..2 {
            let (req, seq) = (n / EVENTS_PER_REQUEST, n % EVENTS_PER_REQUEST);
            let row = EventRow::from_raw(req, seq, origin.elapsed_ns(), None, chunk(n).as_bytes());
            w.push_event(row).unwrap();
            n += 1;
            if n.is_multiple_of(EVENTS_PER_REQUEST) {
                let mut r = request_row(
                    req,
                    0,
                    Outcome::Ok,
                    EVENTS_PER_REQUEST,
                    RequestKind::Measured,
                );
                r.t_done_ns = origin.elapsed_ns();
                w.push_request(r).unwrap();
            }
        }
        if last_scrape.elapsed() >= Duration::from_millis(250) {
            last_scrape = Instant::now();
            w.push_scrape(ScrapeRow {
                replica: 0,
                t_ns: origin.elapsed_ns(),
                phase: ScrapePhase::During,
                metric: "num_requests_running".into(),
                labels: String::new(),
                metric_type: String::new(),
                value: 8.0,
            })
            .unwrap();
        }
        w.flush_if_due().unwrap();
        if last_log.elapsed() >= Duration::from_millis(20) {
            last_log = Instant::now();
            // One write(2) per line: it reaches the page cache, which survives SIGKILL.
            log.write_all(format!("{n} {}\n", monotonic_ns()).as_bytes())
                .unwrap();
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn sigkill_loses_at_most_the_last_two_seconds() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("artifact");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "artifact::sigkill_child_writer",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();

    // While the writer runs, another reader opens its completed parts.
    let mut read_while_running = 0u64;
    while started.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(200));
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            panic!("writer child exited early ({status}): {err}");
        }
        let Ok(entries) = fs::read_dir(dir.join("events.parts")) else {
            continue;
        };
        let mut rows = 0;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "parquet") {
                let table =
                    open_table(&path).unwrap_or_else(|e| panic!("live part unreadable: {e}"));
                assert_eq!(table.table, Table::Events);
                let batches: Vec<_> = table.reader().unwrap().collect::<Result<_, _>>().unwrap();
                rows += batches.iter().map(|b| b.num_rows() as u64).sum::<u64>();
            }
        }
        read_while_running = read_while_running.max(rows);
    }
    assert!(
        read_while_running > 0,
        "no complete part was readable while the writer ran"
    );

    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    let killed_at = monotonic_ns();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "child must die by SIGKILL: {status}"
    );
    assert!(dir.join("run.json").exists());

    // Every event the child had pushed more than 2 s before the kill must be recovered.
    let log = fs::read_to_string(tmp.path().join("progress.log")).unwrap();
    let must_have = log
        .lines()
        .filter_map(|l| {
            let (n, t) = l.split_once(' ')?;
            Some((n.parse::<u64>().ok()?, t.parse::<i64>().ok()?))
        })
        .filter(|(_, t)| *t <= killed_at - 2_000_000_000)
        .map(|(n, _)| n)
        .max()
        .expect("the child logged progress more than 2 s before the kill");
    assert!(must_have > 0);

    let report = recover(&dir).unwrap();
    assert_eq!(report.status_after, Status::Interrupted);
    let summary = validate(&dir).unwrap_or_else(|e| panic!("recovered artifact invalid: {e}"));
    assert_eq!(summary.status, "interrupted");
    assert!(
        summary.events >= must_have,
        "recovered {} events, but {} were pushed more than 2 s before the kill (report: {:?})",
        summary.events,
        must_have,
        report.notes
    );
    assert!(summary.events >= read_while_running);

    // The recovered events are exactly the first N the child wrote, each once.
    let events = read_table(&dir.join("events.parquet"));
    let req = events
        .column_by_name("request_index")
        .unwrap()
        .as_primitive::<Int64Type>();
    let seq = events
        .column_by_name("seq")
        .unwrap()
        .as_primitive::<Int64Type>();
    let mut ids: Vec<i64> = (0..events.num_rows())
        .map(|i| req.value(i) * i64::from(EVENTS_PER_REQUEST) + seq.value(i))
        .collect();
    ids.sort_unstable();
    assert!(
        ids.iter().copied().eq(0..ids.len() as i64),
        "recovered events are not a gap-free prefix"
    );
    let run = RunJson::read(&dir.join("run.json")).unwrap();
    assert_eq!(run.counts.events, ids.len() as u64);
    eprintln!(
        "sigkill: {} events recovered, {} required (pushed > 2 s before the kill), {} readable while running",
        ids.len(),
        must_have,
        read_while_running
    );
}
