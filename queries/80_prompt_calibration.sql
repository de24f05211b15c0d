-- prompt_calibration: how close each request's actual prompt came to the cell's target, per
-- request (every kind, so calibration requests show too).
--   target           = requests.prompt_tokens_target (the manifest's context target);
--   calibrated       = requests.prompt_tokens_calibrated (the client's estimate);
--   actual           = the server's API usage prompt tokens (NULL when no usage event);
--   error_tokens     = actual - target;
--   relative_error   = (actual - target) / target.
-- Functional requests (requests.check set) are not sized to the target and are left out.
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
