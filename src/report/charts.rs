//! The report's charts: pure functions from plain chart data to an SVG string, drawn with
//! plotters' SVG backend (no font libraries: text sizes are estimated).
//!
//! Every function filters out values that are not finite numbers (and, on log axes, values
//! that are not positive) before drawing, and says how many it left out in the chart's
//! footnote. Data too thin to draw (no series, or fewer than two points where a
//! distribution or a curve is drawn) renders a small SVG that says so; no input panics.
//! Text drawn from data (titles, arm names in legends) is XML-escaped by the backend;
//! [`no_data_svg`] escapes its own.
//!
//! Colours come from one palette ([`PALETTE`], the Okabe–Ito colour-blind-safe set) indexed
//! by a colour number the view assigns per arm, so an arm keeps its colour on every chart.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Serialize;

/// Chart width in SVG user units (scaled to the page by CSS; fits a laptop and an A4 page).
pub const WIDTH: u32 = 880;
/// Chart height of the ordinary charts.
pub const HEIGHT: u32 = 400;

/// Okabe–Ito colours (yellow left out: unreadable on white), then two greys.
pub const PALETTE: [(u8, u8, u8); 8] = [
    (0x00, 0x72, 0xB2),
    (0xE6, 0x9F, 0x00),
    (0x00, 0x9E, 0x73),
    (0xCC, 0x79, 0xA7),
    (0xD5, 0x5E, 0x00),
    (0x56, 0xB4, 0xE9),
    (0x33, 0x33, 0x33),
    (0x99, 0x99, 0x99),
];

/// The palette colour `index` (wrapping).
pub fn colour(index: usize) -> RGBColor {
    let (r, g, b) = PALETTE[index % PALETTE.len()];
    RGBColor(r, g, b)
}

/// The palette colour `index` as a CSS hex string, for swatches in tables.
pub fn colour_hex(index: usize) -> String {
    let (r, g, b) = PALETTE[index % PALETTE.len()];
    format!("#{r:02x}{g:02x}{b:02x}")
}

const FONT: &str = "sans-serif";

/// One arm's sample of a metric (one value per request), in the metric's unit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SampleSeries {
    /// Legend label, e.g. the arm name.
    pub name: String,
    /// Palette index.
    pub colour: usize,
    pub values: Vec<f64>,
    /// Reference lines the query layer computed (e.g. `p50`, `p95`), drawn across the strip.
    pub markers: Vec<(String, f64)>,
}

/// Empirical CDF of one metric, one line per arm.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CdfChart {
    pub title: String,
    /// X axis label with unit, e.g. `TTFT (ms)`.
    pub x_label: String,
    pub series: Vec<SampleSeries>,
}

/// Distribution of one metric per arm: every request as a dot (deterministic jitter) with
/// the query layer's percentile markers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DistributionChart {
    pub title: String,
    /// Y axis label with unit, e.g. `TPOT (ms)`.
    pub y_label: String,
    pub series: Vec<SampleSeries>,
}

/// One request on a timeline, seconds since the run's start.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TimelineBar {
    pub replica: u32,
    pub request_index: i64,
    pub start_s: f64,
    /// First content delta; `None` when the request produced none.
    pub first_token_s: Option<f64>,
    pub end_s: f64,
}

/// Per-request Gantt chart of one run: a bar from start to end per request, a marker at
/// the first token, requests grouped by replica.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimelineChart {
    pub title: String,
    /// Palette index of the arm; replica k > 0 uses the next colours.
    pub colour: usize,
    pub bars: Vec<TimelineBar>,
}

/// One bar: an arm's figure with an optional interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bar {
    pub name: String,
    pub colour: usize,
    pub value: f64,
    /// Interval drawn as an error bar (e.g. 95% CI across repeats).
    pub interval: Option<(f64, f64)>,
    /// Text printed above the bar, already formatted (e.g. `1,523 tok/s`).
    pub label: String,
}

