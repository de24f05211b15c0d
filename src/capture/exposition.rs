//! The Prometheus text exposition format (0.0.4, with Prometheus 3's quoted UTF-8 names)
//! and OpenMetrics 1.0 text, as vLLM, SGLang, llama.cpp and `anvil-sim` serve `/metrics`,
//! read line by line into samples.
//!
//! The grammar is the one Prometheus' own scrape parser (`textparse.PromParser`) accepts: a
//! metric name `[a-zA-Z_:][a-zA-Z0-9_:]*` or a quoted string inside the braces
//! (`{"my.metric", a="b"}`); blanks (spaces, tabs) allowed between the name and `{`, around
//! `=` and `,`, with a trailing comma; label names `[a-zA-Z_][a-zA-Z0-9_]*` or quoted;
//! values in double quotes where `\\`, `\"` and `\n` are escapes and any other backslash is
//! kept as written; a float value (`NaN`, `+Inf`, `-Inf` spelled out; no hex, no `_`); an
//! optional integer timestamp (milliseconds; OpenMetrics: seconds, a float) and, in
//! OpenMetrics, an exemplar after ` # `. `# HELP`, `# TYPE` (a known type), `# UNIT` and
//! `# EOF` are read; other `#` lines are comments.
//!
//! A scrape is evidence (counters for restart detection, spec-decoding counters), so a line
//! that breaks the grammar is never guessed at: it is skipped, counted and the first reason
//! kept; every other line still counts. A raw line feed inside a quoted value therefore
//! spoils both halves of the broken line, and neither becomes a series. What the format
//! only forbids across lines (a `# TYPE` after its samples, a second `# HELP`, a histogram
//! without its `+Inf` bucket) is not checked: the samples are kept as exposed.
//!
//! Written here rather than taken from a crate: measured against the conformance suites, the
//! Rust crates for this format either lose every `vllm:`/`sglang:`/`llamacpp:` series
//! (prometheus-parse), reject whole scrapes over one odd family or unknown escape
//! (openmetrics-parser), keep label values escaped (prom_text_format_parser) or drop
//! timestamps and quoted names (nom-openmetrics).

use std::collections::{HashMap, HashSet};

/// One sample as exposed.
#[derive(Debug, Clone, PartialEq)]
pub struct Exposed {
    pub name: String,
    /// Label pairs in the order written, values unescaped.
    pub labels: Vec<(String, String)>,
    pub value: f64,
    /// The timestamp as written: milliseconds (Prometheus text) or seconds (OpenMetrics).
    pub timestamp: Option<f64>,
    /// The family's `# TYPE`, empty when the exposition gave none.
    pub metric_type: String,
}

/// What one exposition held.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Exposition {
    pub samples: Vec<Exposed>,
    /// Lines that broke the grammar (skipped).
    pub bad_lines: usize,
    /// The first of them: its 1-based line number and why.
    pub first_error: Option<(usize, String)>,
}

/// One series at one instant: name, labels and the timestamp as an exact integer.
type Point = (String, Vec<(String, String)>, i64);

/// The metric types `# TYPE` may name (Prometheus and OpenMetrics).
const TYPES: [&str; 10] = [
    "counter",
    "gauge",
    "histogram",
    "summary",
    "untyped",
    "unknown",
    "gaugehistogram",
    "gauge_histogram",
    "stateset",
    "info",
];

/// Read an exposition. OpenMetrics is recognised by its `# EOF` line (its timestamps are
/// seconds and its samples may carry exemplars); anything after `# EOF` is a bad line.
pub fn read(text: &str) -> Exposition {
    read_bytes(text.as_bytes())
}

