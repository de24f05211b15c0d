-- request_timeline: every measured request that succeeded, on its run's own clock: seconds
-- since the run's first measured send (t0 = min t_sent_ns over its measured requests), as
-- the report's Gantt and context curve draw them.
--   start_s, first_token_s, end_s   t_sent, first content delta and t_done, minus t0;
--   ttft_ms, tpot_ms, prompt_tokens, effective_prefill_tps   from request_metrics;
--   first_wave   one of the first concurrency_per_replica x replicas measured requests by
--                request_index: each slot's first request, released together at the start
--                (or across runs.ramp_s), into an idle server.
CREATE VIEW request_timeline AS
WITH base AS (
    SELECT run_id, min(t_sent_ns) AS t0
    FROM request_timing
    WHERE kind = 'measured'
    GROUP BY run_id
),
waves AS (
    SELECT
        t.run_id,
        t.request_index,
        row_number() OVER (PARTITION BY t.run_id ORDER BY t.request_index)
            <= r.concurrency_per_replica * r.replicas AS first_wave
    FROM request_timing t
    JOIN runs r ON r.run_id = t.run_id
    WHERE t.kind = 'measured'
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
    w.first_wave
FROM request_timing t
JOIN base b ON b.run_id = t.run_id
JOIN waves w ON w.run_id = t.run_id AND w.request_index = t.request_index
JOIN request_metrics m ON m.run_id = t.run_id AND m.request_index = t.request_index
WHERE t.kind = 'measured' AND m.outcome = 'ok'
