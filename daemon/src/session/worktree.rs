//! A session started in a worktree of its own (`spawn --worktree`): made before the session
//! starts, on a new branch, in clibot's folder of worktrees; removed again only when the session
//! could not start in it. Stopping a session leaves its worktree and branch: the work is there.

use std::path::{Path, PathBuf};

use tracing::{info, warn};

use crate::confine::beneath::Dir;
use crate::core::Daemon;
use crate::error::CoreError;
use crate::worktrees::kept::Kept;
use crate::worktrees::{Worktree, WorktreeAsk, WorktreeStatus, git, includes, repo_id};

/// The largest file `.worktreeinclude` copies, and the list itself.
const MAX_INCLUDE: u64 = 16 << 20;

impl Daemon {
    /// Where worktrees are made: `[worktrees] dir`, else `worktrees` in the data directory.
    pub(crate) fn worktrees_dir(&self) -> PathBuf {
        match &self.live().config.worktrees.dir {
            Some(d) => crate::paths::expand_home(d),
            None => self.settings().data_dir.join("worktrees"),
        }
    }

    /// Makes session `name`'s worktree of the repository `dir` lies in: a new branch
    /// (`clibot/NAME` unless named) from `ask.from` (else `HEAD`), in
    /// `WORKTREES/REPO-ID/NAME`, with the files `.worktreeinclude` lists copied in.
    ///
    /// A worktree kept from an earlier session of this name is taken up again instead (the
    /// second value is then true), when it is of the same repository and no other branch or
    /// base is asked: the session goes on where the last one stopped. It is recorded in the
    /// table of kept worktrees as soon as it exists, so a daemon stopped before the session
    /// starts still knows it.
    ///
    /// A member's worktree goes in the member root that holds the repository
    /// (`ROOT/.clibot-worktrees/REPO-ID/NAME`), and its git runs in their jail.
    pub(crate) async fn make_worktree(
        &self,
        name: &str,
        owner: &str,
        dir: &Path,
        ask: &WorktreeAsk,
    ) -> Result<(Worktree, bool), CoreError> {
        let root = self.member_root_of(owner, dir)?;
        let make = self.make_worktree_in(name, owner, dir, ask, root.clone());
        self.in_member_jail(owner, root.as_deref(), name, make)
            .await
    }

    async fn make_worktree_in(
        &self,
        name: &str,
        owner: &str,
        dir: &Path,
        ask: &WorktreeAsk,
        root: Option<PathBuf>,
    ) -> Result<(Worktree, bool), CoreError> {
        let repo = git::toplevel(dir).await.map_err(CoreError::Worktree)?;
        if let Some(r) = root.as_deref().filter(|r| !repo.starts_with(r)) {
            return Err(CoreError::Worktree(format!(
                "the repository {} reaches outside your workspace {}: start the session in a repository of your own",
                repo.display(),
                r.display()
            )));
        }
        if let Some(k) = self.kept_worktrees().get(name) {
            return take_up(name, k, &repo, ask).map(|w| (w, true));
        }
        git::refuse_filters(&repo)
            .await
            .map_err(CoreError::Worktree)?;
        let (base, base_commit) = git::base_of(&repo, &ask.from)
            .await
            .map_err(CoreError::Worktree)?;
        let branch = if ask.branch.is_empty() {
            format!("clibot/{name}")
        } else {
            ask.branch.clone()
        };
        git::check_new_branch(&repo, &branch)
            .await
            .map_err(CoreError::Worktree)?;
        let path = match &root {
            Some(r) => r.join(".clibot-worktrees"),
            None => self.worktrees_dir(),
        }
        .join(repo_id(&repo))
        .join(name);
        if path.exists() {
            return Err(CoreError::Worktree(format!(
                "{} exists already (the worktree of an earlier session {name}?): remove it with `git worktree remove` in {}, or pick another name",
                path.display(),
                repo.display()
            )));
        }
        // A member's folders are made by git in their jail, never by the daemon through
        // links they may have planted.
        if let Some(parent) = path.parent().filter(|_| root.is_none()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                CoreError::Worktree(format!("cannot make {}: {e}", parent.display()))
            })?;
        }
        git::add(&repo, &path, &branch, &base_commit)
            .await
            .map_err(CoreError::Worktree)?;
        copy_includes(&repo, &path);
        let setup = self.live().config.worktrees.setup.clone();
        if let Err(e) = run_setup(&path, &setup).await {
            git::undo_add(&repo, &path, &branch).await;
            return Err(CoreError::Worktree(e));
        }
        info!(session = %name, branch = %branch, path = %path.display(), "worktree made");
        let w = Worktree {
            repo,
            path,
            branch,
            base,
            base_commit,
        };
        self.kept_worktrees().insert(Kept {
            session: name.to_string(),
            owner: owner.to_string(),
            worktree: w.clone(),
            made_ms: crate::store::now_ms(),
            jail_dir: root.unwrap_or_default(),
            ..Default::default()
        });
        Ok((w, false))
    }

    /// Takes back a worktree made for a session that could not start in it (one taken up
    /// again from an earlier session stays: it holds that session's work).
    pub(crate) async fn undo_worktree(&self, name: &str, w: &Worktree, taken_up: bool) {
        if taken_up {
            return;
        }
        warn!(branch = %w.branch, "the session did not start: its new worktree is removed");
        let undo = git::undo_add(&w.repo, &w.path, &w.branch);
        match self.kept_worktrees().get(name) {
            Some(k) => self.in_worktree_jail(&k, undo).await,
            None => undo.await,
        }
        self.kept_worktrees().remove(name);
    }

    /// How worktree `w` stands against its base (git reads its folder: asked only by `show`).
    pub async fn worktree_status(&self, w: &Worktree) -> WorktreeStatus {
        let read = git::status(&w.repo, &w.path, &w.branch, &w.base);
        let kept = self
            .kept_worktrees()
            .all()
            .into_iter()
            .find(|k| k.worktree.path == w.path);
        match kept {
            Some(k) => self.in_worktree_jail(&k, read).await,
            None => read.await,
        }
    }
}

