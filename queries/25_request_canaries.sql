-- request_canaries: the canary check of every measured request (kind = 'measured').
--
-- Definition (run plan advance/stop rules, docs/artifact.md): concatenate the request's
-- content deltas in `seq` order (request_timing.content); it must contain the request's own
-- canary (requests.canary) and no other canary marker (`ANV-` + 12 lowercase hex, found by
-- the canaries() function) in its content or its reasoning. Any other marker is
-- contamination, wherever it came from: another request of this campaign, another run,
-- another tenant or a prompt cache (per-run salts make markers from outside the loaded
-- campaign the realistic kind). A session's turn carries its history, whose earlier replies
-- hold the session's earlier markers: a reply that repeats one of those is quoting its own
-- conversation, listed apart (history_canaries) and not contamination; another session's
-- marker is.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   request_index (-): the request within the run (requests.request_index).
--   canary (-): the request's own canary (requests.canary); NULL when it has none.
--   canary_checked_in (-): where the request's own canary is looked for: 'content' (the reply
--       text); 'tool_arguments' for the functional `tools` check, whose canary travels as a
--       tool call's `ticket` argument and is judged by functional_results, not here; NULL
--       when the request has no canary.
--   own_canary (-): own canary present in the reply's content; NULL when the request has no
--       canary or its canary is checked in tool arguments.
--   canary_ok (-): own canary present and no other marker; NULL as own_canary is (NULL is
--       "not checked here", never a failure).
--   foreign_canaries (-): sorted distinct markers other than the request's own (and, in a
--       session, other than its own session's) found in the reply's content or reasoning;
--       NULL when none. A request without a canary of its own still counts them.
--   foreign_canary_count (count): how many foreign_canaries holds (0 when none).
--   stray_canaries (-): the foreign markers that belong to no request of the campaign loaded
--       (from outside it: another run, tenant or cache), sorted; a subset of
--       foreign_canaries; NULL when none.
--   stray_canary_count (count): how many stray_canaries holds (0 when none).
--   history_canaries (-): markers of the request's own session's earlier, sent turns found in
--       its reply (requests.session_id, requests.turn): its conversation quoted, not
--       contamination; NULL when none and outside sessions. A later or never-sent turn's
--       marker is foreign: the reply cannot have read it.
CREATE VIEW request_canaries AS
WITH reasoning AS (
    SELECT run_id, request_index, ordered_concat(reasoning_delta, seq) AS reasoning
    FROM events
    WHERE reasoning_delta <> ''
    GROUP BY run_id, request_index
),
measured AS (
    SELECT t.run_id, t.request_index, t.canary, t.content, q.session_id, q.turn,
           coalesce(r.reasoning, '') AS reasoning, ru.campaign_id,
           CASE
               WHEN t.canary IS NULL THEN NULL
               WHEN q."check" = 'tools' THEN 'tool_arguments'
               ELSE 'content'
           END AS canary_checked_in
    FROM request_timing t
    JOIN runs ru ON ru.run_id = t.run_id
    JOIN requests q ON q.run_id = t.run_id AND q.request_index = t.request_index
    LEFT JOIN reasoning r ON r.run_id = t.run_id AND r.request_index = t.request_index
    WHERE t.kind = 'measured'
),
found AS (
    -- Markers are looked for in the reasoning text too: a leak there is a leak.
    SELECT run_id, request_index, campaign_id, canary, session_id, turn,
           unnest(canaries(content || ' ' || reasoning)) AS marker
    FROM measured
),
-- The markers a session's turn carried in its history: its earlier turns' that were sent.
session_marks AS (
    SELECT run_id, session_id, turn, canary AS marker
    FROM requests
    WHERE session_id IS NOT NULL AND canary IS NOT NULL AND t_sent_ns IS NOT NULL
),
owned AS (
    SELECT DISTINCT ru.campaign_id, r.canary AS marker
    FROM requests r
    JOIN runs ru ON ru.run_id = r.run_id
    WHERE r.canary IS NOT NULL
),
others AS (
    SELECT
        f.run_id,
        f.request_index,
        CASE WHEN count(*) FILTER (WHERE s.marker IS NULL) > 0 THEN
            array_sort(array_agg(DISTINCT f.marker) FILTER (WHERE s.marker IS NULL))
        END AS foreign_canaries,
        CASE WHEN count(*) FILTER (WHERE s.marker IS NULL AND o.marker IS NULL) > 0 THEN
            array_sort(
                array_agg(DISTINCT f.marker) FILTER (WHERE s.marker IS NULL AND o.marker IS NULL)
            )
        END AS stray_canaries,
        CASE WHEN count(*) FILTER (WHERE s.marker IS NOT NULL) > 0 THEN
            array_sort(array_agg(DISTINCT f.marker) FILTER (WHERE s.marker IS NOT NULL))
        END AS history_canaries
    FROM found f
    LEFT JOIN owned o ON o.campaign_id = f.campaign_id AND o.marker = f.marker
    LEFT JOIN session_marks s
        ON s.run_id = f.run_id AND s.session_id = f.session_id AND s.marker = f.marker
        AND s.turn < f.turn
    WHERE f.canary IS NULL OR f.marker <> f.canary
    GROUP BY f.run_id, f.request_index
)
SELECT
    m.run_id,
    m.request_index,
    m.canary,
    m.canary_checked_in,
    CASE WHEN m.canary_checked_in = 'content' THEN array_has(canaries(m.content), m.canary) END
        AS own_canary,
    CASE WHEN m.canary_checked_in = 'content' THEN
        array_has(canaries(m.content), m.canary) AND o.foreign_canaries IS NULL
    END AS canary_ok,
    o.foreign_canaries,
    coalesce(cardinality(o.foreign_canaries), 0) AS foreign_canary_count,
    o.stray_canaries,
    coalesce(cardinality(o.stray_canaries), 0) AS stray_canary_count,
    o.history_canaries
FROM measured m
LEFT JOIN others o ON o.run_id = m.run_id AND o.request_index = m.request_index
