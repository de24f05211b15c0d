//! Strict JSON for the documents a verdict rests on (workload manifests, run plans,
//! `run.json`): a key that appears twice in one object is an error naming the key, the object
//! it is in and the line, never "the last one wins" (a plan saying `"promotion_authorized":
//! false` and later `true` must not read as authorized).

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Parse `text` as one JSON value, refusing duplicate object keys. The error carries the
/// line and column (of the duplicate's value) like any other syntax error.
pub fn parse_strict(text: &str) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = Strict { at: "" }.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// A value at a JSON pointer-like location (`/stages/2`), for messages.
struct Strict<'a> {
    at: &'a str,
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom(format!("{v} is not a finite number")))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        Strict { at: self.at }.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            let at = format!("{}/{}", self.at, items.len());
            match seq.next_element_seed(Strict { at: &at })? {
                Some(item) => items.push(item),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let at = format!("{}/{key}", self.at);
            if object.contains_key(&key) {
                let within = if self.at.is_empty() {
                    "the top-level object".to_owned()
                } else {
                    format!("object {}", self.at)
                };
                return Err(de::Error::custom(format!(
                    "duplicate key `{key}` in {within}: a key may appear once (which value was \
                     meant is unknowable); remove one"
                )));
            }
            let value = map.next_value_seed(Strict { at: &at })?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equals_serde_json_on_documents_without_duplicates() {
        let text =
            r#"{"a": [1, -2, 3.5, {"b": null, "c": true}], "d": "é\n", "e": 18446744073709551615}"#;
        let expected: Value = serde_json::from_str(text).unwrap();
        assert_eq!(parse_strict(text).unwrap(), expected);
    }

    #[test]
    fn a_duplicate_key_is_an_error_with_its_object_and_line() {
        let text = "{\n  \"promotion_authorized\": false,\n  \"promotion_authorized\": true\n}";
        let e = parse_strict(text).unwrap_err().to_string();
        assert!(
            e.contains("duplicate key `promotion_authorized` in the top-level object"),
            "{e}"
        );
        assert!(e.contains("line 3"), "{e}");
        let e = parse_strict(r#"{"stages": [{"order": 1}, {"order": 2, "order": 3}]}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("duplicate key `order` in object /stages/1"),
            "{e}"
        );
    }

    #[test]
    fn the_same_key_in_different_objects_is_fine_and_trailing_text_is_not() {
        assert!(parse_strict(r#"{"a": {"x": 1}, "b": {"x": 2}}"#).is_ok());
        assert!(parse_strict(r#"{"a": 1} {"b": 2}"#).is_err());
    }
}
