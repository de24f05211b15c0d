//! `anvil-capture gpu-check`: read telemetry sources for a while, with no run, and hold each
//! GPU's energy counter against its power integrated over the same span, source by source
//! (NVML's counter against nvidia-smi's and NVML's power, a DCGM exporter's against its own):
//! the prepared check that a machine's GPUs report energy anvil can trust. Within 5% passes.
//!
//! The readings are the sampler's own ([`super::sampler::Sampler`]); a GPU is named by its
//! UUID where a source gives one (so one GPU read by two sources is matched), else by its
//! source's index.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::Duration;

use super::sampler::{Sampler, Telemetry};
use crate::artifact::{ScrapePhase, TelemetryRow};
use crate::clock::Origin;
use crate::notice::Notices;

/// The largest relative difference between counter and integrated power that passes.
pub const TOLERANCE: f64 = 0.05;

/// The least share of the compared span a power source must cover.
pub const COVERAGE: f64 = 0.95;

/// One GPU's counter against one source's integrated power, or a GPU with a counter that
/// no power source covers (not checked, which fails).
#[derive(Debug, Clone, PartialEq)]
pub struct CheckRow {
    /// The GPU's UUID, or `SOURCE ENDPOINT gpu N`.
    pub gpu: String,
    /// The source of the counter and of the power (`-` when none covered it).
    pub counter_source: String,
    pub power_source: String,
    /// The span both cover, s.
    pub seconds: f64,
    pub counter_j: f64,
    pub integrated_j: f64,
    /// integrated_j / counter_j − 1; `None` when not checked.
    pub difference: Option<f64>,
}

impl CheckRow {
    pub fn passes(&self) -> bool {
        self.difference
            .is_some_and(|d| d.is_finite() && d.abs() <= TOLERANCE)
    }
}

/// One GPU's readings by one source: (t_ns, power W, energy mJ).
type Series = Vec<(i64, Option<f64>, Option<f64>)>;

/// The GPUs' readings by (GPU name, source, endpoint).
fn series(rows: &[TelemetryRow]) -> BTreeMap<(String, String, String), Series> {
    let mut out: BTreeMap<(String, String, String), Series> = BTreeMap::new();
    for r in rows {
        let Ok(g) = &r.reading else { continue };
        let name = g
            .uuid
            .clone()
            .unwrap_or_else(|| format!("{} {} gpu {}", r.source, r.endpoint, g.index));
        let key = (name, r.source.to_owned(), r.endpoint.clone());
        out.entry(key).or_default().push((
            r.t_ns,
            g.get(crate::artifact::telemetry::Field::PowerW),
            g.get(crate::artifact::telemetry::Field::EnergyMj),
        ));
    }
    for s in out.values_mut() {
        s.sort_by_key(|x| x.0);
    }
    out
}

/// Power held from each reading to the next (at most `max_hold_ns`) over [a, b]: the energy,
/// J, and the time covered, ns.
fn integrate(power: &[(i64, f64)], a: i64, b: i64, max_hold_ns: i64) -> (f64, i64) {
    let (mut joules, mut covered) = (0.0, 0i64);
    for (i, (t, p)) in power.iter().enumerate() {
        let next = power.get(i + 1).map_or(*t + max_hold_ns, |n| n.0);
        let (from, to) = ((*t).max(a), next.min(*t + max_hold_ns).min(b));
        if to > from {
            joules += p * (to - from) as f64 / 1e9;
            covered += to - from;
        }
    }
    (joules, covered)
}

/// Every (counter, power) pair of sources of each GPU, over the span both cover (the
/// counter's readings inside the power readings' span; a power reading held at most
/// `max_hold` to the next), compared when the power covers at least [`COVERAGE`] of it; a
/// GPU with a counter and no such pair is a row not checked.
pub fn compare(rows: &[TelemetryRow], max_hold: Duration) -> Vec<CheckRow> {
    let by = series(rows);
    let max_hold_ns = i64::try_from(max_hold.as_nanos()).unwrap_or(i64::MAX);
    let mut out = Vec::new();
    for ((gpu, counter_source, counter_endpoint), counted) in &by {
        let counts: Vec<(i64, f64)> = counted.iter().filter_map(|x| Some((x.0, x.2?))).collect();
        if counts.len() < 2 {
            continue;
        }
        let before = out.len();
        for ((other, power_source, _), powered) in &by {
            if other != gpu {
                continue;
            }
            let power: Vec<(i64, f64)> = powered.iter().filter_map(|x| Some((x.0, x.1?))).collect();
            let (Some(p0), Some(p1)) = (power.first(), power.last()) else {
                continue;
            };
            // The counter's readings within the power's span.
            let inside: Vec<&(i64, f64)> = counts
                .iter()
                .filter(|c| c.0 >= p0.0 && c.0 <= p1.0)
                .collect();
            let (Some(first), Some(last)) = (inside.first(), inside.last()) else {
                continue;
            };
            let (a, b) = (first.0, last.0);
            if b <= a {
                continue;
            }
            let (integrated_j, covered) = integrate(&power, a, b, max_hold_ns);
            if (covered as f64) < COVERAGE * (b - a) as f64 {
                continue;
            }
            // The counter's growth, a fall counting as a reset.
            let counter_j = inside
                .windows(2)
                .map(|w| {
                    if w[1].1 >= w[0].1 {
                        w[1].1 - w[0].1
                    } else {
                        w[1].1
                    }
                })
                .sum::<f64>()
                / 1000.0;
            out.push(CheckRow {
                gpu: gpu.clone(),
                counter_source: counter_source.clone(),
                power_source: power_source.clone(),
                seconds: (b - a) as f64 / 1e9,
                counter_j,
                integrated_j,
                difference: Some(integrated_j / counter_j - 1.0),
            });
        }
        if out.len() == before {
            out.push(CheckRow {
                gpu: format!("{gpu} ({counter_endpoint})"),
                counter_source: counter_source.clone(),
                power_source: "-".to_owned(),
                seconds: 0.0,
                counter_j: 0.0,
                integrated_j: 0.0,
                difference: None,
            });
        }
    }
    out
}

