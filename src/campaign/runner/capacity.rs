//! A capacity search in a campaign run: replayed from the probes the data folder already
//! holds, then probes recorded with the arm's server up until the bracket is found; each
//! probe's attainment read as `anvil sql` reads the `goodput` view; the result written into
//! `capacity.json`.

use serde_json::json;

use super::{CampaignError, Runner};
use crate::artifact::Status;
use crate::artifact::capacity::{CAPACITY_JSON, Capacity};
use crate::campaign::supervise::Launched;
use crate::campaign::{Arm, CellState, PlannedCell, search};

/// A capacity search in progress: what its probes observed so far (in the order recorded)
/// and whether it still needs a probe recorded.
pub(super) struct SearchState {
    pub(super) slos: crate::slo::Slos,
    pub(super) seen: Vec<search::Observation>,
    pub(super) pending: bool,
}

/// The exact 95% interval the search judges a load by.
pub(super) fn exact_interval(k: u64, n: u64) -> (f64, f64) {
    crate::stats::clopper_pearson(k, n).map_or((0.0, 1.0), |p| (p.low, p.high))
}

/// The Student t 95% interval of the mean of `values` (two or more).
pub(super) fn mean_interval(values: &[f64]) -> Option<(f64, f64)> {
    let sample = crate::stats::Sample::new(values.to_vec()).ok()?;
    let m = crate::stats::Moments::new(sample.len() as u64, sample.mean(), sample.sd()?).ok()?;
    crate::stats::mean_interval(m).map(|i| (i.low, i.high))
}

