//! SSE framing of a response body: bytes in, `(event name, data)` pairs out, nothing parsed.
//!
//! Framing follows the WHATWG event-stream rules as implemented by the `eventsource-stream`
//! crate: LF, CRLF or CR line ends; `:` comment lines ignored; `event:` names the event;
//! several `data:` lines join with `\n`; a blank line dispatches; an event split across any
//! number of reads (even byte by byte, even inside a multi-byte UTF-8 character) is reassembled;
//! a trailing event without its blank line at the end of the body is discarded (it never
//! completed). Per the same rules an event whose data is empty is not dispatched: keep-alive
//! comments and blank events carry nothing to record.
//!
//! An event without an `event:` line has the spec's default type `message`; it is reported as
//! `None` so the OpenAI-style `data:`-only streams carry no name.

use std::pin::Pin;
use std::task::{Context, Poll};

use eventsource_stream::{EventStream, EventStreamError};
use futures_core::Stream;

/// One framed SSE event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` name; `None` for the default type `message`.
    pub event: Option<Box<str>>,
    /// The `data:` payload (lines joined with `\n`), as received.
    pub data: Box<str>,
}

/// Why a body could not be framed.
#[derive(Debug, thiserror::Error)]
pub enum SseError<E> {
    #[error("the event stream is not valid UTF-8: {0}")]
    Utf8(std::string::FromUtf8Error),
    #[error("the event stream is malformed: {0}")]
    Framing(String),
    #[error("reading the body failed: {0}")]
    Transport(E),
}

/// Frames a stream of body chunks into [`SseEvent`]s.
pub struct SseStream<S> {
    inner: EventStream<S>,
}

