//! NVML on this host, through `nvml-wrapper`, which loads `libnvidia-ml.so.1` when the
//! source starts (a machine without the NVIDIA driver gets a message naming what to install,
//! never a crash). Per GPU: power (mW), the energy counter (mJ since the driver loaded), SM
//! and memory clocks and the SM clock's maximum, GPU temperature and the slowdown
//! temperature, utilisation, memory used, the enforced power limit, the clock-event reasons
//! and the power and thermal violation times. A query the GPU does not support is
//! unavailable for it; NVML has no memory temperature query, so that field is absent.
//!
//! NVML's calls block, so they run on a thread of their own, on ordinary scheduling and any
//! CPU (the recorder's runtime thread is pinned to the hot path's CPU): a reading is a
//! request to that thread and its answer.

use std::sync::mpsc;

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{
    Clock, PerformancePolicy, TemperatureSensor, TemperatureThreshold,
};
use nvml_wrapper::error::NvmlError;

use super::{Field, Gpu, Reading, Value};

/// What to install when NVML cannot be loaded.
pub const INSTALL: &str = "install the NVIDIA driver (it ships libnvidia-ml.so.1), or read \
                           nvidia-smi or a DCGM exporter instead (--telemetry nvidia-smi, \
                           --telemetry dcgm=URL)";

type Answer = tokio::sync::oneshot::Sender<Result<Reading, String>>;

/// The NVML thread, or why NVML could not be loaded.
pub struct NvmlSource {
    requests: Result<mpsc::Sender<Answer>, String>,
}

impl NvmlSource {
    /// Load NVML on its own thread; `Err` (through [`NvmlSource::read`]) when it is absent.
    pub fn start() -> NvmlSource {
        let (tx, rx) = mpsc::channel::<Answer>();
        let (ready_tx, ready_rx) = mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("anvil-nvml".into())
            .spawn(move || {
                let _ = crate::realtime::ordinary_anywhere();
                let nvml = match Nvml::init() {
                    Ok(nvml) => nvml,
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("NVML not loaded ({e}): {INSTALL}")));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                while let Ok(answer) = rx.recv() {
                    let _ = answer.send(read(&nvml));
                }
            });
        let requests = match spawned {
            Err(e) => Err(format!("starting the NVML thread: {e}")),
            Ok(_) => match ready_rx.recv() {
                Ok(Ok(())) => Ok(tx),
                Ok(Err(why)) => Err(why),
                Err(_) => Err("the NVML thread ended while loading NVML".to_owned()),
            },
        };
        NvmlSource { requests }
    }

    /// Why NVML is not there, if it is not.
    pub fn absent(&self) -> Option<&str> {
        self.requests.as_ref().err().map(String::as_str)
    }

    /// One reading of every GPU.
    pub async fn read(&self) -> Result<Reading, String> {
        let requests = self.requests.as_ref().map_err(Clone::clone)?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        requests
            .send(tx)
            .map_err(|_| "the NVML thread has ended".to_owned())?;
        rx.await
            .map_err(|_| "the NVML thread has ended".to_owned())?
    }
}

/// A query's value, its being unsupported, or a failure that fails the reading.
fn field<T>(r: Result<T, NvmlError>) -> Result<Option<T>, String> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(NvmlError::NotSupported | NvmlError::NoPermission | NvmlError::FunctionNotFound) => {
            Ok(None)
        }
        Err(e) => Err(e.to_string()),
    }
}

fn read(nvml: &Nvml) -> Result<Reading, String> {
    let mut out = Reading::default();
    let count = nvml.device_count().map_err(|e| e.to_string())?;
    for index in 0..count {
        let d = nvml
            .device_by_index(index)
            .map_err(|e| format!("GPU {index}: {e}"))?;
        let gpu = Gpu {
            index,
            uuid: d.uuid().ok(),
            model: d.name().ok(),
            host: None,
        };
        let fields: [(Field, Option<f64>); 13] = [
            (
                Field::PowerW,
                field(d.power_usage())?.map(|mw| f64::from(mw) / 1000.0),
            ),
            (
                Field::EnergyMj,
                field(d.total_energy_consumption())?.map(|mj| mj as f64),
            ),
            (
                Field::SmClockMhz,
                field(d.clock_info(Clock::SM))?.map(f64::from),
            ),
            (
                Field::MemClockMhz,
                field(d.clock_info(Clock::Memory))?.map(f64::from),
            ),
            (
                Field::MaxSmClockMhz,
                field(d.max_clock_info(Clock::SM))?.map(f64::from),
            ),
            (
                Field::GpuTempC,
                field(d.temperature(TemperatureSensor::Gpu))?.map(f64::from),
            ),
            (
                Field::GpuUtilPct,
                field(d.utilization_rates())?.map(|u| f64::from(u.gpu)),
            ),
            (
                Field::FbUsedMib,
                field(d.memory_info())?.map(|m| m.used as f64 / (1 << 20) as f64),
            ),
            (
                Field::PowerLimitW,
                field(d.enforced_power_limit())?.map(|mw| f64::from(mw) / 1000.0),
            ),
            (
                Field::SlowdownTempC,
                field(d.temperature_threshold(TemperatureThreshold::Slowdown))?.map(f64::from),
            ),
            (
                Field::ClockEventReasons,
                field(d.current_throttle_reasons())?.map(|r| r.bits() as f64),
            ),
            (
                Field::PowerViolationNs,
                field(d.violation_status(PerformancePolicy::Power))?
                    .map(|v| v.violation_time as f64),
            ),
            (
                Field::ThermalViolationNs,
                field(d.violation_status(PerformancePolicy::Thermal))?
                    .map(|v| v.violation_time as f64),
            ),
        ];
        for (f, v) in fields {
            match v {
                Some(value) => out.values.push(Value {
                    gpu: gpu.clone(),
                    field: f,
                    value,
                    source_time: None,
                }),
                None => out.unavailable.push((index, f)),
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the driver is not installed (this machine, CI), starting the source says what
    /// to install and reading it fails with that message: never a crash.
    #[test]
    fn an_absent_library_is_named_with_what_to_install() {
        let source = NvmlSource::start();
        let Some(why) = source.absent() else {
            // A machine with the driver: the reading must then work.
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            assert!(rt.block_on(source.read()).is_ok());
            return;
        };
        assert!(
            why.contains("NVML not loaded") && why.contains("libnvidia-ml.so.1"),
            "{why}"
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert_eq!(rt.block_on(source.read()).unwrap_err(), why);
    }
}
