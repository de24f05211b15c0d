//! The campaign report's pure renderers: a [`ReportView`] goes in, an HTML page or a
//! Markdown document comes out.
//!
//! [`build()`] turns the rules' results, the plan, the manifest and the query layer's figures
//! ([`input`]) into the plain structs of formatted strings and chart data of [`view`]
//! (numbers by [`format`], the one policy); [`charts`] draws chart data as
//! SVG; [`render_html`] lays the view out with the tera templates in `templates/`
//! (embedded, autoescape on, so every string from an artifact is escaped and only our own
//! SVG is inserted raw); [`render_markdown`] writes the same view as Markdown. Nothing here
//! reads files, computes a figure or touches the network.

pub mod build;
pub mod charts;
pub mod format;
pub mod input;
pub mod markdown;
pub mod sections;
pub mod summary;
pub mod table;
pub mod text;
pub mod view;

use serde::Serialize;

pub use build::build;
pub use input::ReportInput;
pub use markdown::render_markdown;
pub use view::ReportView;

use view::{ComparisonView, ScreenView, ServerRunView};

/// The `id` of each of the report's twelve `<section>`s, in page order (`header` holds the
/// decision summary, the first screen).
pub const SECTION_IDS: [&str; 12] = [
    "header",
    "coverage",
    "stages",
    "tradeoff",
    "sweeps",
    "headline",
    "topology",
    "spec-decode",
    "server",
    "verdicts",
    "plan",
    "appendix",
];

const REPORT_TEMPLATE: &str = include_str!("../../templates/report.html.tera");
const COMPARISON_TEMPLATE: &str = include_str!("../../templates/comparison.html.tera");

/// Why the HTML report could not be rendered (a template defect, never bad data).
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("report template `{template}` failed: {message}")]
    Template { template: String, message: String },
}

impl ReportError {
    fn template(template: &str, error: &tera::Error) -> Self {
        // tera's Display shows only the outer error; the cause is in its source chain.
        let mut message = error.to_string();
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        ReportError::Template {
            template: template.to_owned(),
            message,
        }
    }
}

/// A comparison's charts as SVG.
#[derive(Debug, Serialize)]
struct ComparisonSvg {
    ttft_cdf: String,
    tpot_cdf: String,
    e2e_cdf: String,
    timelines: Vec<String>,
    throughput: String,
}

impl ComparisonSvg {
    /// Draw the charts; the per-run timelines (the heaviest: one bar per request, drawn only
    /// when `timelines`) on a second thread while this one draws the rest.
    fn draw(c: &ComparisonView, timelines: bool) -> Self {
        std::thread::scope(|scope| {
            let drawn = scope.spawn(|| {
                if !timelines {
                    return Vec::new();
                }
                c.charts
                    .timelines
                    .iter()
                    .map(charts::timeline_svg)
                    .collect::<Vec<_>>()
            });
            let ttft_cdf = charts::cdf_svg(&c.charts.ttft_cdf);
            let tpot_cdf = charts::cdf_svg(&c.charts.tpot_cdf);
            let e2e_cdf = charts::cdf_svg(&c.charts.e2e_cdf);
            let throughput = charts::bars_svg(&c.charts.throughput);
            Self {
                ttft_cdf,
                tpot_cdf,
                e2e_cdf,
                // Drawing is pure; a panic there is a bug worth surfacing as one.
                timelines: drawn
                    .join()
                    .unwrap_or_else(|e| std::panic::resume_unwind(e)),
                throughput,
            }
        })
    }
}

#[derive(Debug, Serialize)]
struct ScreenPage<'a> {
    view: &'a ScreenView,
    svg: Option<ComparisonSvg>,
}

#[derive(Debug, Serialize)]
struct ServerPage<'a> {
    run: &'a ServerRunView,
    svg: Option<String>,
}

/// A group of small multiples as SVG.
#[derive(Debug, Serialize)]
struct GroupSvg<'a> {
    title: &'a str,
    note: &'a str,
    charts: Vec<String>,
}

