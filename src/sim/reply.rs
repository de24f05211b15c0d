//! Reply generation: what the simulated model says, as token pieces.
//!
//! Everything is drawn from a generator seeded by the server seed and the request body, so
//! the same seed and request give the same reply. Generated words come from a vocabulary
//! of short alphabetic words with a leading space, so each is exactly one token; canaries,
//! JSON and tool arguments are split by the tokenizer, so `completion_tokens` is exact.
//!
//! - A canary in the prompt (`canary::find_first`) starts the content; under `json_schema`
//!   or tools it is the first string value instead.
//! - Length: "about N words" in the prompt → N words (finish `stop`); otherwise a seeded
//!   log-normal draw around `--mean-words`; `max_tokens` (and the context) cut it short
//!   with finish `length`.
//! - `enable_thinking: true` → reasoning pieces first (they count against `max_tokens`).

use rand::{Rng, rngs::StdRng};
use rand_distr::{Distribution, LogNormal};
use serde_json::{Map, Value};

use super::api::Tool;
use super::tokenizer;

const WORDS: &[&str] = &[
    "the", "a", "of", "and", "to", "in", "is", "it", "that", "was", "for", "on", "are", "with",
    "as", "be", "at", "one", "have", "this", "from", "by", "hot", "word", "but", "what", "some",
    "we", "can", "out", "were", "all", "when", "up", "use", "your", "how", "said", "an", "each",
    "she", "do", "time", "if", "will", "way", "many", "then", "them", "like", "long", "make",
    "see", "him", "two", "has", "look", "more", "day", "go", "come", "did", "no", "most", "over",
    "know", "than", "call", "who", "may", "down", "side", "been", "now", "find",
];
const THOUGHTS: &[&str] = &[
    "hmm", "so", "the", "user", "asks", "for", "this", "let", "me", "plan", "step", "one", "then",
    "two", "next", "ok", "keep", "it", "and", "what", "do", "they", "want", "good", "now", "note",
];

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    Stop,
    Length,
    ToolCalls,
}

impl Finish {
    pub fn as_str(self) -> &'static str {
        match self {
            Finish::Stop => "stop",
            Finish::Length => "length",
            Finish::ToolCalls => "tool_calls",
        }
    }
}

/// A tool call: its header (id and name) and its arguments as token pieces.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// Tokens the header counts for (the name's tokens).
    pub name_tokens: u32,
    pub args: Vec<String>,
}

/// What the model says.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub reasoning: Vec<String>,
    pub content: Vec<String>,
    pub tool: Option<ToolCall>,
    pub finish: Finish,
}

impl Reply {
    pub fn completion_tokens(&self) -> u32 {
        let tool = self
            .tool
            .as_ref()
            .map_or(0, |t| t.name_tokens + t.args.len() as u32);
        (self.reasoning.len() + self.content.len()) as u32 + tool
    }

    pub fn content_text(&self) -> String {
        self.content.concat()
    }

    pub fn reasoning_text(&self) -> String {
        self.reasoning.concat()
    }
}

/// What shapes a reply beyond the request itself.
#[derive(Debug, Clone)]
pub struct ReplyInputs<'a> {
    /// The request's own canary.
    pub canary: Option<&'a str>,
    /// Another request's canary to leak (contaminate fault).
    pub foreign_canary: Option<&'a str>,
    /// Another request's canary to leak into tool arguments (tool-contaminate fault).
    pub tool_foreign_canary: Option<&'a str>,
    pub requested_words: Option<u32>,
    /// `ignore_eos`: the reply runs to the cap.
    pub ignore_eos: bool,
    /// `min_tokens`: the reply is at least this long (within the cap).
    pub min_tokens: u32,
    /// The function a coding prompt names: the reply is a fenced Python block defining it.
    pub code_function: Option<&'a str>,
    /// Completion token ceiling: min(max_tokens, context left).
    pub cap: u32,
    pub mean_words: u32,
    pub thinking: bool,
    pub json_schema: Option<&'a Value>,
    pub tools: &'a [Tool],
    pub forced_tool: Option<&'a str>,
    /// bad-json fault: truncate structured content.
    pub bad_json: bool,
    /// wrong-tool fault: call a function that was not offered.
    pub wrong_tool: bool,
}

