//! SQL functions registered on every anvil session, so the views in `queries/` read like the
//! manifest's definitions:
//!
//! - `nearest_rank(x, p)`: aggregate, the value at rank ⌈p·n⌉ of the sorted non-null values
//!   (p a constant in (0, 1]); NULL over no values;
//! - `nearest_rank_ci_low(x, p)`, `nearest_rank_ci_high(x, p)`: aggregate, the ends of the
//!   distribution-free 95% interval of that percentile ([`crate::stats::percentile`]), NULL
//!   where the side is unbounded (too few values);
//! - `ci95_low(x)`, `ci95_high(x)`: aggregate, mean ∓/± t(0.975, n − 1) · sd / √n; NULL for
//!   n < 2;
//! - `clopper_pearson_low(k, n)`, `clopper_pearson_high(k, n)`: scalar, the ends of the
//!   exact 95% interval of the share k / n ([`crate::stats::proportion`]); NULL for n = 0, a
//!   NULL, negative or fractional count, or k > n;
//! - `canaries(text)`: scalar, the list of canary markers (`ANV-` + 12 hex) in `text`, in
//!   order of appearance;
//! - `ordered_concat(text, key)`: aggregate, see [`super::ordered_concat`].
//!
//! The math lives in [`crate::stats`]; these are adapters from Arrow arrays to a
//! [`Sample`].

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, ListArray, ListBuilder, StringBuilder,
    StructArray,
};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Float64Type};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::types::{NativeType, logical_float64, logical_string};
use datafusion::common::{DataFusionError, Result, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Coercion, ColumnarValue, EmitTo,
    GroupsAccumulator, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignatureClass,
    Volatility,
};
use datafusion::physical_plan::PhysicalExpr;
use datafusion::prelude::SessionContext;

use super::aggregate_state::{list_array, list_state_field, selected};
use super::ordered_concat::OrderedConcat;
use crate::artifact::canary;
use crate::stats::{Percentile, Probability, Sample};

/// Register every anvil function on `ctx`.
pub fn register(ctx: &SessionContext) {
    for kind in [RankKind::Estimate, RankKind::Low, RankKind::High] {
        ctx.register_udaf(AggregateUDF::from(NearestRank::new(kind)));
    }
    for fixed in [
        Fixed::Percentiles,
        Fixed::Ci95(Bound::Low),
        Fixed::Ci95(Bound::High),
    ] {
        ctx.register_udaf(AggregateUDF::from(FixedStatistic::new(fixed)));
    }
    ctx.register_udf(ScalarUDF::from(Canaries::new()));
    for bound in [Bound::Low, Bound::High] {
        ctx.register_udf(ScalarUDF::from(ClopperPearson::new(bound)));
    }
    ctx.register_udaf(AggregateUDF::from(OrderedConcat::new()));
}

/// Names of the functions [`register`] adds, for `--list`.
pub const FUNCTIONS: [(&str, &str); 10] = [
    (
        "percentiles(x)",
        "aggregate: struct of p1, p5, p25, p50, p75, p90, p95, p99 of x (nearest rank) with each one's pK_ci_low, pK_ci_high, from one sort",
    ),
    (
        "nearest_rank(x, p)",
        "aggregate: value at rank ceil(p*n) of the sorted non-null x, p constant in (0, 1]",
    ),
    (
        "nearest_rank_ci_low(x, p)",
        "aggregate: low end of the distribution-free 95% interval of nearest_rank(x, p), NULL if unbounded",
    ),
    (
        "nearest_rank_ci_high(x, p)",
        "aggregate: high end of the distribution-free 95% interval of nearest_rank(x, p), NULL if unbounded",
    ),
    (
        "ci95_low(x)",
        "aggregate: mean - t(0.975, n-1)*sd/sqrt(n), NULL for n < 2",
    ),
    (
        "ci95_high(x)",
        "aggregate: mean + t(0.975, n-1)*sd/sqrt(n), NULL for n < 2",
    ),
    (
        "clopper_pearson_low(k, n)",
        "scalar: low end of the exact (Clopper-Pearson) 95% interval of the share k/n, NULL for n = 0",
    ),
    (
        "clopper_pearson_high(k, n)",
        "scalar: high end of the exact (Clopper-Pearson) 95% interval of the share k/n, NULL for n = 0",
    ),
    (
        "canaries(text)",
        "scalar: list of canary markers (ANV- + 12 hex) in text, in order",
    ),
    (
        "ordered_concat(text, key)",
        "aggregate: non-null text concatenated in ascending key order (string_agg ORDER BY key)",
    ),
];