impl<'a> GroupSvg<'a> {
    fn draw(group: &'a sections::curves::CurveGroup) -> Self {
        Self {
            title: &group.title,
            note: &group.note,
            charts: group.charts.iter().map(charts::curve_svg).collect(),
        }
    }
}

/// The decision charts as SVG.
#[derive(Debug, Serialize)]
struct ChartsSvg<'a> {
    pareto: Vec<String>,
    sweeps: Vec<GroupSvg<'a>>,
    context: Option<GroupSvg<'a>>,
    capacity: Vec<String>,
    positions: Option<String>,
}

/// The template's context: the view and the charts drawn from it.
#[derive(Debug, Serialize)]
struct Page<'a> {
    view: &'a ReportView,
    headline_svg: Option<ComparisonSvg>,
    screens: Vec<ScreenPage<'a>>,
    server: Vec<ServerPage<'a>>,
    charts: ChartsSvg<'a>,
    /// The sessions-and-cache section's charts: TTFT by turn, then KV usage per run.
    cache_svg: Vec<String>,
}

/// The report as one self-contained HTML page.
pub fn render_html(view: &ReportView) -> Result<String, ReportError> {
    let c = &view.charts;
    let page = Page {
        view,
        headline_svg: view
            .headline
            .comparison
            .as_ref()
            .map(|c| ComparisonSvg::draw(c, true)),
        screens: view
            .screens
            .iter()
            .map(|screen| ScreenPage {
                view: screen,
                svg: screen
                    .comparison
                    .as_ref()
                    .map(|c| ComparisonSvg::draw(c, false)),
            })
            .collect(),
        server: view
            .server
            .runs
            .iter()
            .map(|run| ServerPage {
                run,
                svg: run.chart.as_ref().map(charts::time_series_svg),
            })
            .collect(),
        charts: ChartsSvg {
            pareto: c.pareto.iter().map(charts::pareto_svg).collect(),
            sweeps: c.sweeps.iter().map(GroupSvg::draw).collect(),
            context: c.context.as_ref().map(GroupSvg::draw),
            capacity: c.capacity.iter().map(charts::curve_svg).collect(),
            positions: c.positions.as_ref().map(charts::curve_svg),
        },
        cache_svg: view
            .cache
            .turn_chart
            .iter()
            .map(charts::curve_svg)
            .chain(view.cache.kv_charts.iter().map(charts::time_series_svg))
            .collect(),
    };
    let mut tera = tera::Tera::default();
    tera.autoescape_on(vec![".html"]);
    tera.add_raw_templates(vec![
        ("comparison.html", COMPARISON_TEMPLATE),
        ("report.html", REPORT_TEMPLATE),
    ])
    .map_err(|e| ReportError::template("report.html", &e))?;
    let context = tera::Context::from_serialize(&page)
        .map_err(|e| ReportError::template("report.html", &e))?;
    tera.render("report.html", &context)
        .map(|html| visible_controls(&html))
        .map_err(|e| ReportError::template("report.html", &e))
}

/// `text` with every control character a reply or a server error may carry made visible:
/// C0 controls (but tab, line feed and carriage return) as their Unicode control pictures
/// (U+0012 → ␒), DEL as ␡, C1 controls as `\u{…}`. HTML forbids them and terminals act on
/// them; the report shows what was received without letting it act.
pub fn visible_controls(text: &str) -> String {
    if !text.chars().any(is_hidden_control) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            c if !is_hidden_control(c) => out.push(c),
            '\u{7f}' => out.push('\u{2421}'),
            c if (c as u32) < 0x20 => {
                out.push(char::from_u32(0x2400 + c as u32).unwrap_or('\u{fffd}'))
            }
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    out
}

fn is_hidden_control(c: char) -> bool {
    c.is_control() && !matches!(c, '\t' | '\n' | '\r')
}

#[cfg(test)]
mod tests;
