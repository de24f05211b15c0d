//! The DataFusion session over a set of artifacts: tables `runs`, `requests`, `events`,
//! `scrapes` (each the union over every artifact, `run_id` to join on), the anvil functions,
//! and the views of `queries/`.
//!
//! The Parquet files are scanned in place by listing tables over the explicit file list of
//! every artifact (projection and predicate pushdown; nothing is loaded up front). `runs`
//! is a small in-memory table built from the `run.json` files.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, ListBuilder, MapBuilder, RecordBatch,
    StringArray, StringBuilder,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::common::DataFusionError;
use datafusion::datasource::MemTable;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::prelude::{SessionConfig, SessionContext};

use crate::artifact::Table;
use crate::slo::Slos;

use super::catalog::AnvilSchema;
use super::source::{ArtifactSource, find_artifacts};
use super::views::VIEWS;
use super::{QueryError, functional_udf, udf};

#[cfg(feature = "distributed")]
type Workers = super::distributed::Workers;
#[cfg(not(feature = "distributed"))]
type Workers = ();

/// The base tables, in the order `--list` shows them.
pub const TABLES: [&str; 8] = [
    "runs",
    "shards",
    "slos",
    "requests",
    "events",
    "scrapes",
    "telemetry",
    "telemetry_sources",
];

/// The tables of the decisions anvil draws from the artifacts (a capacity search's
/// bracket, …): computed above the query layer (`gather/`) and registered into a session
/// with [`AnvilSession::register_decision`]; documented in docs/artifact.md like the base
/// tables, listed by `--list` when registered.
pub const DECISION_TABLES: [&str; 5] = [
    "capacity",
    "comparisons",
    "claims",
    "rule_verdicts",
    "controls",
];

/// A session over some artifacts.
pub struct AnvilSession {
    ctx: SessionContext,
    artifacts: Vec<ArtifactSource>,
    slos: Slos,
}

impl std::fmt::Debug for AnvilSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnvilSession")
            .field("artifacts", &self.artifacts.len())
            .finish()
    }
}

/// The views [`AnvilSession::open_materialized`] keeps in memory: the per-request ones every
/// figure is built from, and `counter_steps`, the scrapes' counter steps that `restarts`,
/// `spec_decode` and `spec_decode_positions` each read (a window over every counter sample:
/// computed once, the sample campaign's report takes 24 s instead of 33 s in a debug build).
pub const MATERIALIZED: &[&str] = &[
    "counter_steps",
    "request_timing",
    "request_figures",
    "request_canaries",
    "request_metrics",
];

impl AnvilSession {
    /// Open every artifact at or beneath `data_dirs` (see [`find_artifacts`]).
    pub async fn open(data_dirs: &[PathBuf]) -> Result<Self, QueryError> {
        Self::open_with(data_dirs, &Slos::none(), false).await
    }

    /// Open every artifact at or beneath `data_dirs` with the SLOs in force (the `slos`
    /// table; none leaves the SLO views empty), the per-request views kept in memory when
    /// `materialized` (see [`AnvilSession::open_materialized`]).
    pub async fn open_with(
        data_dirs: &[PathBuf],
        slos: &Slos,
        materialized: bool,
    ) -> Result<Self, QueryError> {
        let artifacts = find_artifacts(data_dirs)?;
        let materialize = if materialized { MATERIALIZED } else { &[] };
        Self::build(artifacts, slos, materialize).await
    }

    /// Like [`AnvilSession::open`], but the per-request views ([`MATERIALIZED`]) are
    /// computed once, as each is defined, and kept in memory, so that commands running many
    /// queries over them (`check`, `compare`, `report`) scan and aggregate the events once.
    /// Every view keeps its definition; only when it is evaluated changes.
    pub async fn open_materialized(data_dirs: &[PathBuf]) -> Result<Self, QueryError> {
        Self::open_with(data_dirs, &Slos::none(), true).await
    }

    /// A session over the given artifacts (none gives empty tables).
    pub async fn from_artifacts(artifacts: Vec<ArtifactSource>) -> Result<Self, QueryError> {
        Self::build(artifacts, &Slos::none(), &[]).await
    }

