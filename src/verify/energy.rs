//! The GPU energy of a run's measured windows, recomputed from `telemetry.parquet` with
//! polars' reader and plain arithmetic, independently of the `gpu_energy` and `run_energy`
//! views: per arm GPU, the energy counter's growth from the last reading at or before the
//! window's start to the first at or after its end (a fall counting as a reset), or, where
//! a reading lacks the counter, its power held until the next reading integrated over the
//! window; the bound (the largest power seen times, at each end, the update interval plus
//! the distance from the edge to its reading); summed over the GPUs, and joules per output
//! token.

use std::collections::BTreeMap;

use polars_core::prelude::*;

use super::frame::{i64_column, read, str_column};

/// One window's energy figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Energy {
    pub energy_j: f64,
    /// `None` when a GPU had no power reading to bound its energy by.
    pub bound_j: Option<f64>,
    /// energy_j / the window's usage completion tokens; `None` without tokens.
    pub j_per_output_token: Option<f64>,
}

/// A window of a run: its first send, last completion and usage completion tokens.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub a: i64,
    pub b: i64,
    pub completion_tokens: Option<i64>,
}

/// One GPU reading.
#[derive(Debug, Clone, Copy)]
struct Reading {
    t: i64,
    power: Option<f64>,
    energy_mj: Option<f64>,
}

/// The arm's GPUs' readings, by (source, endpoint, gpu), in time order, with the largest
/// UUID the GPU's readings give.
type Series = BTreeMap<(String, String, i64), (Option<String>, Vec<Reading>)>;

fn read_series(files: &[std::path::PathBuf]) -> PolarsResult<Series> {
    let mut series = Series::new();
    for f in files {
        let df = read(
            f,
            &[
                "source",
                "endpoint",
                "gpu",
                "arm_gpu",
                "uuid",
                "t_ns",
                "power_w",
                "energy_mj",
                "error",
            ],
        )?;
        let text = |name: &str| str_column(&df, name);
        let ints = |name: &str| i64_column(&df, name);
        let floats = |name: &str| -> PolarsResult<Vec<Option<f64>>> {
            Ok(df
                .column(name)?
                .cast(&DataType::Float64)?
                .f64()?
                .iter()
                .collect())
        };
        let (source, endpoint, error) = (text("source")?, text("endpoint")?, text("error")?);
        let uuid = text("uuid")?;
        let (gpu, t) = (ints("gpu")?, ints("t_ns")?);
        let (power, energy) = (floats("power_w")?, floats("energy_mj")?);
        let arm: Vec<Option<bool>> = df.column("arm_gpu")?.bool()?.iter().collect();
        for i in 0..df.height() {
            let (Some(s), Some(e), Some(g), Some(t)) = (&source[i], &endpoint[i], gpu[i], t[i])
            else {
                continue;
            };
            if error[i].is_some() || arm[i] != Some(true) {
                continue;
            }
            let (id, readings) = series.entry((s.clone(), e.clone(), g)).or_default();
            *id = id.clone().max(uuid[i].clone());
            readings.push(Reading {
                t,
                power: power[i],
                energy_mj: energy[i],
            });
        }
    }
    for (_, readings) in series.values_mut() {
        readings.sort_by_key(|r| r.t);
    }
    Ok(series)
}

/// The median of `values` (the mean of the middle two of an even count), as DataFusion's
/// `median`.
fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

/// The GPU's update interval inferred from its readings: the median time between
/// successive changes of its energy counter (of its power where a reading lacks it), s.
fn inferred_interval(readings: &[Reading]) -> Option<f64> {
    let changed: Vec<i64> = readings
        .windows(2)
        .filter(|w| match w[1].energy_mj {
            Some(e) => w[0].energy_mj.is_some_and(|p| p != e),
            None => w[0].power.zip(w[1].power).is_some_and(|(p, q)| p != q),
        })
        .map(|w| w[1].t)
        .collect();
    median(changed.windows(2).map(|w| (w[1] - w[0]) as f64).collect()).map(|ns| ns / 1e9)
}

/// One GPU's energy over `w` and its bound, J: `None` when it has no reading from the
/// window's start on or none up to its end, or neither its counter nor its power readings
/// cover the window; the bound `None` without power readings; whether it came from the
/// counter.
fn gpu_energy(
    readings: &[Reading],
    w: &Window,
    declared: Option<f64>,
) -> Option<(f64, Option<f64>, bool)> {
    let start = readings.iter().rposition(|r| r.t <= w.a).unwrap_or(0);
    let end = readings
        .iter()
        .position(|r| r.t >= w.b)
        .unwrap_or(readings.len().checked_sub(1)?);
    let (t_start, t_end) = (readings[start].t, readings[end].t);
    if t_start > w.b || t_end < w.a {
        return None;
    }
    let bracketed = &readings[start..=end.max(start)];
    let counter = bracketed.len() >= 2 && bracketed.iter().all(|r| r.energy_mj.is_some());
    let energy = if counter {
        bracketed
            .windows(2)
            .map(|p| {
                let (before, now) = (p[0].energy_mj.unwrap_or(0.0), p[1].energy_mj.unwrap_or(0.0));
                if now >= before { now - before } else { now }
            })
            .sum::<f64>()
            / 1000.0
    } else {
        // Each power reading held until the next one (a reading without power extends it).
        let powered: Vec<(i64, f64)> = readings
            .iter()
            .filter_map(|r| Some((r.t, r.power?)))
            .collect();
        let mut joules = None;
        for (i, (t, p)) in powered.iter().enumerate() {
            let next = powered.get(i + 1).map_or(w.b, |n| n.0);
            if *t < w.b && next > w.a {
                let held = (next.min(w.b) - (*t).max(w.a)) as f64 / 1e9;
                *joules.get_or_insert(0.0) += p * held;
            }
        }
        joules?
    };
    let max_power = bracketed.iter().filter_map(|r| r.power).reduce(f64::max);
    let interval = declared
        .or_else(|| inferred_interval(readings))
        .unwrap_or(0.0);
    let edges =
        2.0 * interval + (w.a - t_start).abs() as f64 / 1e9 + (t_end - w.b).abs() as f64 / 1e9;
    Some((energy, max_power.map(|p| p * edges), counter))
}