/// [`read`] over the bytes of a response: a line that is not valid UTF-8 is a bad line (its
/// bytes are never replaced and read as if they were text). A second point of one series at
/// the same timestamp is the same point and kept once.
pub fn read_bytes(body: &[u8]) -> Exposition {
    let mut out = Exposition::default();
    let mut types: HashMap<String, String> = HashMap::new();
    let mut points: HashSet<Point> = HashSet::new();
    let mut eof = false;
    let openmetrics = body.split(|&b| b == b'\n').any(|l| l == b"# EOF");
    for (number, bytes) in body.split(|&b| b == b'\n').enumerate() {
        let result = match std::str::from_utf8(bytes) {
            Err(e) => Err(format!("not valid UTF-8 ({e})")),
            Ok("") if eof => continue,
            Ok(_) if eof => Err("a line after # EOF".to_owned()),
            Ok(line) => read_line(line, openmetrics, &mut types, &mut eof),
        };
        match result {
            Ok(Some(mut sample)) => {
                if let Some(t) = sample.timestamp {
                    // Nanoseconds (OpenMetrics seconds) or milliseconds, as an exact key.
                    let key = if openmetrics { (t * 1e9).round() } else { t } as i64;
                    if !points.insert((sample.name.clone(), sample.labels.clone(), key)) {
                        continue;
                    }
                }
                sample.metric_type = family_type(&types, &sample.name).to_owned();
                out.samples.push(sample);
            }
            Ok(None) => {}
            Err(why) => {
                out.bad_lines += 1;
                out.first_error.get_or_insert((number + 1, why));
            }
        }
    }
    out
}

/// The family a sample belongs to for its `# TYPE`: the sample name itself when declared,
/// else the name without a `_total`, `_created`, `_bucket`, `_count`, `_sum`, `_gsum`,
/// `_gcount` or `_info` suffix.
fn family_type<'a>(types: &'a HashMap<String, String>, metric: &str) -> &'a str {
    if let Some(t) = types.get(metric) {
        return t;
    }
    [
        "_total", "_created", "_bucket", "_count", "_sum", "_gsum", "_gcount", "_info",
    ]
    .iter()
    .filter_map(|suffix| metric.strip_suffix(suffix))
    .find_map(|family| types.get(family))
    .map_or("", String::as_str)
}

fn is_blank(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

/// A cursor over one line.
struct Cursor<'a> {
    s: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.at).copied()
    }
    fn blanks(&mut self) -> usize {
        let start = self.at;
        while self.peek().is_some_and(is_blank) {
            self.at += 1;
        }
        self.at - start
    }
    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.at += 1;
            true
        } else {
            false
        }
    }
    fn rest(&self) -> &'a str {
        &self.s[self.at..]
    }
    /// A legacy name: `[a-zA-Z_:][a-zA-Z0-9_:]*` (`colons` false: label names, no `:`).
    fn name(&mut self, colons: bool) -> Option<&'a str> {
        let start = self.at;
        let ok_first = |c: u8| c.is_ascii_alphabetic() || c == b'_' || (colons && c == b':');
        if !self.peek().is_some_and(ok_first) {
            return None;
        }
        self.at += 1;
        while self
            .peek()
            .is_some_and(|c| ok_first(c) || c.is_ascii_digit())
        {
            self.at += 1;
        }
        Some(&self.s[start..self.at])
    }
    /// A double-quoted string, unescaping `\\`, `\"` and `\n` and keeping any other
    /// backslash as written.
    fn quoted(&mut self) -> Result<String, String> {
        if !self.eat(b'"') {
            return Err(format!("expected '\"' at column {}", self.at + 1));
        }
        let mut value = String::new();
        let mut chars = self.rest().char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.at += i + 1;
                    return Ok(value);
                }
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, other)) => {
                        value.push('\\');
                        value.push(other);
                    }
                    None => break,
                },
                c => value.push(c),
            }
        }
        Err("a quoted string is not closed on its line".to_owned())
    }
}

/// A metric name in a `# HELP`/`# TYPE`/`# UNIT` line: legacy or quoted.
fn comment_name(c: &mut Cursor<'_>) -> Result<String, String> {
    if c.peek() == Some(b'"') {
        return c.quoted();
    }
    c.name(true)
        .map(str::to_owned)
        .ok_or_else(|| format!("invalid metric name in `{}`", c.s))
}

