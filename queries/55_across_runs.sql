-- across_runs: run-level figures over the repeats of one cell: per arm, cell, workload
-- fingerprint and arm configuration (the repeats of a cell share all four; docs/artifact.md
-- "Repeats"), window, metric and statistic, the figure's mean across the complete runs with
-- its 95% t interval over runs (runs - 1 degrees of freedom): the run-to-run uncertainty a
-- single run cannot show.
--
-- Figures, one value per run: aggregate_throughput.output_tps (metric 'output_tps',
-- statistic 'aggregate', scope 'run'); and for each cell_stats metric its mean, p50 and the
-- far tail that hurts (p99 where lower is better, p1 where higher is better). Windows as in
-- cell_stats. A figure NULL in some run leaves that run out (runs counts those with a value).
--   runs        runs with a value; run_ids lists them in run_id order;
--   mean, sd    across those runs (sd NULL for one run);
--   ci95_low, ci95_high   mean -/+ t(0.975, runs - 1) * sd / sqrt(runs), NULL for one run
--                         ("single run: no run-to-run uncertainty");
--   min, max    the smallest and largest run's value.
CREATE VIEW across_runs AS
WITH per_run AS (
    SELECT
        run_id,
        window,
        metric_order,
        metric,
        unnest(['mean', 'p50', CASE WHEN better = 'lower' THEN 'p99' ELSE 'p1' END])
            AS statistic,
        unnest([mean, p50, CASE WHEN better = 'lower' THEN p99 ELSE p1 END]) AS value
    FROM cell_stats
    UNION ALL
    SELECT run_id, window, 0 AS metric_order, 'output_tps' AS metric, 'aggregate' AS statistic,
        output_tps AS value
    FROM aggregate_throughput
    WHERE scope = 'run'
)
SELECT
    ru.arm,
    ru.cell_id,
    ru.workload_fingerprint,
    ru.arm_config,
    p.window,
    p.metric,
    p.statistic,
    count(p.value) AS runs,
    array_agg(p.run_id ORDER BY p.run_id) FILTER (WHERE p.value IS NOT NULL) AS run_ids,
    avg(p.value) AS mean,
    stddev(p.value) AS sd,
    ci95_low(p.value) AS ci95_low,
    ci95_high(p.value) AS ci95_high,
    min(p.value) AS min,
    max(p.value) AS max
FROM per_run p
JOIN runs ru ON ru.run_id = p.run_id
WHERE ru.status = 'complete'
GROUP BY
    ru.arm, ru.cell_id, ru.workload_fingerprint, ru.arm_config, p.window, p.metric_order,
    p.metric, p.statistic
