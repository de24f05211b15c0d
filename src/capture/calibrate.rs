//! Prompt calibration before the run: which token count to trust, then each request's filler
//! size, against replica 0.
//!
//! 1. **Detection**, once per run: one sample prompt is counted by every
//!    [`TokenizeDialect`] (vLLM's `/tokenize`, llama.cpp's `/apply-template` + `/tokenize`)
//!    and by one `max_tokens: 1` probe of the cell's own API (up to [`CHECK_ATTEMPTS`] on
//!    errors), which reads the server's `usage.prompt_tokens`. A dialect is used only when
//!    its count equals that usage exactly; otherwise (no tokenizer endpoint, a count of 0,
//!    counts that disagree) the run calibrates with probes and says why. What was found
//!    goes to run.json (`calibration`).
//! 2. **Reachability**: the prompt without filler is counted; a target below it can never be
//!    met, which is bad input, refused before any artifact is written.
//! 3. **Sizing**: every request's filler is searched ([`calibrate_from`]), starting from the
//!    previous request's size. Probes are recorded as `calibration` rows and use their own
//!    salt, so the measured prompts stay uncached.
//!
//! Chat and Responses prompts are counted as the server's chat template sees them (servers
//! turn a Responses `input` into a user message), completions prompts as raw text.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::time::Duration;

use super::config::RunConfig;
use super::oracle::{OracleError, ProbeOracle, TokenizeDialect, TokenizeOracle};
use super::recorder::Msg;
use crate::artifact::{self, CalibrationMethod, RequestKind, RequestRow};
use crate::clock::{Origin, monotonic_ns};
use crate::workload::calibration::{
    Calibration, CalibrationError, calibrate_from, search_units, tolerance,
};
use crate::workload::prompt::{PromptBuilder, PromptContent};
use crate::workload::request::{self, RequestOptions};
use crate::workload::trace::replay::{Density, SAMPLE_BLOCKS, TracePrompts};

/// Filler words of the sample prompt that detection counts: long enough that every
/// tokenizer gives a count well above zero, short enough to cost nothing.
const SAMPLE_UNITS: u32 = 64;

/// Attempts of the probe that checks the tokenizer's count.
pub const CHECK_ATTEMPTS: u32 = 3;

/// The time limit of a calibration or connection-check call: the side-call limit, or the
/// first-byte limit where a long prompt's prefill needs it (at most two minutes).
pub fn side_timeout(cfg: &RunConfig) -> Duration {
    super::http::SIDE_TIMEOUT.max(cfg.timeouts.first_byte.min(Duration::from_secs(120)))
}

/// Why calibration could not go ahead.
#[derive(Debug, thiserror::Error)]
pub enum CalibrateError {
    /// The target is below what the prompt's fixed part already costs: bad input.
    #[error(
        "--context {target}: the prompt without any filler (unique prefix, system text, canary \
         instruction) is already {overhead} tokens on this server, above the target \
         {target} (+{tol}); give a context of at least {overhead}"
    )]
    BelowOverhead {
        target: u64,
        overhead: u64,
        tol: u64,
    },
    /// The server could not count tokens at all, or a request's size could not be found.
    #[error("{0}")]
    Failed(String),
}

/// The chosen oracle and what the probe rows need.
pub struct Calibrator<'a> {
    cfg: &'a RunConfig,
    /// The run's prompts, their group prefixes sized once detection is done.
    builder: PromptBuilder,
    probe_builder: PromptBuilder,
    opts: &'a RequestOptions,
    msgs: Sender<Msg>,
    origin: Origin,
    /// Row index of the next probe (after every measured and warm-up index).
    next_row: AtomicU64,
    /// One-token requests of the cell's API on replica 0.
    prober: ProbeOracle,
    /// The server's tokenizer when it passed the check; `None`: every count is a probe.
    tokenizer: Option<TokenizeOracle>,
    /// What run.json records.
    pub record: artifact::Calibration,
}

