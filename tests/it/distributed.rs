//! SQL on the distributed engine: two `anvil worker` processes on loopback, `anvil sql
//! --workers` over the sample campaign's TP1 arm, every statement equal to the single-process
//! result (strings and counts exactly, numbers within `anvil verify`'s 1e-9 relative: a sum
//! over differently split files may differ in its last bits), and the plan really cut into
//! stages that ran on the workers; a worker that does not answer is named before a query runs.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use super::common::{ANVIL, anvil, output_text, run};
use super::object_store::S3Server;

/// A worker on a free loopback port; killed when dropped.
struct Worker {
    child: Child,
    url: String,
}

impl Worker {
    fn start() -> Worker {
        Worker::start_with(&[])
    }

    /// A worker with `env` added to its environment (an object store's credentials).
    fn start_with(env: &[(&str, &str)]) -> Worker {
        let mut child = Command::new(ANVIL)
            .args(["worker", "--listen", "127.0.0.1:0"])
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start anvil worker");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("anvil worker listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {line}"))
            .to_owned();
        Worker { child, url }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const DATA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/sample-data/2026-09-04-qwen38-27b-pro6000-possibility/TP1"
);

/// The CSV rows of `sql` over `DATA`, sorted by their text with numbers to 6 significant
/// digits.
fn rows(workers: Option<&str>, sql: &str) -> Vec<Vec<String>> {
    rows_of(DATA, workers, sql, &[])
}

/// The CSV rows of `sql` over `data` with `env`, sorted.
fn rows_of(data: &str, workers: Option<&str>, sql: &str, env: &[(&str, &str)]) -> Vec<Vec<String>> {
    let mut args = vec!["sql", "--format", "csv", "--data", data];
    if let Some(w) = workers {
        args.extend(["--workers", w, "--bytes-per-task", "1"]);
    }
    args.push(sql);
    let o = run(ANVIL, &args, env);
    assert!(o.status.success(), "{}", output_text(&o));
    let mut rows: Vec<Vec<String>> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split(',').map(str::to_owned).collect())
        .collect();
    let key = |r: &Vec<String>| -> Vec<String> {
        r.iter()
            .map(|f| match f.parse::<f64>() {
                Ok(x) if f.contains('.') => format!("{x:.5e}"),
                _ => f.clone(),
            })
            .collect()
    };
    rows.sort_by_key(key);
    rows
}

/// Equal row for row: strings and integers exactly, decimals within 1e-9 relative.
fn assert_same(sql: &str, here: &[Vec<String>], there: &[Vec<String>]) {
    assert!(here.len() > 10, "{sql}: {} rows", here.len());
    assert_eq!(here.len(), there.len(), "{sql}: row counts");
    for (x, y) in here.iter().zip(there) {
        assert!(
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q)),
            "{sql}: {x:?} vs {y:?}"
        );
    }
}

fn same(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) if a.contains('.') || b.contains('.') => {
            (x - y).abs() <= 1e-9 * x.abs().max(y.abs())
        }
        _ => false,
    }
}

#[test]
fn two_workers_give_the_single_process_results() {
    let (a, b) = (Worker::start(), Worker::start());
    let workers = format!("{},{}", a.url, b.url);
    for sql in [
        "SELECT * FROM cell_stats",
        "SELECT * FROM percentile_ci",
        "SELECT * FROM request_metrics",
        "SELECT run_id, count(*) AS events, sum(length(content_delta)) AS chars FROM events GROUP BY run_id",
    ] {
        assert_same(sql, &rows(None, sql), &rows(Some(&workers), sql));
    }
    // The plan was cut into stages run by the workers.
    let distributed = ["sql", "--data", DATA, "--workers", &workers];
    let o = anvil(
        &[
            &distributed[..],
            &["--bytes-per-task", "1"],
            &["EXPLAIN ANALYZE SELECT run_id, count(*) FROM events GROUP BY run_id"],
        ]
        .concat(),
    );
    assert!(o.ok(), "{o:?}");
    let plan = o.stdout;
    for part in [
        "DistributedExec",
        "NetworkShuffleExec",
        "Stage 1 ── tasks=2",
    ] {
        assert!(plan.contains(part), "no {part} in {plan}");
    }

    // A worker that is not there is named before any query runs.
    drop(b);
    let o = anvil(&[&distributed[..], &["SELECT count(*) FROM events"]].concat());
    let text = o.both();
    assert_eq!(o.code, Some(2), "{text}");
    assert!(
        text.contains("no worker answers") && text.contains("anvil worker --listen"),
        "{text}"
    );
}

/// Workers read a bucket with the credentials of their own environment: the same results from
/// the sample arm pushed to an S3 server on loopback as from the local folder.
#[test]
fn workers_read_artifacts_on_object_storage() {
    let test = "distributed::workers_read_artifacts_on_object_storage";
    let Some(s3) = S3Server::start(test) else {
        return;
    };
    let url = s3.push(std::path::Path::new(DATA), "distributed");
    let env = s3.env();
    let (a, b) = (Worker::start_with(&env), Worker::start_with(&env));
    let workers = format!("{},{}", a.url, b.url);
    for sql in ["SELECT * FROM cell_stats", "SELECT * FROM request_metrics"] {
        let there = rows_of(&url, Some(&workers), sql, &env);
        assert_same(sql, &rows(None, sql), &there);
    }
}
