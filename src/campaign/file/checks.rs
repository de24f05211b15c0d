//! What a campaign file states wrongly on its own ([`CampaignFile::problems`]) or against
//! its manifest and plan ([`CampaignFile::check_against`]): arms, services (launch command
//! or endpoints, ports, readiness, stop method), cells, sweeps, repeats, searches, declared
//! workloads and SLOs, each problem named by its field.

use std::path::Path;

use super::{
    Arm, CampaignFile, MAX_LOCAL_SHARDS, MAX_WARMUP_REQUESTS, PLACEHOLDERS, Repeats, Service,
};
use crate::manifest::{Problem, RunPlan, WorkloadManifest};
use crate::workload::cells;

impl CampaignFile {
    /// What the file states wrongly on its own.
    pub fn problems(&self) -> Vec<Problem> {
        let mut out = Vec::new();
        if self.campaign_id.trim().is_empty() {
            out.push(Problem::new("campaign_id", "must not be empty"));
        }
        service_problems("starting_service", &self.starting_service.service, &mut out);
        for key in self.defaults.keys() {
            if key.trim().is_empty() || key == "runtime" {
                out.push(Problem::new(
                    format!("defaults.{key}"),
                    "a default is a configuration key (not empty, not runtime)",
                ));
            }
        }
        if self.starting_service.model.trim().is_empty() {
            out.push(Problem::new("starting_service.model", "must not be empty"));
        }
        if self
            .warmup_requests
            .is_some_and(|n| n > MAX_WARMUP_REQUESTS)
        {
            out.push(Problem::new(
                "warmup_requests",
                format!("must be at most {MAX_WARMUP_REQUESTS}"),
            ));
        }
        if let Some(o) = &self.objective
            && (o.priority.is_empty() || o.text.trim().is_empty())
        {
            out.push(Problem::new(
                "objective",
                "give the objective in words (`text`) and at least one criterion (`priority`, e.g. [\"capacity_per_gpu\", \"tpot_p50\"])",
            ));
        }
        for (word, to) in &self.aliases {
            let ok = to
                .split_once('=')
                .is_some_and(|(k, v)| !k.trim().is_empty() && !v.trim().is_empty());
            if !ok || word.trim().is_empty() {
                out.push(Problem::new(
                    format!("aliases.{word}"),
                    format!("`{to}` is not a setting: map a word to key=value, e.g. \"mamba=extra_buffer96\""),
                ));
            }
        }
        let arms: Vec<String> = self.all_arms().iter().map(|a| a.arm.clone()).collect();
        let arms: Vec<&str> = arms.iter().map(String::as_str).collect();
        for (i, claim) in self.claims.iter().enumerate() {
            for (field, what) in claim.problems(&arms) {
                out.push(Problem::new(format!("claims[{i}].{field}"), what));
            }
        }
        for (key, what) in self.min_effect.iter().flat_map(|m| m.problems()) {
            let at = if key.is_empty() {
                "min_effect".to_owned()
            } else {
                format!("min_effect.{key}")
            };
            out.push(Problem::new(at, what));
        }
        if !(self.slo_target > 0.0 && self.slo_target <= 1.0) {
            out.push(Problem::new(
                "slo_target",
                format!(
                    "{} is not a share of requests: give one in (0, 1], e.g. 0.9",
                    self.slo_target
                ),
            ));
        }
        for (i, arm) in self.arms.iter().enumerate() {
            arm_problems(&format!("arms[{i}]"), arm, &mut out);
        }
        for (i, arm) in self.all_arms().iter().enumerate() {
            if let Some(search) = &arm.search {
                let replicas = arm.replicas();
                out.extend(search.problems(
                    &format!("arm `{}` (arm {}): search", arm.arm, i + 1),
                    replicas,
                    &self.slo,
                    self.class_kind(&search.class),
                ));
            }
        }
        for (i, sweep) in self.sweeps.iter().enumerate() {
            let at = format!("sweeps[{i}]");
            if sweep.values.len() < 2 {
                out.push(Problem::new(
                    format!("{at}.values"),
                    "a sweep needs at least two values",
                ));
            }
            if !sweep.template.arm.contains("{value}") {
                out.push(Problem::new(
                    format!("{at}.template.arm"),
                    "must hold `{value}`, so each value names its own arm (e.g. `K{value}`)",
                ));
            }
            if sweep.template.service.config.contains_key(&sweep.key) {
                out.push(Problem::new(
                    format!("{at}.template.config.{}", sweep.key),
                    "is the key the sweep sets: leave it out of the template",
                ));
            }
            arm_problems(&format!("{at}.template"), &sweep.template, &mut out);
        }
        for (i, sweep) in self.sweeps.iter().enumerate() {
            for arm in sweep.expand() {
                if let Err(why) = crate::artifact::path_component(&arm.arm) {
                    out.push(Problem::new(
                        format!("sweeps[{i}].values"),
                        format!("arm `{}` {why}", arm.arm),
                    ));
                }
            }
        }

        out.extend(crate::workload::declared::section_problems(
            &self.workloads,
            &[],
        ));
        let mut seen = std::collections::BTreeSet::new();
        for arm in self.all_arms() {
            if !seen.insert(arm.arm.clone()) {
                out.push(Problem::new(
                    "arms",
                    format!(
                        "arm `{}` is defined twice (an arm or a sweep value)",
                        arm.arm
                    ),
                ));
            }
        }
        out
    }

