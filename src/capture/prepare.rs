//! Step 4 of a run: every request's body serialised before the first one is sent, and what
//! the writer records about each ([`RequestMeta`]).
//!
//! - A functional run: each check's requests ([`functional::prepare`]).
//! - A trace replay: each row's prompt to its own length, its reply asked in full
//!   (`max_tokens` with `ignore_eos`); the warm-up requests are its first rows again under
//!   another salt, so what they leave in the server's cache is never a measured row's.
//! - A session class: the first turn of every session, and the warm-up requests. A later
//!   turn's body depends on the reply before it, so it is built during the run
//!   (`super::sessions`); here it gets its place (the session and turn it is, its canary)
//!   and no body ([`request::placeholder`]): nothing of it is built or sent.
//! - Every other cell: each request's calibrated prompt.

use super::config::RunConfig;
use super::recorder::RequestMeta;
use crate::artifact::{RequestKind, SessionTurn};
use crate::workload::calibration::Calibration;
use crate::workload::functional;
use crate::workload::prompt::PromptBuilder;
use crate::workload::request::{self, Api, PreparedRequest, RequestOptions};
use crate::workload::trace::replay::{Density, TracePrompts};

/// What preparing needs.
pub struct Inputs<'a> {
    pub cfg: &'a RunConfig,
    pub run_id: &'a str,
    /// The functional checks' cell.
    pub functional: bool,
    /// Warm-up requests after the measured ones.
    pub warmup: u32,
    /// The measured prompts' builder (the run's salt, group prefixes sized).
    pub builder: &'a PromptBuilder,
    pub opts: &'a RequestOptions,
    /// Each request's filler size, by index (fewer than the requests when calibration
    /// failed: those after them are not prepared).
    pub calibrations: &'a [Calibration],
    /// A trace replay's calibrated density.
    pub density: Option<Density>,
}

/// What preparing gave.
pub struct Prepared {
    /// By request index.
    pub prepared: Vec<PreparedRequest>,
    /// By request index, every request.
    pub metas: Vec<RequestMeta>,
    /// Why the run cannot go on, if it cannot.
    pub failed: Option<String>,
}

/// Every request of the run prepared.
pub fn requests(i: &Inputs<'_>) -> Prepared {
    let cfg = i.cfg;
    let n = cfg.cell.requests as u32;
    let replicas = cfg.endpoints.len() as u32;
    let total = n + i.warmup;
    let trace = cfg.cell.trace.clone();
    let sessions = cfg.cell.sessions.as_ref().map(|s| s.plan.clone());
    let warm_builder = i
        .builder
        .with_salt(&format!("{}-warmup", i.builder.spec().run_salt));
    let mut out = Prepared {
        prepared: Vec::with_capacity(i.calibrations.len()),
        metas: Vec::with_capacity(total as usize),
        failed: None,
    };
    let mut fail = |why: String| {
        out.failed.get_or_insert(why);
    };
    for idx in 0..total {
        if i.functional {
            match functional::prepare(i.opts, i.run_id, idx, n, i.builder.canary(idx)) {
                Ok((check, p)) => {
                    out.metas.push(RequestMeta {
                        kind: RequestKind::Measured,
                        replica_hint: idx % replicas,
                        canary: p.canary.clone(),
                        prompt_sha256: p.prompt_sha256.clone(),
                        prompt_chars: p.prompt_chars,
                        prompt_tokens_calibrated: None,
                        request_body: Some(p.body.clone()),
                        check: Some(check.name()),
                        api: Some(check.api()),
                        asked: None,
                        ignore_eos: Some(false),
                        session: None,
                    });
                    out.prepared.push(p);
                }
                Err(e) => fail(format!("preparing requests: {e}")),
            }
            continue;
        }
        let calibrated = i.calibrations.get(idx as usize);
        let session = sessions.as_ref().and_then(|plan| plan.turn_of(idx));
        if let Some((session_id, turn)) = session.filter(|(_, turn)| *turn > 0) {
            // A later turn: its place only; the conversation builds it once the turn before
            // it has replied.
            let canary = i.builder.canary(idx);
            out.metas.push(RequestMeta {
                kind: RequestKind::Measured,
                replica_hint: idx % replicas,
                canary: canary.clone(),
                prompt_sha256: String::new(),
                prompt_chars: 0,
                prompt_tokens_calibrated: None,
                request_body: None,
                check: None,
                api: None,
                asked: None,
                ignore_eos: None,
                session: Some(SessionTurn {
                    session_id,
                    turn,
                    history_tokens: None,
                }),
            });
            if calibrated.is_some() {
                match request::placeholder(i.opts, i.run_id, idx, canary) {
                    Ok(p) => out.prepared.push(p),
                    Err(e) => fail(format!("preparing requests: {e}")),
                }
            }
            continue;
        }
        // A trace row asks for its own lengths: its prompt's, and its reply's in full.
        let (prompt, asked) = match (&trace, i.density) {
            (Some(t), Some(d)) if !t.trace.rows.is_empty() => {
                let row = &t.trace.rows[idx as usize % t.trace.rows.len()];
                let b = if idx < n { i.builder } else { &warm_builder };
                // A declared `max_tokens` caps the trace's reply lengths.
                let reply = row.output_tokens.min(cfg.cell.max_tokens);
                let prompt = TracePrompts::new(&t.trace, b, d).build(
                    idx as usize % t.trace.rows.len(),
                    idx,
                    reply,
                );
                (prompt, Some((u64::from(row.input_tokens), reply)))
            }
            _ => (
                i.builder
                    .build(idx, calibrated.map_or(0, |c| c.filler_units)),
                None,
            ),
        };
        let ignore_eos = asked.is_some() && i.opts.api != Api::Responses;
        let mut meta = RequestMeta {
            kind: if idx < n {
                RequestKind::Measured
            } else {
                RequestKind::Warmup
            },
            replica_hint: idx % replicas,
            canary: prompt.canary.clone(),
            prompt_sha256: prompt.sha256.clone(),
            prompt_chars: prompt.chars,
            prompt_tokens_calibrated: calibrated.map(|c| c.prompt_tokens),
            request_body: None,
            check: None,
            api: None,
            asked,
            ignore_eos: None,
            session: session.map(|(session_id, turn)| SessionTurn {
                session_id,
                turn,
                history_tokens: Some(0),
            }),
        };
        if calibrated.is_some() {
            let made = match asked {
                Some((_, reply)) => {
                    request::prepare_asking(i.opts, i.run_id, &prompt, Some(reply), ignore_eos)
                }
                None => request::prepare(i.opts, i.run_id, &prompt),
            };
            match made {
                Ok(p) => {
                    // The body is shared with the prepared request, not copied.
                    meta.request_body = Some(p.body.clone());
                    meta.ignore_eos = Some(ignore_eos);
                    out.prepared.push(p);
                }
                Err(e) => fail(format!("preparing requests: {e}")),
            }
        }
        out.metas.push(meta);
    }
    out
}
