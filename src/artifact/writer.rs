//! The streaming artifact writer (the recovery of killed runs is [`super::recover`]).
//!
//! Parquet is only readable once its footer is written, so a table is written while the run
//! goes as a sequence of small, complete Parquet *part files* (`events.parts/000001.parquet`,
//! …). Rows are buffered in memory and rolled into a new part every `roll_interval` (1 s by
//! default) or `max_rows_per_part` rows, whichever comes first. A part is written under a
//! temporary name (`_000001.parquet.tmp`) and renamed once its footer is on disk, so every
//! `*.parquet` in a parts folder is complete and readable by another process at any time.
//! A SIGKILL therefore loses only the rows buffered since the last roll (≤ `roll_interval`
//! plus the time to encode one part).
//!
//! [`ArtifactWriter::finish`] rolls the last rows, merges each table's parts into its final
//! file (streaming part by part, so memory stays bounded by one row group), removes the parts
//! and writes the final `run.json`. [`super::recover::recover`] does the same for a killed run with whatever
//! complete parts are on disk and marks it `interrupted`. `run.json` is written with status
//! `running` at [`ArtifactWriter::create`], so recovery always has the run's metadata.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use parquet::basic::Compression;

use super::columns::EventColumns;
use super::error::{ArtifactError, Result};
use super::files::{
    LOCK_FILE, default_compression, part_file_name, release_lock, take_lock,
    write_parquet_atomically, write_run_json, writer_properties,
};
use super::merge::merge_parts;
use super::reader::RequestTally;
use super::rows::{
    EventRow, RequestRow, ScrapeRow, TelemetryRow, requests_batch, scrapes_batch, telemetry_batch,
};
use super::run::{Counts, RunJson, SCHEMA, Status, utc_now};
use super::schema::Table;
use super::{ArtifactPaths, RUN_JSON};

/// Tunables of [`ArtifactWriter`].
#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// Longest time rows stay buffered before they are written as a part file.
    pub roll_interval: Duration,
    /// Rows that force a roll of a table before `roll_interval` has passed.
    pub max_rows_per_part: usize,
    /// Parquet compression codec.
    pub compression: Compression,
}

impl Default for WriterOptions {
    fn default() -> Self {
        Self {
            roll_interval: Duration::from_secs(1),
            max_rows_per_part: 50_000,
            compression: default_compression(),
        }
    }
}

/// The string bytes of one events column that force a roll before `max_rows_per_part`: half
/// the 2 GiB an Arrow `Utf8` column can hold. An event too large for what a part already
/// holds starts the next part; only one over 2 GiB by itself is refused.
const PART_COLUMN_BYTES: usize = 1 << 30;

/// Per-table state of the writer.
#[derive(Debug)]
struct TableState {
    /// Batches appended directly or converted from row buffers, not yet in a part.
    pending: Vec<RecordBatch>,
    pending_rows: usize,
    next_part: u32,
    rows_written: u64,
}

impl TableState {
    fn new() -> Self {
        Self {
            pending: Vec::new(),
            pending_rows: 0,
            next_part: 1,
            rows_written: 0,
        }
    }
}

/// Writes one artifact while the run goes. Not thread-safe by design: it lives on the
/// recorder's writer thread, which parses events ([`EventRow::from_raw`]) and pushes rows.
/// Call [`flush_if_due`](Self::flush_if_due) at least every ~100 ms (e.g. on a channel
/// receive timeout) so rows reach disk within `roll_interval` even when the run goes quiet.
#[derive(Debug)]
pub struct ArtifactWriter {
    dir: PathBuf,
    run: RunJson,
    opts: WriterOptions,
    requests: Vec<RequestRow>,
    /// Event rows, kept as columns (reused from part to part: see [`EventColumns`]).
    events: EventColumns,
    scrapes: Vec<ScrapeRow>,
    telemetry: Vec<TelemetryRow>,
    states: [TableState; 4],
    tally: RequestTally,
    last_roll: Instant,
    /// Held for the writer's lifetime (see [`LOCK_FILE`]).
    lock: File,
}

/// Encode a row buffer's rows, then clear it: the buffer keeps its capacity from roll to roll
/// instead of growing a new vector every second.
fn encode_and_clear<T, B>(rows: &mut Vec<T>, encode: impl FnOnce(&[T]) -> B) -> B {
    let batch = encode(rows);
    rows.clear();
    batch
}

