//! `anvil-capture gpu-check`: the prepared check for a GPU machine. Reads the telemetry
//! sources (by default `nvidia-smi` and NVML on this host) for a while, with no run, and
//! prints, per GPU, its energy counter against each source's power integrated over the same
//! span; every pair within 5% passes (exit 0), any outside, or a GPU whose counter no power
//! source covers, fails (exit 1); none to compare (no GPU, no counter) is exit 5 with each
//! source's reason.

use std::time::Duration;

use clap::Args;

use super::{AppError, Exit, output};
use crate::capture::request::TelemetryRequest;
use crate::capture::telemetry::check::{self, TOLERANCE};

#[derive(Debug, Args)]
pub struct GpuCheckArgs {
    /// A source to read (as `run --telemetry`: `nvidia-smi`, `nvml`, `dcgm=URL`); default:
    /// nvidia-smi and nvml.
    #[arg(long = "telemetry", value_name = "SOURCE")]
    pub telemetry: Vec<String>,
    /// How long to read, s. Put the GPUs to work meanwhile for a check under load.
    #[arg(long, value_name = "S", default_value_t = 60.0)]
    pub seconds: f64,
    /// Seconds between readings.
    #[arg(long, value_name = "S", default_value_t = 1.0)]
    pub every: f64,
}

pub fn gpu_check(a: &GpuCheckArgs) -> anyhow::Result<Exit> {
    let bad = |e: String| AppError::wrap(Exit::BadInput, anyhow::anyhow!(e));
    if !(a.seconds.is_finite() && (1.0..=86_400.0).contains(&a.seconds)) {
        return Err(bad(format!(
            "--seconds {}: must be in [1, 86400]",
            a.seconds
        )));
    }
    let sources = if a.telemetry.is_empty() {
        vec!["nvidia-smi".to_owned(), "nvml".to_owned()]
    } else {
        a.telemetry.clone()
    };
    let telemetry = crate::capture::telemetry::sampler::declared(&TelemetryRequest {
        sources,
        every_s: Some(a.every),
        ..TelemetryRequest::default()
    })
    .map_err(|e| bad(e.to_string()))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (rows, failures) = runtime.block_on(check::run(
        &telemetry,
        Duration::from_secs_f64(a.seconds),
        super::stderr_notices(),
    ));
    let mut text = format!(
        "{:<44} {:<10} {:<10} {:>8} {:>12} {:>12} {:>8}  verdict\n",
        "gpu", "counter", "power", "s", "counter J", "integrated J", "diff"
    );
    for r in &rows {
        match r.difference {
            Some(d) => text.push_str(&format!(
                "{:<44} {:<10} {:<10} {:>8.1} {:>12.1} {:>12.1} {:>7.2}%  {}\n",
                r.gpu,
                r.counter_source,
                r.power_source,
                r.seconds,
                r.counter_j,
                r.integrated_j,
                d * 100.0,
                if r.passes() {
                    "ok"
                } else {
                    "outside the tolerance"
                }
            )),
            None => text.push_str(&format!(
                "{:<44} {:<10} not checked: no power readings cover {}% of its counter's span\n",
                r.gpu,
                r.counter_source,
                check::COVERAGE * 100.0
            )),
        }
    }
    if rows.is_empty() {
        // Each source's failure was told as it happened.
        eprintln!(
            "anvil-capture gpu-check: no GPU with an energy counter and power readings to \
             compare ({} source(s) failed)",
            failures.len()
        );
        return Ok(Exit::Failed);
    }
    text.push_str(&format!(
        "tolerance {}%: {} of {} within it\n",
        TOLERANCE * 100.0,
        rows.iter().filter(|r| r.passes()).count(),
        rows.len()
    ));
    output::stdout(&text, "the check's table")?;
    Ok(if rows.iter().all(check::CheckRow::passes) {
        Exit::Ok
    } else {
        Exit::RuleFailed
    })
}
