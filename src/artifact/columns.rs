//! The `events` table's columns as the writer receives its rows: plain vectors, appended to
//! row by row, lent to Arrow without a copy when a part is written and taken back after it.
//!
//! A part file is written about once a second. Built afresh for each one, its Arrow columns
//! are new allocations of a few megabytes, which the allocator maps from the kernel and
//! returns after the write (`memory::MMAP_THRESHOLD`): every page of them is faulted in
//! again at every part. Kept here and reused, they are faulted in once, and what the writer
//! holds between parts stays the size of the largest part. A row is also copied into its
//! columns as it comes instead of being kept whole until the part (one `EventRow` and its
//! strings per event held for up to a second).
//!
//! [`EventColumns::take_batch`] gives exactly the batch [`events_batch`](super::rows::events_batch)
//! makes of the same rows (a test holds them equal).

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray};
use arrow_buffer::{
    ArrowNativeType, BooleanBuffer, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer,
};
use arrow_data::ArrayData;
use arrow_schema::ArrowError;

use super::rows::EventRow;
use super::schema::events_schema;

/// Validity bits (Arrow's layout: bit `i % 8` of byte `i / 8`), and how many are unset.
#[derive(Debug, Default)]
struct Bits {
    bytes: Vec<u8>,
    len: usize,
    unset: usize,
}

impl Bits {
    fn push(&mut self, set: bool) {
        if self.len.is_multiple_of(8) {
            self.bytes.push(0);
        }
        if set {
            // The byte for `len` was pushed above (or earlier in this byte).
            if let Some(b) = self.bytes.last_mut() {
                *b |= 1 << (self.len % 8);
            }
        } else {
            self.unset += 1;
        }
        self.len += 1;
    }

    /// The bits as a buffer (the vector lent, not copied).
    fn take_buffer(&mut self) -> BooleanBuffer {
        let len = std::mem::take(&mut self.len);
        self.unset = 0;
        BooleanBuffer::new(Buffer::from_vec(std::mem::take(&mut self.bytes)), 0, len)
    }

    /// The bits as a null buffer: `None` when every value is present (no bitmap written).
    fn take_nulls(&mut self) -> Option<NullBuffer> {
        if self.unset == 0 {
            self.len = 0;
            self.bytes.clear();
            return None;
        }
        Some(NullBuffer::new(self.take_buffer()))
    }

    fn reclaim(&mut self, buffer: Buffer) {
        keep(&mut self.bytes, buffer);
    }
}

/// The most memory one column's vector keeps from part to part: a part far larger than the
/// run's usual ones (one huge event) gives its memory back instead of holding it to the end.
const KEEP_AT_MOST: usize = 64 << 20;

/// Take `buffer`'s memory into `slot`, emptied, if `slot` has none, nothing else holds the
/// buffer, and it is at most [`KEEP_AT_MOST`] bytes.
fn keep<T: ArrowNativeType>(slot: &mut Vec<T>, buffer: Buffer) {
    if slot.capacity() == 0
        && buffer.capacity() <= KEEP_AT_MOST
        && let Ok(mut v) = buffer.into_vec::<T>()
    {
        v.clear();
        *slot = v;
    }
}

/// `array` as its concrete type, holding its buffers itself (no copy: the buffers move; they
/// are then unique if nothing else held `array`).
fn owned<A: From<ArrayData> + 'static>(array: ArrayRef) -> Option<A> {
    array.as_any().downcast_ref::<A>()?;
    let data = array.to_data();
    drop(array);
    Some(A::from(data))
}

/// A string column, nullable or not.
#[derive(Debug, Default)]
struct Strings {
    offsets: Vec<i32>,
    values: Vec<u8>,
    valid: Bits,
}

impl Strings {
    fn push(&mut self, value: Option<&str>) -> Result<(), ArrowError> {
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        let bytes = value.map_or(&b""[..], str::as_bytes);
        let end = i32::try_from(self.values.len() + bytes.len()).map_err(|_| {
            ArrowError::ComputeError("a part's string column exceeds 2 GiB".to_owned())
        })?;
        self.values.extend_from_slice(bytes);
        self.offsets.push(end);
        self.valid.push(value.is_some());
        Ok(())
    }

