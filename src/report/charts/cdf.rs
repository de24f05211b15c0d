//! The empirical CDF of each arm's per-request values.

use super::common::*;
use plotters::prelude::*;
use serde::Serialize;

/// Empirical CDF of one metric, one line per arm.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CdfChart {
    pub title: String,
    /// X axis label with unit, e.g. `TTFT (ms)`.
    pub x_label: String,
    pub series: Vec<SampleSeries>,
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
