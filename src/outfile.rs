//! Files a user names on the command line (`--out`, `--truth`): written to a uniquely named
//! temporary file in the target's folder and renamed over the target only when complete
//! ([`OutputFile::commit`]). A log that must outlive its writer being killed (`anvil-sim
//! --truth`) is instead renamed into place as soon as it is opened and appended to
//! ([`OutputFile::place_now`]): its readers see it grow.
//!
//! A target that exists and is not a regular file (a device node, a FIFO, a directory, a
//! symlink) is refused rather than replaced; nothing anvil did not create is removed (the
//! temporary file is anvil's own, removed if the write fails or is abandoned); a reader of
//! the target sees the old file or the whole new one, never half of it. The new file gets
//! the mode the old one had, or an ordinary new file's (0666 less the umask).

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Why an output file could not be written; the message names the path.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error(
        "{}: exists and is not a regular file ({kind}); anvil writes only regular files: name a new or regular file",
        path.display()
    )]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("{}: {what}: {source}", path.display())]
    Io {
        path: PathBuf,
        what: &'static str,
        #[source]
        source: io::Error,
    },
}

/// An output file being written; [`OutputFile::commit`] puts it in place.
#[derive(Debug)]
pub struct OutputFile {
    path: PathBuf,
    tmp: tempfile::NamedTempFile,
}

impl OutputFile {
    /// Check `path` and open a temporary file beside it (creating the folder).
    pub fn create(path: &Path) -> Result<Self, OutputError> {
        check_target(path)?;
        let dir = match path.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(dir) => dir,
            None => Path::new("."),
        };
        fs::create_dir_all(dir).map_err(|source| OutputError::Io {
            path: path.to_owned(),
            what: "cannot create its folder",
            source,
        })?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let prefix = format!(".{name}.");
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix).suffix(".tmp");
        // An ordinary file's mode, not a temporary file's 0600: the target's own when it
        // exists, else read-write for all less the umask, as any new file.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(match fs::metadata(path) {
                Ok(existing) => existing.permissions(),
                Err(_) => fs::Permissions::from_mode(0o666),
            });
        }
        let tmp = builder.tempfile_in(dir).map_err(|source| OutputError::Io {
            path: path.to_owned(),
            what: "cannot create a temporary file in its folder",
            source,
        })?;
        Ok(Self {
            path: path.to_owned(),
            tmp,
        })
    }

    /// The target path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flush, sync and rename over the target (checked again: it may have appeared since).
    pub fn commit(mut self) -> Result<(), OutputError> {
        let io = |what| {
            let path = self.path.clone();
            move |source| OutputError::Io { path, what, source }
        };
        self.tmp.flush().map_err(io("cannot write"))?;
        self.tmp.as_file().sync_all().map_err(io("cannot write"))?;
        self.place_now().map(drop)
    }

    /// Rename over the target now (checked again, as in [`OutputFile::commit`]) and return the
    /// open file, for a log appended to while the program runs: whatever is written to it is
    /// in the target at once, so a kill loses only what the program still held in memory.
    pub fn place_now(self) -> Result<fs::File, OutputError> {
        check_target(&self.path)?;
        let path = self.path.clone();
        self.tmp.persist(&path).map_err(|e| OutputError::Io {
            path,
            what: "cannot rename into place",
            source: e.error,
        })
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tmp.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.tmp.flush()
    }
}

/// Write `bytes` to `path` whole ([`OutputFile`]).
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    let mut file = OutputFile::create(path)?;
    file.write_all(bytes).map_err(|source| OutputError::Io {
        path: path.to_owned(),
        what: "cannot write",
        source,
    })?;
    file.commit()
}

/// Refuse a target that exists and is not a regular file.
fn check_target(path: &Path) -> Result<(), OutputError> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_file() => Ok(()),
        Ok(meta) => Err(OutputError::NotRegular {
            path: path.to_owned(),
            kind: kind(&meta.file_type()),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(OutputError::Io {
            path: path.to_owned(),
            what: "cannot inspect",
            source,
        }),
    }
}

fn kind(t: &fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_whole_and_leaves_unrelated_files_alone() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("sub/report.html");
        let bystander = dir.path().join("sub/report.tmp");
        fs::create_dir_all(target.parent().unwrap()).unwrap();
        fs::write(&bystander, "not anvil's").unwrap();
        write_file(&target, b"one").unwrap();
        write_file(&target, b"two").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"two");
        assert_eq!(fs::read(&bystander).unwrap(), b"not anvil's");
        let names: Vec<_> = fs::read_dir(target.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "no temporary file left: {names:?}");
    }

    #[test]
    fn refuses_devices_fifos_directories_and_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let e = write_file(Path::new("/dev/null"), b"x").unwrap_err();
        assert!(
            e.to_string()
                .contains("/dev/null: exists and is not a regular file (a device)")
        );
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo(3) on a NUL-terminated path we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(
            write_file(&fifo, b"x")
                .unwrap_err()
                .to_string()
                .contains("(a FIFO)")
        );
        assert!(
            write_file(dir.path(), b"x")
                .unwrap_err()
                .to_string()
                .contains("(a directory)")
        );
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        assert!(
            write_file(&link, b"x")
                .unwrap_err()
                .to_string()
                .contains("(a symbolic link)")
        );
    }

    #[test]
    fn the_file_gets_an_ordinary_mode_or_keeps_the_targets() {
        use std::os::unix::fs::PermissionsExt;
        let umask = fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("Umask:"))
            .map(|m| u32::from_str_radix(m.trim(), 8).unwrap())
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let new = dir.path().join("report.html");
        write_file(&new, b"x").unwrap();
        assert_eq!(mode(&new), 0o666 & !umask);
        let kept = dir.path().join("kept.csv");
        fs::write(&kept, "old").unwrap();
        fs::set_permissions(&kept, fs::Permissions::from_mode(0o640)).unwrap();
        write_file(&kept, b"new").unwrap();
        assert_eq!(mode(&kept), 0o640 & !umask);
    }

    /// An output file begun over `name`, a file holding `old`, in a fresh folder.
    fn over_an_old_file(name: &str) -> (tempfile::TempDir, std::path::PathBuf, OutputFile) {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join(name);
        fs::write(&target, "old").unwrap();
        let f = OutputFile::create(&target).unwrap();
        (dir, target, f)
    }

    #[test]
    fn an_abandoned_file_removes_only_its_own_temporary() {
        let (dir, target, mut f) = over_an_old_file("out.csv");
        f.write_all(b"half").unwrap();
        drop(f);
        assert_eq!(fs::read(&target).unwrap(), b"old");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_placed_log_is_the_target_at_once_and_grows() {
        let (dir, target, mut f) = over_an_old_file("truth.csv");
        f.write_all(b"header\n").unwrap();
        let mut log = f.place_now().unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"header\n");
        log.write_all(b"row\n").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"header\nrow\n");
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary left"
        );
        // A target that became a directory meanwhile is refused, as by `commit`.
        let f = OutputFile::create(&target).unwrap();
        fs::remove_file(&target).unwrap();
        fs::create_dir(&target).unwrap();
        assert!(
            f.place_now()
                .unwrap_err()
                .to_string()
                .contains("(a directory)")
        );
    }
}
