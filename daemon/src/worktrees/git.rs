//! The git calls a worktree needs, each through clibot's safe git (or a member's jail) and with a time limit; a
//! failure carries what git said, for a message that names what to do.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::runner::defines_filters;

/// How long one git call may take (a checkout of a large repository is the slow one).
const LIMIT: Duration = Duration::from_secs(120);

/// Runs git in `dir` (safe git, or the member's jail: [`super::runner`]); its standard output,
/// or what it said on failure.
pub(super) async fn run(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = super::runner::git(dir, args, &[], LIMIT).await?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_string())
    } else {
        let said = String::from_utf8_lossy(&out.stderr);
        Err(said
            .trim()
            .lines()
            .last()
            .unwrap_or("git failed")
            .to_string())
    }
}

/// The top folder of the repository `dir` is in.
pub async fn toplevel(dir: &Path) -> Result<PathBuf, String> {
    let top = run(dir, &["rev-parse", "--show-toplevel"])
        .await
        .map_err(|_| {
            format!(
                "{} is not in a git repository: start it without --worktree, or `git init` there first",
                dir.display()
            )
        })?;
    Ok(PathBuf::from(top))
}

/// Refuses a repository whose config names filter programs: checking files out would run them.
pub async fn refuse_filters(repo: &Path) -> Result<(), String> {
    if defines_filters(repo).await {
        return Err(format!(
            "{} defines git filters (filter.* in its config), which a checkout would run: clibot makes no worktree there; make one yourself (git worktree add) and start the session in it",
            repo.display()
        ));
    }
    Ok(())
}

/// The commit `rev` names, and what to call the base: `rev` itself, or the branch `HEAD` is on
/// (the commit, when `HEAD` is detached).
pub async fn base_of(repo: &Path, rev: &str) -> Result<(String, String), String> {
    let wanted = if rev.is_empty() { "HEAD" } else { rev };
    if wanted.starts_with('-') {
        return Err(format!("--from {wanted:?}: name a branch, tag or commit"));
    }
    let commit = run(
        repo,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{wanted}^{{commit}}"),
        ],
    )
    .await
    .ok()
    .filter(|c| !c.is_empty())
    .ok_or_else(|| {
        if rev.is_empty() {
            format!(
                "{} has no commit yet: commit once, then start the session",
                repo.display()
            )
        } else {
            format!(
                "--from {rev:?}: no such branch, tag or commit in {}",
                repo.display()
            )
        }
    })?;
    let name = if rev.is_empty() {
        run(repo, &["symbolic-ref", "--quiet", "--short", "HEAD"])
            .await
            .ok()
            .filter(|b| !b.is_empty())
            .unwrap_or_else(|| commit.clone())
    } else {
        rev.to_string()
    };
    Ok((name, commit))
}

/// Refuses a branch name git would not take, or one that exists.
pub async fn check_new_branch(repo: &Path, branch: &str) -> Result<(), String> {
    if branch.starts_with('-')
        || run(repo, &["check-ref-format", "--branch", branch])
            .await
            .is_err()
    {
        return Err(format!(
            "--worktree {branch:?} is not a branch name git takes"
        ));
    }
    let exists = run(
        repo,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/heads/{branch}"),
        ],
    )
    .await
    .is_ok_and(|c| !c.is_empty());
    if exists {
        return Err(format!(
            "branch {branch} exists in {}: name another with --worktree BRANCH (a worktree gets a new branch, so no work on an existing one is touched)",
            repo.display()
        ));
    }
    Ok(())
}

/// `git worktree add -b BRANCH PATH COMMIT`.
pub async fn add(repo: &Path, path: &Path, branch: &str, commit: &str) -> Result<(), String> {
    let p = path.display().to_string();
    run(
        repo,
        &["worktree", "add", "--quiet", "-b", branch, &p, commit],
    )
    .await
    .map(drop)
    .map_err(|e| format!("git worktree add: {e}"))
}

/// Removes a worktree made a moment ago, and its branch, when the session could not start in
/// it (nothing was done there yet).
pub async fn undo_add(repo: &Path, path: &Path, branch: &str) {
    let p = path.display().to_string();
    let _ = run(repo, &["worktree", "remove", "--force", &p]).await;
    let _ = run(repo, &["branch", "-D", branch]).await;
}

/// How the worktree at `path` on `branch` stands against `base`.
pub async fn status(repo: &Path, path: &Path, branch: &str, base: &str) -> super::WorktreeStatus {
    if !path.is_dir() {
        return super::WorktreeStatus {
            missing: true,
            ..Default::default()
        };
    }
    // `status` reads files, which runs filters: none since the worktree was made, or no count.
    let dirty = if defines_filters(repo).await {
        0
    } else {
        run(path, &["status", "--porcelain", "--ignore-submodules=all"])
            .await
            .map(|s| s.lines().filter(|l| !l.trim().is_empty()).count() as u32)
            .unwrap_or(0)
    };
    let (behind, ahead) = run(
        repo,
        &[
            "rev-list",
            "--left-right",
            "--count",
            &format!("{base}...refs/heads/{branch}"),
        ],
    )
    .await
    .ok()
    .and_then(|s| {
        let mut n = s.split_whitespace().map(|x| x.parse::<u32>().ok());
        Some((n.next()??, n.next()??))
    })
    .unwrap_or((0, 0));
    super::WorktreeStatus {
        dirty,
        ahead,
        behind,
        missing: false,
    }
}
