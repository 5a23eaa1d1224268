//! Chat keys with topics: a chat is `CHAT`, a topic in it (a Telegram forum topic, a Discord
//! thread, a Feishu thread) is `CHAT/THREAD`. The daemon keeps bindings and cursors per key,
//! so a topic is a chat of its own there, and checks a group's access by its `CHAT` part.

/// `CHAT/THREAD` as its chat and thread; `CHAT` as itself and none.
pub fn split(chat: &str) -> (&str, Option<&str>) {
    match chat.split_once('/') {
        Some((c, t)) if !t.is_empty() => (c, Some(t)),
        Some((c, _)) => (c, None),
        None => (chat, None),
    }
}

/// The key of thread `thread` in chat `chat`.
pub fn key(chat: &str, thread: &str) -> String {
    format!("{chat}/{thread}")
}

/// Whether `key` is a topic in `chat`.
pub fn is_in(key: &str, chat: &str) -> bool {
    matches!(split(key), (c, Some(_)) if c == chat)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_split_into_chat_and_thread() {
        assert_eq!(split("-1001234567890/42"), ("-1001234567890", Some("42")));
        assert_eq!(split("-1001234567890"), ("-1001234567890", None));
        assert_eq!(split("oc_x/"), ("oc_x", None));
        assert_eq!(key("oc_x", "om_1"), "oc_x/om_1");
        assert!(is_in("-100/42", "-100"));
        assert!(!is_in("-100", "-100"));
        assert!(!is_in("-1001/42", "-100"));
    }
}