/// Bars per arm (aggregate output throughput).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BarChart {
    pub title: String,
    /// Y axis label with unit, e.g. `aggregate output (tok/s)`.
    pub y_label: String,
    pub bars: Vec<Bar>,
}

/// One request of a context-curve run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ContextPoint {
    /// Actual prompt tokens (API usage).
    pub prompt_tokens: f64,
    pub ttft_ms: f64,
    pub effective_prefill_tps: f64,
}

/// One arm's context-curve requests.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContextSeries {
    pub name: String,
    pub colour: usize,
    pub points: Vec<ContextPoint>,
}

/// TTFT and effective prefill against actual prompt tokens, log scales, per arm.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContextChart {
    pub title: String,
    pub series: Vec<ContextSeries>,
}

/// One line of a time series: `(seconds since run start, value)`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineSeriesData {
    pub name: String,
    pub colour: usize,
    pub points: Vec<(f64, f64)>,
}

/// Server-side time series (queue depth and running requests) of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimeSeriesChart {
    pub title: String,
    pub y_label: String,
    pub series: Vec<LineSeriesData>,
}

/// XML-escape text for SVG content and attribute values.
pub fn escape_xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// A small SVG stating that a chart has nothing to draw, and why.
pub fn no_data_svg(title: &str, reason: &str) -> String {
    let (w, h) = (WIDTH, 120);
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         viewBox=\"0 0 {w} {h}\" role=\"img\" class=\"no-data\">\
         <title>{title}: no data</title>\
         <rect x=\"1\" y=\"1\" width=\"{rw}\" height=\"{rh}\" fill=\"#f6f6f6\" stroke=\"#999\" \
         stroke-dasharray=\"6 4\"/>\
         <text x=\"{cx}\" y=\"48\" text-anchor=\"middle\" font-family=\"{FONT}\" \
         font-size=\"17\" font-weight=\"bold\" fill=\"#333\">{title}: no data</text>\
         <text x=\"{cx}\" y=\"78\" text-anchor=\"middle\" font-family=\"{FONT}\" \
         font-size=\"14\" fill=\"#555\">{reason}</text></svg>",
        title = escape_xml(title),
        reason = escape_xml(reason),
        rw = w - 2,
        rh = h - 2,
        cx = w / 2,
    )
}

/// Finite values only, with how many were dropped.
fn finite(values: &[f64]) -> (Vec<f64>, usize) {
    let kept: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let dropped = values.len() - kept.len();
    (kept, dropped)
}

/// A `(low, high)` range around finite values, widened when degenerate; `pad` is the
/// fraction of the span added on each side.
fn span(values: impl IntoIterator<Item = f64>, pad: f64) -> Option<(f64, f64)> {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.into_iter().filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !(lo.is_finite() && hi.is_finite()) {
        return None;
    }
    let width = hi - lo;
    let (a, b) = if width == 0.0 {
        let half = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        (lo - half, hi + half)
    } else {
        (lo - width * pad, hi + width * pad)
    };
    // Values so extreme that the padded span overflows cannot be laid out on an axis.
    (a.is_finite() && b.is_finite() && (b - a).is_finite() && b > a).then_some((a, b))
}

/// A positive `(low, high)` range for a log axis, one factor of `pad` beyond the data.
fn log_span(values: impl IntoIterator<Item = f64>) -> Option<(f64, f64)> {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.into_iter().filter(|v| v.is_finite() && *v > 0.0) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !(lo.is_finite() && hi.is_finite()) {
        return None;
    }
    let (a, b) = (lo / 1.5, hi * 1.5);
    (a > 0.0 && b.is_finite()).then_some((a, b))
}

/// Compact number for axis ticks: `1.2k`, `35`, `0.42`, `2` (no trailing `.0`).
pub fn short_number(v: f64) -> String {
    let text = short_number_raw(v);
    match text.split_once(".0") {
        Some((int, suffix)) if suffix.chars().all(|c| !c.is_ascii_digit()) => {
            format!("{int}{suffix}")
        }
        _ => text,
    }
}

