//! Shared helpers of the integration tests: a real `anvil-sim` process on loopback, the
//! capture binaries, and typed reads of artifact tables.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::Int64Type;

pub const SIM: &str = env!("CARGO_BIN_EXE_anvil-sim");
pub const CAPTURE: &str = env!("CARGO_BIN_EXE_anvil-capture");
pub const ANVIL: &str = env!("CARGO_BIN_EXE_anvil");

/// A running simulator started with `--port 0 --profile fast --no-realtime` plus extra
/// arguments; killed when dropped.
pub struct Sim {
    child: Child,
    pub ports: Vec<u16>,
    stderr: Arc<Mutex<String>>,
}

impl Sim {
    pub fn start(args: &[&str]) -> Sim {
        let mut all = vec!["--port", "0", "--profile", "fast", "--no-realtime"];
        all.extend_from_slice(args);
        Self::start_raw(&all)
    }

    /// Start with exactly `args` (no defaults added).
    pub fn start_raw(all: &[&str]) -> Sim {
        let mut child = Command::new(SIM)
            .args(all)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn anvil-sim");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = child.stderr.take().unwrap();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let replicas = all
            .windows(2)
            .find(|w| w[0] == "--replicas")
            .map_or(1, |w| w[1].parse().unwrap());
        let mut ports = Vec::new();
        let mut line = String::new();
        while ports.len() < replicas {
            line.clear();
            let n = out.read_line(&mut line).unwrap();
            assert!(n > 0, "anvil-sim exited early: {}", stderr.lock().unwrap());
            if line.contains("listening on") {
                ports.push(line.trim().rsplit(':').next().unwrap().parse().unwrap());
            }
        }
        Sim {
            child,
            ports,
            stderr,
        }
    }

    pub fn url(&self, replica: usize) -> String {
        format!("http://127.0.0.1:{}", self.ports[replica])
    }

    /// SIGTERM and wait (the simulator then flushes its truth file); returns its stderr.
    pub fn terminate(self) -> String {
        self.stop().1
    }

    /// SIGTERM, wait, and return (exit code, stderr).
    pub fn stop(self) -> (i32, String) {
        let (code, err) = self.signal(libc::SIGTERM);
        (code.unwrap_or(-1), err)
    }

    /// Send `signal`, wait, and return (exit code, `None` when a signal ended it; stderr).
    pub fn signal(mut self, signal: i32) -> (Option<i32>, String) {
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, signal) };
        let status = self.child.wait().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let err = self.stderr.lock().unwrap().clone();
        (status.code(), err)
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run a binary to completion with extra environment variables.
pub fn run(bin: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(bin);
    c.args(args).stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run binary")
}

/// A finished process's exit code, standard output and standard error, for a failed
/// assertion's message.
pub fn output_text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Every record batch of an artifact table file.
pub fn batches(path: &Path) -> Vec<RecordBatch> {
    anvil::artifact::open_table(path)
        .unwrap_or_else(|e| panic!("{e}"))
        .reader()
        .unwrap()
        .map(|b| b.unwrap())
        .collect()
}

pub fn ints(b: &[RecordBatch], col: &str) -> Vec<Option<i64>> {
    b.iter()
        .flat_map(|b| {
            let a = b.column_by_name(col).unwrap().as_primitive::<Int64Type>();
            (0..a.len())
                .map(|i| a.is_valid(i).then(|| a.value(i)))
                .collect::<Vec<_>>()
        })
        .collect()
}

pub fn strs(b: &[RecordBatch], col: &str) -> Vec<Option<String>> {
    b.iter()
        .flat_map(|b| {
            let a = b.column_by_name(col).unwrap().as_string::<i32>();
            (0..a.len())
                .map(|i| a.is_valid(i).then(|| a.value(i).to_owned()))
                .collect::<Vec<_>>()
        })
        .collect()
}

pub fn bools(b: &[RecordBatch], col: &str) -> Vec<bool> {
    b.iter()
        .flat_map(|b| {
            let a = b.column_by_name(col).unwrap().as_boolean();
            (0..a.len()).map(|i| a.value(i)).collect::<Vec<_>>()
        })
        .collect()
}

