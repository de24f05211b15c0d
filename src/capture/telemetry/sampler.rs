//! Reading the telemetry sources during a run, off the hot path, beside the metrics scraper:
//! every source once before the first request (the GPUs idle), every `--telemetry-every`
//! seconds while requests run, once after the last; each reading stamped on receipt on the
//! run's clock and turned into `telemetry` rows (one per GPU, the arm's GPUs marked).
//!
//! A reading that fails (no answer, an HTTP error, a local command that fails) is one row
//! with its `error`: a recorded gap, and the run goes on. A local source whose command is
//! not there at the `before` reading is warned about and not read again. What each source
//! gave is summarised for run.json `telemetry`: the arm's GPUs and the others, declared GPUs
//! never seen, fields never given, readings and failures.

use std::collections::BTreeSet;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::super::endpoint::{MetricsTarget, metrics_target};
use super::super::http::{self, SIDE_TIMEOUT};
use super::super::recorder::Msg;
use super::super::scrape::During;
use super::{Field, Reading, dcgm, smi};
use crate::artifact::telemetry::TelemetrySource;
use crate::artifact::{ScrapePhase, TelemetryGpu, TelemetryRow};
use crate::clock::Origin;
use crate::notice::Notices;

use super::super::error::{ConfigError, flag as flag_error};
use super::super::request::TelemetryRequest;

/// The default time between readings during a run.
pub const DEFAULT_EVERY: Duration = Duration::from_secs(1);

/// Where a source's readings come from.
#[derive(Debug, Clone)]
pub enum Kind {
    /// A DCGM exporter's `/metrics`.
    Dcgm(Box<MetricsTarget>),
    /// `nvidia-smi --query-gpu` on this host.
    Smi,
    /// NVML on this host.
    Nvml,
}

/// One declared telemetry source.
#[derive(Debug, Clone)]
pub struct SourceSpec {
    pub kind: Kind,
    /// The arm's GPUs by the source's index; `None`: every GPU it reports.
    pub gpus: Option<Vec<u32>>,
    /// The source's update interval as declared, s.
    pub interval_s: Option<f64>,
    /// The exporter's URL, or this host's name (read once, when declared).
    pub endpoint: String,
}

impl SourceSpec {
    /// `dcgm`, `nvidia-smi`.
    pub fn source(&self) -> &'static str {
        match self.kind {
            Kind::Dcgm(_) => "dcgm",
            Kind::Smi => "nvidia-smi",
            Kind::Nvml => "nvml",
        }
    }

    /// The exporter's URL, or this host's name.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn arm_gpu(&self, index: u32) -> bool {
        self.gpus.as_ref().is_none_or(|g| g.contains(&index))
    }
}

/// This host's name (`/proc/sys/kernel/hostname`), or `localhost`.
fn local_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// What one source gave so far.
#[derive(Debug, Default)]
struct Seen {
    gpus: BTreeSet<u32>,
    fields: BTreeSet<Field>,
    readings: u64,
    failed: u64,
    first_error: Option<String>,
    /// Stopped: a local command that is not there.
    disabled: bool,
    warned: bool,
    /// nvidia-smi refused the new clock-event field name: ask the old one.
    legacy: bool,
    /// Told that an undeclared source reports more GPUs than the arm has.
    warned_gpus: bool,
}

/// Reads every source, and sends its rows to the writer thread.
#[derive(Clone)]
pub struct Sampler {
    sources: Arc<[SourceSpec]>,
    seen: Arc<Mutex<Vec<Seen>>>,
    every: Duration,
    /// The arm's GPU count, where its configuration says (`gpus`, `topology`).
    arm_gpus: Option<u32>,
    /// NVML, loaded when a source reads it.
    nvml: Option<Arc<super::nvml::NvmlSource>>,
    msgs: Sender<Msg>,
    origin: Origin,
    notices: Notices,
}

/// Why a reading gave nothing, and whether the source is not there at all (a local
/// command missing), which stops it.
#[derive(Debug)]
struct Failed {
    why: String,
    absent: bool,
}

impl From<String> for Failed {
    fn from(why: String) -> Self {
        Failed { why, absent: false }
    }
}

