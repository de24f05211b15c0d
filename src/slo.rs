//! Service-level objectives: a bound on one catalogue metric per request (`ttft_ms<=2000`,
//! `tpot_ms<=50`, `decode_tps>=20`). A request attains the SLOs when it succeeded and every
//! bound holds for it (docs/artifact.md "SLOs and goodput"). This is the one place that says
//! what such a text means: the metric it names (from [`crate::metric`]), the comparison its
//! direction allows (`<=` for a time, `>=` for a rate) and a finite, non-negative bound.
//!
//! `--slo` on the commands, the campaign file's `slo` section and the `slos` table of the
//! query layer all go through [`Slo::parse`]. A campaign may give SLOs per workload class
//! ([`SloSpec`]: `{"default": [...], "context-curve": [...]}`): a class's own list replaces
//! the default for its runs, since a 32K prompt cannot meet a 2 s TTFT by construction.
//!
//! A bound may hold for some turns of a session workload only ([`Turns`]): turn k's TTFT
//! includes its history's prefill, so `turn 0: ttft_ms<=2000` and `turns 1+: ttft_ms<=800`
//! may bound the same metric for different turns. A request of any other workload is turn
//! 0. A request attains when every bound that applies to its turn holds; a session attains
//! when every turn does.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use crate::metric::{Direction, MetricId};

/// One bound on one metric, for the turns it applies to.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Slo {
    pub metric: MetricId,
    /// The bound, in the metric's unit.
    pub bound: f64,
    /// The turns it bounds (every request when unscoped).
    pub turns: Turns,
}

/// The turns of a session an SLO bounds: `first ..= last` (0-based; no `last`: every later
/// turn too). A request outside a session is turn 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Turns {
    pub first: u32,
    pub last: Option<u32>,
}

impl Turns {
    /// Every turn: an unscoped bound.
    pub const ALL: Turns = Turns {
        first: 0,
        last: None,
    };

    /// Read `turn 0`, `turns 1+`, `turns 1-3` (`turn`/`turns` either way).
    fn parse(scope: &str) -> Option<Turns> {
        let s = scope.trim();
        let rest = s
            .strip_prefix("turns")
            .or_else(|| s.strip_prefix("turn"))?
            .trim();
        let number = |t: &str| t.trim().parse::<u32>().ok();
        if let Some(first) = rest.strip_suffix('+') {
            return Some(Turns {
                first: number(first)?,
                last: None,
            });
        }
        if let Some((a, b)) = rest.split_once('-') {
            let (first, last) = (number(a)?, number(b)?);
            return (first <= last).then_some(Turns {
                first,
                last: Some(last),
            });
        }
        let k = number(rest)?;
        Some(Turns {
            first: k,
            last: Some(k),
        })
    }

    /// Whether turn `turn` is among these.
    pub fn holds_turn(&self, turn: u32) -> bool {
        turn >= self.first && self.last.is_none_or(|l| turn <= l)
    }

    /// Whether some turn is among both.
    pub fn overlaps(&self, other: &Turns) -> bool {
        self.first.max(other.first)
            <= self
                .last
                .unwrap_or(u32::MAX)
                .min(other.last.unwrap_or(u32::MAX))
    }
}

impl fmt::Display for Turns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.last {
            None if self.first == 0 => Ok(()),
            None => write!(f, "turns {}+", self.first),
            Some(l) if l == self.first => write!(f, "turn {l}"),
            Some(l) => write!(f, "turns {}-{l}", self.first),
        }
    }
}

