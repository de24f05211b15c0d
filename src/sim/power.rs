//! The simulator's GPU power and thermal model: the ground truth the telemetry figures are
//! held to. Pure arithmetic over the replica's activity, advanced interval by interval.
//!
//! Over an interval in which a GPU is asked for `decode_tps` decode tokens and `prefill_tps`
//! prefill tokens per second at full clocks (its replica's demand, shared evenly across the
//! replica's GPUs):
//!
//! - the **asked power** is `idle_w + w_per_decode_tps × decode_tps + w_per_kprefill_tps ×
//!   prefill_tps / 1000`;
//! - the **clock factor** (the share of its maximum speed the GPU runs at, which stretches
//!   the replica's steps) is the lower of `slowdown_clock` while thermally slowed (else 1)
//!   and `(limit_w − idle_w) / (asked − idle_w)`, the clocks that hold power at the limit
//!   (never below [`MIN_CLOCK`]); when the latter is the lower, the SW power cap reason is
//!   set;
//! - **power** is `idle_w + (asked − idle_w) × clock factor`: the work done at the clocks it
//!   runs at, never above the limit;
//! - **energy** grows by power × the interval, exactly: power is constant over an interval,
//!   so the counter is the integral a real GPU's counter approximates;
//! - **temperature** relaxes towards `ambient_c + c_per_w × power` with time constant
//!   `tau_s` (first order, exact over the interval);
//! - at or above `slowdown_c` the GPU slows down from the next interval: the HW slowdown and
//!   HW thermal slowdown reasons are set (as NVML reports a GPU past its slowdown
//!   temperature, whose clocks it cuts by half or more) until it has cooled `hysteresis_c`
//!   below; slowed, it draws less and cools, so a GPU too hot for its load cycles;
//! - the violation counters grow by the time spent capped by power and slowed by heat, ns
//!   (DCGM's `POWER_VIOLATION` and `THERMAL_VIOLATION`).
//!
//! A rate that is not a finite, non-negative number counts as no work.
//!
//! [`GpuSetup`] is what `--dcgm` and its flags set, and [`Activity`] the tokens a replica's
//! engine hands the GPU thread (`super::dcgm`) and the clock factor it gets back.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::artifact::telemetry::Reasons;

/// The lowest clock factor: a GPU's clocks go no lower (with a demand so high that holding
/// the limit would need less, its power exceeds the limit).
pub const MIN_CLOCK: f64 = 0.05;

/// The model's constants, per GPU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PowerModel {
    pub idle_w: f64,
    /// W per decode token per second.
    pub w_per_decode_tps: f64,
    /// W per thousand prefill tokens per second.
    pub w_per_kprefill_tps: f64,
    /// The power-management limit, W.
    pub limit_w: f64,
    pub ambient_c: f64,
    /// Steady-state temperature rise per W.
    pub c_per_w: f64,
    /// Thermal time constant, s.
    pub tau_s: f64,
    /// Temperature at which the GPU slows down.
    pub slowdown_c: f64,
    pub hysteresis_c: f64,
    pub max_sm_clock_mhz: f64,
    /// The SM clock of an idle GPU (it drops its clocks when it has nothing to do).
    pub idle_sm_clock_mhz: f64,
    /// The SM clock while slowed down, as a share of the maximum.
    pub slowdown_clock: f64,
}

impl Default for PowerModel {
    /// An H100-like GPU: 90 W idle, 700 W limit, slowing down at 87 °C; 0.6 W per decode
    /// token per second (a 27B model decoding 16 sequences at 60 tok/s each draws 666 W)
    /// and 25 W per thousand prefill tokens per second. At 600 W it settles at 30 + 0.08 ×
    /// 600 = 78 °C, so only a raised `c_per_w` (a hot chassis) throttles it.
    fn default() -> Self {
        Self {
            idle_w: 90.0,
            w_per_decode_tps: 0.6,
            w_per_kprefill_tps: 25.0,
            limit_w: 700.0,
            ambient_c: 30.0,
            c_per_w: 0.08,
            tau_s: 20.0,
            slowdown_c: 87.0,
            hysteresis_c: 2.0,
            max_sm_clock_mhz: 1980.0,
            idle_sm_clock_mhz: 345.0,
            slowdown_clock: 0.5,
        }
    }
}

/// One GPU's state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuState {
    /// Energy since the simulator started, mJ.
    pub energy_mj: f64,
    pub power_w: f64,
    pub temp_c: f64,
    pub reasons: Reasons,
    /// The clocks' share of their maximum that holds power at the limit (1 under it).
    pub power_clock: f64,
    /// Time capped by power and slowed by heat so far, ns.
    pub power_violation_ns: f64,
    pub thermal_violation_ns: f64,
}

impl GpuState {
    /// An idle GPU at ambient temperature.
    pub fn idle(m: &PowerModel) -> Self {
        Self {
            energy_mj: 0.0,
            power_w: m.idle_w,
            temp_c: m.ambient_c,
            reasons: Reasons(Reasons::GPU_IDLE),
            power_clock: 1.0,
            power_violation_ns: 0.0,
            thermal_violation_ns: 0.0,
        }
    }

