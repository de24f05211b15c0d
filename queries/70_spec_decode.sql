-- spec_decode: speculative-decoding acceptance of each replica over the run, from its
-- Prometheus scrapes, under each runtime's own names (server_metric_names: vLLM, SGLang,
-- llama.cpp). Each counter's increase is as counter_increases computes it (label sets summed;
-- a series absent from the first scrape counts from 0; a fall between two scrapes counts from
-- 0 again).
-- A runtime that exports only gauges (SGLang's spec_accept_rate / spec_accept_length) gives
-- their mean over the scrapes taken during the run instead (`source` = 'gauges'; the counter
-- columns are then NULL); `source` = 'counters' otherwise.
-- One row per replica of every run (from run.json topology); metric_dialect, source and the
-- figures are NULL when no metric name was found (no speculative decoding, or a server that
-- does not export it), a ratio also when its divisor is zero and no gauge stands in. Per
-- draft position: spec_decode_positions.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the manifest cell (runs.cell_id).
--   replica (-): the replica, 0 to runs.replicas - 1.
--   runtime (-): the arm's runtime (runs.runtime).
--   metric_dialect (-): whose metric names were found (server_metric_names: a simulator or
--       fork may export another runtime's names); NULL when none.
--   source (-): 'counters' when any of the three counters was found, else 'gauges' when a
--       gauge was; NULL when neither.
--   drafts (count): increase of the runtime's draft-steps counter over the run; NULL when it
--       was not found.
--   draft_tokens (tokens): increase of its proposed-draft-tokens counter; NULL when it was not
--       found.
--   accepted_tokens (tokens): increase of its accepted-draft-tokens counter; NULL when it was
--       not found.
--   acceptance_rate (fraction): accepted_tokens / draft_tokens (share of proposed tokens
--       accepted), else the mean of the spec_accept_rate gauge during the run; NULL when
--       neither gives a value.
--   mean_accepted_length (tokens): 1 + accepted_tokens / drafts (vLLM's "mean acceptance
--       length": tokens emitted per draft step, the accepted draft tokens plus the one token
--       the target model always produces), else the mean of the spec_accept_length gauge
--       during the run; NULL when neither gives a value.
CREATE VIEW spec_decode AS
WITH replicas AS (
    SELECT run_id, arm, cell_id, runtime, unnest(range(0, replicas)) AS replica
    FROM runs
),
counted AS (
    SELECT c.run_id, c.replica, n.metric_dialect, n.role, sum(c.increase) AS increase
    FROM counter_increases c
    JOIN server_metric_names n ON n.metric = c.metric
    WHERE n.role IN ('spec_drafts', 'spec_draft_tokens', 'spec_accepted_tokens')
    GROUP BY c.run_id, c.replica, n.metric_dialect, n.role
),
counters AS (
    SELECT
        run_id,
        replica,
        max(metric_dialect) AS metric_dialect,
        max(increase) FILTER (WHERE role = 'spec_drafts') AS drafts,
        max(increase) FILTER (WHERE role = 'spec_draft_tokens') AS draft_tokens,
        max(increase) FILTER (WHERE role = 'spec_accepted_tokens') AS accepted_tokens
    FROM counted
    GROUP BY run_id, replica
),
gauges AS (
    SELECT
        s.run_id,
        s.replica,
        max(n.metric_dialect) AS metric_dialect,
        avg(s.value) FILTER (WHERE n.role = 'spec_accept_rate') AS accept_rate,
        avg(s.value) FILTER (WHERE n.role = 'spec_accept_length') AS accept_length
    FROM scrapes s
    JOIN server_metric_names n ON n.metric = s.metric
    WHERE n.role IN ('spec_accept_rate', 'spec_accept_length') AND s.phase = 'during'
    GROUP BY s.run_id, s.replica
)
SELECT
    r.run_id,
    r.arm,
    r.cell_id,
    r.replica,
    r.runtime,
    coalesce(c.metric_dialect, g.metric_dialect) AS metric_dialect,
    CASE
        WHEN c.run_id IS NOT NULL THEN 'counters'
        WHEN g.run_id IS NOT NULL THEN 'gauges'
    END AS source,
    c.drafts,
    c.draft_tokens,
    c.accepted_tokens,
    coalesce(c.accepted_tokens / nullif(c.draft_tokens, 0), g.accept_rate) AS acceptance_rate,
    coalesce(1 + c.accepted_tokens / nullif(c.drafts, 0), g.accept_length)
        AS mean_accepted_length
FROM replicas r
LEFT JOIN counters c ON c.run_id = r.run_id AND c.replica = r.replica
LEFT JOIN gauges g ON g.run_id = r.run_id AND g.replica = r.replica
