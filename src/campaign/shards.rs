//! A cell recorded as several local shard processes, one run from several clients (the
//! campaign file's `cells.shards`): each shard a request of its own (`--shard I/N`, one
//! published instant a little ahead, its own CPU), each an `anvil-capture` process spawned
//! with [`RunRequest::to_argv`], their statuses folded into the run group's.

use std::path::PathBuf;
use std::time::Duration;

use crate::artifact::{RUN_JSON, RunJson, Status};
use crate::capture::RunSummary;
use crate::capture::request::{CpuPlacement, RunRequest, ShardArg, ShardRequest};
use crate::notice::Notices;
use crate::workload::shard::ShardSpec;

/// How long before a sharded cell's published instant its shard processes start: time for
/// each to check the servers, calibrate and warm up.
pub const SHARD_LEAD: Duration = Duration::from_secs(10);

/// The published instant of a cell's shards started now: [`SHARD_LEAD`] ahead, to the
/// second, RFC 3339 UTC.
pub fn start_instant() -> String {
    let at = time::OffsetDateTime::now_utc() + SHARD_LEAD;
    let at = at.replace_nanosecond(0).unwrap_or(at);
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| crate::clock::utc_now())
}

/// The request of each of `of` shards of `cell`, released at `start_at`. Each recorder
/// keeps its two busy threads on one CPU (`--cpu`); shards started together are spread over
/// `cpus` (the CPUs this process may use) instead of left to land on one, unless the cell's
/// request already places them.
pub fn requests(cell: &RunRequest, of: u32, start_at: &str, cpus: &[usize]) -> Vec<RunRequest> {
    (0..of)
        .map(|index| {
            let mut r = cell.clone();
            r.shard = Some(ShardRequest {
                shard: ShardArg::Fixed(ShardSpec { index, of }),
                start_at: start_at.to_owned(),
                start_margin: None,
                run_group: None,
            });
            if r.host.cpu.is_none() && !cpus.is_empty() {
                r.host.cpu = Some(CpuPlacement::Cpu(cpus[index as usize % cpus.len()]));
            }
            r
        })
        .collect()
}

/// The `anvil-capture` beside the running program, else the one on the PATH.
fn capture_program() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join("anvil-capture")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("anvil-capture"))
}

/// Record `shards` (from [`requests`]) as one `anvil-capture` process each, each command
/// said first; the run group's folder and the worst of the shards' statuses, with each
/// shard's reason. `Err` when no shard recorded an artifact.
pub fn record(shards: &[RunRequest], notices: &Notices) -> Result<RunSummary, String> {
    let program = capture_program();
    let of = shards.len();
    let mut children = Vec::new();
    for shard in shards {
        let argv = shard.to_argv();
        notices.say(&format!(
            "anvil campaign:   {} &",
            crate::shell::join(&argv)
        ));
        let child = std::process::Command::new(&program)
            .args(&argv[1..])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", program.display()))?;
        children.push(child);
    }
    let (mut status, mut reasons, mut group) = (Status::Complete, Vec::new(), None);
    for (index, child) in children.into_iter().enumerate() {
        let out = child
            .wait_with_output()
            .map_err(|e| format!("waiting for shard {index}/{of}: {e}"))?;
        let dir = String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .map(PathBuf::from);
        match dir
            .as_ref()
            .and_then(|d| RunJson::read(&d.join(RUN_JSON)).ok())
        {
            Some(run) => {
                status = worse(status, run.status);
                if let Some(r) = run.status_reason {
                    reasons.push(format!("shard {index}/{of}: {r}"));
                }
                group = group.or_else(|| dir.and_then(|d| d.parent().map(|p| p.to_owned())));
            }
            None => {
                status = Status::Failed;
                reasons.push(format!(
                    "shard {index}/{of} recorded no artifact (exit {:?})",
                    out.status.code()
                ));
            }
        }
    }
    let Some(dir) = group else {
        return Err(format!(
            "no shard of the cell recorded an artifact: {}",
            reasons.join("; ")
        ));
    };
    Ok(RunSummary {
        dir,
        status,
        reason: (!reasons.is_empty()).then(|| reasons.join("; ")),
        quick_look: String::new(),
    })
}

/// The worse of two run statuses: complete, interrupted, failed, still running.
fn worse(a: Status, b: Status) -> Status {
    let rank = |s: Status| match s {
        Status::Complete => 0,
        Status::Interrupted => 1,
        Status::Failed => 2,
        Status::Running => 3,
    };
    if rank(b) > rank(a) { b } else { a }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_shard_is_its_own_request_on_its_own_cpu() {
        let cell = RunRequest {
            out: "data".into(),
            ..RunRequest::default()
        };
        let at = "2026-12-06T10:00:00Z";
        let shards = requests(&cell, 3, at, &[0, 1]);
        let placed: Vec<(String, Option<CpuPlacement>)> = shards
            .iter()
            .map(|r| (r.shard.as_ref().unwrap().shard.to_string(), r.host.cpu))
            .collect();
        assert_eq!(
            placed,
            vec![
                ("0/3".to_owned(), Some(CpuPlacement::Cpu(0))),
                ("1/3".to_owned(), Some(CpuPlacement::Cpu(1))),
                ("2/3".to_owned(), Some(CpuPlacement::Cpu(0))),
            ]
        );
        let argv = shards[1].to_argv().join(" ");
        assert!(
            argv.ends_with(&format!("--shard 1/3 --start-at {at} --cpu 1")),
            "{argv}"
        );
        // A cell that places its recorder keeps it; no CPU list, no placement.
        let pinned = RunRequest {
            host: crate::capture::request::HostOptions {
                cpu: Some(CpuPlacement::Any),
                ..Default::default()
            },
            ..cell.clone()
        };
        assert!(
            requests(&pinned, 2, at, &[0, 1])
                .iter()
                .all(|r| r.host.cpu == Some(CpuPlacement::Any))
        );
        assert!(
            requests(&cell, 2, at, &[])
                .iter()
                .all(|r| r.host.cpu.is_none())
        );
    }

    #[test]
    fn the_run_group_is_as_bad_as_its_worst_shard() {
        assert_eq!(
            worse(Status::Complete, Status::Interrupted),
            Status::Interrupted
        );
        assert_eq!(worse(Status::Failed, Status::Interrupted), Status::Failed);
        assert_eq!(worse(Status::Complete, Status::Complete), Status::Complete);
    }
}
