//! A member's worktree: made in the member root that holds their repository
//! (`ROOT/.clibot-worktrees/REPO-ID/NAME`), and every git call for it — making it, reading it,
//! merging, discarding, `[worktrees] setup` — run in a jail as their session's is, with that
//! root writable and nothing of the owner's visible (see `worktrees::runner`).

use std::future::Future;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{ExitStatus, Output};
use std::sync::Arc;

use super::job_gate::Ran;
use crate::core::Daemon;
use crate::error::CoreError;
use crate::model::SessionRecord;
use crate::worktrees::kept::Kept;
use crate::worktrees::runner::{Jail, in_jail};

/// Runs programs for a member's worktree in their jail.
struct MemberJail {
    daemon: Daemon,
    owner: String,
    /// A record as the jail needs it: the member root as its directory, the session's CLI.
    rec: SessionRecord,
}

impl Jail for MemberJail {
    fn exec<'a>(
        &'a self,
        dir: &'a Path,
        argv: Vec<String>,
        env: Vec<(String, String)>,
    ) -> Pin<Box<dyn Future<Output = Result<Output, String>> + Send + 'a>> {
        Box::pin(async move {
            // `env -C DIR K=V … PROGRAM …`: where it runs and with what, inside the jail.
            let mut all = vec!["env".to_string(), "-C".into(), dir.display().to_string()];
            all.extend(env.into_iter().map(|(k, v)| format!("{k}={v}")));
            all.extend(argv);
            // A jail of its own per call (its home and files removed after): calls for one
            // worktree may overlap (a turn's summary during a merge).
            let mut rec = self.rec.clone();
            rec.id = format!("wtgit-{}", crate::ids::new_id());
            let ran = self.daemon.run_checked(&self.owner, &rec, &all).await;
            self.daemon.remove_session_files(&rec.id);
            match ran {
                Ok(Ran::Ended {
                    code,
                    stdout,
                    stderr,
                }) => Ok(Output {
                    status: ExitStatus::from_raw(code.map_or(9, |c| (c & 0xff) << 8)),
                    stdout: stdout.into_bytes(),
                    stderr: stderr.into_bytes(),
                }),
                Ok(Ran::NotRun(why)) => Err(format!("cannot run in the jail: {why}")),
                Err(e) => Err(format!("cannot run in the jail: {e}")),
            }
        })
    }
}

impl Daemon {
    /// The member root that holds `dir`, when `owner` is a member (their worktree's git runs
    /// jailed, binding it); `None` for the machine's user and admins.
    pub(crate) fn member_root_of(
        &self,
        owner: &str,
        dir: &Path,
    ) -> Result<Option<PathBuf>, CoreError> {
        let Some(conf) = self.non_admin(owner) else {
            return Ok(None);
        };
        let roots = self.member_roots(owner, &conf)?;
        roots
            .into_iter()
            .find(|r| dir.starts_with(r))
            .map(Some)
            .ok_or_else(|| {
                CoreError::Worktree(format!("{} is outside your workspace", dir.display()))
            })
    }

    /// The jail a member's worktree git runs in: their root writable, as a session of the
    /// built-in `shell` (git needs no CLI's installation, and no network).
    fn member_jail(&self, owner: &str, root: &Path, name: &str) -> Arc<dyn Jail> {
        Arc::new(MemberJail {
            daemon: self.clone(),
            owner: owner.to_string(),
            rec: SessionRecord {
                id: String::new(),
                name: name.to_string(),
                cli: "shell".into(),
                dir: root.to_path_buf(),
                owner: owner.to_string(),
                ..Default::default()
            },
        })
    }

    /// Runs `f` as `k`'s git must run: in its member's jail, or on the machine.
    pub(crate) async fn in_worktree_jail<F: Future>(&self, k: &Kept, f: F) -> F::Output {
        if k.jail_dir.as_os_str().is_empty() {
            return f.await;
        }
        let jail = self.member_jail(&k.owner, &k.jail_dir, &k.session);
        in_jail(jail, f).await
    }

    /// [`Daemon::in_worktree_jail`] before the worktree is known: for member `owner`
    /// working in `root`.
    pub(crate) async fn in_member_jail<F: Future>(
        &self,
        owner: &str,
        root: Option<&Path>,
        name: &str,
        f: F,
    ) -> F::Output {
        match root {
            None => f.await,
            Some(root) => in_jail(self.member_jail(owner, root, name), f).await,
        }
    }
}
