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
    /// The arm's GPUs and its requests in flight per GPU, marked in its label where the
    /// chart mixes GPU counts.
    pub gpus: Option<u32>,
    pub in_flight_per_gpu: Option<f64>,
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
        let frontier_drawn = frontier.len() > 1;
        if frontier_drawn {
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
        let mixed = points
            .iter()
            .map(|p| p.gpus)
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            > 1;
        let texts: Vec<String> = points
            .iter()
            .map(|p| {
                let gpus = match (mixed, p.gpus, p.in_flight_per_gpu) {
                    (true, Some(g), Some(per)) => {
                        format!(
                            ", {g} GPU{}, {} in flight/GPU",
                            if g == 1 { "" } else { "s" },
                            short_number(per)
                        )
                    }
                    (true, Some(g), None) => format!(", {g} GPU{}", if g == 1 { "" } else { "s" }),
                    _ => String::new(),
                };
                match (p.on_frontier, gpus.is_empty()) {
                    (true, true) => p.name.clone(),
                    (true, false) => format!("{} ({})", p.name, &gpus[2..]),
                    (false, _) => format!("{} (dominated{gpus})", p.name),
                }
            })
            .collect();
        let at: Vec<(i32, i32)> = points
            .iter()
            .map(|p| ctx.backend_coord(&(p.per_user, p.per_gpu)))
            .collect();
        for p in &points {
            let c = colour(p.colour);
            let centre = (p.per_user, p.per_gpu);
            if p.on_frontier {
                ctx.draw_series(std::iter::once(Circle::new(centre, 7, c.filled())))
                    .map_err(err)?;
            } else {
                ctx.draw_series(std::iter::once(Circle::new(centre, 7, c.stroke_width(3))))
                    .map_err(err)?;
            }
        }
        // The legend goes in the plot's corner holding fewest points, and labels keep clear
        // of it.
        let (xr, yr) = ctx.plotting_area().get_pixel_range();
        let entries = 1 + i32::from(frontier_drawn) + i32::from(goodput_labelled);
        let (lw, lh) = (250, 20 * entries + 8);
        let corners = [
            (
                SeriesLabelPosition::LowerLeft,
                xr.start + 4,
                yr.end - lh - 4,
            ),
            (
                SeriesLabelPosition::LowerRight,
                xr.end - lw - 4,
                yr.end - lh - 4,
            ),
            (SeriesLabelPosition::UpperLeft, xr.start + 4, yr.start + 4),
            (
                SeriesLabelPosition::UpperRight,
                xr.end - lw - 4,
                yr.start + 4,
            ),
        ];
        let legend_box = |x0: i32, y0: i32| LabelBox {
            x0,
            y0,
            x1: x0 + lw,
            y1: y0 + lh,
        };
        let best = (0..corners.len())
            .min_by_key(|&k| {
                let b = legend_box(corners[k].1, corners[k].2);
                at.iter().filter(|p| b.distance(**p) < 12.0).count()
            })
            .unwrap_or(0);
        let [c0, c1, c2, c3] = corners;
        let (corner, lx, ly) = match best {
            1 => c1,
            2 => c2,
            3 => c3,
            _ => c0,
        };
        let widths: Vec<i32> = texts.iter().map(|t| label_width(t)).collect();
        let placed = place_labels(
            &at,
            &widths,
            (0, 0, WIDTH as i32, HEIGHT as i32 + 20),
            &[legend_box(lx, ly)],
        );
        let mut numbered = Vec::new();
        for (i, spot) in placed.iter().enumerate() {
            match spot {
                Some(b) => {
                    root.draw_text(
                        &texts[i],
                        &label.pos(Pos::new(HPos::Left, VPos::Top)),
                        (b.x0, b.y0),
                    )
                    .map_err(err)?;
                }
                None => {
                    // No place nearer this point than any other: a number beside the
                    // marker, the name in the footnote.
                    numbered.push(format!("{} = {}", numbered.len() + 1, texts[i]));
                    root.draw_text(
                        &numbered.len().to_string(),
                        &label.pos(Pos::new(HPos::Left, VPos::Bottom)),
                        (at[i].0 + 6, at[i].1 - 6),
                    )
                    .map_err(err)?;
                }
            }
        }
        let note = if numbered.is_empty() {
            note.clone()
        } else {
            let names = format!("points too close to label: {}", numbered.join("; "));
            if note.is_empty() {
                names
            } else {
                format!("{note}; {names}")
            }
        };
        legend(&mut ctx, corner, 14)?;
        footnote(root, &note)
    })
}

/// A label's box in pixels: left, top, right, bottom.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LabelBox {
    pub x0: i32,
    pub y0: i32,
    pub x1: i32,
    pub y1: i32,
}

