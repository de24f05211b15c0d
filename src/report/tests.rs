//! Tests of the report renderers over hand-made rules results: every section present, SVG
//! well-formed and carrying its series, hostile strings escaped everywhere, headline
//! throughput kept apart from screens, charts that survive empty and hostile data, and the
//! Markdown output.

use std::collections::BTreeMap;

use quick_xml::Reader;
use quick_xml::events::Event;

use crate::artifact::run::{Outcome, Workload};
use crate::manifest::{RunPlan, WorkloadManifest};
use crate::rules::References;
use crate::rules::headline::Scope;
use crate::rules::{
    Artifact, CheckReport, Comparison, MetricId, ReplicaThroughput, ServerError, SpecDecode, Stats,
    check, compare, match_artifacts,
};

use super::build::build;
use super::charts::{
    self, Bar, BarChart, CdfChart, LineSeriesData, SampleSeries, TimeSeriesChart, TimelineBar,
    TimelineChart,
};
use super::input::{
    ClientQueue, OutputSnippet, QueueSample, ReportInput, RequestTiming, RunInfo, RunQueue,
    ScreenResult, ServerTimings, TokensPerChunk,
};
use super::{ReportView, SECTION_IDS, render_html, render_markdown};

const SCRIPT: &str = "<script>alert(1)</script>";
const IMG: &str = "\"><img src=x onerror=alert(1)>";
const QUOTE: &str = "x' onmouseover='alert(1)";

use crate::rules::fixtures::{headline_workload, manifest, plan};

fn stats(mean: f64, sd: f64) -> Stats {
    crate::rules::fixtures::full_stats(100, mean, sd)
}

/// A complete artifact whose every rule passes, on `workload`.
fn artifact(
    run_id: &str,
    arm: &str,
    stage: &str,
    config: &[(&str, &str)],
    workload: Workload,
    tps: f64,
) -> Artifact {
    let facts = crate::rules::fixtures::facts(run_id, arm, stage, config, workload);
    let scale = tps / 1000.0;
    let metrics: BTreeMap<MetricId, Stats> = [
        (MetricId::TtftMs, stats(400.0 / scale, 40.0)),
        (
            MetricId::EffectivePrefillTps,
            stats(10_000.0 * scale, 500.0),
        ),
        (MetricId::DecodeTps, stats(60.0 * scale, 5.0)),
        (MetricId::TpotMs, stats(16.0 / scale, 1.5)),
        (MetricId::ItlMs, stats(16.0 / scale, 1.5)),
        (MetricId::E2eMs, stats(6000.0 / scale, 300.0)),
    ]
    .into_iter()
    .collect();
    let mut artifact = crate::rules::fixtures::artifact_of(facts, metrics, tps);
    artifact.figures.aggregate_output_tps_per_replica = vec![ReplicaThroughput {
        replica: 0,
        output_tps: tps,
    }];
    artifact
}

/// The report of a campaign with no artifact at all.
fn empty_view(plan: &RunPlan, manifest: &WorkloadManifest, check: &CheckReport) -> ReportView {
    build(&ReportInput {
        data_folder: "empty",
        manifest_file: "sample-data/workload-manifest.json",
        generated_utc: "2026-09-05T08:00:00Z",
        tool_version: "0.1.0",
        plan,
        manifest,
        check,
        artifacts: &[],
        headline: None,
        screens: &[],
        runs: &[],
        requests: &[],
        queues: &[],
        known_queue_gauges: "",
        client_queues: &[],
        prefill_waits: &[],
        server_timings: &[],
        tokens_per_chunk: &[],
        snippets: &[],
        definitions: &[],
        check_exit_code: 0,
        slos: "",
        tradeoff: &[],
        capacity: &[],
        spec_positions: &[],
        cache: &Default::default(),
        planned: None,
    })
}

/// Per-request timings of a run: `n` requests over `replicas`, TTFT and TPOT around the
/// given means.
fn timings(run_id: &str, n: i64, replicas: u32, ttft_ms: f64, tpot_ms: f64) -> Vec<RequestTiming> {
    (0..n)
        .map(|i| {
            let wave = (i / 8) as f64;
            let start = wave * 6.0 + (i % 8) as f64 * 0.01;
            let ttft = ttft_ms * (1.0 + 0.3 * ((i * 7 % 11) as f64 / 11.0));
            let tpot = tpot_ms * (1.0 + 0.2 * ((i * 5 % 13) as f64 / 13.0));
            let first = start + ttft / 1000.0;
            RequestTiming {
                run_id: run_id.to_owned(),
                replica: (i as u32) % replicas,
                request_index: i,
                start_s: start,
                first_token_s: Some(first),
                end_s: first + 339.0 * tpot / 1000.0,
                ttft_ms: Some(ttft),
                tpot_ms: Some(tpot),
                prompt_tokens: Some(4096.0),
                effective_prefill_tps: Some(4096.0 / (ttft / 1000.0)),
                first_wave: i < 8,
            }
        })
        .collect()
}

/// Everything a report is built from, owned.
struct Fixture {
    plan: RunPlan,
    manifest: WorkloadManifest,
    artifacts: Vec<Artifact>,
    check: CheckReport,
    headline: Comparison,
    screens: Vec<ScreenResult>,
    runs: Vec<RunInfo>,
    requests: Vec<RequestTiming>,
    queues: Vec<RunQueue>,
    client_queues: Vec<ClientQueue>,
    server_timings: Vec<ServerTimings>,
    chunks: Vec<TokensPerChunk>,
    snippets: Vec<OutputSnippet>,
    definitions: Vec<(String, String)>,
}

