//! Finishing a worktree's work with git: its diff, a merge into its target that never switches
//! or overwrites the checkout the user works in, a push for a pull request, and removal —
//! only of what holds no work, unless a person confirmed it.
//!
//! Every call goes through safe git. A rebase makes commits, so it also signs nothing (the
//! repository's `gpg.program` would run), opens no editor, updates no other branch, and is
//! refused where the repository names a merge driver (a program git would run on a conflict).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::Worktree;
use super::git::run;

/// The largest patch sent whole; a longer one is cut and says so.
pub const MAX_PATCH: usize = 3 << 20;
/// How long a rebase or checkout may take.
const LIMIT: Duration = Duration::from_secs(300);

/// A worktree's work against its base.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diff {
    /// `git diff --stat` from where it left its base to its files now (commits and uncommitted
    /// changes of tracked files).
    pub stat: String,
    /// Files git does not track yet (they are in no commit: a discard loses them).
    pub untracked: Vec<String>,
    pub patch: Vec<u8>,
    /// The patch was cut at [`MAX_PATCH`].
    pub cut: bool,
}

/// What a merge did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merged {
    /// `commits` of the branch are now on `target`; `checkout` is the folder where `target`
    /// is checked out and was brought forward (None: it is checked out nowhere).
    Done {
        commits: u32,
        target: String,
        checkout: Option<PathBuf>,
    },
    /// The branch has nothing `target` lacks.
    Nothing { target: String },
    /// Rebasing on `target` stopped on these files; the rebase was undone.
    Conflict { target: String, files: Vec<String> },
}

/// The folder is gone: what to do.
fn missing(w: &Worktree) -> String {
    format!(
        "the worktree's folder {} is gone (removed by hand?); its branch {} is kept: discard it to forget both, or `git worktree prune` in {} and check the branch out yourself",
        w.path.display(),
        w.branch,
        w.repo.display()
    )
}

/// The commit where the worktree's branch left its base (the base's name if it still exists,
/// else the commit it was made from).
async fn fork_point(w: &Worktree) -> Result<String, String> {
    let base = if run(&w.repo, &["rev-parse", "--verify", "--quiet", &w.base])
        .await
        .is_ok()
    {
        w.base.clone()
    } else {
        w.base_commit.clone()
    };
    run(&w.path, &["merge-base", &base, "HEAD"])
        .await
        .map_err(|e| format!("cannot find where {} left {base}: {e}", w.branch))
}

