-- tradeoff: the throughput-per-GPU against throughput-per-user trade-off of each arm and
-- cell, the two axes of a serving Pareto plot: output tokens/s per GPU (aggregate output
-- throughput / the arm's GPUs) against output tokens/s per user (1000 / the median TPOT),
-- with goodput beside them where an SLO is given. Per arm, cell, workload fingerprint and
-- effective arm configuration (the repeats of one cell, as across_runs groups them) and
-- window, each figure is the mean over the complete runs of the per-run figure
-- (aggregate_throughput scope 'run', cell_stats p50 of tpot_ms, goodput).
--
-- The frontier: within a frontier group (the same workload class and prompt length, any
-- load) and window, a point is on the frontier when no other point is at least as good on
-- both axes and better on one. Points differ in arm and in load (concurrency, rate), so a
-- frontier over concurrency levels is the curve a sweep draws. A point without GPUs or
-- without a median TPOT has no place on the plot: on_frontier is NULL and it dominates
-- nothing. With SLOs given (per workload class: run_slos), a point whose attainment misses
-- the target (slos.target, the campaign's slo_target) is off the frontier and dominates nothing: a configuration that
-- meets no SLO is no trade-off. Two points each within the other's across-run 95% interval
-- on both axes are a tie: neither dominates the other (a point of one run has no interval
-- and ties with nothing). Functional cells are not points.
-- Columns:
--   arm (-): the arm (runs.arm).
--   cell_id (-): the manifest cell (runs.cell_id).
--   workload_fingerprint (-): the runs' workload fingerprint (runs.workload_fingerprint).
--   arm_config_canonical (-): the arm's effective configuration (runs.arm_config_canonical).
--   window (-): `all` (every measured request) or `after_first_wave`.
--   frontier_group (-): the points compared for the frontier: `<class>.ctx<prompt tokens>`,
--       the cell without its load.
--   concurrency_per_replica (requests): requests in flight per replica (runs).
--   replicas (-): replicas the requests went to (runs.replicas).
--   rate_per_s (requests/s): the open loop's release rate (a session workload's: sessions
--       arriving per second); NULL in closed loop.
--   gpus (GPUs): the arm's GPUs (runs.gpus); NULL when the run does not say.
--   gpus_derived (-): true when gpus was read off the topology name (runs.gpus_derived).
--   runs (count): the complete runs averaged.
--   output_tps (tok/s): mean over the runs of the aggregate output throughput.
--   output_tps_per_gpu (tok/s): output_tps / gpus; NULL without gpus.
--   output_tps_per_gpu_ci95_low (tok/s): lower end of the t 95% interval of output_tps_per_gpu
--       across the runs (ci95_low of the runs' output_tps / gpus); NULL with one run.
--   output_tps_per_gpu_ci95_high (tok/s): its upper end.
--   tpot_p50_ms (ms): mean over the runs of the median TPOT (cell_stats p50).
--   output_tps_per_user (tok/s): 1000 / tpot_p50_ms: what one stream receives; NULL without
--       a median TPOT.
--   output_tps_per_user_ci95_low (tok/s): 1000 / the upper end of the t 95% interval of the
--       runs' median TPOT; NULL with one run.
--   output_tps_per_user_ci95_high (tok/s): 1000 / its lower end (infinite when that is not
--       positive: the interval reaches a TPOT of zero); NULL with one run.
--   goodput_tps (tok/s): mean over the runs of goodput.goodput_tps; NULL where no SLO
--       judges the point's class.
--   goodput_tps_per_gpu (tok/s): goodput_tps / gpus; NULL without either.
--   attained_share (fraction): mean over the runs of goodput.attained_share; NULL where no
--       SLO judges the point's class.
--   meets_target (-): attained_share reaches slos.target; NULL where no SLO judges the
--       point's class.
--   on_frontier (-): the point meets the SLO target (or no SLO is given) and no other such
--       point of the frontier group and window has output_tps_per_gpu and
--       output_tps_per_user both at least as large and one larger, and no tie with it; NULL
--       for a point off the plot (no gpus or no median TPOT).
--   dominated_by (-): the points that dominate this one, by arm (with its cell in brackets
--       when that is another cell), in order; empty on the frontier, NULL off the plot.
--   tied_with (-): the points of the frontier group and window this one ties with (each
--       within the other's across-run interval on both axes), named as dominated_by; empty
--       when none, NULL off the plot.
CREATE VIEW tradeoff AS
WITH per_run AS (
    SELECT
        ru.run_id,
        ru.arm,
        ru.cell_id,
        ru.workload_fingerprint,
        ru.arm_config_canonical,
        ru.class || '.ctx' || CAST(ru.prompt_tokens_target AS VARCHAR) AS frontier_group,
        ru.concurrency_per_replica,
        ru.replicas,
        ru.rate_per_s,
        ru.gpus,
        ru.gpus_derived,
        a.window,
        a.output_tps,
        c.p50 AS tpot_p50_ms,
        g.goodput_tps,
        g.attained_share
    FROM runs ru
    JOIN aggregate_throughput a ON a.run_id = ru.run_id AND a.scope = 'run'
    LEFT JOIN cell_stats c
        ON c.run_id = ru.run_id AND c.window = a.window AND c.metric = 'tpot_ms'
    LEFT JOIN goodput g ON g.run_id = ru.run_id AND g.window = a.window
    WHERE ru.status = 'complete' AND ru.class <> 'functional'
),
points AS (
    SELECT
        arm,
        cell_id,
        workload_fingerprint,
        arm_config_canonical,
        window,
        frontier_group,
        max(concurrency_per_replica) AS concurrency_per_replica,
        max(replicas) AS replicas,
        max(rate_per_s) AS rate_per_s,
        max(gpus) AS gpus,
        bool_or(gpus_derived) AS gpus_derived,
        count(*) AS runs,
        avg(output_tps) AS output_tps,
        avg(output_tps) / CAST(max(gpus) AS DOUBLE) AS output_tps_per_gpu,
        ci95_low(output_tps) / CAST(max(gpus) AS DOUBLE) AS output_tps_per_gpu_ci95_low,
        ci95_high(output_tps) / CAST(max(gpus) AS DOUBLE) AS output_tps_per_gpu_ci95_high,
        avg(tpot_p50_ms) AS tpot_p50_ms,
        1000.0 / nullif(avg(tpot_p50_ms), 0) AS output_tps_per_user,
        1000.0 / nullif(ci95_high(tpot_p50_ms), 0) AS output_tps_per_user_ci95_low,
        CASE
            WHEN ci95_low(tpot_p50_ms) > 0 THEN 1000.0 / ci95_low(tpot_p50_ms)
            WHEN ci95_low(tpot_p50_ms) IS NOT NULL THEN CAST('Infinity' AS DOUBLE)
        END AS output_tps_per_user_ci95_high,
        avg(goodput_tps) AS goodput_tps,
        avg(goodput_tps) / CAST(max(gpus) AS DOUBLE) AS goodput_tps_per_gpu,
        avg(attained_share) AS attained_share,
        avg(attained_share) >= (SELECT min(target) FROM slos) AS meets_target
    FROM per_run
    GROUP BY arm, cell_id, workload_fingerprint, arm_config_canonical, window, frontier_group
),
pairs AS (
    -- Every two points of one frontier group and window on the plot, with whether they tie.
    SELECT
        p.arm,
        p.cell_id,
        p.workload_fingerprint,
        p.arm_config_canonical,
        p.window,
        q.arm AS q_arm,
        q.cell_id AS q_cell_id,
        q.output_tps_per_gpu AS q_per_gpu,
        q.output_tps_per_user AS q_per_user,
        q.meets_target AS q_meets_target,
        p.output_tps_per_gpu AS p_per_gpu,
        p.output_tps_per_user AS p_per_user,
        coalesce(
            q.output_tps_per_gpu BETWEEN p.output_tps_per_gpu_ci95_low
                AND p.output_tps_per_gpu_ci95_high
            AND p.output_tps_per_gpu BETWEEN q.output_tps_per_gpu_ci95_low
                AND q.output_tps_per_gpu_ci95_high
            AND q.output_tps_per_user BETWEEN p.output_tps_per_user_ci95_low
                AND p.output_tps_per_user_ci95_high
            AND p.output_tps_per_user BETWEEN q.output_tps_per_user_ci95_low
                AND q.output_tps_per_user_ci95_high,
            false
        ) AS tie
    FROM points p
    JOIN points q
        ON q.frontier_group = p.frontier_group
        AND q.window = p.window
        AND NOT (q.arm = p.arm AND q.cell_id = p.cell_id
            AND q.workload_fingerprint = p.workload_fingerprint
            AND q.arm_config_canonical = p.arm_config_canonical)
    WHERE p.output_tps_per_gpu IS NOT NULL AND p.output_tps_per_user IS NOT NULL
        AND q.output_tps_per_gpu IS NOT NULL AND q.output_tps_per_user IS NOT NULL
),
ties AS (
    SELECT
        arm,
        cell_id,
        workload_fingerprint,
        arm_config_canonical,
        window,
        array_agg(
            CASE WHEN q_cell_id = cell_id THEN q_arm ELSE q_arm || ' (' || q_cell_id || ')' END
            ORDER BY q_arm, q_cell_id
        ) AS tied_with
    FROM pairs
    WHERE tie
    GROUP BY arm, cell_id, workload_fingerprint, arm_config_canonical, window
),
dominance AS (
    SELECT
        p.arm,
        p.cell_id,
        p.workload_fingerprint,
        p.arm_config_canonical,
        p.window,
        array_agg(
            CASE WHEN x.q_cell_id = p.cell_id THEN x.q_arm
                ELSE x.q_arm || ' (' || x.q_cell_id || ')' END
            ORDER BY x.q_arm, x.q_cell_id
        ) FILTER (WHERE x.q_arm IS NOT NULL) AS dominated_by
    FROM points p
    LEFT JOIN pairs x
        ON x.arm = p.arm
        AND x.cell_id = p.cell_id
        AND x.workload_fingerprint = p.workload_fingerprint
        AND x.arm_config_canonical = p.arm_config_canonical
        AND x.window = p.window
        AND x.q_per_gpu >= x.p_per_gpu
        AND x.q_per_user >= x.p_per_user
        AND (x.q_per_gpu > x.p_per_gpu OR x.q_per_user > x.p_per_user)
        AND coalesce(x.q_meets_target, true)
        AND NOT x.tie
    WHERE p.output_tps_per_gpu IS NOT NULL AND p.output_tps_per_user IS NOT NULL
    GROUP BY p.arm, p.cell_id, p.workload_fingerprint, p.arm_config_canonical, p.window
)
SELECT
    p.arm,
    p.cell_id,
    p.workload_fingerprint,
    p.arm_config_canonical,
    p.window,
    p.frontier_group,
    p.concurrency_per_replica,
    p.replicas,
    p.rate_per_s,
    p.gpus,
    p.gpus_derived,
    p.runs,
    p.output_tps,
    p.output_tps_per_gpu,
    p.output_tps_per_gpu_ci95_low,
    p.output_tps_per_gpu_ci95_high,
    p.tpot_p50_ms,
    p.output_tps_per_user,
    p.output_tps_per_user_ci95_low,
    p.output_tps_per_user_ci95_high,
    p.goodput_tps,
    p.goodput_tps_per_gpu,
    p.attained_share,
    p.meets_target,
    CASE
        WHEN d.arm IS NULL THEN NULL
        ELSE d.dominated_by IS NULL AND coalesce(p.meets_target, true)
    END AS on_frontier,
    CASE WHEN d.arm IS NULL THEN NULL ELSE coalesce(d.dominated_by, make_array()) END
        AS dominated_by,
    CASE WHEN d.arm IS NULL THEN NULL ELSE coalesce(t.tied_with, make_array()) END
        AS tied_with
FROM points p
LEFT JOIN dominance d
    ON d.arm = p.arm
    AND d.cell_id = p.cell_id
    AND d.workload_fingerprint = p.workload_fingerprint
    AND d.arm_config_canonical = p.arm_config_canonical
    AND d.window = p.window
LEFT JOIN ties t
    ON t.arm = p.arm
    AND t.cell_id = p.cell_id
    AND t.workload_fingerprint = p.workload_fingerprint
    AND t.arm_config_canonical = p.arm_config_canonical
    AND t.window = p.window
