//! Telegram through teloxide, by long polling (`getUpdates`): outbound connections only, so it
//! works behind NAT. The update offset advances only after a message was handed to the daemon,
//! so a gateway killed in between gets the same update again instead of losing it. Replies go as
//! HTML (with a plain-text retry when Telegram rejects the markup), chunked at Telegram's limit;
//! a 429 is waited out within each message's [`Budget`](crate::platforms::ratelimit::Budget)
//! (then the message fails with `RateLimited`, and its sender tells the chat later); prompts
//! carry one-tap buttons.

use std::time::Duration;

use async_trait::async_trait;
use clibot_gateway::telegram_html::render_chunks_with_plain;
use teloxide::RequestError;
use teloxide::payloads::{
    GetUpdatesSetters, SendDocumentSetters, SendMessageSetters, SendPhotoSetters,
};
use teloxide::prelude::Requester;
use teloxide::types::{
    AllowedUpdate, ChatAction, ChatId, InlineKeyboardButton, InlineKeyboardMarkup, InputFile,
    ParseMode, UpdateKind,
};
use tokio::sync::{mpsc, oneshot};

use crate::platforms::ratelimit::Budget;
use crate::platforms::{Attachment, Inbound, Platform, Receiving};
use crate::progress::Progress;

pub struct Telegram {
    bot: teloxide::Bot,
    bot_id: u64,
    prefix: String,
    /// Held while this process polls the bot: a second gateway for it is refused.
    _lock: std::sync::Arc<std::fs::File>,
}

/// Telegram's limit, in UTF-16 units of the rendered text.
const LIMIT: usize = 4096;

impl Telegram {
    /// Connects (getMe) and starts polling; messages arrive on the returned channel, each with
    /// an acknowledgement the caller fires once the daemon has it.
    pub async fn start(
        token: &str,
        api_url: Option<&str>,
        prefix: &str,
        lock_dir: &std::path::Path,
        recv: &Receiving,
    ) -> anyhow::Result<(Telegram, mpsc::Receiver<Inbound>)> {
        // teloxide's default HTTP client gives up after 17 s, which a 30 s long poll exceeds
        // whenever the chat is quiet: give the client room for the poll.
        let client = teloxide::net::default_reqwest_settings()
            .timeout(Duration::from_secs(45))
            .build()
            .map_err(|e| anyhow::anyhow!("cannot build the HTTP client: {e}"))?;
        let mut bot = teloxide::Bot::with_client(token, client);
        if let Some(url) = api_url {
            bot = bot.set_api_url(
                url.parse()
                    .map_err(|e| anyhow::anyhow!("api_url {url:?}: {e}"))?,
            );
        }
        let me = bot.get_me().await.map_err(|e| match &e {
            teloxide::RequestError::Network(_) | teloxide::RequestError::Io(_) => {
                anyhow::anyhow!(crate::platforms::reach::unreachable(
                    "Telegram",
                    api_url,
                    "https://api.telegram.org",
                    &clibot_proto::describe(&e),
                ))
            }
            _ => anyhow::anyhow!("Telegram did not accept the bot token (getMe): {e}"),
        })?;
        let lock =
            crate::platforms::single_poller(recv, lock_dir, &format!("telegram-{}", me.id.0))?;
        let (tx, rx) = mpsc::channel(16);
        recv.spawn(poll(
            bot.clone(),
            tx,
            prefix.to_string(),
            recv.progress.clone(),
        ));
        Ok((
            Telegram {
                bot,
                bot_id: me.id.0,
                prefix: prefix.to_string(),
                _lock: lock,
            },
            rx,
        ))
    }

    async fn send_one(
        &self,
        chat: ChatId,
        html: &str,
        plain: &str,
        buttons: Option<InlineKeyboardMarkup>,
    ) -> anyhow::Result<String> {
        let mut use_html = true;
        let mut budget = Budget::new("Telegram");
        loop {
            let text = if use_html { html } else { plain };
            let mut req = self.bot.send_message(chat, text);
            if use_html {
                req = req.parse_mode(ParseMode::Html);
            }
            if let Some(b) = &buttons {
                req = req.reply_markup(b.clone());
            }
            match req.await {
                Ok(m) => return Ok(m.id.0.to_string()),
                Err(RequestError::RetryAfter(d)) => {
                    // Flood control: wait as told, then send the same message again (within
                    // the message's budget).
                    budget.wait(d.duration()).await?;
                }
                Err(RequestError::Api(e))
                    if use_html && e.to_string().to_lowercase().contains("parse entities") =>
                {
                    use_html = false;
                }
                Err(e) => return Err(classify(e)),
            }
        }
    }
}

