//! The run plan (`anvil-serving.benchmark-run-plan/v1`): the campaign's stages and arms, what
//! each stage selected and rejected, the headline comparison rule, the advance and stop rules,
//! and the gates still open after the campaign.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::check::Checks;
use super::error::{ManifestError, Problem};
use super::types::Positive;
use super::{DocumentKind, parse_document, read_document};

/// A validated run plan. Values returned by [`RunPlan::load`] and [`RunPlan::from_str`] have
/// passed [`RunPlan::problems`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunPlan {
    /// Always [`super::RUN_PLAN_SCHEMA`] for a loaded plan.
    pub schema: String,
    pub campaign_id: String,
    pub goal: String,
    /// Whether the campaign's result may be promoted (e.g. to production).
    pub promotion_authorized: bool,
    /// The stages, as listed; [`RunPlan::stages_in_order`] sorts them by `order`.
    pub execution_order: Vec<Stage>,
    pub headline_comparison_rule: String,
    pub advance_rules: Vec<String>,
    pub stop_rules: Vec<String>,
    pub post_campaign_open_gates: Vec<String>,
}

/// One stage of the campaign: its arms and what it decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stage {
    /// Position in the campaign, unique within the plan.
    pub order: Positive,
    pub stage: String,
    /// The arms run in this stage; absent for a stage that runs none (e.g. `restore`).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub arms: Option<Vec<String>>,
    /// The stage's state in the campaign's words (e.g. `complete`).
    pub status: String,
    /// What the stage selected, in the campaign's words.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub selected: Option<String>,
    /// What the stage rejected, in the campaign's words.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub rejected: Option<String>,
    /// A file holding the stage's evidence (e.g. `restoration.json`).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub evidence: Option<String>,
}

/// An optional field that, when written, must hold a value: `null` is refused rather than
/// read as absent, so a loaded plan serializes back to what was written.
fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

impl Stage {
    /// The stage's arms; empty for a stage without arms.
    pub fn arms(&self) -> &[String] {
        self.arms.as_deref().unwrap_or(&[])
    }

    pub fn is_complete(&self) -> bool {
        self.status == "complete"
    }
}

super::document_readers!(RunPlan, DocumentKind::RunPlan);

impl RunPlan {
    /// Every rule the plan breaks beyond its types, with JSON paths; empty when valid.
    pub fn problems(&self) -> Vec<Problem> {
        let mut checks = Checks::default();
        if self.schema != super::RUN_PLAN_SCHEMA {
            checks.push(
                "schema",
                format!(
                    "expected \"{}\", found \"{}\"",
                    super::RUN_PLAN_SCHEMA,
                    self.schema
                ),
            );
        }
        checks.path_component("campaign_id", &self.campaign_id);
        checks.text("goal", &self.goal);

        checks.non_empty("execution_order", &self.execution_order);
        for (index, stage) in self.execution_order.iter().enumerate() {
            let at = format!("execution_order[{index}]");
            if let Some(first) = self.execution_order[..index]
                .iter()
                .position(|earlier| earlier.order == stage.order)
            {
                checks.push(
                    format!("{at}.order"),
                    format!(
                        "duplicate stage order {} (already at execution_order[{first}])",
                        stage.order
                    ),
                );
            }
            checks.text(format!("{at}.stage"), &stage.stage);
            checks.text(format!("{at}.status"), &stage.status);
            if let Some(arms) = &stage.arms {
                let field = format!("{at}.arms");
                if arms.is_empty() {
                    checks.push(
                        &field,
                        "expected a non-empty list, found []; omit `arms` for a stage without arms",
                    );
                }
                checks.texts(&field, arms);
                checks.distinct(&field, arms);
            }
            for (name, value) in [
                ("selected", &stage.selected),
                ("rejected", &stage.rejected),
                ("evidence", &stage.evidence),
            ] {
                if let Some(value) = value {
                    checks.text(format!("{at}.{name}"), value);
                }
            }
        }

        checks.text("headline_comparison_rule", &self.headline_comparison_rule);
        checks.non_empty("advance_rules", &self.advance_rules);
        checks.texts("advance_rules", &self.advance_rules);
        checks.non_empty("stop_rules", &self.stop_rules);
        checks.texts("stop_rules", &self.stop_rules);
        checks.texts("post_campaign_open_gates", &self.post_campaign_open_gates);

        checks.into_problems()
    }

    /// The stages sorted by their `order`.
    pub fn stages_in_order(&self) -> Vec<&Stage> {
        let mut stages: Vec<&Stage> = self.execution_order.iter().collect();
        stages.sort_by_key(|stage| stage.order);
        stages
    }

    /// The stage with this name, if the plan has one.
    pub fn stage(&self, name: &str) -> Option<&Stage> {
        self.execution_order
            .iter()
            .find(|stage| stage.stage == name)
    }
}
