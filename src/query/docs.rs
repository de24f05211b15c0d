//! What each column of every table and view means, from the one place each is written down:
//! a view's `-- Columns:` section in its `queries/*.sql` header, a table's column table in
//! `docs/artifact.md`. `DESCRIBE name` and `anvil sql --list` show them; a test holds that
//! every column of every table and view is documented, and nothing else.
//!
//! A view's section, at the end of its header comment:
//!
//! ```text
//! -- Columns:
//! --   run_id (-): the artifact (runs.run_id).
//! --   ttft_ms (ms): request start to the first non-empty content delta; NULL
//! --       when no content arrived.
//! ```
//!
//! one entry per column, `name (unit): meaning`, the unit `-` when there is none, a meaning
//! going on over lines indented deeper than the entry's.

use super::views::ViewFile;

/// One column's unit and meaning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnDoc {
    pub name: String,
    /// `ms`, `tok/s`, `-` for none.
    pub unit: String,
    pub meaning: String,
}

/// The contract the base tables are documented in.
const ARTIFACT_MD: &str = include_str!("../../docs/artifact.md");

/// The columns a view's header documents, in the order written; empty when it has no
/// `-- Columns:` section.
pub fn view_columns(view: &ViewFile) -> Vec<ColumnDoc> {
    let header: Vec<&str> = view
        .sql
        .lines()
        .take_while(|l| l.starts_with("--"))
        .map(|l| l.trim_start_matches("--"))
        .collect();
    let Some(start) = header.iter().position(|l| l.trim() == "Columns:") else {
        return Vec::new();
    };
    let mut out: Vec<ColumnDoc> = Vec::new();
    for line in &header[start + 1..] {
        let indent = line.len() - line.trim_start().len();
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        // An entry is indented by three spaces after `--`, its continuation deeper.
        if indent <= 3
            && let Some(doc) = parse_entry(text)
        {
            out.push(doc);
        } else if let Some(last) = out.last_mut() {
            last.meaning.push(' ');
            last.meaning.push_str(text);
        }
    }
    out
}

/// `name (unit): meaning`.
fn parse_entry(text: &str) -> Option<ColumnDoc> {
    let (name, rest) = text.split_once(" (")?;
    let (unit, meaning) = rest.split_once("): ")?;
    let name = name.trim();
    if name.is_empty() || name.contains(' ') {
        return None;
    }
    Some(ColumnDoc {
        name: name.to_owned(),
        unit: unit.trim().to_owned(),
        meaning: meaning.trim().to_owned(),
    })
}

/// The columns `docs/artifact.md` documents for a base table: the rows of the first table
/// (`| column | type | null | unit | meaning |`) after the heading naming it.
pub fn table_columns(table: &str) -> Vec<ColumnDoc> {
    let heading = match table {
        "runs" | "slos" | "shards" | "telemetry_sources" => format!("### `{table}`"),
        t if super::context::DECISION_TABLES.contains(&t) => format!("### `{t}`"),
        other => format!("### `{other}.parquet`"),
    };
    let Some(at) = ARTIFACT_MD.find(&heading) else {
        return Vec::new();
    };
    let section = &ARTIFACT_MD[at + heading.len()..];
    let section = section.find("\n## ").map_or(section, |end| &section[..end]);
    let section = section
        .find("\n### ")
        .map_or(section, |end| &section[..end]);
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            let [name, _type, _null, unit, meaning] = cells[..] else {
                return None;
            };
            Some(ColumnDoc {
                name: name.trim_matches('`').to_owned(),
                unit: unit.to_owned(),
                meaning: meaning.to_owned(),
            })
        })
        .collect()
}

/// The documented columns of the table or view `name`, if it is one of anvil's.
pub fn columns(name: &str) -> Option<Vec<ColumnDoc>> {
    if super::context::TABLES.contains(&name) || super::context::DECISION_TABLES.contains(&name) {
        return Some(table_columns(name));
    }
    super::views::VIEWS
        .iter()
        .find(|v| v.name == name)
        .map(view_columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_and_its_continuation_are_one_column() {
        let view = ViewFile {
            name: "x",
            file: "99_x.sql",
            sql: "-- x: a view.\n--\n-- Columns:\n--   run_id (-): the artifact.\n--   \
                  ttft_ms (ms): first content\n--       minus start.\nCREATE VIEW x AS SELECT 1",
        };
        assert_eq!(
            view_columns(&view),
            [
                ColumnDoc {
                    name: "run_id".into(),
                    unit: "-".into(),
                    meaning: "the artifact.".into()
                },
                ColumnDoc {
                    name: "ttft_ms".into(),
                    unit: "ms".into(),
                    meaning: "first content minus start.".into()
                },
            ]
        );
    }

    /// The one source of truth holds: every column of every table and view is documented
    /// with a unit and a meaning, and no documented column is missing from the schema.
    #[tokio::test]
    async fn every_column_of_every_table_and_view_is_documented() {
        let session = crate::query::AnvilSession::from_artifacts(Vec::new())
            .await
            .unwrap();
        let names = crate::query::TABLES
            .iter()
            .copied()
            .chain(crate::query::views::VIEWS.iter().map(|v| v.name));
        let mut problems = Vec::new();
        for name in names {
            let provider = session.context().table_provider(name).await.unwrap();
            let docs = columns(name).unwrap();
            let fields: Vec<String> = provider
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            for field in &fields {
                match docs.iter().find(|d| d.name == *field) {
                    None => problems.push(format!("{name}.{field}: not documented")),
                    Some(d) if d.unit.is_empty() || d.meaning.len() < 3 => {
                        problems.push(format!("{name}.{field}: no unit or meaning"))
                    }
                    Some(_) => {}
                }
            }
            for d in &docs {
                if !fields.contains(&d.name) {
                    problems.push(format!("{name}.{}: documented but not a column", d.name));
                }
            }
        }
        assert!(
            problems.is_empty(),
            "{} problems:\n{}",
            problems.len(),
            problems.join("\n")
        );
    }

    #[test]
    fn the_base_tables_are_read_from_the_artifact_contract() {
        let requests = table_columns("requests");
        assert_eq!(requests[0].name, "run_id");
        let sent = requests.iter().find(|c| c.name == "t_sent_ns").unwrap();
        assert_eq!(sent.unit, "ns");
        assert!(
            sent.meaning
                .starts_with("When the request bytes were written")
        );
        assert!(
            table_columns("events")
                .iter()
                .any(|c| c.name == "content_delta")
        );
        assert!(
            table_columns("scrapes")
                .iter()
                .any(|c| c.name == "metric_type")
        );
    }
}
