//! The daemon's small HTTP/1 endpoints — `GET /metrics` (`[daemon] metrics_listen`) and the
//! webhooks (`[triggers] listen`) — bounded so that they cannot take the daemon's file
//! descriptors.
//!
//! Any local user can connect to a TCP port on 127.0.0.1. Without bounds, idle connections
//! pile up until the daemon has no descriptor left, and then `clibotctl list` hangs (its socket
//! cannot be accepted). So:
//!
//! * at most [`MAX_CONNECTIONS`] connections are open at once. A connection past that makes
//!   room by closing the oldest one that is not answering a request right now (an idle one or
//!   one still sending its headers), so a fresh scrape is served at once even while someone
//!   holds many idle connections; when every open connection is busy answering, the new one is
//!   closed at once instead;
//! * a connection is closed after [`IDLE_TIMEOUT`] without a byte read or written (idle
//!   keep-alive, or a client that stops reading or writing), and a request's headers must
//!   arrive within the same time (hyper's header read timeout), so a slow sender cannot hold
//!   a connection open by trickling bytes either.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::sync::CancellationToken;

/// The most metrics connections open at once.
pub const MAX_CONNECTIONS: usize = 64;

/// How long a connection may go without reading or writing a byte, and how long a request's
/// headers may take to arrive.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// The limits, changeable by tests.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    pub idle_timeout: Duration,
    /// What the endpoint is, for the log ("metrics endpoint").
    pub what: &'static str,
}

impl Limits {
    pub fn new(what: &'static str) -> Limits {
        Limits {
            max_connections: MAX_CONNECTIONS,
            idle_timeout: IDLE_TIMEOUT,
            what,
        }
    }
}

/// An answer's body.
pub type Body = http_body_util::Full<hyper::body::Bytes>;

/// A listening socket the endpoint accepts connections on: TCP or Unix.
pub trait Listener: Send + 'static {
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    fn accept_one(&self) -> impl Future<Output = std::io::Result<Self::Io>> + Send;
}

impl Listener for tokio::net::TcpListener {
    type Io = tokio::net::TcpStream;
    async fn accept_one(&self) -> std::io::Result<Self::Io> {
        self.accept().await.map(|(s, _)| s)
    }
}

impl Listener for tokio::net::UnixListener {
    type Io = tokio::net::UnixStream;
    async fn accept_one(&self) -> std::io::Result<Self::Io> {
        self.accept().await.map(|(s, _)| s)
    }
}

/// A plain-text answer.
pub fn text(status: u16, body: impl Into<String>) -> hyper::Response<Body> {
    let mut r = hyper::Response::new(Body::new(hyper::body::Bytes::from(body.into())));
    *r.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// One open connection, as the accept loop sees it.
struct Open {
    /// Cancelled to close the connection (to make room for a newer one).
    close: CancellationToken,
    /// A request is being answered: the connection is not closed to make room.
    busy: Arc<AtomicBool>,
}

/// The open connections, by accept order (the lowest number is the oldest).
#[derive(Default)]
struct Table {
    next: u64,
    open: BTreeMap<u64, Open>,
}

fn lock(t: &Mutex<Table>) -> std::sync::MutexGuard<'_, Table> {
    t.lock().unwrap_or_else(|p| p.into_inner())
}

/// Removes a connection from the table when its task ends, however it ends.
struct Leave {
    table: Arc<Mutex<Table>>,
    id: u64,
}

impl Drop for Leave {
    fn drop(&mut self) {
        lock(&self.table).open.remove(&self.id);
    }
}

