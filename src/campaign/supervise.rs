//! The servers a campaign launches: one process per replica, each in its own process group
//! (a SIGINT at the terminal reaches the campaign, which decides when each server stops, not
//! the servers), its standard output and error appended to one log file beside the arm's
//! artifacts; a readiness check polled until it answers 200; a stop signal to the whole group,
//! a grace period, then SIGKILL.
//!
//! Nothing here parses what a server says beyond its HTTP status: the readiness poll and the
//! fingerprint use the capture layer's one-shot HTTP exchanges on a current-thread runtime.

use std::fs::File;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{Launch, Readiness, StopMethod};
use crate::capture::endpoint::Endpoint;
use crate::capture::http;

/// The process groups launched and not yet stopped or left running: what [`kill_live`]
/// kills when the runner must leave at once (a second interrupt).
static LIVE: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

fn live(pid: u32, add: bool) {
    let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    live.retain(|p| *p != pid);
    if add {
        live.push(pid);
    }
}

/// SIGKILL every process group launched and not yet stopped: a runner leaving at once leaves
/// no server behind (only the restored service it means to leave).
pub fn kill_live() {
    let live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    for pid in live.iter() {
        signal_group(*pid, libc::SIGKILL);
    }
}

/// How often readiness is polled and a stopping process is waited for.
const POLL: Duration = Duration::from_millis(100);

/// How long a process killed with SIGKILL has to disappear before it counts as not stopped.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// One launched replica.
#[derive(Debug)]
pub struct Replica {
    pub index: usize,
    pub port: u16,
    /// The command line as run (placeholders replaced).
    pub argv: Vec<String>,
    pub pid: u32,
    /// Its start time in clock ticks since boot (`/proc/<pid>/stat`), with the pid what
    /// identifies the process across a reused pid.
    pub start_ticks: Option<u64>,
    /// Where its standard output and error go.
    pub log: PathBuf,
    child: Child,
    /// Its exit status once reaped.
    exited: Option<ExitStatus>,
}

/// The replicas of one launched service. Dropped without [`Launched::stop`] or
/// [`Launched::leave_running`] (a runner leaving on an error), its processes are killed: a
/// server never outlives the runner that started it unless it is meant to.
#[derive(Debug, Default)]
pub struct Launched {
    pub replicas: Vec<Replica>,
}

impl Drop for Launched {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// How one replica ended when it was stopped.
#[derive(Debug, Clone, PartialEq)]
pub struct Stopped {
    pub replica: usize,
    pub pid: u32,
    /// `exited with code 0`, `killed by SIGTERM`, … or why it could not be stopped.
    pub status: String,
    /// SIGKILL was needed (the grace period passed).
    pub killed: bool,
    /// It was still there after SIGKILL.
    pub not_stopped: bool,
    pub seconds: f64,
}

/// The command line (or environment values) of replica `index` on `port` in the launch that
/// records `repeat`: `{port}`, `{replica}` and `{repeat}` replaced.
pub fn replica_argv(argv: &[String], port: u16, index: usize, repeat: u32) -> Vec<String> {
    argv.iter()
        .map(|a| {
            a.replace("{port}", &port.to_string())
                .replace("{replica}", &index.to_string())
                .replace("{repeat}", &repeat.to_string())
        })
        .collect()
}

/// Whether something accepts connections on loopback `port` now.
pub fn port_answers(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    TcpStream::connect_timeout(&addr, Duration::from_millis(300)).is_ok()
}

/// The program to run for `name`: a path as given; a bare name looked up on `PATH`, then
/// beside the running executable (so `anvil-sim` next to `anvil` in a cargo target folder is
/// found).
pub fn resolve_program(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(PathBuf::from(name));
    }
    let on_path = std::env::var_os("PATH").into_iter().flat_map(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .collect::<Vec<_>>()
    });
    let beside = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join(name)));
    on_path.chain(beside).find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Start one process per port, for the launch that records `repeat` (`{repeat}`). `base` is
