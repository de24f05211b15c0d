//! One-variable controls: an arm compared with its baseline must differ from it in exactly
//! one configuration key; otherwise the comparison is confounded.

use serde::Serialize;

use crate::artifact::run::ArmConfig;

/// The control verdict of an arm against its baseline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Control {
    /// Exactly one key differs.
    OneVariable {
        key: String,
        /// The baseline's value, `(unset)` when the key is absent there.
        baseline: String,
        /// The arm's value, `(unset)` when the key is absent there.
        arm: String,
    },
    /// Several keys differ (sorted).
    Confounded { keys: Vec<String> },
    /// The configurations are equal.
    NoVariable,
}

impl Control {
    /// Whether the comparison is a valid one-variable control.
    pub fn holds(&self) -> bool {
        matches!(self, Control::OneVariable { .. })
    }

    /// The verdict for a reviewer.
    pub fn reason(&self) -> String {
        match self {
            Control::OneVariable { key, baseline, arm } => {
                format!("one variable: {key} = {baseline} vs {arm}")
            }
            Control::Confounded { keys } => format!("confounded: differs in {}", keys.join(", ")),
            Control::NoVariable => "no variable differs".to_owned(),
        }
    }
}

/// Compare an arm's configuration with its baseline's.
pub fn control(baseline: &ArmConfig, arm: &ArmConfig) -> Control {
    let keys = baseline.differing_keys(arm);
    match keys.as_slice() {
        [] => Control::NoVariable,
        [key] => Control::OneVariable {
            key: key.clone(),
            baseline: baseline.get(key).unwrap_or("(unset)").to_owned(),
            arm: arm.get(key).unwrap_or("(unset)").to_owned(),
        },
        _ => Control::Confounded { keys },
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
    fn equal_configs_have_no_variable_and_a_new_key_counts() {
        let a = config(&[("spec_k", "8")]);
        assert_eq!(control(&a, &a).reason(), "no variable differs");
        assert_eq!(
            control(&a, &config(&[("spec_k", "8"), ("torch_compile", "on")])).reason(),
            "one variable: torch_compile = (unset) vs on"
        );
    }
}