    fn take(&mut self) -> ArrayRef {
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        let nulls = self.valid.take_nulls();
        // SAFETY: the offsets start at 0, never decrease (each is the values' length after a
        // push) and end at the values' length; the values are whole `&str`s, so UTF-8.
        let array = unsafe {
            StringArray::new_unchecked(
                OffsetBuffer::new_unchecked(ScalarBuffer::from(std::mem::take(&mut self.offsets))),
                Buffer::from_vec(std::mem::take(&mut self.values)),
                nulls,
            )
        };
        Arc::new(array)
    }

    fn reclaim(&mut self, array: ArrayRef) {
        let Some(a) = owned::<StringArray>(array) else {
            return;
        };
        let (offsets, values, nulls) = a.into_parts();
        keep(&mut self.offsets, offsets.into_inner().into_inner());
        keep(&mut self.values, values);
        if let Some(n) = nulls {
            self.valid.reclaim(n.into_inner().into_inner());
        }
    }
}

/// An `Int64` column, nullable or not.
#[derive(Debug, Default)]
struct Ints {
    values: Vec<i64>,
    valid: Bits,
}

impl Ints {
    fn push(&mut self, value: Option<i64>) {
        self.values.push(value.unwrap_or(0));
        self.valid.push(value.is_some());
    }

    fn take(&mut self) -> ArrayRef {
        let nulls = self.valid.take_nulls();
        Arc::new(Int64Array::new(
            ScalarBuffer::from(std::mem::take(&mut self.values)),
            nulls,
        ))
    }

    fn reclaim(&mut self, array: ArrayRef) {
        let Some(a) = owned::<Int64Array>(array) else {
            return;
        };
        let (_, values, nulls) = a.into_parts();
        keep(&mut self.values, values.into_inner());
        if let Some(n) = nulls {
            self.valid.reclaim(n.into_inner().into_inner());
        }
    }
}

/// The `events` table's columns, in schema order (see `schema::EVENTS_COLUMNS`).
#[derive(Debug, Default)]
pub(super) struct EventColumns {
    rows: usize,
    /// The most bytes a string column may hold (`None`: the 2 GiB an `i32` offset addresses;
    /// tests set less).
    pub(super) limit: Option<usize>,
    run_id: Strings,
    request_index: Ints,
    seq: Ints,
    t_ns: Ints,
    event: Strings,
    data: Strings,
    content_delta: Strings,
    reasoning_delta: Strings,
    tool_call_delta: Strings,
    finish_reason: Strings,
    usage_prompt_tokens: Ints,
    usage_completion_tokens: Ints,
    usage_cached_tokens: Ints,
    stream_error: Strings,
    done: Bits,
    parse_error: Strings,
}

impl EventColumns {
    /// Rows appended since the last [`take_batch`](Self::take_batch).
    pub(super) fn len(&self) -> usize {
        self.rows
    }

    pub(super) fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// The most bytes any string column holds: a part is written before it nears the 2 GiB
    /// an `i32` offset can address.
    pub(super) fn largest_column_bytes(&self) -> usize {
        [
            &self.run_id,
            &self.event,
            &self.data,
            &self.content_delta,
            &self.reasoning_delta,
            &self.tool_call_delta,
            &self.finish_reason,
            &self.stream_error,
            &self.parse_error,
        ]
        .iter()
        .map(|c| c.values.len())
        .max()
        .unwrap_or(0)
    }