/// the campaign file's folder (a relative `cwd` is resolved against it); `log_dir` receives
/// `server.replica<i>.log`. A port that already answers is refused before anything starts:
/// the campaign would measure another server.
pub fn launch(
    launch: &Launch,
    repeat: u32,
    ports: &[u16],
    base: &Path,
    log_dir: &Path,
    banner: &str,
    secrets: &[&str],
) -> Result<Launched, String> {
    if let Some(busy) = ports.iter().find(|p| port_answers(**p)) {
        return Err(format!(
            "port {busy} already answers: another server is running there; stop it (or choose other ports) so the campaign measures the server it launches"
        ));
    }
    let program = launch
        .argv
        .first()
        .ok_or_else(|| "the launch command names no program".to_owned())?;
    let resolved = resolve_program(program).ok_or_else(|| {
        format!(
            "`{program}` is not on PATH (nor beside this executable): install it or give its path"
        )
    })?;
    std::fs::create_dir_all(log_dir)
        .map_err(|e| format!("cannot create {}: {e}", log_dir.display()))?;
    let cwd = launch.cwd.as_ref().map(|c| base.join(c));
    let mut launched = Launched::default();
    for (index, port) in ports.iter().copied().enumerate() {
        let argv = replica_argv(&launch.argv, port, index, repeat);
        let log = log_dir.join(format!("server.replica{index}.log"));
        let mut file = File::options()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
        let _ = writeln!(
            file,
            "# {} {banner}: replica {index}, port {port}: {}",
            crate::clock::utc_now(),
            crate::artifact::redact_args(&argv, secrets).join(" ")
        );
        let err = file
            .try_clone()
            .map_err(|e| format!("{}: {e}", log.display()))?;
        let env = launch.env.iter().map(|(k, v)| {
            (
                k,
                replica_argv(std::slice::from_ref(v), port, index, repeat).remove(0),
            )
        });
        let mut cmd = Command::new(&resolved);
        cmd.args(&argv[1..])
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::from(file))
            .stderr(Stdio::from(err))
            .process_group(0);
        if let Some(dir) = &cwd {
            cmd.current_dir(dir);
        }
        match cmd.spawn() {
            Ok(child) => {
                live(child.id(), true);
                launched.replicas.push(Replica {
                    index,
                    port,
                    pid: child.id(),
                    start_ticks: start_ticks(child.id()),
                    argv,
                    log,
                    child,
                    exited: None,
                });
            }
            Err(e) => {
                // The replicas already started are stopped at once.
                launched.kill_all();
                return Err(format!("cannot start `{}`: {e}", resolved.display()));
            }
        }
    }
    Ok(launched)
}

impl Launched {
    /// The replicas that have exited, with how (each reported once it is reaped).
    pub fn exited(&mut self) -> Vec<(usize, u32, String)> {
        let mut out = Vec::new();
        for r in &mut self.replicas {
            if r.exited.is_none()
                && let Ok(Some(status)) = r.child.try_wait()
            {
                r.exited = Some(status);
                live(r.pid, false);
            }
            if let Some(status) = r.exited {
                out.push((r.index, r.pid, describe(status)));
            }
        }
        out
    }

    /// The base URLs of the replicas.
    pub fn urls(&self) -> Vec<String> {
        self.replicas
            .iter()
            .map(|r| format!("http://127.0.0.1:{}", r.port))
            .collect()
    }

