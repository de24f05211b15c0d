-- gpu_energy: the energy each of the arm's GPUs used over a run's measured window, with the
-- bound on its error, one row per run, window and GPU. The window is aggregate_throughput's
-- (scope 'run'): from its first send to its last stream completion, `all` and
-- `after_first_wave`.
--
-- From the energy counter where the source has one (`method` 'counter', a DCGM exporter's
-- TOTAL_ENERGY_CONSUMPTION): the counter's growth from the last reading at or before the
-- window's start to the first reading at or after its end, a fall counting as a reset (the
-- new value is growth since it, as counter_steps counts server counters). Else integrated
-- from power (`method` 'integrated', nvidia-smi): each power reading held until the next
-- one, over the window (a reading without power extends the one before). A source's values
-- are up to its update interval old when read, and the readings bracketing the window lie
-- off its edges, so at each end the figure may be off by the largest power seen times the
-- interval plus the distance from the edge to its reading: `bound_j` is the sum of both
-- ends. A GPU with no reading from the window's start on, or none up to its end, has no
-- row. The interval is the declared one
-- (telemetry_sources.interval_s) or, undeclared, the median time between successive changes
-- of the GPU's readings (energy, else power). A window shorter than 20 intervals (or whose
-- interval cannot be told: fewer than two changes) is "telemetry too coarse". A failed
-- reading of the source inside the window (a gap) makes the figure `partial`.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the cell (runs.cell_id).
--   window (-): `all` or `after_first_wave`.
--   source (-): `dcgm`, `nvidia-smi` or `nvml`.
--   endpoint (-): the exporter's URL or the local host.
--   gpu (-): the GPU's index as the source numbers it.
--   uuid (-): the GPU's UUID, where the source gives it.
--   method (-): `counter` (the energy counter) or `integrated` (power over time).
--   energy_j (J): the GPU's energy over the window; NULL when neither its counter nor its
--       power readings cover it.
--   bound_j (J): the most energy_j may be off by (both ends of the window); NULL without
--       power readings.
--   counter_resets (count): times the energy counter fell inside the window (a driver
--       reload); 0 for `integrated`.
--   span_s (s): the window's length.
--   interval_s (s): the source's update interval (declared, else inferred); NULL when it
--       cannot be told.
--   interval_source (-): `declared`, `inferred` or `unknown`.
--   too_coarse (-): span_s < 20 × interval_s, or the interval is unknown: the energy is too
--       coarse to compare runs on.
--   readings (count): the GPU's readings inside the window.
--   failed_readings (count): the source's failed readings inside the window.
--   partial (-): failed_readings > 0: the figures over the gap are partial.
--   max_power_w (W): the largest power read from the window's bracketing readings on.
--   mean_power_w (W): energy_j / span_s.
--   idle_power_w (W): the median power of the GPU's `before` readings (idle, prior to the
--       first request); NULL without them.
--   power_limit_w (W): the largest enforced power limit read inside the window; NULL where
--       the source does not give it.
CREATE VIEW gpu_energy AS
WITH win AS (
    SELECT run_id, window, t_first_sent_ns AS a, t_last_done_ns AS b
    FROM aggregate_throughput
    WHERE scope = 'run' AND t_last_done_ns > t_first_sent_ns
),
r AS (
    SELECT
        run_id, source, endpoint, gpu, uuid, t_ns, phase, power_w, energy_mj, power_limit_w,
        lag(energy_mj) OVER (PARTITION BY run_id, source, endpoint, gpu ORDER BY t_ns)
            AS prev_energy_mj,
        lag(power_w) OVER (PARTITION BY run_id, source, endpoint, gpu ORDER BY t_ns)
            AS prev_power_w
    FROM telemetry
    WHERE error IS NULL AND arm_gpu
),
p AS (
    SELECT
        run_id, source, endpoint, gpu, t_ns, power_w,
        lead(t_ns) OVER (PARTITION BY run_id, source, endpoint, gpu ORDER BY t_ns) AS next_t_ns
    FROM telemetry
    WHERE error IS NULL AND arm_gpu AND power_w IS NOT NULL
),
changes AS (
    SELECT
        run_id, source, endpoint, gpu,
        t_ns - lag(t_ns) OVER (PARTITION BY run_id, source, endpoint, gpu ORDER BY t_ns) AS gap_ns
    FROM r
    WHERE CASE
        WHEN energy_mj IS NOT NULL THEN prev_energy_mj IS NOT NULL AND energy_mj <> prev_energy_mj
        ELSE prev_power_w IS NOT NULL AND power_w <> prev_power_w
    END
),
inferred AS (
    SELECT run_id, source, endpoint, gpu, median(CAST(gap_ns AS DOUBLE)) / 1e9 AS interval_s
    FROM changes
    WHERE gap_ns IS NOT NULL
    GROUP BY run_id, source, endpoint, gpu
),
idle AS (
    SELECT run_id, source, endpoint, gpu, median(power_w) AS idle_power_w
    FROM r
    WHERE phase = 'before'
    GROUP BY run_id, source, endpoint, gpu
),
bracketing AS (
    SELECT
        w.run_id, w.window, w.a, w.b, r.source, r.endpoint, r.gpu,
        coalesce(max(r.t_ns) FILTER (WHERE r.t_ns <= w.a), min(r.t_ns)) AS t_start,
        coalesce(min(r.t_ns) FILTER (WHERE r.t_ns >= w.b), max(r.t_ns)) AS t_end
    FROM win w
    JOIN r ON r.run_id = w.run_id
    GROUP BY w.run_id, w.window, w.a, w.b, r.source, r.endpoint, r.gpu
),
edges AS (
    SELECT * FROM bracketing WHERE t_start <= b AND t_end >= a
),
integrated AS (
    SELECT
        e.run_id, e.window, e.source, e.endpoint, e.gpu,
        sum(p.power_w * (least(coalesce(p.next_t_ns, e.b), e.b) - greatest(p.t_ns, e.a)) / 1e9)
            AS integrated_j
    FROM edges e
    JOIN p ON p.run_id = e.run_id AND p.source = e.source AND p.endpoint = e.endpoint
          AND p.gpu = e.gpu
    WHERE p.t_ns < e.b AND coalesce(p.next_t_ns, e.b) > e.a
    GROUP BY e.run_id, e.window, e.source, e.endpoint, e.gpu
),
per_gpu AS (
    SELECT
        e.run_id, e.window, e.a, e.b, e.source, e.endpoint, e.gpu, e.t_start, e.t_end,
        max(r.uuid) AS uuid,
        count(r.energy_mj) FILTER (WHERE r.t_ns BETWEEN e.t_start AND e.t_end) AS counted,
        count(*) FILTER (WHERE r.t_ns BETWEEN e.t_start AND e.t_end) AS bracketed,
        sum(CASE
            WHEN r.prev_energy_mj IS NULL THEN 0
            WHEN r.energy_mj >= r.prev_energy_mj THEN r.energy_mj - r.prev_energy_mj
            ELSE r.energy_mj
        END) FILTER (WHERE r.t_ns > e.t_start AND r.t_ns <= e.t_end) / 1000.0 AS counter_j,
        count(*) FILTER (
            WHERE r.t_ns > e.t_start AND r.t_ns <= e.t_end AND r.energy_mj < r.prev_energy_mj
        ) AS counter_resets,
        max(r.power_w) FILTER (WHERE r.t_ns BETWEEN e.t_start AND e.t_end) AS max_power_w,
        max(r.power_limit_w) FILTER (WHERE r.t_ns BETWEEN e.a AND e.b) AS power_limit_w,
        count(*) FILTER (WHERE r.t_ns BETWEEN e.a AND e.b) AS readings
    FROM edges e
    JOIN r ON r.run_id = e.run_id AND r.source = e.source AND r.endpoint = e.endpoint
          AND r.gpu = e.gpu
    GROUP BY e.run_id, e.window, e.a, e.b, e.source, e.endpoint, e.gpu, e.t_start, e.t_end
),
gaps AS (
    SELECT w.run_id, w.window, t.source, t.endpoint, count(*) AS failed_readings
    FROM win w
    JOIN telemetry t ON t.run_id = w.run_id AND t.error IS NOT NULL
                    AND t.t_ns BETWEEN w.a AND w.b
    GROUP BY w.run_id, w.window, t.source, t.endpoint
),
figures AS (
    SELECT
        g.*,
        (g.b - g.a) / 1e9 AS span_s,
        CASE WHEN g.counted = g.bracketed AND g.counted >= 2 THEN 'counter' ELSE 'integrated' END
            AS method,
        n.integrated_j,
        coalesce(s.interval_s, i.interval_s) AS interval_s,
        CASE
            WHEN s.interval_s IS NOT NULL THEN 'declared'
            WHEN i.interval_s IS NOT NULL THEN 'inferred'
            ELSE 'unknown'
        END AS interval_source,
        coalesce(f.failed_readings, 0) AS failed_readings,
        d.idle_power_w
    FROM per_gpu g
    LEFT JOIN integrated n
        ON n.run_id = g.run_id AND n.window = g.window AND n.source = g.source
       AND n.endpoint = g.endpoint AND n.gpu = g.gpu
    LEFT JOIN telemetry_sources s
        ON s.run_id = g.run_id AND s.source = g.source AND s.endpoint = g.endpoint
    LEFT JOIN inferred i
        ON i.run_id = g.run_id AND i.source = g.source AND i.endpoint = g.endpoint
       AND i.gpu = g.gpu
    LEFT JOIN gaps f
        ON f.run_id = g.run_id AND f.window = g.window AND f.source = g.source
       AND f.endpoint = g.endpoint
    LEFT JOIN idle d
        ON d.run_id = g.run_id AND d.source = g.source AND d.endpoint = g.endpoint
       AND d.gpu = g.gpu
)
SELECT
    f.run_id,
    ru.arm,
    ru.cell_id,
    f.window,
    f.source,
    f.endpoint,
    f.gpu,
    f.uuid,
    f.method,
    CASE WHEN f.method = 'counter' THEN f.counter_j ELSE f.integrated_j END AS energy_j,
    f.max_power_w * (
        2 * coalesce(f.interval_s, 0) + abs(f.a - f.t_start) / 1e9 + abs(f.t_end - f.b) / 1e9
    ) AS bound_j,
    CASE WHEN f.method = 'counter' THEN f.counter_resets ELSE 0 END AS counter_resets,
    f.span_s,
    f.interval_s,
    f.interval_source,
    coalesce(f.span_s < 20 * f.interval_s, true) AS too_coarse,
    f.readings,
    f.failed_readings,
    f.failed_readings > 0 AS partial,
    f.max_power_w,
    CASE WHEN f.method = 'counter' THEN f.counter_j ELSE f.integrated_j END / f.span_s
        AS mean_power_w,
    f.idle_power_w,
    f.power_limit_w
FROM figures f
JOIN runs ru ON ru.run_id = f.run_id
