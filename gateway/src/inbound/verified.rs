//! Who the daemon has let act in which chat, as seen by this process. While the daemon cannot
//! be reached the gateway cannot ask it, so it answers only (chat, user) pairs it saw accepted
//! before, and stays silent to everyone else: a stranger, or an unlisted group, must not learn
//! anything (not even that the daemon is down). Bounded: the oldest pair is forgotten first.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

/// Pairs kept at most.
pub const MAX_VERIFIED: usize = 4096;

/// What a verified chat is told while the daemon is away (no path, no detail).
pub const DAEMON_DOWN: &str = "clibot's daemon is not reachable on this machine; it is being restarted or is stopped — try again shortly, or run `clibotctl status` at the machine";

#[derive(Debug, Default)]
pub struct Verified {
    inner: Mutex<Pairs>,
}

#[derive(Debug, Default)]
struct Pairs {
    set: HashSet<(String, String)>,
    order: VecDeque<(String, String)>,
    /// Users refused so far (forgotten all at once when full): their first message is logged.
    refused: HashSet<String>,
}

impl Verified {
    /// The daemon accepted `user` in `chat`.
    pub fn accept(&self, chat: &str, user: &str) {
        let Ok(mut p) = self.inner.lock() else { return };
        let key = (chat.to_string(), user.to_string());
        if p.set.contains(&key) {
            return;
        }
        while p.order.len() >= MAX_VERIFIED {
            if let Some(old) = p.order.pop_front() {
                p.set.remove(&old);
            }
        }
        p.set.insert(key.clone());
        p.order.push_back(key);
    }

    /// The daemon refused `user` in `chat` (access revoked, a group taken out of the config).
    /// Returns whether this is the first refusal of `user` this process saw (worth a line in
    /// the log: someone unknown writes to the bot).
    pub fn refuse(&self, chat: &str, user: &str) -> bool {
        let Ok(mut p) = self.inner.lock() else {
            return false;
        };
        let key = (chat.to_string(), user.to_string());
        if p.set.remove(&key) {
            p.order.retain(|k| *k != key);
        }
        if p.refused.len() >= MAX_VERIFIED {
            p.refused.clear();
        }
        p.refused.insert(user.to_string())
    }

    pub fn contains(&self, chat: &str, user: &str) -> bool {
        self.inner
            .lock()
            .map(|p| p.set.contains(&(chat.to_string(), user.to_string())))
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_remembered_forgotten_and_bounded() {
        let v = Verified::default();
        assert!(!v.contains("1", "7"));
        v.accept("1", "7");
        assert!(v.contains("1", "7"));
        assert!(
            !v.contains("2", "7"),
            "the same user in another chat is not verified"
        );
        assert!(
            !v.contains("1", "8"),
            "another user in the same chat is not verified"
        );
        v.refuse("1", "7");
        assert!(!v.contains("1", "7"));
        for i in 0..MAX_VERIFIED + 10 {
            v.accept(&i.to_string(), "u");
        }
        assert!(!v.contains("0", "u"), "the oldest went first");
        assert!(v.contains(&(MAX_VERIFIED + 9).to_string(), "u"));
        let n = v.inner.lock().map(|p| (p.set.len(), p.order.len())).ok();
        assert_eq!(n, Some((MAX_VERIFIED, MAX_VERIFIED)));
        assert!(!DAEMON_DOWN.contains('/'), "no path in what a chat is told");
    }
}
