-- client_queueing: client-side queueing per artifact, over its measured requests that were
-- sent (request_figures.client_queue_ms = t_sent - t_intended): how long requests waited in
-- the client past their intended start (a connect a request opened included). It is not part
-- of TTFT or E2E (both count from t_sent), but an open loop whose slots were all busy, or a
-- client that could not keep up, offers the server less load than its schedule says: read
-- the figures beside it. An artifact without a sent measured request has no row.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the manifest cell (runs.cell_id).
--   schedule (-): `closed`, `constant` (open loop, constant gaps) or `poisson` (runs.schedule).
--   rate_per_s (requests/s): the open loop's release rate (runs.rate_per_s); NULL in closed
--       loop.
--   requests (requests): measured requests with a send time.
--   queued_over_1ms (requests): of them, those that waited more than 1 ms.
--   mean_ms (ms): the mean client_queue_ms.
--   p50_ms (ms): client_queue_ms p50, by nearest rank.
--   p95_ms (ms): client_queue_ms p95, by nearest rank.
--   max_ms (ms): the largest client_queue_ms.
CREATE VIEW client_queueing AS
SELECT
    f.run_id,
    ru.arm,
    ru.cell_id,
    ru.schedule,
    ru.rate_per_s,
    count(f.client_queue_ms) AS requests,
    count(*) FILTER (WHERE f.client_queue_ms > 1) AS queued_over_1ms,
    avg(f.client_queue_ms) AS mean_ms,
    nearest_rank(f.client_queue_ms, 0.50) AS p50_ms,
    nearest_rank(f.client_queue_ms, 0.95) AS p95_ms,
    max(f.client_queue_ms) AS max_ms
FROM request_figures f
JOIN runs ru ON ru.run_id = f.run_id
WHERE f.client_queue_ms IS NOT NULL
GROUP BY f.run_id, ru.arm, ru.cell_id, ru.schedule, ru.rate_per_s
