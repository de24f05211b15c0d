-- counter_steps: every monotonic series of every replica, scrape by scrape, as Prometheus'
-- increase() counts it: one row per (run, replica, metric, labels, scrape). A series is
-- monotonic when its family's TYPE is counter (or it is a histogram/summary `_count` or
-- `_bucket`), when it has no TYPE and its name ends in `_total`, or when
-- server_metric_names lists it as a counter; a counter family's `_created` series (a creation
-- timestamp, not a count) is not one.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   replica (-): the replica whose `/metrics` was scraped (scrapes.replica).
--   metric (-): the series' metric name as exposed (scrapes.metric).
--   labels (-): the series' labels as canonical text (scrapes.labels; '' when none).
--   t_ns (ns): when the scrape response was received (scrapes.t_ns).
--   step (-): the growth since the series' previous scrape, in the series' own unit: the
--       difference, or, when the value fell (the server restarted and began counting again),
--       the new value; at a series' first scrape 0, or its value when the replica's first
--       scrape did not carry it (llama.cpp and vLLM add labelled series only once they are
--       non-zero: an absent series counts from 0).
--   fell (-): the value fell below the previous scrape's; false at the series' first scrape.
--   was_positive (-): the previous scrape's value was above 0 (a series that can be seen
--       fall); false at the series' first scrape.
CREATE VIEW counter_steps AS
WITH first_scrape AS (
    SELECT run_id, replica, min(t_ns) AS t0 FROM scrapes GROUP BY run_id, replica
),
monotonic AS (
    SELECT
        s.run_id,
        s.replica,
        s.metric,
        s.labels,
        s.t_ns,
        s.value,
        lag(s.value) OVER (
            PARTITION BY s.run_id, s.replica, s.metric, s.labels ORDER BY s.t_ns
        ) AS previous
    FROM scrapes s
    WHERE (s.metric_type = 'counter' AND s.metric NOT LIKE '%\_created' ESCAPE '\')
       OR (s.metric_type IN ('histogram', 'summary')
           AND (s.metric LIKE '%\_count' ESCAPE '\' OR s.metric LIKE '%\_bucket' ESCAPE '\'))
       OR (s.metric_type IN ('', 'untyped') AND s.metric LIKE '%\_total' ESCAPE '\')
       OR s.metric IN (
           SELECT metric FROM server_metric_names
           WHERE role IN ('spec_drafts', 'spec_draft_tokens', 'spec_accepted_tokens',
                          'spec_accepted_per_position')
       )
),
steps AS (
    SELECT
        m.run_id,
        m.replica,
        m.metric,
        m.labels,
        m.t_ns,
        CASE
            WHEN m.previous IS NULL THEN CASE WHEN m.t_ns > f.t0 THEN m.value ELSE 0 END
            WHEN m.value >= m.previous THEN m.value - m.previous
            ELSE m.value
        END AS step,
        m.previous IS NOT NULL AND m.value < m.previous AS fell,
        coalesce(m.previous, 0) > 0 AS was_positive
    FROM monotonic m
    JOIN first_scrape f ON f.run_id = m.run_id AND f.replica = m.replica
)
SELECT run_id, replica, metric, labels, t_ns, step, fell, was_positive
FROM steps
