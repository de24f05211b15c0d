//! The servers of a campaign run: launching a service (journaled, its secrets kept out of
//! the journal), waiting until it is ready, stopping it, noticing replicas that died, and
//! stopping servers an earlier run left behind.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use serde_json::{Value, json};

use super::{CampaignError, Runner};
use crate::artifact::redact_args;
use crate::campaign::Service;
use crate::campaign::journal;
use crate::campaign::supervise::{self, Launched, NotReady, Stopped};

impl Runner<'_> {
    /// Launch `service` for `who` (its logs in `log_dir`) to record `repeat` (its `{repeat}`;
    /// 1 for a launch that records no particular repeat), journaled. `None` when it could not
    /// start (journaled as failed).
    pub(super) fn launch(
        &mut self,
        who: &str,
        service: &Service,
        log_dir: &Path,
        repeat: u32,
    ) -> Result<Option<(u32, Launched)>, CampaignError> {
        let Some(launch) = &service.launch else {
            return Ok(Some((0, Launched::default())));
        };
        self.launches += 1;
        let id = self.launches;
        let secrets = launch_secrets(service);
        match supervise::launch(
            launch,
            repeat,
            &service.ports,
            &self.base,
            log_dir,
            who,
            &secrets,
        ) {
            Ok(launched) => {
                let replicas: Vec<Value> = launched
                    .replicas
                    .iter()
                    .map(|r| {
                        json!({
                            "replica": r.index,
                            "port": r.port,
                            "pid": r.pid,
                            "start_ticks": r.start_ticks,
                            "argv": redact_args(&r.argv, &secrets),
                            "log": r.log.display().to_string(),
                        })
                    })
                    .collect();
                self.log(
                    "launched",
                    json!({
                        "launch": id, "who": who, "repeat": repeat, "replicas": replicas,
                        "boot_id": supervise::boot_id(),
                        "env": launch.env.keys().collect::<Vec<_>>(),
                    }),
                )?;
                Ok(Some((id, launched)))
            }
            Err(why) => {
                self.log("failed", json!({"who": who, "what": "launch", "why": why}))?;
                self.fail(format!("{who}: not launched: {why}"));
                Ok(None)
            }
        }
    }

    /// The base URLs of a service: its launched replicas, or the endpoints it names.
    pub(super) fn urls(service: &Service, launched: &Launched) -> Vec<String> {
        if service.launch.is_some() {
            launched.urls()
        } else {
            service.endpoints.clone()
        }
    }

    pub(super) fn wait_ready(
        &mut self,
        who: &str,
        service: &Service,
        launched: &mut Launched,
        interrupted: &AtomicBool,
    ) -> Result<Result<f64, NotReady>, CampaignError> {
        let urls = Self::urls(service, launched);
        self.say(&format!(
            "{who}: waiting for {} on {} (up to {} s)",
            service.readiness.path,
            urls.join(", "),
            service.readiness.timeout_s
        ));
        let managed = service.launch.is_some().then_some(launched);
        let ready =
            supervise::wait_ready(&self.rt, &urls, &service.readiness, managed, interrupted);
        match &ready {
            Ok(s) => self.log("ready", json!({"who": who, "after_s": s, "urls": urls}))?,
            Err(NotReady::Interrupted) => {}
            Err(why) => {
                self.log("not_ready", json!({"who": who, "why": why.to_string()}))?;
            }
        }
        Ok(ready)
    }

    /// Stop what `launch` started, journaled; a replica that could not be stopped is a failure.
    pub(super) fn stop(
        &mut self,
        who: &str,
        id: u32,
        service: &Service,
        launched: &mut Launched,
    ) -> Result<Vec<Stopped>, CampaignError> {
        if launched.replicas.is_empty() {
            return Ok(Vec::new());
        }
        let stopped = launched.stop(&service.stop);
        let each: Vec<Value> = stopped
            .iter()
            .map(|s| {
                json!({
                    "replica": s.replica, "pid": s.pid, "status": s.status,
                    "killed": s.killed, "not_stopped": s.not_stopped, "after_s": s.seconds,
                })
            })
            .collect();
        self.log(
            "stopped",
            json!({"launch": id, "who": who, "signal": service.stop.signal, "replicas": each}),
        )?;
        for s in stopped.iter().filter(|s| s.not_stopped) {
            self.fail(format!(
                "{who}: replica {} (pid {}) could not be stopped: {}",
                s.replica, s.pid, s.status
            ));
        }
        Ok(stopped)
    }

    /// Servers an earlier runner launched and never stopped (it was killed, or it left the
    /// restored service running): each replica whose process is still the one launched (same
    /// pid, start time and boot) is stopped, SIGTERM then SIGKILL.
    pub(super) fn stop_orphans(&mut self, earlier: &[Value]) -> Result<(), CampaignError> {
        use std::time::{Duration, Instant};
        let boot = supervise::boot_id();
        for (line, pid, ticks) in orphan_candidates(earlier, boot.as_deref()) {
            if supervise::start_ticks(pid) != Some(ticks) {
                continue;
            }
            self.say(&format!(
                "stopping pid {pid} ({}), left running by an earlier run of this campaign",
                line["who"].as_str().unwrap_or("a server")
            ));
            let gone = |until: Instant| loop {
                if supervise::start_ticks(pid) != Some(ticks) && !supervise::group_exists(pid) {
                    return true;
                }
                if Instant::now() >= until {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(100));
            };
            supervise::signal_group(pid, libc::SIGTERM);
            let killed = !gone(Instant::now() + Duration::from_secs(30));
            if killed {
                supervise::signal_group(pid, libc::SIGKILL);
                gone(Instant::now() + Duration::from_secs(5));
            }
            self.log(
                "orphan_stopped",
                json!({"who": line["who"], "pid": pid, "launch": line["launch"], "killed": killed}),
            )?;
        }
        Ok(())
    }

    /// Journal and report every replica of `launched` that exited during the `what` (`cell`
    /// or `probe`) `name`; whether any did.
    pub(super) fn deaths(
        &mut self,
        who: &str,
        launched: &mut Launched,
        what: &str,
        name: &str,
    ) -> Result<bool, CampaignError> {
        let died = launched.exited();
        for (replica, pid, status) in &died {
            self.log(
                "died",
                json!({"who": who, "replica": replica, "pid": pid, "status": status, "during": name}),
            )?;
            self.fail(format!(
                "{who}: replica {replica} (pid {pid}) {status} during {what} {name}"
            ));
        }
        Ok(!died.is_empty())
    }
}

