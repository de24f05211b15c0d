//! The simulator's GPUs and their DCGM exporter (`--dcgm`): a thread that advances each
//! GPU's [`power`](super::power) model from its replica's activity every tick, feeds the
//! clock factor back into the replica's timing, and at each collect interval takes the
//! snapshot `GET /dcgm/metrics` serves in the DCGM exporter's Prometheus text, as
//! `dcgm-exporter` does (values updated every `-c` milliseconds, 30 s by default).
//!
//! Each replica has `gpus_per_replica` GPUs (TP2: two), numbered from `first_gpu` on across
//! the process's replicas. The replica's demand over a tick is the tokens it decoded, and
//! the prompt tokens its prefill lane worked through (admitted prompts wait in a backlog the
//! lane drains at the replica's prefill rate times its clock, so a prefill counts over the
//! time it takes), each divided by the clock factor it ran at: what it would have done at
//! full clocks. It is shared evenly among the replica's GPUs, and a replica runs at its
//! slowest GPU's clock. The tick divides the collect interval (at most 100 ms), so every
//! snapshot is the state at a tick's end; ticks missed while the thread was held up are
//! skipped, one longer tick standing for them.
//!
//! `--dcgm-counters default` exposes the exporter's default counter set (power, the energy
//! counter, clocks, temperatures, utilisation, memory, PCIe replays); `extended` adds the
//! fields anvil's README asks for (clock-event reasons, enforced power limit, slowdown
//! temperature, maximum SM clock, power and thermal violation counters).
//!
//! `--gpu-truth FILE` writes one CSV row per GPU per tick (CLOCK_MONOTONIC ns, the tick's
//! end), the exact state: `t_ns,gpu,uuid,replica,power_w,energy_mj,temp_c,sm_clock_mhz,
//! reasons,snapshot` (`power_w` the tick's constant power, so energy between two rows is
//! exact and linear within a tick; `reasons` NVML's bitmask; `snapshot` 1 when the
//! exporter's snapshot was taken at that row), with a first row per GPU at start.

use std::io::{BufWriter, Write};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context;

use super::engine::ReplicaShared;
use super::power::{GpuSetup, GpuState};
use crate::clock::monotonic_ns;

/// The exporter's default collect interval (`dcgm-exporter -c 30000`).
pub const DEFAULT_COLLECT_MS: u64 = 30_000;

/// The longest tick: how often the GPUs' state advances.
const MAX_TICK: Duration = Duration::from_millis(100);

/// The simulated GPU's memory, MiB, and what a serving engine takes of it at start.
const FB_TOTAL_MIB: f64 = 81_559.0;
const FB_USED_MIB: f64 = 74_213.0;
const MEM_CLOCK_MHZ: f64 = 2_619.0;
const MODEL_NAME: &str = "NVIDIA H100 80GB HBM3 (anvil-sim)";

/// One simulated GPU.
#[derive(Debug, Clone)]
struct Gpu {
    index: u32,
    uuid: String,
    replica: usize,
    state: GpuState,
    /// Ticks since the last snapshot, and how many of them did work (`GPU_UTIL`).
    ticks: u32,
    busy: u32,
}

/// The GPU's UUID: NVIDIA's `GPU-8-4-4-4-12` hex form, fixed per index.
fn uuid(index: u32) -> String {
    format!("GPU-5133a000-0000-4000-8000-{index:012x}")
}

struct Shared {
    snapshot: Mutex<String>,
    stop: Mutex<bool>,
    cv: Condvar,
}

/// The running power thread and the exporter's current text.
pub struct Fleet {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<anyhow::Result<()>>>,
}

/// What `GET /dcgm/metrics` serves: the last snapshot.
#[derive(Clone)]
pub struct Exporter(Arc<Shared>);