/// The worktree's diff against its base; with `file`, that file's only.
pub async fn diff(w: &Worktree, file: &str) -> Result<Diff, String> {
    if !w.path.is_dir() {
        return Err(missing(w));
    }
    if super::runner::defines_filters(&w.repo).await {
        return Err(format!(
            "{} defines git filters, which reading its files would run: look at the diff yourself (git diff in {})",
            w.repo.display(),
            w.path.display()
        ));
    }
    if file.starts_with('-') {
        return Err(format!("{file:?} is not a file of the worktree"));
    }
    let from = fork_point(w).await?;
    let stat = run(
        &w.path,
        &["diff", "--stat", "--no-ext-diff", "--no-textconv", &from],
    )
    .await?;
    let untracked = run(&w.path, &["ls-files", "--others", "--exclude-standard"])
        .await?
        .lines()
        .map(str::to_string)
        .collect();
    let mut args = vec![
        "diff",
        "--no-ext-diff",
        "--no-textconv",
        "--no-color",
        &from,
    ];
    if !file.is_empty() {
        args.extend(["--", file]);
    }
    let out = super::runner::git(&w.path, &args, &[], LIMIT).await?;
    if !out.status.success() {
        return Err(format!(
            "git diff: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let mut patch = out.stdout;
    let cut = patch.len() > MAX_PATCH;
    patch.truncate(MAX_PATCH);
    Ok(Diff {
        stat,
        untracked,
        patch,
        cut,
    })
}

/// The committer a rebase names: the user's own git identity (their global config, which
/// is theirs, not the repository's), else the author of the branch's last commit.
async fn committer(w: &Worktree) -> Vec<(&'static str, String)> {
    let global = |key: &'static str| async move {
        let out = tokio::process::Command::new("git")
            .args(["config", "--global", "--get", key])
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .ok()?;
        let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
        (out.status.success() && !v.is_empty()).then_some(v)
    };
    // A member's rebase is not signed with the owner's name.
    let own = |key| async move {
        if super::runner::jailed() {
            None
        } else {
            global(key).await
        }
    };
    let (name, email) = match (own("user.name").await, own("user.email").await) {
        (Some(n), Some(e)) => (n, e),
        _ => {
            let who = run(&w.path, &["log", "-1", "--format=%an%n%ae", "HEAD"])
                .await
                .unwrap_or_default();
            let mut l = who.lines().map(str::to_string);
            (
                l.next().unwrap_or_else(|| "clibot".into()),
                l.next().unwrap_or_else(|| "clibot@localhost".into()),
            )
        }
    };
    vec![("GIT_COMMITTER_NAME", name), ("GIT_COMMITTER_EMAIL", email)]
}

/// Runs a git command that changes commits or files: safe git, no signing, no editor, no
/// other branch moved; what git said on failure, whole.
async fn change(dir: &Path, env: &[(&str, String)], args: &[&str]) -> Result<String, String> {
    let mut all = vec![
        "-c",
        "commit.gpgSign=false",
        "-c",
        "rebase.updateRefs=false",
        "-c",
        "rebase.autoStash=false",
        "-c",
        "merge.autoStash=false",
    ];
    all.extend_from_slice(args);
    let mut env = env.to_vec();
    env.push(("GIT_EDITOR", "true".into()));
    env.push(("GIT_SEQUENCE_EDITOR", "true".into()));
    let out = super::runner::git(dir, &all, &env, LIMIT).await?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        let mut said = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if said.is_empty() {
            said = String::from_utf8_lossy(&out.stdout).trim().to_string();
        }
        Err(said)
    }
}

/// Whether the repository names a merge driver (`merge.*.driver`): a rebase would run it.
async fn defines_merge_drivers(repo: &Path) -> bool {
    // In a member's jail a driver runs with the member's rights: nothing to refuse.
    if super::runner::jailed() {
        return false;
    }
    run(
        repo,
        &[
            "config",
            "--includes",
            "--name-only",
            "--get-regexp",
            r"^merge\..*\.driver$",
        ],
    )
    .await
    .is_ok_and(|s| !s.trim().is_empty())
}

/// Tracked files changed and not committed in `dir` (untracked ones do not stop a merge).
async fn uncommitted(dir: &Path) -> Result<Vec<String>, String> {
    Ok(run(
        dir,
        &[
            "status",
            "--porcelain",
            "--untracked-files=no",
            "--ignore-submodules=all",
        ],
    )
    .await?
    .lines()
    .filter_map(|l| l.get(3..))
    .map(str::to_string)
    .collect())
}

/// Whether a rebase is under way in the worktree.
pub async fn rebasing(w: &Worktree) -> bool {
    for dir in ["rebase-merge", "rebase-apply"] {
        let Ok(p) = run(&w.path, &["rev-parse", "--git-path", dir]).await else {
            continue;
        };
        let p = if Path::new(&p).is_absolute() {
            PathBuf::from(p)
        } else {
            w.path.join(p)
        };
        if p.is_dir() {
            return true;
        }
    }
    false
}

/// A rebase under way: undone when it is clibot's own, left half-done by a daemon stopped in
/// the middle of a merge (`ours`); otherwise someone's work in progress, which is not touched.
async fn settle_rebase(w: &Worktree, ours: bool) -> Result<(), String> {
    if !rebasing(w).await {
        return Ok(());
    }
    if !ours {
        return Err(format!(
            "a rebase is under way in {} (the agent's, or yours): finish it (git rebase --continue) or undo it (git rebase --abort), then merge",
            w.path.display()
        ));
    }
    tracing::warn!(branch = %w.branch, "a merge's rebase left half-done is undone");
    change(&w.path, &[], &["rebase", "--abort"])
        .await
        .map(drop)
        .map_err(|e| {
            format!(
                "cannot undo the rebase a stopped merge left in {}: {e}",
                w.path.display()
            )
        })
}

/// The folder where `branch` is checked out, if any (the user's checkout, another worktree).
async fn checked_out_at(repo: &Path, branch: &str) -> Option<PathBuf> {
    let list = run(repo, &["worktree", "list", "--porcelain"]).await.ok()?;
    let mut path = None;
    for line in list.lines() {
        if let Some(p) = line.strip_prefix("worktree ") {
            path = Some(PathBuf::from(p));
        } else if line == format!("branch refs/heads/{branch}") {
            return path;
        }
    }
    None
}

/// Merges the worktree's branch into `target` (a local branch): rebased on it in the worktree,
/// then `target` fast-forwarded — by `update-ref` with its old value checked when it is
/// checked out nowhere, else by a fast-forward in the folder where it is, which git refuses
/// rather than overwrite a change there. On a conflict the rebase is undone and the files named.
/// `left_ours`: a merge of clibot's was under way when the daemon stopped (its rebase, if
/// still there, is undone first).
pub async fn merge(w: &Worktree, target: &str, left_ours: bool) -> Result<Merged, String> {
    if !w.path.is_dir() {
        return Err(missing(w));
    }
    if target.starts_with('-')
        || run(
            &w.repo,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("refs/heads/{target}"),
            ],
        )
        .await
        .is_err()
    {
        return Err(format!(
            "{target:?} is not a branch of {}: name the branch to merge into (clibotctl worktree merge NAME --into BRANCH)",
            w.repo.display()
        ));
    }
    if target == w.branch {
        return Err(format!(
            "{target} is the worktree's own branch: name the branch to merge into"
        ));
    }
    if super::runner::defines_filters(&w.repo).await || defines_merge_drivers(&w.repo).await {
        return Err(format!(
            "{} names filter or merge-driver programs, which a merge would run: merge {} yourself",
            w.repo.display(),
            w.branch
        ));
    }
    settle_rebase(w, left_ours).await?;
    let head = run(&w.path, &["symbolic-ref", "--quiet", "--short", "HEAD"])
        .await
        .unwrap_or_default();
    if head != w.branch {
        return Err(format!(
            "the worktree {} is not on its branch {} (HEAD: {}): check {} out there again, then merge",
            w.path.display(),
            w.branch,
            if head.is_empty() { "detached" } else { &head },
            w.branch
        ));
    }
    let dirty = uncommitted(&w.path).await?;
    if !dirty.is_empty() {
        return Err(format!(
            "{} has changes not committed ({}): ask the agent to commit them (or commit them in {}), then merge",
            w.branch,
            dirty.join(", "),
            w.path.display()
        ));
    }
    let range = format!("refs/heads/{target}..HEAD");
    let commits: u32 = run(&w.path, &["rev-list", "--count", &range])
        .await?
        .trim()
        .parse()
        .unwrap_or(0);
    if commits == 0 {
        return Ok(Merged::Nothing {
            target: target.to_string(),
        });
    }
    let who = committer(w).await;
    if let Err(said) = change(&w.path, &who, &["rebase", "--quiet", target]).await {
        let files: Vec<String> = run(&w.path, &["diff", "--name-only", "--diff-filter=U"])
            .await
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect();
        let _ = change(&w.path, &[], &["rebase", "--abort"]).await;
        if files.is_empty() {
            return Err(format!("rebasing {} on {target} failed: {said}", w.branch));
        }
        return Ok(Merged::Conflict {
            target: target.to_string(),
            files,
        });
    }
    let new = run(&w.path, &["rev-parse", "HEAD"]).await?;
    let old = run(&w.repo, &["rev-parse", &format!("refs/heads/{target}")]).await?;
    // The target may have moved while the branch was rebased (a commit of the user's): then
    // the rebased branch no longer contains it, and moving the target would drop it.
    if run(&w.repo, &["merge-base", "--is-ancestor", &old, &new])
        .await
        .is_err()
    {
        return Err(format!(
            "{target} moved while {} was being rebased on it: merge again",
            w.branch
        ));
    }
    let checkout = checked_out_at(&w.repo, target).await;
    match &checkout {
        None => {
            let msg = format!("clibot: merge {}", w.branch);
            let r = format!("refs/heads/{target}");
            change(&w.repo, &[], &["update-ref", "-m", &msg, &r, &new, &old])
                .await
                .map_err(|e| format!("{target} moved while merging ({e}): merge again"))?;
        }
        Some(dir) => {
            change(dir, &who, &["merge", "--ff-only", "--quiet", &new])
                .await
                .map_err(|said| {
                    format!(
                        "{} is rebased on {target}, but {target} is checked out in {} and git would not bring it forward there: {}. Commit or stash what is in the way there, then merge again",
                        w.branch,
                        dir.display(),
                        said.lines().take(4).collect::<Vec<_>>().join(" ")
                    )
                })?;
        }
    }
    Ok(Merged::Done {
        commits,
        target: target.to_string(),
        checkout,
    })
}

