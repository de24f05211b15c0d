//! `anvil validate`: check campaign documents (workload manifests, run plans and campaign
//! files, chosen by their `schema` field; a campaign file also against the manifest and plan
//! it names) and artifact folders (a folder holding `run.json`), reporting one finding
//! per input so a reviewer sees what each path is and whether it holds.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use crate::artifact::{self, ArtifactSummary};
use crate::manifest::{self, Document, DocumentKind, ManifestError};

/// The file that marks a folder as an artifact.
const RUN_JSON: &str = "run.json";

/// What `anvil validate` found at one path.
#[derive(Debug)]
pub enum Finding {
    /// A valid workload manifest or run plan.
    Document { file: PathBuf, document: Document },
    /// A valid campaign file, checked against its manifest and plan.
    Campaign {
        file: PathBuf,
        campaign_id: String,
        arms: usize,
    },
    /// A `restoration.json` the rules can read (whether it says restored or not).
    Restoration {
        file: PathBuf,
        campaign_id: String,
        verdict: String,
    },
    /// A `capacity.json` of the campaign runner's capacity searches.
    Capacity {
        file: PathBuf,
        campaign_id: String,
        searches: Vec<crate::artifact::capacity::CapacityResult>,
    },
    /// A valid artifact folder.
    Artifact {
        dir: PathBuf,
        summary: ArtifactSummary,
    },
    /// A searched directory: what was found beneath it (each item is its own finding).
    Directory {
        dir: PathBuf,
        documents: usize,
        artifacts: usize,
        skipped_json: usize,
    },
    /// Something that does not hold; `message` names the path (and field) on every line.
    Invalid { path: PathBuf, message: String },
}

impl Finding {
    pub fn is_valid(&self) -> bool {
        !matches!(self, Finding::Invalid { .. })
    }

    fn invalid(path: &Path, message: impl fmt::Display) -> Self {
        let message = message.to_string();
        let shown = path.display().to_string();
        // Messages from the loaders already start with the path; others get it in front.
        let message = if message.starts_with(&shown) {
            message
        } else {
            format!("{shown}: {message}")
        };
        Finding::Invalid {
            path: path.to_path_buf(),
            message,
        }
    }

    fn from_document(file: &Path, result: Result<Document, ManifestError>) -> Self {
        match result {
            Ok(document) => Finding::Document {
                file: file.to_path_buf(),
                document,
            },
            Err(error) => Finding::invalid(file, error),
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::Document { file, document } => write!(
                f,
                "{}: {} {}, campaign {}: ok",
                file.display(),
                document.kind(),
                document.schema(),
                document.campaign_id()
            ),
            Finding::Campaign {
                file,
                campaign_id,
                arms,
            } => write!(
                f,
                "{}: campaign file {}, campaign {campaign_id}, {}: ok",
                file.display(),
                crate::campaign::CAMPAIGN_SCHEMA,
                count(*arms, "arm")
            ),
            Finding::Restoration {
                file,
                campaign_id,
                verdict,
            } => write!(
                f,
                "{}: restoration evidence {}, campaign {campaign_id}, {verdict}: ok",
                file.display(),
                crate::artifact::restoration::RESTORATION_SCHEMA,
            ),
            Finding::Capacity {
                file,
                campaign_id,
                searches,
            } => write!(
                f,
                "{}: capacity searches {}, campaign {campaign_id}, {}: ok",
                file.display(),
                crate::artifact::capacity::CAPACITY_SCHEMA,
                searches
                    .iter()
                    .map(|s| format!("{} {}", s.arm, s.status))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            Finding::Artifact { dir, summary } => write!(
                f,
                "{}: artifact of campaign {}, arm {}, cell {}, status {}, {} requests, {} events, \
                 {} scrapes: ok",
                dir.display(),
                summary.campaign_id,
                summary.arm,
                summary.cell_id,
                summary.status,
                summary.requests,
                summary.events,
                summary.scrapes
            ),
            Finding::Directory {
                dir,
                documents,
                artifacts,
                skipped_json,
            } => {
                write!(
                    f,
                    "{}: directory with {}, {}",
                    dir.display(),
                    count(*documents, "campaign document"),
                    count(*artifacts, "artifact folder")
                )?;
                if *skipped_json > 0 {
                    write!(
                        f,
                        " (skipped {} without a workload manifest or run plan schema)",
                        count(*skipped_json, "JSON file")
                    )?;
                }
                Ok(())
            }
            Finding::Invalid { message, .. } => f.write_str(message),
        }
    }
}

fn count(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// Validate one path given on the command line: a document file, an artifact folder, or a
/// directory searched recursively for both. Findings come in a stable (sorted) order.
pub fn validate_path(path: &Path) -> Vec<Finding> {
    let metadata = match fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return vec![Finding::invalid(path, "no such file or directory")];
        }
        Err(error) => return vec![Finding::invalid(path, format!("cannot read: {error}"))],
    };
    if metadata.is_dir() {
        if path.join(RUN_JSON).is_file() {
            return vec![validate_artifact(path)];
        }
        return validate_directory(path);
    }
    // An artifact's run.json stands for its folder.
    if path.file_name().is_some_and(|name| name == RUN_JSON)
        && let Some(dir) = path.parent()
    {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        return vec![validate_artifact(dir)];
    }
    if is_campaign_file(path) {
        return vec![validate_campaign(path)];
    }
    if is_restoration(path) {
        return vec![validate_restoration(path)];
    }
    if is_capacity(path) {
        return vec![validate_capacity(path)];
    }
    vec![Finding::from_document(path, manifest::load_any(path))]
}