impl Exporter {
    /// The exposition text of the last collect.
    pub fn text(&self) -> String {
        self.0
            .snapshot
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Fleet {
    /// Start advancing `replicas`' GPUs (`prefill_tps`: each replica's prefill rate at full
    /// clocks); the first snapshot is taken at once.
    pub fn start(
        setup: GpuSetup,
        replicas: Vec<Arc<ReplicaShared>>,
        prefill_tps: Vec<f64>,
    ) -> anyhow::Result<Fleet> {
        let mut truth = match &setup.truth {
            Some(p) => Some(BufWriter::new(std::fs::File::create(p).with_context(
                || format!("creating the GPU truth file {}", p.display()),
            )?)),
            None => None,
        };
        if let Some(w) = truth.as_mut() {
            writeln!(
                w,
                "t_ns,gpu,uuid,replica,power_w,energy_mj,temp_c,sm_clock_mhz,reasons,snapshot"
            )?;
        }
        let mut gpus = Vec::new();
        for (r, _) in replicas.iter().enumerate() {
            for g in 0..setup.gpus_per_replica {
                let index = setup.first_gpu + (r * setup.gpus_per_replica + g) as u32;
                gpus.push(Gpu {
                    index,
                    uuid: uuid(index),
                    replica: r,
                    state: GpuState::idle(&setup.model),
                    ticks: 0,
                    busy: 0,
                });
            }
        }
        let shared = Arc::new(Shared {
            snapshot: Mutex::new(render(&setup, &gpus)),
            stop: Mutex::new(false),
            cv: Condvar::new(),
        });
        let s2 = shared.clone();
        let thread = std::thread::Builder::new()
            .name("anvil-sim-gpus".into())
            .spawn(move || {
                let truth = TruthFile {
                    w: truth,
                    error: None,
                };
                run(&setup, &replicas, &prefill_tps, gpus, truth, &s2)
            })
            .context("starting the GPU thread")?;
        Ok(Fleet {
            shared,
            thread: Some(thread),
        })
    }

    /// The exporter the HTTP side serves.
    pub fn exporter(&self) -> Exporter {
        Exporter(self.shared.clone())
    }

    /// Stop the thread and flush the truth file.
    pub fn stop(mut self) -> anyhow::Result<()> {
        self.finish()
    }

    fn finish(&mut self) -> anyhow::Result<()> {
        *self.shared.stop.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.shared.cv.notify_all();
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => anyhow::bail!("the GPU thread panicked"),
            None => Ok(()),
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// The tick: the collect interval divided into steps of at most [`MAX_TICK`].
pub fn tick_of(collect: Duration) -> Duration {
    let n = collect.as_nanos().div_ceil(MAX_TICK.as_nanos()).max(1);
    Duration::from_nanos((collect.as_nanos() / n) as u64)
}

/// The truth file while it can be written; the first write error is kept (and returned at
/// stop) and the file left alone, the GPUs ticking on.
struct TruthFile {
    w: Option<BufWriter<std::fs::File>>,
    error: Option<std::io::Error>,
}

impl TruthFile {
    fn write(&mut self, f: impl FnOnce(&mut BufWriter<std::fs::File>) -> std::io::Result<()>) {
        if let Some(w) = self.w.as_mut()
            && let Err(e) = f(w)
        {
            self.error = Some(e);
            self.w = None;
        }
    }

    fn finish(mut self) -> anyhow::Result<()> {
        self.write(|w| {
            w.flush()?;
            w.get_ref().sync_all()
        });
        match self.error {
            Some(e) => Err(anyhow::Error::new(e).context("writing the GPU truth file")),
            None => Ok(()),
        }
    }
}

/// What a replica asks of its GPUs: the prompt tokens admitted and not yet prefilled (the
/// lane prefills them at the replica's rate times its clock, as the engine's lane does), so
/// a prompt's prefill is spread over the time it takes rather than counted at admission.
#[derive(Debug, Default, Clone, Copy)]
struct Backlog {
    prefill_tokens: f64,
}

fn run(
    setup: &GpuSetup,
    replicas: &[Arc<ReplicaShared>],
    prefill_tps: &[f64],
    mut gpus: Vec<Gpu>,
    mut truth: TruthFile,
    shared: &Shared,
) -> anyhow::Result<()> {
    let tick = tick_of(setup.collect).as_nanos() as i64;
    let per_collect = (setup.collect.as_nanos() as i64 / tick.max(1)).max(1);
    let start = monotonic_ns();
    let mut last = start;
    truth.write(|w| {
        gpus.iter()
            .try_for_each(|g| truth_row(w, setup, g, start, true))
    });
    let mut last_flush = start;
    let mut backlog = vec![Backlog::default(); replicas.len()];
    let mut k: i64 = 0;
    loop {
        // The next tick; ticks missed while the thread was held up are skipped (one long
        // tick instead of a burst of empty ones).
        k = (k + 1).max((monotonic_ns() - start) / tick);
        let due = start + k * tick;
        {
            let mut stop = shared.stop.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if *stop {
                    return truth.finish();
                }
                let now = monotonic_ns();
                if now >= due {
                    break;
                }
                stop = shared
                    .cv
                    .wait_timeout(stop, Duration::from_nanos((due - now) as u64))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
        let now = monotonic_ns();
        let dt = (now - last) as f64 / 1e9;
        // A snapshot whenever this tick crossed a collect boundary.
        let snapshot = (now - start) / (tick * per_collect) > (last - start) / (tick * per_collect);
        last = now;
        for (r, rep) in replicas.iter().enumerate() {
            let (decoded, prefilled) = rep.activity.take();
            let ran_at = rep.activity.clock();
            let lane = &mut backlog[r];
            lane.prefill_tokens += prefilled as f64;
            let rate = prefill_tps.get(r).copied().unwrap_or(f64::INFINITY);
            let done = lane.prefill_tokens.min(rate * ran_at * dt);
            lane.prefill_tokens -= done;
            let share = setup.gpus_per_replica.max(1) as f64 * dt.max(1e-9) * ran_at;
            let (decode_tps, prefill_tps) = (decoded as f64 / share, done / share);
            let mut clock = 1.0f64;
            for g in gpus.iter_mut().filter(|g| g.replica == r) {
                g.state.advance(&setup.model, dt, decode_tps, prefill_tps);
                g.ticks += 1;
                if decoded > 0 || done > 0.0 {
                    g.busy += 1;
                }
                clock = clock.min(g.state.clock_factor(&setup.model));
            }
            rep.activity.set_clock(clock);
        }
        let flush = now - last_flush >= 1_000_000_000;
        if flush {
            last_flush = now;
        }
        truth.write(|w| {
            gpus.iter()
                .try_for_each(|g| truth_row(w, setup, g, now, snapshot))?;
            if flush {
                w.flush()?;
            }
            Ok(())
        });
        if snapshot {
            let text = render(setup, &gpus);
            *shared.snapshot.lock().unwrap_or_else(|e| e.into_inner()) = text;
            for g in gpus.iter_mut() {
                g.ticks = 0;
                g.busy = 0;
            }
        }
    }
}

fn truth_row(
    w: &mut impl Write,
    setup: &GpuSetup,
    g: &Gpu,
    t_ns: i64,
    snapshot: bool,
) -> std::io::Result<()> {
    writeln!(
        w,
        "{t_ns},{},{},{},{},{},{},{},{},{}",
        g.index,
        g.uuid,
        g.replica,
        g.state.power_w,
        g.state.energy_mj,
        g.state.temp_c,
        g.state.sm_clock_mhz(&setup.model),
        g.state.reasons.0,
        u8::from(snapshot)
    )
}

/// One field of the exposition: its DCGM name, Prometheus type, help, and value per GPU.
type Series = (
    &'static str,
    &'static str,
    &'static str,
    fn(&GpuSetup, &Gpu) -> String,
);

/// The exporter's default counter set, in its order.
const DEFAULT_SET: &[Series] = &[
    (
        "DCGM_FI_DEV_SM_CLOCK",
        "gauge",
        "SM clock frequency (in MHz).",
        |s, g| format!("{:.0}", g.state.sm_clock_mhz(&s.model)),
    ),
    (
        "DCGM_FI_DEV_MEM_CLOCK",
        "gauge",
        "Memory clock frequency (in MHz).",
        |_, _| format!("{MEM_CLOCK_MHZ:.0}"),
    ),
    (
        "DCGM_FI_DEV_MEMORY_TEMP",
        "gauge",
        "Memory temperature (in C).",
        |_, g| format!("{:.0}", g.state.temp_c - 3.0),
    ),
    (
        "DCGM_FI_DEV_GPU_TEMP",
        "gauge",
        "GPU temperature (in C).",
        |_, g| format!("{:.0}", g.state.temp_c),
    ),
    (
        "DCGM_FI_DEV_POWER_USAGE",
        "gauge",
        "Power draw (in W).",
        |_, g| format!("{:.3}", g.state.power_w),
    ),
    (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "counter",
        "Total energy consumption since boot (in mJ).",
        |_, g| format!("{:.0}", g.state.energy_mj.floor()),
    ),
    (
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "counter",
        "Total number of PCIe retries.",
        |_, _| "0".to_owned(),
    ),
    (
        "DCGM_FI_DEV_GPU_UTIL",
        "gauge",
        "GPU utilization (in %).",
        |_, g| format!("{}", (100 * g.busy).checked_div(g.ticks).unwrap_or(0)),
    ),
    (
        "DCGM_FI_DEV_FB_FREE",
        "gauge",
        "Framebuffer memory free (in MiB).",
        |_, _| format!("{:.0}", FB_TOTAL_MIB - FB_USED_MIB),
    ),
    (
        "DCGM_FI_DEV_FB_USED",
        "gauge",
        "Framebuffer memory used (in MiB).",
        |_, _| format!("{FB_USED_MIB:.0}"),
    ),
];

/// The fields anvil's README asks to add to the collectors file.
const EXTENDED_SET: &[Series] = &[
    (
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
        "gauge",
        "Current clock event reasons (bitmask).",
        |_, g| g.state.reasons.0.to_string(),
    ),
    (
        "DCGM_FI_DEV_ENFORCED_POWER_LIMIT",
        "gauge",
        "Enforced power limit (in W).",
        |s, _| format!("{:.3}", s.model.limit_w),
    ),
    (
        "DCGM_FI_DEV_SLOWDOWN_TEMP",
        "gauge",
        "Slowdown temperature (in C).",
        |s, _| format!("{:.0}", s.model.slowdown_c),
    ),
    (
        "DCGM_FI_DEV_MAX_SM_CLOCK",
        "gauge",
        "Maximum SM clock (in MHz).",
        |s, _| format!("{:.0}", s.model.max_sm_clock_mhz),
    ),
    (
        "DCGM_FI_DEV_POWER_VIOLATION",
        "counter",
        "Throttling duration due to power constraints (in ns).",
        |_, g| format!("{:.0}", g.state.power_violation_ns.floor()),
    ),
    (
        "DCGM_FI_DEV_THERMAL_VIOLATION",
        "counter",
        "Throttling duration due to thermal constraints (in ns).",
        |_, g| format!("{:.0}", g.state.thermal_violation_ns.floor()),
    ),
];

/// The exposition text of `gpus` now, as the exporter writes it: `# HELP`, `# TYPE`, then
/// one line per GPU with its `gpu`, `UUID`, `pci_bus_id`, `device`, `modelName` and
/// `Hostname` labels.
fn render(setup: &GpuSetup, gpus: &[Gpu]) -> String {
    let mut out = String::new();
    let extended = if setup.extended { EXTENDED_SET } else { &[] };
    for (name, kind, help, value) in DEFAULT_SET.iter().chain(extended) {
        out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
        for g in gpus {
            out.push_str(&format!(
                "{name}{{gpu=\"{i}\",UUID=\"{u}\",pci_bus_id=\"00000000:{b:02X}:00.0\",device=\"nvidia{i}\",modelName=\"{MODEL_NAME}\",Hostname=\"anvil-sim\"}} {v}\n",
                i = g.index,
                u = g.uuid,
                b = 0x18 + g.index,
                v = value(setup, g),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tick_divides_the_collect_interval() {
        assert_eq!(
            tick_of(Duration::from_millis(1000)),
            Duration::from_millis(100)
        );
        assert_eq!(tick_of(Duration::from_secs(30)), Duration::from_millis(100));
        assert_eq!(
            tick_of(Duration::from_millis(250)),
            Duration::from_nanos(83_333_333)
        );
        assert_eq!(
            tick_of(Duration::from_millis(50)),
            Duration::from_millis(50)
        );
    }
}
