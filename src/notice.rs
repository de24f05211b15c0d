//! What a long-running library call tells its user while it runs (a warning about a
//! replica's metrics, an interruption, a calibration that fell back to probes): one line of
//! text at a time, handed to whoever called. The edge prints them on standard error
//! ([`crate::app::stderr_notices`]); a test or an embedding program may keep them.
//!
//! Libraries never print: what they return is the result, what they notice goes here.

use std::sync::{Arc, Mutex};

/// Where notices go. Cheap to clone; every clone reaches the same place.
#[derive(Clone)]
pub struct Notices(Arc<dyn Fn(&str) + Send + Sync>);

impl Notices {
    /// Notices handed to `f`, one line each (no trailing newline).
    pub fn new(f: impl Fn(&str) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// Notices dropped.
    pub fn silent() -> Self {
        Self::new(|_| {})
    }

    /// Notices kept in memory, for reading after the call: the sink and what it received.
    pub fn collected() -> (Self, Arc<Mutex<Vec<String>>>) {
        let kept = Arc::new(Mutex::new(Vec::new()));
        let sink = kept.clone();
        let notices = Self::new(move |line| {
            if let Ok(mut lines) = sink.lock() {
                lines.push(line.to_owned());
            }
        });
        (notices, kept)
    }

    /// Say `line`.
    pub fn say(&self, line: &str) {
        (self.0)(line);
    }
}

impl std::fmt::Debug for Notices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Notices")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collected_notices_keep_every_line_in_order() {
        let (notices, kept) = Notices::collected();
        let clone = notices.clone();
        notices.say("first");
        clone.say("second");
        assert_eq!(*kept.lock().unwrap(), ["first", "second"]);
    }
}
