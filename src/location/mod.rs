//! Where artifacts and documents live: a local path, or an object-store URL (`s3://`,
//! `gs://`, `az://`; `file://` is a local path). One function turns what the user typed into
//! a [`Location`]; above this module a folder and a bucket prefix are read the same way.
//!
//! A remote prefix is used in place: its Parquet tables are read where they are (DataFusion
//! and the artifact checks fetch byte ranges through the store), and only the small files
//! beside them (`run.json`, campaign documents, journals, evidence) are copied into a local
//! mirror under the cache folder ([`cache_dir`]), so that everything that looks for a file
//! beside the data finds it. [`mirror`] lists a prefix once, prunes it by the artifact layout
//! of `docs/artifact.md` and fetches the small files concurrently; the artifacts it found are
//! registered ([`remote_artifact`]) under their mirror folder.
//!
//! Credentials come from each cloud's environment conventions (`AWS_*`, `GOOGLE_*`,
//! `AZURE_*`), read by object_store's builders; they are never printed: every message that
//! carries a server's words goes through [`scrub`] first.
//!
//! This module sits above `artifact` (it knows the layout and `run.json`) and below `query`,
//! `verify` and the edge, which all open a location the same way.

#[cfg(feature = "object-store")]
mod readahead;
#[cfg(feature = "object-store")]
mod remote;

#[cfg(feature = "object-store")]
pub use remote::{
    Mirror, ObjectFile, ObjectRef, Pushed, Remote, RemoteArtifact, block_on, cached_table,
    fetch_document, mirror, push, remote_artifact,
};

use std::path::{Path, PathBuf};

/// What a command was given as a place: a local path or a remote prefix.
#[derive(Debug, Clone)]
pub enum Location {
    /// A file or folder on this machine (a `file://` URL is one).
    Local(PathBuf),
    /// A prefix in an object store, as given (no trailing `/`).
    #[cfg(feature = "object-store")]
    Remote(std::sync::Arc<Remote>),
}

/// A location that cannot be used: the URL (or path), the object when one is concerned, and
/// what went wrong, with what to do.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{url}{}: {problem}", object.as_deref().map(|o| format!(": {o}")).unwrap_or_default())]
pub struct LocationError {
    pub url: String,
    pub object: Option<String>,
    pub problem: String,
}

impl LocationError {
    pub fn new(url: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            object: None,
            problem: scrub(&problem.into()),
        }
    }

    pub fn object(
        url: impl Into<String>,
        object: impl Into<String>,
        problem: impl Into<String>,
    ) -> Self {
        Self {
            url: url.into(),
            object: Some(object.into()),
            problem: scrub(&problem.into()),
        }
    }
}

/// What a prefix holding no object is called in messages.
pub const EMPTY_PREFIX: &str = "no object at or beneath this prefix";

/// The URL schemes anvil reads and writes, as `--help` texts name them.
pub const SCHEMES: &str = "s3://, gs://, az:// or file://";

/// Whether `text` is a URL (`scheme://…`) rather than a path.
pub fn is_url(text: &str) -> bool {
    text.split_once("://").is_some_and(|(scheme, _)| {
        !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    })
}

impl Location {
    /// What `given` names: a path, a `file://` URL (a path), or an object-store URL. An
    /// unknown scheme, or a remote URL in a build without the `object-store` feature, is an
    /// error naming it.
    pub fn parse(given: &Path) -> Result<Location, LocationError> {
        let Some(text) = given.to_str().filter(|t| is_url(t)) else {
            return Ok(Location::Local(given.to_owned()));
        };
        let (scheme, rest) = text.split_once("://").unwrap_or_default();
        match scheme.to_ascii_lowercase().as_str() {
            "file" => {
                // file:///abs/path (an empty host) or file://localhost/abs/path
                let path = rest.strip_prefix("localhost").unwrap_or(rest);
                if !path.starts_with('/') {
                    return Err(LocationError::new(
                        text,
                        "a file:// URL needs an absolute path (file:///home/me/data)",
                    ));
                }
                Ok(Location::Local(PathBuf::from(percent_decode(path))))
            }
            #[cfg(feature = "object-store")]
            "s3" | "s3a" | "gs" | "az" | "abfs" | "abfss" => {
                Remote::open(text).map(|r| Location::Remote(std::sync::Arc::new(r)))
            }
            #[cfg(not(feature = "object-store"))]
            "s3" | "s3a" | "gs" | "az" | "abfs" | "abfss" => Err(LocationError::new(
                text,
                "this anvil was built without object storage: rebuild with `--features \
                 object-store` (it is in the default build)",
            )),
            other => Err(LocationError::new(
                text,
                format!(
                    "`{other}://` is not a place anvil reads: give a folder, or an {SCHEMES} URL"
                ),
            )),
        }
    }

