//! The distribution strip: each arm's per-request values as jittered points, with its
//! median and p95 marked.

use super::common::*;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Serialize;

/// Distribution of one metric per arm: every request as a dot (deterministic jitter) with
/// the query layer's percentile markers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DistributionChart {
    pub title: String,
    /// Y axis label with unit, e.g. `TPOT (ms)`.
    pub y_label: String,
    pub series: Vec<SampleSeries>,
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