    /// Stop every replica: `method`'s signal to its process group, up to the grace period,
    /// then SIGKILL.
    pub fn stop(&mut self, method: &StopMethod) -> Vec<Stopped> {
        let signal = if method.signal == "SIGINT" {
            libc::SIGINT
        } else {
            libc::SIGTERM
        };
        let started = Instant::now();
        for r in self.replicas.iter_mut().filter(|r| r.exited.is_none()) {
            signal_group(r.pid, signal);
        }
        let grace = Duration::from_secs_f64(method.grace_s);
        let mut out = Vec::new();
        for r in &mut self.replicas {
            let mut killed = false;
            let mut status = wait_until(r, started + grace);
            if status.is_none() {
                killed = true;
                signal_group(r.pid, libc::SIGKILL);
                status = wait_until(r, Instant::now() + KILL_WAIT);
            } else {
                // The leader is gone; anything it left in its group goes too.
                signal_group(r.pid, libc::SIGKILL);
            }
            out.push(Stopped {
                replica: r.index,
                pid: r.pid,
                status: status.map_or_else(
                    || format!("still running {} s after SIGKILL", KILL_WAIT.as_secs()),
                    describe,
                ),
                killed,
                not_stopped: status.is_none(),
                seconds: started.elapsed().as_secs_f64(),
            });
        }
        out
    }

    /// Leave the replicas running (a restored service): forget them without waiting.
    pub fn leave_running(mut self) -> Vec<u32> {
        std::mem::take(&mut self.replicas)
            .into_iter()
            .map(|r| {
                live(r.pid, false);
                r.pid
            })
            .collect()
    }

    /// SIGKILL every replica not yet reaped, and reap it (waiting a second at most: a
    /// process stuck in the kernel is not waited for).
    fn kill_all(&mut self) {
        for r in self.replicas.iter_mut().filter(|r| r.exited.is_none()) {
            signal_group(r.pid, libc::SIGKILL);
            wait_until(r, Instant::now() + Duration::from_secs(1));
        }
    }
}

fn wait_until(r: &mut Replica, deadline: Instant) -> Option<ExitStatus> {
    loop {
        if let Some(s) = r.exited {
            return Some(s);
        }
        if let Ok(Some(s)) = r.child.try_wait() {
            r.exited = Some(s);
            live(r.pid, false);
            return Some(s);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(POLL.min(deadline.saturating_duration_since(Instant::now())));
    }
}

/// Send `signal` to the process group led by `pid` (each replica leads its own).
pub fn signal_group(pid: u32, signal: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill(2) with a negative pid signals a process group; no memory is shared.
        unsafe {
            libc::kill(-pid, signal);
        }
    }
}