/// The sample workload manifest with small headline cells (24 words, 64-token ceiling),
/// changed further by `edit`, written to `dir/manifest.json`; returns its path.
pub fn small_manifest(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) -> PathBuf {
    let src = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/sample-data/workload-manifest.json"
    );
    let mut manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(src).unwrap()).unwrap();
    manifest["selection"]["headline_response_words"] = 24.into();
    manifest["selection"]["headline_max_tokens"] = 64.into();
    edit(&mut manifest);
    let path = dir.join("manifest.json");
    std::fs::write(&path, manifest.to_string()).unwrap();
    path
}

/// `anvil-capture run` of one 512-token cell against `sim` with `manifest`, writing under
/// `out`; `args` choose class, concurrency, requests, arm and so on. Returns the artifact
/// folder the capture printed last.
pub fn capture_cell(sim: &Sim, manifest: &Path, out: &Path, args: &[&str]) -> PathBuf {
    let url = sim.url(0);
    let mut all = vec![
        "run",
        "--manifest",
        manifest.to_str().unwrap(),
        "--context",
        "512",
        "--endpoint",
        &url,
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    artifact_of(&run(CAPTURE, &all, &[]))
}

/// Every `run.json` at or beneath `dir` (the artifact folders a data folder holds).
pub fn run_jsons(dir: &Path) -> Vec<PathBuf> {
    files_under(dir, |p| p.file_name().is_some_and(|n| n == "run.json"))
}

/// Every file at or beneath `dir` that `keep` accepts, sorted.
pub fn files_under(dir: &Path, keep: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if keep(&path) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// `anvil check --data data --plan plan --manifest manifest`: (exit code, standard output).
pub fn anvil_check(data: &Path, plan: &str, manifest: &Path) -> (Option<i32>, String) {
    let o = run(
        ANVIL,
        &[
            "check",
            "--data",
            data.to_str().unwrap(),
            "--plan",
            plan,
            "--manifest",
            manifest.to_str().unwrap(),
        ],
        &[],
    );
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

/// The rows `anvil sql --data data --format json query` prints (one JSON array per
/// statement, flattened); fails the test, naming the query, when anvil does.
pub fn sql_rows(data: &Path, query: &str) -> Vec<serde_json::Value> {
    sql_rows_with(data, &[], query)
}

/// [`sql_rows`] with further `anvil sql` arguments (`--slo ...`).
pub fn sql_rows_with(data: &Path, args: &[&str], query: &str) -> Vec<serde_json::Value> {
    let mut argv = vec!["sql", "--data", data.to_str().unwrap(), "--format", "json"];
    argv.extend_from_slice(args);
    argv.push(query);
    let o = run(ANVIL, &argv, &[]);
    assert!(
        o.status.success(),
        "{query}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .flat_map(|l| match serde_json::from_str::<serde_json::Value>(l) {
            Ok(serde_json::Value::Array(rows)) => rows,
            Ok(v) => vec![v],
            Err(e) => panic!("{query}: not JSON ({e}): {l}"),
        })
        .collect()
}

/// A `restoration.json` in `dir` saying the starting service was restored (one passing
/// check), for tests whose plan's restore stage is not what they are about.
pub fn write_restored(dir: &Path) {
    let doc = serde_json::json!({
        "schema": "anvil-serving.restoration/v1",
        "campaign_id": "2026-09-04-qwen38-27b-pro6000-possibility",
        "restored": true,
        "managed_path": "endpoints",
        "argv": [],
        "endpoints": ["http://127.0.0.1:1"],
        "pids": [],
        "started_at": "2026-12-01T00:00:00Z",
        "ready_at": "2026-12-01T00:00:01Z",
        "finished_at": "2026-12-01T00:00:02Z",
        "before": null,
        "after": null,
        "checks": [{
            "check": "models", "passed": true, "expected": [["m"]], "observed": [["m"]],
            "detail": "the model list of each replica: [[\"m\"]]"
        }]
    });
    std::fs::write(dir.join("restoration.json"), doc.to_string()).unwrap();
}

/// The `measured` rows of an artifact's requests table (calibration probes and warm-up left
/// out).
pub fn measured_requests(dir: &Path) -> Vec<RecordBatch> {
    batches(&dir.join("requests.parquet"))
        .iter()
        .map(|b| {
            let kind = b
                .column_by_name("kind")
                .unwrap()
                .as_any()
                .downcast_ref::<arrow::array::StringArray>()
                .unwrap();
            let keep: arrow::array::BooleanArray =
                kind.iter().map(|k| Some(k == Some("measured"))).collect();
            arrow::compute::filter_record_batch(b, &keep).unwrap()
        })
        .collect()
}

/// (request index, intended, sent) of the measured requests, by index.
pub fn intended_and_sent(dir: &Path) -> Vec<(i64, i64, i64)> {
    let r = measured_requests(dir);
    let mut rows: Vec<(i64, i64, i64)> = ints(&r, "request_index")
        .into_iter()
        .zip(ints(&r, "t_intended_ns"))
        .zip(ints(&r, "t_sent_ns"))
        .map(|((i, t), s)| (i.unwrap(), t.unwrap(), s.unwrap()))
        .collect();
    rows.sort();
    rows
}

/// The commands of a shell text: continuation lines and lines inside an open quote joined,
/// comments and blank lines dropped.
pub fn shell_commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let line = line.trim_end();
        if let Some(head) = line.strip_suffix('\\') {
            current.push_str(head);
            current.push(' ');
            continue;
        }
        current.push_str(line);
        if open_quote(strip_comment(&current)) {
            current.push('\n');
            continue;
        }
        let command = strip_comment(&current).trim().to_owned();
        current.clear();
        if !command.is_empty() {
            out.push(command);
        }
    }
    out
}

