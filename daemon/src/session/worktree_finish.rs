//! Finishing a session's worktree, from `clibotctl worktree …` or a card's buttons: **Diff**,
//! **Merge**, **Open PR**, **Keep**, **Discard** (only with the session's name typed back),
//! **Ask the agent to resolve** after a conflict, and the clean-up that removes only what
//! holds no work. Each is done under its repository's lock and audited by the RPC layer.
//!
//! Who may: the machine's user, admins, and the chat user who owned the session — a share is
//! not enough (a merge moves the user's branches).

use std::time::Duration;

use tracing::{info, warn};

use crate::core::Daemon;
use crate::error::CoreError;
use crate::model::Actor;
use crate::worktrees::finish::{self, Diff, Merged};
use crate::worktrees::kept::Kept;

/// How often the clean-up runs by itself, and how often a stale worktree's chats hear of it.
pub const CLEAN_EVERY: Duration = Duration::from_secs(24 * 3600);
/// The first clean-up after the daemon starts (not at once: sessions are being re-adopted).
const FIRST_CLEAN: Duration = Duration::from_secs(600);

/// What a person asks of a worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorktreeOp {
    /// Its diff; with a file, that file's.
    Diff {
        file: String,
    },
    /// Into its base branch, or `into`.
    Merge {
        into: String,
    },
    /// A pull request with `gh`.
    Pr,
    Keep,
    /// Removes it and its branch: `confirm` must be the session's name.
    Discard {
        confirm: String,
    },
    /// Types into the session that it should resolve the conflicts of a merge into `into`.
    Resolve {
        into: String,
    },
}

/// What it did: the words for the person, and for a diff its patch.
#[derive(Debug, Clone, Default)]
pub struct WorktreeDone {
    pub text: String,
    pub patch: Vec<u8>,
    /// A merge stopped on these files.
    pub conflicts: Vec<String>,
}

/// A clean-up's result.
#[derive(Debug, Clone, Default)]
pub struct Pruned {
    /// Sessions whose worktrees were removed.
    pub removed: Vec<String>,
    /// Those kept, each with why.
    pub stale: Vec<(String, String)>,
}

fn err(s: impl Into<String>) -> CoreError {
    CoreError::Worktree(s.into())
}

impl Daemon {
    /// Session `name`'s worktree, if `actor` may finish it.
    pub(crate) fn worktree_for(&self, actor: &Actor, name: &str) -> Result<Kept, CoreError> {
        let Some(k) = self.kept_worktrees().get(name) else {
            if self.get(name).is_ok_and(|r| self.may_use(actor, &r)) {
                return Err(err(format!(
                    "{name} works in no worktree of clibot's (it was not started with --worktree)"
                )));
            }
            return Err(CoreError::NotYours(name.to_string()));
        };
        if actor.is_local() || self.is_admin(actor) || k.owner == actor.key() {
            Ok(k)
        } else {
            Err(CoreError::NotYours(name.to_string()))
        }
    }

    /// The kept worktrees `actor` may finish, each with whether its session runs.
    pub fn list_worktrees(&self, actor: &Actor) -> Vec<(Kept, bool)> {
        let admin = actor.is_local() || self.is_admin(actor);
        self.kept_worktrees()
            .all()
            .into_iter()
            .filter(|k| admin || k.owner == actor.key())
            .map(|k| {
                let running = self.runs(&k.session);
                (k, running)
            })
            .collect()
    }

    /// What session `name`'s git commands must not reach without a person: the other
    /// sessions' worktrees and branches, and — for a session in a worktree — its repository's
    /// own checkout, where the user works.
    pub(crate) fn protected_worktrees(
        &self,
        name: &str,
    ) -> Vec<crate::automation::shell::Protected> {
        use crate::automation::shell::Protected;
        let all = self.kept_worktrees().all();
        let mut out: Vec<Protected> = all
            .iter()
            .filter(|k| k.session != name)
            .map(|k| Protected {
                path: k.worktree.path.clone(),
                branch: k.worktree.branch.clone(),
                whose: format!("session {}", k.session),
            })
            .collect();
        if let Some(own) = all.iter().find(|k| k.session == name) {
            out.push(Protected {
                path: own.worktree.repo.clone(),
                branch: String::new(),
                whose: "the repository's own checkout".into(),
            });
        }
        out
    }

    /// Whether session `name` runs now.
    fn runs(&self, name: &str) -> bool {
        self.get(name).is_ok_and(|r| !r.state.is_exited())
    }

