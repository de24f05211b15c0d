-- spec_decode: speculative-decoding counters of each replica over the run, from its
-- Prometheus scrapes (vLLM names):
--   drafts          = delta of vllm:spec_decode_num_drafts_total
--   draft_tokens    = delta of vllm:spec_decode_num_draft_tokens_total
--   accepted_tokens = delta of vllm:spec_decode_num_accepted_tokens_total
-- each delta = value at the replica's last scrape (phase 'after') minus its first (phase
-- 'before'), label sets summed per scrape;
--   acceptance_rate      = accepted_tokens / draft_tokens (share of proposed tokens accepted);
--   mean_accepted_length = 1 + accepted_tokens / drafts (vLLM's "mean acceptance length":
--                          tokens emitted per draft step, the accepted draft tokens plus the
--                          one token the target model always produces).
-- One row per replica of every run (from run.json topology); NULL where a counter is absent
-- (no speculative decoding, or a server that does not export it) or a divisor is zero.
-- A negative delta means the counter reset: see the restarts view.
CREATE VIEW spec_decode AS
WITH replicas AS (
    SELECT run_id, arm, cell_id, unnest(range(0, replicas)) AS replica
    FROM runs
),
samples AS (
    SELECT run_id, replica, t_ns, metric, sum(value) AS value
    FROM scrapes
    WHERE metric IN (
        'vllm:spec_decode_num_drafts_total',
        'vllm:spec_decode_num_draft_tokens_total',
        'vllm:spec_decode_num_accepted_tokens_total'
    )
    GROUP BY run_id, replica, t_ns, metric
),
deltas AS (
    SELECT
        run_id,
        replica,
        metric,
        last_value(value ORDER BY t_ns) - first_value(value ORDER BY t_ns) AS delta
    FROM samples
    GROUP BY run_id, replica, metric
),
wide AS (
    SELECT
        run_id,
        replica,
        max(delta) FILTER (WHERE metric = 'vllm:spec_decode_num_drafts_total') AS drafts,
        max(delta) FILTER (WHERE metric = 'vllm:spec_decode_num_draft_tokens_total')
            AS draft_tokens,
        max(delta) FILTER (WHERE metric = 'vllm:spec_decode_num_accepted_tokens_total')
            AS accepted_tokens
    FROM deltas
    GROUP BY run_id, replica
)
SELECT
    r.run_id,
    r.arm,
    r.cell_id,
    r.replica,
    w.drafts,
    w.draft_tokens,
    w.accepted_tokens,
    w.accepted_tokens / nullif(w.draft_tokens, 0) AS acceptance_rate,
    1 + w.accepted_tokens / nullif(w.drafts, 0) AS mean_accepted_length
FROM replicas r
LEFT JOIN wide w ON w.run_id = r.run_id AND w.replica = r.replica
