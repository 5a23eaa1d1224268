//! A default chat per platform (`[gateway.PLATFORM] default_chat`): sessions started on the
//! machine — not from a chat — send their replies, prompts and errors there until a chat binds
//! them, so that a session spawned at the desk reaches the phone without `!!use`.
//!
//! The gateway names its default chat on every connection; only an admin's chat is accepted
//! (the admin's private chat, or a chat an admin bound). The chat gets a delivery cursor of its
//! own when it has no binding ([`crate::chat::chats::Chats::ensure_home`]), so what it is sent
//! is delivered at least once, like everything else.

use crate::chat::chats::Binding;
use crate::core::Daemon;
use crate::error::CoreError;
use crate::model::Actor;

impl Daemon {
    /// Sets (or, with an empty `chat`, clears) the platform's default chat.
    pub fn set_default_chat(&self, platform: &str, chat: &str) -> Result<(), CoreError> {
        if platform.is_empty() {
            return Err(CoreError::DefaultChat("name the platform".into()));
        }
        if chat.is_empty() {
            self.set_default_chat_of(platform, None);
            return Ok(());
        }
        if !self.is_admin_chat(platform, chat) {
            return Err(CoreError::DefaultChat(format!(
                "[gateway.{platform}] default_chat = {chat:?} is not an admin's chat: name an admin's private chat (an id in [access.{platform}] admins), or a chat an admin bound with !!use or !!new"
            )));
        }
        self.chats()
            .ensure_home(platform, chat, self.events().last_seq());
        self.set_default_chat_of(platform, Some(chat));
        Ok(())
    }

    /// An admin's private chat (its id is the admin's user id), or a chat an admin bound (or
    /// bound a topic of: a forum whose sessions each have a topic).
    fn is_admin_chat(&self, platform: &str, chat: &str) -> bool {
        let access = &self.access();
        if access.known(platform, chat) == Some(true) {
            return true;
        }
        let group_of = crate::chat::access::group_of;
        self.chats()
            .bindings(platform, "", "")
            .iter()
            .filter(|b| group_of(&b.chat) == chat)
            .any(|b| {
                b.binder
                    .split_once(':')
                    .is_some_and(|(p, u)| p == platform && access.known(p, u) == Some(true))
            })
    }

    /// A chat an allowed user wrote from: an admin's private chat is where sessions clibot
    /// does not run report.
    pub fn note_chat(&self, platform: &str, chat: &str, admin: bool, group: bool) {
        if admin && !group && !platform.is_empty() && !chat.is_empty() {
            self.chats()
                .note_admin_chat(platform, chat, self.events().last_seq());
        }
    }

    /// Where an event of unmanaged session `session` goes on `platform` when no chat is bound
    /// to it: every admin's private chat (each at its own delivery position: the first binding
    /// the chat has), and the default chat.
    pub fn unmanaged_bindings(&self, platform: &str, session: &str) -> Vec<Binding> {
        let unmanaged = self
            .sessions()
            .get(session, |e| e.rec.unmanaged)
            .unwrap_or(false);
        if !unmanaged {
            return Vec::new();
        }
        let access = &self.access();
        let mut out: Vec<Binding> = Vec::new();
        for chat in self.chats().admin_chats(platform) {
            if let Some(b) = self
                .chats()
                .bindings(platform, &chat, "")
                .into_iter()
                .next()
            {
                // Only while an admin of the platform may still use it.
                let still = b.binder == Actor::LOCAL
                    || b.binder
                        .split_once(':')
                        .is_some_and(|(p, u)| access.known(p, u) == Some(true));
                if still {
                    out.push(b);
                }
            }
        }
        if let Some(b) = self.default_chat_binding(platform, session)
            && !out.iter().any(|o| o.chat == b.chat)
        {
            out.push(b);
        }
        out
    }

    /// Where the gateway tells the admins that another platform is down: the admins' private
    /// chats of `platform` (while they are admins) and its default chat.
    pub fn admin_notice_chats(&self, platform: &str) -> Vec<String> {
        let access = &self.access();
        let mut out: Vec<String> = Vec::new();
        for chat in self.chats().admin_chats(platform) {
            let still = self
                .chats()
                .bindings(platform, &chat, "")
                .into_iter()
                .next()
                .is_some_and(|b| {
                    b.binder == Actor::LOCAL
                        || b.binder
                            .split_once(':')
                            .is_some_and(|(p, u)| access.known(p, u) == Some(true))
                })
                || access.known(platform, &chat) == Some(true);
            if still {
                out.push(chat);
            }
        }
        if let Some(chat) = self.default_chat_of(platform)
            && !out.contains(&chat)
        {
            out.push(chat);
        }
        out
    }

    /// The default chat's binding, for an event of `session` that no chat of `platform` is
    /// bound to, when the session was started on the machine.
    pub fn default_chat_binding(&self, platform: &str, session: &str) -> Option<Binding> {
        let chat = self.default_chat_of(platform)?;
        let machine = self
            .sessions()
            .get(session, |e| e.rec.owner.is_empty())
            .unwrap_or(false);
        if !machine {
            return None;
        }
        self.chats()
            .bindings(platform, &chat, "")
            .into_iter()
            .next()
    }
}
