//! The deployment examples of `deploy/`, checked without a cluster: a sharded `anvil-capture
//! run` as a Kubernetes Indexed Job (`deploy/kubernetes/anvil-shards.yaml`) and as a Slurm
//! batch script (`deploy/slurm/anvil-shards.sbatch`).
//!
//! - The Kubernetes file is parsed and its wiring checked: the headless Service and the Job's
//!   pods find each other (selector, subdomain), the Job runs one pod per shard at once and
//!   never retries one, `--start-at` comes from an annotation of the pod template through the
//!   downward API, credentials come from Secrets only, the artifact goes to an `emptyDir` and
//!   then to a bucket. `kubernetes-validate` checks it against the Kubernetes API's schema
//!   where it is installed (a visible skip where not; a failure where `.ci/run` installed it).
//! - The Slurm script is read the same way (one shard per task, the index from
//!   `SLURM_PROCID`, never requeued), then run by `bash` with stand-ins for `srun` and
//!   `anvil-capture` that record what each task was given: the same command and the same
//!   instant for every task, the credentials in each task's environment and in no output.
//! - Every flag either example passes to `anvil-capture run` is one its `--help` lists, and
//!   so is every flag of the `anvil` commands of `deploy/README.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::common::{CAPTURE, shell_commands, shell_words, strip_comment};
use super::skip;

const K8S: &str = "deploy/kubernetes/anvil-shards.yaml";
const SLURM: &str = "deploy/slurm/anvil-shards.sbatch";
const README: &str = "deploy/README.md";

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

// ---------------------------------------------------------------------------------------------
// Kubernetes

/// The Kubernetes example: its text, its one Service and its one Job.
struct K8s {
    text: String,
    service: Value,
    job: Value,
}

/// Parse the example's YAML documents; no document may carry a credential.
fn k8s() -> K8s {
    let text = read(K8S);
    let docs: Vec<Value> = yaml_serde::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{K8S}: not YAML: {e}")))
        .filter(|doc| !doc.is_null())
        .collect();
    for doc in &docs {
        assert!(
            doc["kind"] != "Secret",
            "{K8S}: a Secret document writes credentials into the file; create the Secret \
             apart (deploy/README.md) and reference it"
        );
        let mut all = Vec::new();
        strings(doc, &mut all);
        for s in all {
            assert!(
                !looks_like_credential(&s),
                "{K8S}: `{s}` looks like a credential written in the file"
            );
        }
    }
    let one = |kind: &str| -> Value {
        let found: Vec<&Value> = docs.iter().filter(|d| d["kind"] == kind).collect();
        assert_eq!(
            found.len(),
            1,
            "{K8S}: expected one {kind} document, found {}",
            found.len()
        );
        found[0].clone()
    };
    let service = one("Service");
    let job = one("Job");
    assert_eq!(service["apiVersion"], "v1", "{K8S}: Service apiVersion");
    assert_eq!(job["apiVersion"], "batch/v1", "{K8S}: Job apiVersion");
    K8s { text, service, job }
}

/// Every string value beneath `v`.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|x| strings(x, out)),
        Value::Object(map) => map.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// Whether `s` holds an AWS access key id (`AKIA`/`ASIA` and 16 upper-case letters or
/// digits) or a private key: what must never be written in a file.
fn looks_like_credential(s: &str) -> bool {
    let key_char = |b: &u8| b.is_ascii_uppercase() || b.is_ascii_digit();
    let bytes = s.as_bytes();
    let access_key = (0..bytes.len().saturating_sub(19)).any(|i| {
        let id = &bytes[i..i + 20];
        (id.starts_with(b"AKIA") || id.starts_with(b"ASIA"))
            && id.iter().all(key_char)
            && (i == 0 || !key_char(&bytes[i - 1]))
            && bytes.get(i + 20).is_none_or(|b| !key_char(b))
    });
    access_key || s.contains("PRIVATE KEY-----")
}

/// An environment variable's name that says it holds a secret.
fn credential_name(name: &str) -> bool {
    let name = name.to_ascii_uppercase();
    ["KEY", "SECRET", "TOKEN", "PASSWORD", "CREDENTIAL"]
        .iter()
        .any(|w| name.contains(w))
}

fn is_capture(program: &str) -> bool {
    program.rsplit('/').next() == Some("anvil-capture")
}

