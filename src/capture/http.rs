//! Small one-shot HTTP exchanges off the hot path: `/v1/models` and `/version` before the run
//! (and a campaign's readiness checks and fingerprints),
//! the connection check ([`closes_after_stream`]), and each replica's `/metrics` during it.
//! One fresh connection per call, a deadline on the whole exchange, the body read up to a
//! limit.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;

use super::endpoint::{Endpoint, EndpointError};

/// Time limit of preflight, scrape and `/tokenize` calls.
pub const SIDE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Largest body read by [`get`].
const MAX_BODY: usize = 32 << 20;

/// Why a GET failed (an HTTP error status is not a failure here: it is returned).
#[derive(Debug, thiserror::Error)]
pub enum GetError {
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    #[error("{url}: {detail}")]
    Http { url: String, detail: String },
    #[error("{url}: no answer within {after_ms} ms")]
    Timeout { url: String, after_ms: u128 },
}

impl GetError {
    /// Whether nothing listens there (refused or unresolvable), as opposed to a slow or
    /// broken answer.
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self,
            GetError::Endpoint(
                EndpointError::Connect { .. }
                    | EndpointError::Resolve { .. }
                    | EndpointError::ConnectTimeout { .. }
            )
        )
    }
}

/// A fresh connection to `server`, its driver spawned; `url` names it in errors.
async fn connect<B>(
    server: &Endpoint,
    timeout: Duration,
    url: &str,
) -> Result<
    (
        hyper::client::conn::http1::SendRequest<B>,
        tokio::task::JoinHandle<hyper::Result<()>>,
    ),
    GetError,
>
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let stream = server.connect(timeout).await?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| GetError::Http {
            url: url.to_owned(),
            detail: e.to_string(),
        })?;
    Ok((sender, tokio::spawn(conn)))
}

/// `exchange` within `timeout`, or a timeout error naming `url`.
async fn within<T>(
    timeout: Duration,
    url: String,
    exchange: impl std::future::Future<Output = Result<T, GetError>>,
) -> Result<T, GetError> {
    match tokio::time::timeout(timeout, exchange).await {
        Ok(r) => r,
        Err(_) => Err(GetError::Timeout {
            url,
            after_ms: timeout.as_millis(),
        }),
    }
}

/// GET `path` (below the server's root and prefix) and return its status and body.
pub async fn get(
    server: &Endpoint,
    path: &str,
    auth: Option<&HeaderValue>,
    timeout: Duration,
) -> Result<(u16, Bytes), GetError> {
    exchange(server, path, None, auth, timeout).await
}

/// POST the JSON `body` to `path` (not streamed) and return its status and body.
pub async fn post_json(
    server: &Endpoint,
    path: &str,
    body: Bytes,
    auth: Option<&HeaderValue>,
    timeout: Duration,
) -> Result<(u16, Bytes), GetError> {
    exchange(server, path, Some(body), auth, timeout).await
}

/// One request on a fresh connection: a GET, or a POST of a JSON body.
async fn exchange(
    server: &Endpoint,
    path: &str,
    body: Option<Bytes>,
    auth: Option<&HeaderValue>,
    timeout: Duration,
) -> Result<(u16, Bytes), GetError> {
    let uri = server.path_uri(path)?;
    let url = format!("{}{}", server.url.trim_end_matches('/'), path);
    let http = |e: &dyn std::fmt::Display| GetError::Http {
        url: url.clone(),
        detail: e.to_string(),
    };
    let exchange = async {
        let (mut sender, conn) = connect(server, timeout, &url).await?;
        let mut req = Request::builder()
            .method(if body.is_some() {
                Method::POST
            } else {
                Method::GET
            })
            .uri(uri)
            .header(header::HOST, server.host_header());
        if body.is_some() {
            req = req.header(header::CONTENT_TYPE, "application/json");
        }
        if let Some(a) = auth {
            req = req.header(header::AUTHORIZATION, a);
        }
        let req = req
            .body(http_body_util::Full::new(body.unwrap_or_default()))
            .map_err(|e| http(&e))?;
        let resp = sender.send_request(req).await.map_err(|e| http(&e))?;
        let status = resp.status().as_u16();
        let body = Limited::new(resp.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| http(&format!("reading the answer: {e}")))?
            .to_bytes();
        conn.abort();
        Ok((status, body))
    };
    within(timeout, url.clone(), exchange).await
}

