-- chunk_gaps: DIAGNOSTIC, chunk level. The raw gap between consecutive content chunks of a
-- measured request: receive time of a chunk with a non-empty content delta minus that of the
-- previous such chunk of the same request (NULL for the first). This is NOT the manifest's
-- inter-token latency: one chunk can carry several tokens (speculative decoding), and
-- "mean inter-token latency" is defined as the per-request aggregate TPOT (request_metrics
-- itl_ms), "not raw token-arrival timestamps". One row per content chunk.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   replica (-): the replica the request went to (requests.replica).
--   request_index (-): the request within the run (requests.request_index).
--   seq (-): the chunk's position in its response (events.seq).
--   t_ns (ns): the chunk's receive time (events.t_ns).
--   chunk_gap_ms (ms): t_ns minus that of the request's previous content chunk; NULL for its
--       first.
CREATE VIEW chunk_gaps AS
SELECT
    e.run_id,
    r.replica,
    e.request_index,
    e.seq,
    e.t_ns,
    CAST(e.t_ns - lag(e.t_ns) OVER (PARTITION BY e.run_id, e.request_index ORDER BY e.seq)
        AS DOUBLE) / 1e6 AS chunk_gap_ms
FROM events e
JOIN requests r ON r.run_id = e.run_id AND r.request_index = e.request_index
WHERE r.kind = 'measured' AND e.content_delta <> ''
