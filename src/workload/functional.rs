//! The `functional` workload class: four checks of what a serving configuration must still
//! do right, each a batch of requests recorded in the same artifact with its name in the
//! `check` column of `requests`. Whether each request passed is decided later, by the
//! query layer (`queries/90_functional_results.sql`); here the requests are only built.
//!
//! A functional cell's request count N is split evenly over the four checks (N must be a
//! multiple of 4), in this order:
//!
//! | check | API | per-check concurrency | what is asked |
//! |---|---|---|---|
//! | `coding` | chat | 1 | a small Python function with a given name, in a fenced code block |
//! | `structured_json` | chat | all N/4 at once | a ticket as JSON under a strict `json_schema` (nested object, enum, array, required fields) |
//! | `tools` | chat | all N/4 at once | one call of a named tool, with the request's canary as its `ticket` argument, after a long system prompt and four tool definitions shared by every request |
//! | `responses` | Responses (`POST /v1/responses`), streamed | 1 | a short text that starts with the request's canary |
//!
//! Structured JSON and tools run all at once so that the server batches them: corruption or
//! contamination that only appears under concurrency (a shared prefix, a shared grammar
//! state) shows up there. Every request carries its own canary when the manifest asks for
//! canaries.

use bytes::Bytes;
use hyper::header::HeaderValue;
use serde_json::{Value, json};

use super::request::{Api, PreparedRequest, RequestError, RequestOptions};
use crate::artifact;

/// One functional check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    Coding,
    StructuredJson,
    Tools,
    Responses,
}

impl Check {
    /// The checks in the order a functional run sends them.
    pub const ALL: [Check; 4] = [
        Check::Coding,
        Check::StructuredJson,
        Check::Tools,
        Check::Responses,
    ];

    /// The `check` column's value.
    pub fn name(self) -> &'static str {
        match self {
            Check::Coding => "coding",
            Check::StructuredJson => "structured_json",
            Check::Tools => "tools",
            Check::Responses => "responses",
        }
    }

    pub fn api(self) -> Api {
        match self {
            Check::Responses => Api::Responses,
            _ => Api::Chat,
        }
    }

    /// Requests of this check in flight at once (per replica), for `per_check` requests.
    pub fn concurrency(self, per_check: u32) -> u32 {
        match self {
            Check::Coding | Check::Responses => 1,
            Check::StructuredJson | Check::Tools => per_check.max(1),
        }
    }
}

/// A stretch of the run's request indices sent at one concurrency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phase {
    pub check: Check,
    /// First request index.
    pub start: u32,
    /// One past the last request index.
    pub end: u32,
    /// Concurrent requests per replica.
    pub concurrency: u32,
}

/// The phases of a functional run of `requests` measured requests; `None` unless
/// `requests` is a positive multiple of 4.
pub fn phases(requests: u32) -> Option<Vec<Phase>> {
    if requests == 0 || !requests.is_multiple_of(4) {
        return None;
    }
    let per = requests / 4;
    Some(
        Check::ALL
            .iter()
            .enumerate()
            .map(|(i, &check)| Phase {
                check,
                start: i as u32 * per,
                end: (i as u32 + 1) * per,
                concurrency: check.concurrency(per),
            })
            .collect(),
    )
}

/// The check of request `index` in a run of `requests`.
pub fn check_of(index: u32, requests: u32) -> Check {
    let per = (requests / 4).max(1);
    Check::ALL[((index / per) as usize).min(3)]
}

const FUNCTIONS: [(&str, &str); 6] = [
    (
        "clamp",
        "returns `value` limited to the closed range [`low`, `high`]",
    ),
    (
        "is_palindrome",
        "tells whether a string reads the same backwards, ignoring case and spaces",
    ),
    ("word_count", "counts the words of a string"),
    (
        "running_mean",
        "returns the running means of a list of numbers",
    ),
    (
        "dedupe",
        "removes repeated items from a list, keeping the first of each, in order",
    ),
    (
        "celsius_to_fahrenheit",
        "converts a temperature from degrees Celsius to degrees Fahrenheit",
    ),
];

/// The JSON Schema of the structured-output check.
pub fn ticket_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "status": {"type": "string", "enum": ["open", "pending", "closed"]},
            "priority": {"type": "integer", "minimum": 1, "maximum": 5},
            "owner": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "team": {"type": "string"}
                },
                "required": ["name", "team"],
                "additionalProperties": false
            },
            "tags": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["id", "status", "priority", "owner", "tags"],
        "additionalProperties": false
    })
}

