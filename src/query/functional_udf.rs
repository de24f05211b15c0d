//! SQL functions for the functional checks, registered on every anvil session:
//!
//! - `json_pointer(text, pointer)`: the value at a JSON Pointer (RFC 6901) of a JSON text:
//!   a string value as its text, any other value as compact JSON; NULL when the text is not
//!   JSON or nothing is there;
//! - `json_schema_error(instance, schema)`: NULL when the JSON text `instance` is valid
//!   against the JSON Schema text `schema` (the `jsonschema` crate, the schema's own draft),
//!   otherwise the first problem: `not JSON: …`, `at /owner/email: … is not of type …`, or
//!   `invalid schema: …`;
//! - `json_schema_valid(instance, schema)`: whether `json_schema_error` is NULL;
//! - `json_find(text, array_pointer, key_pointer, value)`: the first element of the array at
//!   `array_pointer` whose `key_pointer` value is `value`, as compact JSON (e.g. the offered
//!   tool a call names: `json_find(request_body, '/tools', '/function/name', name)`);
//! - `tool_calls(deltas)`: the tool calls assembled from a request's streamed tool-call
//!   fragments (a list of the `events.tool_call_delta` texts in `seq` order) as a JSON array
//!   of `{"index", "id", "name", "arguments"}`, `arguments` the concatenated argument
//!   fragments (a JSON text when the stream was whole, parsed by the caller).
//!
//! NULL inputs give NULL (`tool_calls` of an empty or NULL list gives `[]`).

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanBuilder, GenericListArray, StringBuilder,
};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::types::logical_string;
use datafusion::common::{Result, ScalarValue, plan_err};
use datafusion::logical_expr::{
    Coercion, ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    TypeSignature, TypeSignatureClass, Volatility,
};
use datafusion::prelude::SessionContext;
use serde_json::{Map, Value, json};

/// Register the functional-check functions on `ctx`.
pub fn register(ctx: &SessionContext) {
    for f in [TextFn::Pointer, TextFn::SchemaError, TextFn::SchemaValid] {
        ctx.register_udf(ScalarUDF::from(TextUdf::new(f)));
    }
    ctx.register_udf(ScalarUDF::from(ToolCalls::new()));
    ctx.register_udf(ScalarUDF::from(JsonFind::new()));
}

/// Names and descriptions of these functions, for `--list`.
pub const FUNCTIONS: [(&str, &str); 5] = [
    (
        "json_pointer(text, pointer)",
        "scalar: value at a JSON Pointer of a JSON text (strings unquoted), NULL when absent",
    ),
    (
        "json_schema_error(instance, schema)",
        "scalar: NULL when the JSON text is valid against the JSON Schema, else the first error",
    ),
    (
        "json_schema_valid(instance, schema)",
        "scalar: whether the JSON text is valid against the JSON Schema",
    ),
    (
        "json_find(text, array_pointer, key_pointer, value)",
        "scalar: first element of the array whose key equals value, as JSON",
    ),
    (
        "tool_calls(deltas)",
        "scalar: tool calls assembled from a list of streamed tool_call_delta texts, as JSON",
    ),
];

