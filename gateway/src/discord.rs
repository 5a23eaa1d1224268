//! Discord through serenity's gateway client (an outbound websocket: works behind NAT).
//! Messages in the bot's DMs and channels become chat messages; replies are chunked at 2000
//! characters; prompts carry buttons; long output goes as a file; rate limits are waited out.
//!
//! With a custom API URL (a test fake, or a proxy) serenity's own rate limiter has to be off
//! (serenity-rs/serenity#1739), so a 429 is handled here: wait and send again, never drop.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use clibot_gateway::chunk::{ChunkOptions, chunk};
use serenity::all::{
    ChannelId, ClientBuilder, Context, CreateActionRow, CreateAttachment, CreateButton,
    CreateInteractionResponse, CreateMessage, EventHandler, GatewayIntents, Http, HttpBuilder,
    Interaction, Message,
};
use tokio::sync::mpsc;

use crate::platform::{Inbound, Platform};

pub struct Discord {
    http: Arc<Http>,
    bot_id: u64,
    _lock: std::fs::File,
}

struct Handler {
    tx: mpsc::Sender<Inbound>,
    prefix: String,
}

#[async_trait]
impl EventHandler for Handler {
    async fn message(&self, _ctx: Context, msg: Message) {
        if msg.author.bot {
            return;
        }
        let inbound = Inbound {
            chat: msg.channel_id.get().to_string(),
            user: msg.author.id.get().to_string(),
            user_name: msg.author.name.clone(),
            text: msg.content.clone(),
            id: msg.id.get().to_string(),
            prompt: None,
            group: msg.guild_id.is_some(),
            ack: None,
        };
        let _ = self.tx.send(inbound).await;
    }

    async fn interaction_create(&self, ctx: Context, interaction: Interaction) {
        let Interaction::Component(c) = interaction else {
            return;
        };
        // Interactions must be answered within 3 s; the answer itself goes through the router.
        let _ = c
            .create_response(&ctx.http, CreateInteractionResponse::Acknowledge)
            .await;
        if let Some((prompt, choice)) = crate::shown::parse_button(&c.data.custom_id) {
            let inbound = Inbound {
                chat: c.channel_id.get().to_string(),
                user: c.user.id.get().to_string(),
                user_name: c.user.name.clone(),
                text: format!("{}answer {choice}", self.prefix),
                id: String::new(),
                prompt: Some(prompt),
                group: c.guild_id.is_some(),
                ack: None,
            };
            let _ = self.tx.send(inbound).await;
        }
    }
}

impl Discord {
    /// Connects (REST and gateway) and starts receiving; messages arrive on the channel.
    pub async fn start(
        token: &str,
        api_url: Option<&str>,
        prefix: &str,
        lock_dir: &std::path::Path,
    ) -> anyhow::Result<(Discord, mpsc::Receiver<Inbound>)> {
        let mut hb = HttpBuilder::new(token);
        if let Some(url) = api_url {
            hb = hb
                .proxy(url.trim_end_matches('/'))
                .ratelimiter_disabled(true);
        }
        let http = hb.build();
        let me = http
            .get_current_user()
            .await
            .map_err(|e| anyhow::anyhow!("Discord did not accept the bot token: {e}"))?;
        let lock = crate::platform::single_poller(lock_dir, &format!("discord-{}", me.id.get()))?;
        let (tx, rx) = mpsc::channel(16);
        let intents = GatewayIntents::DIRECT_MESSAGES
            | GatewayIntents::GUILD_MESSAGES
            | GatewayIntents::MESSAGE_CONTENT;
        let mut client = ClientBuilder::new_with_http(http, intents)
            .event_handler(Handler {
                tx,
                prefix: prefix.to_string(),
            })
            .await
            .map_err(|e| anyhow::anyhow!("cannot start the Discord client: {e}"))?;
        let http = client.http.clone();
        tokio::spawn(async move {
            if let Err(e) = client.start().await {
                eprintln!("clibot-gateway: the Discord gateway connection ended: {e}");
                std::process::exit(1);
            }
        });
        Ok((
            Discord {
                http,
                bot_id: me.id.get(),
                _lock: lock,
            },
            rx,
        ))
    }

    fn channel(chat: &str) -> anyhow::Result<ChannelId> {
        let id: u64 = chat
            .parse()
            .map_err(|_| anyhow::anyhow!("not a Discord channel id: {chat}"))?;
        Ok(ChannelId::new(id))
    }