fn float64_signature(args: usize) -> Signature {
    let coercion = || {
        Coercion::new_implicit(
            TypeSignatureClass::Native(logical_float64()),
            vec![TypeSignatureClass::Numeric],
            NativeType::Float64,
        )
    };
    Signature::coercible(
        (0..args).map(|_| coercion()).collect(),
        Volatility::Immutable,
    )
}

/// What a collecting aggregate computes from the non-null values of its group.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Statistic {
    NearestRank(RankKind, Probability),
    Ci95(Bound),
    /// Every percentile with its interval, as one struct (`percentiles(x)`).
    Percentiles,
}

/// The fields of `percentiles(x)`: `p1`, `p1_ci_low`, `p1_ci_high`, … `p99_ci_high`, the
/// names `cell_stats` gives its columns.
fn percentiles_fields() -> Vec<Field> {
    Percentile::ALL
        .iter()
        .flat_map(|q| {
            let [low, high] = q.interval_columns();
            [q.column(), low, high]
        })
        .map(|name| Field::new(name, DataType::Float64, true))
        .collect()
}

impl Statistic {
    fn name(self) -> &'static str {
        match self {
            Self::NearestRank(kind, _) => kind.name(),
            Self::Ci95(Bound::Low) => "ci95_low",
            Self::Ci95(Bound::High) => "ci95_high",
            Self::Percentiles => "percentiles",
        }
    }

    /// The type of its result.
    fn data_type(self) -> DataType {
        match self {
            Self::Percentiles => DataType::Struct(percentiles_fields().into()),
            _ => DataType::Float64,
        }
    }

    /// The statistic of each group's values (taken), NULL over no values.
    fn evaluate(self, groups: Vec<Vec<f64>>) -> Result<ArrayRef> {
        if self != Self::Percentiles {
            let results = groups
                .into_iter()
                .map(|values| self.of(values))
                .collect::<Result<Float64Array>>()?;
            return Ok(Arc::new(results));
        }
        let fields = percentiles_fields();
        let mut columns: Vec<Vec<Option<f64>>> =
            vec![Vec::with_capacity(groups.len()); fields.len()];
        let mut valid = Vec::with_capacity(groups.len());
        for values in groups {
            if values.is_empty() {
                valid.push(false);
                columns.iter_mut().for_each(|c| c.push(None));
                continue;
            }
            valid.push(true);
            let mut sample = Sample::new(values)
                .map_err(|e| DataFusionError::Execution(format!("{}: {e}", self.name())))?;
            for (k, i) in sample.percentile_intervals().into_iter().enumerate() {
                columns[3 * k].push(Some(i.estimate));
                columns[3 * k + 1].push(i.low);
                columns[3 * k + 2].push(i.high);
            }
        }
        let arrays: Vec<ArrayRef> = columns
            .into_iter()
            .map(|c| Arc::new(Float64Array::from(c)) as ArrayRef)
            .collect();
        let nulls = datafusion::arrow::buffer::NullBuffer::from(valid);
        Ok(Arc::new(StructArray::try_new(
            fields.into(),
            arrays,
            Some(nulls),
        )?))
    }

    /// The statistic of `values` (taken), NULL over no values.
    fn of(self, values: Vec<f64>) -> Result<Option<f64>> {
        if values.is_empty() {
            return Ok(None);
        }
        let mut sample = Sample::new(values)
            .map_err(|e| DataFusionError::Execution(format!("{}: {e}", self.name())))?;
        Ok(match self {
            // Struct-valued: see `evaluate`.
            Self::Percentiles => None,
            Self::NearestRank(RankKind::Estimate, p) => Some(sample.nearest_rank(p)),
            Self::NearestRank(RankKind::Low, p) => sample.percentile_interval(p).low,
            Self::NearestRank(RankKind::High, p) => sample.percentile_interval(p).high,
            Self::Ci95(bound) => sample.ci95().map(|(low, high)| match bound {
                Bound::Low => low,
                Bound::High => high,
            }),
        })
    }

    fn float64s(self, array: &ArrayRef) -> Result<&Float64Array> {
        match array.as_primitive_opt::<Float64Type>() {
            Some(values) => Ok(values),
            None => exec_err!(
                "{}: expected a DOUBLE argument, got {}",
                self.name(),
                array.data_type()
            ),
        }
    }

    fn lists(self, state: &ArrayRef) -> Result<&ListArray> {
        match state.as_list_opt::<i32>() {
            Some(lists) => Ok(lists),
            None => exec_err!(
                "{}: unexpected state type {}",
                self.name(),
                state.data_type()
            ),
        }
    }
}

