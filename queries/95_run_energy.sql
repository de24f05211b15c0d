-- run_energy: a run's GPU energy over its measured window and what it bought, one row per
-- run and window: the arm's GPUs' energy (gpu_energy, summed over the GPUs; their bounds
-- added), joules per output token, per prompt-plus-completion token and per successful
-- request, the idle power (each GPU's, read before the first request) and the energy above
-- it, the power limit seen, and whether any GPU was throttled (gpu_throttle) or the figures
-- are too coarse or partial. Tokens are the window's usage tokens (aggregate_throughput's
-- completion tokens; the prompt tokens of the same requests). Only the arm's GPUs count:
-- the node's others are in gpu_timeline, not here. A run without telemetry, or without an
-- energy figure for any GPU, has no row.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the cell (runs.cell_id).
--   window (-): `all` or `after_first_wave`.
--   gpus (count): the arm's GPUs with an energy figure for the window, each once (a GPU
--       read by two sources, matched by its UUID, counts by one of them: its counter's figure
--       where one has it).
--   method (-): `counter`, `integrated`, or `mixed` when the GPUs' sources differ.
--   energy_j (J): the GPUs' energy over the window.
--   bound_j (J): the most energy_j may be off by (the GPUs' bounds added); NULL when a
--       GPU's is.
--   span_s (s): the window's length.
--   mean_power_w (W): energy_j / span_s.
--   idle_power_w (W): the GPUs' idle power added; NULL when a GPU had no `before` reading.
--   energy_above_idle_j (J): energy_j - idle_power_w × span_s.
--   completion_tokens (tokens): usage completion tokens of the window's requests.
--   prompt_tokens (tokens): usage prompt tokens of the same requests.
--   succeeded (requests): the window's requests with outcome `ok`.
--   j_per_output_token (J/token): energy_j / completion_tokens.
--   j_per_output_token_low (J/token): (energy_j - bound_j) / completion_tokens.
--   j_per_output_token_high (J/token): (energy_j + bound_j) / completion_tokens.
--   j_per_token (J/token): energy_j / (prompt_tokens + completion_tokens).
--   j_per_request (J/request): energy_j / succeeded.
--   interval_s (s): the longest update interval of the GPUs' sources.
--   too_coarse (-): a GPU's energy is too coarse (gpu_energy.too_coarse).
--   partial (-): a source failed inside the window (gpu_energy.partial), a GPU has no
--       energy figure for it, or a declared GPU was never reported
--       (telemetry_sources.missing_gpus): the energy leaves something out.
--   power_limit_w (W): the largest enforced power limit read; NULL where not given.
--   power_limit_min_w (W): the smallest, to see GPUs at different limits.
--   throttled (-): a GPU was throttled in the window (gpu_throttle.throttled); NULL when no
--   GPU's throttling could be judged (no reasons and no SM clock).
--   throttle_judged_by (-): `SM clock only` when a GPU's source gave no reasons, else
--       `reasons and SM clock`.
--   at_power_limit_share (fraction): the largest of the GPUs' shares of readings at the SW
--       power cap; NULL without reasons.
CREATE VIEW run_energy AS
WITH tokens AS (
    SELECT
        f.run_id,
        w.window,
        sum(f.prompt_tokens) AS prompt_tokens
    FROM request_figures f
    CROSS JOIN (SELECT unnest(['all', 'after_first_wave']) AS window) w
    WHERE w.window = 'all' OR NOT f.first_wave
    GROUP BY f.run_id, w.window
),
one_per_gpu AS (
    -- A GPU read by two sources (nvidia-smi and NVML, or a local exporter beside them)
    -- counts once: by its UUID where the sources give one, its counter's figure first.
    SELECT *, row_number() OVER (
        PARTITION BY run_id, window, coalesce(uuid, concat(source, ' ', endpoint, ' ', CAST(gpu AS VARCHAR)))
        ORDER BY energy_j IS NULL, method <> 'counter', source, endpoint
    ) AS pick
    FROM gpu_energy
),
missing AS (
    SELECT run_id, bool_or(missing_gpus <> '') AS missing
    FROM telemetry_sources
    GROUP BY run_id
),
without AS (
    SELECT run_id, window, count(*) FILTER (WHERE energy_j IS NULL) AS without_energy
    FROM one_per_gpu
    WHERE pick = 1
    GROUP BY run_id, window
),
energy AS (
    SELECT
        g.run_id, g.window,
        count(*) AS gpus,
        CASE WHEN min(g.method) = max(g.method) THEN min(g.method) ELSE 'mixed' END AS method,
        sum(g.energy_j) AS energy_j,
        CASE WHEN count(g.bound_j) = count(*) THEN sum(g.bound_j) END AS bound_j,
        max(g.span_s) AS span_s,
        CASE WHEN count(g.idle_power_w) = count(*) THEN sum(g.idle_power_w) END AS idle_power_w,
        max(g.interval_s) AS interval_s,
        bool_or(g.too_coarse) AS too_coarse,
        bool_or(g.partial) AS partial,
        max(g.power_limit_w) AS power_limit_w,
        min(g.power_limit_w) AS power_limit_min_w
    FROM one_per_gpu g
    WHERE g.pick = 1 AND g.energy_j IS NOT NULL
    GROUP BY g.run_id, g.window
),
throttle AS (
    SELECT
        run_id, window,
        bool_or(throttled) AS throttled,
        min(judged_by) AS judged_by,
        max(at_power_limit_share) AS at_power_limit_share
    FROM gpu_throttle
    GROUP BY run_id, window
)
SELECT
    e.run_id,
    ru.arm,
    ru.cell_id,
    e.window,
    e.gpus,
    e.method,
    e.energy_j,
    e.bound_j,
    e.span_s,
    e.energy_j / e.span_s AS mean_power_w,
    e.idle_power_w,
    e.energy_j - e.idle_power_w * e.span_s AS energy_above_idle_j,
    a.completion_tokens,
    t.prompt_tokens,
    a.succeeded,
    e.energy_j / nullif(a.completion_tokens, 0) AS j_per_output_token,
    (e.energy_j - e.bound_j) / nullif(a.completion_tokens, 0) AS j_per_output_token_low,
    (e.energy_j + e.bound_j) / nullif(a.completion_tokens, 0) AS j_per_output_token_high,
    e.energy_j / nullif(t.prompt_tokens + a.completion_tokens, 0) AS j_per_token,
    e.energy_j / nullif(a.succeeded, 0) AS j_per_request,
    e.interval_s,
    e.too_coarse,
    e.partial OR w.without_energy > 0 OR coalesce(m.missing, false) AS partial,
    e.power_limit_w,
    e.power_limit_min_w,
    h.throttled,
    h.judged_by AS throttle_judged_by,
    h.at_power_limit_share
FROM energy e
JOIN runs ru ON ru.run_id = e.run_id
JOIN aggregate_throughput a
    ON a.run_id = e.run_id AND a.window = e.window AND a.scope = 'run'
LEFT JOIN tokens t ON t.run_id = e.run_id AND t.window = e.window
LEFT JOIN throttle h ON h.run_id = e.run_id AND h.window = e.window
LEFT JOIN without w ON w.run_id = e.run_id AND w.window = e.window
LEFT JOIN missing m ON m.run_id = e.run_id
