//! What the chat gateway must not keep itself, because it can be killed at any moment: which
//! session each chat is bound to, and how far each consumer has delivered the event log (its
//! cursor, acknowledged only after the platform accepted the message). Persisted in
//! `chats.json`, written atomically.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::store::{set_aside, write_atomic};

/// A chat bound to a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    pub platform: String,
    pub chat: String,
    pub session: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct ChatsFile {
    #[serde(default)]
    cursors: BTreeMap<String, u64>,
    #[serde(default)]
    bindings: Vec<Binding>,
}

/// Bindings and cursors.
pub struct Chats {
    path: PathBuf,
    state: Mutex<ChatsFile>,
}

impl Chats {
    /// Loads `chats.json`; an unreadable file is set aside and reported.
    pub fn open(state_dir: &Path) -> (Chats, Option<String>) {
        let path = state_dir.join("chats.json");
        let mut warning = None;
        let state = match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b).unwrap_or_else(|e| {
                let kept = set_aside(&path).map(|p| p.display().to_string()).unwrap_or_default();
                warning = Some(format!(
                    "chat bindings file {} is corrupt ({e}); kept at {kept}; chats must choose their session again",
                    path.display()
                ));
                ChatsFile::default()
            }),
            Err(_) => ChatsFile::default(),
        };
        (
            Chats {
                path,
                state: Mutex::new(state),
            },
            warning,
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ChatsFile> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn save(&self, st: &ChatsFile) {
        match serde_json::to_vec_pretty(st) {
            Ok(data) => {
                if let Err(e) = write_atomic(&self.path, &data) {
                    tracing::error!(path = %self.path.display(), "cannot save chat bindings: {e}");
                }
            }
            Err(e) => tracing::error!("cannot encode chat bindings: {e}"),
        }
    }

    /// Records that `consumer` delivered everything up to `seq`. Cursors never move back, so a
    /// late acknowledgement from a previous run cannot cause a redelivery.
    pub fn ack(&self, consumer: &str, seq: u64) -> u64 {
        let mut st = self.lock();
        let cur = st.cursors.entry(consumer.to_string()).or_insert(0);
        if seq > *cur {
            *cur = seq;
            let v = *cur;
            self.save(&st);
            return v;
        }
        *cur
    }

    /// The consumer's cursor (0 when it never acknowledged anything).
    pub fn cursor(&self, consumer: &str) -> u64 {
        self.lock().cursors.get(consumer).copied().unwrap_or(0)
    }

    /// Binds a chat to a session (an empty session unbinds it).
    pub fn bind(&self, platform: &str, chat: &str, session: &str) {
        let mut st = self.lock();
        st.bindings
            .retain(|b| !(b.platform == platform && b.chat == chat));
        if !session.is_empty() {
            st.bindings.push(Binding {
                platform: platform.into(),
                chat: chat.into(),
                session: session.into(),
            });
        }
        self.save(&st);
    }

    /// Bindings matching the filters (empty filters match all).
    pub fn bindings(&self, platform: &str, chat: &str, session: &str) -> Vec<Binding> {
        self.lock()
            .bindings
            .iter()
            .filter(|b| platform.is_empty() || b.platform == platform)
            .filter(|b| chat.is_empty() || b.chat == chat)
            .filter(|b| session.is_empty() || b.session == session)
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_only_advance_and_everything_persists() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (c, w) = Chats::open(dir.path());
        assert!(w.is_none());
        assert_eq!(c.cursor("telegram"), 0);
        assert_eq!(c.ack("telegram", 10), 10);
        assert_eq!(
            c.ack("telegram", 7),
            10,
            "a late ack does not move the cursor back"
        );
        c.bind("telegram", "chat1", "api");
        c.bind("telegram", "chat1", "web");
        c.bind("discord", "chan", "api");
        drop(c);
        let (c, _) = Chats::open(dir.path());
        assert_eq!(c.cursor("telegram"), 10);
        assert_eq!(
            c.bindings("telegram", "chat1", ""),
            vec![Binding {
                platform: "telegram".into(),
                chat: "chat1".into(),
                session: "web".into()
            }]
        );
        assert_eq!(c.bindings("", "", "api").len(), 1);
        c.bind("telegram", "chat1", "");
        assert!(c.bindings("telegram", "", "").is_empty());
    }

    #[test]
    fn a_corrupt_file_is_set_aside() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("chats.json"), "{ nope").expect("write");
        let (c, w) = Chats::open(dir.path());
        assert!(w.is_some_and(|w| w.contains("corrupt")));
        assert_eq!(c.cursor("x"), 0);
    }
}