/// Why an SLO text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SloError {
    #[error(
        "SLO `{text}`: write METRIC<=VALUE or METRIC>=VALUE, e.g. 'ttft_ms<=2000' (quoted: a shell reads < and >)"
    )]
    NoComparison { text: String },
    #[error("SLO `{text}`: unknown metric `{metric}`; the metrics are {known}")]
    UnknownMetric {
        text: String,
        metric: String,
        known: String,
    },
    #[error("SLO `{text}`: {metric} is better when {better}, so its bound is `{metric}{op}VALUE`")]
    WrongDirection {
        text: String,
        metric: &'static str,
        better: &'static str,
        op: &'static str,
    },
    #[error("SLO `{text}`: the bound `{bound}` must be a finite, non-negative number")]
    BadBound { text: String, bound: String },
    #[error(
        "SLO `{text}`: write the turns it bounds as `turn 0: …`, `turns 1+: …` or `turns 1-3: …` (0-based, first ≤ last)"
    )]
    BadTurns { text: String },
    #[error(
        "SLO `{text}`: {metric} already has a bound for some of these turns (`{earlier}`); give each metric one bound per turn"
    )]
    Duplicate {
        text: String,
        metric: &'static str,
        earlier: String,
    },
}

impl Slo {
    /// Parse `METRIC<=VALUE` or `METRIC>=VALUE` (spaces around the parts allowed), after
    /// an optional turn scope (`turns 1+: ttft_ms<=800`).
    pub fn parse(text: &str) -> Result<Self, SloError> {
        let (turns, trimmed) = match text.split_once(':') {
            Some((scope, rest)) => (
                Turns::parse(scope).ok_or_else(|| SloError::BadTurns {
                    text: text.to_owned(),
                })?,
                rest.trim(),
            ),
            None => (Turns::ALL, text.trim()),
        };
        let (name, op, bound) = match (trimmed.find("<="), trimmed.find(">=")) {
            (Some(at), None) => (&trimmed[..at], "<=", &trimmed[at + 2..]),
            (None, Some(at)) => (&trimmed[..at], ">=", &trimmed[at + 2..]),
            _ => {
                return Err(SloError::NoComparison {
                    text: text.to_owned(),
                });
            }
        };
        let name = name.trim();
        let metric = MetricId::from_column(name).ok_or_else(|| SloError::UnknownMetric {
            text: text.to_owned(),
            metric: name.to_owned(),
            known: MetricId::COLUMNS.join(", "),
        })?;
        let allowed = Self::op_of(metric);
        if op != allowed {
            return Err(SloError::WrongDirection {
                text: text.to_owned(),
                metric: metric.as_str(),
                better: metric.better(),
                op: allowed,
            });
        }
        let bound_text = bound.trim();
        let value: f64 = bound_text.parse().map_err(|_| SloError::BadBound {
            text: text.to_owned(),
            bound: bound_text.to_owned(),
        })?;
        if !value.is_finite() || value < 0.0 {
            return Err(SloError::BadBound {
                text: text.to_owned(),
                bound: bound_text.to_owned(),
            });
        }
        Ok(Slo {
            metric,
            bound: value,
            turns,
        })
    }

    /// The comparison a bound on `metric` takes: `<=` where lower is better, `>=` where
    /// higher is.
    pub const fn op_of(metric: MetricId) -> &'static str {
        match metric.direction() {
            Direction::LowerIsBetter => "<=",
            Direction::HigherIsBetter => ">=",
        }
    }

    /// This SLO's comparison.
    pub const fn op(&self) -> &'static str {
        Self::op_of(self.metric)
    }

    /// Whether `value` (in the metric's unit) meets the bound.
    pub fn holds(&self, value: f64) -> bool {
        match self.metric.direction() {
            Direction::LowerIsBetter => value <= self.bound,
            Direction::HigherIsBetter => value >= self.bound,
        }
    }
}

impl fmt::Display for Slo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.turns != Turns::ALL {
            write!(f, "{}: ", self.turns)?;
        }
        write!(f, "{}{}{}", self.metric, self.op(), self.bound)
    }
}

/// Parse every text, in the order written, one bound per metric and turn.
pub fn parse_list<S: AsRef<str>>(texts: &[S]) -> Result<Vec<Slo>, SloError> {
    let mut slos: Vec<Slo> = Vec::new();
    for text in texts {
        let text = text.as_ref();
        let slo = Slo::parse(text)?;
        if let Some(earlier) = slos
            .iter()
            .find(|s| s.metric == slo.metric && s.turns.overlaps(&slo.turns))
        {
            return Err(SloError::Duplicate {
                text: text.to_owned(),
                metric: slo.metric.as_str(),
                earlier: earlier.to_string(),
            });
        }
        slos.push(slo);
    }
    Ok(slos)
}