impl Sampler {
    pub fn new(
        telemetry: &Telemetry,
        arm_gpus: Option<u32>,
        msgs: Sender<Msg>,
        origin: Origin,
        notices: Notices,
    ) -> Self {
        let sources = &telemetry.sources;
        Self {
            sources: sources.as_slice().into(),
            seen: Arc::new(Mutex::new(
                sources.iter().map(|_| Seen::default()).collect(),
            )),
            every: telemetry.every,
            arm_gpus,
            nvml: sources
                .iter()
                .any(|s| matches!(s.kind, Kind::Nvml))
                .then(|| Arc::new(super::nvml::NvmlSource::start())),
            msgs,
            origin,
            notices,
        }
    }

    /// How long one reading may take: twice the time between readings, from 1 s to 10 s (a
    /// source that does not answer never holds the run's start back longer).
    fn timeout(&self) -> Duration {
        (self.every * 2).clamp(Duration::from_secs(1), SIDE_TIMEOUT)
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Vec<Seen>> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Read every source once, all at the same time.
    pub async fn round(&self, phase: ScrapePhase) {
        let tasks: Vec<_> = (0..self.sources.len())
            .map(|i| {
                let this = self.clone();
                tokio::spawn(async move { this.read_one(i, phase).await })
            })
            .collect();
        for task in tasks {
            let _ = task.await;
        }
    }

    async fn read_one(&self, i: usize, phase: ScrapePhase) {
        let spec = &self.sources[i];
        let (disabled, legacy) = {
            let seen = self.seen();
            (seen[i].disabled, seen[i].legacy)
        };
        if disabled {
            return;
        }
        let attempted = self.origin.elapsed_ns();
        let read = match tokio::time::timeout(self.timeout(), self.read(spec, legacy, i)).await {
            Ok(read) => read,
            Err(_) => Err(Failed::from(format!(
                "no answer within {} s",
                self.timeout().as_secs_f64()
            ))),
        };
        let endpoint = spec.endpoint.clone();
        let rows = match read {
            Ok(reading) => {
                let t_ns = self.origin.elapsed_ns();
                self.rows_of(i, spec, &reading, &endpoint, t_ns, phase)
            }
            Err(failed) => {
                self.failed(i, spec, &failed);
                // Stamped when attempted: the gap begins there.
                vec![TelemetryRow {
                    source: spec.source(),
                    endpoint,
                    t_ns: attempted,
                    phase,
                    reading: Err(failed.why),
                }]
            }
        };
        let _ = self.msgs.send(Msg::Telemetry(rows));
    }

    async fn read(&self, spec: &SourceSpec, legacy: bool, i: usize) -> Result<Reading, Failed> {
        match &spec.kind {
            Kind::Dcgm(target) => {
                let (status, body) = http::get(&target.server, &target.path, None, self.timeout())
                    .await
                    .map_err(|e| e.to_string())?;
                if !(200..300).contains(&status) {
                    return Err(format!("{}: HTTP {status}", target.url).into());
                }
                let reading = dcgm::read(&body);
                if reading.values.is_empty() {
                    return Err(format!(
                        "{}: no DCGM GPU values in the answer (not a DCGM exporter, or one still \
                         starting)",
                        target.url
                    )
                    .into());
                }
                Ok(reading)
            }
            Kind::Nvml => {
                let Some(nvml) = &self.nvml else {
                    return Err(Failed::from("NVML was not started".to_owned()));
                };
                let reading = match nvml.read().await {
                    Ok(reading) => reading,
                    // Known absent (the library is not there): stop reading it.
                    Err(why) if nvml.absent().is_some() => {
                        return Err(Failed { why, absent: true });
                    }
                    Err(why) => return Err(why.into()),
                };
                if reading.values.is_empty() {
                    return Err(Failed::from("NVML listed no GPU".to_owned()));
                }
                Ok(reading)
            }
            Kind::Smi => {
                let legacy_query = smi::query_legacy();
                let query: &[&str] = if legacy { &legacy_query } else { smi::QUERY };
                let reading = match nvidia_smi(query).await {
                    Err(f) if !legacy && f.why.contains("clocks_event_reasons") => {
                        // A driver before 535: the reasons under their old name.
                        self.seen()[i].legacy = true;
                        let text = nvidia_smi(&legacy_query).await?;
                        smi::read(&text, Some(&legacy_query)).map_err(|e| e.to_string())?
                    }
                    Err(f) => return Err(f),
                    Ok(text) => smi::read(&text, Some(query)).map_err(|e| e.to_string())?,
                };
                if reading.values.is_empty() {
                    return Err(Failed::from("nvidia-smi listed no GPU".to_owned()));
                }
                Ok(reading)
            }
        }
    }

    fn rows_of(
        &self,
        i: usize,
        spec: &SourceSpec,
        reading: &Reading,
        endpoint: &str,
        t_ns: i64,
        phase: ScrapePhase,
    ) -> Vec<TelemetryRow> {
        let host = matches!(spec.kind, Kind::Smi | Kind::Nvml).then(|| spec.endpoint.clone());
        let rows: Vec<TelemetryRow> = reading
            .gpus()
            .into_iter()
            .map(|g| {
                let mut gpu = TelemetryGpu {
                    index: g.index,
                    uuid: g.uuid.clone(),
                    model: g.model.clone(),
                    host: g.host.clone().or_else(|| host.clone()),
                    arm_gpu: spec.arm_gpu(g.index),
                    unavailable: reading
                        .unavailable
                        .iter()
                        .filter(|(index, _)| *index == g.index)
                        .map(|(_, f)| *f)
                        .collect(),
                    source_time: reading
                        .values
                        .iter()
                        .rev()
                        .find(|v| v.gpu.index == g.index)
                        .and_then(|v| v.source_time.clone()),
                    ..TelemetryGpu::default()
                };
                for field in Field::ALL {
                    if let Some(v) = reading.get(g.index, field) {
                        gpu.set(field, v);
                    }
                }
                TelemetryRow {
                    source: spec.source(),
                    endpoint: endpoint.to_owned(),
                    t_ns,
                    phase,
                    reading: Ok(gpu),
                }
            })
            .collect();
        let mut seen = self.seen();
        let s = &mut seen[i];
        s.readings += 1;
        s.gpus.extend(reading.gpus().iter().map(|g| g.index));
        if let Some(arm) = self.arm_gpus
            && spec.gpus.is_none()
            && s.gpus.len() > arm as usize
            && !s.warned_gpus
        {
            s.warned_gpus = true;
            self.notices.say(&format!(
                "anvil-capture: warning: telemetry {endpoint} reports {} GPUs and the arm has {arm}: \
                 with no --telemetry-gpus every one counts in its energy; name the arm's GPUs",
                s.gpus.len()
            ));
        }
        s.fields.extend(reading.values.iter().map(|v| v.field));
        if let Some((line, why)) = &reading.first_error
            && !s.warned
        {
            s.warned = true;
            self.notices.say(&format!(
                "anvil-capture: warning: telemetry {endpoint}: {} line(s) could not be read and \
                 were not recorded (first: line {line}: {why})",
                reading.bad_lines
            ));
        }
        rows
    }

    fn failed(&self, i: usize, spec: &SourceSpec, failed: &Failed) {
        let why = &failed.why;
        let mut seen = self.seen();
        let s = &mut seen[i];
        s.readings += 1;
        s.failed += 1;
        if s.first_error.is_none() {
            s.first_error = Some(why.to_owned());
        }
        if failed.absent {
            s.disabled = true;
            self.notices.say(&format!(
                "anvil-capture: warning: telemetry {}: {why}; it will not be read again in this run",
                spec.source()
            ));
        } else if !s.warned {
            s.warned = true;
            self.notices.say(&format!(
                "anvil-capture: warning: telemetry {} {}: reading failed ({why}); the gap is \
                 recorded and the run goes on",
                spec.source(),
                spec.endpoint()
            ));
        }
    }

    /// Readings every `every` from one `every` on, until [`During::stop`].
    pub fn during(&self) -> During {
        let this = self.clone();
        During::every(self.every, move || {
            let this = this.clone();
            async move { this.round(ScrapePhase::During).await }
        })
    }

    /// The `after` reading, then what each source gave to the writer (run.json `telemetry`).
    pub async fn finish(&self) {
        self.round(ScrapePhase::After).await;
        let _ = self.msgs.send(Msg::TelemetrySummary(self.summary()));
    }

    /// run.json `telemetry`: what each source gave.
    pub fn summary(&self) -> Vec<TelemetrySource> {
        let seen = self.seen();
        self.sources
            .iter()
            .zip(seen.iter())
            .map(|(spec, s)| summarise(spec, s, self.every))
            .collect()
    }
}

/// run.json `telemetry` before any reading: what is declared (the recorder's header, so a
/// killed and recovered run keeps it).
pub fn declared_summary(telemetry: &Telemetry) -> Option<Vec<TelemetrySource>> {
    let sources = &telemetry.sources;
    (!sources.is_empty()).then(|| {
        sources
            .iter()
            .map(|spec| summarise(spec, &Seen::default(), telemetry.every))
            .collect()
    })
}

fn summarise(spec: &SourceSpec, s: &Seen, every: Duration) -> TelemetrySource {
    let (gpus, other_gpus): (Vec<u32>, Vec<u32>) = s.gpus.iter().partition(|g| spec.arm_gpu(**g));
    TelemetrySource {
        source: spec.source().to_owned(),
        endpoint: spec.endpoint.clone(),
        gpus_declared: spec.gpus.clone(),
        missing_gpus: spec
            .gpus
            .iter()
            .flatten()
            .filter(|g| !s.gpus.contains(g))
            .copied()
            .collect(),
        gpus,
        other_gpus,
        interval_s: spec.interval_s,
        every_s: every.as_secs_f64(),
        absent: Field::ALL
            .into_iter()
            .filter(|f| !s.fields.contains(f))
            .map(|f| f.as_str().to_owned())
            .collect(),
        readings: s.readings,
        failed_readings: s.failed,
        first_error: s.first_error.clone(),
    }
}

/// Run `nvidia-smi --query-gpu=QUERY --format=csv,noheader,nounits` and return its output.
/// The child runs on ordinary scheduling on any CPU: the recorder's runtime thread that
/// starts it is pinned to the hot path's CPU and may be real-time, which a child inherits.
async fn nvidia_smi(query: &[&str]) -> Result<String, Failed> {
    let mut command = tokio::process::Command::new("nvidia-smi");
    command
        .arg(format!("--query-gpu={}", query.join(",")))
        .arg("--format=csv,noheader,nounits")
        .kill_on_drop(true);
    // SAFETY: the hook makes two system calls and allocates nothing (async-signal-safe).
    unsafe {
        // Best effort: a sandbox that refuses the calls leaves the child as it was.
        command.pre_exec(|| {
            let _ = crate::realtime::ordinary_anywhere();
            Ok(())
        });
    }
    let out = command.output().await.map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Failed {
            why: "nvidia-smi is not on the PATH: install the NVIDIA driver's utilities, or \
                  read a DCGM exporter instead (--telemetry dcgm=URL)"
                .to_owned(),
            absent: true,
        },
        _ => Failed::from(format!("running nvidia-smi: {e}")),
    })?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let said = if err.trim().is_empty() { &text } else { &*err };
        return Err(format!("nvidia-smi failed ({}): {}", out.status, said.trim()).into());
    }
    Ok(text)
}