fn short_number_raw(v: f64) -> String {
    if !v.is_finite() {
        return "n/a".to_owned();
    }
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 10.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Run a drawing closure on a fresh SVG string, adding an accessible `<title>`; any
/// drawing error becomes a no-data SVG naming the error.
fn draw_svg<F>(title: &str, size: (u32, u32), draw: F) -> String
where
    F: FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), String>,
{
    let mut svg = String::new();
    let result = {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        let drawn = root
            .fill(&WHITE)
            .map_err(|e| e.to_string())
            .and_then(|()| draw(&root));
        drawn.and_then(|()| root.present().map_err(|e| e.to_string()))
    };
    match result {
        Ok(()) => with_title(&svg, title),
        Err(error) => no_data_svg(title, &format!("chart could not be drawn: {error}")),
    }
}

/// Insert `role="img"` and a `<title>` right after the opening `<svg …>` tag.
fn with_title(svg: &str, title: &str) -> String {
    match svg
        .find("<svg")
        .and_then(|start| svg[start..].find('>').map(|end| start + end))
    {
        Some(end) => format!(
            "{} role=\"img\"><title>{}</title>{}",
            &svg[..end],
            escape_xml(title),
            &svg[end + 1..]
        ),
        None => svg.to_owned(),
    }
}

fn err<E: std::fmt::Display>(error: E) -> String {
    error.to_string()
}

/// A footnote listing dropped values, empty when none were dropped.
fn dropped_note(dropped: usize, what: &str) -> String {
    if dropped == 0 {
        String::new()
    } else {
        format!("{dropped} {what} left out")
    }
}

fn footnote(root: &DrawingArea<SVGBackend<'_>, Shift>, note: &str) -> Result<(), String> {
    if note.is_empty() {
        return Ok(());
    }
    let (_, h) = root.dim_in_pixel();
    let style = TextStyle::from((FONT, 15).into_font())
        .color(&RGBColor(0x55, 0x55, 0x55))
        .pos(Pos::new(HPos::Left, VPos::Bottom));
    root.draw_text(note, &style, (8, h as i32 - 4)).map_err(err)
}

/// Empirical CDF, one step line per arm: y is the fraction of requests at or below x.
pub fn cdf_svg(chart: &CdfChart) -> String {
    let mut dropped = 0;
    let series: Vec<(String, usize, Vec<f64>)> = chart
        .series
        .iter()
        .map(|s| {
            let (mut values, d) = finite(&s.values);
            dropped += d;
            values.sort_by(f64::total_cmp);
            (s.name.clone(), s.colour, values)
        })
        .filter(|(_, _, values)| !values.is_empty())
        .collect();
    let total: usize = series.iter().map(|(_, _, v)| v.len()).sum();
    if total < 2 {
        return no_data_svg(&chart.title, "fewer than two finite values recorded");
    }
    let Some((x0, x1)) = span(series.iter().flat_map(|(_, _, v)| v.iter().copied()), 0.03) else {
        return no_data_svg(&chart.title, "no finite values");
    };
    let note = dropped_note(dropped, "non-finite values");
    draw_svg(&chart.title, (WIDTH, HEIGHT), |root| {
        let mut ctx = ChartBuilder::on(root)
            .caption(&chart.title, (FONT, 22))
            .margin(14)
            .x_label_area_size(56)
            .y_label_area_size(76)
            .build_cartesian_2d(x0..x1, 0f64..1.02f64)
            .map_err(err)?;
        ctx.configure_mesh()
            .x_desc(chart.x_label.as_str())
            .y_desc("fraction of requests ≤ x")
            .label_style((FONT, 16))
            .axis_desc_style((FONT, 17))
            .x_label_formatter(&|v| short_number(*v))
            .light_line_style(RGBColor(0xee, 0xee, 0xee))
            .draw()
            .map_err(err)?;
        for (name, index, values) in &series {
            let n = values.len() as f64;
            let mut points = Vec::with_capacity(values.len() * 2);
            for (i, v) in values.iter().enumerate() {
                points.push((*v, i as f64 / n));
                points.push((*v, (i + 1) as f64 / n));
            }
            let c = colour(*index);
            ctx.draw_series(LineSeries::new(points, c.stroke_width(2)))
                .map_err(err)?
                .label(format!("{name} (n = {})", values.len()))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(3))
                });
        }
        ctx.configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.9))
            .border_style(RGBColor(0x99, 0x99, 0x99))
            .label_font((FONT, 16))
            .draw()
            .map_err(err)?;
        footnote(root, &note)
    })
}

