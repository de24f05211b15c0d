//! The run plan's stop rules: findings that halt the campaign whatever the figures say.
//!
//! Each rule is a pure function of one artifact (or of the plan and the evidence files of
//! the data folder) returning the findings it fired, each naming the run, the requests and
//! what was found.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::Serialize;

use crate::artifact::restoration::Restoration;
use crate::artifact::run::Outcome;
use crate::manifest::RunPlan;

use super::advance::{indices, outcomes};
use super::input::{Artifact, FunctionalFailure, STRUCTURED_OUTPUT_CHECK};

/// Plan stage whose evidence shows the starting service was restored.
pub const RESTORE_STAGE: &str = "restore";

/// Structured-output failures at or above which corruption is repeatable.
pub const CORRUPTION_THRESHOLD: usize = 2;

/// What kind of server error a body describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum ErrorKind {
    /// Out of memory (`out of memory`, `OOM`, `OutOfMemoryError`).
    OutOfMemory,
    /// A CUDA error (`CUDA error`, `cudaErrorIllegalAddress`, …).
    Cuda,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::OutOfMemory => "out-of-memory",
            ErrorKind::Cuda => "CUDA",
        }
    }
}

impl std::fmt::Display for StopKind {
    /// The stop rule in words, as `check`, the report and the Markdown print it (`STOP
    /// cross-request contamination …`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

impl StopKind {
    /// The stop rule in words, wherever a person reads it.
    pub fn label(self) -> &'static str {
        match self {
            StopKind::Contamination => "cross-request contamination",
            StopKind::StructuredOutputCorruption => "structured-output corruption",
            StopKind::UnexplainedLoss => "unexplained loss",
            StopKind::Restart => "restart",
            StopKind::ServerError(ErrorKind::OutOfMemory) => "out-of-memory error",
            StopKind::ServerError(ErrorKind::Cuda) => "CUDA error",
            StopKind::ParserCorruption => "parser corruption",
            StopKind::NotRestored => "service not restored",
        }
    }

    /// Its machine name, as JSON and the campaign journal write it.
    pub fn name(self) -> &'static str {
        match self {
            StopKind::Contamination => "contamination",
            StopKind::StructuredOutputCorruption => "structured_output_corruption",
            StopKind::UnexplainedLoss => "unexplained_loss",
            StopKind::Restart => "restart",
            StopKind::ServerError(ErrorKind::OutOfMemory) => "out_of_memory_error",
            StopKind::ServerError(ErrorKind::Cuda) => "cuda_error",
            StopKind::ParserCorruption => "parser_corruption",
            StopKind::NotRestored => "not_restored",
        }
    }
}

impl Serialize for StopKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// The kinds a server error body mentions (a CUDA out-of-memory error is both).
pub fn classify_error(body: &str) -> Vec<ErrorKind> {
    let lower = body.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let mut kinds = Vec::new();
    if lower.contains("out of memory") || lower.contains("outofmemory") || words.contains(&"oom") {
        kinds.push(ErrorKind::OutOfMemory);
    }
    if words.iter().any(|w| w.starts_with("cuda")) {
        kinds.push(ErrorKind::Cuda);
    }
    kinds
}

/// Which stop rule fired. Shown by its [`StopKind::label`] (`Display`) in `check`, the
/// report and the Markdown alike; named in JSON and the journal by [`StopKind::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopKind {
    /// Cross-request canary or tool-argument contamination.
    Contamination,
    /// Structured-output corruption in two or more requests.
    StructuredOutputCorruption,
    /// Requests lost or failed without a recorded reason.
    UnexplainedLoss,
    /// A replica's process restarted during the run, or the replica stopped answering and
    /// did not come back.
    Restart,
    /// A server error body mentions out-of-memory or a CUDA error.
    ServerError(ErrorKind),
    /// Responses whose stream could not be parsed (`protocol_error` outcomes).
    ParserCorruption,
    /// The restore stage's evidence is missing.
    NotRestored,
}

