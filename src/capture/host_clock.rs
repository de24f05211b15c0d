//! The state of this host's clock, recorded by each shard of a multi-host run: the kernel's
//! view (`adjtimex(2)`, read-only: offset, maximum and estimated error, whether it is
//! synchronised) and, when chrony runs here, the source it follows.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::artifact::shard::HostClock;

/// The kernel's clock state now, and chrony's source when chronyc answers within a second.
pub fn read() -> HostClock {
    let mut clock = kernel();
    clock.source = chrony_source();
    clock
}

/// `adjtimex(2)` with no modes set only reads the state.
fn kernel() -> HostClock {
    // SAFETY: a zeroed `timex` with `modes == 0` is a valid read-only request; the kernel
    // fills the struct we own.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: `tx` is a valid, exclusively borrowed `timex`.
    let state = unsafe { libc::adjtimex(&mut tx) };
    if state < 0 {
        return HostClock {
            synchronized: false,
            offset_ns: None,
            max_error_ns: None,
            est_error_ns: None,
            source: None,
        };
    }
    // The offset is in ns when STA_NANO is set, else µs; the errors are always µs.
    let nano = tx.status & libc::STA_NANO != 0;
    let offset_ns = if nano {
        tx.offset
    } else {
        tx.offset.saturating_mul(1000)
    };
    HostClock {
        synchronized: tx.status & libc::STA_UNSYNC == 0 && state != libc::TIME_ERROR,
        offset_ns: Some(offset_ns),
        max_error_ns: Some(tx.maxerror.saturating_mul(1000)),
        est_error_ns: Some(tx.esterror.saturating_mul(1000)),
        source: None,
    }
}

/// chrony's reference (`chronyc -n -c tracking`: reference id, then name or address), if
/// chronyc is installed and its daemon answers within a second.
fn chrony_source() -> Option<String> {
    let mut child = Command::new("chronyc")
        .args(["-n", "-c", "tracking"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(Some(_)) | Err(_) => return None,
            Ok(None) if started.elapsed() > Duration::from_secs(1) => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut text).ok()?;
    let mut fields = text.trim().split(',');
    let id = fields.next()?;
    let name = fields.next().unwrap_or_default();
    Some(format!("chrony: {name} ({id})"))
}

/// This host's name.
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for its length; gethostname NUL-terminates within it or
    // truncates.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    if ok && end > 0 {
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        "unknown".to_owned()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_kernel_answers() {
        let c = super::kernel();
        // Every Linux kernel reports a maximum error (16 s when it was never synchronised).
        assert!(c.max_error_ns.is_some_and(|e| e >= 0), "{c:?}");
        assert!(!super::host_name().is_empty());
    }
}
