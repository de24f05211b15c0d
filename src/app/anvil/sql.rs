//! `anvil sql`: open the artifacts, run the statements (from the command line, a file,
//! standard input or an interactive prompt) and write the results.

use std::io::{self, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::args::SqlArgs;
use super::{open_session, resolve_slos, runtime};
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
    let data = super::resolve_data(&args.data.data)?;
    let slos = resolve_slos("sql", &args.slo, &data)?;
    let rt = runtime()?;
    rt.block_on(async {
        let session = if args.workers.is_empty() {
            open_session("sql", &data, &slos).await?
        } else {
            open_on_workers(args, &data, &slos).await?
        };
        crate::gather::decisions::register(&session, &super::capacity_beside("sql", &data))?;
        let format = Format::from(args.format);
        let access = if args.allow_write {
            Access::ReadWrite
        } else {
            Access::ReadOnly
        };
        let mut out = Sink::open(args.out.as_deref())?;
        if args.list {
            register_check_tables(&session, &data, args, false).await?;
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
                register_check_tables(&session, &data, args, false).await?;
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
        say_if_no_slo(&session, &sql);
        if names_a_check_table(&sql) {
            register_check_tables(&session, &data, args, true).await?;
        }
        let results = session.run_sql(&sql, access).await?;
        write_all(&mut out, format, &results)?;
        out.finish().context("writing the result")?;
        Ok(Exit::Ok)
    })
}

/// Whether `sql` names a table drawn from the rules' check (which is only computed then).
fn names_a_check_table(sql: &str) -> bool {
    let lower = sql.to_ascii_lowercase();
    lower
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|w| matches!(w, "comparisons" | "claims" | "rule_verdicts" | "controls"))
}

/// Register `comparisons`, `claims`, `rule_verdicts` and `controls`: the rules' check of the session's
/// artifacts against the manifest and plan the campaign file beside the data names (or
/// `--campaign`), as `anvil check` runs it. When `required` (a statement names one) a
/// missing document is bad input naming what to give; otherwise the tables are left out.
async fn register_check_tables(
    session: &AnvilSession,
    data: &[PathBuf],
    args: &SqlArgs,
    required: bool,
) -> anyhow::Result<()> {
    let docs = match super::load_documents("sql", None, None, data, args.slo.campaign.as_deref()) {
        Ok(docs) => docs,
        Err(_) if !required => return Ok(()),
        Err(e) => {
            return Err(e.context(
                "comparisons, claims, rule_verdicts and controls are the rules' check of the artifacts: it needs the campaign's manifest and plan (a campaign.json beside the data, or --campaign FILE)",
            ));
        }
    };
    let selection = match crate::rules::HeadlineSelection::from_manifest(&docs.manifest) {
        Ok(s) => s,
        Err(_) if !required => return Ok(()),
        Err(e) => {
            return Err(crate::app::AppError::wrap(
                Exit::BadInput,
                anyhow::anyhow!("{}: {e}", docs.names[0]),
            ));
        }
    };
    let artifacts = crate::gather::rules_input::read_artifacts(session).await?;
    let report = super::check::check_data(
        &docs.plan,
        &selection,
        &artifacts,
        data,
        &docs.manifest.controls,
    )?;
    crate::gather::decisions::register_check(session, &report)?;
    Ok(())
}

/// The session with its SQL run by the `--workers` (checked reachable first).
#[cfg(feature = "distributed")]
async fn open_on_workers(
    args: &SqlArgs,
    data: &[std::path::PathBuf],
    slos: &crate::slo::Slos,
) -> anyhow::Result<AnvilSession> {
    use crate::query::distributed::{DEFAULT_BYTES_PER_TASK, Workers};
    let bad = |e: String| crate::app::AppError::wrap(Exit::BadInput, anyhow::anyhow!(e));
    let workers = Workers::parse(
        &args.workers,
        args.bytes_per_task.unwrap_or(DEFAULT_BYTES_PER_TASK),
    )
    .map_err(bad)?;
    workers.check_reachable().await.map_err(bad)?;
    let session = AnvilSession::open_on_workers(data, slos, &workers).await?;
    super::say_if_empty("sql", data, &session)?;
    Ok(session)
}

/// Without the distributed engine built in, `--workers` is refused with how to build it.
#[cfg(not(feature = "distributed"))]
async fn open_on_workers(
    _: &SqlArgs,
    _: &[std::path::PathBuf],
    _: &crate::slo::Slos,
) -> anyhow::Result<AnvilSession> {
    Err(crate::app::AppError::wrap(
        Exit::BadInput,
        anyhow::anyhow!("--workers {}", super::worker::NOT_BUILT),
    ))
}

/// "no SLO given" on standard error when `sql` reads a view that needs SLOs and none is in
/// force, so an empty result is not taken for zero attainment.
fn say_if_no_slo(session: &crate::query::AnvilSession, sql: &str) {
    let lower = sql.to_ascii_lowercase();
    let needs = ["slo_attainment", "goodput"]
        .iter()
        .any(|v| lower.contains(v));
    if needs && session.slos().is_empty() {
        eprintln!(
            "anvil sql: no SLO given: slo_attainment and goodput are empty (give --slo 'ttft_ms<=2000', or a campaign file with an `slo` section)"
        );
    }
}

/// History file of the interactive prompt.
fn history_path() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".anvil_sql_history"))
}