fn owned_pieces(text: &str) -> Vec<String> {
    tokenizer::pieces(text)
        .into_iter()
        .map(str::to_string)
        .collect()
}

fn word(rng: &mut StdRng, list: &[&str]) -> String {
    format!(" {}", list[rng.random_range(0..list.len())])
}

/// Generate the reply.
pub fn generate(inp: &ReplyInputs<'_>, rng: &mut StdRng) -> Reply {
    let mut budget = inp.cap;
    let mut truncated = false;
    let mut reasoning = Vec::new();
    if inp.thinking {
        let n = rng.random_range(16..=48u32);
        let take = n.min(budget);
        truncated |= take < n;
        for i in 0..take {
            let w = word(rng, THOUGHTS);
            reasoning.push(if i == 0 {
                w.trim_start().to_string()
            } else {
                w
            });
        }
        budget -= take;
    }

    // The canary text that goes into the first string of structured output.
    let mut slot = match (inp.canary, inp.foreign_canary) {
        (Some(own), Some(f)) => Some(format!("{own} {f}")),
        (Some(own), None) => Some(own.to_string()),
        (None, Some(f)) => Some(f.to_string()),
        (None, None) => None,
    };

    if !inp.tools.is_empty() {
        let tool = match inp.forced_tool {
            Some(n) => inp
                .tools
                .iter()
                .find(|t| t.name == n)
                .unwrap_or(&inp.tools[0]),
            None => &inp.tools[rng.random_range(0..inp.tools.len())],
        };
        let name = if inp.wrong_tool {
            format!("{}_not_offered", tool.name)
        } else {
            tool.name.clone()
        };
        if let Some(f) = inp.tool_foreign_canary {
            slot = Some(match slot {
                Some(s) => format!("{s} {f}"),
                None => f.to_string(),
            });
        }
        let args = gen_value(&tool.parameters, &tool.parameters, rng, &mut slot, 0).to_string();
        let mut args = owned_pieces(&args);
        let name_tokens = tokenizer::count(&name).max(1) as u32;
        let finish = if name_tokens + args.len() as u32 > budget || truncated {
            args.truncate(budget.saturating_sub(name_tokens) as usize);
            Finish::Length
        } else {
            Finish::ToolCalls
        };
        let id = format!("call_{:016x}", rng.random::<u64>());
        return Reply {
            reasoning,
            content: Vec::new(),
            tool: Some(ToolCall {
                id,
                name,
                name_tokens: name_tokens.min(budget.max(1)),
                args,
            }),
            finish,
        };
    }

    let mut content = if let Some(schema) = inp.json_schema {
        let text = gen_value(schema, schema, rng, &mut slot, 0).to_string();
        let mut p = owned_pieces(&text);
        if inp.bad_json {
            // Drop the closing third: the JSON no longer parses.
            let keep = (p.len() * 2 / 3).max(1).min(p.len().saturating_sub(1));
            p.truncate(keep);
        }
        p
    } else {
        let mut p = Vec::new();
        if let Some(c) = inp.canary {
            p.extend(owned_pieces(c));
        }
        if let Some(f) = inp.foreign_canary {
            p.extend(owned_pieces(&format!(" {f}")));
        }
        if let Some(name) = inp.code_function {
            let doc = words_text(rng, 8);
            let code = format!(
                "\n```python\ndef {name}(*args):\n    \"\"\"{doc}.\"\"\"\n    return args\n```\n"
            );
            p.extend(owned_pieces(&code));
            if p.len() as u32 > budget {
                p.truncate(budget as usize);
                truncated = true;
            }
            return Reply {
                reasoning,
                content: p,
                tool: None,
                finish: if truncated {
                    Finish::Length
                } else {
                    Finish::Stop
                },
            };
        }
        let n = inp.requested_words.unwrap_or_else(|| {
            let mean = inp.mean_words.max(1) as f64;
            // Log-normal with sigma 0.5 and the requested mean: exp(mu + sigma²/2) = mean.
            let sigma = 0.5;
            let mu = mean.ln() - sigma * sigma / 2.0;
            let d = LogNormal::new(mu, sigma)
                .unwrap_or_else(|_| LogNormal::new(0.0, 0.5).expect("valid"));
            d.sample(rng).round().clamp(1.0, 8192.0) as u32
        });
        let n = if inp.ignore_eos {
            u32::MAX
        } else {
            n.max(inp.min_tokens.saturating_sub(p.len() as u32))
        };
        for _ in 0..n.min(budget.saturating_add(1)) {
            p.push(word(rng, WORDS));
        }
        if p.first().is_some_and(|w| w.starts_with(' '))
            && inp.canary.is_none()
            && inp.foreign_canary.is_none()
        {
            p[0] = p[0].trim_start().to_string();
        }
        p
    };
    if content.len() as u32 > budget {
        content.truncate(budget as usize);
        truncated = true;
    }
    Reply {
        reasoning,
        content,
        tool: None,
        finish: if truncated {
            Finish::Length
        } else {
            Finish::Stop
        },
    }
}

