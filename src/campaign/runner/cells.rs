//! Step 2 of a campaign run: every arm in the plan's execution order, launched (once per
//! stage, or once per repeat with repeats interleaved across the stage's arms), its cells
//! recorded (kept when already recorded, superseded when unusable; the first measured cell
//! of a launch per repeat warmed up), each artifact checked against the plan's stop rules,
//! its capacity search run, then stopped.

use std::path::Path;

use serde_json::json;

use super::{CampaignError, Runner, SUPERSEDED};
use crate::artifact::Status;
use crate::campaign::file::Order;
use crate::campaign::supervise::NotReady;
use crate::campaign::{Arm, CellState, PlannedCell};
use crate::capture::request::RunRequest;
use crate::manifest::RunPlan;
use crate::workload::cells::FUNCTIONAL;

/// The most warm-up requests a launch's first cell sends per replica by default (the
/// campaign file's `warmup_requests` overrides it): every slot of a closed-loop cell once,
/// up to this many.
pub const WARMUP_PER_REPLICA: u64 = 16;

impl Runner<'_> {
    /// Step 2: every arm in the plan's execution order, each launch of it a [`Visit`].
    pub(super) fn run_arms(
        &mut self,
        cells: &[PlannedCell],
        plan: &RunPlan,
    ) -> Result<(), CampaignError> {
        let arms = self.campaign.all_arms();
        let stages: Vec<&str> = plan
            .execution_order
            .iter()
            .map(|s| s.stage.as_str())
            .collect();
        let order = visits(plan, cells, &arms, self.campaign.order);
        self.log(
            "order",
            json!({
                "order": self.campaign.order.as_str(),
                "launches": order.iter().map(|v| json!({"stage": v.stage, "arm": v.arm, "repeat": v.round, "per_repeat": v.per_repeat})).collect::<Vec<_>>(),
            }),
        )?;
        let total = order.len();
        let mut cell_no = 0;
        for (visit_no, visit) in order.iter().enumerate() {
            if self.interrupted() || self.summary.stop_rule.is_some() {
                break;
            }
            let (stage, arm_name) = (visit.stage, visit.arm);
            let Some(arm) = arms.iter().find(|a| a.arm == arm_name) else {
                continue;
            };
            let mine: Vec<&PlannedCell> = cells.iter().filter(|c| visit.holds(c)).collect();
            let stage_no = stages.iter().position(|s| *s == stage).map_or(0, |i| i + 1);
            let who = format!("arm {arm_name}");
            self.say(&format!(
                "stage {stage_no}/{} {stage}, launch {}/{total} {arm_name}{}: {} cells",
                stages.len(),
                visit_no + 1,
                if visit.per_repeat {
                    format!(" (repeat {})", visit.round)
                } else {
                    String::new()
                },
                mine.len()
            ));
            let mut todo = Vec::new();
            for c in &mine {
                match &c.state {
                    CellState::Recorded => {
                        cell_no += 1;
                        self.summary.skipped += 1;
                        self.log(
                            "skipped",
                            json!({"arm": c.arm, "cell": c.name(), "why": "a complete artifact with the cell's workload fingerprint is there"}),
                        )?;
                    }
                    CellState::Unusable(why) => {
                        self.supersede(c, why)?;
                        todo.push(*c);
                    }
                    CellState::Missing => todo.push(*c),
                }
            }
            // The search, replayed from the probes already recorded: done, or what is next.
            let first_of_arm = order.iter().position(|v| v.arm == arm_name) == Some(visit_no);
            let mut search = match (&arm.search, first_of_arm) {
                (Some(spec), true) => Some(self.search_from_disk(stage, arm, spec)?),
                _ => None,
            };
            let search_pending = search.as_ref().is_some_and(|s| s.pending);
            if todo.is_empty() && !search_pending {
                continue;
            }
            let log_dir = self.folder.join(&arm.arm);
            let Some((id, mut launched)) =
                self.launch(&who, &arm.service, &log_dir, visit.round)?
            else {
                for c in &todo {
                    self.not_recorded(c, "its server was not launched")?;
                }
                continue;
            };
            let ready =
                self.wait_ready(&who, &arm.service, &mut launched, &self.interrupted.clone())?;
            if let Err(why) = ready {
                if why != NotReady::Interrupted {
                    self.fail(format!("{who}: {why}; its log is in {}", log_dir.display()));
                    for c in &todo {
                        self.not_recorded(c, "its server did not become ready")?;
                    }
                }
                self.stop(&who, id, &arm.service, &mut launched)?;
                continue;
            }
            // A launch per repeat is a cold start each time: its first measured cell is
            // preceded by warm-up requests, so every repeat starts from a warm server.
            let warmed = visit
                .per_repeat
                .then(|| todo.iter().position(|c| c.request.cell.class != FUNCTIONAL))
                .flatten();
            for (k, c) in todo.iter().enumerate() {
                if self.interrupted() {
                    break;
                }
                cell_no += 1;
                self.say(&format!(
                    "[{cell_no}/{}] {arm_name}: cell {}",
                    self.summary.cells,
                    c.name()
                ));
                let warmup = if warmed == Some(k) {
                    // One wave, but never more than the cell measures, nor than
                    // WARMUP_PER_REPLICA per replica (an uncapped trace's "wave" is 256).
                    let replicas = c.request.endpoints.len().max(1) as u64;
                    let wave = (u64::from(c.request.cell.concurrency.unwrap_or(1)) * replicas)
                        .min(WARMUP_PER_REPLICA * replicas)
                        .min(c.request.cell.requests.unwrap_or(u64::MAX).max(1));
                    self.campaign.warmup_requests.unwrap_or(wave)
                } else {
                    0
                };
                self.record_warmed(c, warmup)?;
                if self.deaths(&who, &mut launched, "cell", &c.name())? {
                    for rest in &todo[k + 1..] {
                        self.not_recorded(rest, "its server died during an earlier cell")?;
                    }
                    break;
                }
                if self.summary.stop_rule.is_some() {
                    break;
                }
            }
            if let (Some(spec), Some(state)) = (&arm.search, search.as_mut())
                && state.pending
                && launched.exited().is_empty()
            {
                self.run_search(stage, arm, spec, state, &mut launched, &who)?;
            }
            self.stop(&who, id, &arm.service, &mut launched)?;
        }
        Ok(())
    }

    /// Move an attempt that cannot stand for its cell into `.superseded/` (kept, journaled).
    pub(super) fn supersede(&mut self, c: &PlannedCell, why: &str) -> Result<(), CampaignError> {
        let stamp = crate::clock::utc_now().replace(':', "");
        let to = self
            .folder
            .join(SUPERSEDED)
            .join(&c.arm)
            .join(format!("{}.{stamp}", c.name().replace('/', ".")));
        let moved = to
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::rename(&c.dir, &to));
        if let Err(e) = moved {
            return Err(CampaignError::Failed(format!(
                "cannot move {} aside to {}: {e}",
                c.dir.display(),
                to.display()
            )));
        }
        self.say(&format!(
            "{} {}: the earlier attempt ({why}) is kept in {}",
            c.arm,
            c.name(),
            to.display()
        ));
        self.log(
            "superseded",
            json!({"arm": c.arm, "cell": c.name(), "why": why, "kept_in": to.display().to_string()}),
        )
    }

    pub(super) fn not_recorded(&mut self, c: &PlannedCell, why: &str) -> Result<(), CampaignError> {
        self.log(
            "not_recorded",
            json!({"arm": c.arm, "cell": c.name(), "why": why}),
        )?;
        self.summary
            .failures
            .push(format!("{} {}: not recorded: {why}", c.arm, c.name()));
        Ok(())
    }

    /// Record one cell (in this process, or as its local shard processes) and check its
    /// artifact against the plan's stop rules.
    pub(super) fn record(&mut self, c: &PlannedCell) -> Result<(), CampaignError> {
        self.record_warmed(c, 0)
    }

    /// [`Self::record`], after `warmup` warm-up requests (`--warmup`; 0: none).
    pub(super) fn record_warmed(
        &mut self,
        c: &PlannedCell,
        warmup: u64,
    ) -> Result<(), CampaignError> {
        let mut request = c.request.clone();
        request.load.warmup = warmup;
        let request = &request;
        let command = request.to_argv();
        let mut line = json!({"arm": c.arm, "cell": c.name(), "dir": c.dir.display().to_string(), "command": command});
        let started = std::time::Instant::now();
        let outcome = if c.shards > 1 {
            let shards = crate::campaign::shards::requests(
                request,
                c.shards,
                &crate::campaign::shards::start_instant(),
                &crate::realtime::allowed_cpus(),
            );
            line["shards"] = json!(shards.iter().map(RunRequest::to_argv).collect::<Vec<_>>());
            self.log("recording", line)?;
            crate::campaign::shards::record(&shards, &self.notices).map_err(|e| anyhow::anyhow!(e))
        } else {
            self.log("recording", line)?;
            self.say(&format!("  {}", crate::shell::join(&command)));
            (self.record)(request)
        };
        match outcome {
            Err(e) => {
                self.log(
                    "failed",
                    json!({"arm": c.arm, "cell": c.name(), "what": "record", "why": format!("{e:#}")}),
                )?;
                self.fail(format!("{} {}: not recorded: {e:#}", c.arm, c.name()));
            }
            Ok(done) => {
                self.log(
                    "recorded",
                    json!({"arm": c.arm, "cell": c.name(), "dir": done.dir.display().to_string(), "status": done.status.as_str(), "reason": done.reason}),
                )?;
                self.say(&format!(
                    "  {} in {:.1} s: {}{}",
                    done.status.as_str(),
                    started.elapsed().as_secs_f64(),
                    done.dir.display(),
                    match (&done.status, &done.reason) {
                        (Status::Complete, _) | (_, None) => String::new(),
                        (_, Some(reason)) => format!(" ({reason})"),
                    }
                ));
                if done.status == Status::Complete {
                    self.summary.recorded += 1;
                } else {
                    self.summary.failures.push(format!(
                        "{} {}: recorded as {}{}",
                        c.arm,
                        c.name(),
                        done.status.as_str(),
                        done.reason.map(|r| format!(" ({r})")).unwrap_or_default()
                    ));
                }
                if done.status != Status::Interrupted
                    && !self.interrupted.load(std::sync::atomic::Ordering::SeqCst)
                {
                    self.check_stop_rules(c, &done.dir)?;
                }
            }
        }
        Ok(())
    }

    /// The plan's stop rules over the cell's artifact (read as `anvil check` reads it); the
    /// first that fires ends the arms.
    pub(super) fn check_stop_rules(
        &mut self,
        c: &PlannedCell,
        dir: &Path,
    ) -> Result<(), CampaignError> {
        let has_shards = std::fs::read_dir(dir).is_ok_and(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("shard-"))
        });
        if !dir.join(crate::artifact::RUN_JSON).exists() && !has_shards {
            return Ok(());
        }
        let read = self.rt.block_on(async {
            let session = crate::query::AnvilSession::open(&[dir.to_owned()]).await?;
            crate::gather::rules_input::read_artifacts(&session).await
        });
        let artifacts = match read {
            Ok(a) => a,
            Err(e) => {
                self.fail(format!(
                    "{} {}: the artifact could not be checked against the stop rules: {e}",
                    c.arm,
                    c.name()
                ));
                return Ok(());
            }
        };
        let findings: Vec<_> = artifacts
            .iter()
            .flat_map(crate::rules::stop::artifact_stop_rules)
            .collect();
        for f in &findings {
            self.log(
                "stop_rule",
                json!({"arm": c.arm, "cell": c.name(), "rule": f.kind.name(), "reason": f.reason}),
            )?;
        }
        if let Some(first) = findings.first() {
            let line = format!("STOP {}: {}", first.kind, first.reason);
            self.say(&format!(
                "{line}; no further arm runs, the starting service is restored"
            ));
            self.summary.stop_rule = Some(line);
        }
        Ok(())
    }
}

