//! The README's commands, run as a reader would run them.
//!
//! Every fenced `sh` block of README.md carries a marker in the file's source (an HTML
//! comment, invisible when rendered) on the line before it:
//!
//! - `<!-- readme-test: run -->`: the block's commands run, in README order, in one `bash`
//!   session in a scratch folder holding `sample-data` (a link to the repository's), with the
//!   freshly built `anvil`, `anvil-capture` and `anvil-sim` first on the PATH and `cargo run
//!   --` / `cargo build` standing for them; each must exit 0, and where the README says what a
//!   command prints, that is checked ([`SHOWN`]). A line holding a placeholder (`<cell>`,
//!   `...`) or opening the interactive prompt ([`INTERACTIVE`]) has only its flags checked,
//!   and `cargo test` is this suite itself.
//! - `<!-- readme-test: flags (why) -->`: the block needs real servers or is too long for the
//!   suite; each `--flag` of each command must be one its binary's `--help` (for that
//!   subcommand) lists.
//! - `<!-- readme-test: campaign-file (why) -->` on a `json` block: the campaign file is
//!   validated by `anvil validate` beside the sample manifest and plan.
//!
//! A block without a marker fails the test, so a new block is never silently left out.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::common::{ANVIL, CAPTURE, SIM, shell_words};

/// One fenced block of the README.
#[derive(Debug)]
struct Block {
    /// The line of its opening fence (1-based).
    line: usize,
    lang: String,
    marker: Option<String>,
    body: String,
}

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap()
}

fn blocks(text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if let Some(lang) = lines[i].strip_prefix("```")
            && !lang.is_empty()
        {
            let marker = (i > 0)
                .then(|| lines[i - 1].trim())
                .and_then(|l| l.strip_prefix("<!-- readme-test:"))
                .and_then(|l| l.strip_suffix("-->"))
                .map(|m| m.trim().to_owned());
            let start = i;
            let mut body = String::new();
            i += 1;
            while i < lines.len() && lines[i] != "```" {
                body.push_str(lines[i]);
                body.push('\n');
                i += 1;
            }
            out.push(Block {
                line: start + 1,
                lang: lang.trim().to_owned(),
                marker,
                body,
            });
        }
        i += 1;
    }
    out
}

/// A line the suite cannot run as written: a placeholder for the reader to fill in.
fn has_placeholder(command: &str) -> bool {
    command.contains(" ... ")
        || command.contains('<') && command.contains('>') && !command.contains("<=")
}

/// The binary a command runs and the words naming its subcommand, for `--help`.
fn program_of(command: &str) -> Option<(&'static str, Vec<String>)> {
    let words = shell_words(command);
    let (bin, rest): (&str, &[String]) = match words.first().map(String::as_str) {
        Some("anvil") => (ANVIL, &words[1..]),
        Some("anvil-capture") => (CAPTURE, &words[1..]),
        Some("anvil-sim") => (SIM, &words[1..]),
        Some("cargo") if words.get(1).map(String::as_str) == Some("run") => {
            let sep = words.iter().position(|w| w == "--")?;
            let bin = match words.iter().position(|w| w == "--bin") {
                Some(i) => match words[i + 1].as_str() {
                    "anvil-sim" => SIM,
                    "anvil-capture" => CAPTURE,
                    _ => ANVIL,
                },
                None => ANVIL,
            };
            (bin, &words[sep + 1..])
        }
        _ => return None,
    };
    // Subcommand words: leading words that are not flags or values (the binaries' own
    // subcommands are lower-case words).
    let sub: Vec<String> = rest
        .iter()
        .take_while(|w| !w.starts_with('-') && w.chars().all(|c| c.is_ascii_lowercase()))
        .take(2)
        .cloned()
        .collect();
    Some((bin, sub))
}

