-- The cell_stats definition before windows and percentile intervals (queries/20_request_figures.sql
-- and queries/40_cell_stats.sql as of commit 034db14), renamed: the baseline bench/bench_sql.py
-- times the current cell_stats and percentile_ci against in the same run.
CREATE VIEW baseline_request_figures AS
WITH t AS (
    SELECT
        run_id,
        request_index,
        replica,
        outcome,
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
        finish_reason
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
    t.finish_reason
FROM t
JOIN runs ru ON ru.run_id = t.run_id
;
CREATE VIEW baseline_cell_stats AS
WITH metrics (metric_order, metric, unit) AS (
    VALUES
        (1, 'ttft_ms', 'ms'),
        (2, 'effective_prefill_tps', 'tok/s'),
        (3, 'decode_tps', 'tok/s'),
        (4, 'tpot_ms', 'ms'),
        (5, 'itl_ms', 'ms'),
        (6, 'e2e_ms', 'ms')
),
unpivoted AS (
    SELECT
        f.run_id,
        f.outcome,
        unnest([1, 2, 3, 4, 5, 6]) AS metric_order,
        unnest([f.ttft_ms, f.effective_prefill_tps, f.decode_tps, f.tpot_ms, f.itl_ms, f.e2e_ms])
            AS metric_value
    FROM baseline_request_figures f
),
long AS (
    SELECT
        run_id,
        outcome,
        metric_order,
        CASE WHEN outcome = 'ok' THEN metric_value END AS value
    FROM unpivoted
),
stats AS (
    SELECT
        run_id,
        metric_order,
        count(value) AS n,
        count(*) FILTER (WHERE outcome = 'ok') - count(value) AS n_null,
        count(*) FILTER (WHERE outcome <> 'ok') AS failed,
        avg(value) AS mean,
        stddev(value) AS sd,
        ci95_low(value) AS ci95_low,
        ci95_high(value) AS ci95_high,
        min(value) AS min,
        nearest_rank(value, 0.25) AS p25,
        nearest_rank(value, 0.50) AS p50,
        nearest_rank(value, 0.75) AS p75,
        nearest_rank(value, 0.90) AS p90,
        nearest_rank(value, 0.95) AS p95,
        nearest_rank(value, 0.99) AS p99,
        max(value) AS max
    FROM long
    GROUP BY run_id, metric_order
)
SELECT
    s.run_id,
    ru.arm,
    ru.cell_id,
    m.metric_order,
    m.metric,
    m.unit,
    s.n,
    s.n_null,
    s.failed,
    s.mean,
    s.sd,
    s.ci95_low,
    s.ci95_high,
    s.min,
    s.p25,
    s.p50,
    s.p75,
    s.p90,
    s.p95,
    s.p99,
    s.max
FROM stats s
JOIN metrics m ON m.metric_order = s.metric_order
JOIN runs ru ON ru.run_id = s.run_id
;
