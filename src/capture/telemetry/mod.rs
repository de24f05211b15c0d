//! GPU telemetry as its sources give it: per GPU, power, the energy counter, SM and memory
//! clocks, temperatures, utilisation, memory used, the power limit, the slowdown
//! temperature, the clock-event (throttle) reasons and the violation counters, read from a
//! DCGM exporter's Prometheus text ([`dcgm`]), `nvidia-smi --query-gpu` CSV ([`smi`]) or NVML
//! ([`nvml`]); [`sampler`] reads them during a run, [`check`] is `anvil-capture gpu-check`.
//!
//! A source is read as it is: a field it does not export is *absent* (named, so the run can
//! say what is missing and the README what to add), a field it exports as unavailable
//! (`[N/A]`, `[Not Supported]`) is *unavailable* for that GPU, and a value is never guessed.
//! Both spellings of the clock-event reasons are read: DCGM's `DCGM_FI_DEV_CLOCKS_EVENT_REASONS`
//! (DCGM 3.3 on) and `DCGM_FI_DEV_CLOCK_THROTTLE_REASONS` before it, nvidia-smi's
//! `clocks_event_reasons.active` and `clocks_throttle_reasons.active` before it. The reasons
//! are NVML's bitmask ([`Reasons`]).

pub mod check;
pub mod dcgm;
pub mod nvml;
pub mod sampler;
pub mod smi;

pub use crate::artifact::telemetry::{Field, Reasons};

/// Which GPU a value is of, as the source names it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Gpu {
    /// The source's index (DCGM's `gpu` label, nvidia-smi's `index`).
    pub index: u32,
    pub uuid: Option<String>,
    /// The model name (`modelName`, `name`).
    pub model: Option<String>,
    /// The host (DCGM's `Hostname` label; a local source's own host is the client's).
    pub host: Option<String>,
}

/// One value of one field of one GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct Value {
    pub gpu: Gpu,
    pub field: Field,
    pub value: f64,
    /// The source's own time stamp as it wrote it, where it gives one (a Prometheus sample's
    /// milliseconds, nvidia-smi's `timestamp` column).
    pub source_time: Option<String>,
}

/// One reading of a source: the values, and what it did not give.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reading {
    pub values: Vec<Value>,
    /// Fields a GPU's source reported as unavailable (`[N/A]`, `[Not Supported]`), per GPU
    /// index.
    pub unavailable: Vec<(u32, Field)>,
    /// Lines of the source's text that could not be read, and the first one's number and
    /// why.
    pub bad_lines: usize,
    pub first_error: Option<(usize, String)>,
}

impl Reading {
    /// The GPUs read, by index, each once.
    pub fn gpus(&self) -> Vec<&Gpu> {
        let mut out: Vec<&Gpu> = Vec::new();
        for v in &self.values {
            if !out.iter().any(|g| g.index == v.gpu.index) {
                out.push(&v.gpu);
            }
        }
        out.sort_by_key(|g| g.index);
        out
    }

    /// The fields no GPU gave a value for, in catalogue order: what the source does not
    /// export (or exports as unavailable everywhere).
    pub fn absent(&self) -> Vec<Field> {
        Field::ALL
            .into_iter()
            .filter(|f| !self.values.iter().any(|v| v.field == *f))
            .collect()
    }

    /// The latest value of `field` for GPU `index` (a CSV of several samples holds them in
    /// time order), if the reading has one.
    pub fn get(&self, index: u32, field: Field) -> Option<f64> {
        self.values
            .iter()
            .rev()
            .find(|v| v.gpu.index == index && v.field == field)
            .map(|v| v.value)
    }
}
