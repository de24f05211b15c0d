//! What the collecting aggregates share (`nearest_rank`, `ci95_*` in [`super::udf`],
//! `ordered_concat` in [`super::ordered_concat`]): list-typed state fields and arrays, and the
//! `FILTER (WHERE …)` test of a row.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, ListArray};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::logical_expr::function::StateFieldsArgs;
use datafusion::logical_expr::utils::format_state_name;

/// A nullable list-of-`item` state field of the aggregate being planned (`args`).
pub(crate) fn list_state_field(args: &StateFieldsArgs, state: &str, item: DataType) -> FieldRef {
    Arc::new(Field::new(
        format_state_name(args.name, state),
        DataType::List(Arc::new(Field::new_list_field(item, true))),
        true,
    ))
}

/// `values` cut into consecutive lists of `lengths` (a state array, one list per group).
pub(crate) fn list_array(values: ArrayRef, lengths: impl IntoIterator<Item = usize>) -> ArrayRef {
    let field = Arc::new(Field::new_list_field(values.data_type().clone(), true));
    let offsets = OffsetBuffer::from_lengths(lengths);
    Arc::new(ListArray::new(field, offsets, values, None))
}

/// Whether an aggregate's `FILTER (WHERE ...)` keeps `row` (NULL drops it, as in SQL).
pub(crate) fn selected(opt_filter: Option<&BooleanArray>, row: usize) -> bool {
    opt_filter.is_none_or(|f| f.is_valid(row) && f.value(row))
}