/// One line: `Ok(Some(sample))`, `Ok(None)` for comments, metadata and blank lines, or why
/// the line breaks the grammar.
fn read_line(
    line: &str,
    openmetrics: bool,
    types: &mut HashMap<String, String>,
    eof: &mut bool,
) -> Result<Option<Exposed>, String> {
    let mut c = Cursor { s: line, at: 0 };
    c.blanks();
    if c.peek().is_none() {
        return Ok(None);
    }
    if c.eat(b'#') {
        let rest = c.rest();
        if rest == " EOF" {
            *eof = true;
            return Ok(None);
        }
        c.blanks();
        let keyword = ["HELP", "TYPE", "UNIT"]
            .into_iter()
            .find(|k| c.rest().starts_with(k) && c.rest()[k.len()..].starts_with([' ', '\t']));
        let Some(keyword) = keyword else {
            return Ok(None); // a comment
        };
        c.at += keyword.len();
        c.blanks();
        let name = comment_name(&mut c)?;
        if keyword == "TYPE" {
            if c.blanks() == 0 {
                return Err(format!("no type after `# TYPE {name}`"));
            }
            let kind = c.rest().trim_end_matches([' ', '\t']);
            if !TYPES.contains(&kind) {
                return Err(format!("unknown metric type `{kind}` for {name}"));
            }
            types.insert(name, kind.to_owned());
        }
        return Ok(None);
    }
    sample(&mut c, openmetrics).map(Some)
}

fn sample(c: &mut Cursor<'_>, openmetrics: bool) -> Result<Exposed, String> {
    let mut name = c.name(true).map(str::to_owned);
    if name.is_none() && c.peek() != Some(b'{') {
        return Err(format!("invalid metric name at column {}", c.at + 1));
    }
    let blank_after_name = c.blanks() > 0;
    let mut labels: Vec<(String, String)> = Vec::new();
    let braces = c.eat(b'{');
    if braces {
        let mut seen: HashSet<String> = HashSet::new();
        c.blanks();
        // `{,}`: an empty list with its trailing comma.
        if c.eat(b',') {
            c.blanks();
            if !c.eat(b'}') {
                return Err(format!("expected '}}' at column {}", c.at + 1));
            }
        } else {
            loop {
                c.blanks();
                if c.eat(b'}') {
                    break;
                }
                let quoted = c.peek() == Some(b'"');
                let label = if quoted {
                    c.quoted()?
                } else {
                    c.name(false)
                        .map(str::to_owned)
                        .ok_or_else(|| format!("expected a label name at column {}", c.at + 1))?
                };
                c.blanks();
                if c.eat(b'=') {
                    c.blanks();
                    let value = c.quoted()?;
                    if label == "__name__" || !seen.insert(label.clone()) {
                        return Err(format!("label `{label}` repeated or reserved"));
                    }
                    labels.push((label, value));
                } else if quoted && name.is_none() {
                    // `{"quoted.name", …}`: a quoted string alone is the metric name.
                    if label.contains('\0') {
                        return Err("a NUL byte in the metric name".to_owned());
                    }
                    name = Some(label);
                } else {
                    return Err(format!("expected '=' at column {}", c.at + 1));
                }
                c.blanks();
                if c.eat(b'}') {
                    break;
                }
                // Prometheus' own parser also takes labels separated by blanks only.
                c.eat(b',');
            }
        }
    }
    let name = name.ok_or_else(|| "no metric name".to_owned())?;
    // After a bare name the value needs a blank (`a6` is one name); after `}` it does not.
    if !braces && !blank_after_name {
        return Err(format!("expected a blank before the value of {name}"));
    }
    c.blanks();
    let fields: Vec<&str> = c
        .rest()
        .split([' ', '\t'])
        .filter(|f| !f.is_empty())
        .collect();
    let (value, mut rest) = match fields.split_first() {
        Some((v, rest)) => (parse_value(v)?, rest),
        None => return Err(format!("no value for {name}")),
    };
    let mut timestamp = None;
    if let Some((ts, after)) = rest.split_first()
        && *ts != "#"
    {
        timestamp = Some(
            if openmetrics {
                parse_value(ts).ok().filter(|t| t.is_finite())
            } else {
                ts.parse::<i64>().ok().map(|t| t as f64)
            }
            .ok_or_else(|| format!("bad timestamp `{ts}`"))?,
        );
        rest = after;
    }
    match rest.first() {
        None => {}
        // An exemplar (`# {trace_id="…"} 0.5`): not a sample of its own.
        Some(&"#") if openmetrics && rest.get(1).is_some_and(|f| f.starts_with('{')) => {}
        Some(extra) => return Err(format!("unexpected `{extra}` after the value of {name}")),
    }
    Ok(Exposed {
        name,
        labels,
        value,
        timestamp,
        metric_type: String::new(),
    })
}

