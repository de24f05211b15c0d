-- prefix_cache: the prefix cache and the KV pool of each replica over the run, as the server
-- counts them beside what the client was told.
-- Server side: vLLM's prefix_cache_queries / prefix_cache_hits counters (prompt tokens looked
-- up and found; llama.cpp's prompt_tokens_cached_total over it plus prompt_tokens_total, which
-- excludes the cached), their increases over the run as counter_increases computes them, give
-- an exact hit rate (`server_source` = 'counters'); SGLang exports only a recent-hit-rate gauge,
-- whose time-weighted mean over the scrapes taken during the run (each value held until the
-- replica's next scrape, the last one until the `after` scrape) stands in, labelled
-- approximate (`server_source` = 'gauge'). The counters cover what the server saw between
-- the run's `before` scrape (taken after calibration) and its `after` scrape: warm-up and
-- measured requests.
-- Client side: the prompt tokens the API's usage said were cached (`prompt_tokens_details.
-- cached_tokens`; vLLM fills it only with --enable-prompt-tokens-details, SGLang with
-- --enable-cache-report) over the prompt tokens of the same requests: every request of the
-- run that reported them (the server's scope), and the measured ones alone.
-- KV pool: kv_cache_timeline's kv_usage during the run (mean and peak), and preemptions (or
-- SGLang's retractions) counted over the run.
-- One row per replica of every run (from run.json topology); a figure is NULL where its
-- source is absent.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the manifest cell (runs.cell_id).
--   replica (-): the replica, 0 to runs.replicas - 1.
--   runtime (-): the arm's runtime (runs.runtime).
--   server_source (-): 'counters' (exact), 'gauge' (SGLang's windowed rate: approximate), or
--       NULL when the server exports neither.
--   queried_tokens (tokens): prompt tokens the server looked up in its prefix cache over the
--       run (counter increase); NULL without the counters.
--   hit_tokens (tokens): prompt tokens it found there (counter increase); NULL without them.
--   server_hit_rate (fraction): hit_tokens / queried_tokens, else the gauge's time-weighted
--       mean during the run; NULL when neither is there or nothing was queried.
--   client_prompt_tokens (tokens): usage prompt tokens of the run's requests that reported
--       cached tokens (every kind); NULL when none did.
--   client_cached_tokens (tokens): their usage cached tokens; NULL when none reported them.
--   client_cached_share (fraction): client_cached_tokens / client_prompt_tokens.
--   measured_cached_share (fraction): the same over the measured requests alone.
--   disagreement (fraction): server_hit_rate - client_cached_share, where both exist.
--   kv_usage_mean (fraction): mean of the kv_usage gauge over the scrapes during the run.
--   kv_usage_max (fraction): its largest value during the run.
--   preemptions (count): requests preempted (vLLM num_preemptions) or retracted (SGLang
--       num_retracted_requests) over the run; NULL when the server exports no such counter.
CREATE VIEW prefix_cache AS
WITH replicas AS (
    SELECT run_id, arm, cell_id, runtime, unnest(range(0, replicas)) AS replica
    FROM runs
),
counted AS (
    SELECT
        c.run_id,
        c.replica,
        coalesce(
            sum(c.increase) FILTER (WHERE n.role = 'prefix_cache_queries'),
            sum(c.increase) FILTER (WHERE n.role = 'prompt_tokens_uncached')
                + sum(c.increase) FILTER (WHERE n.role = 'prefix_cache_hits')
        ) AS queried,
        sum(c.increase) FILTER (WHERE n.role = 'prefix_cache_hits') AS hits,
        sum(c.increase) FILTER (WHERE n.role = 'preemptions') AS preemptions
    FROM counter_increases c
    JOIN server_metric_names n ON n.metric = c.metric
    WHERE n.role IN (
        'prefix_cache_queries', 'prefix_cache_hits', 'prompt_tokens_uncached', 'preemptions'
    )
    GROUP BY c.run_id, c.replica
),
-- Each sample holds until the next scrape of the replica, whatever its phase: the last
-- sample during the run holds until the scrape after it.
held AS (
    SELECT
        run_id,
        replica,
        phase,
        t_ns,
        kv_usage,
        cache_hit_rate,
        lead(t_ns) OVER (PARTITION BY run_id, replica ORDER BY t_ns) - t_ns AS held_ns
    FROM kv_cache_timeline
),
during AS (
    SELECT run_id, replica, t_ns, kv_usage, cache_hit_rate, held_ns
    FROM held
    WHERE phase = 'during'
),
gauges AS (
    SELECT
        run_id,
        replica,
        avg(kv_usage) AS kv_usage_mean,
        max(kv_usage) AS kv_usage_max,
        sum(cache_hit_rate * held_ns) FILTER (WHERE held_ns > 0)
            / nullif(sum(held_ns) FILTER (WHERE held_ns > 0 AND cache_hit_rate IS NOT NULL), 0)
            AS hit_rate_weighted
    FROM during
    GROUP BY run_id, replica
),
client AS (
    SELECT
        run_id,
        replica,
        sum(usage_prompt_tokens) AS prompt_tokens,
        sum(usage_cached_tokens) AS cached_tokens,
        CAST(sum(usage_cached_tokens) FILTER (WHERE kind = 'measured') AS DOUBLE)
            / nullif(sum(usage_prompt_tokens) FILTER (WHERE kind = 'measured'), 0)
            AS measured_share
    FROM request_timing
    WHERE usage_cached_tokens IS NOT NULL AND usage_prompt_tokens IS NOT NULL
    GROUP BY run_id, replica
),
joined AS (
    SELECT
        r.run_id,
        r.arm,
        r.cell_id,
        r.replica,
        r.runtime,
        CASE
            WHEN c.queried IS NOT NULL THEN 'counters'
            WHEN g.hit_rate_weighted IS NOT NULL THEN 'gauge'
        END AS server_source,
        c.queried AS queried_tokens,
        c.hits AS hit_tokens,
        coalesce(c.hits / nullif(c.queried, 0), g.hit_rate_weighted) AS server_hit_rate,
        cl.prompt_tokens AS client_prompt_tokens,
        cl.cached_tokens AS client_cached_tokens,
        CAST(cl.cached_tokens AS DOUBLE) / nullif(cl.prompt_tokens, 0) AS client_cached_share,
        cl.measured_share AS measured_cached_share,
        g.kv_usage_mean,
        g.kv_usage_max,
        c.preemptions
    FROM replicas r
    LEFT JOIN counted c ON c.run_id = r.run_id AND c.replica = r.replica
    LEFT JOIN gauges g ON g.run_id = r.run_id AND g.replica = r.replica
    LEFT JOIN client cl ON cl.run_id = r.run_id AND cl.replica = r.replica
)
SELECT
    run_id,
    arm,
    cell_id,
    replica,
    runtime,
    server_source,
    queried_tokens,
    hit_tokens,
    server_hit_rate,
    client_prompt_tokens,
    client_cached_tokens,
    client_cached_share,
    measured_cached_share,
    server_hit_rate - client_cached_share AS disagreement,
    kv_usage_mean,
    kv_usage_max,
    preemptions
FROM joined