impl Fixture {
    /// Headline topology arms TP1/TP2/DP2, an SGLang screen K4/K12 with its own (much
    /// higher, natural-completion) throughput, a context-curve run, scrapes and spec-decode
    /// figures. `tp2_name` and `payload` let a test inject hostile strings.
    fn new(tp2_name: &str, payload: Option<&str>) -> Self {
        let plan = plan();
        let manifest = manifest();
        let stage = "matched topology";
        let tp1 = artifact(
            "r-tp1",
            "TP1",
            stage,
            &[("topology", "TP1")],
            headline_workload(),
            1000.0,
        );
        let mut tp2 = artifact(
            "r-tp2",
            tp2_name,
            stage,
            &[("topology", "TP2")],
            headline_workload(),
            1500.0,
        );
        let mut dp2 = artifact(
            "r-dp2",
            "two independent TP1 replicas",
            stage,
            &[("topology", "DP2")],
            headline_workload(),
            1900.0,
        );
        dp2.facts.replica_count = 2;
        dp2.figures.aggregate_output_tps_per_replica = vec![
            ReplicaThroughput {
                replica: 0,
                output_tps: 950.0,
            },
            ReplicaThroughput {
                replica: 1,
                output_tps: 950.0,
            },
        ];
        let screen_workload = crate::rules::fixtures::screen_workload();
        let opt = "SGLang optimization";
        let k4 = artifact(
            "r-k4",
            "K4",
            opt,
            &[("spec_k", "4"), ("chunk", "2048")],
            screen_workload.clone(),
            7777.0,
        );
        let mut k12 = artifact(
            "r-k12",
            "K12",
            opt,
            &[("spec_k", "12"), ("chunk", "1024")],
            screen_workload,
            8888.0,
        );
        k12.figures.spec_decode = vec![SpecDecode {
            replica: 0,
            acceptance_rate: Some(0.734),
            mean_accepted_length: Some(3.42),
        }];
        let curve_workload = Workload {
            class: "context-curve".to_owned(),
            prompt_tokens_target: 32768,
            concurrency_per_replica: 1,
            total_requests: 4,
            response_words: None,
            canaries: false,
            ..headline_workload()
        };
        let curve = artifact(
            "r-ctx",
            "K12",
            "context curve",
            &[("spec_k", "12")],
            curve_workload.clone(),
            90.0,
        );
        let curve_long = artifact(
            "r-ctx-long",
            "K12",
            "context curve",
            &[("spec_k", "12")],
            Workload {
                prompt_tokens_target: 131_072,
                ..curve_workload
            },
            30.0,
        );

        if let Some(payload) = payload {
            tp2.facts.config = [("topology", "TP2"), ("note", payload)]
                .into_iter()
                .collect();
            tp2.figures.server_errors = vec![ServerError {
                request_index: 7,
                outcome: Outcome::HttpError,
                body: format!("HTTP 500: {payload}"),
            }];
            tp2.figures.requests.ok -= 1;
            tp2.figures.requests.failed.insert(Outcome::HttpError, 1);
            tp2.figures.functional[0].passed = false;
            tp2.figures.functional[0].request_index = Some(3);
            tp2.figures.functional[0].reason = Some(format!("invalid JSON: {payload}"));
        }

        let artifacts = vec![tp1, tp2, dp2, k4, k12, curve, curve_long];
        let headline = compare(
            &match_artifacts(&artifacts[0..3]).unwrap(),
            &References::Baseline("TP1".to_owned()),
            Scope::Headline,
        )
        .unwrap();
        let screen = compare(
            &match_artifacts(&artifacts[3..5]).unwrap(),
            &References::Baseline("K4".to_owned()),
            Scope::WithinScreen,
        )
        .unwrap();
        let check = check(
            &plan,
            &crate::rules::fixtures::selection(),
            &artifacts,
            &crate::rules::stop::EvidenceFiles::names(&["restoration.json"]),
        );

        let mut requests = timings("r-tp1", 100, 1, 400.0, 16.0);
        requests.extend(timings("r-tp2", 100, 1, 270.0, 11.0));
        requests.extend(timings("r-dp2", 100, 2, 380.0, 15.0));
        requests.extend(timings("r-k4", 8, 1, 300.0, 9.0));
        requests.extend(timings("r-k12", 8, 1, 280.0, 8.0));
        requests.extend((0..4).map(|i| {
            let prompt = [32768.0, 81920.0, 131072.0, 253952.0][i as usize];
            let ttft = prompt / 8.0;
            RequestTiming {
                run_id: "r-ctx".to_owned(),
                replica: 0,
                request_index: i,
                start_s: i as f64 * 60.0,
                first_token_s: Some(i as f64 * 60.0 + ttft / 1000.0),
                end_s: i as f64 * 60.0 + ttft / 1000.0 + 5.0,
                ttft_ms: Some(ttft),
                tpot_ms: Some(12.0),
                prompt_tokens: Some(prompt),
                effective_prefill_tps: Some(prompt / (ttft / 1000.0)),
                first_wave: i == 0,
            }
        }));
        let queues = vec![
            RunQueue {
                run_id: "r-tp1".to_owned(),
                scrapes: 42,
                metrics: 17,
                runtime: None,
                samples: Vec::new(),
            },
            RunQueue {
                run_id: "r-dp2".to_owned(),
                scrapes: 80,
                metrics: 12,
                runtime: Some("vllm".to_owned()),
                samples: (0..40)
                    .flat_map(|t| {
                        (0..2).map(move |replica| QueueSample {
                            replica,
                            t_s: t as f64,
                            waiting: ((t * 3 + replica as i32) % 5) as f64,
                            running: 8.0 - (t % 3) as f64,
                        })
                    })
                    .collect(),
            },
        ];
        let client_queues = vec![ClientQueue {
            run_id: "r-dp2".to_owned(),
            schedule: "poisson".to_owned(),
            rate_per_s: Some(2.5),
            requests: 100,
            queued_over_1ms: 37,
            p50_ms: Some(0.4),
            p95_ms: Some(1830.0),
            max_ms: Some(21_700.0),
        }];
        let server_timings = vec![ServerTimings {
            run_id: "r-tp2".to_owned(),
            requests: 98,
            prefill_p50_ms: Some(326.2),
            queue_p50_ms: Some(176.4),
            queue_max_ms: Some(441.2),
            generation_diff_p50_ms: Some(0.09),
            generation_diff_max_abs_ms: Some(1.25),
            token_mismatches: 0,
        }];
        let snippet_text = payload.map_or_else(
            || "reply carried ANV-00000000abcd".to_owned(),
            |p| format!("model said {p}"),
        );
        Fixture {
            runs: artifacts
                .iter()
                .map(|a| RunInfo {
                    run_id: a.facts.run_id.clone(),
                    started_utc: "2026-09-04T10:00:00Z".to_owned(),
                    ended_utc: Some("2026-09-04T10:20:00Z".to_owned()),
                    servers: vec!["replica 0: sglang 0.6.1".to_owned()],
                    cell_id: format!(
                        "{}.ctx{}.c{}.n{}",
                        a.facts.workload.class,
                        a.facts.workload.prompt_tokens_target,
                        a.facts.workload.concurrency_per_replica,
                        a.facts.workload.total_requests
                    ),
                    owners: vec!["sglang".to_owned()],
                })
                .collect(),
            snippets: vec![OutputSnippet {
                run_id: "r-tp2".to_owned(),
                request_index: 12,
                text: snippet_text,
            }],
            chunks: vec![TokensPerChunk {
                run_id: "r-k12".to_owned(),
                replica: 0,
                tokens_per_chunk: 3.1,
            }],
            definitions: manifest
                .timing_definitions
                .iter()
                .map(|(name, text)| (name.to_owned(), text.to_owned()))
                .collect(),
            screens: vec![ScreenResult {
                stage: opt.to_owned(),
                workload: "optimization-screen, 4096 tokens, C4 per replica".to_owned(),
                fingerprint: screen.fingerprint.clone(),
                result: Ok(screen),
            }],
            plan,
            manifest,
            artifacts,
            check,
            headline,
            requests,
            queues,
            client_queues,
            server_timings,
        }
    }

