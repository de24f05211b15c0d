-- restarts: server restart detection per replica (run plan stop rule: "restart (e.g.
-- process_start_time_seconds changed)"). A replica restarted during the run when its
-- `process_start_time_seconds` took more than one value across its scrapes (before, during,
-- after). One row per replica that exports the metric; `restarted` is the verdict,
-- `start_times` the number of distinct values seen (restarts = start_times - 1).
CREATE VIEW restarts AS
SELECT
    s.run_id,
    ru.arm,
    ru.cell_id,
    s.replica,
    count(*) AS scrapes,
    count(DISTINCT s.value) AS start_times,
    first_value(s.value ORDER BY s.t_ns) AS first_start_time_s,
    last_value(s.value ORDER BY s.t_ns) AS last_start_time_s,
    count(DISTINCT s.value) > 1 AS restarted
FROM scrapes s
JOIN runs ru ON ru.run_id = s.run_id
WHERE s.metric = 'process_start_time_seconds'
GROUP BY s.run_id, ru.arm, ru.cell_id, s.replica
