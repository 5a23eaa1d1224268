//! Envelopes as chat messages: a user's message (in a DM, a channel, a thread) or a press on a
//! prompt's button. Users are keyed `TEAM:USER` (Slack's user ids are unique only within a
//! workspace); channels are groups, DMs private chats; with `topics`, a thread in a channel is
//! the chat `CHANNEL/THREAD_TS`.
//!
//! What users type arrives in Slack's markup: `&lt;` for `<`, `<https://x|x>` for a link,
//! `<@U1>` for a mention. It is turned back into what they typed, so that `echo a > b` reaches
//! the CLI as typed; the bot's own mention is dropped.

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::socket::Ack;
use crate::platforms::recent::Recent;
use crate::platforms::{Attachment, Inbound};

/// Who the bot is, and how chats are keyed.
pub struct Ingress {
    pub team: String,
    pub bot_user: String,
    pub topics: bool,
    pub prefix: String,
    pub recent: Recent,
    pub queue: mpsc::Sender<Inbound>,
}

fn s<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    path.iter()
        .fold(v, |v, k| &v[*k])
        .as_str()
        .unwrap_or_default()
}

impl Ingress {
    /// Reads one envelope; says when to acknowledge it.
    pub fn handle(&mut self, envelope: &Value) -> Ack {
        let payload = &envelope["payload"];
        match s(envelope, &["type"]) {
            "events_api" => self.event(payload),
            "interactive" => {
                self.press(payload);
                Ack::Now
            }
            // No slash command is registered; anything else is not for the gateway.
            _ => Ack::Now,
        }
    }

