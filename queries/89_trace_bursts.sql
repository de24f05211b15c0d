-- trace_bursts: a trace replay's rows due at one instant, as bursty traces publish them
-- (Mooncake's timestamps come in steps of about 3 s, 10 to 20 rows each): how long the client
-- took to put the whole burst on the wire. Per-request lateness (t_sent - t_intended) there is
-- the burst's serialisation, not a late clock: the burst's last row waits for every row
-- before it to be written. One row per run and instant with two or more measured rows sent.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the cell (runs.cell_id).
--   t_intended_ns (ns): the instant the burst's rows were due (requests.t_intended_ns).
--   rows (requests): measured rows due then and sent.
--   first_sent_ms (ms): the burst's first row's t_sent - t_intended.
--   serialisation_ms (ms): its last row's t_sent - t_intended: the burst's serialisation
--       time (held-back rows included).
--   last_released_ms (ms): its last row's t_released - t_intended: how long the last row
--       waited for a free slot (the in-flight cap); NULL in `/2` artifacts.
--   per_row_us (µs): serialisation_ms spread over the rows after the first, the client's
--       cost per request written back to back.
CREATE VIEW trace_bursts AS
SELECT
    r.run_id,
    ru.arm,
    ru.cell_id,
    r.t_intended_ns,
    count(*) AS rows,
    CAST(min(r.t_sent_ns) - r.t_intended_ns AS DOUBLE) / 1e6 AS first_sent_ms,
    CAST(max(r.t_sent_ns) - r.t_intended_ns AS DOUBLE) / 1e6 AS serialisation_ms,
    CAST(max(r.t_released_ns) - r.t_intended_ns AS DOUBLE) / 1e6 AS last_released_ms,
    CAST(max(r.t_sent_ns) - min(r.t_sent_ns) AS DOUBLE) / 1e3 / CAST(count(*) - 1 AS DOUBLE)
        AS per_row_us
FROM requests r
JOIN runs ru ON ru.run_id = r.run_id
WHERE r.kind = 'measured' AND ru.schedule = 'trace' AND r.t_sent_ns IS NOT NULL
GROUP BY r.run_id, ru.arm, ru.cell_id, r.t_intended_ns
HAVING count(*) > 1
