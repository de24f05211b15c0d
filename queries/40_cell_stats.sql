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
-- Statistics are of the n values and in the metric's `unit`. Percentiles p1, p5, p25, p50,
-- p75, p90, p95, p99 are by nearest rank (the value at rank ceil(p * n) of the sorted
-- values); each percentile pK has a distribution-free 95% interval pK_ci_low/pK_ci_high =
-- [X(l), X(u)], l the largest index with BinomCDF(l - 1; n, p) <= 0.025, u the smallest with
-- BinomCDF(u - 1; n, p) >= 0.975, NULL for a side with no such order statistic (l < 1 or
-- u > n: unbounded, too few values; e.g. n = 16 bounds no p99 from above). The percentile_ci
-- view lists the same intervals one row per percentile.
-- The counts requests, n_null and failed stand beside the statistics, never mixed in:
-- requests = n + n_null + failed.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the manifest cell (runs.cell_id).
--   window (-): `all` (every measured request) or `after_first_wave`.
--   metric_order (-): the metric's place in the list above, 1 (ttft_ms) to 6 (e2e_ms).
--   metric (-): the request_figures column the statistics are of.
--   unit (as unit): the metric's unit, that of every statistic of the row: `ms` for times, `tok/s`
--       for rates.
--   better (-): which way the metric improves: 'lower' (times) or 'higher' (rates).
--   requests (requests): measured requests in the window.
--   n (requests): of them, the ok requests with a value for this metric: the values every
--       statistic is of.
--   n_null (requests): ok requests in the window without a value for this metric (e.g. no
--       usage event: NULL token figures).
--   failed (requests): requests in the window whose outcome is not 'ok' (excluded from every
--       statistic).
--   mean (as unit): the mean, in `unit`; NULL when n = 0.
--   sd (as unit): the sample standard deviation (n - 1), in `unit`; NULL for n < 2.
--   ci95_low (-): low end of the 95% confidence interval for the mean (Student t with n - 1
--       degrees of freedom): mean - t(0.975, n-1) * sd / sqrt(n), in `unit`; NULL for n < 2.
--   ci95_high (-): its high end, mean + t(0.975, n-1) * sd / sqrt(n); NULL for n < 2.
--   min (as unit): the smallest value, in `unit`; NULL when n = 0.
--   p1 (as unit): the 1st percentile by nearest rank, in `unit`; NULL when n = 0.
--   p5 (as unit): the 5th percentile by nearest rank, in `unit`; NULL when n = 0.
--   p25 (as unit): the 25th percentile by nearest rank, in `unit`; NULL when n = 0.
--   p50 (as unit): the 50th (median) percentile by nearest rank, in `unit`; NULL when n = 0.
--   p75 (as unit): the 75th percentile by nearest rank, in `unit`; NULL when n = 0.
--   p90 (as unit): the 90th percentile by nearest rank, in `unit`; NULL when n = 0.
--   p95 (as unit): the 95th percentile by nearest rank, in `unit`; NULL when n = 0.
--   p99 (as unit): the 99th percentile by nearest rank, in `unit`; NULL when n = 0.
--   max (as unit): the largest value, in `unit`; NULL when n = 0.
--   p1_ci_low (as unit): low end X(l) of p1's 95% interval, in `unit`; NULL when l < 1.
--   p1_ci_high (as unit): high end X(u) of p1's 95% interval, in `unit`; NULL when u > n.
--   p5_ci_low (as unit): low end X(l) of p5's 95% interval, in `unit`; NULL when l < 1.
--   p5_ci_high (as unit): high end X(u) of p5's 95% interval, in `unit`; NULL when u > n.
--   p25_ci_low (as unit): low end X(l) of p25's 95% interval, in `unit`; NULL when l < 1.
--   p25_ci_high (as unit): high end X(u) of p25's 95% interval, in `unit`; NULL when u > n.
--   p50_ci_low (as unit): low end X(l) of p50's 95% interval, in `unit`; NULL when l < 1.
--   p50_ci_high (as unit): high end X(u) of p50's 95% interval, in `unit`; NULL when u > n.
--   p75_ci_low (as unit): low end X(l) of p75's 95% interval, in `unit`; NULL when l < 1.
--   p75_ci_high (as unit): high end X(u) of p75's 95% interval, in `unit`; NULL when u > n.
--   p90_ci_low (as unit): low end X(l) of p90's 95% interval, in `unit`; NULL when l < 1.
--   p90_ci_high (as unit): high end X(u) of p90's 95% interval, in `unit`; NULL when u > n.
--   p95_ci_low (as unit): low end X(l) of p95's 95% interval, in `unit`; NULL when l < 1.
--   p95_ci_high (as unit): high end X(u) of p95's 95% interval, in `unit`; NULL when u > n.
--   p99_ci_low (as unit): low end X(l) of p99's 95% interval, in `unit`; NULL when l < 1.
--   p99_ci_high (as unit): high end X(u) of p99's 95% interval, in `unit`; NULL when u > n.
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
        max(value) AS max,
        -- p1 ... p99 by nearest rank with each one's interval (pK_ci_low, pK_ci_high), from
        -- one sort of the group's values: nearest_rank(value, p), nearest_rank_ci_low(value,
        -- p) and nearest_rank_ci_high(value, p) give the same one at a time.
        percentiles(value) AS q
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
    s.q['p1'] AS p1,
    s.q['p5'] AS p5,
    s.q['p25'] AS p25,
    s.q['p50'] AS p50,
    s.q['p75'] AS p75,
    s.q['p90'] AS p90,
    s.q['p95'] AS p95,
    s.q['p99'] AS p99,
    s.max,
    s.q['p1_ci_low'] AS p1_ci_low,
    s.q['p1_ci_high'] AS p1_ci_high,
    s.q['p5_ci_low'] AS p5_ci_low,
    s.q['p5_ci_high'] AS p5_ci_high,
    s.q['p25_ci_low'] AS p25_ci_low,
    s.q['p25_ci_high'] AS p25_ci_high,
    s.q['p50_ci_low'] AS p50_ci_low,
    s.q['p50_ci_high'] AS p50_ci_high,
    s.q['p75_ci_low'] AS p75_ci_low,
    s.q['p75_ci_high'] AS p75_ci_high,
    s.q['p90_ci_low'] AS p90_ci_low,
    s.q['p90_ci_high'] AS p90_ci_high,
    s.q['p95_ci_low'] AS p95_ci_low,
    s.q['p95_ci_high'] AS p95_ci_high,
    s.q['p99_ci_low'] AS p99_ci_low,
    s.q['p99_ci_high'] AS p99_ci_high
FROM stats s
JOIN metrics m ON m.metric_order = s.metric_order
JOIN runs ru ON ru.run_id = s.run_id
