//! A remote prefix through object_store: the store built from the URL and the environment,
//! listing, fetching and uploading, the mirror of a prefix's small files, the registry of the
//! artifacts a mirror found, and `push`.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjPath;
use object_store::{
    ObjectMeta, ObjectStore, ObjectStoreExt, ObjectStoreScheme, PutPayload, RetryConfig,
    WriteMultipart,
};
use url::Url;

use super::{LocationError, cache_dir};
use crate::artifact::{RUN_JSON, RunJson, Status, Table};

/// How many requests a listing's follow-up fetches keep in flight.
const IN_FLIGHT: usize = 16;
/// Files at least this large are uploaded in parts of this size.
const PART_BYTES: usize = 16 << 20;

/// A prefix of an object store: the URL as given, the store, and the key prefix in it.
pub struct Remote {
    url: String,
    base: Url,
    store: Arc<dyn ObjectStore>,
    prefix: ObjPath,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote").field("url", &self.url).finish()
    }
}

/// Retries of a failed request: object_store's exponential backoff, at most 5 retries within
/// 30 s (its default of 10 within 3 minutes leaves a wrong endpoint silent for minutes).
fn retry() -> RetryConfig {
    RetryConfig {
        max_retries: 5,
        retry_timeout: Duration::from_secs(30),
        ..RetryConfig::default()
    }
}

impl Remote {
    /// The store for `text` (`s3://bucket/prefix`, `gs://…`, `az://container/prefix`), its
    /// credentials and endpoint from the environment (`AWS_*` including `AWS_ENDPOINT_URL`
    /// and `AWS_ALLOW_HTTP`; `GOOGLE_*`; `AZURE_*`).
    pub fn open(text: &str) -> Result<Remote, LocationError> {
        let trimmed = text.trim_end_matches('/');
        let url =
            Url::parse(trimmed).map_err(|e| LocationError::new(text, format!("not a URL: {e}")))?;
        if url.host_str().is_none_or(str::is_empty) {
            return Err(LocationError::new(
                text,
                "names no bucket (write s3://BUCKET/PREFIX)",
            ));
        }
        let (scheme, prefix) = ObjectStoreScheme::parse(&url)
            .map_err(|e| LocationError::new(text, format!("not an object-store URL: {e}")))?;
        let built: object_store::Result<Arc<dyn ObjectStore>> = match scheme {
            ObjectStoreScheme::AmazonS3 => object_store::aws::AmazonS3Builder::from_env()
                .with_url(trimmed)
                .with_retry(retry())
                .build()
                .map(|s| Arc::new(s) as _),
            ObjectStoreScheme::GoogleCloudStorage => {
                object_store::gcp::GoogleCloudStorageBuilder::from_env()
                    .with_url(trimmed)
                    .with_retry(retry())
                    .build()
                    .map(|s| Arc::new(s) as _)
            }
            ObjectStoreScheme::MicrosoftAzure => {
                object_store::azure::MicrosoftAzureBuilder::from_env()
                    .with_url(trimmed)
                    .with_retry(retry())
                    .build()
                    .map(|s| Arc::new(s) as _)
            }
            _ => {
                return Err(LocationError::new(
                    text,
                    format!("is not an {} URL", super::SCHEMES),
                ));
            }
        };
        let store = built.map_err(|e| {
            LocationError::new(
                text,
                format!("cannot set up the client ({e}); check the cloud's environment variables"),
            )
        })?;
        // Scans of large tables fetch windows, not row groups (see `readahead`).
        let store: Arc<dyn ObjectStore> = Arc::new(super::readahead::ReadAhead::new(store));
        let mut base = url.clone();
        base.set_path("");
        base.set_query(None);
        base.set_fragment(None);
        Ok(Remote {
            url: trimmed.to_owned(),
            base,
            store,
            prefix,
        })
    }

