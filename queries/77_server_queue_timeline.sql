-- server_queue_timeline: the server's scheduler gauges (server_queue: running and waiting
-- requests, under each runtime's own metric names) on the same clock as request_timeline:
-- t_s = seconds since the run's first measured send, one row per scrape and replica.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   replica (-): the replica whose `/metrics` was scraped.
--   runtime (-): the arm's runtime (runs.runtime).
--   metric_dialect (-): whose names the gauges follow (server_metric_names).
--   t_s (s): the scrape's receive time minus the run's first measured t_sent (negative for a
--       scrape before it); NULL when no measured request was sent.
--   t_ns (ns): when the scrape response was received (scrapes.t_ns).
--   waiting (requests): requests the server held waiting for a slot or batch
--       (server_queue.waiting); NULL when the scrape carried no such gauge.
--   running (requests): requests the server was processing (server_queue.running); NULL
--       when the scrape carried no such gauge.
CREATE VIEW server_queue_timeline AS
WITH base AS (
    SELECT run_id, min(t_sent_ns) AS t0
    FROM request_timing
    WHERE kind = 'measured'
    GROUP BY run_id
)
SELECT
    q.run_id,
    q.replica,
    q.runtime,
    q.metric_dialect,
    CAST(q.t_ns - b.t0 AS DOUBLE) / 1e9 AS t_s,
    q.t_ns,
    q.waiting,
    q.running
FROM server_queue q
JOIN base b ON b.run_id = q.run_id
