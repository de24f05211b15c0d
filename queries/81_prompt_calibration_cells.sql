-- prompt_calibration_cells: prompt calibration per artifact (cell run), over its measured
-- requests that report usage: the target, the min / mean / max actual (usage) prompt tokens
-- and the largest relative error |actual - target| / target (prompt_calibration per request).
-- A functional artifact, whose requests have no prompt-token target, has no row.
CREATE VIEW prompt_calibration_cells AS
SELECT
    run_id,
    arm,
    cell_id,
    max(target_tokens) AS target_tokens,
    count(actual_tokens) AS requests_with_usage,
    count(*) - count(actual_tokens) AS requests_without_usage,
    min(actual_tokens) AS min_actual_tokens,
    avg(actual_tokens) AS mean_actual_tokens,
    max(actual_tokens) AS max_actual_tokens,
    max(abs(relative_error)) AS max_abs_relative_error
FROM prompt_calibration
WHERE kind = 'measured'
GROUP BY run_id, arm, cell_id
