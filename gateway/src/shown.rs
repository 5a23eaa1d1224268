//! Which prompt each chat was last shown, so that a typed `1` or `yes` answers the prompt the
//! user read there, not whatever the session happens to wait on by the time the answer
//! arrives. Buttons carry their prompt's id themselves ([`button_data`]).
//!
//! Kept in memory only: after a gateway restart a typed answer falls back to the prompt the
//! session waits on now, which the relay shows the chat again if it was not delivered.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// chat → (session, prompt id) of the last prompt shown there.
#[derive(Clone, Default)]
pub struct Shown(Arc<Mutex<HashMap<String, (String, String)>>>);

impl Shown {
    pub fn record(&self, chat: &str, session: &str, prompt_id: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).insert(
            chat.to_string(),
            (session.to_string(), prompt_id.to_string()),
        );
    }

    /// The prompt last shown in `chat`, if it belongs to `session`.
    pub fn last(&self, chat: &str, session: &str) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(chat)
            .filter(|(s, _)| s == session)
            .map(|(_, p)| p.clone())
    }
}

/// A button's data: `a:<prompt id>:<option number>` (well under Telegram's 64 bytes).
pub fn button_data(prompt_id: &str, option: usize) -> String {
    format!("a:{prompt_id}:{option}")
}

/// The prompt id and option number a button carries.
pub fn parse_button(data: &str) -> Option<(String, String)> {
    let rest = data.strip_prefix("a:")?;
    let (id, n) = rest.split_once(':')?;
    (!id.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .then(|| (id.to_string(), n.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buttons_round_trip_and_junk_is_refused() {
        let d = button_data("0123456789abcdef", 3);
        assert!(d.len() <= 64);
        assert_eq!(
            parse_button(&d),
            Some(("0123456789abcdef".into(), "3".into()))
        );
        for bad in ["answer:1", "a:", "a::1", "a:id:", "a:id:x", "a:id", ""] {
            assert_eq!(parse_button(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_last_prompt_is_per_chat_and_session() {
        let s = Shown::default();
        s.record("c1", "api", "p1");
        s.record("c1", "api", "p2");
        s.record("c2", "web", "p3");
        assert_eq!(s.last("c1", "api").as_deref(), Some("p2"));
        assert_eq!(s.last("c1", "web"), None);
        assert_eq!(s.last("c2", "web").as_deref(), Some("p3"));
    }
}
