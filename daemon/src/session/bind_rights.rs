//! Who may bind a chat to a session, enforced as rights change: a binder who lost access unbinds their chats.

use crate::chat::bind_rights::*;
use crate::chat::chats::Binding;
use crate::core::Daemon;
use crate::model::Actor;
use crate::store::events::EventKind;

impl Daemon {
    /// Whether `binder` may still use `session` (true for a session that no longer exists:
    /// nothing is delivered from it anyway).
    fn binder_may_use(&self, binder: &str, session: &str) -> bool {
        let Some(actor) = Actor::from_key(binder) else {
            return false;
        };
        let Ok(rec) = self.get(session) else {
            return true;
        };
        actor.is_local()
            || (self.access().known(&actor.platform, &actor.user).is_some()
                && self.may_use(&actor, &rec))
    }

    /// Whether an active binding is held back, and why.
    pub fn held(&self, b: &Binding) -> Option<Hold> {
        (b.binder.is_empty() && b.until_seq == 0).then_some(Hold::NoBinder)
    }

    /// Ends delivery to every chat whose binder may no longer use its session: the chat gets a
    /// notice saying so (the last event it receives of that session), then nothing; audited.
    pub fn enforce_binders(&self) {
        for b in self.chats().bindings("", "", "") {
            if b.until_seq != 0 || b.binder.is_empty() || self.binder_may_use(&b.binder, &b.session)
            {
                continue;
            }
            let Ok(rec) = self.get(&b.session) else {
                continue;
            };
            let who = if b.binder == Actor::LOCAL {
                "the machine's user".to_string()
            } else {
                b.binder.clone()
            };
            let seq = self.event(
                &b.session,
                &rec.id,
                EventKind::Notice {
                    text: format!(
                        "{who} may no longer use {}: this chat no longer receives its output",
                        b.session
                    ),
                    kind: "access".into(),
                },
            );
            self.chats().end_after(&b.platform, &b.chat, seq);
            if let Some(actor) = Actor::from_key(&b.binder) {
                self.audit(
                    &Actor {
                        chat: b.chat.clone(),
                        ..actor
                    },
                    &b.session,
                    "unbind",
                    Ok(()),
                );
            }
        }
    }

    /// Whether `actor` may bind (or rebind) group chat `chat` to `session`: admins and the
    /// machine's user always; otherwise only the session's owner, and only when the group is
    /// not bound to another session whose owner or binder they are not.
    pub fn may_bind_group(&self, actor: &Actor, platform: &str, chat: &str, session: &str) -> bool {
        if self.is_admin(actor) {
            return true;
        }
        let key = actor.key();
        let owns = |s: &str| self.get(s).is_ok_and(|r| r.owner == key);
        if !session.is_empty() && !owns(session) {
            return false;
        }
        match self.chats().bindings(platform, chat, "").into_iter().next() {
            Some(b) if b.session != session && self.get(&b.session).is_ok() => {
                owns(&b.session) || b.binder == key
            }
            _ => true,
        }
    }
}
