//! The independent recomputation: per-request TTFT, effective prefill, decode, TPOT, E2E and
//! their statistics, with polars reading the Parquet files itself (its eager reader, one
//! file at a time, only the columns used) and computing the statistics; the per-request
//! join of events to requests is a loop here. No DataFusion, no `queries/` SQL and no
//! [`crate::stats`] code on this path: the definitions are written out again here from the
//! manifest, so a mistake in one path shows as a difference.

use std::collections::BTreeMap;
use std::path::Path;

use polars_core::prelude::*;
use polars_io::prelude::{ParquetReader, SerReader};

use crate::query::ArtifactSource;

/// Per-request figures of one measured request (NULL where the definition has no value).
#[derive(Debug, Clone, PartialEq)]
pub struct RequestFigures {
    pub request_index: i64,
    pub ok: bool,
    /// ttft_ms, effective_prefill_tps, decode_tps, tpot_ms, itl_ms, e2e_ms.
    pub metrics: [Option<f64>; 6],
}

/// Metric names, in [`RequestFigures::metrics`] order (the catalogue's columns).
pub const METRICS: [&str; 6] = crate::metric::MetricId::COLUMNS;

/// Statistic names, in [`Figures`] order (the one list of `crate::stats`).
pub use crate::stats::STATISTICS;

/// The statistics of one metric of one artifact, in [`STATISTICS`] order.
pub type Figures = [Option<f64>; 13];

/// Everything recomputed for one artifact.
#[derive(Debug, Clone)]
pub struct Recomputed {
    pub run_id: String,
    pub requests: Vec<RequestFigures>,
    /// Per metric name.
    pub stats: BTreeMap<&'static str, Figures>,
}

/// One Parquet file's `columns` as a polars frame (polars' own reader, eager).
fn read(path: &Path, columns: &[&str]) -> PolarsResult<DataFrame> {
    let file = std::fs::File::open(path)
        .map_err(|e| PolarsError::ComputeError(format!("{}: {e}", path.display()).into()))?;
    ParquetReader::new(file)
        .with_columns(Some(columns.iter().map(|c| c.to_string()).collect()))
        .finish()
}

fn i64_column(df: &DataFrame, name: &str) -> PolarsResult<Vec<Option<i64>>> {
    Ok(df
        .column(name)?
        .cast(&DataType::Int64)?
        .i64()?
        .iter()
        .collect())
}

fn str_column(df: &DataFrame, name: &str) -> PolarsResult<Vec<Option<String>>> {
    Ok(df
        .column(name)?
        .str()?
        .iter()
        .map(|s| s.map(str::to_owned))
        .collect())
}

/// What one request's events say: the first non-empty content delta's time and the largest
/// usage figures any event carries.
#[derive(Debug, Default, Clone, Copy)]
struct EventFacts {
    first_content_ns: Option<i64>,
    prompt_tokens: Option<i64>,
    completion_tokens: Option<i64>,
}

/// One measured request's row.
#[derive(Debug, Clone)]
struct MeasuredRequest {
    index: Option<i64>,
    outcome: Option<String>,
    sent: Option<i64>,
    done: Option<i64>,
}

fn no_data(table: &str) -> PolarsError {
    PolarsError::NoData(format!("no Parquet file for the {table} table").into())
}

