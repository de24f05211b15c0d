//! The bad-input corpus: malformed manifests, plans and run.json, damaged and mixed artifact
//! tables, wrong flags, hostile SQL and output paths, each run through the real binaries.
//!
//! Every case states the exit code it expects and a fragment of the message that names the
//! file, field or flag. The runner asserts no panic, no abort (a signal), no hang (a
//! timeout), the exit code and the fragment, and reports every failing case at once.
//! Inputs are generated here from the sample campaign's seeds and artifacts, except the
//! crashing inputs the fuzz targets found, kept under `tests/it/corpus/`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{Field, Schema};
use serde_json::{Value, json};

use super::common::{ANVIL, CAPTURE, SIM};

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/sample-data");
const KEPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/corpus");
/// The small performance artifact every artifact case starts from.
const BASE_ARTIFACT: &str =
    "2026-09-04-qwen38-27b-pro6000-possibility/K16/optimization-screen.ctx4096.c4.n16";
const OTHER_ARTIFACT: &str =
    "2026-09-04-qwen38-27b-pro6000-possibility/K4/optimization-screen.ctx4096.c4.n16";
/// Longest a case may take (a debug build on a shared 2-core machine).
const TIMEOUT: Duration = Duration::from_secs(90);

/// One bad input and what must come of it.
struct Case {
    name: String,
    bin: &'static str,
    args: Vec<String>,
    code: i32,
    /// A fragment of standard output + standard error.
    fragment: String,
}

fn case(
    name: impl Into<String>,
    bin: &'static str,
    args: &[&str],
    code: i32,
    fragment: &str,
) -> Case {
    Case {
        name: name.into(),
        bin,
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        code,
        fragment: fragment.to_owned(),
    }
}

/// Run every case (at least `min` of them); panic listing each one that did not hold.
fn run_all(cases: Vec<Case>, min: usize) {
    let mut failures = Vec::new();
    let total = cases.len();
    assert!(total >= min, "{total} cases, expected at least {min}");
    eprintln!("corpus: {total} cases");
    for c in cases {
        if let Err(why) = run_case(&c) {
            let mut args = c.args.join(" ");
            if args.len() > 300 {
                args = format!("{}…", &args[..args.floor_char_boundary(300)]);
            }
            failures.push(format!("[{}] {} {args}\n  {why}", c.name, c.bin));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {total} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn run_case(c: &Case) -> Result<(), String> {
    let mut child = Command::new(c.bin)
        .args(&c.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let readers = (
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = out.read_to_end(&mut s);
            s
        }),
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = err.read_to_end(&mut s);
            s
        }),
    );
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if started.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("hung: no exit within {} s", TIMEOUT.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&readers.0.join().unwrap()),
        String::from_utf8_lossy(&readers.1.join().unwrap())
    );
    let shown = || text.chars().take(1500).collect::<String>();
    if text.contains("panicked") || text.contains("internal error") {
        return Err(format!("panicked:\n{}", shown()));
    }
    let Some(code) = status.code() else {
        return Err(format!("killed by a signal ({status}):\n{}", shown()));
    };
    if code != c.code {
        return Err(format!("exit {code}, expected {}:\n{}", c.code, shown()));
    }
    if !text.contains(&c.fragment) {
        return Err(format!("message lacks `{}`:\n{}", c.fragment, shown()));
    }
    Ok(())
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn seed(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(Path::new(SAMPLE).join(name)).unwrap()).unwrap()
}

