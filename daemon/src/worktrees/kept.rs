//! The worktrees clibot made and has not removed, kept in `worktrees.json` in the state
//! directory. A session's record goes when it stops; its worktree does not (the work is
//! there), so what `merge`, `discard` and the clean-up act on is known from this table, across
//! stops and daemon restarts.
//!
//! Also here: one lock per repository, so that two merges, a discard and the clean-up never
//! move one repository's branches at the same time.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::Worktree;
use crate::store::json_file::JsonFile;

/// One worktree of a session, stopped or running.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Kept {
    pub session: String,
    /// The session's owner when it was made ("" for the machine's user, else PLATFORM:USER):
    /// who besides admins may finish it.
    pub owner: String,
    pub worktree: Worktree,
    pub made_ms: i64,
    /// A person pressed **Keep**: no reminder that it is stale.
    pub keep: bool,
    /// The pull request opened for it, if any.
    pub pr_url: String,
    /// A merge is under way (set before its rebase starts, cleared when it ended): one found
    /// set at the next merge was cut off by a daemon stop, and its rebase is clibot's to undo.
    pub merging: bool,
    /// When its chats were last reminded that it waits (ms since the epoch).
    pub reminded_ms: i64,
    /// A member's worktree: the member root holding its repository and it, where its git runs
    /// jailed (empty: an admin's, whose git runs on the machine).
    pub jail_dir: std::path::PathBuf,
}

/// The table and its file.
pub struct KeptWorktrees {
    file: JsonFile,
    all: Mutex<BTreeMap<String, Kept>>,
    /// One lock per repository (its top folder).
    repos: Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>,
}

impl KeptWorktrees {
    /// Reads `worktrees.json` in `state_dir`; one that cannot be parsed is set aside (the
    /// worktrees themselves stay on disk: `git worktree list` still shows them).
    pub fn open(state_dir: &Path) -> (KeptWorktrees, Option<String>) {
        let (all, file, warning) = JsonFile::open(
            state_dir,
            "worktrees.json",
            "the worktrees' table",
            "clibot no longer knows the worktrees it made (they stay on disk: `git worktree list` in each repository shows them)",
        );
        (
            KeptWorktrees {
                file,
                all: Mutex::new(all),
                repos: Mutex::default(),
            },
            warning,
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Kept>> {
        self.all.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, session: &str) -> Option<Kept> {
        self.lock().get(session).cloned()
    }

    pub fn all(&self) -> Vec<Kept> {
        self.lock().values().cloned().collect()
    }

    /// Records a worktree made (or taken up again) for `k.session`.
    pub fn insert(&self, k: Kept) {
        let mut all = self.lock();
        all.insert(k.session.clone(), k);
        self.file.save(&*all);
    }

    /// Changes `session`'s entry; false when there is none.
    pub fn update(&self, session: &str, f: impl FnOnce(&mut Kept)) -> bool {
        let mut all = self.lock();
        let Some(k) = all.get_mut(session) else {
            return false;
        };
        f(k);
        self.file.save(&*all);
        true
    }

    /// Forgets `session`'s worktree (it was removed).
    pub fn remove(&self, session: &str) -> Option<Kept> {
        let mut all = self.lock();
        let k = all.remove(session)?;
        self.file.save(&*all);
        Some(k)
    }

    /// The lock of repository `repo`: held while its branches or worktrees change.
    pub fn repo_lock(&self, repo: &Path) -> Arc<tokio::sync::Mutex<()>> {
        self.repos
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(repo.to_path_buf())
            .or_default()
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_outlives_a_restart_and_one_lock_serves_a_repository() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (t, w) = KeptWorktrees::open(dir.path());
        assert!(w.is_none());
        t.insert(Kept {
            session: "a".into(),
            worktree: Worktree {
                repo: "/r".into(),
                branch: "clibot/a".into(),
                ..Default::default()
            },
            ..Default::default()
        });
        assert!(t.update("a", |k| k.keep = true));
        assert!(!t.update("b", |k| k.keep = true));
        let (again, _) = KeptWorktrees::open(dir.path());
        assert!(again.get("a").is_some_and(|k| k.keep));
        assert!(Arc::ptr_eq(
            &again.repo_lock(Path::new("/r")),
            &again.repo_lock(Path::new("/r"))
        ));
        assert!(again.remove("a").is_some());
        assert!(KeptWorktrees::open(dir.path()).0.all().is_empty());
    }
}