impl<'a> Calibrator<'a> {
    /// Detect which oracle to trust (see the module doc); `rows` is the number of measured
    /// and warm-up requests (probe rows are numbered after them). A fallback to probes is
    /// explained in `record.note`.
    pub async fn detect(
        cfg: &'a RunConfig,
        builder: &PromptBuilder,
        opts: &'a RequestOptions,
        rows: u32,
        msgs: Sender<Msg>,
        origin: Origin,
    ) -> Result<Calibrator<'a>, CalibrateError> {
        let ep = cfg.endpoints[0].clone();
        let mut chat_extra = serde_json::Map::new();
        if let Some(kwargs) = opts.thinking_kwargs(opts.api) {
            chat_extra.insert("chat_template_kwargs".into(), kwargs);
        }
        let probe_builder = builder.with_salt(&format!("{}-calibration", builder.spec().run_salt));
        let mut this = Calibrator {
            cfg,
            builder: builder.clone(),
            probe_builder,
            opts,
            msgs,
            origin,
            next_row: AtomicU64::new(u64::from(rows)),
            prober: ProbeOracle {
                endpoint: ep.clone(),
                options: opts.clone(),
                api_key: cfg.api_key.clone(),
                timeout: cfg.timeouts.total,
            },
            tokenizer: None,
            record: artifact::Calibration {
                method: CalibrationMethod::Probe,
                dialect: None,
                replica: ep.replica,
                tokenize_tokens: None,
                usage_prompt_tokens: None,
                note: None,
                group_prefix: None,
                trace_density: None,
            },
        };
        let sample = this.probe_builder.build(0, SAMPLE_UNITS).content;
        // Every dialect counts the sample: a server may answer one it does not speak with a
        // wrong count rather than an error.
        let mut counted: Vec<(TokenizeOracle, u64)> = Vec::new();
        let mut tried: Vec<String> = Vec::new();
        for dialect in TokenizeDialect::ALL {
            let oracle = TokenizeOracle {
                endpoint: ep.clone(),
                model: opts.model.clone(),
                api_key: cfg.api_key.clone(),
                api: opts.api,
                dialect,
                chat_extra: chat_extra.clone(),
                timeout: side_timeout(cfg),
                kept: Default::default(),
            };
            match oracle.count(&sample).await {
                Ok(n) => {
                    tried.push(format!("{}: {n} tokens", dialect.as_str()));
                    counted.push((oracle, n));
                }
                Err(e) => tried.push(format!("{}: {e}", dialect.as_str())),
            }
        }
        // The check probe may meet a transient server error (a model still loading): each
        // attempt is its own recorded calibration row, a second apart.
        let mut attempt = 0;
        let usage = loop {
            attempt += 1;
            match this.probe(&sample).await {
                Ok(u) => break u,
                Err(e) if attempt >= CHECK_ATTEMPTS => {
                    return Err(CalibrateError::Failed(format!(
                        "the calibration probe failed {attempt} times, last: {e}"
                    )));
                }
                Err(_) => tokio::time::sleep(Duration::from_secs(u64::from(attempt))).await,
            }
        };
        this.record.usage_prompt_tokens = Some(usage);
        match counted.iter().position(|(_, n)| *n == usage) {
            Some(i) => {
                let (oracle, n) = counted.swap_remove(i);
                this.record.method = CalibrationMethod::Tokenize;
                this.record.dialect = Some(oracle.dialect.as_str().to_owned());
                this.record.tokenize_tokens = Some(n);
                this.tokenizer = Some(oracle);
            }
            None => {
                this.record.tokenize_tokens = counted.first().map(|(_, n)| *n);
                this.record.note = Some(format!(
                    "no usable /tokenize: the server's usage says {usage} tokens for the sample prompt ({})",
                    tried.join("; ")
                ));
            }
        }
        this.size_group_prefix().await?;
        this.size_trace_blocks().await?;
        Ok(this)
    }

    /// A prefix-group cell: find the filler size at which each group's shared prefix counts
    /// the declared shared tokens, counted as the cell's API carries it (a system message, or
    /// plain text). Equal word counts of different text are not equal token counts, so each
    /// group is searched on its own, from the size the group before it needed.
    async fn size_group_prefix(&mut self) -> Result<(), CalibrateError> {
        let Some(g) = self.cfg.cell.groups else {
            return Ok(());
        };
        let shared = self.counted_builder().shared_content();
        let form = self.builder.spec().form;
        let (mut units, mut tokens) = (Vec::new(), Vec::new());
        for group in 0..g.groups {
            let found = search_units(
                |n| {
                    let text = shared.group_prefix(group, n);
                    PromptContent::single(form, "system", text)
                },
                group,
                g.shared_tokens,
                units.last().copied(),
                async |c: &PromptContent| self.count(c).await,
            )
            .await
            .map_err(|e| {
                CalibrateError::Failed(format!("sizing prefix group {group}'s shared prefix: {e}"))
            })?;
            units.push(found.filler_units);
            tokens.push(found.prompt_tokens);
        }
        self.builder = self.builder.with_group_units(units.clone());
        self.probe_builder = self.probe_builder.with_group_units(units.clone());
        self.record.group_prefix = Some(artifact::run::GroupPrefixSize { units, tokens });
        Ok(())
    }

    /// A trace replay: find the filler size of one block of the trace's block size, and
    /// count the prompt without blocks, so that every row's prompt can be sized from its
    /// length without a count of its own.
    async fn size_trace_blocks(&mut self) -> Result<(), CalibrateError> {
        let Some(trace) = &self.cfg.cell.trace else {
            return Ok(());
        };
        let block_tokens = TracePrompts::block_tokens(&trace.trace);
        let builder = self.counted_builder().clone();
        // `SAMPLE_BLOCKS` blocks of `n` words each: the search runs over the words of one.
        let found = search_units(
            |n| TracePrompts::sample_blocks(&builder, n),
            0,
            u64::from(block_tokens) * u64::from(SAMPLE_BLOCKS),
            None,
            async |c: &PromptContent| self.count(c).await,
        )
        .await
        .map_err(|e| CalibrateError::Failed(format!("sizing the trace's blocks: {e}")))?;
        let overhead = self
            .count(&TracePrompts::without_blocks(&builder))
            .await
            .map_err(|e| {
                CalibrateError::Failed(format!("counting a trace prompt's instruction: {e}"))
            })?;
        self.record.trace_density = Some(artifact::run::TraceDensity {
            units_per_block: found.filler_units,
            block_tokens,
            block_counted: found.prompt_tokens / u64::from(SAMPLE_BLOCKS),
            overhead_tokens: overhead,
        });
        Ok(())
    }

    /// The block density a trace replay's prompts are sized by (after detection).
    pub fn trace_density(&self) -> Option<Density> {
        self.record.trace_density.map(|d| Density {
            units_per_block: d.units_per_block,
            block_tokens: d.block_tokens,
            overhead_tokens: d.overhead_tokens,
        })
    }

    /// The run's prompt builder, its group prefixes sized.
    pub fn builder(&self) -> &PromptBuilder {
        &self.builder
    }

    /// Count one prompt with a probe, recording it as a `calibration` row.
    async fn probe(&self, content: &PromptContent) -> Result<u64, OracleError> {
        let t0 = monotonic_ns();
        let r = self.prober.count(content).await;
        let t1 = monotonic_ns();
        let row_index = self.next_row.fetch_add(1, Ordering::Relaxed) as u32;
        let _ = self.msgs.send(Msg::Row(Box::new(
            self.probe_row(row_index, content, &r, t0, t1),
        )));
        r
    }

    /// Count `content` with the chosen oracle.
    async fn count(&self, content: &PromptContent) -> Result<u64, OracleError> {
        match &self.tokenizer {
            Some(t) => t.count(content).await,
            None => self.probe(content).await,
        }
    }

    /// The builder whose prompts the oracle counts: the run's own for a tokenizer (nothing
    /// reaches the server's cache), the calibration salt's for probes.
    fn counted_builder(&self) -> &PromptBuilder {
        match self.tokenizer {
            Some(_) => &self.builder,
            None => &self.probe_builder,
        }
    }

    /// Refuse a target the prompt's fixed part already exceeds. A trace replay has no one
    /// target: a row shorter than its instruction is sent as the instruction alone, its
    /// realised length beside the trace's.
    pub async fn check_reachable(&self) -> Result<(), CalibrateError> {
        if self.cfg.cell.trace.is_some() {
            return Ok(());
        }
        let target = self.cfg.cell.context;
        let tol = tolerance(target);
        let overhead = self
            .count(&self.counted_builder().build(0, 0).content)
            .await
            .map_err(|e| CalibrateError::Failed(format!("counting the fixed prompt: {e}")))?;
        if overhead > target + tol {
            return Err(CalibrateError::BelowOverhead {
                target,
                overhead,
                tol,
            });
        }
        Ok(())
    }

    /// Size requests `0..count`. A trace replay's rows are sized from the block density, no
    /// count of their own: each one's estimate is what its filler makes at that density.
    pub async fn calibrate_all(&self, count: u32) -> Result<Vec<Calibration>, CalibrationError> {
        if let (Some(trace), Some(d)) = (&self.cfg.cell.trace, self.trace_density()) {
            let rows = &trace.trace.rows;
            return Ok((0..count as usize)
                .map(|i| &rows[i % rows.len()])
                .map(|row| {
                    let target = u64::from(row.input_tokens);
                    let units = d.units_for(target.saturating_sub(d.overhead_tokens));
                    Calibration {
                        filler_units: units,
                        prompt_tokens: d.overhead_tokens
                            + (u64::from(units) * u64::from(d.block_tokens))
                                / u64::from(d.units_per_block.max(1)),
                        target_tokens: target,
                        oracle_calls: 0,
                    }
                })
                .collect());
        }
        let builder = self.counted_builder();
        let sessions = self.cfg.cell.sessions.as_ref().map(|s| s.plan.clone());
        let mut out: Vec<Calibration> = Vec::with_capacity(count as usize);
        for idx in 0..count {
            // A session's later turn is built from the conversation, not sized: it takes its
            // first turn's figures (indices are session-major) and costs no count.
            if let (Some((_, turn)), Some(prev)) =
                (sessions.as_ref().and_then(|p| p.turn_of(idx)), out.last())
                && turn > 0
            {
                out.push(Calibration {
                    oracle_calls: 0,
                    ..*prev
                });
                continue;
            }
            // Start from the previous request's size: one count usually settles it.
            let hint = out.last().map(|c| c.filler_units);
            let c = calibrate_from(
                builder,
                idx,
                self.cfg.cell.context,
                hint,
                async |c: &PromptContent| self.count(c).await,
            )
            .await?;
            out.push(c);
        }
        Ok(out)
    }

    /// The `requests` row of one calibration probe (times taken around the whole call).
    fn probe_row(
        &self,
        request_index: u32,
        content: &PromptContent,
        result: &Result<u64, OracleError>,
        t0: i64,
        t1: i64,
    ) -> RequestRow {
        let text = || {
            Some(match result {
                Ok(n) => n.to_string(),
                Err(e) => e.to_string(),
            })
        };
        let (outcome, http_status, error) = match result {
            Ok(_) => (artifact::Outcome::Ok, Some(200), None),
            Err(OracleError::Status { status, .. }) => {
                (artifact::Outcome::HttpError, Some(*status), text())
            }
            Err(OracleError::Timeout { .. }) => (artifact::Outcome::TimeoutTotal, None, text()),
            Err(OracleError::Endpoint(_)) => (artifact::Outcome::ConnectError, None, text()),
            Err(_) => (artifact::Outcome::ProtocolError, None, text()),
        };
        let opts = self.opts;
        let body = request::body_json(opts, request_index, content, false, Some(1), false)
            .ok()
            .map(|b| String::from_utf8_lossy(&b).into_owned());
        let ep = &self.cfg.endpoints[0];
        RequestRow {
            request_index,
            kind: RequestKind::Calibration,
            check: None,
            replica: ep.replica,
            endpoint: artifact::redact_url(&ep.url),
            api: opts.api,
            model: opts.model.clone(),
            canary: None,
            prompt_sha256: {
                use sha2::{Digest, Sha256};
                hex::encode(Sha256::digest(content.sent_bytes()))
            },
            prompt_chars: content.chars(),
            prompt_tokens_target: self.cfg.cell.context,
            prompt_tokens_calibrated: result.as_ref().ok().copied(),
            max_tokens: Some(1),
            request_body: body,
            t_intended_ns: self.origin.offset(t0),
            t_sent_ns: Some(self.origin.offset(t0)),
            t_first_byte_ns: None,
            t_done_ns: self.origin.offset(t1),
            http_status,
            outcome,
            error,
            events: 0,
            new_connection: false,
            resent: false,
            session: None,
            ignore_eos: Some(false),
            t_released_ns: Some(self.origin.offset(t0)),
        }
    }
}
