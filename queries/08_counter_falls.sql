-- counter_falls: per scrape of every replica, how many of its counters fell since the
-- previous scrape, out of those that were above 0 then (counter_steps). A restarted server
-- begins every counter again from 0, so a restart shows as most of them falling at once
-- (`most_fell`); one series falling alone is more likely a gauge its exposition mislabels as
-- a counter.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   replica (-): the replica whose `/metrics` was scraped.
--   t_ns (ns): when the scrape response was received (scrapes.t_ns).
--   positive_before (count): the monotonic series of this scrape (counter_steps) whose
--       previous scrape's value was above 0.
--   fell (count): the series whose value fell below the previous scrape's.
--   most_fell (-): at least one fell and at least half of positive_before did
--       (2 x fell >= positive_before): the mark of a restart.
CREATE VIEW counter_falls AS
SELECT
    run_id,
    replica,
    t_ns,
    count(*) FILTER (WHERE was_positive) AS positive_before,
    count(*) FILTER (WHERE fell) AS fell,
    count(*) FILTER (WHERE fell) > 0
        AND 2 * count(*) FILTER (WHERE fell) >= count(*) FILTER (WHERE was_positive)
        AS most_fell
FROM counter_steps
GROUP BY run_id, replica, t_ns