/// Whether `text` ends inside a quoted string.
pub fn open_quote(text: &str) -> bool {
    let (mut single, mut double) = (false, false);
    for c in text.chars() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            _ => {}
        }
    }
    single || double
}

/// A shell line without its `# comment` (a `#` outside quotes, at the start or after a blank).
pub fn strip_comment(line: &str) -> &str {
    let (mut single, mut double) = (false, false);
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'\'' if !double => single = !single,
            b'"' if !single => double = !double,
            b'#' if !single && !double && (i == 0 || bytes[i - 1].is_ascii_whitespace()) => {
                return &line[..i];
            }
            _ => {}
        }
    }
    line
}

/// Words of a shell line, quotes removed (enough for the README's and the deploy examples'
/// commands).
pub fn shell_words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
                any = false;
            }
            (None, c) => word.push(c),
        }
    }
    if any || !word.is_empty() {
        out.push(word);
    }
    out
}

/// What a finished binary said: exit code, standard output and standard error as text.
#[derive(Debug)]
pub struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    fn of(o: Output) -> Ran {
        Ran {
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }

    /// Standard output then standard error, for a check of what was said anywhere.
    pub fn both(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }

    /// The exit code, standard output and standard error.
    pub fn parts(self) -> (Option<i32>, String, String) {
        (self.code, self.stdout, self.stderr)
    }

    /// The exit code and everything said, standard output then standard error.
    pub fn said(self) -> (Option<i32>, String) {
        (self.code, self.both())
    }

    /// Standard output, after asserting the exit code was `code` (standard error shown
    /// when it was not).
    pub fn expect(self, code: i32) -> String {
        assert_eq!(self.code, Some(code), "{}", self.stderr);
        self.stdout
    }
}

/// `anvil ARGS` run from the package root (so `sample-data/…` resolves), standard input
/// closed: the one way the tests call the analysis binary.
pub fn anvil(args: &[&str]) -> Ran {
    anvil_with(args, &[])
}

/// The sample campaign's run plan.
pub const SAMPLE_PLAN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/sample-data/run-plan.json");

