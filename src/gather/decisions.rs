//! The decisions as SQL tables, registered into a query session so an analyst asks in SQL
//! what the report says: `capacity` (each capacity search's bracket from `capacity.json`,
//! its capacity per replica and per GPU, goodput per GPU there with its across-run
//! interval), and from the rules' check of the artifacts (the same code `anvil check`
//! runs) `comparisons` (every difference of every stage comparison with its interval and
//! verdict), `claims` (each stage claim's label and reason), `rule_verdicts` (each arm's
//! advance rules) and `controls` (each manifest control and what realises it). Columns are
//! documented in docs/artifact.md.

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
        text("judged", false),
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
        text(&|c| c.search.judged.as_str().to_owned()),
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

/// Register the capacity table into `session` (empty where nothing was searched, so a
/// query names its columns either way).
pub fn register(session: &AnvilSession, capacity: &[CapacityFound]) -> Result<(), QueryError> {
    session.register_decision("capacity", capacity_table(capacity)?)
}

/// A table of text columns named `columns`, one row per `rows` entry.
fn text_table(
    table: &'static str,
    columns: &[&str],
    rows: &[Vec<Option<String>>],
) -> Result<MemTable, QueryError> {
    let failed = |source| QueryError::Register { table, source };
    let schema = text_schema(columns);
    let arrays: Vec<ArrayRef> = (0..columns.len())
        .map(|k| Arc::new(rows.iter().map(|r| r[k].clone()).collect::<StringArray>()) as ArrayRef)
        .collect();
    let batch = RecordBatch::try_new(schema.clone(), arrays).map_err(|e| failed(e.into()))?;
    MemTable::try_new(schema, vec![vec![batch]]).map_err(failed)
}

fn text_schema(columns: &[&str]) -> SchemaRef {
    Arc::new(Schema::new(
        columns
            .iter()
            .map(|c| Field::new(*c, DataType::Utf8, true))
            .collect::<Vec<_>>(),
    ))
}

/// The columns of the tables drawn from the rules' check.
pub const CLAIMS_COLUMNS: [&str; 6] = ["stage", "side", "clause", "component", "verdict", "reason"];
pub const RULE_VERDICTS_COLUMNS: [&str; 4] = ["arm", "rule", "verdict", "reason"];
pub const CONTROLS_COLUMNS: [&str; 6] = [
    "control",
    "status",
    "mapping",
    "key",
    "comparison",
    "reason",
];

/// Register `comparisons`, `claims`, `rule_verdicts` and `controls` from `report` (the
/// rules' check).
pub fn register_check(
    session: &AnvilSession,
    report: &crate::rules::CheckReport,
) -> Result<(), QueryError> {
    let some = |s: &str| Some(s.to_owned());
    let mut claims = Vec::new();
    for stage in &report.coverage.stages {
        let sides = stage
            .selected
            .iter()
            .map(|c| ("selected", c))
            .chain(stage.rejected.iter().map(|c| ("rejected", c)));
        for (side, c) in sides {
            claims.push(vec![
                some(&stage.stage),
                some(side),
                some(&c.clause),
                None,
                Some(c.verdict.to_string()),
                some(&c.reason),
            ]);
            for part in &c.components {
                claims.push(vec![
                    some(&stage.stage),
                    some(side),
                    some(&c.clause),
                    some(&part.component),
                    Some(part.verdict.to_string()),
                    some(&part.reason),
                ]);
            }
        }
    }
    let rules: Vec<Vec<Option<String>>> = report
        .arms
        .iter()
        .flat_map(|a| {
            a.rules.iter().map(|(rule, v)| {
                use crate::rules::Verdict;
                let (word, why) = match v {
                    Verdict::Pass => ("pass", None),
                    Verdict::Fail(r) => ("fail", Some(r.clone())),
                    Verdict::NotRun(r) => ("not run", Some(r.clone())),
                    Verdict::NotApplicable(r) => ("not applicable", Some(r.clone())),
                    Verdict::NotTestable(r) => ("not testable", Some(r.clone())),
                };
                vec![some(&a.arm), Some(rule.to_string()), some(word), why]
            })
        })
        .collect();
    let controls: Vec<Vec<Option<String>>> = report
        .controls
        .iter()
        .flat_map(|c| {
            let row = |comparison: Option<String>| {
                vec![
                    some(&c.text),
                    Some(c.status.to_string()),
                    some(&c.mapping),
                    c.key.clone(),
                    comparison,
                    (!c.reason.is_empty()).then(|| c.reason.clone()),
                ]
            };
            if c.comparisons.is_empty() {
                vec![row(None)]
            } else {
                c.comparisons.iter().map(|x| row(Some(x.clone()))).collect()
            }
        })
        .collect();
    session.register_decision("comparisons", comparisons_table(report)?)?;
    session.register_decision("claims", text_table("claims", &CLAIMS_COLUMNS, &claims)?)?;
    session.register_decision(
        "rule_verdicts",
        text_table("rule_verdicts", &RULE_VERDICTS_COLUMNS, &rules)?,
    )?;
    session.register_decision(
        "controls",
        text_table("controls", &CONTROLS_COLUMNS, &controls)?,
    )
}

