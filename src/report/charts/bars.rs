//! Bars: one value per arm with its interval.

use super::common::*;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Serialize;

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
