//! Finding the artifacts to query: every folder holding `run.json` beneath each `--data`
//! directory, with the Parquet files of each table (the final file, or the complete part
//! files of a run still being recorded). A folder that mirrors a remote artifact
//! ([`crate::location::mirror`]) is opened where its tables are: their footers and the
//! requests table are read through the object store, with the checks of a local one.

use std::fs;
use std::path::{Path, PathBuf};

use crate::artifact::{RUN_JSON, RunJson, Table};

use super::QueryError;

/// One artifact folder and the files of its tables.
#[derive(Debug, Clone)]
pub struct ArtifactSource {
    /// The folder (for a remote artifact, its local mirror holding `run.json`).
    pub dir: PathBuf,
    /// Where the artifact is, as messages and the `runs.dir` column name it: the folder, or
    /// the remote artifact's URL.
    pub location: String,
    pub run: RunJson,
    /// Parquet files per table, in [`Table::ALL`] order (none for a remote artifact: see
    /// `remote`).
    pub files: [Vec<PathBuf>; 4],
    /// The remote artifacts (one, or a run group's remote shards) whose tables are objects.
    #[cfg(feature = "object-store")]
    pub remote: Vec<std::sync::Arc<crate::location::RemoteArtifact>>,
    /// The shards of a run driven from several client hosts, by index (empty for a run
    /// from one host): this source is then their union, one logical run.
    pub shards: Vec<ShardSource>,
    /// A remote shard's measured request indices, read with its requests table when it was
    /// opened (so the group's check needs no second read); empty otherwise.
    pub measured: Vec<u32>,
}

/// One shard of a logical run: where it is and what it recorded about itself.
#[derive(Debug, Clone)]
pub struct ShardSource {
    pub location: String,
    pub run: RunJson,
}

impl ArtifactSource {
    /// The files of `table`.
    pub fn files(&self, table: Table) -> &[PathBuf] {
        &self.files[table as usize]
    }

    /// The artifact with its tables as local files, for a reader that opens files itself
    /// (`anvil verify`'s polars): itself, or for a remote artifact a copy whose files are
    /// cached copies of its tables (fetched unless a current copy is cached).
    pub fn localized(&self) -> Result<ArtifactSource, QueryError> {
        let mut local = self.clone();
        #[cfg(feature = "object-store")]
        for remote in std::mem::take(&mut local.remote) {
            for table in Table::ALL {
                if table.optional() && remote.tables[table as usize].is_none() {
                    continue;
                }
                let path = crate::location::block_on(crate::location::cached_table(&remote, table))
                    .map_err(|e| QueryError::Artifact {
                        dir: self.location.clone().into(),
                        message: e.to_string(),
                    })?;
                local.files[table as usize].push(path);
            }
        }
        Ok(local)
    }

    /// The requests table's files as local files (a remote one's cached copy).
    fn localized_requests(&self) -> Result<Vec<PathBuf>, QueryError> {
        let mut files = self.files(Table::Requests).to_vec();
        #[cfg(feature = "object-store")]
        for remote in &self.remote {
            files.push(
                crate::location::block_on(crate::location::cached_table(remote, Table::Requests))
                    .map_err(|e| QueryError::Artifact {
                    dir: self.location.clone().into(),
                    message: e.to_string(),
                })?,
            );
        }
        Ok(files)
    }