/// A document's list of SLO texts (the campaign file's `slo`, a search's `slo`), read as SLOs
/// ([`parse_list`]): what is wrong is refused where the document is read, with its path.
pub fn deserialize_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Slo>, D::Error> {
    let texts = <Vec<String> as serde::Deserialize>::deserialize(d)?;
    parse_list(&texts).map_err(serde::de::Error::custom)
}

/// The key of a [`SloSpec`] map that holds the SLOs of every class without its own.
pub const DEFAULT_CLASS_KEY: &str = "default";

/// The SLOs a campaign gives: a default list and, per workload class, a list that replaces
/// it for that class's runs. Written as a list (`["ttft_ms<=2000", "tpot_ms<=50"]`: every
/// class) or a map (`{"default": [...], "context-curve": ["ttft_ms<=20000"]}`); a class's
/// list is never empty (a class without a key takes the default).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SloSpec {
    pub default: Vec<Slo>,
    pub classes: BTreeMap<String, Vec<Slo>>,
}

impl SloSpec {
    /// Read the list or the map form from JSON; what is wrong names the key (`slo.context-curve:
    /// SLO `ttft<=1`: unknown metric ...`).
    pub fn from_json(value: &serde_json::Value) -> Result<Self, String> {
        let texts = |key: Option<&str>, v: &serde_json::Value| -> Result<Vec<Slo>, String> {
            let at = key.map_or_else(String::new, |k| format!("`{k}`: "));
            let list = v.as_array().ok_or_else(|| {
                format!("{at}write a list of SLO texts, e.g. [\"ttft_ms<=2000\"]")
            })?;
            let texts = list
                .iter()
                .map(|t| {
                    t.as_str().map(str::to_owned).ok_or_else(|| {
                        format!("{at}each SLO is a text such as \"ttft_ms<=2000\", not {t}")
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            parse_list(&texts).map_err(|e| format!("{at}{e}"))
        };
        match value {
            serde_json::Value::Array(_) => Ok(Self {
                default: texts(None, value)?,
                classes: BTreeMap::new(),
            }),
            serde_json::Value::Object(map) => {
                let mut out = Self::default();
                for (key, v) in map {
                    if key.trim().is_empty() {
                        return Err(
                            "a workload class key is empty: name the class (or `default`)"
                                .to_owned(),
                        );
                    }
                    let list = texts(Some(key), v)?;
                    if list.is_empty() && key != DEFAULT_CLASS_KEY {
                        return Err(format!(
                            "`{key}`: an empty list; give the class at least one SLO, or leave \
                             the key out for the class to take the default"
                        ));
                    }
                    if key == DEFAULT_CLASS_KEY {
                        out.default = list;
                    } else {
                        out.classes.insert(key.clone(), list);
                    }
                }
                Ok(out)
            }
            other => Err(format!(
                "write a list of SLO texts ([\"ttft_ms<=2000\"]) or a map of workload class to \
                 such lists ({{\"default\": [...], \"context-curve\": [...]}}), not {other}"
            )),
        }
    }

    /// The list form when no class has its own, else the map form with `default`.
    pub fn to_json(&self) -> serde_json::Value {
        if self.classes.is_empty() {
            return serde_json::json!(texts(&self.default));
        }
        let mut map = serde_json::Map::new();
        if !self.default.is_empty() {
            map.insert(DEFAULT_CLASS_KEY.to_owned(), texts(&self.default).into());
        }
        for (class, slos) in &self.classes {
            map.insert(class.clone(), texts(slos).into());
        }
        serde_json::Value::Object(map)
    }

    /// No SLO for any class.
    pub fn is_empty(&self) -> bool {
        self.default.is_empty() && self.classes.values().all(Vec::is_empty)
    }

    /// The SLOs runs of `class` are judged by: its own list, else the default.
    pub fn for_class(&self, class: &str) -> &[Slo] {
        self.classes.get(class).unwrap_or(&self.default)
    }
}

impl<'de> serde::Deserialize<'de> for SloSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        Self::from_json(&value).map_err(serde::de::Error::custom)
    }
}

impl Serialize for SloSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

/// The texts of `slos`, as `--slo` takes them.
pub fn texts(slos: &[Slo]) -> Vec<String> {
    slos.iter().map(Slo::to_string).collect()
}

/// Where the SLOs in force came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "from", rename_all = "snake_case")]
pub enum SloSource {
    /// `--slo` flags.
    Flags,
    /// The `slo` section of this campaign file.
    Campaign(String),
    /// None was given.
    None,
}

impl SloSource {
    /// Its `slos.source` value: `--slo`, the campaign file's path, or empty.
    pub fn column(&self) -> String {
        match self {
            SloSource::Flags => "--slo".to_owned(),
            SloSource::Campaign(file) => file.clone(),
            SloSource::None => String::new(),
        }
    }
}

impl fmt::Display for SloSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SloSource::Flags => f.write_str("--slo"),
            SloSource::Campaign(file) => write!(f, "the campaign file {file}"),
            SloSource::None => f.write_str("none given"),
        }
    }
}

