-- aggregate_throughput: output tokens per second of the concurrent run, per artifact
-- (scope 'run', replica NULL) and per replica (scope 'replica'), for each window.
--
-- Definition (manifest `timing_definitions.aggregate_throughput`): "sum of API completion
-- tokens divided by the wall-clock span of the concurrent run": sum of usage completion
-- tokens of the window's measured requests / (their last stream completion t_done_ns - their
-- first request start t_sent_ns), all replicas of a data-parallel run together for scope
-- 'run'; per replica, the same over that replica's requests of the window. Windows as in
-- cell_stats: `all` (every measured request: the plan's figure) and `after_first_wave`
-- (without the first wave, request_figures.first_wave), each over its own span, from its own
-- first send to its own last completion. Requests without usage add no tokens
-- (requests_without_usage counts them; succeeded_without_usage those of them that succeeded,
-- which make the token figures incomplete); failed requests still occupy the span. A window
-- without requests has requests = 0 and NULL span and throughput.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the manifest cell (runs.cell_id).
--   window (-): `all` (every measured request) or `after_first_wave`.
--   scope (-): 'run' (all replicas together) or 'replica' (one replica's requests).
--   replica (-): the replica of a 'replica' row; NULL for scope 'run'.
--   requests (requests): measured requests of the scope in the window, whatever their
--       outcome.
--   succeeded (requests): of them, those with outcome 'ok'.
--   requests_without_usage (requests): of them, those without usage completion tokens
--       (request_figures.completion_tokens NULL).
--   succeeded_without_usage (requests): of those, the ones with outcome 'ok': the token
--       figures are incomplete when this is above 0.
--   completion_tokens (tokens): sum of the usage completion tokens of the window's requests
--       that reported usage, failed ones included; NULL when none did.
--   t_first_sent_ns (ns): the window's first request start (min t_sent_ns); NULL when none
--       was sent.
--   t_last_done_ns (ns): the window's last stream completion (max t_done_ns); NULL without
--       requests.
--   span_s (s): t_last_done_ns - t_first_sent_ns, in seconds; NULL when either is.
--   output_tps (tok/s): completion_tokens / span_s; NULL without tokens or span, or when the
--       span is 0.
CREATE VIEW aggregate_throughput AS
WITH m AS (
    SELECT
        run_id,
        replica,
        outcome,
        t_sent_ns,
        t_done_ns,
        completion_tokens,
        unnest(['all', 'after_first_wave']) AS window,
        unnest([true, NOT first_wave]) AS in_window
    FROM request_figures
),
spans AS (
    SELECT
        run_id,
        window,
        'run' AS scope,
        CAST(NULL AS BIGINT) AS replica,
        count(*) FILTER (WHERE in_window) AS requests,
        count(*) FILTER (WHERE in_window AND outcome = 'ok') AS succeeded,
        count(*) FILTER (WHERE in_window AND completion_tokens IS NULL) AS requests_without_usage,
        count(*) FILTER (WHERE in_window AND outcome = 'ok' AND completion_tokens IS NULL)
            AS succeeded_without_usage,
        sum(completion_tokens) FILTER (WHERE in_window) AS completion_tokens,
        min(t_sent_ns) FILTER (WHERE in_window) AS t_first_sent_ns,
        max(t_done_ns) FILTER (WHERE in_window) AS t_last_done_ns
    FROM m
    GROUP BY run_id, window
    UNION ALL
    SELECT
        run_id,
        window,
        'replica' AS scope,
        replica,
        count(*) FILTER (WHERE in_window) AS requests,
        count(*) FILTER (WHERE in_window AND outcome = 'ok') AS succeeded,
        count(*) FILTER (WHERE in_window AND completion_tokens IS NULL) AS requests_without_usage,
        count(*) FILTER (WHERE in_window AND outcome = 'ok' AND completion_tokens IS NULL)
            AS succeeded_without_usage,
        sum(completion_tokens) FILTER (WHERE in_window) AS completion_tokens,
        min(t_sent_ns) FILTER (WHERE in_window) AS t_first_sent_ns,
        max(t_done_ns) FILTER (WHERE in_window) AS t_last_done_ns
    FROM m
    GROUP BY run_id, window, replica
)
SELECT
    s.run_id,
    ru.arm,
    ru.cell_id,
    s.window,
    s.scope,
    s.replica,
    s.requests,
    s.succeeded,
    s.requests_without_usage,
    s.succeeded_without_usage,
    s.completion_tokens,
    s.t_first_sent_ns,
    s.t_last_done_ns,
    CAST(s.t_last_done_ns - s.t_first_sent_ns AS DOUBLE) / 1e9 AS span_s,
    CAST(s.completion_tokens AS DOUBLE)
        / (CAST(nullif(s.t_last_done_ns - s.t_first_sent_ns, 0) AS DOUBLE) / 1e9)
        AS output_tps
FROM spans s
JOIN runs ru ON ru.run_id = s.run_id