/// The branch's commits since it left its base, one `- subject` line each (at most 50).
pub async fn commits(w: &Worktree) -> String {
    let Ok(from) = fork_point(w).await else {
        return String::new();
    };
    run(
        &w.repo,
        &[
            "log",
            "--max-count=50",
            "--format=- %s",
            &format!("{from}..refs/heads/{}", w.branch),
        ],
    )
    .await
    .unwrap_or_default()
}

/// What keeps a worktree from being removed without a person's word: files not committed
/// (untracked ones count: a removal loses them) and commits neither on its base nor pushed.
/// Empty when nothing would be lost.
pub async fn unsaved_work(w: &Worktree) -> Result<Vec<String>, String> {
    let mut why = Vec::new();
    if w.path.is_dir() {
        let dirty = run(
            &w.path,
            &["status", "--porcelain", "--ignore-submodules=all"],
        )
        .await?;
        let n = dirty.lines().filter(|l| !l.trim().is_empty()).count();
        if n > 0 {
            why.push(format!("{n} file(s) not committed"));
        }
    }
    let branch = format!("refs/heads/{}", w.branch);
    if run(&w.repo, &["rev-parse", "--verify", "--quiet", &branch])
        .await
        .is_err()
    {
        return Ok(why);
    }
    // Commits on the branch that no other branch and no remote-tracking ref has.
    let others = format!("--exclude={}", w.branch);
    let lost: u32 = run(
        &w.repo,
        &[
            "rev-list",
            "--count",
            &branch,
            "--not",
            &others,
            "--branches",
            "--remotes",
        ],
    )
    .await?
    .trim()
    .parse()
    .unwrap_or(0);
    if lost > 0 {
        why.push(format!("{lost} commit(s) neither merged nor pushed"));
    }
    Ok(why)
}