    /// Read `dir/run.json`, list the table files and check them with the checks of `anvil
    /// validate` ([`crate::artifact::validate`]), so that nothing computes figures over a
    /// damaged or mixed artifact: a finished artifact is validated whole (run.json and its
    /// fingerprint, each table's footer, version, columns and run id, the counts); a run still
    /// being recorded (its tables only in `*.parts`) has run.json and every part file checked.
    pub fn open(dir: &Path) -> Result<Self, QueryError> {
        #[cfg(feature = "object-store")]
        if let Some(remote) = crate::location::remote_artifact(dir) {
            return crate::location::block_on(remote::open(dir, remote));
        }
        let refused = |e: crate::artifact::ArtifactError| QueryError::Artifact {
            dir: dir.to_owned(),
            message: e.to_string(),
        };
        let run_path = dir.join(RUN_JSON);
        let run = RunJson::read(&run_path).map_err(refused)?;
        let files = Table::ALL.map(|table| table_files(dir, table));
        let finished = Table::ALL
            .iter()
            .filter(|table| !table.optional())
            .all(|table| dir.join(table.file_name()).is_file());
        // Only a run whose run.json says it is still being recorded is read from its parts; a
        // finished one is validated whole (a missing table with an empty parts folder beside
        // it is a damaged artifact, not a live one).
        let recording = !finished
            && run.status == crate::artifact::Status::Running
            && Table::ALL
                .iter()
                .any(|table| dir.join(table.parts_dir_name()).is_dir());
        if recording && !crate::artifact::files::writer_alive(dir) {
            // Killed and not yet recovered: refused as `anvil validate` refuses it.
            return Err(QueryError::Artifact {
                dir: dir.to_owned(),
                message: format!(
                    "{}: status: is `running` but no recorder is writing it (it was killed): run \
                     `anvil-capture recover {}`, then read it",
                    run_path.display(),
                    dir.display()
                ),
            });
        }
        if recording {
            run.check_recorded(&run_path).map_err(refused)?;
            for path in files.iter().flatten() {
                let table = crate::artifact::open_table(path).map_err(refused)?;
                table.check_run(&run.run_id).map_err(refused)?;
            }
        } else {
            crate::artifact::validate(dir).map_err(refused)?;
        }
        Ok(Self {
            dir: dir.to_owned(),
            location: dir.display().to_string(),
            run,
            files,
            #[cfg(feature = "object-store")]
            remote: Vec::new(),
            shards: Vec::new(),
            measured: Vec::new(),
        })
    }
}

/// The final `<table>.parquet` if present; otherwise the complete parts
/// (`<table>.parts/*.parquet`, never the `_*.tmp` being written), in name order.
fn table_files(dir: &Path, table: Table) -> Vec<PathBuf> {
    let final_file = dir.join(table.file_name());
    if final_file.is_file() {
        return vec![final_file];
    }
    let mut parts: Vec<PathBuf> = fs::read_dir(dir.join(table.parts_dir_name()))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "parquet")
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| !n.starts_with('_'))
        })
        .collect();
    parts.sort();
    parts
}

/// Every artifact folder at or beneath each of `roots`, sorted by path. A root that does
/// not exist is an error; a root without artifacts gives none.
pub fn find_artifacts(roots: &[PathBuf]) -> Result<Vec<ArtifactSource>, QueryError> {
    let mut dirs = Vec::new();
    for root in roots {
        if !root.is_dir() {
            return Err(QueryError::DataDir {
                dir: root.clone(),
                problem: if root.exists() {
                    "is not a directory".to_owned()
                } else {
                    "does not exist".to_owned()
                },
            });
        }
        collect_dirs(root, &mut dirs).map_err(|(dir, e)| QueryError::DataDir {
            dir,
            problem: format!("cannot be read: {e}"),
        })?;
    }
    dirs.sort();
    dirs.dedup();
    let sources = logical_runs(open_all(&dirs)?)?;
    let mut seen = std::collections::BTreeMap::new();
    for s in &sources {
        if let Some(first) = seen.insert(s.run.run_id.clone(), s.location.clone()) {
            return Err(QueryError::DuplicateRun {
                run_id: s.run.run_id.clone(),
                first: first.into(),
                second: s.location.clone().into(),
            });
        }
    }
    Ok(sources)
}

