//! The one table of anvil's human-facing text: a header and rows of cells, rendered as
//! aligned text (`compare`, `check`, `summary` on a terminal) or as a Markdown table (their
//! `--format md` and `anvil report --format md`), every Markdown cell escaped
//! ([`escape`]) so recorded text — an arm name, a reply, an error
//! body — stays text.

/// Escape text for a Markdown table cell or paragraph: `|`, backticks, backslashes and
/// emphasis / link characters are backslash-escaped, `<` `>` `&` become entities, line
/// breaks become spaces.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' | '|' | '`' | '*' | '_' | '[' | ']' | '#' => {
                out.push('\\');
                out.push(c);
            }
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\r' | '\n' => out.push(' '),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Which back end renders text: aligned plain text or Markdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextFormat {
    /// Aligned text, for a terminal.
    Text,
    /// Markdown headings, lists and tables, every recorded string escaped.
    Markdown,
}

/// How a column's cells line up in the text back end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Align {
    Left,
    Right,
}

/// A header and rows of cells.
#[derive(Debug, Clone)]
pub struct Table {
    header: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column names, every column left-aligned.
    pub fn new(header: &[&str]) -> Self {
        Self {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            align: vec![Align::Left; header.len()],
            rows: Vec::new(),
        }
    }

    /// Right-align the columns from `first` on in text (numbers).
    #[must_use]
    pub fn numbers_from(mut self, first: usize) -> Self {
        for a in self.align.iter_mut().skip(first) {
            *a = Align::Right;
        }
        self
    }

    /// Add a row (missing cells are empty, extra cells dropped).
    pub fn row(&mut self, mut cells: Vec<String>) {
        cells.resize(self.header.len(), String::new());
        self.rows.push(cells);
    }

    /// Whether no row was added.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Append the table to `out` (no blank line after it).
    pub fn render(&self, format: TextFormat, out: &mut String) {
        match format {
            TextFormat::Markdown => self.markdown(out),
            TextFormat::Text => self.text(out),
        }
    }

    fn markdown(&self, out: &mut String) {
        let line = |cells: &[String], out: &mut String| {
            out.push('|');
            for cell in cells {
                out.push(' ');
                out.push_str(&escape(cell));
                out.push_str(" |");
            }
            out.push('\n');
        };
        line(&self.header, out);
        out.push('|');
        for _ in &self.header {
            out.push_str(" --- |");
        }
        out.push('\n');
        for row in &self.rows {
            line(row, out);
        }
    }

    fn text(&self, out: &mut String) {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: &[String], out: &mut String| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&widths)
                .zip(&self.align)
                .map(|((c, w), a)| match a {
                    Align::Left => format!("{c:<w$}"),
                    Align::Right => format!("{c:>w$}"),
                })
                .collect();
            out.push_str("  ");
            out.push_str(padded.join("  ").trim_end());
            out.push('\n');
        };
        line(&self.header, out);
        for row in &self.rows {
            line(row, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        let mut t = Table::new(&["arm", "n"]).numbers_from(1);
        t.row(vec!["K|12<script>".to_owned(), "7".to_owned()]);
        t.row(vec!["baseline".to_owned(), "100".to_owned()]);
        t
    }

    #[test]
    fn text_aligns_columns_and_keeps_recorded_text() {
        let mut out = String::new();
        table().render(TextFormat::Text, &mut out);
        assert_eq!(
            out,
            "  arm             n\n  K|12<script>    7\n  baseline      100\n"
        );
    }

    #[test]
    fn markdown_escapes_every_cell() {
        let mut out = String::new();
        table().render(TextFormat::Markdown, &mut out);
        assert_eq!(
            out,
            "| arm | n |\n| --- | --- |\n| K\\|12&lt;script&gt; | 7 |\n| baseline | 100 |\n"
        );
    }
}