    /// What does not hold against the manifest and the plan the file names: every arm must
    /// be an arm of the plan (named as the plan spells it), every cell class and cell id one
    /// the manifest defines, and the campaign ids must agree.
    pub fn check_against(
        &self,
        file: &Path,
        manifest: &WorkloadManifest,
        plan: &RunPlan,
    ) -> Vec<Problem> {
        let mut out = Vec::new();
        let arms = self.all_arms();
        if manifest.campaign_id != self.campaign_id || plan.campaign_id != self.campaign_id {
            out.push(Problem::new(
                "campaign_id",
                format!(
                    "`{}`, but the manifest is campaign `{}` and the plan `{}`",
                    self.campaign_id, manifest.campaign_id, plan.campaign_id
                ),
            ));
        }
        let plan_arms: Vec<&String> = plan
            .execution_order
            .iter()
            .flat_map(|stage| stage.arms.iter().flatten())
            .collect();
        let unknown: Vec<String> = arms
            .iter()
            .map(|a| a.arm.clone())
            .filter(|a| !plan_arms.contains(&a))
            .collect();
        if !unknown.is_empty() {
            out.push(Problem::new(
                "arms",
                format!(
                    "not arms of the run plan: {}; the plan's arms are {}",
                    quoted(&unknown),
                    quoted(&plan_arms.iter().map(|a| (*a).clone()).collect::<Vec<_>>())
                ),
            ));
        }
        let manifest_classes: Vec<&str> = manifest
            .workload_classes
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        for p in crate::workload::declared::section_problems(&self.workloads, &manifest_classes) {
            if p.message.contains("is a class of the manifest") {
                out.push(p);
            }
        }
        let base = file.parent().unwrap_or(Path::new("."));
        for (i, w) in self.workloads.iter().enumerate() {
            if let Err(why) = w.cell(manifest, base) {
                out.push(Problem::new(format!("workloads[{i}].trace"), why));
            }
            if !plan.post_campaign_open_gates.contains(&w.gate) {
                out.push(Problem::new(
                    format!("workloads[{i}].gate"),
                    format!(
                        "`{}` is not an open gate of the run plan; its gates are {}",
                        w.gate,
                        quoted(&plan.post_campaign_open_gates)
                    ),
                ));
            }
        }
        // A declared class stands beside the manifest's wherever an arm names a class.
        let classes: Vec<&str> = manifest_classes
            .iter()
            .copied()
            .chain(self.workloads.iter().map(|w| w.class.as_str()))
            .collect();
        let ids: Vec<String> = self.cells(file, manifest).iter().map(|c| c.id()).collect();
        // Every request of a one-shot class is turn 0: a list it is judged by with no bound
        // for turn 0 would let every request that succeeds attain.
        let one_shot = |class: &str| {
            !matches!(
                self.class_kind(class),
                crate::campaign::search::ClassKind::Sessions { .. }
            )
        };
        let bounds_turn_0 = |slos: &[crate::slo::Slo]| {
            slos.is_empty() || slos.iter().any(|s| s.turns.holds_turn(0))
        };
        let default_users = classes
            .iter()
            .any(|c| one_shot(c) && !self.slo.classes.contains_key(*c));
        if default_users && !bounds_turn_0(&self.slo.default) {
            out.push(Problem::new(
                "slo.default",
                "every bound is scoped to later turns, but classes without a list of their own \
                 are one-shot (every request is turn 0): give a bound for turn 0 (unscoped, or \
                 `turn 0: ...`)"
                    .to_owned(),
            ));
        }
        for (class, slos) in &self.slo.classes {
            if one_shot(class) && !bounds_turn_0(slos) {
                out.push(Problem::new(
                    format!("slo.{class}"),
                    format!(
                        "every bound is scoped to later turns, but `{class}` is not a session \
                         class (every request is turn 0): give a bound for turn 0"
                    ),
                ));
            }
        }
        for class in self.slo.classes.keys() {
            if class == cells::FUNCTIONAL {
                out.push(Problem::new(
                    format!("slo.{class}"),
                    "functional cells count in no attainment or goodput (they check tools and \
                     formats): remove the key"
                        .to_owned(),
                ));
            } else if !classes.contains(&class.as_str()) {
                out.push(Problem::new(
                    format!("slo.{class}"),
                    format!(
                        "`{class}` is not a workload class of the manifest; its classes are {}",
                        quoted(&classes.iter().map(|c| (*c).to_owned()).collect::<Vec<_>>())
                    ),
                ));
            }
        }
        for arm in &arms {
            for (what, n) in arm.cells.repeats.counts() {
                if n == 0 || n > Repeats::MAX {
                    out.push(Problem::new(
                        format!("arm `{}`: cells.repeats", arm.arm),
                        format!("{what}: {n} runs; give 1 to {}", Repeats::MAX),
                    ));
                }
                if what != "(every cell)"
                    && !ids.contains(&what)
                    && !classes.contains(&what.as_str())
                {
                    out.push(Problem::new(
                        format!("arm `{}`: cells.repeats", arm.arm),
                        format!(
                            "`{what}` is neither a cell id nor a workload class of the manifest or the `workloads` section"
                        ),
                    ));
                }
            }
            if let Some(n) = arm
                .cells
                .shards
                .filter(|n| *n == 0 || *n > MAX_LOCAL_SHARDS)
            {
                out.push(Problem::new(
                    format!("arm `{}`: cells.shards", arm.arm),
                    format!("{n} shard processes; give 1 to {MAX_LOCAL_SHARDS}"),
                ));
            }
            for (what, t) in &arm.cells.timeouts {
                if !ids.contains(what) && !classes.contains(&what.as_str()) {
                    out.push(Problem::new(
                        format!("arm `{}`: cells.timeouts", arm.arm),
                        format!(
                            "`{what}` is neither a cell id nor a workload class of the manifest or the `workloads` section"
                        ),
                    ));
                }
                for why in t.problems() {
                    out.push(Problem::new(
                        format!("arm `{}`: cells.timeouts.{what}", arm.arm),
                        why,
                    ));
                }
            }
            if let Some(search) = &arm.search
                && !classes.contains(&search.class.as_str())
            {
                out.push(Problem::new(
                    format!("arm `{}`: search.class", arm.arm),
                    format!(
                        "`{}` is not a workload class of the manifest or the `workloads` section ({})",
                        search.class,
                        classes.join(", ")
                    ),
                ));
            }
            for class in &arm.cells.classes {
                if !classes.contains(&class.as_str()) {
                    out.push(Problem::new(
                        format!("arm `{}`: cells.classes", arm.arm),
                        format!(
                            "`{class}` is not a workload class of the manifest or the `workloads` section ({})",
                            classes.join(", ")
                        ),
                    ));
                }
            }
            for id in &arm.cells.ids {
                if !ids.contains(id) {
                    out.push(Problem::new(
                        format!("arm `{}`: cells.ids", arm.arm),
                        format!("`{id}` is not a cell of the manifest (`anvil-capture cells` lists them)"),
                    ));
                }
            }
        }
        out
    }
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn arm_problems(at: &str, arm: &Arm, out: &mut Vec<Problem>) {
    if let Err(why) = crate::artifact::path_component(&arm.arm.replace("{value}", "0")) {
        out.push(Problem::new(
            format!("{at}.arm"),
            format!("`{}` {why}", arm.arm),
        ));
    }
    if arm.cells.classes.is_empty() && arm.cells.ids.is_empty() && arm.search.is_none() {
        out.push(Problem::new(
            format!("{at}.cells"),
            "names no cell: list `classes` or `ids`, or ask for a `search`",
        ));
    }
    service_problems(at, &arm.service, out);
}

fn service_problems(at: &str, service: &Service, out: &mut Vec<Problem>) {
    match (&service.launch, service.endpoints.is_empty()) {
        (None, true) => out.push(Problem::new(
            at,
            "needs a `launch` command or the `endpoints` of servers already running",
        )),
        (Some(_), false) => out.push(Problem::new(
            at,
            "has both `launch` and `endpoints`: a launched server's endpoints come from `ports`",
        )),
        _ => {}
    }
    if let Some(launch) = &service.launch {
        if launch.argv.is_empty() {
            out.push(Problem::new(
                format!("{at}.launch.argv"),
                "must name a program",
            ));
        }
        if service.ports.is_empty() {
            out.push(Problem::new(
                format!("{at}.ports"),
                "a launched service needs one port per replica",
            ));
        }
        for (k, arg) in launch.argv.iter().enumerate() {
            for placeholder in unknown_placeholders(arg) {
                out.push(Problem::new(
                    format!("{at}.launch.argv[{k}]"),
                    format!(
                        "unknown placeholder `{placeholder}`; known: {}",
                        PLACEHOLDERS.join(", ")
                    ),
                ));
            }
        }
    }
    for (k, url) in service.endpoints.iter().enumerate() {
        if let Err(e) = crate::capture::endpoint::Endpoint::parse(0, url) {
            out.push(Problem::new(
                format!("{at}.endpoints[{k}]"),
                format!("`{url}`: {e}"),
            ));
        }
    }
    if !matches!(service.readiness.path.as_str(), "/health" | "/v1/models") {
        out.push(Problem::new(
            format!("{at}.readiness.path"),
            format!(
                "`{}`: expected /health or /v1/models",
                service.readiness.path
            ),
        ));
    }
    let seconds = |v: f64| v.is_finite() && v > 0.0 && v <= 86_400.0;
    if !seconds(service.readiness.timeout_s) {
        out.push(Problem::new(
            format!("{at}.readiness.timeout_s"),
            "must be a positive number of seconds, at most a day",
        ));
    }
    if !matches!(service.stop.signal.as_str(), "SIGTERM" | "SIGINT") {
        out.push(Problem::new(
            format!("{at}.stop.signal"),
            format!("`{}`: expected SIGTERM or SIGINT", service.stop.signal),
        ));
    }
    if !(service.stop.grace_s.is_finite() && (0.0..=3600.0).contains(&service.stop.grace_s)) {
        out.push(Problem::new(
            format!("{at}.stop.grace_s"),
            "must be between 0 and 3600 seconds",
        ));
    }
    if service.runtime.trim().is_empty() {
        out.push(Problem::new(format!("{at}.runtime"), "must not be empty"));
    }
    telemetry_problems(at, service, out);
}

/// An arm's telemetry sources must read as `anvil-capture run --telemetry` reads them, with
/// GPUs and intervals declared for every source or none.
fn telemetry_problems(at: &str, service: &Service, out: &mut Vec<Problem>) {
    let t = &service.telemetry;
    if t.is_empty() {
        return;
    }
    let at = format!("{at}.telemetry");
    for (what, some) in [
        ("gpus", t.iter().filter(|d| d.gpus.is_some()).count()),
        (
            "interval_s",
            t.iter().filter(|d| d.interval_s.is_some()).count(),
        ),
    ] {
        if some != 0 && some != t.len() {
            out.push(Problem::new(
                &at,
                format!("`{what}` is given for some sources and not others: give it for each, or for none"),
            ));
        }
    }
    if t.iter().any(|d| d.source.contains("{port}")) && service.launch.is_none() {
        out.push(Problem::new(
            &at,
            "`{port}` stands for a launched replica's port: this service is not launched",
        ));
    }
    if let Err(e) = crate::capture::telemetry::sampler::declared(&service.telemetry_request()) {
        out.push(Problem::new(&at, e.to_string()));
    }
}

/// The `{…}` groups of `arg` that are not known placeholders.
fn unknown_placeholders(arg: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = arg;
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start..].find('}') else {
            break;
        };
        let group = &rest[start..start + len + 1];
        if !PLACEHOLDERS.contains(&group) {
            out.push(group.to_owned());
        }
        rest = &rest[start + len + 1..];
    }
    out
}
