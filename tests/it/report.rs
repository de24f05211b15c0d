//! `anvil report` and `anvil demo` through the real binary, over the committed sample
//! campaign (real artifacts recorded against `anvil-sim`), and the report opened in headless
//! Chromium: injected payloads must stay text, charts must render, no section may be missing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anvil::report::SECTION_IDS as SECTIONS;

use crate::common::ANVIL;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn anvil(args: &[&str]) -> Output {
    Command::new(ANVIL)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("running anvil")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The `<section id="…">` of `html`, up to its closing tag.
fn section<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html
        .find(&format!("<section id=\"{id}\""))
        .unwrap_or_else(|| panic!("section {id} missing"));
    let end = html[start..]
        .find("</section>")
        .map_or(html.len(), |e| start + e);
    &html[start..end]
}

/// Run ids and classes of the sample campaign's artifacts, from their run.json files.
fn sample_runs() -> Vec<(String, String)> {
    crate::common::run_jsons(&repo("sample-data"))
        .iter()
        .map(|path| {
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
            (
                v["run_id"].as_str().unwrap().to_owned(),
                v["workload"]["class"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn report_html(extra_data: &[&Path], out: &Path) -> String {
    let mut args: Vec<String> = vec!["report".into(), "--data".into(), "sample-data".into()];
    for d in extra_data {
        args.extend(["--data".into(), d.display().to_string()]);
    }
    args.extend(["--out".into(), out.display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = anvil(&args);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout).lines().last(),
        Some(out.display().to_string().as_str())
    );
    std::fs::read_to_string(out).unwrap()
}

#[test]
fn the_sample_campaign_report_has_every_section_and_keeps_screens_apart() {
    let runs = sample_runs();
    let headline: Vec<&str> = runs
        .iter()
        .filter(|(_, c)| c == "headline-sustained-output")
        .map(|(r, _)| r.as_str())
        .collect();
    let screens: Vec<&str> = runs
        .iter()
        .filter(|(_, c)| c == "optimization-screen")
        .map(|(r, _)| r.as_str())
        .collect();
    assert!(
        headline.len() >= 2 && screens.len() >= 2,
        "the sample campaign holds headline and screen artifacts: {runs:?}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let html = report_html(&[], &tmp.path().join("campaign.html"));
    for id in SECTIONS {
        section(&html, id);
    }
    let head = section(&html, "headline");
    assert!(head.contains("aggregate") || head.contains("Aggregate"));
    for run in &headline {
        assert!(
            head.contains(run),
            "headline artifact {run} in the headline section"
        );
    }
    // Headline throughput never beside a screen: no screen run appears in the headline
    // section, no headline run in the screens section, which is labelled.
    for run in &screens {
        assert!(
            !head.contains(run),
            "screen run {run} in the headline section"
        );
    }
    // The stage comparisons: each one workload, so a screen run and a headline run never
    // share a table; each screen is labelled within-screen.
    let stages = section(&html, "screens");
    for comparison in stages.split("<h3>").skip(1) {
        let has = |runs: &[&str]| runs.iter().any(|r| comparison.contains(r));
        assert!(
            !(has(&headline) && has(&screens)),
            "a stage comparison holds headline and screen runs:\n{comparison}"
        );
        if has(&screens) {
            assert!(
                comparison.contains("within-screen selection only"),
                "{comparison}"
            );
        }
    }
    assert!(head.matches("<svg").count() >= 3, "headline charts drawn");
    // The appendix renders the definitions of queries/*.sql.
    assert!(section(&html, "appendix").contains("request_metrics"));
}

#[test]
fn markdown_report_prints_the_headline_table_and_verdicts() {
    let o = anvil(&["report", "--format", "md"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let md = text(&o.stdout);
    assert!(md.contains("## Headline comparison"), "{md}");
    assert!(md.contains("| arm | window | run | n | mean |"), "{md}");
    assert!(md.contains("## Verdicts"), "{md}");
    assert!(md.contains("Inferact DFlash2 K8"), "{md}");
}

#[test]
fn report_refuses_bad_input_with_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("plan.json");
    std::fs::write(&bad, "{\"schema\": 1").unwrap();
    let o = anvil(&["report", "--plan", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--plan"), "{}", text(&o.stderr));
    let o = anvil(&[
        "report",
        "--data",
        tmp.path().join("missing").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
}

#[test]
fn demo_records_a_campaign_and_prints_the_report_path() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("demo");
    let o = anvil(&["demo", "--out", out.to_str().unwrap(), "--speed", "40"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let path = text(&o.stdout).lines().last().unwrap().to_owned();
    assert_eq!(Path::new(&path), out.join("campaign.html"));
    let html = std::fs::read_to_string(&path).unwrap();
    let head = section(&html, "headline");
    assert!(head.contains("Inferact DFlash2 K8") && head.contains("Inferact target-only"));
    assert!(section(&html, "screens").contains("K12"));
    // Through the managed path: the journal, and the restore stage backed by evidence.
    let folder = out.join("2026-09-04-qwen38-27b-pro6000-possibility");
    assert!(folder.join("campaign-journal.jsonl").is_file());
    let restoration: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("restoration.json")).unwrap())
            .unwrap();
    assert_eq!(restoration["restored"], true, "{restoration:#}");
    assert!(
        html.contains("restored (7 checks passed)"),
        "the plan section says so"
    );
    assert!(!html.contains("service not restored"));
    assert!(out.join("campaign.json").is_file());
}

/// The Chromium binary: `ANVIL_CHROMIUM`, else the first of the usual names on PATH.
fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ANVIL_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ]
    .iter()
    .flat_map(|name| std::env::split_paths(&path).map(move |d| d.join(name)))
    .find(|p| p.is_file())
}

fn headless(chromium: &Path, profile: &Path, args: &[&str]) -> Output {
    Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--virtual-time-budget=3000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .output()
        .expect("running chromium")
}

/// The report in a real browser. `.ci/run` installs Debian's chromium; where that is
/// impossible it says why (`ANVIL_CHROMIUM_UNAVAILABLE`) and this test is skipped loudly.
/// Under CI (`CI` set) without either, it fails.
#[test]
fn report_in_headless_chromium_renders_charts_and_never_runs_injected_code() {
    let Some(chromium) = chromium() else {
        let why = std::env::var("ANVIL_CHROMIUM_UNAVAILABLE").ok();
        eprintln!(
            "SKIPPED: the browser test needs Chromium (apt-get install chromium, or set ANVIL_CHROMIUM){}",
            why.as_deref()
                .map(|w| format!(" ({w})"))
                .unwrap_or_default()
        );
        assert!(
            std::env::var_os("CI").is_none() || why.is_some(),
            "CI is set: Chromium must be installed (bash .ci/run installs it)"
        );
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let payload =
        "\"><script>document.title='PWNED'</script><img src=x onerror=\"document.title='PWNED'\">";
    let hostile = crate::sql::build_hostile(tmp.path(), payload);
    let out = tmp.path().join("campaign.html");
    let html = report_html(&[&hostile], &out);
    assert!(
        html.contains("&lt;script&gt;document.title="),
        "payload shown as text"
    );
    let url = format!("file://{}", out.display());

    let o = headless(&chromium, &tmp.path().join("p1"), &["--dump-dom", &url]);
    let dom = text(&o.stdout);
    assert!(
        o.status.success() && dom.contains("<section id=\"header\""),
        "chromium --dump-dom failed: {}",
        text(&o.stderr)
    );
    assert!(!dom.contains("PWNED</title>"), "an injected script ran");
    assert!(!dom.contains("<script"), "a script element reached the DOM");
    assert!(
        !dom.contains("<img src=\"x\""),
        "an injected element reached the DOM"
    );
    assert!(
        dom.contains("K12\"&gt;&lt;script&gt;"),
        "the hostile arm name shows as text"
    );
    for id in SECTIONS {
        assert!(
            dom.contains(&format!("<section id=\"{id}\"")),
            "section {id} missing in the rendered DOM"
        );
    }
    let charts = dom.matches("<svg").count();
    assert!(charts >= 8, "only {charts} charts in the rendered DOM");

    let png = tmp.path().join("report.png");
    let o = headless(
        &chromium,
        &tmp.path().join("p2"),
        &[
            &format!("--screenshot={}", png.display()),
            "--window-size=1280,2400",
            &url,
        ],
    );
    assert!(o.status.success(), "screenshot failed: {}", text(&o.stderr));
    let bytes = std::fs::read(&png).expect("a screenshot was written");
    assert!(bytes.starts_with(b"\x89PNG"), "not a PNG");
    // A blank 1280x2400 page compresses to a few kilobytes; text and charts do not.
    assert!(
        bytes.len() > 40_000,
        "screenshot is nearly blank: {} bytes",
        bytes.len()
    );
}
