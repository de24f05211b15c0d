//! Read-ahead for scans of remote Parquet: a store wrapper that turns a scan's one request per
//! row group into one request per window of the object.
//!
//! A Parquet reader asks for the column chunks of one row group at a time (`get_ranges`), and
//! object_store merges chunks less than 1 MiB apart into one GET: a full scan of a 128 MB
//! events table in 1.6 MB row groups is ~80 requests, each paying the server's per-request
//! cost (latency on a cloud store; on an S3 test server, a copy of the whole object). When
//! the ranges of a call are dense (they fill at least half their span, as a scan that reads
//! most columns does), this wrapper fetches [`WINDOW`] bytes from the first of them in one GET
//! and serves the following calls that fall inside it from memory. Sparse calls (a few
//! columns of a wide table, a page index) and every other operation go to the store as they
//! are. What is held is bounded ([`HELD_BYTES`]), oldest window dropped first; a dropped
//! window is fetched again if asked for, so the bound costs requests, never correctness.

use std::collections::VecDeque;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetRange, GetResult, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

/// Bytes fetched from the start of a dense call: 4 requests for a 128 MB table.
pub const WINDOW: u64 = 32 << 20;
/// Most bytes held across windows (every object of the store together).
pub const HELD_BYTES: usize = 256 << 20;

/// A window of an object in memory.
struct Span {
    location: Path,
    start: u64,
    bytes: Bytes,
}

impl Span {
    fn slice(&self, location: &Path, range: &Range<u64>) -> Option<Bytes> {
        let end = self.start + self.bytes.len() as u64;
        (self.location == *location && range.start >= self.start && range.end <= end).then(|| {
            let from = (range.start - self.start) as usize;
            self.bytes
                .slice(from..from + (range.end - range.start) as usize)
        })
    }
}

/// `inner` with read-ahead on dense `get_ranges` calls.
pub struct ReadAhead {
    inner: Arc<dyn ObjectStore>,
    window: u64,
    limit: usize,
    held: Mutex<VecDeque<Span>>,
}

impl ReadAhead {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self::with_window(inner, WINDOW, HELD_BYTES)
    }

    /// A wrapper fetching `window` bytes per dense call and holding at most `limit` bytes.
    pub fn with_window(inner: Arc<dyn ObjectStore>, window: u64, limit: usize) -> Self {
        Self {
            inner,
            window,
            limit,
            held: Mutex::new(VecDeque::new()),
        }
    }

    /// Bytes held now.
    #[cfg(test)]
    fn held_bytes(&self) -> usize {
        self.spans().iter().map(|s| s.bytes.len()).sum()
    }

    fn spans(&self) -> std::sync::MutexGuard<'_, VecDeque<Span>> {
        // A panic while holding the lock leaves plain data behind; the spans stay valid.
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `ranges` of `location` from the windows held, if every one of them is there.
    fn held_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Option<Vec<Bytes>> {
        let spans = self.spans();
        ranges
            .iter()
            .map(|r| spans.iter().rev().find_map(|s| s.slice(location, r)))
            .collect()
    }

    fn keep(&self, span: Span) {
        let mut spans = self.spans();
        let mut total: usize = spans.iter().map(|s| s.bytes.len()).sum::<usize>();
        total += span.bytes.len();
        spans.push_back(span);
        while total > self.limit && spans.len() > 1 {
            if let Some(old) = spans.pop_front() {
                total -= old.bytes.len();
            }
        }
        if total > self.limit {
            spans.clear();
        }
    }
}

/// Whether `ranges` fill at least half of the span from the first start to the last end.
fn dense(ranges: &[Range<u64>]) -> Option<Range<u64>> {
    let start = ranges.iter().map(|r| r.start).min()?;
    let end = ranges.iter().map(|r| r.end).max()?;
    let wanted: u64 = ranges.iter().map(|r| r.end.saturating_sub(r.start)).sum();
    (end > start && wanted.saturating_mul(2) >= end - start).then_some(start..end)
}

impl fmt::Display for ReadAhead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ReadAhead({})", self.inner)
    }
}

impl fmt::Debug for ReadAhead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadAhead")
            .field("inner", &self.inner)
            .field("window", &self.window)
            .finish()
    }
}

