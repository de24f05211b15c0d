//! Artifacts on object storage, against a real S3-compatible server on loopback (moto's
//! server): `anvil push`, then every command reading the prefix in place and agreeing with
//! the local folder; an artifact missing an object, a run still recording, a missing bucket;
//! and a wrong key, against a server with its IAM checks on. (moto 5.2 computes the signature
//! of a query value holding `/` wrongly, refusing every signed listing of a prefix, so the
//! data tests run on a server that does not check signatures, and the refusals on one that
//! does: a wrong key is refused before any signature is computed.)

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use super::common::{ANVIL, output_text as text, run};
use super::skip::{S3, skipped};

const CAMPAIGN: &str = "2026-09-04-qwen38-27b-pro6000-possibility";

/// A moto S3 server on a free loopback port with one bucket, `anvil-test`, and one IAM user
/// whose key may use it; killed when dropped.
pub struct S3Server {
    child: Child,
    endpoint: String,
    key: String,
    secret: String,
    cache: tempfile::TempDir,
}

/// The moto server's command, when installed.
fn moto_server() -> Option<PathBuf> {
    let found = Command::new("sh")
        .args(["-c", "command -v moto_server"])
        .output()
        .ok()?;
    let path = String::from_utf8_lossy(&found.stdout).trim().to_owned();
    (!path.is_empty()).then(|| PathBuf::from(path))
}

/// Set up by Python (boto3 comes with moto). Without checks: the bucket. With checks (the
/// server allows these two unsigned IAM calls and checks every request after): a user and
/// its key.
const SETUP: &str = r#"
import boto3, sys
e, checking = sys.argv[1], sys.argv[2] == "1"
if checking:
    iam = boto3.client("iam", endpoint_url=e, region_name="us-east-1",
                       aws_access_key_id="setup", aws_secret_access_key="setup")
    iam.create_user(UserName="anvil")
    k = iam.create_access_key(UserName="anvil")["AccessKey"]
    print(k["AccessKeyId"], k["SecretAccessKey"])
else:
    boto3.client("s3", endpoint_url=e, region_name="us-east-1", aws_access_key_id="AKIAANVILTEST0000",
                 aws_secret_access_key="anvil-test-secret-0000").create_bucket(Bucket="anvil-test")
    print("AKIAANVILTEST0000 anvil-test-secret-0000")
"#;

impl S3Server {
    /// The server with bucket `anvil-test`, or `None` (said visibly) when moto is not
    /// installed.
    pub fn start(test: &str) -> Option<S3Server> {
        Self::launch(test, false)
    }

    /// A server checking keys and signatures, with one user's key (and no bucket).
    pub fn start_checking(test: &str) -> Option<S3Server> {
        Self::launch(test, true)
    }

    fn launch(test: &str, checking: bool) -> Option<S3Server> {
        let Some(moto) = moto_server() else {
            skipped(test, &S3, "no moto_server on PATH");
            return None;
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap();
        let mut moto = Command::new(moto);
        moto.args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .env_remove("INITIAL_NO_AUTH_ACTION_COUNT")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if checking {
            moto.env("INITIAL_NO_AUTH_ACTION_COUNT", "2");
        }
        let mut child = moto.spawn().expect("start moto_server");
        // moto logs "Running on http://127.0.0.1:PORT" on standard error when it serves.
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        loop {
            line.clear();
            let n = err.read_line(&mut line).unwrap();
            assert!(n > 0, "moto_server exited before serving");
            if line.contains("Running on") {
                break;
            }
        }
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        let endpoint = format!("http://127.0.0.1:{port}");
        let setup = Command::new("python3")
            .args(["-c", SETUP, &endpoint, if checking { "1" } else { "0" }])
            .output()
            .expect("python3 for the S3 setup");
        assert!(
            setup.status.success(),
            "S3 setup failed: {}",
            String::from_utf8_lossy(&setup.stderr)
        );
        let text = String::from_utf8(setup.stdout).unwrap();
        let (key, secret) = text.trim().split_once(' ').unwrap();
        Some(S3Server {
            child,
            endpoint,
            key: key.to_owned(),
            secret: secret.to_owned(),
            cache: tempfile::tempdir().unwrap(),
        })
    }

    /// The environment of a command using the server with the right key.
    pub fn env(&self) -> Vec<(&str, &str)> {
        self.env_with(&self.key, &self.secret)
    }

    fn env_with<'a>(&'a self, key: &'a str, secret: &'a str) -> Vec<(&'a str, &'a str)> {
        vec![
            ("AWS_ACCESS_KEY_ID", key),
            ("AWS_SECRET_ACCESS_KEY", secret),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ENDPOINT_URL", &self.endpoint),
            ("AWS_ALLOW_HTTP", "true"),
            ("ANVIL_CACHE_DIR", self.cache.path().to_str().unwrap()),
        ]
    }

