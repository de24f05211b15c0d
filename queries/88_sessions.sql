-- sessions: one row per session of a session workload's run: how far it got, how long it
-- took and whether every turn held up. A session attains (all_ok) when every planned turn
-- succeeded with its own canary and no other session's marker; one failed turn ends the
-- session (its later turns are `cancelled`, never sent). With SLOs given, a session attains
-- them when every turn does (slo_attainment, per-turn bounds included): session_goodput
-- counts those.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   arm (-): the arm (runs.arm).
--   cell_id (-): the cell (runs.cell_id).
--   session_id (-): the session (requests.session_id).
--   replica (-): the replica its first turn went to (every turn of a session goes to one).
--   turns (count): its planned turns.
--   turns_ok (count): turns that succeeded.
--   all_ok (-): every turn succeeded, with canary_ok not false and no foreign marker.
--   first_ttft_ms (ms): its first turn's TTFT.
--   last_ttft_ms (ms): its last successful turn's TTFT.
--   ttft_max_ms (ms): its slowest turn's TTFT.
--   duration_ms (ms): its first turn's send to its last turn's stream completion, think
--       times included; NULL when no turn was sent.
--   t_first_sent_ns (ns): its first turn's send (ns since the run's origin); NULL when no
--       turn was sent.
--   t_last_done_ns (ns): its last sent turn's stream completion.
--   prompt_tokens (tokens): usage prompt tokens summed over its turns.
--   cached_tokens (tokens): cached tokens summed over its turns (NULL when none reported).
--   contaminated (-): some turn carried another session's marker.
--   first_wave (-): its first turn is in the run's first wave (request_figures.first_wave):
--       the `after_first_wave` window of session_goodput leaves the session out.
--   turns_attained (count): turns that attained the SLOs (slo_attainment); NULL when the
--       run is judged by no SLO.
--   attained (-): every turn attained the SLOs (a failed turn does not, so a cut session
--       does not); NULL when the run is judged by no SLO.
--   completion_tokens (tokens): usage completion tokens summed over its turns (NULL when
--       none reported them).
CREATE VIEW sessions AS
WITH sent AS (
    SELECT run_id, session_id, min(t_sent_ns) AS t_first_sent_ns,
           max(t_done_ns) FILTER (WHERE t_sent_ns IS NOT NULL) AS t_last_done_ns
    FROM requests
    WHERE kind = 'measured' AND session_id IS NOT NULL
    GROUP BY run_id, session_id
),
judged AS (
    SELECT
        run_id,
        session_id,
        count(*) FILTER (WHERE attained) AS turns_attained,
        bool_and(attained) AS attained
    FROM slo_attainment
    WHERE session_id IS NOT NULL
    GROUP BY run_id, session_id
),
waves AS (
    SELECT run_id, session_id, bool_or(first_wave AND turn = 0) AS first_wave
    FROM request_figures
    WHERE session_id IS NOT NULL
    GROUP BY run_id, session_id
)
SELECT
    t.run_id,
    t.arm,
    t.cell_id,
    t.session_id,
    min(t.replica) FILTER (WHERE t.turn = 0) AS replica,
    count(*) AS turns,
    count(*) FILTER (WHERE t.outcome = 'ok') AS turns_ok,
    bool_and(
        t.outcome = 'ok' AND coalesce(t.canary_ok, true) AND t.foreign_canary_count = 0
    ) AS all_ok,
    min(t.ttft_ms) FILTER (WHERE t.turn = 0) AS first_ttft_ms,
    last_value(t.ttft_ms ORDER BY t.turn) FILTER (WHERE t.outcome = 'ok') AS last_ttft_ms,
    max(t.ttft_ms) AS ttft_max_ms,
    CAST(s.t_last_done_ns - s.t_first_sent_ns AS DOUBLE) / 1e6 AS duration_ms,
    s.t_first_sent_ns,
    s.t_last_done_ns,
    sum(t.prompt_tokens) AS prompt_tokens,
    sum(t.cached_tokens) AS cached_tokens,
    bool_or(t.foreign_canary_count > 0) AS contaminated,
    coalesce(w.first_wave, false) AS first_wave,
    j.turns_attained,
    j.attained,
    sum(t.completion_tokens) AS completion_tokens
FROM session_turns t
JOIN sent s ON s.run_id = t.run_id AND s.session_id = t.session_id
LEFT JOIN judged j ON j.run_id = t.run_id AND j.session_id = t.session_id
LEFT JOIN waves w ON w.run_id = t.run_id AND w.session_id = t.session_id
GROUP BY
    t.run_id, t.arm, t.cell_id, t.session_id, s.t_last_done_ns, s.t_first_sent_ns,
    w.first_wave, j.turns_attained, j.attained