/// The one container whose command is `anvil-capture run`, and that command line (the
/// container's `command` then its `args`).
fn capture_container(job: &Value) -> (&Value, Vec<String>) {
    let containers = job
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("{K8S}: the Job has no spec.template.spec.containers"));
    let mut found = Vec::new();
    for c in containers {
        let argv: Vec<String> = ["command", "args"]
            .iter()
            .flat_map(|k| c[*k].as_array().cloned().unwrap_or_default())
            .map(|v| match v {
                Value::String(s) => s,
                other => other.to_string(),
            })
            .collect();
        if argv.first().is_some_and(|a| is_capture(a))
            && argv.get(1).is_some_and(|a| a.as_str() == "run")
        {
            found.push((c, argv));
        }
    }
    assert_eq!(
        found.len(),
        1,
        "{K8S}: expected one container whose command is `anvil-capture run` (container \
         command, then args), found {}",
        found.len()
    );
    found.pop().unwrap()
}

/// The values given to `flag` in `argv` (`--flag value` or `--flag=value`).
fn values<'a>(argv: &'a [String], flag: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    for (i, word) in argv.iter().enumerate() {
        let given = if word == flag {
            argv.get(i + 1).map(String::as_str)
        } else {
            word.strip_prefix(flag).and_then(|r| r.strip_prefix('='))
        };
        out.extend(given);
    }
    out
}

/// The one value of `flag` in `argv`.
fn value<'a>(file: &str, argv: &'a [String], flag: &str) -> &'a str {
    let given = values(argv, flag);
    assert_eq!(
        given.len(),
        1,
        "{file}: `anvil-capture run` should be given {flag} once; it is given {given:?}"
    );
    given[0]
}

/// The `--flags` of a command line (without their `=value`).
fn flags(argv: &[String]) -> Vec<&str> {
    argv.iter()
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| w.split('=').next().unwrap_or(""))
        .collect()
}

/// An RFC 3339 instant in UTC.
fn utc_instant(s: &str) -> Result<OffsetDateTime, String> {
    let t = OffsetDateTime::parse(s, &Rfc3339)
        .map_err(|e| format!("`{s}` is not an RFC 3339 instant ({e})"))?;
    if !t.offset().is_utc() {
        return Err(format!("`{s}` is not in UTC (offset {})", t.offset()));
    }
    Ok(t)
}

/// Whether `url` names a prefix in an object store (`s3://bucket/prefix/`, `gs://`, `az://`).
fn is_bucket_url(url: &str) -> bool {
    let Some((scheme, rest)) = url.split_once("://") else {
        return false;
    };
    let bucket = rest.split('/').next().unwrap_or("");
    ["s3", "s3a", "gs", "az", "azure", "abfs", "abfss"].contains(&scheme)
        && !bucket.is_empty()
        && !bucket.starts_with('$')
}

/// The host of an http(s) URL when it is a DNS name: not an IP address, not localhost.
fn dns_host(url: &str) -> Option<&str> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))?;
    let authority = rest.split('/').next().unwrap_or(rest);
    if authority.starts_with('[') {
        return None; // an IPv6 literal
    }
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
        _ => authority,
    };
    let ip = host.parse::<std::net::IpAddr>().is_ok();
    (!host.is_empty() && !ip && host != "localhost" && !host.starts_with('$')).then_some(host)
}

/// Whether `path` is `dir` or beneath it.
fn under(path: &str, dir: &str) -> bool {
    let dir = dir.trim_end_matches('/');
    path == dir || path.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
}

