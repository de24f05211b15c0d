-- prefill_wait: what requests waited inside the server before their first token, as the
-- client observes it, beside what a server's queue gauge says. A request's own prefill takes
-- its prompt tokens at the run's unqueued prefill rate: the fastest effective prefill any of
-- the run's successful requests reached (API prompt tokens / TTFT, request_metrics). What
-- its TTFT holds beyond that is time it waited: behind other prompts' prefill (a first wave
-- released together prefills one after another, a TTFT staircase) or for a batch slot. A
-- server whose waiting gauge reads 0 can still hold requests this way (the gauge counts only
-- requests not yet admitted). Per run over its successful measured requests with a TTFT and
-- usage; a run without one has no row.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the manifest cell (runs.cell_id).
--   window (-): `all` (every measured request) or `first_wave` (the requests released before
--       any completed).
--   requests (requests): successful measured requests with a TTFT and usage in the window.
--   unqueued_prefill_tps (tok/s): the run's fastest effective prefill (all its requests):
--       the rate a prompt is prefilled at when nothing is ahead of it.
--   waited (requests): requests whose TTFT exceeds their own prefill time at that rate by
--       more than 100 ms and by more than that prefill time itself.
--   wait_p50_ms (ms): the median of TTFT minus own prefill time, by nearest rank.
--   wait_max_ms (ms): its largest value.
CREATE VIEW prefill_wait AS
WITH per_request AS (
    SELECT
        m.run_id,
        m.arm,
        m.cell_id,
        f.first_wave,
        m.ttft_ms,
        CAST(m.prompt_tokens AS DOUBLE) AS prompt_tokens,
        max(m.effective_prefill_tps) OVER (PARTITION BY m.run_id) AS unqueued_prefill_tps
    FROM request_metrics m
    JOIN request_figures f ON f.run_id = m.run_id AND f.request_index = m.request_index
    WHERE m.outcome = 'ok' AND m.ttft_ms IS NOT NULL AND m.prompt_tokens IS NOT NULL
        AND m.effective_prefill_tps IS NOT NULL
),
waits AS (
    SELECT
        run_id,
        arm,
        cell_id,
        first_wave,
        unqueued_prefill_tps,
        1000.0 * prompt_tokens / nullif(unqueued_prefill_tps, 0) AS own_ms,
        ttft_ms - 1000.0 * prompt_tokens / nullif(unqueued_prefill_tps, 0) AS wait_ms
    FROM per_request
),
windowed AS (
    SELECT w.*, 'all' AS window FROM waits w
    UNION ALL
    SELECT w.*, 'first_wave' AS window FROM waits w WHERE w.first_wave
)
SELECT
    run_id,
    arm,
    cell_id,
    window,
    count(*) AS requests,
    max(unqueued_prefill_tps) AS unqueued_prefill_tps,
    count(*) FILTER (WHERE wait_ms > 100 AND wait_ms > own_ms) AS waited,
    nearest_rank(wait_ms, 0.5) AS wait_p50_ms,
    max(wait_ms) AS wait_max_ms
FROM windowed
GROUP BY run_id, arm, cell_id, window
