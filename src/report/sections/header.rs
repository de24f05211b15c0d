//! The report's first section: the campaign, its goal, the data, the tool, and the outcome
//! of `anvil check` with its reasons and stop rules.

use crate::rules::check::Outcome;
use crate::rules::coverage::ClaimCheck;

use crate::report::input::*;
use crate::report::view::*;

/// Section 1 from the plan, the check and the run's metadata.
pub fn header_view(input: &ReportInput<'_>) -> HeaderView {
    let (outcome, outcome_class) = outcome_text(input.check.outcome);
    HeaderView {
        campaign_id: input.plan.campaign_id.clone(),
        goal: input.plan.goal.clone(),
        data_folder: input.data_folder.to_owned(),
        generated_utc: input.generated_utc.to_owned(),
        tool_version: input.tool_version.to_owned(),
        promotion_authorized: input.plan.promotion_authorized,
        outcome: outcome.to_owned(),
        outcome_class: outcome_class.to_owned(),
        exit_code: input.check_exit_code,
        reasons: input.check.reasons.clone(),
        stops: input
            .check
            .stops
            .iter()
            .map(|stop| StopView {
                kind: stop.kind.label().to_owned(),
                run_id: stop.run_id.clone().unwrap_or_else(|| "plan".to_owned()),
                reason: stop.reason.clone(),
            })
            .collect(),
    }
}

pub(super) fn claim_view(side: &str, claim: &ClaimCheck) -> ClaimView {
    ClaimView {
        side: side.to_owned(),
        clause: claim.clause.clone(),
        verdict: claim.verdict.to_string(),
        verdict_class: super::decision::claim_class(claim.verdict).to_owned(),
        reason: claim.reason.clone(),
    }
}

/// The words and CSS class of `anvil check`'s outcome.
pub(super) fn outcome_text(outcome: Outcome) -> (&'static str, &'static str) {
    let class = match outcome {
        Outcome::Holds => "pass",
        Outcome::StopRuleFired | Outcome::RuleFailed => "fail",
        Outcome::Incomplete => "missing",
    };
    (outcome.label(), class)
}
