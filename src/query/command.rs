//! The `anvil sql`, `anvil summary` and `anvil verify` commands: open the artifacts, run the statements (from
//! the command line, a file, standard input or an interactive prompt) or read the summary,
//! and write the results.

use std::io::{self, BufWriter, IsTerminal, Read, Write};
use std::path::PathBuf;

use anyhow::Context;

use crate::cli::{SqlArgs, SummaryArgs, VerifyArgs};
use crate::exit;
use crate::outfile::OutputFile;

use super::summary::{SUMMARY_SQL, Summary, render_table};
use super::{Access, AnvilSession, Format, QueryError, write_result};

/// A runtime for the DataFusion work of one command.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(crate::cli::STACK_BYTES)
        .build()
        .context("starting the async runtime")
}

/// Open the artifacts beneath `data`, saying on standard error when there are none.
pub(crate) async fn open_session(
    command: &str,
    data: &[PathBuf],
) -> Result<AnvilSession, QueryError> {
    let session = AnvilSession::open(data).await?;
    say_if_empty(command, data, &session);
    Ok(session)
}

/// [`open_session`] with the per-request views computed once and kept in memory, for the
/// commands that run many queries over them.
pub(crate) async fn open_session_materialized(
    command: &str,
    data: &[PathBuf],
) -> Result<AnvilSession, QueryError> {
    let session = AnvilSession::open_materialized(data).await?;
    say_if_empty(command, data, &session);
    Ok(session)
}

fn say_if_empty(command: &str, data: &[PathBuf], session: &AnvilSession) {
    if session.artifacts().is_empty() {
        let dirs: Vec<String> = data.iter().map(|d| d.display().to_string()).collect();
        eprintln!(
            "anvil {command}: no artifact (a folder holding run.json) under {}; the tables are empty",
            dirs.join(", ")
        );
    }
}

/// Where results go: a file (`--out`, written whole by [`crate::outfile`]) or standard
/// output. [`Sink::finish`] flushes and, for a file, puts it in place.
enum Sink {
    File(BufWriter<OutputFile>),
    Stdout(BufWriter<io::Stdout>),
}

impl Sink {
    fn finish(self) -> anyhow::Result<()> {
        match self {
            Sink::File(file) => {
                let file = file.into_inner().map_err(|e| e.into_error())?;
                let path = file.path().display().to_string();
                file.commit().with_context(|| format!("--out {path}"))
            }
            Sink::Stdout(mut out) => Ok(out.flush()?),
        }
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::File(f) => f.write(buf),
            Sink::Stdout(o) => crate::cli::noting_closed_stdout(o.write(buf)),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::File(f) => f.flush(),
            Sink::Stdout(o) => crate::cli::noting_closed_stdout(o.flush()),
        }
    }
}

fn sink(out: Option<&PathBuf>) -> anyhow::Result<Sink> {
    Ok(match out {
        Some(path) => Sink::File(BufWriter::new(OutputFile::create(path).context("--out")?)),
        None => Sink::Stdout(BufWriter::new(io::stdout())),
    })
}

fn write_all(
    out: &mut dyn Write,
    format: Format,
    results: &[super::StatementResult],
) -> Result<(), QueryError> {
    for (i, result) in results.iter().enumerate() {
        if i > 0 && format == Format::Table {
            writeln!(out).map_err(|source| QueryError::Output {
                context: "writing the result".to_owned(),
                source,
            })?;
        }
        write_result(out, format, result)?;
    }
    Ok(())
}

/// `anvil sql`.
pub fn run_sql(args: &SqlArgs) -> anyhow::Result<u8> {
    let rt = runtime()?;
    rt.block_on(async {
        let session = open_session("sql", &args.data.data).await?;
        let format = Format::from(args.format);
        let access = if args.allow_write {
            Access::ReadWrite
        } else {
            Access::ReadOnly
        };
        let mut out = sink(args.out.as_ref())?;
        if args.list {
            let listing = session.list().await?;
            write_result(&mut out, format, &listing)?;
            out.finish().context("writing the result")?;
            return Ok(exit::OK);
        }
        let sql = match (&args.query, &args.file) {
            (Some(query), _) => query.clone(),
            (None, Some(file)) => std::fs::read_to_string(file)
                .with_context(|| format!("-f {}: cannot read", file.display()))?,
            (None, None) if io::stdin().is_terminal() => {
                drop(out);
                return interactive(&session, format, access, args.out.as_ref()).await;
            }
            (None, None) => {
                let mut sql = String::new();
                io::stdin()
                    .read_to_string(&mut sql)
                    .context("reading SQL from standard input")?;
                sql
            }
        };
        let results = session.run_sql(&sql, access).await?;
        write_all(&mut out, format, &results)?;
        out.finish().context("writing the result")?;
        Ok(exit::OK)
    })
}

/// History file of the interactive prompt.
fn history_path() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".anvil_sql_history"))
}