/// One list-of-Float64 state array, a list per group.
fn values_lists(groups: Vec<Vec<f64>>) -> ArrayRef {
    let lengths: Vec<usize> = groups.iter().map(Vec::len).collect();
    list_array(Arc::new(Float64Array::from(groups.concat())), lengths)
}

/// Ungrouped (and window) form: collects the values of one group.
#[derive(Debug)]
struct CollectingAccumulator {
    statistic: Statistic,
    values: Vec<f64>,
}

impl Accumulator for CollectingAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let values = self.statistic.float64s(&values[0])?;
        self.values.extend(values.iter().flatten());
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let lists = self.statistic.lists(&states[0])?;
        for list in lists.iter().flatten() {
            let values = self.statistic.float64s(&list)?;
            self.values.extend(values.iter().flatten());
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let list = values_lists(vec![self.values.clone()]);
        Ok(vec![ScalarValue::try_from_array(&list, 0)?])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        // Cloned: a window frame may evaluate, then update again.
        let array = self.statistic.evaluate(vec![self.values.clone()])?;
        ScalarValue::try_from_array(&array, 0)
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.values.capacity() * std::mem::size_of::<f64>()
    }
}

/// Grouped form: the values of every group, indexed by group, so that a `GROUP BY` feeds
/// each batch in one pass instead of slicing it per group.
#[derive(Debug)]
struct CollectingGroups {
    statistic: Statistic,
    groups: Vec<Vec<f64>>,
}

impl GroupsAccumulator for CollectingGroups {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.groups.resize_with(total_num_groups, Vec::new);
        let values = self.statistic.float64s(&values[0])?;
        for (row, &group) in group_indices.iter().enumerate() {
            let selected = selected(opt_filter, row);
            if selected && values.is_valid(row) {
                self.groups[group].push(values.value(row));
            }
        }
        Ok(())
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        self.groups.resize_with(total_num_groups, Vec::new);
        let lists = self.statistic.lists(&values[0])?;
        for (row, &group) in group_indices.iter().enumerate() {
            if lists.is_valid(row) {
                let list = lists.value(row);
                let list = self.statistic.float64s(&list)?;
                self.groups[group].extend(list.iter().flatten());
            }
        }
        Ok(())
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        Ok(vec![values_lists(emit_to.take_needed(&mut self.groups))])
    }

    /// Each row as its own group's state (when the aggregation skips the partial phase).
    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        let values = self.statistic.float64s(&values[0])?;
        let rows = (0..values.len()).map(|row| {
            let selected = selected(opt_filter, row);
            match selected && values.is_valid(row) {
                true => vec![values.value(row)],
                false => Vec::new(),
            }
        });
        Ok(vec![values_lists(rows.collect())])
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        self.statistic
            .evaluate(emit_to.take_needed(&mut self.groups))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
            + self.groups.capacity() * std::mem::size_of::<Vec<f64>>()
            + self
                .groups
                .iter()
                .map(|g| g.capacity() * std::mem::size_of::<f64>())
                .sum::<usize>()
    }
}

/// Evaluate a constant argument (a literal after constant folding).
fn constant_argument(expr: &Arc<dyn PhysicalExpr>, name: &str) -> Result<ScalarValue> {
    let batch = RecordBatch::new_empty(Arc::new(datafusion::arrow::datatypes::Schema::empty()));
    match expr.evaluate(&batch) {
        Ok(ColumnarValue::Scalar(s)) => Ok(s),
        _ => plan_err!("{name}: p must be a constant, e.g. {name}(ttft_ms, 0.95)"),
    }
}

/// What a `nearest_rank*` function returns: the percentile or an end of its interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RankKind {
    Estimate,
    Low,
    High,
}

impl RankKind {
    fn name(self) -> &'static str {
        match self {
            RankKind::Estimate => "nearest_rank",
            RankKind::Low => "nearest_rank_ci_low",
            RankKind::High => "nearest_rank_ci_high",
        }
    }
}

/// `nearest_rank(x, p)`, `nearest_rank_ci_low(x, p)`, `nearest_rank_ci_high(x, p)`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct NearestRank {
    kind: RankKind,
    signature: Signature,
}

impl NearestRank {
    pub fn new(kind: RankKind) -> Self {
        Self {
            kind,
            signature: float64_signature(2),
        }
    }

