-- tokens_per_chunk: per run and replica, usage completion tokens per content chunk over the
-- measured requests that succeeded with usage and at least one content chunk: 1 when the
-- server streams one token per event; more when it sends several per event (speculative
-- decoding's accepted drafts, or a server that batches its writes), which makes
-- inter-chunk gaps coarser than inter-token ones.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   replica (-): the replica the requests went to (requests.replica).
--   tokens_per_chunk (tokens/chunk): the requests' completion tokens summed over their
--       content chunks summed (a pooled ratio, not a mean of per-request ratios).
CREATE VIEW tokens_per_chunk AS
SELECT
    run_id,
    replica,
    CAST(sum(completion_tokens) AS DOUBLE) / CAST(sum(content_chunks) AS DOUBLE) AS tokens_per_chunk
FROM request_metrics
WHERE outcome = 'ok' AND completion_tokens IS NOT NULL AND content_chunks > 0
GROUP BY run_id, replica