/// Long polling. Each update is handed over with a oneshot; the next `getUpdates` (which is
/// what confirms updates to Telegram) is only sent after the previous batch was handled. One
/// `getUpdates` and the handling of what it returned make a cycle of the watchdog
/// ([`Progress`]): a handler that holds the batch holds the next poll, and after
/// `[gateway] stall_after` the gateway restarts the loop (the unconfirmed update comes again,
/// and the daemon's claim keeps it from being acted on twice). The long poll waits at most a
/// third of that bound, so a quiet bot still completes cycles.
async fn poll(bot: teloxide::Bot, tx: mpsc::Sender<Inbound>, prefix: String, progress: Progress) {
    let mut offset: i32 = 0;
    let mut backoff = Duration::from_millis(500);
    let wait = progress.poll_timeout_secs();
    loop {
        let updates = bot
            .get_updates()
            .offset(offset)
            .timeout(wait)
            .allowed_updates(vec![AllowedUpdate::Message, AllowedUpdate::CallbackQuery])
            .await;
        let updates = match updates {
            Ok(u) => {
                backoff = Duration::from_millis(500);
                u
            }
            Err(RequestError::Api(teloxide::ApiError::TerminatedByOtherGetUpdates)) => {
                // Ending the poll closes the message channel: the gateway connects again
                // later (with backoff) and the other platforms go on meanwhile.
                eprintln!(
                    "clibot-gateway: another gateway is polling this bot token (one poller per token); stopping this poll"
                );
                return;
            }
            Err(RequestError::RetryAfter(d)) => {
                tokio::time::sleep(d.duration()).await;
                continue;
            }
            Err(e) => {
                eprintln!("clibot-gateway: Telegram getUpdates failed ({e}); retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(30));
                continue;
            }
        };
        for u in updates {
            let next = u.id.0 as i32 + 1;
            let msg = match u.kind {
                UpdateKind::Message(m) => {
                    let file = attachment(&m);
                    let text = m.text().or(m.caption()).unwrap_or_default();
                    let (Some(from), true) = (m.from.as_ref(), !text.is_empty() || file.is_some())
                    else {
                        offset = next;
                        continue;
                    };
                    Some(Inbound {
                        chat: m.chat.id.0.to_string(),
                        user: from.id.0.to_string(),
                        user_name: from.first_name.clone(),
                        text: text.to_string(),
                        id: m.id.0.to_string(),
                        prompt: None,
                        group: !m.chat.is_private(),
                        file,
                        ack: None,
                    })
                }
                UpdateKind::CallbackQuery(q) => {
                    // Stop the button's spinner at once; the answer goes through the router.
                    let _ = bot.answer_callback_query(q.id.clone()).await;
                    match (
                        q.data.as_deref().and_then(crate::shown::parse_button),
                        q.message.as_ref(),
                    ) {
                        (Some((prompt, choice)), Some(m)) => Some(Inbound {
                            chat: m.chat().id.0.to_string(),
                            user: q.from.id.0.to_string(),
                            user_name: q.from.first_name.clone(),
                            text: format!("{prefix}answer {choice}"),
                            // The query's id: a press handed over again is claimed once.
                            id: q.id.to_string(),
                            prompt: Some(prompt),
                            group: !m.chat().is_private(),
                            file: None,
                            ack: None,
                        }),
                        _ => None,
                    }
                }
                _ => None,
            };
            if let Some(mut msg) = msg {
                let (done_tx, done_rx) = oneshot::channel();
                msg.ack = Some(done_tx);
                if tx.send(msg).await.is_err() {
                    return;
                }
                // Handed to the daemon (or refused with a reply): only now may Telegram forget
                // it. Dropped unhandled (the loop is being restarted): not confirmed.
                if done_rx.await.is_err() {
                    return;
                }
            }
            offset = next;
        }
        progress.cycle();
    }
}

impl Telegram {
    /// Sends `data` as a document (or, with `photo`, a picture) with a caption, waiting out
    /// rate limits within the budget.
    async fn upload(
        &self,
        chat: &str,
        name: &str,
        data: &[u8],
        caption: &str,
        photo: bool,
    ) -> anyhow::Result<()> {
        let chat_id = ChatId(
            chat.parse()
                .map_err(|_| anyhow::anyhow!("not a Telegram chat id: {chat}"))?,
        );
        let caption: String = caption.chars().take(1024).collect();
        let mut budget = Budget::new("Telegram");
        loop {
            let file = InputFile::memory(data.to_vec()).file_name(name.to_string());
            let sent = if photo {
                self.bot
                    .send_photo(chat_id, file)
                    .caption(caption.clone())
                    .await
                    .map(|_| ())
            } else {
                self.bot
                    .send_document(chat_id, file)
                    .caption(caption.clone())
                    .await
                    .map(|_| ())
            };
            match sent {
                Ok(()) => return Ok(()),
                Err(RequestError::RetryAfter(d)) => budget.wait(d.duration()).await?,
                Err(e) => return Err(classify(e)),
            }
        }
    }
}

/// The photo (its largest size), document or voice note a message carries.
fn attachment(m: &teloxide::types::Message) -> Option<Attachment> {
    if let Some(p) = m
        .photo()
        .and_then(|sizes| sizes.iter().max_by_key(|p| p.width * p.height))
    {
        return Some(Attachment {
            id: p.file.id.0.clone(),
            name: "photo.jpg".into(),
            size: u64::from(p.file.size),
            kind: "photo",
        });
    }
    if let Some(d) = m.document() {
        return Some(Attachment {
            id: d.file.id.0.clone(),
            name: d.file_name.clone().unwrap_or_else(|| "file".into()),
            size: u64::from(d.file.size),
            kind: "document",
        });
    }
    m.voice().map(|v| Attachment {
        id: v.file.id.0.clone(),
        name: "voice.ogg".into(),
        size: u64::from(v.file.size),
        kind: "voice",
    })
}

#[async_trait]
impl Platform for Telegram {
    fn name(&self) -> &str {
        "telegram"
    }

    fn consumer(&self) -> String {
        format!("telegram:{}", self.bot_id)
    }

    fn max_message(&self) -> usize {
        LIMIT
    }

    /// What the Bot API takes in `sendDocument` with room to spare (its limit is 50 MB).
    fn max_file(&self) -> usize {
        20 << 20
    }

    async fn send(&self, chat: &str, text: &str) -> anyhow::Result<()> {
        let chat = ChatId(
            chat.parse()
                .map_err(|_| anyhow::anyhow!("not a Telegram chat id: {chat}"))?,
        );
        for c in render_chunks_with_plain(text, LIMIT) {
            self.send_one(chat, &c.html, &c.plain, None).await?;
        }
        Ok(())
    }

    async fn remove_buttons(&self, chat: &str, message: &str) -> anyhow::Result<()> {
        let (chat_id, mid) = message_ids(chat, message)?;
        // Without a reply_markup the inline keyboard is removed.
        match self.bot.edit_message_reply_markup(chat_id, mid).await {
            Ok(_) => Ok(()),
            // Already without buttons: what was wanted.
            Err(RequestError::Api(e)) if e.to_string().contains("not modified") => Ok(()),
            Err(e) => Err(classify(e)),
        }
    }

    async fn delete_message(&self, chat: &str, message: &str) -> anyhow::Result<bool> {
        let (chat_id, mid) = message_ids(chat, message)?;
        // A bot may delete what users send it in private chats, and in groups where it is an
        // admin with "delete messages"; elsewhere Telegram refuses.
        match self.bot.delete_message(chat_id, mid).await {
            Ok(_) => Ok(true),
            Err(RequestError::Api(e)) => {
                eprintln!("clibot-gateway: Telegram did not delete a message in {chat}: {e}");
                Ok(false)
            }
            Err(e) => Err(classify(e)),
        }
    }

    async fn send_file(
        &self,
        chat: &str,
        name: &str,
        text: &str,
        summary: &str,
    ) -> anyhow::Result<()> {
        self.upload(chat, name, text.as_bytes(), summary, false)
            .await
    }

    async fn download(&self, file: &Attachment, max: u64) -> anyhow::Result<Vec<u8>> {
        use teloxide::net::Download;
        let f = self
            .bot
            .get_file(teloxide::types::FileId(file.id.clone()))
            .await
            .map_err(classify)?;
        if u64::from(f.meta.size) > max {
            anyhow::bail!("it has {} bytes, more than {max}", f.meta.size);
        }
        let mut data: Vec<u8> = Vec::new();
        self.bot
            .download_file(&f.path, &mut data)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        if data.len() as u64 > max {
            anyhow::bail!("it has more than {max} bytes");
        }
        Ok(data)
    }

    async fn send_bytes(
        &self,
        chat: &str,
        name: &str,
        data: &[u8],
        caption: &str,
    ) -> anyhow::Result<()> {
        self.upload(chat, name, data, caption, false).await
    }

    async fn send_image(
        &self,
        chat: &str,
        name: &str,
        png: &[u8],
        caption: &str,
    ) -> anyhow::Result<()> {
        self.upload(chat, name, png, caption, true).await
    }

    async fn status(&self, chat: &str, id: Option<&str>, text: &str) -> Option<String> {
        let chat_id = ChatId(chat.parse().ok()?);
        match id {
            None => self
                .bot
                .send_message(chat_id, text)
                .await
                .ok()
                .map(|m| m.id.0.to_string()),
            Some(id) => {
                let mid = teloxide::types::MessageId(id.parse().ok()?);
                let _ = self.bot.edit_message_text(chat_id, mid, text).await;
                Some(id.to_string())
            }
        }
    }

    async fn typing(&self, chat: &str) {
        if let Ok(id) = chat.parse() {
            let _ = self
                .bot
                .send_chat_action(ChatId(id), ChatAction::Typing)
                .await;
        }
    }

    async fn send_prompt(
        &self,
        chat: &str,
        prompt_id: &str,
        text: &str,
        options: &[String],
    ) -> anyhow::Result<Option<String>> {
        let chat_id = ChatId(
            chat.parse()
                .map_err(|_| anyhow::anyhow!("not a Telegram chat id: {chat}"))?,
        );
        let rows: Vec<Vec<InlineKeyboardButton>> = options
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let label: String = format!("{}. {o}", i + 1).chars().take(60).collect();
                vec![InlineKeyboardButton::callback(
                    label,
                    crate::shown::button_data(prompt_id, i + 1),
                )]
            })
            .collect();
        let chunks = render_chunks_with_plain(text, LIMIT);
        let n = chunks.len();
        let mut with_buttons = None;
        for (i, c) in chunks.into_iter().enumerate() {
            let buttons =
                (i + 1 == n && !rows.is_empty()).then(|| InlineKeyboardMarkup::new(rows.clone()));
            let has = buttons.is_some();
            let id = self.send_one(chat_id, &c.html, &c.plain, buttons).await?;
            if has {
                with_buttons = Some(id);
            }
        }
        let _ = &self.prefix;
        Ok(with_buttons)
    }
}

