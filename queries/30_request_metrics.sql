-- request_metrics: one row per measured request (kind = 'measured') with every per-request
-- metric and its canary check; the view analysts start from.
--
-- Timing and token figures are request_figures (definitions there, from the manifest's
-- `timing_definitions`: TTFT, effective prefill, decode, TPOT, ITL = TPOT, E2E, using API
-- usage tokens, never chunk counts); canary columns are request_canaries (own canary present,
-- canaries of other requests of the same campaign found in the reply).
CREATE VIEW request_metrics AS
SELECT
    f.run_id,
    f.arm,
    f.cell_id,
    f.replica,
    f.request_index,
    f.outcome,
    f.ttft_ms,
    f.effective_prefill_tps,
    f.decode_tps,
    f.tpot_ms,
    f.itl_ms,
    f.e2e_ms,
    f.generation_ms,
    f.client_queue_ms,
    f.prompt_tokens,
    f.completion_tokens,
    f.has_usage,
    f.content_chunks,
    f.reasoning_chunks,
    f.tokens_per_chunk,
    f.finish_reason,
    f.first_wave,
    c.canary,
    c.own_canary,
    c.canary_ok,
    c.foreign_canaries,
    c.foreign_canary_count,
    c.stray_canaries,
    c.stray_canary_count
FROM request_figures f
LEFT JOIN request_canaries c
    ON c.run_id = f.run_id AND c.request_index = f.request_index
