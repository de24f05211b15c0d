//! The arm of a run: its name, stage, runtime, configuration keys in order and the campaign
//! defaults it inherits; which repeat of its cell the run is.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Which repeat of its cell a run is: `index` of `of` (1-based). Repeats of one cell share
/// the workload fingerprint and the arm's configuration; each has its own folder
/// (docs/artifact.md "Repeats").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Repeat {
    pub index: u32,
    pub of: u32,
}

impl Default for Repeat {
    fn default() -> Self {
        Self { index: 1, of: 1 }
    }
}

/// The folder of repeat `index` inside its cell's folder, when the cell is recorded more than
/// once: `repeat-<index>`.
pub fn repeat_folder(index: u32) -> String {
    format!("repeat-{index}")
}

/// The measured arm: one server configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Arm {
    /// Arm name as the run plan spells it, e.g. `K12`, `TP2`.
    pub name: String,
    /// Run-plan stage, e.g. `SGLang optimization`.
    pub stage: String,
    /// Serving runtime, e.g. `sglang 0.6.1`, `vllm 0.27.1`, `llama.cpp b6000`.
    pub runtime: String,
    /// The arm's configuration, in the order given (a one-variable control differs from
    /// its control in exactly one key).
    pub config: ArmConfig,
    /// The campaign's defaults, every key: the arm inherits those it does not declare
    /// (`torch_compile` unset means the campaign's default, e.g. `off`); a declared key's
    /// default says which value is the campaign's status quo.
    #[serde(default)]
    pub defaults: ArmConfig,
}

/// Ordered `key = value` configuration of an arm, written as a JSON object whose key order
/// is kept. Duplicate keys are refused when reading.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArmConfig(pub Vec<(String, String)>);

impl ArmConfig {
    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The pairs in their recorded order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Keys whose values differ between `self` and `other` (a key set in only one counts),
    /// sorted.
    pub fn differing_keys(&self, other: &ArmConfig) -> Vec<String> {
        let a: BTreeMap<&str, &str> = self.iter().collect();
        let b: BTreeMap<&str, &str> = other.iter().collect();
        let mut keys: Vec<String> = a
            .keys()
            .chain(b.keys())
            .filter(|k| a.get(*k) != b.get(*k))
            .map(|k| (*k).to_owned())
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for ArmConfig {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Self(
            iter.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }
}

impl Serialize for ArmConfig {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for ArmConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ArmConfig;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of configuration keys to string values")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<ArmConfig, A::Error> {
                let mut pairs: Vec<(String, String)> = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, String>()? {
                    if pairs.iter().any(|(existing, _)| *existing == k) {
                        return Err(de::Error::custom(format!("duplicate key `{k}`")));
                    }
                    pairs.push((k, v));
                }
                Ok(ArmConfig(pairs))
            }
        }
        deserializer.deserialize_map(V)
    }
}
