//! `clibotctl hook`: what the CLIs' hooks run. It must never break or slow down the CLI: every
//! failure (no daemon, not started by clibot, a bad payload) exits 0 with no output, and only
//! a permission decision waits, for as long as the daemon holds it.
//!
//! Two kinds of hook call it: the per-session hooks of a session clibot started (which carry the
//! session's id and token in the environment), and with `--global` the hooks `clibotctl hooks
//! install` put in the CLI's own settings, which report any other session of that CLI.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clibot_proto::v1;

/// Largest payload read from stdin.
const MAX_PAYLOAD: u64 = 8 * 1024 * 1024;

/// How long a per-session hook may take to reach the daemon.
const SESSION_CONNECT: Duration = Duration::from_secs(2);

/// How long a global hook may take to reach the daemon: it runs in every session of the CLI,
/// clibot or not, so a daemon that does not answer must cost little.
const GLOBAL_CONNECT: Duration = Duration::from_secs(1);

pub fn run(socket: Option<PathBuf>, cli: &str, event: &str) -> ExitCode {
    let (Ok(session_id), Ok(token)) = (
        std::env::var("CLIBOT_SESSION_ID"),
        std::env::var("CLIBOT_HOOK_TOKEN"),
    ) else {
        // Not a session clibot started: nothing to report to.
        return ExitCode::SUCCESS;
    };
    let Some((event, payload)) = read_payload(event) else {
        return ExitCode::SUCCESS;
    };
    let socket = socket.unwrap_or_else(clibot_proto::default_socket_path);
    let req = v1::HookRequest {
        session_id,
        token,
        cli: cli.to_string(),
        event,
        payload,
        global: false,
    };
    send(socket, req, SESSION_CONNECT)
}

/// `hook --global`: a session clibot did not start, which the daemon knows by the caller's
/// process ancestry. Inside a session clibot started, its own hooks report, so this does
/// nothing (stdin is not even read).
pub fn run_global(socket: impl FnOnce() -> PathBuf, cli: &str, event: &str) -> ExitCode {
    if std::env::var_os("CLIBOT_SESSION_ID").is_some() {
        return ExitCode::SUCCESS;
    }
    let Some((event, payload)) = read_payload(event) else {
        return ExitCode::SUCCESS;
    };
    let req = v1::HookRequest {
        session_id: String::new(),
        token: String::new(),
        cli: cli.to_string(),
        event,
        payload,
        global: true,
    };
    send(socket(), req, GLOBAL_CONNECT)
}

/// The event and its payload. Most CLIs write the payload to the hook's stdin; Codex's `notify`
/// appends it as the last argument instead, where it arrives here as the "event".
fn read_payload(event: &str) -> Option<(String, String)> {
    if event.trim_start().starts_with('{') {
        return Some((String::new(), event.to_string()));
    }
    let mut payload = String::new();
    std::io::stdin()
        .take(MAX_PAYLOAD)
        .read_to_string(&mut payload)
        .ok()?;
    Some((event.to_string(), payload))
}

/// Hands the call to the daemon (never starting one) and prints its answer, if any. Reaching
/// it is bounded by `connect`; the call itself lasts as long as the daemon holds it (a
/// permission decision waits for a person).
fn send(socket: PathBuf, req: v1::HookRequest, connect: Duration) -> ExitCode {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return ExitCode::SUCCESS;
    };
    let output = rt.block_on(async {
        let mut c = tokio::time::timeout(connect, clibot_proto::connect(&socket))
            .await
            .ok()?
            .ok()?;
        c.hook(req).await.ok().map(|r| r.into_inner().output)
    });
    if let Some(out) = output.filter(|o| !o.is_empty()) {
        println!("{out}");
    }
    ExitCode::SUCCESS
}
