//! `anvil verify`: recompute the headline figures independently and compare them with the
//! query layer.
//!
//! [`recompute`] reads each artifact's Parquet files with polars and recomputes per-request
//! TTFT, effective prefill, decode, TPOT, ITL and E2E, the first wave, and per window (`all`,
//! `after_first_wave`) their statistics (n, mean, sd, 95% CI, min, percentiles by nearest
//! rank with their distribution-free 95% intervals, max) and the aggregate output
//! throughput; with SLOs given, each request's attainment and per window the attained share,
//! its exact interval and goodput, and for a session workload the same per session
//! (`session_goodput`). [`compare`] puts them beside `request_figures`, `cell_stats` and
//! `aggregate_throughput` from DataFusion and reports, per metric, the largest relative
//! difference |a − b| / max(|a|, |b|); a value present on one side only, or a request or
//! statistic missing on one side, is an infinite difference. [`capacity`] recomputes each
//! capacity search's probes (attainment and goodput in the search's window), its bracket's
//! pooled shares and exact intervals and goodput per GPU at capacity from the polars figures
//! and puts them beside `capacity.json`. [`energy`] recomputes the arm's GPU energy per
//! window from the telemetry table, its bound and joules per output token, put beside
//! `run_energy`.

pub mod energy;
pub mod frame;
pub mod recompute;

use std::collections::BTreeMap;
use std::fmt;

use crate::query::rows::{column_f64, column_str};
use crate::query::{AnvilSession, QueryError};

pub use recompute::{Bound, Goodput, METRICS, Recomputed, STATISTICS, WINDOWS, recompute};

/// Largest relative difference allowed between the two computations.
pub const TOLERANCE: f64 = 1e-9;

/// Relative difference of two optional figures: 0 when equal (or both NULL), infinite when
/// only one is NULL.
pub fn relative_difference(a: Option<f64>, b: Option<f64>) -> f64 {
    match (a, b) {
        (None, None) => 0.0,
        (Some(a), Some(b)) if a == b => 0.0,
        (Some(a), Some(b)) => (a - b).abs() / a.abs().max(b.abs()),
        _ => f64::INFINITY,
    }
}

/// The largest difference found for one figure family.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// e.g. `request ttft_ms` or `cell_stats tpot_ms`.
    pub what: String,
    /// Figures compared.
    pub compared: usize,
    pub largest: f64,
    /// Where the largest difference is (run, request or statistic) and both values.
    pub at: String,
}

impl Difference {
    pub fn within_tolerance(&self) -> bool {
        self.largest <= TOLERANCE
    }
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:<36} {:>6} figures  largest relative difference {:.3e}",
            self.what, self.compared, self.largest
        )?;
        if !self.within_tolerance() {
            write!(f, "  at {}", self.at)?;
        }
        Ok(())
    }
}

#[derive(Debug, Default)]
struct Tracker {
    compared: usize,
    largest: f64,
    at: String,
}

impl Tracker {
    /// What this tracker found, under the name `what`.
    fn difference(self, what: String) -> Difference {
        Difference {
            what,
            compared: self.compared,
            largest: self.largest,
            at: self.at,
        }
    }

    fn add(&mut self, a: Option<f64>, b: Option<f64>, at: impl FnOnce() -> String) {
        self.compared += 1;
        let d = relative_difference(a, b);
        if d > self.largest {
            self.largest = d;
            self.at = format!("{} (sql {a:?}, polars {b:?})", at());
        }
    }
}

