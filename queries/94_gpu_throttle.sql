-- gpu_throttle: whether each of the arm's GPUs was throttled inside a run's measured window,
-- one row per run, window and GPU (windows as gpu_energy's). Throttled: a slowdown reason
-- set in a reading inside the window (HW slowdown, SW or HW thermal slowdown, HW power
-- brake: clock_event_reasons & 0xE8), or the SM clock below 70% of the GPU's maximum in more
-- than 10% of the window's busy readings (readings of an idle GPU, which lowers its clocks
-- when it has nothing to do, do not count; nor do readings at the SW power cap, where a
-- lower clock is how the GPU holds its limit). The maximum is the one the source reports
-- (max_sm_clock_mhz), else the highest SM clock read from the GPU in the run, and said so.
-- Where the source gives no reasons (a DCGM exporter's default counters), throttling is
-- judged from the SM clock alone, and said so. The SW power cap is the normal state of a GPU
-- decoding at its limit: its share of the window is `at_power_limit_share`, not throttling.
-- Shares are of readings, which are evenly spaced in time.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the cell (runs.cell_id).
--   window (-): `all` or `after_first_wave`.
--   source (-): `dcgm`, `nvidia-smi` or `nvml`.
--   endpoint (-): the exporter's URL or the local host.
--   gpu (-): the GPU's index as the source numbers it.
--   readings (count): the GPU's readings inside the window.
--   judged_by (-): `reasons and SM clock`, `SM clock only` when no reading gave reasons, or
--       `not assessed` when none gave either.
--   throttle_readings (count): readings with a slowdown reason set.
--   throttle_reasons (-): the slowdown reasons seen, e.g. `hw_slowdown,hw_thermal_slowdown`;
--       NULL when none.
--   max_clock_mhz (MHz): the maximum the low-clock test compares with.
--   max_clock_source (-): `reported` (max_sm_clock_mhz) or `highest seen`.
--   busy_readings (count): readings of the GPU at work (utilisation above 0 and no idle
--       reason, where the source says).
--   low_clock_readings (count): busy readings with the SM clock below 70% of the maximum,
--       the SW power cap not set.
--   low_clock_share (fraction): low_clock_readings / busy_readings; NULL without busy ones.
--   throttled (-): throttle_readings > 0 or low_clock_share > 0.1; NULL when not assessed.
--   at_power_limit_share (fraction): readings with the SW power cap set / readings with
--       reasons; NULL without reasons.
CREATE VIEW gpu_throttle AS
WITH win AS (
    SELECT run_id, window, t_first_sent_ns AS a, t_last_done_ns AS b
    FROM aggregate_throughput
    WHERE scope = 'run' AND t_last_done_ns > t_first_sent_ns
),
maxima AS (
    SELECT
        run_id, source, endpoint, gpu,
        max(max_sm_clock_mhz) AS reported,
        max(sm_clock_mhz) AS seen
    FROM telemetry
    WHERE error IS NULL AND arm_gpu
    GROUP BY run_id, source, endpoint, gpu
),
r AS (
    SELECT
        w.run_id, w.window, t.source, t.endpoint, t.gpu, t.sm_clock_mhz,
        t.clock_event_reasons AS reasons,
        coalesce(t.gpu_util_pct > 0, true)
            AND coalesce((t.clock_event_reasons & 1) = 0, true) AS busy,
        coalesce(m.reported, m.seen) AS max_clock_mhz,
        m.reported IS NOT NULL AS reported
    FROM win w
    JOIN telemetry t ON t.run_id = w.run_id AND t.error IS NULL AND t.arm_gpu
                    AND t.t_ns BETWEEN w.a AND w.b
    JOIN maxima m ON m.run_id = t.run_id AND m.source = t.source AND m.endpoint = t.endpoint
                 AND m.gpu = t.gpu
),
counts AS (
    SELECT
        run_id, window, source, endpoint, gpu,
        count(*) AS readings,
        count(reasons) AS with_reasons,
        count(sm_clock_mhz) AS with_clock,
        count(*) FILTER (WHERE (reasons & 232) <> 0) AS throttle_readings,
        bit_or(reasons & 232) AS throttle_bits,
        count(*) FILTER (WHERE (reasons & 4) <> 0) AS at_limit_readings,
        max(max_clock_mhz) AS max_clock_mhz,
        bool_or(reported) AS reported,
        count(*) FILTER (WHERE busy) AS busy_readings,
        count(*) FILTER (
            WHERE busy AND sm_clock_mhz < 0.7 * max_clock_mhz AND coalesce((reasons & 4) = 0, true)
        ) AS low_clock_readings
    FROM r
    GROUP BY run_id, window, source, endpoint, gpu
)
SELECT
    c.run_id,
    ru.arm,
    ru.cell_id,
    c.window,
    c.source,
    c.endpoint,
    c.gpu,
    c.readings,
    CASE
        WHEN c.with_reasons > 0 THEN 'reasons and SM clock'
        WHEN c.with_clock > 0 THEN 'SM clock only'
        ELSE 'not assessed'
    END AS judged_by,
    c.throttle_readings,
    CASE WHEN coalesce(c.throttle_bits, 0) = 0 THEN NULL ELSE concat_ws(',',
        CASE WHEN (c.throttle_bits & 8) <> 0 THEN 'hw_slowdown' END,
        CASE WHEN (c.throttle_bits & 32) <> 0 THEN 'sw_thermal_slowdown' END,
        CASE WHEN (c.throttle_bits & 64) <> 0 THEN 'hw_thermal_slowdown' END,
        CASE WHEN (c.throttle_bits & 128) <> 0 THEN 'hw_power_brake_slowdown' END
    ) END AS throttle_reasons,
    c.max_clock_mhz,
    CASE WHEN c.reported THEN 'reported' ELSE 'highest seen' END AS max_clock_source,
    c.busy_readings,
    c.low_clock_readings,
    CAST(c.low_clock_readings AS DOUBLE) / nullif(c.busy_readings, 0) AS low_clock_share,
    CASE WHEN c.with_reasons > 0 OR c.with_clock > 0 THEN
        c.throttle_readings > 0
        OR coalesce(CAST(c.low_clock_readings AS DOUBLE) / nullif(c.busy_readings, 0) > 0.1, false)
    END AS throttled,
    CAST(c.at_limit_readings AS DOUBLE) / nullif(c.with_reasons, 0) AS at_power_limit_share
FROM counts c
JOIN runs ru ON ru.run_id = c.run_id
