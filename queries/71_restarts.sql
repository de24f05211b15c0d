-- restarts: server restart detection per replica of every run (run plan stop rule: "restart
-- (e.g. process_start_time_seconds changed)"). Three signals; the first two mean the server
-- restarted and answered again (a scrape after the restart shows it), the third that it
-- stopped answering and did not come back:
--   start time  the replica's `process_start_time_seconds` took more than one value across
--               its scrapes (before, during, after);
--   counters    most of the replica's counters fell at one scrape (counter_falls.most_fell):
--               a restarted server counts from 0 again. llama.cpp's server exports no start
--               time; this is how its restarts show.
--   gone        a run that completed has the replica's scrape before it but none after it,
--               and every measured request of the replica that ended after its last answer
--               (its latest scrape or successful request) failed, at least one: the server
--               stopped answering during the run (crashed, killed, stopped) and no later
--               scrape or response shows it back; one slow `after` scrape of a healthy
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
--   last_answer_s (s): seconds since the run's origin of the replica's last answer: its
--       latest scrape or the end of its latest successful request (any kind); NULL when it
--       never answered.
--   failed_after (count): measured requests of the replica that ended after its last answer
--       (all failed: a success would have been a later answer); every failed measured
--       request when it never answered.
--   failed_after_outcomes (-): their outcomes with counts, most frequent first, e.g.
--       `connect_error 12, aborted 8`; NULL when there are none.
--   restarted (-): the verdict of the restart rule: any of the three signals fired (a
--       replica that stopped answering included; `signal` says which).
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
answered AS (
    SELECT run_id, replica, max(t_ns) AS t_ns
    FROM (
        SELECT run_id, replica, t_ns FROM scrapes
        UNION ALL
        SELECT run_id, replica, t_done_ns AS t_ns FROM requests WHERE outcome = 'ok'
    ) a
    GROUP BY run_id, replica
),
failed_after_by_outcome AS (
    SELECT q.run_id, q.replica, q.outcome, count(*) AS n
    FROM requests q
    LEFT JOIN answered a ON a.run_id = q.run_id AND a.replica = q.replica
    WHERE q.kind = 'measured' AND q.outcome <> 'ok'
        AND (a.t_ns IS NULL OR q.t_done_ns > a.t_ns)
    GROUP BY q.run_id, q.replica, q.outcome
),
failed_after AS (
    SELECT run_id, replica, sum(n) AS failed_after,
           string_agg(outcome || ' ' || CAST(n AS VARCHAR), ', ' ORDER BY n DESC, outcome)
               AS failed_after_outcomes
    FROM failed_after_by_outcome
    GROUP BY run_id, replica
),
gone AS (
    SELECT r.run_id, r.replica,
           r.status = 'complete' AND coalesce(sc.scraped_before, false)
               AND NOT coalesce(sc.scraped_after, false)
               AND coalesce(fa.failed_after, 0) > 0 AS gone
    FROM replicas r
    LEFT JOIN scraped sc ON sc.run_id = r.run_id AND sc.replica = r.replica
    LEFT JOIN failed_after fa ON fa.run_id = r.run_id AND fa.replica = r.replica
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
    CAST(an.t_ns AS DOUBLE) / 1e9 AS last_answer_s,
    coalesce(fa.failed_after, 0) AS failed_after,
    fa.failed_after_outcomes,
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
LEFT JOIN answered an ON an.run_id = r.run_id AND an.replica = r.replica
LEFT JOIN failed_after fa ON fa.run_id = r.run_id AND fa.replica = r.replica
