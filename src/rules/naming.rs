//! How a plan's text names arms: the words of a claim, and which arms of a stage it names
//! (the whole name, a word of the name no other arm of the stage has, or a configuration
//! value only that arm records). Shared by the claim checks and by the choice of an earlier
//! stage's selected arm as a control.

use std::collections::BTreeSet;

use crate::manifest::Stage;

use super::input::Artifact;

/// Words of a text: split at whitespace, commas, semicolons and parentheses.
pub(crate) fn words(text: &str) -> Vec<&str> {
    text.split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '(' | ')'))
        .filter(|w| !w.is_empty())
        .collect()
}

/// The stage's arms a clause names (see the module documentation).
pub(crate) fn named_arms<'s>(
    clause: &str,
    stage: &'s Stage,
    artifacts: &[Artifact],
) -> Vec<&'s str> {
    let clause_words = words(clause);
    let arms = stage.arms();
    let contains_name = |name: &str| {
        let name_words = words(name);
        !name_words.is_empty()
            && clause_words
                .windows(name_words.len())
                .any(|window| window == name_words.as_slice())
    };
    let values: Vec<BTreeSet<String>> = arms
        .iter()
        .map(|arm| config_values(arm, artifacts))
        .collect();
    arms.iter()
        .enumerate()
        .filter(|(index, arm)| {
            if contains_name(arm) {
                return true;
            }
            let others =
                |f: &dyn Fn(usize) -> bool| (0..arms.len()).filter(|other| other != index).any(f);
            let unique_name_word = words(arm).into_iter().any(|word| {
                clause_words.contains(&word)
                    && !others(&|other| words(&arms[other]).contains(&word))
            });
            let unique_value = values[*index].iter().any(|value| {
                clause_words.contains(&value.as_str())
                    && !others(&|other| values[other].contains(value))
            });
            unique_name_word || unique_value
        })
        .map(|(_, arm)| arm.as_str())
        .collect()
}

/// The configuration values an arm's artifacts record.
pub(crate) fn config_values(arm: &str, artifacts: &[Artifact]) -> BTreeSet<String> {
    artifacts
        .iter()
        .filter(|a| a.facts.arm == arm)
        .flat_map(|a| {
            a.facts
                .effective_config()
                .iter()
                .map(|(_, v)| v.to_owned())
                .collect::<Vec<_>>()
        })
        .collect()
}