/// The replicas an earlier run of the campaign launched on this boot (its journal's
/// `launched` lines): each with its line, pid and start time, to stop if it is still the
/// process launched.
pub(super) fn orphan_candidates(earlier: &[Value], boot: Option<&str>) -> Vec<(Value, u32, u64)> {
    let mut out = Vec::new();
    for line in earlier.iter().filter(|l| journal::step(l) == "launched") {
        if line["boot_id"].as_str() != boot {
            continue;
        }
        for r in line["replicas"].as_array().into_iter().flatten() {
            if let (Some(pid), Some(ticks)) = (
                r["pid"].as_u64().and_then(|p| u32::try_from(p).ok()),
                r["start_ticks"].as_u64(),
            ) {
                out.push((line.clone(), pid, ticks));
            }
        }
    }
    out
}

/// The values of a launch's secret-named environment variables (`HF_TOKEN`, `API_KEY`, …):
/// removed wherever its command line is written.
pub(super) fn launch_secrets(service: &Service) -> Vec<&str> {
    service
        .launch
        .iter()
        .flat_map(|l| &l.env)
        .filter(|(k, _)| crate::artifact::is_secret_name(k))
        .map(|(_, v)| v.as_str())
        .collect()
}

/// The configuration keys a service declares, its runtime among them.
pub(super) fn configuration(service: &Service) -> BTreeMap<String, String> {
    let mut keys = service.config.clone();
    keys.insert("runtime".to_owned(), service.runtime.clone());
    keys
}
