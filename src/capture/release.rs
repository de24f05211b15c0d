//! How a run's measured requests are released, from its flags or its class: closed loop, an
//! open loop at `--rate` (with `--poisson`, `--ramp`), a trace's own times, or a session
//! class's own arrivals; each checked within a day.

use std::time::Duration;

use super::error::{ConfigError, flag};
use super::request::{LoadRequest, RunRequest};
use crate::artifact::{Arrivals, Schedule};
use crate::workload::cells::Cell;

/// The longest an open-loop schedule may take to release its requests, seconds.
pub const MAX_SCHEDULE_S: f64 = 86_400.0;

/// The schedule and the ramp of a run of `cell` asked as `a`: a trace class at its own times
/// (no --rate, --poisson or --ramp), a session class at its sessions' (no --ramp or --shard;
/// --rate with --off-manifest was taken as its sessions' arrival rate when the cell was
/// chosen), every other cell as its flags say.
pub(super) fn schedule_for(
    a: &RunRequest,
    cell: &Cell,
) -> Result<(Schedule, Option<Duration>), ConfigError> {
    Ok(if let Some(trace) = &cell.trace {
        if a.load.rate.is_some() || a.load.ramp.is_some() {
            return Err(flag(
                "--rate",
                a.load.rate.or(a.load.ramp).unwrap_or_default(),
                format!(
                    "class `{}` replays a trace at its own times: leave out --rate, \
                     --poisson and --ramp (the trace's time_scale stretches it)",
                    cell.class
                ),
            ));
        }
        let span_s = trace.offsets_ns().last().copied().unwrap_or(0) as f64 / 1e9;
        if span_s > MAX_SCHEDULE_S {
            return Err(flag(
                "--class",
                &cell.class,
                format!(
                    "its trace replays over {span_s:.0} s; a schedule may span at most \
                     {MAX_SCHEDULE_S:.0} s (a day): declare a smaller time_scale or fewer rows \
                     (`requests`)"
                ),
            ));
        }
        (Schedule::Trace, None)
    } else if let Some(sessions) = &cell.sessions {
        // --rate (with --off-manifest) became the sessions' arrival rate when the cell was
        // chosen; the sessions arrive by their plan, Poisson.
        if a.load.ramp.is_some() || a.shard.is_some() {
            let (name, value) = match a.load.ramp {
                Some(r) => ("--ramp", r.to_string()),
                None => ("--shard", "given".to_owned()),
            };
            return Err(flag(
                name,
                value,
                format!(
                    "class `{}` is a session workload: its sessions arrive by its own \
                     `session.rate_per_s` (or --rate with --off-manifest: sessions per \
                     second), or `concurrency` at a time, on one host; leave out --ramp and \
                     --shard",
                    cell.class
                ),
            ));
        }
        if sessions.spec.tool_every.is_some() && a.api != crate::artifact::Api::Chat {
            return Err(flag(
                "--api",
                a.api.as_str(),
                format!(
                    "class `{}` has tool turns (`session.tool_every`), which only the chat \
                     API carries (an assistant message's tool_calls, a tool message)",
                    cell.class
                ),
            ));
        }
        (sessions.schedule(), None)
    } else {
        schedule_of(&a.load, cell.requests)?
    })
}

/// The schedule and the ramp, each within a day.
fn schedule_of(
    load: &LoadRequest,
    requests: u64,
) -> Result<(Schedule, Option<Duration>), ConfigError> {
    if load.poisson && load.rate.is_none() {
        return Err(flag(
            "--poisson",
            "",
            "needs --rate (Poisson arrivals at that mean rate)",
        ));
    }
    let schedule = match load.rate {
        None => Schedule::Closed,
        Some(r) if r.is_finite() && r > 0.0 && r <= 1e6 => Schedule::Open {
            rate_per_s: r,
            arrivals: if load.poisson {
                Arrivals::Poisson
            } else {
                Arrivals::Constant
            },
        },
        Some(r) => {
            return Err(flag(
                "--rate",
                r,
                "must be a positive number of requests per second",
            ));
        }
    };
    let ramp = match load.ramp {
        None => None,
        Some(r) if r.is_finite() && r > 0.0 && r <= MAX_SCHEDULE_S => {
            Some(Duration::from_secs_f64(r))
        }
        Some(r) => {
            return Err(flag(
                "--ramp",
                r,
                format!(
                    "must be a positive number of seconds, at most {MAX_SCHEDULE_S:.0} (a day)"
                ),
            ));
        }
    };
    if let Some(rate) = schedule.rate_per_s() {
        // A ramp stretches the schedule by half its length (`schedule::ramped_offset_s`).
        let span_s =
            requests.saturating_sub(1) as f64 / rate + ramp.map_or(0.0, |r| r.as_secs_f64() / 2.0);
        if span_s > MAX_SCHEDULE_S {
            return Err(flag(
                "--rate",
                rate,
                format!(
                    "releases the {requests} requests over {span_s:.0} s; a schedule may span at \
                     most {MAX_SCHEDULE_S:.0} s (a day): give a higher rate or fewer requests"
                ),
            ));
        }
    }
    Ok((schedule, ramp))
}
