//! "Which session?": a message in a chat bound to no session, while several could take it,
//! gets one button per session. Pressing one binds the chat to it (as `!!use`) and types the
//! message that was waiting into it.
//!
//! The buttons carry a fingerprint of the list they were drawn from (`u.<hash>`), and a press
//! takes the list again: if sessions came or went meanwhile the press is refused and the
//! buttons offered anew, so a button never picks a session it did not name. The waiting message
//! is kept in this process only (one per chat and sender, a bounded number): after a gateway
//! restart the press still binds the chat and asks for the message again. Only its sender's
//! press types it: in a group, another member's press binds the chat for them and types nothing
//! of someone else's.

use std::collections::HashMap;
use std::sync::Mutex;

use clibot_proto::v1;

use super::Router;
use crate::platforms::Inbound;

/// The pseudo prompt id of the choice's buttons: `u.<fingerprint>`.
pub(crate) const CHOOSE_CARD: &str = "u.";
/// Chats with a message waiting for its session, at most.
const WAITING: usize = 256;
/// Buttons offered at most (the text names every session, for `!!use NAME`).
const BUTTONS: usize = 10;

/// Messages waiting for the user to pick their session, by chat: (fingerprint, text).
#[derive(Default)]
pub struct Choosing(Mutex<HashMap<String, (String, String)>>);

impl Choosing {
    fn put(&self, msg: &Inbound, print: &str, text: &str) {
        let key = Self::key(msg);
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if m.len() >= WAITING && !m.contains_key(&key) {
            m.clear();
        }
        m.insert(key, (print.to_string(), text.to_string()));
    }

    fn take(&self, msg: &Inbound, print: &str) -> Option<String> {
        let key = Self::key(msg);
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match m.get(&key) {
            Some((p, _)) if p == print => m.remove(&key).map(|(_, t)| t),
            _ => None,
        }
    }

    fn key(msg: &Inbound) -> String {
        format!("{}\0{}", msg.chat, msg.user)
    }
}

/// A short fingerprint of the names offered, in order.
fn fingerprint(names: &[&str]) -> String {
    // FNV-1a: stable across processes (a restarted gateway reads the same buttons).
    let mut h: u32 = 0x811c_9dc5;
    for b in names.join("\n").bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("{h:08x}")
}

impl Router {
    /// The sessions the sender may use, and their fingerprint.
    async fn choices(
        &self,
        c: &mut clibot_proto::Client,
        msg: &Inbound,
    ) -> Result<(Vec<v1::Session>, String), tonic::Status> {
        let sessions = c
            .list_sessions(self.req(msg, v1::ListSessionsRequest::default()))
            .await?
            .into_inner()
            .sessions;
        let names: Vec<&str> = sessions
            .iter()
            .take(BUTTONS)
            .map(|s| s.name.as_str())
            .collect();
        let print = fingerprint(&names);
        Ok((sessions, print))
    }

    /// A message for no session: with several to choose from, buttons (the message waits for
    /// the press); otherwise the hint.
    pub(super) async fn choose_session(
        &self,
        c: &mut clibot_proto::Client,
        msg: &Inbound,
        text: &str,
    ) -> Result<Option<String>, tonic::Status> {
        if msg.topics {
            return Ok(Some(self.no_session_hint(c, msg).await?));
        }
        let (sessions, print) = self.choices(c, msg).await?;
        if sessions.len() < 2 {
            return Ok(Some(self.no_session_hint(c, msg).await?));
        }
        self.offer(msg, &sessions, &print, "which session should take it?")
            .await?;
        self.choosing.put(msg, &print, text);
        Ok(None)
    }

    async fn offer(
        &self,
        msg: &Inbound,
        sessions: &[v1::Session],
        print: &str,
        head: &str,
    ) -> Result<(), tonic::Status> {
        let now = crate::ops::health::now_ms();
        let lines: Vec<String> = sessions
            .iter()
            .map(|s| session_line(s, None, now))
            .collect();
        let p = self.parser.prefix();
        let text = format!("{head}\n{}\n(or {p}use NAME)", lines.join("\n"));
        let options: Vec<String> = sessions
            .iter()
            .take(BUTTONS)
            .map(|s| s.name.clone())
            .collect();
        let text = self.platform.redact(&text).into_owned();
        self.platform
            .send_prompt(&msg.chat, &format!("{CHOOSE_CARD}{print}"), &text, &options)
            .await
            .map(|_| ())
            .map_err(|e| tonic::Status::unavailable(format!("cannot offer the sessions: {e:#}")))
    }

