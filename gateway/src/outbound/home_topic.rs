//! Sessions started on the machine go to the platform's default chat until a chat binds them
//! (`[gateway.PLATFORM] default_chat`). Where that chat has topics (`topics = true`, and on
//! Telegram the admin's private chat with topics, or a forum), each such session gets a topic
//! of its own there the first time it has something to say, exactly as a session started from
//! that chat would: the topic is bound to it in the daemon (as the machine's user, whose
//! session it is), so the gateway keeps nothing and a restarted gateway finds it again.

use std::collections::HashSet;
use std::sync::Arc;

use clibot_proto::v1;

use crate::platforms::Platform;

/// Chats where opening a topic failed (they have none): asked once per gateway process.
#[derive(Default)]
pub struct HomeTopics {
    refused: HashSet<String>,
}

impl HomeTopics {
    /// The chats event `ev` goes to, with the default chat `home` replaced by a topic of its
    /// own for the event's session, opened and bound now, when `home` is among them (the
    /// session has no chat of its own yet) and topics can be opened there. A lost daemon is
    /// the caller's to handle; any other failure leaves the default chat as it was.
    pub async fn route(
        &mut self,
        c: &mut clibot_proto::Client,
        platform: &Arc<dyn Platform>,
        home: &str,
        ev: &v1::Event,
        mut chats: Vec<v1::Binding>,
    ) -> Result<Vec<v1::Binding>, tonic::Status> {
        let Some(i) = chats.iter().position(|b| b.chat == home) else {
            return Ok(chats);
        };
        if !platform.topics() || self.refused.contains(home) || ev.seq == 0 {
            return Ok(chats);
        }
        let topic = match platform.open_topic(home, &ev.session).await {
            Ok(t) => t,
            Err(e) => {
                eprintln!(
                    "clibot-gateway: {}: sessions started on the machine go to the default chat itself: no topic could be opened there ({e:#})",
                    platform.name()
                );
                self.refused.insert(home.to_string());
                return Ok(chats);
            }
        };
        let req = v1::SetBindingRequest {
            platform: platform.name().into(),
            chat: topic.clone(),
            session: ev.session.clone(),
            group: chats[i].group,
            // What the session said while the topic was being opened goes there too.
            from_seq: ev.seq,
        };
        if let Err(s) = c.set_binding(req).await {
            if clibot_gateway::daemon_lost(&s) {
                return Err(s);
            }
            eprintln!(
                "clibot-gateway: {}: the topic opened for {} was not bound ({}); its events go to the default chat",
                platform.name(),
                ev.session,
                s.message()
            );
            return Ok(chats);
        }
        let intro = format!(
            "▶ {} (started on the machine): what you write here goes to it",
            ev.session
        );
        if let Err(e) = platform.send(&topic, &intro).await {
            eprintln!("clibot-gateway: cannot write in the new topic {topic}: {e:#}");
        }
        // This event, and what follows (through the binding), goes to the topic.
        chats[i] = v1::Binding {
            chat: topic,
            cursor: ev.seq - 1,
            parts: 0,
            shown_prompt: String::new(),
            shown_message: String::new(),
            ..chats[i].clone()
        };
        Ok(chats)
    }
}
