-- run_energy: a run's GPU energy over its measured window and what it bought, one row per
-- run and window: the arm's GPUs' energy (gpu_energy, summed over the GPUs; their bounds
-- added), joules per output token, per prompt-plus-completion token and per successful
-- request, the idle power (each GPU's, read before the first request) and the energy above
-- it, the power limit seen, and whether any GPU was throttled (gpu_throttle) or the figures
-- are too coarse or partial. Tokens are the window's usage tokens (aggregate_throughput's
-- completion tokens; the prompt tokens of the same requests). Only the arm's GPUs count:
-- the node's others are in gpu_timeline, not here. A run without telemetry has no row.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the cell (runs.cell_id).
--   window (-): `all` or `after_first_wave`.
--   gpus (count): the arm's GPUs with an energy figure for the window.
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
--   partial (-): a source failed inside the window (gpu_energy.partial).
--   power_limit_w (W): the largest enforced power limit read; NULL where not given.
--   power_limit_min_w (W): the smallest, to see GPUs at different limits.
--   throttled (-): a GPU was throttled in the window (gpu_throttle.throttled).
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
energy AS (
    SELECT
        run_id, window,
        count(*) AS gpus,
        CASE WHEN min(method) = max(method) THEN min(method) ELSE 'mixed' END AS method,
        sum(energy_j) AS energy_j,
        CASE WHEN count(bound_j) = count(*) THEN sum(bound_j) END AS bound_j,
        max(span_s) AS span_s,
        CASE WHEN count(idle_power_w) = count(*) THEN sum(idle_power_w) END AS idle_power_w,
        max(interval_s) AS interval_s,
        bool_or(too_coarse) AS too_coarse,
        bool_or(partial) AS partial,
        max(power_limit_w) AS power_limit_w,
        min(power_limit_w) AS power_limit_min_w
    FROM gpu_energy
    WHERE energy_j IS NOT NULL
    GROUP BY run_id, window
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
    e.partial,
    e.power_limit_w,
    e.power_limit_min_w,
    coalesce(h.throttled, false) AS throttled,
    h.judged_by AS throttle_judged_by,
    h.at_power_limit_share
FROM energy e
JOIN runs ru ON ru.run_id = e.run_id
JOIN aggregate_throughput a
    ON a.run_id = e.run_id AND a.window = e.window AND a.scope = 'run'
LEFT JOIN tokens t ON t.run_id = e.run_id AND t.window = e.window
LEFT JOIN throttle h ON h.run_id = e.run_id AND h.window = e.window
