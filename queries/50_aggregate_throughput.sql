-- aggregate_throughput: output tokens per second of the concurrent run, per artifact
-- (scope 'run', replica NULL) and per replica (scope 'replica').
--
-- Definition (manifest `timing_definitions.aggregate_throughput`): "sum of API completion
-- tokens divided by the wall-clock span of the concurrent run": sum of usage completion
-- tokens of the measured requests / (last stream completion t_done_ns - first request start
-- t_sent_ns), all replicas of a data-parallel run together for scope 'run'; per replica, the
-- same over that replica's measured requests. Requests without usage add no tokens
-- (requests_without_usage counts them; succeeded_without_usage those of them that
-- succeeded, which make the token figures incomplete); failed requests still occupy the span.
CREATE VIEW aggregate_throughput AS
WITH m AS (
    SELECT run_id, replica, outcome, t_sent_ns, t_done_ns, usage_completion_tokens
    FROM request_timing
    WHERE kind = 'measured'
),
spans AS (
    SELECT
        run_id,
        'run' AS scope,
        CAST(NULL AS BIGINT) AS replica,
        count(*) AS requests,
        count(*) FILTER (WHERE outcome = 'ok') AS succeeded,
        count(*) FILTER (WHERE usage_completion_tokens IS NULL) AS requests_without_usage,
        count(*) FILTER (WHERE outcome = 'ok' AND usage_completion_tokens IS NULL)
            AS succeeded_without_usage,
        sum(usage_completion_tokens) AS completion_tokens,
        min(t_sent_ns) AS t_first_sent_ns,
        max(t_done_ns) AS t_last_done_ns
    FROM m
    GROUP BY run_id
    UNION ALL
    SELECT
        run_id,
        'replica' AS scope,
        replica,
        count(*) AS requests,
        count(*) FILTER (WHERE outcome = 'ok') AS succeeded,
        count(*) FILTER (WHERE usage_completion_tokens IS NULL) AS requests_without_usage,
        count(*) FILTER (WHERE outcome = 'ok' AND usage_completion_tokens IS NULL)
            AS succeeded_without_usage,
        sum(usage_completion_tokens) AS completion_tokens,
        min(t_sent_ns) AS t_first_sent_ns,
        max(t_done_ns) AS t_last_done_ns
    FROM m
    GROUP BY run_id, replica
)
SELECT
    s.run_id,
    ru.arm,
    ru.cell_id,
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
