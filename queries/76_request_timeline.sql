-- request_timeline: every measured request that succeeded, on its run's own clock: seconds
-- since the run's first measured send (t0 = min t_sent_ns over its measured requests), as
-- the report's Gantt and context curve draw them.
--   start_s, first_token_s, end_s   t_sent, first content delta and t_done, minus t0;
--   ttft_ms, tpot_ms, prompt_tokens, effective_prefill_tps   from request_metrics;
--   first_wave   request_figures.first_wave: the start-up transient (closed loop, each slot's
--                first request, released together into an idle server; with a ramp, the
--                requests meant to start before it ended; open loop without a ramp, none).
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
