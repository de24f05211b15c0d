-- request_figures: the per-request timing metrics of every measured request
-- (kind = 'measured'), in the manifest's words (`timing_definitions`), from request_timing:
--
--   ttft_ms               "request start through first non-empty streamed content delta":
--                         (first content - t_sent) / 1e6;
--   effective_prefill_tps "API prompt tokens divided by TTFT; includes queueing, scheduling,
--                         prefill, and first-token work": usage_prompt_tokens / TTFT in s;
--   decode_tps            "API completion tokens after the first token divided by
--                         client-observed generation time": (usage_completion_tokens - 1) /
--                         generation s, generation = first content delta -> stream completion;
--   tpot_ms               "client-observed generation time divided by API completion tokens
--                         after the first token": generation ms / (usage_completion_tokens - 1);
--   itl_ms                "same per-request aggregate as TPOT in capacity-v3; not raw
--                         token-arrival timestamps": equal to tpot_ms (raw chunk gaps are the
--                         separate chunk_gaps diagnostic);
--   e2e_ms                "request start through stream completion": (t_done - t_sent) / 1e6;
--   client_queue_ms       client-side queueing, not a server figure: (t_sent - t_intended) / 1e6,
--                         how long the client held the request past the time its schedule
--                         meant it to go (open loop: every slot was busy; closed loop: the
--                         first wave's start skew after the synchronised release), including a
--                         TCP connect when the request opened one (requests.new_connection)
--                         and a first attempt that never reached the server (requests.resent).
--                         TTFT and E2E count from t_sent, so this time is in neither.
--   t_sent_ns, t_done_ns  request_timing's instants (ns since the run's origin), the ends of
--                         the spans aggregate_throughput divides by;
--   first_wave            the request belongs to the run's first wave, the start-up transient
--                         the `after_first_wave` window leaves out (docs/artifact.md
--                         "Windows"): closed loop without a ramp, one of the first
--                         concurrency_per_replica x replicas measured requests by
--                         request_index (each slot's first request, released together into an
--                         idle server); with a ramp (runs.ramp_s, closed or open loop), a
--                         request whose intended time falls before the ramp ends (t_intended
--                         < the earliest measured t_intended + ramp_s); open loop without a
--                         ramp, none (false).
--
-- Token figures use API usage tokens, never chunk counts. NULL, never a division by zero:
-- no usage event -> NULL token figures (prompt_tokens, completion_tokens, prefill, decode,
-- TPOT, ITL, tokens_per_chunk; `has_usage` is false); completion tokens <= 1 or zero
-- generation time -> NULL decode/TPOT/ITL; no content -> NULL TTFT and generation figures.
-- Failed requests keep their row with their outcome; statistics use outcome = 'ok' only.
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
        row_number() OVER (PARTITION BY run_id ORDER BY request_index) AS index_rank
    FROM request_timing
    WHERE kind = 'measured'
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
        WHEN ru.schedule = 'closed'
            THEN t.index_rank <= ru.concurrency_per_replica * ru.replicas
        ELSE false
    END AS first_wave
FROM t
JOIN runs ru ON ru.run_id = t.run_id