/// The deepest mount of `container` holding `path`: its mount path and the pod's volume.
fn mount_of<'a>(pod: &'a Value, container: &Value, path: &str) -> Option<(String, &'a Value)> {
    let mount = container["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["mountPath"].as_str().is_some_and(|p| under(path, p)))
        .max_by_key(|m| m["mountPath"].as_str().map_or(0, str::len))?;
    let name = mount["name"].as_str()?;
    let volume = pod["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == name)?;
    Some((mount["mountPath"].as_str()?.to_owned(), volume))
}

/// The Service gives the Job's pods stable names, the Job runs one pod per shard, all at
/// once, never a second one, and every shard reads the same published instant.
#[test]
fn the_kubernetes_example_runs_one_pod_per_shard_from_one_published_instant() {
    let K8s { text, service, job } = k8s();

    // The headless Service and the pods it names.
    let service_name = service["metadata"]["name"]
        .as_str()
        .unwrap_or_else(|| panic!("{K8S}: the Service has no metadata.name"));
    assert_eq!(
        service["spec"]["clusterIP"], "None",
        "{K8S}: Service {service_name}: spec.clusterIP must be None (headless: a DNS name per \
         pod, no virtual IP)"
    );
    let selector = service["spec"]["selector"]
        .as_object()
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| panic!("{K8S}: Service {service_name} has no spec.selector"));
    let labels = job["spec"]["template"]["metadata"]["labels"]
        .as_object()
        .unwrap_or_else(|| panic!("{K8S}: the Job's pod template has no metadata.labels"));
    for (key, want) in selector {
        assert_eq!(
            labels.get(key),
            Some(want),
            "{K8S}: Service {service_name} selects {key}={want}, which the Job's pod template \
             labels (spec.template.metadata.labels) do not carry"
        );
    }
    assert_eq!(
        service["metadata"]["namespace"], job["metadata"]["namespace"],
        "{K8S}: the Service and the Job must be in the same namespace"
    );
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(
        pod["subdomain"].as_str(),
        Some(service_name),
        "{K8S}: the pod template's spec.subdomain must be the headless Service's name \
         ({service_name}), or the pods get no DNS names"
    );

    // One pod per shard, all at once, none retried.
    let spec = &job["spec"];
    assert_eq!(
        spec["completionMode"], "Indexed",
        "{K8S}: Job spec.completionMode must be Indexed: JOB_COMPLETION_INDEX is the shard index"
    );
    let n = spec["completions"]
        .as_u64()
        .unwrap_or_else(|| panic!("{K8S}: Job spec.completions is missing"));
    assert_eq!(
        spec["parallelism"].as_u64(),
        Some(n),
        "{K8S}: Job spec.parallelism must equal spec.completions ({n}): every shard runs at \
         the same instant"
    );
    assert_eq!(
        pod["restartPolicy"], "Never",
        "{K8S}: the pod template's spec.restartPolicy must be Never (a container restarted in \
         place starts its first wave late)"
    );
    assert_eq!(
        spec["backoffLimit"].as_u64(),
        Some(0),
        "{K8S}: Job spec.backoffLimit must be 0: by default a failed shard is retried (6 times) \
         with the same, by then past, start instant, and a run that lost a shard is void"
    );
    if let Some(per_index) = spec.get("backoffLimitPerIndex") {
        assert_eq!(
            per_index.as_u64(),
            Some(0),
            "{K8S}: Job spec.backoffLimitPerIndex must be 0: no second pod for a shard"
        );
    }
    let ignored = spec["podFailurePolicy"]["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|rule| rule["action"] == "Ignore")
        .count();
    assert_eq!(
        ignored, 0,
        "{K8S}: a podFailurePolicy rule with action Ignore retries the failures it matches"
    );

    // The shard's command line.
    let (container, argv) = capture_container(&job);
    let shard = value(K8S, &argv, "--shard");
    assert_eq!(
        shard,
        format!("auto/{n}"),
        "{K8S}: --shard must be auto/{n}: the index from JOB_COMPLETION_INDEX, the count the \
         Job's spec.completions"
    );
    let env: Vec<&Value> = container["env"].as_array().into_iter().flatten().collect();
    let named = |name: &str| {
        env.iter()
            .copied()
            .filter(|e| e["name"] == name)
            .collect::<Vec<&Value>>()
    };
    for index_var in ["JOB_COMPLETION_INDEX", "SLURM_PROCID", "SLURM_NTASKS"] {
        assert!(
            named(index_var).is_empty(),
            "{K8S}: the container's env sets {index_var}, which would give every pod the same \
             shard"
        );
    }

    // --start-at: $(VAR), VAR from the downward API, the annotation there and in UTC.
    let start_at = value(K8S, &argv, "--start-at");
    let var = start_at
        .strip_prefix("$(")
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or_else(|| {
            panic!(
                "{K8S}: --start-at is `{start_at}`; it must be $(VAR), a variable the downward \
                 API fills from the pod template's annotation, so all pods read one instant"
            )
        });
    let entries = named(var);
    assert_eq!(
        entries.len(),
        1,
        "{K8S}: --start-at reads $({var}); the container's env must define {var} once"
    );
    let field = entries[0]
        .pointer("/valueFrom/fieldRef/fieldPath")
        .and_then(Value::as_str)
        .unwrap_or_else(|| {
            panic!("{K8S}: env {var} must come from the downward API (valueFrom.fieldRef)")
        });
    let key = field
        .strip_prefix("metadata.annotations['")
        .and_then(|r| r.strip_suffix("']"))
        .unwrap_or_else(|| {
            panic!(
                "{K8S}: env {var} reads `{field}`; it must read an annotation of the pod \
                 template, metadata.annotations['KEY']"
            )
        });
    let instant = job["spec"]["template"]["metadata"]["annotations"][key]
        .as_str()
        .unwrap_or_else(|| {
            panic!(
                "{K8S}: env {var} reads the annotation {key}, which the pod template \
                 (spec.template.metadata.annotations) does not carry as a string"
            )
        });
    if let Err(e) = utc_instant(instant) {
        panic!("{K8S}: the pod template's annotation {key}: {e}");
    }
    assert_eq!(
        text.matches(&format!("{key}: ")).count(),
        1,
        "{K8S}: `{key}: ` must appear on one line only, the annotation's: {README} sets the \
         instant with sed on that line"
    );
    assert!(
        read(README).contains(&format!("s|{key}: .*|{key}: ")),
        "{README}: the sed that sets the instant must rewrite the annotation {key}"
    );

    // Endpoints by DNS name, the artifact to an emptyDir and then to a bucket, the manifest
    // from a ConfigMap.
    let endpoints = values(&argv, "--endpoint");
    assert!(!endpoints.is_empty(), "{K8S}: no --endpoint");
    for url in &endpoints {
        assert!(
            dns_host(url).is_some(),
            "{K8S}: --endpoint {url}: a serving replica is named by its DNS name (pod IPs \
             change)"
        );
    }
    let distinct: BTreeSet<&str> = endpoints.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        endpoints.len(),
        "{K8S}: an --endpoint is repeated: {endpoints:?}"
    );
    let upload = value(K8S, &argv, "--upload");
    assert!(
        is_bucket_url(upload),
        "{K8S}: --upload {upload} is not an object store prefix (s3://bucket/prefix/, gs://, \
         az://)"
    );
    let out = value(K8S, &argv, "--out");
    let out_volume = mount_of(pod, container, out);
    assert!(
        out_volume.is_some_and(|(_, v)| v.get("emptyDir").is_some()),
        "{K8S}: --out {out} must be on an emptyDir volume mounted in the container"
    );
    let manifest = value(K8S, &argv, "--manifest");
    let (mount, volume) = mount_of(pod, container, manifest).unwrap_or_else(|| {
        panic!("{K8S}: --manifest {manifest} is on no volume mounted in the container")
    });
    let config_map = volume.get("configMap").unwrap_or_else(|| {
        panic!("{K8S}: --manifest {manifest} must be on a configMap volume (the workload manifest)")
    });
    if let Some(items) = config_map["items"].as_array() {
        let file = manifest[mount.trim_end_matches('/').len()..].trim_start_matches('/');
        assert!(
            items.iter().any(|item| item["path"] == file),
            "{K8S}: --manifest {manifest}: the configMap volume's items do not place {file}"
        );
    }

    // Credentials from Secrets only.
    for c in ["containers", "initContainers"]
        .iter()
        .flat_map(|k| pod[*k].as_array().into_iter().flatten())
    {
        for e in c["env"].as_array().into_iter().flatten() {
            let name = e["name"].as_str().unwrap_or("");
            assert!(
                !credential_name(name)
                    || (e.get("value").is_none()
                        && e.pointer("/valueFrom/secretKeyRef/name").is_some()),
                "{K8S}: env {name} holds a secret: it must come from a Secret \
                 (valueFrom.secretKeyRef), never a value written in the file"
            );
        }
    }
    let env_from_secret = container["envFrom"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|f| f.get("secretRef").is_some());
    let cloud_from_secret = env.iter().any(|e| {
        let name = e["name"].as_str().unwrap_or("");
        ["AWS_", "GOOGLE_", "AZURE_"]
            .iter()
            .any(|p| name.starts_with(p))
            && e.pointer("/valueFrom/secretKeyRef").is_some()
    });
    assert!(
        env_from_secret || cloud_from_secret,
        "{K8S}: --upload needs the object store's credentials: envFrom a Secret (secretRef) or \
         env entries from one (secretKeyRef)"
    );
    for var in values(&argv, "--api-key-env") {
        let from_secret = match named(var).first() {
            Some(e) => e.pointer("/valueFrom/secretKeyRef").is_some(),
            None => env_from_secret,
        };
        assert!(
            from_secret,
            "{K8S}: --api-key-env {var}: {var} must come from a Secret"
        );
    }

    // The client far below saturation: reserved CPU and memory, no CPU quota.
    let resources = &container["resources"];
    for what in ["cpu", "memory"] {
        assert!(
            resources["requests"].get(what).is_some(),
            "{K8S}: the container's resources.requests.{what} is missing: a shard's timings \
             need resources reserved for it"
        );
    }
    assert!(
        resources["limits"].get("cpu").is_none(),
        "{K8S}: resources.limits.cpu throttles the container by CFS quota, in stalls that land \
         in the recorded timings; reserve CPU with requests instead"
    );
}

/// The Kubernetes example passes the Kubernetes API's schema, unknown fields refused
/// (`kubernetes-validate --strict`).
#[test]
fn the_kubernetes_example_passes_the_api_schema() {
    let test = "deploy::the_kubernetes_example_passes_the_api_schema";
    let probe = Command::new("python3")
        .args(["-c", "import kubernetes_validate"])
        .output();
    let missing = match probe {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .next_back()
                .unwrap_or("")
                .to_owned(),
        ),
        Err(e) => Some(format!("python3: {e}")),
    };
    if let Some(found) = missing {
        let detail = std::env::var("ANVIL_KUBERNETES_VALIDATE_UNAVAILABLE").unwrap_or(found);
        skip::skipped(test, &skip::KUBERNETES_VALIDATE, &detail);
        return;
    }
    let path = repo(K8S);
    let o = Command::new("python3")
        .args(["-m", "kubernetes_validate", "--strict", "--quiet"])
        .arg(path.as_os_str())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{K8S} does not pass the Kubernetes API schema (kubernetes-validate --strict):\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

// ---------------------------------------------------------------------------------------------
// Slurm and shell

/// The Slurm example, read: its `#SBATCH` options, its commands, and the one `srun` command's
/// own options and the `anvil-capture run` command line it starts (quotes removed).
struct Slurm {
    commands: Vec<String>,
    sbatch: Vec<String>,
    srun_at: usize,
    srun: Vec<String>,
    capture: Vec<String>,
}

fn slurm() -> Slurm {
    let text = read(SLURM);
    let commands = shell_commands(&text);
    let sruns: Vec<usize> = (0..commands.len())
        .filter(|&i| shell_words(&commands[i]).first().map(String::as_str) == Some("srun"))
        .collect();
    assert_eq!(
        sruns.len(),
        1,
        "{SLURM}: expected one srun command, found {}",
        sruns.len()
    );
    let srun_at = sruns[0];
    let words = shell_words(&commands[srun_at]);
    let at = words
        .iter()
        .position(|w| is_capture(w))
        .unwrap_or_else(|| panic!("{SLURM}: the srun command does not start anvil-capture"));
    let capture = words[at..].to_vec();
    assert_eq!(
        capture.get(1).map(String::as_str),
        Some("run"),
        "{SLURM}: srun must start `anvil-capture run`"
    );
    Slurm {
        sbatch: sbatch_options(&text),
        srun: words[1..at].to_vec(),
        capture,
        commands,
        srun_at,
    }
}

/// The words of the `#SBATCH` lines (comments dropped), up to the first command, where
/// sbatch stops reading them.
fn sbatch_options(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("#SBATCH") {
            out.extend(shell_words(strip_comment(rest)));
        } else if !line.is_empty() && !line.starts_with('#') {
            break;
        }
    }
    out
}

