//! The Unix socket: where it lives, who may connect, and serving the gRPC service on it.
//!
//! Three layers keep other users out: the socket sits in a 0700 directory, the socket itself is
//! 0600, and every connection's peer credentials are checked (at accept and again per call), so
//! even root-run tools of another uid are refused.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixListener as StdUnixListener;
use std::path::Path;

use clibot_proto::v1::clibot_server::ClibotServer;
use tokio::net::UnixListener;
use tokio_util::sync::CancellationToken;
use tonic::transport::Server;
use tonic::transport::server::UdsConnectInfo;
use tonic::{Request, Status};

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use tonic::codegen::http;

use crate::caller::Caller;
use crate::ops::metrics::Metrics;
use crate::rpc::Service;

/// Why the socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error(
        "another clibotd (pid {pid}) is already serving on {path}: use it, or stop it first (`kill {pid}` or `systemctl --user stop clibotd`)"
    )]
    InUse { path: String, pid: String },
    #[error("{0} exists and is not a socket: remove it or choose another --socket")]
    NotASocket(String),
    #[error("cannot prepare socket {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> SocketError + '_ {
    move |source| SocketError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Binds `path` with mode 0600 in a private directory. A stale socket (nothing answers) is
/// replaced; a live one means another daemon, and that is an error naming its pid.
pub fn bind(path: &Path) -> Result<StdUnixListener, SocketError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        prepare_dir(dir).map_err(io_err(dir))?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if !meta.file_type().is_socket() => {
            return Err(SocketError::NotASocket(path.display().to_string()));
        }
        Ok(_) => match std::os::unix::net::UnixStream::connect(path) {
            Ok(stream) => {
                let pid = rustix::net::sockopt::socket_peercred(&stream)
                    .map(|c| c.pid.as_raw_nonzero().to_string())
                    .unwrap_or_else(|_| "unknown".into());
                return Err(SocketError::InUse {
                    path: path.display().to_string(),
                    pid,
                });
            }
            Err(_) => {
                tracing::info!(path = %path.display(), "replacing a stale socket");
                std::fs::remove_file(path).map_err(io_err(path))?;
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err(path)(e)),
    }
    let listener = StdUnixListener::bind(path).map_err(io_err(path))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io_err(path))?;
    Ok(listener)
}

/// Creates the socket's directory with mode 0700. An existing directory of clibot's own
/// (`clibot…`, owned by this user) is tightened to 0700; any other existing directory is left
/// as it is, the socket's own mode and the peer check still apply.
fn prepare_dir(dir: &Path) -> std::io::Result<()> {
    if !dir.exists() {
        return crate::paths::create_private_dir(dir);
    }
    let meta = std::fs::metadata(dir)?;
    let ours = meta.uid() == rustix::process::getuid().as_raw();
    let named = dir
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("clibot"));
    if named && !ours {
        // In a shared /tmp another user could have created it first to intercept the socket.
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{} belongs to uid {}, not to you: it may be a trap for clibot's socket; remove it, or set XDG_RUNTIME_DIR or --socket",
                dir.display(),
                meta.uid()
            ),
        ));
    }
    if ours && named && meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Identifies the socket file this process bound, so that it removes only its own at exit.
pub fn socket_identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// Refuses a call whose connection comes from another uid (defence in depth behind the accept
/// filter).
#[allow(clippy::result_large_err)]
fn same_uid(req: Request<()>) -> Result<Request<()>, Status> {
    let me = rustix::process::getuid().as_raw();
    match req
        .extensions()
        .get::<UdsConnectInfo>()
        .and_then(|ci| ci.peer_cred)
    {
        Some(c) if c.uid() == me => Ok(req),
        _ => Err(Status::permission_denied(
            "clibotd only serves the user that runs it",
        )),
    }
}

/// The largest unary message either way. Set on both sides explicitly (tonic's default
/// decoding limit is the same, its encoding limit is none): a message over it is an error of
/// that call, never a connection that a client replays for ever. Texts longer than an event
/// carries travel through `ReadBlob` in chunks well under it.
pub const MAX_MESSAGE: usize = clibot_proto::MAX_MESSAGE;

/// Calls one connection may have running at once; more wait. One client cannot take every
/// worker (or descriptor) of the daemon with a flood of calls on one connection.
const CALLS_PER_CONNECTION: usize = 64;

/// The per-call check every service runs.
type CallCheck = fn(Request<()>) -> Result<Request<()>, Status>;

/// The service with its message limits and the same-uid check on every call.
fn limited(
    service: Service,
) -> tonic::service::interceptor::InterceptedService<ClibotServer<Service>, CallCheck> {
    let server = ClibotServer::new(service)
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE);
    tonic::service::interceptor::InterceptedService::new(server, same_uid as fn(_) -> _)
}

