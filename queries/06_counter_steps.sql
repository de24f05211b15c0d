-- counter_increases: how much every monotonic series of every replica grew over the run, as
-- Prometheus' increase() counts it, one row per (run, replica, metric, labels). A series is
-- monotonic when its family's TYPE is counter (or it is a histogram/summary `_count` or
-- `_bucket`), when it has no TYPE and its name ends in `_total`, or when
-- server_metric_names lists it as a counter. Between two consecutive scrapes the increase is the difference, or, when the
-- value fell (the server restarted and its counters began again), the new value; a series
-- missing from the replica's first scrape counts from 0 (llama.cpp and vLLM add labelled
-- series only once they are non-zero).
--   increase  the growth over the run;
--   resets    how many times the series fell between two scrapes (a restart, see restarts);
--   first_t_ns, last_t_ns, samples   where the series was seen.
CREATE VIEW counter_increases AS
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
    WHERE s.metric_type = 'counter'
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
        m.previous IS NOT NULL AND m.value < m.previous AS fell
    FROM monotonic m
    JOIN first_scrape f ON f.run_id = m.run_id AND f.replica = m.replica
)
SELECT
    run_id,
    replica,
    metric,
    labels,
    sum(step) AS increase,
    count(*) FILTER (WHERE fell) AS resets,
    min(t_ns) AS first_t_ns,
    max(t_ns) AS last_t_ns,
    count(*) AS samples
FROM steps
GROUP BY run_id, replica, metric, labels