/// The tools every request of the tools check offers; each takes the ticket first.
pub fn tools() -> Value {
    let tool = |name: &str, what: &str, extra: Value, required: &[&str]| {
        let mut properties = json!({"ticket": {"type": "string", "description": "The ticket id."}});
        if let (Some(p), Some(e)) = (properties.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        let mut all = vec!["ticket"];
        all.extend_from_slice(required);
        json!({"type": "function", "function": {
            "name": name,
            "description": what,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": all,
                "additionalProperties": false
            }
        }})
    };
    json!([
        tool(
            "open_ticket",
            "Open a support ticket.",
            json!({"title": {"type": "string"}, "priority": {"type": "integer", "minimum": 1, "maximum": 5}}),
            &["title", "priority"],
        ),
        tool(
            "close_ticket",
            "Close a ticket with a resolution.",
            json!({"resolution": {"type": "string", "enum": ["fixed", "duplicate", "wont_fix"]}}),
            &["resolution"],
        ),
        tool(
            "assign_ticket",
            "Assign a ticket to a person.",
            json!({"assignee": {"type": "string"}}),
            &["assignee"],
        ),
        tool(
            "add_comment",
            "Add a comment to a ticket.",
            json!({"text": {"type": "string"}}),
            &["text"],
        ),
    ])
}

/// The long system prompt every tools request shares (a cacheable prefix).
fn tools_system_prompt() -> String {
    let mut s = String::from(
        "You are the dispatcher of a support desk. You act only through the tools you are \
         given. For every user message, call exactly one tool, with arguments that follow its \
         schema, and do not answer in prose. The ticket id the user gives is opaque: copy it \
         exactly, character for character, into the `ticket` argument.\n\nDesk rules:\n",
    );
    for i in 1..=40 {
        s.push_str(&format!(
            "{i}. Rule {i}: keep ticket ids exact; never reuse an id from another request; \
             prefer the most specific tool; never invent fields the schema does not define.\n"
        ));
    }
    s
}

/// The prompt text of request `i` of `check` (the user message; the input for Responses).
fn prompt_text(check: Check, i: u32, canary: Option<&str>) -> String {
    let marker = canary.unwrap_or("T-0");
    match check {
        Check::Coding => {
            let (name, what) = FUNCTIONS[i as usize % FUNCTIONS.len()];
            let start = canary
                .map(|c| format!("Start your reply with {c} on its own line. "))
                .unwrap_or_default();
            format!(
                "{start}Write a Python function named `{name}` that {what}. Give the code in \
                 one fenced code block."
            )
        }
        Check::StructuredJson => format!(
            "Describe one support ticket as JSON. Use {marker} as its id, pick a status and a \
             priority, name its owner and team, and add a few tags."
        ),
        Check::Tools => {
            let names = [
                "open_ticket",
                "close_ticket",
                "assign_ticket",
                "add_comment",
            ];
            let name = names[i as usize % names.len()];
            format!("Call `{name}` for ticket {marker}.")
        }
        Check::Responses => {
            let start = canary
                .map(|c| format!("Begin with {c} and then "))
                .unwrap_or_default();
            format!("{start}write about 24 words on why streamed responses matter.")
        }
    }
}

/// The JSON body of request `i` (0-based within its check).
pub fn body(check: Check, i: u32, canary: Option<&str>, opts: &RequestOptions) -> Value {
    let text = prompt_text(check, i, canary);
    let mut body = match check {
        Check::Responses => json!({
            "model": opts.model,
            "input": text,
            "stream": true,
            "temperature": 0.0,
        }),
        _ => {
            let mut messages = Vec::new();
            if check == Check::Tools {
                messages.push(json!({"role": "system", "content": tools_system_prompt()}));
            }
            messages.push(json!({"role": "user", "content": text}));
            json!({
                "model": opts.model,
                "messages": messages,
                "stream": true,
                "stream_options": {"include_usage": true},
                "temperature": 0.0,
            })
        }
    };
    let o = body.as_object_mut().expect("a JSON object");
    if let Some(max) = opts.max_tokens {
        let key = if check == Check::Responses {
            "max_output_tokens"
        } else {
            "max_tokens"
        };
        o.insert(key.into(), json!(max));
    }
    if let Some(kwargs) = opts.thinking_kwargs(check.api()) {
        o.insert("chat_template_kwargs".into(), kwargs);
    }
    match check {
        Check::StructuredJson => {
            o.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": {
                    "name": "ticket", "strict": true, "schema": ticket_schema()
                }}),
            );
        }
        Check::Tools => {
            o.insert("tools".into(), tools());
            o.insert("tool_choice".into(), json!("auto"));
            o.insert("parallel_tool_calls".into(), json!(false));
        }
        _ => {}
    }
    body
}