/// Accepted connections from this uid. An accept that fails (out of descriptors: EMFILE) is
/// retried after a pause instead of at once: tonic's loop would otherwise spin a core while
/// the table is full, and the pause lets descriptors come back.
fn accept_same_uid(
    listener: UnixListener,
    shutdown: CancellationToken,
) -> tokio_stream::wrappers::ReceiverStream<std::io::Result<tokio::net::UnixStream>> {
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let me = rustix::process::getuid().as_raw();
    tokio::spawn(async move {
        let mut warned = false;
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = shutdown.cancelled() => return,
            };
            match accepted {
                Ok((s, _)) => {
                    warned = false;
                    match s.peer_cred() {
                        Ok(c) if c.uid() == me => {
                            if tx.send(Ok(s)).await.is_err() {
                                return;
                            }
                        }
                        Ok(c) => {
                            tracing::warn!(uid = c.uid(), pid = ?c.pid(), "refused a connection from another user");
                        }
                        Err(_) => {}
                    }
                }
                Err(e) => {
                    if !warned {
                        tracing::error!(
                            "cannot accept a connection on the socket: {e}; retrying (raise LimitNOFILE if descriptors ran out)"
                        );
                        warned = true;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

/// Serves `service` on `listener` until `shutdown` is cancelled.
pub async fn serve(
    listener: UnixListener,
    service: Service,
    shutdown: CancellationToken,
) -> Result<(), tonic::transport::Error> {
    let incoming = accept_same_uid(listener, shutdown.clone());
    let metrics = service.metrics();
    if let Some(hooks) = service.daemon().take_hook_listeners() {
        tokio::spawn(serve_hook_sockets(hooks, service.clone()));
    }
    let daemon = service.daemon();
    Server::builder()
        .concurrency_limit_per_connection(CALLS_PER_CONNECTION)
        .layer(tower::layer::layer_fn(move |inner| Gate {
            inner,
            daemon: daemon.clone(),
            scope: None,
            metrics: Some(metrics.clone()),
        }))
        .add_service(limited(service))
        .serve_with_incoming_shutdown(incoming, shutdown.cancelled_owned())
        .await
}

/// Connections one session's hook socket serves at once; more wait in the socket's backlog.
/// A hook call is one call on one connection, and a CLI runs a few hooks at a time: the bound
/// only stops a session from making the daemon hold its payloads without limit.
pub const HOOK_CONNECTIONS: usize = 8;

/// An accepted connection that holds one of its socket's places while it is open.
struct Placed {
    stream: tokio::net::UnixStream,
    _place: tokio::sync::OwnedSemaphorePermit,
}

impl tokio::io::AsyncRead for Placed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Placed {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

impl tonic::transport::server::Connected for Placed {
    type ConnectInfo = UdsConnectInfo;
    fn connect_info(&self) -> UdsConnectInfo {
        self.stream.connect_info()
    }
}

/// [`accept_same_uid`] with at most `places` connections open at once: the next is accepted
/// only when one closes.
fn accept_placed(
    listener: UnixListener,
    shutdown: CancellationToken,
    places: usize,
) -> tokio_stream::wrappers::ReceiverStream<std::io::Result<Placed>> {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let sem = Arc::new(tokio::sync::Semaphore::new(places));
    let me = rustix::process::getuid().as_raw();
    tokio::spawn(async move {
        loop {
            let place = tokio::select! {
                p = sem.clone().acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => return,
                },
                _ = shutdown.cancelled() => return,
            };
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = shutdown.cancelled() => return,
            };
            match accepted {
                Ok((stream, _)) => match stream.peer_cred() {
                    Ok(c) if c.uid() == me => {
                        let placed = Placed {
                            stream,
                            _place: place,
                        };
                        if tx.send(Ok(placed)).await.is_err() {
                            return;
                        }
                    }
                    _ => {}
                },
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
            }
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

/// Serves each jailed session's hook socket (hook calls of that session only) until the
/// session ends or the daemon stops: [`HOOK_CONNECTIONS`] connections at once, one call
/// each.
async fn serve_hook_sockets(
    mut hooks: tokio::sync::mpsc::UnboundedReceiver<crate::confine::HookListener>,
    service: Service,
) {
    while let Some(h) = hooks.recv().await {
        let listener = match UnixListener::from_std(h.listener) {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(id = %h.id, "cannot serve a session's hook socket: {e}");
                continue;
            }
        };
        let incoming = accept_placed(listener, h.stop.clone(), HOOK_CONNECTIONS);
        let (service, daemon, id) = (service.clone(), service.daemon(), h.id.clone());
        tokio::spawn(async move {
            let served = Server::builder()
                .concurrency_limit_per_connection(1)
                .layer(tower::layer::layer_fn(move |inner| Gate {
                    inner,
                    daemon: daemon.clone(),
                    scope: Some(id.clone()),
                    metrics: None,
                }))
                .add_service(limited(service))
                .serve_with_incoming_shutdown(incoming, h.stop.cancelled_owned())
                .await;
            if let Err(e) = served {
                tracing::warn!(id = %h.id, "a session's hook socket stopped: {e}");
            }
        });
    }
}

/// Tells each call who its caller is (see [`crate::caller`]) and refuses what that caller may
/// never ask: anything but its own hook calls on a session's hook socket, the gateway's and
/// the machine user's methods from inside a chat user's session, and any method without a row
/// in [`crate::rpc::policy`]. Times each call into the metrics, by the method in its path.
#[derive(Clone)]
struct Gate<S> {
    inner: S,
    daemon: crate::core::Daemon,
    /// The session id whose hook socket this is.
    scope: Option<String>,
    metrics: Option<Arc<Metrics>>,
}

impl<S, B> tower::Service<http::Request<B>> for Gate<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        let caller = match &self.scope {
            Some(id) => Caller::HookSocket { id: id.clone() },
            None => {
                let pid = req
                    .extensions()
                    .get::<UdsConnectInfo>()
                    .and_then(|ci| ci.peer_cred)
                    .and_then(|c| c.pid());
                self.daemon.caller_of(pid)
            }
        };
        let path = req.uri().path().to_string();
        let method = path.rsplit('/').next().unwrap_or("").to_string();
        // The method's row, looked up once: where it may be called from and who may call it.
        let row = crate::rpc::policy::row(&method);
        let refusal = match &caller {
            Caller::Unknown => Some(
                "the calling process cannot be traced (it is gone, or its ancestry is unreadable): calls are taken only from a process that still runs",
            ),
            Caller::HookSocket { .. } if method != "Hook" => {
                Some("this socket serves only its session's hook calls")
            }
            _ => match (row.map(|r| r.reach), &caller) {
                (None, _) => Some(
                    "no such method in this clibotd (an older daemon than the client?): upgrade and restart clibotd",
                ),
                (Some(crate::rpc::policy::Reach::Outside), Caller::Session { owner, .. })
                    if !owner.is_empty() =>
                {
                    Some(
                        "not from inside a chat user's session: only the gateway and the machine's user may",
                    )
                }
                _ => None,
            },
        };
        let actor = crate::rpc::convert::actor_of(Some(&caller), req.headers());
        // Who may call it, by its row: a method only the machine's user may call refuses a
        // chat user here, before its handler, and audits that when its row says so.
        let refusal = refusal.or_else(|| match row.map(|r| r.who) {
            Some(crate::rpc::policy::Who::Machine { why, audit }) => {
                if actor.is_local() {
                    return None;
                }
                if let Some(action) = audit {
                    self.daemon.audit(&actor, "", action, Err(why));
                }
                Some(why)
            }
            // Checked by the handler, for the session the request names.
            _ => None,
        });
        if let Some(why) = refusal {
            tracing::warn!(?caller, method, "refused: {why}");
            let resp = Status::permission_denied(why).into_http();
            return Box::pin(async move { Ok(resp) });
        }
        // A chat caller reads a core error in chat words, whatever the method.
        let chat = crate::rpc::convert::reads_in_chat(&actor);
        let rights = row.map(|r| crate::rpc::policy::Rights::new(r.who));
        if let Some(rights) = &rights {
            req.extensions_mut().insert(rights.clone());
        }
        req.extensions_mut().insert(caller);
        req.extensions_mut().insert(actor.clone());
        let started = Instant::now();
        let call = self.inner.call(req);
        let metrics = self.metrics.clone();
        // A call whose outcome the audit log keeps runs apart from its connection, to its end
        // (see `Kept::Outcome`), and is audited here once it ended.
        let kept = row
            .filter(|r| r.kept == crate::rpc::policy::Kept::Outcome)
            .and_then(|r| r.action())
            .zip(rights);
        let daemon = self.daemon.clone();
        Box::pin(async move {
            let r = match kept {
                Some((action, rights)) => {
                    // Audited inside the task: this future is dropped when the caller hangs up.
                    let task = tokio::spawn(async move {
                        let r = call.await;
                        if let (Ok(resp), Some(session)) = (&r, rights.session_let_in()) {
                            match Status::from_header_map(resp.headers()) {
                                Some(s) if s.code() != tonic::Code::Ok => {
                                    daemon.audit(&actor, &session, action, Err(s.message()))
                                }
                                _ => daemon.audit(&actor, &session, action, Ok(())),
                            }
                        }
                        r
                    });
                    match task.await {
                        Ok(r) => r,
                        Err(e) => Ok(Status::internal(format!(
                            "the daemon failed while doing {action}: {e}; see its log"
                        ))
                        .into_http()),
                    }
                }
                None => call.await,
            };
            if let Some(m) = metrics {
                m.rpc(&path, started.elapsed());
            }
            r.map(|resp| crate::rpc::convert::word_for_caller(chat, resp))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_replaces_stale_and_refuses_live() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sub = dir.path().join("clibot-x");
        let path = sub.join("d.sock");
        let l = bind(&path).expect("first bind");
        let mode = std::fs::metadata(&path).expect("meta").mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(std::fs::metadata(&sub).expect("meta").mode() & 0o777, 0o700);
        let e = bind(&path).expect_err("live socket");
        assert!(
            e.to_string().contains(&std::process::id().to_string()),
            "{e}"
        );
        drop(l); // the file stays: now stale
        bind(&path).expect("stale socket replaced");
        let file = dir.path().join("plain");
        std::fs::write(&file, "x").expect("write");
        assert!(matches!(bind(&file), Err(SocketError::NotASocket(_))));
    }
}
