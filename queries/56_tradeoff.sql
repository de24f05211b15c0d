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
-- nothing. With SLOs given, a point whose attainment misses the target (slos.target, the
-- campaign's slo_target) is off the frontier and dominates nothing: a configuration that
-- meets no SLO is no trade-off. Functional cells are not points.
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
--   rate_per_s (requests/s): the open loop's release rate; NULL in closed loop.
--   gpus (GPUs): the arm's GPUs (runs.gpus); NULL when the run does not say.
--   gpus_derived (-): true when gpus was read off the topology name (runs.gpus_derived).
--   runs (count): the complete runs averaged.
--   output_tps (tok/s): mean over the runs of the aggregate output throughput.
--   output_tps_per_gpu (tok/s): output_tps / gpus; NULL without gpus.
--   tpot_p50_ms (ms): mean over the runs of the median TPOT (cell_stats p50).
--   output_tps_per_user (tok/s): 1000 / tpot_p50_ms: what one stream receives; NULL without
--       a median TPOT.
--   goodput_tps (tok/s): mean over the runs of goodput.goodput_tps; NULL with no SLO given.
--   goodput_tps_per_gpu (tok/s): goodput_tps / gpus; NULL without either.
--   attained_share (fraction): mean over the runs of goodput.attained_share; NULL with no
--       SLO given.
--   meets_target (-): attained_share reaches slos.target; NULL with no SLO given.
--   on_frontier (-): the point meets the SLO target (or no SLO is given) and no other such
--       point of the frontier group and window has output_tps_per_gpu and
--       output_tps_per_user both at least as large and one larger; NULL for a point off the
--       plot (no gpus or no median TPOT).
--   dominated_by (-): the points that dominate this one, by arm (with its cell in brackets
--       when that is another cell), in order; empty on the frontier, NULL off the plot.
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
        avg(tpot_p50_ms) AS tpot_p50_ms,
        1000.0 / nullif(avg(tpot_p50_ms), 0) AS output_tps_per_user,
        avg(goodput_tps) AS goodput_tps,
        avg(goodput_tps) / CAST(max(gpus) AS DOUBLE) AS goodput_tps_per_gpu,
        avg(attained_share) AS attained_share,
        avg(attained_share) >= (SELECT min(target) FROM slos) AS meets_target
    FROM per_run
    GROUP BY arm, cell_id, workload_fingerprint, arm_config_canonical, window, frontier_group
),
dominance AS (
    SELECT
        p.arm,
        p.cell_id,
        p.workload_fingerprint,
        p.arm_config_canonical,
        p.window,
        array_agg(
            CASE WHEN q.cell_id = p.cell_id THEN q.arm ELSE q.arm || ' (' || q.cell_id || ')' END
            ORDER BY q.arm, q.cell_id
        ) FILTER (WHERE q.arm IS NOT NULL) AS dominated_by
    FROM points p
    LEFT JOIN points q
        ON q.frontier_group = p.frontier_group
        AND q.window = p.window
        AND q.output_tps_per_gpu >= p.output_tps_per_gpu
        AND q.output_tps_per_user >= p.output_tps_per_user
        AND (q.output_tps_per_gpu > p.output_tps_per_gpu
            OR q.output_tps_per_user > p.output_tps_per_user)
        AND coalesce(q.meets_target, true)
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
    p.tpot_p50_ms,
    p.output_tps_per_user,
    p.goodput_tps,
    p.goodput_tps_per_gpu,
    p.attained_share,
    p.meets_target,
    CASE
        WHEN d.arm IS NULL THEN NULL
        ELSE d.dominated_by IS NULL AND coalesce(p.meets_target, true)
    END AS on_frontier,
    CASE WHEN d.arm IS NULL THEN NULL ELSE coalesce(d.dominated_by, make_array()) END
        AS dominated_by
FROM points p
LEFT JOIN dominance d
    ON d.arm = p.arm
    AND d.cell_id = p.cell_id
    AND d.workload_fingerprint = p.workload_fingerprint
    AND d.arm_config_canonical = p.arm_config_canonical
    AND d.window = p.window
