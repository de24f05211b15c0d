//! `anvil validate`: one line per input ([`crate::validate::Finding`]), and bad input when
//! any is not valid.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::args::ValidateArgs;
use crate::app::Exit;
use crate::app::output::Sink;
use crate::validate;

/// `anvil validate`: exit 0 when every input is valid, 2 otherwise.
pub fn run(args: &ValidateArgs) -> anyhow::Result<Exit> {
    let mut out = Sink::open(None)?;
    let mut invalid = 0usize;
    for given in &args.paths {
        let (path, shown) = local_copy(given)?;
        for finding in validate::validate_path(&path) {
            let line = finding.to_string();
            let line = match &shown {
                Some((local, url)) => line.replace(local.as_str(), url),
                None => line,
            };
            writeln!(out, "{line}").context("writing to standard output")?;
            if !finding.is_valid() {
                invalid += 1;
            }
        }
    }
    out.finish().context("writing to standard output")?;
    if invalid == 0 {
        return Ok(Exit::Ok);
    }
    let inputs = if invalid == 1 {
        "input is"
    } else {
        "inputs are"
    };
    eprintln!("anvil validate: {invalid} {inputs} not valid");
    Ok(Exit::BadInput)
}

/// What to validate for `given`: a local path as is; for a URL, the local copy (a prefix's
/// mirror with every remote artifact's tables fetched, so that every page is decoded as for
/// a folder; a document's copy) and the copy's path with the URL to name it by.
#[cfg_attr(not(feature = "object-store"), allow(clippy::unnecessary_wraps))]
fn local_copy(given: &Path) -> anyhow::Result<(PathBuf, Option<(String, String)>)> {
    use crate::app::AppError;
    use crate::location::Location;
    let bad =
        |e: crate::location::LocationError| AppError::wrap(Exit::BadInput, anyhow::Error::new(e));
    match Location::parse(given).map_err(bad)? {
        Location::Local(path) => Ok((path, None)),
        #[cfg(feature = "object-store")]
        Location::Remote(remote) => {
            use crate::location::{
                block_on, cached_table, fetch_document, mirror, remote_artifact,
            };
            let (local, url) = match block_on(mirror(&remote)) {
                Ok(m) => (m.root, remote.url().to_owned()),
                // Nothing beneath it as a prefix: a single document (any other failure, such
                // as a refused listing, is said as it is).
                Err(e) if e.problem.starts_with(crate::location::EMPTY_PREFIX) => (
                    block_on(fetch_document(&remote)).map_err(bad)?,
                    remote.url().to_owned(),
                ),
                Err(e) => return Err(bad(e)),
            };
            let mut dirs = Vec::new();
            collect_registered(&local, &mut dirs);
            for dir in dirs {
                if let Some(artifact) = remote_artifact(&dir) {
                    for table in crate::artifact::Table::ALL {
                        // A missing table is reported by the validation itself.
                        if artifact.tables[table as usize].is_some() {
                            block_on(cached_table(&artifact, table)).map_err(bad)?;
                        }
                    }
                }
            }
            let shown = (local.display().to_string(), url);
            Ok((local, Some(shown)))
        }
    }
}

/// Every folder at or beneath `dir` (where remote artifacts' mirrors are registered).
#[cfg(feature = "object-store")]
fn collect_registered(dir: &Path, out: &mut Vec<PathBuf>) {
    if !dir.is_dir() {
        return;
    }
    out.push(dir.to_owned());
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                collect_registered(&entry.path(), out);
            }
        }
    }
}
