//! The request timeline (Gantt): every request from send to completion, its first token
//! marked, per replica.

use super::common::*;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Serialize;

/// One request on a timeline, seconds since the run's start.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TimelineBar {
    pub replica: u32,
    pub request_index: i64,
    pub start_s: f64,
    /// First content delta; `None` when the request produced none.
    pub first_token_s: Option<f64>,
    pub end_s: f64,
    /// One of the run's first wave (each slot's first request, started together or across
    /// the ramp): drawn outlined, apart from the rest.
    pub first_wave: bool,
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
        let wave: Vec<(f64, f64, f64)> = bars
            .iter()
            .enumerate()
            .filter(|(_, b)| b.first_wave)
            .map(|(row, b)| (b.start_s, b.end_s, row_y(row)))
            .collect();
        if !wave.is_empty() && wave.len() < bars.len() {
            let stroke = RGBColor(0x22, 0x22, 0x22).stroke_width(1);
            ctx.draw_series(
                wave.iter()
                    .map(|(a, b, y)| Rectangle::new([(*a, y - 0.42), (*b, y + 0.42)], stroke)),
            )
            .map_err(err)?
            .label(format!("first wave ({} requests)", wave.len()))
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 16, y + 5)], stroke));
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
        legend(&mut ctx, SeriesLabelPosition::UpperRight, 16)?;
        footnote(root, &note)
    })
}