#[async_trait]
impl ObjectStore for ReadAhead {
    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        if let Some(held) = self.held_ranges(location, ranges) {
            return Ok(held);
        }
        let Some(span) = dense(ranges) else {
            return self.inner.get_ranges(location, ranges).await;
        };
        let end = span.end.max(span.start.saturating_add(self.window));
        let options = GetOptions {
            range: Some(GetRange::Bounded(span.start..end)),
            ..GetOptions::default()
        };
        // A range past the object's end returns the rest of the object.
        let got = self.inner.get_opts(location, options).await?;
        let start = got.range.start;
        let window = Span {
            location: location.clone(),
            start,
            bytes: got.bytes().await?,
        };
        let served: Option<Vec<Bytes>> = ranges.iter().map(|r| window.slice(location, r)).collect();
        self.keep(window);
        match served {
            Some(served) => Ok(served),
            // The object ended before the ranges did: let the store report it as it would.
            None => self.inner.get_ranges(location, ranges).await,
        }
    }

    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::ObjectStoreExt;
    use object_store::memory::InMemory;
    use std::slice;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// An in-memory store that counts the reads reaching it.
    #[derive(Debug, Default)]
    struct Counted {
        store: InMemory,
        gets: AtomicUsize,
    }

    impl fmt::Display for Counted {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "Counted")
        }
    }

    #[async_trait]
    impl ObjectStore for Counted {
        async fn put_opts(&self, l: &Path, p: PutPayload, o: PutOptions) -> Result<PutResult> {
            self.store.put_opts(l, p, o).await
        }
        async fn put_multipart_opts(
            &self,
            l: &Path,
            o: PutMultipartOptions,
        ) -> Result<Box<dyn MultipartUpload>> {
            self.store.put_multipart_opts(l, o).await
        }
        async fn get_opts(&self, l: &Path, o: GetOptions) -> Result<GetResult> {
            self.gets.fetch_add(1, Ordering::SeqCst);
            self.store.get_opts(l, o).await
        }
        fn delete_stream(
            &self,
            l: BoxStream<'static, Result<Path>>,
        ) -> BoxStream<'static, Result<Path>> {
            self.store.delete_stream(l)
        }
        fn list(&self, p: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
            self.store.list(p)
        }
        async fn list_with_delimiter(&self, p: Option<&Path>) -> Result<ListResult> {
            self.store.list_with_delimiter(p).await
        }
        async fn copy_opts(&self, f: &Path, t: &Path, o: CopyOptions) -> Result<()> {
            self.store.copy_opts(f, t, o).await
        }
    }

    fn object(len: usize) -> Bytes {
        (0..len)
            .map(|i| (i % 251) as u8)
            .collect::<Vec<u8>>()
            .into()
    }

    async fn setup(window: u64, limit: usize) -> (Arc<Counted>, ReadAhead, Bytes, Path) {
        let counted = Arc::new(Counted::default());
        let bytes = object(10_000);
        let key = Path::from("run/events.parquet");
        counted.put(&key, bytes.clone().into()).await.unwrap();
        let store = ReadAhead::with_window(counted.clone(), window, limit);
        (counted, store, bytes, key)
    }

    fn run<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn a_scan_in_dense_calls_is_one_request_per_window() {
        run(async {
            let (counted, store, bytes, key) = setup(4_000, 1 << 20).await;
            let mut got = Vec::new();
            // Row groups of 1,000 bytes, each read as three adjacent column chunks.
            for group in 0..10u64 {
                let at = group * 1_000;
                let ranges = [at..at + 300, at + 300..at + 700, at + 700..at + 1_000];
                for part in store.get_ranges(&key, &ranges).await.unwrap() {
                    got.extend_from_slice(&part);
                }
            }
            assert_eq!(got, bytes.to_vec(), "the bytes served are the object's");
            // Windows from 0, 4,000 and 8,000 (the last clipped at the object's end).
            assert_eq!(counted.gets.load(Ordering::SeqCst), 3);
        });
    }

    #[test]
    fn sparse_calls_reach_the_store_as_they_are() {
        run(async {
            let (counted, store, bytes, key) = setup(4_000, 1 << 20).await;
            // 200 of 5,000 bytes: two chunks far apart, as a two-column projection reads.
            let ranges = [0..100, 4_900..5_000];
            let got = store.get_ranges(&key, &ranges).await.unwrap();
            assert_eq!(got[0], bytes.slice(0..100));
            assert_eq!(got[1], bytes.slice(4_900..5_000));
            assert_eq!(store.held_bytes(), 0, "nothing read ahead");
            // One request, as the store makes of chunks < 1 MiB apart without the wrapper.
            assert_eq!(counted.gets.load(Ordering::SeqCst), 1);
        });
    }

    #[test]
    fn what_is_held_stays_under_its_bound() {
        run(async {
            let (counted, store, bytes, key) = setup(3_000, 5_000).await;
            for at in [0u64, 3_000, 6_000] {
                let range = at..at + 500;
                let got = store
                    .get_ranges(&key, slice::from_ref(&range))
                    .await
                    .unwrap();
                assert_eq!(got[0], bytes.slice(at as usize..at as usize + 500));
                assert!(store.held_bytes() <= 5_000, "{} held", store.held_bytes());
            }
            // The first window was dropped: asking for it again fetches it again.
            let got = store
                .get_ranges(&key, slice::from_ref(&(0..500)))
                .await
                .unwrap();
            assert_eq!(got[0], bytes.slice(0..500));
            assert_eq!(counted.gets.load(Ordering::SeqCst), 4);
        });
    }

    #[test]
    fn a_range_past_the_end_is_answered_as_the_store_answers_it() {
        run(async {
            let (counted, store, _, key) = setup(4_000, 1 << 20).await;
            let past = 9_000..11_000;
            let past = slice::from_ref(&past);
            let bare = counted
                .get_ranges(&key, past)
                .await
                .map_err(|e| e.to_string());
            let wrapped = store
                .get_ranges(&key, past)
                .await
                .map_err(|e| e.to_string());
            assert_eq!(wrapped, bare);
            let missing = store
                .get_ranges(
                    &Path::from("run/missing.parquet"),
                    slice::from_ref(&(0..10)),
                )
                .await;
            assert!(
                matches!(missing, Err(object_store::Error::NotFound { .. })),
                "{missing:?}"
            );
        });
    }
}
