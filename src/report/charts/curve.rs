//! A metric against a parameter (draft depth, chunk size, context length, concurrency):
//! one line with markers per arm or group, optional 95% interval whiskers, linear or log
//! axes whose ticks are labelled at the values that matter (the swept values on x, 1–2–5
//! decades on a log y) so a log axis never shows a single labelled tick.

use super::common::*;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Serialize;

/// One point of a curve, with its 95% interval when there is one.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CurvePoint {
    pub x: f64,
    pub y: f64,
    pub low: Option<f64>,
    pub high: Option<f64>,
}

/// One line of a curve chart.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CurveSeries {
    pub name: String,
    /// Palette index.
    pub colour: usize,
    pub points: Vec<CurvePoint>,
}

/// A horizontal reference line (a target, an SLO bound).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReferenceLine {
    pub label: String,
    pub y: f64,
}

/// A metric against a parameter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CurveChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    pub log_y: bool,
    /// Labelled x ticks `(value, label)`; empty: one tick per distinct x of the data.
    pub x_ticks: Vec<(f64, String)>,
    pub series: Vec<CurveSeries>,
    pub reference: Option<ReferenceLine>,
    /// Width in SVG units (the chart scales to its box); 0 for the default.
    pub width: u32,
}

/// Width of a chart drawn in a row of small multiples.
pub const SMALL_WIDTH: u32 = 440;
const SMALL_HEIGHT: u32 = 300;

/// The axis transform: identity or natural log.
fn axis(log: bool) -> impl Fn(f64) -> f64 + Copy {
    move |v| if log { v.ln() } else { v }
}

/// 1–2–5 ticks of each decade within `[lo, hi]` (positive), at most about eight.
pub(super) fn decade_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut ticks = Vec::new();
    if !(lo > 0.0 && hi > lo && hi.is_finite()) {
        return ticks;
    }
    let mut decade = 10f64.powf(lo.log10().floor());
    while decade <= hi {
        for m in [1.0, 2.0, 5.0] {
            let t = decade * m;
            if t >= lo && t <= hi {
                ticks.push(t);
            }
        }
        decade *= 10.0;
    }
    if ticks.len() > 9 {
        ticks.retain(|t| {
            let m = t / 10f64.powf(t.log10().floor());
            (m - 1.0).abs() < 1e-9 || (m - 5.0).abs() < 1e-9
        });
    }
    ticks
}

/// Evenly spaced round ticks within `[lo, hi]`.
pub(super) fn linear_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
        return vec![lo];
    }
    let raw = (hi - lo) / 5.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| (hi - lo) / s <= 6.0)
        .unwrap_or(10.0 * magnitude);
    let mut t = (lo / step).ceil() * step;
    let mut ticks = Vec::new();
    while t <= hi + step * 1e-9 {
        ticks.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    ticks
}

