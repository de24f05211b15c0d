//! `ordered_concat(text, key)`: aggregate, the non-null `text` values of a group
//! concatenated in ascending order of `key` (NULL keys last, ties in input order); NULL when
//! the group has no non-null text.
//!
//! It is `string_agg(text, '' ORDER BY key)` written for the one use the views have: the
//! reply text of a request from its content deltas in `seq` order. DataFusion's ordered
//! `string_agg` keeps a `ScalarValue` per row and took 51 s over 10M events; this keeps each
//! group's bytes in one buffer and sorts a small index per group at the end (BENCHMARKS.md).

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Int64Array, ListArray, StringArray, StringViewArray,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, FieldRef, Int64Type};
use datafusion::common::types::{NativeType, logical_int64, logical_string};
use datafusion::common::{Result, ScalarValue, exec_err};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDFImpl, Coercion, EmitTo, GroupsAccumulator, Signature,
    TypeSignatureClass, Volatility,
};

use super::aggregate_state::{list_array, list_state_field, selected};

/// `ordered_concat(text, key)`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct OrderedConcat {
    signature: Signature,
}

impl OrderedConcat {
    pub fn new() -> Self {
        let text = Coercion::new_implicit(
            TypeSignatureClass::Native(logical_string()),
            vec![],
            NativeType::String,
        );
        let key = Coercion::new_implicit(
            TypeSignatureClass::Native(logical_int64()),
            vec![TypeSignatureClass::Integer],
            NativeType::Int64,
        );
        Self {
            signature: Signature::coercible(vec![text, key], Volatility::Immutable),
        }
    }
}

impl Default for OrderedConcat {
    fn default() -> Self {
        Self::new()
    }
}

impl AggregateUDFImpl for OrderedConcat {
    fn name(&self) -> &str {
        "ordered_concat"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![
            list_state_field(&args, "keys", DataType::Int64),
            list_state_field(&args, "texts", DataType::Utf8),
        ])
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(OneGroup(Pieces::default())))
    }

    fn groups_accumulator_supported(&self, _args: AccumulatorArgs) -> bool {
        true
    }

    fn create_groups_accumulator(
        &self,
        _args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        Ok(Box::new(Groups(Vec::new())))
    }
}

/// The pieces of one group: the bytes in arrival order and, per piece, its key and range.
#[derive(Debug, Default, Clone)]
struct Pieces {
    bytes: String,
    index: Vec<(Option<i64>, u32, u32)>,
}

impl Pieces {
    fn push(&mut self, key: Option<i64>, text: &str) -> Result<()> {
        let (Ok(start), Ok(len)) = (u32::try_from(self.bytes.len()), u32::try_from(text.len()))
        else {
            return exec_err!("ordered_concat: a group's text exceeds 4 GiB");
        };
        self.bytes.push_str(text);
        self.index.push((key, start, len));
        Ok(())
    }

    fn text(&self, &(_, start, len): &(Option<i64>, u32, u32)) -> &str {
        &self.bytes[start as usize..(start + len) as usize]
    }

    /// The concatenation in key order (NULL keys last, ties in arrival order). Sorts the
    /// index in place: a stable sort, so a later call (a window frame that grew) keeps
    /// earlier ties in arrival order.
    fn concat(&mut self) -> Option<String> {
        if self.index.is_empty() {
            return None;
        }
        self.index.sort_by_key(|&(key, _, _)| (key.is_none(), key));
        let mut out = String::with_capacity(self.bytes.len());
        for piece in &self.index {
            out.push_str(self.text(piece));
        }
        Some(out)
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
            + self.bytes.capacity()
            + self.index.capacity() * std::mem::size_of::<(Option<i64>, u32, u32)>()
    }
}

/// The input columns as string views and Int64 keys.
fn inputs(values: &[ArrayRef]) -> Result<(StringViewArray, Int64Array)> {
    let texts = cast(&values[0], &DataType::Utf8View)?;
    let keys = cast(&values[1], &DataType::Int64)?;
    Ok((
        texts.as_string_view().clone(),
        keys.as_primitive::<Int64Type>().clone(),
    ))
}

/// The (keys, texts) state lists of some groups.
fn state_lists(groups: &[Pieces]) -> Vec<ArrayRef> {
    let lengths = || groups.iter().map(|g| g.index.len());
    let keys: Int64Array = groups
        .iter()
        .flat_map(|g| g.index.iter().map(|&(key, _, _)| key))
        .collect();
    let texts: StringArray = groups
        .iter()
        .flat_map(|g| g.index.iter().map(|piece| Some(g.text(piece))))
        .collect();
    vec![
        list_array(Arc::new(keys), lengths()),
        list_array(Arc::new(texts), lengths()),
    ]
}

/// Add the state row `row` (lists of keys and texts) to `pieces`.
fn merge_row(pieces: &mut Pieces, keys: &ListArray, texts: &ListArray, row: usize) -> Result<()> {
    if keys.is_null(row) || texts.is_null(row) {
        return Ok(());
    }
    let row_keys = keys.value(row);
    let row_texts = texts.value(row);
    let (Some(row_keys), Some(row_texts)) = (
        row_keys.as_primitive_opt::<Int64Type>(),
        row_texts.as_string_opt::<i32>(),
    ) else {
        return exec_err!("ordered_concat: unexpected state types");
    };
    for (key, text) in row_keys.iter().zip(row_texts.iter()) {
        if let Some(text) = text {
            pieces.push(key, text)?;
        }
    }
    Ok(())
}

