-- slo_attainment: per measured request, whether it attained the SLOs its run is judged by
-- (run_slos: the `slos` table's list for the run's workload class, else its default; from
-- `--slo` or the campaign file's `slo` section): it succeeded (outcome 'ok') and every bound
-- that applies to its turn holds for it (a bound scoped to some turns of a session workload,
-- `turns 1+: ttft_ms<=800`, applies to those turns only; a request outside a session is turn
-- 0; a request with no bound for its turn attains when it succeeds). A functional run has
-- no row (it counts in no attainment). A failed request does not attain, whatever its
-- figures: the denominator of every attainment is every measured request. A bound on a metric the request
-- has no value for (TPOT of a one-token reply, TTFT of a request that never streamed) does
-- not hold: attainment needs every bound checked and met. With no SLO given the view is
-- empty (docs/artifact.md "SLOs and goodput").
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the manifest cell (runs.cell_id).
--   replica (-): the replica the request went to (requests.replica).
--   request_index (-): the request within the run (requests.request_index).
--   first_wave (-): the request is in the run's first wave (request_figures.first_wave); the
--       `after_first_wave` window leaves it out.
--   outcome (-): how the request ended (requests.outcome): `ok`, or the failure.
--   succeeded (-): outcome = 'ok'.
--   completion_tokens (tokens): the API usage completion tokens; NULL without usage.
--   session_id (-): a session workload's session (request_figures.session_id); NULL
--       otherwise.
--   turn (-): its turn (request_figures.turn); NULL otherwise.
--   slos (count): the SLOs checked: the run's rows of run_slos that apply to the turn.
--   met (-): per SLO, keyed by its metric, whether the request's value meets the bound
--       (`met['ttft_ms']`); false when the request has no value for the metric; NULL when
--       no bound applies to its turn.
--   missed (-): the SLOs (as text, e.g. `ttft_ms<=2000`) whose bound did not hold, in
--       catalogue order; empty when every bound held.
--   all_met (-): every bound that applies held (whatever the outcome); true when none
--       applies.
--   attained (-): succeeded and all_met: the request counts toward goodput.
CREATE VIEW slo_attainment AS
WITH valued AS (
    SELECT
        f.run_id,
        f.request_index,
        s.slo,
        s.metric,
        s.metric_order,
        s.op,
        s.bound,
        CASE s.metric
            WHEN 'ttft_ms' THEN f.ttft_ms
            WHEN 'effective_prefill_tps' THEN f.effective_prefill_tps
            WHEN 'decode_tps' THEN f.decode_tps
            WHEN 'tpot_ms' THEN f.tpot_ms
            WHEN 'itl_ms' THEN f.itl_ms
            WHEN 'e2e_ms' THEN f.e2e_ms
        END AS value
    FROM request_figures f
    JOIN run_slos s
        ON s.run_id = f.run_id
        AND coalesce(f.turn, 0) >= s.turn_first
        AND (s.turn_last IS NULL OR coalesce(f.turn, 0) <= s.turn_last)
),
checks AS (
    SELECT
        run_id,
        request_index,
        slo,
        metric,
        metric_order,
        coalesce(CASE WHEN op = '<=' THEN value <= bound ELSE value >= bound END, false)
            AS met
    FROM valued
),
per_request AS (
    SELECT
        run_id,
        request_index,
        count(*) AS slos,
        map(array_agg(metric ORDER BY metric_order), array_agg(met ORDER BY metric_order)) AS met,
        coalesce(
            array_agg(slo ORDER BY metric_order) FILTER (WHERE NOT met),
            make_array()
        ) AS missed,
        bool_and(met) AS all_met
    FROM checks
    GROUP BY run_id, request_index
),
judged AS (
    SELECT DISTINCT run_id FROM run_slos
)
SELECT
    f.run_id,
    ru.arm,
    ru.cell_id,
    f.replica,
    f.request_index,
    f.first_wave,
    f.outcome,
    f.outcome = 'ok' AS succeeded,
    f.completion_tokens,
    f.session_id,
    f.turn,
    coalesce(p.slos, 0) AS slos,
    p.met,
    coalesce(p.missed, make_array()) AS missed,
    coalesce(p.all_met, true) AS all_met,
    f.outcome = 'ok' AND coalesce(p.all_met, true) AS attained
FROM request_figures f
JOIN judged j ON j.run_id = f.run_id
LEFT JOIN per_request p ON p.run_id = f.run_id AND p.request_index = f.request_index
JOIN runs ru ON ru.run_id = f.run_id