/// Largest array and string a generated value gets, whatever the schema asks.
const MAX_ITEMS: usize = 64;
const MAX_STRING: usize = 4096;

fn resolve<'a>(schema: &'a Value, root: &'a Value) -> &'a Value {
    let mut s = schema;
    for _ in 0..16 {
        match s.get("$ref").and_then(Value::as_str) {
            Some("#") => s = root,
            Some(r) if r.starts_with("#/") => match root.pointer(&r[1..]) {
                Some(t) => s = t,
                None => return s,
            },
            _ => return s,
        }
    }
    s
}

fn words_text(rng: &mut StdRng, n: usize) -> String {
    (0..n)
        .map(|_| word(rng, WORDS))
        .collect::<String>()
        .trim_start()
        .to_string()
}

/// A value valid against `schema` (objects with properties/required, nested objects, enum,
/// const, arrays with min/maxItems, strings with length bounds and common formats, integers
/// and numbers with bounds, booleans, null, local `$ref`, anyOf/oneOf/allOf's first branch).
/// `slot` (the canary text) goes into the first plain string generated.
pub fn gen_value(
    schema: &Value,
    root: &Value,
    rng: &mut StdRng,
    slot: &mut Option<String>,
    depth: u32,
) -> Value {
    let s = resolve(schema, root);
    if depth > 12 {
        return Value::Null;
    }
    let Some(o) = s.as_object() else {
        return Value::Object(Map::new());
    };
    if let Some(c) = o.get("const") {
        return c.clone();
    }
    if let Some(e) = o
        .get("enum")
        .and_then(Value::as_array)
        .filter(|e| !e.is_empty())
    {
        return e[rng.random_range(0..e.len())].clone();
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(b) = o.get(key).and_then(Value::as_array).and_then(|a| a.first()) {
            if key == "allOf"
                && o.get("allOf")
                    .and_then(Value::as_array)
                    .is_some_and(|a| a.len() > 1)
            {
                // Merge object branches' properties and required lists.
                let mut props = Map::new();
                let mut req = Vec::new();
                for br in o["allOf"].as_array().into_iter().flatten() {
                    let br = resolve(br, root);
                    if let Some(p) = br.get("properties").and_then(Value::as_object) {
                        props.extend(p.clone());
                    }
                    if let Some(r) = br.get("required").and_then(Value::as_array) {
                        req.extend(r.iter().cloned());
                    }
                }
                let merged =
                    serde_json::json!({"type": "object", "properties": props, "required": req});
                return gen_value(&merged, root, rng, slot, depth + 1);
            }
            return gen_value(b, root, rng, slot, depth + 1);
        }
    }
    let ty = match o.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if o.contains_key("properties") => "object",
        _ if o.contains_key("items") => "array",
        _ => "string",
    };
    match ty {
        "object" => {
            let mut out = Map::new();
            if let Some(props) = o.get("properties").and_then(Value::as_object) {
                for (k, v) in props {
                    out.insert(k.clone(), gen_value(v, root, rng, slot, depth + 1));
                }
            }
            for r in o
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(k) = r.as_str()
                    && !out.contains_key(k)
                {
                    let v = match o.get("additionalProperties") {
                        Some(ap @ Value::Object(_)) => gen_value(ap, root, rng, slot, depth + 1),
                        _ => Value::String(words_text(rng, 2)),
                    };
                    out.insert(k.to_string(), v);
                }
            }
            Value::Object(out)
        }
        "array" => {
            let min = o.get("minItems").and_then(Value::as_u64).unwrap_or(0) as usize;
            let max = o
                .get("maxItems")
                .and_then(Value::as_u64)
                .map_or(usize::MAX, |m| m as usize);
            // Capped so a hostile schema cannot make the reply huge.
            let lo = min.max(1).min(max).min(MAX_ITEMS);
            let hi = (lo + 2).min(max).max(lo);
            let n = rng.random_range(lo..=hi);
            let prefix = o.get("prefixItems").and_then(Value::as_array);
            let items = o.get("items").cloned().unwrap_or(Value::Object(Map::new()));
            let unique = o
                .get("uniqueItems")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let mut out: Vec<Value> = Vec::with_capacity(n);
            let mut tries = 0;
            while out.len() < n && tries < n * 8 + 8 {
                tries += 1;
                let item_schema = prefix.and_then(|p| p.get(out.len())).unwrap_or(&items);
                let v = gen_value(item_schema, root, rng, slot, depth + 1);
                if unique && out.contains(&v) {
                    continue;
                }
                out.push(v);
            }
            Value::Array(out)
        }
        "integer" => {
            let (lo, hi) = int_bounds(o);
            Value::from(rng.random_range(lo..=hi))
        }
        "number" => {
            let (lo, hi) = int_bounds(o);
            let v = rng.random_range(lo..=hi) as f64;
            let frac = if hi > lo && v < hi as f64 { 0.25 } else { 0.0 };
            serde_json::Number::from_f64(v + frac).map_or(Value::from(v as i64), Value::Number)
        }
        "boolean" => Value::Bool(rng.random()),
        "null" => Value::Null,
        _ => Value::String(gen_string(o, rng, slot)),
    }
}

