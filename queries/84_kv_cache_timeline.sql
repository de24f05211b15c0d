-- kv_cache_timeline: the server's KV-cache and prefix-cache gauges at every scrape of every
-- replica, on the same clock as request_timeline (t_s = seconds since the run's first
-- measured send), under each runtime's own names (server_metric_names roles kv_usage and
-- cache_hit_rate: vLLM kv_cache_usage_perc or gpu_cache_usage_perc, SGLang token_usage and
-- cache_hit_rate), label sets averaged per scrape. One row per scrape that carried either.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   replica (-): the replica whose `/metrics` was scraped.
--   runtime (-): the arm's runtime (runs.runtime).
--   metric_dialect (-): whose names the gauges follow (server_metric_names).
--   phase (-): `before`, `during` or `after` the run's requests (scrapes.phase).
--   t_s (s): the scrape's receive time minus the run's first measured t_sent (negative for a
--       scrape before it); NULL when no measured request was sent.
--   t_ns (ns): when the scrape response was received (scrapes.t_ns).
--   kv_usage (fraction): the KV cache's used share, 0-1; NULL when the scrape carried no
--       kv_usage gauge.
--   cache_hit_rate (fraction): the server's own recent prefix-cache hit rate gauge (SGLang),
--       0-1; NULL when the scrape carried none.
CREATE VIEW kv_cache_timeline AS
WITH base AS (
    SELECT run_id, min(t_sent_ns) AS t0
    FROM request_timing
    WHERE kind = 'measured'
    GROUP BY run_id
)
SELECT
    s.run_id,
    s.replica,
    ru.runtime,
    max(n.metric_dialect) AS metric_dialect,
    s.phase,
    CAST(s.t_ns - max(b.t0) AS DOUBLE) / 1e9 AS t_s,
    s.t_ns,
    avg(s.value) FILTER (WHERE n.role = 'kv_usage') AS kv_usage,
    avg(s.value) FILTER (WHERE n.role = 'cache_hit_rate') AS cache_hit_rate
FROM scrapes s
JOIN server_metric_names n ON n.metric = s.metric
JOIN runs ru ON ru.run_id = s.run_id
LEFT JOIN base b ON b.run_id = s.run_id
WHERE n.role IN ('kv_usage', 'cache_hit_rate')
GROUP BY s.run_id, s.replica, ru.runtime, s.phase, s.t_ns