/// Recompute every capacity search of `searches` from `recomputed` (the probes are ordinary
/// artifacts of the session) and compare with what `capacity.json` states: each probe's
/// attained and measured requests (a session search's: sessions) and goodput in the search's window; each bracket side's
/// pooled share and exact interval; goodput per GPU at capacity.
pub fn capacity(
    recomputed: &[Recomputed],
    searches: &[crate::artifact::capacity::CapacityResult],
) -> Vec<Difference> {
    if searches.is_empty() {
        return Vec::new();
    }
    let by_run: BTreeMap<&str, &Recomputed> =
        recomputed.iter().map(|r| (r.run_id.as_str(), r)).collect();
    let mut probes = Tracker::default();
    let mut brackets = Tracker::default();
    let mut per_gpu = Tracker::default();
    for s in searches {
        let window = s.window.as_str();
        // A session search counts sessions (a session attains when every turn does).
        let of = |run_id: &str| {
            let run = by_run.get(run_id)?;
            match s.judged {
                crate::artifact::capacity::Judged::Requests => run.goodput.get(window).copied(),
                crate::artifact::capacity::Judged::Sessions => {
                    run.session_goodput.get(window).map(|g| Goodput {
                        requests: g.sessions,
                        attained: g.attained,
                        share: g.share,
                        low: g.low,
                        high: g.high,
                        rps: g.sps,
                        tps: g.tps,
                    })
                }
            }
        };
        for o in &s.probes {
            let g = of(&o.run_id);
            let at = || format!("{} probe {} (load {})", s.arm, o.run_id, o.load);
            probes.add(Some(o.attained as f64), g.map(|g| g.attained), at);
            probes.add(Some(o.requests as f64), g.map(|g| g.requests), at);
            // A file written before probes recorded their goodput states none to compare.
            if o.goodput_tps.is_some() {
                probes.add(o.goodput_tps, g.and_then(|g| g.tps), at);
            }
        }
        let Some(b) = &s.bracket else { continue };
        for side in [&b.passing, &b.failing].into_iter().flatten() {
            let (k, n) = side.runs.iter().fold((0.0, 0.0), |(k, n), o| {
                let g = of(&o.run_id).unwrap_or_default();
                (k + g.attained, n + g.requests)
            });
            let (low, high) = recompute::exact_interval(k as u64, n as u64);
            let at = || format!("{} bracket at load {}", s.arm, side.load);
            brackets.add(Some(side.share), (n > 0.0).then(|| k / n), at);
            brackets.add(Some(side.low), Some(low), at);
            brackets.add(Some(side.high), Some(high), at);
        }
        if let (Some(stated), Some(p), Some(gpus)) = (
            &s.goodput_per_gpu,
            b.passing.as_ref().filter(|_| s.capacity.is_some()),
            s.gpus,
        ) {
            let values: Vec<Option<f64>> = p
                .runs
                .iter()
                .map(|o| of(&o.run_id).and_then(|g| g.tps))
                .collect();
            let mean = values
                .iter()
                .copied()
                .collect::<Option<Vec<f64>>>()
                .filter(|v| !v.is_empty())
                .map(|v| v.iter().sum::<f64>() / v.len() as f64 / f64::from(gpus));
            per_gpu.add(Some(stated.mean), mean, || {
                format!("{} goodput per GPU at capacity", s.arm)
            });
        }
    }
    vec![
        probes.difference("capacity probes (attainment, goodput)".to_owned()),
        brackets.difference("capacity brackets (share, exact CI)".to_owned()),
        per_gpu.difference("capacity goodput per GPU".to_owned()),
    ]
}

/// Compare the `session_goodput` view with the recomputed session goodput: sessions, those
/// attained, their turns, the share and its exact interval, goodput per second; a row on one
/// side only counts in `missing`.
async fn compare_session_goodput(
    session: &AnvilSession,
    by_run: &BTreeMap<&str, &Recomputed>,
    sessions: &mut Tracker,
    missing: &mut Tracker,
) -> Result<(), QueryError> {
    let g = session
        .query(
            "SELECT run_id, window, CAST(sessions AS DOUBLE) AS sessions, \
             CAST(attained AS DOUBLE) AS attained, CAST(turns AS DOUBLE) AS turns, \
             CAST(turns_attained AS DOUBLE) AS turns_attained, attained_share, \
             share_ci95_low, share_ci95_high, goodput_sps, goodput_tps FROM session_goodput",
        )
        .await?;
    let (runs, windows) = (column_str(&g, "run_id")?, column_str(&g, "window")?);
    let names = [
        "sessions",
        "attained",
        "turns",
        "turns_attained",
        "attained_share",
        "share_ci95_low",
        "share_ci95_high",
        "goodput_sps",
        "goodput_tps",
    ];
    let columns = names
        .iter()
        .map(|n| column_f64(&g, n))
        .collect::<Result<Vec<_>, _>>()?;
    let mut rows = 0usize;
    for (row, run) in runs.iter().enumerate() {
        let window = windows[row].as_str();
        let Some(t) = by_run
            .get(run.as_str())
            .and_then(|r| r.session_goodput.get(window))
        else {
            missing.add(Some(0.0), None, || {
                format!("run {run} session_goodput {window}: in SQL, not recomputed")
            });
            continue;
        };
        rows += 1;
        let theirs = [
            Some(t.sessions),
            Some(t.attained),
            Some(t.turns),
            Some(t.turns_attained),
            t.share,
            t.low,
            t.high,
            t.sps,
            t.tps,
        ];
        for ((name, column), value) in names.iter().zip(&columns).zip(theirs) {
            sessions.add(column[row], value, || format!("run {run} {window} {name}"));
        }
    }
    let expected: usize = by_run.values().map(|r| r.session_goodput.len()).sum();
    if rows != expected {
        missing.add(None, Some(0.0), || {
            format!("{expected} session_goodput rows recomputed, {rows} in SQL")
        });
    }
    Ok(())
}