    /// Append one row of run `run_id`. A row that would take a string column past 2 GiB is
    /// refused whole (no column gets any of it).
    pub(super) fn push(&mut self, run_id: &str, r: &EventRow) -> Result<(), ArrowError> {
        let p = &r.parsed;
        let limit = self.limit.unwrap_or(i32::MAX as usize);
        let room = |c: &Strings, v: Option<&str>| c.values.len() + v.map_or(0, str::len) <= limit;
        let fits = room(&self.run_id, Some(run_id))
            && room(&self.event, r.event.as_deref())
            && room(&self.data, Some(&r.data))
            && room(&self.content_delta, p.content_delta.as_deref())
            && room(&self.reasoning_delta, p.reasoning_delta.as_deref())
            && room(&self.tool_call_delta, p.tool_call_delta.as_deref())
            && room(&self.finish_reason, p.finish_reason.as_deref())
            && room(&self.stream_error, p.stream_error.as_deref())
            && room(&self.parse_error, p.parse_error.as_deref());
        if !fits {
            return Err(ArrowError::ComputeError(
                "an event row does not fit a part's 2 GiB string column".to_owned(),
            ));
        }
        self.run_id.push(Some(run_id))?;
        self.request_index.push(Some(i64::from(r.request_index)));
        self.seq.push(Some(i64::from(r.seq)));
        self.t_ns.push(Some(r.t_ns));
        self.event.push(r.event.as_deref())?;
        self.data.push(Some(&r.data))?;
        self.content_delta.push(p.content_delta.as_deref())?;
        self.reasoning_delta.push(p.reasoning_delta.as_deref())?;
        self.tool_call_delta.push(p.tool_call_delta.as_deref())?;
        self.finish_reason.push(p.finish_reason.as_deref())?;
        self.usage_prompt_tokens.push(p.usage_prompt_tokens);
        self.usage_completion_tokens.push(p.usage_completion_tokens);
        self.usage_cached_tokens.push(p.usage_cached_tokens);
        self.stream_error.push(p.stream_error.as_deref())?;
        self.done.push(p.done);
        self.parse_error.push(p.parse_error.as_deref())?;
        self.rows += 1;
        Ok(())
    }

    /// The rows appended so far as one batch (the columns lent, not copied); the columns are
    /// then empty. Give the batch back with [`reclaim`](Self::reclaim) once it is written.
    pub(super) fn take_batch(&mut self) -> Result<RecordBatch, ArrowError> {
        self.rows = 0;
        let columns: Vec<ArrayRef> = vec![
            self.run_id.take(),
            self.request_index.take(),
            self.seq.take(),
            self.t_ns.take(),
            self.event.take(),
            self.data.take(),
            self.content_delta.take(),
            self.reasoning_delta.take(),
            self.tool_call_delta.take(),
            self.finish_reason.take(),
            self.usage_prompt_tokens.take(),
            self.usage_completion_tokens.take(),
            self.usage_cached_tokens.take(),
            self.stream_error.take(),
            Arc::new(BooleanArray::new(self.done.take_buffer(), None)),
            self.parse_error.take(),
        ];
        RecordBatch::try_new(events_schema(), columns)
    }

    /// Take back the memory of a batch [`take_batch`](Self::take_batch) made, for the next
    /// rows. A column still referenced elsewhere (or of another shape) is left to be freed,
    /// and the next part allocates its own: only memory reuse depends on this, never rows.
    pub(super) fn reclaim(&mut self, batch: RecordBatch) {
        if batch.num_columns() != 16 || self.rows != 0 {
            return;
        }
        let columns = batch.columns().to_vec();
        drop(batch);
        let Ok::<[ArrayRef; 16], _>(
            [
                run_id,
                request_index,
                seq,
                t_ns,
                event,
                data,
                content_delta,
                reasoning_delta,
                tool_call_delta,
                finish_reason,
                usage_prompt_tokens,
                usage_completion_tokens,
                usage_cached_tokens,
                stream_error,
                done,
                parse_error,
            ],
        ) = columns.try_into()
        else {
            return;
        };
        self.run_id.reclaim(run_id);
        self.request_index.reclaim(request_index);
        self.seq.reclaim(seq);
        self.t_ns.reclaim(t_ns);
        self.event.reclaim(event);
        self.data.reclaim(data);
        self.content_delta.reclaim(content_delta);
        self.reasoning_delta.reclaim(reasoning_delta);
        self.tool_call_delta.reclaim(tool_call_delta);
        self.finish_reason.reclaim(finish_reason);
        self.usage_prompt_tokens.reclaim(usage_prompt_tokens);
        self.usage_completion_tokens
            .reclaim(usage_completion_tokens);
        self.usage_cached_tokens.reclaim(usage_cached_tokens);
        self.stream_error.reclaim(stream_error);
        if let Some(b) = owned::<BooleanArray>(done) {
            self.done.reclaim(b.into_parts().0.into_inner());
        }
        self.parse_error.reclaim(parse_error);
    }