    fn view(&self) -> ReportView {
        build(&ReportInput {
            data_folder: "sample-data/campaign",
            manifest_file: "sample-data/workload-manifest.json",
            generated_utc: "2026-09-05T08:00:00Z",
            tool_version: "0.1.0",
            plan: &self.plan,
            manifest: &self.manifest,
            check: &self.check,
            artifacts: &self.artifacts,
            headline: Some(Ok(&self.headline)),
            screens: &self.screens,
            runs: &self.runs,
            requests: &self.requests,
            queues: &self.queues,
            known_queue_gauges: "llama.cpp llamacpp:requests_processing and llamacpp:requests_deferred, \
                                 vllm vllm:num_requests_running and vllm:num_requests_waiting",
            client_queues: &self.client_queues,
            prefill_waits: &[],
            server_timings: &self.server_timings,
            tokens_per_chunk: &self.chunks,
            snippets: &self.snippets,
            definitions: &self.definitions,
            check_exit_code: check_exit_code(self.check.outcome),
            slos: "",
            tradeoff: &[],
            capacity: &[],
            spec_positions: &[],
            cache: &Default::default(),
            planned: None,
        })
    }
}

/// The text between `<section id="{id}"` and the next `</section>`.
fn section<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html
        .find(&format!("<section id=\"{id}\""))
        .unwrap_or_else(|| panic!("section {id} missing"));
    let end = html[start..]
        .find("</section>")
        .map_or(html.len(), |e| start + e);
    &html[start..end]
}

/// Every `<svg …>…</svg>` in a page.
fn svgs(html: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find("<svg") {
        let end = rest[start..].find("</svg>").map(|e| start + e + 6).unwrap();
        out.push(&rest[start..end]);
        rest = &rest[end..];
    }
    out
}

/// Parse an SVG as XML: tags balanced, names matched, entities valid.
fn assert_well_formed(svg: &str) {
    let mut reader = Reader::from_str(svg);
    let mut depth: i64 = 0;
    loop {
        match reader.read_event() {
            Ok(Event::Start(_)) => depth += 1,
            Ok(Event::End(_)) => {
                depth -= 1;
                assert!(depth >= 0, "unbalanced end tag in {svg}");
            }
            Ok(Event::Text(text)) => {
                text.decode().unwrap();
            }
            Ok(Event::Eof) => break,
            Ok(_) => {}
            Err(error) => panic!("SVG is not well-formed XML: {error}\n{svg}"),
        }
    }
    assert_eq!(depth, 0, "unclosed tags in {svg}");
}

