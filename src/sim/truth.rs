//! Ground truth: what the simulator wrote and when, and its own lag.
//!
//! The response body sends one [`Record`] per SSE event as hyper takes it for the socket
//! write (and the handler one per request body read) through a channel to a background
//! thread, which keeps the lag histogram (actual write − scheduled deadline) and, with
//! `--truth FILE`, writes buffered CSV:
//!
//! `request_id,replica,seq,tokens,kind,t_deadline_ns,t_write_ns`
//!
//! preceded, when the run's speed was drawn (`--run-seed`), by one comment line giving each
//! replica's speed factor (`# anvil-sim run speed factor 0.9731 (--run-seed "a-1-0", cv
//! 0.03)`).
//!
//! `seq` is the 0-based index of the SSE event within its response (every event counts:
//! role chunk, usage chunk, `[DONE]`, injected malformed lines); times are absolute
//! `CLOCK_MONOTONIC` nanoseconds. A `request_read` row has an empty `seq` and deadline,
//! `tokens` 0, and `t_write_ns` = when the request body was fully read. A response's first
//! events (role chunk, `response.created`) are due when the request reaches the engine,
//! parsed and planned, so their deadline minus the `request_read` time is the simulator's
//! own processing time; later deadlines follow the timing model (see `engine`).
//!
//! The prefix cache (`cache`) writes rows of its own, with an empty `seq` and deadline and
//! `t_write_ns` the time of the event: `cache_hit` once per generation request, `tokens`
//! the prompt tokens served from the cache (0 for a miss); `cache_evict` when that request's
//! new blocks evicted others, `tokens` the tokens evicted; `cache_reset` when a reset
//! endpoint emptied the cache, `tokens` the tokens dropped and `request_id` the reset
//! request's.
//!
//! The engine writes a `preempt` row when the full KV pool preempted a running request:
//! `tokens` the KV it held (prompt + generated so far, prefilled again on readmission) and
//! `t_write_ns` the deadline of the decode step that found the pool full.
//!
//! The file is put in place when the simulator starts and grows while it runs: the thread
//! flushes what it buffered at least every [`FLUSH_EVERY`] (the first row after a quiet spell
//! at once), and [`Truth::finish`] (SIGINT, SIGTERM) flushes the rest and syncs it. A SIGKILL
//! can flush nothing, so the file then lacks at most the last second's rows.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;

/// CSV header of the truth file.
pub const HEADER: &str = "request_id,replica,seq,tokens,kind,t_deadline_ns,t_write_ns";

/// The longest a written row stays in the truth thread's buffer: what a SIGKILL can lose.
/// One write(2) a second costs nothing beside the events it carries.
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// One truth row.
#[derive(Debug, Clone)]
pub struct Record {
    pub request_id: Arc<str>,
    pub replica: u16,
    /// `None` for `request_read`.
    pub seq: Option<u32>,
    pub tokens: u32,
    pub kind: &'static str,
    /// `None` for `request_read`.
    pub t_deadline_ns: Option<i64>,
    pub t_write_ns: i64,
}

impl Record {
    /// A row that is no SSE event (no seq, no deadline): `request_read` and the prefix
    /// cache's rows, written at `t_write_ns`.
    pub fn mark(
        request_id: Arc<str>,
        replica: usize,
        kind: &'static str,
        tokens: u32,
        t_write_ns: i64,
    ) -> Record {
        Record {
            request_id,
            replica: replica as u16,
            seq: None,
            tokens,
            kind,
            t_deadline_ns: None,
            t_write_ns,
        }
    }
}

enum Msg {
    Row(Record),
    Finish,
}

/// Lag histogram at 1 µs resolution up to 100 ms.
#[derive(Debug, Clone)]
pub struct LagHistogram {
    buckets: Vec<u64>,
    count: u64,
    max_ns: i64,
}

const BUCKETS: usize = 100_000;

