-- server_timings: per measured request, the timings the server reported for it beside anvil's
-- own figures, where the server reports them: llama.cpp's `timings` object on its last
-- chunk(s) (`prompt_n`, `prompt_ms`, `predicted_n`, `predicted_ms`, `cache_n`, `draft_n`,
-- `draft_n_accepted`), read from the raw payload of the request's last event that has one.
-- Requests whose stream carried no timings have no row; a value that is not a number is NULL.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the manifest cell (runs.cell_id).
--   replica (-): the replica the request went to (requests.replica).
--   request_index (-): the request within the run (requests.request_index).
--   outcome (-): how the request ended (requests.outcome): `ok`, or the failure.
--   ttft_ms (ms): anvil's TTFT (request_metrics.ttft_ms); NULL when no content arrived.
--   server_prompt_tokens (tokens): `prompt_n`, the prompt tokens the server reports
--       processing.
--   server_prefill_ms (ms): the server's prompt processing time (`prompt_ms`).
--   queue_ms (ms): anvil's TTFT minus the server's prefill: the time the request spent
--       queued or batched before its prefill began, plus transport both ways, plus the decode
--       of the first token (and of any reasoning tokens before the first content); a loaded
--       server shows here first. NULL when either is.
--   generation_ms (ms): anvil's generation time, first content -> stream completion
--       (request_metrics.generation_ms); NULL when no content arrived.
--   server_decode_ms (ms): the server's generation time (`predicted_ms`).
--   generation_diff_ms (ms): generation_ms minus server_decode_ms: transport and client-side
--       framing, near 0 when both clocks see the same decode; NULL when either is.
--   completion_tokens (tokens): the API usage completion tokens (request_metrics); NULL
--       without usage.
--   server_tokens (tokens): `predicted_n`, the tokens the server generated.
--   token_diff (tokens): usage completion tokens minus `predicted_n` (0 when usage and the
--       server's own count agree); NULL when either is.
--   cached_tokens (tokens): `cache_n`, prompt tokens reused from the server's cache.
--   draft_tokens (tokens): `draft_n`, draft tokens proposed (speculative decoding).
--   draft_accepted (tokens): `draft_n_accepted`, draft tokens accepted (speculative
--       decoding).
CREATE VIEW server_timings AS
WITH reported AS (
    SELECT
        run_id,
        request_index,
        last_value(data ORDER BY seq) AS payload
    FROM events
    WHERE strpos(data, '"timings"') > 0
    GROUP BY run_id, request_index
),
parsed AS (
    SELECT
        run_id,
        request_index,
        TRY_CAST(json_pointer(payload, '/timings/prompt_n') AS BIGINT) AS server_prompt_tokens,
        TRY_CAST(json_pointer(payload, '/timings/prompt_ms') AS DOUBLE) AS server_prefill_ms,
        TRY_CAST(json_pointer(payload, '/timings/predicted_n') AS BIGINT) AS server_tokens,
        TRY_CAST(json_pointer(payload, '/timings/predicted_ms') AS DOUBLE) AS server_decode_ms,
        TRY_CAST(json_pointer(payload, '/timings/cache_n') AS BIGINT) AS cached_tokens,
        TRY_CAST(json_pointer(payload, '/timings/draft_n') AS BIGINT) AS draft_tokens,
        TRY_CAST(json_pointer(payload, '/timings/draft_n_accepted') AS BIGINT) AS draft_accepted
    FROM reported
)
SELECT
    m.run_id,
    m.arm,
    m.cell_id,
    m.replica,
    m.request_index,
    m.outcome,
    m.ttft_ms,
    p.server_prompt_tokens,
    p.server_prefill_ms,
    m.ttft_ms - p.server_prefill_ms AS queue_ms,
    m.generation_ms,
    p.server_decode_ms,
    m.generation_ms - p.server_decode_ms AS generation_diff_ms,
    m.completion_tokens,
    p.server_tokens,
    m.completion_tokens - p.server_tokens AS token_diff,
    p.cached_tokens,
    p.draft_tokens,
    p.draft_accepted
FROM request_metrics m
JOIN parsed p ON p.run_id = m.run_id AND p.request_index = m.request_index
