//! A git worktree per session (`spawn --worktree`): two sessions on one repository each work on
//! a branch of their own, in a folder of their own outside the repository, and the checkout the
//! user works in is never touched. This module owns what a worktree is and the git calls that
//! make and read one; `session/worktree.rs` drives them for a session.
//!
//! Every git call goes through clibot's safe git (`safe_git`): no hooks, no
//! fsmonitor, no pager; a repository that defines filter drivers is refused, because checking
//! files out would run the programs they name.

pub mod finish;
pub mod git;
pub mod kept;
pub mod runner;
pub mod summary;

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// `[worktrees]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorktreesConfig {
    /// Where worktrees are made (`REPO-ID/NAME` below it); default: `worktrees` in clibot's
    /// data directory. `~/` is the home directory.
    pub dir: Option<PathBuf>,
    /// Shell commands run in a new worktree, in order, before its session starts (`npm ci`,
    /// `cp .env.example .env`); one that fails or takes over 10 minutes fails the spawn.
    pub setup: Vec<String>,
    /// After each turn of a worktree session, its chats hear which files the turn changed.
    pub summary: bool,
}

/// A session's worktree: kept in its record, so defined with the record.
pub use crate::model::Worktree;

/// What `spawn --worktree [BRANCH] [--from REF]` asks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorktreeAsk {
    /// Empty: `clibot/NAME`.
    pub branch: String,
    /// Empty: the commit `HEAD` is on.
    pub from: String,
}

/// How a worktree stands against its base, read when asked (`show`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorktreeStatus {
    /// Files changed and not committed (untracked ones included).
    pub dirty: u32,
    /// Commits on its branch not on its base.
    pub ahead: u32,
    /// Commits on its base not on its branch.
    pub behind: u32,
    /// Its folder is gone (removed by hand): what to do is said instead.
    pub missing: bool,
}

/// `NAME-HASH`: the repository's folder name and 8 hex digits of its path, so two
/// repositories of one name get folders of their own.
pub fn repo_id(repo: &Path) -> String {
    let name: String = repo
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "repo".into())
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    // FNV-1a: stable across releases, which a folder name must be.
    let mut h: u32 = 0x811c_9dc5;
    for b in repo.as_os_str().as_encoded_bytes() {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("{name}-{h:08x}")
}

/// The files `.worktreeinclude` in `repo` lists to copy into a new worktree (`.env`,
/// `config/local.toml`): relative paths, one per line, `#` comments; none that leaves the
/// repository.
pub fn includes(text: &str) -> Vec<PathBuf> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(PathBuf::from)
        .filter(|p| {
            p.is_relative()
                && p.components()
                    .all(|c| matches!(c, std::path::Component::Normal(_)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repository_gets_a_folder_by_its_name_and_path() {
        let a = repo_id(Path::new("/home/me/src/api"));
        let b = repo_id(Path::new("/home/me/old/api"));
        assert!(
            a.starts_with("api-") && b.starts_with("api-") && a != b,
            "{a} {b}"
        );
        assert_eq!(a, repo_id(Path::new("/home/me/src/api")));
        assert!(repo_id(Path::new("/x/my repo!")).starts_with("my_repo_-"));
    }

    #[test]
    fn includes_stay_inside_the_repository() {
        assert_eq!(
            includes("# secrets\n.env\n\nconfig/local.toml\n../up\n/etc/passwd\na/../b\n"),
            [PathBuf::from(".env"), PathBuf::from("config/local.toml")]
        );
    }
}