    /// The prefix's URL, as given (no trailing `/`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `scheme://bucket`: what DataFusion registers the store under.
    pub fn base(&self) -> &Url {
        &self.base
    }

    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    pub fn prefix(&self) -> &ObjPath {
        &self.prefix
    }

    /// The URL of object `key` of this store.
    pub fn key_url(&self, key: &ObjPath) -> String {
        format!("{}/{key}", self.base.as_str().trim_end_matches('/'))
    }

    /// `relative` (`/`-separated) beneath this prefix.
    pub fn child(&self, relative: &str) -> ObjPath {
        let mut key = self.prefix.as_ref().to_owned();
        for part in relative.split('/').filter(|p| !p.is_empty()) {
            if !key.is_empty() {
                key.push('/');
            }
            key.push_str(part);
        }
        ObjPath::from(key)
    }

    /// The error of a request about `key` (the prefix itself when `None`), in words that say
    /// what to do.
    pub fn failed(&self, key: Option<&ObjPath>, e: object_store::Error) -> LocationError {
        let object = key.map(|k| self.key_url(k));
        let text = e.to_string();
        let bucket = self.base.host_str().unwrap_or_default();
        let problem = match &e {
            object_store::Error::NotFound { .. } if text.contains("NoSuchBucket") => {
                format!("no such bucket `{bucket}`")
            }
            object_store::Error::NotFound { .. } => "no such object".to_owned(),
            object_store::Error::PermissionDenied { .. }
            | object_store::Error::Unauthenticated { .. } => access_denied(),
            _ if text.contains("NoSuchBucket") || text.contains("ContainerNotFound") => {
                format!("no such bucket `{bucket}`")
            }
            _ if [
                "InvalidAccessKeyId",
                "SignatureDoesNotMatch",
                "AccessDenied",
                "403 Forbidden",
                "401 Unauthorized",
            ]
            .iter()
            .any(|w| text.contains(w)) =>
            {
                access_denied()
            }
            _ => format!("the request failed: {text}"),
        };
        match object {
            Some(o) => LocationError::object(&self.url, o, problem),
            None => LocationError::new(&self.url, problem),
        }
    }

    /// Every object beneath the prefix.
    pub async fn list(&self) -> Result<Vec<ObjectMeta>, LocationError> {
        let prefix = (!self.prefix.as_ref().is_empty()).then_some(&self.prefix);
        self.store
            .list(prefix)
            .try_collect()
            .await
            .map_err(|e| self.failed(None, e))
    }

    /// Object `key` whole.
    pub async fn get(&self, key: &ObjPath) -> Result<Bytes, LocationError> {
        let got = self
            .store
            .get(key)
            .await
            .map_err(|e| self.failed(Some(key), e))?;
        got.bytes().await.map_err(|e| self.failed(Some(key), e))
    }

    /// Object `key`'s size and time, or `None` when there is no such object.
    pub async fn head(&self, key: &ObjPath) -> Result<Option<ObjectMeta>, LocationError> {
        match self.store.head(key).await {
            Ok(meta) => Ok(Some(meta)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.failed(Some(key), e)),
        }
    }

    /// Upload the file at `path` as object `key` (in parts when large).
    pub async fn put_file(&self, path: &Path, key: &ObjPath) -> Result<u64, LocationError> {
        let bytes = tokio::fs::read(path).await.map_err(|e| {
            LocationError::object(
                &self.url,
                path.display().to_string(),
                format!("cannot read: {e}"),
            )
        })?;
        let len = bytes.len() as u64;
        if bytes.len() < PART_BYTES {
            self.store
                .put(key, PutPayload::from(bytes))
                .await
                .map_err(|e| self.failed(Some(key), e))?;
        } else {
            let upload = self
                .store
                .put_multipart(key)
                .await
                .map_err(|e| self.failed(Some(key), e))?;
            let mut write = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
            write.put(Bytes::from(bytes));
            write
                .finish()
                .await
                .map_err(|e| self.failed(Some(key), e))?;
        }
        Ok(len)
    }
}

