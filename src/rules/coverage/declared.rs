//! Claims as the campaign file maps them: `claims: [{stage, text, against, metric,
//! statistic}]` names, for one clause of a stage's `selected` or `rejected` text, the arm it
//! is to be tested against, the figure (`ttft`, `throughput`, `decode`) and the statistic
//! (`mean`, `p50`, `p95`, …; absent: every headline statistic). A declared comparator
//! replaces the sweep and the incumbent; a declared metric replaces the one read from the
//! clause's words.

use serde::{Deserialize, Serialize};

use super::ClaimMetric;
use super::incumbent::Statistic;

/// One claim's mapping as the campaign file declares it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredClaim {
    /// The plan stage, as the plan names it.
    pub stage: String,
    /// The clause as the plan writes it (one clause of `selected` or `rejected`; case and
    /// surrounding space aside).
    pub text: String,
    /// The arm the claim's arm is tested against.
    #[serde(default)]
    pub against: Option<String>,
    /// `ttft`, `throughput` or `decode`.
    #[serde(default)]
    pub metric: Option<String>,
    /// `mean` or a percentile (`p50`, `p95`, `p99`, `p5`, …).
    #[serde(default)]
    pub statistic: Option<String>,
}

/// The metric names a declared claim may give.
pub const METRICS: [&str; 3] = ["ttft", "throughput", "decode"];

impl DeclaredClaim {
    /// Whether it maps `clause` of `stage`.
    pub(super) fn maps(&self, stage: &str, clause: &str) -> bool {
        self.stage == stage && self.text.trim().eq_ignore_ascii_case(clause.trim())
    }

    /// Its metric, when it declares one anvil knows.
    pub(super) fn metric(&self) -> Option<ClaimMetric> {
        match self.metric.as_deref()?.trim().to_lowercase().as_str() {
            "ttft" => Some(ClaimMetric::Ttft),
            "throughput" => Some(ClaimMetric::AggregateThroughput),
            "decode" => Some(ClaimMetric::Decode),
            _ => None,
        }
    }

    /// Its statistic, when it declares one anvil knows.
    pub(super) fn statistic(&self) -> Option<Statistic> {
        Statistic::parse(self.statistic.as_deref()?)
    }

    /// What is wrong with it, each as (field, what to write instead); `arms` are the
    /// campaign's arms, for `against`.
    pub fn problems(&self, arms: &[&str]) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if self.stage.trim().is_empty() {
            out.push((
                "stage",
                "name the plan stage the claim belongs to".to_owned(),
            ));
        }
        if self.text.trim().is_empty() {
            out.push((
                "text",
                "give the clause as the plan writes it (one clause of `selected` or `rejected`)"
                    .to_owned(),
            ));
        }
        if let Some(m) = &self.metric
            && self.metric().is_none()
        {
            out.push((
                "metric",
                format!(
                    "`{m}` is not a claim metric: write one of {}",
                    METRICS.join(", ")
                ),
            ));
        }
        if let Some(s) = &self.statistic
            && self.statistic().is_none()
        {
            out.push((
                "statistic",
                format!("`{s}` is not a statistic: write mean, p50, p95, p99, p5 or p1"),
            ));
        }
        if let Some(a) = &self.against
            && !arms.is_empty()
            && !arms.contains(&a.as_str())
        {
            out.push((
                "against",
                format!("`{a}` is no arm of the campaign: name one of its arms"),
            ));
        }
        out
    }
}
