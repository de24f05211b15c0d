-- server_timing_summary: per artifact, server_timings over its successful measured requests:
-- how anvil's client-side figures decompose against what the server reported. An artifact
-- without such a request has no row.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the manifest cell (runs.cell_id).
--   requests (requests): successful measured requests whose stream carried timings.
--   prefill_p50_ms (ms): the server's prefill time (server_timings.server_prefill_ms), p50 by
--       nearest rank.
--   queue_p50_ms (ms): TTFT minus the server's prefill (server_timings.queue_ms: queued or
--       batched before prefill, plus transport and the first token's decode), p50 by nearest
--       rank.
--   queue_max_ms (ms): the largest queue_ms.
--   generation_diff_p50_ms (ms): anvil's generation time minus the server's decode time
--       (server_timings.generation_diff_ms), p50 by nearest rank.
--   generation_diff_max_abs_ms (ms): the largest magnitude of generation_diff_ms.
--   token_mismatches (requests): requests whose usage completion tokens differ from the
--       server's generated count (token_diff not 0).
CREATE VIEW server_timing_summary AS
SELECT
    run_id,
    arm,
    cell_id,
    count(*) AS requests,
    nearest_rank(server_prefill_ms, 0.50) AS prefill_p50_ms,
    nearest_rank(queue_ms, 0.50) AS queue_p50_ms,
    max(queue_ms) AS queue_max_ms,
    nearest_rank(generation_diff_ms, 0.50) AS generation_diff_p50_ms,
    max(abs(generation_diff_ms)) AS generation_diff_max_abs_ms,
    count(*) FILTER (WHERE token_diff <> 0) AS token_mismatches
FROM server_timings
WHERE outcome = 'ok'
GROUP BY run_id, arm, cell_id