/// Compare the `run_energy` view with the recomputed energy: the GPUs' energy, its bound and
/// joules per output token per run and window; a row on one side only counts in `missing`.
async fn compare_energy(
    session: &AnvilSession,
    by_run: &BTreeMap<&str, &Recomputed>,
    energy: &mut Tracker,
    missing: &mut Tracker,
) -> Result<(), QueryError> {
    let e = session
        .query("SELECT run_id, window, energy_j, bound_j, j_per_output_token FROM run_energy")
        .await?;
    let (runs, windows) = (column_str(&e, "run_id")?, column_str(&e, "window")?);
    let names = ["energy_j", "bound_j", "j_per_output_token"];
    let columns = names
        .iter()
        .map(|n| column_f64(&e, n))
        .collect::<Result<Vec<_>, _>>()?;
    let mut rows = 0usize;
    for (row, run) in runs.iter().enumerate() {
        let window = windows[row].as_str();
        let Some(t) = by_run.get(run.as_str()).and_then(|r| r.energy.get(window)) else {
            missing.add(Some(0.0), None, || {
                format!("run {run} run_energy {window}: in SQL, not recomputed")
            });
            continue;
        };
        rows += 1;
        let theirs = [Some(t.energy_j), t.bound_j, t.j_per_output_token];
        for ((name, column), value) in names.iter().zip(&columns).zip(theirs) {
            energy.add(column[row], value, || format!("run {run} {window} {name}"));
        }
    }
    let expected: usize = by_run.values().map(|r| r.energy.len()).sum();
    if rows != expected {
        missing.add(None, Some(0.0), || {
            format!("{expected} run_energy rows recomputed, {rows} in SQL")
        });
    }
    Ok(())
}