    /// A press on one of the buttons: bind the chat, then type the waiting message.
    pub(super) async fn chosen(
        &self,
        c: &mut clibot_proto::Client,
        msg: &Inbound,
        print: &str,
        choice: &str,
    ) -> Result<Option<String>, tonic::Status> {
        let (sessions, now_print) = self.choices(c, msg).await?;
        let picked = choice
            .parse::<usize>()
            .ok()
            .and_then(|n| n.checked_sub(1))
            .and_then(|i| sessions.get(i))
            .filter(|_| now_print == print && choice.parse::<usize>().is_ok_and(|n| n <= BUTTONS));
        let Some(session) = picked else {
            self.offer(
                msg,
                &sessions,
                &now_print,
                "the sessions changed since; which one?",
            )
            .await?;
            if let Some(t) = self.choosing.take(msg, print) {
                self.choosing.put(msg, &now_print, &t);
            }
            return Ok(None);
        };
        let name = session.name.clone();
        let place = self.place(c, msg, &name).await?;
        let Some(text) = self.choosing.take(msg, print) else {
            return Ok(Some(format!(
                "this chat now talks to {name} ({place}); send your message again"
            )));
        };
        let req = v1::SendInputRequest {
            session: name.clone(),
            text,
            submit: true,
            ..Default::default()
        };
        c.send_input(self.req(msg, req)).await?;
        Ok(Some(format!(
            "this chat now talks to {name}; your message went to it"
        )))
    }
}

/// A session as `!!sessions` lists it: its name, CLI, state, directory and branch (`▶`: the
/// one this chat talks to), then how long it has run and what it last did, and when.
pub(super) fn session_line(s: &v1::Session, bound: Option<&str>, now_ms: i64) -> String {
    let mark = if bound == Some(s.name.as_str()) {
        "▶"
    } else {
        " "
    };
    let branch = s
        .worktree
        .as_ref()
        .map(|w| format!(" on {}", w.branch))
        .unwrap_or_default();
    let ago = |ms: i64| super::age_words((now_ms - ms).max(0) / 1000);
    let mut line = format!(
        "{mark} {} ({}) {} — {}{branch}",
        s.name,
        s.cli,
        super::state_name(s.state),
        s.dir
    );
    let mut more = Vec::new();
    if s.created_at_ms > 0 {
        more.push(format!("up {}", ago(s.created_at_ms)));
    }
    let working = s.state == v1::SessionState::Working as i32;
    let last = match (s.last_reply.is_empty() || working, s.last_input.is_empty()) {
        (false, _) => format!("‹ {}", s.last_reply),
        (true, false) => format!("› {}", s.last_input),
        (true, true) => String::new(),
    };
    if !last.is_empty() && s.last_activity_ms > 0 {
        more.push(format!("{} ago: {last}", ago(s.last_activity_ms)));
    }
    if !more.is_empty() {
        line.push_str(&format!("\n    {}", more.join(" · ")));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_press_takes_its_message_only_for_the_list_it_was_drawn_from_and_its_sender() {
        let c = Choosing::default();
        let from = |user: &str| Inbound {
            chat: "chat".into(),
            user: user.into(),
            user_name: user.into(),
            text: String::new(),
            id: String::new(),
            prompt: None,
            group: true,
            topics: false,
            file: None,
            ack: None,
        };
        let a = fingerprint(&["api", "web"]);
        assert_ne!(a, fingerprint(&["api", "web", "db"]));
        assert_eq!(a, fingerprint(&["api", "web"]));
        c.put(&from("ann"), &a, "run the tests");
        assert_eq!(c.take(&from("ann"), "other"), None);
        assert_eq!(
            c.take(&from("bob"), &a),
            None,
            "another member's press types nothing"
        );
        assert_eq!(c.take(&from("ann"), &a).as_deref(), Some("run the tests"));
        assert_eq!(c.take(&from("ann"), &a), None, "taken once");
    }
}