/// The artifacts with the shards of each run group put together as one logical run (see
/// [`crate::artifact::shard`]): every shard of the group once, every measured request index
/// of the cell exactly once, the same workload, arm and cell. An incomplete or inconsistent
/// group is refused, naming the shards.
fn logical_runs(sources: Vec<ArtifactSource>) -> Result<Vec<ArtifactSource>, QueryError> {
    let mut out = Vec::with_capacity(sources.len());
    let mut groups: std::collections::BTreeMap<String, Vec<ArtifactSource>> = Default::default();
    for s in sources {
        if s.run.shard.is_some() {
            groups.entry(s.run.run_id.clone()).or_default().push(s);
        } else {
            out.push(s);
        }
    }
    for (group, mut shards) in groups {
        shards.sort_by_key(|s| s.run.shard.as_ref().map_or(0, |x| x.index));
        out.push(union(&group, shards)?);
    }
    out.sort_by(|a, b| a.dir.cmp(&b.dir));
    Ok(out)
}

/// One logical run of a run group's shards (sorted by index).
fn union(group: &str, shards: Vec<ArtifactSource>) -> Result<ArtifactSource, QueryError> {
    use crate::artifact::Status;
    let first = &shards[0];
    let of = first.run.shard.as_ref().map_or(1, |x| x.of);
    let parent = first
        .dir
        .parent()
        .map_or_else(|| first.dir.clone(), std::path::Path::to_owned);
    let location = match first.location.rsplit_once('/') {
        Some((up, _))
            if shards
                .iter()
                .all(|s| s.location.starts_with(&format!("{up}/"))) =>
        {
            up.to_owned()
        }
        _ => first.location.clone(),
    };
    let refused = |problems: Vec<String>| QueryError::Artifact {
        dir: location.clone().into(),
        message: format!(
            "run group `{group}` (shards {}) is not one whole run: {}",
            shards
                .iter()
                .map(|s| s.location.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            problems.join("; ")
        ),
    };
    let mut problems = Vec::new();
    for s in &shards[1..] {
        let (a, b) = (&first.run, &s.run);
        if b.shard.as_ref().map(|x| x.of) != Some(of) {
            problems.push(format!("{} says a different shard count", s.location));
        }
        let instant = |r: &RunJson| r.shard.as_ref().map(|x| x.start_at_utc.clone());
        if instant(a) != instant(b) {
            problems.push(format!(
                "{} started from another --start-at than {}: their times are not one timeline",
                s.location, first.location
            ));
        }
        let replicas = |r: &RunJson| -> Vec<String> {
            r.topology.endpoints.iter().map(|e| e.url.clone()).collect()
        };
        if replicas(a) != replicas(b) {
            problems.push(format!(
                "{} was given other --endpoint replicas (or another order) than {}: its `replica` \
                 numbers name other servers",
                s.location, first.location
            ));
        }
        if (
            &a.campaign_id,
            &a.arm.name,
            &a.cell_id,
            &a.workload_fingerprint,
        ) != (
            &b.campaign_id,
            &b.arm.name,
            &b.cell_id,
            &b.workload_fingerprint,
        ) {
            problems.push(format!(
                "{} records another campaign, arm, cell or workload than {}",
                s.location, first.location
            ));
        }
    }
    let mut measured = Vec::new();
    for s in &shards {
        measured.extend(measured_indices(s)?);
    }
    let present: Vec<(u32, String)> = shards
        .iter()
        .map(|s| {
            (
                s.run.shard.as_ref().map_or(0, |x| x.index),
                s.location.clone(),
            )
        })
        .collect();
    problems.extend(crate::artifact::shard::group_problems(
        of,
        &present,
        first.run.workload.total_requests,
        &measured,
    ));
    if !problems.is_empty() {
        return Err(refused(problems));
    }
    // The union: counts summed, the worst status (with each shard's reason, named), the
    // last end.
    let mut run = first.run.clone();
    let mut files: [Vec<PathBuf>; 4] = Default::default();
    let rank = |s: Status| match s {
        Status::Complete => 0,
        Status::Interrupted => 1,
        Status::Failed => 2,
        Status::Running => 3,
    };
    let mut reasons = Vec::new();
    run.counts = Default::default();
    for s in &shards {
        let c = &s.run.counts;
        let t = &mut run.counts;
        t.requests_measured += c.requests_measured;
        t.requests_warmup += c.requests_warmup;
        t.requests_calibration += c.requests_calibration;
        t.succeeded += c.succeeded;
        t.events += c.events;
        t.scrapes += c.scrapes;
        if let Some(n) = c.telemetry {
            *t.telemetry.get_or_insert(0) += n;
        }
        t.channel_full += c.channel_full;
        for (o, n) in &c.failed {
            *t.failed.entry(*o).or_default() += n;
        }
        if rank(s.run.status) > rank(run.status) {
            run.status = s.run.status;
        }
        if let Some(r) = &s.run.status_reason {
            let index = s.run.shard.as_ref().map_or(0, |x| x.index);
            reasons.push(format!("shard {index}/{of}: {r}"));
        }
        if s.run.ended_utc > run.ended_utc {
            run.ended_utc.clone_from(&s.run.ended_utc);
        }
        for table in Table::ALL {
            files[table as usize].extend(s.files(table).iter().cloned());
        }
    }
    run.status_reason = (!reasons.is_empty()).then(|| reasons.join("; "));
    Ok(ArtifactSource {
        dir: parent,
        location,
        run,
        files,
        #[cfg(feature = "object-store")]
        remote: shards
            .iter()
            .flat_map(|s| s.remote.iter().cloned())
            .collect(),
        shards: shards
            .into_iter()
            .map(|s| ShardSource {
                location: s.location,
                run: s.run,
            })
            .collect(),
        measured: Vec::new(),
    })
}

/// The measured request indices a shard recorded.
fn measured_indices(shard: &ArtifactSource) -> Result<Vec<u32>, QueryError> {
    if !shard.measured.is_empty() {
        return Ok(shard.measured.clone());
    }
    let local = shard.localized_requests()?;
    let mut out = Vec::new();
    for path in &local {
        out.extend(
            crate::artifact::reader::measured_indices(path).map_err(|e| QueryError::Artifact {
                dir: shard.location.clone().into(),
                message: e.to_string(),
            })?,
        );
    }
    Ok(out)
}

/// Open each of `dirs`, in order: local folders one by one, remote artifacts a few at a
/// time (each needs a few requests to the store).
fn open_all(dirs: &[PathBuf]) -> Result<Vec<ArtifactSource>, QueryError> {
    #[cfg(feature = "object-store")]
    if dirs
        .iter()
        .any(|d| crate::location::remote_artifact(d).is_some())
    {
        use futures::{StreamExt, TryStreamExt};
        return crate::location::block_on(
            futures::stream::iter(dirs.iter().map(|d| async move {
                match crate::location::remote_artifact(d) {
                    Some(remote) => remote::open(d, remote).await,
                    None => ArtifactSource::open(d),
                }
            }))
            .buffered(remote::IN_FLIGHT)
            .try_collect(),
        );
    }
    dirs.iter().map(|d| ArtifactSource::open(d)).collect()
}

/// Whether a folder is hidden (its name starts with `.`): not searched for artifacts or
/// evidence. A campaign keeps the attempts it superseded there (`.superseded/`).
pub fn is_hidden(dir: &Path) -> bool {
    dir.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with('.'))
}