/// Serves `listener` until `shutdown` is cancelled: `handle` answers each request.
pub async fn serve<L, H, Fut>(listener: L, handle: H, limits: Limits, shutdown: CancellationToken)
where
    L: Listener,
    H: Fn(hyper::Request<hyper::body::Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = hyper::Response<Body>> + Send + 'static,
{
    let what = limits.what;
    let table = Arc::new(Mutex::new(Table::default()));
    let mut refused_told = false;
    loop {
        let stream = tokio::select! {
            _ = shutdown.cancelled() => return,
            accepted = listener.accept_one() => match accepted {
                Ok(stream) => stream,
                Err(e) => {
                    // Out of descriptors (EMFILE) among others: wait instead of spinning.
                    tracing::warn!("{what}: cannot accept a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let (id, close, busy) = {
            let mut t = lock(&table);
            if t.open.len() >= limits.max_connections.max(1) {
                let oldest_idle = t
                    .open
                    .iter()
                    .find(|(_, o)| !o.busy.load(Ordering::Acquire))
                    .map(|(id, _)| *id);
                match oldest_idle {
                    Some(old) => {
                        if let Some(o) = t.open.remove(&old) {
                            o.close.cancel();
                        }
                    }
                    None => {
                        drop(t);
                        if !refused_told {
                            refused_told = true;
                            tracing::warn!(
                                "{what}: {} connections are answering requests at once; further connections are closed until one ends",
                                limits.max_connections
                            );
                        }
                        drop(stream);
                        continue;
                    }
                }
            }
            let id = t.next;
            t.next += 1;
            let close = shutdown.child_token();
            let busy = Arc::new(AtomicBool::new(false));
            t.open.insert(
                id,
                Open {
                    close: close.clone(),
                    busy: busy.clone(),
                },
            );
            (id, close, busy)
        };
        let leave = Leave {
            table: table.clone(),
            id,
        };
        let handle = handle.clone();
        tokio::spawn(async move {
            let _leave = leave;
            connection(stream, handle, busy, close, limits).await;
        });
    }
}

/// Serves one connection until it ends, is idle too long, or `close` is cancelled.
async fn connection<S, H, Fut>(
    stream: S,
    handle: H,
    busy: Arc<AtomicBool>,
    close: CancellationToken,
    limits: Limits,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Fn(hyper::Request<hyper::body::Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = hyper::Response<Body>> + Send + 'static,
{
    let (idle, what) = (limits.idle_timeout, limits.what);
    let started = Instant::now();
    let active = Arc::new(AtomicU64::new(0));
    let io = Tracked {
        inner: stream,
        started,
        active: active.clone(),
        busy: busy.clone(),
    };
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let handle = handle.clone();
        let busy = busy.clone();
        async move {
            // Busy until the answer is flushed to the socket (see `Tracked::poll_flush`).
            busy.store(true, Ordering::Release);
            Ok::<_, std::convert::Infallible>(handle(req).await)
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(idle)
        .serve_connection(hyper_util::rt::TokioIo::new(io), service);
    tokio::pin!(conn);
    loop {
        let last = Duration::from_millis(active.load(Ordering::Acquire));
        let deadline = started + last + idle;
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!("{what}: connection ended: {e}");
                }
                return;
            }
            _ = close.cancelled() => return,
            _ = tokio::time::sleep_until(deadline.into()) => {
                // Bytes moved meanwhile: wait from the newer activity on.
                if active.load(Ordering::Acquire) == last.as_millis() as u64 {
                    tracing::debug!("{what}: closing a connection idle for {idle:?}");
                    return;
                }
            }
        }
    }
}

/// A stream that notes when it last read or wrote a byte (ms since `started`), and that the
/// answer to a request was handed to the kernel (a flush after it), ending the request's `busy`.
struct Tracked<S> {
    inner: S,
    started: Instant,
    active: Arc<AtomicU64>,
    busy: Arc<AtomicBool>,
}

impl<S> Tracked<S> {
    fn touch(&self) {
        let ms = self.started.elapsed().as_millis() as u64;
        self.active.store(ms, Ordering::Release);
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.touch();
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        if matches!(r, Poll::Ready(Ok(()))) {
            self.busy.store(false, Ordering::Release);
        }
        r
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn start(limits: Limits) -> (std::net::SocketAddr, CancellationToken) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let shutdown = CancellationToken::new();
        tokio::spawn(serve(
            listener,
            |_req| async { text(200, "m 1\n") },
            limits,
            shutdown.clone(),
        ));
        (addr, shutdown)
    }

    async fn scrape(addr: std::net::SocketAddr) -> String {
        let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .expect("write");
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out))
            .await
            .expect("answered in time")
            .expect("read");
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Whether the server closed `s` (EOF or reset) within `within`.
    async fn closed(s: &mut tokio::net::TcpStream, within: Duration) -> bool {
        let mut b = [0u8; 64];
        matches!(
            tokio::time::timeout(within, s.read(&mut b)).await,
            Ok(Ok(0)) | Ok(Err(_))
        )
    }

    #[tokio::test]
    async fn past_the_cap_the_oldest_idle_connection_makes_room() {
        let limits = Limits {
            max_connections: 4,
            idle_timeout: Duration::from_secs(30),
            what: "test endpoint",
        };
        let (addr, shutdown) = start(limits).await;
        let mut idle = Vec::new();
        for _ in 0..4 {
            idle.push(tokio::net::TcpStream::connect(addr).await.expect("connect"));
        }
        // Give the accept loop time to take all four, in order.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let text = scrape(addr).await;
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(text.ends_with("m 1\n"), "{text}");
        assert!(
            closed(&mut idle[0], Duration::from_secs(2)).await,
            "the oldest idle connection was closed"
        );
        assert!(
            !closed(&mut idle[3], Duration::from_millis(200)).await,
            "a newer one stays"
        );
        shutdown.cancel();
    }

    #[tokio::test]
    async fn an_idle_connection_is_closed_after_the_timeout() {
        let limits = Limits {
            max_connections: 64,
            idle_timeout: Duration::from_millis(300),
            what: "test endpoint",
        };
        let (addr, shutdown) = start(limits).await;
        let mut silent = tokio::net::TcpStream::connect(addr).await.expect("connect");
        // Headers trickled one byte at a time, slower than nothing at all, still end.
        let mut slow = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let began = Instant::now();
        assert!(closed(&mut silent, Duration::from_secs(3)).await);
        assert!(began.elapsed() >= Duration::from_millis(250));
        let mut ended = false;
        for b in b"GET /metrics HTTP/1.1\r\nHost: x\r\n"
            .iter()
            .cycle()
            .take(40)
        {
            if slow.write_all(&[*b]).await.is_err() {
                ended = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            ended || closed(&mut slow, Duration::from_secs(1)).await,
            "headers that never end do not hold the connection"
        );
        // A keep-alive connection is closed once idle after its answer.
        let mut keep = tokio::net::TcpStream::connect(addr).await.expect("connect");
        keep.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .expect("write");
        let mut buf = vec![0u8; 4096];
        let n = keep.read(&mut buf).await.expect("read");
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
        assert!(closed(&mut keep, Duration::from_secs(3)).await);
        shutdown.cancel();
    }
}