fn access_denied() -> String {
    "access denied: the credentials were refused (check AWS_ACCESS_KEY_ID and \
     AWS_SECRET_ACCESS_KEY, GOOGLE_APPLICATION_CREDENTIALS or AZURE_STORAGE_* and the \
     bucket's permissions)"
        .to_owned()
}

/// Run `fut` to completion from synchronous code, inside a multi-threaded runtime (the
/// analysis commands' own) or outside any. Remote locations are resolved at the edge, outside
/// any runtime, and read again only from the analysis commands' multi-threaded runtime; the
/// campaign runner's current-thread runtime reads local folders only (a `block_in_place`
/// there would panic).
pub fn block_on<F: std::future::Future>(fut: F) -> F::Output {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => tokio::task::block_in_place(|| handle.block_on(fut)),
        Err(_) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a current-thread runtime starts")
            .block_on(fut),
    }
}

/// One object: its key, URL, size and time.
#[derive(Debug, Clone)]
pub struct ObjectRef {
    pub key: ObjPath,
    pub url: String,
    pub size: u64,
    pub modified: SystemTime,
}

impl ObjectRef {
    fn new(remote: &Remote, meta: &ObjectMeta) -> Self {
        Self {
            key: meta.location.clone(),
            url: remote.key_url(&meta.location),
            size: meta.size,
            modified: meta.last_modified.into(),
        }
    }
}

/// An artifact found beneath a remote prefix: its folder's URL, its tables' objects (in
/// [`Table::ALL`] order; `None` when missing) and whether part files were uploaded.
#[derive(Debug, Clone)]
pub struct RemoteArtifact {
    pub url: String,
    pub remote: Arc<Remote>,
    pub tables: [Option<ObjectRef>; 4],
    pub parts: bool,
}

impl RemoteArtifact {
    /// The URL the artifact's `file` (`run.json`, a table) has.
    pub fn file_url(&self, file: &str) -> String {
        format!("{}/{file}", self.url)
    }
}

type Registry = Mutex<HashMap<PathBuf, Arc<RemoteArtifact>>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::default)
}

/// The remote artifact whose mirror folder is `dir`, if [`mirror`] found one there.
pub fn remote_artifact(dir: &Path) -> Option<Arc<RemoteArtifact>> {
    registry().lock().ok()?.get(dir).cloned()
}

/// What [`mirror`] did: the local folder standing for the prefix, the artifacts found, and
/// the files fetched (the others were current).
#[derive(Debug, Clone)]
pub struct Mirror {
    pub root: PathBuf,
    pub artifacts: usize,
    pub fetched: usize,
}

/// The local folder that mirrors objects of `remote`'s store: `CACHE/objects/<scheme>/<bucket>`.
fn mirror_base(remote: &Remote) -> PathBuf {
    let mut dir = cache_dir().join("objects").join(remote.base.scheme());
    dir.push(remote.base.host_str().unwrap_or("_"));
    dir
}

/// The local path of object `key` beneath `base`.
fn local_path(base: &Path, key: &ObjPath) -> PathBuf {
    let mut path = base.to_owned();
    for part in key.parts() {
        path.push(part.as_ref());
    }
    path
}

/// Whether a local copy at `path` is the object `meta` (same size and modification time,
/// which [`fetch_to`] sets).
fn current(path: &Path, size: u64, modified: SystemTime) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.len() == size && m.modified().ok() == Some(modified))
}

/// Fetch object `o` into `path` (a temporary beside it, renamed) unless the copy is current.
async fn fetch_to(remote: &Remote, o: &ObjectRef, path: &Path) -> Result<bool, LocationError> {
    if current(path, o.size, o.modified) {
        return Ok(false);
    }
    let bytes = remote.get(&o.key).await?;
    let local = |e: std::io::Error| {
        LocationError::object(
            &remote.url,
            &o.url,
            format!("cannot keep a copy at {}: {e}", path.display()),
        )
    };
    let parent = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(local)?;
    let tmp = tempfile::NamedTempFile::new_in(parent).map_err(local)?;
    std::fs::write(tmp.path(), &bytes).map_err(local)?;
    tmp.as_file().set_modified(o.modified).map_err(local)?;
    tmp.persist(path).map_err(|e| local(e.error))?;
    Ok(true)
}

