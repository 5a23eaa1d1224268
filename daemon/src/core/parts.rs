//! The daemon's parts, as the features reach them. `Inner`'s fields are private to the core:
//! a feature (`session/`, `rpc/`, `ops/`) asks the daemon for a part and uses that part's own
//! methods, so no feature reaches into another part's state. The few shared bits that are not
//! parts of their own (the default chats, tmux's PATH, the warnings kept for doctor) are
//! changed only through the named methods here.

use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};

use super::Daemon;
use super::sessions::Sessions;
use crate::locking::lock;
use crate::tmux::Mux;

impl Daemon {
    /// Every session ([`Sessions`]): the table and its own lock.
    pub(crate) fn sessions(&self) -> &Sessions {
        &self.inner.sessions
    }

    /// clibot's own tmux server.
    pub(crate) fn mux(&self) -> &Arc<dyn Mux> {
        &self.inner.mux
    }

    /// The user's other tmux servers that sessions adopted in place run on: socket → its
    /// multiplexer.
    pub(crate) fn servers(
        &self,
    ) -> MutexGuard<'_, std::collections::HashMap<String, Arc<dyn Mux>>> {
        lock(&self.inner.servers)
    }

    /// Each session's queued input, on disk.
    pub(crate) fn queues(&self) -> &crate::store::queue_file::QueueFiles {
        &self.inner.queues
    }

    /// What became of automatic answers.
    pub(crate) fn outcomes(&self) -> &crate::store::outcomes::Outcomes {
        &self.inner.outcomes
    }

    /// The jobs' table.
    pub(crate) fn jobs(&self) -> &crate::jobs::Jobs {
        &self.inner.jobs
    }

    /// The sessions' goals.
    pub(crate) fn goals(&self) -> &crate::jobs::goals::Goals {
        &self.inner.goals
    }

    /// The worktrees clibot made, running or stopped.
    pub(crate) fn kept_worktrees(&self) -> &crate::worktrees::kept::KeptWorktrees {
        &self.inner.worktrees
    }

    /// The ledger of counted turns.
    pub(crate) fn usage(&self) -> &crate::usage::ledger::Ledger {
        &self.inner.usage
    }

    /// The budgets' states.
    pub(crate) fn budgets(&self) -> &crate::usage::budgets::Budgets {
        &self.inner.budgets
    }

    /// The audit log itself (records are written with [`Daemon::audit`]).
    pub(crate) fn audit_log(&self) -> &crate::store::audit::Audit {
        &self.inner.audit
    }

    /// Recently accepted chat messages, so that one handed over twice is typed once.
    pub(crate) fn seen_inputs(&self) -> &Arc<crate::chat::dedupe::Dedupe> {
        &self.inner.seen_inputs
    }

    /// The secret paths no session may start in.
    pub(crate) fn secret_paths(&self) -> &[std::path::PathBuf] {
        &self.inner.secrets
    }

    /// A number no other paste of this daemon's has used (tmux buffer names).
    pub(crate) fn next_paste(&self) -> u64 {
        self.inner.paste_counter.fetch_add(1, Ordering::Relaxed)
    }

    /// The per-session hook sockets of jailed sessions.
    pub(crate) fn hook_sockets(&self) -> MutexGuard<'_, crate::confine::HookSockets> {
        lock(&self.inner.hook_sockets)
    }

    /// tmux's global PATH, once read.
    pub(crate) fn global_path(&self) -> Option<String> {
        lock(&self.inner.global_path).clone()
    }

    pub(crate) fn set_global_path(&self, path: String) {
        *lock(&self.inner.global_path) = Some(path);
    }

    /// `[gateway.PLATFORM] default_chat` as the gateway of `platform` set it.
    pub(crate) fn default_chat_of(&self, platform: &str) -> Option<String> {
        lock(&self.inner.default_chats).get(platform).cloned()
    }

    /// Sets (or, with `None`, forgets) the default chat of `platform`.
    pub(crate) fn set_default_chat_of(&self, platform: &str, chat: Option<&str>) {
        let mut chats = lock(&self.inner.default_chats);
        match chat {
            Some(c) => {
                chats.insert(platform.to_string(), c.to_string());
            }
            None => {
                chats.remove(platform);
            }
        }
    }

    /// Keeps warning `w` for doctor unless it is kept already or `max` warnings containing
    /// `like` are (a session can print anything: a few of a kind are kept, not one per
    /// variation it makes up). Whether it was kept.
    pub(crate) fn keep_warning(&self, w: &str, like: &str, max: usize) -> bool {
        let mut warnings = lock(&self.inner.warnings);
        let kept = warnings.iter().filter(|k| k.contains(like)).count();
        let keep = kept < max && !warnings.iter().any(|k| k == w);
        if keep {
            warnings.push(w.to_string());
        }
        keep
    }

    /// Replaces what `reload` replaces.
    pub(crate) fn set_live(&self, live: crate::core::live::Live) {
        *self.inner.live.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(live);
    }
}
