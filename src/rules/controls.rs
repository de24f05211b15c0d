//! The manifest's controls, mapped and tested: each control string of the workload
//! manifest (`"Inferact versus RadixArk target under current SGLang"`) mapped to the setting
//! it varies and the comparisons that realise it, with each comparison's aggregate
//! throughput difference and interval; or "realised by method" with its evidence (a
//! measurement control); or not realisable, or not read, each with the reason.
//!
//! A mapping is **declared** in the campaign file (`controls: [{text, key, values}]` or
//! `{text, method}`), else **inferred** from the words of the text: a word (also split at
//! `/`) equal to a recorded value, or aliased to a setting, names that setting's key; words
//! naming arms name the key those arms differ in. A control is realised by every pair of
//! recorded arms one key apart in that key (both values among the control's, when it names
//! them) among the artifacts of one workload, whatever stage recorded them (the baseline's
//! K8 screen beside the sweep's, the baseline's K8 headline beside RadixArk's); capacity
//! probes and functional cells realise none.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::control::{Control, control};
use super::input::Artifact;
use super::naming::words;
use crate::stats::{Moments, welch_interval};

/// A control's mapping as the campaign file declares it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredControl {
    /// The control as the manifest writes it.
    pub text: String,
    /// The configuration key it varies.
    #[serde(default)]
    pub key: Option<String>,
    /// The values it compares (empty: every recorded value).
    #[serde(default)]
    pub values: Vec<String>,
    /// For a measurement control: how anvil realises it.
    #[serde(default)]
    pub method: Option<String>,
}

/// How a control stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ControlStatus {
    /// One or more comparisons realise it.
    Realised,
    /// It is about how anvil measures, not about arms.
    ByMethod,
    /// The setting is known but no two recorded arms differ in it alone.
    NotRealisable,
    /// No setting could be read from the text.
    NotRead,
}

impl std::fmt::Display for ControlStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ControlStatus::Realised => "realised",
            ControlStatus::ByMethod => "realised by method",
            ControlStatus::NotRealisable => "not realisable",
            ControlStatus::NotRead => "not read",
        })
    }
}

/// One manifest control, mapped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ControlCoverage {
    pub text: String,
    pub status: ControlStatus,
    /// `declared` or `inferred`.
    pub mapping: String,
    pub key: Option<String>,
    /// One line per realising comparison: `Inferact target-only vs RadixArk target-only
    /// (checkpoint Inferact → RadixArk): aggregate throughput −0.07 [−0.41, +0.27] tok/s`.
    pub comparisons: Vec<String>,
    /// The method's evidence, or why it is not realisable or not read.
    pub reason: String,
}

/// A pair of arms one key apart on one workload.
struct Pair<'a> {
    /// The workload in words: `headline-sustained-output, 4096 tokens, C8 per replica`.
    workload: String,
    reference: String,
    arm: String,
    key: String,
    from: String,
    to: String,
    runs: (Vec<&'a Artifact>, Vec<&'a Artifact>),
}

/// Every pair of arms one key apart among the complete artifacts of one workload
/// fingerprint, whatever stage recorded them (the baseline's K8 screen beside the sweep's).
fn pairs(artifacts: &[Artifact]) -> Vec<Pair<'_>> {
    let mut by_workload: BTreeMap<&str, Vec<&Artifact>> = BTreeMap::new();
    for a in artifacts {
        let performance = a.facts.workload.class != super::headline::FUNCTIONAL_CLASS;
        if performance
            && a.facts.workload.probe.is_none()
            && a.facts.status == crate::artifact::Status::Complete
        {
            by_workload
                .entry(a.facts.fingerprint.as_str())
                .or_default()
                .push(a);
        }
    }
    let mut out = Vec::new();
    for runs in by_workload.values() {
        let mut arms: Vec<&str> = Vec::new();
        for r in runs {
            if !arms.contains(&r.facts.arm.as_str()) {
                arms.push(r.facts.arm.as_str());
            }
        }
        let of = |arm: &str| -> Vec<&Artifact> {
            runs.iter()
                .copied()
                .filter(|r| r.facts.arm == arm)
                .collect()
        };
        for (i, a) in arms.iter().enumerate() {
            for b in &arms[i + 1..] {
                let (ra, rb) = (of(a), of(b));
                if let Control::OneVariable {
                    key, baseline, arm, ..
                } = control(
                    &ra[0].facts.effective_config(),
                    &rb[0].facts.effective_config(),
                ) {
                    let w = &ra[0].facts.workload;
                    out.push(Pair {
                        workload: format!(
                            "{}, {} tokens, C{}",
                            w.class, w.prompt_tokens_target, w.concurrency_per_replica
                        ),
                        reference: (*a).to_owned(),
                        arm: (*b).to_owned(),
                        key,
                        from: baseline,
                        to: arm,
                        runs: (ra, rb),
                    });
                }
            }
        }
    }
    out
}

