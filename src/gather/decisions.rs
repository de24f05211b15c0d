//! The decisions as SQL tables: what `anvil campaign run` decided and left beside the
//! artifacts, registered into a query session so an analyst asks in SQL what the report
//! says. Today the `capacity` table: each capacity search's bracket from `capacity.json`,
//! its capacity per replica and per GPU, and goodput per GPU there with its across-run
//! interval. Columns are documented in docs/artifact.md ("`capacity`").

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::datasource::MemTable;

use crate::artifact::capacity::Side;
use crate::query::{AnvilSession, QueryError};
use crate::report::input::CapacityFound;

/// The `capacity` table's columns, in order.
pub fn capacity_schema() -> SchemaRef {
    let text = |name: &str, null: bool| Field::new(name, DataType::Utf8, null);
    let float = |name: &str| Field::new(name, DataType::Float64, true);
    let int = |name: &str| Field::new(name, DataType::Int64, true);
    Arc::new(Schema::new(vec![
        text("arm", false),
        text("status", false),
        text("vary", false),
        text("window", false),
        Field::new("target", DataType::Float64, false),
        text("slos", false),
        int("replicas"),
        int("gpus"),
        float("capacity"),
        float("capacity_per_gpu"),
        float("passing_share"),
        float("passing_low"),
        float("passing_high"),
        int("passing_requests"),
        int("passing_runs"),
        float("failing_load"),
        float("failing_share"),
        float("failing_low"),
        float("failing_high"),
        float("goodput_per_gpu_tps"),
        float("goodput_per_gpu_low"),
        float("goodput_per_gpu_high"),
        int("goodput_runs"),
        Field::new("probes", DataType::Int64, false),
        text("verdict", false),
        text("file", false),
    ]))
}

/// The `capacity` table: one row per search found.
pub fn capacity_table(found: &[CapacityFound]) -> Result<MemTable, QueryError> {
    let failed = |source| QueryError::Register {
        table: "capacity",
        source,
    };
    let schema = capacity_schema();
    let text = |f: &dyn Fn(&CapacityFound) -> String| -> ArrayRef {
        Arc::new(found.iter().map(|c| Some(f(c))).collect::<StringArray>())
    };
    let float = |f: &dyn Fn(&CapacityFound) -> Option<f64>| -> ArrayRef {
        Arc::new(found.iter().map(f).collect::<Float64Array>())
    };
    let int = |f: &dyn Fn(&CapacityFound) -> Option<i64>| -> ArrayRef {
        Arc::new(found.iter().map(f).collect::<Int64Array>())
    };
    fn passing(c: &CapacityFound) -> Option<&Side> {
        c.search.capacity?;
        c.search.bracket.as_ref()?.passing.as_ref()
    }
    fn failing(c: &CapacityFound) -> Option<&Side> {
        c.search.bracket.as_ref()?.failing.as_ref()
    }
    let columns: Vec<ArrayRef> = vec![
        text(&|c| c.search.arm.clone()),
        text(&|c| c.search.status.as_str().to_owned()),
        text(&|c| c.search.vary.as_str().to_owned()),
        text(&|c| c.search.window.as_str().to_owned()),
        Arc::new(Float64Array::from_iter_values(
            found.iter().map(|c| c.search.target),
        )),
        text(&|c| c.search.slo.join(", ")),
        int(&|c| c.search.replicas.map(i64::from)),
        int(&|c| c.search.gpus.map(i64::from)),
        float(&|c| c.search.capacity),
        float(&|c| c.search.capacity_per_gpu),
        float(&|c| passing(c).map(|s| s.share)),
        float(&|c| passing(c).map(|s| s.low)),
        float(&|c| passing(c).map(|s| s.high)),
        int(&|c| passing(c).map(|s| s.requests as i64)),
        int(&|c| passing(c).map(|s| s.runs.len() as i64)),
        float(&|c| failing(c).map(|s| s.load)),
        float(&|c| failing(c).map(|s| s.share)),
        float(&|c| failing(c).map(|s| s.low)),
        float(&|c| failing(c).map(|s| s.high)),
        float(&|c| c.search.goodput_per_gpu.as_ref().map(|g| g.mean)),
        float(&|c| c.search.goodput_per_gpu.as_ref().and_then(|g| g.low)),
        float(&|c| c.search.goodput_per_gpu.as_ref().and_then(|g| g.high)),
        int(&|c| c.search.goodput_per_gpu.as_ref().map(|g| i64::from(g.runs))),
        Arc::new(Int64Array::from_iter_values(
            found.iter().map(|c| c.search.probes.len() as i64),
        )),
        text(&|c| c.search.verdict.clone()),
        text(&|c| c.file.clone()),
    ];
    let batch = RecordBatch::try_new(schema.clone(), columns).map_err(|e| failed(e.into()))?;
    MemTable::try_new(schema, vec![vec![batch]]).map_err(failed)
}

/// Register every decision table into `session` (empty where nothing was decided, so a
/// query names its columns either way).
pub fn register(session: &AnvilSession, capacity: &[CapacityFound]) -> Result<(), QueryError> {
    session.register_decision("capacity", capacity_table(capacity)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every column of every decision table is documented in docs/artifact.md with a unit
    /// and a meaning, and nothing documented is missing.
    #[test]
    fn every_decision_column_is_documented() {
        for name in crate::query::DECISION_TABLES {
            let schema = match name {
                "capacity" => capacity_schema(),
                other => panic!("{other}: no schema here"),
            };
            let docs = crate::query::docs::table_columns(name);
            let fields: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            let documented: Vec<&str> = docs.iter().map(|d| d.name.as_str()).collect();
            assert_eq!(fields, documented, "{name}");
            assert!(
                docs.iter()
                    .all(|d| !d.unit.is_empty() && d.meaning.len() > 3)
            );
        }
    }

    #[tokio::test]
    async fn the_sample_s_searches_are_one_row_each() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/sample-data/2026-09-04-qwen38-27b-pro6000-possibility/capacity.json"
        ))
        .unwrap();
        let doc = crate::artifact::capacity::Capacity::parse(&text).unwrap();
        let found: Vec<CapacityFound> = doc
            .searches
            .into_iter()
            .map(|search| CapacityFound {
                search,
                file: "capacity.json".into(),
            })
            .collect();
        let session = AnvilSession::from_artifacts(Vec::new()).await.unwrap();
        register(&session, &found).unwrap();
        let r = session
            .query("SELECT arm, status, probes FROM capacity ORDER BY arm")
            .await
            .unwrap();
        let arms = crate::query::rows::column_str(&r, "arm").unwrap();
        assert_eq!(arms.len(), found.len());
        let listed = session.list().await.unwrap();
        let columns = crate::query::rows::column_str(&listed, "column_name").unwrap();
        assert!(
            columns.iter().any(|c| c == "capacity_per_gpu"),
            "--list omits the table"
        );
    }
}