/// Folders holding `run.json` under `dir` (an artifact folder's own subfolders, such as its
/// `*.parts`, are not searched further).
fn collect_dirs(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), (PathBuf, std::io::Error)> {
    if dir.join(RUN_JSON).is_file() {
        out.push(dir.to_owned());
        return Ok(());
    }
    let entries = fs::read_dir(dir).map_err(|e| (dir.to_owned(), e))?;
    let mut subdirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| (dir.to_owned(), e))?;
        let path = entry.path();
        if entry.file_type().map_err(|e| (path.clone(), e))?.is_dir() {
            subdirs.push(path);
        }
    }
    subdirs.sort();
    for sub in subdirs.iter().filter(|d| !is_hidden(d)) {
        collect_dirs(sub, out)?;
    }
    Ok(())
}

#[cfg(feature = "object-store")]
mod remote {
    //! Opening a remote artifact: `run.json` from the mirror, each table's footer and the
    //! requests table through the store, checked as `anvil validate` checks a folder.

    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use futures::TryStreamExt;
    use parquet::arrow::ParquetRecordBatchStreamBuilder;
    use parquet::arrow::ProjectionMask;
    use parquet::arrow::arrow_reader::ArrowReaderOptions;

    use super::ArtifactSource;
    use crate::artifact::reader::{RequestTally, check_counts, check_footer, check_run};
    use crate::artifact::{ArtifactError, RUN_JSON, RunJson, Status, Table};
    use crate::location::{ObjectFile, ObjectRef, RemoteArtifact, scrub};
    use crate::query::QueryError;