/// The prepared request `index` of a functional run of `requests`, for run `run_id`.
pub fn prepare(
    opts: &RequestOptions,
    run_id: &str,
    index: u32,
    requests: u32,
    canary: Option<String>,
) -> Result<(Check, PreparedRequest), RequestError> {
    let check = check_of(index, requests);
    let per = (requests / 4).max(1);
    let position = Check::ALL.iter().position(|c| *c == check).unwrap_or(0) as u32;
    let within = index - position * per;
    let value = body(check, within, canary.as_deref(), opts);
    let bytes = serde_json::to_vec(&value).map_err(|source| RequestError::Serialise {
        request_index: index,
        source,
    })?;
    let prompt = prompt_text(check, within, canary.as_deref());
    let request_id = HeaderValue::from_str(&format!("{run_id}-{index}")).map_err(|_| {
        RequestError::BadRunId {
            run_id: run_id.to_owned(),
        }
    })?;
    Ok((
        check,
        PreparedRequest {
            request_index: index,
            api: check.api(),
            body: Bytes::from(bytes),
            request_id,
            canary,
            prompt_sha256: artifact::prompt_sha256(&prompt),
            prompt_chars: prompt.chars().count() as u64,
            filler_units: 0,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> RequestOptions {
        RequestOptions {
            api: Api::Chat,
            model: "m".into(),
            max_tokens: Some(512),
            thinking_disabled: true,
            omit_thinking_kwarg: false,
        }
    }

    #[test]
    fn phases_split_the_requests_evenly_in_check_order() {
        assert_eq!(phases(6), None);
        assert_eq!(phases(0), None);
        let p = phases(12).unwrap();
        let names: Vec<_> = p
            .iter()
            .map(|p| (p.check.name(), p.start, p.end, p.concurrency))
            .collect();
        assert_eq!(
            names,
            [
                ("coding", 0, 3, 1),
                ("structured_json", 3, 6, 3),
                ("tools", 6, 9, 3),
                ("responses", 9, 12, 1)
            ]
        );
        assert_eq!(check_of(8, 12), Check::Tools);
    }

    #[test]
    fn bodies_carry_what_each_check_needs() {
        let c = Some("ANV-0123456789ab");
        let coding = body(Check::Coding, 1, c, &opts());
        let text = coding["messages"][0]["content"].as_str().unwrap();
        assert!(
            text.contains("named `is_palindrome`")
                && text.starts_with("Start your reply with ANV-0123456789ab")
        );
        let sj = body(Check::StructuredJson, 0, c, &opts());
        assert_eq!(sj["response_format"]["json_schema"]["strict"], true);
        assert_eq!(
            sj["response_format"]["json_schema"]["schema"],
            ticket_schema()
        );
        let t0 = body(Check::Tools, 0, c, &opts());
        let t1 = body(Check::Tools, 1, Some("ANV-00000000000f"), &opts());
        assert_eq!(t0["messages"][0], t1["messages"][0], "shared system prefix");
        assert_eq!(t0["tools"], t1["tools"], "shared tool definitions");
        assert_ne!(t0["messages"][1], t1["messages"][1]);
        assert!(t0["messages"][0]["content"].as_str().unwrap().len() > 3000);
        let r = body(Check::Responses, 0, c, &opts());
        assert_eq!(r["max_output_tokens"], 512);
        assert!(
            r["input"]
                .as_str()
                .unwrap()
                .starts_with("Begin with ANV-0123456789ab")
        );
        assert_eq!(r["chat_template_kwargs"], json!({"enable_thinking": false}));
    }

    #[test]
    fn the_schemas_are_valid_json_schemas() {
        assert!(jsonschema::validator_for(&ticket_schema()).is_ok());
        for t in tools().as_array().unwrap() {
            assert!(jsonschema::validator_for(&t["function"]["parameters"]).is_ok());
            assert_eq!(t["function"]["parameters"]["required"][0], "ticket");
        }
    }
}
