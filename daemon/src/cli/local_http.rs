//! A small HTTP/1.1 client for APIs that a CLI serves on 127.0.0.1 (OpenCode's server): JSON
//! requests and a server-sent event stream, with basic auth. One connection per request —
//! these servers are local and requests are rare — so there is no pool to go stale when the
//! CLI restarts.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use base64::Engine;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;

/// How long a plain request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("cannot reach {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("HTTP exchange with {addr} failed: {source}")]
    Http {
        addr: SocketAddr,
        source: hyper::Error,
    },
    #[error("{method} {path} answered {status}: {body}")]
    Status {
        method: Method,
        path: String,
        status: StatusCode,
        body: String,
    },
    #[error("{0} answered something that is not JSON: {1}")]
    NotJson(String, serde_json::Error),
    #[error("no answer from {0} within {1:?}")]
    Timeout(SocketAddr, Duration),
    #[error("invalid request: {0}")]
    Request(String),
    #[error(
        "{0} is not served by the session's own program: clibot sends it nothing (its password included)"
    )]
    NotTheSessions(SocketAddr),
    #[error("{0} answered more than {1} bytes: not read")]
    TooLarge(SocketAddr, usize),
}

/// The most bytes of one JSON answer read.
pub const MAX_RESPONSE: usize = 64 << 20;
/// The most bytes of one server-sent event, or of a line of the stream.
pub const MAX_EVENT: usize = 16 << 20;

/// A server on 127.0.0.1:`port` that takes basic auth.
#[derive(Clone, Debug)]
pub struct LocalHttp {
    addr: SocketAddr,
    authorization: String,
    /// The process whose tree must hold the listening socket before anything is sent.
    owner: Option<u32>,
}

impl LocalHttp {
    pub fn new(port: u16, user: &str, password: &str) -> LocalHttp {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        LocalHttp {
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            authorization: format!("Basic {token}"),
            owner: None,
        }
    }

    /// Sends nothing unless the port's listening socket is held by `pid` or a descendant (a
    /// pid of 0, unknown, holds nothing).
    pub fn owned_by(mut self, pid: u32) -> LocalHttp {
        self.owner = Some(pid);
        self
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<hyper::Response<Incoming>, HttpError> {
        let addr = self.addr;
        if let Some(pid) = self.owner {
            let port = addr.port();
            let owned = pid != 0
                && tokio::task::spawn_blocking(move || crate::procs::listener_in_tree(port, pid))
                    .await
                    .unwrap_or(false);
            if !owned {
                return Err(HttpError::NotTheSessions(addr));
            }
        }
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|source| HttpError::Connect { addr, source })?;
        let _ = stream.set_nodelay(true);
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|source| HttpError::Http { addr, source })?;
        tokio::spawn(async move {
            // Ends with the response body; an error here shows up on the body read.
            let _ = conn.await;
        });
        let mut req = Request::builder()
            .method(method.clone())
            .uri(path)
            .header(hyper::header::HOST, addr.to_string())
            .header(hyper::header::AUTHORIZATION, &self.authorization);
        let payload = match body {
            Some(v) => {
                req = req.header(hyper::header::CONTENT_TYPE, "application/json");
                Bytes::from(v.to_string())
            }
            None => Bytes::new(),
        };
        let req = req
            .body(Full::new(payload))
            .map_err(|e| HttpError::Request(e.to_string()))?;
        let resp = sender
            .send_request(req)
            .await
            .map_err(|source| HttpError::Http { addr, source })?;
        if !resp.status().is_success() {
            let status = resp.status();
            let limited = http_body_util::Limited::new(resp.into_body(), 4096);
            let body = match tokio::time::timeout(REQUEST_TIMEOUT, limited.collect()).await {
                Ok(Ok(b)) => String::from_utf8_lossy(&b.to_bytes())
                    .chars()
                    .take(300)
                    .collect(),
                _ => String::new(),
            };
            return Err(HttpError::Status {
                method,
                path: path.to_string(),
                status,
                body,
            });
        }
        Ok(resp)
    }

    async fn json(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, HttpError> {
        let exchange = async {
            let resp = self.send(method, path, body).await?;
            let bytes = http_body_util::Limited::new(resp.into_body(), MAX_RESPONSE)
                .collect()
                .await
                .map_err(|_| HttpError::TooLarge(self.addr, MAX_RESPONSE))?
                .to_bytes();
            if bytes.is_empty() {
                return Ok(Value::Null);
            }
            serde_json::from_slice(&bytes).map_err(|e| HttpError::NotJson(path.to_string(), e))
        };
        tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| HttpError::Timeout(self.addr, REQUEST_TIMEOUT))?
    }

    pub async fn get_json(&self, path: &str) -> Result<Value, HttpError> {
        self.json(Method::GET, path, None).await
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> Result<Value, HttpError> {
        self.json(Method::POST, path, Some(body)).await
    }

    /// Opens a server-sent event stream, waiting at most `within` for the server to answer.
    pub async fn events(&self, path: &str, within: Duration) -> Result<EventStream, HttpError> {
        let resp = tokio::time::timeout(within, self.send(Method::GET, path, None))
            .await
            .map_err(|_| HttpError::Timeout(self.addr, within))??;
        Ok(EventStream {
            addr: self.addr,
            body: resp.into_body(),
            parser: SseParser::default(),
        })
    }
}

