-- restarts: server restart detection per replica of every run (run plan stop rule: "restart
-- (e.g. process_start_time_seconds changed)"). Three signals:
--   start time  the replica's `process_start_time_seconds` took more than one value across
--               its scrapes (before, during, after);
--   counters    most of the replica's counters fell at one scrape (counter_falls.most_fell):
--               a restarted server counts from 0 again. llama.cpp's server exports no start
--               time; this is how its restarts show.
--   gone        a run that completed has the replica's scrape before it but none after it,
--               and requests of the replica failed: the server stopped answering during the
--               run (crashed, killed, restarting); one slow `after` scrape of a healthy
--               server is not enough.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the manifest cell (runs.cell_id).
--   replica (-): the replica, 0 to runs.replicas - 1.
--   scrapes (count): samples of process_start_time_seconds in the replica's scrapes (0 when
--       it exports none).
--   start_times (count): distinct start times among them (restarts = start_times - 1).
--   first_start_time_s (s): process_start_time_seconds at the replica's earliest scrape that
--       carried it (seconds since the Unix epoch, as exposed); NULL when none did.
--   last_start_time_s (s): the same at its latest such scrape; NULL when none did.
--   counters (count): the replica's monotonic series (counter_increases rows).
--   counters_reset (count): of them, the series that ever fell between two scrapes.
--   reset_scrapes (count): the scrapes at which most counters fell (counter_falls.most_fell).
--   counter_reset_example (-): one series that fell, `metric{labels}` (the smallest by
--       text); NULL when none did.
--   restarted (-): the verdict: any of the three signals fired.
--   signal (-): the first that fired, in this order: 'process_start_time_seconds',
--       'counter_reset' or 'stopped_answering'; NULL when none did.
--   detectable (-): false for a replica that exported neither signal (no start time, no
--       counter): a restart there could not be seen, and anvil check says so.
--   scraped (-): the replica has at least one scrape.
--   scraped_after (-): the replica has a scrape after the run (phase `after`).
CREATE VIEW restarts AS
WITH replicas AS (
    SELECT run_id, arm, cell_id, status, unnest(range(0, replicas)) AS replica
    FROM runs
),
starts AS (
    SELECT
        run_id,
        replica,
        count(*) AS scrapes,
        count(DISTINCT value) AS start_times,
        first_value(value ORDER BY t_ns) AS first_start_time_s,
        last_value(value ORDER BY t_ns) AS last_start_time_s
    FROM scrapes
    WHERE metric = (SELECT metric FROM server_metric_names WHERE role = 'process_start')
    GROUP BY run_id, replica
),
counters AS (
    SELECT
        run_id,
        replica,
        count(*) AS counters,
        count(*) FILTER (WHERE resets > 0) AS counters_reset,
        min(metric || CASE WHEN labels = '' THEN '' ELSE '{' || labels || '}' END)
            FILTER (WHERE resets > 0) AS counter_reset_example
    FROM counter_increases
    GROUP BY run_id, replica
),
falls AS (
    SELECT run_id, replica, count(*) FILTER (WHERE most_fell) AS reset_scrapes
    FROM counter_falls
    GROUP BY run_id, replica
),
scraped AS (
    SELECT run_id, replica,
           bool_or(phase = 'before') AS scraped_before,
           bool_or(phase = 'after') AS scraped_after
    FROM scrapes
    GROUP BY run_id, replica
),
failed AS (
    SELECT run_id, replica, count(*) AS failed
    FROM requests
    WHERE kind = 'measured' AND outcome <> 'ok'
    GROUP BY run_id, replica
),
gone AS (
    SELECT r.run_id, r.replica,
           r.status = 'complete' AND coalesce(sc.scraped_before, false)
               AND NOT coalesce(sc.scraped_after, false)
               AND coalesce(f.failed, 0) > 0 AS gone
    FROM replicas r
    LEFT JOIN scraped sc ON sc.run_id = r.run_id AND sc.replica = r.replica
    LEFT JOIN failed f ON f.run_id = r.run_id AND f.replica = r.replica
)
SELECT
    r.run_id,
    r.arm,
    r.cell_id,
    r.replica,
    coalesce(s.scrapes, 0) AS scrapes,
    coalesce(s.start_times, 0) AS start_times,
    s.first_start_time_s,
    s.last_start_time_s,
    coalesce(c.counters, 0) AS counters,
    coalesce(c.counters_reset, 0) AS counters_reset,
    coalesce(fl.reset_scrapes, 0) AS reset_scrapes,
    c.counter_reset_example,
    coalesce(s.start_times, 0) > 1 OR coalesce(fl.reset_scrapes, 0) > 0 OR g.gone AS restarted,
    CASE
        WHEN coalesce(s.start_times, 0) > 1 THEN 'process_start_time_seconds'
        WHEN coalesce(fl.reset_scrapes, 0) > 0 THEN 'counter_reset'
        WHEN g.gone THEN 'stopped_answering'
    END AS signal,
    s.run_id IS NOT NULL OR coalesce(c.counters, 0) > 0 AS detectable,
    sc.run_id IS NOT NULL AS scraped,
    coalesce(sc.scraped_after, false) AS scraped_after
FROM replicas r
LEFT JOIN starts s ON s.run_id = r.run_id AND s.replica = r.replica
LEFT JOIN counters c ON c.run_id = r.run_id AND c.replica = r.replica
LEFT JOIN falls fl ON fl.run_id = r.run_id AND fl.replica = r.replica
LEFT JOIN scraped sc ON sc.run_id = r.run_id AND sc.replica = r.replica
LEFT JOIN gone g ON g.run_id = r.run_id AND g.replica = r.replica
