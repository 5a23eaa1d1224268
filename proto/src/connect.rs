//! Connecting to the daemon over its Unix socket, with errors that say what to do.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Endpoint, Uri};

use crate::Client;

/// Why no connection to the daemon could be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// Nothing listens at the path (no file, or a stale socket).
    #[error(
        "no clibotd is listening at {path}: start it with `clibotd` (or `systemctl --user start clibotd.socket`), or point --socket / CLIBOT_SOCKET at a running one"
    )]
    NoDaemon { path: PathBuf },
    /// The socket exists but this user may not open it.
    #[error(
        "permission denied opening {path}: the daemon only accepts connections from the user that runs it"
    )]
    PermissionDenied { path: PathBuf },
    /// The socket is served by another user: talking to it would hand them everything.
    #[error(
        "{path} is served by uid {uid}, not by you: refusing to talk to it; remove it, or point --socket / CLIBOT_SOCKET at your own daemon"
    )]
    ForeignServer { path: PathBuf, uid: u32 },
    /// A daemon on another machine could not be reached through its command (ssh).
    #[error(
        "cannot reach clibotd through {target}: {detail} (the far side runs `clibotctl dial-stdio`: check that ssh logs in without a password, that clibotctl is on the remote PATH or named in full, and that clibotd runs there)"
    )]
    Remote { target: String, detail: String },
    /// Anything else the transport reported.
    #[error("cannot connect to clibotd at {path}: {source}")]
    Transport {
        path: PathBuf,
        #[source]
        source: tonic::transport::Error,
    },
}

impl ConnectError {
    /// True when no daemon runs at the path (so starting one would help).
    pub fn is_no_daemon(&self) -> bool {
        matches!(self, ConnectError::NoDaemon { .. })
    }
}

/// Opens the daemon's socket as a plain stream (what `clibotctl dial-stdio` forwards), refusing
/// one served by another user.
pub async fn open_socket(socket: &Path) -> Result<UnixStream, ConnectError> {
    match UnixStream::connect(socket).await {
        Ok(stream) => {
            let me = rustix::process::getuid().as_raw();
            if let Ok(cred) = stream.peer_cred()
                && cred.uid() != me
            {
                return Err(ConnectError::ForeignServer {
                    path: socket.to_path_buf(),
                    uid: cred.uid(),
                });
            }
            Ok(stream)
        }
        Err(e) => {
            let path = socket.to_path_buf();
            Err(match e.kind() {
                std::io::ErrorKind::PermissionDenied => ConnectError::PermissionDenied { path },
                _ => ConnectError::NoDaemon { path },
            })
        }
    }
}

/// Connects to the daemon at `socket`. The connection is made eagerly, so an absent daemon is
/// reported here rather than on the first call.
pub async fn connect(socket: &Path) -> Result<Client, ConnectError> {
    // Probe first: it yields a precise error (absent vs. refused vs. forbidden), which the
    // transport error below would blur into "transport error".
    drop(open_socket(socket).await?);
    let path = socket.to_path_buf();
    let connector_path = path.clone();
    // The URI is never resolved; the connector below ignores it.
    let channel = Endpoint::from_static("http://clibotd.local")
        .connect_timeout(Duration::from_secs(5))
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let p = connector_path.clone();
            async move { UnixStream::connect(p).await.map(TokioIo::new) }
        }))
        .await
        .map_err(|source| ConnectError::Transport { path, source })?;
    Ok(Client::new(channel)
        .max_decoding_message_size(crate::MAX_MESSAGE)
        .max_encoding_message_size(crate::MAX_MESSAGE))
}