    /// Sends one message, waiting out rate limits; returns its id.
    async fn send_message(
        &self,
        channel: ChannelId,
        make: impl Fn() -> CreateMessage,
    ) -> anyhow::Result<String> {
        let mut wait = Duration::from_millis(500);
        loop {
            match channel.send_message(&self.http, make()).await {
                Ok(m) => return Ok(m.id.get().to_string()),
                Err(serenity::Error::Http(e))
                    if e.status_code().is_some_and(|s| s.as_u16() == 429) =>
                {
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(10));
                }
                Err(e) => return Err(classify(e)),
            }
        }
    }
}

#[async_trait]
impl Platform for Discord {
    fn name(&self) -> &str {
        "discord"
    }

    fn consumer(&self) -> String {
        format!("discord:{}", self.bot_id)
    }

    fn is_local(&self) -> bool {
        false
    }

    fn max_message(&self) -> usize {
        2000
    }

    async fn send(&self, chat: &str, text: &str) -> anyhow::Result<()> {
        let channel = Self::channel(chat)?;
        for part in chunk(text, &ChunkOptions::discord()) {
            self.send_message(channel, || CreateMessage::new().content(part.clone()))
                .await?;
        }
        Ok(())
    }

    async fn remove_buttons(&self, chat: &str, message: &str) -> anyhow::Result<()> {
        let channel = Self::channel(chat)?;
        let mid = serenity::all::MessageId::new(
            message
                .parse()
                .map_err(|_| anyhow::anyhow!("not a Discord message id: {message}"))?,
        );
        channel
            .edit_message(
                &self.http,
                mid,
                serenity::all::EditMessage::new().components(vec![]),
            )
            .await
            .map_err(classify)?;
        Ok(())
    }

    async fn send_prompt(
        &self,
        chat: &str,
        prompt_id: &str,
        text: &str,
        options: &[String],
    ) -> anyhow::Result<Option<String>> {
        let channel = Self::channel(chat)?;
        let parts = chunk(text, &ChunkOptions::discord());
        let n = parts.len();
        let mut with_buttons = None;
        for (i, part) in parts.into_iter().enumerate() {
            let last = i + 1 == n;
            let id = self.send_message(channel, || {
                let mut m = CreateMessage::new().content(part.clone());
                if last {
                    // At most 5 buttons per row and 5 rows.
                    let rows: Vec<CreateActionRow> = options
                        .iter()
                        .enumerate()
                        .take(25)
                        .map(|(i, o)| {
                            let label: String =
                                format!("{}. {o}", i + 1).chars().take(80).collect();
                            CreateButton::new(crate::shown::button_data(prompt_id, i + 1))
                                .label(label)
                        })
                        .collect::<Vec<_>>()
                        .chunks(5)
                        .map(|b| CreateActionRow::Buttons(b.to_vec()))
                        .collect();
                    m = m.components(rows);
                }
                m
            })
            .await?;
            if last {
                with_buttons = Some(id);
            }
        }
        Ok(with_buttons)
    }

    async fn send_file(
        &self,
        chat: &str,
        name: &str,
        text: &str,
        summary: &str,
    ) -> anyhow::Result<()> {
        let channel = Self::channel(chat)?;
        let summary: String = summary.chars().take(2000).collect();
        self.send_message(channel, || {
            CreateMessage::new()
                .content(summary.clone())
                .add_file(CreateAttachment::bytes(text.as_bytes().to_vec(), name))
        })
        .await
        .map(|_| ())
    }

    async fn status(&self, chat: &str, id: Option<&str>, text: &str) -> Option<String> {
        let channel = Self::channel(chat).ok()?;
        match id {
            None => channel
                .send_message(&self.http, CreateMessage::new().content(text))
                .await
                .ok()
                .map(|m| m.id.get().to_string()),
            Some(id) => {
                let mid = serenity::all::MessageId::new(id.parse().ok()?);
                let _ = channel
                    .edit_message(
                        &self.http,
                        mid,
                        serenity::all::EditMessage::new().content(text),
                    )
                    .await;
                Some(id.to_string())
            }
        }
    }

    async fn typing(&self, chat: &str) {
        if let Ok(channel) = Self::channel(chat) {
            let _ = channel.broadcast_typing(&self.http).await;
        }
    }
}

/// Errors that retrying cannot fix — the bot lost access to the channel (403: Missing Access,
/// Missing Permissions, cannot message this user), or the channel is gone (404) — become
/// [`Gone`](crate::platform::Gone); everything else stays a transient failure.
fn classify(e: serenity::Error) -> anyhow::Error {
    if let serenity::Error::Http(h) = &e
        && let Some(code) = h.status_code().map(|s| s.as_u16())
        && (code == 403 || code == 404)
    {
        return anyhow::Error::new(crate::platform::Gone(format!("Discord answered {code}: {e}")));
    }
    e.into()
}