/// Deterministic jitter in [−0.25, 0.25] for the i-th dot (golden-ratio sequence).
fn jitter(i: usize) -> f64 {
    ((i as f64 * 0.618_033_988_75).fract() - 0.5) * 0.5
}

/// Draw category names under a categorical x axis at 0, 1, 2, …
fn category_labels<'a>(
    root: &DrawingArea<SVGBackend<'a>, Shift>,
    positions: &[(String, (i32, i32))],
) -> Result<(), String> {
    let style = TextStyle::from((FONT, 15).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    // Each name wraps at word boundaries to its slot (about 8 px per character), at most
    // three lines, the last shortened with an ellipsis.
    let slot = match positions {
        [(_, (a, _)), (_, (b, _)), ..] => (b - a).unsigned_abs() as usize,
        _ => WIDTH as usize,
    };
    let per_line = (slot / 8).max(4);
    for (name, (x, y)) in positions {
        // A second part after a newline (e.g. `n = 100`) gets its own last line.
        let (head, tail) = name.split_once('\n').unwrap_or((name, ""));
        let mut lines = wrap_label(head, per_line, if tail.is_empty() { 3 } else { 2 });
        lines.extend(wrap_label(tail, per_line, 1));
        for (i, line) in lines.iter().enumerate() {
            root.draw_text(line, &style, (*x, *y + 6 + 17 * i as i32))
                .map_err(err)?;
        }
    }
    Ok(())
}

/// `text` in lines of at most `width` characters (a longer word is cut), at most `lines`
/// lines; text left over ends the last line with `…`.
fn wrap_label(text: &str, width: usize, lines: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut current = String::new();
    for word in text.split_whitespace() {
        let word: String = word.chars().take(width).collect();
        if current.is_empty() {
            current = word;
        } else if current.chars().count() + 1 + word.chars().count() <= width {
            current.push(' ');
            current.push_str(&word);
        } else {
            out.push(std::mem::replace(&mut current, word));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    if out.len() > lines {
        out.truncate(lines);
        let last = &mut out[lines - 1];
        let keep: String = last.chars().take(width.saturating_sub(1)).collect();
        *last = format!("{keep}…");
    }
    out
}

/// Strip plot per arm: each request a dot, the query layer's percentiles as short lines.
pub fn distribution_svg(chart: &DistributionChart) -> String {
    let mut dropped = 0;
    let series: Vec<(&SampleSeries, Vec<f64>)> = chart
        .series
        .iter()
        .map(|s| {
            let (values, d) = finite(&s.values);
            dropped += d;
            (s, values)
        })
        .collect();
    let total: usize = series.iter().map(|(_, v)| v.len()).sum();
    if series.is_empty() || total < 2 {
        return no_data_svg(&chart.title, "fewer than two finite values recorded");
    }
    let all = series.iter().flat_map(|(s, v)| {
        v.iter()
            .copied()
            .chain(s.markers.iter().map(|(_, m)| *m))
            .collect::<Vec<_>>()
    });
    let Some((y0, y1)) = span(all, 0.05) else {
        return no_data_svg(&chart.title, "no finite values");
    };
    let k = series.len() as f64;
    let note = dropped_note(dropped, "non-finite values");
    draw_svg(&chart.title, (WIDTH, HEIGHT), |root| {
        let mut ctx = ChartBuilder::on(root)
            .caption(&chart.title, (FONT, 22))
            .margin(14)
            .x_label_area_size(64)
            .y_label_area_size(76)
            .build_cartesian_2d(-0.5f64..k - 0.5, y0..y1)
            .map_err(err)?;
        ctx.configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .x_label_formatter(&|_| String::new())
            .y_desc(chart.y_label.as_str())
            .label_style((FONT, 16))
            .axis_desc_style((FONT, 17))
            .y_label_formatter(&|v| short_number(*v))
            .light_line_style(RGBColor(0xee, 0xee, 0xee))
            .draw()
            .map_err(err)?;
        let mut names = Vec::new();
        for (i, (s, values)) in series.iter().enumerate() {
            let x = i as f64;
            let c = colour(s.colour);
            ctx.draw_series(
                values
                    .iter()
                    .enumerate()
                    .map(|(j, v)| Circle::new((x + jitter(j), *v), 2, c.mix(0.55).filled())),
            )
            .map_err(err)?;
            for (label, m) in s.markers.iter().filter(|(_, m)| m.is_finite()) {
                ctx.draw_series(std::iter::once(PathElement::new(
                    vec![(x - 0.3, *m), (x + 0.3, *m)],
                    BLACK.stroke_width(2),
                )))
                .map_err(err)?;
                ctx.draw_series(std::iter::once(Text::new(
                    label.clone(),
                    (x + 0.31, *m),
                    TextStyle::from((FONT, 15).into_font()).pos(Pos::new(HPos::Left, VPos::Center)),
                )))
                .map_err(err)?;
            }
            // The arms are named under the axis, with their counts: no legend to cover dots.
            names.push((
                format!("{}\nn = {}", s.name, values.len()),
                ctx.backend_coord(&(x, y0)),
            ));
        }
        category_labels(root, &names)?;
        footnote(root, &note)
    })
}

/// Gantt chart of one run: per request a bar from start to end, a black tick at the first
/// token; replicas stacked top to bottom, requests by start time within each.
pub fn timeline_svg(chart: &TimelineChart) -> String {
    let mut bars: Vec<TimelineBar> = chart
        .bars
        .iter()
        .copied()
        .filter(|b| b.start_s.is_finite() && b.end_s.is_finite() && b.end_s >= b.start_s)
        .collect();
    let dropped = chart.bars.len() - bars.len();
    if bars.is_empty() {
        return no_data_svg(&chart.title, "no request with a recorded start and end");
    }
    bars.sort_by(|a, b| {
        a.replica
            .cmp(&b.replica)
            .then(a.start_s.total_cmp(&b.start_s))
            .then(a.request_index.cmp(&b.request_index))
    });
    let Some((x0, x1)) = span(bars.iter().flat_map(|b| [b.start_s, b.end_s]), 0.01) else {
        return no_data_svg(&chart.title, "no finite times");
    };
    let rows = bars.len();
    let height = (150 + rows * 5).clamp(260, 900) as u32;
    let note = dropped_note(dropped, "requests without a finite start and end");
    draw_svg(&chart.title, (WIDTH, height), |root| {
        let mut ctx = ChartBuilder::on(root)
            .caption(&chart.title, (FONT, 22))
            .margin(14)
            .x_label_area_size(56)
            .y_label_area_size(30)
            .build_cartesian_2d(x0..x1, 0f64..rows as f64)
            .map_err(err)?;
        ctx.configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .y_label_formatter(&|_| String::new())
            .x_desc("time since run start (s)")
            .y_desc("requests by replica")
            .label_style((FONT, 16))
            .axis_desc_style((FONT, 17))
            .x_label_formatter(&|v| short_number(*v))
            .light_line_style(RGBColor(0xee, 0xee, 0xee))
            .draw()
            .map_err(err)?;
        let row_y = |row: usize| (rows - row) as f64 - 0.5;
        let mut replicas: Vec<u32> = bars.iter().map(|b| b.replica).collect();
        replicas.dedup();
        for (k, replica) in replicas.iter().enumerate() {
            let c = colour(chart.colour + k);
            let first_row = bars.iter().position(|b| b.replica == *replica).unwrap_or(0);
            ctx.draw_series(
                bars.iter()
                    .enumerate()
                    .filter(|(_, b)| b.replica == *replica)
                    .map(|(row, b)| {
                        let y = row_y(row);
                        Rectangle::new([(b.start_s, y - 0.38), (b.end_s, y + 0.38)], c.filled())
                    }),
            )
            .map_err(err)?
            .label(format!("replica {replica}: request start → end"))
            .legend(move |(x, y)| Rectangle::new([(x, y - 4), (x + 16, y + 4)], c.filled()));
            ctx.draw_series(std::iter::once(Text::new(
                format!("replica {replica}"),
                (x0, row_y(first_row) + 0.5),
                TextStyle::from((FONT, 15).into_font()).pos(Pos::new(HPos::Left, VPos::Top)),
            )))
            .map_err(err)?;
        }
        let ticks: Vec<(f64, f64)> = bars
            .iter()
            .enumerate()
            .filter_map(|(row, b)| {
                b.first_token_s
                    .filter(|t| t.is_finite())
                    .map(|t| (t, row_y(row)))
            })
            .collect();
        if !ticks.is_empty() {
            ctx.draw_series(ticks.iter().map(|(t, y)| {
                PathElement::new(vec![(*t, y - 0.45), (*t, y + 0.45)], BLACK.stroke_width(2))
            }))
            .map_err(err)?
            .label("first token")
            .legend(|(x, y)| {
                PathElement::new(vec![(x + 8, y - 6), (x + 8, y + 6)], BLACK.stroke_width(2))
            });
        }
        ctx.configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.9))
            .border_style(RGBColor(0x99, 0x99, 0x99))
            .label_font((FONT, 16))
            .draw()
            .map_err(err)?;
        footnote(root, &note)
    })
}

/// Bars per arm from zero, with an error bar where an interval is given and the
/// pre-formatted label above each bar.
pub fn bars_svg(chart: &BarChart) -> String {
    let bars: Vec<&Bar> = chart
        .bars
        .iter()
        .filter(|b| b.value.is_finite() && b.value >= 0.0)
        .collect();
    let dropped = chart.bars.len() - bars.len();
    if bars.is_empty() {
        return no_data_svg(&chart.title, "no finite, non-negative figure recorded");
    }
    let top = bars
        .iter()
        .flat_map(|b| {
            std::iter::once(b.value).chain(b.interval.map(|(_, hi)| hi).filter(|hi| hi.is_finite()))
        })
        .fold(0.0f64, f64::max);
    let top = if top > 0.0 { top * 1.15 } else { 1.0 };
    if !top.is_finite() {
        return no_data_svg(&chart.title, "figures too large to draw");
    }
    let k = bars.len() as f64;
    let note = dropped_note(dropped, "arms without a finite figure");
    draw_svg(&chart.title, (WIDTH, HEIGHT), |root| {
        let mut ctx = ChartBuilder::on(root)
            .caption(&chart.title, (FONT, 22))
            .margin(14)
            .x_label_area_size(60)
            .y_label_area_size(76)
            .build_cartesian_2d(-0.5f64..k - 0.5, 0f64..top)
            .map_err(err)?;
        ctx.configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .x_label_formatter(&|_| String::new())
            .y_desc(chart.y_label.as_str())
            .label_style((FONT, 16))
            .axis_desc_style((FONT, 17))
            .y_label_formatter(&|v| short_number(*v))
            .light_line_style(RGBColor(0xee, 0xee, 0xee))
            .draw()
            .map_err(err)?;
        let mut names = Vec::new();
        for (i, bar) in bars.iter().enumerate() {
            let x = i as f64;
            let c = colour(bar.colour);
            ctx.draw_series(std::iter::once(Rectangle::new(
                [(x - 0.32, 0.0), (x + 0.32, bar.value)],
                c.filled(),
            )))
            .map_err(err)?;
            let mut label_at = bar.value;
            if let Some((lo, hi)) = bar
                .interval
                .filter(|(lo, hi)| lo.is_finite() && hi.is_finite())
            {
                let (lo, hi) = (lo.max(0.0), hi.max(0.0));
                ctx.draw_series(std::iter::once(PathElement::new(
                    vec![(x, lo), (x, hi)],
                    BLACK.stroke_width(2),
                )))
                .map_err(err)?;
                ctx.draw_series([lo, hi].into_iter().map(|v| {
                    PathElement::new(vec![(x - 0.08, v), (x + 0.08, v)], BLACK.stroke_width(2))
                }))
                .map_err(err)?;
                label_at = label_at.max(hi);
            }
            ctx.draw_series(std::iter::once(Text::new(
                bar.label.clone(),
                (x, label_at),
                TextStyle::from((FONT, 16).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom)),
            )))
            .map_err(err)?;
            names.push((bar.name.clone(), ctx.backend_coord(&(x, 0.0))));
        }
        category_labels(root, &names)?;
        footnote(root, &note)
    })
}

