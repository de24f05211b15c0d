//! The telemetry vocabulary of the artifact contract: the fields recorded per GPU, in
//! anvil's units, and NVML's clock-event (throttle) reason bits, shared by the samplers
//! (`capture::telemetry`), the simulator's power model and the views.

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
    /// The enforced power limit, W (DCGM's `ENFORCED_POWER_LIMIT`, nvidia-smi's
    /// `enforced.power.limit`).
    PowerLimitW,
    /// The temperature at which the GPU slows down, °C.
    SlowdownTempC,
    /// The clock-event reasons, NVML's bitmask ([`Reasons`]).
    ClockEventReasons,
    /// Time throttled by the power limit, ns (a counter; DCGM's field is in ns).
    PowerViolationNs,
    /// Time throttled by temperature, ns (a counter).
    ThermalViolationNs,
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
        Field::PowerViolationNs,
        Field::ThermalViolationNs,
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
            Field::PowerViolationNs => "power_violation_ns",
            Field::ThermalViolationNs => "thermal_violation_ns",
        }
    }

    /// Whether the source counts it up (a fall is a reset, as for server counters).
    pub const fn is_counter(self) -> bool {
        matches!(
            self,
            Field::EnergyMj | Field::PowerViolationNs | Field::ThermalViolationNs
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
/// run.json `telemetry`: one entry per telemetry source the run read, what it gave and
/// which GPUs were the arm's.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetrySource {
    /// `dcgm`, `nvidia-smi` or `nvml`.
    pub source: String,
    /// The exporter's URL, or the local host.
    pub endpoint: String,
    /// The GPUs declared to be the arm's (`--telemetry-gpus`); `None`: none declared, every
    /// GPU the source reported counts (discovered, and said so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus_declared: Option<Vec<u32>>,
    /// The arm's GPUs the source reported.
    pub gpus: Vec<u32>,
    /// The GPUs it reported that are not the arm's: recorded, not counted.
    #[serde(default)]
    pub other_gpus: Vec<u32>,
    /// Declared GPUs it never reported.
    #[serde(default)]
    pub missing_gpus: Vec<u32>,
    /// The source's update interval as declared (`--telemetry-interval`), s; `None`: not
    /// declared (the views infer it from value changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_s: Option<f64>,
    /// How often anvil read it, s.
    pub every_s: f64,
    /// Fields no reading gave (the source does not export them).
    #[serde(default)]
    pub absent: Vec<String>,
    /// Readings, and readings that failed (recorded as gaps).
    pub readings: u64,
    #[serde(default)]
    pub failed_readings: u64,
    /// Why the first failed reading failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
}