    /// The statistic with this call's p.
    fn statistic(&self, args: &AccumulatorArgs) -> Result<Statistic> {
        let name = self.kind.name();
        let Some(expr) = args.exprs.get(1) else {
            return plan_err!("{name} takes two arguments: {name}(x, p)");
        };
        let p = match constant_argument(expr, name)? {
            ScalarValue::Float64(Some(p)) => p,
            other => {
                return plan_err!("{name}: p must be a non-null number in (0, 1], got {other}");
            }
        };
        let p = Probability::new(p).map_err(|e| DataFusionError::Plan(format!("{name}: {e}")))?;
        Ok(Statistic::NearestRank(self.kind, p))
    }
}

impl AggregateUDFImpl for NearestRank {
    fn name(&self) -> &str {
        self.kind.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![list_state_field(&args, "values", DataType::Float64)])
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(CollectingAccumulator {
            statistic: self.statistic(&args)?,
            values: Vec::new(),
        }))
    }

    fn groups_accumulator_supported(&self, _args: AccumulatorArgs) -> bool {
        true
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        Ok(Box::new(CollectingGroups {
            statistic: self.statistic(&args)?,
            groups: Vec::new(),
        }))
    }
}

/// Which end of the confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bound {
    Low,
    High,
}

/// An aggregate of one fixed statistic of its one argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fixed {
    /// `ci95_low(x)` / `ci95_high(x)`.
    Ci95(Bound),
    /// `percentiles(x)`: every percentile of `cell_stats` with its interval, one collection
    /// and one sort per group (the per-percentile functions each collect and select on their
    /// own).
    Percentiles,
}

impl Fixed {
    fn statistic(self) -> Statistic {
        match self {
            Fixed::Ci95(bound) => Statistic::Ci95(bound),
            Fixed::Percentiles => Statistic::Percentiles,
        }
    }
}

/// `ci95_low(x)`, `ci95_high(x)`, `percentiles(x)`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct FixedStatistic {
    fixed: Fixed,
    signature: Signature,
}

impl FixedStatistic {
    pub fn new(fixed: Fixed) -> Self {
        Self {
            fixed,
            signature: float64_signature(1),
        }
    }
}

impl AggregateUDFImpl for FixedStatistic {
    fn name(&self) -> &str {
        self.fixed.statistic().name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(self.fixed.statistic().data_type())
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![list_state_field(&args, "values", DataType::Float64)])
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(CollectingAccumulator {
            statistic: self.fixed.statistic(),
            values: Vec::new(),
        }))
    }

    fn groups_accumulator_supported(&self, _args: AccumulatorArgs) -> bool {
        true
    }

    fn create_groups_accumulator(
        &self,
        _args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        Ok(Box::new(CollectingGroups {
            statistic: self.fixed.statistic(),
            groups: Vec::new(),
        }))
    }
}

/// `canaries(text)`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Canaries {
    signature: Signature,
}

impl Canaries {
    pub fn new() -> Self {
        Self {
            signature: Signature::coercible(
                vec![Coercion::new_exact(TypeSignatureClass::Native(
                    logical_string(),
                ))],
                Volatility::Immutable,
            ),
        }
    }
}

impl Default for Canaries {
    fn default() -> Self {
        Self::new()
    }
}

fn canary_list_type() -> DataType {
    DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true)))
}

impl ScalarUDFImpl for Canaries {
    fn name(&self) -> &str {
        "canaries"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(canary_list_type())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let Some(arg) = args.args.first() else {
            return plan_err!("canaries takes one argument: canaries(text)");
        };
        let array = arg.to_array(args.number_rows)?;
        let array = datafusion::arrow::compute::cast(&array, &DataType::Utf8)?;
        let texts = array.as_string::<i32>();
        let mut builder = ListBuilder::new(StringBuilder::new());
        for text in texts.iter() {
            match text {
                Some(text) => {
                    for found in canary::find_all(text) {
                        builder.values().append_value(found);
                    }
                    builder.append(true);
                }
                None => builder.append(false),
            }
        }
        let list: ArrayRef = Arc::new(builder.finish());
        Ok(match arg {
            ColumnarValue::Scalar(_) => {
                ColumnarValue::Scalar(ScalarValue::try_from_array(&list, 0)?)
            }
            ColumnarValue::Array(_) => ColumnarValue::Array(list),
        })
    }
}

