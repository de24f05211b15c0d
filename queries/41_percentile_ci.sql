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
-- `tail` marks the percentiles that hurt: for 'lower'-is-better metrics p95 ('slowest 5%')
-- and p99 ('slowest 1%'), for 'higher'-is-better p5 and p1 (the same names); NULL otherwise.
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