/// Draw the chart.
pub fn curve_svg(chart: &CurveChart) -> String {
    let ok_x = |v: f64| v.is_finite() && (!chart.log_x || v > 0.0);
    let ok_y = |v: f64| v.is_finite() && (!chart.log_y || v > 0.0);
    let mut dropped = 0;
    let series: Vec<(&CurveSeries, Vec<CurvePoint>)> = chart
        .series
        .iter()
        .map(|s| {
            let mut kept: Vec<CurvePoint> = s
                .points
                .iter()
                .copied()
                .filter(|p| ok_x(p.x) && ok_y(p.y))
                .collect();
            dropped += s.points.len() - kept.len();
            kept.sort_by(|a, b| a.x.total_cmp(&b.x));
            (s, kept)
        })
        .filter(|(_, kept)| !kept.is_empty())
        .collect();
    let total: usize = series.iter().map(|(_, p)| p.len()).sum();
    if total < 2 {
        return no_data_svg(&chart.title, "fewer than two points to draw");
    }
    let (tx, ty) = (axis(chart.log_x), axis(chart.log_y));
    let xs = || series.iter().flat_map(|(_, p)| p.iter().map(|p| p.x));
    let ys = || {
        series
            .iter()
            .flat_map(|(_, p)| p.iter().flat_map(|p| [Some(p.y), p.low, p.high]))
            .flatten()
            .filter(|v| ok_y(*v))
            .chain(chart.reference.iter().map(|r| r.y).filter(|v| ok_y(*v)))
    };
    let (Some((x0, x1)), Some((y0, y1))) = (span(xs().map(tx), 0.08), span(ys().map(ty), 0.1))
    else {
        return no_data_svg(&chart.title, "no values to lay out");
    };
    let mut x_ticks: Vec<(f64, String)> = if chart.x_ticks.is_empty() {
        let mut distinct: Vec<f64> = xs().collect();
        distinct.sort_by(f64::total_cmp);
        distinct.dedup();
        distinct.into_iter().map(|x| (x, short_number(x))).collect()
    } else {
        chart.x_ticks.clone()
    };
    x_ticks.retain(|(x, _)| ok_x(*x) && (x0..=x1).contains(&tx(*x)));
    let y_ticks: Vec<f64> = if chart.log_y {
        decade_ticks(y0.exp(), y1.exp())
    } else {
        linear_ticks(y0, y1)
    };
    let width = if chart.width == 0 { WIDTH } else { chart.width };
    let height = if width < WIDTH { SMALL_HEIGHT } else { HEIGHT };
    let small = width < WIDTH;
    let (label_px, title_px) = if small { (13, 16) } else { (15, 20) };
    let note = dropped_note(
        dropped,
        "points with non-finite (or, on a log axis, non-positive) values",
    );
    draw_svg(&chart.title, (width, height), |root| {
        let mut ctx = ChartBuilder::on(root)
            .caption(&chart.title, (FONT, title_px))
            .margin(10)
            .x_label_area_size(if small { 40 } else { 50 })
            .y_label_area_size(if small { 58 } else { 70 })
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(err)?;
        ctx.configure_mesh()
            .disable_mesh()
            .x_labels(0)
            .y_labels(0)
            .x_desc(chart.x_label.as_str())
            .y_desc(chart.y_label.as_str())
            .axis_desc_style((FONT, label_px + 1))
            .draw()
            .map_err(err)?;
        let grid = RGBColor(0xe4, 0xe4, 0xe4);
        let label = TextStyle::from((FONT, label_px).into_font()).color(&BLACK);
        // A tick whose label would touch the previous one keeps its grid line only.
        let mut last_px: Option<i32> = None;
        for (x, text) in &x_ticks {
            let x = tx(*x);
            ctx.draw_series(std::iter::once(PathElement::new(
                vec![(x, y0), (x, y1)],
                grid.stroke_width(1),
            )))
            .map_err(err)?;
            let (px, py) = ctx.backend_coord(&(x, y0));
            let room = (text.chars().count() as i32) * label_px * 6 / 10 + 6;
            if last_px.is_some_and(|l| px - l < room) {
                continue;
            }
            last_px = Some(px);
            root.draw_text(
                text,
                &label.pos(Pos::new(HPos::Center, VPos::Top)),
                (px, py + 5),
            )
            .map_err(err)?;
        }
        for y in &y_ticks {
            let v = ty(*y);
            ctx.draw_series(std::iter::once(PathElement::new(
                vec![(x0, v), (x1, v)],
                grid.stroke_width(1),
            )))
            .map_err(err)?;
            let (px, py) = ctx.backend_coord(&(x0, v));
            root.draw_text(
                &short_number(*y),
                &label.pos(Pos::new(HPos::Right, VPos::Center)),
                (px - 5, py),
            )
            .map_err(err)?;
        }
        if let Some(r) = chart.reference.as_ref().filter(|r| ok_y(r.y)) {
            let v = ty(r.y);
            let grey = RGBColor(0x55, 0x55, 0x55);
            ctx.draw_series(DashedLineSeries::new(
                vec![(x0, v), (x1, v)],
                6,
                4,
                grey.stroke_width(2),
            ))
            .map_err(err)?;
            let (px, py) = ctx.backend_coord(&(x0, v));
            root.draw_text(
                &r.label,
                &label.color(&grey).pos(Pos::new(HPos::Left, VPos::Bottom)),
                (px + 4, py - 3),
            )
            .map_err(err)?;
        }
        for (i, (s, kept)) in series.iter().enumerate() {
            let c = colour(s.colour);
            let points: Vec<(f64, f64)> = kept.iter().map(|p| (tx(p.x), ty(p.y))).collect();
            for p in kept {
                if let (Some(lo), Some(hi)) = (p.low, p.high)
                    && ok_y(lo)
                    && ok_y(hi)
                {
                    ctx.draw_series(std::iter::once(PathElement::new(
                        vec![(tx(p.x), ty(lo)), (tx(p.x), ty(hi))],
                        c.stroke_width(2),
                    )))
                    .map_err(err)?;
                }
            }
            ctx.draw_series(LineSeries::new(points.clone(), c.stroke_width(2)))
                .map_err(err)?
                .label(s.name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(3))
                });
            // A different marker per series, so overlapping series stay distinguishable.
            match i % 3 {
                0 => ctx
                    .draw_series(points.iter().map(|&p| Circle::new(p, 5, c.filled())))
                    .map(|_| ()),
                1 => ctx
                    .draw_series(
                        points
                            .iter()
                            .map(|&p| TriangleMarker::new(p, 7, c.filled())),
                    )
                    .map(|_| ()),
                _ => ctx
                    .draw_series(points.iter().map(|&p| Cross::new(p, 6, c.stroke_width(3))))
                    .map(|_| ()),
            }
            .map_err(err)?;
        }
        // A legend names the series, unless the one series is the swept key itself; it
        // goes in the first corner no point falls in, so it hides none.
        if series.len() > 1 || series.iter().any(|(s, _)| s.name != chart.x_label) {
            let (xw, yw) = (x1 - x0, y1 - y0);
            let occupied = |right: bool, top: bool| {
                series.iter().flat_map(|(_, p)| p.iter()).any(|p| {
                    let (x, y) = ((tx(p.x) - x0) / xw, (ty(p.y) - y0) / yw);
                    (if right { x > 0.55 } else { x < 0.45 })
                        && (if top { y > 0.6 } else { y < 0.4 })
                })
            };
            let corner = [
                (true, true, SeriesLabelPosition::UpperRight),
                (false, true, SeriesLabelPosition::UpperLeft),
                (true, false, SeriesLabelPosition::LowerRight),
                (false, false, SeriesLabelPosition::LowerLeft),
            ]
            .into_iter()
            .find(|(r, t, _)| !occupied(*r, *t))
            .map_or(SeriesLabelPosition::UpperLeft, |(_, _, c)| c);
            legend(&mut ctx, corner, label_px)?;
        }
        footnote(root, &note)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ticks_are_one_two_five_per_decade() {
        assert_eq!(decade_ticks(3.0, 120.0), vec![5.0, 10.0, 20.0, 50.0, 100.0]);
        assert!(decade_ticks(0.0, 1.0).is_empty());
        // Many decades keep 1 and 5 only.
        let wide = decade_ticks(1.0, 1e6);
        assert!(wide.len() <= 13 && wide.contains(&1000.0) && !wide.contains(&2000.0));
    }

    #[test]
    fn linear_ticks_are_round() {
        assert_eq!(linear_ticks(0.0, 10.0), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(
            linear_ticks(1.0, 4.0),
            vec![1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0]
        );
    }

    #[test]
    fn a_log_context_axis_labels_every_swept_value() {
        let chart = CurveChart {
            title: "TTFT vs context".into(),
            x_label: "prompt tokens".into(),
            y_label: "ms".into(),
            log_x: true,
            log_y: true,
            x_ticks: Vec::new(),
            series: vec![CurveSeries {
                name: "A".into(),
                colour: 0,
                points: [4096.0, 32768.0, 131072.0, 253952.0]
                    .iter()
                    .map(|&x| CurvePoint {
                        x,
                        y: x / 8.0,
                        low: None,
                        high: None,
                    })
                    .collect(),
            }],
            reference: None,
            width: 0,
        };
        let svg = curve_svg(&chart);
        for tick in ["4.1k", "33k", "131k", "254k"] {
            assert!(
                svg.contains(&format!(">\n{tick}\n<")),
                "{tick} not labelled"
            );
        }
        assert!(svg.contains("<polyline"), "points joined by a line");
    }
}
