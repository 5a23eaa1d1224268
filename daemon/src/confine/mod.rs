//! The owner boundary: the bubblewrap jail, the launcher that hands a program to tmux without
//! secrets on a command line, and the secret paths no session may start in or see. May not
//! touch: sessions or chats (the daemon's operations in `session/confine.rs` apply it).
//!
//! Who runs where: whether a session's program is jailed, what non-admins may start, and how
//! the program is handed to tmux (through the launcher, so that no secret is on a command line).

pub mod beneath;
pub mod install;
pub mod jail;
pub mod launch;
pub mod policy;
pub mod seccomp;
pub mod secrets;

use std::collections::BTreeMap;
use std::os::unix::net::UnixListener;

use tokio_util::sync::CancellationToken;

/// A per-session hook socket, for the server layer to serve (hook calls of session `id` only)
/// until `stop` is cancelled.
pub struct HookListener {
    pub id: String,
    pub listener: UnixListener,
    pub stop: CancellationToken,
}

/// The hook sockets served, by session id; and where new ones are handed to the server layer.
#[derive(Default)]
pub(crate) struct HookSockets {
    pub(crate) served: BTreeMap<String, CancellationToken>,
    pub(crate) tx: Option<tokio::sync::mpsc::UnboundedSender<HookListener>>,
    pub(crate) rx: Option<tokio::sync::mpsc::UnboundedReceiver<HookListener>>,
}

impl HookSockets {
    pub(crate) fn new() -> HookSockets {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        HookSockets {
            served: BTreeMap::new(),
            tx: Some(tx),
            rx: Some(rx),
        }
    }
}

/// Environment variables as (name, value) pairs.
pub(crate) type Env = Vec<(String, String)>;

/// Environment variables that go to tmux's session environment (visible in `tmux
/// show-environment`, and on the tmux client's command line at spawn): what a restarted daemon
/// needs to find its sessions again, and nothing secret.
pub(crate) const TMUX_ENV: &[&str] = &[
    "CLIBOT_SESSION",
    "CLIBOT_SESSION_ID",
    "CLIBOT_CLI_SESSION_ID",
    "CLIBOT_API_PORT",
    "CLIBOT_SOCKET",
    "LANG",
];