/// The `data:` payloads of a server-sent event stream, parsed as JSON.
pub struct EventStream {
    addr: SocketAddr,
    body: Incoming,
    parser: SseParser,
}

impl EventStream {
    /// The next event's data; `None` when the server closed the stream.
    pub async fn next(&mut self) -> Result<Option<Value>, HttpError> {
        loop {
            if let Some(v) = self.parser.next_event() {
                return Ok(Some(v));
            }
            if self.parser.overfull() {
                return Err(HttpError::TooLarge(self.addr, MAX_EVENT));
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(bytes) = frame.into_data() {
                        self.parser.feed(&bytes);
                    }
                }
                Some(Err(source)) => {
                    return Err(HttpError::Http {
                        addr: self.addr,
                        source,
                    });
                }
                None => return Ok(None),
            }
        }
    }
}

/// Splits server-sent events out of the bytes as they arrive (in pieces of any size).
#[derive(Default)]
pub struct SseParser {
    buf: Vec<u8>,
    data: String,
}

impl SseParser {
    pub fn feed(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Whether an event (or a line) has grown past [`MAX_EVENT`]: the stream is not read on.
    pub fn overfull(&self) -> bool {
        self.data.len() > MAX_EVENT || (self.buf.len() > MAX_EVENT && !self.buf.contains(&b'\n'))
    }

    /// The next complete event's data as JSON. Data that is not JSON is skipped: one odd
    /// event must not end the stream.
    pub fn next_event(&mut self) -> Option<Value> {
        while let Some(nl) = self.buf.iter().position(|&b| b == b'\n') {
            let raw: Vec<u8> = self.buf.drain(..=nl).collect();
            let line = String::from_utf8_lossy(&raw);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                // A blank line ends an event.
                let data = std::mem::take(&mut self.data);
                if let Ok(v) = serde_json::from_str(&data) {
                    return Some(v);
                }
                continue;
            }
            if let Some(rest) = line.strip_prefix("data:") {
                if !self.data.is_empty() {
                    self.data.push('\n');
                }
                self.data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
            }
            // `event:`, `id:`, `retry:` and comments carry nothing the callers use.
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_pieces() {
        let mut p = SseParser::default();
        let stream = "data: {\"type\":\"server.connected\"}\n\n: comment\nevent: x\ndata: {\"type\":\r\ndata: \"a\"}\r\n\r\ndata: not json\n\ndata: {\"type\":\"é\"}\n\n";
        let mut got = Vec::new();
        // One byte at a time: a piece may end anywhere, even inside a UTF-8 character.
        for b in stream.as_bytes() {
            p.feed(std::slice::from_ref(b));
            while let Some(v) = p.next_event() {
                got.push(v["type"].as_str().unwrap_or("?").to_string());
            }
        }
        assert_eq!(got, ["server.connected", "a", "é"]);
        // An incomplete event waits for its end.
        p.feed(b"data: {\"type\":\"late\"}\n");
        assert_eq!(p.next_event(), None);
        p.feed(b"\n");
        assert_eq!(
            p.next_event().map(|v| v["type"].clone()),
            Some("late".into())
        );
    }

    #[test]
    fn basic_auth_header() {
        let h = LocalHttp::new(4096, "opencode", "secret");
        assert_eq!(h.authorization, "Basic b3BlbmNvZGU6c2VjcmV0");
        assert_eq!(h.addr.to_string(), "127.0.0.1:4096");
    }
}