/// Write `text` to `dir/name` and return the path.
fn put(dir: &Path, name: &str, text: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Copy an artifact folder (final tables and run.json only).
fn copy_artifact(from: &Path, to: &Path) -> PathBuf {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
    to.to_owned()
}

/// A JSON pointer's parent object and last key, for edits by path.
fn edit(doc: &mut Value, pointer: &str, value: Option<Value>) {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let target = doc
        .pointer_mut(parent)
        .unwrap_or_else(|| panic!("{pointer}"));
    match (target, value) {
        (Value::Object(map), Some(v)) => {
            map.insert(key.to_owned(), v);
        }
        (Value::Object(map), None) => {
            map.remove(key);
        }
        (Value::Array(items), Some(v)) => items[key.parse::<usize>().unwrap()] = v,
        (Value::Array(items), None) => {
            items.remove(key.parse::<usize>().unwrap());
        }
        _ => panic!("{pointer} is not in an object or array"),
    }
}

/// The text of `doc` with the top-level key `key` written a second time, last, as `value`.
fn with_duplicate(doc: &Value, key: &str, value: &str) -> String {
    let text = serde_json::to_string_pretty(doc).unwrap();
    let end = text.rfind('}').unwrap();
    format!("{},\n  \"{key}\": {value}\n}}", text[..end].trim_end())
}

#[test]
fn corpus_documents() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let manifest = seed("workload-manifest.json");
    let plan = seed("run-plan.json");
    let mut cases = Vec::new();
    let validate = |name: &str, path: &Path, code: i32, fragment: &str| {
        case(name, ANVIL, &["validate", &s(path)], code, fragment)
    };

    // Syntax, for either kind of document.
    for (name, text, fragment) in [
        ("empty", "", "EOF while parsing"),
        ("open brace", "{", "EOF while parsing"),
        (
            "trailing text",
            "{\"schema\": \"x\"} {}",
            "trailing characters",
        ),
        ("top-level array", "[1, 2]", "m-array.json"),
        ("top-level string", "\"manifest\"", "m-string.json"),
        ("no schema", "{\"campaign_id\": \"c\"}", "schema"),
        (
            "unknown schema",
            "{\"schema\": \"anvil-serving.nothing/v9\"}",
            "anvil-serving.nothing/v9",
        ),
        ("schema not a string", "{\"schema\": 7}", "schema"),
        ("huge number", "{\"schema\": 1e400}", "m-huge.json"),
        (
            "lone surrogate",
            "{\"schema\": \"\\ud800\"}",
            "m-surrogate.json",
        ),
    ] {
        let file = format!(
            "m-{}.json",
            match name {
                "top-level array" => "array",
                "top-level string" => "string",
                "huge number" => "huge",
                "lone surrogate" => "surrogate",
                other => other.split(' ').next().unwrap(),
            }
        );
        let path = put(dir, &file, text);
        cases.push(validate(name, &path, 2, fragment));
        cases.push(validate(name, &path, 2, &file));
    }
    let deep = put(
        dir,
        "deep.json",
        format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)),
    );
    cases.push(validate(
        "100000 nested arrays",
        &deep,
        2,
        "recursion limit",
    ));
    let bytes = put(dir, "latin1.json", b"{\"schema\": \"caf\xe9\"}");
    cases.push(validate("invalid UTF-8", &bytes, 2, "latin1.json"));
    let missing = dir.join("no-such.json");
    cases.push(validate(
        "missing file",
        &missing,
        2,
        "no such file or directory",
    ));

    // Workload manifests.
    // A seed document with one value changed (or removed), validated.
    let edited = |seed: &Value,
                  n: usize,
                  name: &str,
                  pointer: &str,
                  value: Option<Value>,
                  fragment: &str| {
        let mut doc = seed.clone();
        edit(&mut doc, pointer, value);
        let path = put(dir, &format!("edited-{n}.json"), doc.to_string());
        validate(name, &path, 2, fragment)
    };
    let mut manifest_case = |name: &str, pointer: &str, value: Option<Value>, fragment: &str| {
        cases.push(edited(
            &manifest,
            cases.len(),
            name,
            pointer,
            value,
            fragment,
        ));
    };
    manifest_case(
        "campaign id escapes",
        "/campaign_id",
        Some(json!("../escape")),
        "campaign_id: contains a path separator",
    );
    manifest_case(
        "campaign id absolute",
        "/campaign_id",
        Some(json!("/etc")),
        "campaign_id: contains a path separator",
    );
    manifest_case(
        "campaign id backslash",
        "/campaign_id",
        Some(json!("a\\b")),
        "campaign_id: contains a path separator",
    );
    manifest_case(
        "campaign id dot",
        "/campaign_id",
        Some(json!(".")),
        "campaign_id: starts with `.`",
    );
    manifest_case(
        "campaign id dot-dot",
        "/campaign_id",
        Some(json!("..")),
        "campaign_id: starts with `.`",
    );
    manifest_case(
        "campaign id hidden",
        "/campaign_id",
        Some(json!(".hidden")),
        "campaign_id: starts with `.`",
    );
    manifest_case(
        "campaign id newline",
        "/campaign_id",
        Some(json!("a\nb")),
        "campaign_id: contains a control character",
    );
    manifest_case(
        "campaign id too long",
        "/campaign_id",
        Some(json!("c".repeat(300))),
        "campaign_id: is longer than 128 bytes",
    );
    manifest_case(
        "campaign id blank",
        "/campaign_id",
        Some(json!("  ")),
        "campaign_id: expected a non-empty string",
    );
    manifest_case(
        "campaign id number",
        "/campaign_id",
        Some(json!(7)),
        "campaign_id",
    );
    manifest_case(
        "concurrency not a list",
        "/selection/concurrency",
        Some(json!("8")),
        "selection.concurrency",
    );
    manifest_case(
        "concurrency zero",
        "/selection/concurrency/0",
        Some(json!(0)),
        "selection.concurrency[0]",
    );
    manifest_case(
        "concurrency negative",
        "/selection/concurrency/0",
        Some(json!(-4)),
        "selection.concurrency[0]",
    );
    manifest_case(
        "concurrency fractional",
        "/selection/concurrency/0",
        Some(json!(1.5)),
        "selection.concurrency[0]",
    );
    manifest_case(
        "contexts empty",
        "/selection/contexts_actual_prompt_token_targets",
        Some(json!([])),
        "selection.contexts_actual_prompt_token_targets",
    );
    manifest_case(
        "context above the largest prompt target",
        "/selection/contexts_actual_prompt_token_targets/0",
        Some(json!(i64::MAX)),
        "selection.contexts_actual_prompt_token_targets[0]: 9223372036854775807 tokens is above",
    );
    manifest_case(
        "unknown field",
        "/selection/surprise",
        Some(json!(1)),
        "selection.surprise: unknown field",
    );
    manifest_case(
        "selection missing",
        "/selection",
        None,
        "selection: missing required field",
    );
    manifest_case("schema missing", "/schema", None, "schema");
    manifest_case("goal null", "/goal", Some(Value::Null), "goal");
    manifest_case(
        "max tokens string",
        "/selection/headline_max_tokens",
        Some(json!("many")),
        "selection.headline_max_tokens",
    );
    let dup = put(
        dir,
        "manifest-dup.json",
        with_duplicate(&manifest, "campaign_id", "\"other\""),
    );
    cases.push(validate(
        "duplicate campaign_id",
        &dup,
        2,
        "duplicate key `campaign_id` in the top-level object",
    ));
    let mut nested = serde_json::to_string_pretty(&manifest).unwrap();
    nested = nested.replacen(
        "\"selection\": {",
        "\"selection\": {\n    \"concurrency\": [1],",
        1,
    );
    let dup = put(dir, "manifest-dup-nested.json", nested);
    cases.push(validate(
        "duplicate nested key",
        &dup,
        2,
        "duplicate key `concurrency` in object /selection",
    ));

    // Run plans.
    let mut plan_case = |name: &str, pointer: &str, value: Option<Value>, fragment: &str| {
        cases.push(edited(&plan, cases.len(), name, pointer, value, fragment));
    };
    plan_case(
        "plan campaign id escapes",
        "/campaign_id",
        Some(json!("../../x")),
        "campaign_id: contains a path separator",
    );
    plan_case(
        "plan promotion not a bool",
        "/promotion_authorized",
        Some(json!("yes")),
        "promotion_authorized",
    );
    plan_case(
        "plan promotion missing",
        "/promotion_authorized",
        None,
        "promotion_authorized: missing required field",
    );
    plan_case(
        "plan order not a list",
        "/execution_order",
        Some(json!({})),
        "execution_order",
    );
    plan_case(
        "plan unknown stage field",
        "/execution_order/0/winner",
        Some(json!("K12")),
        "execution_order[0].winner: unknown field",
    );
    plan_case("plan goal number", "/goal", Some(json!(3)), "goal");
    let dup = put(
        dir,
        "plan-dup.json",
        with_duplicate(&plan, "promotion_authorized", "true"),
    );
    cases.push(validate(
        "duplicate promotion_authorized",
        &dup,
        2,
        "duplicate key `promotion_authorized`",
    ));
    // The same through the commands that read a plan: refused before any verdict.
    let data = Path::new(SAMPLE).join(BASE_ARTIFACT);
    let m = Path::new(SAMPLE).join("workload-manifest.json");
    for command in ["check", "report"] {
        cases.push(case(
            format!("{command} with a duplicate-key plan"),
            ANVIL,
            &[
                command,
                "--data",
                &s(&data),
                "--plan",
                &s(&dup),
                "--manifest",
                &s(&m),
                "--format",
                "md",
            ],
            2,
            "duplicate key `promotion_authorized`",
        ));
    }
    run_all(cases, 50);
}

