-- spec_decode_positions: accepted draft tokens per draft position of each replica over the
-- run (vLLM's and llama.cpp's `..._accepted_tokens_per_pos_total{position=}`), the increase
-- as counter_increases computes it: a position's series appears only once it is non-zero,
-- so one missing from the first scrape counts from 0. One row per position found.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the manifest cell (runs.cell_id).
--   replica (-): the replica whose `/metrics` was scraped.
--   runtime (-): the arm's runtime (runs.runtime).
--   metric_dialect (-): whose metric names the series follows (server_metric_names).
--   position (-): 0-based draft position (the `position` label); NULL when the series has no
--       such label.
--   accepted_tokens (tokens): tokens accepted at that position (label sets summed).
--   acceptance_rate (fraction): accepted_tokens / spec_decode.drafts (how often a draft step
--       got that far); NULL when the replica's drafts are unknown or 0.
CREATE VIEW spec_decode_positions AS
SELECT
    c.run_id,
    ru.arm,
    ru.cell_id,
    c.replica,
    ru.runtime,
    n.metric_dialect,
    CAST((regexp_match(c.labels, 'position="([0-9]+)"'))[1] AS BIGINT) AS position,
    sum(c.increase) AS accepted_tokens,
    sum(c.increase) / nullif(max(d.drafts), 0) AS acceptance_rate
FROM counter_increases c
JOIN server_metric_names n ON n.metric = c.metric AND n.role = 'spec_accepted_per_position'
JOIN runs ru ON ru.run_id = c.run_id
LEFT JOIN spec_decode d ON d.run_id = c.run_id AND d.replica = c.replica
GROUP BY c.run_id, ru.arm, ru.cell_id, ru.runtime, c.replica, n.metric_dialect,
    CAST((regexp_match(c.labels, 'position="([0-9]+)"'))[1] AS BIGINT)
