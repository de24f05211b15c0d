//! Running SQL text against an [`AnvilSession`]: one or more statements, read-only unless
//! writes are allowed, with errors that carry a hint (the columns of the tables a statement
//! names when a column is not found; the table list when a table is not found).

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::TableReference;
use datafusion::error::DataFusionError;
use datafusion::execution::context::SQLOptions;
use datafusion::logical_expr::TableType;
use datafusion::sql::parser::{DFParser, Statement};

use super::QueryError;
use super::context::{AnvilSession, DECISION_TABLES, TABLES};
use super::views::VIEWS;

/// The deepest expression a statement may hold. Planning and optimizing cost grows faster
/// than linearly with depth (measured, debug build: a chain of 500 `+` terms plans in 1.2 s,
/// 2,000 in 18.7 s), and no analysis needs more than a few dozen levels.
pub const MAX_EXPRESSION_DEPTH: usize = 256;

/// Refuse a statement whose expressions nest deeper than [`MAX_EXPRESSION_DEPTH`] (a chain
/// `a + b + c` nests once per operator).
fn check_depth(statement: &Statement) -> Result<(), QueryError> {
    use std::ops::ControlFlow;

    use datafusion::sql::sqlparser::ast::{Expr, Visit, Visitor};

    #[derive(Default)]
    struct Depth {
        now: usize,
    }
    impl Visitor for Depth {
        type Break = ();
        fn pre_visit_expr(&mut self, _: &Expr) -> ControlFlow<()> {
            self.now += 1;
            if self.now > MAX_EXPRESSION_DEPTH {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        }
        fn post_visit_expr(&mut self, _: &Expr) -> ControlFlow<()> {
            self.now -= 1;
            ControlFlow::Continue(())
        }
    }
    let too_deep = match statement {
        Statement::Statement(inner) => inner.visit(&mut Depth::default()).is_break(),
        Statement::Explain(explain) => return check_depth(&explain.statement),
        _ => false,
    };
    if too_deep {
        return Err(QueryError::Sql {
            message: format!(
                "an expression nests deeper than {MAX_EXPRESSION_DEPTH} levels (each operator of \
                 a chain like `a + b + c` is one level)"
            ),
            hint: Some(
                "split it: compute parts in a WITH clause or a subquery, or sum a column instead"
                    .to_owned(),
            ),
        });
    }
    Ok(())
}

/// Whether statements that write or change state may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Queries only (the default of `anvil sql`).
    ReadOnly,
    /// Also DDL (CREATE/DROP ...), DML (INSERT, COPY) and statements (SET ...).
    ReadWrite,
}

/// The rows one statement returned.
#[derive(Debug, Clone)]
pub struct StatementResult {
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
}

impl StatementResult {
    pub fn num_rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }
}

/// The options that refuse writes.
fn read_only() -> SQLOptions {
    SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false)
}

/// The leading keywords of a statement, e.g. `CREATE EXTERNAL TABLE`, for messages.
fn leading_keywords(statement: &Statement) -> String {
    let text = statement.to_string();
    // The parser prints keywords in upper case and identifiers as written.
    let words: Vec<&str> = text
        .split_whitespace()
        .take_while(|w| w.chars().all(|c| c.is_ascii_uppercase()))
        .take(3)
        .collect();
    if words.is_empty() {
        "this statement".to_owned()
    } else {
        words.join(" ")
    }
}

impl AnvilSession {
    /// Run every statement of `sql` in order, returning each one's rows.
    pub async fn run_sql(
        &self,
        sql: &str,
        access: Access,
    ) -> Result<Vec<StatementResult>, QueryError> {
        let statements = DFParser::parse_sql(sql).map_err(|e| QueryError::Sql {
            message: e.to_string(),
            hint: None,
        })?;
        if statements.is_empty() {
            return Err(QueryError::Sql {
                message: "no SQL statement given".to_owned(),
                hint: Some(
                    "e.g. SELECT * FROM cell_stats; `anvil sql --list` shows the tables and views"
                        .to_owned(),
                ),
            });
        }
        for statement in &statements {
            check_depth(statement)?;
        }
        let mut results = Vec::with_capacity(statements.len());
        for statement in statements {
            results.push(self.run_statement(statement, access).await?);
        }
        Ok(results)
    }

