-- cell_stats: the manifest's `statistics` for each artifact (run_id) and metric, one row per
-- run x metric (long format), over its measured requests with outcome 'ok'.
--
-- Metrics (request_figures): ttft_ms, effective_prefill_tps, decode_tps, tpot_ms, itl_ms,
-- e2e_ms. Statistics: n (non-null values of ok requests), mean, sd (sample standard
-- deviation, n - 1), 95% confidence interval for the mean (Student t with n - 1 degrees of
-- freedom: ci95_low/ci95_high = mean -/+ t(0.975, n-1) * sd / sqrt(n), NULL for n < 2), min,
-- p25, p50, p75, p90, p95, p99 by nearest rank (the value at rank ceil(p * n) of the sorted
-- values), max.
-- Beside them, never mixed in: `failed` = measured requests whose outcome is not 'ok'
-- (excluded from every statistic), `n_null` = ok requests without a value for this metric
-- (e.g. no usage event: NULL token figures).
CREATE VIEW cell_stats AS
WITH metrics (metric_order, metric, unit) AS (
    VALUES
        (1, 'ttft_ms', 'ms'),
        (2, 'effective_prefill_tps', 'tok/s'),
        (3, 'decode_tps', 'tok/s'),
        (4, 'tpot_ms', 'ms'),
        (5, 'itl_ms', 'ms'),
        (6, 'e2e_ms', 'ms')
),
-- One row per request and metric, the metrics in `metric_order`.
unpivoted AS (
    SELECT
        f.run_id,
        f.outcome,
        unnest([1, 2, 3, 4, 5, 6]) AS metric_order,
        unnest([f.ttft_ms, f.effective_prefill_tps, f.decode_tps, f.tpot_ms, f.itl_ms, f.e2e_ms])
            AS metric_value
    FROM request_figures f
),
long AS (
    SELECT
        run_id,
        outcome,
        metric_order,
        CASE WHEN outcome = 'ok' THEN metric_value END AS value
    FROM unpivoted
),
stats AS (
    SELECT
        run_id,
        metric_order,
        count(value) AS n,
        count(*) FILTER (WHERE outcome = 'ok') - count(value) AS n_null,
        count(*) FILTER (WHERE outcome <> 'ok') AS failed,
        avg(value) AS mean,
        stddev(value) AS sd,
        ci95_low(value) AS ci95_low,
        ci95_high(value) AS ci95_high,
        min(value) AS min,
        nearest_rank(value, 0.25) AS p25,
        nearest_rank(value, 0.50) AS p50,
        nearest_rank(value, 0.75) AS p75,
        nearest_rank(value, 0.90) AS p90,
        nearest_rank(value, 0.95) AS p95,
        nearest_rank(value, 0.99) AS p99,
        max(value) AS max
    FROM long
    GROUP BY run_id, metric_order
)
SELECT
    s.run_id,
    ru.arm,
    ru.cell_id,
    m.metric_order,
    m.metric,
    m.unit,
    s.n,
    s.n_null,
    s.failed,
    s.mean,
    s.sd,
    s.ci95_low,
    s.ci95_high,
    s.min,
    s.p25,
    s.p50,
    s.p75,
    s.p90,
    s.p95,
    s.p99,
    s.max
FROM stats s
JOIN metrics m ON m.metric_order = s.metric_order
JOIN runs ru ON ru.run_id = s.run_id
