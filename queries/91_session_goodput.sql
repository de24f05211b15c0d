-- session_goodput: per run of a session workload and window, the sessions that attained the
-- SLOs (every turn did: sessions.attained; per-turn bounds included), their share with its
-- exact Clopper-Pearson 95% interval, and goodput per session: attained sessions, and the
-- usage completion tokens of their turns, per second of the window's span. A session is the
-- unit a conversation's user sees ("how many users under my SLO"), so one slow turn fails
-- the whole session. Windows: `all` (every measured session) and `after_first_wave` (without
-- the sessions whose first turn is in the first wave: sessions.first_wave). The span is the
-- window's sessions' own: from the first turn sent to the last turn's stream completion. A
-- cut session (a turn failed) is in the denominator and never attained. With no SLO given,
-- or for a run of any other workload, the view has no row (docs/artifact.md "SLOs and
-- goodput").
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the cell (runs.cell_id).
--   window (-): `all` or `after_first_wave`.
--   sessions (sessions): measured sessions in the window, whatever became of them (0 after
--       the first wave when every session was in it; the shares and spans are then NULL).
--   completed (sessions): of them, those whose every turn succeeded with its own canary
--       (sessions.all_ok).
--   attained (sessions): of them, those whose every turn attained the SLOs.
--   attained_share (fraction): attained / sessions; NULL without sessions.
--   share_ci95_low (fraction): the Clopper-Pearson 95% lower bound of attained_share.
--   share_ci95_high (fraction): its upper bound.
--   turns (requests): the window's sessions' measured turns (cut ones included).
--   turns_attained (requests): of them, those that attained the SLOs.
--   attained_tokens (tokens): usage completion tokens of the attained sessions' turns that
--       reported usage: 0 when none attained, NULL when some did but none reported usage.
--   span_s (s): the window's first turn sent to its last turn's stream completion.
--   goodput_sps (sessions/s): attained / span_s; NULL without a span.
--   goodput_tps (tok/s): attained_tokens / span_s; NULL without tokens or span.
CREATE VIEW session_goodput AS
WITH s AS (
    SELECT
        run_id,
        attained,
        all_ok,
        turns,
        turns_attained,
        completion_tokens,
        t_first_sent_ns,
        t_last_done_ns,
        unnest(['all', 'after_first_wave']) AS window,
        unnest([true, NOT first_wave]) AS in_window
    FROM sessions
    WHERE attained IS NOT NULL
),
counted AS (
    SELECT
        run_id,
        window,
        count(*) FILTER (WHERE in_window) AS sessions,
        count(*) FILTER (WHERE in_window AND all_ok) AS completed,
        count(*) FILTER (WHERE in_window AND attained) AS attained,
        coalesce(sum(turns) FILTER (WHERE in_window), 0) AS turns,
        coalesce(sum(turns_attained) FILTER (WHERE in_window), 0) AS turns_attained,
        CASE
            WHEN count(*) FILTER (WHERE in_window AND attained) = 0 THEN 0
            ELSE sum(completion_tokens) FILTER (WHERE in_window AND attained)
        END AS attained_tokens,
        CAST(
            max(t_last_done_ns) FILTER (WHERE in_window)
            - min(t_first_sent_ns) FILTER (WHERE in_window) AS DOUBLE
        ) / 1e9 AS span_s
    FROM s
    GROUP BY run_id, window
)
SELECT
    c.run_id,
    ru.arm,
    ru.cell_id,
    c.window,
    c.sessions,
    c.completed,
    c.attained,
    CAST(c.attained AS DOUBLE) / CAST(nullif(c.sessions, 0) AS DOUBLE) AS attained_share,
    clopper_pearson_low(c.attained, c.sessions) AS share_ci95_low,
    clopper_pearson_high(c.attained, c.sessions) AS share_ci95_high,
    c.turns,
    c.turns_attained,
    c.attained_tokens,
    c.span_s,
    CAST(c.attained AS DOUBLE) / nullif(c.span_s, 0) AS goodput_sps,
    CAST(c.attained_tokens AS DOUBLE) / nullif(c.span_s, 0) AS goodput_tps
FROM counted c
JOIN runs ru ON ru.run_id = c.run_id
