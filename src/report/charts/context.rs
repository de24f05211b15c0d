//! The context curve: a metric against prompt tokens, one series per arm.

use super::common::*;
use plotters::prelude::*;
use serde::Serialize;

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

/// One panel of the context chart: y label, y range, and the value it plots.
type Panel = (&'static str, (f64, f64), fn(&ContextPoint) -> f64);