/// A float as Prometheus writes one: decimal (sign, point, exponent), `NaN`, `+Inf`, `-Inf`
/// (any case, `Inf`/`Infinity`); never hex, binary, octal or `_`-separated digits.
fn parse_value(s: &str) -> Result<f64, String> {
    let digits = s.trim_start_matches(['+', '-']);
    let lower = digits.to_ascii_lowercase();
    let bad = || format!("bad value `{s}`");
    if matches!(lower.as_str(), "inf" | "infinity") {
        return Ok(if s.starts_with('-') {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        });
    }
    if lower == "nan" {
        return Ok(f64::NAN);
    }
    if !digits
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
        || !digits
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_digit() || b == b'.')
    {
        return Err(bad());
    }
    s.parse().map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Exposed {
        let e = read(text);
        assert_eq!(e.bad_lines, 0, "{text}: {:?}", e.first_error);
        assert_eq!(e.samples.len(), 1, "{text}");
        e.samples[0].clone()
    }

    #[test]
    fn blanks_where_the_format_allows_them() {
        let s = one("a {b = \"c\" , d=\"e\",} 1\n");
        assert_eq!(s.name, "a");
        assert_eq!(
            s.labels,
            [("b".into(), "c".into()), ("d".into(), "e".into())]
        );
        assert_eq!(one("a\t2 17\n").timestamp, Some(17.0));
    }

    #[test]
    fn quoted_names_and_unknown_escapes() {
        let s = one("{\"my.metric\", \"a.b\"=\"x\\zy\\\\\\n\"} 3\n");
        assert_eq!(s.name, "my.metric");
        assert_eq!(s.labels, [("a.b".into(), "x\\zy\\\n".into())]);
    }

    #[test]
    fn a_broken_line_is_counted_and_invents_nothing() {
        let e = read("a{b=\"first\nline\"} 1\nok 2\n0a 1\na.b 1\n@x 1\n");
        let names: Vec<&str> = e.samples.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["ok"]);
        assert_eq!(e.bad_lines, 5);
        assert_eq!(e.first_error.unwrap().0, 1);
    }

    #[test]
    fn values_as_prometheus_writes_them() {
        assert!(one("a NaN\n").value.is_nan());
        assert_eq!(one("a -Inf\n").value, f64::NEG_INFINITY);
        assert_eq!(one("a 1.5e3\n").value, 1500.0);
        for bad in ["a 0x1\n", "a 1_2\n", "a true\n", "a 1 2.5\n", "a 1 2 3\n"] {
            assert_eq!(read(bad).bad_lines, 1, "{bad}");
        }
    }

    #[test]
    fn openmetrics_timestamps_and_exemplars() {
        let e = read("# TYPE a counter\na_total 1 1.5 # {t=\"x\"} 0.5\n# EOF\n");
        assert_eq!(e.bad_lines, 0, "{:?}", e.first_error);
        assert_eq!(e.samples[0].timestamp, Some(1.5));
        assert_eq!(e.samples[0].metric_type, "counter");
    }
}