/// Errors that retrying cannot fix — the bot was kicked or blocked, the chat is gone or was
/// upgraded, the bot may not post there (Telegram answers 400 or 403 with these) — become
/// [`Gone`](crate::platforms::Gone); network trouble and everything else stays transient.
fn classify(e: RequestError) -> anyhow::Error {
    use teloxide::ApiError as A;
    let permanent = match &e {
        RequestError::MigrateToChatId(_) => true,
        RequestError::Api(api) => match api {
            A::BotBlocked
            | A::BotKicked
            | A::BotKickedFromSupergroup
            | A::BotKickedFromChannel
            | A::ChatNotFound
            | A::UserDeactivated
            | A::CantInitiateConversation
            | A::CantTalkWithBots
            | A::GroupDeactivated
            | A::NotEnoughRightsToPostMessages => true,
            other => {
                let t = other.to_string().to_lowercase();
                t.contains("forbidden")
                    || t.contains("chat not found")
                    || t.contains("kicked")
                    || t.contains("blocked")
                    || t.contains("deactivated")
                    || t.contains("not enough rights")
                    || t.contains("have no rights")
            }
        },
        _ => false,
    };
    if permanent {
        anyhow::Error::new(crate::platforms::Gone(format!("Telegram: {e}")))
    } else {
        e.into()
    }
}

/// A chat's and a message's ids as Telegram takes them.
fn message_ids(chat: &str, message: &str) -> anyhow::Result<(ChatId, teloxide::types::MessageId)> {
    let chat_id = ChatId(
        chat.parse()
            .map_err(|_| anyhow::anyhow!("not a Telegram chat id: {chat}"))?,
    );
    let mid = teloxide::types::MessageId(
        message
            .parse()
            .map_err(|_| anyhow::anyhow!("not a Telegram message id: {message}"))?,
    );
    Ok((chat_id, mid))
}