/// Compare the session's `request_figures` and `cell_stats` with `recomputed` (one entry
/// per artifact of the session). One [`Difference`] per metric and figure family.
pub async fn compare(
    session: &AnvilSession,
    recomputed: &[Recomputed],
) -> Result<Vec<Difference>, QueryError> {
    let by_run: BTreeMap<&str, &Recomputed> =
        recomputed.iter().map(|r| (r.run_id.as_str(), r)).collect();
    let by_request: std::collections::HashMap<(&str, i64), &recompute::RequestFigures> = recomputed
        .iter()
        .flat_map(|r| {
            r.requests
                .iter()
                .map(move |q| ((r.run_id.as_str(), q.request_index), q))
        })
        .collect();
    let mut missing = Tracker::default();

    // Per request.
    let sql = session
        .query(&format!(
            "SELECT run_id, CAST(request_index AS DOUBLE) AS request_index, \
             CAST(first_wave AS DOUBLE) AS first_wave, {} \
             FROM request_figures ORDER BY run_id, request_index",
            METRICS.join(", ")
        ))
        .await?;
    let first_wave = column_f64(&sql, "first_wave")?;
    let mut waves = Tracker::default();
    let runs = column_str(&sql, "run_id")?;
    let indices = column_f64(&sql, "request_index")?;
    let columns = METRICS
        .iter()
        .map(|m| column_f64(&sql, m))
        .collect::<Result<Vec<_>, _>>()?;
    let mut per_request: Vec<Tracker> = METRICS.iter().map(|_| Tracker::default()).collect();
    let mut seen = 0usize;
    for (row, run) in runs.iter().enumerate() {
        let index = indices[row].unwrap_or(-1.0) as i64;
        let Some(theirs) = by_request.get(&(run.as_str(), index)) else {
            missing.add(Some(0.0), None, || {
                format!("run {run} request {index}: in SQL, not recomputed")
            });
            continue;
        };
        seen += 1;
        waves.add(
            first_wave[row],
            Some(if theirs.first_wave { 1.0 } else { 0.0 }),
            || format!("run {run} request {index} first_wave"),
        );
        for (m, tracker) in per_request.iter_mut().enumerate() {
            tracker.add(columns[m][row], theirs.metrics[m], || {
                format!("run {run} request {index}")
            });
        }
    }
    let recomputed_requests: usize = recomputed.iter().map(|r| r.requests.len()).sum();
    if recomputed_requests != seen {
        missing.add(None, Some(0.0), || {
            format!("{recomputed_requests} measured requests recomputed, {seen} matched in SQL")
        });
    }

    // Statistics, per window.
    let stats = session
        .query(&format!(
            "SELECT run_id, window, metric, {} FROM cell_stats \
             ORDER BY run_id, window, metric_order",
            STATISTICS.join(", ")
        ))
        .await?;
    let s_runs = column_str(&stats, "run_id")?;
    let s_windows = column_str(&stats, "window")?;
    let s_metrics = column_str(&stats, "metric")?;
    let s_columns = STATISTICS
        .iter()
        .map(|c| column_f64(&stats, c))
        .collect::<Result<Vec<_>, _>>()?;
    let mut per_stat: Vec<Tracker> = METRICS.iter().map(|_| Tracker::default()).collect();
    let mut per_interval: Vec<Tracker> = METRICS.iter().map(|_| Tracker::default()).collect();
    let mut stat_rows = 0usize;
    for (row, run) in s_runs.iter().enumerate() {
        let (metric, window) = (s_metrics[row].as_str(), s_windows[row].as_str());
        let Some(m) = METRICS.iter().position(|x| *x == metric) else {
            continue;
        };
        let Some(theirs) = by_run
            .get(run.as_str())
            .and_then(|r| r.stats.get(&(window, metric)))
        else {
            missing.add(Some(0.0), None, || {
                format!("run {run} cell_stats {window} {metric}: in SQL, not recomputed")
            });
            continue;
        };
        stat_rows += 1;
        for (k, name) in STATISTICS.iter().enumerate() {
            let tracker = if name.contains("_ci_") {
                &mut per_interval[m]
            } else {
                &mut per_stat[m]
            };
            tracker.add(s_columns[k][row], theirs[k], || {
                format!("run {run} {window} {name}")
            });
        }
    }

    // Aggregate output throughput of the whole run, per window.
    let tps = session
        .query(
            "SELECT run_id, window, output_tps FROM aggregate_throughput WHERE scope = 'run' \
             ORDER BY run_id, window",
        )
        .await?;
    let mut throughput = Tracker::default();
    let (t_runs, t_windows, t_values) = (
        column_str(&tps, "run_id")?,
        column_str(&tps, "window")?,
        column_f64(&tps, "output_tps")?,
    );
    for (row, run) in t_runs.iter().enumerate() {
        let window = t_windows[row].as_str();
        match by_run
            .get(run.as_str())
            .and_then(|r| r.output_tps.get(window))
        {
            Some(theirs) => throughput.add(t_values[row], *theirs, || {
                format!("run {run} {window} output_tps")
            }),
            None => missing.add(Some(0.0), None, || {
                format!("run {run} aggregate_throughput {window}: in SQL, not recomputed")
            }),
        }
    }
    // Attainment and goodput, where SLOs are given: per request, then per run and window.
    let mut attained = Tracker::default();
    let mut shares = Tracker::default();
    let mut share_intervals = Tracker::default();
    let mut goodputs = Tracker::default();
    let mut sessions = Tracker::default();
    if !session.slos().is_empty() {
        let a = session
            .query(
                "SELECT run_id, CAST(request_index AS DOUBLE) AS request_index, \
                 CAST(attained AS DOUBLE) AS attained FROM slo_attainment",
            )
            .await?;
        let (a_runs, a_index, a_attained) = (
            column_str(&a, "run_id")?,
            column_f64(&a, "request_index")?,
            column_f64(&a, "attained")?,
        );
        for (row, run) in a_runs.iter().enumerate() {
            let index = a_index[row].unwrap_or(-1.0) as i64;
            match by_request.get(&(run.as_str(), index)) {
                Some(theirs) => attained.add(
                    a_attained[row],
                    Some(if theirs.attained { 1.0 } else { 0.0 }),
                    || format!("run {run} request {index} attained"),
                ),
                None => missing.add(Some(0.0), None, || {
                    format!("run {run} request {index}: in slo_attainment, not recomputed")
                }),
            }
        }
        let g = session
            .query(
                "SELECT run_id, window, CAST(requests AS DOUBLE) AS requests, \
                 CAST(attained AS DOUBLE) AS attained, attained_share, share_ci95_low, \
                 share_ci95_high, goodput_rps, goodput_tps FROM goodput",
            )
            .await?;
        let (g_runs, g_windows) = (column_str(&g, "run_id")?, column_str(&g, "window")?);
        let col = |name: &str| column_f64(&g, name);
        let (requests, attained_n, share, low, high, rps, tps) = (
            col("requests")?,
            col("attained")?,
            col("attained_share")?,
            col("share_ci95_low")?,
            col("share_ci95_high")?,
            col("goodput_rps")?,
            col("goodput_tps")?,
        );
        let mut goodput_rows = 0usize;
        for (row, run) in g_runs.iter().enumerate() {
            let window = g_windows[row].as_str();
            let Some(theirs) = by_run.get(run.as_str()).and_then(|r| r.goodput.get(window)) else {
                missing.add(Some(0.0), None, || {
                    format!("run {run} goodput {window}: in SQL, not recomputed")
                });
                continue;
            };
            goodput_rows += 1;
            let at = |what: &str| format!("run {run} {window} {what}");
            shares.add(requests[row], Some(theirs.requests), || at("requests"));
            shares.add(attained_n[row], Some(theirs.attained), || at("attained"));
            shares.add(share[row], theirs.share, || at("attained_share"));
            share_intervals.add(low[row], theirs.low, || at("share_ci95_low"));
            share_intervals.add(high[row], theirs.high, || at("share_ci95_high"));
            goodputs.add(rps[row], theirs.rps, || at("goodput_rps"));
            goodputs.add(tps[row], theirs.tps, || at("goodput_tps"));
        }
        let expected: usize = recomputed.iter().map(|r| r.goodput.len()).sum();
        if goodput_rows != expected {
            missing.add(None, Some(0.0), || {
                format!("{expected} goodput rows recomputed, {goodput_rows} in SQL")
            });
        }
        compare_session_goodput(session, &by_run, &mut sessions, &mut missing).await?;
    }

    let expected_rows: usize = recomputed
        .iter()
        .filter(|r| !r.requests.is_empty())
        .map(|r| r.stats.len())
        .sum();
    if stat_rows != expected_rows {
        missing.add(None, Some(0.0), || {
            format!("{expected_rows} cell_stats rows recomputed, {stat_rows} in SQL")
        });
    }

    let mut out = vec![waves.difference("request first_wave".to_owned())];
    for (table, trackers) in [
        ("request", per_request),
        ("cell_stats", per_stat),
        ("percentile_ci", per_interval),
    ] {
        let named = trackers.into_iter().zip(METRICS);
        out.extend(named.map(|(t, metric)| t.difference(format!("{table} {metric}"))));
    }
    out.push(throughput.difference("aggregate_throughput output_tps".to_owned()));
    let mut energy = Tracker::default();
    compare_energy(session, &by_run, &mut energy, &mut missing).await?;
    if energy.compared > 0 {
        out.push(energy.difference("run_energy energy_j, bound_j, j_per_output_token".to_owned()));
    }
    if !session.slos().is_empty() {
        for (what, t) in [
            ("slo_attainment attained", attained),
            ("goodput attained_share", shares),
            ("goodput share interval", share_intervals),
            ("goodput goodput_rps, goodput_tps", goodputs),
            ("session_goodput", sessions),
        ] {
            out.push(t.difference(what.to_owned()));
        }
    }
    if missing.compared > 0 {
        out.push(missing.difference("rows present on one side only".to_owned()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_difference_treats_null_on_one_side_as_infinite() {
        assert_eq!(relative_difference(None, None), 0.0);
        assert_eq!(relative_difference(Some(0.0), Some(0.0)), 0.0);
        assert_eq!(relative_difference(Some(1.0), None), f64::INFINITY);
        assert!((relative_difference(Some(100.0), Some(101.0)) - 1.0 / 101.0).abs() < 1e-15);
        assert_eq!(relative_difference(Some(-2.0), Some(2.0)), 2.0);
    }
}