/// The `comparisons` table's columns, in order.
pub fn comparisons_schema() -> SchemaRef {
    let text = |name: &str, null: bool| Field::new(name, DataType::Utf8, null);
    let float = |name: &str| Field::new(name, DataType::Float64, true);
    Arc::new(Schema::new(vec![
        text("stage", false),
        text("workload", false),
        text("arm", false),
        text("reference", false),
        text("figure", false),
        text("window", false),
        text("statistic", false),
        float("difference"),
        float("ci_low"),
        float("ci_high"),
        text("interval", false),
        float("min_effect"),
        text("verdict", false),
    ]))
}

/// One row of `comparisons` before it is an array.
struct ComparisonRow {
    stage: String,
    workload: String,
    arm: String,
    reference: String,
    figure: &'static str,
    window: &'static str,
    statistic: String,
    difference: Option<f64>,
    interval: Option<(f64, f64)>,
    method: String,
    min_effect: f64,
    verdict: String,
}

/// Every difference of every stage comparison, as `anvil compare` prints them: per arm with
/// a reference, its metrics' mean and percentiles in both windows, its aggregate throughput
/// and its goodput, with the interval, the smallest effect that matters and the verdict.
fn comparison_rows(report: &crate::rules::CheckReport) -> Vec<ComparisonRow> {
    use crate::rules::effect::Effect;
    use crate::rules::load::LoadBasis;
    let mut out = Vec::new();
    for s in &report.stages {
        let Ok(c) = &s.result else { continue };
        let verdict = |arm: &str,
                       reference: &str,
                       basis: LoadBasis,
                       d: Option<f64>,
                       interval: Option<(f64, f64)>,
                       reference_figure: Option<f64>,
                       higher: bool,
                       share: f64| {
            if c.load_differs(arm, reference, basis).is_some() {
                return "load differs".to_owned();
            }
            let Some(d) = d else {
                return "no figure".to_owned();
            };
            match Effect::with_share(d, interval, reference_figure, higher, share) {
                Effect::Better => "better",
                Effect::Worse => "worse",
                Effect::Negligible => "negligible",
                Effect::NotResolved => "not resolved",
                Effect::NoInterval => "no interval",
            }
            .to_owned()
        };
        for m in &c.metrics {
            let higher = m.metric.higher_is_better();
            let figure = m.metric.as_str();
            let share = c.min_effect_for(figure);
            for d in &m.differences {
                let window = d.window.as_str();
                let reference_mean = m
                    .arm(&d.reference, d.window)
                    .and_then(|a| a.pooled.map(|p| p.mean()));
                let welch = d.welch.map(|i| (i.low, i.high));
                out.push(ComparisonRow {
                    stage: s.stage.clone(),
                    workload: s.workload.clone(),
                    arm: d.arm.clone(),
                    reference: d.reference.clone(),
                    figure,
                    window,
                    statistic: "mean".to_owned(),
                    difference: d.difference,
                    interval: welch,
                    method: format!("Welch {}", d.welch_method()),
                    min_effect: share,
                    verdict: verdict(
                        &d.arm,
                        &d.reference,
                        LoadBasis::PerReplica,
                        d.difference,
                        welch,
                        reference_mean,
                        higher,
                        share,
                    ),
                });
                for p in &d.percentiles {
                    let reference_p = m.arm(&d.reference, d.window).and_then(|a| {
                        let v: Vec<f64> = a
                            .runs
                            .iter()
                            .filter_map(|r| r.stats.percentile(p.percentile))
                            .collect();
                        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
                    });
                    let estimate = p.comparison.estimate();
                    let interval = p.comparison.interval();
                    out.push(ComparisonRow {
                        stage: s.stage.clone(),
                        workload: s.workload.clone(),
                        arm: d.arm.clone(),
                        reference: d.reference.clone(),
                        figure,
                        window,
                        statistic: p.percentile.column().to_owned(),
                        difference: estimate,
                        interval,
                        method: p.comparison.method(),
                        min_effect: share,
                        verdict: verdict(
                            &d.arm,
                            &d.reference,
                            LoadBasis::PerReplica,
                            estimate,
                            interval,
                            reference_p,
                            higher,
                            share,
                        ),
                    });
                }
            }
        }
        // Aggregate figures (throughput, goodput): one row per window, the output-length
        // guard first (replies of other lengths are no comparison).
        let aggregates = c
            .throughput
            .iter()
            .map(|t| {
                (
                    "output_tps",
                    &t.arm,
                    t.window,
                    &t.reference,
                    &t.difference,
                    t.estimate.value(),
                )
            })
            .chain(c.goodput.iter().map(|g| {
                (
                    "goodput_tps",
                    &g.arm,
                    g.window,
                    &g.reference,
                    &g.difference,
                    g.goodput_tps.value(),
                )
            }));
        for (figure, arm, window, reference, d, own) in aggregates {
            let (Some(reference), Some(d)) = (reference, d) else {
                continue;
            };
            let share = c.min_effect_for(figure);
            let interval = d.interval.map(|i| (i.low, i.high));
            out.push(ComparisonRow {
                stage: s.stage.clone(),
                workload: s.workload.clone(),
                arm: arm.clone(),
                reference: reference.clone(),
                figure,
                window: window.as_str(),
                statistic: "aggregate".to_owned(),
                difference: Some(d.estimate),
                interval,
                method: d.interval.map_or_else(
                    || d.no_interval.clone().unwrap_or_default(),
                    |_| "Welch across runs".to_owned(),
                ),
                min_effect: share,
                verdict: if c.output_differs(arm, reference).is_some() {
                    "not comparable".to_owned()
                } else {
                    verdict(
                        arm,
                        reference,
                        LoadBasis::Aggregate,
                        Some(d.estimate),
                        interval,
                        own.map(|own| own - d.estimate),
                        true,
                        share,
                    )
                },
            });
        }
    }
    out
}