/// The worktree an earlier session `name` left, if a new session of that name may go on in it.
fn take_up(name: &str, k: Kept, repo: &Path, ask: &WorktreeAsk) -> Result<Worktree, CoreError> {
    let w = k.worktree;
    let discard = format!("discard it first (clibotctl worktree discard {name} --confirm {name})");
    if w.repo != repo {
        return Err(CoreError::Worktree(format!(
            "an earlier session {name} left a worktree of another repository ({}): pick another name, or {discard}",
            w.repo.display()
        )));
    }
    if (!ask.branch.is_empty() && ask.branch != w.branch) || !ask.from.is_empty() {
        return Err(CoreError::Worktree(format!(
            "an earlier session {name} left its worktree on {}: start without a branch or --from to go on there, pick another name, or {discard}",
            w.branch
        )));
    }
    if !w.path.is_dir() {
        return Err(CoreError::Worktree(format!(
            "an earlier session {name}'s worktree {} is gone (removed by hand?): {discard}; its branch {} is kept until then",
            w.path.display(),
            w.branch
        )));
    }
    info!(session = %name, branch = %w.branch, "the session goes on in its kept worktree");
    Ok(w)
}

/// How long one `[worktrees] setup` command may take.
const SETUP_LIMIT: std::time::Duration = std::time::Duration::from_secs(600);

/// Runs `[worktrees] setup` in a new worktree, each command with `sh -c`, in order; the first
/// that fails says what it printed last.
async fn run_setup(path: &Path, setup: &[String]) -> Result<(), String> {
    for cmd in setup {
        let out = crate::worktrees::runner::sh(path, cmd, SETUP_LIMIT)
            .await
            .map_err(|e| format!("[worktrees] setup {cmd:?}: {e}; the worktree was removed"))?;
        if !out.status.success() {
            let said = String::from_utf8_lossy(if out.stderr.is_empty() {
                &out.stdout
            } else {
                &out.stderr
            })
            .trim()
            .lines()
            .rev()
            .take(5)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join(" / ");
            return Err(format!(
                "[worktrees] setup {cmd:?} failed ({}): {said}; the worktree was removed — fix the command in the config or the repository, then start the session again",
                out.status
            ));
        }
    }
    Ok(())
}

/// Copies what `.worktreeinclude` lists (ignored files a checkout lacks: `.env`, local config)
/// from the repository into the worktree, following no link; what cannot be copied is logged.
fn copy_includes(repo: &Path, path: &Path) {
    let (Ok(src), Ok(dest)) = (Dir::open(repo), Dir::open(path)) else {
        return;
    };
    let Ok(list) = src.read(Path::new(".worktreeinclude"), MAX_INCLUDE) else {
        return;
    };
    for rel in includes(&String::from_utf8_lossy(&list)) {
        if dest.exists(&rel) || !src.exists(&rel) {
            continue;
        }
        if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty())
            && let Err(e) = dest.create_dir_all(parent, 0o700)
        {
            warn!("worktree include {}: {e}", rel.display());
            continue;
        }
        if let Err(e) = src.copy_to(&rel, &dest, &rel, MAX_INCLUDE, 0o600) {
            warn!("worktree include {}: {e}", rel.display());
        }
    }
}
