-- run_slos: per run, the SLOs it is judged by (rows of the `slos` table): its workload
-- class's own list where the campaign gives one (`slo: {"context-curve": [...]}`: a 32K
-- prompt cannot meet a 2 s TTFT by construction), else the default (the rows with no class).
-- A functional run is judged by none: its cells check tools and formats, not service, so
-- they count in no attainment, goodput or frontier. A run whose class has no list of its own
-- while no default is given has no row; with no SLO given the view is empty
-- (docs/artifact.md "SLOs and goodput").
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   class (-): the run's workload class (runs.class).
--   class_slos (-): the SLOs are the class's own list (slos.class = class); false: the
--       default.
--   slo (-): the bound as text, e.g. `ttft_ms<=2000` (slos.slo).
--   metric (-): the metric it bounds (slos.metric).
--   metric_order (-): the metric's place in the catalogue (slos.metric_order).
--   op (-): `<=` or `>=` (slos.op).
--   bound (metric unit): the bound (slos.bound).
--   turn_first (-): the first turn it holds for (slos.turn_first; 0 unless scoped).
--   turn_last (-): the last turn it holds for (slos.turn_last); NULL: every later turn.
CREATE VIEW run_slos AS
WITH own AS (
    SELECT DISTINCT class FROM slos WHERE class IS NOT NULL
),
judged AS (
    SELECT
        ru.run_id,
        ru.class,
        o.class IS NOT NULL AS class_slos,
        o.class AS slo_class
    FROM runs ru
    LEFT JOIN own o ON o.class = ru.class
    WHERE ru.class <> 'functional'
)
SELECT
    j.run_id,
    j.class,
    j.class_slos,
    s.slo,
    s.metric,
    s.metric_order,
    s.op,
    s.bound,
    s.turn_first,
    s.turn_last
FROM judged j
JOIN slos s ON s.class IS NOT DISTINCT FROM j.slo_class