    /// Run one read-only query and return its rows.
    pub async fn query(&self, sql: &str) -> Result<StatementResult, QueryError> {
        let mut results = self.run_sql(sql, Access::ReadOnly).await?;
        match (results.pop(), results.is_empty()) {
            (Some(result), true) => Ok(result),
            _ => Err(QueryError::Sql {
                message: "expected exactly one statement".to_owned(),
                hint: None,
            }),
        }
    }

    async fn run_statement(
        &self,
        statement: Statement,
        access: Access,
    ) -> Result<StatementResult, QueryError> {
        if let Some(name) = described_name(&statement) {
            return self.describe(&name).await;
        }
        let state = self.context().state();
        let references = state
            .resolve_table_references(&statement)
            .unwrap_or_default();
        let what = leading_keywords(&statement);
        let plan = match state.statement_to_plan(statement).await {
            Ok(plan) => plan,
            Err(e) => return Err(self.with_hint(e, &references).await),
        };
        if access == Access::ReadOnly && read_only().verify_plan(&plan).is_err() {
            return Err(QueryError::WriteRefused { what });
        }
        let frame = match self.context().execute_logical_plan(plan).await {
            Ok(frame) => frame,
            Err(e) => return Err(self.with_hint(e, &references).await),
        };
        let schema = SchemaRef::new(frame.schema().as_arrow().clone());
        match super::context::collect(frame).await? {
            Ok(batches) => Ok(StatementResult { schema, batches }),
            Err(e) => Err(self.with_hint(e, &references).await),
        }
    }

