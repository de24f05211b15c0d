-- percentile_ci: each percentile of cell_stats with its distribution-free 95% interval, one
-- row per run x window x metric x percentile (the long form of cell_stats' pK and
-- pK_ci_low/pK_ci_high columns; same windows, same requests).
--
-- The interval of the nearest-rank percentile p of n values is [X(l), X(u)] (X(k) the k-th
-- smallest value), l the largest index with BinomCDF(l - 1; n, p) <= 0.025 and u the smallest
-- with BinomCDF(u - 1; n, p) >= 0.975: whatever the distribution, it covers the true
-- percentile with probability >= 95%. A side with no such order statistic (l < 1 or u > n)
-- is unbounded and NULL: with n = 16, p95 and p99 have no upper bound (`bounded` is false),
-- so a "p99" of 16 values is a lower bound on the true p99, not an estimate of it.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the manifest cell (runs.cell_id).
--   window (-): `all` (every measured request) or `after_first_wave` (cell_stats.window).
--   metric_order (-): the metric's place in cell_stats' list, 1 (ttft_ms) to 6 (e2e_ms).
--   metric (-): the request_figures column the percentile is of (cell_stats.metric).
--   unit (as unit): the metric's unit, that of estimate, ci_low and ci_high: `ms` or `tok/s`.
--   better (-): which way the metric improves: 'lower' (times) or 'higher' (rates).
--   percentile (fraction): p: 0.01, 0.05, 0.25, 0.50, 0.75, 0.90, 0.95 or 0.99.
--   n (requests): the ok requests with a value for the metric in the window (cell_stats.n).
--   estimate (as unit): the percentile by nearest rank (cell_stats' pK), in `unit`; NULL when
--       n = 0.
--   ci_low (as unit): low end X(l) of the 95% interval (cell_stats' pK_ci_low), in `unit`; NULL
--       when unbounded (l < 1).
--   ci_high (as unit): high end X(u) of the 95% interval (cell_stats' pK_ci_high), in `unit`; NULL
--       when unbounded (u > n).
--   bounded (-): n > 0 and both ends of the interval exist.
--   tail (-): marks the percentiles that hurt: for 'lower'-is-better metrics 'slowest 5%'
--       (p95) and 'slowest 1%' (p99), for 'higher'-is-better the same names for p5 and p1;
--       NULL otherwise.
CREATE VIEW percentile_ci AS
WITH long AS (
    SELECT
        run_id,
        arm,
        cell_id,
        window,
        metric_order,
        metric,
        unit,
        better,
        n,
        unnest([0.01, 0.05, 0.25, 0.50, 0.75, 0.90, 0.95, 0.99]) AS percentile,
        unnest([p1, p5, p25, p50, p75, p90, p95, p99]) AS estimate,
        unnest([p1_ci_low, p5_ci_low, p25_ci_low, p50_ci_low, p75_ci_low, p90_ci_low,
                p95_ci_low, p99_ci_low]) AS ci_low,
        unnest([p1_ci_high, p5_ci_high, p25_ci_high, p50_ci_high, p75_ci_high, p90_ci_high,
                p95_ci_high, p99_ci_high]) AS ci_high
    FROM cell_stats
)
SELECT
    run_id,
    arm,
    cell_id,
    window,
    metric_order,
    metric,
    unit,
    better,
    percentile,
    n,
    estimate,
    ci_low,
    ci_high,
    n > 0 AND ci_low IS NOT NULL AND ci_high IS NOT NULL AS bounded,
    CASE
        WHEN better = 'lower' AND percentile = 0.95 THEN 'slowest 5%'
        WHEN better = 'lower' AND percentile = 0.99 THEN 'slowest 1%'
        WHEN better = 'higher' AND percentile = 0.05 THEN 'slowest 5%'
        WHEN better = 'higher' AND percentile = 0.01 THEN 'slowest 1%'
    END AS tail
FROM long
