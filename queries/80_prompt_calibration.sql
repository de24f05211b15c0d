-- prompt_calibration: how close each request's actual prompt came to the cell's target, per
-- request (every kind, so calibration requests show too).
-- Functional requests (requests.check set) are not sized to the target and are left out.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the manifest cell (runs.cell_id).
--   replica (-): the replica the request went to (requests.replica).
--   request_index (-): the request within the run (requests.request_index).
--   kind (-): `measured`, `warmup` or `calibration` (requests.kind).
--   target_tokens (tokens): requests.prompt_tokens_target (the manifest's context target).
--   calibrated_tokens (tokens): requests.prompt_tokens_calibrated (the client's estimate);
--       NULL when it has none.
--   actual_tokens (tokens): the server's API usage prompt tokens; NULL when no usage event.
--   error_tokens (tokens): actual - target; NULL when actual is.
--   relative_error (-): (actual - target) / target, a ratio (0.05 = 5% over the target);
--       NULL when actual is NULL or the target is 0.
CREATE VIEW prompt_calibration AS
SELECT
    t.run_id,
    ru.arm,
    ru.cell_id,
    t.replica,
    t.request_index,
    t.kind,
    t.prompt_tokens_target AS target_tokens,
    t.prompt_tokens_calibrated AS calibrated_tokens,
    t.usage_prompt_tokens AS actual_tokens,
    t.usage_prompt_tokens - t.prompt_tokens_target AS error_tokens,
    CAST(t.usage_prompt_tokens - t.prompt_tokens_target AS DOUBLE)
        / CAST(nullif(t.prompt_tokens_target, 0) AS DOUBLE) AS relative_error
FROM request_timing t
JOIN runs ru ON ru.run_id = t.run_id
JOIN requests q ON q.run_id = t.run_id AND q.request_index = t.request_index
WHERE q."check" IS NULL