/// An artifact folder under `root/name` copied from the base artifact, changed by `damage`.
fn damaged(root: &Path, name: &str, damage: impl FnOnce(&Path)) -> PathBuf {
    let dir = copy_artifact(&Path::new(SAMPLE).join(BASE_ARTIFACT), &root.join(name));
    damage(&dir);
    dir
}

/// Rewrite `dir/requests.parquet` with `change` applied to each batch, keeping its anvil
/// metadata (so only the change is wrong).
fn rewrite_requests(dir: &Path, change: impl Fn(RecordBatch) -> RecordBatch) {
    rewrite(dir, "requests.parquet", change);
}

/// Rewrite `dir/file` with `change` applied to each batch, keeping its anvil metadata.
fn rewrite(dir: &Path, file: &str, change: impl Fn(RecordBatch) -> RecordBatch) {
    use parquet::arrow::ArrowWriter;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::file::properties::WriterProperties;

    let path = dir.join(file);
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path).unwrap()).unwrap();
    let kv = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .cloned();
    let batches: Vec<RecordBatch> = builder
        .build()
        .unwrap()
        .map(|b| change(b.unwrap()))
        .collect();
    let props = WriterProperties::builder()
        .set_key_value_metadata(kv)
        .build();
    let mut w = ArrowWriter::try_new(
        std::fs::File::create(&path).unwrap(),
        batches[0].schema(),
        Some(props),
    )
    .unwrap();
    for b in &batches {
        w.write(b).unwrap();
    }
    w.close().unwrap();
}

