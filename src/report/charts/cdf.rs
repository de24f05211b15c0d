//! The empirical CDF of each arm's per-request values, on a log x axis by default so the
//! tail is spread over the width instead of squeezed into its last few percent; the first
//! wave's requests are marked on their arm's curve.

use super::common::*;
use super::curve::{decade_ticks, linear_ticks};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Serialize;

/// Empirical CDF of one metric, one line per arm.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CdfChart {
    pub title: String,
    /// X axis label with unit, e.g. `TTFT (ms)`.
    pub x_label: String,
    pub series: Vec<SampleSeries>,
    /// Log x axis (labelled 1–2–5 per decade).
    pub log_x: bool,
    /// Per series (same order), the values of its first-wave requests, marked with a
    /// hollow circle on the curve; empty when none are marked.
    pub first_wave: Vec<Vec<f64>>,
    /// Width in SVG units; 0 for the default.
    pub width: u32,
}

/// Empirical CDF, one step line per arm: y is the fraction of requests at or below x.
pub fn cdf_svg(chart: &CdfChart) -> String {
    let ok = |v: &f64| v.is_finite() && (!chart.log_x || *v > 0.0);
    let mut dropped = 0;
    let series: Vec<(String, usize, Vec<f64>, Vec<f64>)> = chart
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut values: Vec<f64> = s.values.iter().copied().filter(ok).collect();
            dropped += s.values.len() - values.len();
            values.sort_by(f64::total_cmp);
            let marked: Vec<f64> = chart
                .first_wave
                .get(i)
                .map(|m| m.iter().copied().filter(ok).collect())
                .unwrap_or_default();
            (s.name.clone(), s.colour, values, marked)
        })
        .filter(|(_, _, values, _)| !values.is_empty())
        .collect();
    let total: usize = series.iter().map(|(_, _, v, _)| v.len()).sum();
    if total < 2 {
        return no_data_svg(&chart.title, "fewer than two finite values recorded");
    }
    let t = |v: f64| if chart.log_x { v.ln() } else { v };
    let Some((x0, x1)) = span(
        series
            .iter()
            .flat_map(|(_, _, v, _)| v.iter().map(|v| t(*v))),
        0.03,
    ) else {
        return no_data_svg(&chart.title, "no finite values");
    };
    let ticks = if chart.log_x {
        decade_ticks(x0.exp(), x1.exp())
    } else {
        linear_ticks(x0, x1)
    };
    let note = dropped_note(
        dropped,
        if chart.log_x {
            "non-finite or non-positive values (log scale)"
        } else {
            "non-finite values"
        },
    );
    let any_marked = series.iter().any(|(_, _, _, m)| !m.is_empty());
    let width = if chart.width == 0 { WIDTH } else { chart.width };
    let small = width < WIDTH;
    let height = if small { 300 } else { HEIGHT };
    let label_px = if small { 13 } else { 15 };
    draw_svg(&chart.title, (width, height), |root| {
        let mut ctx = ChartBuilder::on(root)
            .caption(&chart.title, (FONT, if small { 16 } else { 20 }))
            .margin(10)
            .x_label_area_size(if small { 40 } else { 50 })
            .y_label_area_size(if small { 50 } else { 70 })
            .build_cartesian_2d(x0..x1, 0f64..1.02f64)
            .map_err(err)?;
        ctx.configure_mesh()
            .x_labels(0)
            .x_desc(if chart.log_x {
                format!("{} (log)", chart.x_label)
            } else {
                chart.x_label.clone()
            })
            .y_desc("fraction ≤ x")
            .y_labels(6)
            .label_style((FONT, label_px))
            .axis_desc_style((FONT, label_px + 1))
            .light_line_style(RGBColor(0xee, 0xee, 0xee))
            .draw()
            .map_err(err)?;
        let grid = RGBColor(0xe4, 0xe4, 0xe4);
        let style = TextStyle::from((FONT, label_px).into_font())
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Top));
        for tick in &ticks {
            let x = t(*tick);
            ctx.draw_series(std::iter::once(PathElement::new(
                vec![(x, 0.0), (x, 1.02)],
                grid.stroke_width(1),
            )))
            .map_err(err)?;
            let (px, py) = ctx.backend_coord(&(x, 0.0));
            root.draw_text(&short_number(*tick), &style, (px, py + 5))
                .map_err(err)?;
        }
        for (name, index, values, marked) in &series {
            let n = values.len() as f64;
            let mut points = Vec::with_capacity(values.len() * 2);
            for (i, v) in values.iter().enumerate() {
                points.push((t(*v), i as f64 / n));
                points.push((t(*v), (i + 1) as f64 / n));
            }
            let c = colour(*index);
            ctx.draw_series(LineSeries::new(points, c.stroke_width(2)))
                .map_err(err)?
                .label(format!("{name} (n = {})", values.len()))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(3))
                });
            // Each marked value at its rank on the curve.
            let at = |v: f64| values.partition_point(|x| *x <= v) as f64 / n;
            ctx.draw_series(
                marked
                    .iter()
                    .map(|v| Circle::new((t(*v), at(*v)), 4, c.stroke_width(2))),
            )
            .map_err(err)?;
        }
        legend(&mut ctx, SeriesLabelPosition::LowerRight, label_px)?;
        let note = match (any_marked, note.is_empty()) {
            (true, true) => "○ first-wave request".to_owned(),
            (true, false) => format!("○ first-wave request; {note}"),
            (false, _) => note.clone(),
        };
        footnote(root, &note)
    })
}