    fn event(&mut self, payload: &Value) -> Ack {
        let e = &payload["event"];
        if s(e, &["type"]) != "message" {
            return Ack::Now;
        }
        // Edits, deletions, joins and every bot's messages (the gateway's own among them).
        if !matches!(s(e, &["subtype"]), "" | "file_share" | "thread_broadcast")
            || !s(e, &["bot_id"]).is_empty()
        {
            return Ack::Now;
        }
        let (channel, user, ts) = (s(e, &["channel"]), s(e, &["user"]), s(e, &["ts"]));
        if channel.is_empty() || user.is_empty() || ts.is_empty() || user == self.bot_user {
            return Ack::Now;
        }
        let team = match s(e, &["team"]) {
            "" => s(payload, &["team_id"]),
            t => t,
        };
        let team = if team.is_empty() { &self.team } else { team };
        let text = typed(s(e, &["text"]), &self.bot_user);
        let file = e["files"]
            .as_array()
            .and_then(|f| f.first())
            .and_then(attachment);
        if text.is_empty() && file.is_none() {
            return Ack::Now;
        }
        let group = s(e, &["channel_type"]) != "im";
        let thread = s(e, &["thread_ts"]);
        let (chat, topics) = self.chat(channel, thread, ts, group);
        let id = format!("{channel}/{ts}");
        let event_id = s(payload, &["event_id"]).to_string();
        if self.recent.seen(&[&event_id, &id]) {
            return Ack::Now;
        }
        let (done, handed) = oneshot::channel();
        let user = format!("{team}:{user}");
        let msg = Inbound {
            chat,
            user_name: user.clone(),
            user,
            text,
            id: id.clone(),
            prompt: None,
            group,
            topics,
            file,
            ack: Some(done),
        };
        match self.queue.try_send(msg) {
            Ok(()) => Ack::After(handed),
            Err(mpsc::error::TrySendError::Full(_)) => {
                // Slack pushes it again later; it must be taken then.
                self.recent.forget(&[&event_id, &id]);
                Ack::Not
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Ack::Not,
        }
    }

    /// The chat key of a message in `channel`: with topics, a thread's own key in a channel,
    /// and the channel's main part marked as the place to choose sessions.
    fn chat(&self, channel: &str, thread: &str, ts: &str, group: bool) -> (String, bool) {
        let in_thread = !thread.is_empty() && thread != ts;
        match (self.topics && group, in_thread) {
            (true, true) => (crate::platforms::topic::key(channel, thread), false),
            (true, false) => (channel.to_string(), true),
            (false, _) => (channel.to_string(), false),
        }
    }

    /// A `block_actions` press on one of the gateway's buttons.
    fn press(&mut self, p: &Value) {
        if s(p, &["type"]) != "block_actions" {
            return;
        }
        let Some(action) = p["actions"].as_array().and_then(|a| a.first()) else {
            return;
        };
        let Some((prompt, choice)) = super::blocks::pressed(action) else {
            return;
        };
        let user = s(p, &["user", "id"]);
        let team = match s(p, &["user", "team_id"]) {
            "" => s(p, &["team", "id"]),
            t => t,
        };
        let channel = match s(p, &["channel", "id"]) {
            "" => s(p, &["container", "channel_id"]),
            c => c,
        };
        if user.is_empty() || channel.is_empty() {
            return;
        }
        let thread = match s(p, &["container", "thread_ts"]) {
            "" => s(p, &["message", "thread_ts"]),
            t => t,
        };
        let ts = s(p, &["container", "message_ts"]);
        // DMs' ids start with D; channels' with C, private ones' with G.
        let group = !channel.starts_with('D');
        let (chat, _) = self.chat(channel, thread, ts, group);
        let id = match s(action, &["action_ts"]) {
            "" => s(p, &["trigger_id"]),
            a => a,
        };
        if !id.is_empty() && self.recent.seen(&[&format!("press/{id}")]) {
            return;
        }
        let user = format!("{}:{user}", if team.is_empty() { &self.team } else { team });
        let msg = Inbound {
            chat,
            user_name: user.clone(),
            user,
            text: format!("{}answer {choice}", self.prefix),
            id: format!("press/{id}"),
            prompt: Some(prompt),
            group,
            topics: false,
            file: None,
            ack: None,
        };
        if self.queue.try_send(msg).is_err() {
            eprintln!(
                "clibot-gateway: a Slack button press was dropped (the gateway is overloaded); press it again"
            );
        }
    }
}

/// A file a message carries, as an attachment the bot token can fetch.
fn attachment(f: &Value) -> Option<Attachment> {
    let url = match s(f, &["url_private_download"]) {
        "" => s(f, &["url_private"]),
        u => u,
    };
    if url.is_empty() {
        return None;
    }
    let mime = s(f, &["mimetype"]);
    let kind = if s(f, &["subtype"]) == "slack_audio" || mime.starts_with("audio/") {
        "voice"
    } else if mime.starts_with("image/") {
        "photo"
    } else {
        "document"
    };
    let name = match s(f, &["name"]) {
        "" => "file",
        n => n,
    };
    Some(Attachment {
        id: url.to_string(),
        name: name.to_string(),
        size: f["size"].as_u64().unwrap_or(0),
        kind,
    })
}

/// What the user typed, from Slack's markup: the bot's mention dropped, other mentions and
/// links as they read, the three escapes undone (last, so `&amp;lt;` stays `&lt;`).
pub fn typed(text: &str, bot_user: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('>') else {
            out.push_str(&rest[open..]);
            rest = "";
            break;
        };
        let inner = &after[..close];
        let (target, label) = match inner.split_once('|') {
            Some((t, l)) => (t, Some(l)),
            None => (inner, None),
        };
        if let Some(user) = target.strip_prefix('@') {
            if user != bot_user {
                out.push('@');
                out.push_str(label.unwrap_or(user));
            }
        } else if let Some(ch) = target.strip_prefix('#') {
            out.push('#');
            out.push_str(label.unwrap_or(ch));
        } else if let Some(special) = target.strip_prefix('!') {
            out.push('@');
            out.push_str(label.unwrap_or(special));
        } else {
            // A link: what was typed is its label when there is one (Slack links `x.com` as
            // `<http://x.com|x.com>`), else the URL.
            out.push_str(label.unwrap_or(target));
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ingress(topics: bool) -> (Ingress, mpsc::Receiver<Inbound>) {
        let (queue, rx) = mpsc::channel(4);
        (
            Ingress {
                team: "T1".into(),
                bot_user: "UBOT".into(),
                topics,
                prefix: "!!".into(),
                recent: Recent::default(),
                queue,
            },
            rx,
        )
    }

    fn message(channel: &str, kind: &str, text: &str, ts: &str) -> Value {
        json!({
            "envelope_id": "e1",
            "type": "events_api",
            "payload": {
                "team_id": "T1",
                "event_id": format!("Ev{ts}"),
                "event": {
                    "type": "message", "channel": channel, "channel_type": kind,
                    "user": "U7", "team": "T1", "text": text, "ts": ts,
                },
            },
        })
    }

    #[test]
    fn what_users_type_comes_back_as_typed() {
        assert_eq!(
            typed("<@UBOT> echo a &gt; b &amp;&amp; c &lt; d", "UBOT"),
            "echo a > b && c < d"
        );
        assert_eq!(
            typed(
                "see <https://x.com/a?b=1&amp;c=2> and <http://y.org|y.org> <@U2|ann> <#C1|dev> <!here>",
                "UBOT"
            ),
            "see https://x.com/a?b=1&c=2 and y.org @ann #dev @here"
        );
        assert_eq!(typed("a < b unclosed", "UBOT"), "a < b unclosed");
        assert_eq!(typed("&amp;lt;", "UBOT"), "&lt;");
    }

    #[test]
    fn a_dm_is_private_a_channel_a_group_and_repeats_are_taken_once() {
        let (mut i, mut rx) = ingress(false);
        assert!(matches!(
            i.handle(&message("D1", "im", "hi", "1.1")),
            Ack::After(_)
        ));
        let m = rx.try_recv().expect("handed on");
        assert_eq!(
            (m.chat.as_str(), m.user.as_str(), m.group, m.id.as_str()),
            ("D1", "T1:U7", false, "D1/1.1")
        );
        assert!(matches!(
            i.handle(&message("D1", "im", "hi", "1.1")),
            Ack::Now
        ));
        assert!(rx.try_recv().is_err(), "a repeat is not handed on");
        i.handle(&message("C1", "channel", "<@UBOT> hi", "1.2"));
        let m = rx.try_recv().expect("handed on");
        assert!(m.group && m.text == "hi");
        // The same user id in another workspace (a shared channel) is another user.
        let mut other = message("C1", "channel", "hi", "1.3");
        other["payload"]["event"]["team"] = json!("T2");
        i.handle(&other);
        assert_eq!(rx.try_recv().expect("handed on").user, "T2:U7");
    }

    #[test]
    fn bots_edits_and_the_gateways_own_messages_are_ignored() {
        let (mut i, mut rx) = ingress(false);
        let mut own = message("C1", "channel", "x", "2.1");
        own["payload"]["event"]["bot_id"] = json!("B1");
        let mut edit = message("C1", "channel", "x", "2.2");
        edit["payload"]["event"]["subtype"] = json!("message_changed");
        let mut me = message("C1", "channel", "x", "2.3");
        me["payload"]["event"]["user"] = json!("UBOT");
        for e in [own, edit, me] {
            assert!(matches!(i.handle(&e), Ack::Now));
        }
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn with_topics_a_thread_is_a_chat_of_its_own() {
        let (mut i, mut rx) = ingress(true);
        let mut threaded = message("C1", "channel", "hi", "3.2");
        threaded["payload"]["event"]["thread_ts"] = json!("3.1");
        i.handle(&threaded);
        i.handle(&message("C1", "channel", "hi", "3.3"));
        let a = rx.try_recv().expect("thread");
        let b = rx.try_recv().expect("main");
        assert_eq!((a.chat.as_str(), a.topics), ("C1/3.1", false));
        assert_eq!((b.chat.as_str(), b.topics), ("C1", true));
    }

    #[test]
    fn a_full_queue_leaves_the_event_for_slack_to_push_again() {
        let (mut i, _rx) = ingress(false);
        for n in 0..4 {
            i.handle(&message("D1", "im", "x", &format!("4.{n}")));
        }
        assert!(matches!(
            i.handle(&message("D1", "im", "x", "4.9")),
            Ack::Not
        ));
    }

    #[test]
    fn a_press_answers_its_prompt_and_a_foreign_one_nothing() {
        let (mut i, mut rx) = ingress(false);
        let press = |value: &str| {
            json!({
                "envelope_id": "e2", "type": "interactive",
                "payload": {
                    "type": "block_actions",
                    "user": { "id": "U7", "team_id": "T1" },
                    "channel": { "id": "D1" },
                    "container": { "message_ts": "5.1", "channel_id": "D1" },
                    "actions": [{ "value": value, "action_ts": format!("at-{value}") }],
                },
            })
        };
        assert!(matches!(i.handle(&press("a:p9:2")), Ack::Now));
        let m = rx.try_recv().expect("a press");
        assert_eq!(
            (m.text.as_str(), m.prompt.as_deref(), m.user.as_str()),
            ("!!answer 2", Some("p9"), "T1:U7")
        );
        assert!(!m.group);
        i.handle(&press("other"));
        assert!(rx.try_recv().is_err());
    }
}