/// The value of an option among `words`: `--long=V`, `--long V`, `-s V` or `-sV`; the last
/// one given.
fn option(words: &[String], long: &str, short: &str) -> Option<String> {
    let mut found = None;
    for (i, w) in words.iter().enumerate() {
        let given = if w == long || w == short {
            words.get(i + 1).cloned()
        } else if let Some(v) = w.strip_prefix(long).and_then(|r| r.strip_prefix('=')) {
            Some(v.to_owned())
        } else {
            w.strip_prefix(short)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        if given.is_some() {
            found = given;
        }
    }
    found
}

/// Whether the shell running `command` expands `$var` or `${var…}` in it (outside single
/// quotes).
fn expands(command: &str, var: &str) -> bool {
    let (mut single, mut double, mut escaped) = (false, false, false);
    for (i, c) in command.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' if !single => escaped = true,
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '$' if !single => {
                let rest = &command[i + 1..];
                let rest = rest.strip_prefix('{').unwrap_or(rest);
                let named = rest.strip_prefix(var).is_some_and(|after| {
                    !after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
                });
                if named {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

/// The number of tasks the script asks for (`#SBATCH --ntasks`).
fn sbatch_ntasks(s: &Slurm) -> usize {
    option(&s.sbatch, "--ntasks", "-n")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{SLURM}: no `#SBATCH --ntasks=N` line"))
}

/// One task per shard, the index from each task's own SLURM_PROCID, one instant computed
/// once before any task starts, never requeued, credentials never written in the script.
#[test]
fn the_slurm_example_runs_one_task_per_shard_from_one_published_instant() {
    let s = slurm();
    let ntasks = sbatch_ntasks(&s);
    if let Some(n) = option(&s.srun, "--ntasks", "-n") {
        assert_eq!(
            n.parse::<usize>().ok(),
            Some(ntasks),
            "{SLURM}: srun --ntasks={n}, but #SBATCH --ntasks={ntasks}"
        );
    }
    let shard = value(SLURM, &s.capture, "--shard");
    assert!(
        shard == "auto" || shard == format!("auto/{ntasks}"),
        "{SLURM}: --shard {shard}: it must be `auto` (index SLURM_PROCID of SLURM_NTASKS) or \
         auto/{ntasks}, one shard per task"
    );
    let srun_line = &s.commands[s.srun_at];
    for var in ["SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID"] {
        assert!(
            !expands(srun_line, var),
            "{SLURM}: the srun line expands ${var} in the batch shell, where it has the batch \
             step's value, the same for every task; let anvil-capture read it in each task \
             (--shard auto)"
        );
    }
    assert!(
        s.sbatch.iter().any(|o| o.as_str() == "--no-requeue"),
        "{SLURM}: #SBATCH --no-requeue is missing: a requeued job computes a new start instant \
         and records a second run group"
    );
    assert!(
        s.srun.iter().any(|o| matches!(
            o.as_str(),
            "--kill-on-bad-exit" | "--kill-on-bad-exit=1" | "-K" | "-K1"
        )),
        "{SLURM}: srun needs --kill-on-bad-exit=1: a run that lost a shard is void, and the \
         other shards should stop"
    );

    // The instant: a variable assigned once, before srun, and exported.
    let start_at = value(SLURM, &s.capture, "--start-at");
    let var = start_at
        .strip_prefix("${")
        .and_then(|r| r.strip_suffix('}'))
        .or_else(|| start_at.strip_prefix('$'))
        .filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or_else(|| {
            panic!(
                "{SLURM}: --start-at is `{start_at}`; it must be a variable computed once in the \
                 batch script"
            )
        });
    let assigned: Vec<usize> = (0..s.commands.len())
        .filter(|&i| {
            let c = s.commands[i].as_str();
            c.strip_prefix("export ")
                .unwrap_or(c)
                .starts_with(&format!("{var}="))
        })
        .collect();
    assert_eq!(
        assigned.len(),
        1,
        "{SLURM}: {var} (--start-at) must be assigned exactly once, found {} assignments",
        assigned.len()
    );
    assert!(
        assigned[0] < s.srun_at,
        "{SLURM}: {var} must be computed before srun starts the tasks"
    );
    let exported = s.commands.iter().any(|c| {
        c.strip_prefix("export ").is_some_and(|rest| {
            rest.split_whitespace()
                .any(|w| w.split('=').next() == Some(var))
        })
    });
    assert!(exported, "{SLURM}: {var} must be exported to the tasks");

    let upload = value(SLURM, &s.capture, "--upload");
    assert!(
        is_bucket_url(upload),
        "{SLURM}: --upload {upload} is not an object store prefix (s3://bucket/prefix/)"
    );
    value(SLURM, &s.capture, "--out");

    // No credential in the script, and no trace of the commands that would print one.
    for c in &s.commands {
        let assignment = c.strip_prefix("export ").unwrap_or(c.as_str());
        if let Some((name, _)) = assignment.split_once('=')
            && name
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
        {
            assert!(
                !credential_name(name),
                "{SLURM}: `{name}=` writes a credential into the script; read it from \
                 ANVIL_UPLOAD_ENV"
            );
        }
        let words = shell_words(c);
        let traced = words.first().is_some_and(|w| w.as_str() == "set")
            && words.iter().any(|w| {
                w.as_str() == "xtrace"
                    || (w.starts_with('-') && !w.starts_with("--") && w.contains('x'))
            });
        assert!(
            !traced,
            "{SLURM}: `{c}` traces the commands, printing the credentials they expand"
        );
        for w in words {
            assert!(
                !looks_like_credential(&w),
                "{SLURM}: `{w}` looks like a credential written in the script"
            );
        }
    }
}

/// `srun` as the test stands it in: the command once per task, concurrently, each with its
/// SLURM_PROCID and SLURM_NTASKS, as srun starts a step's tasks.
const FAKE_SRUN: &str = r#"#!/usr/bin/env bash
set -u
n=${SLURM_NTASKS:-1}
while [ $# -gt 0 ]; do
  case "$1" in
    --ntasks=*) n=${1#--ntasks=} ;;
    -n|--ntasks) n=$2; shift ;;
    -n*) n=${1#-n} ;;
    -*) ;;
    *) break ;;
  esac
  shift
done
case "${1:-}" in
  anvil-capture|*/anvil-capture) ;;
  *) echo "stand-in srun: expected anvil-capture, got '${1:-}' (write srun's options as --name=value)" >&2; exit 97 ;;