impl Default for LagHistogram {
    fn default() -> Self {
        LagHistogram {
            buckets: vec![0; BUCKETS + 1],
            count: 0,
            max_ns: 0,
        }
    }
}

impl LagHistogram {
    pub fn record(&mut self, lag_ns: i64) {
        let us = (lag_ns.max(0) / 1000) as usize;
        self.buckets[us.min(BUCKETS)] += 1;
        self.count += 1;
        self.max_ns = self.max_ns.max(lag_ns);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Nearest-rank percentile in µs (upper edge of the bucket; `p` in (0, 1]).
    pub fn percentile_us(&self, p: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let rank = ((p * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return if i == BUCKETS {
                    self.max_us()
                } else {
                    (i + 1) as f64
                };
            }
        }
        self.max_us()
    }

    pub fn max_us(&self) -> f64 {
        self.max_ns as f64 / 1000.0
    }

    /// The one-line report printed at exit: write lag (actual write − deadline).
    pub fn report(&self) -> String {
        self.report_as("lag")
    }

    /// A one-line report under `label`.
    pub fn report_as(&self, label: &str) -> String {
        format!(
            "anvil-sim {label}: events {}, p50 {:.0} us, p99 {:.0} us, max {:.0} us",
            self.count,
            self.percentile_us(0.5),
            self.percentile_us(0.99),
            self.max_us()
        )
    }
}

/// Handle to the truth thread.
pub struct Truth {
    tx: Sender<Msg>,
    thread: Option<JoinHandle<anyhow::Result<LagHistogram>>>,
}

/// A cloneable sender for rows.
#[derive(Clone)]
pub struct TruthSink {
    tx: Sender<Msg>,
}

impl TruthSink {
    #[inline]
    pub fn send(&self, r: Record) {
        // The thread outlives every sender until `finish`; a send after it is dropped.
        let _ = self.tx.send(Msg::Row(r));
    }
}

impl Truth {
    /// Start the thread; with `path`, rows go to that CSV file, in place from now on (see
    /// the module doc), after `comment` as a `# ` line when there is one.
    pub fn start(path: Option<&Path>, comment: Option<String>) -> anyhow::Result<Self> {
        let out = match path {
            Some(p) => {
                let mut f = crate::outfile::OutputFile::create(p).context("--truth")?;
                if let Some(line) = comment {
                    writeln!(f, "# {line}").with_context(|| format!("writing {}", p.display()))?;
                }
                writeln!(f, "{HEADER}").with_context(|| format!("writing {}", p.display()))?;
                let f = f.place_now().context("--truth")?;
                Some((BufWriter::with_capacity(1 << 20, f), p.to_path_buf()))
            }
            None => None,
        };
        let (tx, rx) = channel();
        let thread = std::thread::Builder::new()
            .name("anvil-sim-truth".into())
            .spawn(move || {
                super::realtime::ordinary_priority();
                run(rx, out)
            })
            .context("spawning the truth thread")?;
        Ok(Truth {
            tx,
            thread: Some(thread),
        })
    }

    pub fn sink(&self) -> TruthSink {
        TruthSink {
            tx: self.tx.clone(),
        }
    }

    /// Flush everything received so far and return the lag histogram.
    pub fn finish(mut self) -> anyhow::Result<LagHistogram> {
        let _ = self.tx.send(Msg::Finish);
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| anyhow::anyhow!("truth thread panicked"))?,
            None => Ok(LagHistogram::default()),
        }
    }
}

