-- request_timing: one row per request (every kind), the raw instants the metrics are built
-- from, joined from `requests` and that request's `events`.
--
-- Definitions (workload manifest `timing_definitions`, docs/artifact.md "Deriving the
-- metrics"):
--   request start     = requests.t_sent_ns: when the request bytes were written to the socket
--                       (t_intended_ns is kept so client-side queueing is visible);
--   first content     = receive time of the request's first event with a non-empty content
--                       delta ("request start through first non-empty streamed content
--                       delta"): a role-only first chunk (content NULL or '') and reasoning
--                       deltas do not count;
--   last content      = receive time of the last event with a non-empty content delta;
--   stream completion = requests.t_done_ns: when the stream ended (last byte);
--   content_chunks    = events with a non-empty content delta; reasoning_chunks likewise for
--                       reasoning deltas (chunks are a diagnostic: one chunk can carry several
--                       tokens under speculative decoding, so token figures use usage);
--   usage_*           = the API usage of the event that carries it (NULL when no event did);
--   finish_reason     = the last non-null finish reason of the stream;
--   parse_errors      = events whose data could not be parsed (events.parse_error set:
--                       invalid JSON or UTF-8, not an object): parser corruption, whatever
--                       the outcome; first_parse_error is the first of them in `seq` order;
--   content           = every content delta concatenated in `seq` order ('' when none;
--                       ordered_concat(x, k) is string_agg(x, '' ORDER BY k)).
CREATE VIEW request_timing AS
WITH per_request AS (
    SELECT
        run_id,
        request_index,
        min(t_ns) FILTER (WHERE content_delta <> '') AS t_first_content_ns,
        max(t_ns) FILTER (WHERE content_delta <> '') AS t_last_content_ns,
        count(*) FILTER (WHERE content_delta <> '') AS content_chunks,
        count(*) FILTER (WHERE reasoning_delta <> '') AS reasoning_chunks,
        max(usage_prompt_tokens) AS usage_prompt_tokens,
        max(usage_completion_tokens) AS usage_completion_tokens,
        max(usage_cached_tokens) AS usage_cached_tokens,
        last_value(finish_reason ORDER BY seq) FILTER (WHERE finish_reason IS NOT NULL)
            AS finish_reason,
        ordered_concat(content_delta, seq) AS content,
        count(*) FILTER (WHERE parse_error IS NOT NULL) AS parse_errors,
        first_value(parse_error ORDER BY seq) FILTER (WHERE parse_error IS NOT NULL)
            AS first_parse_error,
        count(*) AS events
    FROM events
    GROUP BY run_id, request_index
)
SELECT
    r.run_id,
    r.request_index,
    r.kind,
    r.replica,
    r.outcome,
    r.http_status,
    r.error,
    r.canary,
    r.prompt_tokens_target,
    r.prompt_tokens_calibrated,
    r.max_tokens,
    r.t_intended_ns,
    r.t_sent_ns,
    r.t_first_byte_ns,
    e.t_first_content_ns,
    e.t_last_content_ns,
    r.t_done_ns,
    coalesce(e.content_chunks, 0) AS content_chunks,
    coalesce(e.reasoning_chunks, 0) AS reasoning_chunks,
    e.usage_prompt_tokens,
    e.usage_completion_tokens,
    e.usage_cached_tokens,
    e.finish_reason,
    coalesce(e.content, '') AS content,
    coalesce(e.parse_errors, 0) AS parse_errors,
    e.first_parse_error,
    coalesce(e.events, 0) AS events
FROM requests r
LEFT JOIN per_request e
    ON e.run_id = r.run_id AND e.request_index = r.request_index
