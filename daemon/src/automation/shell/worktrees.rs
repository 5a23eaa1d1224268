//! Other sessions' worktrees: a git command that would remove one, delete or rename its
//! branch, or throw away its uncommitted changes (`reset --hard` there) is kept for a person.
//! Git shares one repository between all its worktrees, so an agent in one worktree can reach
//! another's work without writing a file outside its own folder — which the path rules see.

use std::path::PathBuf;

use super::GuardContext;
use super::parse::Word;
use super::paths;

/// A worktree the session must not reach: another session's, or the repository's own checkout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protected {
    pub path: PathBuf,
    /// Its branch (empty: none to protect).
    pub branch: String,
    /// Whose it is, for the message ("session api", "the repository's own checkout").
    pub whose: String,
}

/// The danger in `git ARGS` for another's worktree, run from any of `cwds`.
pub(crate) fn danger(
    args: &[Word],
    cwds: &[Option<PathBuf>],
    ctx: &GuardContext,
) -> Option<String> {
    if ctx.protected.is_empty() {
        return None;
    }
    // Global options; `-C DIR` moves where the command runs.
    let mut dirs: Vec<Option<PathBuf>> = cwds.to_vec();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let t = a.text.as_str();
        if t == "-C" {
            if let Some(d) = args.get(i + 1) {
                dirs = dirs
                    .iter()
                    .map(|c| paths::resolve(d, c.as_deref(), ctx.home))
                    .collect();
            }
            i += 2;
        } else if matches!(t, "-c" | "--git-dir" | "--work-tree" | "--namespace") {
            i += 2;
        } else if t.starts_with('-') {
            i += 1;
        } else {
            break;
        }
    }
    let sub = args.get(i)?.text.as_str();
    let rest = &args[i + 1..];
    let words: Vec<&str> = rest.iter().map(|w| w.text.as_str()).collect();
    let branch_of = |name: &str| {
        ctx.protected.iter().find(|p| {
            !p.branch.is_empty() && (name == p.branch || name == format!("refs/heads/{}", p.branch))
        })
    };
    // The session's own folder is its own, even where it lies inside a protected one.
    let inside = |p: &Option<PathBuf>| {
        p.as_ref()
            .filter(|p| !p.starts_with(ctx.session_dir))
            .and_then(|p| ctx.protected.iter().find(|w| p.starts_with(&w.path)))
    };
    match sub {
        "worktree" if matches!(words.first(), Some(&("remove" | "move"))) => {
            for w in rest.iter().skip(1).filter(|w| !w.text.starts_with('-')) {
                for d in &dirs {
                    if let Some(p) = inside(&paths::resolve(w, d.as_deref(), ctx.home)) {
                        return Some(format!(
                            "git worktree {} of {}'s worktree",
                            words[0], p.whose
                        ));
                    }
                }
            }
        }
        "branch" => {
            let destructive = words.iter().any(|w| {
                matches!(*w, "--delete" | "--move" | "--force" | "--copy")
                    || (w.starts_with('-')
                        && !w.starts_with("--")
                        && w.contains(['d', 'D', 'm', 'M', 'f']))
            });
            if destructive && let Some(p) = words.iter().find_map(|w| branch_of(w)) {
                return Some(format!(
                    "git branch deletes or moves {}'s branch {}",
                    p.whose, p.branch
                ));
            }
        }
        "update-ref" if words.contains(&"-d") => {
            if let Some(p) = words.iter().find_map(|w| branch_of(w)) {
                return Some(format!(
                    "git update-ref -d of {}'s branch {}",
                    p.whose, p.branch
                ));
            }
        }
        "reset" | "checkout" | "restore" | "clean" | "stash" => {
            let discards = match sub {
                "reset" => words.contains(&"--hard"),
                "clean" => words.iter().any(|w| w.starts_with('-') && w.contains('f')),
                "stash" => words
                    .first()
                    .is_some_and(|w| matches!(*w, "drop" | "clear")),
                // `checkout -- FILE`, `checkout .`, `restore FILE`: the changes there go.
                _ => true,
            };
            if discards && let Some(p) = dirs.iter().find_map(inside) {
                return Some(format!(
                    "git {sub} in {}'s worktree (its uncommitted work would go)",
                    p.whose
                ));
            }
        }
        _ => {}
    }
    None
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::automation::shell::guard_command;

    fn guarded(cmd: &str) -> Option<String> {
        let protected = [
            Protected {
                path: PathBuf::from("/data/wt/repo-1/api"),
                branch: "clibot/api".into(),
                whose: "session api".into(),
            },
            Protected {
                path: PathBuf::from("/home/u/repo"),
                branch: String::new(),
                whose: "the repository's own checkout".into(),
            },
        ];
        let ctx = GuardContext {
            session_dir: Path::new("/data/wt/repo-1/web"),
            home: Path::new("/home/u"),
            secret_paths: &[],
            allow_paths: &[],
            protected: &protected,
        };
        guard_command(cmd, &ctx)
    }

    #[test]
    fn another_sessions_worktree_and_branch_are_kept_for_a_person() {
        for cmd in [
            "git worktree remove --force /data/wt/repo-1/api",
            "git worktree remove ../api",
            "git branch -D clibot/api",
            "git branch --delete --force clibot/api",
            "git branch -m clibot/api old",
            "git update-ref -d refs/heads/clibot/api",
            "git -C ../api reset --hard",
            "cd /data/wt/repo-1/api && git reset --hard HEAD~1",
            "git -C /home/u/repo checkout -- .",
            "git -C /home/u/repo clean -fdx",
            "git -C ../api stash clear",
        ] {
            assert!(guarded(cmd).is_some(), "{cmd}");
        }
        let why = guarded("git branch -D clibot/api").unwrap_or_default();
        assert!(
            why.contains("session api") && why.contains("clibot/api"),
            "{why}"
        );
    }

    #[test]
    fn the_sessions_own_worktree_and_reading_others_are_free() {
        for cmd in [
            "git reset --hard",
            "git branch -D clibot/web",
            "git checkout -- src/main.rs",
            "git worktree list",
            "git branch --list clibot/api",
            "git -C ../api log --oneline",
            "git diff clibot/api",
            "git -C /home/u/repo status",
        ] {
            assert_eq!(guarded(cmd), None, "{cmd}");
        }
    }
}