/// Each `--flag` of `command` is one its binary's `--help` lists; returns what is wrong.
fn check_flags(command: &str) -> Vec<String> {
    let Some((bin, sub)) = program_of(command) else {
        return Vec::new();
    };
    let mut help_args = sub.clone();
    // `anvil campaign plan`: the subcommand's own help; a `just`-like word that is not a
    // subcommand makes --help fail, which is reported.
    help_args.push("--help".to_owned());
    let o = Command::new(bin).args(&help_args).output().unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    if !o.status.success() {
        return vec![format!(
            "`{command}`: `{} {}` failed",
            Path::new(bin).file_name().unwrap().to_string_lossy(),
            help_args.join(" ")
        )];
    }
    shell_words(command)
        .iter()
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| w.split('=').next().unwrap().to_owned())
        .filter(|flag| {
            !help
                .split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']')
                .any(|token| token == flag)
        })
        .map(|flag| format!("`{command}`: {flag} is not a flag of `{}`", sub.join(" ")))
        .collect()
}

/// Commands that open the interactive prompt: it needs a terminal, which
/// `sql::the_interactive_prompt_takes_meta_commands_anywhere` gives it (tmux); here their
/// flags are checked.
const INTERACTIVE: &[&str] = &["anvil sql --data runs"];

/// What the README says a command prints: (a fragment of the command, fragments of its
/// output).
const SHOWN: &[(&str, &[&str])] = &[
    // "The reply starts with the request's canary … ends with a usage chunk … and [DONE]."
    (
        "curl -N http://127.0.0.1:18080",
        &[
            "ANV-0123456789ab",
            "\"choices\":[]",
            "completion_tokens",
            "cached_tokens",
            "data: [DONE]",
        ],
    ),
    ("anvil validate sample-data", &["ok"]),
    (
        "anvil-capture cells",
        &["headline-sustained-output.ctx4096.c8.n100"],
    ),
    // "`run` prints the artifact folder as the last line of stdout … a quick look on stderr."
    (
        "--class headline-sustained-output --arm K12",
        &[
            "runs/2026-09-04-qwen38-27b-pro6000-possibility/K12/headline-sustained-output.ctx4096.c8.n100",
            "quick look",
        ],
    ),
    (
        "FROM functional_results GROUP BY check",
        &["structured_json", "tools", "responses", "coding"],
    ),
    ("\"DESCRIBE request_metrics\"", &["ttft_ms"]),
    (
        "FROM turn_stats ORDER BY turn",
        &["ttft_p50_ms", "cached_share"],
    ),
    ("FROM sessions ORDER BY session_id", &["all_ok", "true"]),
    (
        "FROM prefix_cache ORDER BY cell_id",
        &["chat-sessions", "mooncake-replay", "prefix-groups"],
    ),
    (
        "FROM run_energy ORDER BY window",
        &["all", "after_first_wave", "counter", "false"],
    ),
    ("FROM gpu_throttle WHERE window", &["reasons and SM clock"]),
    ("--format csv --out result.csv", &[]),
    ("anvil summary --data runs", &["K12"]),
    ("anvil verify --data runs", &["agree"]),
    ("\"SELECT * FROM goodput\"", &["attained"]),
    ("anvil report  ", &["reports/campaign.html"]),
    ("--out review.html", &["review.html"]),
    ("--format md", &["## "]),
];