/// `batch` with column `name` replaced by `column` (type and nullability from the array).
fn replace_column(batch: RecordBatch, name: &str, column: ArrayRef) -> RecordBatch {
    let schema = batch.schema();
    let at = schema.index_of(name).unwrap();
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields[at] = Field::new(name, column.data_type().clone(), true);
    let mut columns = batch.columns().to_vec();
    columns[at] = column;
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

fn edit_run_json(dir: &Path, change: impl FnOnce(&mut Value)) {
    let path = dir.join("run.json");
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    change(&mut doc);
    std::fs::write(path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
}

#[test]
fn corpus_artifacts() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let other = Path::new(SAMPLE).join(OTHER_ARTIFACT);
    let manifest = Path::new(SAMPLE).join("workload-manifest.json");
    let plan = Path::new(SAMPLE).join("run-plan.json");
    let parquet = std::fs::read(
        Path::new(SAMPLE)
            .join(BASE_ARTIFACT)
            .join("requests.parquet"),
    )
    .unwrap();

    // (name, the damage, a fragment every command's refusal holds)
    type Damage = Box<dyn FnOnce(&Path)>;
    let damages: Vec<(&str, Damage, &str)> = vec![
        (
            "zero-byte requests",
            Box::new(|d| drop(std::fs::write(d.join("requests.parquet"), ""))),
            "requests.parquet: not a complete Parquet file (no footer: the file is empty)",
        ),
        (
            "missing events",
            Box::new(|d| std::fs::remove_file(d.join("events.parquet")).unwrap()),
            "events.parquet: missing",
        ),
        (
            "8-byte PAR1PAR1",
            Box::new(|d| drop(std::fs::write(d.join("scrapes.parquet"), "PAR1PAR1"))),
            "scrapes.parquet: not a complete Parquet file",
        ),
        (
            "huge footer length",
            Box::new(|d| {
                let mut b = b"PAR1".to_vec();
                b.extend_from_slice(&[0u8; 16]);
                b.extend_from_slice(&u32::MAX.to_le_bytes());
                b.extend_from_slice(b"PAR1");
                std::fs::write(d.join("requests.parquet"), b).unwrap();
            }),
            "requests.parquet: not a complete Parquet file",
        ),
        (
            "truncated half",
            Box::new({
                let half = parquet[..parquet.len() / 2].to_vec();
                move |d: &Path| std::fs::write(d.join("requests.parquet"), half).unwrap()
            }),
            "requests.parquet: not a complete Parquet file",
        ),
        (
            "not parquet",
            Box::new(|d| drop(std::fs::write(d.join("events.parquet"), "{\"rows\": []}"))),
            "events.parquet: not a Parquet file",
        ),
        (
            "table of another run",
            Box::new({
                let other = other.clone();
                move |d: &Path| {
                    drop(std::fs::copy(
                        other.join("events.parquet"),
                        d.join("events.parquet"),
                    ))
                }
            }),
            "files of different runs were mixed",
        ),
        (
            "requests in the events file",
            Box::new(|d| {
                drop(std::fs::copy(
                    d.join("requests.parquet"),
                    d.join("events.parquet"),
                ))
            }),
            "events.parquet: metadata `anvil.table` is `requests`",
        ),
        (
            "negative column chunk (fuzz)",
            Box::new(|d| {
                drop(std::fs::copy(
                    Path::new(KEPT).join("requests-negative-column-start.parquet"),
                    d.join("requests.parquet"),
                ))
            }),
            "requests.parquet: not a Parquet file (its footer is damaged",
        ),
        (
            "instants beyond range",
            Box::new(|d| {
                rewrite_requests(d, |b| {
                    let n = b.num_rows();
                    replace_column(
                        b,
                        "t_done_ns",
                        Arc::new(Int64Array::from(vec![i64::MIN; n])),
                    )
                })
            }),
            "requests.parquet: column `t_done_ns`: holds -9223372036854775808 ns",
        ),
        (
            "column of the wrong type",
            Box::new(|d| {
                rewrite_requests(d, |b| {
                    let n = b.num_rows();
                    replace_column(b, "t_sent_ns", Arc::new(StringArray::from(vec!["soon"; n])))
                })
            }),
            "requests.parquet: column `t_sent_ns`",
        ),
        (
            "run.json not JSON",
            Box::new(|d| drop(std::fs::write(d.join("run.json"), "{\"schema\":"))),
            "run.json: field `(document)`: not JSON",
        ),
        (
            "run.json empty",
            Box::new(|d| drop(std::fs::write(d.join("run.json"), ""))),
            "run.json: field `(document)`: not JSON",
        ),
        (
            "run.json unknown version",
            Box::new(|d| {
                edit_run_json(d, |v| v["schema"] = json!("anvil-serving.capture-run/v99"))
            }),
            "unknown schema version `anvil-serving.capture-run/v99`",
        ),
        (
            "run.json fingerprint edited",
            Box::new(|d| edit_run_json(d, |v| v["workload"]["requests"] = json!(17))),
            "fingerprint",
        ),
        (
            "run.json counts edited",
            Box::new(|d| edit_run_json(d, |v| v["counts"]["succeeded"] = json!(3))),
            "counts.succeeded is 3 but the table has",
        ),
        (
            "run.json still running",
            Box::new(|d| edit_run_json(d, |v| v["status"] = json!("running"))),
            "is `running`",
        ),
        (
            "run.json interrupted without reason",
            Box::new(|d| {
                edit_run_json(d, |v| {
                    v["status"] = json!("interrupted");
                    v["status_reason"] = Value::Null;
                })
            }),
            "status_reason",
        ),
        (
            "run.json replica count",
            Box::new(|d| edit_run_json(d, |v| v["topology"]["replica_count"] = json!(3))),
            "topology.replica_count",
        ),
        (
            "run.json bad start time",
            Box::new(|d| edit_run_json(d, |v| v["started_utc"] = json!("yesterday"))),
            "started_utc",
        ),
        (
            "run.json empty run id",
            Box::new(|d| edit_run_json(d, |v| v["run_id"] = json!(""))),
            "run_id",
        ),
        (
            "run.json duplicate key",
            Box::new(|d| {
                let path = d.join("run.json");
                let text = std::fs::read_to_string(&path).unwrap();
                let end = text.rfind('}').unwrap();
                std::fs::write(
                    &path,
                    format!(
                        "{},\n  \"status\": \"complete\"\n}}",
                        text[..end].trim_end()
                    ),
                )
                .unwrap();
            }),
            "duplicate key `status`",
        ),
    ];
    let mut cases = Vec::new();
    for (name, damage, fragment) in damages {
        let dir = damaged(root, &name.replace(' ', "-"), damage);
        let d = s(&dir);
        let (m, p) = (s(&manifest), s(&plan));
        let commands: Vec<(&str, Vec<&str>)> = vec![
            ("validate", vec!["validate", &d]),
            (
                "sql",
                vec!["sql", "--data", &d, "SELECT count(*) FROM request_metrics"],
            ),
            ("summary", vec!["summary", "--data", &d]),
            ("verify", vec!["verify", "--data", &d]),
            (
                "check",
                vec!["check", "--data", &d, "--plan", &p, "--manifest", &m],
            ),
            (
                "report",
                vec![
                    "report",
                    "--data",
                    &d,
                    "--plan",
                    &p,
                    "--manifest",
                    &m,
                    "--format",
                    "md",
                ],
            ),
            (
                "compare",
                vec!["compare", "--manifest", &m, "--plan", &p, &d],
            ),
        ];
        for (command, args) in commands {
            cases.push(case(
                format!("{name} / {command}"),
                ANVIL,
                &args,
                2,
                fragment,
            ));
        }
    }

    // A data page the Parquet decoder asserts on (found by fuzzing): the footer is sound, so
    // opening succeeds; `validate` decodes every page and names the file, and a query that
    // reaches the page says what to do.
    // The rest of the run that events file came from (a functional cell once in sample-data),
    // kept beside it so the three tables and run.json belong to one run.
    let paged = copy_artifact(
        &Path::new(KEPT).join("damaged-page-run"),
        &root.join("damaged-page"),
    );
    std::fs::copy(
        Path::new(KEPT).join("events-damaged-data-page.parquet"),
        paged.join("events.parquet"),
    )
    .unwrap();
    let (d, m, p) = (s(&paged), s(&manifest), s(&plan));
    cases.push(case(
        "damaged data page / validate",
        ANVIL,
        &["validate", &d],
        2,
        "events.parquet: its data pages are damaged",
    ));
    for args in [
        vec![
            "sql",
            "--data",
            &d,
            "SELECT count(*), max(length(data)) FROM events",
        ],
        vec!["summary", "--data", &d],
        vec!["check", "--data", &d, "--plan", &p, "--manifest", &m],
        vec![
            "report",
            "--data",
            &d,
            "--plan",
            &p,
            "--manifest",
            &m,
            "--format",
            "md",
        ],
    ] {
        cases.push(case(
            format!("damaged data page / {}", args[0]),
            ANVIL,
            &args,
            2,
            "`anvil validate` on the --data folder decodes every page",
        ));
    }

    // Mixed campaigns: a plan of another campaign, an artifact of another campaign.
    let base = Path::new(SAMPLE).join(BASE_ARTIFACT);
    let mut other_plan: Value = seed("run-plan.json");
    other_plan["campaign_id"] = json!("another-campaign");
    let other_plan = put(root, "other-plan.json", other_plan.to_string());
    let foreign = damaged(root, "foreign", |d| {
        edit_run_json(d, |v| v["campaign_id"] = json!("another-campaign"))
    });
    let (m, p, b, op, f) = (
        s(&manifest),
        s(&plan),
        s(&base),
        s(&other_plan),
        s(&foreign),
    );
    for command in ["check", "report", "compare"] {
        let mut args: Vec<&str> = vec![command];
        let with = |data: &str, plan: &str| {
            let mut a = args.clone();
            if command == "compare" {
                a.extend(["--manifest", &m, "--plan", plan, data]);
            } else {
                a.extend(["--data", data, "--plan", plan, "--manifest", &m]);
                if command == "report" {
                    a.extend(["--format", "md"]);
                }
            }
            a.into_iter().map(str::to_owned).collect::<Vec<_>>()
        };
        let a = with(&b, &op);
        cases.push(case(
            format!("{command}: plan of another campaign"),
            ANVIL,
            &a.iter().map(String::as_str).collect::<Vec<_>>(),
            2,
            "campaign_id is `another-campaign`",
        ));
        let a = with(&f, &p);
        cases.push(case(
            format!("{command}: artifact of another campaign"),
            ANVIL,
            &a.iter().map(String::as_str).collect::<Vec<_>>(),
            2,
            "is of campaign `another-campaign`",
        ));
        args.clear();
    }
    run_all(cases, 140);
}

#[test]
fn corpus_flags_sql_and_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let manifest = s(&Path::new(SAMPLE).join("workload-manifest.json"));
    let plan = s(&Path::new(SAMPLE).join("run-plan.json"));
    let data = s(&Path::new(SAMPLE).join(BASE_ARTIFACT));
    let out = s(&root.join("out"));
    let root_s = s(root);
    let mut cases = Vec::new();

    // anvil-capture run: each flag's refusal names the flag; nothing is written.
    let base = [
        "run",
        "--manifest",
        &manifest,
        "--class",
        "headline-sustained-output",
        "--arm",
        "K4",
        "--endpoint",
        "http://127.0.0.1:9",
        "--out",
        &out,
    ];
    for (name, extra, fragment) in [
        (
            "requests negative",
            vec!["--requests", "-1"],
            "invalid value '-1' for '--requests",
        ),
        ("requests zero", vec!["--requests", "0"], "--requests"),
        (
            "requests not a number",
            vec!["--requests", "many"],
            "invalid value 'many' for '--requests",
        ),
        (
            "concurrency zero",
            vec!["--concurrency", "0"],
            "--concurrency",
        ),
        (
            "concurrency negative",
            vec!["--concurrency", "-4"],
            "invalid value '-4' for '--concurrency",
        ),
        ("context zero", vec!["--context", "0"], "--context"),
        ("rate zero", vec!["--rate", "0"], "--rate"),
        ("rate negative", vec!["--rate", "-2"], "--rate"),
        ("rate nan", vec!["--rate", "NaN"], "--rate"),
        ("rate infinite", vec!["--rate", "inf"], "--rate"),
        (
            "rate a day too slow",
            vec!["--rate", "1e-10"],
            "a schedule may span at most 86400 s",
        ),
        ("poisson without rate", vec!["--poisson"], "--poisson"),
        (
            "arm escapes",
            vec!["--arm", "../x"],
            "--arm `../x`: contains a path separator",
        ),
        (
            "arm hidden",
            vec!["--arm", ".x"],
            "--arm `.x`: starts with `.`",
        ),
        ("arm empty", vec!["--arm", ""], "--arm"),
        ("set without value", vec!["--set", "novalue"], "--set"),
        (
            "set twice",
            vec!["--set", "a=1", "--set", "a=2"],
            "key `a` is set twice",
        ),
        (
            "timeout negative",
            vec!["--timeout-total", "-1"],
            "--timeout-total",
        ),
        ("api unknown", vec!["--api", "grpc"], "--api"),
        ("class unknown", vec!["--class", "nope"], "nope"),
        (
            "unknown flag",
            vec!["--turbo"],
            "unexpected argument '--turbo'",
        ),
        (
            "endpoint not a URL",
            vec!["--endpoint", "not a url"],
            "not a url",
        ),
        (
            "api key env unset",
            vec!["--api-key-env", "ANVIL_NO_SUCH_VARIABLE"],
            "--api-key-env",
        ),
        ("warmup huge", vec!["--warmup", "1000000"], "--warmup"),
    ] {
        let mut args: Vec<&str> = base.to_vec();
        // The later value of a repeated flag wins in clap for single-valued flags: drop the
        // base's own when the case sets it.
        for flag in ["--arm", "--endpoint", "--class"] {
            if extra.first() == Some(&flag)
                && let Some(at) = args.iter().position(|a| *a == flag)
            {
                args.drain(at..at + 2);
            }
        }
        args.extend(extra.iter().copied());
        cases.push(case(
            format!("capture: {name}"),
            CAPTURE,
            &args,
            2,
            fragment,
        ));
    }
    let bad_manifest = put(root, "escape.json", {
        let mut m = seed("workload-manifest.json");
        m["campaign_id"] = json!("../escape");
        m.to_string()
    });
    let mut args = base.to_vec();
    args[2] = bad_manifest.to_str().unwrap();
    cases.push(case(
        "capture: manifest whose campaign escapes",
        CAPTURE,
        &args,
        2,
        "campaign_id: contains a path separator",
    ));
    cases.push(case(
        "capture recover: no artifact",
        CAPTURE,
        &["recover", &s(&root.join("nothing"))],
        2,
        "nothing",
    ));
    cases.push(case(
        "capture cells: missing manifest",
        CAPTURE,
        &["cells", "--manifest", "/no/such.json"],
        2,
        "/no/such.json",
    ));

    // anvil-sim flags.
    for (name, args, fragment) in [
        (
            "port out of range",
            vec!["--port", "99999"],
            "invalid value '99999' for '--port",
        ),
        (
            "decode rate negative",
            vec!["--decode-tps", "-5"],
            "--decode-tps",
        ),
        ("fault unknown", vec!["--fault", "gremlins=1"], "gremlins"),
        (
            "fault rate above 1",
            vec!["--fault", "disconnect=2"],
            "disconnect",
        ),
    ] {
        cases.push(case(format!("sim: {name}"), SIM, &args, 2, fragment));
    }

    // anvil flags.
    for (name, args, fragment) in [
        (
            "sql missing data",
            vec!["sql", "--data", "/no/such/dir", "SELECT 1"],
            "--data /no/such/dir: does not exist",
        ),
        (
            "summary unknown format",
            vec!["summary", "--data", &data, "--format", "xml"],
            "invalid value 'xml'",
        ),
        (
            "unknown subcommand",
            vec!["publish"],
            "unrecognized subcommand 'publish'",
        ),
        (
            // No --plan and no campaign file at or above the data that names one.
            "check without plan or campaign file",
            vec!["check", "--data", &root_s],
            "--plan",
        ),
        (
            "demo negative speed",
            vec!["demo", "--speed", "-1"],
            "--speed",
        ),
    ] {
        cases.push(case(format!("anvil: {name}"), ANVIL, &args, 2, fragment));
    }

    // SQL: errors with hints, never a crash or a hang.
    let chain = format!(
        "SELECT {} AS x FROM requests",
        vec!["request_index"; 2000].join(" + ")
    );
    let nested = format!("SELECT {}1{} AS x", "(".repeat(5000), ")".repeat(5000));
    for (name, sql, fragment) in [
        (
            "2000-term expression",
            chain.as_str(),
            "nests deeper than 256 levels",
        ),
        (
            "5000 nested parentheses",
            nested.as_str(),
            "RecursionLimitExceeded",
        ),
        ("syntax error", "SELEC 1", "SELEC"),
        (
            "unknown table",
            "SELECT * FROM nothing_here",
            "nothing_here",
        ),
        ("unknown column", "SELECT nope FROM request_metrics", "nope"),
        (
            "write refused",
            "CREATE TABLE t AS SELECT 1",
            "--allow-write",
        ),
        (
            "copy refused",
            "COPY requests TO '/tmp/x.csv'",
            "--allow-write",
        ),
        ("empty statement", ";", "no SQL statement given"),
        ("divide by zero", "SELECT 1 / 0", "Divide by zero"),
        ("bad cast", "SELECT CAST('many' AS BIGINT)", "Cast error"),
    ] {
        cases.push(case(
            format!("sql: {name}"),
            ANVIL,
            &["sql", "--data", &data, sql],
            2,
            fragment,
        ));
    }

    // Output paths: never a device, FIFO, directory or symlink replaced.
    let fifo = root.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) on a NUL-terminated path in our temporary folder.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let folder = root.join("a-folder");
    std::fs::create_dir_all(&folder).unwrap();
    let link = root.join("link.html");
    std::os::unix::fs::symlink("/dev/null", &link).unwrap();
    for (name, target, fragment) in [
        (
            "device",
            "/dev/null".to_owned(),
            "/dev/null: exists and is not a regular file (a device)",
        ),
        ("FIFO", s(&fifo), "(a FIFO)"),
        ("directory", s(&folder), "(a directory)"),
        ("symlink", s(&link), "(a symbolic link)"),
    ] {
        cases.push(case(
            format!("report --out {name}"),
            ANVIL,
            &[
                "report",
                "--data",
                &data,
                "--plan",
                &plan,
                "--manifest",
                &manifest,
                "--out",
                &target,
            ],
            2,
            fragment,
        ));
        cases.push(case(
            format!("sql --out {name}"),
            ANVIL,
            &["sql", "--data", &data, "--out", &target, "SELECT 1"],
            2,
            fragment,
        ));
    }
    run_all(cases, 50);
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        !root.join("out").exists(),
        "a refused capture wrote nothing"
    );
}