/// A stop rule that fired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StopFinding {
    pub kind: StopKind,
    /// The run it fired on; `None` for plan-level findings.
    pub run_id: Option<String>,
    pub reason: String,
}

/// Cross-request contamination: a reply carrying another request's canary in its content or
/// in its tool-call arguments. Names each request and the foreign canaries.
pub fn contamination(artifact: &Artifact) -> Option<StopFinding> {
    let mut parts = Vec::new();
    for result in &artifact.figures.canaries {
        if !result.foreign.is_empty() {
            parts.push(format!(
                "request {} returned {}",
                result.request_index,
                result.foreign.join(", ")
            ));
        }
        if !result.foreign_in_tool_arguments.is_empty() {
            parts.push(format!(
                "request {} tool arguments carried {}",
                result.request_index,
                result.foreign_in_tool_arguments.join(", ")
            ));
        }
    }
    (!parts.is_empty()).then(|| StopFinding {
        kind: StopKind::Contamination,
        run_id: Some(artifact.facts.run_id.clone()),
        reason: format!(
            "run {}: cross-request contamination: {}",
            artifact.facts.run_id,
            parts.join("; ")
        ),
    })
}

/// Repeatable structured-output corruption: the structured JSON check found a whole reply
/// invalid in at least [`CORRUPTION_THRESHOLD`] requests (results without a request index
/// count once each). A reply cut by the token ceiling, or a request that did not complete
/// (an HTTP error is a loss), is not corrupted output.
pub fn structured_output_corruption(artifact: &Artifact) -> Option<StopFinding> {
    let failed: Vec<_> = artifact
        .figures
        .functional
        .iter()
        .filter(|r| {
            r.check == STRUCTURED_OUTPUT_CHECK
                && !r.passed
                && r.failure == Some(FunctionalFailure::Invalid)
        })
        .collect();
    let indexed: BTreeSet<i64> = failed.iter().filter_map(|r| r.request_index).collect();
    let unindexed = failed.iter().filter(|r| r.request_index.is_none()).count();
    let count = indexed.len() + unindexed;
    (count >= CORRUPTION_THRESHOLD).then(|| {
        let at = if indexed.is_empty() {
            String::new()
        } else {
            format!(" (requests {})", indices(indexed.iter().copied()))
        };
        StopFinding {
            kind: StopKind::StructuredOutputCorruption,
            run_id: Some(artifact.facts.run_id.clone()),
            reason: format!(
                "run {}: structured-output corruption in {count} requests{at}",
                artifact.facts.run_id
            ),
        }
    })
}

/// Unexplained loss: planned requests with no row, and failed requests without an error
/// text (a failed request whose `error` column holds the server's or client's reason is
/// explained; it still fails advance rule 1).
pub fn unexplained_loss(artifact: &Artifact) -> Option<StopFinding> {
    let figures = &artifact.figures;
    let planned = artifact.facts.workload.total_requests;
    let measured = figures.requests.measured;
    let explained = figures
        .server_errors
        .iter()
        .filter(|e| !e.body.trim().is_empty())
        .map(|e| e.request_index)
        .collect::<BTreeSet<_>>()
        .len() as u64;
    let unexplained = figures.requests.failed_total().saturating_sub(explained);
    let mut parts = Vec::new();
    if measured < planned {
        parts.push(format!(
            "{} of {planned} planned requests have no record",
            planned - measured
        ));
    }
    if unexplained > 0 {
        parts.push(format!(
            "{unexplained} failed requests without an error text (failed: {})",
            outcomes(&figures.requests.failed)
        ));
    }
    (!parts.is_empty()).then(|| StopFinding {
        kind: StopKind::UnexplainedLoss,
        run_id: Some(artifact.facts.run_id.clone()),
        reason: format!(
            "run {}: unexplained loss: {}",
            artifact.facts.run_id,
            parts.join("; ")
        ),
    })
}