/// The attainment a point must reach to stand on the trade-off frontier when the campaign
/// file gives no `slo_target`.
pub const DEFAULT_SLO_TARGET: f64 = 0.9;

/// The SLOs in force, in catalogue order, at most one per metric, with where they came from,
/// and the attainment target a load must meet under them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Slos {
    /// The default and each workload class's own list, each in catalogue order.
    pub spec: SloSpec,
    pub source: SloSource,
    /// The share of requests that must attain the SLOs (the campaign's `slo_target`).
    pub target: f64,
}

impl Default for Slos {
    fn default() -> Self {
        Self::none()
    }
}

impl Slos {
    /// No SLO.
    pub fn none() -> Self {
        Self {
            spec: SloSpec::default(),
            source: SloSource::None,
            target: DEFAULT_SLO_TARGET,
        }
    }

    /// The same SLOs with attainment target `target`.
    pub fn with_target(mut self, target: f64) -> Self {
        self.target = target;
        self
    }

    /// Parse every text (one bound per metric), sorted in catalogue order.
    pub fn parse_all<S: AsRef<str>>(texts: &[S], source: SloSource) -> Result<Self, SloError> {
        Ok(Self::of(parse_list(texts)?, source))
    }

    /// These SLOs (one per metric, as [`parse_list`] gives them) in catalogue order, from
    /// `source` (none when the list is empty).
    pub fn of(slos: Vec<Slo>, source: SloSource) -> Self {
        Self::of_spec(
            SloSpec {
                default: slos,
                classes: BTreeMap::new(),
            },
            source,
        )
    }

    /// A campaign's SLOs, default and per class, each list in catalogue order, from `source`
    /// (none when no class has any).
    pub fn of_spec(mut spec: SloSpec, source: SloSource) -> Self {
        for slos in std::iter::once(&mut spec.default).chain(spec.classes.values_mut()) {
            slos.sort_by_key(|s| (s.metric, s.turns.first));
        }
        let source = if spec.is_empty() {
            SloSource::None
        } else {
            source
        };
        Self {
            spec,
            source,
            target: DEFAULT_SLO_TARGET,
        }
    }

    /// The default: the SLOs of every class without its own.
    pub fn default_slos(&self) -> &[Slo] {
        &self.spec.default
    }

    pub fn is_empty(&self) -> bool {
        self.spec.is_empty()
    }

    /// The SLOs runs of workload class `class` are judged by: its own, else the default.
    pub fn for_class(&self, class: &str) -> &[Slo] {
        self.spec.for_class(class)
    }

