-- server_queue: the server's own scheduler gauges at every scrape of every replica, under
-- each runtime's names (server_metric_names roles queue_running / queue_waiting: vLLM
-- num_requests_running / num_requests_waiting, SGLang num_running_reqs / num_queue_reqs,
-- llama.cpp requests_processing / requests_deferred):
--   running  requests the server was processing;
--   waiting  requests it held waiting for a slot or batch;
-- label sets summed per scrape (e.g. one series per model or engine). One row per scrape
-- that carried at least one of them; a replica whose scrapes carry none has no rows (the
-- report then says its runtime exports no known queue metric).
CREATE VIEW server_queue AS
SELECT
    s.run_id,
    ru.arm,
    ru.cell_id,
    s.replica,
    s.t_ns,
    s.phase,
    max(n.runtime) AS runtime,
    sum(s.value) FILTER (WHERE n.role = 'queue_running') AS running,
    sum(s.value) FILTER (WHERE n.role = 'queue_waiting') AS waiting
FROM scrapes s
JOIN server_metric_names n ON n.metric = s.metric
JOIN runs ru ON ru.run_id = s.run_id
WHERE n.role IN ('queue_running', 'queue_waiting')
GROUP BY s.run_id, ru.arm, ru.cell_id, s.replica, s.t_ns, s.phase