impl ArtifactWriter {
    /// Create the artifact folder (and parents) and write `run.json` with status `running`.
    /// Refuses a folder that already holds a `run.json`.
    pub fn create(dir: &Path, run: RunJson) -> Result<Self> {
        Self::with_options(dir, run, WriterOptions::default())
    }

    /// [`create`](Self::create) with explicit options.
    pub fn with_options(dir: &Path, mut run: RunJson, opts: WriterOptions) -> Result<Self> {
        if run.schema != SCHEMA {
            return Err(ArtifactError::run_json(
                dir.join(RUN_JSON),
                "schema",
                format!("must be `{SCHEMA}`, got `{}`", run.schema),
            ));
        }
        let computed = run.workload.fingerprint();
        if run.workload_fingerprint != computed {
            return Err(ArtifactError::Fingerprint {
                path: dir.join(RUN_JSON),
                stored: run.workload_fingerprint.clone(),
                computed,
            });
        }
        fs::create_dir_all(dir)
            .map_err(|e| ArtifactError::io(dir, "cannot create directory", e))?;
        let mut lock = take_lock(dir)?;
        let run_path = dir.join(RUN_JSON);
        if run_path.exists() {
            return Err(ArtifactError::run_json(
                &run_path,
                "(file)",
                "already exists: each run needs its own artifact folder (pick a new cell or run id, or move the old run away)",
            ));
        }
        for table in Table::ALL {
            let parts = dir.join(table.parts_dir_name());
            fs::create_dir_all(&parts)
                .map_err(|e| ArtifactError::io(&parts, "cannot create directory", e))?;
        }
        // Who holds the lock, for the message a concurrent `recover` prints.
        lock.set_len(0)
            .and_then(|()| writeln!(lock, "pid {}", std::process::id()))
            .map_err(|e| ArtifactError::io(dir.join(LOCK_FILE), "cannot write", e))?;
        run.status = Status::Running;
        run.ended_utc = None;
        write_run_json(dir, &run)?;
        Ok(Self {
            dir: dir.to_owned(),
            run,
            opts,
            requests: Vec::new(),
            events: EventColumns::default(),
            scrapes: Vec::new(),
            telemetry: Vec::new(),
            states: Table::ALL.map(|_| TableState::new()),
            tally: RequestTally::default(),
            last_roll: Instant::now(),
            lock,
        })
    }

    /// The artifact folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The `run.json` written at start.
    pub fn run(&self) -> &RunJson {
        &self.run
    }

    /// Rows of `table` already written to part files.
    pub fn rows_written(&self, table: Table) -> u64 {
        self.state(table).rows_written
    }

    fn state(&self, table: Table) -> &TableState {
        &self.states[table as usize]
    }

    /// Buffer one request row.
    pub fn push_request(&mut self, row: RequestRow) -> Result<()> {
        self.requests.push(row);
        if self.requests.len() >= self.opts.max_rows_per_part {
            self.roll(Table::Requests)?;
        }
        Ok(())
    }

    /// Buffer one event row.
    pub fn push_event(&mut self, row: EventRow) -> Result<()> {
        let mut pushed = self.events.push(&self.run.run_id, &row);
        if pushed.is_err() && !self.events.is_empty() {
            // Too large for what the part already holds (an event can join any number of
            // lines): write the part, and try the row alone in the next.
            self.roll(Table::Events)?;
            pushed = self.events.push(&self.run.run_id, &row);
        }
        pushed.map_err(|e| ArtifactError::BatchSchema {
            table: Table::Events.name(),
            problem: e.to_string(),
        })?;
        if self.events.len() >= self.opts.max_rows_per_part
            || self.events.largest_column_bytes() >= PART_COLUMN_BYTES
        {
            self.roll(Table::Events)?;
        }
        Ok(())
    }

    /// Buffer one scrape row.
    pub fn push_scrape(&mut self, row: ScrapeRow) -> Result<()> {
        self.scrapes.push(row);
        if self.scrapes.len() >= self.opts.max_rows_per_part {
            self.roll(Table::Scrapes)?;
        }
        Ok(())
    }