    /// A session over the given artifacts with the SLOs in force.
    pub async fn from_artifacts_with(
        artifacts: Vec<ArtifactSource>,
        slos: &Slos,
    ) -> Result<Self, QueryError> {
        Self::build(artifacts, slos, &[]).await
    }

    async fn build(
        artifacts: Vec<ArtifactSource>,
        slos: &Slos,
        materialize: &[&str],
    ) -> Result<Self, QueryError> {
        Self::build_on(artifacts, slos, materialize, None).await
    }

    /// Open every artifact at or beneath `data_dirs`, its SQL run by the distributed engine
    /// on `workers` (see [`super::distributed`]).
    #[cfg(feature = "distributed")]
    pub async fn open_on_workers(
        data_dirs: &[PathBuf],
        slos: &Slos,
        workers: &super::distributed::Workers,
    ) -> Result<Self, QueryError> {
        let artifacts = find_artifacts(data_dirs)?;
        Self::build_on(artifacts, slos, &[], Some(workers)).await
    }

    async fn build_on(
        artifacts: Vec<ArtifactSource>,
        slos: &Slos,
        materialize: &[&str],
        workers: Option<&Workers>,
    ) -> Result<Self, QueryError> {
        // Row-level filter pushdown (`parquet.pushdown_filters`) stays off, DataFusion's
        // default: the views scan every event, where evaluating pushed-down predicates
        // (among them the join's dynamic filter) row by row during decoding cost 15-20%
        // of `cell_stats` over 10M events (BENCHMARKS.md). Row groups and pages are still
        // pruned by their statistics.
        let config = SessionConfig::new().with_information_schema(true);
        let ctx = match workers {
            #[cfg(feature = "distributed")]
            Some(w) => super::distributed::client_context(config, w)?,
            _ => SessionContext::new_with_config(config),
        };
        let state = ctx.state_weak_ref();
        let snapshot = Box::new(move || state.upgrade().map(|s| s.read().clone()));
        let schema = Arc::new(AnvilSchema::new(VIEWS, snapshot));
        ctx.catalog("datafusion")
            .and_then(|catalog| catalog.register_schema("public", schema).ok())
            .ok_or(QueryError::Register {
                table: "public",
                source: DataFusionError::Internal("no default catalog".into()),
            })?;
        #[cfg(feature = "object-store")]
        for remote in artifacts.iter().flat_map(|a| a.remote.iter()) {
            ctx.register_object_store(remote.remote.base(), remote.remote.store().clone());
        }
        udf::register(&ctx);
        functional_udf::register(&ctx);
        register(&ctx, "runs", Arc::new(runs_table(&artifacts)?))?;
        register(&ctx, "slos", Arc::new(slos_table(slos)?))?;
        register(&ctx, "shards", Arc::new(shards_table(&artifacts)?))?;
        register(
            &ctx,
            "telemetry_sources",
            Arc::new(super::telemetry_sources::table(&artifacts)?),
        )?;
        for table in Table::ALL {
            let provider = parquet_table(table, &artifacts)?;
            register(&ctx, table.name(), provider)?;
        }
        // Views are planned when first named (see `catalog`); these are computed now, in
        // dependency order, so that the views planned later read the in-memory tables.
        for view in VIEWS.iter().filter(|v| materialize.contains(&v.name)) {
            let failed = |source| QueryError::View {
                file: view.file,
                source,
            };
            let frame = ctx.table(view.name).await.map_err(failed)?;
            let planned = Arc::new(frame.schema().as_arrow().clone());
            let batches = collect(frame).await?.map_err(failed)?;
            // The batches' own schema: a window function's output may be typed nullable
            // where the plan says it is not, and a table must hold its batches' schema.
            let schema = batches.first().map_or(planned, |b| b.schema());
            let table = MemTable::try_new(schema, vec![batches]).map_err(failed)?;
            ctx.register_table(view.name, Arc::new(table))
                .map_err(failed)?;
        }
        Ok(Self {
            ctx,
            artifacts,
            slos: slos.clone(),
        })
    }

    /// The DataFusion context (tables, views and functions registered).
    pub fn context(&self) -> &SessionContext {
        &self.ctx
    }

    /// The SLOs in force (the `slos` table).
    pub fn slos(&self) -> &Slos {
        &self.slos
    }

