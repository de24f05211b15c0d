-- functional_results: one row per measured request of a functional run (the `check` column
-- of `requests` set by `anvil-capture run --class functional`), whether it passed its check
-- and, when not, why. The checks (run plan advance rule "strict structured JSON, tools, and
-- Responses pass"; workload class `functional`):
--   coding          the reply holds a fenced code block (```) that defines the function the
--                   prompt names (`def NAME(`);
--   structured_json the reply parses as JSON and validates against the request's
--                   response_format json_schema (json_schema_error is NULL);
--   tools           exactly one tool call came back, it names a tool the request offered,
--                   its arguments (assembled from the streamed deltas by tool_calls) are
--                   JSON valid against that tool's parameters schema, and its `ticket`
--                   argument is the request's own canary; any other canary marker in the
--                   arguments is tool contamination (`foreign_in_tool_arguments`);
--   responses       the stream runs response.created first, at least one
--                   response.output_text.delta, response.completed last; the completed
--                   response's text equals the concatenated deltas, carries the request's
--                   own canary, and usage was reported.
-- A request that did not complete (outcome other than ok) fails with its outcome.
-- Columns:
--   run_id (-): the artifact (runs.run_id).
--   request_index (-): the request within the run (requests.request_index).
--   check (-): the check the request belongs to (requests.check): `coding`,
--       `structured_json`, `tools` or `responses`.
--   replica (-): the replica the request went to (requests.replica).
--   passed (-): the request passed its check (reason is NULL).
--   reason (-): why it failed: `request did not complete: <outcome>` (with `: <error>` when
--       the request has one) when it did not complete; otherwise the first condition of its
--       check that does not hold (for structured_json the first schema error, or the cut by
--       the token ceiling), a reply cut by the token ceiling that fails another check having
--       the finish reason added; NULL when passed.
--   failure (-): what kind of failure it is: `incomplete`, the request did not complete (its
--       outcome is not ok): a loss, not bad output; `truncated`, the reply was cut by the
--       token ceiling (finish_reason length / max_output_tokens) before the check could see it
--       whole: for structured_json, a valid JSON prefix that never closed; its own reason,
--       never corruption; `invalid`, a whole reply that fails its check (for
--       structured_json: corruption); NULL when passed.
--   canary (-): the request's own canary (requests.canary); NULL when it has none.
--   foreign_in_tool_arguments (-): the canary markers in the first tool call's arguments
--       other than the request's own (tool contamination); an empty list when none or when
--       there is no tool call.
--   evidence (-): what the verdict was drawn from: for `tools`, the tool calls assembled from
--       the stream (a JSON array, `[]` when none); otherwise the reply text (content deltas
--       in `seq` order, '' when none).
CREATE VIEW functional_results AS
WITH per_request AS (
    SELECT
        run_id,
        request_index,
        tool_calls(array_agg(tool_call_delta ORDER BY seq)
            FILTER (WHERE tool_call_delta IS NOT NULL)) AS calls,
        first_value(event ORDER BY seq) AS first_event,
        last_value(event ORDER BY seq) AS last_event,
        count(*) FILTER (WHERE event = 'response.output_text.delta') AS text_deltas,
        max(data) FILTER (WHERE event = 'response.completed') AS completed_data
    FROM events
    GROUP BY run_id, request_index
),
checked AS (
    SELECT
        t.run_id,
        t.request_index,
        q."check" AS "check",
        t.replica,
        t.outcome,
        t.error,
        t.canary,
        t.content,
        t.finish_reason,
        t.usage_prompt_tokens,
        q.request_body,
        coalesce(e.calls, '[]') AS calls,
        e.first_event,
        e.last_event,
        coalesce(e.text_deltas, 0) AS text_deltas,
        coalesce(
            json_pointer(e.completed_data, '/response/output/0/content/0/text'),
            json_pointer(e.completed_data, '/response/output/1/content/0/text')
        ) AS completed_text
    FROM request_timing t
    JOIN requests q ON q.run_id = t.run_id AND q.request_index = t.request_index
    LEFT JOIN per_request e ON e.run_id = t.run_id AND e.request_index = t.request_index
    WHERE t.kind = 'measured' AND q."check" IS NOT NULL
),
parts AS (
    SELECT
        *,
        (regexp_match(json_pointer(request_body, '/messages/0/content'),
            'named `([A-Za-z_][A-Za-z0-9_]*)`'))[1] AS function_name,
        json_pointer(calls, '/0/name') AS tool_name,
        json_pointer(calls, '/0/arguments') AS tool_arguments,
        json_pointer(calls, '/1') IS NOT NULL AS several_calls,
        json_schema_error(content,
            json_pointer(request_body, '/response_format/json_schema/schema')) AS schema_error,
        json_pointer(
            json_find(request_body, '/tools', '/function/name', json_pointer(calls, '/0/name')),
            '/function/parameters') AS tool_schema
    FROM checked
),
cut AS (
    SELECT
        *,
        outcome = 'ok'
            AND coalesce(finish_reason IN ('length', 'max_output_tokens'), false)
            AND ("check" <> 'structured_json'
                 OR strpos(coalesce(schema_error, ''), 'not JSON: EOF while parsing') = 1)
            AS truncated
    FROM parts
),
judged AS (
    SELECT
        *,
        array_remove(canaries(coalesce(tool_arguments, '')), coalesce(canary, ''))
            AS foreign_in_tool_arguments,
        CASE
            WHEN outcome <> 'ok' THEN
                'request did not complete: ' || outcome || coalesce(': ' || error, '')
            WHEN "check" = 'coding' THEN CASE
                WHEN function_name IS NULL THEN 'the prompt names no function'
                WHEN NOT regexp_like(content, '```[A-Za-z0-9_+-]*\n') THEN
                    'no fenced code block in the reply'
                WHEN NOT regexp_like(content,
                        '(?s)```[A-Za-z0-9_+-]*\n.*def\s+' || function_name || '\s*\(.*```') THEN
                    'the code block does not define ' || function_name
            END
            WHEN "check" = 'structured_json' THEN CASE
                WHEN json_pointer(request_body, '/response_format/json_schema/schema') IS NULL THEN
                    'the request carried no json_schema'
                WHEN truncated THEN
                    'cut off by the token ceiling (finish_reason ' || finish_reason || ') after '
                        || character_length(content)
                        || ' characters: valid JSON up to the cut, never closed'
                ELSE schema_error
            END
            WHEN "check" = 'tools' THEN CASE
                WHEN json_pointer(calls, '/0') IS NULL THEN 'no tool call'
                WHEN several_calls THEN 'more than one tool call'
                WHEN tool_schema IS NULL THEN
                    'called `' || coalesce(tool_name, '') || '`, which the request did not offer'
                WHEN json_schema_error(tool_arguments, tool_schema) IS NOT NULL THEN
                    'arguments of `' || tool_name || '`: '
                        || json_schema_error(tool_arguments, tool_schema)
                WHEN cardinality(array_remove(canaries(tool_arguments), coalesce(canary, ''))) > 0
                    THEN 'tool contamination: the arguments carry '
                        || array_to_string(
                            array_remove(canaries(tool_arguments), coalesce(canary, '')), ', ')
                WHEN json_pointer(tool_arguments, '/ticket') IS DISTINCT FROM canary THEN
                    'the ticket argument is not the request''s own canary'
            END
            WHEN "check" = 'responses' THEN CASE
                WHEN first_event IS DISTINCT FROM 'response.created' THEN
                    'the stream does not start with response.created'
                WHEN text_deltas = 0 THEN 'no response.output_text.delta event'
                WHEN last_event IS DISTINCT FROM 'response.completed' THEN
                    'the stream does not end with response.completed'
                WHEN completed_text IS DISTINCT FROM content THEN
                    'the completed response''s text differs from the concatenated deltas'
                WHEN canary IS NOT NULL AND strpos(content, canary) = 0 THEN
                    'the reply lacks its own canary'
                WHEN usage_prompt_tokens IS NULL THEN 'no usage reported'
            END
            ELSE 'unknown check `' || "check" || '`'
        END AS base_reason
    FROM cut
),
reasoned AS (
    SELECT
        *,
        CASE
            WHEN base_reason IS NOT NULL AND truncated AND "check" <> 'structured_json' THEN
                base_reason || ' (the reply was cut by the token ceiling, finish_reason '
                    || finish_reason || ')'
            ELSE base_reason
        END AS reason
    FROM judged
)
SELECT
    run_id,
    request_index,
    "check",
    replica,
    reason IS NULL AS passed,
    reason,
    CASE
        WHEN reason IS NULL THEN NULL
        WHEN outcome <> 'ok' THEN 'incomplete'
        WHEN truncated THEN 'truncated'
        ELSE 'invalid'
    END AS failure,
    canary,
    foreign_in_tool_arguments,
    CASE WHEN "check" = 'tools' THEN calls ELSE content END AS evidence
FROM reasoned