/// What one line typed at the interactive prompt asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Action {
    /// A statement is complete: run it.
    Run(String),
    /// `\l` or `\d`: list the tables and views with their columns.
    List,
    /// `\d NAME`: describe one table or view.
    Describe(String),
    /// `\?`: list the meta-commands.
    Help,
    /// `\q` (or `quit` / `exit` at the start of a statement).
    Quit,
    /// `\r`: the unfinished statement was cleared.
    Reset,
    /// A meta-command anvil does not know: refused, the statement so far kept.
    Unknown(String),
    /// The statement goes on.
    Continue,
}

/// The meta-commands, as `\?` prints them.
const META_HELP: &str = "\
  \\l, \\d      list the tables and views with their columns, units and meanings
  \\d NAME      describe one table or view (as DESCRIBE NAME)
  \\r           clear the statement typed so far
  \\?           this list
  \\q           quit (also Ctrl-D, or quit / exit at the start of a statement)
Statements end with `;`; a meta-command also works in the middle of one.";

/// The prompt's state: the statement typed so far. A line starting with `\` is a
/// meta-command wherever it comes, never part of a statement.
#[derive(Debug, Default)]
struct Prompt {
    buffer: String,
}

impl Prompt {
    fn line(&mut self, line: &str) -> Action {
        let trimmed = line.trim();
        if let Some(command) = trimmed.strip_prefix('\\') {
            let mut words = command.split_whitespace();
            let (word, arg, extra) = (words.next(), words.next(), words.next());
            return match (word, arg, extra) {
                (Some("q"), None, None) => Action::Quit,
                (Some("?"), None, None) => Action::Help,
                (Some("l" | "d"), None, None) => Action::List,
                (Some("d"), Some(name), None) => Action::Describe(name.to_owned()),
                (Some("r"), None, None) => {
                    self.buffer.clear();
                    Action::Reset
                }
                _ => Action::Unknown(trimmed.to_owned()),
            };
        }
        if self.buffer.is_empty() && matches!(trimmed, "quit" | "exit") {
            return Action::Quit;
        }
        if trimmed.is_empty() && self.buffer.is_empty() {
            return Action::Continue;
        }
        if !self.buffer.is_empty() {
            self.buffer.push('\n');
        }
        self.buffer.push_str(line);
        if trimmed.ends_with(';') {
            Action::Run(std::mem::take(&mut self.buffer))
        } else {
            Action::Continue
        }
    }

    fn in_statement(&self) -> bool {
        !self.buffer.is_empty()
    }
}

/// Write a result (or say what went wrong) at the prompt.
fn show(
    result: Result<Vec<StatementResult>, QueryError>,
    format: Format,
    out_path: Option<&Path>,
) -> anyhow::Result<()> {
    match result {
        Ok(results) => {
            let mut out = Sink::open(out_path)?;
            write_all(&mut out, format, &results)?;
            out.finish().context("writing the result")?;
        }
        Err(e) => eprintln!("{e}"),
    }
    Ok(())
}

/// The interactive prompt: statements end with `;`; the meta-commands of [`META_HELP`]
/// work anywhere. Errors are printed and the prompt goes on.
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
        "anvil sql: {} artifact(s). End statements with `;`. \\? lists the meta-commands, \\q quits.",
        session.artifacts().len()
    );
    let mut prompt = Prompt::default();
    loop {
        let shown = if prompt.in_statement() {
            "   ..> "
        } else {
            "anvil> "
        };
        let line = match editor.readline(shown) {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => {
                prompt = Prompt::default();
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e).context("reading the prompt"),
        };
        match prompt.line(&line) {
            Action::Continue => {}
            Action::Quit => break,
            Action::Help => eprintln!("{META_HELP}"),
            Action::Reset => eprintln!("(statement cleared)"),
            Action::Unknown(command) => eprintln!(
                "unknown meta-command {command}: not run, and not added to the statement (\\? lists them)"
            ),
            Action::List => {
                let _ = editor.add_history_entry(line.trim());
                show(session.list().await.map(|r| vec![r]), format, out_path)?;
            }
            Action::Describe(name) => {
                let _ = editor.add_history_entry(line.trim());
                show(
                    session.describe(&name).await.map(|r| vec![r]),
                    format,
                    out_path,
                )?;
            }
            Action::Run(sql) => {
                let _ = editor.add_history_entry(sql.as_str());
                show(session.run_sql(&sql, access).await, format, out_path)?;
            }
        }
    }
    if let Some(path) = &history {
        // Losing the history is not worth failing the session over.
        let _ = editor.save_history(path);
    }
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_commands_work_in_the_middle_of_a_statement_and_unknown_ones_are_refused() {
        let mut p = Prompt::default();
        assert_eq!(p.line("SELECT arm"), Action::Continue);
        assert_eq!(
            p.line("\\d cell_stats"),
            Action::Describe("cell_stats".into())
        );
        assert_eq!(p.line("\\?"), Action::Help);
        assert_eq!(p.line("\\x"), Action::Unknown("\\x".into()));
        // The statement was kept whole: no meta-command went into it.
        assert_eq!(
            p.line("FROM runs;"),
            Action::Run("SELECT arm\nFROM runs;".into())
        );
        assert_eq!(p.line("\\l"), Action::List);
        assert_eq!(p.line("\\d"), Action::List);
        assert_eq!(p.line("SELECT 1"), Action::Continue);
        assert_eq!(p.line("\\r"), Action::Reset);
        assert!(!p.in_statement());
        // quit is a word only at the start of a statement; \q anywhere.
        assert_eq!(p.line("SELECT"), Action::Continue);
        assert_eq!(p.line("exit"), Action::Continue);
        assert_eq!(p.line("\\q"), Action::Quit);
        assert_eq!(Prompt::default().line("quit"), Action::Quit);
        assert_eq!(
            Prompt::default().line("\\d a b"),
            Action::Unknown("\\d a b".into())
        );
    }
}
