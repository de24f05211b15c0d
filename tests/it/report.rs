//! `anvil report` and `anvil demo` through the real binary, over the committed sample
//! campaign (real artifacts recorded against `anvil-sim`), and the report opened in headless
//! Chromium: injected payloads must stay text, charts must render, no section may be missing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anvil::report::SECTION_IDS as SECTIONS;

use crate::common::{anvil, copy_tree, says};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The `<section id="…">` of `html`, up to its closing tag.
fn section<'a>(html: &'a str, id: &str) -> &'a str {
    let open = format!("<section id=\"{id}\"");
    let (start, _) = html
        .match_indices(&open)
        .next()
        .unwrap_or_else(|| panic!("section {id} missing"));
    let rest = &html[start..];
    rest.split_once("</section>").map_or(rest, |(body, _)| body)
}

/// Run ids and classes of the sample campaign's artifacts, from their run.json files.
/// The sample's runs of manifest cells (capacity probes left out: they are a search's
/// evidence, shown with the search), as (run id, workload class).
fn sample_runs() -> Vec<(String, String)> {
    crate::common::run_jsons(&repo("sample-data"))
        .iter()
        .filter_map(|path| {
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
            v["workload"]["probe"].is_null().then(|| {
                (
                    v["run_id"].as_str().unwrap().to_owned(),
                    v["workload"]["class"].as_str().unwrap().to_owned(),
                )
            })
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
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(
        o.stdout.clone().lines().last(),
        Some(out.display().to_string().as_str())
    );
    std::fs::read_to_string(out).unwrap()
}

#[test]
fn the_sample_campaign_report_has_every_section_and_keeps_screens_apart() {
    // What waited: never "no request waited" while first waves demonstrably queued for
    // prefill; the gauges' reading beside the client's.
    let tmp = tempfile::tempdir().unwrap();
    let html = report_html(&[], &tmp.path().join("waited.html"));
    assert!(!html.contains("no request waited"), "a wait denied");
    says(&html, "waiting gauges");
    says(&html, "waited beyond their own prefill");
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
    // share a table; a screen's block names its workload.
    let stages = section(&html, "stages");
    for comparison in stages.split("class=\"meta\">Scope:").skip(1) {
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

    // Names, not run ids, in chart titles.
    for (at, _) in html.match_indices("<title>") {
        let title = &html[at..at + html[at..].find("</title>").unwrap()];
        assert!(
            !runs.iter().any(|(r, _)| title.contains(r.as_str())),
            "a run id in a chart title: {title}"
        );
    }
    // Arms in the plan's order, not ASCII's (K4 before K12 before K16).
    let coverage = section(&html, "coverage");
    let at = |arm: &str| coverage.find(&format!("<td>{arm}</td>")).unwrap();
    assert!(at("K4") < at("K12") && at("K12") < at("K16"));
    // The manifest's levels no cell recorded are flagged.
    assert!(
        coverage.contains("concurrency 2 per replica: not recorded"),
        "{coverage}"
    );
    // One number policy in the decision tables: three significant figures, one minus sign.
    for table in ["objectives", "pairs"] {
        for (at, _) in html.match_indices(&format!("<table class=\"{table}\">")) {
            let body = &html[at..at + html[at..].find("</table>").unwrap()];
            assert_three_significant_figures(body);
        }
    }
    // Mean ITL is TPOT by definition: not a second identical table.
    assert!(
        !html.contains("<h4>Mean ITL ("),
        "a Mean ITL table beside TPOT's"
    );
    // The speculative-decoding rows say which cell they are from.
    assert!(section(&html, "spec-decode").contains("<th>cell</th>"));
}

/// Every decimal figure in `html`'s text has at most three significant digits, and no
/// ASCII hyphen stands for a minus sign before a digit.
fn assert_three_significant_figures(html: &str) {
    let mut text = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                text.push(' ');
            }
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    for token in text.split(|c: char| !(c.is_ascii_digit() || c == '.' || c == ',' || c == '-')) {
        let token = token.trim_matches(|c| c == ',' || c == '.');
        if token.len() > 1
            && token.starts_with('-')
            && token[1..].starts_with(|c: char| c.is_ascii_digit())
        {
            panic!("an ASCII hyphen as a minus sign: {token}");
        }
        if token.contains('.') {
            let digits: String = token
                .chars()
                .filter(char::is_ascii_digit)
                .skip_while(|c| *c == '0')
                .collect();
            assert!(
                digits.len() <= 3,
                "more than three significant figures: {token}"
            );
        }
    }
}

#[test]
fn markdown_report_prints_the_headline_table_and_verdicts() {
    let o = anvil(&["report", "--format", "md"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let md = o.stdout.clone();
    assert!(md.contains("## Headline comparison"), "{md}");
    assert!(md.contains("| arm | window | run | n | mean |"), "{md}");
    assert!(md.contains("## Advance rules"), "{md}");
    assert!(md.contains("Inferact DFlash2 K8"), "{md}");
}

#[test]
fn report_refuses_bad_input_with_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("plan.json");
    std::fs::write(&bad, "{\"schema\": 1").unwrap();
    let o = anvil(&["report", "--plan", bad.to_str().unwrap()]);
    assert_eq!(o.code, Some(2));
    assert!(o.stderr.contains("--plan"), "{}", o.stderr);
    let o = anvil(&[
        "report",
        "--data",
        tmp.path().join("missing").to_str().unwrap(),
    ]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
}

/// A folder holding no artifact is bad input for every command that computes figures,
/// verdicts or a report: refused with the folder named, and an existing report left as it
/// was.
#[test]
fn a_folder_without_artifacts_is_refused_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = tmp.path().join("campaign.html");
    std::fs::write(&out, "the report before").unwrap();
    let e = empty.to_str().unwrap();
    let plan = repo("sample-data/run-plan.json");
    let manifest = repo("sample-data/workload-manifest.json");
    let docs = [
        "--plan",
        plan.to_str().unwrap(),
        "--manifest",
        manifest.to_str().unwrap(),
    ];
    let o = out.to_str().unwrap();
    for args in [
        [&["report", "--out", o, "--data", e][..], &docs].concat(),
        vec!["summary", "--data", e],
        [&["compare", e][..], &docs].concat(),
        [&["check", "--data", e][..], &docs].concat(),
        vec!["verify", "--data", e],
    ] {
        let o = anvil(&args);
        let stderr = o.stderr;
        assert_eq!(o.code, Some(2), "anvil {args:?}: {stderr}");
        assert!(
            stderr.contains(e) && stderr.contains("no artifact"),
            "anvil {args:?}: {stderr}"
        );
    }
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "the report before");
    // Without the documents and no campaign file beside the data: the flags to give.
    let o = anvil(&["compare", e]);
    assert_eq!(o.code, Some(2));
    assert!(
        o.stderr.contains("give --manifest FILE and --plan FILE"),
        "{}",
        o.stderr
    );
    // `sql` over it says so and answers with empty tables.
    let o = anvil(&["sql", "--data", e, "SELECT count(*) AS n FROM requests"]);
    assert!(o.ok(), "{}", o.stderr);
    assert!(o.stderr.contains("no artifact"));
}

#[test]
fn demo_records_a_campaign_and_prints_the_report_path() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("demo");
    let o = anvil(&["demo", "--out", out.to_str().unwrap(), "--speed", "40"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let path = o.stdout.clone().lines().last().unwrap().to_owned();
    assert_eq!(Path::new(&path), out.join("campaign.html"));
    let html = std::fs::read_to_string(&path).unwrap();
    let head = section(&html, "headline");
    assert!(head.contains("Inferact DFlash2 K8") && head.contains("Inferact target-only"));
    assert!(section(&html, "stages").contains("K12"));
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

    // Run again into the same folder: refused with the flag to give, which continues it.
    let o = anvil(&["demo", "--out", out.to_str().unwrap(), "--speed", "40"]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(o.stderr.contains("--resume"), "{}", o.stderr);
    let o = anvil(&[
        "demo",
        "--out",
        out.to_str().unwrap(),
        "--speed",
        "40",
        "--resume",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
}

/// A folder holding a campaign file the demo did not write (the committed sample's) is
/// refused and its file left as it was.
#[test]
fn demo_never_replaces_a_campaign_file_it_did_not_write() {
    let tmp = tempfile::tempdir().unwrap();
    let sample = std::fs::read_to_string(repo("sample-data/campaign.json")).unwrap();
    std::fs::write(tmp.path().join("campaign.json"), &sample).unwrap();
    let o = anvil(&[
        "demo",
        "--campaign",
        "sample",
        "--out",
        tmp.path().to_str().unwrap(),
    ]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(o.stderr.contains("give another --out"));
    let after = std::fs::read_to_string(tmp.path().join("campaign.json")).unwrap();
    assert_eq!(after, sample);
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

/// The report in a real browser. `.ci/run` installs Debian's chromium and then sets
/// `ANVIL_REQUIRE_CHROMIUM=1`; where that is impossible it says why
/// (`ANVIL_CHROMIUM_UNAVAILABLE`) and this test is skipped, named in the test command's
/// closing list (`skip`).
#[test]
fn report_in_headless_chromium_renders_charts_and_never_runs_injected_code() {
    let Some(chromium) = chromium() else {
        super::skip::skipped(
            "report::report_in_headless_chromium_renders_charts_and_never_runs_injected_code",
            &super::skip::CHROMIUM,
            &std::env::var("ANVIL_CHROMIUM_UNAVAILABLE").unwrap_or_default(),
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

/// A page that loads `report` in two frames, 1400 × 900 and 900 × 900 (the report itself
/// holds no script; this wrapper measures it), and writes what it measured into its own DOM
/// for `--dump-dom`: page height, scroll width against the viewport, where the first
/// screen's parts end, and whether the report carries a script.
fn measuring_page(report: &Path) -> String {
    let url = format!("file://{}", report.display());
    format!(
        r#"<!DOCTYPE html><html><body><pre id="out">pending</pre>
<iframe id="wide" src="{url}" style="width:1400px;height:900px;border:0"></iframe>
<iframe id="narrow" src="{url}" style="width:900px;height:900px;border:0"></iframe>
<script>
const r = {{}}; let done = 0;
function measure(id) {{
  const d = document.getElementById(id).contentDocument, e = d.documentElement;
  const bottom = (s) => {{ const x = d.querySelector(s); return x ? Math.round(x.getBoundingClientRect().bottom) : -1; }};
  r[id] = {{ height: e.scrollHeight, scroll_width: e.scrollWidth, client_width: e.clientWidth,
    synthetic: bottom('#synthetic'), objectives: bottom('table.objectives'),
    not_claimable: bottom('#not-claimable'), scripts: d.querySelectorAll('script').length,
    words: d.body.innerText.split(/\s+/).filter(Boolean).length,
    tables: Array.from(d.querySelectorAll('table')).filter(t => t.checkVisibility ? t.checkVisibility() : t.getClientRects().length > 0).length,
    recommendation: bottom('p.recommendation') }};
  if (++done == 2) document.getElementById('out').textContent = JSON.stringify(r);
}}
document.getElementById('wide').onload = () => measure('wide');
document.getElementById('narrow').onload = () => measure('narrow');
</script></body></html>"#
    )
}

/// The sample report decides on one screen and fits: measured in Chromium, at 1400 px with
/// every `<details>` closed it is at most 15,000 px tall, 6,000 words and 20 tables, and its
/// first 900 px hold the recommendation, the synthetic-data banner, the winners per
/// objective and what may not be claimed; at 900 px nothing scrolls sideways; the report
/// runs no script and weighs at most 4 MB.
#[test]
fn sample_report_decides_on_its_first_screen_and_fits_in_chromium() {
    let Some(chromium) = chromium() else {
        super::skip::skipped(
            "report::sample_report_decides_on_its_first_screen_and_fits_in_chromium",
            &super::skip::CHROMIUM,
            &std::env::var("ANVIL_CHROMIUM_UNAVAILABLE").unwrap_or_default(),
        );
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let report = tmp.path().join("campaign.html");
    let html = report_html(&[], &report);
    let page = tmp.path().join("measure.html");
    std::fs::write(&page, measuring_page(&report)).unwrap();
    let o = headless(
        &chromium,
        &tmp.path().join("profile"),
        &[
            "--allow-file-access-from-files",
            "--dump-dom",
            &format!("file://{}", page.display()),
        ],
    );
    let dom = text(&o.stdout);
    let start = dom.find("<pre id=\"out\">").expect("the measuring page") + 14;
    let end = start + dom[start..].find("</pre>").unwrap();
    let measured: serde_json::Value =
        serde_json::from_str(&dom[start..end].replace("&quot;", "\""))
            .unwrap_or_else(|e| panic!("measurements not written ({e}): {}", &dom[start..end]));
    let (wide, narrow) = (&measured["wide"], &measured["narrow"]);
    let n = |v: &serde_json::Value, k: &str| v[k].as_i64().unwrap_or(-1);
    eprintln!("report layout in Chromium: {measured}");
    assert_eq!(n(wide, "scripts"), 0, "the report runs no script");
    assert!(
        (1000..=15_000).contains(&n(wide, "height")),
        "page height at 1400 px: {}",
        n(wide, "height")
    );
    assert!(
        // The sample campaign's session, trace and prefix-group cells (six artifacts) and
        // their section's one visible line took it from about 5,700 to about 6,100.
        (1..=6_400).contains(&n(wide, "words")),
        "visible words: {}",
        n(wide, "words")
    );
    assert!(
        (1..=20).contains(&n(wide, "tables")),
        "visible tables: {}",
        n(wide, "tables")
    );
    assert!(
        html.len() <= 4 << 20,
        "the report weighs {} bytes",
        html.len()
    );
    for part in ["recommendation", "synthetic", "objectives", "not_claimable"] {
        let bottom = n(wide, part);
        assert!(
            (1..=900).contains(&bottom),
            "{part} ends at {bottom} px, outside the first 1400 × 900 screen"
        );
    }
    assert!(
        n(narrow, "scroll_width") <= n(narrow, "client_width"),
        "at 900 px the page scrolls sideways: {narrow}"
    );
    // The first screen names the winners with figures and intervals, and the lead's.
    let first = section(&html, "header");
    for words in [
        "SIMULATED DATA",
        "aggregate output throughput",
        "output throughput per GPU",
        "goodput under the SLOs",
        "What may not be claimed",
        "promotion of any configuration",
    ] {
        assert!(first.contains(words), "first screen lacks {words}");
    }
    assert!(
        first.contains(" tok&#x2F;s ["),
        "a figure with its interval"
    );
    assert!(first.contains("resolved"), "whether each lead is resolved");
}

/// An incomplete campaign (the sample without the arms of stage 4 and torch.compile) keeps
/// its first screen honest: the outcome says incomplete, the gaps name the arms missing
/// with a command that records them, plan text anvil cannot read is listed apart, the
/// stage whose arms have no artifacts is not called complete, and what may not be claimed
/// names them.
#[test]
fn an_incomplete_campaign_says_what_is_missing_on_its_first_screen() {
    let tmp = tempfile::tempdir().unwrap();
    let campaign = "2026-09-04-qwen38-27b-pro6000-possibility";
    let src = repo("sample-data").join(campaign);
    let dst = tmp.path().join(campaign);
    copy_tree(&src, &dst);
    for arm in [
        "torch.compile",
        "RadixArk target-only",
        "RadixArk DFlash2 K8",
        "RadixArk DFlash2 K12 chunk1K",
    ] {
        std::fs::remove_dir_all(dst.join(arm)).unwrap();
    }
    let md = sample_plan_report(tmp.path(), "md");
    let first = &md[..md.find("## Stage by stage").expect("the stage section")];
    assert!(
        first.contains("Outcome: incomplete: evidence is missing"),
        "{first}"
    );
    assert!(first.contains("### Evidence gaps"), "{first}");
    // A stage whose other arms recorded cells: the exact command per cell.
    assert!(
        first.contains(
            "stage SGLang optimization: torch.compile on optimization-screen.ctx4096.c4.n16: \
             `anvil-capture run --manifest sample-data/workload-manifest.json --class \
             optimization-screen --context 4096 --concurrency 4 --requests 16 --arm \
             torch.compile --stage 'SGLang optimization' --endpoint URL"
        ),
        "{first}"
    );
    // A stage with no artifact at all: where to find its cells.
    assert!(
        first.contains(
            "stage target checkpoint: RadixArk target-only (no arm of the stage recorded a cell)"
        ),
        "{first}"
    );
    assert!(
        first.contains("stage target checkpoint: its arms RadixArk target-only, RadixArk DFlash2 K8, RadixArk DFlash2 K12 chunk1K have no artifacts"),
        "{first}"
    );
    assert!(first.contains("SIMULATED DATA"), "{first}");
    let html = sample_plan_report(tmp.path(), "html");
    assert!(html.contains("complete (the plan&#x27;s word; no artifacts)"));
    let coverage = section(&html, "coverage");
    assert!(
        coverage.contains("<td class=\"fail\">✗</td>"),
        "missing cells marked"
    );
}

/// The report of the artifacts beneath `data` under the sample plan and manifest, in
/// `format` (`html` or `md`), written beside them and read back.
fn sample_plan_report(data: &Path, format: &str) -> String {
    let out = data.join(format!("report.{format}"));
    let o = anvil(&[
        "report",
        "--data",
        data.to_str().unwrap(),
        "--plan",
        "sample-data/run-plan.json",
        "--manifest",
        "sample-data/workload-manifest.json",
        "--format",
        format,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    std::fs::read_to_string(&out).unwrap()
}

/// A data folder holding a symbolic-link loop is searched as `sql` and `summary` search it
/// (links to folders are not followed): `check` reads the sample campaign beside it.
#[test]
fn check_reads_a_folder_holding_a_symlink_loop() {
    let tmp = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(tmp.path(), tmp.path().join("loop")).unwrap();
    let sample = repo("sample-data");
    let o = anvil(&[
        "check",
        "--data",
        sample.to_str().unwrap(),
        "--data",
        tmp.path().to_str().unwrap(),
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
}
