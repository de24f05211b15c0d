//! The evidence files a plan names (`restoration.json`, …) are matched by file name: every
//! file name at or beneath the data folders (folders whose name starts with `.` are not
//! searched, as for artifacts). Each file named as a restore stage's evidence is read as a
//! `restoration.json` document, and each `capacity.json` as the capacity searches' results
//! (one that cannot be read is left out and named in `unread`).

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::artifact::restoration::Restoration;
use crate::manifest::RunPlan;
use crate::rules::EvidenceFiles;
use crate::rules::stop::RESTORE_STAGE;

/// Names of every file at or beneath each of `data` (sorted per folder), and each restore
/// stage's evidence file of `plan` read.
pub fn evidence_files(plan: &RunPlan, data: &[PathBuf]) -> anyhow::Result<EvidenceFiles> {
    let mut paths = Vec::new();
    for dir in data {
        file_paths(dir, &mut paths)
            .with_context(|| format!("--data {}: listing files", dir.display()))?;
    }
    let wanted: Vec<&str> = plan
        .execution_order
        .iter()
        .filter(|s| s.stage == RESTORE_STAGE)
        .filter_map(|s| s.evidence.as_deref())
        .collect();
    let mut evidence = EvidenceFiles::default();
    for path in paths {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if name == "campaign.json" {
            let found = campaign_mappings(&path);
            evidence.aliases.extend(found.aliases);
            evidence.declared_controls.extend(found.controls);
            evidence.min_effect = evidence.min_effect.or(found.min_effect);
            evidence.slo_target = evidence.slo_target.or(found.slo_target);
            evidence.declared_claims.extend(found.claims);
        }
        if name == crate::artifact::capacity::CAPACITY_JSON {
            match std::fs::read_to_string(&path)
                .map_err(|e| e.to_string())
                .and_then(|t| crate::artifact::capacity::Capacity::parse(&t))
            {
                Ok(doc) => evidence.capacity.extend(doc.searches),
                Err(why) => evidence.unread.push(format!(
                    "{}: {why}; its capacity searches are left out",
                    crate::location::shown(&path)
                )),
            }
        }
        if wanted.contains(&name) {
            // Named as the user gave the data: a remote copy by its URL.
            let read = Restoration::read(&path);
            evidence
                .restorations
                .push((PathBuf::from(crate::location::shown(&path)), read));
        }
        evidence.names.push(name.to_owned());
    }
    Ok(evidence)
}

/// Every file at or beneath `dir`, searched as artifacts are ([`crate::query::source`]):
/// hidden folders skipped and symbolic links to folders not followed (a link loop is then
/// no error, and no folder is listed twice).
fn file_paths(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if dir.is_file() {
        out.push(dir.to_owned());
        return Ok(());
    }
    let mut entries: Vec<(PathBuf, std::fs::FileType)> = std::fs::read_dir(dir)?
        .map(|e| e.and_then(|e| Ok((e.path(), e.file_type()?))))
        .collect::<Result<_, _>>()?;
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (path, kind) in entries {
        if kind.is_dir() {
            if !crate::query::source::is_hidden(&path) {
                file_paths(&path, out)?;
            }
        } else if path.is_file() {
            out.push(path);
        }
    }
    Ok(())
}

/// The `aliases` (word → `key=value`), declared `controls` and `claims`, `min_effect` and
/// `slo_target`
/// of a campaign file, read as plain JSON (the campaign layer sits above this one; `anvil validate` checks the file
/// itself); none when the file is not one or has none.
fn campaign_mappings(path: &Path) -> CampaignMappings {
    let Some(doc) = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .filter(|doc| {
            doc.get("schema")
                .and_then(|s| s.as_str())
                .is_some_and(|s| s.starts_with("anvil-serving.benchmark-campaign/"))
        })
    else {
        return CampaignMappings::default();
    };
    let aliases = doc
        .get("aliases")
        .and_then(|a| a.as_object())
        .map(|a| {
            a.iter()
                .filter_map(|(w, to)| Some((w.clone(), to.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    let controls = doc
        .get("controls")
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or_default();
    let claims = doc
        .get("claims")
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or_default();
    let min_effect = doc
        .get("min_effect")
        .and_then(|m| serde_json::from_value::<crate::rules::effect::MinEffect>(m.clone()).ok())
        .filter(|m| m.problems().is_empty());
    let slo_target = doc
        .get("slo_target")
        .and_then(|m| m.as_f64())
        .filter(|m| *m > 0.0 && *m <= 1.0);
    CampaignMappings {
        aliases,
        controls,
        claims,
        min_effect,
        slo_target,
    }
}

/// What the rules read from a campaign file beside the data.
#[derive(Debug, Default)]
struct CampaignMappings {
    aliases: Vec<(String, String)>,
    controls: Vec<crate::rules::controls::DeclaredControl>,
    claims: Vec<crate::rules::coverage::DeclaredClaim>,
    min_effect: Option<crate::rules::effect::MinEffect>,
    slo_target: Option<f64>,
}