    /// The artifacts the tables hold, sorted by folder.
    pub fn artifacts(&self) -> &[ArtifactSource] {
        &self.artifacts
    }

    /// Register the decision table `name` (one of [`DECISION_TABLES`]), replacing an
    /// earlier one of that name.
    pub fn register_decision(&self, name: &'static str, table: MemTable) -> Result<(), QueryError> {
        debug_assert!(
            DECISION_TABLES.contains(&name),
            "{name} is not a decision table"
        );
        let _ = self.ctx.deregister_table(name);
        register(&self.ctx, name, Arc::new(table))
    }
}

fn register(
    ctx: &SessionContext,
    name: &'static str,
    provider: Arc<dyn TableProvider>,
) -> Result<(), QueryError> {
    ctx.register_table(name, provider)
        .map(|_| ())
        .map_err(|source| QueryError::Register {
            table: name,
            source,
        })
}

/// `file://` URL of an artifact file.
fn file_url(dir: &Path, path: &Path) -> Result<ListingTableUrl, QueryError> {
    let absolute = std::path::absolute(path).map_err(|e| QueryError::Artifact {
        dir: dir.to_owned(),
        message: format!("{}: {e}", path.display()),
    })?;
    let text = absolute.to_str().ok_or_else(|| QueryError::Path {
        dir: dir.to_owned(),
        path: absolute.display().to_string(),
    })?;
    ListingTableUrl::parse(text).map_err(|e| QueryError::Artifact {
        dir: dir.to_owned(),
        message: format!("{}: {e}", path.display()),
    })
}

/// A listing table over every artifact's files of `table`, with the artifact schema (no
/// inference), or an empty table when no artifact has any.
fn parquet_table(
    table: Table,
    artifacts: &[ArtifactSource],
) -> Result<Arc<dyn TableProvider>, QueryError> {
    let schema = string_views(&table.schema());
    let mut urls = Vec::new();
    for a in artifacts {
        #[cfg(feature = "object-store")]
        for remote in &a.remote {
            if let Some(o) = &remote.tables[table as usize] {
                urls.push(
                    ListingTableUrl::parse(&o.url).map_err(|e| QueryError::Artifact {
                        dir: a.location.clone().into(),
                        message: format!("{}: {e}", o.url),
                    })?,
                );
            }
        }
        for path in a.files(table) {
            urls.push(file_url(&a.dir, path)?);
        }
    }
    if urls.is_empty() {
        let empty =
            MemTable::try_new(schema, vec![vec![]]).map_err(|source| QueryError::Register {
                table: table.name(),
                source,
            })?;
        return Ok(Arc::new(empty));
    }
    let options =
        ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
    let config = ListingTableConfig::new_with_multi_paths(urls)
        .with_listing_options(options)
        .with_schema(schema);
    let listing = ListingTable::try_new(config).map_err(|source| QueryError::Register {
        table: table.name(),
        source,
    })?;
    Ok(Arc::new(listing))
}

/// `schema` with every Utf8 column read as Utf8View. The Parquet reader then builds string
/// views over the decoded pages instead of copying every value into a new buffer, and
/// comparisons such as `content_delta <> ''` look at the view's length and inline prefix:
/// `cell_stats` over 10M events took 14% less CPU (BENCHMARKS.md). Columns keep their
/// names and nullability; SQL sees the same strings.
fn string_views(schema: &Schema) -> SchemaRef {
    let fields = schema.fields().iter().map(|field| match field.data_type() {
        DataType::Utf8 => Arc::new(field.as_ref().clone().with_data_type(DataType::Utf8View)),
        _ => field.clone(),
    });
    Arc::new(Schema::new_with_metadata(
        fields.collect::<Vec<_>>(),
        schema.metadata().clone(),
    ))
}

/// The type of `runs.arm_config`: a map of configuration key to value (read as
/// `arm_config['spec_depth']`).
fn config_map_type() -> DataType {
    let entries = Field::new(
        "entries",
        DataType::Struct(
            vec![
                Field::new("keys", DataType::Utf8, false),
                Field::new("values", DataType::Utf8, true),
            ]
            .into(),
        ),
        false,
    );
    DataType::Map(Arc::new(entries), false)
}