/// The interactive prompt: statements end with `;`; `\l` lists tables and views, `\q` (or
/// Ctrl-D) quits. Errors are printed and the prompt goes on.
async fn interactive(
    session: &AnvilSession,
    format: Format,
    access: Access,
    out_path: Option<&PathBuf>,
) -> anyhow::Result<u8> {
    use rustyline::error::ReadlineError;

    let mut editor = rustyline::DefaultEditor::new().context("starting the prompt")?;
    let history = history_path();
    if let Some(path) = &history {
        // A missing history file is normal on first use.
        let _ = editor.load_history(path);
    }
    eprintln!(
        "anvil sql: {} artifact(s). End statements with `;`. \\l lists tables and views, \\q quits.",
        session.artifacts().len()
    );
    let mut buffer = String::new();
    loop {
        let prompt = if buffer.is_empty() {
            "anvil> "
        } else {
            "   ..> "
        };
        let line = match editor.readline(prompt) {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => {
                buffer.clear();
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e).context("reading the prompt"),
        };
        let trimmed = line.trim();
        if buffer.is_empty() && matches!(trimmed, "\\q" | "quit" | "exit") {
            break;
        }
        if buffer.is_empty() && matches!(trimmed, "\\l" | "\\d") {
            let _ = editor.add_history_entry(trimmed);
            match session.list().await {
                Ok(listing) => {
                    let mut out = sink(out_path)?;
                    write_result(&mut out, format, &listing)?;
                    out.finish().context("writing the result")?;
                }
                Err(e) => eprintln!("{e}"),
            }
            continue;
        }
        if !buffer.is_empty() {
            buffer.push('\n');
        }
        buffer.push_str(&line);
        if !trimmed.ends_with(';') {
            continue;
        }
        let sql = std::mem::take(&mut buffer);
        let _ = editor.add_history_entry(sql.as_str());
        match session.run_sql(&sql, access).await {
            Ok(results) => {
                let mut out = sink(out_path)?;
                write_all(&mut out, format, &results)?;
                out.finish().context("writing the result")?;
            }
            Err(e) => eprintln!("{e}"),
        }
    }
    if let Some(path) = &history {
        // Losing the history is not worth failing the session over.
        let _ = editor.save_history(path);
    }
    Ok(exit::OK)
}

/// `anvil summary`: the statistics of every artifact from `cell_stats`; a text table per
/// artifact, or the flat rows of [`SUMMARY_SQL`] as CSV or JSON.
pub fn run_summary(args: &SummaryArgs) -> anyhow::Result<u8> {
    let rt = runtime()?;
    rt.block_on(async {
        let session = open_session("summary", &args.data.data).await?;
        let mut out = sink(None)?;
        match Format::from(args.format) {
            Format::Table => {
                let summary = Summary::read(&session).await?;
                out.write_all(super::output::printable(&render_table(&summary)).as_bytes())
                    .context("writing the summary")?;
            }
            format => {
                let rows = session.query(SUMMARY_SQL).await?;
                write_result(&mut out, format, &rows)?;
            }
        }
        out.finish().context("writing the summary")?;
        Ok(exit::OK)
    })
}

/// `anvil verify`: recompute with polars, compare with the SQL, print the largest relative
/// difference per metric; exit 1 when one exceeds [`crate::verify::TOLERANCE`].
pub fn run_verify(args: &VerifyArgs) -> anyhow::Result<u8> {
    use crate::verify;

    let rt = runtime()?;
    rt.block_on(async {
        let session = open_session("verify", &args.data.data).await?;
        let mut recomputed = Vec::with_capacity(session.artifacts().len());
        for artifact in session.artifacts() {
            // polars reads the files itself; a panic there (a damaged table that passed the
            // footer checks) is an error naming the artifact, not an abort.
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                verify::recompute(artifact)
            }))
            .map_err(|_| {
                anyhow::anyhow!(
                    "{}: polars could not read the tables (it stopped on them); the artifact is \
                     damaged: re-record the run",
                    artifact.dir.display()
                )
            })?
            .with_context(|| format!("{}: recomputing with polars", artifact.dir.display()))?;
            recomputed.push(r);
        }
        let differences = verify::compare(&session, &recomputed).await?;
        let mut out = sink(None)?;
        for d in &differences {
            writeln!(out, "{d}").context("writing the result")?;
        }
        let failing = differences.iter().filter(|d| !d.within_tolerance()).count();
        if failing == 0 {
            writeln!(
                out,
                "verify: {} artifact(s): SQL and polars agree within {:e} relative",
                recomputed.len(),
                verify::TOLERANCE
            )
            .context("writing the result")?;
            out.finish().context("writing the result")?;
            Ok(exit::OK)
        } else {
            out.finish().context("writing the result")?;
            eprintln!(
                "anvil verify: {failing} figure famil{} differ by more than {:e} relative",
                if failing == 1 { "y" } else { "ies" },
                verify::TOLERANCE
            );
            Ok(exit::RULE_FAILED)
        }
    })
}
