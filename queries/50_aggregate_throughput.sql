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
