//! One monotonic clock for every timestamp anvil writes.
//!
//! Capture, the simulator's `--truth` file and the artifact all use raw `CLOCK_MONOTONIC`
//! nanoseconds, so a client's receive time and the simulator's write time of the same SSE
//! event can be joined and subtracted directly. Artifacts store times as offsets from the
//! run's origin (`run.json` records the origin's absolute `CLOCK_MONOTONIC` value and its
//! UTC wall-clock anchor). UTC instants are written as RFC 3339 with nanoseconds
//! ([`format_utc_ns`], [`parse_utc`]).

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

/// RFC 3339 UTC with nine fractional digits, e.g. `2026-11-29T22:36:00.123456789Z`.
pub fn format_utc_ns(utc_unix_ns: i128) -> String {
    let fmt = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:9]Z"
    );
    time::OffsetDateTime::from_unix_timestamp_nanos(utc_unix_ns)
        .ok()
        .and_then(|t| t.format(&fmt).ok())
        .unwrap_or_else(|| "1970-01-01T00:00:00.000000000Z".to_owned())
}

/// UTC now, formatted by [`format_utc_ns`].
pub fn utc_now() -> String {
    format_utc_ns(time::OffsetDateTime::now_utc().unix_timestamp_nanos())
}

/// Parse an RFC 3339 time to UTC nanoseconds since the epoch.
pub fn parse_utc(s: &str) -> Option<i128> {
    time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .ok()
        .map(|t| t.unix_timestamp_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_clock_agrees_with_instant() {
        // a <= i <= (i + d) <= b: the Instant interval lies inside the monotonic one.
        let a = monotonic_ns();
        let i = std::time::Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let d = i.elapsed().as_nanos() as i64;
        let b = monotonic_ns();
        assert!(
            b - a >= d,
            "monotonic_ns advanced {} ns, Instant {} ns",
            b - a,
            d
        );
        assert!(b - a < d + 2_000_000);
    }
}