/// The energy of each window of `windows` over the arm's GPUs of `files` (the telemetry
/// table's), the sources' declared intervals by (source, endpoint); a window without
/// readings has no entry.
pub fn energy(
    files: &[std::path::PathBuf],
    declared: &BTreeMap<(String, String), f64>,
    windows: &BTreeMap<&'static str, Window>,
) -> PolarsResult<BTreeMap<&'static str, Energy>> {
    let series = read_series(files)?;
    let mut out = BTreeMap::new();
    for (name, w) in windows {
        if w.b <= w.a {
            continue;
        }
        // Each GPU once: by its UUID where the sources give one (else by source, endpoint
        // and index), its counter's figure first, then the first source by name.
        let mut per_gpu: BTreeMap<String, (bool, &str, &str, f64, Option<f64>)> = BTreeMap::new();
        for ((source, endpoint, gpu), (uuid, readings)) in &series {
            let interval = declared.get(&(source.clone(), endpoint.clone())).copied();
            let Some((e, b, counter)) = gpu_energy(readings, w, interval) else {
                continue;
            };
            let id = uuid
                .clone()
                .unwrap_or_else(|| format!("{source} {endpoint} {gpu}"));
            let candidate = (!counter, source.as_str(), endpoint.as_str(), e, b);
            let keep = per_gpu.get(&id).is_none_or(|kept| {
                (candidate.0, candidate.1, candidate.2) < (kept.0, kept.1, kept.2)
            });
            if keep {
                per_gpu.insert(id, candidate);
            }
        }
        // The GPUs' energies added, and their bounds (none when a GPU has none).
        let mut total: Option<(f64, Option<f64>)> = None;
        for (_, _, _, e, b) in per_gpu.into_values() {
            let (te, tb) = total.unwrap_or((0.0, Some(0.0)));
            total = Some((te + e, tb.zip(b).map(|(x, y)| x + y)));
        }
        if let Some((energy_j, bound_j)) = total {
            out.insert(
                *name,
                Energy {
                    energy_j,
                    bound_j,
                    j_per_output_token: w
                        .completion_tokens
                        .filter(|t| *t != 0)
                        .map(|t| energy_j / t as f64),
                },
            );
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t_s: f64, power: f64, energy_j: Option<f64>) -> Reading {
        Reading {
            t: (t_s * 1e9) as i64,
            power: Some(power),
            energy_mj: energy_j.map(|j| j * 1000.0),
        }
    }

    #[test]
    fn the_counter_counts_from_the_bracketing_readings_and_a_fall_is_a_reset() {
        let r = [
            at(0.0, 100.0, Some(1000.0)),
            at(1.0, 200.0, Some(1100.0)),
            at(2.0, 200.0, Some(1300.0)),
            at(3.0, 200.0, Some(150.0)),
            at(4.0, 100.0, Some(350.0)),
        ];
        let w = Window {
            a: 500_000_000,
            b: 3_500_000_000,
            completion_tokens: Some(10),
        };
        // From the reading at 0 s to the one at 4 s: 100 + 200 + 150 (reset) + 200.
        let (e, bound, counter) = gpu_energy(&r, &w, Some(1.0)).unwrap();
        assert!(counter);
        assert!((e - 650.0).abs() < 1e-9, "{e}");
        // Each end: the interval plus the 0.5 s from the edge to its reading.
        let bound = bound.unwrap();
        assert!((bound - 200.0 * (1.5 + 1.5)).abs() < 1e-9, "{bound}");
        // Without the counter, power held until the next reading, over the window only.
        let p: Vec<Reading> = r
            .iter()
            .map(|x| Reading {
                energy_mj: None,
                ..*x
            })
            .collect();
        let (e, _, _) = gpu_energy(&p, &w, Some(1.0)).unwrap();
        assert!(
            (e - (100.0 * 0.5 + 200.0 + 200.0 + 200.0 * 0.5)).abs() < 1e-9,
            "{e}"
        );
        // A reading without power extends the one before it.
        let mut gap = p.clone();
        gap[2].power = None;
        let (e, _, _) = gpu_energy(&gap, &w, Some(1.0)).unwrap();
        assert!(
            (e - (100.0 * 0.5 + 200.0 * 2.0 + 200.0 * 0.5)).abs() < 1e-9,
            "{e}"
        );
        // Readings only after the window: no figure.
        let late = [at(5.0, 100.0, Some(1.0)), at(6.0, 100.0, Some(2.0))];
        assert_eq!(gpu_energy(&late, &w, Some(1.0)), None);
        // The counter without power: energy, no bound.
        let dark: Vec<Reading> = r.iter().map(|x| Reading { power: None, ..*x }).collect();
        assert_eq!(gpu_energy(&dark, &w, Some(1.0)), Some((650.0, None, true)));
    }

    #[test]
    fn the_interval_is_inferred_from_value_changes() {
        let r: Vec<Reading> = (0..10)
            .map(|k| at(f64::from(k), 100.0, Some(f64::from(k / 3) * 100.0)))
            .collect();
        // The counter changes at 3, 6 and 9 s.
        assert_eq!(inferred_interval(&r), Some(3.0));
        assert_eq!(median(vec![1.0, 4.0, 2.0, 3.0]), Some(2.5));
    }
}