    /// Bytes of memory the columns hold for the next rows (what [`reclaim`](Self::reclaim)
    /// got back).
    #[cfg(test)]
    pub(super) fn capacity_bytes(&self) -> usize {
        self.data.values.capacity()
            + self.data.offsets.capacity() * 4
            + self.t_ns.values.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifact::rows::events_batch;

    fn rows() -> Vec<EventRow> {
        let datas: [&[u8]; 7] = [
            br#"{"choices":[{"index":0,"delta":{"content":"hi"}}]}"#,
            br#"{"choices":[{"index":0,"delta":{"reasoning_content":"hm"},"finish_reason":null}]}"#,
            br#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":2}}}"#,
            br#"{"error":{"message":"boom"}}"#,
            b"not json",
            b"\xff\xfe",
            b"[DONE]",
        ];
        (0..200u32)
            .map(|i| {
                let name = (i % 5 == 0).then_some("response.output_text.delta");
                EventRow::from_raw(
                    i / 7,
                    i % 7,
                    i64::from(i) * 1000,
                    name,
                    datas[i as usize % 7],
                )
            })
            .collect()
    }

    #[test]
    fn the_batch_equals_the_one_made_from_the_rows_part_after_part() {
        let rows = rows();
        let mut cols = EventColumns::default();
        // Three parts of different sizes, each reusing the memory of the one before.
        for part in [&rows[..], &rows[..3], &rows[50..]] {
            for r in part {
                cols.push("run-1", r).unwrap();
            }
            assert_eq!(cols.len(), part.len());
            let batch = cols.take_batch().unwrap();
            assert!(cols.is_empty());
            assert_eq!(batch, events_batch("run-1", part).unwrap());
            cols.reclaim(batch);
        }
        // An empty part is a valid empty batch.
        let empty = cols.take_batch().unwrap();
        assert_eq!(empty, events_batch("run-1", &[]).unwrap());
    }

    #[test]
    fn a_row_too_large_for_the_part_is_refused_whole() {
        let rows = rows();
        let mut cols = EventColumns {
            limit: Some(120),
            ..EventColumns::default()
        };
        cols.push("run-1", &rows[0]).unwrap();
        let big = EventRow::from_raw(0, 1, 1, None, &[b'x'; 100]);
        let err = cols.push("run-1", &big).unwrap_err().to_string();
        assert!(err.contains("2 GiB"), "{err}");
        // Nothing of it went in: the part is the one row before it, whole.
        assert_eq!(cols.len(), 1);
        let batch = cols.take_batch().unwrap();
        assert_eq!(batch, events_batch("run-1", &rows[..1]).unwrap());
    }

    #[test]
    fn a_written_batch_gives_its_memory_back() {
        let rows = rows();
        let mut cols = EventColumns::default();
        for r in &rows {
            cols.push("run-1", r).unwrap();
        }
        let batch = cols.take_batch().unwrap();
        assert_eq!(cols.capacity_bytes(), 0);
        // Written the way a part is: the writer's references are gone when it is done.
        let mut out = Vec::new();
        let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, batch.schema(), None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        cols.reclaim(batch);
        assert!(cols.capacity_bytes() > 0, "the columns got no memory back");
        // A batch still referenced elsewhere is left alone (its clone keeps it alive).
        for r in &rows {
            cols.push("run-1", r).unwrap();
        }
        let batch = cols.take_batch().unwrap();
        let kept = batch.clone();
        cols.reclaim(batch);
        assert_eq!(cols.capacity_bytes(), 0);
        assert_eq!(kept.num_rows(), rows.len());
    }
}
