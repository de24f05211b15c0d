//! GPU telemetry as its sources give it: per GPU, power, the energy counter, SM and memory
//! clocks, temperatures, utilisation, memory used, the power limit, the slowdown
//! temperature, the clock-event (throttle) reasons and the violation counters, read from a
//! DCGM exporter's Prometheus text ([`dcgm`]) or `nvidia-smi --query-gpu` CSV ([`smi`]).
//!
//! A source is read as it is: a field it does not export is *absent* (named, so the run can
//! say what is missing and the README what to add), a field it exports as unavailable
//! (`[N/A]`, `[Not Supported]`) is *unavailable* for that GPU, and a value is never guessed.
//! Both spellings of the clock-event reasons are read: DCGM's `DCGM_FI_DEV_CLOCKS_EVENT_REASONS`
//! (DCGM 3.3 on) and `DCGM_FI_DEV_CLOCK_THROTTLE_REASONS` before it, nvidia-smi's
//! `clocks_event_reasons.active` and `clocks_throttle_reasons.active` before it. The reasons
//! are NVML's bitmask ([`Reasons`]).

pub mod dcgm;
pub mod smi;

use std::fmt;

/// One telemetry field, in the units anvil records it in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Field {
    /// Power draw, W.
    PowerW,
    /// Energy consumed since the driver loaded, mJ (a counter).
    EnergyMj,
    /// SM clock, MHz.
    SmClockMhz,
    /// Memory clock, MHz.
    MemClockMhz,
    /// The SM clock's maximum, MHz.
    MaxSmClockMhz,
    /// GPU temperature, °C.
    GpuTempC,
    /// Memory temperature, °C.
    MemTempC,
    /// GPU utilisation, %.
    GpuUtilPct,
    /// Framebuffer memory used, MiB.
    FbUsedMib,
    /// The power-management limit, W.
    PowerLimitW,
    /// The temperature at which the GPU slows down, °C.
    SlowdownTempC,
    /// The clock-event reasons, NVML's bitmask ([`Reasons`]).
    ClockEventReasons,
    /// Time throttled by the power limit, µs (a counter).
    PowerViolationUs,
    /// Time throttled by temperature, µs (a counter).
    ThermalViolationUs,
}

impl Field {
    /// Every field, in the order the views list them.
    pub const ALL: [Field; 14] = [
        Field::PowerW,
        Field::EnergyMj,
        Field::SmClockMhz,
        Field::MemClockMhz,
        Field::MaxSmClockMhz,
        Field::GpuTempC,
        Field::MemTempC,
        Field::GpuUtilPct,
        Field::FbUsedMib,
        Field::PowerLimitW,
        Field::SlowdownTempC,
        Field::ClockEventReasons,
        Field::PowerViolationUs,
        Field::ThermalViolationUs,
    ];

    /// Its name in the telemetry table and the views.
    pub const fn as_str(self) -> &'static str {
        match self {
            Field::PowerW => "power_w",
            Field::EnergyMj => "energy_mj",
            Field::SmClockMhz => "sm_clock_mhz",
            Field::MemClockMhz => "mem_clock_mhz",
            Field::MaxSmClockMhz => "max_sm_clock_mhz",
            Field::GpuTempC => "gpu_temp_c",
            Field::MemTempC => "mem_temp_c",
            Field::GpuUtilPct => "gpu_util_pct",
            Field::FbUsedMib => "fb_used_mib",
            Field::PowerLimitW => "power_limit_w",
            Field::SlowdownTempC => "slowdown_temp_c",
            Field::ClockEventReasons => "clock_event_reasons",
            Field::PowerViolationUs => "power_violation_us",
            Field::ThermalViolationUs => "thermal_violation_us",
        }
    }

    /// Whether the source counts it up (a fall is a reset, as for server counters).
    pub const fn is_counter(self) -> bool {
        matches!(
            self,
            Field::EnergyMj | Field::PowerViolationUs | Field::ThermalViolationUs
        )
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// NVML's clock-event reasons (`nvmlClocksEventReason*`, formerly `…ThrottleReason*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reasons(pub u64);

impl Reasons {
    pub const GPU_IDLE: u64 = 0x1;
    pub const APPLICATIONS_CLOCKS_SETTING: u64 = 0x2;
    /// The normal state of a GPU running at its power limit: not a throttle.
    pub const SW_POWER_CAP: u64 = 0x4;
    pub const HW_SLOWDOWN: u64 = 0x8;
    pub const SYNC_BOOST: u64 = 0x10;
    pub const SW_THERMAL_SLOWDOWN: u64 = 0x20;
    pub const HW_THERMAL_SLOWDOWN: u64 = 0x40;
    pub const HW_POWER_BRAKE_SLOWDOWN: u64 = 0x80;
    pub const DISPLAY_CLOCK_SETTING: u64 = 0x100;

    /// The reasons that throttle (DESIGN.md "Telemetry"): HW slowdown, HW or SW thermal
    /// slowdown, HW power brake.
    pub const THROTTLING: u64 = Self::HW_SLOWDOWN
        | Self::SW_THERMAL_SLOWDOWN
        | Self::HW_THERMAL_SLOWDOWN
        | Self::HW_POWER_BRAKE_SLOWDOWN;

    /// Whether a throttling reason is set.
    pub const fn throttled(self) -> bool {
        self.0 & Self::THROTTLING != 0
    }

    /// Whether the GPU is held at its power limit (SW power cap).
    pub const fn at_power_limit(self) -> bool {
        self.0 & Self::SW_POWER_CAP != 0
    }

    /// The names of the reasons set, in bit order.
    pub fn names(self) -> Vec<&'static str> {
        [
            (Self::GPU_IDLE, "gpu_idle"),
            (
                Self::APPLICATIONS_CLOCKS_SETTING,
                "applications_clocks_setting",
            ),
            (Self::SW_POWER_CAP, "sw_power_cap"),
            (Self::HW_SLOWDOWN, "hw_slowdown"),
            (Self::SYNC_BOOST, "sync_boost"),
            (Self::SW_THERMAL_SLOWDOWN, "sw_thermal_slowdown"),
            (Self::HW_THERMAL_SLOWDOWN, "hw_thermal_slowdown"),
            (Self::HW_POWER_BRAKE_SLOWDOWN, "hw_power_brake_slowdown"),
            (Self::DISPLAY_CLOCK_SETTING, "display_clock_setting"),
        ]
        .into_iter()
        .filter(|(bit, _)| self.0 & bit != 0)
        .map(|(_, name)| name)
        .collect()
    }
}

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

    /// The value of `field` for GPU `index`, if the reading has one.
    pub fn get(&self, index: u32, field: Field) -> Option<f64> {
        self.values
            .iter()
            .find(|v| v.gpu.index == index && v.field == field)
            .map(|v| v.value)
    }
}
