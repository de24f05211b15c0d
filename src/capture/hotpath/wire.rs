//! HTTP/1.1 as the hot path speaks it on its own connection: the request head written as
//! bytes, the response head parsed with `httparse`, and the body's framing (chunked,
//! length-delimited or delimited by the server's close, RFC 9112 section 6) undone over the
//! bytes as the socket read them, so the payload reaches the SSE framer with no dispatcher,
//! body channel or per-chunk allocation between.

use std::fmt;

/// Most header lines a response head may carry.
const MAX_HEADERS: usize = 128;

/// The longest response head accepted (a server sending more is not speaking HTTP to us).
pub(super) const MAX_HEAD_BYTES: usize = 64 << 10;

/// Most bytes of chunk extensions on one size line, and of trailer fields after the last chunk.
const MAX_CHUNK_META_BYTES: usize = 64 << 10;

/// The request head of a streamed POST with a JSON body: request line, `host`, the content
/// headers, `x-request-id`, `authorization` when given, `content-length`. Header values come
/// as `HeaderValue` bytes, which cannot hold CR or LF.
pub(super) fn request_head(
    path: &str,
    host: &[u8],
    request_id: &[u8],
    authorization: Option<&[u8]>,
    content_length: usize,
) -> Vec<u8> {
    let mut h = Vec::with_capacity(160 + path.len() + host.len() + request_id.len());
    h.extend_from_slice(b"POST ");
    h.extend_from_slice(path.as_bytes());
    h.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    h.extend_from_slice(host);
    h.extend_from_slice(
        b"\r\ncontent-type: application/json\r\naccept: text/event-stream\r\nx-request-id: ",
    );
    h.extend_from_slice(request_id);
    if let Some(a) = authorization {
        h.extend_from_slice(b"\r\nauthorization: ");
        h.extend_from_slice(a);
    }
    h.extend_from_slice(b"\r\ncontent-length: ");
    h.extend_from_slice(content_length.to_string().as_bytes());
    h.extend_from_slice(b"\r\n\r\n");
    h
}

/// A whole response read as the hot path reads it, the socket's bytes arriving as `reads`:
/// its final status and body payload, or why it was refused (a malformed head or body, a
/// protocol switch, a connection that closed early). Interim (1xx) heads are skipped, as the
/// connection skips them. Not used by the recorder itself: the fuzz target and the crash
/// corpus drive [`parse_head`] and the body's framing through it, any bytes split anywhere.
pub fn read_response(reads: &[&[u8]]) -> Result<(u16, Vec<u8>), String> {
    let mut buf: Vec<u8> = Vec::new();
    let mut head: Option<Head> = None;
    let mut payload = Vec::new();
    for read in reads {
        buf.extend_from_slice(read);
        loop {
            match head.as_mut() {
                None => match parse_head(&buf).map_err(|e| e.0)? {
                    None => break,
                    Some((h, n)) => {
                        buf.drain(..n);
                        match h.status {
                            101 => return Err("the server switched protocols (101)".into()),
                            100..=199 => continue,
                            _ => head = Some(h),
                        }
                    }
                },
                Some(h) => {
                    if buf.is_empty() || h.framing.is_done() {
                        break;
                    }
                    let n = h
                        .framing
                        .decode(&buf, &mut |p| payload.extend_from_slice(p))
                        .map_err(|e| e.to_string())?;
                    buf.drain(..n);
                    if n == 0 {
                        break;
                    }
                }
            }
        }
    }
    let mut head = head.ok_or("the connection closed before a complete response head")?;
    head.framing.at_eof().map_err(|e| e.to_string())?;
    Ok((head.status, payload))
}

/// A parsed response head: what the exchange needs of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Head {
    pub(super) status: u16,
    /// How the body ends.
    pub(super) framing: Framing,
    /// The connection cannot carry another request after this response (`Connection: close`,
    /// HTTP/1.0 without keep-alive, a body delimited by the close, or framing headers that
    /// contradict each other).
    pub(super) closing: bool,
    /// The `content-type` value, if any (lossy text).
    pub(super) content_type: Option<String>,
}

