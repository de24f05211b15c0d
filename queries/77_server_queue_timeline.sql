-- server_queue_timeline: the server's scheduler gauges (server_queue: running and waiting
-- requests, under each runtime's own metric names) on the same clock as request_timeline:
-- t_s = seconds since the run's first measured send, one row per scrape and replica.
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
    CAST(q.t_ns - b.t0 AS DOUBLE) / 1e9 AS t_s,
    q.t_ns,
    q.waiting,
    q.running
FROM server_queue q
JOIN base b ON b.run_id = q.run_id
