-- counter_increases: how much every monotonic series of every replica grew over the run
-- (counter_steps summed), one row per (run, replica, metric, labels).
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   replica (-): the replica whose `/metrics` was scraped.
--   metric (-): the series' metric name as exposed (scrapes.metric).
--   labels (-): the series' labels as canonical text (scrapes.labels; '' when none).
--   increase (-): the growth over the run, in the series' own unit, as Prometheus' increase()
--       counts it: the sum of its counter_steps.step.
--   resets (count): how many times the series fell between two scrapes.
--   first_t_ns (ns): the first scrape that carried the series.
--   last_t_ns (ns): the last scrape that carried the series.
--   samples (count): the scrapes that carried the series.
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