fn run(
    rx: Receiver<Msg>,
    mut out: Option<(BufWriter<std::fs::File>, std::path::PathBuf)>,
) -> anyhow::Result<LagHistogram> {
    let mut hist = LagHistogram::default();
    let mut line = String::with_capacity(128);
    // Rows written since the last flush, and when that was.
    let mut unflushed = false;
    let mut flushed_at = Instant::now();
    loop {
        let msg = if unflushed {
            match rx.recv_timeout(FLUSH_EVERY.saturating_sub(flushed_at.elapsed())) {
                Ok(msg) => Some(msg),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            }
        } else {
            match rx.recv() {
                Ok(msg) => Some(msg),
                Err(_) => break,
            }
        };
        if let Some(msg) = msg {
            let r = match msg {
                Msg::Row(r) => r,
                Msg::Finish => break,
            };
            if let Some(d) = r.t_deadline_ns {
                hist.record(r.t_write_ns - d);
            }
            if let Some((w, p)) = out.as_mut() {
                use std::fmt::Write as _;
                line.clear();
                let _ = write!(line, "{},{},", csv_field(&r.request_id), r.replica);
                if let Some(s) = r.seq {
                    let _ = write!(line, "{s}");
                }
                let _ = write!(line, ",{},{},", r.tokens, r.kind);
                if let Some(d) = r.t_deadline_ns {
                    let _ = write!(line, "{d}");
                }
                let _ = writeln!(line, ",{}", r.t_write_ns);
                w.write_all(line.as_bytes())
                    .with_context(|| format!("writing {}", p.display()))?;
                unflushed = true;
            }
        }
        if unflushed
            && flushed_at.elapsed() >= FLUSH_EVERY
            && let Some((w, p)) = out.as_mut()
        {
            w.flush()
                .with_context(|| format!("writing {}", p.display()))?;
            unflushed = false;
            flushed_at = Instant::now();
        }
    }
    if let Some((w, p)) = out {
        w.into_inner()
            .map_err(|e| e.into_error())
            .and_then(|f| f.sync_all())
            .with_context(|| format!("flushing {}", p.display()))?;
    }
    Ok(hist)
}

/// Quote a CSV field when it needs it.
fn csv_field(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_percentiles_by_nearest_rank() {
        let mut h = LagHistogram::default();
        for us in 1..=100 {
            h.record(us * 1000 - 500);
        }
        assert_eq!(h.percentile_us(0.5), 50.0);
        assert_eq!(h.percentile_us(0.99), 99.0);
        assert_eq!(h.max_us(), 99.5);
        h.record(1_000_000_000);
        assert_eq!(h.percentile_us(1.0), 1_000_000.0);
    }

    #[test]
    fn writes_rows_and_quotes_ids() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.csv");
        let t = Truth::start(Some(&p), None).unwrap();
        let s = t.sink();
        s.send(Record {
            request_id: "a,b".into(),
            replica: 1,
            seq: None,
            tokens: 0,
            kind: "request_read",
            t_deadline_ns: None,
            t_write_ns: 5,
        });
        s.send(Record {
            request_id: "r".into(),
            replica: 0,
            seq: Some(0),
            tokens: 2,
            kind: "content",
            t_deadline_ns: Some(10),
            t_write_ns: 2010,
        });
        let h = t.finish().unwrap();
        assert_eq!(h.count(), 1);
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(
            text,
            format!("{HEADER}\n\"a,b\",1,,0,request_read,,5\nr,0,0,2,content,10,2010\n")
        );
    }

    /// What a SIGKILL would find: the file in place from the start, each row in it within
    /// [`FLUSH_EVERY`] of being sent, without `finish`.
    #[test]
    fn rows_reach_the_file_within_a_second_without_finish() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.csv");
        let t = Truth::start(Some(&p), None).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), format!("{HEADER}\n"));
        let row = |id: &str| Record {
            request_id: id.into(),
            replica: 0,
            seq: Some(0),
            tokens: 1,
            kind: "content",
            t_deadline_ns: Some(1),
            t_write_ns: 2,
        };
        for id in ["a", "b"] {
            t.sink().send(row(id));
            std::thread::sleep(FLUSH_EVERY + Duration::from_millis(300));
            let text = std::fs::read_to_string(&p).unwrap();
            assert!(
                text.ends_with(&format!("{id},0,0,1,content,1,2\n")),
                "{text}"
            );
        }
        t.finish().unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap().lines().count(), 3);
    }
}
