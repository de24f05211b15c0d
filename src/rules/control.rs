//! One-variable controls: an arm compared with its reference must differ from it in exactly
//! one configuration key; otherwise the comparison is confounded.
//!
//! Keys are compared over the arms' effective configurations (declared, and inherited from
//! the campaign's defaults). A key that one arm sets and the other neither declares nor
//! inherits is **unknown**: named as such, never counted as a difference (the arm may well
//! run the same value; nothing recorded says). Derived keys ([`DERIVED_KEYS`], e.g. `gpus`,
//! which follows from the topology) never count as a second variable.

use serde::Serialize;

use crate::artifact::run::ArmConfig;

/// Keys that follow from other keys and so never count as a variable of their own.
pub const DERIVED_KEYS: [&str; 1] = ["gpus"];

/// A key only one side records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnknownKey {
    pub key: String,
    /// Whether the arm (true) or the reference (false) is the side that records it.
    pub set_by_arm: bool,
    pub value: String,
}

/// The control verdict of an arm against its reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Control {
    /// Exactly one key differs.
    OneVariable {
        key: String,
        /// The reference's value.
        baseline: String,
        /// The arm's value.
        arm: String,
        unknown: Vec<UnknownKey>,
    },
    /// Several keys differ (sorted).
    Confounded {
        keys: Vec<String>,
        unknown: Vec<UnknownKey>,
    },
    /// No key both record differs.
    NoVariable { unknown: Vec<UnknownKey> },
}

impl Control {
    /// Whether the comparison is a valid one-variable control.
    pub fn holds(&self) -> bool {
        matches!(self, Control::OneVariable { .. })
    }

    /// The keys only one side records.
    pub fn unknown(&self) -> &[UnknownKey] {
        match self {
            Control::OneVariable { unknown, .. }
            | Control::Confounded { unknown, .. }
            | Control::NoVariable { unknown } => unknown,
        }
    }

    /// The verdict for a reviewer, e.g. `one variable: topology = TP1 vs TP2`, with the
    /// unknown keys after it.
    pub fn reason(&self) -> String {
        let head = match self {
            Control::OneVariable {
                key, baseline, arm, ..
            } => format!("one variable: {key} = {baseline} vs {arm}"),
            Control::Confounded { keys, .. } => {
                format!("confounded: differs in {}", keys.join(", "))
            }
            Control::NoVariable { .. } => "no variable differs".to_owned(),
        };
        let unknown = self.unknown();
        if unknown.is_empty() {
            return head;
        }
        let listed: Vec<String> = unknown
            .iter()
            .map(|u| {
                format!(
                    "{} ({} = {} on the {} only)",
                    u.key,
                    u.key,
                    u.value,
                    if u.set_by_arm { "arm" } else { "reference" }
                )
            })
            .collect();
        format!(
            "{head}; unknown, recorded on one side: {}",
            listed.join(", ")
        )
    }
}

/// Compare an arm's configuration with its reference's (both effective: declared and
/// inherited keys).
pub fn control(baseline: &ArmConfig, arm: &ArmConfig) -> Control {
    let mut keys: Vec<&str> = baseline.iter().chain(arm.iter()).map(|(k, _)| k).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut differing = Vec::new();
    let mut unknown = Vec::new();
    for key in keys.into_iter().filter(|k| !DERIVED_KEYS.contains(k)) {
        match (baseline.get(key), arm.get(key)) {
            (Some(a), Some(b)) if a != b => differing.push(key.to_owned()),
            (Some(value), None) | (None, Some(value)) => unknown.push(UnknownKey {
                key: key.to_owned(),
                set_by_arm: arm.get(key).is_some(),
                value: value.to_owned(),
            }),
            _ => {}
        }
    }
    match differing.as_slice() {
        [] => Control::NoVariable { unknown },
        [key] => Control::OneVariable {
            key: key.clone(),
            baseline: baseline.get(key).unwrap_or_default().to_owned(),
            arm: arm.get(key).unwrap_or_default().to_owned(),
            unknown,
        },
        _ => Control::Confounded {
            keys: differing,
            unknown,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> ArmConfig {
        pairs.iter().copied().collect()
    }

    #[test]
    fn one_differing_key_is_a_control() {
        let verdict = control(
            &config(&[("spec_k", "8"), ("chunk", "2048")]),
            &config(&[("spec_k", "12"), ("chunk", "2048")]),
        );
        assert!(verdict.holds());
        assert_eq!(verdict.reason(), "one variable: spec_k = 8 vs 12");
    }

    #[test]
    fn two_differing_keys_are_confounded() {
        let verdict = control(
            &config(&[("spec_k", "8"), ("chunk", "2048"), ("mamba", "96")]),
            &config(&[("spec_k", "12"), ("chunk", "1024"), ("mamba", "96")]),
        );
        assert!(!verdict.holds());
        assert_eq!(verdict.reason(), "confounded: differs in chunk, spec_k");
    }

    #[test]
    fn a_key_one_side_does_not_declare_is_unknown_not_a_difference() {
        // TP1 declares neither checkpoint nor chunked_prefill: one variable, two unknowns.
        let verdict = control(
            &config(&[
                ("checkpoint", "Inferact"),
                ("spec_depth", "0"),
                ("chunked_prefill", "2048"),
                ("topology", "TP1"),
            ]),
            &config(&[("spec_depth", "12"), ("topology", "TP1")]),
        );
        assert!(verdict.holds());
        assert_eq!(
            verdict.reason(),
            "one variable: spec_depth = 0 vs 12; unknown, recorded on one side: checkpoint \
             (checkpoint = Inferact on the reference only), chunked_prefill (chunked_prefill = \
             2048 on the reference only)"
        );
        let a = config(&[("spec_k", "8")]);
        let with_new = control(&a, &config(&[("spec_k", "8"), ("torch_compile", "on")]));
        assert!(!with_new.holds());
        assert_eq!(
            with_new.reason(),
            "no variable differs; unknown, recorded on one side: torch_compile (torch_compile = \
             on on the arm only)"
        );
    }

    #[test]
    fn derived_keys_are_never_a_second_variable() {
        let verdict = control(
            &config(&[("topology", "TP1"), ("gpus", "1")]),
            &config(&[("topology", "TP2"), ("gpus", "2")]),
        );
        assert_eq!(verdict.reason(), "one variable: topology = TP1 vs TP2");
        let inherited = control(
            &config(&[("spec_k", "8"), ("torch_compile", "off")]),
            &config(&[("spec_k", "8"), ("torch_compile", "on")]),
        );
        assert_eq!(
            inherited.reason(),
            "one variable: torch_compile = off vs on"
        );
    }
}
