-- server_timing_summary: per artifact, server_timings over its successful measured requests:
-- how anvil's client-side figures decompose against what the server reported.
--   requests                 successful measured requests whose stream carried timings;
--   prefill_p50_ms           the server's prefill time, p50 (nearest rank);
--   queue_p50_ms, queue_max_ms   TTFT minus the server's prefill: queued or batched before
--                            prefill, plus transport and the first token's decode;
--   generation_diff_p50_ms   anvil's generation time minus the server's decode time, p50;
--   generation_diff_max_abs_ms   its largest magnitude;
--   token_mismatches         requests whose usage completion tokens differ from the server's
--                            generated count.
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