/// Removes the worktree's folder and its branch (the caller made sure nothing is lost, or a
/// person confirmed). A folder removed by hand is pruned from git's list.
pub async fn remove(w: &Worktree) -> Result<(), String> {
    if w.path.is_dir() {
        let p = w.path.display().to_string();
        run(&w.repo, &["worktree", "remove", "--force", "--force", &p])
            .await
            .map_err(|e| format!("git worktree remove {p}: {e}"))?;
    } else {
        let _ = run(&w.repo, &["worktree", "prune"]).await;
    }
    let exists = run(
        &w.repo,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/heads/{}", w.branch),
        ],
    )
    .await
    .is_ok();
    if exists {
        run(&w.repo, &["branch", "-D", &w.branch])
            .await
            .map_err(|e| format!("git branch -D {}: {e}", w.branch))?;
    }
    Ok(())
}

/// Pushes the worktree's branch to `origin` for a pull request; refused where the
/// repository's own config names a program a push would run.
pub async fn push(w: &Worktree) -> Result<(), String> {
    let risky = run(
        &w.repo,
        &[
            "config",
            "--includes",
            "--local",
            "--name-only",
            "--get-regexp",
            r"^(core\.sshcommand|core\.askpass|credential\..*|remote\..*\.(receivepack|uploadpack|proxy)|url\..*|http\..*)$",
        ],
    )
    .await
    .unwrap_or_default();
    if let Some(key) = risky.lines().find(|l| !l.trim().is_empty()) {
        return Err(format!(
            "{}'s own config sets {key}, which a push would use: push {} yourself (git push -u origin {}), then open the pull request again",
            w.repo.display(),
            w.branch,
            w.branch
        ));
    }
    // The user's own config (credentials, ssh) applies; the repository's hooks do not.
    let out = tokio::time::timeout(
        LIMIT,
        tokio::process::Command::new("git")
            .args([
                "-c",
                "core.hooksPath=/dev/null",
                "-c",
                "core.fsmonitor=false",
                "-C",
            ])
            .arg(&w.path)
            .args(["push", "--quiet", "--set-upstream", "origin", &w.branch])
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .map_err(|_| "git push took too long".to_string())?
    .map_err(|e| format!("git cannot run ({e})"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "git push origin {}: {}",
            w.branch,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=T", "-c", "user.email=t@example.com"])
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .expect("git");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// A repository on `main` and a worktree on `clibot/w`, both changing `f` differently.
    fn conflicting(t: &Path) -> Worktree {
        let repo = t.join("repo");
        std::fs::create_dir_all(&repo).expect("mkdir");
        git(&repo, &["init", "-q", "-b", "main"]);
        std::fs::write(repo.join("f"), "base\n").expect("write");
        git(&repo, &["add", "f"]);
        git(&repo, &["commit", "-qm", "base"]);
        let path = t.join("wt");
        git(
            &repo,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                "clibot/w",
                &path.display().to_string(),
            ],
        );
        std::fs::write(path.join("f"), "worktree\n").expect("write");
        git(&path, &["commit", "-qam", "w"]);
        std::fs::write(repo.join("f"), "main\n").expect("write");
        git(&repo, &["commit", "-qam", "main"]);
        Worktree {
            repo: repo.clone(),
            path,
            branch: "clibot/w".into(),
            base: "main".into(),
            base_commit: String::new(),
        }
    }

    #[tokio::test]
    async fn a_rebase_left_by_a_stopped_merge_is_undone_and_anothers_is_not_touched() {
        let t = tempfile::tempdir().expect("tempdir");
        let w = conflicting(t.path());
        let tip = git(&w.path, &["rev-parse", "HEAD"]);
        // A rebase stopped on the conflict, as a daemon killed mid-merge (or the agent) leaves it.
        git(&w.path, &["rebase", "main"]);
        assert!(rebasing(&w).await);
        let e = merge(&w, "main", false).await.expect_err("not ours");
        assert!(e.contains("a rebase is under way"), "{e}");
        assert!(rebasing(&w).await, "someone else's rebase is left as it is");
        let m = merge(&w, "main", true)
            .await
            .expect("ours is undone, then merged again");
        assert_eq!(
            m,
            Merged::Conflict {
                target: "main".into(),
                files: vec!["f".into()]
            }
        );
        assert!(!rebasing(&w).await);
        assert_eq!(git(&w.path, &["rev-parse", "HEAD"]), tip);
        assert_eq!(
            git(&w.path, &["symbolic-ref", "--short", "HEAD"]),
            "clibot/w"
        );
    }

    #[tokio::test]
    async fn nothing_is_removed_while_it_holds_work() {
        let t = tempfile::tempdir().expect("tempdir");
        let w = conflicting(t.path());
        let why = unsaved_work(&w).await.expect("reads");
        assert_eq!(why, ["1 commit(s) neither merged nor pushed"]);
        std::fs::write(w.path.join("new"), "x").expect("write");
        let why = unsaved_work(&w).await.expect("reads");
        assert_eq!(why.len(), 2, "{why:?}");
    }
}