/// Whether a key relative to the prefix lies in a hidden folder (`.superseded/`, …), which
/// is never searched, as locally.
fn in_hidden_folder(relative: &str) -> bool {
    let mut parts: Vec<&str> = relative.split('/').collect();
    parts.pop();
    parts.iter().any(|p| p.starts_with('.'))
}

/// List `remote`'s prefix once, find its artifacts by the layout (a folder holding
/// `run.json`; its own subfolders not searched further; hidden folders skipped), fetch every
/// small file (not a table, not a table's parts) into the local mirror concurrently, drop
/// mirror files the prefix no longer has, and register each artifact under its mirror
/// folder. A prefix with no object is an error naming it.
pub async fn mirror(remote: &Arc<Remote>) -> Result<Mirror, LocationError> {
    let objects = remote.list().await?;
    if objects.is_empty() {
        return Err(LocationError::new(
            &remote.url,
            format!(
                "{}: check the URL (`anvil push DIR URL` uploads artifacts)",
                super::EMPTY_PREFIX
            ),
        ));
    }
    let strip = |key: &ObjPath| -> String {
        let key = key.as_ref();
        let prefix = remote.prefix.as_ref();
        key.strip_prefix(prefix)
            .map_or(key, |r| r.trim_start_matches('/'))
            .to_owned()
    };
    let visible: Vec<(String, &ObjectMeta)> = objects
        .iter()
        .map(|m| (strip(&m.location), m))
        .filter(|(rel, _)| !in_hidden_folder(rel))
        .collect();
    // Artifact folders (relative; "" when the prefix is one), outermost first.
    let mut folders: Vec<String> = visible
        .iter()
        .filter_map(|(rel, _)| {
            if rel == RUN_JSON {
                Some(String::new())
            } else {
                rel.strip_suffix(&format!("/{RUN_JSON}")).map(str::to_owned)
            }
        })
        .collect();
    folders.sort();
    let mut artifacts: Vec<String> = Vec::new();
    for f in folders {
        let nested = artifacts
            .iter()
            .any(|a| a.is_empty() || f.starts_with(&format!("{a}/")));
        if !nested {
            artifacts.push(f);
        }
    }
    let artifact_of = |rel: &str| -> Option<(usize, String)> {
        artifacts.iter().enumerate().find_map(|(i, a)| {
            if a.is_empty() {
                Some((i, rel.to_owned()))
            } else {
                rel.strip_prefix(&format!("{a}/"))
                    .map(|r| (i, r.to_owned()))
            }
        })
    };
    let mut tables: Vec<[Option<ObjectRef>; 4]> = vec![Default::default(); artifacts.len()];
    let mut parts = vec![false; artifacts.len()];
    let mut small: Vec<(String, ObjectRef)> = Vec::new();
    for (rel, meta) in &visible {
        if let Some((i, inside)) = artifact_of(rel) {
            if let Some(t) = Table::ALL.iter().find(|t| t.file_name() == inside) {
                tables[i][*t as usize] = Some(ObjectRef::new(remote, meta));
                continue;
            }
            if Table::ALL
                .iter()
                .any(|t| inside.starts_with(&format!("{}/", t.parts_dir_name())))
            {
                parts[i] = true;
                continue;
            }
        }
        if rel.ends_with(".parquet") {
            continue;
        }
        small.push((rel.clone(), ObjectRef::new(remote, meta)));
    }
    let root = local_path(&mirror_base(remote), &remote.prefix);
    let fetched = futures::stream::iter(small.iter().map(|(rel, o)| {
        let path = root.join(rel);
        async move { fetch_to(remote, o, &path).await }
    }))
    .buffer_unordered(IN_FLIGHT)
    .try_fold(0usize, |n, got| async move { Ok(n + usize::from(got)) })
    .await?;
    // Copies of tables fetched for a reader of files (`anvil verify`, `anvil validate`) stay
    // while the object exists; `fetch_to` refreshes a copy that is not current.
    let keep: BTreeSet<PathBuf> = small
        .iter()
        .map(|(rel, _)| root.join(rel))
        .chain(
            tables
                .iter()
                .flatten()
                .flatten()
                .map(|o| local_path(&mirror_base(remote), &o.key)),
        )
        .collect();
    remove_stale(&root, &keep);
    let mut registry = registry().lock().map_err(|_| {
        LocationError::new(&remote.url, "the registry of remote artifacts was poisoned")
    })?;
    for (i, rel) in artifacts.iter().enumerate() {
        let url = if rel.is_empty() {
            remote.url.clone()
        } else {
            format!("{}/{rel}", remote.url)
        };
        registry.insert(
            root.join(rel),
            Arc::new(RemoteArtifact {
                url,
                remote: remote.clone(),
                tables: tables[i].clone(),
                parts: parts[i],
            }),
        );
    }
    Ok(Mirror {
        root,
        artifacts: artifacts.len(),
        fetched,
    })
}

