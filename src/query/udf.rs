//! SQL functions registered on every anvil session, so the views in `queries/` read like the
//! manifest's definitions:
//!
//! - `nearest_rank(x, p)`: aggregate, the value at rank ⌈p·n⌉ of the sorted non-null values
//!   (p a constant in (0, 1]); NULL over no values;
//! - `ci95_low(x)`, `ci95_high(x)`: aggregate, mean ∓/± t(0.975, n − 1) · sd / √n; NULL for
//!   n < 2;
//! - `canaries(text)`: scalar, the list of canary markers (`ANV-` + 12 hex) in `text`, in
//!   order of appearance.
//!
//! The math lives in [`crate::stats`]; these are adapters from Arrow arrays to a
//! [`Sample`].

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, ListArray, ListBuilder, StringBuilder};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Float64Type};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::types::{NativeType, logical_float64, logical_string};
use datafusion::common::{DataFusionError, Result, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Coercion, ColumnarValue, ScalarFunctionArgs,
    ScalarUDF, ScalarUDFImpl, Signature, TypeSignatureClass, Volatility,
};
use datafusion::physical_plan::PhysicalExpr;
use datafusion::prelude::SessionContext;

use crate::artifact::canary;
use crate::stats::{Probability, Sample};

/// Register every anvil function on `ctx`.
pub fn register(ctx: &SessionContext) {
    ctx.register_udaf(AggregateUDF::from(NearestRank::new()));
    ctx.register_udaf(AggregateUDF::from(Ci95::new(Bound::Low)));
    ctx.register_udaf(AggregateUDF::from(Ci95::new(Bound::High)));
    ctx.register_udf(ScalarUDF::from(Canaries::new()));
}

/// Names of the functions [`register`] adds, for `--list`.
pub const FUNCTIONS: [(&str, &str); 4] = [
    (
        "nearest_rank(x, p)",
        "aggregate: value at rank ceil(p*n) of the sorted non-null x, p constant in (0, 1]",
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
        "canaries(text)",
        "scalar: list of canary markers (ANV- + 12 hex) in text, in order",
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

/// One list-of-Float64 state field holding the collected values.
fn values_state_field(args: &StateFieldsArgs, state: &str) -> FieldRef {
    Arc::new(Field::new(
        format_state_name(args.name, state),
        DataType::List(Arc::new(Field::new_list_field(DataType::Float64, true))),
        true,
    ))
}

/// The non-null Float64 values collected by an aggregate, in any order.
#[derive(Debug, Default)]
struct Collected {
    values: Vec<f64>,
}

impl Collected {
    fn update(&mut self, array: &ArrayRef, function: &str) -> Result<()> {
        let Some(values) = array.as_primitive_opt::<Float64Type>() else {
            return exec_err!(
                "{function}: expected a DOUBLE argument, got {}",
                array.data_type()
            );
        };
        self.values.reserve(values.len() - values.null_count());
        self.values.extend(values.iter().flatten());
        Ok(())
    }

    fn merge(&mut self, state: &ArrayRef, function: &str) -> Result<()> {
        let Some(lists) = state.as_list_opt::<i32>() else {
            return exec_err!("{function}: unexpected state type {}", state.data_type());
        };
        for i in 0..lists.len() {
            if lists.is_valid(i) {
                self.update(&lists.value(i), function)?;
            }
        }
        Ok(())
    }

    fn state(&mut self) -> ScalarValue {
        let list = ListArray::from_iter_primitive::<Float64Type, _, _>([Some(
            self.values.iter().copied().map(Some).collect::<Vec<_>>(),
        )]);
        ScalarValue::List(Arc::new(list))
    }

    /// The sample, or `None` when no values were seen.
    fn sample(&self, function: &str) -> Result<Option<Sample>> {
        if self.values.is_empty() {
            return Ok(None);
        }
        Sample::new(self.values.clone())
            .map(Some)
            .map_err(|e| DataFusionError::Execution(format!("{function}: {e}")))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.values.capacity() * std::mem::size_of::<f64>()
    }
}

/// Evaluate a constant argument (a literal after constant folding).
fn constant_argument(expr: &Arc<dyn PhysicalExpr>) -> Result<ScalarValue> {
    let batch = RecordBatch::new_empty(Arc::new(datafusion::arrow::datatypes::Schema::empty()));
    match expr.evaluate(&batch) {
        Ok(ColumnarValue::Scalar(s)) => Ok(s),
        _ => plan_err!("nearest_rank: p must be a constant, e.g. nearest_rank(ttft_ms, 0.95)"),
    }
}

/// `nearest_rank(x, p)`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct NearestRank {
    signature: Signature,
}

impl NearestRank {
    pub fn new() -> Self {
        Self {
            signature: float64_signature(2),
        }
    }
}

impl Default for NearestRank {
    fn default() -> Self {
        Self::new()
    }
}

impl AggregateUDFImpl for NearestRank {
    fn name(&self) -> &str {
        "nearest_rank"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![values_state_field(&args, "values")])
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let Some(expr) = args.exprs.get(1) else {
            return plan_err!("nearest_rank takes two arguments: nearest_rank(x, p)");
        };
        let p = match constant_argument(expr)? {
            ScalarValue::Float64(Some(p)) => p,
            other => {
                return plan_err!(
                    "nearest_rank: p must be a non-null number in (0, 1], got {other}"
                );
            }
        };
        let p =
            Probability::new(p).map_err(|e| DataFusionError::Plan(format!("nearest_rank: {e}")))?;
        Ok(Box::new(NearestRankAccumulator {
            p,
            collected: Collected::default(),
        }))
    }
}

#[derive(Debug)]
struct NearestRankAccumulator {
    p: Probability,
    collected: Collected,
}

impl Accumulator for NearestRankAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.collected.update(&values[0], "nearest_rank")
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.collected.merge(&states[0], "nearest_rank")
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![self.collected.state()])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let value = self
            .collected
            .sample("nearest_rank")?
            .map(|s| s.nearest_rank(self.p));
        Ok(ScalarValue::Float64(value))
    }

    fn size(&self) -> usize {
        self.collected.size()
    }
}

/// Which end of the confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bound {
    Low,
    High,
}

/// `ci95_low(x)` / `ci95_high(x)`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Ci95 {
    bound: Bound,
    signature: Signature,
}

impl Ci95 {
    pub fn new(bound: Bound) -> Self {
        Self {
            bound,
            signature: float64_signature(1),
        }
    }
}

impl AggregateUDFImpl for Ci95 {
    fn name(&self) -> &str {
        match self.bound {
            Bound::Low => "ci95_low",
            Bound::High => "ci95_high",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![values_state_field(&args, "values")])
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(Ci95Accumulator {
            bound: self.bound,
            collected: Collected::default(),
        }))
    }
}

#[derive(Debug)]
struct Ci95Accumulator {
    bound: Bound,
    collected: Collected,
}

impl Ci95Accumulator {
    fn name(&self) -> &'static str {
        match self.bound {
            Bound::Low => "ci95_low",
            Bound::High => "ci95_high",
        }
    }
}

impl Accumulator for Ci95Accumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.collected.update(&values[0], self.name())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.collected.merge(&states[0], self.name())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![self.collected.state()])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let ci = self.collected.sample(self.name())?.and_then(|s| s.ci95());
        Ok(ScalarValue::Float64(ci.map(
            |(low, high)| match self.bound {
                Bound::Low => low,
                Bound::High => high,
            },
        )))
    }

    fn size(&self) -> usize {
        self.collected.size()
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

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::Float64Type;

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
