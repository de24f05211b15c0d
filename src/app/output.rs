//! Where a command's result goes: `--out FILE` (written whole by [`crate::outfile`]: a
//! temporary beside the target, renamed over it) or standard output, whose closing by the
//! reader is noted so that it counts as success ([`super::is_broken_pipe`]).

use std::io::{self, BufWriter, Write};
use std::path::Path;

use anyhow::Context;

use crate::outfile::OutputFile;

/// A result being written: a file (`--out`) or standard output. [`Sink::finish`] flushes and,
/// for a file, puts it in place.
pub enum Sink {
    File(BufWriter<OutputFile>),
    Stdout(BufWriter<io::Stdout>),
}

impl Sink {
    /// `out` when given (`--out`), else standard output.
    pub fn open(out: Option<&Path>) -> anyhow::Result<Self> {
        Ok(match out {
            Some(path) => Sink::File(BufWriter::new(OutputFile::create(path).context("--out")?)),
            None => Sink::Stdout(BufWriter::new(io::stdout())),
        })
    }

    /// Flush, and put a file in place.
    pub fn finish(self) -> anyhow::Result<()> {
        match self {
            Sink::File(file) => {
                let file = file.into_inner().map_err(|e| e.into_error())?;
                let path = file.path().display().to_string();
                file.commit().with_context(|| format!("--out {path}"))
            }
            Sink::Stdout(mut out) => Ok(super::noting_closed_stdout(out.flush())?),
        }
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::File(f) => f.write(buf),
            Sink::Stdout(o) => super::noting_closed_stdout(o.write(buf)),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::File(f) => f.flush(),
            Sink::Stdout(o) => super::noting_closed_stdout(o.flush()),
        }
    }
}

/// Write `text` to standard output whole; `what` names it in an error.
pub fn stdout(text: &str, what: &str) -> anyhow::Result<()> {
    let mut out = Sink::open(None)?;
    out.write_all(text.as_bytes())
        .with_context(|| format!("writing {what}"))?;
    out.finish().with_context(|| format!("writing {what}"))
}

/// Write `text` to `path` whole ([`crate::outfile`]), creating the folder.
pub fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    crate::outfile::write_file(path, text.as_bytes()).context("--out")
}