    /// The SM clock now, MHz: the idle clock when the last interval did no work.
    pub fn sm_clock_mhz(&self, m: &PowerModel) -> f64 {
        if self.reasons.0 & Reasons::GPU_IDLE != 0 {
            return m.idle_sm_clock_mhz;
        }
        m.max_sm_clock_mhz * self.clock_factor(m)
    }

    /// The share of its maximum speed the GPU runs at now: the lower of what holds power
    /// at the limit and `slowdown_clock` while thermally slowed down.
    pub fn clock_factor(&self, m: &PowerModel) -> f64 {
        let thermal = if self.reasons.0 & Reasons::HW_THERMAL_SLOWDOWN != 0 {
            m.slowdown_clock
        } else {
            1.0
        };
        thermal.min(self.power_clock)
    }

    /// Advance by `dt_s` seconds asked for `decode_tps` and `prefill_tps` tokens per second
    /// at full clocks; returns the clock factor the interval ran at (its work is the demand
    /// times it).
    pub fn advance(&mut self, m: &PowerModel, dt_s: f64, decode_tps: f64, prefill_tps: f64) -> f64 {
        let work = |r: f64| if r.is_finite() && r > 0.0 { r } else { 0.0 };
        let (decode_tps, prefill_tps) = (work(decode_tps), work(prefill_tps));
        let dynamic = m.w_per_decode_tps * decode_tps + m.w_per_kprefill_tps * prefill_tps / 1000.0;
        let dt = if dt_s.is_finite() { dt_s.max(0.0) } else { 0.0 };
        let thermal = if self.reasons.0 & Reasons::HW_THERMAL_SLOWDOWN != 0 {
            m.slowdown_clock
        } else {
            1.0
        };
        self.power_clock = if m.idle_w + dynamic > m.limit_w && dynamic > 0.0 {
            ((m.limit_w - m.idle_w) / dynamic).clamp(MIN_CLOCK, 1.0)
        } else {
            1.0
        };
        let capped = self.power_clock < thermal;
        let clock = thermal.min(self.power_clock);
        let power = m.idle_w + dynamic * clock;
        self.power_w = power;
        if capped {
            self.power_violation_ns += dt * 1e9;
        }
        if thermal < 1.0 {
            self.thermal_violation_ns += dt * 1e9;
        }
        self.energy_mj += power * dt * 1000.0;
        let settled = m.ambient_c + m.c_per_w * power;
        self.temp_c = settled + (self.temp_c - settled) * (-dt / m.tau_s.max(1e-9)).exp();
        let mut bits = self.reasons.0 & !(Reasons::GPU_IDLE | Reasons::SW_POWER_CAP);
        if dynamic <= 0.0 {
            bits |= Reasons::GPU_IDLE;
        }
        if capped {
            bits |= Reasons::SW_POWER_CAP;
        }
        let slowed = Reasons::HW_SLOWDOWN | Reasons::HW_THERMAL_SLOWDOWN;
        if self.temp_c >= m.slowdown_c {
            bits |= slowed;
        } else if self.temp_c < m.slowdown_c - m.hysteresis_c {
            bits &= !slowed;
        }
        self.reasons = Reasons(bits);
        clock
    }
}

/// The simulator's GPUs as `--dcgm` and its flags set them.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuSetup {
    pub model: PowerModel,
    pub gpus_per_replica: usize,
    /// The index of the process's first GPU (`--first-gpu`, e.g. a DP replica launched as
    /// its own process).
    pub first_gpu: u32,
    pub collect: Duration,
    /// The extended field set beside the default counters.
    pub extended: bool,
    pub truth: Option<PathBuf>,
}

/// What a replica did since the power thread last looked, and the clock factor it runs at:
/// the engine adds tokens and reads the factor; the power thread takes the tokens and sets
/// the factor. Without `--dcgm` the factor stays 1.
#[derive(Debug)]
pub struct Activity {
    decoded: AtomicU64,
    prefilled: AtomicU64,
    clock_bits: AtomicU64,
}

impl Default for Activity {
    fn default() -> Self {
        Self {
            decoded: AtomicU64::new(0),
            prefilled: AtomicU64::new(0),
            clock_bits: AtomicU64::new(1.0f64.to_bits()),
        }
    }
}

impl Activity {
    /// `n` tokens decoded.
    pub fn decoded(&self, n: u32) {
        self.decoded.fetch_add(u64::from(n), Ordering::Relaxed);
    }

    /// `n` prompt tokens prefilled.
    pub fn prefilled(&self, n: u32) {
        self.prefilled.fetch_add(u64::from(n), Ordering::Relaxed);
    }

    /// The share of full speed the replica runs at now (its steps take 1 / this as long).
    pub fn clock(&self) -> f64 {
        f64::from_bits(self.clock_bits.load(Ordering::Relaxed))
    }

