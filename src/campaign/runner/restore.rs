//! Steps 1 and 3 of a campaign run: the starting service's fingerprint before the first arm,
//! and after the last its restoration through the managed path, fingerprinted again,
//! compared, and written to `restoration.json`.

use std::sync::atomic::AtomicBool;

use serde_json::{Value, json};

use super::service::{configuration, launch_secrets};
use super::{CampaignError, Runner, STARTING_SERVICE_DIR};
use crate::artifact::redact_args;
use crate::artifact::restoration::{
    RESTORATION_SCHEMA, Restoration, RestorationCheck, ServiceFingerprint,
};

impl Runner<'_> {
    /// The starting service's fingerprint at `urls`, journaled as `of`.
    pub(super) fn fingerprint(
        &mut self,
        urls: &[String],
        of: &str,
    ) -> Result<ServiceFingerprint, CampaignError> {
        let starting = &self.campaign.starting_service;
        let fp = self.rt.block_on(crate::campaign::fingerprint::take(
            urls,
            &starting.model,
            configuration(&starting.service),
        ));
        self.log("fingerprint", json!({"of": of, "fingerprint": fp}))?;
        Ok(fp)
    }

    /// Step 1: the starting service's fingerprint, journaled. A managed service is started
    /// for it and stopped after; one that does not start or answer stops the campaign before
    /// anything is recorded (its restoration could not be shown).
    pub(super) fn fingerprint_starting_service(
        &mut self,
    ) -> Result<ServiceFingerprint, CampaignError> {
        let service = self.campaign.starting_service.service.clone();
        let who = "starting service";
        let log_dir = self.folder.join(STARTING_SERVICE_DIR);
        let Some((id, mut launched)) = self.launch(who, &service, &log_dir, 1)? else {
            return Err(CampaignError::Failed(format!(
                "the starting service could not be started ({}); nothing was recorded",
                self.summary.failures.last().cloned().unwrap_or_default()
            )));
        };
        let never = AtomicBool::new(false);
        let ready = self.wait_ready(who, &service, &mut launched, &never)?;
        if let Err(why) = ready {
            self.stop(who, id, &service, &mut launched)?;
            return Err(CampaignError::Failed(format!(
                "the starting service did not become ready: {why}; its log is in {}; nothing was recorded",
                log_dir.display()
            )));
        }
        let urls = Self::urls(&service, &launched);
        let fp = self.fingerprint(&urls, "starting service before")?;
        let model = self.campaign.starting_service.model.clone();
        if fp.models.is_empty() || !fp.models.iter().all(|m| m.contains(&model)) {
            self.stop(who, id, &service, &mut launched)?;
            return Err(CampaignError::BadInput(format!(
                "starting_service.model: the starting service does not list `{model}` (GET /v1/models per replica: {:?}); name the model it serves, or its restoration could never be shown; nothing was recorded",
                fp.models
            )));
        }
        self.say(&format!(
            "starting service fingerprinted: models {:?}, version {}",
            fp.models,
            fp.server_version.as_deref().unwrap_or("not said")
        ));
        self.stop(who, id, &service, &mut launched)?;
        Ok(fp)
    }

    /// Step 3: bring the starting service back through the managed path, fingerprint it,
    /// compare, write `restoration.json`, leave it running.
    pub(super) fn restore(&mut self, before: ServiceFingerprint) -> Result<(), CampaignError> {
        let service = self.campaign.starting_service.service.clone();
        let model = self.campaign.starting_service.model.clone();
        let who = "starting service";
        let started_at = crate::clock::utc_now();
        self.say("restoring the starting service");
        self.log("restore_started", json!({}))?;
        let mut checks = Vec::new();
        let mut ready_at = None;
        let mut after = None;
        let log_dir = self.folder.join(STARTING_SERVICE_DIR);
        let launched = self.launch(who, &service, &log_dir, 1)?;
        let mut pids = Vec::new();
        let mut argv = Vec::new();
        let mut urls = service.endpoints.clone();
        match launched {
            None => checks.push(RestorationCheck {
                check: "launch".to_owned(),
                passed: false,
                expected: Value::from("the launch command starts"),
                observed: Value::from(self.summary.failures.last().cloned().unwrap_or_default()),
                detail: "the starting service's launch command did not start".to_owned(),
            }),
            Some((id, mut launched)) => {
                urls = Self::urls(&service, &launched);
                let secrets = launch_secrets(&service);
                argv = launched
                    .replicas
                    .iter()
                    .map(|r| redact_args(&r.argv, &secrets))
                    .collect();
                // Restoring is not interrupted: it is what an interrupt leads to.
                let never = AtomicBool::new(false);
                let ready = self.wait_ready(who, &service, &mut launched, &never)?;
                checks.push(RestorationCheck {
                    check: "ready".to_owned(),
                    passed: ready.is_ok(),
                    expected: Value::from(format!("{} answers 200", service.readiness.path)),
                    observed: Value::from(match &ready {
                        Ok(s) => format!("ready after {s:.1} s"),
                        Err(why) => why.to_string(),
                    }),
                    detail: match &ready {
                        Ok(s) => format!("{} answered 200 after {s:.1} s", service.readiness.path),
                        Err(why) => why.to_string(),
                    },
                });
                if ready.is_ok() {
                    ready_at = Some(crate::clock::utc_now());
                    let fp = self.fingerprint(&urls, "starting service restored")?;
                    checks.extend(crate::campaign::fingerprint::compare(&before, &fp, &model));
                    after = Some(fp);
                }
                pids = launched.replicas.iter().map(|r| r.pid).collect();
                if self.stop_after_restore {
                    self.stop(who, id, &service, &mut launched)?;
                } else {
                    pids = launched.leave_running();
                    if !pids.is_empty() {
                        self.log("left_running", json!({"who": who, "pids": pids}))?;
                    }
                }
            }
        }
        let restored = all_passed(&checks);
        let doc = Restoration {
            schema: RESTORATION_SCHEMA.to_owned(),
            campaign_id: self.campaign.campaign_id.clone(),
            restored,
            managed_path: if service.launch.is_some() {
                "launch".to_owned()
            } else {
                "endpoints".to_owned()
            },
            argv,
            endpoints: urls,
            pids,
            started_at,
            ready_at,
            finished_at: crate::clock::utc_now(),
            before: Some(before),
            after,
            checks,
        };
        let mut text = serde_json::to_string_pretty(&doc)
            .map_err(|e| CampaignError::Failed(format!("encoding restoration.json: {e}")))?;
        text.push('\n');
        let path = self.summary.restoration.clone();
        crate::outfile::write_file(&path, text.as_bytes())
            .map_err(|e| CampaignError::Failed(format!("{}: {e}", path.display())))?;
        let verdict = doc.verdict();
        self.log(
            if restored { "restored" } else { "not_restored" },
            json!({"verdict": verdict, "file": path.display().to_string()}),
        )?;
        self.say(&format!("starting service {verdict}; {}", path.display()));
        self.summary.restoration_verdict = verdict;
        self.summary.restored = restored;
        Ok(())
    }
}

/// The service is restored when it was checked and every check passed.
pub(super) fn all_passed(checks: &[RestorationCheck]) -> bool {
    !checks.is_empty() && checks.iter().all(|c| c.passed)
}