    /// `anvil ARGS` with the server's environment.
    pub fn anvil(&self, args: &[&str]) -> Output {
        run(ANVIL, args, &self.env())
    }

    /// Make one call of boto3's S3 client with the right key (`call`: e.g.
    /// `delete_object(Bucket='anvil-test', Key='…')`), as a user of the bucket would.
    pub fn boto3(&self, call: &str) {
        let python = format!(
            "import boto3; boto3.client('s3', endpoint_url='{}', region_name='us-east-1', \
             aws_access_key_id='{}', aws_secret_access_key='{}').{call}",
            self.endpoint, self.key, self.secret
        );
        let done = Command::new("python3")
            .args(["-c", &python])
            .status()
            .unwrap();
        assert!(done.success(), "boto3 {call}");
    }

    /// Push `dir` beneath `s3://anvil-test/<prefix>/`; the URL it went to.
    pub fn push(&self, dir: &Path, prefix: &str) -> String {
        let dest = format!("s3://anvil-test/{prefix}/");
        let o = self.anvil(&["push", dir.to_str().unwrap(), &dest]);
        assert!(o.status.success(), "push: {}", text(&o));
        String::from_utf8(o.stdout).unwrap().trim().to_owned()
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sample_campaign() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("sample-data")
        .join(CAMPAIGN)
}

/// Every view of queries/ and the base tables (runs without its `dir` column, which is the
/// location), one statement each.
fn every_relation() -> String {
    let mut names: Vec<String> =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("queries"))
            .unwrap()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let stem = name.strip_suffix(".sql")?;
                Some(stem.split_once('_').map_or(stem, |(_, v)| v).to_owned())
            })
            .collect();
    names.sort();
    let mut sql: Vec<String> = names.iter().map(|v| format!("SELECT * FROM {v}")).collect();
    sql.push("SELECT * EXCLUDE (dir) FROM runs".to_owned());
    for table in ["requests", "events", "scrapes", "slos"] {
        sql.push(format!("SELECT * FROM {table}"));
    }
    sql.join(";\n")
}

/// Each output line, its numbers to 9 significant digits, and how often it occurs: the
/// statements' rows, order aside (a scan's order is the engine's, and so is the order a mean
/// over runs adds its terms in, which moves the last bits of a double).
fn lines(o: &Output) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let fields: Vec<String> = line
            .split(',')
            .map(|f| match f.parse::<f64>() {
                Ok(x) if f.contains('.') || f.contains('e') => format!("{x:.8e}"),
                _ => f.to_owned(),
            })
            .collect();
        *out.entry(fields.join(",")).or_default() += 1;
    }
    out
}

/// A slice of the sample campaign folder, in a campaign folder of its own name: its journal,
/// capacity and restoration documents and five arms (the screen's K4 and K12, the two
/// RadixArk headline arms, Inferact's target-only with its context curve): what a pushed
/// campaign holds, at a seventh of the sample's bytes (moto serves every object from
/// Python, so the whole sample takes minutes per pass).
fn campaign_slice(into: &Path) -> PathBuf {
    let from = sample_campaign();
    let to = into.join(CAMPAIGN);
    std::fs::create_dir_all(&to).unwrap();
    for doc in [
        "campaign-journal.jsonl",
        "capacity.json",
        "restoration.json",
    ] {
        std::fs::copy(from.join(doc), to.join(doc)).unwrap();
    }
    for arm in [
        "K4",
        "K12",
        "RadixArk target-only",
        "RadixArk DFlash2 K8",
        "Inferact target-only",
    ] {
        crate::common::copy_tree(&from.join(arm), &to.join(arm));
    }
    to
}