fn int_bounds(o: &Map<String, Value>) -> (i64, i64) {
    let num = |k: &str| o.get(k).and_then(Value::as_f64);
    let lo = num("minimum")
        .map(|m| m.ceil())
        .or(num("exclusiveMinimum").map(|m| m.floor() + 1.0))
        .unwrap_or(0.0);
    let hi = num("maximum")
        .map(|m| m.floor())
        .or(num("exclusiveMaximum").map(|m| m.ceil() - 1.0))
        .unwrap_or(lo.max(0.0) + 100.0);
    let lo = lo.clamp(-1e15, 1e15) as i64;
    let hi = hi.clamp(-1e15, 1e15) as i64;
    (lo, hi.max(lo))
}

fn gen_string(o: &Map<String, Value>, rng: &mut StdRng, slot: &mut Option<String>) -> String {
    let min = o.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
    let max = o
        .get("maxLength")
        .and_then(Value::as_u64)
        .map_or(usize::MAX, |m| m as usize);
    let fixed = match o.get("format").and_then(Value::as_str) {
        Some("date") => Some("2026-01-01"),
        Some("date-time") => Some("2026-01-01T00:00:00Z"),
        Some("time") => Some("00:00:00Z"),
        Some("email") => Some("sim@example.com"),
        Some("uri") | Some("url") => Some("https://example.com/sim"),
        Some("uuid") => Some("00000000-0000-4000-8000-000000000000"),
        _ => None,
    };
    if let Some(f) = fixed {
        return f.to_string();
    }
    let mut s = match slot.take() {
        Some(c) if c.len() <= max => c,
        Some(c) => {
            *slot = Some(c);
            words_text(rng, 3)
        }
        None => {
            let n = rng.random_range(2..=4);
            words_text(rng, n)
        }
    };
    while s.chars().count() < min.min(MAX_STRING) {
        s.push_str(&word(rng, WORDS));
    }
    if s.chars().count() > max {
        s = s.chars().take(max).collect();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn inputs<'a>() -> ReplyInputs<'a> {
        ReplyInputs {
            canary: None,
            foreign_canary: None,
            tool_foreign_canary: None,
            requested_words: None,
            ignore_eos: false,
            min_tokens: 0,
            code_function: None,
            cap: 1000,
            mean_words: 50,
            thinking: false,
            json_schema: None,
            tools: &[],
            forced_tool: None,
            bad_json: false,
            wrong_tool: false,
        }
    }

    #[test]
    fn a_coding_prompt_gets_a_fenced_block_defining_the_function() {
        let mut rng = StdRng::seed_from_u64(1);
        let r = generate(
            &ReplyInputs {
                canary: Some("ANV-0123456789ab"),
                code_function: Some("clamp"),
                ..inputs()
            },
            &mut rng,
        );
        let text = r.content_text();
        assert!(
            text.starts_with("ANV-0123456789ab\n```python\ndef clamp("),
            "{text}"
        );
        assert!(text.trim_end().ends_with("```"), "{text}");
        assert_eq!(r.finish, Finish::Stop);
    }

    #[test]
    fn words_are_one_token_each() {
        for w in WORDS.iter().chain(THOUGHTS) {
            assert_eq!(tokenizer::count(&format!(" {w}")), 1, "{w}");
        }
    }

    #[test]
    fn ignore_eos_runs_to_the_cap_and_min_tokens_lengthens_a_short_reply() {
        let mut rng = StdRng::seed_from_u64(1);
        let r = generate(
            &ReplyInputs {
                cap: 300,
                requested_words: Some(10),
                ignore_eos: true,
                ..inputs()
            },
            &mut rng,
        );
        assert_eq!((r.completion_tokens(), r.finish), (300, Finish::Length));
        let r = generate(
            &ReplyInputs {
                requested_words: Some(10),
                min_tokens: 40,
                ..inputs()
            },
            &mut rng,
        );
        assert_eq!((r.completion_tokens(), r.finish), (40, Finish::Stop));
    }

    #[test]
    fn canary_leads_and_counts_are_exact() {
        let mut rng = StdRng::seed_from_u64(1);
        let c = "ANV-0123456789ab";
        let r = generate(
            &ReplyInputs {
                canary: Some(c),
                requested_words: Some(10),
                ..inputs()
            },
            &mut rng,
        );
        let text = r.content_text();
        assert!(text.starts_with(c), "{text}");
        assert_eq!(r.completion_tokens() as usize, tokenizer::count(&text));
        assert_eq!(r.content.len(), 5 + 10);
        assert_eq!(r.finish, Finish::Stop);
        let r = generate(
            &ReplyInputs {
                cap: 7,
                requested_words: Some(10),
                ..inputs()
            },
            &mut rng,
        );
        assert_eq!((r.completion_tokens(), r.finish), (7, Finish::Length));
    }

    #[test]
    fn odd_schemas_do_not_panic_or_explode() {
        let mut rng = StdRng::seed_from_u64(0);
        for schema in [
            serde_json::json!({"type": "array", "minItems": 1_000_000_000u64, "items": {"type": "string", "minLength": 1_000_000_000u64}}),
            serde_json::json!({"$ref": "#/nowhere"}),
            serde_json::json!({"$ref": "#"}),
            serde_json::json!(true),
            serde_json::json!({"type": ["null"]}),
            serde_json::json!({"enum": []}),
            serde_json::json!({"type": "integer", "minimum": 10, "maximum": 2}),
            serde_json::json!({"type": "number", "exclusiveMinimum": 1e300}),
            serde_json::json!({"anyOf": []}),
            serde_json::json!({"allOf": [{"properties": {"a": {"type": "string"}}}, {"required": ["b"]}]}),
        ] {
            let v = gen_value(&schema, &schema, &mut rng, &mut None, 0);
            assert!(v.to_string().len() < 1_000_000, "{schema}");
        }
    }

    #[test]
    fn schema_values_validate() {
        let schema = serde_json::json!({
            "type": "object", "required": ["name", "tags", "n", "kind", "inner"],
            "properties": {
                "name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
                "n": {"type": "integer", "minimum": 3, "maximum": 9}, "x": {"type": "number"},
                "kind": {"enum": ["a", "b"]}, "ok": {"type": "boolean"},
                "inner": {"$ref": "#/$defs/inner"}
            },
            "$defs": {"inner": {"type": "object", "properties": {"d": {"type": "string", "format": "date"}}, "required": ["d"]}},
            "additionalProperties": false
        });
        let v = jsonschema::validator_for(&schema).unwrap();
        for seed in 0..50 {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut slot = Some("ANV-0123456789ab".to_string());
            let val = gen_value(&schema, &schema, &mut rng, &mut slot, 0);
            assert!(v.is_valid(&val), "{val}");
            assert_eq!(val["name"], "ANV-0123456789ab");
        }
    }
}
