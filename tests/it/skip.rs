//! Tests that could not run say so where a reader sees it: [`skipped`] writes the reason to
//! the process's real standard error (libtest captures only `print!`/`eprint!` of a passing
//! test, so an `eprintln!` would vanish behind an `ok`), and when the test binary exits a
//! closing block lists every skipped test and why, with their count.
//!
//! Where the requirement was provisioned (`.ci/run` sets `ANVIL_REQUIRE_<WHAT>=1` once it
//! has installed it), a skip is a failure instead.
// Most requirements belong to tests of the analysis commands.
#![cfg_attr(not(feature = "analysis"), allow(dead_code))]

use std::io::Write;
use std::sync::{Mutex, Once};

/// One requirement a test may lack, and the variable that makes lacking it a failure.
pub struct Needs {
    /// What is missing, as a reader would name it (`Chromium`, `llama-server and its models`).
    pub what: &'static str,
    /// How to get it.
    pub how: &'static str,
    /// `ANVIL_REQUIRE_…`: set to 1 where the requirement was installed.
    pub require_env: &'static str,
}

pub const CHROMIUM: Needs = Needs {
    what: "Chromium",
    how: "apt-get install chromium, or set ANVIL_CHROMIUM; bash .ci/run installs it",
    require_env: "ANVIL_REQUIRE_CHROMIUM",
};

pub const PYTHON: Needs = Needs {
    what: "Python 3 with pyarrow and duckdb",
    how: "pip install pyarrow duckdb; bash .ci/run installs them",
    require_env: "ANVIL_REQUIRE_PYTHON",
};

pub const PYTHON3: Needs = Needs {
    what: "python3",
    how: "install Python 3",
    require_env: "ANVIL_REQUIRE_PYTHON",
};

pub const LLAMA: Needs = Needs {
    what: "a real llama-server and its models",
    how: "run `scripts/llama-server.sh env` (about 4-7 minutes to build once); bash .ci/run does",
    require_env: "ANVIL_REQUIRE_LLAMA",
};

pub const TMUX: Needs = Needs {
    what: "tmux for a real terminal",
    how: "apt-get install tmux; bash .ci/run installs it",
    require_env: "ANVIL_REQUIRE_TMUX",
};

pub const CONFORMANCE: Needs = Needs {
    what: "the conformance vectors of ../shared/conformance/",
    how: "check out the shared folder beside the clone, or set ANVIL_CONFORMANCE_DIR",
    require_env: "ANVIL_REQUIRE_CONFORMANCE",
};

pub const KUBERNETES_VALIDATE: Needs = Needs {
    what: "kubernetes-validate (the Kubernetes API schema validator, a Python package)",
    how: "python3 -m pip install kubernetes-validate; bash .ci/run installs it",
    require_env: "ANVIL_REQUIRE_KUBERNETES_VALIDATE",
};

pub const S3: Needs = Needs {
    what: "an S3-compatible server (moto's moto_server) and python3 with boto3",
    how: "pip install 'moto[server]'; bash .ci/run installs it",
    require_env: "ANVIL_REQUIRE_S3",
};

#[cfg(not(feature = "distributed"))]
pub const DISTRIBUTED: Needs = Needs {
    what: "anvil built with the distributed SQL engine",
    how: "cargo test --features distributed; bash .ci/run runs it after the default tests",
    require_env: "ANVIL_REQUIRE_DISTRIBUTED",
};

static SKIPPED: Mutex<Vec<String>> = Mutex::new(Vec::new());
static AT_EXIT: Once = Once::new();

/// Record that `test` did not run because `needs` is missing (`detail`: what was found, or
/// why an install failed). Panics instead when `needs.require_env` is 1.
pub fn skipped(test: &str, needs: &Needs, detail: &str) {
    let detail = if detail.is_empty() {
        String::new()
    } else {
        format!(" ({detail})")
    };
    assert!(
        std::env::var(needs.require_env).as_deref() != Ok("1"),
        "{test}: {}=1 but {} is missing{detail}",
        needs.require_env,
        needs.what
    );
    let line = format!("{test}: needs {}{detail}: {}", needs.what, needs.how);
    let _ = writeln!(std::io::stderr(), "!!! SKIPPED {line}");
    SKIPPED.lock().unwrap_or_else(|e| e.into_inner()).push(line);
    AT_EXIT.call_once(|| {
        // SAFETY: registering a plain `extern "C"` function with atexit(3).
        unsafe { libc::atexit(summary) };
    });
}

/// The closing block, after libtest's own result line.
extern "C" fn summary() {
    let list = SKIPPED.lock().unwrap_or_else(|e| e.into_inner());
    let mut text = format!(
        "\n!!! {} test{} SKIPPED (passed without running; each needs what is named):\n",
        list.len(),
        if list.len() == 1 { "" } else { "s" }
    );
    for line in list.iter() {
        text.push_str("!!!   ");
        text.push_str(line);
        text.push('\n');
    }
    let _ = std::io::stderr().write_all(text.as_bytes());
}
