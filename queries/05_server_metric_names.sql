-- server_metric_names: which Prometheus series anvil reads from each runtime's `/metrics`,
-- one row per (metric_dialect, role, metric): the one place the runtimes' names are written
-- down. Used by spec_decode, spec_decode_positions, server_queue, restarts, prefix_cache
-- and kv_cache_timeline.
-- Roles:
--   spec_drafts, spec_draft_tokens, spec_accepted_tokens   counters of speculative decoding
--                                    (draft steps, tokens proposed, tokens accepted);
--   spec_accepted_per_position       counter of accepted draft tokens per draft position
--                                    (label `position`); a position's series appears only
--                                    once it is non-zero, so an absent series counts from 0;
--   spec_accept_rate, spec_accept_length  gauges of runtimes that export no counters
--                                    (SGLang's windowed averages);
--   queue_running, queue_waiting     scheduler gauges: requests being processed, requests
--                                    waiting for a slot;
--   process_start                    the process start time (a change is a restart);
--   prefix_cache_queries, prefix_cache_hits  counters of prompt tokens looked up in the
--                                    prefix cache and of those found there (vLLM; llama.cpp's
--                                    prompt_tokens_cached_total is its hits);
--   prompt_tokens_uncached           a counter of prompt tokens processed, excluding those
--                                    reused from the cache (llama.cpp's prompt_tokens_total:
--                                    its lookups are these plus the hits);
--   cache_hit_rate                   a gauge of the recent prefix-cache hit rate (SGLang,
--                                    0-1; no counters behind it, so only approximate);
--   kv_usage                         a gauge of the KV cache's used share, 0-1 (vLLM's
--                                    kv_cache_usage_perc, gpu_cache_usage_perc before it;
--                                    SGLang's token_usage);
--   preemptions                      a counter of requests preempted or retracted because the
--                                    KV cache was full.
-- vLLM: `vllm:` names; SGLang: `sglang:`; llama.cpp's llama-server: `llamacpp:` (with
-- --metrics; it exports no process_start_time_seconds: its restarts show as counters
-- falling, see restarts).
-- Columns:
--   metric_dialect (-): whose naming the series follows: `vllm`, `sglang`, `llama.cpp`, or
--       `any` for process_start_time_seconds; not an arm's runtime (runs.runtime): a fork or
--       a simulator may export another runtime's names.
--   role (-): what anvil reads the series for (Roles above).
--   metric (-): the metric name as exposed (scrapes.metric), with any `_total` suffix.
CREATE VIEW server_metric_names AS
SELECT column1 AS metric_dialect, column2 AS role, column3 AS metric
FROM (VALUES
    ('vllm', 'spec_drafts', 'vllm:spec_decode_num_drafts_total'),
    ('vllm', 'spec_draft_tokens', 'vllm:spec_decode_num_draft_tokens_total'),
    ('vllm', 'spec_accepted_tokens', 'vllm:spec_decode_num_accepted_tokens_total'),
    ('vllm', 'spec_accepted_per_position', 'vllm:spec_decode_num_accepted_tokens_per_pos_total'),
    ('vllm', 'queue_running', 'vllm:num_requests_running'),
    ('vllm', 'queue_waiting', 'vllm:num_requests_waiting'),
    ('vllm', 'prefix_cache_queries', 'vllm:prefix_cache_queries_total'),
    ('vllm', 'prefix_cache_hits', 'vllm:prefix_cache_hits_total'),
    ('vllm', 'kv_usage', 'vllm:kv_cache_usage_perc'),
    ('vllm', 'kv_usage', 'vllm:gpu_cache_usage_perc'),
    ('vllm', 'preemptions', 'vllm:num_preemptions_total'),
    ('sglang', 'spec_accept_rate', 'sglang:spec_accept_rate'),
    ('sglang', 'spec_accept_length', 'sglang:spec_accept_length'),
    ('sglang', 'queue_running', 'sglang:num_running_reqs'),
    ('sglang', 'queue_waiting', 'sglang:num_queue_reqs'),
    ('sglang', 'cache_hit_rate', 'sglang:cache_hit_rate'),
    ('sglang', 'kv_usage', 'sglang:token_usage'),
    ('sglang', 'preemptions', 'sglang:num_retracted_requests_total'),
    ('llama.cpp', 'spec_drafts', 'llamacpp:spec_decode_num_drafts_total'),
    ('llama.cpp', 'spec_draft_tokens', 'llamacpp:spec_decode_num_draft_tokens_total'),
    ('llama.cpp', 'spec_accepted_tokens', 'llamacpp:spec_decode_num_accepted_tokens_total'),
    ('llama.cpp', 'spec_accepted_per_position', 'llamacpp:spec_decode_num_accepted_tokens_per_pos_total'),
    ('llama.cpp', 'queue_running', 'llamacpp:requests_processing'),
    ('llama.cpp', 'queue_waiting', 'llamacpp:requests_deferred'),
    ('llama.cpp', 'prompt_tokens_uncached', 'llamacpp:prompt_tokens_total'),
    ('llama.cpp', 'prefix_cache_hits', 'llamacpp:prompt_tokens_cached_total'),
    ('any', 'process_start', 'process_start_time_seconds')
)