esac
pids=()
for ((i = 0; i < n; i++)); do
  SLURM_PROCID=$i SLURM_NTASKS=$n "$@" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit $rc
"#;

/// `anvil-capture` as the test stands it in: records its arguments and environment.
const FAKE_CAPTURE: &str = r#"#!/usr/bin/env bash
printf '%s\0' "$@" > "$ANVIL_DEPLOY_RECORD/task-$SLURM_PROCID.argv"
env -0 > "$ANVIL_DEPLOY_RECORD/task-$SLURM_PROCID.env"
"#;

fn write_executable(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The script run as sbatch would run it, with stand-ins for `srun` and `anvil-capture`:
/// every task gets the same command line (its shard comes from its own SLURM_PROCID), one
/// UTC instant in the near future, and the credentials in its environment; none is printed.
#[test]
fn the_slurm_example_gives_every_task_the_same_command_and_instant() {
    const ACCESS: &str = "deploy-test-access-key-id";
    const SECRET: &str = "deploy-test-secret-access-key";
    const API_KEY: &str = "deploy-test-serving-api-key";
    let s = slurm();
    let ntasks = sbatch_ntasks(&s);
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    let record = dir.path().join("record");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&record).unwrap();
    write_executable(&bin.join("srun"), FAKE_SRUN);
    write_executable(&bin.join("anvil-capture"), FAKE_CAPTURE);
    let credentials = dir.path().join("upload.env");
    std::fs::write(
        &credentials,
        format!(
            "AWS_ACCESS_KEY_ID={ACCESS}\nAWS_SECRET_ACCESS_KEY={SECRET}\nAWS_REGION=eu-west-1\n\
             ANVIL_API_KEY={API_KEY}\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&credentials, std::fs::Permissions::from_mode(0o600)).unwrap();
    let said_path = dir.path().join("output");
    let said_file = std::fs::File::create(&said_path).unwrap();

    let before = OffsetDateTime::now_utc();
    let mut command = Command::new("bash");
    command
        .arg(repo(SLURM).as_os_str())
        .current_dir(dir.path())
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("HOME", dir.path())
        // What sbatch gives the batch shell: it is task 0 of the batch step.
        .env("SLURM_JOB_ID", "4242")
        .env("SLURM_NTASKS", ntasks.to_string())
        .env("SLURM_PROCID", "0")
        // A zone far from UTC (POSIX form, no tz database needed): a start instant computed
        // in local time instead of UTC lands hours away from now.
        .env("TZ", "JST-9")
        .env("ANVIL_UPLOAD_ENV", credentials.as_os_str())
        .env("MANIFEST", dir.path().join("workload-manifest.json"))
        .env("ANVIL_DEPLOY_RECORD", record.as_os_str())
        .stdin(Stdio::null())
        .stdout(said_file.try_clone().unwrap())
        .stderr(said_file);
    for var in [
        "ANVIL_BIN",
        "JOB_COMPLETION_INDEX",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "ANVIL_API_KEY",
    ] {
        command.env_remove(var);
    }
    let mut child = command.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{SLURM}: still running after 60 s with stand-ins for srun and anvil-capture");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let after = OffsetDateTime::now_utc();
    let said = std::fs::read_to_string(said_path.as_path()).unwrap_or_default();
    assert!(
        status.success(),
        "{SLURM} failed ({status}) under bash with stand-ins for srun and anvil-capture:\n{said}"
    );
    for secret in [ACCESS, SECRET, API_KEY] {
        assert!(
            !said.contains(secret),
            "{SLURM} printed a credential read from ANVIL_UPLOAD_ENV:\n{said}"
        );
    }

    let mut lines: Vec<Vec<String>> = Vec::new();
    for task in 0..ntasks {
        let argv = std::fs::read_to_string(record.join(format!("task-{task}.argv")))
            .unwrap_or_else(|e| {
                panic!("{SLURM}: task {task} of {ntasks} never ran anvil-capture ({e}):\n{said}")
            });
        let argv: Vec<String> = argv.split_terminator('\0').map(str::to_owned).collect();
        let env: BTreeMap<String, String> =
            std::fs::read_to_string(record.join(format!("task-{task}.env")))
                .unwrap()
                .split_terminator('\0')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
        assert_eq!(
            env.get("AWS_ACCESS_KEY_ID").map(String::as_str),
            Some(ACCESS),
            "{SLURM}: task {task} has no AWS_ACCESS_KEY_ID from ANVIL_UPLOAD_ENV"
        );
        assert_eq!(
            env.get("AWS_SECRET_ACCESS_KEY").map(String::as_str),
            Some(SECRET),
            "{SLURM}: task {task} has no AWS_SECRET_ACCESS_KEY from ANVIL_UPLOAD_ENV"
        );
        for var in values(&argv, "--api-key-env") {
            assert!(
                env.get(var).is_some_and(|v| !v.is_empty()),
                "{SLURM}: --api-key-env {var}, but task {task} has no {var}"
            );
        }
        lines.push(argv);
    }
    let recorded = std::fs::read_dir(record.as_path()).unwrap().count();
    assert_eq!(
        recorded,
        2 * ntasks,
        "{SLURM}: anvil-capture ran as other tasks than 0..{ntasks}"
    );
    for (task, line) in lines.iter().enumerate().skip(1) {
        assert_eq!(
            line, &lines[0],
            "{SLURM}: task {task} got another command line than task 0: the shard and the \
             instant must come from each task's environment and the batch script, not differ"
        );
    }
    let start_at = value(SLURM, &lines[0], "--start-at");
    let instant = utc_instant(start_at).unwrap_or_else(|e| panic!("{SLURM}: --start-at: {e}"));
    assert!(
        instant > before && instant.unix_timestamp() <= after.unix_timestamp() + 3600,
        "{SLURM}: --start-at {start_at} should be a little after the script ran ({before} to \
         {after})"
    );
}

// ---------------------------------------------------------------------------------------------
// Flags

/// The flags a binary's `--help` (for `sub`) lists.
fn help_flags(bin: &str, sub: &[&str]) -> BTreeSet<String> {
    let o = Command::new(bin).args(sub).arg("--help").output().unwrap();
    assert!(
        o.status.success(),
        "{bin} {} --help failed: {}",
        sub.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']')
        .filter(|t| t.starts_with("--") && t.len() > 2)
        .map(|t| t.split('=').next().unwrap_or(t).to_owned())
        .collect()
}

/// Every flag the two examples pass to `anvil-capture run` is one the real binary lists.
#[test]
fn every_flag_the_examples_pass_is_a_flag_of_anvil_capture_run() {
    let known = help_flags(CAPTURE, &["run"]);
    let k = k8s();
    let (_, k8s_argv) = capture_container(&k.job);
    let s = slurm();
    let mut unknown = Vec::new();
    for (file, argv) in [(K8S, &k8s_argv), (SLURM, &s.capture)] {
        for flag in flags(&argv[2..]) {
            if !known.contains(flag) {
                unknown.push(format!(
                    "{file}: {flag} is not a flag of `anvil-capture run`"
                ));
            }
        }
    }
    assert!(unknown.is_empty(), "{}", unknown.join("\n"));
}

/// Every flag of the `anvil` and `anvil-capture` commands of deploy/README.md is one its
/// binary's `--help` lists.
#[cfg(feature = "analysis")]
#[test]
fn the_deploy_readme_commands_use_real_flags() {
    use super::common::ANVIL;
    let text = read(README);
    let mut blocks: Vec<String> = Vec::new();
    let mut open: Option<String> = None;
    for line in text.lines() {
        match open.as_mut() {
            Some(block) if line == "```" => {
                blocks.push(std::mem::take(block));
                open = None;
            }
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
            None if line == "```sh" => open = Some(String::new()),
            None => {}
        }
    }
    let mut checked = 0;
    let mut unknown = Vec::new();
    for command in blocks.iter().flat_map(|b| shell_commands(b.as_str())) {
        let words = shell_words(&command);
        let bin = match words.first().map(String::as_str) {
            Some("anvil") => ANVIL,
            Some("anvil-capture") => CAPTURE,
            _ => continue,
        };
        let sub: Vec<&str> = words[1..]
            .iter()
            .map(String::as_str)
            .take_while(|w| !w.starts_with('-') && w.chars().all(|c| c.is_ascii_lowercase()))
            .take(2)
            .collect();
        let known = help_flags(bin, &sub);
        for flag in flags(&words[1..]) {
            if !known.contains(flag) {
                unknown.push(format!("{README}: `{command}`: {flag} is not a flag"));
            }
        }
        checked += 1;
    }
    assert!(
        checked > 0,
        "{README}: no anvil command found in its sh blocks"
    );
    assert!(unknown.is_empty(), "{}", unknown.join("\n"));
}