/// Remove the files beneath `root` that are not in `keep` (objects deleted or moved since the
/// last mirror), so that nothing stale is taken for evidence.
fn remove_stale(root: &Path, keep: &BTreeSet<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        // Another process's download in progress (a `.tmp…` beside its target) is not ours.
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        match entry.file_type() {
            Ok(t) if t.is_dir() => remove_stale(&path, keep),
            Ok(_) if !keep.contains(&path) => {
                let _ = std::fs::remove_file(&path);
            }
            _ => {}
        }
    }
}

/// A document given as a URL (a manifest, a plan, a campaign file), fetched into the mirror;
/// its local copy's path. Documents a campaign file names are fetched by the caller with
/// [`Url::join`] on the campaign's URL, so they keep their relative layout.
pub async fn fetch_document(remote: &Remote) -> Result<PathBuf, LocationError> {
    let key = remote.prefix.clone();
    let Some(meta) = remote.head(&key).await? else {
        return Err(LocationError::new(&remote.url, "no such object"));
    };
    let o = ObjectRef::new(remote, &meta);
    let path = local_path(&mirror_base(remote), &key);
    fetch_to(remote, &o, &path).await?;
    Ok(path)
}

/// A local copy of a remote artifact's table, beside its `run.json` in the mirror (fetched
/// unless a current copy is there): what a reader of files opens (`anvil verify`'s polars,
/// `anvil validate`'s page-by-page check).
pub async fn cached_table(
    artifact: &RemoteArtifact,
    table: Table,
) -> Result<PathBuf, LocationError> {
    let remote = &artifact.remote;
    let Some(o) = &artifact.tables[table as usize] else {
        return Err(LocationError::object(
            &artifact.url,
            artifact.file_url(table.file_name()),
            "missing: every artifact has requests.parquet, events.parquet and scrapes.parquet (and, recorded since telemetry, telemetry.parquet)",
        ));
    };
    let path = local_path(&mirror_base(remote), &o.key);
    fetch_to(remote, o, &path).await?;
    Ok(path)
}

/// What `push` uploaded.
#[derive(Debug, Clone, Default)]
pub struct Pushed {
    pub artifacts: usize,
    pub files: usize,
    pub bytes: u64,
    /// Where the folder went (the destination URL, with the folder's name when the
    /// destination ended in `/`).
    pub url: String,
}

