-- across_runs: run-level figures over the repeats of one cell: per arm, cell, workload
-- fingerprint and effective arm configuration (declared keys and inherited defaults, in key
-- order: the repeats of a cell share all four; docs/artifact.md "Repeats"), window, metric and statistic, the figure's mean across the complete runs with
-- its 95% t interval over runs (runs - 1 degrees of freedom): the run-to-run uncertainty a
-- single run cannot show.
--
-- Figures, one value per run: aggregate_throughput.output_tps (metric 'output_tps',
-- statistic 'aggregate', scope 'run'); where an SLO is given, goodput's goodput_rps,
-- goodput_tps and attained_share (statistic 'aggregate'); and for each cell_stats metric its mean, p50 and the
-- far tail that hurts (p99 where lower is better, p1 where higher is better). Windows as in
-- cell_stats. A figure NULL in some run leaves that run out (runs counts those with a value).
-- Only runs with status `complete` count.
-- Columns:
--   arm (-): the arm (runs.arm).
--   cell_id (-): the manifest cell (runs.cell_id).
--   workload_fingerprint (-): the runs' workload fingerprint (runs.workload_fingerprint).
--   arm_config_canonical (-): the arm's effective configuration, `key=value,...` sorted by
--       key (runs.arm_config_canonical).
--   window (-): `all` (every measured request) or `after_first_wave`.
--   metric (-): 'output_tps' (aggregate_throughput), 'goodput_rps', 'goodput_tps' or
--       'attained_share' (goodput; only with an SLO given), or a cell_stats metric (ttft_ms,
--       effective_prefill_tps, decode_tps, tpot_ms, itl_ms, e2e_ms).
--   statistic (-): which figure of each run: 'aggregate' (output_tps and goodput), or 'mean', 'p50' and
--       the far tail that hurts, 'p99' (lower is better) or 'p1' (higher is better).
--   runs (count): the complete runs with a value for the figure.
--   run_ids (-): those runs' run_id, in run_id order; NULL when runs = 0.
--   mean (as unit): the mean of the runs' values, in the metric's unit (`tok/s` for output_tps
--       and goodput_tps, `requests/s` for goodput_rps, a fraction for attained_share,
--       cell_stats.unit otherwise); NULL when runs = 0.
--   sd (-): the sample standard deviation across those runs (runs - 1), in the metric's
--       unit; NULL for fewer than two runs.
--   ci95_low (as unit): mean - t(0.975, runs - 1) * sd / sqrt(runs), in the metric's unit; NULL for
--       fewer than two runs ("single run: no run-to-run uncertainty").
--   ci95_high (-): mean + t(0.975, runs - 1) * sd / sqrt(runs); NULL for fewer than two runs.
--   min (as unit): the smallest run's value, in the metric's unit; NULL when runs = 0.
--   max (as unit): the largest run's value, in the metric's unit; NULL when runs = 0.
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
    UNION ALL
    SELECT
        run_id,
        window,
        unnest([7, 8, 9]) AS metric_order,
        unnest(['goodput_rps', 'goodput_tps', 'attained_share']) AS metric,
        'aggregate' AS statistic,
        unnest([goodput_rps, goodput_tps, attained_share]) AS value
    FROM goodput
)
SELECT
    ru.arm,
    ru.cell_id,
    ru.workload_fingerprint,
    ru.arm_config_canonical,
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
    ru.arm, ru.cell_id, ru.workload_fingerprint, ru.arm_config_canonical, p.window, p.metric_order,
    p.metric, p.statistic