/// Why a response head was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HeadError(pub(super) String);

impl fmt::Display for HeadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Parse a response head at the start of `buf`: `Ok(None)` while it is incomplete, else the
/// head and the bytes it took. An interim (1xx) response comes back like any other; the caller
/// skips it.
pub(super) fn parse_head(buf: &[u8]) -> Result<Option<(Head, usize)>, HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let len = match response.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            if buf.len() > MAX_HEAD_BYTES {
                return Err(HeadError(format!(
                    "the response head exceeds {MAX_HEAD_BYTES} bytes"
                )));
            }
            return Ok(None);
        }
        Err(e) => {
            let start = String::from_utf8_lossy(&buf[..buf.len().min(64)]).into_owned();
            return Err(HeadError(format!(
                "not an HTTP/1.1 response ({e}); it began {start:?}"
            )));
        }
    };
    let status = response.code.unwrap_or(0);
    let mut closing = response.version == Some(0);
    let mut chunked = None;
    let mut length: Option<u64> = None;
    let mut content_type = None;
    for h in response.headers.iter() {
        let name = h.name;
        if name.eq_ignore_ascii_case("transfer-encoding") {
            // The last coding decides (RFC 9112 6.3): chunked, or read until the close.
            let last = h
                .value
                .rsplit(|&b| b == b',')
                .next()
                .map(|c| c.trim_ascii())
                .unwrap_or_default();
            chunked = Some(last.eq_ignore_ascii_case(b"chunked"));
        } else if name.eq_ignore_ascii_case("content-length") {
            for part in h.value.split(|&b| b == b',') {
                let n = std::str::from_utf8(part.trim_ascii())
                    .ok()
                    .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|s| s.parse::<u64>().ok())
                    .ok_or_else(|| {
                        HeadError(format!(
                            "invalid content-length `{}`",
                            String::from_utf8_lossy(h.value)
                        ))
                    })?;
                if length.is_some_and(|l| l != n) {
                    return Err(HeadError("conflicting content-length values".into()));
                }
                length = Some(n);
            }
        } else if name.eq_ignore_ascii_case("connection") {
            for token in h.value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                if token.eq_ignore_ascii_case(b"close") {
                    closing = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") && response.version == Some(0) {
                    closing = false;
                }
            }
        } else if name.eq_ignore_ascii_case("content-type") {
            content_type = Some(String::from_utf8_lossy(h.value).into_owned());
        }
    }
    let framing = if (100..200).contains(&status) || status == 204 || status == 304 {
        Framing::Length(0)
    } else {
        match (chunked, length) {
            (Some(true), l) => {
                // Both framings given: chunked wins and the connection is not trusted again.
                closing |= l.is_some();
                Framing::Chunked(Chunked::default())
            }
            (Some(false), _) | (None, None) => {
                closing = true;
                Framing::Close
            }
            (None, Some(n)) => Framing::Length(n),
        }
    };
    Ok(Some((
        Head {
            status,
            framing,
            closing,
            content_type,
        },
        len,
    )))
}

/// How a response body ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Framing {
    /// `transfer-encoding: chunked`, decoded as it arrives.
    Chunked(Chunked),
    /// This many bytes still to come.
    Length(u64),
    /// Everything until the server closes the connection.
    Close,
}

/// Where a chunked body's decoding stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Chunked {
    /// Reading a chunk-size line: the size so far, its digits, and whether the digits are over
    /// (extensions or whitespace follow), with the bytes of those.
    Size {
        size: u64,
        digits: u8,
        rest: bool,
        meta: usize,
    },
    /// The size line's CR came; its LF must follow.
    SizeLf {
        size: u64,
    },
    /// Inside a chunk's data: this many bytes left.
    Data(u64),
    /// After a chunk's data: its CRLF.
    DataEnd,
    DataEndLf,
    /// After the last chunk: trailer lines until an empty one.
    Trailer {
        line_start: bool,
        meta: usize,
    },
    Done,
}

impl Default for Chunked {
    fn default() -> Self {
        Self::Size {
            size: 0,
            digits: 0,
            rest: false,
            meta: 0,
        }
    }
}

