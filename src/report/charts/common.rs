//! What every chart shares: size, the palette, text estimates and escaping, the no-data
//! SVG, axis spans, number labels, the drawing frame with its title and footnote, and the
//! sample series of the distribution charts.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Serialize;

/// Chart width in SVG user units (scaled to the page by CSS; fits a laptop and an A4 page).
pub const WIDTH: u32 = 880;

/// Chart height of the ordinary charts.
pub const HEIGHT: u32 = 400;

/// Twenty distinct colours, so that each arm of a campaign keeps one colour in every chart
/// and no two arms of one chart share one: the Okabe–Ito colour-blind-safe set first
/// (yellow left out: unreadable on white), ordered so that the first five are five distinct
/// hues (blue, orange, bluish green, reddish purple, near-black), then Paul Tol's muted set,
/// then four darker tones.
pub const PALETTE: [(u8, u8, u8); 20] = [
    (0x00, 0x72, 0xB2),
    (0xE6, 0x9F, 0x00),
    (0x00, 0x9E, 0x73),
    (0xCC, 0x79, 0xA7),
    (0x33, 0x33, 0x33),
    (0x56, 0xB4, 0xE9),
    (0xD5, 0x5E, 0x00),
    (0x33, 0x22, 0x88),
    (0xCC, 0x66, 0x77),
    (0x11, 0x77, 0x33),
    (0x88, 0x22, 0x55),
    (0x44, 0xAA, 0x99),
    (0x99, 0x99, 0x33),
    (0xAA, 0x44, 0x99),
    (0x88, 0xCC, 0xEE),
    (0xDD, 0xCC, 0x77),
    (0x66, 0x33, 0x00),
    (0x99, 0x99, 0x99),
    (0x22, 0x55, 0x55),
    (0x55, 0x22, 0x22),
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

pub(super) const FONT: &str = "sans-serif";

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

/// A `(low, high)` range around finite values, widened when degenerate; `pad` is the
/// fraction of the span added on each side.
pub(super) fn span(values: impl IntoIterator<Item = f64>, pad: f64) -> Option<(f64, f64)> {
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

pub(super) fn short_number_raw(v: f64) -> String {
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
pub(super) fn draw_svg<F>(title: &str, size: (u32, u32), draw: F) -> String
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
pub(super) fn with_title(svg: &str, title: &str) -> String {
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

/// The series legend every chart draws: `corner`, on a translucent white box with a grey
/// border, its labels at `px` pixels.
pub(super) fn legend<'a, DB, CT>(
    ctx: &mut ChartContext<'a, DB, CT>,
    corner: SeriesLabelPosition,
    px: i32,
) -> Result<(), String>
where
    DB: DrawingBackend + 'a,
    CT: plotters::coord::CoordTranslate,
{
    ctx.configure_series_labels()
        .position(corner)
        .background_style(WHITE.mix(0.9))
        .border_style(RGBColor(0x99, 0x99, 0x99))
        .label_font((FONT, px))
        .draw()
        .map_err(err)
}

pub(super) fn err<E: std::fmt::Display>(error: E) -> String {
    error.to_string()
}

/// A footnote listing dropped values, empty when none were dropped.
pub(super) fn dropped_note(dropped: usize, what: &str) -> String {
    if dropped == 0 {
        String::new()
    } else {
        format!("{dropped} {what} left out")
    }
}

pub(super) fn footnote(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    note: &str,
) -> Result<(), String> {
    if note.is_empty() {
        return Ok(());
    }
    let (_, h) = root.dim_in_pixel();
    let style = TextStyle::from((FONT, 15).into_font())
        .color(&RGBColor(0x55, 0x55, 0x55))
        .pos(Pos::new(HPos::Left, VPos::Bottom));
    root.draw_text(note, &style, (8, h as i32 - 4)).map_err(err)
}

/// Draw category names under a categorical x axis at 0, 1, 2, …
pub(super) fn category_labels<'a>(
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
pub(super) fn wrap_label(text: &str, width: usize, lines: usize) -> Vec<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Hue in degrees of an RGB colour; `None` for a grey.
    fn hue((r, g, b): (u8, u8, u8)) -> Option<f64> {
        let (r, g, b) = (f64::from(r), f64::from(g), f64::from(b));
        let (max, min) = (r.max(g).max(b), r.min(g).min(b));
        if max - min < 40.0 {
            return None;
        }
        let d = max - min;
        let h = if max == r {
            ((g - b) / d).rem_euclid(6.0)
        } else if max == g {
            (b - r) / d + 2.0
        } else {
            (r - g) / d + 4.0
        };
        Some(h * 60.0)
    }

    #[test]
    fn the_first_five_colours_are_distinct_hues() {
        let hues: Vec<f64> = PALETTE[..5].iter().filter_map(|c| hue(*c)).collect();
        assert_eq!(hues.len(), 4, "four hues and one near-black");
        for (i, a) in hues.iter().enumerate() {
            for b in &hues[i + 1..] {
                let d = (a - b).abs().min(360.0 - (a - b).abs());
                assert!(d >= 35.0, "hues {a:.0}° and {b:.0}° too close");
            }
        }
    }
}