#[test]
fn report_has_every_section_and_well_formed_charts_with_their_series() {
    let fixture = Fixture::new("TP2", None);
    let view = fixture.view();
    let html = render_html(&view).unwrap();
    let mut last = 0;
    for id in SECTION_IDS {
        let at = html
            .find(&format!("<section id=\"{id}\""))
            .unwrap_or_else(|| panic!("section {id} missing"));
        assert!(at > last || id == "header", "section {id} out of order");
        last = at;
    }
    assert!(!html.contains("<script"), "the page needs no JavaScript");
    // Self-contained: no external resources; the only URL is the SVG namespace.
    assert_eq!(
        html.matches("http").count(),
        html.matches("http://www.w3.org/2000/svg").count()
    );
    assert!(!html.contains("<link") && !html.contains(" src=") && !html.contains("@import"));
    assert_eq!(
        html.matches("href=\"").count(),
        html.matches("href=\"#").count()
    );
    assert!(html.contains("@media print"));
    let all = svgs(&html);
    // Headline: throughput, TTFT, TPOT and E2E CDFs, three timelines; the screen stage:
    // its three CDFs; the context curve's two; one server chart (a request waited).
    assert_eq!(all.len(), 7 + 3 + 2 + 1, "{}", all.len());
    for svg in &all {
        assert_well_formed(svg);
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
    }

    let headline = section(&html, "headline");
    let headline_svgs = svgs(headline);
    let cdf = headline_svgs
        .iter()
        .find(|s| s.contains("TTFT, cumulative"))
        .unwrap();
    for arm in [
        "TP1 (n = 100)",
        "TP2 (n = 100)",
        "two independent TP1 replicas (n = 100)",
    ] {
        assert!(cdf.contains(arm), "CDF lacks {arm}");
    }
    assert!(cdf.contains("<polyline"), "CDF has no lines");
    let tpot = headline_svgs
        .iter()
        .find(|s| s.contains("TPOT, cumulative"))
        .unwrap();
    assert!(tpot.contains("TP2 (n = 100)") && tpot.contains("TPOT (ms) (log)"));
    assert!(
        headline_svgs.iter().any(|s| s.contains("E2E, cumulative")),
        "E2E CDF"
    );
    // The first wave is marked on the CDFs: one hollow circle per first-wave request.
    assert!(cdf.contains("first-wave request"), "first wave marked");
    let bars = headline_svgs
        .iter()
        .find(|s| s.contains("Aggregate output throughput"))
        .unwrap();
    for label in ["1,000 tok/s", "1,500 tok/s", "1,900 tok/s"] {
        assert!(bars.contains(label), "throughput chart lacks {label}");
    }
    let dp2 = headline_svgs
        .iter()
        .find(|s| s.contains("Requests over time: two independent TP1 replicas"))
        .unwrap();
    assert!(dp2.contains("replica 0") && dp2.contains("replica 1") && dp2.contains("first token"));
    // The first wave (the fixture's first 8 requests) is outlined and named apart.
    assert!(
        dp2.contains("first wave (8 requests)"),
        "the timeline shows the first wave"
    );
    assert!(dp2.matches("<rect").count() >= 100, "one bar per request");

    let sweeps = svgs(section(&html, "sweeps"));
    let context = sweeps
        .iter()
        .find(|s| s.contains("vs context"))
        .expect("the context curve");
    assert!(context.contains("K12") && context.contains("prompt tokens (log)"));
    assert!(context.contains("<polyline"), "points joined by lines");
    let server = svgs(section(&html, "server"));
    assert!(server[0].contains("replica 1: waiting") && server[0].contains("replica 0: running"));
    let server = section(&html, "server");
    // Scrapes without a known queue gauge are named, not passed over as "no scrapes".
    assert!(
        server.contains("42 scrapes of 17 metrics, none of them a known queue gauge"),
        "{server}"
    );
    assert!(
        server.contains("llama.cpp llamacpp:requests_processing and llamacpp:requests_deferred")
    );
    assert!(
        server.contains("poisson, 2.5 requests per second") && server.contains("21,700 ms"),
        "{server}"
    );
    assert!(
        server.contains("176 ms") && server.contains("441 ms"),
        "{server}"
    );

    assert!(section(&html, "spec-decode").contains("73.4%"));
    assert!(section(&html, "spec-decode").contains("3.42 tok"));
    assert!(section(&html, "topology").contains("DP2"));
    assert!(section(&html, "plan").contains("native-Linux TP2 control"));
    assert!(
        section(&html, "appendix")
            .contains("request start through first non-empty streamed content delta")
    );
    assert!(section(&html, "header").contains("PROMOTION NOT AUTHORIZED"));
    let plan = section(&html, "plan");
    assert!(plan.contains("Inferact target-only: <span class=\"missing\">no artifacts</span>"));
    assert!(plan.contains("TP1: <span class=\"pass\">1 run</span>"));
}

#[test]
fn hostile_strings_are_escaped_in_html_and_charts() {
    for payload in [SCRIPT, IMG, QUOTE] {
        let fixture = Fixture::new(&format!("TP2 {payload}"), Some(payload));
        let view = fixture.view();
        let html = render_html(&view).unwrap();
        assert!(!html.contains("<script"), "raw script for {payload}");
        assert!(!html.contains("<img"), "raw img for {payload}");
        assert!(!html.contains("onmouseover='"), "raw quote for {payload}");
        // Any onerror= is inside escaped text: directly after the escaped `<img src=x `, or
        // opening the text of an SVG `<text>` element (a chart label wrapped at the space).
        for (at, _) in html.match_indices("onerror=") {
            let before = &html[..at];
            let in_svg_text = before.trim_end().ends_with('>')
                && before
                    .rfind('<')
                    .is_some_and(|tag| before[tag..].starts_with("<text"));
            assert!(
                before.ends_with("&lt;img src=x ")
                    || before.ends_with("&lt;img src=x&#x20;")
                    || in_svg_text,
                "onerror= outside escaped text: …{}",
                &html[at.saturating_sub(60)..at + 20]
            );
        }
        // The payload reached the page (escaped) in every place it was put.
        let escaped_tera = tera::escape_html(payload);
        let verdicts = section(&html, "verdicts");
        assert!(
            verdicts.contains(&format!("HTTP 500: {escaped_tera}")),
            "error body"
        );
        assert!(
            verdicts.contains(&format!("model said {escaped_tera}")),
            "model output"
        );
        assert!(
            verdicts.contains(&format!("invalid JSON: {escaped_tera}")),
            "functional reason"
        );
        assert!(
            section(&html, "appendix").contains(&format!("note={escaped_tera}")),
            "config"
        );
        assert!(
            section(&html, "headline").contains(&format!("TP2 {escaped_tera}")),
            "arm"
        );
        // In chart SVG the arm name is XML-escaped in legends and titles.
        let escaped_xml = charts::escape_xml(payload);
        let headline_svgs = svgs(section(&html, "headline"));
        let cdf = headline_svgs
            .iter()
            .find(|s| s.contains("TTFT, cumulative"))
            .unwrap();
        assert!(
            cdf.contains(&format!("TP2 {escaped_xml} (n = 100)")),
            "legend: {cdf}"
        );
        for svg in svgs(&html) {
            assert_well_formed(svg);
        }
        // Markdown: no raw HTML, no table broken by the payload.
        let md = render_markdown(&view);
        assert!(!md.contains("<script") && !md.contains("<img"), "{md}");
    }
}