/// A replica that restarted during the run (its `process_start_time_seconds` changed, or its
/// counters fell, and it answered again), or that stopped answering and did not come back
/// (see the `restarts` view); the reason says which, with what was observed.
pub fn restarts(artifact: &Artifact) -> Vec<StopFinding> {
    artifact
        .figures
        .restarts
        .iter()
        .map(|restart| StopFinding {
            kind: StopKind::Restart,
            run_id: Some(artifact.facts.run_id.clone()),
            reason: format!(
                "run {}: replica {} {} ({})",
                artifact.facts.run_id,
                restart.replica,
                restart.what(),
                restart.evidence()
            ),
        })
        .collect()
}

/// Server errors whose body mentions out-of-memory or CUDA errors, one finding per kind
/// naming the requests.
pub fn server_errors(artifact: &Artifact) -> Vec<StopFinding> {
    let mut findings = Vec::new();
    for kind in [ErrorKind::OutOfMemory, ErrorKind::Cuda] {
        let requests: Vec<i64> = artifact
            .figures
            .server_errors
            .iter()
            .filter(|e| classify_error(&e.body).contains(&kind))
            .map(|e| e.request_index)
            .collect();
        if !requests.is_empty() {
            findings.push(StopFinding {
                kind: StopKind::ServerError(kind),
                run_id: Some(artifact.facts.run_id.clone()),
                reason: format!(
                    "run {}: {} server errors in requests {}",
                    artifact.facts.run_id,
                    kind.as_str(),
                    indices(requests)
                ),
            });
        }
    }
    findings
}

/// Parser corruption: measured requests whose response was not a valid stream (outcome
/// `protocol_error`), whether or not an error text explains them, and measured requests with
/// events whose data could not be parsed (invalid JSON or UTF-8), whatever their outcome.
pub fn parser_corruption(artifact: &Artifact) -> Option<StopFinding> {
    let figures = &artifact.figures;
    let count = figures
        .requests
        .failed
        .get(&Outcome::ProtocolError)
        .copied()
        .unwrap_or(0);
    let mut parts = Vec::new();
    if count > 0 {
        let requests: Vec<i64> = figures
            .server_errors
            .iter()
            .filter(|e| e.outcome == Outcome::ProtocolError)
            .map(|e| e.request_index)
            .collect();
        let at = if requests.is_empty() {
            String::new()
        } else {
            format!(" (requests {})", indices(requests))
        };
        parts.push(format!(
            "{count} responses could not be parsed as a stream{at}"
        ));
    }
    if let Some(first) = figures.parse_errors.first() {
        let events: u64 = figures.parse_errors.iter().map(|p| p.events).sum();
        parts.push(format!(
            "{events} events of requests {} could not be parsed (request {}: {})",
            indices(figures.parse_errors.iter().map(|p| p.request_index)),
            first.request_index,
            first.first
        ));
    }
    (!parts.is_empty()).then(|| StopFinding {
        kind: StopKind::ParserCorruption,
        run_id: Some(artifact.facts.run_id.clone()),
        reason: format!("run {}: {}", artifact.facts.run_id, parts.join("; ")),
    })
}

