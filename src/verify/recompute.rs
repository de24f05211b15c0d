//! The independent recomputation: per-request TTFT, effective prefill, decode, TPOT, E2E and
//! their statistics, with polars reading the Parquet files itself. No DataFusion, no
//! `queries/` SQL and no [`crate::stats`] code on this path: the definitions are written out
//! again here from the manifest, so a mistake in one path shows as a difference.

use std::collections::BTreeMap;
use std::path::Path;

use polars::prelude::*;

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

fn scan(files: &[std::path::PathBuf]) -> PolarsResult<LazyFrame> {
    let frames = files
        .iter()
        .map(|f| scan_file(f))
        .collect::<PolarsResult<Vec<_>>>()?;
    match frames.len() {
        0 => Err(PolarsError::NoData("no Parquet file for this table".into())),
        1 => Ok(frames.into_iter().next().unwrap_or_default()),
        _ => concat(frames, UnionArgs::default()),
    }
}

fn scan_file(path: &Path) -> PolarsResult<LazyFrame> {
    let path = PlRefPath::try_from_path(path)?;
    LazyFrame::scan_parquet(path, ScanArgsParquet::default())
}

fn i64_column(df: &DataFrame, name: &str) -> PolarsResult<Vec<Option<i64>>> {
    Ok(df
        .column(name)?
        .cast(&DataType::Int64)?
        .i64()?
        .iter()
        .collect())
}

/// Recompute one artifact's figures.
pub fn recompute(artifact: &ArtifactSource) -> PolarsResult<Recomputed> {
    use crate::artifact::Table;

    let requests = scan(artifact.files(Table::Requests))?
        .filter(col("kind").eq(lit("measured")))
        .select([
            col("request_index"),
            col("outcome"),
            col("t_sent_ns"),
            col("t_done_ns"),
        ]);
    // First non-empty content delta (NULL and '' excluded; reasoning deltas are another
    // column) and the usage of whichever event carries it.
    let events = scan(artifact.files(Table::Events))?
        .group_by([col("request_index")])
        .agg([
            col("t_ns")
                .filter(col("content_delta").neq(lit("")))
                .min()
                .alias("t_first_content_ns"),
            col("usage_prompt_tokens").max().alias("prompt_tokens"),
            col("usage_completion_tokens")
                .max()
                .alias("completion_tokens"),
        ]);
    let joined = requests
        .join(
            events,
            [col("request_index")],
            [col("request_index")],
            JoinArgs::new(JoinType::Left),
        )
        .sort(["request_index"], SortMultipleOptions::default())
        .collect()?;

    let index = i64_column(&joined, "request_index")?;
    let outcome: Vec<Option<String>> = joined
        .column("outcome")?
        .str()?
        .iter()
        .map(|s| s.map(str::to_owned))
        .collect();
    let sent = i64_column(&joined, "t_sent_ns")?;
    let done = i64_column(&joined, "t_done_ns")?;
    let first = i64_column(&joined, "t_first_content_ns")?;
    let prompt = i64_column(&joined, "prompt_tokens")?;
    let completion = i64_column(&joined, "completion_tokens")?;

    let mut figures = Vec::with_capacity(index.len());
    for i in 0..index.len() {
        // Recorded instants are whatever the file holds: a difference that overflows is no
        // figure (the SQL side refuses the same artifact with an overflow error).
        let ttft_ns = first[i].zip(sent[i]).and_then(|(f, s)| f.checked_sub(s));
        let generation_ns = done[i].zip(first[i]).and_then(|(d, f)| d.checked_sub(f));
        let e2e_ns = done[i].zip(sent[i]).and_then(|(d, s)| d.checked_sub(s));
        let after_first = completion[i].filter(|c| *c > 1).map(|c| c - 1);
        let nonzero = |v: Option<i64>| v.filter(|v| *v != 0);
        // TTFT = first content − start; prefill = usage prompt tokens / TTFT (s);
        // decode = (completion − 1) / generation (s); TPOT = ITL = generation (ms) /
        // (completion − 1); E2E = completion of stream − start.
        let ttft_ms = ttft_ns.map(|t| t as f64 / 1e6);
        let prefill = prompt[i]
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
            request_index: index[i].unwrap_or(-1),
            ok: outcome[i].as_deref() == Some("ok"),
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
