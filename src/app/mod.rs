//! The edge: the only code that knows the command line (clap), standard output and error,
//! and process exit codes. Each binary is `parse → run → exit code`: a command returns an
//! [`Exit`] or an error, and [`main`] maps that to the process's code in one place, a closed
//! standard output being success.
//!
//! - [`anvil`]: `anvil validate | sql | summary | verify | compare | check | report | demo`;
//! - [`capture`]: `anvil-capture cells | run | recover | gpu-check` ([`gpu_check`]);
//! - [`sim`]: `anvil-sim`'s flags, turned into [`crate::sim::Config`].
//!
//! Below this layer nothing prints or exits: libraries return typed results and errors,
//! and say what happens during a long run through [`crate::notice::Notices`].
// The edge is where text meets the terminal.
#![allow(clippy::print_stdout, clippy::print_stderr)]

pub mod anvil;
pub mod capture;
pub mod gpu_check;
pub mod output;
pub mod sim;

use std::io;
use std::process::ExitCode;

use anyhow::Context;

/// How a command ended, as the process says it (documented in each `--help` and the README).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Everything held: valid input, rules passed, the run complete.
    Ok,
    /// A stop rule fired or the recorded evidence contradicts an advance rule or a plan claim
    /// (`anvil check`), recomputed figures disagree (`anvil verify`), or a demo cell could
    /// not be recorded.
    RuleFailed,
    /// Bad input: a malformed manifest, plan, artifact, flag or request.
    BadInput,
    /// A comparison the campaign's rules forbid was refused.
    Refused,
    /// Advance rules incomplete: evidence is missing.
    Incomplete,
    /// The tool could not do its job with valid input: `anvil-capture run` could not measure
    /// (calibration impossible against the server, the artifact writer failed; the artifact,
    /// when one was written, is marked `failed` and says why), or `anvil-sim` could not serve.
    Failed,
    /// Stopped by SIGINT; the artifact was finalised as `interrupted` (128 + SIGINT, the
    /// shell's convention).
    Interrupted,
}

impl Exit {
    /// The process exit code.
    pub const fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::RuleFailed => 1,
            Exit::BadInput => 2,
            Exit::Refused => 3,
            Exit::Incomplete => 4,
            Exit::Failed => 5,
            Exit::Interrupted => 130,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        ExitCode::from(exit.code())
    }
}

#[cfg(feature = "analysis")]
impl From<crate::rules::Outcome> for Exit {
    fn from(outcome: crate::rules::Outcome) -> Self {
        use crate::rules::Outcome;
        match outcome {
            Outcome::Holds => Exit::Ok,
            Outcome::StopRuleFired | Outcome::RuleFailed => Exit::RuleFailed,
            Outcome::Incomplete => Exit::Incomplete,
        }
    }
}

/// An error that ends a command with a given [`Exit`] rather than its binary's default.
#[derive(Debug)]
pub struct AppError {
    pub exit: Exit,
    pub source: anyhow::Error,
}

impl std::fmt::Display for AppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.source)
    }
}

impl std::error::Error for AppError {}

impl AppError {
    /// `source`, ending the command with `exit`.
    pub fn wrap(exit: Exit, source: impl Into<anyhow::Error>) -> anyhow::Error {
        anyhow::Error::new(AppError {
            exit,
            source: source.into(),
        })
    }
}

/// The shape of every binary's `main`: run `command` on a [`guarded`] thread; print an
/// error as `program: cause: cause…` and exit with its [`AppError`] class or `default`;
/// a write to a closed standard output (`anvil sql … | head`) is success.
pub fn main(
    program: &'static str,
    default: Exit,
    command: impl FnOnce() -> anyhow::Result<Exit> + Send + 'static,
) -> ExitCode {
    match guarded(program, command) {
        Ok(exit) => exit.into(),
        Err(error) if is_broken_pipe(&error) => Exit::Ok.into(),
        Err(error) => {
            let exit = error.downcast_ref::<AppError>().map_or(default, |e| e.exit);
            // A store's or a library's error may quote a credential: none reaches the
            // terminal (see `location::scrub`).
            eprintln!(
                "{program}: {}",
                crate::location::scrub(&format!("{error:#}"))
            );
            exit.into()
        }
    }
}

/// Stack of the thread a command runs on, and of the query engine's workers: planning a
/// query recurses once per level of its expression tree, and a long chain (`a + a + … + a`,
/// thousands of terms) overflows the default 8 MiB, which aborts the process. Reserved, not
/// committed: only what a query uses is ever touched.
pub const STACK_BYTES: usize = 1 << 30;

/// Run a command on a thread with [`STACK_BYTES`] of stack, turning a panic (a bug: no user
/// input may cause one) into an error, so that the process exits with a message instead of
/// aborting. `program` names the binary in the message. The panic hook prints nothing: the
/// places that contain a library's panic (a damaged Parquet page) report it as an error, and
/// an uncaught one is reported here, once, with where it happened.
pub fn guarded<T: Send + 'static>(
    program: &'static str,
    command: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    static LAST_PANIC: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());
    std::panic::set_hook(Box::new(|info| {
        if let Ok(mut last) = LAST_PANIC.lock() {
            *last = info.to_string().replace('\n', " ");
        }
    }));
    let worker = std::thread::Builder::new()
        .name(program.to_owned())
        .stack_size(STACK_BYTES)
        .spawn(move || std::panic::catch_unwind(std::panic::AssertUnwindSafe(command)))
        .context("starting the command's thread")?;
    match worker.join() {
        Ok(Ok(result)) => result,
        Ok(Err(panic)) | Err(panic) => {
            let what = LAST_PANIC
                .lock()
                .map(|l| l.clone())
                .ok()
                .filter(|l| !l.is_empty())
                .unwrap_or_else(|| crate::panics::text(&panic));
            anyhow::bail!(
                "internal error ({what}): {program} stopped instead of reading this input; \
                 nothing already recorded was changed. Please report it with the command line"
            )
        }
    }
}

/// Set when a write to standard output found it closed: writers that turn I/O errors into
/// text (Arrow's CSV writer) lose the error's kind on the way to the edge.
static STDOUT_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `result` of a write to standard output, noting a closed pipe (see [`is_broken_pipe`]).
pub fn noting_closed_stdout<T>(result: io::Result<T>) -> io::Result<T> {
    if let Err(e) = &result
        && e.kind() == io::ErrorKind::BrokenPipe
    {
        STDOUT_CLOSED.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    result
}

/// Whether `error` is a write to a closed standard output (`anvil sql … | head`): the reader
/// took what it wanted, which is success, not a failure to report.
pub fn is_broken_pipe(error: &anyhow::Error) -> bool {
    STDOUT_CLOSED.load(std::sync::atomic::Ordering::Relaxed)
        || error.chain().any(|cause| {
            cause
                .downcast_ref::<io::Error>()
                .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
        })
}

/// The notices of a long-running library call, printed on standard error as they come.
pub fn stderr_notices() -> crate::notice::Notices {
    crate::notice::Notices::new(|line| eprintln!("{line}"))
}
