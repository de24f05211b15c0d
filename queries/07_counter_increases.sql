-- counter_increases: how much every monotonic series of every replica grew over the run
-- (counter_steps summed), one row per (run, replica, metric, labels).
--   increase  the growth over the run, as Prometheus' increase() counts it;
--   resets    how many times the series fell between two scrapes;
--   first_t_ns, last_t_ns, samples   where the series was seen.
CREATE VIEW counter_increases AS
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
FROM counter_steps
GROUP BY run_id, replica, metric, labels