    /// `ttft_ms<=2000, tpot_ms<=50`, with each class's own after the default
    /// (`; context-curve: ttft_ms<=20000`), or `no SLO given`.
    pub fn text(&self) -> String {
        if self.is_empty() {
            return "no SLO given".to_owned();
        }
        let mut parts = Vec::new();
        if !self.spec.default.is_empty() {
            parts.push(texts(&self.spec.default).join(", "));
        }
        for (class, slos) in &self.spec.classes {
            parts.push(format!("{class}: {}", texts(slos).join(", ")));
        }
        parts.join("; ")
    }

    /// The texts as JSON: a list, or a map of class to list when a class has its own.
    pub fn to_json(&self) -> serde_json::Value {
        self.spec.to_json()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_reads_as_written_and_prints_back() {
        let s = Slo::parse(" ttft_ms <= 2000 ").unwrap();
        assert_eq!((s.metric, s.bound), (MetricId::TtftMs, 2000.0));
        assert_eq!(s.to_string(), "ttft_ms<=2000");
        assert!(s.holds(2000.0) && !s.holds(2000.5));
        let d = Slo::parse("decode_tps>=20.5").unwrap();
        assert_eq!(d.to_string(), "decode_tps>=20.5");
        assert!(d.holds(20.5) && !d.holds(20.0));
    }

    #[test]
    fn malformed_bounds_are_refused_naming_what_is_wrong() {
        let err = |t: &str| Slo::parse(t).unwrap_err().to_string();
        assert!(
            err("ttft<=2000").contains("unknown metric `ttft`"),
            "{}",
            err("ttft<=2000")
        );
        assert!(err("ttft<=2000").contains("ttft_ms, effective_prefill_tps"));
        assert!(
            err("ttft_ms>=2000").contains("better when lower, so its bound is `ttft_ms<=VALUE`")
        );
        assert!(err("decode_tps<=20").contains("`decode_tps>=VALUE`"));
        assert!(err("ttft_ms<=-1").contains("`-1` must be a finite, non-negative number"));
        assert!(err("ttft_ms<=inf").contains("finite"));
        assert!(err("ttft_ms<=NaN").contains("finite"));
        assert!(err("ttft_ms<=").contains("finite"));
        assert!(err("ttft_ms<2000").contains("write METRIC<=VALUE"));
        assert!(err("ttft_ms<=1>=2").contains("write METRIC<=VALUE"));
    }

    #[test]
    fn a_set_is_in_catalogue_order_with_one_bound_per_metric() {
        let set = Slos::parse_all(&["tpot_ms<=50", "ttft_ms<=2000"], SloSource::Flags).unwrap();
        assert_eq!(set.text(), "ttft_ms<=2000, tpot_ms<=50");
        assert_eq!(set.source, SloSource::Flags);
        let dup = Slos::parse_all(&["tpot_ms<=50", "tpot_ms<=40"], SloSource::Flags);
        assert!(
            dup.unwrap_err()
                .to_string()
                .contains("already has a bound for some of these turns (`tpot_ms<=50`)")
        );
        let none = Slos::parse_all::<&str>(&[], SloSource::Flags).unwrap();
        assert_eq!(
            (none.text().as_str(), none.source),
            ("no SLO given", SloSource::None)
        );
    }

    #[test]
    fn a_bound_may_hold_for_some_turns_and_one_metric_has_one_bound_per_turn() {
        let first = Slo::parse("turn 0: ttft_ms<=2000").unwrap();
        assert_eq!(
            first.turns,
            Turns {
                first: 0,
                last: Some(0)
            }
        );
        assert_eq!(first.to_string(), "turn 0: ttft_ms<=2000");
        let later = Slo::parse(" turns 1+ : ttft_ms <= 800").unwrap();
        assert_eq!(later.to_string(), "turns 1+: ttft_ms<=800");
        assert!(later.turns.holds_turn(1) && later.turns.holds_turn(40));
        assert!(!later.turns.holds_turn(0));
        let middle = Slo::parse("turns 1-3: tpot_ms<=50").unwrap();
        assert_eq!(middle.to_string(), "turns 1-3: tpot_ms<=50");
        assert!(middle.turns.holds_turn(3) && !middle.turns.holds_turn(4));
        assert_eq!(Slo::parse("ttft_ms<=1").unwrap().turns, Turns::ALL);
        let set = Slos::parse_all(
            &[
                "turns 1+: ttft_ms<=800",
                "tpot_ms<=50",
                "turn 0: ttft_ms<=2000",
            ],
            SloSource::Flags,
        )
        .unwrap();
        assert_eq!(
            set.text(),
            "turn 0: ttft_ms<=2000, turns 1+: ttft_ms<=800, tpot_ms<=50"
        );
        let err = |t: &[&str]| parse_list(t).unwrap_err().to_string();
        assert!(
            err(&["ttft_ms<=2000", "turns 2+: ttft_ms<=800"])
                .contains("already has a bound for some of these turns (`ttft_ms<=2000`)")
        );
        assert!(err(&["turns 1-3: ttft_ms<=1", "turn 3: ttft_ms<=2"]).contains("`turns 1-3"));
        for bad in [
            "turn x: ttft_ms<=1",
            "turns 3-1: ttft_ms<=1",
            "first: ttft_ms<=1",
        ] {
            assert!(
                err(&[bad]).contains("`turns 1+: …`"),
                "{bad}: {}",
                err(&[bad])
            );
        }
        assert!(parse_list(&["turns 0-0: ttft_ms<=1", "turns 1+: ttft_ms<=2"]).is_ok());
    }

    #[test]
    fn a_spec_reads_a_list_or_a_map_of_classes_and_a_class_replaces_the_default() {
        let list =
            SloSpec::from_json(&serde_json::json!(["tpot_ms<=50", "ttft_ms<=2000"])).unwrap();
        assert!(list.classes.is_empty());
        assert_eq!(list.for_class("context-curve").len(), 2);
        let map = SloSpec::from_json(&serde_json::json!({
            "default": ["ttft_ms<=2000", "tpot_ms<=50"],
            "context-curve": ["ttft_ms<=20000"],
        }))
        .unwrap();
        assert_eq!(texts(map.for_class("context-curve")), ["ttft_ms<=20000"]);
        assert_eq!(map.for_class("headline-sustained-output").len(), 2);
        let slos = Slos::of_spec(map.clone(), SloSource::Flags);
        assert_eq!(
            slos.text(),
            "ttft_ms<=2000, tpot_ms<=50; context-curve: ttft_ms<=20000"
        );
        assert_eq!(
            SloSpec::from_json(&slos.to_json()).unwrap().classes,
            map.classes
        );
        assert_eq!(
            list.to_json(),
            serde_json::json!(["tpot_ms<=50", "ttft_ms<=2000"])
        );
        let only = Slos::of_spec(
            SloSpec::from_json(&serde_json::json!({"context-curve": ["ttft_ms<=20000"]})).unwrap(),
            SloSource::Flags,
        );
        assert_eq!(only.text(), "context-curve: ttft_ms<=20000");
        assert!(only.for_class("headline-sustained-output").is_empty() && !only.is_empty());
        let err = |v: serde_json::Value| SloSpec::from_json(&v).unwrap_err();
        assert!(
            err(serde_json::json!({"context-curve": ["ttft<=1"]}))
                .starts_with("`context-curve`: SLO `ttft<=1`: unknown metric")
        );
        assert!(
            err(serde_json::json!({"context-curve": "ttft_ms<=1"}))
                .contains("`context-curve`: write a list")
        );
        assert!(err(serde_json::json!("ttft_ms<=1")).contains("or a map of workload class"));
        assert!(err(serde_json::json!([1])).contains("not 1"));
        assert!(err(serde_json::json!({"": []})).contains("key is empty"));
        assert!(err(serde_json::json!({"context-curve": []})).contains("an empty list"));
    }
}
