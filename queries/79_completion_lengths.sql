-- completion_lengths: per run, the median, mean and total usage completion tokens of its
-- measured requests that succeeded, the median by nearest rank (the value at rank ceil(0.5 * n) of the sorted counts, as
-- the manifest's percentile method says): what the output-length realization check compares
-- between arms, since arms that stop at different lengths are not measuring the same decode.
-- Columns:
--   run_id (-): the artifact (runs.run_id); a run without a successful measured request has
--       no row.
--   completion_tokens_p50 (tokens): the median usage completion tokens of the successful
--       measured requests that reported usage; NULL when none did.
--   completion_tokens_mean (tokens): their mean; NULL when none reported usage.
--   completion_tokens_total (tokens): their sum: the tokens the run's throughput counts (a
--       long tail of replies moves it when the median does not); NULL when none reported
--       usage.
CREATE VIEW completion_lengths AS
SELECT
    run_id,
    nearest_rank(completion_tokens, 0.5) AS completion_tokens_p50,
    avg(completion_tokens) AS completion_tokens_mean,
    CAST(sum(completion_tokens) AS DOUBLE) AS completion_tokens_total
FROM request_metrics
WHERE outcome = 'ok'
GROUP BY run_id