/// The `comparisons` table: one row per difference of every stage comparison.
fn comparisons_table(report: &crate::rules::CheckReport) -> Result<MemTable, QueryError> {
    let failed = |source| QueryError::Register {
        table: "comparisons",
        source,
    };
    let rows = comparison_rows(report);
    let schema = comparisons_schema();
    let text = |f: &dyn Fn(&ComparisonRow) -> String| -> ArrayRef {
        Arc::new(rows.iter().map(|r| Some(f(r))).collect::<StringArray>())
    };
    let float = |f: &dyn Fn(&ComparisonRow) -> Option<f64>| -> ArrayRef {
        Arc::new(rows.iter().map(f).collect::<Float64Array>())
    };
    let columns: Vec<ArrayRef> = vec![
        text(&|r| r.stage.clone()),
        text(&|r| r.workload.clone()),
        text(&|r| r.arm.clone()),
        text(&|r| r.reference.clone()),
        text(&|r| r.figure.to_owned()),
        text(&|r| r.window.to_owned()),
        text(&|r| r.statistic.clone()),
        float(&|r| r.difference),
        float(&|r| r.interval.map(|i| i.0)),
        float(&|r| r.interval.map(|i| i.1)),
        text(&|r| r.method.clone()),
        float(&|r| Some(r.min_effect)),
        text(&|r| r.verdict.clone()),
    ];
    let batch = RecordBatch::try_new(schema.clone(), columns).map_err(|e| failed(e.into()))?;
    MemTable::try_new(schema, vec![vec![batch]]).map_err(failed)
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
                "comparisons" => comparisons_schema(),
                "claims" => text_schema(&CLAIMS_COLUMNS),
                "rule_verdicts" => text_schema(&RULE_VERDICTS_COLUMNS),
                "controls" => text_schema(&CONTROLS_COLUMNS),
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
