-- completion_lengths: per run, the median usage completion tokens of its measured requests
-- that succeeded, by nearest rank (the value at rank ceil(0.5 * n) of the sorted counts, as
-- the manifest's percentile method says): what the output-length realization check compares
-- between arms, since arms that stop at different lengths are not measuring the same decode.
-- Columns:
--   run_id (-): the artifact (runs.run_id); a run without a successful measured request has
--       no row.
--   completion_tokens_p50 (tokens): the median usage completion tokens of the successful
--       measured requests that reported usage; NULL when none did.
CREATE VIEW completion_lengths AS
SELECT
    run_id,
    nearest_rank(completion_tokens, 0.5) AS completion_tokens_p50
FROM request_metrics
WHERE outcome = 'ok'
GROUP BY run_id