/// Longest excerpt of a server's answer that [`body_summary`] quotes, in characters.
pub const SUMMARY_CHARS: usize = 200;

/// How much of a body [`body_summary`] reads: an error page's title and first words are
/// near its start.
const SUMMARY_READ: usize = 64 << 10;

/// A server's answer body as one short line for an error message, however long or
/// multi-line the body: an HTML page (a proxy's or a load balancer's error page) as `an HTML
/// page (N bytes)` with its title, or failing that its text without tags; anything else
/// (JSON, plain text) as its text with whitespace runs made one space. Either is cut at
/// [`SUMMARY_CHARS`] characters (the size then said).
pub fn body_summary(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(SUMMARY_READ)]);
    let trimmed = text.trim_start();
    if trimmed.is_empty() {
        return format!("an empty body ({} bytes)", body.len());
    }
    let is_html = trimmed.starts_with('<') && {
        let lower = trimmed.to_ascii_lowercase();
        ["<!doctype html", "<html", "<head", "<body", "<title"]
            .iter()
            .any(|tag| lower.contains(tag))
    };
    if is_html {
        let said = html_title(trimmed).unwrap_or_else(|| html_text(trimmed));
        let said = one_line(&said);
        return if said.is_empty() {
            format!("an HTML page ({} bytes)", body.len())
        } else {
            format!("an HTML page ({} bytes): \"{}\"", body.len(), cut(&said))
        };
    }
    let said = one_line(&text);
    if said.chars().count() > SUMMARY_CHARS || body.len() > SUMMARY_READ {
        format!("{} ({} bytes)", cut(&said), body.len())
    } else {
        said
    }
}

/// Whitespace runs (newlines included) as one space, trimmed.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// At most [`SUMMARY_CHARS`] characters, `…` where cut.
fn cut(s: &str) -> String {
    match s.char_indices().nth(SUMMARY_CHARS) {
        Some((end, _)) => format!("{}…", &s[..end]),
        None => s.to_owned(),
    }
}

/// The text of an HTML page's `<title>`, when it has a non-empty one.
fn html_title(html: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    let open = lower.find("<title")?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find("</title")?;
    Some(unescape(&html[start..end])).filter(|t| !t.trim().is_empty())
}

/// An HTML page's text: tags dropped, with the contents of `<script>` and `<style>`.
fn html_text(html: &str) -> String {
    let lower = html.to_ascii_lowercase();
    let mut out = String::new();
    let mut i = 0;
    while i < html.len() {
        let Some(lt) = lower[i..].find('<').map(|o| i + o) else {
            out.push_str(&html[i..]);
            break;
        };
        out.push_str(&html[i..lt]);
        out.push(' ');
        let skip_to = ["script", "style"].iter().find_map(|tag| {
            lower[lt + 1..]
                .starts_with(tag)
                .then(|| lower[lt..].find(&format!("</{tag}")).map(|o| lt + o))
                .flatten()
        });
        let from = skip_to.unwrap_or(lt);
        i = match lower[from..].find('>') {
            Some(o) => from + o + 1,
            None => html.len(),
        };
    }
    unescape(&out)
}