/// Every README block is marked, every runnable block runs, every other command's flags
/// exist.
#[test]
fn the_readme_commands_run_as_written() {
    let text = readme();
    let all = blocks(&text);
    let unmarked: Vec<usize> = all
        .iter()
        .filter(|b| b.lang == "sh" && b.marker.is_none())
        .map(|b| b.line)
        .collect();
    assert!(
        unmarked.is_empty(),
        "README.md: the sh blocks at lines {unmarked:?} carry no `<!-- readme-test: … -->` marker"
    );

    let work = tempfile::tempdir().unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::os::unix::fs::symlink(repo.join("sample-data"), work.path().join("sample-data")).unwrap();
    let bin_dir = Path::new(ANVIL).parent().unwrap().to_owned();

    let mut problems = Vec::new();
    let mut script =
        String::from("set -e -o pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n");
    let mut ran: Vec<String> = Vec::new();
    for block in &all {
        let marker = block.marker.as_deref().unwrap_or("");
        if block.lang == "json" && marker.starts_with("campaign-file") {
            problems.extend(validate_campaign(&block.body, repo));
            continue;
        }
        if block.lang != "sh" {
            continue;
        }
        for command in super::common::shell_commands(&block.body) {
            if marker.starts_with("flags")
                || has_placeholder(&command)
                || INTERACTIVE.contains(&command.as_str())
            {
                problems.extend(check_flags(&command));
                continue;
            }
            assert_eq!(
                marker, "run",
                "README.md:{}: unknown marker `{marker}`",
                block.line
            );
            problems.extend(check_flags(&command));
            if command == "cargo test" {
                continue; // this suite
            }
            let shell = command
                .replace("cargo run --bin anvil-sim -- ", "anvil-sim ")
                .replace("cargo run -- ", "anvil ");
            let shell = if shell == "cargo build" {
                ":".to_owned()
            } else if shell.starts_with("export PATH=") {
                format!("export PATH=\"{}:$PATH\"", bin_dir.display())
            } else {
                shell
            };
            let index = ran.len();
            ran.push(command.clone());
            script.push_str(&format!(
                "echo '@@readme {index}'; echo '@@readme {index}' >&2\n"
            ));
            script.push_str(&shell);
            script.push('\n');
            if let Some(port) = background_port(&shell) {
                script.push_str(&format!(
                    "for i in $(seq 100); do (echo > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; sleep 0.1; done\n"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "README.md:\n{}", problems.join("\n"));

    let (ok, stdout, stderr) = bash(&script, work.path(), &bin_dir);
    let out_of = |text: &str, index: usize| -> String {
        let tag = format!("@@readme {index}\n");
        text.split(&tag)
            .nth(1)
            .map(|rest| rest.split("@@readme ").next().unwrap_or("").to_owned())
            .unwrap_or_default()
    };
    let last = (0..ran.len())
        .rev()
        .find(|i| stdout.contains(&format!("@@readme {i}\n")))
        .map_or(0, |i| i);
    assert!(
        ok,
        "README.md: `{}` failed:\n{}\n{}",
        ran[last],
        out_of(&stdout, last),
        out_of(&stderr, last)
    );
    for (fragment, shown) in SHOWN {
        let index = ran
            .iter()
            .position(|c| format!("{c}  ").contains(fragment))
            .unwrap_or_else(|| panic!("no README command holds `{fragment}`"));
        let mut said = format!("{}{}", out_of(&stdout, index), out_of(&stderr, index));
        said.push_str(&streamed_text(&said));
        for want in *shown {
            assert!(
                said.contains(want),
                "README.md: `{}` should print `{want}`; it printed:\n{said}",
                ran[index]
            );
        }
    }
}

/// The content a streamed reply printed as `data:` chunks carries, assembled (a canary may
/// be split across chunks).
fn streamed_text(output: &str) -> String {
    output
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .filter_map(|v| {
            v.pointer("/choices/0/delta/content")
                .and_then(|c| c.as_str())
                .map(str::to_owned)
        })
        .collect()
}

/// The port a background `anvil-sim` line listens on (`--port N`, else 8000).
fn background_port(shell: &str) -> Option<u16> {
    let line = shell.trim_end();
    if !line.ends_with('&') || !line.starts_with("anvil-sim") {
        return None;
    }
    let words = shell_words(line);
    Some(
        words
            .iter()
            .position(|w| w == "--port")
            .and_then(|i| words.get(i + 1))
            .and_then(|p| p.parse().ok())
            .unwrap_or(8000),
    )
}

/// Run `script` in `dir` with the binaries first on the PATH: (success, stdout, stderr).
fn bash(script: &str, dir: &Path, bin_dir: &Path) -> (bool, String, String) {
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    let errors = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(900);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the README's commands took over 15 minutes"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    (status.success(), out, errors.join().unwrap())
}

/// The README's example campaign file, beside the sample manifest and plan, passes `anvil
/// validate` (every arm an arm of the plan, every cell one of the manifest).
fn validate_campaign(body: &str, repo: &Path) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    for name in ["workload-manifest.json", "run-plan.json"] {
        std::fs::copy(repo.join("sample-data").join(name), dir.path().join(name)).unwrap();
    }
    let file: PathBuf = dir.path().join("campaign.json");
    std::fs::write(&file, body).unwrap();
    let o = Command::new(ANVIL)
        .args(["validate", file.to_str().unwrap()])
        .output()
        .unwrap();
    if o.status.success() {
        Vec::new()
    } else {
        vec![format!(
            "the example campaign file does not validate: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )]
    }
}
