//! Where a replica listens: a parsed `http://host:port` base URL and its request targets.
//!
//! The recorder speaks plain HTTP/1.1 to the serving engine (local replicas behind no TLS
//! terminator); an `https://` URL is refused with a message rather than silently downgraded.

use std::time::Duration;

use hyper::Uri;
use hyper::header::HeaderValue;
use tokio::net::TcpStream;

use crate::artifact::Api;

/// A replica's base URL, validated.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Replica number within the arm's topology (0-based).
    pub replica: u32,
    /// The URL as given (for messages and `run.json`).
    pub url: String,
    host: String,
    port: u16,
    host_header: HeaderValue,
    /// Path prefix before the API paths, without a trailing slash (usually empty).
    prefix: String,
    chat: Uri,
    completions: Uri,
    responses: Uri,
}

/// Why an endpoint URL was refused, or a connection to it failed.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("endpoint `{url}`: {reason}")]
    Url { url: String, reason: String },
    #[error("endpoint `{url}`: cannot resolve `{host}`: {source}")]
    Resolve {
        url: String,
        host: String,
        #[source]
        source: std::io::Error,
    },
    #[error("endpoint `{url}`: connect failed: {source}")]
    Connect {
        url: String,
        #[source]
        source: std::io::Error,
    },
    #[error("endpoint `{url}`: connect timed out after {after_ms} ms")]
    ConnectTimeout { url: String, after_ms: u128 },
}

