//! The session's `public` schema: the base tables, registered up front, and the views of
//! `queries/`, each planned when a query first names it.
//!
//! Planning a view costs about as much as planning a query, and most queries use a few of
//! the twelve views: planning all of them up front took 36 ms of every `anvil sql` start
//! (`SELECT 1`: 49 ms before, 13 ms now; BENCHMARKS.md). A view is planned against the
//! session as it is at that moment, so a view first named after
//! [`AnvilSession::open_materialized`] has replaced its dependencies with in-memory tables
//! reads those tables.
//!
//! [`AnvilSession::open_materialized`]: super::AnvilSession::open_materialized

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use datafusion::catalog::{SchemaProvider, TableProvider, view::ViewTable};
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::SessionState;
use datafusion::logical_expr::{DdlStatement, LogicalPlan, TableType};

use super::views::ViewFile;

/// One name of the schema.
#[derive(Debug, Clone)]
enum Entry {
    /// A table, or a view already planned.
    Table(Arc<dyn TableProvider>),
    /// A view not planned yet.
    View(&'static ViewFile),
}

/// A snapshot of the session the views are planned in; `None` once it is gone.
pub type SessionSnapshot = Box<dyn Fn() -> Option<SessionState> + Send + Sync>;

/// The `public` schema of an anvil session.
pub struct AnvilSchema {
    entries: RwLock<HashMap<String, Entry>>,
    state: SessionSnapshot,
}

impl std::fmt::Debug for AnvilSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnvilSchema")
            .field("entries", &self.entries)
            .finish_non_exhaustive()
    }
}

impl AnvilSchema {
    /// A schema holding `views`, not yet planned; `state` snapshots the session (hold it
    /// weakly: the session owns this schema).
    pub fn new(views: &'static [ViewFile], state: SessionSnapshot) -> Self {
        let entries = views
            .iter()
            .map(|v| (v.name.to_owned(), Entry::View(v)))
            .collect();
        Self {
            entries: RwLock::new(entries),
            state,
        }
    }

    fn entry(&self, name: &str) -> Option<Entry> {
        self.entries
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// Plan `view` in the session as it is now.
    async fn plan(&self, view: &'static ViewFile) -> Result<Arc<dyn TableProvider>> {
        let Some(state) = (self.state)() else {
            return Err(DataFusionError::Internal(format!(
                "view {} named after its session closed",
                view.name
            )));
        };
        let context = |e: DataFusionError| e.context(format!("queries/{}", view.file));
        let plan = state.create_logical_plan(view.sql).await.map_err(context)?;
        match plan {
            LogicalPlan::Ddl(DdlStatement::CreateView(create)) => Ok(Arc::new(ViewTable::new(
                Arc::unwrap_or_clone(create.input),
                create.definition,
            ))),
            other => Err(context(DataFusionError::Plan(format!(
                "expected CREATE VIEW {} AS ..., found {}",
                view.name,
                other.display()
            )))),
        }
    }
}

#[async_trait]
impl SchemaProvider for AnvilSchema {
    fn table_names(&self) -> Vec<String> {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        entries.keys().cloned().collect()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        match self.entry(name) {
            None => Ok(None),
            Some(Entry::Table(table)) => Ok(Some(table)),
            Some(Entry::View(view)) => {
                let table = self.plan(view).await?;
                let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
                // Keep whatever another lookup registered meanwhile.
                if let Some(Entry::Table(existing)) = entries.get(name) {
                    return Ok(Some(existing.clone()));
                }
                entries.insert(name.to_owned(), Entry::Table(table.clone()));
                Ok(Some(table))
            }
        }
    }

    async fn table_type(&self, name: &str) -> Result<Option<TableType>> {
        Ok(match self.entry(name) {
            None => None,
            Some(Entry::Table(table)) => Some(table.table_type()),
            Some(Entry::View(_)) => Some(TableType::View),
        })
    }

    fn register_table(
        &self,
        name: String,
        table: Arc<dyn TableProvider>,
    ) -> Result<Option<Arc<dyn TableProvider>>> {
        let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        Ok(match entries.insert(name, Entry::Table(table)) {
            Some(Entry::Table(old)) => Some(old),
            _ => None,
        })
    }

    fn deregister_table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        Ok(match entries.remove(name) {
            Some(Entry::Table(old)) => Some(old),
            _ => None,
        })
    }

    fn table_exist(&self, name: &str) -> bool {
        self.entry(name).is_some()
    }
}

#[cfg(test)]
mod tests {
    use crate::query::AnvilSession;
    use crate::query::rows::column_str;
    use crate::query::views::VIEWS;

    #[tokio::test]
    async fn every_view_plans_when_first_named_and_lists_as_a_view() {
        let session = AnvilSession::from_artifacts(Vec::new()).await.unwrap();
        let listed = session
            .query(
                "SELECT table_name FROM information_schema.tables \
                 WHERE table_schema = 'public' AND table_type = 'VIEW'",
            )
            .await
            .unwrap();
        let mut names = column_str(&listed, "table_name").unwrap();
        names.sort();
        let mut expected: Vec<String> = VIEWS.iter().map(|v| v.name.to_owned()).collect();
        expected.sort();
        assert_eq!(names, expected);
        for view in VIEWS {
            let sql = format!("SELECT * FROM {} LIMIT 0", view.name);
            let out = session.query(&sql).await;
            assert!(out.is_ok(), "{sql}: {}", out.unwrap_err());
        }
    }

    #[tokio::test]
    async fn a_dropped_view_stays_dropped() {
        let session = AnvilSession::from_artifacts(Vec::new()).await.unwrap();
        let ctx = session.context();
        ctx.deregister_table("cell_stats").unwrap();
        let e = session
            .query("SELECT * FROM cell_stats")
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("cell_stats"), "{e}");
        // The others still plan.
        session
            .query("SELECT * FROM request_figures")
            .await
            .unwrap();
    }
}
