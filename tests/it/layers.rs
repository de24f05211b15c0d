//! The layout's rules, checked on the source: only the edge (`src/app/`) and the binaries
//! write to the terminal, only the edge knows the command line, and no two modules import
//! each other, directly or round a loop, file by file or folder by folder, and no folder
//! imports one above it in the README's layer table (`scripts/module_cycles.py`, also `just
//! cycles`).

use std::path::{Path, PathBuf};
use std::process::Command;

const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src");

/// Every `.rs` file beneath `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    super::common::files_under(dir, |p| p.extension().is_some_and(|e| e == "rs"))
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

/// `scripts/module_cycles.py` over `src` with `args`; `None` (said as a skip) without python3.
fn module_cycles(src: &Path, args: &[&str]) -> Option<String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/module_cycles.py");
    let out = match Command::new("python3")
        .arg(script)
        .arg(src)
        .args(args)
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            super::skip::skipped(
                "layers::no_module_imports_round_a_loop",
                &super::skip::PYTHON3,
                &e.to_string(),
            );
            return None;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(text)
}

#[test]
fn no_module_imports_round_a_loop_or_up_the_layer_table() {
    let readme = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
    let Some(text) = module_cycles(Path::new(SRC), &["--layers", readme]) else {
        return;
    };
    for holds in [
        " 0 cycles",
        " 0 folder cycles",
        " 0 upward imports, 0 folders unlisted, 0 listed folders absent",
    ] {
        assert!(text.contains(holds), "expected `{holds}`:\n{text}");
    }
}

/// A loop of folders that no loop of files makes (`a/x.rs` names `b::y`, `b/z.rs` names
/// `a::w`) is found, and so is an import up a written order.
#[test]
fn a_loop_between_folders_is_a_cycle_even_without_a_loop_of_files() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    for (file, text) in [
        ("a/mod.rs", "pub mod x;\npub mod w;\n"),
        ("a/x.rs", "use crate::b::y::Y;\n"),
        ("a/w.rs", "pub struct W;\n"),
        ("b/mod.rs", "pub mod y;\npub mod z;\n"),
        ("b/y.rs", "pub struct Y;\n"),
        ("b/z.rs", "use crate::a::w::W;\n"),
    ] {
        let path = src.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let readme = dir.path().join("README.md");
    std::fs::write(
        &readme,
        "<!-- layers -->\n| `src/` | layer |\n|---|---|\n| `b/` | b |\n| `a/` | a |\n",
    )
    .unwrap();
    let Some(text) = module_cycles(&src, &["--layers", readme.to_str().unwrap()]) else {
        return;
    };
    assert!(text.contains(" 0 cycles"), "{text}");
    assert!(text.contains("folder cycle: a <-> b"), "{text}");
    assert!(text.contains(" 1 upward imports"), "{text}");
}