impl<S, B, E> SseStream<S>
where
    S: Stream<Item = Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
{
    pub fn new(body: S) -> Self {
        Self {
            inner: EventStream::new(body),
        }
    }

    /// The next complete event; `Ready(None)` at the end of the body.
    pub fn poll_event(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<SseEvent, SseError<E>>>> {
        match Pin::new(&mut self.inner).poll_next(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Ready(Some(Ok(ev))) => Poll::Ready(Some(Ok(SseEvent {
                event: (ev.event != "message").then(|| ev.event.into_boxed_str()),
                data: ev.data.into_boxed_str(),
            }))),
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(match e {
                EventStreamError::Utf8(e) => SseError::Utf8(e),
                EventStreamError::Parser(e) => SseError::Framing(e.to_string()),
                EventStreamError::Transport(e) => SseError::Transport(e),
            }))),
        }
    }

    /// The next complete event; `None` at the end of the body.
    pub async fn next_event(&mut self) -> Option<Result<SseEvent, SseError<E>>> {
        std::future::poll_fn(|cx| self.poll_event(cx)).await
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use bytes::Bytes;
    use std::collections::VecDeque;
    use std::convert::Infallible;

    /// A body that yields the given chunks, one per poll.
    pub(crate) struct Chunks(pub VecDeque<Bytes>);

    impl Stream for Chunks {
        type Item = Result<Bytes, Infallible>;
        fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
            Poll::Ready(self.0.pop_front().map(Ok))
        }
    }

    fn chunks<I: IntoIterator<Item = Vec<u8>>>(parts: I) -> Chunks {
        Chunks(parts.into_iter().map(Bytes::from).collect())
    }

    async fn frame_parts(parts: Vec<Vec<u8>>) -> Vec<(Option<String>, String)> {
        let mut s = SseStream::new(chunks(parts));
        let mut out = Vec::new();
        while let Some(ev) = s.next_event().await {
            let ev = ev.unwrap();
            out.push((ev.event.map(String::from), String::from(ev.data)));
        }
        out
    }

    async fn frame(text: &str) -> Vec<(Option<String>, String)> {
        frame_parts(vec![text.as_bytes().to_vec()]).await
    }

    fn data(d: &str) -> (Option<String>, String) {
        (None, d.to_owned())
    }

    #[tokio::test]
    async fn frames_data_events_and_done() {
        assert_eq!(
            frame("data: {\"a\":1}\n\ndata: [DONE]\n\n").await,
            vec![data("{\"a\":1}"), data("[DONE]")]
        );
        // No space after the colon, and a space kept beyond the first one.
        assert_eq!(
            frame("data:x\n\ndata:  y\n\n").await,
            vec![data("x"), data(" y")]
        );
    }

    #[tokio::test]
    async fn crlf_and_cr_line_ends() {
        assert_eq!(
            frame("data: a\r\n\r\ndata: b\r\rdata: c\n\n").await,
            vec![data("a"), data("b"), data("c")]
        );
    }

    #[tokio::test]
    async fn comments_are_skipped() {
        assert_eq!(
            frame(": keep-alive\n\n: ping\ndata: x\n: inside\n\n").await,
            vec![data("x")]
        );
    }

    #[tokio::test]
    async fn event_lines_name_events() {
        assert_eq!(
            frame(
                "event: response.created\ndata: {}\n\nevent: response.completed\r\ndata: {\"x\":1}\r\n\r\n"
            )
            .await,
            vec![
                (Some("response.created".into()), "{}".into()),
                (Some("response.completed".into()), "{\"x\":1}".into())
            ]
        );
        // An explicit `message` is the default type.
        assert_eq!(frame("event: message\ndata: m\n\n").await, vec![data("m")]);
    }

    #[tokio::test]
    async fn multi_line_data_joins_with_newline() {
        assert_eq!(
            frame("data: first\ndata: second\ndata:\ndata: fourth\n\n").await,
            vec![data("first\nsecond\n\nfourth")]
        );
    }

    #[tokio::test]
    async fn id_and_retry_fields_are_not_data() {
        assert_eq!(
            frame("id: 7\nretry: 1000\ndata: d\nunknown: u\n\n").await,
            vec![data("d")]
        );
    }

    #[tokio::test]
    async fn events_split_byte_by_byte_reassemble() {
        let stream = "event: delta\r\ndata: {\"content\":\"caf\u{e9} \u{1f642}\"}\r\n\r\n: c\n\ndata: a\ndata: b\n\ndata: [DONE]\n\n";
        let whole = frame(stream).await;
        assert_eq!(whole.len(), 3);
        assert_eq!(whole[0].1, "{\"content\":\"caf\u{e9} \u{1f642}\"}");
        let bytewise = frame_parts(stream.bytes().map(|b| vec![b]).collect()).await;
        assert_eq!(bytewise, whole);
        // Split at every possible point into two reads.
        for cut in 1..stream.len() {
            let b = stream.as_bytes();
            let parts = vec![b[..cut].to_vec(), b[cut..].to_vec()];
            assert_eq!(frame_parts(parts).await, whole, "cut at {cut}");
        }
    }

    #[tokio::test]
    async fn an_unfinished_event_at_the_end_is_not_dispatched() {
        assert_eq!(frame("data: a\n\ndata: partial").await, vec![data("a")]);
        assert_eq!(frame("data: a\n\ndata: b\n").await, vec![data("a")]);
    }

    #[tokio::test]
    async fn invalid_utf8_is_an_error_not_a_silent_drop() {
        let mut s = SseStream::new(chunks(vec![b"data: a\n\ndata: \xff\xfe\n\n".to_vec()]));
        assert_eq!(&*s.next_event().await.unwrap().unwrap().data, "a");
        let mut saw_error = false;
        while let Some(ev) = s.next_event().await {
            if ev.is_err() {
                saw_error = true;
                break;
            }
        }
        assert!(saw_error);
    }

    /// Framing cost per event (run with `--ignored --nocapture`): typical chat chunks, one per
    /// body chunk as vLLM and SGLang send them, and 64 per body chunk (a burst read).
    #[tokio::test]
    #[ignore = "measurement, prints its figures"]
    async fn framing_cost_per_event() {
        let event = "data: {\"id\":\"chatcmpl-5f0c\",\"object\":\"chat.completion.chunk\",\"created\":1764460800,\"model\":\"qwen3.8-27b\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" the\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n";
        for per_chunk in [1usize, 64] {
            let n = 128 * 1024;
            let parts: Vec<Vec<u8>> = (0..n / per_chunk)
                .map(|_| event.repeat(per_chunk).into_bytes())
                .collect();
            let start = std::time::Instant::now();
            let cpu0 = thread_cpu_ns();
            let mut s = SseStream::new(chunks(parts));
            let mut count = 0usize;
            while let Some(ev) = s.next_event().await {
                std::hint::black_box(ev.unwrap());
                count += 1;
            }
            let cpu = thread_cpu_ns() - cpu0;
            assert_eq!(count, n);
            println!(
                "sse framing, {per_chunk} event(s) per body chunk: {:.0} ns CPU/event ({:.0} ns wall/event)",
                cpu as f64 / n as f64,
                start.elapsed().as_nanos() as f64 / n as f64
            );
        }
    }

    /// CPU time of the calling thread.
    pub(crate) fn thread_cpu_ns() -> i64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec * 1_000_000_000 + ts.tv_nsec
    }
}
