//! One monotonic clock for every timestamp anvil writes.
//!
//! Capture, the simulator's `--truth` file and the artifact all use raw `CLOCK_MONOTONIC`
//! nanoseconds, so a client's receive time and the simulator's write time of the same SSE
//! event can be joined and subtracted directly. Artifacts store times as offsets from the
//! run's origin (`run.json` records the origin's absolute `CLOCK_MONOTONIC` value and its
//! UTC wall-clock anchor).

/// Current `CLOCK_MONOTONIC` time in nanoseconds (the clock `std::time::Instant` uses on Linux).
#[inline]
pub fn monotonic_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC is always available on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// A run's time origin: the monotonic instant that is t = 0 in every table, and the UTC
/// wall-clock time read at (nearly) the same moment.
#[derive(Debug, Clone, Copy)]
pub struct Origin {
    /// `CLOCK_MONOTONIC` nanoseconds at t = 0.
    pub monotonic_ns: i64,
    /// UTC nanoseconds since the Unix epoch at t = 0.
    pub utc_unix_ns: i128,
}

impl Origin {
    /// Take the origin now.
    pub fn now() -> Self {
        let monotonic_ns = monotonic_ns();
        let utc_unix_ns = time::OffsetDateTime::now_utc().unix_timestamp_nanos();
        Self {
            monotonic_ns,
            utc_unix_ns,
        }
    }

    /// Nanoseconds since this origin, for a `CLOCK_MONOTONIC` reading.
    #[inline]
    pub fn offset(&self, monotonic_ns: i64) -> i64 {
        monotonic_ns - self.monotonic_ns
    }

    /// Nanoseconds since this origin, now.
    #[inline]
    pub fn elapsed_ns(&self) -> i64 {
        self.offset(monotonic_ns())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_clock_agrees_with_instant() {
        let a = monotonic_ns();
        let i = std::time::Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let b = monotonic_ns();
        let d = i.elapsed().as_nanos() as i64;
        assert!(
            b - a >= d,
            "monotonic_ns advanced {} ns, Instant {} ns",
            b - a,
            d
        );
        assert!(b - a < d + 2_000_000);
    }
}
