-- turn_stats: a session workload's figures by turn index, per run: how TTFT, the history
-- carried and the cache's share move as conversations grow (session_turns grouped by turn).
-- Statistics are over the turns that succeeded (outcome 'ok'); percentiles by nearest rank.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the cell (runs.cell_id).
--   turn (-): 0-based turn index.
--   sessions (count): sessions with this turn in the plan (a row in requests).
--   ok (count): of them, turns that succeeded.
--   cut (count): turns never sent because an earlier turn of the session failed, or the run
--       stopped (outcome `cancelled`).
--   history_tokens_mean (tokens): mean history carried by the successful turns.
--   prompt_tokens_mean (tokens): mean usage prompt tokens.
--   cached_tokens_mean (tokens): mean cached tokens (session_turns.cached_tokens); NULL when
--       no turn reported them.
--   cached_share (fraction): summed cached tokens over summed prompt tokens, among turns
--       that reported both.
--   ttft_p50_ms (ms): median TTFT (nearest rank).
--   ttft_p90_ms (ms): 90th percentile TTFT (nearest rank).
--   ttft_max_ms (ms): the slowest TTFT.
--   think_mean_ms (ms): mean measured think time before the turn; NULL for turn 0.
--   contaminated (count): turns whose reply carried another session's marker.
CREATE VIEW turn_stats AS
SELECT
    run_id,
    arm,
    cell_id,
    turn,
    count(*) AS sessions,
    count(*) FILTER (WHERE outcome = 'ok') AS ok,
    count(*) FILTER (WHERE outcome = 'cancelled') AS cut,
    avg(CAST(history_tokens AS DOUBLE)) FILTER (WHERE outcome = 'ok') AS history_tokens_mean,
    avg(CAST(prompt_tokens AS DOUBLE)) FILTER (WHERE outcome = 'ok') AS prompt_tokens_mean,
    avg(CAST(cached_tokens AS DOUBLE)) FILTER (WHERE outcome = 'ok') AS cached_tokens_mean,
    CAST(sum(cached_tokens) FILTER (WHERE outcome = 'ok' AND prompt_tokens IS NOT NULL) AS DOUBLE)
        / CAST(nullif(sum(prompt_tokens) FILTER (
            WHERE outcome = 'ok' AND cached_tokens IS NOT NULL
        ), 0) AS DOUBLE) AS cached_share,
    nearest_rank(ttft_ms, 0.5) FILTER (WHERE outcome = 'ok') AS ttft_p50_ms,
    nearest_rank(ttft_ms, 0.9) FILTER (WHERE outcome = 'ok') AS ttft_p90_ms,
    max(ttft_ms) FILTER (WHERE outcome = 'ok') AS ttft_max_ms,
    avg(think_ms) FILTER (WHERE outcome = 'ok') AS think_mean_ms,
    count(*) FILTER (WHERE foreign_canary_count > 0) AS contaminated
FROM session_turns
GROUP BY run_id, arm, cell_id, turn