impl Endpoint {
    /// Parse `http://host[:port][/prefix]`. A trailing `/v1` is dropped (OpenAI clients
    /// conventionally include it in the base URL; anvil adds `/v1/...` itself and reaches
    /// `/tokenize` and `/metrics` at the server root).
    pub fn parse(replica: u32, url: &str) -> Result<Self, EndpointError> {
        let bad = |reason: &str| EndpointError::Url {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        let rest = if let Some(r) = url.strip_prefix("http://") {
            r
        } else if url.starts_with("https://") {
            return Err(bad(
                "https is not supported by the recorder; reach the replica over plain http",
            ));
        } else {
            return Err(bad("expected a URL starting with http://"));
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.is_empty() {
            return Err(bad("no host"));
        }
        if authority.contains('@') {
            return Err(bad(
                "credentials in the URL are not accepted; pass the API key separately",
            ));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let end = v6.find(']').ok_or_else(|| bad("unclosed `[` in host"))?;
            let host = &v6[..end];
            let port = match &v6[end + 1..] {
                "" => 80,
                p => p
                    .strip_prefix(':')
                    .and_then(|p| p.parse().ok())
                    .ok_or_else(|| bad("bad port"))?,
            };
            (host.to_owned(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_owned(), p.parse().map_err(|_| bad("bad port"))?),
                None => (authority.to_owned(), 80),
            }
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        if path.contains(['?', '#']) {
            return Err(bad("a query or fragment is not allowed in the base URL"));
        }
        let mut prefix = path.trim_end_matches('/').to_owned();
        if prefix.ends_with("/v1") {
            prefix.truncate(prefix.len() - 3);
        }
        let host_header = HeaderValue::from_str(authority).map_err(|_| bad("bad host"))?;
        let uri = |p: &str| -> Result<Uri, EndpointError> {
            format!("{prefix}{p}")
                .parse()
                .map_err(|_| bad("path prefix is not a valid URI path"))
        };
        Ok(Self {
            replica,
            url: url.to_owned(),
            chat: uri(Api::Chat.path())?,
            completions: uri(Api::Completions.path())?,
            responses: uri(Api::Responses.path())?,
            host,
            port,
            host_header,
            prefix,
        })
    }

    /// The request target of `api` (origin-form, e.g. `/v1/chat/completions`).
    pub fn uri(&self, api: Api) -> &Uri {
        match api {
            Api::Chat => &self.chat,
            Api::Completions => &self.completions,
            Api::Responses => &self.responses,
        }
    }

    /// A request target at the server root plus prefix, e.g. `/tokenize`.
    pub fn path_uri(&self, path: &str) -> Result<Uri, EndpointError> {
        format!("{}{path}", self.prefix)
            .parse()
            .map_err(|_| EndpointError::Url {
                url: self.url.clone(),
                reason: format!("`{path}` is not a valid URI path"),
            })
    }

    /// The `Host` header value.
    pub fn host_header(&self) -> &HeaderValue {
        &self.host_header
    }

    /// Open a TCP connection (Nagle off: requests and SSE events are small and latency-bound).
    pub async fn connect(&self, timeout: Duration) -> Result<TcpStream, EndpointError> {
        let attempt = async {
            let addrs: Vec<_> = tokio::net::lookup_host((self.host.as_str(), self.port))
                .await
                .map_err(|source| EndpointError::Resolve {
                    url: self.url.clone(),
                    host: self.host.clone(),
                    source,
                })?
                .collect();
            let mut last = None;
            for addr in addrs {
                match TcpStream::connect(addr).await {
                    Ok(s) => {
                        s.set_nodelay(true)
                            .map_err(|source| EndpointError::Connect {
                                url: self.url.clone(),
                                source,
                            })?;
                        return Ok(s);
                    }
                    Err(e) => last = Some(e),
                }
            }
            Err(EndpointError::Connect {
                url: self.url.clone(),
                source: last.unwrap_or_else(|| {
                    std::io::Error::new(std::io::ErrorKind::NotFound, "no address for host")
                }),
            })
        };
        tokio::time::timeout(timeout, attempt)
            .await
            .unwrap_or_else(|_| {
                Err(EndpointError::ConnectTimeout {
                    url: self.url.clone(),
                    after_ms: timeout.as_millis(),
                })
            })
    }
}

/// Where one replica's Prometheus metrics are read.
#[derive(Debug, Clone)]
pub struct MetricsTarget {
    /// The URL as given or derived (for run.json and messages).
    pub url: String,
    /// Host and port to connect to.
    pub server: Endpoint,
    /// Request target, e.g. `/metrics`.
    pub path: String,
}

/// The metrics target of replica `replica` at `url` (`http://host:port[/path]`, the path
/// `/metrics` when absent).
pub fn metrics_target(replica: u32, url: &str) -> Result<MetricsTarget, EndpointError> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| EndpointError::Url {
            url: url.to_owned(),
            reason: "expected a URL starting with http://".into(),
        })?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/metrics"),
    };
    let server = Endpoint::parse(replica, &format!("http://{authority}"))?;
    server.path_uri(path)?;
    Ok(MetricsTarget {
        url: url.to_owned(),
        server,
        path: path.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_base_urls() {
        let e = Endpoint::parse(0, "http://127.0.0.1:8000").unwrap();
        assert_eq!(e.uri(Api::Chat).to_string(), "/v1/chat/completions");
        assert_eq!(e.uri(Api::Responses).to_string(), "/v1/responses");
        assert_eq!(e.host_header(), "127.0.0.1:8000");
        assert_eq!(e.path_uri("/tokenize").unwrap().to_string(), "/tokenize");

        let e = Endpoint::parse(1, "http://localhost:9000/v1/").unwrap();
        assert_eq!(e.uri(Api::Completions).to_string(), "/v1/completions");
        assert_eq!(e.path_uri("/tokenize").unwrap().to_string(), "/tokenize");

        let e = Endpoint::parse(0, "http://gw.local/serving/qwen").unwrap();
        assert_eq!(
            e.uri(Api::Chat).to_string(),
            "/serving/qwen/v1/chat/completions"
        );
        assert_eq!((e.host.as_str(), e.port), ("gw.local", 80));

        let e = Endpoint::parse(0, "http://[::1]:8001").unwrap();
        assert_eq!((e.host.as_str(), e.port), ("::1", 8001));
    }

    #[test]
    fn refuses_what_it_cannot_reach() {
        for bad in [
            "https://api.example.com",
            "127.0.0.1:8000",
            "http://",
            "http://host:port",
            "http://user:key@host:80",
            "http://host:80/x?y=1",
            "http://[::1",
        ] {
            let err = Endpoint::parse(0, bad).unwrap_err();
            assert!(err.to_string().contains(bad), "{err}");
        }
    }
}
