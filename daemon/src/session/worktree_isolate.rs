//! **Isolate?**: a session started in a repository where another session works, or where the
//! user has changes not committed, is told so when it starts — and, as long as nothing was
//! typed into it yet, can be started again in a worktree of its own with one press
//! (`clibotctl worktree isolate NAME`).

use crate::core::{Daemon, SpawnRequest};
use crate::error::CoreError;
use crate::model::{Actor, SessionRecord};
use crate::worktrees::{WorktreeAsk, git};

impl Daemon {
    /// Why session `rec`, started outside a worktree, would be better off in one: another
    /// session works in its repository, or the repository has changes not committed. Empty
    /// when neither (or it is not in a repository, or is a member's: their sessions work in
    /// their own workspace).
    pub async fn isolate_hint(&self, rec: &SessionRecord) -> String {
        if rec.worktree.is_some() || rec.adopted || self.non_admin(&rec.owner).is_some() {
            return String::new();
        }
        let Ok(repo) = git::toplevel(&rec.dir).await else {
            return String::new();
        };
        let mut others = self.sessions().filter_map(|e| {
            (e.rec.name != rec.name && e.rec.dir.starts_with(&repo)).then(|| e.rec.name.clone())
        });
        others.sort();
        if !others.is_empty() {
            return format!(
                "session {} works in this repository too ({})",
                others.join(", "),
                repo.display()
            );
        }
        let changed = crate::safe_git::status_short(&repo)
            .await
            .map(|s| {
                s.lines()
                    .filter(|l| !l.starts_with("??") && !l.trim().is_empty())
                    .count()
            })
            .unwrap_or(0);
        if changed > 0 {
            return format!(
                "{} has {changed} change(s) not committed, which the agent's work would mix with",
                repo.display()
            );
        }
        String::new()
    }

    /// Starts session `name` again in a worktree of its own, with what it was started with,
    /// if nothing was typed into it yet.
    pub async fn isolate(&self, actor: &Actor, name: &str) -> Result<SessionRecord, CoreError> {
        self.check_owner(actor, name, true)?;
        let rec = self.get(name)?;
        let refuse = |why: String| Err(CoreError::Worktree(why));
        if rec.worktree.is_some() {
            return refuse(format!("{name} already works in a worktree"));
        }
        if rec.adopted || rec.unmanaged || !rec.server.is_empty() {
            return refuse(format!(
                "{name} was adopted where it runs: clibot does not move it"
            ));
        }
        if !rec.last_input.is_empty() || !rec.queue.is_empty() {
            return refuse(format!(
                "{name} was already given work where it is: start another session in a worktree (!!new NAME CLI DIR wt, or clibotctl spawn NAME --worktree)"
            ));
        }
        if self.non_admin(&rec.owner).is_some() {
            return refuse(
                "a member's session works in their own workspace: worktrees are for the sessions of admins and the machine's user".into(),
            );
        }
        self.stop(name, false, None).await?;
        let req = SpawnRequest {
            name: name.to_string(),
            cli: rec.cli.clone(),
            dir: rec.dir.display().to_string(),
            args: rec.args.clone(),
            env: rec.env.clone(),
            owner: rec.owner.clone(),
            delegate: rec.delegate,
            delegated_from: rec.delegated_from.clone(),
            delegated_reasons: rec.delegated_reasons.clone(),
            resume: String::new(),
            profile: rec.profile.clone(),
            worktree: Some(WorktreeAsk::default()),
        };
        self.spawn(req).await
    }
}