/// The state lists of a partial aggregate.
fn state_inputs(values: &[ArrayRef]) -> Result<(&ListArray, &ListArray)> {
    match (
        values[0].as_list_opt::<i32>(),
        values[1].as_list_opt::<i32>(),
    ) {
        (Some(keys), Some(texts)) => Ok((keys, texts)),
        _ => exec_err!("ordered_concat: unexpected state types"),
    }
}

/// Ungrouped (and window) form.
#[derive(Debug)]
struct OneGroup(Pieces);

impl Accumulator for OneGroup {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let (texts, keys) = inputs(values)?;
        for row in 0..texts.len() {
            if texts.is_valid(row) {
                self.0.push(
                    keys.is_valid(row).then(|| keys.value(row)),
                    texts.value(row),
                )?;
            }
        }
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let (keys, texts) = state_inputs(states)?;
        for row in 0..keys.len() {
            merge_row(&mut self.0, keys, texts, row)?;
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        state_lists(std::slice::from_ref(&self.0))
            .iter()
            .map(|list| ScalarValue::try_from_array(list, 0))
            .collect()
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Utf8(self.0.concat()))
    }

    fn size(&self) -> usize {
        self.0.size()
    }
}

/// Grouped form: the pieces of every group, indexed by group.
#[derive(Debug)]
struct Groups(Vec<Pieces>);

impl GroupsAccumulator for Groups {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.0.resize_with(total_num_groups, Pieces::default);
        let (texts, keys) = inputs(values)?;
        for (row, &group) in group_indices.iter().enumerate() {
            let selected = selected(opt_filter, row);
            if selected && texts.is_valid(row) {
                let key = keys.is_valid(row).then(|| keys.value(row));
                self.0[group].push(key, texts.value(row))?;
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
        self.0.resize_with(total_num_groups, Pieces::default);
        let (keys, texts) = state_inputs(values)?;
        for (row, &group) in group_indices.iter().enumerate() {
            merge_row(&mut self.0[group], keys, texts, row)?;
        }
        Ok(())
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        Ok(state_lists(&emit_to.take_needed(&mut self.0)))
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let groups = emit_to.take_needed(&mut self.0);
        let out: StringArray = groups.into_iter().map(|mut g| g.concat()).collect();
        Ok(Arc::new(out))
    }

    /// Each row as its own group's state (when the aggregation skips the partial phase).
    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        let (texts, keys) = inputs(values)?;
        let mut groups = vec![Pieces::default(); texts.len()];
        for (row, pieces) in groups.iter_mut().enumerate() {
            let selected = selected(opt_filter, row);
            if selected && texts.is_valid(row) {
                pieces.push(
                    keys.is_valid(row).then(|| keys.value(row)),
                    texts.value(row),
                )?;
            }
        }
        Ok(state_lists(&groups))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.0.iter().map(Pieces::size).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::compute::cast;
    use datafusion::arrow::datatypes::DataType;

    use crate::query::AnvilSession;

    /// Column `i` of a query's rows, as strings (NULL as None).
    async fn strings(session: &AnvilSession, sql: &str, i: usize) -> Vec<Option<String>> {
        let out = session
            .query(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        out.batches
            .iter()
            .flat_map(|b| {
                let col = cast(b.column(i), &DataType::Utf8).unwrap();
                col.as_string::<i32>()
                    .iter()
                    .map(|s| s.map(str::to_owned))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[tokio::test]
    async fn concatenates_in_key_order_skipping_nulls() {
        let s = AnvilSession::from_artifacts(Vec::new()).await.unwrap();
        let sql = "SELECT g, ordered_concat(t, k) FROM (VALUES \
                   (1, 'c', 3), (1, 'a', 1), (1, NULL, 0), (1, 'b', 2), \
                   (2, 'y', NULL), (2, 'x', 5), (3, NULL, 1)) v(g, t, k) \
                   GROUP BY g ORDER BY g";
        assert_eq!(
            strings(&s, sql, 1).await,
            vec![Some("abc".into()), Some("xy".into()), None]
        );
        // Ungrouped, over Utf8View input from a cast.
        let sql = "SELECT ordered_concat(arrow_cast(t, 'Utf8View'), k) \
                   FROM (VALUES ('lo', 2), ('hel', 1)) v(t, k)";
        assert_eq!(strings(&s, sql, 0).await, vec![Some("hello".into())]);
    }

    #[tokio::test]
    async fn agrees_with_ordered_string_agg_over_many_groups_and_batches() {
        // 60,000 rows in 700 groups, keys out of arrival order and unique within a group,
        // a FILTER, both partitions: DataFusion's own ordered string_agg is the oracle.
        let s = AnvilSession::from_artifacts(Vec::new()).await.unwrap();
        let data = "(SELECT value % 700 AS g, (value * 7919) % 60013 AS k, \
                    CAST(value % 97 AS VARCHAR) || '.' AS t FROM generate_series(1, 60000))";
        let ours = strings(
            &s,
            &format!(
                "SELECT g, ordered_concat(t, k) FILTER (WHERE k % 3 <> 0) FROM {data} \
                 GROUP BY g ORDER BY g"
            ),
            1,
        )
        .await;
        let oracle = strings(
            &s,
            &format!(
                "SELECT g, string_agg(t, '' ORDER BY k) FILTER (WHERE k % 3 <> 0) FROM {data} \
                 GROUP BY g ORDER BY g"
            ),
            1,
        )
        .await;
        assert_eq!(ours.len(), 700);
        assert_eq!(ours, oracle);
    }
}
