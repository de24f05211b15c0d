-- request_timing: one row per request (every kind), the raw instants the metrics are built
-- from, joined from `requests` and that request's `events`.
--
-- Definitions (workload manifest `timing_definitions`, docs/artifact.md "Deriving the
-- metrics") are given with the columns below: request start = t_sent_ns, first content =
-- t_first_content_ns, last content = t_last_content_ns, stream completion = t_done_ns. A
-- request without events has NULL content instants, usage, finish reason and
-- first_parse_error, '' content and 0 counts.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   request_index (-): the request within the run (requests.request_index).
--   kind (-): `measured`, `warmup` or `calibration` (requests.kind).
--   replica (-): the replica the request went to (requests.replica).
--   outcome (-): how the request ended (requests.outcome): `ok`, or the failure.
--   http_status (-): the HTTP status code (requests.http_status); NULL if no response head
--       arrived.
--   error (-): error text of a non-ok outcome (requests.error); NULL when ok.
--   canary (-): the canary the reply must echo (requests.canary); NULL when the cell has no
--       canaries.
--   prompt_tokens_target (tokens): the cell's prompt token target
--       (requests.prompt_tokens_target).
--   prompt_tokens_calibrated (tokens): the client's estimate of this prompt's tokens from
--       calibration (requests.prompt_tokens_calibrated); NULL when it has none.
--   max_tokens (tokens): the token ceiling sent (requests.max_tokens); NULL if none was sent.
--   t_intended_ns (ns): when the schedule meant the request to start (requests.t_intended_ns;
--       kept so client-side queueing, t_sent_ns - t_intended_ns, is visible).
--   t_sent_ns (ns): request start: when the request bytes were written to the socket
--       (requests.t_sent_ns); NULL if never sent.
--   t_first_byte_ns (ns): when the first response bytes arrived (requests.t_first_byte_ns);
--       NULL if none did.
--   t_first_content_ns (ns): first content: receive time of the request's first event with a
--       non-empty content delta ("request start through first non-empty streamed content
--       delta"): a role-only first chunk (content NULL or '') and reasoning deltas do not
--       count; NULL when no content arrived.
--   t_last_content_ns (ns): last content: receive time of the last event with a non-empty
--       content delta; NULL when no content arrived.
--   t_done_ns (ns): stream completion: when the stream ended (last byte), or the error or
--       cancellation that ended the request (requests.t_done_ns).
--   content_chunks (chunks): events with a non-empty content delta (chunks are a diagnostic:
--       one chunk can carry several tokens under speculative decoding, so token figures use
--       usage).
--   reasoning_chunks (chunks): events with a non-empty reasoning delta.
--   usage_prompt_tokens (tokens): the server-reported prompt tokens of the event that carries
--       usage (events.usage_prompt_tokens); NULL when no event did.
--   usage_completion_tokens (tokens): the server-reported completion tokens, likewise
--       (events.usage_completion_tokens); NULL when no event carried them.
--   usage_cached_tokens (tokens): the server-reported prompt tokens served from cache,
--       likewise (events.usage_cached_tokens); NULL when no event carried them.
--   finish_reason (-): the last non-null finish reason of the stream in `seq` order; NULL
--       when none.
--   content (-): every content delta concatenated in `seq` order ('' when none;
--       ordered_concat(x, k) is string_agg(x, '' ORDER BY k)).
--   parse_errors (events): events whose data could not be parsed or recorded
--       (events.parse_error set: invalid JSON or UTF-8, not an object, a second choice's
--       chunk, a content part of an unknown type): parser corruption, whatever the outcome.
--   first_parse_error (-): the first of them in `seq` order (its events.parse_error); NULL
--       when none.
--   events (events): the request's rows in `events`.
--   session_id (-): a session workload's session (requests.session_id); NULL otherwise.
--   turn (-): its turn within the session (requests.turn); NULL otherwise.
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
    coalesce(e.events, 0) AS events,
    r.session_id,
    r.turn
FROM requests r
LEFT JOIN per_request e
    ON e.run_id = r.run_id AND e.request_index = r.request_index