    /// Does `op` on session `name`'s worktree.
    pub async fn worktree_op(
        &self,
        actor: &Actor,
        name: &str,
        op: WorktreeOp,
    ) -> Result<WorktreeDone, CoreError> {
        let k = self.worktree_for(actor, name)?;
        let lock = self.kept_worktrees().repo_lock(&k.worktree.repo);
        let _held = lock.lock().await;
        self.in_worktree_jail(&k, self.worktree_op_in(name, &k, op))
            .await
    }

    /// [`Daemon::worktree_op`], its repository's lock held, where its git runs.
    async fn worktree_op_in(
        &self,
        name: &str,
        k: &Kept,
        op: WorktreeOp,
    ) -> Result<WorktreeDone, CoreError> {
        let w = k.worktree.clone();
        let text = match op {
            WorktreeOp::Diff { file } => {
                let d = finish::diff(&w, &file).await.map_err(err)?;
                return Ok(WorktreeDone {
                    text: diff_words(name, &w.branch, &d),
                    patch: d.patch,
                    ..Default::default()
                });
            }
            WorktreeOp::Merge { into } => {
                let target = if into.is_empty() {
                    w.base.clone()
                } else {
                    into
                };
                let left_ours = k.merging;
                self.kept_worktrees().update(name, |k| k.merging = true);
                let merged = finish::merge(&w, &target, left_ours).await;
                self.kept_worktrees().update(name, |k| k.merging = false);
                match merged.map_err(err)? {
                    Merged::Nothing { target } => {
                        format!("{} has nothing that {target} lacks", w.branch)
                    }
                    Merged::Done {
                        commits,
                        target,
                        checkout,
                    } => {
                        info!(session = %name, %target, commits, "worktree merged");
                        let at = checkout.map_or_else(
                            || " (checked out nowhere: your checkout was not touched)".into(),
                            |d| format!(" and brought forward in {}", d.display()),
                        );
                        format!(
                            "✅ merged {commits} commit(s) of {} into {target}{at}. The worktree stays while {name} runs; once it stops, the clean-up removes it (or Discard)",
                            w.branch
                        )
                    }
                    Merged::Conflict { target, files } => {
                        return Ok(WorktreeDone {
                            text: format!(
                                "⚠️ {} does not rebase cleanly on {target}: conflicts in {}. Nothing was changed. Ask the agent to resolve them, then merge again",
                                w.branch,
                                files.join(", ")
                            ),
                            conflicts: files,
                            ..Default::default()
                        });
                    }
                }
            }
            WorktreeOp::Pr if !k.jail_dir.as_os_str().is_empty() => {
                return Err(err(
                    "a pull request is pushed with the machine owner's credentials: an admin opens it (clibotctl worktree pr NAME)",
                ));
            }
            WorktreeOp::Pr => {
                let url = self.open_pr(name, k).await?;
                self.kept_worktrees()
                    .update(name, |k| k.pr_url = url.clone());
                format!("🔀 pull request for {}: {url}", w.branch)
            }
            WorktreeOp::Keep => {
                self.kept_worktrees().update(name, |k| k.keep = true);
                format!(
                    "kept: {} on {}. The clean-up never removes work that is not merged or pushed, and no longer reminds you of this one",
                    w.path.display(),
                    w.branch
                )
            }
            WorktreeOp::Discard { confirm } => {
                if confirm != name {
                    let unsaved = finish::unsaved_work(&w).await.unwrap_or_default();
                    let loses = if unsaved.is_empty() {
                        "nothing that is not merged or pushed".to_string()
                    } else {
                        unsaved.join(" and ")
                    };
                    return Err(err(format!(
                        "discarding deletes {} and its branch {}, with {loses}; to confirm, type the session's name: `!!discard {name}` in the chat, or `clibotctl worktree discard {name} --confirm {name}`",
                        w.path.display(),
                        w.branch
                    )));
                }
                if self.runs(name) {
                    self.stop(name, false, None).await?;
                }
                finish::remove(&w).await.map_err(err)?;
                self.kept_worktrees().remove(name);
                info!(session = %name, branch = %w.branch, "worktree discarded");
                format!(
                    "🗑 discarded {} and its branch {}",
                    w.path.display(),
                    w.branch
                )
            }
            WorktreeOp::Resolve { into } => {
                if !self.runs(name) {
                    return Err(err(format!(
                        "{name} is not running: start it again in its worktree (clibotctl spawn {name} --cli CLI --dir {} --worktree) and ask it there",
                        w.repo.display()
                    )));
                }
                let target = if into.is_empty() {
                    w.base.clone()
                } else {
                    into
                };
                let ask = format!(
                    "Please rebase this branch ({}) onto {target} with `git rebase {target}`, resolve the conflicts, finish the rebase (`git rebase --continue`) and tell me when it is done, so that it can be merged.",
                    w.branch
                );
                self.send_input(name, &ask, true).await?;
                format!("asked {name} to rebase on {target} and resolve the conflicts")
            }
        };
        Ok(WorktreeDone {
            text,
            ..Default::default()
        })
    }

