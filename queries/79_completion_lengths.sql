-- completion_lengths: per run, the median usage completion tokens of its measured requests
-- that succeeded (the interpolated median, DataFusion's median()): what the output-length
-- realization check compares between arms, since arms that stop at different lengths are
-- not measuring the same decode.
CREATE VIEW completion_lengths AS
SELECT
    run_id,
    median(CAST(completion_tokens AS DOUBLE)) AS completion_tokens_p50
FROM request_metrics
WHERE outcome = 'ok'
GROUP BY run_id