/// Upload the folder `dir` beneath `dest`: to `dest/<dir's name>/` when `dest_text` ends in
/// `/`, else to `dest` itself. Every artifact beneath `dir` must be finished and valid
/// ([`crate::artifact::validate`]); a run still being recorded (status `running`) or damaged
/// one is refused before anything is uploaded. Each artifact's tables go first and its
/// `run.json` last, so a reader never takes a half-uploaded run for a whole one; hidden
/// files and folders (`.superseded/`, locks) stay behind.
pub async fn push(dir: &Path, dest_text: &str, dest: &Remote) -> Result<Pushed, LocationError> {
    let dir_text = dir.display().to_string();
    let local_err = |problem: String| LocationError::new(&dir_text, problem);
    if !dir.is_dir() {
        return Err(local_err(if dir.exists() {
            "is not a folder: give an artifact folder or a campaign folder".to_owned()
        } else {
            "does not exist".to_owned()
        }));
    }
    let mut files = Vec::new();
    walk(dir, dir, &mut files).map_err(|e| local_err(format!("cannot be listed: {e}")))?;
    // Artifact folders (relative), and every other file.
    let artifact_dirs: BTreeSet<PathBuf> = files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n == RUN_JSON))
        .filter_map(|f| f.parent().map(Path::to_owned))
        .collect();
    if artifact_dirs.is_empty() {
        return Err(local_err(
            "holds no artifact (a folder with run.json): nothing to push".to_owned(),
        ));
    }
    let mut refused = Vec::new();
    for rel in &artifact_dirs {
        let abs = dir.join(rel);
        let run_path = abs.join(RUN_JSON);
        match RunJson::read(&run_path) {
            Ok(run) if run.status == Status::Running => refused.push(format!(
                "{}: status `running`: the run is still being recorded (or was killed: \
                 `anvil-capture recover {}`); push it when it has finished",
                abs.display(),
                abs.display()
            )),
            Ok(_) => {
                if let Err(e) = crate::artifact::validate(&abs) {
                    refused.push(format!("{e}"));
                }
            }
            Err(e) => refused.push(format!("{e}")),
        }
    }
    if !refused.is_empty() {
        return Err(local_err(format!(
            "nothing was uploaded; {} artifact(s) cannot be pushed:\n  {}",
            refused.len(),
            refused.join("\n  ")
        )));
    }
    let name = dir
        .canonicalize()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let base_rel = if dest_text.ends_with('/') && !name.is_empty() {
        name
    } else {
        String::new()
    };
    let key_of = |rel: &Path| {
        let mut text = base_rel.clone();
        for c in rel.components() {
            if !text.is_empty() {
                text.push('/');
            }
            text.push_str(&c.as_os_str().to_string_lossy());
        }
        dest.child(&text)
    };
    let is_run_json = |f: &PathBuf| f.file_name().is_some_and(|n| n == RUN_JSON);
    let (run_jsons, others): (Vec<&PathBuf>, Vec<&PathBuf>) =
        files.iter().partition(|f| is_run_json(f));
    // Every table and side file first; then the run.json files, each after its tables.
    let uploads = |rels: &[&PathBuf]| -> Vec<(PathBuf, ObjPath)> {
        rels.iter()
            .map(|rel| (dir.join(rel), key_of(rel)))
            .collect()
    };
    let mut bytes = upload_all(dest, uploads(&others)).await?;
    bytes += upload_all(dest, uploads(&run_jsons)).await?;
    let url = if base_rel.is_empty() {
        dest.url.clone()
    } else {
        format!("{}/{base_rel}", dest.url)
    };
    Ok(Pushed {
        artifacts: artifact_dirs.len(),
        files: others.len() + run_jsons.len(),
        bytes,
        url,
    })
}

/// Upload each file to its key, a few at a time; the bytes sent.
async fn upload_all(dest: &Remote, files: Vec<(PathBuf, ObjPath)>) -> Result<u64, LocationError> {
    futures::stream::iter(files.iter().map(|(path, key)| dest.put_file(path, key)))
        .buffer_unordered(IN_FLIGHT / 4)
        .try_fold(0u64, |n, b| async move { Ok(n + b) })
        .await
}

