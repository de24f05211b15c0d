-- server_queue: the server's own scheduler gauges at every scrape of every replica, under
-- each runtime's names (server_metric_names roles queue_running / queue_waiting: vLLM
-- num_requests_running / num_requests_waiting, SGLang num_running_reqs / num_queue_reqs,
-- llama.cpp requests_processing / requests_deferred), label sets summed per scrape (e.g. one
-- series per model or engine). One row per scrape that carried at least one of them; a
-- replica whose scrapes carry none has no rows (the report then says its runtime exports no
-- known queue metric).
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the manifest cell (runs.cell_id).
--   replica (-): the replica whose `/metrics` was scraped.
--   t_ns (ns): when the scrape response was received (scrapes.t_ns).
--   phase (-): `before`, `during` or `after` the run's requests (scrapes.phase).
--   runtime (-): the arm's runtime (runs.runtime).
--   metric_dialect (-): whose names the gauges follow (server_metric_names).
--   running (requests): requests the server was processing; NULL when the scrape carried no
--       queue_running gauge.
--   waiting (requests): requests it held waiting for a slot or batch; NULL when the scrape
--       carried no queue_waiting gauge.
CREATE VIEW server_queue AS
SELECT
    s.run_id,
    ru.arm,
    ru.cell_id,
    s.replica,
    s.t_ns,
    s.phase,
    ru.runtime,
    max(n.metric_dialect) AS metric_dialect,
    sum(s.value) FILTER (WHERE n.role = 'queue_running') AS running,
    sum(s.value) FILTER (WHERE n.role = 'queue_waiting') AS waiting
FROM scrapes s
JOIN server_metric_names n ON n.metric = s.metric
JOIN runs ru ON ru.run_id = s.run_id
WHERE n.role IN ('queue_running', 'queue_waiting')
GROUP BY s.run_id, ru.arm, ru.cell_id, ru.runtime, s.replica, s.t_ns, s.phase