/// Recompute one artifact's figures.
pub fn recompute(artifact: &ArtifactSource) -> PolarsResult<Recomputed> {
    use crate::artifact::Table;

    // Measured requests, in request order.
    let mut requests: Vec<MeasuredRequest> = Vec::new();
    let files = artifact.files(Table::Requests);
    if files.is_empty() {
        return Err(no_data("requests"));
    }
    for f in files {
        let df = read(
            f,
            &["request_index", "kind", "outcome", "t_sent_ns", "t_done_ns"],
        )?;
        let index = i64_column(&df, "request_index")?;
        let kind = str_column(&df, "kind")?;
        let outcome = str_column(&df, "outcome")?;
        let sent = i64_column(&df, "t_sent_ns")?;
        let done = i64_column(&df, "t_done_ns")?;
        for i in 0..df.height() {
            if kind[i].as_deref() == Some("measured") {
                requests.push(MeasuredRequest {
                    index: index[i],
                    outcome: outcome[i].clone(),
                    sent: sent[i],
                    done: done[i],
                });
            }
        }
    }
    requests.sort_by_key(|r| r.index);

    // First non-empty content delta (NULL and '' excluded; reasoning deltas are another
    // column) and the usage of whichever event carries it.
    let mut events: BTreeMap<i64, EventFacts> = BTreeMap::new();
    let files = artifact.files(Table::Events);
    if files.is_empty() {
        return Err(no_data("events"));
    }
    for f in files {
        let df = read(
            f,
            &[
                "request_index",
                "t_ns",
                "content_delta",
                "usage_prompt_tokens",
                "usage_completion_tokens",
            ],
        )?;
        // Walked as they are read (10M events would be 640 MB as four vectors of options).
        let as_i64 = |name: &str| df.column(name)?.cast(&DataType::Int64);
        let (index, t) = (as_i64("request_index")?, as_i64("t_ns")?);
        let (prompt, completion) = (
            as_i64("usage_prompt_tokens")?,
            as_i64("usage_completion_tokens")?,
        );
        let content = df.column("content_delta")?.str()?;
        let rows = index.i64()?.iter().zip(t.i64()?.iter()).zip(
            content
                .iter()
                .zip(prompt.i64()?.iter().zip(completion.i64()?.iter())),
        );
        for ((request, t), (delta, (prompt, completion))) in rows {
            let Some(request) = request else { continue };
            let e = events.entry(request).or_default();
            if delta.is_some_and(|d| !d.is_empty()) {
                e.first_content_ns = e.first_content_ns.into_iter().chain(t).min();
            }
            // `None` orders below every `Some`: the largest value present, or none.
            e.prompt_tokens = e.prompt_tokens.max(prompt);
            e.completion_tokens = e.completion_tokens.max(completion);
        }
    }

    let mut figures = Vec::with_capacity(requests.len());
    for r in &requests {
        let facts = r
            .index
            .and_then(|i| events.get(&i).copied())
            .unwrap_or_default();
        let (first, sent, done) = (facts.first_content_ns, r.sent, r.done);
        // Recorded instants are whatever the file holds: a difference that overflows is no
        // figure (the SQL side refuses the same artifact with an overflow error).
        let ttft_ns = first.zip(sent).and_then(|(f, s)| f.checked_sub(s));
        let generation_ns = done.zip(first).and_then(|(d, f)| d.checked_sub(f));
        let e2e_ns = done.zip(sent).and_then(|(d, s)| d.checked_sub(s));
        let after_first = facts.completion_tokens.filter(|c| *c > 1).map(|c| c - 1);
        let nonzero = |v: Option<i64>| v.filter(|v| *v != 0);
        // TTFT = first content − start; prefill = usage prompt tokens / TTFT (s);
        // decode = (completion − 1) / generation (s); TPOT = ITL = generation (ms) /
        // (completion − 1); E2E = completion of stream − start.
        let ttft_ms = ttft_ns.map(|t| t as f64 / 1e6);
        let prefill = facts
            .prompt_tokens
            .zip(nonzero(ttft_ns))
            .map(|(p, t)| p as f64 / (t as f64 / 1e9));
        let decode = after_first
            .zip(nonzero(generation_ns))
            .map(|(k, g)| k as f64 / (g as f64 / 1e9));
        let tpot = after_first
            .zip(nonzero(generation_ns))
            .map(|(k, g)| (g as f64 / 1e6) / k as f64);
        let e2e = e2e_ns.map(|t| t as f64 / 1e6);
        figures.push(RequestFigures {
            request_index: r.index.unwrap_or(-1),
            ok: r.outcome.as_deref() == Some("ok"),
            metrics: [ttft_ms, prefill, decode, tpot, tpot, e2e],
        });
    }

    let mut stats = BTreeMap::new();
    for (m, name) in METRICS.iter().enumerate() {
        let values: Vec<f64> = figures
            .iter()
            .filter(|r| r.ok)
            .filter_map(|r| r.metrics[m])
            .collect();
        stats.insert(*name, describe(values)?);
    }
    Ok(Recomputed {
        run_id: artifact.run.run_id.clone(),
        requests: figures,
        stats,
    })
}

/// The manifest's statistics of `values` with polars: mean, sample standard deviation
/// (ddof 1), the Student t 95% interval of the mean, and nearest-rank percentiles (the value
/// at 1-based rank ⌈p·n⌉ of the sorted values, p·n within 1e-9 of an integer taken as it).
fn describe(values: Vec<f64>) -> PolarsResult<Figures> {
    let n = values.len();
    let series = Float64Chunked::from_vec("v".into(), values);
    let sorted: Vec<f64> = series.sort(false).iter().flatten().collect();
    let mean = series.mean();
    let sd = if n >= 2 { series.std(1) } else { None };
    let ci = match (mean, sd) {
        (Some(mean), Some(sd)) if n >= 2 => {
            use statrs::distribution::{ContinuousCDF, StudentsT};
            let t = StudentsT::new(0.0, 1.0, (n - 1) as f64)
                .map_err(|e| PolarsError::ComputeError(e.to_string().into()))?
                .inverse_cdf(0.975);
            let half = t * sd / (n as f64).sqrt();
            Some((mean - half, mean + half))
        }
        _ => None,
    };
    let rank = |p: f64| -> Option<f64> {
        if sorted.is_empty() {
            return None;
        }
        let x = p * n as f64;
        let r = if (x - x.round()).abs() <= 1e-9 * x.max(1.0) {
            x.round()
        } else {
            x.ceil()
        };
        let r = (r as usize).clamp(1, n);
        Some(sorted[r - 1])
    };
    Ok([
        Some(n as f64),
        mean,
        sd,
        ci.map(|c| c.0),
        ci.map(|c| c.1),
        sorted.first().copied(),
        rank(0.25),
        rank(0.50),
        rank(0.75),
        rank(0.90),
        rank(0.95),
        rank(0.99),
        sorted.last().copied(),
    ])
}