/// Whether `path` says it is a campaign file: its `schema` field names the campaign family,
/// of any version (what a file merely mentions elsewhere does not count).
fn is_campaign_file(path: &Path) -> bool {
    fs::read_to_string(path).is_ok_and(|text| {
        manifest::parse_document(&text, path).is_ok_and(|value| names_campaign_schema(&value))
    })
}

/// Whether a parsed document's `schema` is a campaign file's, of any version.
fn names_campaign_schema(value: &serde_json::Value) -> bool {
    manifest::schema_of(value)
        .is_some_and(|schema| schema.starts_with(crate::campaign::CAMPAIGN_SCHEMA_FAMILY))
}

/// Whether `path`'s `schema` is `restoration.json`'s.
fn is_restoration(path: &Path) -> bool {
    fs::read_to_string(path).is_ok_and(|text| {
        manifest::parse_document(&text, path).is_ok_and(|value| {
            manifest::schema_of(&value) == Some(crate::artifact::restoration::RESTORATION_SCHEMA)
        })
    })
}

/// Whether `path`'s `schema` is `capacity.json`'s.
fn is_capacity(path: &Path) -> bool {
    fs::read_to_string(path).is_ok_and(|text| {
        manifest::parse_document(&text, path).is_ok_and(|value| {
            manifest::schema_of(&value) == Some(crate::artifact::capacity::CAPACITY_SCHEMA)
        })
    })
}

/// A capacity searches' result file.
fn validate_capacity(file: &Path) -> Finding {
    let read = fs::read_to_string(file)
        .map_err(|e| format!("cannot read: {e}"))
        .and_then(|text| crate::artifact::capacity::Capacity::parse(&text));
    match read {
        Ok(doc) => Finding::Capacity {
            file: file.to_path_buf(),
            campaign_id: doc.campaign_id,
            searches: doc.searches,
        },
        Err(why) => Finding::invalid(file, why),
    }
}

/// A restore stage's evidence file, read as the rules read it.
fn validate_restoration(file: &Path) -> Finding {
    match crate::artifact::restoration::Restoration::read(file) {
        Ok(r) => Finding::Restoration {
            file: file.to_path_buf(),
            verdict: r.verdict(),
            campaign_id: r.campaign_id,
        },
        Err(why) => Finding::invalid(file, why),
    }
}

/// A campaign file, checked on its own and against the manifest and plan it names.
fn validate_campaign(file: &Path) -> Finding {
    match crate::campaign::CampaignFile::load_checked(file) {
        Ok((campaign, _, _)) => Finding::Campaign {
            file: file.to_path_buf(),
            arms: campaign.all_arms().len(),
            campaign_id: campaign.campaign_id,
        },
        Err(error) => Finding::invalid(file, error),
    }
}

fn validate_artifact(dir: &Path) -> Finding {
    match artifact::validate_dir(dir) {
        Ok(summary) => Finding::Artifact {
            dir: dir.to_path_buf(),
            summary,
        },
        Err(message) => Finding::invalid(dir, message),
    }
}