#[test]
fn a_pushed_campaign_reads_in_place_as_the_local_folder() {
    let Some(s3) = S3Server::start("a_pushed_campaign_reads_in_place_as_the_local_folder") else {
        return;
    };
    let slice = tempfile::tempdir().unwrap();
    let local = campaign_slice(slice.path());
    let url = s3.push(&local, "campaigns");
    assert_eq!(url, format!("s3://anvil-test/campaigns/{CAMPAIGN}"));
    let dir = tempfile::tempdir().unwrap();
    let sql = dir.path().join("all.sql");
    std::fs::write(&sql, every_relation()).unwrap();
    let local_text = local.to_str().unwrap();
    let sql_arg = sql.to_str().unwrap();
    let here = s3.anvil(&[
        "sql", "--format", "csv", "--data", local_text, "-f", sql_arg,
    ]);
    let there = s3.anvil(&["sql", "--format", "csv", "--data", &url, "-f", sql_arg]);
    assert!(here.status.success(), "{}", text(&here));
    assert!(there.status.success(), "{}", text(&there));
    let (here_lines, there_lines) = (lines(&here), lines(&there));
    assert!(
        here_lines.len() > 5_000,
        "{} distinct lines",
        here_lines.len()
    );
    assert!(
        here_lines == there_lines,
        "the views over s3 differ from the local ones: {:?}",
        here_lines
            .iter()
            .filter(|(l, n)| there_lines.get(*l) != Some(n))
            .take(5)
            .collect::<Vec<_>>()
    );
    // cell_stats exactly, every value to the last digit (its rows come in the engine's
    // order, which differs from one run of the same query to the next, locally too).
    let q = "SELECT * FROM cell_stats";
    let sorted = |o: Output| {
        let mut rows: Vec<String> = String::from_utf8(o.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        rows.sort();
        rows
    };
    let here = sorted(s3.anvil(&["sql", "--data", local_text, q]));
    let there = sorted(s3.anvil(&["sql", "--data", &url, q]));
    assert!(here.len() > 200, "{} lines", here.len());
    assert!(
        here == there,
        "cell_stats over s3 differs from the local one"
    );
    // The report: the same, but for where the data is.
    let (r_here, r_there) = (dir.path().join("here.html"), dir.path().join("there.html"));
    for (data, out) in [(local_text, &r_here), (url.as_str(), &r_there)] {
        let o = s3.anvil(&["report", "--data", data, "--out", out.to_str().unwrap()]);
        assert!(o.status.success(), "{}", text(&o));
    }
    let stamp = |p: &Path, data: &str| {
        let html = std::fs::read_to_string(p).unwrap();
        let escaped = data.replace('/', "&#x2F;");
        let at = html.find("generated ").unwrap();
        let end = html[at..].find(" · ").unwrap() + at;
        let html = format!("{}generated …{}", &html[..at], &html[end..]);
        assert!(html.contains(&escaped), "the report names {data}");
        html.replace(&escaped, "DATA")
    };
    let (a, b) = (stamp(&r_here, local_text), stamp(&r_there, &url));
    let differing: Vec<(&str, &str)> = a
        .lines()
        .zip(b.lines())
        .filter(|(x, y)| x != y)
        .take(3)
        .collect();
    assert!(
        differing.is_empty() && a.len() == b.len(),
        "reports differ: {differing:?}"
    );
    // summary, verify and validate over the remote prefix.
    let sub = format!("{url}/Inferact target-only");
    let o = s3.anvil(&["verify", "--data", &sub]);
    assert!(o.status.success(), "{}", text(&o));
    // The arm's artifacts: its screen, headline, functional and context-curve cells.
    let arm_runs = crate::common::run_jsons(&local.join("Inferact target-only")).len();
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .contains(&format!("{arm_runs} artifact(s): SQL and polars agree")),
        "{}",
        text(&o)
    );
    let o = s3.anvil(&["validate", &sub]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        out.lines().filter(|l| l.ends_with(": ok")).count(),
        arm_runs,
        "{out}"
    );
    assert!(out.lines().all(|l| l.starts_with(&sub)), "{out}");
    let o = s3.anvil(&["summary", "--data", &sub]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn remote_failures_name_the_url_and_the_object() {
    let Some(s3) = S3Server::start("remote_failures_name_the_url_and_the_object") else {
        return;
    };
    let url = s3.push(&sample_campaign().join("TP1"), "one-arm");
    // An artifact missing one object.
    let artifact = format!("{url}/functional.ctx4096.c1.n8");
    s3.boto3("delete_object(Bucket='anvil-test', Key='one-arm/TP1/functional.ctx4096.c1.n8/events.parquet')");
    let o = s3.anvil(&["summary", "--data", &url]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("{artifact}/events.parquet: missing")),
        "{err}"
    );
    // A wrong key, and the right key with a wrong secret: refused, and neither the key nor
    // the secret in any output.
    let Some(checking) = S3Server::start_checking("remote_failures_name_the_url_and_the_object")
    else {
        return;
    };
    let wrong_secret = "wrong-secret-d41d8cd98f00b204";
    for (key, secret) in [
        ("AKIAWRONGKEY0001", wrong_secret),
        (checking.key.as_str(), wrong_secret),
    ] {
        let o = run(
            ANVIL,
            &["sql", "--data", "s3://anvil-test/x", "SELECT 1"],
            &checking.env_with(key, secret),
        );
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        let all = text(&o);
        assert!(all.contains("s3://anvil-test/x: access denied"), "{all}");
        assert!(
            !all.contains(key) && !all.contains(secret),
            "a credential was printed: {all}"
        );
    }
    // A document given as a URL is validated from its copy and named by its URL.
    let manifest = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/sample-data/workload-manifest.json"
    );
    s3.boto3(&format!(
        "upload_file('{manifest}', 'anvil-test', 'docs/workload-manifest.json')"
    ));
    let doc = "s3://anvil-test/docs/workload-manifest.json";
    let o = s3.anvil(&["validate", doc]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.starts_with(doc) && out.trim_end().ends_with("ok"),
        "{out}"
    );
    // No such bucket; nothing beneath a prefix.
    let o = s3.anvil(&[
        "report",
        "--data",
        "s3://no-such-bucket/x",
        "--out",
        "/dev/null",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("s3://no-such-bucket/x: no such bucket"),
        "{}",
        text(&o)
    );
    let o = s3.anvil(&["summary", "--data", "s3://anvil-test/nothing-here"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no object at or beneath this prefix"));
}

#[test]
fn push_refuses_a_run_still_recording_and_uploads_nothing() {
    let Some(s3) = S3Server::start("push_refuses_a_run_still_recording_and_uploads_nothing") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let arm = dir.path().join("arm");
    for cell in [
        "functional.ctx4096.c1.n8",
        "headline-sustained-output.ctx4096.c4.n64.probe-capacity/repeat-1",
    ] {
        let from = sample_campaign().join("TP1").join(cell);
        let to = arm.join(cell);
        std::fs::create_dir_all(&to).unwrap();
        for f in std::fs::read_dir(&from).unwrap().flatten() {
            std::fs::copy(f.path(), to.join(f.file_name())).unwrap();
        }
    }
    // One of the two is still being recorded, as its run.json says.
    let run_json = arm.join("functional.ctx4096.c1.n8").join("run.json");
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&run_json).unwrap()).unwrap();
    value["status"] = "running".into();
    value["ended_utc"] = serde_json::Value::Null;
    std::fs::write(&run_json, value.to_string()).unwrap();
    let o = s3.anvil(&["push", arm.to_str().unwrap(), "s3://anvil-test/refused/"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("nothing was uploaded") && err.contains("status `running`"),
        "{err}"
    );
    let o = s3.anvil(&["summary", "--data", "s3://anvil-test/refused"]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no object at or beneath this prefix"),
        "something was uploaded: {}",
        text(&o)
    );
    // Not an object-store URL.
    let o = s3.anvil(&["push", arm.to_str().unwrap(), "/tmp/elsewhere"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

/// Three shards record with `--upload`, each pushing its artifact after its run; the run
/// group read from the bucket is one logical run, its indices checked from the requests
/// tables read in place.
#[test]
fn shards_uploaded_by_their_recorders_are_one_run_in_the_bucket() {
    let Some(s3) = S3Server::start("shards_uploaded_by_their_recorders_are_one_run_in_the_bucket")
    else {
        return;
    };
    let sim = super::common::Sim::start(&["--replicas", "3"]);
    let dir = tempfile::tempdir().unwrap();
    let manifest = super::shard::manifest(dir.path());
    let out = dir.path().join("out");
    let at = super::shard::start_at(std::time::Duration::from_secs(6));
    let env = s3.env();
    let children: Vec<_> = (0..3)
        .map(|i| {
            super::shard::shard_with(
                &sim,
                &manifest,
                &out,
                i,
                &at,
                &["--upload", "s3://anvil-test/up/"],
                &env,
            )
        })
        .collect();
    for child in children {
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("uploaded"),
            "{}",
            text(&o)
        );
    }
    let url = format!("s3://anvil-test/up/{CAMPAIGN}");
    let q = "SELECT shards, total_requests, status, dir FROM runs";
    let o = s3.anvil(&["sql", "--format", "csv", "--data", &url, q]);
    assert!(o.status.success(), "{}", text(&o));
    let rows = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(rows.lines().count(), 2, "one logical run: {rows}");
    assert!(
        rows.contains(&format!(
            "3,30,complete,{url}/K12/headline-sustained-output.ctx512.c4.n30"
        )),
        "{rows}"
    );
    let o = s3.anvil(&[
        "sql",
        "--format",
        "csv",
        "--data",
        &url,
        "SELECT count(DISTINCT request_index) FROM request_metrics",
    ]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("\n30"),
        "{}",
        text(&o)
    );
    sim.terminate();
}
