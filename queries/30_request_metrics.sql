-- request_metrics: one row per measured request (kind = 'measured') with every per-request
-- metric and its canary check; the view analysts start from.
--
-- Timing and token figures are request_figures (definitions there, from the manifest's
-- `timing_definitions`: TTFT, effective prefill, decode, TPOT, ITL = TPOT, E2E, using API
-- usage tokens, never chunk counts); canary columns are request_canaries (own canary present,
-- canaries of other requests of the same campaign found in the reply).
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the manifest cell (runs.cell_id).
--   replica (-): the replica the request went to (requests.replica).
--   request_index (-): the request within the run (requests.request_index).
--   outcome (-): how the request ended (requests.outcome): `ok`, or the failure.
--   ttft_ms (ms): request start to the first non-empty content delta (request_figures); NULL
--       when no content arrived or the request was never sent.
--   effective_prefill_tps (tok/s): API prompt tokens / TTFT in s (request_figures); NULL
--       without usage or TTFT, or when TTFT is 0.
--   decode_tps (tok/s): (completion tokens - 1) / generation s (request_figures); NULL
--       without usage or content, with completion tokens <= 1 or zero generation time.
--   tpot_ms (ms): generation ms / (completion tokens - 1) (request_figures); NULL as
--       decode_tps is.
--   itl_ms (ms): mean inter-token latency, equal to tpot_ms (request_figures); not raw chunk
--       gaps (chunk_gaps).
--   e2e_ms (ms): request start to stream completion (request_figures); NULL when the request
--       was never sent.
--   generation_ms (ms): first content to stream completion (request_figures); NULL when no
--       content arrived.
--   client_queue_ms (ms): client-side queueing, t_sent - t_intended (request_figures); in
--       neither TTFT nor E2E; NULL when the request was never sent.
--   prompt_tokens (tokens): the API usage prompt tokens; NULL without usage.
--   completion_tokens (tokens): the API usage completion tokens; NULL without usage.
--   has_usage (-): completion_tokens is not NULL (a usage event reported them).
--   content_chunks (chunks): events with a non-empty content delta.
--   reasoning_chunks (chunks): events with a non-empty reasoning delta.
--   tokens_per_chunk (tokens/chunk): completion_tokens / content_chunks; NULL without usage
--       or without content chunks.
--   finish_reason (-): the last non-null finish reason of the stream; NULL when none.
--   short_completion (-): a Responses API request (runs.api) that succeeded, whose stream
--       ended with status `completed` (neither `incomplete` nor failed), with fewer usage
--       output tokens than the words its prompt asked for (runs.response_words; a word is at
--       least one token, so the reply is shorter than asked). vLLM ends a Responses stream it
--       aborted (a stopping server, a cancelled request) exactly so, `completed` without
--       `incomplete_details`, where chat says `finish_reason: "abort"` (outcome `aborted`):
--       the request stays `ok`, and this says it may have been cut short. False for other
--       APIs, natural-completion cells (no words asked), failures and replies without usage.
--   first_wave (-): the request belongs to the run's first wave, which the
--       `after_first_wave` window leaves out (request_figures.first_wave).
--   canary (-): the request's own canary (requests.canary); NULL when it has none.
--   canary_checked_in (-): where the own canary is looked for: 'content', or
--       'tool_arguments' for the functional `tools` check (judged by functional_results);
--       NULL when the request has no canary (request_canaries).
--   own_canary (-): own canary present in the reply's content; NULL when not checked here
--       (no canary, or checked in tool arguments).
--   canary_ok (-): own canary present and no other marker in content or reasoning; NULL as
--       own_canary is (never a failure).
--   foreign_canaries (-): sorted distinct markers other than the request's own (and, in a
--       session, other than its own session's turns') found in the reply's content or
--       reasoning; NULL when none.
--   foreign_canary_count (count): how many foreign_canaries holds (0 when none).
--   stray_canaries (-): the foreign markers that belong to no request of the campaign loaded;
--       NULL when none.
--   stray_canary_count (count): how many stray_canaries holds (0 when none).
CREATE VIEW request_metrics AS
SELECT
    f.run_id,
    f.arm,
    f.cell_id,
    f.replica,
    f.request_index,
    f.outcome,
    f.ttft_ms,
    f.effective_prefill_tps,
    f.decode_tps,
    f.tpot_ms,
    f.itl_ms,
    f.e2e_ms,
    f.generation_ms,
    f.client_queue_ms,
    f.prompt_tokens,
    f.completion_tokens,
    f.has_usage,
    f.content_chunks,
    f.reasoning_chunks,
    f.tokens_per_chunk,
    f.finish_reason,
    -- Every operand is non-null (no coalesce of the result: a materialized view's declared
    -- nullability must match its batches).
    ru.api = 'responses' AND f.outcome = 'ok' AND f.has_usage
        AND coalesce(f.finish_reason, '') = 'completed'
        AND coalesce(f.completion_tokens, 0) < coalesce(ru.response_words, 0)
        AS short_completion,
    f.first_wave,
    c.canary,
    c.canary_checked_in,
    c.own_canary,
    c.canary_ok,
    c.foreign_canaries,
    c.foreign_canary_count,
    c.stray_canaries,
    c.stray_canary_count
FROM request_figures f
JOIN runs ru ON ru.run_id = f.run_id
LEFT JOIN request_canaries c
    ON c.run_id = f.run_id AND c.request_index = f.request_index