/// `anvil compare --manifest MANIFEST --plan <the sample plan> ARGS…`.
pub fn anvil_compare(manifest: &str, args: &[&str]) -> Ran {
    anvil(
        &[
            &["compare", "--manifest", manifest, "--plan", SAMPLE_PLAN][..],
            args,
        ]
        .concat(),
    )
}

/// [`anvil`] with owned words.
pub fn anvil_words(args: &[String]) -> Ran {
    anvil(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// A path as a command-line word (the tests' paths are UTF-8).
pub fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// `anvil ARGS` with extra environment variables.
pub fn anvil_with(args: &[&str], env: &[(&str, &str)]) -> Ran {
    let mut c = Command::new(ANVIL);
    c.args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    Ran::of(c.output().expect("run anvil"))
}

/// `anvil campaign run FILE --out OUT EXTRA…`, standard output and error captured.
pub fn run_campaign(file: &Path, out: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(ANVIL);
    cmd.args(["campaign", "run"])
        .arg(file)
        .arg("--out")
        .arg(out)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// One `anvil-capture run` of an off-manifest cell of the headline class at 512 tokens of
/// context, built flag by flag: the one place the tests write the recorder's command line.
#[derive(Clone, Debug)]
pub struct Recording {
    args: Vec<String>,
    env: Vec<(String, String)>,
}

impl Recording {
    /// `run --manifest M --class headline-sustained-output --context 512 --concurrency C
    /// --requests N --off-manifest --quiet --out OUT`.
    pub fn cell(manifest: &Path, out: &Path, concurrency: u32, requests: u32) -> Recording {
        let mut r = Recording {
            args: Vec::new(),
            env: Vec::new(),
        };
        r = r
            .args(&["run", "--manifest", manifest.to_str().unwrap()])
            .args(&["--class", "headline-sustained-output", "--context", "512"])
            .args(&["--concurrency", &concurrency.to_string()])
            .args(&["--requests", &requests.to_string(), "--off-manifest"])
            .args(&["--quiet", "--out", out.to_str().unwrap()]);
        r
    }

    pub fn args(mut self, args: &[&str]) -> Recording {
        self.args.extend(args.iter().map(|a| (*a).to_owned()));
        self
    }

    pub fn endpoint(self, url: &str) -> Recording {
        self.args(&["--endpoint", url])
    }

    pub fn arm(self, arm: &str) -> Recording {
        self.args(&["--arm", arm])
    }

    /// Replace the value after `flag` (the first occurrence), e.g. `--context`.
    pub fn set(mut self, flag: &str, value: &str) -> Recording {
        let at = self.args.iter().position(|a| a == flag).expect("flag set");
        self.args[at + 1] = value.to_owned();
        self
    }

    /// Without `--quiet`: the quick look on standard error.
    pub fn loud(mut self) -> Recording {
        self.args.retain(|a| a != "--quiet");
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Recording {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    fn command(&self) -> Command {
        let mut c = Command::new(CAPTURE);
        c.args(&self.args).stdin(Stdio::null());
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    pub fn run(&self) -> Output {
        self.command().output().expect("run anvil-capture")
    }

    /// Started in the background with its output piped, for a test that signals it or
    /// stops its server while it runs.
    pub fn spawn(&self) -> Child {
        self.command()
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn anvil-capture")
    }

    /// Run, assert success, and return the artifact folder (the last line of stdout).
    pub fn record(&self) -> PathBuf {
        artifact_of(&self.run())
    }
}

/// The artifact folder a successful recording printed last, after asserting its success.
pub fn artifact_of(o: &Output) -> PathBuf {
    assert!(
        o.status.success(),
        "anvil-capture failed: {}",
        output_text(o)
    );
    PathBuf::from(
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .last()
            .expect("a path on stdout"),
    )
}

/// Assert that `text` (what a command said) contains `wanted`, showing the text when not.
#[track_caller]
pub fn says(text: &str, wanted: &str) {
    assert!(text.contains(wanted), "{wanted:?} missing from:\n{text}");
}

/// Copy the folder `from` to `to`, every file and folder beneath it.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}