/// arm − reference aggregate throughput with Welch's interval across runs, in words.
fn throughput_difference(reference: &[&Artifact], arm: &[&Artifact]) -> String {
    let values = |runs: &[&Artifact]| -> Vec<f64> {
        runs.iter()
            .filter_map(|r| r.figures.aggregate_output_tps)
            .collect()
    };
    let (a, b) = (values(arm), values(reference));
    if a.is_empty() || b.is_empty() {
        return "aggregate throughput not recorded".to_owned();
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let moments =
        |v: &[f64]| -> Option<Moments> { crate::stats::Sample::new(v.to_vec()).ok()?.moments() };
    let sig = |v: f64| {
        let text = crate::figure::sig3(v);
        if v > 0.0 { format!("+{text}") } else { text }
    };
    let (va, vb) = (mean(&a), mean(&b));
    match moments(&a)
        .zip(moments(&b))
        .and_then(|(ma, mb)| welch_interval(mb, ma))
    {
        Some(i) => format!(
            "aggregate throughput {} [{}, {}] tok/s ({} vs {}, Welch across {} and {} runs)",
            sig(i.estimate),
            sig(i.low),
            sig(i.high),
            crate::figure::sig3(va),
            crate::figure::sig3(vb),
            a.len(),
            b.len()
        ),
        None => format!(
            "aggregate throughput {} tok/s ({} vs {}; single runs: no interval)",
            sig(va - vb),
            crate::figure::sig3(va),
            crate::figure::sig3(vb)
        ),
    }
}

/// The key a control's text names, inferred from its words: the key whose recorded values
/// (or aliases) the words name most often; then the key the arms the words name differ in.
fn infer_key(
    text: &str,
    artifacts: &[Artifact],
    pairs: &[Pair<'_>],
    aliases: &[(String, String)],
) -> Option<(String, Vec<String>)> {
    let distinct = |mut v: Vec<String>| {
        v.sort();
        v.dedup();
        // One value alone bounds nothing: the control then spans every recorded value.
        if v.len() < 2 { Vec::new() } else { v }
    };
    let tokens: Vec<String> = words(text)
        .iter()
        .flat_map(|w| w.split('/'))
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect();
    let mut votes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for token in &tokens {
        if let Some((_, to)) = aliases.iter().find(|(w, _)| w.eq_ignore_ascii_case(token))
            && let Some((k, v)) = to.split_once('=')
        {
            votes
                .entry(k.trim().to_owned())
                .or_default()
                .push(v.trim().to_owned());
            continue;
        }
        let mut hits: Vec<(String, String)> = artifacts
            .iter()
            .flat_map(|a| {
                a.facts
                    .effective_config()
                    .iter()
                    .filter(|(_, v)| v.eq_ignore_ascii_case(token))
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect::<Vec<_>>()
            })
            .collect();
        hits.sort();
        hits.dedup();
        for (k, v) in hits {
            votes.entry(k).or_default().push(v);
        }
    }
    if let Some((key, values)) = votes
        .into_iter()
        .filter(|(_, v)| v.len() >= 2)
        .max_by_key(|(_, v)| v.len())
    {
        return Some((key, distinct(values)));
    }
    // Words naming arms (a whole name or a word of it): the key their pairs differ in.
    let names = |arm: &str| words(arm).iter().any(|w| tokens.iter().any(|t| t == w));
    let mut keys: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for p in pairs {
        if names(&p.reference) && names(&p.arm) {
            let values = keys.entry(p.key.as_str()).or_default();
            values.push(p.from.clone());
            values.push(p.to.clone());
        }
    }
    keys.into_iter()
        .max_by_key(|(_, v)| v.len())
        .map(|(k, v)| (k.to_owned(), distinct(v)))
}

/// Map every control of the manifest (`texts`) to what realises it.
pub fn map_controls(
    texts: &[String],
    declared: &[DeclaredControl],
    aliases: &[(String, String)],
    artifacts: &[Artifact],
) -> Vec<ControlCoverage> {
    let pairs = pairs(artifacts);
    texts
        .iter()
        .map(|text| {
            let decl = declared.iter().find(|d| d.text == *text);
            if let Some(method) = decl.and_then(|d| d.method.as_ref()) {
                return ControlCoverage {
                    text: text.clone(),
                    status: ControlStatus::ByMethod,
                    mapping: "declared".to_owned(),
                    key: None,
                    comparisons: Vec::new(),
                    reason: method.clone(),
                };
            }
            let (mapping, found) = match decl.and_then(|d| d.key.clone()) {
                Some(key) => ("declared", Some((key, decl.map(|d| d.values.clone()).unwrap_or_default()))),
                None => ("inferred", infer_key(text, artifacts, &pairs, aliases)),
            };
            let Some((key, values)) = found else {
                return ControlCoverage {
                    text: text.clone(),
                    status: ControlStatus::NotRead,
                    mapping: mapping.to_owned(),
                    key: None,
                    comparisons: Vec::new(),
                    reason: "no recorded setting or arm is named: declare it in the campaign file's controls ({text, key, values}, or {text, method} for a measurement control)".to_owned(),
                };
            };
            let wanted = |v: &str| values.is_empty() || values.iter().any(|w| w.eq_ignore_ascii_case(v));
            let realised: Vec<String> = pairs
                .iter()
                .filter(|p| p.key == key && wanted(&p.from) && wanted(&p.to))
                .map(|p| {
                    format!(
                        "{}: {} vs {} ({key} {} → {}): {}",
                        p.workload,
                        p.arm,
                        p.reference,
                        p.from,
                        p.to,
                        throughput_difference(&p.runs.0, &p.runs.1)
                    )
                })
                .collect();
            if realised.is_empty() {
                ControlCoverage {
                    text: text.clone(),
                    status: ControlStatus::NotRealisable,
                    mapping: mapping.to_owned(),
                    key: Some(key.clone()),
                    comparisons: Vec::new(),
                    reason: format!(
                        "no two recorded arms of one workload differ in {key} alone{}",
                        if values.is_empty() {
                            String::new()
                        } else {
                            format!(" between {}", values.join(", "))
                        }
                    ),
                }
            } else {
                ControlCoverage {
                    text: text.clone(),
                    status: ControlStatus::Realised,
                    mapping: mapping.to_owned(),
                    key: Some(key),
                    comparisons: realised,
                    reason: String::new(),
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::fixtures::repeated_topology_stage;

    #[test]
    fn each_control_is_realised_by_its_pairs_by_method_or_named_as_unread() {
        let artifacts = repeated_topology_stage(1900.0);
        let texts = [
            "matched SGLang TP1 versus TP2".to_owned(),
            "API usage tokens rather than streamed chunk count".to_owned(),
            "frobnicate the widget".to_owned(),
            "compile at K99".to_owned(),
        ];
        let declared = [
            DeclaredControl {
                text: texts[1].clone(),
                key: None,
                values: Vec::new(),
                method: Some("usage tokens".into()),
            },
            DeclaredControl {
                text: texts[3].clone(),
                key: Some("torch_compile".into()),
                values: vec!["off".into(), "on".into()],
                method: None,
            },
        ];
        let c = map_controls(&texts, &declared, &[], &artifacts);
        assert_eq!(c[0].status, ControlStatus::Realised);
        assert_eq!(
            (c[0].mapping.as_str(), c[0].key.as_deref()),
            ("inferred", Some("topology"))
        );
        assert_eq!(c[0].comparisons.len(), 1, "{:?}", c[0].comparisons);
        assert!(
            c[0].comparisons[0].starts_with(
                "headline-sustained-output, 4096 tokens, C8: TP2 vs TP1 (topology TP1 → TP2): \
                 aggregate throughput +500 ["
            ),
            "{}",
            c[0].comparisons[0]
        );
        assert_eq!(
            (c[1].status, c[1].reason.as_str()),
            (ControlStatus::ByMethod, "usage tokens")
        );
        assert_eq!(c[2].status, ControlStatus::NotRead);
        assert!(c[2].reason.contains("controls"), "{}", c[2].reason);
        assert_eq!(c[3].status, ControlStatus::NotRealisable);
        assert_eq!(c[3].mapping, "declared");
        assert_eq!(c[3].status.to_string(), "not realisable");
    }
}