/// The value at `pointer` in the JSON `text`.
pub fn json_pointer(text: &str, pointer: &str) -> Option<String> {
    let value: Value = serde_json::from_str(text).ok()?;
    match value.pointer(pointer)? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// The first element of the array at `array_pointer` in `text` whose value at
/// `key_pointer` is `value` (a string compared as its text, anything else as compact JSON).
pub fn json_find(
    text: &str,
    array_pointer: &str,
    key_pointer: &str,
    value: &str,
) -> Option<String> {
    let doc: Value = serde_json::from_str(text).ok()?;
    doc.pointer(array_pointer)?
        .as_array()?
        .iter()
        .find(|e| match e.pointer(key_pointer) {
            Some(Value::String(s)) => s == value,
            Some(Value::Null) | None => false,
            Some(other) => serde_json::from_str::<Value>(value).is_ok_and(|v| &v == other),
        })
        .map(Value::to_string)
}

/// The first reason `instance` is not valid against `schema`, or `None`.
pub fn json_schema_error(instance: &str, schema: &str) -> Option<String> {
    let instance: Value = match serde_json::from_str(instance) {
        Ok(v) => v,
        // serde_json refuses numbers beyond f64's range: the text is JSON, unverifiable here.
        Err(e) if e.to_string().starts_with("number out of range") => {
            return Some(format!(
                "valid JSON, but a number is beyond a 64-bit float's range ({e}): the schema could not be checked"
            ));
        }
        Err(e) => return Some(format!("not JSON: {e}")),
    };
    let schema: Value = match serde_json::from_str(schema) {
        Ok(v) => v,
        Err(e) => return Some(format!("invalid schema: not JSON: {e}")),
    };
    let validator = match jsonschema::validator_for(&schema) {
        Ok(v) => v,
        Err(e) => return Some(format!("invalid schema: {e}")),
    };
    validator.iter_errors(&instance).next().map(|e| {
        let at = e.instance_path().to_string();
        format!("at {}: {e}", if at.is_empty() { "/" } else { &at })
    })
}

/// One tool call being assembled.
#[derive(Debug, Default)]
struct Call {
    id: Option<String>,
    name: Option<String>,
    arguments: String,
    /// Whether argument fragments arrived (a `.done` event's full text is used otherwise).
    streamed: bool,
}

/// Tool calls assembled from streamed fragments, in index order, as a JSON array.
///
/// Chat Completions fragments are `delta.tool_calls` arrays: entries with an `index`, the
/// `id` and `function.name` once, and `function.arguments` pieces to concatenate (a piece
/// may end inside a JSON string or an escape; only the concatenation is JSON). Responses
/// fragments are `response.function_call_arguments.delta` events (`delta`, by
/// `output_index`), their `.done` event (`arguments` whole), and `function_call` items
/// (`call_id`, `name`). A fragment that is not JSON is skipped.
pub fn assemble_tool_calls<'a>(fragments: impl IntoIterator<Item = &'a str>) -> Value {
    let mut calls: BTreeMap<i64, Call> = BTreeMap::new();
    let index_of = |v: &Value, key: &str| v.get(key).and_then(Value::as_i64).unwrap_or(0);
    for fragment in fragments {
        let Ok(value) = serde_json::from_str::<Value>(fragment) else {
            continue;
        };
        match &value {
            Value::Array(entries) => {
                for entry in entries {
                    let call = calls.entry(index_of(entry, "index")).or_default();
                    if let Some(id) = entry.get("id").and_then(Value::as_str)
                        && call.id.is_none()
                    {
                        call.id = Some(id.to_owned());
                    }
                    if let Some(name) = entry.pointer("/function/name").and_then(Value::as_str)
                        && !name.is_empty()
                        && call.name.is_none()
                    {
                        call.name = Some(name.to_owned());
                    }
                    if let Some(piece) =
                        entry.pointer("/function/arguments").and_then(Value::as_str)
                    {
                        call.arguments.push_str(piece);
                        call.streamed = true;
                    }
                }
            }
            Value::Object(o) => {
                let kind = o.get("type").and_then(Value::as_str).unwrap_or("");
                let call = calls.entry(index_of(&value, "output_index")).or_default();
                match kind {
                    "function_call" => {
                        if call.id.is_none() {
                            call.id = o.get("call_id").and_then(Value::as_str).map(Into::into);
                        }
                        if call.name.is_none() {
                            call.name = o.get("name").and_then(Value::as_str).map(Into::into);
                        }
                        if !call.streamed
                            && let Some(a) = o.get("arguments").and_then(Value::as_str)
                        {
                            call.arguments = a.to_owned();
                        }
                    }
                    "response.function_call_arguments.delta" => {
                        if let Some(piece) = o.get("delta").and_then(Value::as_str) {
                            call.arguments.push_str(piece);
                            call.streamed = true;
                        }
                    }
                    "response.function_call_arguments.done" if !call.streamed => {
                        if let Some(a) = o.get("arguments").and_then(Value::as_str) {
                            call.arguments = a.to_owned();
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    Value::Array(
        calls
            .into_iter()
            .map(|(index, c)| {
                let mut m = Map::new();
                m.insert("index".into(), json!(index));
                m.insert("id".into(), c.id.map_or(Value::Null, Value::String));
                m.insert("name".into(), c.name.map_or(Value::Null, Value::String));
                m.insert("arguments".into(), Value::String(c.arguments));
                Value::Object(m)
            })
            .collect(),
    )
}

/// The text-to-text functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum TextFn {
    Pointer,
    SchemaError,
    SchemaValid,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct TextUdf {
    f: TextFn,
    signature: Signature,
}

impl TextUdf {
    fn new(f: TextFn) -> Self {
        let text = || Coercion::new_exact(TypeSignatureClass::Native(logical_string()));
        Self {
            f,
            signature: Signature::coercible(vec![text(), text()], Volatility::Immutable),
        }
    }
}

/// The `N` arguments of `name` as Utf8 arrays of the call's row count.
fn string_args<const N: usize>(args: &ScalarFunctionArgs, name: &str) -> Result<[ArrayRef; N]> {
    if args.args.len() != N {
        return plan_err!("{name} takes {N} arguments");
    }
    let arrays = args
        .args
        .iter()
        .map(|c| {
            let array = c.to_array(args.number_rows)?;
            Ok(datafusion::arrow::compute::cast(&array, &DataType::Utf8)?)
        })
        .collect::<Result<Vec<ArrayRef>>>()?;
    Ok(arrays.try_into().expect("N arrays were checked above"))
}

/// A scalar result when every argument was scalar.
fn shaped(args: &ScalarFunctionArgs, out: ArrayRef) -> Result<ColumnarValue> {
    if args
        .args
        .iter()
        .all(|a| matches!(a, ColumnarValue::Scalar(_)))
    {
        Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?))
    } else {
        Ok(ColumnarValue::Array(out))
    }
}

impl ScalarUDFImpl for TextUdf {
    fn name(&self) -> &str {
        match self.f {
            TextFn::Pointer => "json_pointer",
            TextFn::SchemaError => "json_schema_error",
            TextFn::SchemaValid => "json_schema_valid",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(match self.f {
            TextFn::SchemaValid => DataType::Boolean,
            _ => DataType::Utf8,
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [a, b] = string_args::<2>(&args, self.name())?;
        let (a, b) = (a.as_string::<i32>(), b.as_string::<i32>());
        let pairs = a.iter().zip(b.iter());
        let out: ArrayRef = match self.f {
            TextFn::Pointer | TextFn::SchemaError => {
                let mut builder = StringBuilder::new();
                for (x, y) in pairs {
                    let value = match (x, y) {
                        (Some(x), Some(y)) if self.f == TextFn::Pointer => json_pointer(x, y),
                        (Some(x), Some(y)) => json_schema_error(x, y),
                        _ => None,
                    };
                    builder.append_option(value);
                }
                Arc::new(builder.finish())
            }
            TextFn::SchemaValid => {
                let mut builder = BooleanBuilder::new();
                for (x, y) in pairs {
                    builder.append_option(match (x, y) {
                        (Some(x), Some(y)) => Some(json_schema_error(x, y).is_none()),
                        _ => None,
                    });
                }
                Arc::new(builder.finish())
            }
        };
        shaped(&args, out)
    }
}

/// `json_find(text, array_pointer, key_pointer, value)`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonFind {
    signature: Signature,
}

impl JsonFind {
    fn new() -> Self {
        let text = || Coercion::new_exact(TypeSignatureClass::Native(logical_string()));
        Self {
            signature: Signature::coercible(
                vec![text(), text(), text(), text()],
                Volatility::Immutable,
            ),
        }
    }
}

impl ScalarUDFImpl for JsonFind {
    fn name(&self) -> &str {
        "json_find"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = string_args::<4>(&args, self.name())?;
        let s: Vec<_> = arrays.iter().map(|a| a.as_string::<i32>()).collect();
        let mut builder = StringBuilder::new();
        for i in 0..args.number_rows {
            let get = |k: usize| (!s[k].is_null(i)).then(|| s[k].value(i));
            builder.append_option(match (get(0), get(1), get(2), get(3)) {
                (Some(t), Some(a), Some(k), Some(v)) => json_find(t, a, k, v),
                _ => None,
            });
        }
        shaped(&args, Arc::new(builder.finish()))
    }
}

/// `tool_calls(deltas)`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ToolCalls {
    signature: Signature,
}

impl ToolCalls {
    fn new() -> Self {
        Self {
            signature: Signature::one_of(
                vec![
                    TypeSignature::ArraySignature(
                        datafusion::logical_expr::ArrayFunctionSignature::Array {
                            arguments: vec![datafusion::logical_expr::ArrayFunctionArgument::Array],
                            array_coercion: None,
                        },
                    ),
                    TypeSignature::Any(1),
                ],
                Volatility::Immutable,
            ),
        }
    }
}

impl ScalarUDFImpl for ToolCalls {
    fn name(&self) -> &str {
        "tool_calls"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let Some(arg) = args.args.first() else {
            return plan_err!("tool_calls takes one argument: tool_calls(list of texts)");
        };
        let array = arg.to_array(args.number_rows)?;
        let mut builder = StringBuilder::new();
        match array.data_type() {
            DataType::List(_) => push_lists(array.as_list::<i32>(), &mut builder)?,
            DataType::LargeList(_) => push_lists(array.as_list::<i64>(), &mut builder)?,
            DataType::Null => {
                for _ in 0..array.len() {
                    builder.append_value("[]");
                }
            }
            other => return plan_err!("tool_calls expects a list of texts, got {other}"),
        }
        shaped(&args, Arc::new(builder.finish()))
    }
}

fn push_lists<O: datafusion::arrow::array::OffsetSizeTrait>(
    lists: &GenericListArray<O>,
    builder: &mut StringBuilder,
) -> Result<()> {
    for i in 0..lists.len() {
        if lists.is_null(i) {
            builder.append_value("[]");
            continue;
        }
        let values = datafusion::arrow::compute::cast(&lists.value(i), &DataType::Utf8)?;
        let texts = values.as_string::<i32>();
        let calls = assemble_tool_calls(texts.iter().flatten());
        builder.append_value(calls.to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(pieces: &[&str]) -> Vec<String> {
        pieces
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let mut entry = json!({"index": 0, "function": {"arguments": p}});
                if i == 0 {
                    entry["id"] = json!("call_1");
                    entry["function"]["name"] = json!("open_ticket");
                }
                json!([entry]).to_string()
            })
            .collect()
    }

    #[test]
    fn arguments_split_inside_a_string_and_a_unicode_escape_reassemble() {
        // The arguments JSON is `{"ticket":"ANV-0123456789ab","note":"café"}` with the
        // é sent as the escape \u00e9, cut inside the string and inside the escape.
        let whole = r#"{"ticket":"ANV-0123456789ab","note":"caf\u00e9"}"#;
        let pieces = [&whole[..16], &whole[16..43], &whole[43..]];
        assert_eq!(
            pieces,
            [
                r#"{"ticket":"ANV-0"#,
                r#"123456789ab","note":"caf\u0"#,
                r#"0e9"}"#
            ]
        );
        let fragments = chat(&pieces);
        let calls = assemble_tool_calls(fragments.iter().map(String::as_str));
        assert_eq!(calls.as_array().unwrap().len(), 1);
        assert_eq!(calls[0]["name"], "open_ticket");
        assert_eq!(calls[0]["id"], "call_1");
        let args: Value = serde_json::from_str(calls[0]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(args["ticket"], "ANV-0123456789ab");
        assert_eq!(args["note"], "café");
    }

    #[test]
    fn parallel_calls_stay_apart_by_index() {
        let fragments = [
            r#"[{"index":0,"id":"a","function":{"name":"f","arguments":"{\"x\":"}}]"#,
            r#"[{"index":1,"id":"b","function":{"name":"g","arguments":"{\"y\":2}"}}]"#,
            r#"[{"index":0,"function":{"arguments":"1}"}}]"#,
            "not json",
        ];
        let calls = assemble_tool_calls(fragments);
        assert_eq!(calls.as_array().unwrap().len(), 2);
        assert_eq!(calls[0]["arguments"], r#"{"x":1}"#);
        assert_eq!(calls[1]["name"], "g");
        assert_eq!(calls[1]["arguments"], r#"{"y":2}"#);
    }

    #[test]
    fn responses_function_call_events_assemble() {
        let fragments = [
            r#"{"type":"function_call","call_id":"c1","name":"lookup","arguments":""}"#,
            r#"{"type":"response.function_call_arguments.delta","output_index":0,"delta":"{\"q\":"}"#,
            r#"{"type":"response.function_call_arguments.delta","output_index":0,"delta":"\"x\"}"}"#,
            r#"{"type":"response.function_call_arguments.done","output_index":0,"arguments":"{\"q\":\"x\"}"}"#,
        ];
        let calls = assemble_tool_calls(fragments);
        assert_eq!(calls[0]["name"], "lookup");
        assert_eq!(calls[0]["arguments"], r#"{"q":"x"}"#);
    }

    #[test]
    fn schema_errors_name_the_path() {
        let schema = r#"{"type":"object","properties":{"owner":{"type":"object",
            "properties":{"email":{"type":"string"}},"required":["email"]}},"required":["owner"]}"#;
        assert_eq!(
            json_schema_error(r#"{"owner":{"email":"a@b"}}"#, schema),
            None
        );
        let e = json_schema_error(r#"{"owner":{"email":5}}"#, schema).unwrap();
        assert!(e.starts_with("at /owner/email: "), "{e}");
        assert!(
            json_schema_error("{", schema)
                .unwrap()
                .starts_with("not JSON")
        );
        // A cut-off reply is a valid prefix: serde_json says so by EOF (functional_results
        // calls it truncated when the finish reason is the token ceiling).
        assert!(
            json_schema_error(r#"{"owner":{"email":"a@"#, schema)
                .unwrap()
                .starts_with("not JSON: EOF while parsing")
        );
        // A number beyond f64 is still JSON: the reason says so, not "not JSON".
        let e = json_schema_error(r#"{"owner":{"email":"a"},"n":1e999}"#, schema).unwrap();
        assert!(e.starts_with("valid JSON, but a number is beyond"), "{e}");
        assert!(
            json_schema_error("{}", "{\"type\": 5}")
                .unwrap()
                .starts_with("invalid schema")
        );
    }

    #[test]
    fn find_picks_the_offered_tool_by_name() {
        let body = r#"{"tools":[{"function":{"name":"a","parameters":{"type":"object"}}},
            {"function":{"name":"b","parameters":{"required":["x"]}}}]}"#;
        let b = json_find(body, "/tools", "/function/name", "b").unwrap();
        assert_eq!(
            json_pointer(&b, "/function/parameters/required/0").as_deref(),
            Some("x")
        );
        assert_eq!(json_find(body, "/tools", "/function/name", "c"), None);
        assert_eq!(json_find(body, "/nope", "/function/name", "a"), None);
    }

    #[test]
    fn pointers_unquote_strings_and_keep_other_json() {
        let t = r#"{"a":{"b":"x","c":[1,2]},"n":null}"#;
        assert_eq!(json_pointer(t, "/a/b").as_deref(), Some("x"));
        assert_eq!(json_pointer(t, "/a/c").as_deref(), Some("[1,2]"));
        assert_eq!(json_pointer(t, "/n"), None);
        assert_eq!(json_pointer(t, "/missing"), None);
        assert_eq!(json_pointer("nope", ""), None);
    }

    #[tokio::test]
    async fn the_functions_work_in_sql() {
        let session = crate::query::AnvilSession::from_artifacts(Vec::new())
            .await
            .unwrap();
        let r = session
            .query(
                "SELECT json_pointer('{\"a\":\"b\"}', '/a') AS p, \
                 json_schema_valid('{\"a\":1}', '{\"type\":\"object\"}') AS v, \
                 json_schema_error('[]', '{\"type\":\"object\"}') AS e, \
                 tool_calls(make_array('[{\"index\":0,\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]')) AS t",
            )
            .await
            .unwrap();
        let b = &r.batches[0];
        assert_eq!(b.column(0).as_string::<i32>().value(0), "b");
        assert!(b.column(1).as_boolean().value(0));
        assert!(
            b.column(2)
                .as_string::<i32>()
                .value(0)
                .starts_with("at /: ")
        );
        let t: Value = serde_json::from_str(b.column(3).as_string::<i32>().value(0)).unwrap();
        assert_eq!(t[0]["name"], "f");
    }
}