    /// Remote artifacts opened at once.
    pub(super) const IN_FLIGHT: usize = 16;

    pub(super) async fn open(
        dir: &Path,
        remote: Arc<RemoteArtifact>,
    ) -> Result<ArtifactSource, QueryError> {
        let refused = |e: ArtifactError| QueryError::Artifact {
            dir: PathBuf::from(&remote.url),
            message: scrub(&e.to_string()),
        };
        let run_url = PathBuf::from(remote.file_url(RUN_JSON));
        let text =
            std::fs::read_to_string(dir.join(RUN_JSON)).map_err(|e| QueryError::Artifact {
                dir: PathBuf::from(&remote.url),
                message: format!("{}: the local copy cannot be read: {e}", run_url.display()),
            })?;
        let run = RunJson::parse(&text, &run_url).map_err(refused)?;
        run.check(&run_url).map_err(refused)?;
        if run.status == Status::Running {
            return Err(QueryError::Artifact {
                dir: PathBuf::from(&remote.url),
                message: format!(
                    "{}: status: is `running`: the run was uploaded while it was being recorded \
                     (`anvil push` refuses that); upload it again when it has finished",
                    run_url.display()
                ),
            });
        }
        let objects = Table::ALL.map(|t| remote.tables[t as usize].clone());
        let missing = |table: Table| {
            let hint = if remote.parts {
                "only its part files were uploaded: run `anvil-capture recover` on the local \
                 folder and push it again"
            } else {
                "every artifact has requests.parquet, events.parquet and scrapes.parquet \
                 (and, recorded since telemetry, telemetry.parquet): push the folder again"
            };
            refused(ArtifactError::Missing {
                path: PathBuf::from(remote.file_url(table.file_name())),
                hint: hint.to_owned(),
            })
        };
        let [requests, events, scrapes, telemetry] = objects;
        let requests = requests.ok_or_else(|| missing(Table::Requests))?;
        let events = events.ok_or_else(|| missing(Table::Events))?;
        let scrapes = scrapes.ok_or_else(|| missing(Table::Scrapes))?;
        let (requests_rows, tally, measured) =
            read_requests(&remote, &requests, &run.run_id).await?;
        let events_rows = footer(&remote, &events, &run.run_id).await?;
        let scrapes_rows = footer(&remote, &scrapes, &run.run_id).await?;
        let mut rows: BTreeMap<&'static str, u64> = [
            (Table::Requests.name(), requests_rows),
            (Table::Events.name(), events_rows),
            (Table::Scrapes.name(), scrapes_rows),
        ]
        .into();
        if let Some(telemetry) = &telemetry {
            let n = footer(&remote, telemetry, &run.run_id).await?;
            rows.insert(Table::Telemetry.name(), n);
        }
        let paths = Table::ALL.map(|t| PathBuf::from(remote.file_url(t.file_name())));
        check_counts(run.clone(), &run_url, &rows, &tally, &paths).map_err(refused)?;
        Ok(ArtifactSource {
            dir: dir.to_owned(),
            location: remote.url.clone(),
            run,
            files: Default::default(),
            remote: vec![remote],
            shards: Vec::new(),
            measured,
        })
    }

    /// Requests tables up to this size are read with one GET (footer and pages at once).
    const READ_WHOLE_BELOW: u64 = 16 << 20;

    /// A stream builder over `reader` (object `o`), its footer read and checked as a local
    /// table's.
    async fn builder(
        remote: &RemoteArtifact,
        o: &ObjectRef,
        reader: ObjectFile,
        run_id: &str,
    ) -> Result<ParquetRecordBatchStreamBuilder<ObjectFile>, QueryError> {
        let path = PathBuf::from(&o.url);
        let failed = |message: String| QueryError::Artifact {
            dir: PathBuf::from(&remote.url),
            message: scrub(&message),
        };
        let options = ArrowReaderOptions::new().with_skip_arrow_metadata(true);
        let builder = ParquetRecordBatchStreamBuilder::new_with_options(reader, options)
            .await
            .map_err(|e| failed(format!("{}: its footer cannot be read: {e}", o.url)))?;
        let facts = check_footer(&path, builder.metadata(), builder.schema(), o.size)
            .map_err(|e| failed(e.to_string()))?;
        check_run(&path, builder.metadata(), facts.run_id.as_deref(), run_id)
            .map_err(|e| failed(e.to_string()))?;
        Ok(builder)
    }

    /// A table's row count from its checked footer.
    async fn footer(
        remote: &RemoteArtifact,
        o: &ObjectRef,
        run_id: &str,
    ) -> Result<u64, QueryError> {
        let reader = ObjectFile::new(remote.remote.store().clone(), o);
        let b = builder(remote, o, reader, run_id).await?;
        Ok(u64::try_from(b.metadata().file_metadata().num_rows()).unwrap_or(0))
    }

    /// The requests table's row count and its tally (the columns the counts need).
    async fn read_requests(
        remote: &RemoteArtifact,
        o: &ObjectRef,
        run_id: &str,
    ) -> Result<(u64, RequestTally, Vec<u32>), QueryError> {
        let store = remote.remote.store().clone();
        let reader = if o.size < READ_WHOLE_BELOW {
            ObjectFile::read_whole(store, o)
                .await
                .map_err(|e| QueryError::Artifact {
                    dir: PathBuf::from(&remote.url),
                    message: scrub(&format!("{}: cannot be read: {e}", o.url)),
                })?
        } else {
            ObjectFile::new(store, o)
        };
        let b = builder(remote, o, reader, run_id).await?;
        let rows = u64::try_from(b.metadata().file_metadata().num_rows()).unwrap_or(0);
        let path = PathBuf::from(&o.url);
        let failed = |message: String| QueryError::Artifact {
            dir: PathBuf::from(&remote.url),
            message: scrub(&message),
        };
        let mut indices = Vec::new();
        for name in [
            "run_id",
            "request_index",
            "kind",
            "outcome",
            "events",
            "t_done_ns",
        ] {
            indices.push(
                b.schema()
                    .index_of(name)
                    .map_err(|_| failed(format!("{}: column `{name}` is missing", o.url)))?,
            );
        }
        let mask = ProjectionMask::roots(b.parquet_schema(), indices);
        let mut stream = b
            .with_projection(mask)
            .build()
            .map_err(|e| failed(format!("{}: {e}", o.url)))?;
        let mut tally = RequestTally::default();
        let mut measured = Vec::new();
        while let Some(batch) = stream
            .try_next()
            .await
            .map_err(|e| failed(format!("{}: {e}", o.url)))?
        {
            tally
                .add(&batch, &path)
                .map_err(|e| failed(e.to_string()))?;
            measured.extend(crate::artifact::reader::measured_indices_of(&batch));
        }
        if let Some(other) = tally.run_ids.iter().find(|id| **id != run_id) {
            return Err(failed(format!(
                "{}: column `run_id` holds `{other}` but run.json `run_id` is `{run_id}`",
                o.url
            )));
        }
        Ok((rows, tally, measured))
    }
}
