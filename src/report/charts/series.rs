//! Time series: server gauges (queue depth) over the run, one line per replica.

use super::common::*;
use plotters::prelude::*;
use serde::Serialize;

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
    // Queue gauges count requests: whole-number ticks only.
    let y_max = y1.max(1.0).ceil();
    let y_ticks = (y_max as usize).saturating_add(1).min(11);
    draw_svg(&chart.title, (WIDTH, HEIGHT), |root| {
        let mut ctx = ChartBuilder::on(root)
            .caption(&chart.title, (FONT, 22))
            .margin(14)
            .x_label_area_size(56)
            .y_label_area_size(76)
            .build_cartesian_2d(x0..x1, 0f64..y_max)
            .map_err(err)?;
        ctx.configure_mesh()
            .x_desc("time since run start (s)")
            .y_desc(chart.y_label.as_str())
            .label_style((FONT, 16))
            .axis_desc_style((FONT, 17))
            .x_label_formatter(&|v| short_number(*v))
            .y_labels(y_ticks)
            .y_label_formatter(&|v| {
                if v.fract().abs() < 1e-9 {
                    short_number(*v)
                } else {
                    String::new()
                }
            })
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
        legend(&mut ctx, SeriesLabelPosition::UpperRight, 16)?;
        footnote(root, &note)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_counts_get_whole_number_ticks() {
        let svg = time_series_svg(&TimeSeriesChart {
            title: "queue".to_owned(),
            y_label: "requests".to_owned(),
            series: vec![LineSeriesData {
                name: "running".to_owned(),
                colour: 0,
                points: vec![(0.0, 0.0), (1.0, 1.0), (2.0, 1.0)],
            }],
        });
        for fraction in ["0.10", "0.50", "0.2\n"] {
            assert!(
                !svg.contains(fraction),
                "fractional tick {fraction} in {svg}"
            );
        }
        assert!(svg.contains(">\n1\n<"), "tick 1 labelled");
    }
}
