//! `clibotctl hook`: what the CLIs' hooks run. It must never break or slow down the CLI: every
//! failure (no daemon, not started by clibot, a bad payload) exits 0 with no output, and only
//! a permission decision waits, for as long as the daemon holds it.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clibot_proto::v1;

/// Largest payload read from stdin.
const MAX_PAYLOAD: u64 = 8 * 1024 * 1024;

pub fn run(socket: Option<PathBuf>, cli: &str, event: &str) -> ExitCode {
    let (Ok(session_id), Ok(token)) = (
        std::env::var("CLIBOT_SESSION_ID"),
        std::env::var("CLIBOT_HOOK_TOKEN"),
    ) else {
        // Not a session clibot started: nothing to report to.
        return ExitCode::SUCCESS;
    };
    // Most CLIs write the payload to the hook's stdin; Codex's `notify` appends it as the last
    // argument instead, where it arrives here as the "event".
    let (event, payload) = if event.trim_start().starts_with('{') {
        ("", event.to_string())
    } else {
        let mut payload = String::new();
        if std::io::stdin()
            .take(MAX_PAYLOAD)
            .read_to_string(&mut payload)
            .is_err()
        {
            return ExitCode::SUCCESS;
        }
        (event, payload)
    };
    let socket = socket.unwrap_or_else(clibot_proto::default_socket_path);
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return ExitCode::SUCCESS;
    };
    let output = rt.block_on(async {
        let mut c = tokio::time::timeout(Duration::from_secs(2), clibot_proto::connect(&socket))
            .await
            .ok()?
            .ok()?;
        let req = v1::HookRequest {
            session_id,
            token,
            cli: cli.to_string(),
            event: event.to_string(),
            payload,
            global: false,
        };
        c.hook(req).await.ok().map(|r| r.into_inner().output)
    });
    if let Some(out) = output.filter(|o| !o.is_empty()) {
        println!("{out}");
    }
    ExitCode::SUCCESS
}
