//! Snapshots of every human-facing text output over the committed sample campaign in
//! `sample-data/`: `anvil summary`, `anvil compare` (text and Markdown), `anvil check` (text
//! and Markdown) and `anvil report --format md`, each from the real binary. A change to
//! what a reader sees shows up as a snapshot diff (`cargo insta review`, or
//! `INSTA_UPDATE=always cargo test --test it -- text::`).

use super::common::anvil;

const CAMPAIGN: &str = "sample-data/2026-09-04-qwen38-27b-pro6000-possibility";
const PLAN: &str = "sample-data/run-plan.json";
const MANIFEST: &str = "sample-data/workload-manifest.json";
const HEADLINE: &str = "headline-sustained-output.ctx4096.c8.n100";

/// The two headline arms of the baseline stage.
fn headline_pair() -> [String; 2] {
    ["Inferact target-only", "Inferact DFlash2 K8"]
        .map(|arm| format!("{CAMPAIGN}/{arm}/{HEADLINE}"))
}

/// `anvil compare` with the sample documents.
const DOCUMENTS: [&str; 5] = ["compare", "--manifest", MANIFEST, "--plan", PLAN];

fn compare(format: &str) -> String {
    let [a, b] = headline_pair();
    anvil(&[&DOCUMENTS[..], &["--format", format, &a, &b]].concat()).expect(0)
}

#[test]
fn summary_text() {
    insta::assert_snapshot!(anvil(&["summary", "--data", "sample-data"]).expect(0));
}

#[test]
fn compare_text() {
    insta::assert_snapshot!(compare("table"));
}

#[test]
fn compare_markdown() {
    insta::assert_snapshot!(compare("md"));
}

/// One stage's comparisons over the whole campaign: TP2 and DP2 against TP1, not against a
/// global baseline, with per-GPU throughput and scaling efficiency against TP1.
#[test]
fn compare_stage_text() {
    insta::assert_snapshot!(
        anvil(
            &[
                &DOCUMENTS[..],
                &["--stage", "matched topology", "sample-data"]
            ]
            .concat()
        )
        .expect(0)
    );
}

/// The sample campaign's own outcome: every arm of the plan recorded (the simulator stands in
/// for each), every measurable advance rule holds (the topology winner's communication
/// overhead is not testable), no stop rule fired: 0.
const CHECK_EXIT: i32 = 0;

/// `anvil check` of the sample campaign against its documents.
const CHECK: [&str; 7] = [
    "check",
    "--data",
    "sample-data",
    "--plan",
    PLAN,
    "--manifest",
    MANIFEST,
];

#[test]
fn check_text() {
    insta::assert_snapshot!(anvil(&CHECK).expect(CHECK_EXIT));
}

#[test]
fn check_markdown() {
    let args = [&CHECK[..], &["--format", "md"]].concat();
    insta::assert_snapshot!(anvil(&args).expect(CHECK_EXIT));
}

#[test]
fn report_markdown() {
    let out = anvil(&["report", "--format", "md"]).expect(0);
    assert_report_snapshot("report_markdown", &out);
}

/// Assert the snapshot `name` of a Markdown report, its time stamp and version masked.
fn assert_report_snapshot(name: &str, report: &str) {
    let mut settings = insta::Settings::clone_current();
    settings.add_filter(r"generated \d{4}-\d\d-\d\dT[0-9:.]+Z", "generated [UTC]");
    settings.add_filter(r"anvil \d+\.\d+\.\d+", "anvil [version]");
    settings.bind(|| insta::assert_snapshot!(name, report));
}

/// The Markdown report's first section, the one a reviewer pastes into a pull request: the
/// banners, what was tested, the winners per objective, the stages' claims and what may not
/// be claimed.
#[test]
fn report_markdown_first_section() {
    let out = anvil(&["report", "--format", "md"]).expect(0);
    let first = &out[..out.find("## Stage by stage").expect("the stage section")];
    assert_report_snapshot("report_markdown_first_section", first);
}

/// `compare` takes its folders with `--data` like `sql`, `summary`, `check`, `report` and
/// `verify`; positional folders still work, alone or beside `--data`.
#[test]
fn compare_takes_data_like_its_siblings() {
    let [a, b] = headline_pair();
    let docs = ["--manifest", MANIFEST, "--plan", PLAN];
    let positional = compare("table");
    let with_data =
        anvil(&[&["compare"][..], &docs, &["--data", &a, "--data", &b]].concat()).expect(0);
    let mixed = anvil(&[&["compare"][..], &docs, &["--data", &a, &b]].concat()).expect(0);
    assert_eq!(with_data, positional);
    assert_eq!(mixed, positional);
    let stages = anvil(&["compare", "--data", "sample-data"]).expect(0);
    assert_eq!(stages, anvil(&["compare", "sample-data"]).expect(0));
    assert!(stages.contains("stage baseline"), "{stages}");
}
