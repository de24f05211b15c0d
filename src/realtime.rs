//! Scheduling knobs for precise timing: 1 ns timer slack and SCHED_FIFO, best effort; and
//! the CPU a thread runs on ([`pin_to`]).
//!
//! `anvil-sim` calls them on the main thread before any other thread starts, so every
//! thread inherits them; the truth writer, which shares no lock with the timer thread,
//! drops back to ordinary scheduling with [`ordinary_priority`]; reply planners drop below
//! the HTTP workers with [`lower_fifo`]. `anvil-capture` puts only its hot-path threads
//! (the async runtime's workers, which read the sockets and stamp events) on
//! [`CAPTURE_PRIORITY`]; its writer thread (parsing, Parquet) stays ordinary.
//!
//! Priorities, highest first: simulator timer 60; simulator HTTP workers and the recorder's
//! hot path 50; simulator reply planners 10; everything else. Equal FIFO priorities do not
//! preempt each other (each runs until it blocks, which both do after every burst of socket
//! work), and nothing of ordinary priority (builds, other tenants) can starve either. Measured in BENCHMARKS.md
//! (recorder fidelity): at 256 streams the recorder at 40 (below the simulator's writes)
//! gave receive-lag p99 3.1 ms, at 55 (above them) a TTFT error mean of 1.1 ms as the
//! simulator's reads waited behind the recorder, at 50 receive-lag p99 0.23–0.46 ms and a
//! TTFT error mean of 0.22–0.83 ms.

/// FIFO priority of the server's threads.
pub const FIFO_PRIORITY: i32 = 50;
/// FIFO priority of the timer thread (above the HTTP workers).
pub const TIMER_PRIORITY: i32 = 60;
/// FIFO priority of `anvil-capture`'s hot-path threads (equal to the simulator's HTTP
/// workers).
pub const CAPTURE_PRIORITY: i32 = 50;
/// FIFO priority of the reply planners: below the HTTP workers, so planning never delays
/// a write, yet above ordinary tasks, so a planner holding a lock the timer thread needs
/// (the engine inbox, the metrics) cannot be starved by other processes.
pub const PLANNER_PRIORITY: i32 = 10;

/// Move the calling thread to `priority` if it runs SCHED_FIFO (planner threads inherit
/// the HTTP workers' policy).
pub fn lower_fifo(priority: i32) {
    if is_fifo() {
        let _ = fifo(priority);
    }
}

/// Set 1 ns timer slack for the calling thread (inherited by threads it creates).
pub fn tight_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long value; no pointers are involved.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// Try SCHED_FIFO at `priority` for the calling thread; Err with the OS error otherwise.
pub fn fifo(priority: i32) -> std::io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is a valid sched_param; pid 0 means the calling thread.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Put the calling thread back on ordinary (SCHED_OTHER) scheduling.
pub fn ordinary_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: as in `fifo`.
    unsafe {
        libc::sched_setscheduler(0, libc::SCHED_OTHER, &param);
    }
}

/// Put the calling thread on ordinary scheduling and let it run on any CPU: what a helper
/// process started from a pinned real-time thread calls between fork and exec (it would
/// otherwise inherit both, and take the hot path's CPU). Only system calls: safe in a
/// `pre_exec` hook.
pub fn ordinary_anywhere() -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: as in `fifo`; pid 0 means the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: an all-zero cpu_set_t is the empty set; every index is below CPU_SETSIZE.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for cpu in 0..libc::CPU_SETSIZE as usize {
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size given; the kernel keeps the CPUs the
    // process may use.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether the calling thread runs SCHED_FIFO.
pub fn is_fifo() -> bool {
    // SAFETY: pid 0 means the calling thread.
    unsafe { libc::sched_getscheduler(0) == libc::SCHED_FIFO }
}

/// The CPU the calling thread runs on now, if the system says.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu takes no arguments.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).ok()
}

/// The CPUs the calling thread may run on (its affinity mask), in order; empty if the system
/// does not say.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: an all-zero cpu_set_t is a valid (empty) set, filled in by the call.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a cpu_set_t of the size given; pid 0 means the calling thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE, within the set.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// Keep the calling thread on `cpu` alone; Err with the OS error otherwise.
pub fn pin_to(cpu: usize) -> std::io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    }
    // SAFETY: an all-zero cpu_set_t is the empty set; `cpu` is below CPU_SETSIZE.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size given; pid 0 means the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread pinned to a CPU it may use is then allowed that CPU alone, and runs there.
    #[test]
    fn a_pinned_thread_runs_on_its_cpu_alone() {
        let allowed = allowed_cpus();
        assert!(!allowed.is_empty(), "the affinity mask is readable");
        let cpu = *allowed.last().unwrap();
        let (after, ran_on) = std::thread::spawn(move || {
            pin_to(cpu).unwrap();
            (allowed_cpus(), current_cpu())
        })
        .join()
        .unwrap();
        assert_eq!(after, vec![cpu]);
        assert_eq!(ran_on, Some(cpu));
        assert!(pin_to(libc::CPU_SETSIZE as usize).is_err());
    }
}
