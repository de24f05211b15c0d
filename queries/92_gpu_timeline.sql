-- gpu_timeline: every telemetry reading of every GPU on the run's timeline: power, clocks,
-- temperature, utilisation, memory and the clock-event reasons, one row per GPU per
-- reading (telemetry), with the time since the measured window began and whether the
-- reading falls inside it. `throttled` is a slowdown reason set (HW slowdown 0x8, SW
-- thermal 0x20, HW thermal 0x40, HW power brake 0x80); `at_power_limit` the SW power cap
-- (0x4), the normal state of a GPU decoding at its limit, which is not throttling. The
-- node's GPUs that are not the arm's are here too (`arm_gpu` false); failed readings are
-- not (they are the gaps gpu_energy calls partial).
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the cell (runs.cell_id).
--   source (-): `dcgm`, `nvidia-smi` or `nvml` (telemetry.source).
--   endpoint (-): the exporter's URL or the local host (telemetry.endpoint).
--   gpu (-): the GPU's index as the source numbers it (telemetry.gpu).
--   uuid (-): the GPU's UUID, where the source gives it.
--   arm_gpu (-): whether the GPU belongs to the arm (telemetry.arm_gpu).
--   phase (-): `before` (idle, prior to the first request), `during` or `after`.
--   t_ns (ns): when the reading was received (telemetry.t_ns).
--   t_s (s): seconds since the measured window began (aggregate_throughput's first send of
--       window `all`); negative before it; NULL when the run sent nothing.
--   in_window (-): t_ns within the measured window (first send to last stream completion).
--   power_w (W): power draw.
--   sm_clock_mhz (MHz): SM clock.
--   max_sm_clock_mhz (MHz): the SM clock's maximum, where the source gives it.
--   gpu_temp_c (°C): GPU temperature.
--   gpu_util_pct (%): GPU utilisation.
--   fb_used_mib (MiB): framebuffer memory used.
--   power_limit_w (W): the enforced power limit, where the source gives it.
--   clock_event_reasons (-): NVML's clock-event reasons bitmask, where the source gives it.
--   throttled (-): a slowdown reason is set (clock_event_reasons & 0xE8); NULL without
--       reasons.
--   at_power_limit (-): the SW power cap reason is set (clock_event_reasons & 0x4); NULL
--       without reasons.
CREATE VIEW gpu_timeline AS
WITH w AS (
    SELECT run_id, t_first_sent_ns, t_last_done_ns
    FROM aggregate_throughput
    WHERE scope = 'run' AND window = 'all'
)
SELECT
    t.run_id,
    ru.arm,
    ru.cell_id,
    t.source,
    t.endpoint,
    t.gpu,
    t.uuid,
    t.arm_gpu,
    t.phase,
    t.t_ns,
    (t.t_ns - w.t_first_sent_ns) / 1e9 AS t_s,
    coalesce(t.t_ns BETWEEN w.t_first_sent_ns AND w.t_last_done_ns, false) AS in_window,
    t.power_w,
    t.sm_clock_mhz,
    t.max_sm_clock_mhz,
    t.gpu_temp_c,
    t.gpu_util_pct,
    t.fb_used_mib,
    t.power_limit_w,
    t.clock_event_reasons,
    (t.clock_event_reasons & 232) <> 0 AS throttled,
    (t.clock_event_reasons & 4) <> 0 AS at_power_limit
FROM telemetry t
JOIN runs ru ON ru.run_id = t.run_id
LEFT JOIN w ON w.run_id = t.run_id
WHERE t.error IS NULL
