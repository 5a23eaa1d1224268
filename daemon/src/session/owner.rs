//! Who may use which session: the owner, those it was shared with, admins.

use crate::core::*;
use crate::error::CoreError;
use crate::model::Actor;
use crate::model::SessionRecord;
use crate::store::events::EventKind;

impl Daemon {
    /// Whether `actor` is an admin (the local user counts as one).
    pub fn is_admin(&self, actor: &Actor) -> bool {
        actor.is_local() || self.access().known(&actor.platform, &actor.user) == Some(true)
    }

    /// Whether `actor` may see and use session `rec`: the local user and admins use all; a
    /// chat user their own and those shared with them.
    pub fn may_use(&self, actor: &Actor, rec: &SessionRecord) -> bool {
        if actor.is_local() {
            return true;
        }
        let key = actor.key();
        rec.owner == key
            || rec.shared_with.contains(&key)
            || self.access().known(&actor.platform, &actor.user) == Some(true)
    }

    /// Refuses `actor` a session that is not theirs, in the words used for one that does not
    /// exist: another user's sessions are not even named to them.
    /// With `manage` (stop, restart, release) a share is not enough: only the owner or an
    /// admin may.
    pub fn check_owner(&self, actor: &Actor, name: &str, manage: bool) -> Result<(), CoreError> {
        match self.get(name) {
            Ok(_) if actor.is_local() => Ok(()),
            Ok(rec) if !self.may_use(actor, &rec) => Err(CoreError::NotYours(name.to_string())),
            Ok(rec)
                if manage
                    && rec.owner != actor.key()
                    && self.access().known(&actor.platform, &actor.user) != Some(true) =>
            {
                Err(CoreError::NotOwner(name.to_string()))
            }
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Refuses `actor` key presses into session `name` (control keys, and a cancel, which
    /// presses them): they interrupt or quit a CLI, so they are for the machine's user,
    /// admins and the session's owner — never someone it is only shared with.
    pub fn check_keys(&self, actor: &Actor, name: &str) -> Result<(), CoreError> {
        if actor.is_local() || self.is_admin(actor) || self.get(name)?.owner == actor.key() {
            return Ok(());
        }
        Err(CoreError::KeysNotAllowed)
    }

    /// Shares session `name` with `user` ("PLATFORM:USER"), or takes the share back; only its
    /// owner, an admin or the local user may. Returns who it is shared with now.
    pub fn share(
        &self,
        actor: &Actor,
        name: &str,
        user: &str,
        revoke: bool,
    ) -> Result<Vec<String>, CoreError> {
        let valid = user
            .split_once(':')
            .is_some_and(|(p, u)| !p.is_empty() && !u.is_empty() && !u.contains(':'))
            && !user.chars().any(|c| c.is_control() || c.is_whitespace());
        if !valid {
            return Err(CoreError::NotAChatUser {
                user: user.to_string(),
            });
        }
        let admin =
            actor.is_local() || self.access().known(&actor.platform, &actor.user) == Some(true);
        let shared = self.sessions().try_update(name, |e| {
            if !admin && e.rec.owner != actor.key() {
                return Err(if self.may_use_rec(actor, &e.rec) {
                    CoreError::OnlyOwnerShares {
                        name: name.to_string(),
                        owner: if e.rec.owner.is_empty() {
                            "the machine's user".to_string()
                        } else {
                            e.rec.owner.clone()
                        },
                    }
                } else {
                    CoreError::NotYours(name.to_string())
                });
            }
            if revoke {
                e.rec.shared_with.retain(|u| u != user);
            } else if !e.rec.shared_with.iter().any(|u| u == user) {
                e.rec.shared_with.push(user.to_string());
            }
            Ok(e.rec.shared_with.clone())
        })?;
        self.persist();
        Ok(shared)
    }

    fn may_use_rec(&self, actor: &Actor, rec: &SessionRecord) -> bool {
        let key = actor.key();
        rec.owner == key || rec.shared_with.contains(&key)
    }

    /// Tells a session's other chats that one of them was suspended.
    pub fn chat_suspended(&self, session: &str, platform: &str, chat: &str, reason: &str) {
        let id = self.get(session).map(|r| r.id).unwrap_or_default();
        self.event(
            session,
            &id,
            EventKind::ChatSuspended {
                platform: platform.into(),
                chat: chat.into(),
                reason: reason.into(),
            },
        );
    }

    /// A refused user is answered only now and then (an empty reason: say nothing), and their
    /// repeated refusals are folded into one audit line a minute.
    pub fn check_access(&self, actor: &Actor, name: &str) -> crate::chat::access::Decision {
        let (d, issued) = self.access().check_chat(&actor.platform, &actor.user, name);
        let detail = match &d {
            crate::chat::access::Decision::Allowed { .. } => Ok(()),
            crate::chat::access::Decision::Denied { code: Some(_), .. } if issued => {
                Err("not paired; pairing code issued")
            }
            crate::chat::access::Decision::Denied { code: Some(_), .. } => {
                Err("not paired; pairing code pending")
            }
            crate::chat::access::Decision::Denied { .. } => Err("not allowed"),
        };
        self.audit(actor, "", "access", detail);
        d
    }
}
