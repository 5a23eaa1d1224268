//! The host's core: is the daemon there and answering, is tmux new enough, are the socket and
//! the state directory private to their owner, and what the daemon warned about at start.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use clibot_proto::v1;

use super::probe::{PROBE, probe};
use super::report::{Check, Level, check};

/// Connects and asks for the status: the `daemon` check. The client and the status, when it
/// answered, for the checks that need them.
pub(super) async fn daemon_check(
    socket: &Path,
    out: &mut Vec<Check>,
) -> (Option<clibot_proto::Client>, Option<v1::StatusResponse>) {
    let mut client = None;
    let status = match tokio::time::timeout(PROBE, clibot_proto::connect(socket)).await {
        Ok(Ok(mut c)) => match tokio::time::timeout(PROBE, c.status(v1::StatusRequest {})).await {
            Ok(Ok(s)) => {
                let s = s.into_inner();
                out.push(check(
                    "daemon",
                    Level::Ok,
                    format!(
                        "clibotd {} (pid {}) answers at {}, up {}s",
                        s.version,
                        s.pid,
                        socket.display(),
                        s.uptime_ms / 1000
                    ),
                    "",
                ));
                client = Some(c);
                Some(s)
            }
            Ok(Err(e)) => {
                out.push(check(
                    "daemon",
                    Level::Fail,
                    format!("clibotd at {} refused its status: {}", socket.display(), e.message()),
                    "look at the daemon's log (journalctl --user -u clibotd, or clibotd.log next to the socket)",
                ));
                None
            }
            Err(_) => {
                out.push(check(
                    "daemon",
                    Level::Fail,
                    format!("clibotd at {} did not answer within {}s", socket.display(), PROBE.as_secs()),
                    "it may be stuck: systemctl --user restart clibotd (or kill it and run clibotd again)",
                ));
                None
            }
        },
        Ok(Err(e)) => {
            out.push(check(
                "daemon",
                Level::Fail,
                format!("not reachable: {e}"),
                "start it: systemctl --user enable --now clibotd.socket (see docs/OPERATIONS.md, Running under systemd), or run `clibotd &`, or any clibotctl command without --no-autostart",
            ));
            None
        }
        Err(_) => {
            out.push(check(
                "daemon",
                Level::Fail,
                format!("connecting to {} timed out", socket.display()),
                "systemctl --user restart clibotd, or kill the daemon and start clibotd again",
            ));
            None
        }
    };
    (client, status)
}

/// What the daemon repaired at start, one warning each.
pub(super) fn warnings_check(s: &v1::StatusResponse, out: &mut Vec<Check>) {
    for w in &s.warnings {
        // A warning that says what to do (a CLI outside its patterns' versions) needs no more.
        let fix = if w.contains("patterns test") {
            ""
        } else {
            "see the daemon's log for what it repaired at start"
        };
        out.push(check("daemon warning", Level::Warn, w.clone(), fix));
    }
}

/// "tmux 3.3a" → (3, 3).
fn tmux_version(v: &str) -> Option<(u32, u32)> {
    let num = v.split_whitespace().last()?.trim_start_matches("next-");
    let mut parts = num.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .ok()?;
    Some((major, minor))
}

pub(super) async fn tmux_check(
    status: Option<&v1::StatusResponse>,
    config: Option<&toml::Table>,
    out: &mut Vec<Check>,
) {
    let binary = config
        .and_then(|c| c.get("tmux")?.get("binary")?.as_str().map(str::to_string))
        .unwrap_or_else(|| "tmux".into());
    let version = match status {
        Some(s) if s.tmux_reachable => Ok(s.tmux_version.clone()),
        Some(_) => Err("the daemon cannot run tmux".to_string()),
        None => probe(&binary, &["-V"]).await,
    };
    match version {
        Err(e) => out.push(check(
            "tmux",
            Level::Fail,
            e,
            "install tmux 3.2 or newer (apt install tmux, brew install tmux), or set [tmux] binary",
        )),
        Ok(v) => match tmux_version(&v) {
            Some(n) if n < (3, 2) => out.push(check(
                "tmux",
                Level::Fail,
                format!("{v} is older than 3.2, which clibot needs"),
                "upgrade tmux to 3.2 or newer",
            )),
            Some(_) => out.push(check("tmux", Level::Ok, v, "")),
            None => out.push(check(
                "tmux",
                Level::Warn,
                format!("cannot read a version from {v:?}"),
                "make sure it is tmux 3.2 or newer",
            )),
        },
    }
}

fn mode_of(m: &std::fs::Metadata) -> u32 {
    m.mode() & 0o7777
}