/// The evidence files of the data folders: every file name, and each restore-stage evidence
/// file read as a `restoration.json` document.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvidenceFiles {
    /// Every file name at or beneath the data folders.
    pub names: Vec<String>,
    /// Each file named as a restore stage's evidence, read: its path, and the document or
    /// why it cannot be read.
    pub restorations: Vec<(PathBuf, Result<Restoration, String>)>,
    /// Every capacity search's result in the `capacity.json` files found, read.
    pub capacity: Vec<crate::artifact::capacity::CapacityResult>,
    /// Evidence files that could not be read, each with why (for the edge to say).
    pub unread: Vec<String>,
    /// Plan words mapped to recorded settings (`word`, `key=value`): the `aliases` of the
    /// campaign file beside the data.
    pub aliases: Vec<(String, String)>,
    /// The workload manifest's controls, as written.
    pub manifest_controls: Vec<String>,
    /// Their mappings as the campaign file beside the data declares them (`controls`).
    pub declared_controls: Vec<super::controls::DeclaredControl>,
    /// The campaign file's `min_effect`: the smallest difference that matters, as a share of
    /// the reference's figure (one share, or one per figure).
    pub min_effect: Option<super::effect::MinEffect>,
    /// The campaign file's `slo_target`: the share of requests that must attain the SLOs.
    pub slo_target: Option<f64>,
    /// The claims' mappings the campaign file declares (`claims`).
    pub declared_claims: Vec<super::coverage::DeclaredClaim>,
}

impl EvidenceFiles {
    /// File names only (no evidence document read).
    pub fn names(names: &[&str]) -> Self {
        Self {
            names: names.iter().map(|n| (*n).to_owned()).collect(),
            restorations: Vec::new(),
            capacity: Vec::new(),
            unread: Vec::new(),
            aliases: Vec::new(),
            manifest_controls: Vec::new(),
            declared_controls: Vec::new(),
            min_effect: None,
            slo_target: None,
            declared_claims: Vec::new(),
        }
    }
}

/// What a restore stage's evidence shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RestoreEvidence {
    pub order: u64,
    pub stage: String,
    /// The evidence file the plan names.
    pub file: Option<String>,
    /// The file is there and every copy read says the service was restored.
    pub supported: bool,
    /// One line per copy read (its path and verdict), or why the stage is not supported.
    pub lines: Vec<String>,
}

/// Every plan stage named [`RESTORE_STAGE`] and what its evidence shows: the plan must name
/// an evidence file, the file must be in the data folder, and every copy of it that was read
/// must say the service was restored (else the failing checks are said).
pub fn restore_evidence(plan: &RunPlan, evidence: &EvidenceFiles) -> Vec<RestoreEvidence> {
    plan.stages_in_order()
        .into_iter()
        .filter(|stage| stage.stage == RESTORE_STAGE)
        .map(|stage| {
            let at = format!("stage {} {}", stage.order, stage.stage);
            let mut lines = Vec::new();
            let mut supported = false;
            match stage.evidence.as_deref() {
                None => lines.push(format!(
                    "{at}: the plan names no evidence file; the service cannot be shown restored"
                )),
                Some(file) if !evidence.names.iter().any(|n| n == file) => lines.push(format!(
                    "{at}: evidence file {file} is missing from the data folder"
                )),
                Some(file) => {
                    supported = true;
                    for (path, read) in evidence
                        .restorations
                        .iter()
                        .filter(|(p, _)| p.file_name().is_some_and(|n| n == file))
                    {
                        match read {
                            Err(why) => {
                                supported = false;
                                lines.push(format!("{at}: {} {why}", path.display()));
                            }
                            Ok(r) => {
                                let restored = r.restored && r.failed_checks().is_empty();
                                supported &= restored;
                                lines.push(format!("{at}: {}: {}", path.display(), r.verdict()));
                            }
                        }
                    }
                }
            }
            RestoreEvidence {
                order: stage.order.get(),
                stage: stage.stage.clone(),
                file: stage.evidence.clone(),
                supported,
                lines,
            }
        })
        .collect()
}

/// The restore stages whose evidence does not show the service restored, one finding per
/// cause.
pub fn restoration(plan: &RunPlan, evidence: &EvidenceFiles) -> Vec<StopFinding> {
    restore_evidence(plan, evidence)
        .into_iter()
        .filter(|r| !r.supported)
        .flat_map(|r| r.lines)
        .map(|reason| StopFinding {
            kind: StopKind::NotRestored,
            run_id: None,
            reason,
        })
        .collect()
}

