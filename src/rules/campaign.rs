//! One campaign at a time: the rules of one campaign say nothing about the runs of another,
//! so a manifest, a plan and artifacts of different campaigns are refused before any rule
//! runs.

use super::Artifact;
use crate::manifest::{RunPlan, WorkloadManifest};

/// A manifest, plan or artifact of another campaign than the manifest's, named as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CampaignMismatch(String);

/// Refuse a manifest, plan and artifacts of different campaigns, naming the first that
/// differs. `names` are how the manifest and the plan are shown (`--manifest PATH`).
pub fn one_campaign(
    manifest: &WorkloadManifest,
    plan: &RunPlan,
    names: [&str; 2],
    artifacts: &[Artifact],
) -> Result<(), CampaignMismatch> {
    let [manifest_name, plan_name] = names;
    let campaign = &manifest.campaign_id;
    if plan.campaign_id != *campaign {
        return Err(CampaignMismatch(format!(
            "{plan_name}: campaign_id is `{}` but {manifest_name} is campaign `{campaign}`; \
             pass the plan and the manifest of one campaign",
            plan.campaign_id,
        )));
    }
    if let Some(other) = artifacts.iter().find(|a| a.facts.campaign_id != *campaign) {
        return Err(CampaignMismatch(format!(
            "run {} is of campaign `{}`, but {manifest_name} and {plan_name} are campaign \
             `{campaign}`; pass only that campaign's artifacts",
            other.facts.run_id, other.facts.campaign_id,
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::fixtures::{artifact, plan};

    #[test]
    fn an_artifact_of_another_campaign_is_named() {
        let plan = plan();
        let manifest = crate::rules::fixtures::manifest();
        let mut other = artifact("r-other", "K12", &[], 100.0);
        other.facts.campaign_id = "elsewhere".into();
        let names = ["--manifest m.json", "--plan p.json"];
        assert_eq!(one_campaign(&manifest, &plan, names, &[]), Ok(()));
        let err = one_campaign(&manifest, &plan, names, &[other]).unwrap_err();
        assert!(
            err.to_string()
                .contains("run r-other is of campaign `elsewhere`"),
            "{err}"
        );
    }
}