/// `runs.arm_config`: each run's effective configuration (declared keys, then inherited
/// defaults), and `runs.inherited`: the keys that came from the defaults.
fn config_columns(runs: &[&crate::artifact::RunJson]) -> Result<(ArrayRef, ArrayRef), QueryError> {
    let mut map = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
    let mut inherited = ListBuilder::new(StringBuilder::new());
    for r in runs {
        for (k, v, from_defaults) in effective_pairs(r) {
            map.keys().append_value(k);
            map.values().append_value(v);
            if from_defaults {
                inherited.values().append_value(k);
            }
        }
        map.append(true).map_err(|e| QueryError::Register {
            table: "runs",
            source: e.into(),
        })?;
        inherited.append(true);
    }
    let map: ArrayRef = Arc::new(map.finish());
    // The builder names the entries as `config_map_type` does; cast to be sure of it.
    let map = datafusion::arrow::compute::cast(&map, &config_map_type()).map_err(|e| {
        QueryError::Register {
            table: "runs",
            source: e.into(),
        }
    })?;
    Ok((map, Arc::new(inherited.finish())))
}

/// `runs.arm_config_canonical`: the effective configuration (declared keys, then inherited
/// defaults) as `key=value` pairs sorted by key and joined by `,`, so that two runs have the
/// same text exactly when they ran the same configuration, whatever order it was declared in
/// and whichever keys came from the defaults.
fn canonical_config(run: &crate::artifact::RunJson) -> String {
    let mut pairs: Vec<(&str, &str, bool)> = effective_pairs(run).collect();
    pairs.sort_unstable();
    pairs
        .iter()
        .map(|(k, v, _)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The GPUs a run's arm uses (`runs.gpus`): its effective configuration's `gpus` key, else
/// derived from its `topology`.
fn run_gpus(run: &crate::artifact::RunJson) -> Option<crate::artifact::gpus::Gpus> {
    crate::artifact::gpus::gpus(|key| {
        run.arm
            .config
            .get(key)
            .or_else(|| run.arm.defaults.get(key))
    })
}

/// A run's effective configuration: its declared keys in the order given, then the
/// campaign defaults it did not declare (marked `true`).
fn effective_pairs(run: &crate::artifact::RunJson) -> impl Iterator<Item = (&str, &str, bool)> {
    let declared = run.arm.config.iter().map(|(k, v)| (k, v, false));
    let inherited = run
        .arm
        .defaults
        .iter()
        .filter(|(k, _)| run.arm.config.get(k).is_none())
        .map(|(k, v)| (k, v, true));
    declared.chain(inherited)
}

/// Schema of the `runs` table: one row per artifact, from its `run.json`.
pub fn runs_schema() -> SchemaRef {
    let s = |name: &str, nullable| Field::new(name, DataType::Utf8, nullable);
    let i = |name: &str, nullable| Field::new(name, DataType::Int64, nullable);
    Arc::new(Schema::new(vec![
        s("run_id", false),
        s("campaign_id", false),
        s("arm", false),
        s("stage", false),
        s("runtime", false),
        Field::new("arm_config", config_map_type(), false),
        s("arm_config_text", false),
        s("arm_config_canonical", false),
        Field::new(
            "inherited",
            DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true))),
            false,
        ),
        s("cell_id", false),
        i("repeat_index", false),
        i("repeats", false),
        s("class", false),
        i("prompt_tokens_target", false),
        i("concurrency_per_replica", false),
        i("replicas", false),
        i("gpus", true),
        Field::new("gpus_derived", DataType::Boolean, true),
        i("total_requests", false),
        i("response_words", true),
        i("max_tokens", false),
        s("prompt_cache_mode", false),
        Field::new("canaries", DataType::Boolean, false),
        i("seed", false),
        s("thinking", false),
        s("api", false),
        s("schedule", false),
        Field::new("rate_per_s", DataType::Float64, true),
        Field::new("ramp_s", DataType::Float64, true),
        Field::new("off_manifest", DataType::Boolean, false),
        s("probe", true),
        s("workload_fingerprint", false),
        s("status", false),
        s("status_reason", true),
        s("started_utc", false),
        s("ended_utc", true),
        s("dir", false),
        i("shards", true),
        Field::new("clock_uncertainty_ms", DataType::Float64, true),
    ]))
}