    /// A SQL error with a hint where one helps.
    async fn with_hint(&self, error: DataFusionError, references: &[TableReference]) -> QueryError {
        let message = error.strip_backtrace();
        let lower = message.to_lowercase();
        let hint = if lower.contains("no field named") || lower.contains("field not found") {
            let mut described = Vec::new();
            for reference in references {
                if let Ok(provider) = self.context().table_provider(reference.clone()).await {
                    let columns: Vec<String> = provider
                        .schema()
                        .fields()
                        .iter()
                        .map(|f| f.name().clone())
                        .collect();
                    described.push(format!("{reference}: {}", columns.join(", ")));
                }
            }
            if described.is_empty() {
                Some("`anvil sql --list` shows every table and view with its columns".to_owned())
            } else {
                Some(format!("available columns:\n  {}", described.join("\n  ")))
            }
        } else if lower.contains("table") && lower.contains("not found") {
            let views: Vec<&str> = VIEWS.iter().map(|v| v.name).collect();
            Some(format!(
                "tables: {}; views: {} (`anvil sql --list` shows their columns)",
                TABLES
                    .iter()
                    .chain(DECISION_TABLES.iter())
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", "),
                views.join(", ")
            ))
        } else {
            super::error::reading_hint(&error)
        };
        QueryError::Sql { message, hint }
    }

    /// Every table and view with its columns: one row per column (`name`, `kind`,
    /// `column_name`, `data_type`, `nullable`, `unit`, `meaning`), tables first, then views
    /// in load order.
    pub async fn list(&self) -> Result<StatementResult, QueryError> {
        let decided = DECISION_TABLES
            .iter()
            .copied()
            .filter(|t| self.context().table_exist(*t).unwrap_or(false));
        let names: Vec<&str> = TABLES
            .iter()
            .copied()
            .chain(decided)
            .chain(VIEWS.iter().map(|v| v.name))
            .collect();
        self.column_rows(&names, true).await
    }

    /// `DESCRIBE name` of one of anvil's tables or views: each column with its type,
    /// nullability, unit and meaning; any other name as DataFusion describes it.
    pub async fn describe(&self, name: &str) -> Result<StatementResult, QueryError> {
        if super::docs::columns(name).is_none() {
            let sql = format!("DESCRIBE {name}");
            let statement = DFParser::parse_sql(&sql)
                .ok()
                .and_then(|mut s| s.pop_front())
                .ok_or_else(|| QueryError::Sql {
                    message: format!("cannot describe {name}"),
                    hint: None,
                })?;
            let state = self.context().state();
            let plan = state.statement_to_plan(statement).await?;
            let frame = self.context().execute_logical_plan(plan).await?;
            let schema = SchemaRef::new(frame.schema().as_arrow().clone());
            let batches = super::context::collect(frame).await??;
            return Ok(StatementResult { schema, batches });
        }
        self.column_rows(&[name], false).await
    }

    /// One row per column of each of `names`, with its documentation.
    async fn column_rows(
        &self,
        names: &[&str],
        with_table: bool,
    ) -> Result<StatementResult, QueryError> {
        use datafusion::arrow::array::{ArrayRef, BooleanArray, StringArray};
        use datafusion::arrow::datatypes::{DataType, Field, Schema};
        use std::sync::Arc;

        let (mut table, mut kind, mut column, mut data_type, mut nullable) =
            (vec![], vec![], vec![], vec![], vec![]);
        let (mut unit, mut meaning) = (vec![], vec![]);
        for name in names {
            let provider = self.context().table_provider(*name).await?;
            let k = match provider.table_type() {
                TableType::View => "view",
                _ => "table",
            };
            let docs = super::docs::columns(name).unwrap_or_default();
            for field in provider.schema().fields() {
                let doc = docs.iter().find(|d| d.name == *field.name());
                table.push((*name).to_owned());
                kind.push(k);
                column.push(field.name().clone());
                data_type.push(field.data_type().to_string());
                nullable.push(field.is_nullable());
                unit.push(doc.map(|d| d.unit.clone()));
                meaning.push(doc.map(|d| d.meaning.clone()));
            }
        }
        let mut fields = Vec::new();
        let mut columns: Vec<ArrayRef> = Vec::new();
        if with_table {
            fields.push(Field::new("name", DataType::Utf8, false));
            fields.push(Field::new("kind", DataType::Utf8, false));
            columns.push(Arc::new(StringArray::from(table)));
            columns.push(Arc::new(StringArray::from(kind)));
        }
        fields.extend([
            Field::new("column_name", DataType::Utf8, false),
            Field::new("data_type", DataType::Utf8, false),
            Field::new("nullable", DataType::Boolean, false),
            Field::new("unit", DataType::Utf8, true),
            Field::new("meaning", DataType::Utf8, true),
        ]);
        columns.extend([
            Arc::new(StringArray::from(column)) as ArrayRef,
            Arc::new(StringArray::from(data_type)),
            Arc::new(BooleanArray::from(nullable)),
            Arc::new(StringArray::from(unit)),
            Arc::new(StringArray::from(meaning)),
        ]);
        let schema = Arc::new(Schema::new(fields));
        let batch = RecordBatch::try_new(schema.clone(), columns).map_err(DataFusionError::from)?;
        Ok(StatementResult {
            schema,
            batches: vec![batch],
        })
    }
}

/// The table or view a `DESCRIBE name` (or `DESC name`) statement names.
fn described_name(statement: &Statement) -> Option<String> {
    use datafusion::sql::sqlparser::ast::{DescribeAlias, Statement as Sql};
    let Statement::Statement(inner) = statement else {
        return None;
    };
    match inner.as_ref() {
        Sql::ExplainTable {
            describe_alias: DescribeAlias::Describe | DescribeAlias::Desc,
            table_name,
            ..
        } => Some(table_name.to_string()),
        _ => None,
    }
}