/// Read `telemetry`'s sources every `telemetry.every` for `span`, then compare. Also
/// returns why any source failed.
pub async fn run(
    telemetry: &Telemetry,
    span: Duration,
    notices: Notices,
) -> (Vec<CheckRow>, Vec<String>) {
    let (tx, rx) = mpsc::channel();
    let sampler = Sampler::new(telemetry, None, tx, Origin::now(), notices);
    sampler.round(ScrapePhase::Before).await;
    let during = sampler.during();
    tokio::time::sleep(span).await;
    during.stop().await;
    sampler.round(ScrapePhase::After).await;
    let failures = sampler
        .summary()
        .into_iter()
        .filter_map(|s| {
            s.first_error
                .map(|e| format!("{} {}: {e}", s.source, s.endpoint))
        })
        .collect();
    drop(sampler);
    let rows: Vec<TelemetryRow> = rx
        .try_iter()
        .filter_map(|m| match m {
            super::super::recorder::Msg::Telemetry(rows) => Some(rows),
            _ => None,
        })
        .flatten()
        .collect();
    // A power reading stands for at most two periods: a longer gap is not covered.
    (compare(&rows, telemetry.every * 2), failures)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifact::TelemetryGpu;
    use crate::artifact::telemetry::Field;

    fn row(
        source: &'static str,
        t_s: f64,
        power: Option<f64>,
        energy_j: Option<f64>,
    ) -> TelemetryRow {
        let mut g = TelemetryGpu {
            uuid: Some("GPU-1".to_owned()),
            ..TelemetryGpu::default()
        };
        if let Some(p) = power {
            g.set(Field::PowerW, p);
        }
        if let Some(e) = energy_j {
            g.set(Field::EnergyMj, e * 1000.0);
        }
        TelemetryRow {
            source,
            endpoint: "host".to_owned(),
            t_ns: (t_s * 1e9) as i64,
            phase: ScrapePhase::During,
            reading: Ok(g),
        }
    }

    #[test]
    fn a_counter_is_held_against_each_sources_integrated_power() {
        // NVML: 200 W for 10 s, its counter 2,000 J; nvidia-smi reads 206 W (3% high), a
        // broken one 260 W (30% high).
        let mut rows = Vec::new();
        for k in 0..=10 {
            let t = f64::from(k);
            rows.push(row("nvml", t, Some(200.0), Some(200.0 * t)));
            rows.push(row("nvidia-smi", t, Some(206.0), None));
        }
        let hold = Duration::from_secs(2);
        let checks = compare(&rows, hold);
        assert_eq!(checks.len(), 2, "{checks:?}");
        let nvml = checks.iter().find(|c| c.power_source == "nvml").unwrap();
        assert!(
            nvml.passes() && nvml.difference.unwrap().abs() < 1e-12,
            "{nvml:?}"
        );
        let smi = checks
            .iter()
            .find(|c| c.power_source == "nvidia-smi")
            .unwrap();
        assert!(
            smi.passes() && (smi.difference.unwrap() - 0.03).abs() < 1e-9,
            "{smi:?}"
        );
        assert_eq!(smi.counter_source, "nvml");
        let broken: Vec<TelemetryRow> = rows
            .iter()
            .map(|r| {
                let mut r = r.clone();
                if r.source == "nvidia-smi"
                    && let Ok(g) = r.reading.as_mut()
                {
                    g.set(Field::PowerW, 260.0);
                }
                r
            })
            .collect();
        let smi = compare(&broken, hold)
            .into_iter()
            .find(|c| c.power_source == "nvidia-smi")
            .unwrap();
        assert!(!smi.passes(), "{smi:?}");
        // Power readings with a gap from 3 s to 9 s (each held at most 2 s): they cover 7 of
        // the counter's 10 s, so the GPU is not checked (a failing row), never passed.
        let mut short = Vec::new();
        for k in 0..=10 {
            let t = f64::from(k);
            short.push(row("dcgm", t, None, Some(200.0 * t)));
            if k <= 3 || k >= 9 {
                short.push(row("nvidia-smi", t, Some(200.0), None));
            }
        }
        let checks = compare(&short, hold);
        assert_eq!(checks.len(), 1, "{checks:?}");
        assert_eq!(checks[0].difference, None);
        assert!(!checks[0].passes());
    }
}
