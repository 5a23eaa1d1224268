//! Handing a session's work to another CLI: the new session, the handoff typed into it, the chats moved over.

use crate::automation::delegation::*;
use crate::core::{Daemon, SpawnRequest};
use crate::error::CoreError;
use crate::locking::lock;
use crate::model::SessionRecord;
use crate::store::events::EventKind;
use tracing::{info, warn};

impl Daemon {
    /// An event that may hand a session's work on: an error of kind `kind` (or `stalled`).
    /// Acts only for sessions that delegate and have not yet handed on; runs in its own task.
    pub(crate) fn consider_delegation(&self, name: &str, kind: &str, detail: &str) {
        let live = self.live();
        let cfg = &live.config.delegation;
        if !cfg.on.iter().any(|k| k == kind) {
            return;
        }
        let wanted = lock(&self.inner.sessions)
            .get(name)
            .is_some_and(|e| e.rec.delegate && e.rec.delegated_to.is_empty() && !e.stopping);
        if !wanted {
            return;
        }
        let d = self.clone();
        let (name, kind, detail) = (name.to_string(), kind.to_string(), detail.to_string());
        tokio::spawn(async move {
            if let Err(e) = d.delegate(&name, None, &kind, &detail).await {
                warn!(session = %name, "no delegation: {e}");
                d.notice(&name, "delegation", &format!("{}; the work stays here", e));
            }
        });
    }

    /// Hands session `name`'s work to CLI `to` (or the next one of `[delegation] to`): starts
    /// it, types the last request with a handoff, moves the chats. `reason` is the error kind
    /// or "manual" (then `detail` says who). Returns the new session.
    pub async fn delegate(
        &self,
        name: &str,
        to: Option<&str>,
        reason: &str,
        detail: &str,
    ) -> Result<SessionRecord, CoreError> {
        let cfg = self.live().config.delegation.clone();
        let (old, target, new_name, chain) = {
            let mut sessions = lock(&self.inner.sessions);
            let e = sessions
                .get(name)
                .ok_or_else(|| CoreError::NoSuchSession(name.to_string()))?;
            if !e.rec.delegated_to.is_empty() {
                return Err(CoreError::Delegation(format!(
                    "session {name} already handed its work to {}",
                    e.rec.delegated_to
                )));
            }
            let mut chain = e.rec.delegated_from.clone();
            chain.push(e.rec.cli.clone());
            let hops = e.rec.delegated_from.len() as u32;
            let target = match to {
                Some(t) => {
                    self.cli(t)?;
                    if t == e.rec.cli {
                        return Err(CoreError::Delegation(format!(
                            "session {name} already runs {t}; name another CLI"
                        )));
                    }
                    t.to_string()
                }
                None => {
                    if hops >= cfg.max_attempts {
                        return Err(CoreError::Delegation(format!(
                            "this work was already handed on {hops} time(s), the most [delegation] max_attempts allows"
                        )));
                    }
                    cfg.to
                        .iter()
                        .find(|c| !chain.contains(c) && self.cli(c).is_ok())
                        .cloned()
                        .ok_or_else(|| {
                            CoreError::Delegation(format!(
                                "no CLI left to hand the work to: {} already tried, [delegation] to = {:?}",
                                chain.join(", "),
                                cfg.to
                            ))
                        })?
                }
            };
            let new_name = free_name(&sessions, name, &target);
            let old = e.rec.clone();
            // Reserved now, so that a second error cannot start a second delegation.
            if let Some(e) = sessions.get_mut(name) {
                e.rec.delegated_to = new_name.clone();
            }
            (old, target, new_name, chain)
        };
        let release = |d: &Daemon| {
            if let Some(e) = lock(&d.inner.sessions).get_mut(name) {
                e.rec.delegated_to.clear();
            }
        };
        let spawned = self
            .spawn(SpawnRequest {
                name: new_name.clone(),
                cli: target.clone(),
                dir: old.dir.to_string_lossy().into_owned(),
                owner: old.owner.clone(),
                delegate: old.delegate,
                delegated_from: chain.clone(),
                ..Default::default()
            })
            .await;
        let new = match spawned {
            Ok(r) => r,
            Err(e) => {
                release(self);
                return Err(CoreError::Delegation(format!(
                    "could not start {target} to continue: {e}"
                )));
            }
        };
        if let Some(e) = lock(&self.inner.sessions).get_mut(&new_name) {
            e.rec.shared_with = old.shared_with.clone();
        }
        let line = why(&old.cli, reason, detail);
        info!(session = %name, to = %new_name, reason, "handing the work on");
        let moved = self.inner.chats.move_session(name, &new_name);
        self.event(
            name,
            &old.id,
            EventKind::Delegated {
                to_session: new_name.clone(),
                to_cli: target.clone(),
                reason: reason.to_string(),
                detail: detail.to_string(),
                attempt: chain.len() as u32,
            },
        );
        self.notice(
            &new_name,
            "delegation",
            &format!("{line}; continuing in {new_name} ({target})"),
        );
        let handoff = handoff_text(&old, reason, detail, &git_status(&old.dir).await);
        if let Err(e) = self.send_input(&new_name, &handoff, true).await {
            warn!(session = %new_name, "the handoff could not be typed: {e}");
            self.notice(
                &new_name,
                "delegation",
                &format!("the handoff could not be typed ({e}); send the request again"),
            );
        }
        self.inner.audit.record(crate::store::audit::Audit::now(
            "clibot",
            "clibot",
            "",
            name,
            "delegate",
            "accepted",
            &format!(
                "to {new_name} ({target}): {reason}; {} chat(s) moved",
                moved.len()
            ),
        ));
        self.persist();
        Ok(lock(&self.inner.sessions)
            .get(&new_name)
            .map(|e| e.rec.clone())
            .unwrap_or(new))
    }

    /// A line for the session's chats.
    pub(crate) fn notice(&self, name: &str, kind: &str, text: &str) {
        let id = lock(&self.inner.sessions)
            .get(name)
            .map(|e| e.rec.id.clone())
            .unwrap_or_default();
        self.event(
            name,
            &id,
            EventKind::Notice {
                text: text.to_string(),
                kind: kind.to_string(),
            },
        );
    }
}
