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
long AS (
    SELECT
        f.run_id,
        f.arm,
        f.cell_id,
        f.outcome,
        m.metric_order,
        m.metric,
        m.unit,
        CASE WHEN f.outcome = 'ok' THEN
            CASE m.metric
                WHEN 'ttft_ms' THEN f.ttft_ms
                WHEN 'effective_prefill_tps' THEN f.effective_prefill_tps
                WHEN 'decode_tps' THEN f.decode_tps
                WHEN 'tpot_ms' THEN f.tpot_ms
                WHEN 'itl_ms' THEN f.itl_ms
                WHEN 'e2e_ms' THEN f.e2e_ms
            END
        END AS value
    FROM request_figures f
    CROSS JOIN metrics m
)
SELECT
    run_id,
    arm,
    cell_id,
    metric_order,
    metric,
    unit,
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
GROUP BY run_id, arm, cell_id, metric_order, metric, unit