    /// Buffer one telemetry row.
    pub fn push_telemetry(&mut self, row: TelemetryRow) -> Result<()> {
        self.telemetry.push(row);
        if self.telemetry.len() >= self.opts.max_rows_per_part {
            self.roll(Table::Telemetry)?;
        }
        Ok(())
    }

    /// Buffer a ready-made batch for `table`; it must have exactly the table's schema
    /// (including `run_id`, which must equal this run's).
    pub fn append_batch(&mut self, table: Table, batch: RecordBatch) -> Result<()> {
        let expected = table.schema();
        let found = batch.schema();
        let same = expected.fields().len() == found.fields().len()
            && expected
                .fields()
                .iter()
                .zip(found.fields())
                .all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type());
        if !same {
            return Err(ArtifactError::BatchSchema {
                table: table.name(),
                problem: format!("expected {expected:?}, got {found:?}"),
            });
        }
        let batch = batch
            .with_schema(expected)
            .map_err(|e| ArtifactError::BatchSchema {
                table: table.name(),
                problem: e.to_string(),
            })?;
        if let Some(other) = batch
            .column(0)
            .as_string::<i32>()
            .iter()
            .flatten()
            .find(|id| *id != self.run.run_id)
        {
            return Err(ArtifactError::BatchSchema {
                table: table.name(),
                problem: format!("run_id `{other}` is not this run's `{}`", self.run.run_id),
            });
        }
        let state = &mut self.states[table as usize];
        state.pending_rows += batch.num_rows();
        state.pending.push(batch);
        if state.pending_rows >= self.opts.max_rows_per_part {
            self.roll(table)?;
        }
        Ok(())
    }

    /// [`append_batch`](Self::append_batch) for `requests`.
    pub fn append_requests(&mut self, batch: RecordBatch) -> Result<()> {
        self.append_batch(Table::Requests, batch)
    }

    /// [`append_batch`](Self::append_batch) for `events`.
    pub fn append_events(&mut self, batch: RecordBatch) -> Result<()> {
        self.append_batch(Table::Events, batch)
    }

    /// [`append_batch`](Self::append_batch) for `scrapes`.
    pub fn append_scrapes(&mut self, batch: RecordBatch) -> Result<()> {
        self.append_batch(Table::Scrapes, batch)
    }

    /// Write buffered rows as part files if `roll_interval` has passed since the last roll.
    /// Returns whether it rolled. Cheap when not due.
    pub fn flush_if_due(&mut self) -> Result<bool> {
        if self.last_roll.elapsed() < self.opts.roll_interval {
            return Ok(false);
        }
        self.flush()?;
        Ok(true)
    }

    /// Write every buffered row as part files now.
    pub fn flush(&mut self) -> Result<()> {
        for table in Table::ALL {
            self.roll(table)?;
        }
        self.last_roll = Instant::now();
        Ok(())
    }

    /// Move the typed row buffer of `table` into a batch in its pending list.
    fn seal_rows(&mut self, table: Table) -> Result<()> {
        let run_id = self.run.run_id.as_str();
        let batch = match table {
            Table::Requests if !self.requests.is_empty() => {
                Some(encode_and_clear(&mut self.requests, |r| {
                    requests_batch(run_id, r)
                }))
            }
            Table::Events if !self.events.is_empty() => Some(self.events.take_batch()),
            Table::Scrapes if !self.scrapes.is_empty() => {
                Some(encode_and_clear(&mut self.scrapes, |r| {
                    scrapes_batch(run_id, r)
                }))
            }
            Table::Telemetry if !self.telemetry.is_empty() => {
                Some(encode_and_clear(&mut self.telemetry, |r| {
                    telemetry_batch(run_id, r)
                }))
            }
            _ => None,
        };
        if let Some(batch) = batch {
            let batch = batch.map_err(|e| ArtifactError::BatchSchema {
                table: table.name(),
                problem: e.to_string(),
            })?;
            let state = &mut self.states[table as usize];
            state.pending_rows += batch.num_rows();
            state.pending.push(batch);
        }
        Ok(())
    }

    /// Write `table`'s buffered rows as the next part file.
    fn roll(&mut self, table: Table) -> Result<()> {
        // Event rows become the last pending batch; its memory is taken back after the write.
        let lent = table == Table::Events && !self.events.is_empty();
        self.seal_rows(table)?;
        let state = &mut self.states[table as usize];
        if state.pending_rows == 0 {
            return Ok(());
        }
        let mut batches = std::mem::take(&mut state.pending);
        state.pending_rows = 0;
        if table == Table::Requests {
            let path = self.dir.join(table.parts_dir_name());
            for b in &batches {
                self.tally.add(b, &path)?;
            }
        }
        let state = &mut self.states[table as usize];
        let path = self
            .dir
            .join(table.parts_dir_name())
            .join(part_file_name(state.next_part));
        let props = writer_properties(table, &self.run.run_id, self.opts.compression, None, None);
        // (Clones share the columns; each is dropped once written, leaving `batches` the only
        // holder of their memory.)
        let rows =
            write_parquet_atomically(&path, table, props, batches.iter().cloned().map(Ok), false)?;
        state.next_part += 1;
        state.rows_written += rows;
        if lent && let Some(batch) = batches.pop() {
            self.events.reclaim(batch);
        }
        Ok(())
    }

    /// Finish the run: write the remaining rows, merge the parts of each table into its final
    /// file, remove the parts and write the final `run.json`. `final_run` supplies the final
    /// status, reason, end time and `counts.channel_full`; the row and outcome counts are
    /// set from what was written. `final_run.status` must not be `running`.
    pub fn finish(mut self, mut final_run: RunJson) -> Result<ArtifactPaths> {
        let run_path = self.dir.join(RUN_JSON);
        if final_run.status == Status::Running {
            return Err(ArtifactError::run_json(
                &run_path,
                "status",
                "finish needs a final status (complete, interrupted or failed), not `running`",
            ));
        }
        if final_run.run_id != self.run.run_id {
            return Err(ArtifactError::run_json(
                &run_path,
                "run_id",
                format!(
                    "finish got run `{}` but this writer records run `{}`",
                    final_run.run_id, self.run.run_id
                ),
            ));
        }
        if final_run.workload != self.run.workload
            || final_run.workload_fingerprint != self.run.workload_fingerprint
        {
            return Err(ArtifactError::run_json(
                &run_path,
                "workload",
                "finish got a different workload (or fingerprint) than the run started with; the workload of a run cannot change",
            ));
        }
        self.flush()?;
        let mut counts = Counts {
            channel_full: final_run.counts.channel_full,
            ..Counts::default()
        };
        self.tally.apply_to(&mut counts);
        for table in Table::ALL {
            let merged = merge_parts(
                &self.dir,
                table,
                &self.run.run_id,
                self.opts.compression,
                false,
            )?;
            match table {
                Table::Events => counts.events = merged.rows,
                Table::Scrapes => counts.scrapes = merged.rows,
                Table::Telemetry => counts.telemetry = Some(merged.rows),
                Table::Requests => {}
            }
        }
        final_run.counts = counts;
        if final_run.ended_utc.is_none() {
            final_run.ended_utc = Some(utc_now());
        }
        write_run_json(&self.dir, &final_run)?;
        release_lock(&self.dir, self.lock)?;
        Ok(ArtifactPaths::new(&self.dir))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifact::merge::list_parts;
    use crate::artifact::recover::recover;
    use crate::artifact::run::tests::sample_run;
    use crate::artifact::{Api, Outcome, RequestKind, ScrapePhase};
    use parquet::file::properties::WriterProperties;
    use parquet::schema::types::ColumnPath;

    fn request(i: u32, outcome: Outcome, events: u32) -> RequestRow {
        RequestRow {
            request_index: i,
            kind: RequestKind::Measured,
            check: None,
            replica: 0,
            endpoint: "http://127.0.0.1:8000".into(),
            api: Api::Chat,
            model: "m".into(),
            canary: Some(crate::artifact::canary::make(1, "s", u64::from(i))),
            prompt_sha256: "00".repeat(32),
            prompt_chars: 100,
            prompt_tokens_target: 4096,
            prompt_tokens_calibrated: Some(4090),
            max_tokens: Some(512),
            request_body: Some("{}".into()),
            t_intended_ns: 0,
            t_sent_ns: Some(10),
            t_first_byte_ns: Some(20),
            t_done_ns: 30 + i64::from(i),
            http_status: Some(200),
            outcome,
            error: None,
            events,
            new_connection: false,
            resent: false,
            session: Some(crate::artifact::SessionTurn {
                session_id: i / 2,
                turn: i % 2,
                history_tokens: i.is_multiple_of(2).then_some(0),
            }),
            ignore_eos: Some(false),
            t_released_ns: Some(5),
        }
    }

    /// A realistic chat chunk of the kind vLLM / SGLang stream.
    pub(crate) fn chat_chunk(i: usize) -> String {
        format!(
            r#"{{"id":"chatcmpl-8f3a9c2b4d","object":"chat.completion.chunk","created":1764455760,"model":"qwen3.8-27b","choices":[{{"index":0,"delta":{{"content":" token{i}"}},"logprobs":null,"finish_reason":null}}]}}"#
        )
    }

    #[test]
    fn rows_roll_into_parts_by_count_and_finish_merges_them() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("c/a/cell");
        let opts = WriterOptions {
            max_rows_per_part: 10,
            ..WriterOptions::default()
        };
        let mut w = ArtifactWriter::with_options(&dir, sample_run(), opts).unwrap();
        let on_disk = RunJson::read(&dir.join(RUN_JSON)).unwrap();
        assert_eq!(on_disk.status, Status::Running);
        for i in 0..25 {
            w.push_event(EventRow::from_raw(
                0,
                i,
                i64::from(i),
                None,
                chat_chunk(i as usize).as_bytes(),
            ))
            .unwrap();
        }
        assert_eq!(
            w.rows_written(Table::Events),
            20,
            "two parts of 10 rolled by count"
        );
        let (parts, _) = list_parts(&dir, Table::Events).unwrap();
        assert_eq!(parts.len(), 2);
        w.push_request(request(0, Outcome::Ok, 25)).unwrap();
        w.push_scrape(ScrapeRow {
            replica: 0,
            t_ns: 5,
            phase: ScrapePhase::Before,
            metric: "process_start_time_seconds".into(),
            labels: String::new(),
            metric_type: String::new(),
            value: 1.0,
        })
        .unwrap();
        let mut fin = sample_run();
        fin.counts.channel_full = 3;
        let paths = w.finish(fin).unwrap();
        assert!(!dir.join("events.parts").exists());
        let run = RunJson::read(&paths.run_json).unwrap();
        assert_eq!(run.status, Status::Complete);
        assert_eq!(run.counts.events, 25);
        assert_eq!(run.counts.requests_measured, 1);
        assert_eq!(run.counts.succeeded, 1);
        assert_eq!(run.counts.scrapes, 1);
        assert_eq!(run.counts.channel_full, 3);
        let summary = crate::artifact::validate(&dir).unwrap();
        assert_eq!(summary.events, 25);
    }

    #[test]
    fn flush_if_due_waits_for_the_interval() {
        let tmp = tempfile::tempdir().unwrap();
        let opts = WriterOptions {
            roll_interval: Duration::from_millis(50),
            ..WriterOptions::default()
        };
        let mut w = ArtifactWriter::with_options(tmp.path(), sample_run(), opts).unwrap();
        w.push_event(EventRow::from_raw(0, 0, 1, None, b"[DONE]"))
            .unwrap();
        w.flush_if_due().unwrap();
        std::thread::sleep(Duration::from_millis(60));
        assert!(w.flush_if_due().unwrap());
        assert_eq!(w.rows_written(Table::Events), 1);
    }

    #[test]
    fn a_second_run_in_the_same_folder_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let w = ArtifactWriter::create(tmp.path(), sample_run()).unwrap();
        let err = ArtifactWriter::create(tmp.path(), sample_run()).unwrap_err();
        assert!(err.to_string().contains("still writing"), "{err}");
        drop(w);
        let err = ArtifactWriter::create(tmp.path(), sample_run()).unwrap_err();
        assert!(err.to_string().contains("already exists"), "{err}");
    }

    #[test]
    fn finish_refuses_running_status_and_a_stale_fingerprint_is_refused_at_create() {
        let tmp = tempfile::tempdir().unwrap();
        let mut bad = sample_run();
        bad.workload.seed += 1;
        let err = ArtifactWriter::create(&tmp.path().join("x"), bad)
            .unwrap_err()
            .to_string();
        assert!(err.contains("workload_fingerprint"), "{err}");
        let w = ArtifactWriter::create(&tmp.path().join("y"), sample_run()).unwrap();
        let mut running = sample_run();
        running.status = Status::Running;
        assert!(w.finish(running).is_err());
    }

    #[test]
    fn recover_completes_a_finish_that_was_killed_halfway() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let mut w = ArtifactWriter::create(dir, sample_run()).unwrap();
        for i in 0..5 {
            w.push_event(EventRow::from_raw(0, i, i64::from(i), None, b"[DONE]"))
                .unwrap();
        }
        w.push_request(request(0, Outcome::Ok, 5)).unwrap();
        w.flush().unwrap();
        w.push_event(EventRow::from_raw(1, 0, 9, None, b"[DONE]"))
            .unwrap();
        w.flush().unwrap();
        drop(w);
        // finish merged `requests` and `events`, then the process died.
        merge_parts(
            dir,
            Table::Requests,
            "run-0001",
            default_compression(),
            false,
        )
        .unwrap();
        merge_parts(dir, Table::Events, "run-0001", default_compression(), false).unwrap();
        assert!(!dir.join("events.parts").exists());
        let report = recover(dir).unwrap();
        assert_eq!(report.rows(Table::Events), 6);
        assert_eq!(report.rows(Table::Scrapes), 0);
        let summary = crate::artifact::validate(dir).unwrap();
        assert_eq!(summary.status, "interrupted");
        assert_eq!(
            (summary.events, summary.requests, summary.scrapes),
            (6, 1, 0)
        );
        let run = RunJson::read(&dir.join(RUN_JSON)).unwrap();
        let end = crate::artifact::run::parse_utc(run.ended_utc.as_deref().unwrap()).unwrap();
        let origin = crate::artifact::run::parse_utc(&run.clock.utc_origin).unwrap();
        assert_eq!(
            end - origin,
            30,
            "ended_utc is the last recorded time (t_done_ns 30)"
        );
    }

    #[test]
    fn recover_refuses_while_the_writer_is_alive() {
        let tmp = tempfile::tempdir().unwrap();
        let w = ArtifactWriter::create(tmp.path(), sample_run()).unwrap();
        let err = recover(tmp.path()).unwrap_err().to_string();
        let pid = format!("pid {}", std::process::id());
        assert!(err.contains("still writing") && err.contains(&pid), "{err}");
        drop(w);
        recover(tmp.path()).unwrap();
        assert!(!tmp.path().join(LOCK_FILE).exists());
    }

    #[test]
    fn a_part_gives_the_event_columns_their_memory_back() {
        let tmp = tempfile::tempdir().unwrap();
        let mut w = ArtifactWriter::create(tmp.path(), sample_run()).unwrap();
        for i in 0..100 {
            w.push_event(EventRow::from_raw(0, i, i64::from(i), None, b"{\"x\":1}"))
                .unwrap();
        }
        w.flush().unwrap();
        assert_eq!(w.rows_written(Table::Events), 100);
        assert!(
            w.events.capacity_bytes() > 0,
            "the next part allocates its columns afresh"
        );
    }

    #[test]
    fn an_event_too_large_for_the_part_starts_the_next_one() {
        let tmp = tempfile::tempdir().unwrap();
        let mut w = ArtifactWriter::create(tmp.path(), sample_run()).unwrap();
        w.events.limit = Some(150);
        let small = EventRow::from_raw(0, 0, 1, None, &[b'a'; 60]);
        let large = EventRow::from_raw(0, 1, 2, None, &[b'b'; 120]);
        w.push_event(small).unwrap();
        // 60 + 120 bytes do not fit one part of 150: the first part is written, the large
        // event goes alone into the next.
        w.push_event(large).unwrap();
        assert_eq!(w.rows_written(Table::Events), 1);
        w.flush().unwrap();
        assert_eq!(w.rows_written(Table::Events), 2);
        // Larger than a part can ever hold: refused, named, and nothing else is lost.
        let huge = EventRow::from_raw(0, 2, 3, None, &[b'c'; 200]);
        let err = w.push_event(huge).unwrap_err().to_string();
        assert!(err.contains("2 GiB") && err.contains("events"), "{err}");
        assert_eq!(w.rows_written(Table::Events), 2);
    }

    #[test]
    fn writer_is_send() {
        fn is_send<T: Send>() {}
        is_send::<ArtifactWriter>();
    }

    /// Encode cost per event of one part file, per codec. Run with
    /// `cargo test --no-default-features --lib measure_part_encode_cost -- --ignored --nocapture`.
    #[allow(clippy::print_stdout)] // an ignored measurement prints its figures
    #[test]
    #[ignore = "measurement, prints figures"]
    fn measure_part_encode_cost() {
        let tmp = tempfile::tempdir().unwrap();
        let n = 20_000usize;
        let rows: Vec<EventRow> = (0..n)
            .map(|i| {
                EventRow::from_raw(
                    (i / 300) as u32,
                    (i % 300) as u32,
                    i as i64 * 20_000,
                    None,
                    chat_chunk(i).as_bytes(),
                )
            })
            .collect();
        let parse_start = Instant::now();
        for i in 0..n {
            std::hint::black_box(crate::artifact::parse_event(None, chat_chunk(i).as_bytes()));
        }
        let parse_us = parse_start.elapsed().as_secs_f64() * 1e6 / n as f64;
        println!("parse_event: {parse_us:.2} us/event");
        let codecs = [
            ("uncompressed", Compression::UNCOMPRESSED),
            ("snappy", Compression::SNAPPY),
            (
                "zstd(1)",
                Compression::ZSTD(parquet::basic::ZstdLevel::try_new(1).unwrap()),
            ),
        ];
        let measure = |name: &str, rows: &[EventRow], props: &dyn Fn() -> WriterProperties| {
            let mut best = f64::MAX;
            let mut bytes = 0;
            for rep in 0..5 {
                let path = tmp.path().join(format!("{name}-{rep}.parquet"));
                let start = Instant::now();
                let batch = crate::artifact::rows::events_batch("run", rows).unwrap();
                write_parquet_atomically(&path, Table::Events, props(), [Ok(batch)], false)
                    .unwrap();
                best = best.min(start.elapsed().as_secs_f64());
                bytes = fs::metadata(&path).unwrap().len();
            }
            println!(
                "{name}: {:.2} us/event to build + encode + write, {:.1} bytes/event",
                best * 1e6 / n as f64,
                bytes as f64 / n as f64
            );
        };
        for (name, codec) in codecs {
            measure(name, &rows, &|| {
                writer_properties(Table::Events, "run", codec, None, None)
            });
        }
        // Dictionary encoding per column, zstd(1), over chunks whose content repeats as a
        // model's vocabulary does (a few thousand distinct tokens) rather than never.
        let vocab_rows: Vec<EventRow> = (0..n)
            .map(|i| {
                let data = chat_chunk(i * 7919 % 3000)
                    .replace("chatcmpl-8f3a9c2b4d", &format!("chatcmpl-{:010}", i / 300));
                EventRow::from_raw(
                    (i / 300) as u32,
                    (i % 300) as u32,
                    i as i64 * 20_000 + (i as i64 * 7_919) % 5_000,
                    None,
                    data.as_bytes(),
                )
            })
            .collect();
        let zstd = default_compression();
        let dictionary = |on: bool| {
            writer_properties(Table::Events, "run", zstd, None, None)
                .into_builder()
                .set_dictionary_enabled(on)
                .build()
        };
        measure(
            "vocabulary, dictionary on every column",
            &vocab_rows,
            &|| dictionary(true),
        );
        measure(
            "vocabulary, as written (writer_properties)",
            &vocab_rows,
            &|| writer_properties(Table::Events, "run", zstd, None, None),
        );
        measure(
            "vocabulary, dictionary off everywhere",
            &vocab_rows,
            &|| dictionary(false),
        );
        for off in [
            &["data", "t_ns"][..],
            &["data", "t_ns", "content_delta"][..],
        ] {
            measure(
                &format!("vocabulary, dictionary off for {}", off.join(", ")),
                &vocab_rows,
                &|| {
                    let mut b = dictionary(true).into_builder();
                    for c in off {
                        b = b.set_column_dictionary_enabled(ColumnPath::from(*c), false);
                    }
                    b.build()
                },
            );
        }
    }
}