    /// The location as the user gave it (a path, or the URL).
    pub fn display(&self) -> String {
        match self {
            Location::Local(path) => path.display().to_string(),
            #[cfg(feature = "object-store")]
            Location::Remote(remote) => remote.url().to_owned(),
        }
    }
}

/// `%XX` escapes decoded (a `file://` URL's path); anything malformed is kept as written.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(v) = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| text.to_owned())
}

/// The folder anvil keeps copies of remote files in: `$ANVIL_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/anvil`, else `~/.cache/anvil`, else `anvil-cache` in the temporary folder.
pub fn cache_dir() -> PathBuf {
    let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = env("ANVIL_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = env("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("anvil");
    }
    if let Some(home) = env("HOME") {
        return PathBuf::from(home).join(".cache").join("anvil");
    }
    std::env::temp_dir().join("anvil-cache")
}

/// How messages and reports name `path`: the object's URL when it is a copy in the mirror
/// (`CACHE/objects/<scheme>/<bucket>/<key>` → `<scheme>://<bucket>/<key>`), else the path.
pub fn shown(path: &Path) -> String {
    let objects = cache_dir().join("objects");
    let Ok(rest) = path.strip_prefix(&objects) else {
        return path.display().to_string();
    };
    let parts: Vec<String> = rest
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    match parts.as_slice() {
        [scheme, host, key @ ..] => {
            let mut url = format!("{scheme}://{host}");
            for k in key {
                url.push('/');
                url.push_str(k);
            }
            url
        }
        _ => path.display().to_string(),
    }
}

/// The names of the environment variables whose values are credentials: every `AWS_*`,
/// `GOOGLE_*`, `AZURE_*` (and `OBJECT_STORE_*`) variable whose name says key, secret, token,
/// password, credential or SAS.
fn is_credential_var(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    let cloud = ["AWS_", "GOOGLE_", "AZURE_", "OBJECT_STORE_"]
        .iter()
        .any(|p| upper.starts_with(p));
    let secret = ["KEY", "SECRET", "TOKEN", "PASSWORD", "CREDENTIAL", "SAS"]
        .iter()
        .any(|w| upper.contains(w));
    cloud && secret
}

/// `text` with the value of every credential variable of the environment (see
/// [`is_credential_var`]) replaced by `<redacted>`: a server's error (an S3 `InvalidAccessKeyId`
/// body quotes the key) must not carry a credential to the terminal or into a file.
pub fn scrub(text: &str) -> String {
    let secrets: Vec<String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| is_credential_var(k))
        .map(|(_, v)| v)
        .collect();
    crate::artifact::redact::Redactor::new(&secrets)
        .text(text)
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_file_urls_are_local() {
        for (given, path) in [
            ("sample-data", "sample-data"),
            ("/tmp/a b", "/tmp/a b"),
            ("file:///tmp/a%20b/c", "/tmp/a b/c"),
            ("file://localhost/srv/x", "/srv/x"),
        ] {
            match Location::parse(Path::new(given)).unwrap() {
                Location::Local(p) => assert_eq!(p, PathBuf::from(path), "{given}"),
                #[cfg(feature = "object-store")]
                Location::Remote(_) => panic!("{given} read as remote"),
            }
        }
    }

    #[test]
    fn bad_urls_are_named() {
        let e = Location::parse(Path::new("ftp://host/x")).unwrap_err();
        assert_eq!(e.url, "ftp://host/x");
        assert!(e.problem.contains("s3://"), "{e}");
        let e = Location::parse(Path::new("file://relative/x")).unwrap_err();
        assert!(e.problem.contains("absolute"), "{e}");
    }

    #[test]
    fn credential_variables() {
        for name in [
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "AZURE_STORAGE_ACCOUNT_KEY",
            "AZURE_STORAGE_SAS_KEY",
            "GOOGLE_SERVICE_ACCOUNT_KEY",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ] {
            assert!(is_credential_var(name), "{name}");
        }
        for name in ["AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ALLOW_HTTP", "HOME"] {
            assert!(!is_credential_var(name), "{name}");
        }
    }
}
