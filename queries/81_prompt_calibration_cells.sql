-- prompt_calibration_cells: prompt calibration per artifact (cell run), over its measured
-- requests that report usage: the target, the min / mean / max actual (usage) prompt tokens
-- and the largest relative error |actual - target| / target (prompt_calibration per request).
-- A functional artifact, whose requests have no prompt-token target, has no row.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the manifest cell (runs.cell_id).
--   target_tokens (tokens): the cell's prompt token target (the largest of its measured
--       requests', which share it).
--   requests_with_usage (requests): measured requests with usage prompt tokens.
--   requests_without_usage (requests): measured requests without them (left out of the
--       figures below).
--   min_actual_tokens (tokens): the smallest usage prompt tokens; NULL when no request
--       reported usage.
--   mean_actual_tokens (tokens): their mean; NULL when no request reported usage.
--   max_actual_tokens (tokens): the largest; NULL when no request reported usage.
--   max_abs_relative_error (-): the largest |actual - target| / target, a ratio (0.05 = 5%);
--       NULL when no request reported usage or the target is 0.
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