/// Schema of the `shards` table: one row per shard of a run driven from several hosts.
pub fn shards_schema() -> SchemaRef {
    let s = |name: &str, nullable| Field::new(name, DataType::Utf8, nullable);
    let i = |name: &str| Field::new(name, DataType::Int64, false);
    let f = |name: &str, nullable| Field::new(name, DataType::Float64, nullable);
    Arc::new(Schema::new(vec![
        s("run_id", false),
        i("shard"),
        i("shards"),
        s("dir", false),
        s("host", false),
        s("status", false),
        i("requests_measured"),
        s("start_at_utc", false),
        f("started_late_ms", false),
        Field::new("clock_synchronized", DataType::Boolean, false),
        f("clock_offset_ms", true),
        f("clock_max_error_ms", true),
        s("clock_source", true),
    ]))
}

fn shards_table(artifacts: &[ArtifactSource]) -> Result<MemTable, QueryError> {
    let rows: Vec<(
        &crate::query::source::ShardSource,
        &crate::artifact::shard::Shard,
    )> = artifacts
        .iter()
        .flat_map(|a| a.shards.iter())
        .filter_map(|s| s.run.shard.as_ref().map(|x| (s, x)))
        .collect();
    let ms = |ns: Option<i64>| ns.map(|n| n as f64 / 1e6);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|(s, _)| s.run.run_id.clone()),
        )),
        Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|(_, x)| i64::from(x.index)),
        )),
        Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|(_, x)| i64::from(x.of)),
        )),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|(s, _)| s.location.clone()),
        )),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|(_, x)| x.host.clone()),
        )),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|(s, _)| s.run.status.as_str().to_owned()),
        )),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|(s, _)| {
            i64::try_from(s.run.counts.requests_measured).unwrap_or(i64::MAX)
        }))),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|(_, x)| x.start_at_utc.clone()),
        )),
        Arc::new(Float64Array::from_iter_values(
            rows.iter().map(|(_, x)| x.started_late_ms),
        )),
        Arc::new(BooleanArray::from_iter(
            rows.iter().map(|(_, x)| Some(x.clock.synchronized)),
        )),
        Arc::new(
            rows.iter()
                .map(|(_, x)| ms(x.clock.offset_ns))
                .collect::<Float64Array>(),
        ),
        Arc::new(
            rows.iter()
                .map(|(_, x)| ms(x.clock.max_error_ns))
                .collect::<Float64Array>(),
        ),
        Arc::new(
            rows.iter()
                .map(|(_, x)| x.clock.source.clone())
                .collect::<StringArray>(),
        ),
    ];
    let schema = shards_schema();
    let failed = |source| QueryError::Register {
        table: "shards",
        source,
    };
    let batch = RecordBatch::try_new(schema.clone(), columns).map_err(|e| failed(e.into()))?;
    MemTable::try_new(schema, vec![vec![batch]]).map_err(failed)
}

