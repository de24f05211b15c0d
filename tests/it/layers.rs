//! The layout's rules, checked on the source: only the edge (`src/app/`) and the binaries
//! write to the terminal, only the edge knows the command line, and no two modules import
//! each other, directly or round a loop (`scripts/module_cycles.py`, also `just cycles`).

use std::path::{Path, PathBuf};
use std::process::Command;

const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src");

/// Every `.rs` file beneath `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The library's files outside the edge and the binaries.
fn library() -> Vec<(String, String)> {
    let src = Path::new(SRC);
    sources(src)
        .into_iter()
        .filter(|p| !p.starts_with(src.join("app")) && !p.starts_with(src.join("bin")))
        .map(|p| {
            let name = p.strip_prefix(src).unwrap().display().to_string();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect()
}

#[test]
fn only_the_edge_prints_and_the_lint_that_says_so_stays_on() {
    let lib = std::fs::read_to_string(Path::new(SRC).join("lib.rs")).unwrap();
    assert!(
        lib.contains("#![deny(clippy::print_stdout, clippy::print_stderr)]"),
        "src/lib.rs must deny printing outside the edge"
    );
    for (name, text) in library() {
        for (n, line) in text.lines().enumerate() {
            if line.contains("allow(clippy::print_std") {
                assert!(
                    line.contains("// an ignored measurement prints its figures"),
                    "src/{name}:{}: only an ignored measurement test may print: {line}",
                    n + 1
                );
            }
        }
    }
}

#[test]
fn only_the_edge_knows_the_command_line() {
    for (name, text) in library() {
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            assert!(
                !code.contains("clap::") && !code.contains("crate::app"),
                "src/{name}:{}: the command line belongs to src/app: {line}",
                n + 1
            );
            assert!(
                !code.contains("std::process::exit"),
                "src/{name}:{}: only the edge ends the process: {line}",
                n + 1
            );
        }
    }
}

#[test]
fn no_module_imports_round_a_loop() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/module_cycles.py");
    let out = match Command::new("python3").args([script, SRC]).output() {
        Ok(out) => out,
        Err(e) => {
            super::skip::skipped(
                "layers::no_module_imports_round_a_loop",
                &super::skip::PYTHON3,
                &e.to_string(),
            );
            return;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains(" 0 cycles"), "import cycles:\n{text}");
}