#[test]
fn chart_functions_escape_data_text() {
    let chart = BarChart {
        title: format!("title {SCRIPT}"),
        y_label: "tok/s".to_owned(),
        bars: vec![Bar {
            name: IMG.to_owned(),
            colour: 0,
            value: 10.0,
            interval: None,
            label: QUOTE.to_owned(),
        }],
    };
    let svg = charts::bars_svg(&chart);
    assert_well_formed(&svg);
    assert!(!svg.contains("<script") && !svg.contains("<img") && !svg.contains("x' on"));
    assert!(svg.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(svg.contains("&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"));
    let none = charts::no_data_svg(SCRIPT, IMG);
    assert_well_formed(&none);
    assert!(!none.contains("<script") && !none.contains("<img"));
}

#[test]
fn headline_throughput_never_shares_a_table_or_chart_with_screens() {
    let fixture = Fixture::new("TP2", None);
    let view = fixture.view();
    let headline = view.headline.comparison.as_ref().unwrap();
    let arms = |names: Vec<&str>| names.iter().any(|n| *n == "K4" || *n == "K12");
    assert!(!arms(
        headline.throughput.iter().map(|t| t.arm.as_str()).collect()
    ));
    assert!(!arms(
        headline
            .charts
            .throughput
            .bars
            .iter()
            .map(|b| b.name.as_str())
            .collect()
    ));
    assert!(!arms(
        headline
            .charts
            .ttft_cdf
            .series
            .iter()
            .map(|s| s.name.as_str())
            .collect()
    ));
    // The screens' requests are in the input but not in the headline's charts.
    let headline_values: usize = headline
        .charts
        .ttft_cdf
        .series
        .iter()
        .map(|s| s.values.len())
        .sum();
    assert_eq!(headline_values, 300);

    let html = render_html(&view).unwrap();
    let head = section(&html, "headline");
    for screen_figure in ["K4", "K12", "7,777", "8,888", "7.8k", "8.9k"] {
        assert!(
            !head.contains(screen_figure),
            "headline section shows {screen_figure}"
        );
    }
    let screens = section(&html, "stages");
    assert!(screens.contains("ranks arms within that screen only"));
    assert!(screens.contains(">7,777<") && screens.contains(">8,888<"));
    for headline_figure in ["1,000 tok/s", "1,500 tok/s", "1,900 tok/s", "r-tp1"] {
        assert!(
            !screens.contains(headline_figure),
            "screens section shows {headline_figure}"
        );
    }
}

#[test]
fn sections_without_evidence_say_so() {
    let fixture = Fixture::new("TP2", None);
    let plan = fixture.plan.clone();
    let check = check(
        &plan,
        &crate::rules::fixtures::selection(),
        &[],
        &Default::default(),
    );
    let view = empty_view(&plan, &fixture.manifest, &check);
    let html = render_html(&view).unwrap();
    for id in SECTION_IDS {
        section(&html, id);
    }
    assert!(section(&html, "headline").contains("no headline artifacts recorded"));
    assert!(section(&html, "sweeps").contains("No context-curve artifacts recorded."));
    assert!(
        section(&html, "stages")
            .contains("No stage recorded two or more arms on one performance workload.")
    );
    // No artifact: no synthetic banner, no winner.
    assert!(!html.contains("SIMULATED DATA"));
    assert!(section(&html, "header").contains("no headline comparison: no objective is ranked"));
    assert!(section(&html, "server").contains("No server scrapes recorded."));
    assert!(section(&html, "spec-decode").contains("No speculative-decoding counters recorded."));
    assert!(section(&html, "appendix").contains("No metric definitions supplied."));
    let md = render_markdown(&view);
    assert!(md.contains("_no headline artifacts recorded_"));
}

#[test]
fn a_refused_headline_shows_the_refusal_and_its_differences() {
    let fixture = Fixture::new("TP2", None);
    let refusal = match_artifacts(&fixture.artifacts[2..4]).unwrap_err();
    let mut input_view = fixture.view();
    input_view.headline = super::view::HeadlineView {
        comparison: None,
        refusal: Some(super::sections::refusal_view(&refusal)),
        empty_note: String::new(),
        left_out: Vec::new(),
    };
    let html = render_html(&input_view).unwrap();
    let head = section(&html, "headline");
    assert!(head.contains("refused") && head.contains("concurrency_per_replica"));
    assert!(render_markdown(&input_view).contains("**Refused:**"));
}

fn sample(name: &str, values: Vec<f64>) -> SampleSeries {
    SampleSeries {
        name: name.to_owned(),
        colour: 0,
        values,
        markers: vec![("p50".to_owned(), f64::NAN)],
    }
}

fn assert_clean(svg: &str) {
    assert_well_formed(svg);
    for bad in ["NaN", "inf"] {
        assert!(!svg.contains(bad), "{bad} in {svg}");
    }
}

#[test]
fn charts_refuse_empty_and_single_point_data_with_a_no_data_svg() {
    let cdf = |values: Vec<f64>| CdfChart {
        title: "TTFT".to_owned(),
        x_label: "TTFT (ms)".to_owned(),
        series: vec![sample("A", values)],
        log_x: true,
        first_wave: vec![],
        width: 0,
    };
    for svg in [
        charts::cdf_svg(&CdfChart {
            series: vec![],
            ..cdf(vec![])
        }),
        charts::cdf_svg(&cdf(vec![])),
        charts::cdf_svg(&cdf(vec![5.0])),
        charts::cdf_svg(&cdf(vec![f64::NAN, f64::INFINITY, 3.0])),
        charts::timeline_svg(&TimelineChart {
            title: "t".to_owned(),
            colour: 0,
            bars: vec![],
        }),
        charts::bars_svg(&BarChart {
            title: "b".to_owned(),
            y_label: "tok/s".to_owned(),
            bars: vec![],
        }),
        charts::curve_svg(&charts::CurveChart {
            title: "c".to_owned(),
            x_label: "x".to_owned(),
            y_label: "y".to_owned(),
            log_x: true,
            log_y: true,
            x_ticks: vec![],
            series: vec![],
            reference: None,
            width: 0,
        }),
        charts::pareto_svg(&charts::ParetoChart {
            title: "p".to_owned(),
            points: vec![],
        }),
        charts::time_series_svg(&TimeSeriesChart {
            title: "q".to_owned(),
            y_label: "requests".to_owned(),
            series: vec![LineSeriesData {
                name: "w".to_owned(),
                colour: 0,
                points: vec![(1.0, 2.0)],
            }],
        }),
    ] {
        assert_clean(&svg);
        assert!(svg.contains("no data"), "{svg}");
    }
}

#[test]
fn charts_draw_degenerate_but_valid_data_without_nan() {
    // All values equal: the axis range is widened, not divided by zero.
    let svg = charts::cdf_svg(&CdfChart {
        title: "TTFT".to_owned(),
        x_label: "TTFT (ms)".to_owned(),
        series: vec![sample("A", vec![7.0, 7.0, f64::NAN])],
        log_x: false,
        first_wave: vec![],
        width: 0,
    });
    assert_clean(&svg);
    assert!(svg.contains("1 non-finite values left out") && !svg.contains("no data"));
    // One request on a timeline and one bar are real data.
    let svg = charts::timeline_svg(&TimelineChart {
        title: "t".to_owned(),
        colour: 3,
        bars: vec![
            TimelineBar {
                replica: 0,
                request_index: 0,
                start_s: 1.0,
                first_token_s: Some(f64::NAN),
                end_s: 1.0,
                first_wave: true,
            },
            TimelineBar {
                replica: 1,
                request_index: 1,
                start_s: f64::NAN,
                first_token_s: None,
                end_s: 2.0,
                first_wave: false,
            },
        ],
    });
    assert_clean(&svg);
    assert!(svg.contains("replica 0") && svg.contains("1 requests without a finite start and end"));
    let svg = charts::bars_svg(&BarChart {
        title: "b".to_owned(),
        y_label: "tok/s".to_owned(),
        bars: vec![
            Bar {
                name: "zero".to_owned(),
                colour: 0,
                value: 0.0,
                interval: Some((f64::NAN, 1.0)),
                label: "0".to_owned(),
            },
            Bar {
                name: "nan".to_owned(),
                colour: 1,
                value: f64::NAN,
                interval: None,
                label: "n/a".to_owned(),
            },
        ],
    });
    assert_clean(&svg);
    assert!(svg.contains("zero") && !svg.contains(">nan<"));
    // Extreme values stay finite in the output.
    let svg = charts::curve_svg(&charts::CurveChart {
        title: "extreme".to_owned(),
        x_label: "x".to_owned(),
        y_label: "y".to_owned(),
        log_x: false,
        log_y: false,
        x_ticks: vec![],
        series: vec![charts::CurveSeries {
            name: "A".to_owned(),
            colour: 0,
            points: [f64::MAX, -f64::MAX, 0.0]
                .iter()
                .enumerate()
                .map(|(i, &y)| charts::CurvePoint {
                    x: i as f64,
                    y,
                    low: None,
                    high: None,
                })
                .collect(),
        }],
        reference: None,
        width: 0,
    });
    assert_well_formed(&svg);
    assert!(!svg.contains("NaN"));
}

#[test]
fn log_scale_leaves_out_zero_and_negative_values() {
    let point = |x: f64, y: f64| charts::CurvePoint {
        x,
        y,
        low: None,
        high: None,
    };
    let chart = |points: Vec<charts::CurvePoint>| charts::CurveChart {
        title: "context".to_owned(),
        x_label: "prompt tokens".to_owned(),
        y_label: "TTFT (ms)".to_owned(),
        log_x: true,
        log_y: true,
        x_ticks: vec![],
        series: vec![charts::CurveSeries {
            name: "A".to_owned(),
            colour: 0,
            points,
        }],
        reference: None,
        width: 0,
    };
    let svg = charts::curve_svg(&chart(vec![
        point(0.0, 10.0),
        point(4096.0, 0.0),
        point(8192.0, -1.0),
        point(32768.0, 900.0),
        point(131_072.0, 5000.0),
    ]));
    assert_clean(&svg);
    assert!(
        svg.contains("3 points with non-finite (or, on a log axis, non-positive) values left out")
    );
    // Only zeros: nothing to draw on a log axis.
    let svg = charts::curve_svg(&chart(vec![point(0.0, 0.0), point(0.0, 0.0)]));
    assert_clean(&svg);
    assert!(svg.contains("no data"));
    // The CDF on its log axis leaves out the same.
    let svg = charts::cdf_svg(&CdfChart {
        title: "TTFT".to_owned(),
        x_label: "TTFT (ms)".to_owned(),
        series: vec![sample("A", vec![0.0, -2.0, 5.0, 50.0, 500.0])],
        log_x: true,
        first_wave: vec![vec![5.0]],
        width: 0,
    });
    assert_clean(&svg);
    assert!(svg.contains("2 non-finite or non-positive values (log scale) left out"));
    for tick in [">\n10\n<", ">\n100\n<"] {
        assert!(svg.contains(tick), "log tick {tick} labelled");
    }
    assert!(
        svg.contains("first-wave request"),
        "the first wave is marked"
    );
}

#[test]
fn numbers_are_formatted_with_units_and_precision() {
    use super::format::{fmt_diff, fmt_interval, fmt_num, fmt_percent, fmt_ratio, fmt_unit};
    assert_eq!(fmt_num(Some(1523.4)), "1,523");
    assert_eq!(fmt_num(Some(-1_234_567.0)), "−1,234,567");
    assert_eq!(fmt_num(Some(-0.0001)), "0.000");
    assert_eq!(fmt_num(Some(87.44)), "87.4");
    assert_eq!(fmt_num(Some(3.456)), "3.46");
    assert_eq!(fmt_num(Some(0.4123)), "0.412");
    assert_eq!(fmt_num(Some(f64::NAN)), "n/a");
    assert_eq!(fmt_num(None), "n/a");
    assert_eq!(fmt_unit(Some(1500.0), "tok/s"), "1,500 tok/s");
    assert_eq!(fmt_unit(Some(f64::INFINITY), "ms"), "n/a");
    assert_eq!(fmt_diff(Some(-4.1)), "−4.10");
    assert_eq!(fmt_diff(Some(12.34)), "+12.3");
    assert_eq!(fmt_ratio(Some(1.5)), "×1.50");
    assert_eq!(fmt_percent(Some(0.734)), "73.4%");
    assert_eq!(fmt_interval(Some(81.24), Some(93.6)), "[81.2, 93.6]");
    assert_eq!(fmt_interval(Some(1.0), None), "n/a");
    use super::format::fmt_bounds;
    assert_eq!(fmt_bounds(Some(1080.0), Some(3619.0)), "[1,080, 3,619]");
    assert_eq!(fmt_bounds(Some(2594.0), None), "[2,594, ∞)");
    assert_eq!(fmt_bounds(None, Some(38.2)), "(−∞, 38.2]");
    assert_eq!(fmt_bounds(None, None), "(−∞, ∞)");
}

#[test]
fn markdown_has_the_headline_table_verdicts_and_escapes_table_syntax() {
    let fixture = Fixture::new("TP|2 `x`", None);
    let view = fixture.view();
    let md = render_markdown(&view);
    assert!(md.contains("## Headline comparison"));
    assert!(md.contains(
        "| arm | window | run | n | mean | 95% CI of mean | p50 \\[95% CI\\] | p95 (slowest 5%) \\[95% CI\\] | p99 (slowest 1%) \\[95% CI\\] |"
    ), "{md}");
    assert!(md.contains("| TP1 | all | r-tp1 | 100 |"), "{md}");
    assert!(md.contains("| TP\\|2 \\`x\\` | all | r-tp2 |"), "{md}");
    assert!(md.contains("| TP1 | all | 1,000 tok/s | single run: no run-to-run uncertainty; record ≥ 3 repeats |"), "{md}");
    assert!(md.contains("## Advance rules"));
    assert!(md.contains("| arm | all requests complete without restart or unexplained loss |"));
    assert!(
        md.contains("| TP1 | pass: 100/100 requests ok, 0 restarts |"),
        "{md}"
    );
    // Functional checks per arm, in the suite's order.
    let sj = md.find("structured\\_json 1/1").unwrap();
    assert!(md[sj..].find("tools 1/1").is_some());
    assert!(md.contains("### What may not be claimed"));
    assert!(
        md.contains("stage baseline: its arms Inferact target-only"),
        "{md}"
    );
    assert!(md.contains("PROMOTION NOT AUTHORIZED"));
    // Each stage's arms against its control, before the headline tables.
    let stage_at = md
        .find("### Stage SGLang optimization: optimization-screen")
        .unwrap();
    assert!(md.find("## Headline comparison").unwrap() > stage_at);
    // No row has an unescaped extra column.
    for line in md.lines().filter(|l| l.starts_with("| TP")) {
        let cells = line.replace("\\|", "").matches('|').count();
        assert!(cells >= 4, "{line}");
    }
}

#[test]
fn axis_ticks_are_short() {
    use super::charts::short_number;
    assert_eq!(short_number(1000.0), "1k");
    assert_eq!(short_number(1200.0), "1.2k");
    assert_eq!(short_number(8.0), "8");
    assert_eq!(short_number(2.5), "2.5");
    assert_eq!(short_number(0.05), "0.05");
    assert_eq!(short_number(35_000.0), "35k");
    assert_eq!(short_number(f64::NAN), "n/a");
}

#[test]
fn fired_stop_rules_lead_the_report_and_verdicts_name_the_request_and_canary() {
    let mut fixture = Fixture::new("TP2", None);
    fixture.artifacts[1].figures.canaries[12].foreign = vec!["ANV-00000000abcd".to_owned()];
    fixture.check = check(
        &fixture.plan,
        &crate::rules::fixtures::selection(),
        &fixture.artifacts,
        &crate::rules::stop::EvidenceFiles::names(&["restoration.json"]),
    );
    let html = render_html(&fixture.view()).unwrap();
    let header = section(&html, "header");
    assert!(header.contains("Stop rules fired (1)"));
    assert!(header.contains("cross-request contamination"));
    assert!(header.contains("request 12 returned ANV-00000000abcd"));
    assert!(header.contains("stop rule fired"));
    // Exit codes are for scripts, not for readers.
    assert!(!html.contains("exit code"));
    assert!(header.contains("anything past the stop rule that fired"));
    let verdicts = section(&html, "verdicts");
    assert!(
        verdicts
            .contains("<td class=\"num\">12</td><td>foreign canary</td><td>ANV-00000000abcd</td>")
    );
    let md = render_markdown(&fixture.view());
    assert!(md.contains("## Stop rules fired"));
    assert!(md.contains("| r-tp2 | 12 | foreign canary | ANV-00000000abcd |"));
}

/// Check that every non-void HTML element (and every SVG element) is closed in order.
fn assert_balanced_html(html: &str) {
    const VOID: [&str; 6] = ["meta", "br", "hr", "img", "input", "link"];
    let mut stack: Vec<String> = Vec::new();
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        rest = &rest[open + 1..];
        let Some(close) = rest.find('>') else {
            panic!("unterminated tag");
        };
        let tag = &rest[..close];
        rest = &rest[close + 1..];
        if tag.starts_with('!') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            let top = stack.pop().unwrap_or_default();
            assert_eq!(top, name.trim(), "</{name}> closes <{top}>");
            continue;
        }
        let name: String = tag
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        if tag.ends_with('/') || VOID.contains(&name.as_str()) {
            continue;
        }
        if name == "style" {
            let end = rest.find("</style>").expect("unclosed style");
            rest = &rest[end + "</style>".len()..];
            continue;
        }
        stack.push(name);
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
}

