//! Where a worktree's git runs: on the machine through clibot's safe git, or — for a member's
//! worktree — inside the member's jail, with their rights, seeing only their own folders.
//!
//! Why a jail and not safe git for members: a member's session writes their repository, so
//! its `.git` may be a link to another repository of the machine, or name a worktree's or an
//! object store's path elsewhere. Safe git keeps a repository from choosing programs, not from
//! choosing paths; in the jail every path the repository names resolves among the member's own
//! folders, or to nothing.
//!
//! The caller chooses for the whole operation with [`in_jail`]: every git call the operation
//! makes (and `[worktrees] setup`) then goes to the jail, so no call can be missed.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use crate::safe_git;

/// A program run in a member's jail: `argv` in `dir` with `env` added; what it printed and
/// how it ended.
pub trait Jail: Send + Sync {
    fn exec<'a>(
        &'a self,
        dir: &'a Path,
        argv: Vec<String>,
        env: Vec<(String, String)>,
    ) -> Pin<Box<dyn Future<Output = Result<Output, String>> + Send + 'a>>;
}

tokio::task_local! {
    static JAIL: Arc<dyn Jail>;
}

/// Runs `f` with every worktree git call (and setup command) it makes inside `jail`.
pub async fn in_jail<F: Future>(jail: Arc<dyn Jail>, f: F) -> F::Output {
    JAIL.scope(jail, f).await
}

fn current() -> Option<Arc<dyn Jail>> {
    JAIL.try_with(Arc::clone).ok()
}

/// Whether the calls run in a member's jail (a repository's filters or drivers then run there,
/// with the member's rights, and need no refusal).
pub fn jailed() -> bool {
    current().is_some()
}

/// `git ARGS` in `dir` with `env`, for at most `limit`.
pub async fn git(
    dir: &Path,
    args: &[&str],
    env: &[(&str, String)],
    limit: Duration,
) -> Result<Output, String> {
    let shown = || format!("git {}", args.join(" "));
    if let Some(j) = current() {
        // Safe git's settings, in the jail too (where `env -C` says where it runs).
        let mut argv: Vec<String> = std::iter::once("git")
            .chain(safe_git::OPTIONS)
            .map(str::to_string)
            .collect();
        argv.extend(args.iter().map(|s| s.to_string()));
        let mut all: Vec<(String, String)> = safe_git::ENV
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        all.extend(env.iter().map(|(k, v)| (k.to_string(), v.clone())));
        return tokio::time::timeout(limit, j.exec(dir, argv, all))
            .await
            .map_err(|_| format!("{} took over {} s", shown(), limit.as_secs()))?;
    }
    let mut c = safe_git::command(dir);
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    tokio::time::timeout(limit, c.output())
        .await
        .map_err(|_| format!("{} took over {} s", shown(), limit.as_secs()))?
        .map_err(|e| format!("git cannot run ({e}): is git installed?"))
}

/// `sh -c CMD` in `dir`, for at most `limit` (`[worktrees] setup`).
pub async fn sh(dir: &Path, cmd: &str, limit: Duration) -> Result<Output, String> {
    let run = async {
        match current() {
            Some(j) => {
                j.exec(dir, vec!["sh".into(), "-c".into(), cmd.into()], Vec::new())
                    .await
            }
            None => tokio::process::Command::new("sh")
                .args(["-c", cmd])
                .current_dir(dir)
                .stdin(std::process::Stdio::null())
                .kill_on_drop(true)
                .output()
                .await
                .map_err(|e| e.to_string()),
        }
    };
    tokio::time::timeout(limit, run)
        .await
        .map_err(|_| format!("took over {} minutes", limit.as_secs() / 60))?
}

/// Whether the repository names filter programs git would run on files it reads: never
/// refused in a jail (they run there with the member's rights).
pub async fn defines_filters(repo: &Path) -> bool {
    !jailed() && safe_git::defines_filters(repo).await
}