/// The `slos` table: one row per SLO in force (docs/artifact.md).
fn slos_table(slos: &Slos) -> Result<MemTable, QueryError> {
    let failed = |source| QueryError::Register {
        table: "slos",
        source,
    };
    let schema = Arc::new(Schema::new(vec![
        Field::new("class", DataType::Utf8, true),
        Field::new("slo", DataType::Utf8, false),
        Field::new("metric", DataType::Utf8, false),
        Field::new("metric_order", DataType::Int64, false),
        Field::new("op", DataType::Utf8, false),
        Field::new("bound", DataType::Float64, false),
        Field::new("turn_first", DataType::Int64, false),
        Field::new("turn_last", DataType::Int64, true),
        Field::new("unit", DataType::Utf8, false),
        Field::new("source", DataType::Utf8, false),
        Field::new("target", DataType::Float64, false),
    ]));
    let order = |m: crate::metric::MetricId| {
        crate::metric::MetricId::ALL
            .iter()
            .position(|x| *x == m)
            .map_or(0, |k| k as i64 + 1)
    };
    // The default (class NULL), then each class's own list.
    let rows: Vec<(Option<&str>, &crate::slo::Slo)> = slos
        .default_slos()
        .iter()
        .map(|s| (None, s))
        .chain(
            slos.spec
                .classes
                .iter()
                .flat_map(|(class, list)| list.iter().map(move |s| (Some(class.as_str()), s))),
        )
        .collect();
    let list: Vec<&crate::slo::Slo> = rows.iter().map(|(_, s)| *s).collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(
            rows.iter()
                .map(|(class, _)| *class)
                .collect::<StringArray>(),
        ),
        Arc::new(StringArray::from_iter_values(
            list.iter().map(|s| s.to_string()),
        )),
        Arc::new(StringArray::from_iter_values(
            list.iter().map(|s| s.metric.as_str()),
        )),
        Arc::new(Int64Array::from_iter_values(
            list.iter().map(|s| order(s.metric)),
        )),
        Arc::new(StringArray::from_iter_values(list.iter().map(|s| s.op()))),
        Arc::new(Float64Array::from_iter_values(list.iter().map(|s| s.bound))),
        Arc::new(Int64Array::from_iter_values(
            list.iter().map(|s| i64::from(s.turns.first)),
        )),
        Arc::new(
            list.iter()
                .map(|s| s.turns.last.map(i64::from))
                .collect::<Int64Array>(),
        ),
        Arc::new(StringArray::from_iter_values(
            list.iter().map(|s| s.metric.unit()),
        )),
        Arc::new(StringArray::from_iter_values(
            list.iter().map(|_| slos.source.column()),
        )),
        Arc::new(Float64Array::from_iter_values(
            list.iter().map(|_| slos.target),
        )),
    ];
    let batch = RecordBatch::try_new(schema.clone(), columns).map_err(|e| failed(e.into()))?;
    MemTable::try_new(schema, vec![vec![batch]]).map_err(failed)
}

fn runs_table(artifacts: &[ArtifactSource]) -> Result<MemTable, QueryError> {
    let runs: Vec<_> = artifacts.iter().map(|a| &a.run).collect();
    let text = |f: &dyn Fn(&crate::artifact::RunJson) -> String| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(runs.iter().map(|r| f(r))))
    };
    let opt_text = |f: &dyn Fn(&crate::artifact::RunJson) -> Option<String>| -> ArrayRef {
        Arc::new(runs.iter().map(|r| f(r)).collect::<StringArray>())
    };
    let int = |f: &dyn Fn(&crate::artifact::RunJson) -> i64| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(runs.iter().map(|r| f(r))))
    };
    let sat = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let (config, inherited) = config_columns(&runs)?;
    let columns: Vec<ArrayRef> = vec![
        text(&|r| r.run_id.clone()),
        text(&|r| r.campaign_id.clone()),
        text(&|r| r.arm.name.clone()),
        text(&|r| r.arm.stage.clone()),
        text(&|r| r.arm.runtime.clone()),
        config,
        text(&|r| {
            r.arm
                .config
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        }),
        text(&|r| canonical_config(r)),
        inherited,
        text(&|r| r.cell_id.clone()),
        int(&|r| i64::from(r.repeat.index)),
        int(&|r| i64::from(r.repeat.of)),
        text(&|r| r.workload.class.clone()),
        int(&|r| sat(r.workload.prompt_tokens_target)),
        int(&|r| i64::from(r.workload.concurrency_per_replica)),
        int(&|r| i64::from(r.topology.replica_count)),
        Arc::new(
            runs.iter()
                .map(|r| run_gpus(r).map(|g| i64::from(g.count)))
                .collect::<Int64Array>(),
        ),
        Arc::new(BooleanArray::from_iter(
            runs.iter().map(|r| run_gpus(r).map(|g| g.derived)),
        )),
        int(&|r| sat(r.workload.total_requests)),
        Arc::new(
            runs.iter()
                .map(|r| r.workload.response_words.map(i64::from))
                .collect::<Int64Array>(),
        ),
        int(&|r| i64::from(r.workload.max_tokens)),
        text(&|r| r.workload.prompt_cache_mode.clone()),
        Arc::new(BooleanArray::from_iter(
            runs.iter().map(|r| Some(r.workload.canaries)),
        )),
        int(&|r| sat(r.workload.seed)),
        text(&|r| r.workload.thinking.clone()),
        text(&|r| r.workload.api.as_str().to_owned()),
        text(&|r| r.workload.schedule.kind().to_owned()),
        Arc::new(
            runs.iter()
                .map(|r| r.workload.schedule.rate_per_s())
                .collect::<Float64Array>(),
        ),
        Arc::new(
            runs.iter()
                .map(|r| r.workload.ramp_s)
                .collect::<Float64Array>(),
        ),
        Arc::new(BooleanArray::from_iter(
            runs.iter().map(|r| Some(r.workload.off_manifest)),
        )),
        opt_text(&|r| r.workload.probe.clone()),
        text(&|r| r.workload_fingerprint.clone()),
        text(&|r| r.status.as_str().to_owned()),
        opt_text(&|r| r.status_reason.clone()),
        text(&|r| r.started_utc.clone()),
        opt_text(&|r| r.ended_utc.clone()),
        Arc::new(StringArray::from_iter_values(
            artifacts.iter().map(|a| a.location.clone()),
        )),
        Arc::new(
            artifacts
                .iter()
                .map(|a| (!a.shards.is_empty()).then_some(a.shards.len() as i64))
                .collect::<Int64Array>(),
        ),
        Arc::new(
            artifacts
                .iter()
                .map(|a| {
                    let clocks: Vec<_> = a
                        .shards
                        .iter()
                        .filter_map(|s| s.run.shard.as_ref().map(|x| (x.host.as_str(), &x.clock)))
                        .collect();
                    (!clocks.is_empty()).then(|| {
                        crate::artifact::shard::timeline_uncertainty_ns(&clocks) as f64 / 1e6
                    })
                })
                .collect::<Float64Array>(),
        ),
    ];
    let schema = runs_schema();
    let batch =
        RecordBatch::try_new(schema.clone(), columns).map_err(|e| QueryError::Register {
            table: "runs",
            source: e.into(),
        })?;
    MemTable::try_new(schema, vec![vec![batch]]).map_err(|source| QueryError::Register {
        table: "runs",
        source,
    })
}