#[test]
fn the_page_is_balanced_html() {
    let fixture = Fixture::new("TP2", Some(IMG));
    assert_balanced_html(&render_html(&fixture.view()).unwrap());
    let plan = fixture.plan.clone();
    let empty = check(
        &plan,
        &crate::rules::fixtures::selection(),
        &[],
        &Default::default(),
    );
    let view = empty_view(&plan, &fixture.manifest, &empty);
    assert_balanced_html(&render_html(&view).unwrap());
}

#[test]
fn charts_survive_extreme_finite_values() {
    for values in [
        vec![1e300, -1e300],
        vec![1e-300, 2e-300],
        vec![f64::MAX, f64::MIN_POSITIVE],
        vec![1e15, 1e15 + 1.0],
    ] {
        let series = vec![SampleSeries {
            name: "A".to_owned(),
            colour: 0,
            values: values.clone(),
            markers: Vec::new(),
        }];
        let cdf = charts::cdf_svg(&CdfChart {
            title: "x".to_owned(),
            x_label: "x".to_owned(),
            series: series.clone(),
            log_x: false,
            first_wave: vec![values.clone()],
            width: 0,
        });
        let log_cdf = charts::cdf_svg(&CdfChart {
            title: "x".to_owned(),
            x_label: "x".to_owned(),
            series,
            log_x: true,
            first_wave: vec![],
            width: 0,
        });
        let bars = charts::bars_svg(&BarChart {
            title: "x".to_owned(),
            y_label: "x".to_owned(),
            bars: values
                .iter()
                .map(|v| Bar {
                    name: "A".to_owned(),
                    colour: 0,
                    value: *v,
                    interval: Some((*v, *v * 2.0)),
                    label: String::new(),
                })
                .collect(),
        });
        let timeline = charts::timeline_svg(&TimelineChart {
            title: "x".to_owned(),
            colour: 0,
            bars: vec![TimelineBar {
                replica: 0,
                request_index: 0,
                start_s: values[0].min(values[1]),
                first_token_s: Some(values[1]),
                end_s: values[0].max(values[1]),
                first_wave: false,
            }],
        });
        let curve = |log: bool| {
            charts::curve_svg(&charts::CurveChart {
                title: "x".to_owned(),
                x_label: "x".to_owned(),
                y_label: "x".to_owned(),
                log_x: log,
                log_y: log,
                x_ticks: vec![],
                series: vec![charts::CurveSeries {
                    name: "A".to_owned(),
                    colour: 0,
                    points: values
                        .iter()
                        .map(|v| charts::CurvePoint {
                            x: *v,
                            y: *v,
                            low: Some(*v / 2.0),
                            high: Some(*v * 2.0),
                        })
                        .collect(),
                }],
                reference: None,
                width: 0,
            })
        };
        let pareto = charts::pareto_svg(&charts::ParetoChart {
            title: "x".to_owned(),
            points: values
                .iter()
                .map(|v| charts::ParetoPoint {
                    name: "A".to_owned(),
                    colour: 0,
                    per_user: *v,
                    per_gpu: *v,
                    goodput_per_gpu: Some(*v / 2.0),
                    on_frontier: true,
                    gpus: None,
                    in_flight_per_gpu: None,
                })
                .collect(),
        });
        let queue = charts::time_series_svg(&TimeSeriesChart {
            title: "x".to_owned(),
            y_label: "x".to_owned(),
            series: vec![LineSeriesData {
                name: "A".to_owned(),
                colour: 0,
                points: values.iter().map(|v| (*v, *v)).collect(),
            }],
        });
        for svg in [
            cdf,
            log_cdf,
            bars,
            timeline,
            curve(false),
            curve(true),
            pareto,
            queue,
        ] {
            assert_well_formed(&svg);
            assert!(!svg.contains("NaN"), "{values:?}");
        }
    }
}

