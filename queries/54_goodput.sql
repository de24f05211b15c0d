-- goodput: per run and window, the measured requests that attained the SLOs their run is
-- judged by (slo_attainment; run_slos per workload class), their share with its exact Clopper-Pearson 95% interval, and goodput:
-- attained requests, and their usage completion tokens, per second of the run's wall span.
-- The span is aggregate_throughput's (scope 'run', the same window): from the window's first
-- request start to its last stream completion, failed requests included, so goodput and
-- aggregate throughput divide by the same seconds. Windows as in cell_stats: `all` (every
-- measured request) and `after_first_wave` (without the first wave), each over its own span.
-- A failed request is in the denominator and never attained. Functional cells (class
-- `functional`) have no row: they check tools and formats, not service. With no SLO given the view is
-- empty (docs/artifact.md "SLOs and goodput"); across repeats, across_runs gives goodput's
-- mean with its t interval over runs.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the manifest cell (runs.cell_id).
--   window (-): `all` (every measured request) or `after_first_wave`.
--   slos (-): the SLOs the run is judged by (run_slos), as text in catalogue order
--       (`ttft_ms<=2000, tpot_ms<=50`).
--   requests (requests): measured requests in the window, whatever their outcome.
--   succeeded (requests): of them, those with outcome 'ok'.
--   attained (requests): of them, those that succeeded and met every SLO.
--   attained_share (fraction): attained / requests; NULL without requests.
--   share_ci95_low (fraction): the Clopper-Pearson 95% lower bound of attained_share (0 when
--       none attained); NULL without requests.
--   share_ci95_high (fraction): its upper bound (1 when all attained); NULL without requests.
--   attained_tokens (tokens): sum of the usage completion tokens of the attained requests: 0
--       when none attained, NULL when some did but none of them reported usage.
--   span_s (s): the window's wall span (aggregate_throughput.span_s).
--   goodput_rps (requests/s): attained / span_s; NULL without a span or when it is 0.
--   goodput_tps (tok/s): attained_tokens / span_s (0 when none attained); NULL without
--       tokens or span.
--   output_tps (tok/s): the window's aggregate output throughput (aggregate_throughput), for
--       comparison: goodput_tps counts only the attained requests' tokens.
CREATE VIEW goodput AS
WITH m AS (
    SELECT
        run_id,
        outcome,
        completion_tokens,
        attained,
        unnest(['all', 'after_first_wave']) AS window,
        unnest([true, NOT first_wave]) AS in_window
    FROM slo_attainment
),
counted AS (
    SELECT
        run_id,
        window,
        count(*) FILTER (WHERE in_window) AS requests,
        count(*) FILTER (WHERE in_window AND outcome = 'ok') AS succeeded,
        count(*) FILTER (WHERE in_window AND attained) AS attained,
        CASE
            WHEN count(*) FILTER (WHERE in_window AND attained) = 0 THEN 0
            ELSE sum(completion_tokens) FILTER (WHERE in_window AND attained)
        END AS attained_tokens
    FROM m
    GROUP BY run_id, window
),
texts AS (
    SELECT run_id, string_agg(slo, ', ' ORDER BY metric_order, turn_first) AS slos
    FROM run_slos
    GROUP BY run_id
)
SELECT
    c.run_id,
    ru.arm,
    ru.cell_id,
    c.window,
    t.slos,
    c.requests,
    c.succeeded,
    c.attained,
    CAST(c.attained AS DOUBLE) / CAST(nullif(c.requests, 0) AS DOUBLE) AS attained_share,
    clopper_pearson_low(c.attained, c.requests) AS share_ci95_low,
    clopper_pearson_high(c.attained, c.requests) AS share_ci95_high,
    c.attained_tokens,
    a.span_s,
    CAST(c.attained AS DOUBLE) / nullif(a.span_s, 0) AS goodput_rps,
    CAST(c.attained_tokens AS DOUBLE) / nullif(a.span_s, 0) AS goodput_tps,
    a.output_tps
FROM counted c
JOIN texts t ON t.run_id = c.run_id
JOIN runs ru ON ru.run_id = c.run_id
JOIN aggregate_throughput a
    ON a.run_id = c.run_id AND a.window = c.window AND a.scope = 'run'
-- A functional cell checks tools and formats, not service: its tool-call replies are no SLO
-- misses, and it counts in no attainment or goodput (the class as the headline rules name it).
WHERE ru.class <> 'functional'
