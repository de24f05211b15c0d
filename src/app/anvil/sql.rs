//! `anvil sql`: open the artifacts, run the statements (from the command line, a file,
//! standard input or an interactive prompt) and write the results.

use std::io::{self, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::args::SqlArgs;
use super::{open_session, runtime};
use crate::app::Exit;
use crate::app::output::Sink;
use crate::query::{Access, AnvilSession, Format, QueryError, StatementResult, write_result};

fn write_all(
    out: &mut dyn Write,
    format: Format,
    results: &[StatementResult],
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
pub fn run(args: &SqlArgs) -> anyhow::Result<Exit> {
    let rt = runtime()?;
    rt.block_on(async {
        let session = open_session("sql", &args.data.data).await?;
        let format = Format::from(args.format);
        let access = if args.allow_write {
            Access::ReadWrite
        } else {
            Access::ReadOnly
        };
        let mut out = Sink::open(args.out.as_deref())?;
        if args.list {
            let listing = session.list().await?;
            write_result(&mut out, format, &listing)?;
            out.finish().context("writing the result")?;
            return Ok(Exit::Ok);
        }
        let sql = match (&args.query, &args.file) {
            (Some(query), _) => query.clone(),
            (None, Some(file)) => std::fs::read_to_string(file)
                .with_context(|| format!("-f {}: cannot read", file.display()))?,
            (None, None) if io::stdin().is_terminal() => {
                drop(out);
                return interactive(&session, format, access, args.out.as_deref()).await;
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
        Ok(Exit::Ok)
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
    out_path: Option<&Path>,
) -> anyhow::Result<Exit> {
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
                    let mut out = Sink::open(out_path)?;
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
                let mut out = Sink::open(out_path)?;
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
    Ok(Exit::Ok)
}