/// A headline-class run that is not the manifest's headline cell is named as left out, with
/// why, instead of the section claiming no headline artifacts exist.
#[test]
fn headline_class_runs_off_the_headline_cell_are_listed_as_left_out() {
    let mut fixture = Fixture::new("TP2", None);
    let mut small = fixture.artifacts[0].clone();
    small.facts.run_id = "r-small".to_owned();
    small.facts.workload.total_requests = 12;
    small.facts.workload.concurrency_per_replica = 4;
    fixture.artifacts.push(small);
    let view = fixture.view();
    assert_eq!(view.headline.left_out.len(), 1);
    let l = &view.headline.left_out[0];
    assert_eq!(l.run_id, "r-small");
    assert!(
        l.reason.contains("total_requests: 12 vs 100")
            && l.reason.contains("concurrency_per_replica: 4 vs 8"),
        "{}",
        l.reason
    );
    let html = render_html(&view).unwrap();
    assert!(section(&html, "headline").contains("Headline-class artifacts left out"));
    assert!(render_markdown(&view).contains("Headline-class artifacts left out"));
}

/// A run on the Responses API says so where the report shows its workload: its class in the
/// environment appendix, and why it is left out of the headline (the manifest's cells are
/// chat); chat runs carry no API note.
#[test]
fn a_run_on_the_responses_api_says_so() {
    let mut fixture = Fixture::new("TP2", None);
    let mut responses = fixture.artifacts[0].clone();
    responses.facts.run_id = "r-responses".to_owned();
    responses.facts.workload.api = crate::artifact::Api::Responses;
    responses.facts.fingerprint = responses.facts.workload.fingerprint();
    fixture.artifacts.push(responses);
    let view = fixture.view();
    let run = |id: &str| {
        view.appendix
            .runs
            .iter()
            .find(|r| r.run_id == id)
            .unwrap()
            .class
            .clone()
    };
    assert_eq!(
        run("r-responses"),
        "headline-sustained-output, Responses API"
    );
    assert_eq!(run("r-tp1"), "headline-sustained-output");
    assert_eq!(view.headline.left_out.len(), 1);
    let l = &view.headline.left_out[0];
    assert!(
        l.workload.ends_with("closed loop, Responses API"),
        "{}",
        l.workload
    );
    assert!(l.reason.ends_with("api: responses vs chat"), "{}", l.reason);
    let html = render_html(&view).unwrap();
    assert!(section(&html, "appendix").contains("headline-sustained-output, Responses API"));
}

/// Control characters a random model's reply carries (U+0012, ESC, DEL, C1) reach neither the
/// HTML nor the Markdown raw: they show as control pictures.
#[test]
fn control_characters_from_replies_are_shown_not_passed_through() {
    let fixture = Fixture::new("TP2", Some("x\u{12}y\u{1b}[31m\u{7f}\u{85}z"));
    let view = fixture.view();
    let html = render_html(&view).unwrap();
    let md = render_markdown(&view);
    for out in [&html, &md] {
        assert!(
            !out.chars()
                .any(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r')),
            "a control character passed through"
        );
    }
    assert!(
        html.contains("x\u{2412}y\u{241b}[31m\u{2421}\\u{85}z"),
        "no control pictures"
    );
    assert_eq!(super::visible_controls("a\tb\nc"), "a\tb\nc");
}

/// The exit code stated beside an outcome (the edge's mapping; any number would do here).
fn check_exit_code(outcome: crate::rules::Outcome) -> u8 {
    use crate::rules::Outcome;
    match outcome {
        Outcome::Holds => 0,
        Outcome::StopRuleFired | Outcome::RuleFailed => 1,
        Outcome::Incomplete => 4,
    }
}