/// The few character references error pages use.
fn unescape(s: &str) -> String {
    s.replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// Whether a response's `Connection` header says the server will close the connection.
pub fn announces_close(headers: &hyper::HeaderMap) -> bool {
    headers.get_all(header::CONNECTION).iter().any(|v| {
        v.to_str()
            .is_ok_and(|v| v.to_ascii_lowercase().contains("close"))
    })
}

/// How long [`closes_after_stream`] waits for the server to close after its response.
pub const CLOSE_WAIT: Duration = Duration::from_millis(200);

/// POST one small streamed request (`body`, to `uri`) on a fresh connection, read the
/// response to its end, and say whether the server then closed the connection within
/// [`CLOSE_WAIT`]. llama.cpp's server closes after every streamed response while its headers
/// announce keep-alive; a client that reuses such a connection at once races the close.
pub async fn closes_after_stream(
    server: &Endpoint,
    uri: Uri,
    body: Bytes,
    auth: Option<&HeaderValue>,
    timeout: Duration,
) -> Result<bool, GetError> {
    let url = format!("{}{}", server.url.trim_end_matches('/'), uri.path());
    let http = |e: &dyn std::fmt::Display| GetError::Http {
        url: url.clone(),
        detail: e.to_string(),
    };
    let exchange = async {
        let (mut sender, mut conn) = connect(server, timeout, &url).await?;
        let mut req = Request::builder()
            .method(Method::POST)
            .uri(uri)
            .header(header::HOST, server.host_header())
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "text/event-stream");
        if let Some(a) = auth {
            req = req.header(header::AUTHORIZATION, a);
        }
        let req = req
            .body(http_body_util::Full::new(body))
            .map_err(|e| http(&e))?;
        let resp = sender.send_request(req).await.map_err(|e| http(&e))?;
        let announced_close = resp.headers().get_all(header::CONNECTION).iter().any(|v| {
            v.to_str()
                .is_ok_and(|v| v.to_ascii_lowercase().contains("close"))
        });
        Limited::new(resp.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| http(&format!("reading the answer: {e}")))?;
        // The connection future ends when the server closes (the sender is still held).
        let closed = tokio::time::timeout(CLOSE_WAIT, &mut conn).await.is_ok();
        conn.abort();
        drop(sender);
        Ok(closed || announced_close)
    };
    within(timeout, url.clone(), exchange).await
}

#[cfg(test)]
mod tests {
    use super::*;

    const NGINX_500: &str = "<!DOCTYPE html>\n<html>\n<head>\n<title>500 Internal Server Error</title>\n\
        <style>\nbody { font-family: sans-serif; }\n</style>\n</head>\n<body>\n\
        <center><h1>500 Internal Server Error</h1></center>\n<hr><center>nginx</center>\n\
        </body>\n</html>\n";

    #[test]
    fn an_html_page_is_its_title_on_one_line() {
        assert_eq!(
            body_summary(NGINX_500.as_bytes()),
            format!(
                "an HTML page ({} bytes): \"500 Internal Server Error\"",
                NGINX_500.len()
            )
        );
        // Without a title: the text, tags, styles and scripts dropped.
        let page = "<html><head><style>p { x: 1 }</style><script>let a = 1 < 2;</script></head>\n\
                    <body><p>Bad&nbsp;gateway:</p>\n<p>upstream &amp; co.</p></body></html>";
        assert_eq!(
            body_summary(page.as_bytes()),
            format!(
                "an HTML page ({} bytes): \"Bad gateway: upstream & co.\"",
                page.len()
            )
        );
        assert_eq!(
            body_summary(b"<html><body></body></html>"),
            "an HTML page (26 bytes)"
        );
    }

    #[test]
    fn other_bodies_are_one_line_cut_at_the_limit() {
        let json = br#"{"error": {"message": "model not loaded",
            "type": "server_error"}}"#;
        assert_eq!(
            body_summary(json),
            r#"{"error": {"message": "model not loaded", "type": "server_error"}}"#
        );
        assert_eq!(body_summary(b"  \n"), "an empty body (3 bytes)");
        let long = "word ".repeat(1000);
        let said = body_summary(long.as_bytes());
        assert!(said.ends_with("… (5000 bytes)"), "{said}");
        assert_eq!(said.lines().count(), 1);
        assert!(said.chars().count() < SUMMARY_CHARS + 20, "{said}");
        // Not valid UTF-8, cut inside a character: still a line, never a panic.
        let mut odd = "é".repeat(300).into_bytes();
        odd.push(0xff);
        assert!(body_summary(&odd).starts_with("éé"));
    }
}