    /// Pushes the branch and opens a pull request with `gh`; its URL.
    async fn open_pr(&self, name: &str, k: &Kept) -> Result<String, CoreError> {
        let w = &k.worktree;
        if !k.pr_url.is_empty() {
            return Ok(k.pr_url.clone());
        }
        let gh = |args: Vec<String>| {
            let mut c = tokio::process::Command::new("gh");
            c.args(args)
                .current_dir(&w.path)
                // git as gh runs it: none of the repository's hooks or fsmonitor.
                .env("GIT_CONFIG_COUNT", "2")
                .env("GIT_CONFIG_KEY_0", "core.hooksPath")
                .env("GIT_CONFIG_VALUE_0", "/dev/null")
                .env("GIT_CONFIG_KEY_1", "core.fsmonitor")
                .env("GIT_CONFIG_VALUE_1", "false")
                .env("GH_PROMPT_DISABLED", "1")
                .env("GIT_TERMINAL_PROMPT", "0")
                .stdin(std::process::Stdio::null())
                .kill_on_drop(true);
            async move {
                tokio::time::timeout(Duration::from_secs(120), c.output())
                    .await
                    .map_err(|_| "gh took over 120 s".to_string())?
                    .map_err(|e| {
                        if e.kind() == std::io::ErrorKind::NotFound {
                            "the GitHub CLI (gh) is not installed on this machine: install it and run `gh auth login`, or push the branch and open the pull request yourself".to_string()
                        } else {
                            format!("gh cannot run: {e}")
                        }
                    })
            }
        };
        let auth = gh(vec!["auth".into(), "status".into()])
            .await
            .map_err(err)?;
        if !auth.status.success() {
            return Err(err(
                "gh is not signed in: run `gh auth login` on this machine, then open the pull request again",
            ));
        }
        if !w.path.is_dir() {
            return Err(err(format!(
                "the worktree's folder {} is gone",
                w.path.display()
            )));
        }
        finish::push(w).await.map_err(err)?;
        let (title, body) = self.pr_words(name, w).await;
        let out = gh(vec![
            "pr".into(),
            "create".into(),
            "--head".into(),
            w.branch.clone(),
            "--base".into(),
            w.base.clone(),
            "--title".into(),
            title,
            "--body".into(),
            body,
        ])
        .await
        .map_err(err)?;
        let said = String::from_utf8_lossy(&out.stdout).to_string();
        if !out.status.success() {
            return Err(err(format!(
                "gh pr create: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let url = said
            .lines()
            .rev()
            .find(|l| l.trim().starts_with("http"))
            .unwrap_or(said.trim())
            .trim()
            .to_string();
        info!(session = %name, %url, "pull request opened");
        Ok(url)
    }

    /// A pull request's title and body: the session's last reply when it runs (its first line
    /// the title), and the branch's commits; redacted.
    async fn pr_words(&self, name: &str, w: &crate::worktrees::Worktree) -> (String, String) {
        let reply = self
            .last_reply(name)
            .map(|r| r.text)
            .unwrap_or_default()
            .trim()
            .to_string();
        let log = crate::worktrees::finish::commits(w).await;
        let first = reply
            .lines()
            .chain(log.lines().map(|l| l.trim_start_matches("- ")))
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or(name);
        let mut title: String = first
            .trim_start_matches('#')
            .trim()
            .chars()
            .take(72)
            .collect();
        if title.is_empty() {
            title = format!("{name}'s work");
        }
        let mut body = String::new();
        if !reply.is_empty() {
            body.push_str(&reply.chars().take(8000).collect::<String>());
            body.push_str("\n\n");
        }
        if !log.is_empty() {
            body.push_str("Commits:\n");
            body.push_str(&log);
        }
        // It leaves the machine: the daemon's own secrets and anything that looks like one go.
        let secrets = self.own_secrets();
        let redact = |s: &str| {
            clibot_proto::redact::redact(&crate::confine::secrets::scrub(s, &secrets)).into_owned()
        };
        (redact(&title), redact(&body))
    }

    /// Removes the worktrees of sessions that no longer run and hold no work (clean, and
    /// merged or pushed); the rest are listed as stale. A folder removed by hand whose branch
    /// holds no work is forgotten too.
    pub async fn prune_worktrees(&self) -> Pruned {
        let mut out = Pruned::default();
        for k in self.kept_worktrees().all() {
            if self.runs(&k.session) {
                continue;
            }
            let w = k.worktree.clone();
            let lock = self.kept_worktrees().repo_lock(&w.repo);
            let _held = lock.lock().await;
            let prune = async {
                let why = match finish::unsaved_work(&w).await {
                    Ok(why) => why,
                    Err(e) => vec![format!("git cannot read it: {e}")],
                };
                if !why.is_empty() {
                    return Err(why.join(", "));
                }
                finish::remove(&w).await
            };
            match self.in_worktree_jail(&k, prune).await {
                Ok(()) => {
                    self.kept_worktrees().remove(&k.session);
                    info!(session = %k.session, branch = %w.branch, "merged worktree removed");
                    out.removed.push(k.session.clone());
                }
                Err(e) => out.stale.push((k.session.clone(), e)),
            }
        }
        out
    }

    /// A worktree session stopped: its chats hear what its worktree holds and what to do
    /// with it (before the session's topic closes).
    pub(crate) async fn worktree_left(&self, name: &str, w: &crate::worktrees::Worktree) {
        let st = self.worktree_status(w).await;
        let holds = if st.missing {
            "its folder is gone".to_string()
        } else {
            format!(
                "{} commit(s) ahead of {}, {} file(s) not committed",
                st.ahead, w.base, st.dirty
            )
        };
        self.notice(
            name,
            "worktree",
            &format!(
                "🌿 the worktree on {} is kept ({holds}): !!worktree {name} to see its diff, merge it, open a pull request or discard it",
                w.branch
            ),
        );
    }

    /// The daily clean-up: prunes, then tells each stale worktree's chats (once a day, not for
    /// those a person chose to keep) that it waits.
    pub async fn clean_worktrees(&self) {
        let pruned = self.prune_worktrees().await;
        let now = crate::store::now_ms();
        for (session, why) in pruned.stale {
            let Some(k) = self.kept_worktrees().get(&session) else {
                continue;
            };
            if k.keep || now - k.reminded_ms < CLEAN_EVERY.as_millis() as i64 - 60_000 {
                continue;
            }
            self.kept_worktrees()
                .update(&session, |k| k.reminded_ms = now);
            warn!(%session, %why, "worktree kept: it holds work");
            self.notice(
                &session,
                "worktree",
                &format!(
                    "🌿 {session}'s worktree on {} still holds work ({why}): !!worktree {session} to merge it, open a pull request, keep or discard it",
                    k.worktree.branch
                ),
            );
        }
    }
}

impl Daemon {
    /// Runs the clean-up a while after the daemon starts and then once a day, until shutdown.
    pub async fn worktree_clock(&self) {
        let stop = self.shutdown_token().clone();
        let mut wait = FIRST_CLEAN;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop.cancelled() => return,
            }
            wait = CLEAN_EVERY;
            if !self.kept_worktrees().all().is_empty() {
                self.clean_worktrees().await;
            }
        }
    }
}

/// A diff in words: the stat, and the files git does not track.
fn diff_words(name: &str, branch: &str, d: &Diff) -> String {
    let mut t = if d.stat.trim().is_empty() {
        format!("{name} ({branch}) changed nothing tracked yet")
    } else {
        format!("{name} ({branch}):\n{}", d.stat)
    };
    if !d.untracked.is_empty() {
        let shown: Vec<&str> = d.untracked.iter().take(20).map(String::as_str).collect();
        t.push_str(&format!(
            "\nnot tracked by git ({}): {}",
            d.untracked.len(),
            shown.join(", ")
        ));
    }
    if d.cut {
        t.push_str(&format!(
            "\n(the patch is cut at {} MB)",
            finish::MAX_PATCH >> 20
        ));
    }
    t
}
