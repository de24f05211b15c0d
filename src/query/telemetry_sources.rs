//! The `telemetry_sources` table: one row per telemetry source each run read (run.json
//! `telemetry`; of a sharded run, the shard that read it): which GPUs were the arm's and which were not, the declared update interval,
//! the fields the source never gave, and its failed readings. The energy views take the
//! declared interval from it; `docs/artifact.md` documents its columns.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::datasource::MemTable;

use super::QueryError;
use super::source::ArtifactSource;
use crate::artifact::telemetry::TelemetrySource;

/// The table's schema.
pub fn schema() -> SchemaRef {
    let s = |name: &str, nullable| Field::new(name, DataType::Utf8, nullable);
    let i = |name: &str| Field::new(name, DataType::Int64, false);
    let f = |name: &str, nullable| Field::new(name, DataType::Float64, nullable);
    Arc::new(Schema::new(vec![
        s("run_id", false),
        s("source", false),
        s("endpoint", false),
        f("interval_s", true),
        f("every_s", false),
        s("gpus_declared", true),
        s("arm_gpus", false),
        s("other_gpus", false),
        s("missing_gpus", false),
        s("absent", false),
        i("readings"),
        i("failed_readings"),
        s("first_error", true),
    ]))
}

/// GPU indices as `0,1`.
fn list(gpus: &[u32]) -> String {
    gpus.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The table over `artifacts` (a sharded run's shards each give their own rows).
pub fn table(artifacts: &[ArtifactSource]) -> Result<MemTable, QueryError> {
    let runs = artifacts.iter().flat_map(|a| {
        let shards = a.shards.iter().map(|s| &s.run);
        let own = a.shards.is_empty().then_some(&a.run);
        own.into_iter().chain(shards)
    });
    // One row per (run, source, endpoint): a sharded run's shards share its run id, and only
    // the shard that read the source has readings.
    let mut rows: Vec<(&str, &TelemetrySource)> = Vec::new();
    for (id, t) in runs.flat_map(|run| {
        run.telemetry
            .iter()
            .flatten()
            .map(move |t| (run.run_id.as_str(), t))
    }) {
        let same = |(i, s): &(&str, &TelemetrySource)| {
            *i == id && s.source == t.source && s.endpoint == t.endpoint
        };
        match rows.iter().position(same) {
            Some(at) if rows[at].1.readings < t.readings => rows[at] = (id, t),
            Some(_) => {}
            None => rows.push((id, t)),
        }
    }
    let strings = |f: &dyn Fn(&TelemetrySource) -> String| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|(_, t)| f(t)),
        ))
    };
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|(id, _)| *id),
        )),
        strings(&|t| t.source.clone()),
        strings(&|t| t.endpoint.clone()),
        Arc::new(
            rows.iter()
                .map(|(_, t)| t.interval_s)
                .collect::<Float64Array>(),
        ),
        Arc::new(Float64Array::from_iter_values(
            rows.iter().map(|(_, t)| t.every_s),
        )),
        Arc::new(
            rows.iter()
                .map(|(_, t)| t.gpus_declared.as_deref().map(list))
                .collect::<StringArray>(),
        ),
        strings(&|t| list(&t.gpus)),
        strings(&|t| list(&t.other_gpus)),
        strings(&|t| list(&t.missing_gpus)),
        strings(&|t| t.absent.join(",")),
        Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|(_, t)| count(t.readings)),
        )),
        Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|(_, t)| count(t.failed_readings)),
        )),
        Arc::new(
            rows.iter()
                .map(|(_, t)| t.first_error.clone())
                .collect::<StringArray>(),
        ),
    ];
    let failed = |source| QueryError::Register {
        table: "telemetry_sources",
        source,
    };
    let schema = schema();
    let batch = RecordBatch::try_new(schema.clone(), columns).map_err(|e| failed(e.into()))?;
    MemTable::try_new(schema, vec![vec![batch]]).map_err(failed)
}