/// Run a frame to its batches on its own task: the Parquet decoder asserts on some damaged
/// data pages (the footer checks made on opening cannot see them), and that must be an error
/// that says what to do, not an abort. The outer error is that case; the inner one
/// DataFusion's own.
pub(crate) async fn collect(
    frame: datafusion::dataframe::DataFrame,
) -> Result<Result<Vec<RecordBatch>, DataFusionError>, QueryError> {
    tokio::spawn(frame.collect())
        .await
        .map_err(|joined| QueryError::Sql {
            message: format!(
                "reading the artifact tables stopped inside the Parquet decoder ({}): a data page \
             is damaged",
                if joined.is_panic() {
                    crate::panics::text(&joined.into_panic())
                } else {
                    joined.to_string()
                }
            ),
            hint: Some(
                "`anvil validate` on the --data folder decodes every page and names the damaged \
             file; re-record that run"
                    .to_owned(),
            ),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifact::ArmConfig;
    use crate::artifact::testing::run_json;

    fn config(pairs: &[(&str, &str)]) -> ArmConfig {
        ArmConfig(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    #[test]
    fn canonical_config_is_the_effective_configuration_in_key_order() {
        let mut a = run_json("a");
        a.arm.config = config(&[("topology", "TP2"), ("spec_depth", "12")]);
        a.arm.defaults = config(&[("spec_depth", "0"), ("chunked_prefill", "2048")]);
        let mut b = run_json("b");
        b.arm.config = config(&[("spec_depth", "12"), ("chunked_prefill", "2048")]);
        b.arm.defaults = config(&[("topology", "TP2")]);
        assert_eq!(
            canonical_config(&a),
            "chunked_prefill=2048,spec_depth=12,topology=TP2"
        );
        // Declared in another order, one key inherited instead: the same configuration.
        assert_eq!(canonical_config(&a), canonical_config(&b));
        // A different inherited default is a different configuration.
        b.arm.defaults = config(&[("topology", "TP1")]);
        assert_ne!(canonical_config(&a), canonical_config(&b));
    }
}
