//! The throughput trade-off: output tokens per second per GPU (what the hardware yields)
//! against output tokens per second per user (what each request sees), one labelled point
//! per arm, the Pareto frontier joined by a line, dominated points hollow.

use super::common::*;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Serialize;

/// One arm's point.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParetoPoint {
    pub name: String,
    pub colour: usize,
    /// Output tokens per second per user (1000 / median TPOT).
    pub per_user: f64,
    /// Aggregate output tokens per second per GPU.
    pub per_gpu: f64,
    /// Goodput under the SLOs per GPU, when SLOs are given.
    pub goodput_per_gpu: Option<f64>,
    pub on_frontier: bool,
}

/// The trade-off chart of one workload.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParetoChart {
    pub title: String,
    pub points: Vec<ParetoPoint>,
}

/// Draw the chart: frontier points filled and joined, dominated points hollow, every point
/// labelled with its arm; goodput per GPU, where given, as a small grey diamond below its
/// point (the part of the throughput that met the SLOs).
pub fn pareto_svg(chart: &ParetoChart) -> String {
    let points: Vec<&ParetoPoint> = chart
        .points
        .iter()
        .filter(|p| p.per_user.is_finite() && p.per_gpu.is_finite())
        .collect();
    let dropped = chart.points.len() - points.len();
    if points.len() < 2 {
        return no_data_svg(&chart.title, "fewer than two arms with both figures");
    }
    let (Some((x0, x1)), Some((y0, y1))) = (
        span(points.iter().map(|p| p.per_user), 0.12),
        span(
            points
                .iter()
                .flat_map(|p| [Some(p.per_gpu), p.goodput_per_gpu])
                .flatten()
                .filter(|v| v.is_finite()),
            0.1,
        ),
    ) else {
        return no_data_svg(&chart.title, "no values to lay out");
    };
    let note = dropped_note(dropped, "arms without a median TPOT or a GPU count");
    draw_svg(&chart.title, (WIDTH, HEIGHT + 60), |root| {
        let mut ctx = ChartBuilder::on(root)
            .caption(&chart.title, (FONT, 20))
            .margin(14)
            .x_label_area_size(50)
            .y_label_area_size(72)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(err)?;
        ctx.configure_mesh()
            .x_desc("output tok/s per user (1000 / median TPOT) → better")
            .y_desc("output tok/s per GPU → better")
            .label_style((FONT, 15))
            .axis_desc_style((FONT, 16))
            .x_label_formatter(&|v| short_number(*v))
            .y_label_formatter(&|v| short_number(*v))
            .light_line_style(RGBColor(0xee, 0xee, 0xee))
            .draw()
            .map_err(err)?;
        let mut frontier: Vec<(f64, f64)> = points
            .iter()
            .filter(|p| p.on_frontier)
            .map(|p| (p.per_user, p.per_gpu))
            .collect();
        frontier.sort_by(|a, b| a.0.total_cmp(&b.0));
        if frontier.len() > 1 {
            ctx.draw_series(LineSeries::new(frontier, BLACK.stroke_width(2)))
                .map_err(err)?
                .label("Pareto frontier")
                .legend(|(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], BLACK.stroke_width(2))
                });
        }
        let grey = RGBColor(0x66, 0x66, 0x66);
        let mut goodput_labelled = false;
        for p in &points {
            if let Some(g) = p.goodput_per_gpu.filter(|g| g.is_finite()) {
                ctx.draw_series(std::iter::once(PathElement::new(
                    vec![(p.per_user, g), (p.per_user, p.per_gpu)],
                    grey.mix(0.5).stroke_width(1),
                )))
                .map_err(err)?;
                let series = ctx
                    .draw_series(std::iter::once(
                        EmptyElement::at((p.per_user, g))
                            + Polygon::new(vec![(0, -5), (5, 0), (0, 5), (-5, 0)], grey.filled()),
                    ))
                    .map_err(err)?;
                if !goodput_labelled {
                    goodput_labelled = true;
                    series
                        .label("goodput per GPU (met the SLOs)")
                        .legend(move |(x, y)| {
                            Polygon::new(
                                vec![(x + 9, y - 5), (x + 14, y), (x + 9, y + 5), (x + 4, y)],
                                grey.filled(),
                            )
                        });
                }
            }
        }
        let label = TextStyle::from((FONT, 13).into_font()).color(&BLACK);
        // Labels alternate above and below their point so neighbours do not print over
        // each other.
        let mut order: Vec<&&ParetoPoint> = points.iter().collect();
        order.sort_by(|a, b| a.per_user.total_cmp(&b.per_user));
        for (i, p) in order.iter().enumerate() {
            let c = colour(p.colour);
            let at = (p.per_user, p.per_gpu);
            if p.on_frontier {
                ctx.draw_series(std::iter::once(Circle::new(at, 7, c.filled())))
                    .map_err(err)?;
            } else {
                ctx.draw_series(std::iter::once(Circle::new(at, 7, c.stroke_width(3))))
                    .map_err(err)?;
            }
            let (px, py) = ctx.backend_coord(&at);
            let (dy, v) = if i % 2 == 0 {
                (-10, VPos::Bottom)
            } else {
                (10, VPos::Top)
            };
            let text = if p.on_frontier {
                p.name.clone()
            } else {
                format!("{} (dominated)", p.name)
            };
            let right = px > (WIDTH as i32) * 3 / 4;
            let (h, dx) = if right {
                (HPos::Right, -6)
            } else {
                (HPos::Left, 6)
            };
            root.draw_text(&text, &label.pos(Pos::new(h, v)), (px + dx, py + dy))
                .map_err(err)?;
        }
        legend(&mut ctx, SeriesLabelPosition::LowerLeft, 14)?;
        footnote(root, &note)
    })
}
