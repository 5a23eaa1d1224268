//! How a session's program is started: through a small launcher, `clibotd --launch FILE`.
//!
//! Why a launcher: what tmux is asked to run stands on a command line (`/proc/PID/cmdline`),
//! which every local user can read. The launcher's file — argv and environment, hook tokens and
//! API keys among them — is written 0600 in the state directory, read once and removed by the
//! launcher, which then marks itself a child subreaper (so a process that double-forks or
//! `setsid`s away from the CLI is still re-parented below the pane, and the daemon can trace
//! any caller back to its session) and executes the program in its place: the pane's pid is the
//! program's (or the jail's, for jailed sessions).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What the launcher runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LaunchSpec {
    pub argv: Vec<String>,
    /// Set on top of the environment tmux gives the pane.
    pub env: Vec<(String, String)>,
    /// The program is `bwrap` building a jail: hand it the seccomp filter that refuses
    /// `TIOCSTI` (`--seccomp FD`, inserted after the program), and open the path after each
    /// `--bind-fd` / `--ro-bind-fd` with no link followed, putting its descriptor in its place.
    #[serde(default)]
    pub seccomp: bool,
}

/// The folder of pending launch files.
pub fn dir(state_dir: &Path) -> PathBuf {
    state_dir.join("launch")
}

/// Writes `spec` for session `id` as a private file; returns its path.
pub fn write(state_dir: &Path, id: &str, spec: &LaunchSpec) -> std::io::Result<PathBuf> {
    let dir = dir(state_dir);
    crate::paths::create_private_dir(&dir)?;
    let path = dir.join(format!("{id}.json"));
    let body = serde_json::to_vec(spec).map_err(std::io::Error::other)?;
    crate::paths::write_private(&path, &body)?;
    Ok(path)
}

/// The launcher's argv: this daemon binary, if it can be found, with `--launch FILE`.
pub fn launcher_argv(file: &Path) -> Option<Vec<String>> {
    let exe = std::env::current_exe().ok()?;
    // An upgraded binary replaced under a running daemon reads "… (deleted)": the new one at
    // the same path is the launcher as much as the old one was.
    let exe = match exe.to_str().and_then(|s| s.strip_suffix(" (deleted)")) {
        Some(s) => PathBuf::from(s),
        None => exe,
    };
    // Only the daemon's own binary launches (a test harness embedding the core is not one).
    let named = exe.file_name().is_some_and(|n| n == "clibotd");
    (named && exe.is_file()).then(|| {
        vec![
            exe.display().to_string(),
            "--launch".into(),
            file.display().to_string(),
        ]
    })
}

/// Why the launcher could not start the program; printed in the pane, which shows it.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("cannot read the launch file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the launch file {0} is not valid: {1}")]
    Invalid(String, String),
    #[error("cannot build the session's jail: {0}; the session is not started")]
    Seccomp(String),
    #[error("cannot run {program}: {source}")]
    Exec {
        program: String,
        #[source]
        source: std::io::Error,
    },
}

/// The launcher: reads and removes `file`, becomes a subreaper and executes the program.
/// Returns only on failure.
pub fn run(file: &Path) -> LaunchError {
    let body = match std::fs::read(file) {
        Ok(b) => b,
        Err(source) => {
            return LaunchError::Read {
                path: file.display().to_string(),
                source,
            };
        }
    };
    let _ = std::fs::remove_file(file);
    let spec: LaunchSpec = match serde_json::from_slice(&body) {
        Ok(s) => s,
        Err(e) => return LaunchError::Invalid(file.display().to_string(), e.to_string()),
    };
    let Some((program, args)) = spec.argv.split_first() else {
        return LaunchError::Invalid(file.display().to_string(), "no program".into());
    };
    let mut args = args.to_vec();
    if spec.seccomp {
        if let Err(e) = pin_bound_paths(&mut args) {
            return LaunchError::Seccomp(e);
        }
        match seccomp_fd() {
            Ok(fd) => {
                args.insert(0, fd.to_string());
                args.insert(0, "--seccomp".into());
            }
            Err(e) => return LaunchError::Seccomp(e),
        }
    }
    // Best effort: without it, callers that escape the pane's process tree are not traced to
    // their session (they are then treated as the chat metadata they claim is ignored anyway
    // only for traced callers), which the jail, not this, is the boundary for.
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(program);
    cmd.args(&args);
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    let source = cmd.exec();
    LaunchError::Exec {
        program: program.clone(),
        source,
    }
}

/// Replaces the path after each `--bind-fd` / `--ro-bind-fd` by a descriptor of it, opened
/// with no link followed and left open across `exec`.
fn pin_bound_paths(args: &mut [String]) -> Result<(), String> {
    use crate::confine::jail::{BIND_FD, RO_BIND_FD};
    use std::os::fd::IntoRawFd;
    let mut i = 0;
    while i + 1 < args.len() {
        if args[i] == BIND_FD || args[i] == RO_BIND_FD {
            let path = std::path::PathBuf::from(&args[i + 1]);
            let fd = crate::confine::beneath::Dir::pin(&path).map_err(|e| e.to_string())?;
            rustix::io::fcntl_setfd(&fd, rustix::io::FdFlags::empty())
                .map_err(|e| e.to_string())?;
            args[i + 1] = fd.into_raw_fd().to_string();
            i += 2;
        } else {
            i += 1;
        }
    }
    Ok(())
}

/// The seccomp filter in a memory file left open across `exec` (bubblewrap reads it from
/// there); its descriptor number.
fn seccomp_fd() -> Result<i32, String> {
    use std::io::{Seek, Write};
    use std::os::fd::IntoRawFd;
    let prog = crate::confine::seccomp::tiocsti_filter()
        .ok_or_else(|| format!("no filter is known for {}", std::env::consts::ARCH))?;
    let fd = rustix::fs::memfd_create("clibot-seccomp", rustix::fs::MemfdFlags::empty())
        .map_err(|e| e.to_string())?;
    let mut file = std::fs::File::from(fd);
    file.write_all(&prog).map_err(|e| e.to_string())?;
    file.rewind().map_err(|e| e.to_string())?;
    // Kept open on purpose: the program about to be executed reads it.
    Ok(file.into_raw_fd())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_file_is_private_and_round_trips() {
        let dir = tempfile::tempdir().expect("tempdir");
        let spec = LaunchSpec {
            argv: vec!["sh".into(), "-c".into(), "echo hi".into()],
            env: vec![("CLIBOT_HOOK_TOKEN".into(), "0123".into())],
            seccomp: false,
        };
        let path = write(dir.path(), "abc", &spec).expect("write");
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let back: LaunchSpec =
            serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
        assert_eq!(back, spec);
    }

    #[test]
    fn a_missing_or_bad_file_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(matches!(
            run(&dir.path().join("none")),
            LaunchError::Read { .. }
        ));
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "{").expect("write");
        assert!(matches!(run(&bad), LaunchError::Invalid(..)));
        assert!(!bad.exists(), "read once, then removed");
        let empty = dir.path().join("empty.json");
        std::fs::write(&empty, r#"{"argv":[],"env":[]}"#).expect("write");
        assert!(matches!(run(&empty), LaunchError::Invalid(..)));
    }
}