/// Why a body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum BodyError {
    /// The bytes break the framing: not HTTP.
    Framing(String),
    /// The connection ended before the framing said the body did.
    Truncated(String),
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Framing(s) | Self::Truncated(s) => f.write_str(s),
        }
    }
}

fn framing_error(what: &str, byte: u8) -> BodyError {
    BodyError::Framing(format!(
        "invalid chunked body: {what}, found byte {:?}",
        char::from(byte)
    ))
}

impl Framing {
    /// Whether the whole body has been decoded.
    pub(super) fn is_done(&self) -> bool {
        matches!(self, Self::Length(0) | Self::Chunked(Chunked::Done))
    }

    /// Decode the body bytes at the start of `input`, handing each run of payload to
    /// `payload`; the bytes taken (fewer than given only once the body is done).
    pub(super) fn decode(
        &mut self,
        input: &[u8],
        payload: &mut impl FnMut(&[u8]),
    ) -> Result<usize, BodyError> {
        match self {
            Self::Close => {
                payload(input);
                Ok(input.len())
            }
            Self::Length(left) => {
                let n = input
                    .len()
                    .min(usize::try_from(*left).unwrap_or(usize::MAX));
                payload(&input[..n]);
                *left -= n as u64;
                Ok(n)
            }
            Self::Chunked(state) => decode_chunked(state, input, payload),
        }
    }

    /// The connection ended: fine for a body delimited by the close, else the body is short.
    pub(super) fn at_eof(&mut self) -> Result<(), BodyError> {
        match self {
            Self::Close => {
                *self = Self::Length(0);
                Ok(())
            }
            _ if self.is_done() => Ok(()),
            Self::Length(left) => Err(BodyError::Truncated(format!(
                "the connection closed {left} bytes before the end of the body"
            ))),
            Self::Chunked(_) => Err(BodyError::Truncated(
                "the connection closed before the chunked body's last chunk".into(),
            )),
        }
    }
}

fn decode_chunked(
    state: &mut Chunked,
    input: &[u8],
    payload: &mut impl FnMut(&[u8]),
) -> Result<usize, BodyError> {
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        match state {
            Chunked::Data(left) => {
                let n = (input.len() - i).min(usize::try_from(*left).unwrap_or(usize::MAX));
                payload(&input[i..i + n]);
                i += n;
                *left -= n as u64;
                if *left == 0 {
                    *state = Chunked::DataEnd;
                }
                continue;
            }
            Chunked::Size {
                size,
                digits,
                rest,
                meta,
            } => {
                let digit = char::from(b).to_digit(16);
                match (b, digit) {
                    (_, Some(d)) if !*rest => {
                        if *digits == 16 {
                            return Err(BodyError::Framing(
                                "invalid chunked body: a chunk size beyond 64 bits".into(),
                            ));
                        }
                        *size = (*size << 4) | u64::from(d);
                        *digits += 1;
                    }
                    _ if *digits == 0 => return Err(framing_error("expected a chunk size", b)),
                    (b'\r', _) => *state = Chunked::SizeLf { size: *size },
                    (b'\n', _) => *state = size_done(*size),
                    (b';' | b' ' | b'\t', _) if !*rest => *rest = true,
                    _ if *rest => {
                        *meta += 1;
                        if *meta > MAX_CHUNK_META_BYTES {
                            return Err(BodyError::Framing(format!(
                                "invalid chunked body: chunk extensions beyond {MAX_CHUNK_META_BYTES} bytes"
                            )));
                        }
                    }
                    _ => return Err(framing_error("expected a hex chunk size", b)),
                }
            }
            Chunked::SizeLf { size } => {
                if b != b'\n' {
                    return Err(framing_error("expected LF after the chunk size", b));
                }
                *state = size_done(*size);
            }
            Chunked::DataEnd => match b {
                b'\r' => *state = Chunked::DataEndLf,
                b'\n' => *state = Chunked::default(),
                _ => return Err(framing_error("expected CRLF after chunk data", b)),
            },
            Chunked::DataEndLf => {
                if b != b'\n' {
                    return Err(framing_error("expected LF after chunk data", b));
                }
                *state = Chunked::default();
            }
            Chunked::Trailer { line_start, meta } => {
                *meta += 1;
                if *meta > MAX_CHUNK_META_BYTES {
                    return Err(BodyError::Framing(format!(
                        "invalid chunked body: trailers beyond {MAX_CHUNK_META_BYTES} bytes"
                    )));
                }
                match b {
                    b'\n' if *line_start => {
                        *state = Chunked::Done;
                        return Ok(i + 1);
                    }
                    b'\n' => *line_start = true,
                    b'\r' => {}
                    _ => *line_start = false,
                }
            }
            Chunked::Done => return Ok(i),
        }
        i += 1;
    }
    Ok(i)
}