/// `clopper_pearson_low(k, n)`, `clopper_pearson_high(k, n)`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ClopperPearson {
    bound: Bound,
    signature: Signature,
}

impl ClopperPearson {
    pub fn new(bound: Bound) -> Self {
        Self {
            bound,
            signature: float64_signature(2),
        }
    }
}

impl ScalarUDFImpl for ClopperPearson {
    fn name(&self) -> &str {
        match self.bound {
            Bound::Low => "clopper_pearson_low",
            Bound::High => "clopper_pearson_high",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [k, n] = args.args.as_slice() else {
            return plan_err!("{} takes two arguments: (k, n)", self.name());
        };
        let all_scalar = matches!((k, n), (ColumnarValue::Scalar(_), ColumnarValue::Scalar(_)));
        let ks = k.to_array(args.number_rows)?;
        let ns = n.to_array(args.number_rows)?;
        let ks = datafusion::arrow::compute::cast(&ks, &DataType::Float64)?;
        let ns = datafusion::arrow::compute::cast(&ns, &DataType::Float64)?;
        let count = |x: Option<f64>| {
            x.filter(|v| v.is_finite() && *v >= 0.0 && v.fract() == 0.0)
                .map(|v| v as u64)
        };
        let out: Float64Array = ks
            .as_primitive::<Float64Type>()
            .iter()
            .zip(ns.as_primitive::<Float64Type>().iter())
            .map(|(k, n)| {
                let p = crate::stats::clopper_pearson(count(k)?, count(n)?)?;
                Some(match self.bound {
                    Bound::Low => p.low,
                    Bound::High => p.high,
                })
            })
            .collect();
        let out: ArrayRef = Arc::new(out);
        Ok(if all_scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
        } else {
            ColumnarValue::Array(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::{Float64Type, Int64Type};

    use crate::query::AnvilSession;

    /// The single Float64 value of a one-row query.
    async fn one(session: &AnvilSession, sql: &str) -> Option<f64> {
        let r = session
            .query(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        let rows: Vec<Option<f64>> = r
            .batches
            .iter()
            .flat_map(|b| b.column(0).as_primitive::<Float64Type>().iter())
            .collect();
        assert_eq!(rows.len(), 1, "{sql}");
        rows[0]
    }

    async fn empty_session() -> AnvilSession {
        AnvilSession::from_artifacts(Vec::new()).await.unwrap()
    }

    #[tokio::test]
    async fn nearest_rank_edge_cases_in_sql() {
        let s = empty_session().await;
        let hundred = "FROM (SELECT CAST(value AS DOUBLE) AS x FROM generate_series(1, 100))";
        assert_eq!(
            one(&s, &format!("SELECT nearest_rank(x, 0.5) {hundred}")).await,
            Some(50.0)
        );
        assert_eq!(
            one(&s, &format!("SELECT nearest_rank(x, 0.99) {hundred}")).await,
            Some(99.0)
        );
        assert_eq!(
            one(&s, "SELECT nearest_rank(x, 0.5) FROM (VALUES (7.0)) t(x)").await,
            Some(7.0)
        );
        // n = 2: rank ceil(0.5 * 2) = 1, ceil(0.75 * 2) = 2.
        let two = "FROM (VALUES (20.0), (10.0)) t(x)";
        assert_eq!(
            one(&s, &format!("SELECT nearest_rank(x, 0.5) {two}")).await,
            Some(10.0)
        );
        assert_eq!(
            one(&s, &format!("SELECT nearest_rank(x, 0.75) {two}")).await,
            Some(20.0)
        );
        // Ties: sorted 1 3 3 3 9.
        let ties = "FROM (VALUES (3.0), (1.0), (3.0), (3.0), (9.0)) t(x)";
        assert_eq!(
            one(&s, &format!("SELECT nearest_rank(x, 0.8) {ties}")).await,
            Some(3.0)
        );
        assert_eq!(
            one(&s, &format!("SELECT nearest_rank(x, 0.81) {ties}")).await,
            Some(9.0)
        );
        // Integers are accepted; NULLs are skipped; no values gives NULL.
        assert_eq!(
            one(
                &s,
                "SELECT nearest_rank(x, 1) FROM (VALUES (1), (NULL), (4)) t(x)"
            )
            .await,
            Some(4.0)
        );
        assert_eq!(
            one(
                &s,
                "SELECT nearest_rank(x, 0.5) FROM (VALUES (1.0)) t(x) WHERE x > 5"
            )
            .await,
            None
        );
    }

    #[tokio::test]
    async fn grouped_and_filtered_aggregates_match_each_group_computed_by_hand() {
        // 100,000 rows over 7 groups, in many batches and both partitions, with a FILTER:
        // the grouped accumulator (update, state, merge, evaluate) against the values of
        // each group sorted here.
        let s = empty_session().await;
        let sql = "SELECT CAST(value % 7 AS BIGINT) AS k, \
                   nearest_rank(x, 0.9) FILTER (WHERE value % 5 <> 0) AS p90, \
                   nearest_rank(x, 0.25) AS p25, ci95_high(x) AS hi \
                   FROM (SELECT value, CAST((value * 7919) % 100003 AS DOUBLE) AS x \
                         FROM generate_series(1, 100000)) GROUP BY value % 7";
        let r = s.query(sql).await.unwrap();
        let mut seen = 0;
        for b in &r.batches {
            let k = b.column(0).as_primitive::<Int64Type>();
            let p90 = b.column(1).as_primitive::<Float64Type>();
            let p25 = b.column(2).as_primitive::<Float64Type>();
            let hi = b.column(3).as_primitive::<Float64Type>();
            for row in 0..b.num_rows() {
                let group = k.value(row);
                let x = |v: i64| ((v * 7919) % 100_003) as f64;
                let all: Vec<i64> = (1..=100_000).filter(|v| v % 7 == group).collect();
                let mut xs: Vec<f64> = all.iter().map(|&v| x(v)).collect();
                let mut filtered: Vec<f64> =
                    all.iter().filter(|&&v| v % 5 != 0).map(|&v| x(v)).collect();
                xs.sort_by(f64::total_cmp);
                filtered.sort_by(f64::total_cmp);
                let rank = |n: usize, p: f64| (p * n as f64).ceil() as usize - 1;
                assert_eq!(
                    p90.value(row),
                    filtered[rank(filtered.len(), 0.9)],
                    "k={group}"
                );
                assert_eq!(p25.value(row), xs[rank(xs.len(), 0.25)], "k={group}");
                let n = xs.len() as f64;
                let mean = xs.iter().sum::<f64>() / n;
                let sd = (xs.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
                let t = crate::stats::t_quantile((xs.len() - 1) as f64).unwrap();
                let expected = mean + t * sd / n.sqrt();
                assert!(
                    (hi.value(row) - expected).abs() <= 1e-9 * expected,
                    "k={group}"
                );
                seen += 1;
            }
        }
        assert_eq!(seen, 7);
    }

    #[tokio::test]
    async fn nearest_rank_refuses_a_bad_p() {
        let s = empty_session().await;
        for p in ["0", "1.5", "x"] {
            let sql = format!("SELECT nearest_rank(x, {p}) FROM (VALUES (1.0)) t(x)");
            let e = s.query(&sql).await.unwrap_err().to_string();
            assert!(e.contains("nearest_rank"), "{sql}: {e}");
        }
    }

    #[tokio::test]
    async fn ci95_matches_the_t_table() {
        let s = empty_session().await;
        // 1..=10: mean 5.5, sd = sqrt(82.5 / 9), t(0.975, 9) = 2.2621571628 (t-table).
        let ten = "FROM (SELECT CAST(value AS DOUBLE) AS x FROM generate_series(1, 10))";
        let half = 2.262_157_162_8 * (82.5f64 / 9.0).sqrt() / 10f64.sqrt();
        let low = one(&s, &format!("SELECT ci95_low(x) {ten}")).await.unwrap();
        let high = one(&s, &format!("SELECT ci95_high(x) {ten}"))
            .await
            .unwrap();
        assert!((low - (5.5 - half)).abs() < 1e-9, "{low}");
        assert!((high - (5.5 + half)).abs() < 1e-9, "{high}");
        assert_eq!(
            one(&s, "SELECT ci95_low(x) FROM (VALUES (1.0)) t(x)").await,
            None
        );
    }

    #[tokio::test]
    async fn canaries_extracts_markers_in_order() {
        let s = empty_session().await;
        let r = s
            .query(
                "SELECT array_to_string(canaries('a ANV-0123456789ab b XANV-0123456789ab ANV-ffffffffffff'), ',') AS c, canaries(NULL) IS NULL AS n",
            )
            .await
            .unwrap();
        let b = &r.batches[0];
        assert_eq!(
            b.column(0).as_string::<i32>().value(0),
            "ANV-0123456789ab,ANV-ffffffffffff"
        );
        assert!(b.column(1).as_boolean().value(0));
    }
}