/// Everything anvil knows beneath a directory that is not itself an artifact folder.
#[derive(Default)]
struct Search {
    findings: Vec<Finding>,
    documents: usize,
    artifacts: usize,
    skipped_json: usize,
}

fn validate_directory(dir: &Path) -> Vec<Finding> {
    let mut search = Search::default();
    search_directory(dir, &mut search);
    let summary = if search.documents + search.artifacts == 0
        && search.findings.iter().all(Finding::is_valid)
    {
        Finding::invalid(
            dir,
            format!(
                "no workload manifest, run plan or artifact folder found here or below{}",
                if search.skipped_json > 0 {
                    format!(
                        " ({} without a workload manifest or run plan schema)",
                        count(search.skipped_json, "JSON file")
                    )
                } else {
                    String::new()
                }
            ),
        )
    } else {
        Finding::Directory {
            dir: dir.to_path_buf(),
            documents: search.documents,
            artifacts: search.artifacts,
            skipped_json: search.skipped_json,
        }
    };
    let mut findings = vec![summary];
    findings.append(&mut search.findings);
    findings
}

fn search_directory(dir: &Path, search: &mut Search) {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) => {
            search.findings.push(Finding::invalid(
                dir,
                format!("cannot read directory: {error}"),
            ));
            return;
        }
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let path = entry.path();
        let hidden = entry.file_name().to_string_lossy().starts_with('.');
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        if file_type.is_dir() {
            if hidden {
                continue;
            }
            if path.join(RUN_JSON).is_file() {
                search.artifacts += 1;
                search.findings.push(validate_artifact(&path));
            } else {
                search_directory(&path, search);
            }
        } else if path.is_file()
            && path
                .extension()
                .is_some_and(|extension| extension.eq_ignore_ascii_case("json"))
        {
            validate_json_file(&path, search);
        }
    }
}

/// A `*.json` file found in a search: validated if its `schema` names a workload manifest or
/// run plan (any version), counted as skipped otherwise.
fn validate_json_file(file: &Path, search: &mut Search) {
    let text = match fs::read_to_string(file) {
        Ok(text) => text,
        Err(error) => {
            search
                .findings
                .push(Finding::invalid(file, format!("cannot read: {error}")));
            return;
        }
    };
    let value = match manifest::parse_document(&text, file) {
        Ok(value) => value,
        // Broken JSON naming a campaign schema is a broken campaign document; other
        // unparseable files (editor settings with comments, say) are not anvil's.
        Err(error)
            if DocumentKind::ALL
                .iter()
                .any(|kind| text.contains(kind.schema_family()))
                || text.contains(crate::campaign::CAMPAIGN_SCHEMA_FAMILY) =>
        {
            search.documents += 1;
            search.findings.push(Finding::invalid(file, error));
            return;
        }
        Err(_) => {
            search.skipped_json += 1;
            return;
        }
    };
    if names_campaign_schema(&value) {
        search.documents += 1;
        search.findings.push(validate_campaign(file));
        return;
    }
    if manifest::schema_of(&value) == Some(crate::artifact::restoration::RESTORATION_SCHEMA) {
        search.documents += 1;
        search.findings.push(validate_restoration(file));
        return;
    }
    if manifest::schema_of(&value) == Some(crate::artifact::capacity::CAPACITY_SCHEMA) {
        search.documents += 1;
        search.findings.push(validate_capacity(file));
        return;
    }
    let is_campaign_document = manifest::schema_of(&value)
        .and_then(DocumentKind::from_schema_family)
        .is_some();
    if is_campaign_document {
        search.documents += 1;
        search.findings.push(Finding::from_document(
            file,
            Document::from_value(value, file),
        ));
    } else {
        search.skipped_json += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_path_is_invalid_and_named() {
        let findings = validate_path(Path::new("no/such/manifest.json"));
        assert_eq!(findings.len(), 1);
        assert_eq!(
            findings[0].to_string(),
            "no/such/manifest.json: no such file or directory"
        );
        assert!(!findings[0].is_valid());
    }

    #[test]
    fn directory_without_anvil_documents_is_invalid() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("package.json"), "{\"name\": \"x\"}").unwrap();
        let findings = validate_path(dir.path());
        assert_eq!(findings.len(), 1);
        let line = findings[0].to_string();
        assert!(
            line.ends_with(
                "no workload manifest, run plan or artifact folder found here or below \
                 (1 JSON file without a workload manifest or run plan schema)"
            ),
            "{line}"
        );
    }
}
