-- request_figures: the per-request timing metrics of every measured request
-- (kind = 'measured'), in the manifest's words (`timing_definitions`), from request_timing.
--
-- Token figures use API usage tokens, never chunk counts. NULL, never a division by zero:
-- no usage event -> NULL token figures (prompt_tokens, completion_tokens, prefill, decode,
-- TPOT, ITL, tokens_per_chunk; `has_usage` is false); completion tokens <= 1 or zero
-- generation time -> NULL decode/TPOT/ITL; no content -> NULL TTFT and generation figures.
-- Failed requests keep their row with their outcome; statistics use outcome = 'ok' only.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the manifest cell (runs.cell_id).
--   replica (-): the replica the request went to (requests.replica).
--   request_index (-): the request within the run (requests.request_index).
--   outcome (-): how the request ended (requests.outcome): `ok`, or the failure.
--   ttft_ms (ms): "request start through first non-empty streamed content delta":
--       (first content - t_sent) / 1e6; NULL when no content arrived or the request was never
--       sent.
--   effective_prefill_tps (tok/s): "API prompt tokens divided by TTFT; includes queueing,
--       scheduling, prefill, and first-token work": usage_prompt_tokens / TTFT in s; NULL
--       without usage or TTFT, or when TTFT is 0.
--   decode_tps (tok/s): "API completion tokens after the first token divided by
--       client-observed generation time": (usage_completion_tokens - 1) / generation s,
--       generation = first content delta -> stream completion; NULL without usage or
--       content, with completion tokens <= 1 or zero generation time.
--   tpot_ms (ms): "client-observed generation time divided by API completion tokens after the
--       first token": generation ms / (usage_completion_tokens - 1); NULL as decode_tps is.
--   itl_ms (ms): "same per-request aggregate as TPOT in capacity-v3; not raw token-arrival
--       timestamps": equal to tpot_ms (raw chunk gaps are the separate chunk_gaps
--       diagnostic).
--   e2e_ms (ms): "request start through stream completion": (t_done - t_sent) / 1e6; NULL
--       when the request was never sent.
--   generation_ms (ms): client-observed generation time, first content -> stream completion:
--       (t_done - first content) / 1e6; NULL when no content arrived.
--   client_queue_ms (ms): client-side queueing, not a server figure: (t_sent - t_intended) /
--       1e6, how long the client held the request past the time its schedule meant it to go
--       (open loop: every slot was busy; closed loop: the first wave's start skew after the
--       synchronised release), including a TCP connect when the request opened one
--       (requests.new_connection) and a first attempt that never reached the server
--       (requests.resent). TTFT and E2E count from t_sent, so this time is in neither. NULL
--       when the request was never sent.
--   prompt_tokens (tokens): the API usage prompt tokens (request_timing.usage_prompt_tokens);
--       NULL without usage.
--   completion_tokens (tokens): the API usage completion tokens
--       (request_timing.usage_completion_tokens); NULL without usage.
--   has_usage (-): completion_tokens is not NULL (a usage event reported them).
--   content_chunks (chunks): events with a non-empty content delta (request_timing).
--   reasoning_chunks (chunks): events with a non-empty reasoning delta (request_timing).
--   tokens_per_chunk (tokens/chunk): completion_tokens / content_chunks; NULL without usage
--       or without content chunks.
--   finish_reason (-): the last non-null finish reason of the stream (request_timing); NULL
--       when none.
--   t_sent_ns (ns): request_timing's request start (ns since the run's origin), the start of
--       the spans aggregate_throughput divides by; NULL if never sent.
--   t_done_ns (ns): request_timing's stream completion (ns since the run's origin), the end of
--       those spans.
--   first_wave (-): the request belongs to the run's first wave, the start-up transient the
--       `after_first_wave` window leaves out (docs/artifact.md "Windows"): closed loop
--       without a ramp, one of the first concurrency_per_replica x replicas measured requests
--       by request_index (each slot's first request, released together into an idle server);
--       with a ramp (runs.ramp_s, closed or open loop), a request whose intended time falls
--       before the ramp ends (t_intended < the earliest measured t_intended + ramp_s); open
--       loop without a ramp, none (false). A closed-loop session workload's first wave is
--       the first turns of its first concurrency_per_replica x replicas sessions (each lane's
--       first session, released together; its later turns follow their replies).
--   session_id (-): a session workload's session (requests.session_id); NULL otherwise.
--   turn (-): its 0-based turn within the session (requests.turn); NULL otherwise.
-- A session workload's turns never sent because an earlier turn of their session failed
-- (requests.error 'never sent: turn K of session S ended …') have no row here, nor in any
-- view built on this one: the failed turn is the failure.
CREATE VIEW request_figures AS
WITH t AS (
    SELECT
        run_id,
        request_index,
        replica,
        outcome,
        t_sent_ns,
        t_done_ns,
        t_first_content_ns - t_sent_ns AS ttft_ns,
        t_done_ns - t_first_content_ns AS generation_ns,
        t_done_ns - t_sent_ns AS e2e_ns,
        t_sent_ns - t_intended_ns AS client_queue_ns,
        usage_prompt_tokens,
        usage_completion_tokens,
        CASE WHEN usage_completion_tokens > 1 THEN usage_completion_tokens - 1 END
            AS tokens_after_first,
        content_chunks,
        reasoning_chunks,
        finish_reason,
        t_intended_ns - min(t_intended_ns) OVER (PARTITION BY run_id) AS since_release_ns,
        row_number() OVER (PARTITION BY run_id ORDER BY request_index) AS index_rank,
        session_id,
        turn
    FROM request_timing
    WHERE kind = 'measured'
        -- A session's turns never sent because an earlier turn of it failed: that failure
        -- counts once (here) and the session once (sessions), not every turn it cut.
        AND NOT (
            session_id IS NOT NULL
            AND t_sent_ns IS NULL
            AND starts_with(coalesce(error, ''), 'never sent: turn ')
        )
)
SELECT
    t.run_id,
    ru.arm,
    ru.cell_id,
    t.replica,
    t.request_index,
    t.outcome,
    CAST(t.ttft_ns AS DOUBLE) / 1e6 AS ttft_ms,
    CAST(t.usage_prompt_tokens AS DOUBLE)
        / (CAST(nullif(t.ttft_ns, 0) AS DOUBLE) / 1e9) AS effective_prefill_tps,
    CAST(t.tokens_after_first AS DOUBLE)
        / (CAST(nullif(t.generation_ns, 0) AS DOUBLE) / 1e9) AS decode_tps,
    (CAST(nullif(t.generation_ns, 0) AS DOUBLE) / 1e6)
        / CAST(t.tokens_after_first AS DOUBLE) AS tpot_ms,
    (CAST(nullif(t.generation_ns, 0) AS DOUBLE) / 1e6)
        / CAST(t.tokens_after_first AS DOUBLE) AS itl_ms,
    CAST(t.e2e_ns AS DOUBLE) / 1e6 AS e2e_ms,
    CAST(t.generation_ns AS DOUBLE) / 1e6 AS generation_ms,
    CAST(t.client_queue_ns AS DOUBLE) / 1e6 AS client_queue_ms,
    t.usage_prompt_tokens AS prompt_tokens,
    t.usage_completion_tokens AS completion_tokens,
    t.usage_completion_tokens IS NOT NULL AS has_usage,
    t.content_chunks,
    t.reasoning_chunks,
    CAST(t.usage_completion_tokens AS DOUBLE)
        / CAST(nullif(t.content_chunks, 0) AS DOUBLE) AS tokens_per_chunk,
    t.finish_reason,
    t.t_sent_ns,
    t.t_done_ns,
    CASE
        WHEN ru.ramp_s IS NOT NULL THEN CAST(t.since_release_ns AS DOUBLE) < ru.ramp_s * 1e9
        WHEN ru.schedule = 'closed' AND t.session_id IS NOT NULL
            THEN t.turn = 0 AND t.session_id < ru.concurrency_per_replica * ru.replicas
        WHEN ru.schedule = 'closed'
            THEN t.index_rank <= ru.concurrency_per_replica * ru.replicas
        ELSE false
    END AS first_wave,
    t.session_id,
    t.turn
FROM t
JOIN runs ru ON ru.run_id = t.run_id
