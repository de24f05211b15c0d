//! The report's charts: pure functions from plain chart data to an SVG string, drawn with
//! plotters' SVG backend (no font libraries: text sizes are estimated).
//!
//! Every function filters out values that are not finite numbers (and, on log axes, values
//! that are not positive) before drawing, and says how many it left out in the chart's
//! footnote. Data too thin to draw (no series, or fewer than two points where a
//! distribution or a curve is drawn) renders a small SVG that says so; no input panics.
//! Text drawn from data (titles, arm names in legends) is XML-escaped by the backend;
//! [`no_data_svg`] escapes its own.
//!
//! Colours come from one palette ([`PALETTE`]: the Okabe–Ito colour-blind-safe set, then
//! Paul Tol's muted set, twenty in all) indexed by the arm's place in the report's one
//! campaign order ([`Palette`]), so an arm keeps its colour on every chart.

mod bars;
mod cdf;
mod common;
mod curve;
mod palette;
mod pareto;
mod series;
mod timeline;

pub use bars::{Bar, BarChart, bars_svg};
pub use cdf::{CdfChart, cdf_svg};
pub use common::{
    HEIGHT, PALETTE, SampleSeries, WIDTH, colour, colour_hex, escape_xml, no_data_svg, short_number,
};
pub use curve::{CurveChart, CurvePoint, CurveSeries, ReferenceLine, SMALL_WIDTH, curve_svg};
pub use palette::Palette;
pub use pareto::{ParetoChart, ParetoPoint, pareto_svg};
pub use series::{LineSeriesData, TimeSeriesChart, time_series_svg};
pub use timeline::{TimelineBar, TimelineChart, timeline_svg};