/// One launch of an arm in a stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Visit<'p> {
    pub stage: &'p str,
    pub arm: &'p str,
    /// The repeat the launch records (its `{repeat}`); 1 for an arm launched once per stage.
    pub round: u32,
    /// Launched once per repeat ([`Arm::launched_per_repeat`]): it records its cells' repeat
    /// `round` (cells recorded once go with round 1), its first measured cell warmed up.
    pub per_repeat: bool,
}

impl Visit<'_> {
    /// Whether the launch records `c`.
    pub fn holds(&self, c: &PlannedCell) -> bool {
        c.stage == self.stage
            && c.arm == self.arm
            && (!self.per_repeat || c.repeat.index == self.round)
    }
}

/// Every launch of the campaign in order: stage by stage as [`arm_order`] lists the arms;
/// within a stage, interleaved (every arm's repeat 1, then every arm's repeat 2, …; an arm
/// launched once per stage with round 1) or blocked (each arm's launches back to back).
pub(super) fn visits<'p>(
    plan: &'p RunPlan,
    cells: &[PlannedCell],
    arms: &[Arm],
    order: Order,
) -> Vec<Visit<'p>> {
    let pairs = arm_order(plan, cells, arms);
    let mut out = Vec::new();
    let mut start = 0;
    while start < pairs.len() {
        let stage = pairs[start].0;
        let end = pairs[start..]
            .iter()
            .position(|(s, _)| *s != stage)
            .map_or(pairs.len(), |n| start + n);
        let each: Vec<(&str, u32, bool)> = pairs[start..end]
            .iter()
            .map(|&(_, name)| {
                let rounds = cells
                    .iter()
                    .filter(|c| c.stage == stage && c.arm == name)
                    .map(|c| c.repeat.of)
                    .max()
                    .unwrap_or(1);
                let per_repeat = arms
                    .iter()
                    .find(|a| a.arm == name)
                    .is_some_and(|a| a.launched_per_repeat(order, rounds));
                (name, rounds, per_repeat)
            })
            .collect();
        let visit = |arm, round, per_repeat| Visit {
            stage,
            arm,
            round,
            per_repeat,
        };
        match order {
            Order::Blocked => {
                for &(arm, rounds, per_repeat) in &each {
                    let last = if per_repeat { rounds } else { 1 };
                    out.extend((1..=last).map(|r| visit(arm, r, per_repeat)));
                }
            }
            Order::Interleaved => {
                let most = each.iter().map(|e| e.1).max().unwrap_or(1);
                for round in 1..=most {
                    for &(arm, rounds, per_repeat) in &each {
                        if round == 1 || (per_repeat && round <= rounds) {
                            out.push(visit(arm, round, per_repeat));
                        }
                    }
                }
            }
        }
        start = end;
    }
    out
}

/// Stage by stage in the plan's execution order, each arm with cells to record there, or
/// with a capacity search (run with the first stage that names the arm), once per stage.
pub(super) fn arm_order<'p>(
    plan: &'p RunPlan,
    cells: &[PlannedCell],
    arms: &[Arm],
) -> Vec<(&'p str, &'p str)> {
    let mut order: Vec<(&str, &str)> = Vec::new();
    for stage in plan.stages_in_order() {
        for name in stage.arms.iter().flatten() {
            let has_cells = cells
                .iter()
                .any(|c| c.stage == stage.stage && c.arm == *name);
            let searches = arms.iter().any(|a| a.arm == *name && a.search.is_some());
            let first = !order.iter().any(|(_, a)| a == name);
            if (has_cells || (searches && first))
                && !order.contains(&(stage.stage.as_str(), name.as_str()))
            {
                order.push((stage.stage.as_str(), name.as_str()));
            }
        }
    }
    order
}