/// One panel of the context chart: y label, y range, and the value it plots.
type Panel = (&'static str, (f64, f64), fn(&ContextPoint) -> f64);

/// Two panels against actual prompt tokens (log x): TTFT (log y) and effective prefill
/// (log y), one colour per arm.
pub fn context_svg(chart: &ContextChart) -> String {
    let mut dropped = 0;
    let series: Vec<(&ContextSeries, Vec<ContextPoint>)> = chart
        .series
        .iter()
        .map(|s| {
            let kept: Vec<ContextPoint> = s
                .points
                .iter()
                .copied()
                .filter(|p| {
                    [p.prompt_tokens, p.ttft_ms, p.effective_prefill_tps]
                        .iter()
                        .all(|v| v.is_finite() && *v > 0.0)
                })
                .collect();
            dropped += s.points.len() - kept.len();
            (s, kept)
        })
        .filter(|(_, kept)| !kept.is_empty())
        .collect();
    let total: usize = series.iter().map(|(_, p)| p.len()).sum();
    if total < 2 {
        return no_data_svg(
            &chart.title,
            "fewer than two requests with positive prompt tokens, TTFT and prefill",
        );
    }
    let points = || series.iter().flat_map(|(_, p)| p.iter().copied());
    let (Some(xr), Some(tr), Some(pr)) = (
        log_span(points().map(|p| p.prompt_tokens)),
        log_span(points().map(|p| p.ttft_ms)),
        log_span(points().map(|p| p.effective_prefill_tps)),
    ) else {
        return no_data_svg(&chart.title, "no positive values for a log scale");
    };
    let note = dropped_note(
        dropped,
        "requests with zero, negative or non-finite values (log scale)",
    );
    draw_svg(&chart.title, (WIDTH, HEIGHT + 20), |root| {
        let titled = root.titled(&chart.title, (FONT, 22)).map_err(err)?;
        let panels = titled.split_evenly((1, 2));
        let panel_defs: [Panel; 2] = [
            ("TTFT (ms)", tr, |p| p.ttft_ms),
            ("effective prefill (tok/s)", pr, |p| p.effective_prefill_tps),
        ];
        for (panel, (y_label, (y0, y1), pick)) in panels.iter().zip(panel_defs) {
            let mut ctx = ChartBuilder::on(panel)
                .margin(12)
                .x_label_area_size(54)
                .y_label_area_size(72)
                .build_cartesian_2d((xr.0..xr.1).log_scale(), (y0..y1).log_scale())
                .map_err(err)?;
            ctx.configure_mesh()
                .x_desc("actual prompt tokens (log)")
                .y_desc(format!("{y_label} (log)"))
                .label_style((FONT, 15))
                .axis_desc_style((FONT, 16))
                .x_label_formatter(&|v| short_number(*v))
                .y_label_formatter(&|v| short_number(*v))
                .light_line_style(RGBColor(0xee, 0xee, 0xee))
                .draw()
                .map_err(err)?;
            for (s, kept) in &series {
                let c = colour(s.colour);
                ctx.draw_series(
                    kept.iter()
                        .map(|p| Circle::new((p.prompt_tokens, pick(p)), 3, c.mix(0.7).filled())),
                )
                .map_err(err)?
                .label(s.name.clone())
                .legend(move |(x, y)| Circle::new((x + 8, y), 4, c.filled()));
            }
            ctx.configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.9))
                .border_style(RGBColor(0x99, 0x99, 0x99))
                .label_font((FONT, 15))
                .draw()
                .map_err(err)?;
        }
        footnote(root, &note)
    })
}

