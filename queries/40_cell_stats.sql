-- cell_stats: the manifest's `statistics` for each artifact (run_id), window and metric, one
-- row per run x window x metric (long format), over the window's measured requests with
-- outcome 'ok'.
--
-- Windows (docs/artifact.md "Windows"): `all`, every measured request (the plan's figures);
-- `after_first_wave`, the measured requests not in the run's first wave
-- (request_figures.first_wave: the start-up transient, released together into an idle
-- server). In open loop without a ramp there is no first wave and the two windows are equal.
-- Every run has a row for both windows; a window without successful requests has n = 0 and
-- NULL statistics.
--
-- Metrics (request_figures): ttft_ms, effective_prefill_tps, decode_tps, tpot_ms, itl_ms,
-- e2e_ms; `better` says which way each improves ('lower' for times, 'higher' for rates): the
-- tail that hurts is p95/p99 for 'lower' and p5/p1 ("slowest 5% / 1%") for 'higher'.
-- Statistics: n (non-null values of ok requests), mean, sd (sample standard deviation,
-- n - 1), 95% confidence interval for the mean (Student t with n - 1 degrees of freedom:
-- ci95_low/ci95_high = mean -/+ t(0.975, n-1) * sd / sqrt(n), NULL for n < 2), min, p1, p5,
-- p25, p50, p75, p90, p95, p99 by nearest rank (the value at rank ceil(p * n) of the sorted
-- values), max; and for each percentile pK its distribution-free 95% interval
-- pK_ci_low/pK_ci_high = [X(l), X(u)], l the largest index with BinomCDF(l - 1; n, p) <=
-- 0.025, u the smallest with BinomCDF(u - 1; n, p) >= 0.975, NULL for a side with no such
-- order statistic (l < 1 or u > n: unbounded, too few values; e.g. n = 16 bounds no p99 from
-- above). The percentile_ci view lists the same intervals one row per percentile.
-- Beside them, never mixed in: `requests` = measured requests in the window, `failed` =
-- those whose outcome is not 'ok' (excluded from every statistic), `n_null` = ok requests
-- without a value for this metric (e.g. no usage event: NULL token figures), so requests =
-- n + n_null + failed.
CREATE VIEW cell_stats AS
WITH metrics (metric_order, metric, unit, better) AS (
    VALUES
        (1, 'ttft_ms', 'ms', 'lower'),
        (2, 'effective_prefill_tps', 'tok/s', 'higher'),
        (3, 'decode_tps', 'tok/s', 'higher'),
        (4, 'tpot_ms', 'ms', 'lower'),
        (5, 'itl_ms', 'ms', 'lower'),
        (6, 'e2e_ms', 'ms', 'lower')
),
-- One row per request and window: `in_window` is false for a first-wave request in the
-- `after_first_wave` window, which keeps that window's group even when it is empty.
windowed AS (
    SELECT
        f.*,
        unnest(['all', 'after_first_wave']) AS window,
        unnest([true, NOT f.first_wave]) AS in_window
    FROM request_figures f
),
-- One row per request, window and metric, the metrics in `metric_order`.
unpivoted AS (
    SELECT
        w.run_id,
        w.window,
        w.in_window,
        w.outcome,
        unnest([1, 2, 3, 4, 5, 6]) AS metric_order,
        unnest([w.ttft_ms, w.effective_prefill_tps, w.decode_tps, w.tpot_ms, w.itl_ms, w.e2e_ms])
            AS metric_value
    FROM windowed w
),
long AS (
    SELECT
        run_id,
        window,
        in_window,
        outcome,
        metric_order,
        CASE WHEN in_window AND outcome = 'ok' THEN metric_value END AS value
    FROM unpivoted
),
stats AS (
    SELECT
        run_id,
        window,
        metric_order,
        count(*) FILTER (WHERE in_window) AS requests,
        count(value) AS n,
        count(*) FILTER (WHERE in_window AND outcome = 'ok') - count(value) AS n_null,
        count(*) FILTER (WHERE in_window AND outcome <> 'ok') AS failed,
        avg(value) AS mean,
        stddev(value) AS sd,
        ci95_low(value) AS ci95_low,
        ci95_high(value) AS ci95_high,
        min(value) AS min,
        nearest_rank(value, 0.01) AS p1,
        nearest_rank(value, 0.05) AS p5,
        nearest_rank(value, 0.25) AS p25,
        nearest_rank(value, 0.50) AS p50,
        nearest_rank(value, 0.75) AS p75,
        nearest_rank(value, 0.90) AS p90,
        nearest_rank(value, 0.95) AS p95,
        nearest_rank(value, 0.99) AS p99,
        max(value) AS max,
        nearest_rank_ci_low(value, 0.01) AS p1_ci_low,
        nearest_rank_ci_high(value, 0.01) AS p1_ci_high,
        nearest_rank_ci_low(value, 0.05) AS p5_ci_low,
        nearest_rank_ci_high(value, 0.05) AS p5_ci_high,
        nearest_rank_ci_low(value, 0.25) AS p25_ci_low,
        nearest_rank_ci_high(value, 0.25) AS p25_ci_high,
        nearest_rank_ci_low(value, 0.50) AS p50_ci_low,
        nearest_rank_ci_high(value, 0.50) AS p50_ci_high,
        nearest_rank_ci_low(value, 0.75) AS p75_ci_low,
        nearest_rank_ci_high(value, 0.75) AS p75_ci_high,
        nearest_rank_ci_low(value, 0.90) AS p90_ci_low,
        nearest_rank_ci_high(value, 0.90) AS p90_ci_high,
        nearest_rank_ci_low(value, 0.95) AS p95_ci_low,
        nearest_rank_ci_high(value, 0.95) AS p95_ci_high,
        nearest_rank_ci_low(value, 0.99) AS p99_ci_low,
        nearest_rank_ci_high(value, 0.99) AS p99_ci_high
    FROM long
    GROUP BY run_id, window, metric_order
)
SELECT
    s.run_id,
    ru.arm,
    ru.cell_id,
    s.window,
    m.metric_order,
    m.metric,
    m.unit,
    m.better,
    s.requests,
    s.n,
    s.n_null,
    s.failed,
    s.mean,
    s.sd,
    s.ci95_low,
    s.ci95_high,
    s.min,
    s.p1,
    s.p5,
    s.p25,
    s.p50,
    s.p75,
    s.p90,
    s.p95,
    s.p99,
    s.max,
    s.p1_ci_low,
    s.p1_ci_high,
    s.p5_ci_low,
    s.p5_ci_high,
    s.p25_ci_low,
    s.p25_ci_high,
    s.p50_ci_low,
    s.p50_ci_high,
    s.p75_ci_low,
    s.p75_ci_high,
    s.p90_ci_low,
    s.p90_ci_high,
    s.p95_ci_low,
    s.p95_ci_high,
    s.p99_ci_low,
    s.p99_ci_high
FROM stats s
JOIN metrics m ON m.metric_order = s.metric_order
JOIN runs ru ON ru.run_id = s.run_id
