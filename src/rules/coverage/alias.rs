//! Plan words that name no arm but a setting: declared in the campaign file's `aliases`, or
//! inferred from a recorded key or value, checked as that setting.

use super::*;

/// A clause word the campaign file maps to a setting (`aliases`: `Mamba96` →
/// `mamba=extra_buffer96`), or whose text equals a recorded key=value's value or key (case
/// aside: inferred, and labelled so), checked as that setting: the arm of the stage that
/// holds it (one the clause names, else the first in the stage's order) against the arms
/// one key apart from it in that key. `None` when the word maps to nothing recorded.
pub(super) fn aliased_component(
    word: &str,
    named: &[&str],
    metric: ClaimMetric,
    rejection: bool,
    stage: &Stage,
    evidence: Evidence<'_>,
    holm: &Holm,
) -> Option<ComponentCheck> {
    let artifacts = evidence.artifacts;
    let comparisons = evidence.comparisons_of(stage);
    let setting_of = |arm: &str| super::incumbent::config_of(arm, artifacts);
    let declared = evidence
        .aliases
        .iter()
        .find(|(w, _)| w.eq_ignore_ascii_case(word))
        .and_then(|(_, to)| to.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned(), "declared alias"));
    let inferred = || {
        stage.arms().iter().find_map(|arm| {
            let config = setting_of(arm)?;
            config
                .iter()
                .find(|(k, v)| k.eq_ignore_ascii_case(word) || v.eq_ignore_ascii_case(word))
                .map(|(k, v)| (k.to_owned(), v.to_owned(), "inferred"))
        })
    };
    let (key, value, how) = declared.or_else(inferred)?;
    let holds =
        |arm: &str| setting_of(arm).is_some_and(|c| c.get(&key).is_some_and(|v| v == value));
    let arm = named
        .iter()
        .copied()
        .find(|a| holds(a))
        .or_else(|| stage.arms().iter().map(String::as_str).find(|a| holds(a)));
    let label = format!("{word} ({key}={value}, {how})");
    let Some(arm) = arm else {
        return Some(ComponentCheck {
            component: label,
            verdict: ClaimVerdict::NotTestable,
            reason: format!("no arm of the stage records {key}={value}"),
        });
    };
    // Every key but this one is covered: the sweep is the arms one `key` apart.
    let covered: BTreeSet<String> = artifacts
        .iter()
        .flat_map(|a| {
            a.facts
                .effective_config()
                .iter()
                .map(|(k, _)| k.to_owned())
                .collect::<Vec<_>>()
        })
        .filter(|k| *k != key)
        .collect();
    let (verdict, reason) = check_arm(
        arm,
        metric,
        rejection,
        &covered,
        &comparisons,
        evidence,
        holm,
    );
    Some(ComponentCheck {
        component: label,
        verdict,
        reason: format!("{arm} holds {key}={value}: {reason}"),
    })
}