/// Lines over time (server queue depth and running requests).
pub fn time_series_svg(chart: &TimeSeriesChart) -> String {
    let mut dropped = 0;
    let series: Vec<(&LineSeriesData, Vec<(f64, f64)>)> = chart
        .series
        .iter()
        .map(|s| {
            let mut kept: Vec<(f64, f64)> = s
                .points
                .iter()
                .copied()
                .filter(|(t, v)| t.is_finite() && v.is_finite())
                .collect();
            dropped += s.points.len() - kept.len();
            kept.sort_by(|a, b| a.0.total_cmp(&b.0));
            (s, kept)
        })
        .filter(|(_, kept)| !kept.is_empty())
        .collect();
    let total: usize = series.iter().map(|(_, p)| p.len()).sum();
    if total < 2 {
        return no_data_svg(&chart.title, "fewer than two samples recorded");
    }
    let (Some((x0, x1)), Some((_, y1))) = (
        span(
            series.iter().flat_map(|(_, p)| p.iter().map(|(t, _)| *t)),
            0.01,
        ),
        span(
            series
                .iter()
                .flat_map(|(_, p)| p.iter().map(|(_, v)| *v))
                .chain([0.0]),
            0.08,
        ),
    ) else {
        return no_data_svg(&chart.title, "no finite samples");
    };
    let note = dropped_note(dropped, "non-finite samples");
    draw_svg(&chart.title, (WIDTH, HEIGHT), |root| {
        let mut ctx = ChartBuilder::on(root)
            .caption(&chart.title, (FONT, 22))
            .margin(14)
            .x_label_area_size(56)
            .y_label_area_size(76)
            .build_cartesian_2d(x0..x1, 0f64..y1.max(1.0))
            .map_err(err)?;
        ctx.configure_mesh()
            .x_desc("time since run start (s)")
            .y_desc(chart.y_label.as_str())
            .label_style((FONT, 16))
            .axis_desc_style((FONT, 17))
            .x_label_formatter(&|v| short_number(*v))
            .y_label_formatter(&|v| short_number(*v))
            .light_line_style(RGBColor(0xee, 0xee, 0xee))
            .draw()
            .map_err(err)?;
        for (s, kept) in &series {
            let c = colour(s.colour);
            // Gauges hold their value until the next scrape: draw steps.
            let mut steps = Vec::with_capacity(kept.len() * 2);
            for (i, (t, v)) in kept.iter().enumerate() {
                if i > 0 {
                    steps.push((*t, kept[i - 1].1));
                }
                steps.push((*t, *v));
            }
            ctx.draw_series(LineSeries::new(steps, c.stroke_width(2)))
                .map_err(err)?
                .label(s.name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(3))
                });
        }
        ctx.configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.9))
            .border_style(RGBColor(0x99, 0x99, 0x99))
            .label_font((FONT, 16))
            .draw()
            .map_err(err)?;
        footnote(root, &note)
    })
}
