//! Where the daemon's socket lives when nobody says otherwise. Shared by the daemon (to bind)
//! and every client (to connect), so both sides always agree.

use std::path::PathBuf;

/// The socket's file name inside the runtime directory.
const SOCKET_NAME: &str = "clibotd.sock";

/// `$CLIBOT_SOCKET` when set, else `$XDG_RUNTIME_DIR/clibot/clibotd.sock`, else
/// `/tmp/clibot-$UID/clibotd.sock` (a directory the daemon creates with mode 0700).
pub fn default_socket_path() -> PathBuf {
    if let Some(p) = std::env::var_os("CLIBOT_SOCKET").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    private_runtime_dir().join(SOCKET_NAME)
}

/// The private per-user runtime directory: `$XDG_RUNTIME_DIR/clibot` (tmpfs, cleaned at logout)
/// or, where that is unset, `$TMPDIR/clibot-$UID`.
pub fn private_runtime_dir() -> PathBuf {
    if let Some(dir) = directories::ProjectDirs::from("", "", "clibot")
        .and_then(|d| d.runtime_dir().map(PathBuf::from))
    {
        return dir;
    }
    let uid = rustix::process::getuid().as_raw();
    std::env::temp_dir().join(format!("clibot-{uid}"))
}
