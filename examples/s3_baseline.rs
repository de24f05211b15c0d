//! The plain object-store client the remote-artifact benchmark measures anvil against
//! (`just bench-remote`, BENCHMARKS.md): the same object_store client and server, none of
//! anvil's work.
//!
//! ```text
//! s3_baseline ranges URL RANGES_JSON [--concurrency N] [--coalesce]
//! s3_baseline open URL [--concurrency N]
//! ```
//!
//! - `ranges`: GET each byte range of RANGES_JSON (`[{"key": "...", "ranges": [[start, end],
//!   ...]}, ...]`, keys relative to URL's bucket), N requests in flight (default 2), one GET
//!   per range: what a ranged-GET loop reading the bytes a query reads costs against the server.
//!   With `--coalesce`, each object's ranges through object_store's `get_ranges` (ranges less
//!   than 1 MiB apart merged into one GET, as a Parquet reader's requests are).
//! - `open`: list URL's prefix, GET every `run.json` whole and every `.parquet` object's footer
//!   (its last 64 KiB, and the rest of the metadata when longer), N at a time (default 16):
//!   the raw list-and-get under opening a prefix of artifacts.
//!
//! Prints one JSON line: `{"bytes": B, "requests": R, "objects": O, "seconds": S}` (R is 0
//! where object_store decides it).
//! Credentials and endpoint from the `AWS_*` variables, as anvil takes them.

use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

/// Bytes read from the end of a Parquet object at first.
const FOOTER_HINT: u64 = 64 << 10;

type Error = Box<dyn std::error::Error + Send + Sync>;

struct Args {
    mode: String,
    url: String,
    ranges: Option<String>,
    concurrency: Option<usize>,
    coalesce: bool,
}

fn parse_args() -> Result<Args, Error> {
    let mut it = std::env::args().skip(1);
    let usage = "usage: s3_baseline ranges URL RANGES_JSON [--concurrency N] [--coalesce] | open URL [--concurrency N]";
    let mode = it.next().ok_or(usage)?;
    let url = it.next().ok_or(usage)?;
    let ranges = if mode == "ranges" {
        Some(it.next().ok_or(usage)?)
    } else if mode == "open" {
        None
    } else {
        return Err(usage.into());
    };
    let (mut concurrency, mut coalesce) = (None, false);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--concurrency" => concurrency = Some(it.next().ok_or(usage)?.parse()?),
            "--coalesce" => coalesce = true,
            _ => return Err(format!("unknown argument {a}; {usage}").into()),
        }
    }
    Ok(Args {
        mode,
        url,
        ranges,
        concurrency,
        coalesce,
    })
}

#[derive(Default)]
struct Tally {
    bytes: u64,
    requests: u64,
    objects: u64,
}

async fn ranges(
    store: &dyn ObjectStore,
    file: &str,
    n: usize,
    coalesce: bool,
) -> Result<Tally, Error> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
    let wanted: serde_json::Value = serde_json::from_str(&text)?;
    let mut gets = Vec::new();
    for object in wanted.as_array().ok_or("RANGES_JSON: expected an array")? {
        let key = Path::from(object["key"].as_str().ok_or("RANGES_JSON: key")?);
        for r in object["ranges"].as_array().ok_or("RANGES_JSON: ranges")? {
            let (s, e) = (r[0].as_u64(), r[1].as_u64());
            gets.push((key.clone(), s.ok_or("range")?..e.ok_or("range")?));
        }
    }
    let objects = wanted.as_array().map_or(0, Vec::len) as u64;
    if coalesce {
        // object_store's own coalescing (ranges less than 1 MiB apart merged, 10 GETs in
        // flight per object), the objects N at a time.
        let mut by_key: Vec<(Path, Vec<std::ops::Range<u64>>)> = Vec::new();
        for (key, range) in gets {
            match by_key.last_mut() {
                Some((k, ranges)) if *k == key => ranges.push(range),
                _ => by_key.push((key, vec![range])),
            }
        }
        let sizes: Vec<u64> = futures::stream::iter(by_key)
            .map(|(key, ranges)| async move {
                let got = store.get_ranges(&key, &ranges).await?;
                Ok::<u64, object_store::Error>(got.iter().map(|b| b.len() as u64).sum())
            })
            .buffer_unordered(n)
            .try_collect()
            .await?;
        return Ok(Tally {
            bytes: sizes.iter().sum(),
            requests: 0,
            objects,
        });
    }
    let sizes: Vec<u64> =
        futures::stream::iter(gets)
            .map(|(key, range)| async move {
                store.get_range(&key, range).await.map(|b| b.len() as u64)
            })
            .buffer_unordered(n)
            .try_collect()
            .await?;
    Ok(Tally {
        bytes: sizes.iter().sum(),
        requests: sizes.len() as u64,
        objects,
    })
}

async fn open(store: &dyn ObjectStore, prefix: &Path, n: usize) -> Result<Tally, Error> {
    let listed: Vec<_> = store.list(Some(prefix)).try_collect().await?;
    let wanted: Vec<_> = listed
        .into_iter()
        .filter(|m| {
            let name = m.location.filename().unwrap_or_default();
            name == "run.json" || name.ends_with(".parquet")
        })
        .collect();
    let objects = wanted.len() as u64;
    let tallies: Vec<(u64, u64)> = futures::stream::iter(wanted)
        .map(|meta| async move {
            if meta.location.filename() == Some("run.json") {
                let bytes = store.get(&meta.location).await?.bytes().await?;
                return Ok::<_, object_store::Error>((bytes.len() as u64, 1));
            }
            // One suffix GET of 64 KiB, as a Parquet reader with a metadata size hint makes;
            // a second only when the footer is longer.
            let size = meta.size;
            let tail = store
                .get_range(&meta.location, size.saturating_sub(FOOTER_HINT)..size)
                .await?;
            let n = tail.len();
            let len = u64::from(u32::from_le_bytes([
                tail[n - 8],
                tail[n - 7],
                tail[n - 6],
                tail[n - 5],
            ]));
            if len + 8 <= n as u64 {
                return Ok((n as u64, 1));
            }
            let rest = store
                .get_range(&meta.location, size - 8 - len..size - n as u64)
                .await?;
            Ok((n as u64 + rest.len() as u64, 2))
        })
        .buffer_unordered(n)
        .try_collect()
        .await?;
    Ok(Tally {
        bytes: tallies.iter().map(|t| t.0).sum(),
        requests: tallies.iter().map(|t| t.1).sum::<u64>() + 1,
        objects,
    })
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args = parse_args()?;
    let url = url::Url::parse(&args.url)?;
    let store = AmazonS3Builder::from_env().with_url(&args.url).build()?;
    let started = Instant::now();
    let tally = match args.mode.as_str() {
        "ranges" => {
            let file = args.ranges.as_deref().unwrap_or_default();
            ranges(&store, file, args.concurrency.unwrap_or(2), args.coalesce).await?
        }
        _ => {
            let prefix = Path::from(url.path().trim_matches('/'));
            open(&store, &prefix, args.concurrency.unwrap_or(16)).await?
        }
    };
    println!(
        "{{\"bytes\": {}, \"requests\": {}, \"objects\": {}, \"seconds\": {:.6}}}",
        tally.bytes,
        tally.requests,
        tally.objects,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