    pub(super) fn set_clock(&self, f: f64) {
        self.clock_bits.store(f.to_bits(), Ordering::Relaxed);
    }

    pub(super) fn take(&self) -> (u64, u64) {
        (
            self.decoded.swap(0, Ordering::Relaxed),
            self.prefilled.swap(0, Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default model with 0.35 W per decode token per second: round figures below.
    fn model() -> PowerModel {
        PowerModel {
            w_per_decode_tps: 0.35,
            ..PowerModel::default()
        }
    }

    #[test]
    fn energy_is_the_exact_integral_of_piecewise_constant_power() {
        let m = model();
        let mut g = GpuState::idle(&m);
        g.advance(&m, 2.0, 0.0, 0.0);
        assert_eq!(g.power_w, 90.0);
        assert!(g.reasons.0 & Reasons::GPU_IDLE != 0);
        // 1,000 decode tokens/s and 8,000 prefill tokens/s: 90 + 350 + 200 = 640 W.
        g.advance(&m, 3.0, 1000.0, 8000.0);
        assert!((g.power_w - 640.0).abs() < 1e-9);
        assert!((g.energy_mj - (90.0 * 2.0 + 640.0 * 3.0) * 1000.0).abs() < 1e-6);
        assert!(g.reasons.0 & Reasons::GPU_IDLE == 0);
        assert!(!g.reasons.at_power_limit());
    }

    #[test]
    fn power_is_held_at_the_limit_and_said_so_without_throttling() {
        let m = model();
        let mut g = GpuState::idle(&m);
        g.advance(&m, 1.0, 2000.0, 0.0);
        assert_eq!(g.power_w, 700.0);
        assert!(g.reasons.at_power_limit() && !g.reasons.throttled());
        // 790 W asked of a 700 W limit: clocks at (700 − 90) / (790 − 90) of their maximum.
        assert!((g.sm_clock_mhz(&m) - 1980.0 * 610.0 / 700.0).abs() < 1e-9);
        assert!((g.power_violation_ns - 1e9).abs() < 1e-3);
        // Bad rates are no work: idle, not full power.
        g.advance(&m, 1.0, f64::NAN, -5.0);
        assert_eq!(g.power_w, 90.0);
        assert!(!g.reasons.at_power_limit() && g.clock_factor(&m) == 1.0);
        assert!((g.energy_mj - (700.0 + 90.0) * 1000.0).abs() < 1e-6);
    }

    #[test]
    fn a_hot_gpu_slows_down_above_its_slowdown_temperature_and_cycles_under_steady_load() {
        // A hot chassis: 640 W settles at 30 + 0.1 × 640 = 94 °C; slowed to half clock it
        // draws 90 + 550 × 0.5 = 365 W, which settles at 66.5 °C, so it cools, recovers
        // below 85 °C and heats up again.
        let m = PowerModel {
            c_per_w: 0.1,
            ..model()
        };
        let mut g = GpuState::idle(&m);
        let (mut slowed_at, mut recoveries, mut slowed_intervals) = (None, 0, 0u32);
        let mut was_slowed = false;
        for k in 1..=400 {
            let clock = g.advance(&m, 0.5, 1000.0, 8000.0);
            if was_slowed {
                slowed_intervals += 1;
                assert_eq!(clock, 0.5);
                assert!((g.power_w - 365.0).abs() < 1e-9);
                assert!(
                    g.temp_c >= 85.0 - 1.0,
                    "slowed until below 85 °C: {}",
                    g.temp_c
                );
            } else {
                assert_eq!(clock, 1.0);
                assert!((g.power_w - 640.0).abs() < 1e-9);
            }
            let slowed = g.reasons.throttled();
            if slowed {
                assert_eq!(g.reasons.names(), ["hw_slowdown", "hw_thermal_slowdown"]);
                assert!((g.sm_clock_mhz(&m) - 990.0).abs() < 1e-9);
                slowed_at.get_or_insert(k as f64 * 0.5);
            }
            if was_slowed && !slowed {
                recoveries += 1;
                assert!(g.temp_c < 85.0);
            }
            was_slowed = slowed;
        }
        // T(t) = 94 − 64 e^{−t/20} reaches 87 at t = 20 ln(64/7) ≈ 44.3 s.
        let t = slowed_at.expect("it slows down");
        assert!((44.0..=45.0).contains(&t), "{t}");
        assert!(recoveries >= 2, "it cycles: {recoveries} recoveries");
        // Thermal violation time is exactly the intervals that ran slowed.
        assert!((g.thermal_violation_ns - f64::from(slowed_intervals) * 0.5e9).abs() < 1.0);
        assert_eq!(g.power_violation_ns, 0.0);
        // Idle, it cools and runs at full clock.
        for _ in 0..400 {
            g.advance(&m, 0.5, 0.0, 0.0);
        }
        assert!(!g.reasons.throttled() && g.clock_factor(&m) == 1.0);
    }
}
