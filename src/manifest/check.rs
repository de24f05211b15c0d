//! The semantic pass run after a document deserialized: rules serde's types cannot state
//! (non-empty lists and text, sets without duplicates), collected with their JSON paths so
//! every problem is reported at once.

use serde::Serialize;

use super::error::Problem;

/// Collects problems found while checking one document.
#[derive(Debug, Default)]
pub(crate) struct Checks {
    problems: Vec<Problem>,
}

impl Checks {
    pub(crate) fn into_problems(self) -> Vec<Problem> {
        self.problems
    }

    pub(crate) fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem::new(field, message));
    }

    /// Text that must say something: not empty, not only whitespace.
    pub(crate) fn text(&mut self, field: impl Into<String>, value: &str) {
        if value.trim().is_empty() {
            self.push(field, "expected a non-empty string");
        }
    }

    /// An identifier that becomes a folder name ([`crate::artifact::path_component`]).
    pub(crate) fn path_component(&mut self, field: impl Into<String>, value: &str) {
        if value.trim().is_empty() {
            self.text(field, value);
        } else if let Err(why) = crate::artifact::path_component(value) {
            self.push(field, why);
        }
    }

    /// Every entry of a list of texts must say something.
    pub(crate) fn texts(&mut self, field: &str, values: &[String]) {
        for (index, value) in values.iter().enumerate() {
            self.text(format!("{field}[{index}]"), value);
        }
    }

    /// A list that must hold at least one entry.
    pub(crate) fn non_empty<T>(&mut self, field: &str, values: &[T]) {
        if values.is_empty() {
            self.push(field, "expected a non-empty list, found []");
        }
    }

    /// A list that is a set: each repeat is reported at its own index, naming the first.
    /// Values are shown as JSON (`8`, `"K4"`).
    pub(crate) fn distinct<T: PartialEq + Serialize>(&mut self, field: &str, values: &[T]) {
        for (index, value) in values.iter().enumerate() {
            if let Some(first) = values[..index].iter().position(|earlier| earlier == value) {
                let shown = serde_json::to_string(value).unwrap_or_else(|_| "?".to_owned());
                self.push(
                    format!("{field}[{index}]"),
                    format!("duplicate value {shown} (already at {field}[{first}])"),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_reports_each_repeat_at_its_index() {
        let mut checks = Checks::default();
        checks.distinct("selection.concurrency", &[1, 2, 1, 4, 1]);
        let problems = checks.into_problems();
        assert_eq!(
            problems,
            vec![
                Problem::new(
                    "selection.concurrency[2]",
                    "duplicate value 1 (already at selection.concurrency[0])"
                ),
                Problem::new(
                    "selection.concurrency[4]",
                    "duplicate value 1 (already at selection.concurrency[0])"
                ),
            ]
        );
    }
}
