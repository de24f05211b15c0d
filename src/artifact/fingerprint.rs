//! Workload fingerprints: `sha256:` + hex of the canonical JSON of a cell's workload section.
//!
//! Two artifacts may be compared head to head only if their workloads are the same; the
//! fingerprint makes that a string comparison. Canonical JSON here means: object keys sorted
//! (by their UTF-8 bytes) at every depth, no whitespace, strings escaped as `serde_json`
//! escapes them, and numbers normalised so that `4096`, `4096.0` and `4.096e3` are written
//! the same (`4096`). Integral floats within ±2^53 become integers; other floats use the
//! shortest round-trip form. The arm, topology (replica count, endpoints) and the per-run
//! prompt salt are not in the workload section, so they never enter the fingerprint.

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Prefix of every fingerprint string.
pub const PREFIX: &str = "sha256:";

/// Largest integer that an `f64` represents exactly, together with all smaller ones.
const MAX_EXACT_F64_INT: f64 = 9_007_199_254_740_992.0;

/// The canonical JSON text of `value` (sorted keys, no whitespace, normalised numbers).
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&canonical_number(n)),
        Value::String(s) => out.push_str(&Value::String(s.clone()).to_string()),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
    }
}

fn canonical_number(n: &serde_json::Number) -> String {
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    match n.as_f64() {
        Some(f) if f.is_finite() && f.fract() == 0.0 && f.abs() <= MAX_EXACT_F64_INT => {
            // -0.0 and 0.0 are the same number.
            (f as i64).to_string()
        }
        Some(f) => serde_json::Number::from_f64(f)
            .map(|n| n.to_string())
            .unwrap_or_else(|| "null".to_owned()),
        None => n.to_string(),
    }
}

/// The fingerprint of a JSON value: `sha256:` + lowercase hex of its canonical JSON.
pub fn fingerprint_value(value: &Value) -> String {
    let digest = Sha256::digest(canonical_json(value).as_bytes());
    format!("{PREFIX}{}", hex::encode(digest))
}

/// The fingerprint of anything that serialises to JSON (normally [`super::Workload`]).
pub fn fingerprint<T: Serialize>(section: &T) -> Result<String, serde_json::Error> {
    Ok(fingerprint_value(&serde_json::to_value(section)?))
}

/// Whether `s` has the shape of a fingerprint (`sha256:` and 64 lowercase hex digits).
pub fn is_fingerprint(s: &str) -> bool {
    s.strip_prefix(PREFIX).is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_form_sorts_keys_recursively_and_drops_whitespace() {
        let v: Value =
            serde_json::from_str(r#"{ "b": 1, "a": { "z": [1, {"y": 2, "x": 3}], "c": "é\n" } }"#)
                .unwrap();
        assert_eq!(
            canonical_json(&v),
            r#"{"a":{"c":"é\n","z":[1,{"x":3,"y":2}]},"b":1}"#
        );
    }

    #[test]
    fn integral_floats_are_written_as_integers() {
        let a: Value = serde_json::from_str(r#"{"n": 4096}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"n": 4096.0}"#).unwrap();
        let c: Value = serde_json::from_str(r#"{"n": 4.096e3}"#).unwrap();
        assert_eq!(canonical_json(&a), r#"{"n":4096}"#);
        assert_eq!(fingerprint_value(&a), fingerprint_value(&b));
        assert_eq!(fingerprint_value(&a), fingerprint_value(&c));
        assert_eq!(canonical_json(&json!(-0.0)), "0");
        assert_eq!(canonical_json(&json!(0.5)), "0.5");
        assert_ne!(fingerprint_value(&json!(0.5)), fingerprint_value(&json!(1)));
    }

    #[test]
    fn fingerprint_has_the_documented_shape() {
        let f = fingerprint_value(&json!({"a": 1}));
        assert!(is_fingerprint(&f), "{f}");
        assert!(!is_fingerprint("sha256:ABC"));
        assert!(!is_fingerprint(&f.replace("sha256:", "md5:")));
    }
}