impl Runner<'_> {
    /// Replay `arm`'s search from the probes `out` already holds (each read once, journaled
    /// as reused); when that ends the search, its result is written.
    pub(super) fn search_from_disk(
        &mut self,
        stage: &str,
        arm: &Arm,
        spec: &search::CapacitySearch,
    ) -> Result<SearchState, CampaignError> {
        let slos = crate::slo::Slos::of(
            spec.slos(&self.campaign.slo).to_vec(),
            crate::slo::SloSource::Campaign(self.file.display().to_string()),
        );
        let texts = crate::slo::texts(slos.default_slos());
        let mut state = SearchState {
            slos,
            seen: Vec::new(),
            pending: false,
        };
        self.log(
            "search_started",
            json!({"arm": arm.arm, "vary": spec.vary, "min": spec.min, "max": spec.max,
                   "target": spec.target, "window": spec.window.as_str(), "slo": texts,
                   "requests": spec.requests, "window_requests": spec.window_requests,
                   "repeats": spec.repeats}),
        )?;
        loop {
            match search::next_step(spec, &state.seen, &exact_interval) {
                search::Step::Done(bracket) => {
                    self.finish_search(arm, spec, &state, Ok(bracket))?;
                    return Ok(state);
                }
                search::Step::Probe { load, repeat } => {
                    let planned = self.probe_cell(stage, arm, spec, load, repeat)?;
                    if planned.state != CellState::Recorded {
                        state.pending = true;
                        return Ok(state);
                    }
                    match self.observe(&planned, spec, &state.slos, load, repeat) {
                        Ok(o) => {
                            self.log_probe(&arm.arm, &o, spec, true)?;
                            state.seen.push(o);
                        }
                        Err(why) => {
                            self.supersede(&planned, &why)?;
                            state.pending = true;
                            return Ok(state);
                        }
                    }
                }
            }
        }
    }

    /// Record the search's probes with the arm's server up until its bracket is found, the
    /// server dies, a stop rule fires or the run is interrupted.
    pub(super) fn run_search(
        &mut self,
        stage: &str,
        arm: &Arm,
        spec: &search::CapacitySearch,
        state: &mut SearchState,
        launched: &mut Launched,
        who: &str,
    ) -> Result<(), CampaignError> {
        loop {
            if self.interrupted() || self.summary.stop_rule.is_some() {
                return self.finish_search(arm, spec, state, Err("interrupted".to_owned()));
            }
            let (load, repeat) = match search::next_step(spec, &state.seen, &exact_interval) {
                search::Step::Done(bracket) => {
                    return self.finish_search(arm, spec, state, Ok(bracket));
                }
                search::Step::Probe { load, repeat } => (load, repeat),
            };
            let planned = self.probe_cell(stage, arm, spec, load, repeat)?;
            if let CellState::Unusable(why) = &planned.state {
                self.supersede(&planned, why)?;
            }
            self.say(&format!(
                "{} capacity search: {} {load}, run {repeat}",
                arm.arm,
                match spec.vary {
                    search::Vary::Concurrency => "concurrency",
                    search::Vary::Rate => "rate",
                }
            ));
            self.summary.cells += 1;
            if planned.state != CellState::Recorded {
                self.record(&planned)?;
            }
            if self.deaths(who, launched, "probe", &planned.name())? {
                return self.finish_search(arm, spec, state, Err("its server died".to_owned()));
            }
            match self.observe(&planned, spec, &state.slos, load, repeat) {
                Ok(o) => {
                    self.log_probe(&arm.arm, &o, spec, false)?;
                    state.seen.push(o);
                }
                Err(why) => {
                    return self.finish_search(
                        arm,
                        spec,
                        state,
                        Err(format!("probe {} was not recorded: {why}", planned.name())),
                    );
                }
            }
        }
    }

    pub(super) fn probe_cell(
        &self,
        stage: &str,
        arm: &Arm,
        spec: &search::CapacitySearch,
        load: f64,
        repeat: u32,
    ) -> Result<PlannedCell, CampaignError> {
        self.campaign
            .probe(
                &self.file,
                &self.manifest,
                stage,
                arm,
                spec,
                load,
                repeat,
                &self.out,
            )
            .map_err(|e| CampaignError::BadInput(format!("arm {}: search: {e}", arm.arm)))
    }

    /// A probe's attainment over the search's window, read from its complete artifact as
    /// `anvil sql` reads the `goodput` view (a session class's: `session_goodput`).
    pub(super) fn observe(
        &self,
        planned: &PlannedCell,
        spec: &search::CapacitySearch,
        slos: &crate::slo::Slos,
        load: f64,
        repeat: u32,
    ) -> Result<search::Observation, String> {
        let dir = &planned.dir;
        let run = crate::artifact::RunJson::read(&dir.join(crate::artifact::RUN_JSON))
            .map_err(|e| format!("its run.json cannot be read ({e})"))?;
        if run.status != Status::Complete {
            return Err(format!("its status is {}", run.status.as_str()));
        }
        let sql = match self.campaign.class_kind(&spec.class).judged() {
            search::Judged::Requests => format!(
                "SELECT requests, attained, goodput_tps FROM goodput WHERE window = '{}'",
                spec.window.as_str()
            ),
            search::Judged::Sessions => format!(
                "SELECT sessions AS requests, attained, goodput_tps FROM session_goodput \
                 WHERE window = '{}'",
                spec.window.as_str()
            ),
        };
        let rows = self
            .rt
            .block_on(async {
                let session =
                    crate::query::AnvilSession::open_with(&[dir.to_owned()], slos, false).await?;
                let r = session.query(&sql).await?;
                Ok::<_, crate::query::QueryError>((
                    crate::query::rows::column_f64(&r, "requests")?,
                    crate::query::rows::column_f64(&r, "attained")?,
                    crate::query::rows::column_f64(&r, "goodput_tps")?,
                ))
            })
            .map_err(|e| format!("its attainment could not be read ({e})"))?;
        let (Some(Some(requests)), Some(Some(attained))) = (rows.0.first(), rows.1.first()) else {
            return Err("it has no measured request (or session) in the window".to_owned());
        };
        Ok(search::Observation {
            load,
            repeat,
            run_id: run.run_id,
            dir: dir.clone(),
            attained: *attained as u64,
            requests: *requests as u64,
            goodput_tps: rows.2.first().copied().flatten(),
        })
    }

    pub(super) fn log_probe(
        &mut self,
        arm: &str,
        o: &search::Observation,
        spec: &search::CapacitySearch,
        reused: bool,
    ) -> Result<(), CampaignError> {
        let (low, high) = exact_interval(o.attained, o.requests);
        let share = o.attained as f64 / o.requests.max(1) as f64;
        self.log(
            "search_probe",
            json!({"arm": arm, "load": o.load, "repeat": o.repeat, "dir": o.dir.display().to_string(),
                   "run_id": o.run_id, "attained": o.attained, "requests": o.requests,
                   "share": share, "low": low, "high": high,
                   "meets_target": share >= spec.target, "reused": reused}),
        )?;
        self.say(&format!(
            "  {arm}: load {}: {} of {} attained ({:.1}% [{:.1}%, {:.1}%]){}",
            o.load,
            o.attained,
            o.requests,
            share * 100.0,
            low * 100.0,
            high * 100.0,
            if reused { ", recorded earlier" } else { "" }
        ));
        Ok(())
    }

    /// Journal the search's end and write its result into `capacity.json` (other arms'
    /// results kept).
    pub(super) fn finish_search(
        &mut self,
        arm: &Arm,
        spec: &search::CapacitySearch,
        state: &SearchState,
        ended: Result<search::Bracket, String>,
    ) -> Result<(), CampaignError> {
        let texts: Vec<String> = crate::slo::texts(state.slos.default_slos());
        let shape = search::ArmShape {
            replicas: arm.replicas().max(1) as u32,
            gpus: arm.gpus(&self.campaign.defaults).map(|g| g.count),
        };
        let result = search::result(
            &arm.arm,
            spec,
            self.campaign.class_kind(&spec.class).judged(),
            &texts,
            state.seen.clone(),
            ended,
            shape,
            &mean_interval,
        );
        self.log(
            "search_done",
            json!({"arm": arm.arm, "status": result.status, "capacity": result.capacity,
                   "verdict": result.verdict}),
        )?;
        self.say(&format!("{} capacity search: {}", arm.arm, result.verdict));
        let path = self.folder.join(CAPACITY_JSON);
        // Other arms' results are kept; a file that cannot be read is replaced (the
        // journal holds every probe it described).
        let mut doc = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| Capacity::parse(&t).ok())
            .unwrap_or_else(|| Capacity::new(&self.campaign.campaign_id));
        doc.upsert(result.clone());
        crate::outfile::write_file(&path, doc.to_json().as_bytes())
            .map_err(|e| CampaignError::Failed(e.to_string()))?;
        self.summary
            .capacity
            .push(format!("{}: {}", arm.arm, result.verdict));
        Ok(())
    }
}