/// Every file beneath `dir`, relative to `root`, hidden files and folders skipped and
/// symbolic links to folders not followed.
fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.path());
    for entry in entries {
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let kind = entry.file_type()?;
        if kind.is_dir() {
            walk(root, &path, out)?;
        } else if path.is_file() {
            out.push(path.strip_prefix(root).unwrap_or(&path).to_owned());
        }
    }
    Ok(())
}

/// An object read as a Parquet file: byte ranges fetched through the store, the footer
/// read knowing the object's size (one ranged request for a footer under 64 KiB).
#[derive(Debug, Clone)]
pub struct ObjectFile {
    store: Arc<dyn ObjectStore>,
    key: ObjPath,
    size: u64,
    /// The whole object, when it was read at once ([`ObjectFile::read_whole`]).
    whole: Option<Bytes>,
}

impl ObjectFile {
    pub fn new(store: Arc<dyn ObjectStore>, object: &ObjectRef) -> Self {
        Self {
            store,
            key: object.key.clone(),
            size: object.size,
            whole: None,
        }
    }

    /// The object read with one GET, its footer and pages then served from memory: for a
    /// small table read whole anyway, one request instead of a footer's and the pages'.
    pub async fn read_whole(
        store: Arc<dyn ObjectStore>,
        object: &ObjectRef,
    ) -> object_store::Result<Self> {
        let whole = store.get(&object.key).await?.bytes().await?;
        Ok(Self {
            size: whole.len() as u64,
            whole: Some(whole),
            ..Self::new(store, object)
        })
    }

    /// `range` of the object in memory, when it is there.
    fn held(&self, range: &std::ops::Range<u64>) -> Option<parquet::errors::Result<Bytes>> {
        let whole = self.whole.as_ref()?;
        let (start, end) = (
            usize::try_from(range.start).ok()?,
            usize::try_from(range.end).ok()?,
        );
        Some(if start <= end && end <= whole.len() {
            Ok(whole.slice(start..end))
        } else {
            Err(parquet::errors::ParquetError::EOF(format!(
                "bytes {start}..{end} of an object of {} bytes",
                whole.len()
            )))
        })
    }
}

fn parquet_error(e: object_store::Error) -> parquet::errors::ParquetError {
    parquet::errors::ParquetError::External(Box::new(e))
}

impl parquet::arrow::async_reader::AsyncFileReader for ObjectFile {
    fn get_bytes(
        &mut self,
        range: std::ops::Range<u64>,
    ) -> futures::future::BoxFuture<'_, parquet::errors::Result<Bytes>> {
        use futures::{FutureExt, TryFutureExt};
        if let Some(held) = self.held(&range) {
            return futures::future::ready(held).boxed();
        }
        self.store
            .get_range(&self.key, range)
            .map_err(parquet_error)
            .boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<std::ops::Range<u64>>,
    ) -> futures::future::BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        use futures::FutureExt;
        async move {
            if self.whole.is_some() {
                return ranges.iter().filter_map(|r| self.held(r)).collect();
            }
            self.store
                .get_ranges(&self.key, &ranges)
                .await
                .map_err(parquet_error)
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a parquet::arrow::arrow_reader::ArrowReaderOptions>,
    ) -> futures::future::BoxFuture<
        'a,
        parquet::errors::Result<Arc<parquet::file::metadata::ParquetMetaData>>,
    > {
        use futures::FutureExt;
        async move {
            let size = self.size;
            let metadata = parquet::file::metadata::ParquetMetaDataReader::new()
                .with_arrow_reader_options(options)
                .with_prefetch_hint(Some(64 * 1024))
                .load_and_finish(self, size)
                .await?;
            Ok(Arc::new(metadata))
        }
        .boxed()
    }
}
