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

use std::sync::{Arc, Mutex, mpsc};

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

/// The NVML thread and what it said of loading NVML.
pub struct NvmlSource {
    requests: mpsc::SyncSender<Answer>,
    /// `None` while NVML loads; then `Ok` or why it could not be loaded.
    loaded: Arc<Mutex<Option<Result<(), String>>>>,
}

impl NvmlSource {
    /// Start loading NVML on its own thread and return at once: loading can take seconds
    /// (or hang on a wedged driver), and a reading meanwhile waits under its own timeout.
    pub fn start() -> NvmlSource {
        // One request at a time: a reading whose caller gave up is not queued behind.
        let (tx, rx) = mpsc::sync_channel::<Answer>(1);
        let loaded = Arc::new(Mutex::new(None));
        let said = loaded.clone();
        let set = move |r: Result<(), String>| {
            *said.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
        };
        let spawned = std::thread::Builder::new()
            .name("anvil-nvml".into())
            .spawn(move || {
                let _ = crate::realtime::ordinary_anywhere();
                let nvml = match Nvml::init() {
                    Ok(nvml) => nvml,
                    Err(e) => {
                        set(Err(format!("NVML not loaded ({e}): {INSTALL}")));
                        return;
                    }
                };
                set(Ok(()));
                while let Ok(answer) = rx.recv() {
                    if !answer.is_closed() {
                        let _ = answer.send(read(&nvml));
                    }
                }
            });
        if let Err(e) = spawned {
            *loaded.lock().unwrap_or_else(|e| e.into_inner()) =
                Some(Err(format!("starting the NVML thread: {e}")));
        }
        NvmlSource {
            requests: tx,
            loaded,
        }
    }

    /// Why NVML is not there, once that is known.
    pub fn absent(&self) -> Option<String> {
        match &*self.loaded.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(Err(why)) => Some(why.clone()),
            _ => None,
        }
    }

    /// One reading of every GPU (waiting for NVML to load first).
    pub async fn read(&self) -> Result<Reading, String> {
        let ended = || {
            self.absent()
                .unwrap_or_else(|| "the NVML thread has ended".to_owned())
        };
        let (mut request, rx) = tokio::sync::oneshot::channel();
        // The thread takes a request once the one before is answered.
        loop {
            match self.requests.try_send(request) {
                Ok(()) => break,
                Err(mpsc::TrySendError::Full(back)) => {
                    request = back;
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                Err(mpsc::TrySendError::Disconnected(_)) => return Err(ended()),
            }
        }
        rx.await.map_err(|_| ended())?
    }
}

/// A GPU that cannot be read at all now (fallen off the bus, needing a reset): the reading
/// goes on without it and names it.
fn gone(e: &NvmlError) -> bool {
    matches!(e, NvmlError::GpuLost | NvmlError::ResetRequired)
}

fn read(nvml: &Nvml) -> Result<Reading, String> {
    let mut out = Reading::default();
    let count = nvml.device_count().map_err(|e| e.to_string())?;
    let mut skipped = Vec::new();
    for index in 0..count {
        match read_gpu(nvml, index, &mut out) {
            Ok(()) => {}
            Err(why) => skipped.push(format!("GPU {index}: {why}")),
        }
    }
    if let Some(first) = skipped.first() {
        // Like a broken line of a text source: counted and the first named.
        out.bad_lines = skipped.len();
        out.first_error = Some((0, first.clone()));
    }
    if out.values.is_empty() {
        return Err(if skipped.is_empty() {
            "NVML listed no GPU".to_owned()
        } else {
            skipped.join("; ")
        });
    }
    Ok(out)
}

/// GPU `index`'s fields into `out`: a field it does not give is unavailable; a GPU that
/// cannot be read (no handle, lost, needing a reset) is an error and adds nothing.
fn read_gpu(nvml: &Nvml, index: u32, out: &mut Reading) -> Result<(), String> {
    let d = nvml.device_by_index(index).map_err(|e| e.to_string())?;
    let gpu = Gpu {
        index,
        uuid: d.uuid().ok(),
        model: d.name().ok(),
        host: None,
    };
    // A query's value; any failure but the GPU's loss leaves the field unavailable.
    fn field<T>(r: Result<T, NvmlError>) -> Result<Option<T>, String> {
        match r {
            Ok(v) => Ok(Some(v)),
            Err(e) if gone(&e) => Err(e.to_string()),
            Err(_) => Ok(None),
        }
    }
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
            field(d.violation_status(PerformancePolicy::Power))?.map(|v| v.violation_time as f64),
        ),
        (
            Field::ThermalViolationNs,
            field(d.violation_status(PerformancePolicy::Thermal))?.map(|v| v.violation_time as f64),
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the driver is not installed (this machine, CI), starting the source says what
    /// to install and reading it fails with that message: never a crash.
    #[test]
    fn an_absent_library_is_named_with_what_to_install() {
        let source = NvmlSource::start();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let read = rt.block_on(source.read());
        match source.absent() {
            // A machine with the driver: the reading works.
            None => assert!(read.is_ok(), "{read:?}"),
            Some(why) => {
                assert!(
                    why.contains("NVML not loaded") && why.contains("libnvidia-ml.so.1"),
                    "{why}"
                );
                assert_eq!(read.unwrap_err(), why);
            }
        }
    }
}