pub(super) fn socket_check(socket: &Path, out: &mut Vec<Check>) {
    let uid = rustix::process::geteuid().as_raw();
    let name = "socket";
    match std::fs::symlink_metadata(socket) {
        Err(e) => out.push(check(
            name,
            Level::Warn,
            format!("{}: {e}", socket.display()),
            "it appears when the daemon (or clibotd.socket) starts",
        )),
        Ok(m) => {
            let mut problems = Vec::new();
            let mut fixes = Vec::new();
            if m.uid() != uid {
                problems.push(format!("owned by uid {} (you are {uid})", m.uid()));
                fixes.push(format!(
                    "someone else's daemon listens there: stop it, remove {} and start your own",
                    socket.display()
                ));
            }
            if mode_of(&m) != 0o600 {
                problems.push(format!("mode {:04o}, not 0600", mode_of(&m)));
                fixes.push(format!(
                    "chmod 600 {} (anyone who can connect controls your sessions)",
                    socket.display()
                ));
            }
            if let Some(dir) = socket.parent() {
                match std::fs::metadata(dir) {
                    Ok(d) => {
                        if mode_of(&d) != 0o700 {
                            problems.push(format!(
                                "directory {} mode {:04o}, not 0700",
                                dir.display(),
                                mode_of(&d)
                            ));
                            fixes.push(format!("chmod 700 {}", dir.display()));
                        }
                        if d.uid() != uid {
                            problems.push(format!(
                                "directory {} owned by uid {}",
                                dir.display(),
                                d.uid()
                            ));
                            fixes.push("use a socket in a directory of your own (--socket, [daemon] socket)".to_string());
                        }
                    }
                    Err(e) => problems.push(format!("directory {}: {e}", dir.display())),
                }
            }
            if problems.is_empty() {
                out.push(check(
                    name,
                    Level::Ok,
                    format!("{}: 0600, yours, in a 0700 directory", socket.display()),
                    "",
                ));
            } else {
                out.push(check(
                    name,
                    Level::Fail,
                    format!("{}: {}", socket.display(), problems.join("; ")),
                    fixes.join("; "),
                ));
            }
        }
    }
}

pub(super) fn state_dir_check(dir: &Path, out: &mut Vec<Check>) {
    let uid = rustix::process::geteuid().as_raw();
    let name = "state dir";
    let m = match std::fs::metadata(dir) {
        Ok(m) => m,
        Err(e) => {
            out.push(check(
                name,
                Level::Fail,
                format!("{}: {e}", dir.display()),
                "the daemon creates it at start: check the path ([daemon] state_dir, CLIBOT_STATE_DIR) and restart it",
            ));
            return;
        }
    };
    let mut bad = Vec::new();
    if mode_of(&m) & 0o077 != 0 || m.uid() != uid {
        bad.push(format!(
            "{} ({:04o}, uid {})",
            dir.display(),
            mode_of(&m),
            m.uid()
        ));
    }
    let mut bad_files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    let mut seen = 0usize;
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            seen += 1;
            if seen > 10_000 {
                break;
            }
            let Ok(fm) = e.path().symlink_metadata() else {
                continue;
            };
            if fm.is_dir() {
                if mode_of(&fm) & 0o077 != 0 || fm.uid() != uid {
                    bad.push(format!("{} ({:04o})", e.path().display(), mode_of(&fm)));
                }
                stack.push(e.path());
            } else if fm.is_file() && (mode_of(&fm) & 0o077 != 0 || fm.uid() != uid) {
                bad_files.push(format!("{} ({:04o})", e.path().display(), mode_of(&fm)));
            }
        }
    }
    if bad.is_empty() && bad_files.is_empty() {
        out.push(check(
            name,
            Level::Ok,
            format!("{}: 0700, its files readable only by you", dir.display()),
            "",
        ));
        return;
    }
    let all: Vec<String> = bad.iter().chain(&bad_files).cloned().collect();
    let shown = all.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
    let more = if all.len() > 5 {
        format!(" and {} more", all.len() - 5)
    } else {
        String::new()
    };
    let d = dir.display();
    out.push(check(
        name,
        Level::Fail,
        format!("open to others: {shown}{more} (tokens, chat ids and transcripts live here)"),
        format!("chmod -R go-rwx {d} (as its owner)"),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(tmux_version("tmux 3.3a"), Some((3, 3)));
        assert_eq!(tmux_version("tmux next-3.6"), Some((3, 6)));
        assert!(tmux_version("tmux 3.1c").is_some_and(|v| v < (3, 2)));
        assert_eq!(tmux_version("nonsense"), None);
    }
}