fn size_done(size: u64) -> Chunked {
    if size == 0 {
        Chunked::Trailer {
            line_start: true,
            meta: 0,
        }
    } else {
        Chunked::Data(size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> Head {
        parse_head(text.as_bytes()).unwrap().unwrap().0
    }

    /// Decode `body` fed in the given pieces: the payload, and the bytes left after the body.
    fn decode_in(
        framing: Framing,
        body: &[u8],
        cuts: &[usize],
    ) -> Result<(Vec<u8>, usize), BodyError> {
        let mut f = framing;
        let mut out = Vec::new();
        let mut start = 0;
        let mut left = 0;
        for &end in cuts.iter().chain(std::iter::once(&body.len())) {
            let piece = &body[start..end];
            let n = f.decode(piece, &mut |p: &[u8]| out.extend_from_slice(p))?;
            left += piece.len() - n;
            start = end;
        }
        Ok((out, left))
    }

    #[test]
    fn the_request_head_is_a_valid_request() {
        let h = request_head(
            "/v1/chat/completions",
            b"127.0.0.1:8000",
            b"run-7",
            Some(b"Bearer k"),
            42,
        );
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut req = httparse::Request::new(&mut headers);
        assert_eq!(req.parse(&h).unwrap(), httparse::Status::Complete(h.len()));
        assert_eq!(req.method, Some("POST"));
        assert_eq!(req.path, Some("/v1/chat/completions"));
        let get = |n: &str| req.headers.iter().find(|h| h.name == n).map(|h| h.value);
        assert_eq!(get("host"), Some(&b"127.0.0.1:8000"[..]));
        assert_eq!(get("content-length"), Some(&b"42"[..]));
        assert_eq!(get("authorization"), Some(&b"Bearer k"[..]));
        assert_eq!(get("x-request-id"), Some(&b"run-7"[..]));
        assert_eq!(get("accept"), Some(&b"text/event-stream"[..]));
        let h = request_head("/v1/completions", b"h", b"r", None, 0);
        assert!(!String::from_utf8(h).unwrap().contains("authorization"));
    }

    #[test]
    fn heads_say_how_the_body_ends() {
        let h = head(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
        );
        assert_eq!((h.status, h.closing), (200, false));
        assert_eq!(h.framing, Framing::Chunked(Chunked::default()));
        assert_eq!(h.content_type.as_deref(), Some("text/event-stream"));
        let h = head(
            "HTTP/1.1 400 Bad Request\r\ncontent-length: 12\r\nconnection: Keep-Alive, Close\r\n\r\n",
        );
        assert_eq!(
            (h.status, h.closing, h.framing),
            (400, true, Framing::Length(12))
        );
        // Neither length nor chunked: the body ends with the connection.
        let h = head("HTTP/1.1 200 OK\r\n\r\n");
        assert_eq!((h.closing, h.framing), (true, Framing::Close));
        let h = head("HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n");
        assert_eq!((h.closing, h.framing), (true, Framing::Close));
        // Both: chunked wins, and the connection is not reused.
        let h = head(
            "HTTP/1.1 200 OK\r\ncontent-length: 5\r\ntransfer-encoding: gzip, chunked\r\n\r\n",
        );
        assert_eq!(
            (h.closing, h.framing),
            (true, Framing::Chunked(Chunked::default()))
        );
        // HTTP/1.0 closes unless it says keep-alive.
        assert!(head("HTTP/1.0 200 OK\r\ncontent-length: 0\r\n\r\n").closing);
        assert!(
            !head("HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 0\r\n\r\n").closing
        );
        // No body, whatever the headers say.
        assert_eq!(
            head("HTTP/1.1 204 No Content\r\ntransfer-encoding: chunked\r\n\r\n").framing,
            Framing::Length(0)
        );
        assert_eq!(head("HTTP/1.1 100 Continue\r\n\r\n").status, 100);
        // The head's length, with body bytes after it.
        let text = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi";
        assert_eq!(parse_head(text).unwrap().unwrap().1, text.len() - 2);
    }

    #[test]
    fn incomplete_and_broken_heads() {
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\ncontent-le"), Ok(None));
        assert_eq!(parse_head(b""), Ok(None));
        assert!(
            parse_head(b"HELLO THERE\r\n\r\n")
                .unwrap_err()
                .0
                .contains("HELLO")
        );
        for bad in ["abc", "-1", "1 2", "", "5, 6"] {
            let text = format!("HTTP/1.1 200 OK\r\ncontent-length: {bad}\r\n\r\n");
            assert!(parse_head(text.as_bytes()).is_err(), "{bad:?}");
        }
        assert_eq!(
            head("HTTP/1.1 200 OK\r\ncontent-length: 7, 7\r\n\r\n").framing,
            Framing::Length(7)
        );
        let huge = format!("HTTP/1.1 200 OK\r\nx: {}", "a".repeat(MAX_HEAD_BYTES + 1));
        assert!(parse_head(huge.as_bytes()).is_err());
    }

    const CHUNKED: &[u8] =
        b"5\r\nhello\r\n1;name=value\r\n \r\nA \r\n0123456789\r\n0\r\nx-trailer: t\r\n\r\n";

    #[test]
    fn chunked_bodies_decode_at_every_split() {
        let expected = b"hello 0123456789".to_vec();
        let mut tail = CHUNKED.to_vec();
        tail.extend_from_slice(b"EXTRA");
        for a in 0..=CHUNKED.len() {
            for b in a..=CHUNKED.len() {
                let (out, left) =
                    decode_in(Framing::Chunked(Chunked::default()), &tail, &[a, b]).unwrap();
                assert_eq!((&out, left), (&expected, 5), "cut at {a}, {b}");
            }
        }
        // Bare LF line ends, and a last chunk without trailers.
        let (out, left) =
            decode_in(Framing::Chunked(Chunked::default()), b"3\nabc\n0\n\n", &[]).unwrap();
        assert_eq!((out.as_slice(), left), (&b"abc"[..], 0));
    }

    #[test]
    fn broken_chunked_bodies_are_refused() {
        for bad in [
            &b"x\r\n"[..],
            b"\r\n",
            b"3\r\nabcX",
            b"3\rX",
            b"11111111111111111\r\n",
            b"3 z\r\nabc\r\n5x",
        ] {
            let r = decode_in(Framing::Chunked(Chunked::default()), bad, &[]);
            assert!(
                matches!(r, Err(BodyError::Framing(_))),
                "{:?}: {r:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let mut f = Framing::Chunked(Chunked::default());
        f.decode(b"5\r\nhel", &mut |_| {}).unwrap();
        assert!(matches!(f.at_eof(), Err(BodyError::Truncated(_))));
    }

    #[test]
    fn length_and_close_delimited_bodies() {
        let (out, left) = decode_in(Framing::Length(5), b"helloworld", &[2]).unwrap();
        assert_eq!((out.as_slice(), left), (&b"hello"[..], 5));
        let mut f = Framing::Length(5);
        f.decode(b"hel", &mut |_| {}).unwrap();
        assert!(!f.is_done());
        assert_eq!(
            f.at_eof(),
            Err(BodyError::Truncated(
                "the connection closed 2 bytes before the end of the body".into()
            ))
        );
        let mut f = Framing::Close;
        let (out, _) = decode_in(f.clone(), b"everything", &[3]).unwrap();
        assert_eq!(out, b"everything");
        assert!(!f.is_done());
        f.at_eof().unwrap();
        assert!(f.is_done());
    }
}