/// Height of a 13 px label's box.
const LABEL_HEIGHT: i32 = 15;

/// Estimated width of a 13 px label: about 7 px a character.
fn label_width(text: &str) -> i32 {
    text.chars().count() as i32 * 7
}

impl LabelBox {
    /// Distance from `(x, y)` to the box (0 inside it).
    fn distance(&self, (x, y): (i32, i32)) -> f64 {
        let dx = (self.x0 - x).max(0).max(x - self.x1) as f64;
        let dy = (self.y0 - y).max(0).max(y - self.y1) as f64;
        dx.hypot(dy)
    }

    fn overlaps(&self, other: &LabelBox) -> bool {
        self.x0 < other.x1 && other.x0 < self.x1 && self.y0 < other.y1 && other.y0 < self.y1
    }
}

/// Where each point's label goes: the first of eight places around its point (right,
/// left, above and below, at the sides and centred) whose box stays inside `bounds`,
/// overlaps no label placed before and no other point's marker, and is nearer its own
/// point than any other point, nor over an `obstacle` (the legend). `None` where no place is: the point is numbered instead, so
/// no label ever stands nearer another point than its own. Points are placed left to right.
pub(crate) fn place_labels(
    points: &[(i32, i32)],
    widths: &[i32],
    bounds: (i32, i32, i32, i32),
    obstacles: &[LabelBox],
) -> Vec<Option<LabelBox>> {
    const GAP: i32 = 9;
    const MARKER: f64 = 8.0;
    let h = LABEL_HEIGHT;
    let mut order: Vec<usize> = (0..points.len()).collect();
    order.sort_by_key(|i| (points[*i].0, points[*i].1));
    let mut placed: Vec<Option<LabelBox>> = vec![None; points.len()];
    let mut taken: Vec<LabelBox> = obstacles.to_vec();
    for i in order {
        let (x, y) = points[i];
        let w = widths[i];
        let candidates = [
            (x + GAP, y - h / 2),
            (x - GAP - w, y - h / 2),
            (x + GAP / 2, y - GAP - h),
            (x + GAP / 2, y + GAP),
            (x - GAP / 2 - w, y - GAP - h),
            (x - GAP / 2 - w, y + GAP),
            (x - w / 2, y - GAP - h),
            (x - w / 2, y + GAP),
        ];
        let fits = |b: &LabelBox| {
            b.x0 >= bounds.0
                && b.y0 >= bounds.1
                && b.x1 <= bounds.2
                && b.y1 <= bounds.3
                && !taken.iter().any(|t| t.overlaps(b))
                && points.iter().enumerate().all(|(j, p)| {
                    j == i || (b.distance(*p) > MARKER && b.distance(*p) > b.distance((x, y)))
                })
        };
        placed[i] = candidates
            .iter()
            .map(|&(x0, y0)| LabelBox {
                x0,
                y0,
                x1: x0 + w,
                y1: y0 + h,
            })
            .find(|b| fits(b));
        if let Some(b) = placed[i] {
            taken.push(b);
        }
    }
    placed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every placed label is nearer its own point than any other, inside the chart, and
    /// clear of every other label; two points too close for both labels get a number.
    #[test]
    fn each_label_stands_nearer_its_own_point_than_any_other() {
        // Two arms 12 px apart with long names (the sample's K8 and K12 chunk1K), a third
        // far away.
        let points = [(400, 200), (412, 206), (100, 300)];
        let widths = [
            label_width("RadixArk DFlash2 K12 chunk1K"),
            label_width("RadixArk DFlash2 K8"),
            80,
        ];
        let placed = place_labels(&points, &widths, (0, 0, 880, 420), &[]);
        for (i, b) in placed.iter().enumerate() {
            let Some(b) = b else { continue };
            let own = b.distance(points[i]);
            for (j, p) in points.iter().enumerate() {
                if j != i {
                    assert!(b.distance(*p) > own, "label {i} is nearer point {j}: {b:?}");
                }
            }
            assert!(b.x0 >= 0 && b.x1 <= 880 && b.y0 >= 0 && b.y1 <= 420);
            for (k, other) in placed.iter().enumerate() {
                if k != i
                    && let Some(o) = other
                {
                    assert!(!b.overlaps(o), "labels {i} and {k} overlap");
                }
            }
        }
        assert!(placed[2].is_some());
        assert!(
            placed.iter().filter(|p| p.is_some()).count() >= 2,
            "{placed:?}"
        );
        // Points on top of each other: at most one can be labelled, the other numbered.
        let placed = place_labels(&[(300, 200), (300, 200)], &[60, 60], (0, 0, 880, 420), &[]);
        assert!(placed.iter().any(|p| p.is_none()), "{placed:?}");
    }
}