/// The sources a run reads and how often: `--telemetry` and its companions, checked.
#[derive(Debug, Clone, Default)]
pub struct Telemetry {
    pub sources: Vec<SourceSpec>,
    pub every: Duration,
}

/// Check what `--telemetry`, `--telemetry-gpus`, `--telemetry-interval` and
/// `--telemetry-every` say.
pub fn declared(req: &TelemetryRequest) -> Result<Telemetry, ConfigError> {
    let n = req.sources.len();
    let per_source = |flag: &'static str, given: usize| {
        if given > 1 && given != n || given > 0 && n == 0 {
            Err(flag_error(
                flag,
                given,
                format!("give one per --telemetry ({n} sources, {given} given), or one for all"),
            ))
        } else {
            Ok(())
        }
    };
    per_source("--telemetry-gpus", req.gpus.len())?;
    per_source("--telemetry-interval", req.intervals_s.len())?;
    let every = match req.every_s {
        None => DEFAULT_EVERY,
        Some(s) if s.is_finite() && (0.05..=3600.0).contains(&s) => Duration::from_secs_f64(s),
        Some(s) => {
            return Err(flag_error(
                "--telemetry-every",
                s,
                "must be in [0.05, 3600] seconds",
            ));
        }
    };
    let mut sources = Vec::with_capacity(n);
    for (i, spec_text) in req.sources.iter().enumerate() {
        let spec = spec_text;
        let kind = match spec.split_once('=') {
            Some(("dcgm", url)) => Kind::Dcgm(Box::new(
                metrics_target(i as u32, url.trim())
                    .map_err(|e| flag_error("--telemetry", spec, e.to_string()))?,
            )),
            None if spec == "nvidia-smi" => Kind::Smi,
            None if spec == "nvml" => Kind::Nvml,
            _ => {
                return Err(flag_error(
                    "--telemetry",
                    spec,
                    "expected dcgm=URL (a DCGM exporter, e.g. dcgm=http://gpu-host:9400/metrics), nvidia-smi or nvml (this host)",
                ));
            }
        };
        let gpus = match req
            .gpus
            .get(i)
            .or(req.gpus.first().filter(|_| req.gpus.len() == 1))
        {
            None => None,
            Some(list) => Some(
                list.split(',')
                    .map(|g| g.trim().parse::<u32>())
                    .collect::<Result<Vec<u32>, _>>()
                    .ok()
                    .filter(|g| !g.is_empty())
                    .ok_or_else(|| {
                        flag_error(
                            "--telemetry-gpus",
                            list,
                            "expected GPU indices as the source numbers them, e.g. 0,1",
                        )
                    })?,
            ),
        };
        let interval_s = match req.intervals_s.get(i).or(req
            .intervals_s
            .first()
            .filter(|_| req.intervals_s.len() == 1))
        {
            None => None,
            Some(s) if s.is_finite() && *s > 0.0 && *s <= 3600.0 => Some(*s),
            Some(s) => {
                return Err(flag_error(
                    "--telemetry-interval",
                    s,
                    "must be in (0, 3600] seconds",
                ));
            }
        };
        let endpoint = match &kind {
            Kind::Dcgm(t) => t.url.clone(),
            Kind::Smi | Kind::Nvml => local_host(),
        };
        let spec = SourceSpec {
            kind,
            gpus,
            interval_s,
            endpoint,
        };
        if sources
            .iter()
            .any(|s: &SourceSpec| s.source() == spec.source() && s.endpoint() == spec.endpoint())
        {
            return Err(flag_error(
                "--telemetry",
                spec_text,
                "is given twice: read each source once",
            ));
        }
        sources.push(spec);
    }
    Ok(Telemetry { sources, every })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(sources: &[&str], gpus: &[&str], intervals: &[f64]) -> TelemetryRequest {
        TelemetryRequest {
            sources: sources.iter().map(|s| (*s).to_owned()).collect(),
            gpus: gpus.iter().map(|s| (*s).to_owned()).collect(),
            intervals_s: intervals.to_vec(),
            every_s: None,
        }
    }

    #[test]
    fn sources_gpus_and_intervals_are_read_per_source_or_for_all() {
        let t = declared(&req(
            &["dcgm=http://gpu-node:9400/metrics", "nvidia-smi"],
            &["0,1", "2"],
            &[1.0],
        ))
        .unwrap();
        assert_eq!(t.every, DEFAULT_EVERY);
        assert_eq!(t.sources[0].source(), "dcgm");
        assert_eq!(t.sources[0].endpoint(), "http://gpu-node:9400/metrics");
        assert_eq!(t.sources[0].gpus, Some(vec![0, 1]));
        assert_eq!(t.sources[1].gpus, Some(vec![2]));
        assert_eq!(t.sources[1].interval_s, Some(1.0), "one interval for all");
        assert!(t.sources[0].arm_gpu(1) && !t.sources[0].arm_gpu(2));
        let summary = declared_summary(&t).unwrap();
        assert_eq!(summary[0].gpus_declared, Some(vec![0, 1]));
        assert_eq!(summary[0].readings, 0);
        assert!(declared_summary(&Telemetry::default()).is_none());
    }

    #[test]
    fn a_bad_declaration_names_its_flag() {
        let e = |r: TelemetryRequest| declared(&r).unwrap_err().to_string();
        assert!(e(req(&["prometheus=http://h/metrics"], &[], &[])).contains("dcgm=URL"));
        assert!(e(req(&["dcgm=https://h/metrics"], &[], &[])).contains("--telemetry"));
        let twice = req(&["nvidia-smi", "nvidia-smi"], &[], &[]);
        assert!(e(twice).contains("twice"));
        let gpus = req(
            &["nvidia-smi", "dcgm=http://h:9400/metrics"],
            &["0", "1", "2"],
            &[],
        );
        assert!(e(gpus).contains("--telemetry-gpus"));
        assert!(e(req(&["nvidia-smi"], &["zero"], &[])).contains("GPU indices"));
        assert!(e(req(&["nvidia-smi"], &[], &[0.0])).contains("--telemetry-interval"));
        assert!(e(req(&[], &["0"], &[])).contains("--telemetry-gpus"));
        let mut fast = req(&["nvidia-smi"], &[], &[]);
        fast.every_s = Some(0.001);
        assert!(e(fast).contains("--telemetry-every"));
    }
}