/// Every stop rule over every artifact and the plan.
pub fn stop_rules(
    artifacts: &[Artifact],
    plan: &RunPlan,
    evidence: &EvidenceFiles,
) -> Vec<StopFinding> {
    let mut findings: Vec<StopFinding> = artifacts.iter().flat_map(artifact_stop_rules).collect();
    findings.extend(restoration(plan, evidence));
    findings
}

/// The stop rules of one artifact (every rule but the restore stage's).
pub fn artifact_stop_rules(artifact: &Artifact) -> Vec<StopFinding> {
    let mut findings = Vec::new();
    findings.extend(contamination(artifact));
    findings.extend(structured_output_corruption(artifact));
    findings.extend(unexplained_loss(artifact));
    findings.extend(restarts(artifact));
    findings.extend(server_errors(artifact));
    findings.extend(parser_corruption(artifact));
    findings
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{artifact, fail_requests, plan, server_error};
    use super::super::input::{FunctionalResult, Restart, RestartSignal};
    use super::*;
    use crate::artifact::run::Outcome;

    #[test]
    fn a_clean_artifact_fires_nothing() {
        let a = artifact("r-a", "A", &[], 1000.0);
        assert_eq!(
            stop_rules(
                &[a],
                &plan(),
                &EvidenceFiles::names(&["restoration.json", "run.json"])
            ),
            []
        );
    }

    #[test]
    fn contamination_names_requests_and_foreign_canaries() {
        let mut a = artifact("r-a", "A", &[], 1000.0);
        a.figures.canaries[3].foreign =
            vec!["ANV-00000000000a".to_owned(), "ANV-00000000000b".to_owned()];
        a.figures.canaries[9].foreign_in_tool_arguments = vec!["ANV-00000000000c".to_owned()];
        assert_eq!(
            contamination(&a).unwrap().reason,
            "run r-a: cross-request contamination: request 3 returned ANV-00000000000a, \
             ANV-00000000000b; request 9 tool arguments carried ANV-00000000000c"
        );
    }

    #[test]
    fn structured_corruption_fires_from_two_requests() {
        let mut a = artifact("r-a", "A", &[], 1000.0);
        let failed = |index, failure| FunctionalResult {
            check: "structured_json".to_owned(),
            request_index: Some(index),
            passed: false,
            reason: Some("at /priority: \"urgent\" is not one of ...".to_owned()),
            failure: Some(failure),
        };
        let corrupt = |index| failed(index, FunctionalFailure::Invalid);
        a.figures.functional.push(corrupt(4));
        assert_eq!(structured_output_corruption(&a), None);
        // Replies cut by the token ceiling and requests that failed (HTTP 500) are not
        // corrupted output.
        a.figures
            .functional
            .push(failed(5, FunctionalFailure::Truncated));
        a.figures
            .functional
            .push(failed(6, FunctionalFailure::Incomplete));
        assert_eq!(structured_output_corruption(&a), None);
        a.figures.functional.push(corrupt(9));
        assert_eq!(
            structured_output_corruption(&a).unwrap().reason,
            "run r-a: structured-output corruption in 2 requests (requests 4, 9)"
        );
    }

    #[test]
    fn loss_without_an_error_text_is_unexplained() {
        let mut a = artifact("r-a", "A", &[], 1000.0);
        a.figures.requests.measured = 99;
        a.figures.requests.ok = 99;
        fail_requests(&mut a, Outcome::Disconnected, 2);
        server_error(&mut a, 5, Outcome::Disconnected, "connection reset by peer");
        assert_eq!(
            unexplained_loss(&a).unwrap().reason,
            "run r-a: unexplained loss: 1 of 100 planned requests have no record; \
             1 failed requests without an error text (failed: disconnected 2)"
        );
        let b = artifact("r-b", "B", &[], 1000.0);
        assert_eq!(unexplained_loss(&b), None);
    }

    #[test]
    fn restart_fires() {
        let mut a = artifact("r-a", "A", &[], 1000.0);
        a.figures.restarts.push(Restart {
            replica: 0,
            signal: RestartSignal::StartTime {
                before_s: 100.0,
                after_s: 250.5,
            },
        });
        assert_eq!(
            restarts(&a)[0].reason,
            "run r-a: replica 0 restarted (process_start_time_seconds 100 → 250.5)"
        );
        a.figures.restarts[0] = Restart {
            replica: 1,
            signal: RestartSignal::CounterReset {
                counters: 12,
                example: "llamacpp:prompt_tokens_total".to_owned(),
            },
        };
        assert_eq!(
            restarts(&a)[0].reason,
            "run r-a: replica 1 restarted (12 counters fell between two scrapes, e.g. \
             llamacpp:prompt_tokens_total: the server began counting again)"
        );
    }

    /// A server that was stopped and stayed down did not restart: the finding says it
    /// stopped answering, with when it last answered and how the requests after failed.
    #[test]
    fn a_replica_that_stayed_down_stopped_answering_not_restarted() {
        let mut a = artifact("r-a", "A", &[], 1000.0);
        a.figures.restarts.push(Restart {
            replica: 0,
            signal: RestartSignal::StoppedAnswering {
                last_answer_s: Some(12.34),
                failed: 20,
                outcomes: "connect_error 12, aborted 8".to_owned(),
            },
        });
        let reason = &restarts(&a)[0].reason;
        assert_eq!(
            reason,
            "run r-a: replica 0 stopped answering (its last answer (a /metrics scrape or a \
             successful request) came 12.3 s into the run; the 20 measured requests that ended \
             after it all failed (connect_error 12, aborted 8), and no later scrape answered, \
             the one after the run included: it did not come back)"
        );
        assert!(!reason.contains("restart"), "{reason}");
    }

    #[test]
    fn server_errors_are_classified_by_kind() {
        assert_eq!(
            classify_error("torch.OutOfMemoryError: CUDA out of memory"),
            [ErrorKind::OutOfMemory, ErrorKind::Cuda]
        );
        assert_eq!(
            classify_error("engine OOM-killed"),
            [ErrorKind::OutOfMemory]
        );
        assert_eq!(
            classify_error("RuntimeError: cudaErrorIllegalAddress"),
            [ErrorKind::Cuda]
        );
        assert_eq!(classify_error("rate limited; room for 0 more"), []);
        let mut a = artifact("r-a", "A", &[], 1000.0);
        for (index, body) in [
            (2, "CUDA error: an illegal memory access"),
            (6, "400 bad request"),
        ] {
            server_error(&mut a, index, Outcome::HttpError, body);
        }
        let findings = server_errors(&a);
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].kind, StopKind::ServerError(ErrorKind::Cuda));
        assert_eq!(
            findings[0].reason,
            "run r-a: CUDA server errors in requests 2"
        );
    }

    #[test]
    fn unparseable_streams_are_parser_corruption() {
        let mut a = artifact("r-a", "A", &[], 1000.0);
        assert_eq!(parser_corruption(&a), None);
        fail_requests(&mut a, Outcome::ProtocolError, 1);
        let html = "expected `data:` line, found `<html>`";
        server_error(&mut a, 41, Outcome::ProtocolError, html);
        assert_eq!(
            parser_corruption(&a).unwrap().reason,
            "run r-a: 1 responses could not be parsed as a stream (requests 41)"
        );
    }

    #[test]
    fn missing_restore_evidence_fires() {
        let plan = plan();
        assert_eq!(
            restoration(&plan, &EvidenceFiles::names(&["restoration.json"])),
            []
        );
        assert_eq!(
            restoration(&plan, &EvidenceFiles::names(&["run.json", "requests.parquet"])),
            [StopFinding {
                kind: StopKind::NotRestored,
                run_id: None,
                reason: "stage 6 restore: evidence file restoration.json is missing from the data folder"
                    .to_owned(),
            }]
        );
    }
}