/// The start time of process `pid` in clock ticks since boot (field 22 of
/// `/proc/<pid>/stat`), `None` when there is no such process.
pub fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`): start times count from the boot.
pub fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_owned())
}

/// Whether the process group led by `pid` still has a member.
pub fn group_exists(pid: u32) -> bool {
    libc::pid_t::try_from(pid).is_ok_and(|pid| {
        // SAFETY: kill(2) with signal 0 only checks that the group exists.
        unsafe { libc::kill(-pid, 0) == 0 }
    })
}

/// `exited with code 0`, `killed by SIGKILL`, …
pub fn describe(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exited with code {code}");
    }
    match status.signal() {
        Some(libc::SIGTERM) => "killed by SIGTERM".to_owned(),
        Some(libc::SIGINT) => "killed by SIGINT".to_owned(),
        Some(libc::SIGKILL) => "killed by SIGKILL".to_owned(),
        Some(libc::SIGSEGV) => "killed by SIGSEGV".to_owned(),
        Some(libc::SIGABRT) => "killed by SIGABRT".to_owned(),
        Some(s) => format!("killed by signal {s}"),
        None => format!("{status}"),
    }
}

/// Why a service did not become ready.
#[derive(Debug, Clone, PartialEq)]
pub enum NotReady {
    /// The timeout passed; the last answer (or error) seen.
    Timeout { after_s: f64, last: String },
    /// A replica exited first.
    Exited { replica: usize, status: String },
    /// The campaign was interrupted while waiting.
    Interrupted,
}

impl std::fmt::Display for NotReady {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotReady::Timeout { after_s, last } => {
                write!(f, "not ready after {after_s:.1} s (last: {last})")
            }
            NotReady::Exited { replica, status } => {
                write!(f, "replica {replica} {status} before it was ready")
            }
            NotReady::Interrupted => f.write_str("interrupted while waiting for readiness"),
        }
    }
}

/// Poll `readiness.path` on every URL until each answers 200, within `readiness.timeout_s`;
/// `launched` (when anvil started the service) is watched for a replica that exits first.
/// Returns the seconds it took.
pub fn wait_ready(
    rt: &tokio::runtime::Runtime,
    urls: &[String],
    readiness: &Readiness,
    mut launched: Option<&mut Launched>,
    interrupted: &AtomicBool,
) -> Result<f64, NotReady> {
    let started = Instant::now();
    let timeout = Duration::from_secs_f64(readiness.timeout_s);
    let endpoints: Vec<Endpoint> = urls
        .iter()
        .enumerate()
        .filter_map(|(i, u)| Endpoint::parse(u32::try_from(i).unwrap_or(0), u).ok())
        .collect();
    let mut ready = vec![false; endpoints.len()];
    let mut last = "no answer yet".to_owned();
    loop {
        if interrupted.load(Ordering::SeqCst) {
            return Err(NotReady::Interrupted);
        }
        if let Some(l) = launched.as_deref_mut()
            && let Some((replica, _, status)) = l.exited().into_iter().next()
        {
            return Err(NotReady::Exited { replica, status });
        }
        for (ep, done) in endpoints.iter().zip(ready.iter_mut()) {
            if *done {
                continue;
            }
            let left = timeout.saturating_sub(started.elapsed()).max(POLL);
            match rt.block_on(http::get(
                ep,
                &readiness.path,
                None,
                left.min(http::SIDE_TIMEOUT),
            )) {
                Ok((200, _)) => *done = true,
                Ok((status, _)) => last = format!("{}{} answered {status}", ep.url, readiness.path),
                Err(e) => last = e.to_string(),
            }
        }
        if ready.iter().all(|r| *r) {
            return Ok(started.elapsed().as_secs_f64());
        }
        if started.elapsed() >= timeout {
            return Err(NotReady::Timeout {
                after_s: started.elapsed().as_secs_f64(),
                last,
            });
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_replaced_per_replica() {
        let argv: Vec<String> = [
            "vllm",
            "serve",
            "--port",
            "{port}",
            "--log=r{replica}.txt",
            "--seed=a-{repeat}-{replica}",
        ]
        .map(str::to_owned)
        .to_vec();
        assert_eq!(
            replica_argv(&argv, 8101, 1, 2),
            [
                "vllm",
                "serve",
                "--port",
                "8101",
                "--log=r1.txt",
                "--seed=a-2-1"
            ]
        );
    }

    #[test]
    fn a_launched_process_is_stopped_with_sigkill_after_its_grace_period() {
        let dir = tempfile::tempdir().unwrap();
        // A shell that ignores SIGTERM: the grace period passes and SIGKILL ends it.
        let launch = Launch {
            argv: [
                "sh",
                "-c",
                "trap '' TERM; echo started; while :; do sleep 0.05; done",
            ]
            .map(str::to_owned)
            .to_vec(),
            env: Default::default(),
            cwd: None,
        };
        let mut launched =
            super::launch(&launch, 1, &[1], dir.path(), dir.path(), "test", &[]).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert!(launched.exited().is_empty());
        let pid = launched.replicas[0].pid;
        assert_eq!(launched.replicas[0].start_ticks, start_ticks(pid));
        assert!(start_ticks(pid).is_some());
        let stopped = launched.stop(&StopMethod {
            signal: "SIGTERM".to_owned(),
            grace_s: 0.3,
        });
        assert_eq!(stopped.len(), 1);
        assert!(stopped[0].killed, "{stopped:?}");
        assert_eq!(stopped[0].status, "killed by SIGKILL");
        let log = std::fs::read_to_string(dir.path().join("server.replica0.log")).unwrap();
        assert!(log.contains("started"), "{log}");
    }
}
