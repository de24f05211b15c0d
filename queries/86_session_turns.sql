-- session_turns: one row per measured request of a session workload (requests.session_id
-- set): where it stands in its conversation, what of its prompt the server's prefix cache
-- served, how long it waited, and its canary check.
-- A turn k carries the session's k earlier user messages and the assistant's actual replies
-- (history_tokens of them, by the previous turn's usage); its TTFT includes the prefill of
-- whatever of that history the cache did not hold. Cached tokens are the API's usage
-- (`prompt_tokens_details.cached_tokens`), else llama.cpp's own `timings.cache_n`
-- (server_timings), else NULL. A turn is due its think time after the previous turn's last
-- byte (t_intended_ns), so think_ms is the plan's think time; a turn whose body was built
-- late, or a client that sent it late, shows in client_queue_ms instead.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the cell (runs.cell_id).
--   session_id (-): the session within the run (requests.session_id).
--   turn (-): 0-based turn within the session (requests.turn).
--   request_index (-): the request (requests.request_index).
--   replica (-): the replica it went to (requests.replica).
--   outcome (-): how it ended (requests.outcome); `cancelled` for a turn never sent because
--       an earlier turn of its session failed (requests.error says which).
--   history_tokens (tokens): tokens of conversation carried before this turn's new message
--       (requests.history_tokens: the previous prompt and completion tokens, less its
--       reasoning tokens when the history leaves the reasoning out); 0 for a first turn.
--   prompt_tokens (tokens): the API usage prompt tokens; NULL without usage.
--   completion_tokens (tokens): the API usage completion tokens; NULL without usage.
--   cached_tokens (tokens): prompt tokens the server served from its prefix cache (usage,
--       else timings.cache_n); NULL when the server reported neither.
--   cached_source (-): 'usage' or 'server_timings', where cached_tokens came from; NULL
--       with it.
--   cached_share (fraction): cached_tokens / prompt_tokens; NULL when either is.
--   ttft_ms (ms): request_metrics.ttft_ms; NULL when no content arrived.
--   e2e_ms (ms): request_metrics.e2e_ms; NULL when never sent.
--   think_ms (ms): the previous turn's stream completion (t_done_ns) to this turn's
--       intended send (t_intended_ns): the planned think time; NULL for a first turn.
--   client_queue_ms (ms): t_sent - t_intended (request_metrics.client_queue_ms): how late
--       the client sent the turn after it was due.
--   canary_ok (-): request_canaries.canary_ok: own canary present, no other session's marker.
--   foreign_canary_count (count): markers of other requests outside this session found in
--       the reply (request_canaries): contamination.
--   history_canaries (-): its own session's earlier markers repeated in the reply
--       (request_canaries): quoting its conversation; NULL when none.
CREATE VIEW session_turns AS
WITH turns AS (
    SELECT run_id, request_index, session_id, turn, history_tokens, t_intended_ns, t_done_ns,
           replica, outcome
    FROM requests
    WHERE kind = 'measured' AND session_id IS NOT NULL
),
previous AS (
    SELECT
        run_id,
        request_index,
        lag(t_done_ns) OVER (PARTITION BY run_id, session_id ORDER BY turn) AS t_prev_done_ns
    FROM turns
)
SELECT
    t.run_id,
    ru.arm,
    ru.cell_id,
    t.session_id,
    t.turn,
    t.request_index,
    t.replica,
    t.outcome,
    t.history_tokens,
    m.prompt_tokens,
    m.completion_tokens,
    coalesce(rt.usage_cached_tokens, st.cached_tokens) AS cached_tokens,
    CASE
        WHEN rt.usage_cached_tokens IS NOT NULL THEN 'usage'
        WHEN st.cached_tokens IS NOT NULL THEN 'server_timings'
    END AS cached_source,
    CAST(coalesce(rt.usage_cached_tokens, st.cached_tokens) AS DOUBLE)
        / CAST(nullif(m.prompt_tokens, 0) AS DOUBLE) AS cached_share,
    m.ttft_ms,
    m.e2e_ms,
    CAST(t.t_intended_ns - p.t_prev_done_ns AS DOUBLE) / 1e6 AS think_ms,
    m.client_queue_ms,
    m.canary_ok,
    coalesce(m.foreign_canary_count, 0) AS foreign_canary_count,
    c.history_canaries
FROM turns t
JOIN runs ru ON ru.run_id = t.run_id
-- A turn its session never sent (cut by an earlier failure) has no request_metrics row.
LEFT JOIN request_metrics m ON m.run_id = t.run_id AND m.request_index = t.request_index
JOIN request_timing rt ON rt.run_id = t.run_id AND rt.request_index = t.request_index
JOIN previous p ON p.run_id = t.run_id AND p.request_index = t.request_index
LEFT JOIN request_canaries c ON c.run_id = t.run_id AND c.request_index = t.request_index
LEFT JOIN server_timings st ON st.run_id = t.run_id AND st.request_index = t.request_index
