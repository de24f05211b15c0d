-- request_timeline: every measured request that succeeded, on its run's own clock: seconds
-- since the run's first measured send (t0 = min t_sent_ns over its measured requests), as
-- the report's Gantt and context curve draw them.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   replica (-): the replica the request went to (requests.replica).
--   request_index (-): the request within the run (requests.request_index).
--   start_s (s): t_sent minus t0.
--   first_token_s (s): the first non-empty content delta's receive time
--       (request_timing.t_first_content_ns) minus t0; NULL when no content arrived.
--   end_s (s): t_done minus t0.
--   ttft_ms (ms): request_metrics.ttft_ms; NULL when no content arrived.
--   tpot_ms (ms): request_metrics.tpot_ms; NULL without usage or content, with completion
--       tokens <= 1 or zero generation time.
--   prompt_tokens (tokens): request_metrics.prompt_tokens, the API usage prompt tokens; NULL
--       without usage.
--   effective_prefill_tps (tok/s): request_metrics.effective_prefill_tps; NULL without usage
--       or TTFT, or when TTFT is 0.
--   first_wave (-): request_figures.first_wave: the start-up transient (closed loop, each
--       slot's first request, released together into an idle server; with a ramp, the
--       requests meant to start before it ended; open loop without a ramp, none).
CREATE VIEW request_timeline AS
WITH base AS (
    SELECT run_id, min(t_sent_ns) AS t0
    FROM request_timing
    WHERE kind = 'measured'
    GROUP BY run_id
)
SELECT
    t.run_id,
    t.replica,
    t.request_index,
    CAST(t.t_sent_ns - b.t0 AS DOUBLE) / 1e9 AS start_s,
    CAST(t.t_first_content_ns - b.t0 AS DOUBLE) / 1e9 AS first_token_s,
    CAST(t.t_done_ns - b.t0 AS DOUBLE) / 1e9 AS end_s,
    m.ttft_ms,
    m.tpot_ms,
    m.prompt_tokens,
    m.effective_prefill_tps,
    m.first_wave
FROM request_timing t
JOIN base b ON b.run_id = t.run_id
JOIN request_metrics m ON m.run_id = t.run_id AND m.request_index = t.request_index
WHERE t.kind = 'measured' AND m.outcome = 'ok'