/// The HTTP/1.1 response reader's fuzz seeds (`fuzz/seeds/http_response/`) and any crashing
/// input the fuzz target found (kept under `tests/it/corpus/http_response/`), replayed with the
/// target's own check: no panic, and the same reading however the bytes are split (the first
/// byte picks the split, as in `fuzz/fuzz_targets/http_response.rs`). The seeds' readings are
/// pinned too.
#[test]
fn corpus_http_responses_read_alike_however_split() {
    use anvil::capture::hotpath::read_response;
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/http_response");
    let kept = Path::new(KEPT).join("http_response");
    let mut files: Vec<PathBuf> = [seeds, kept]
        .iter()
        .flat_map(|dir| std::fs::read_dir(dir).into_iter().flatten().flatten())
        .map(|e| e.path())
        .collect();
    files.sort();
    assert!(files.len() >= 6, "{files:?}");
    let mut read = std::collections::BTreeMap::new();
    for file in &files {
        let data = std::fs::read(file).unwrap();
        let Some((&seed, body)) = data.split_first() else {
            continue;
        };
        let whole = read_response(&[body]);
        for step in [usize::from(seed % 13) + 1, 1, 2, 7] {
            let pieces: Vec<&[u8]> = body.chunks(step).collect();
            assert_eq!(
                whole,
                read_response(&pieces),
                "{}: split every {step}",
                file.display()
            );
        }
        read.insert(
            file.file_name().unwrap().to_string_lossy().into_owned(),
            whole,
        );
    }
    let ok = |status: u16, body: &str| Ok((status, body.as_bytes().to_vec()));
    assert_eq!(
        read["chunked-sse"],
        ok(200, "data: {\"choices\":[]}\n\ndata: \n")
    );
    assert_eq!(read["content-length"], ok(200, "data: [DONE]\n\n"));
    assert_eq!(read["close-delimited"], ok(200, "data: a\n\ndata: b\n\n"));
    assert_eq!(read["interim-then-final"], ok(429, "{}"));
    let err = |name: &str| read[name].clone().unwrap_err();
    assert!(
        err("bad-chunk-size").contains("invalid chunked body"),
        "{}",
        err("bad-chunk-size")
    );
    assert!(err("conflicting-length").contains("conflicting content-length"));
    // A body cut short is refused, not read as whole.
    let short = read_response(&[b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nabc"]);
    assert!(short.unwrap_err().contains("closed 6 bytes before the end"));
}
