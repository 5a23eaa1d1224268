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
    EditMessageTextSetters, GetUpdatesSetters, PinChatMessageSetters, SendChatActionSetters,
    SendDocumentSetters, SendMessageSetters, SendPhotoSetters, UnpinChatMessageSetters,
};
use teloxide::prelude::Requester;
use teloxide::types::{
    AllowedUpdate, ChatAction, ChatId, InlineKeyboardButton, InlineKeyboardMarkup, InputFile,
    ParseMode, ThreadId, UpdateKind,
};
use tokio::sync::{mpsc, oneshot};

use crate::platforms::ratelimit::Budget;
use crate::platforms::{Attachment, Inbound, Platform, Receiving};
use crate::progress::Progress;

pub struct Telegram {
    bot: teloxide::Bot,
    bot_id: u64,
    prefix: String,
    /// `[gateway.telegram] topics`: each session in a topic of its own in forum supergroups
    /// (and in private chats, where the bot has topics enabled).
    topics: bool,
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
        topics: bool,
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
        eprintln!(
            "clibot-gateway: connected to Telegram as @{} (bot id {})",
            me.username.as_deref().unwrap_or("?"),
            me.id.0
        );
        let lock =
            crate::platforms::single_poller(recv, lock_dir, &format!("telegram-{}", me.id.0))?;
        // Topics in private chats (Bot API 9.3) are the bot's setting, which only `getMe`
        // says (`has_topics_enabled`, newer than teloxide's types): asked with a request of
        // our own.
        let private_topics = topics && private_topics(&bot).await;
        let (tx, rx) = mpsc::channel(16);
        let keys = Keys {
            topics,
            private_topics,
        };
        recv.spawn(poll(
            bot.clone(),
            tx,
            prefix.to_string(),
            recv.progress.clone(),
            keys,
        ));
        Ok((
            Telegram {
                bot,
                bot_id: me.id.0,
                prefix: prefix.to_string(),
                topics,
                _lock: lock,
            },
            rx,
        ))
    }

    async fn send_one(
        &self,
        chat: Place,
        html: &str,
        plain: &str,
        buttons: Option<InlineKeyboardMarkup>,
    ) -> anyhow::Result<String> {
        let mut use_html = true;
        let mut budget = Budget::new("Telegram");
        loop {
            let text = if use_html { html } else { plain };
            let mut req = self.bot.send_message(chat.id, text);
            if let Some(t) = chat.thread {
                req = req.message_thread_id(t);
            }
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
async fn poll(
    bot: teloxide::Bot,
    tx: mpsc::Sender<Inbound>,
    prefix: String,
    progress: Progress,
    keys: Keys,
) {
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
                    let (chat, topics) = keys.of(&m);
                    Some(Inbound {
                        chat,
                        user: from.id.0.to_string(),
                        user_name: from.first_name.clone(),
                        text: text.to_string(),
                        id: m.id.0.to_string(),
                        prompt: None,
                        group: !m.chat.is_private(),
                        topics,
                        file,
                        ack: None,
                    })
                }
                UpdateKind::CallbackQuery(q) => {
                    // Stop the button's spinner at once; the answer goes through the router.
                    let _ = bot.answer_callback_query(q.id.clone()).await;
                    match (
                        q.data
                            .as_deref()
                            .and_then(crate::platforms::shown::parse_button),
                        q.message.as_ref(),
                    ) {
                        (Some((prompt, choice)), Some(m)) => Some(Inbound {
                            chat: match m.regular_message() {
                                Some(m) => keys.of(m).0,
                                None => m.chat().id.0.to_string(),
                            },
                            user: q.from.id.0.to_string(),
                            user_name: q.from.first_name.clone(),
                            text: format!("{prefix}answer {choice}"),
                            // The query's id: a press handed over again is claimed once.
                            id: q.id.to_string(),
                            prompt: Some(prompt),
                            group: !m.chat().is_private(),
                            topics: false,
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
        let place = Place::parse(chat)?;
        let caption: String = caption.chars().take(1024).collect();
        let mut budget = Budget::new("Telegram");
        loop {
            let file = InputFile::memory(data.to_vec()).file_name(name.to_string());
            let sent = if photo {
                let mut req = self.bot.send_photo(place.id, file).caption(caption.clone());
                if let Some(t) = place.thread {
                    req = req.message_thread_id(t);
                }
                req.await.map(|_| ())
            } else {
                let mut req = self
                    .bot
                    .send_document(place.id, file)
                    .caption(caption.clone());
                if let Some(t) = place.thread {
                    req = req.message_thread_id(t);
                }
                req.await.map(|_| ())
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
        let chat = Place::parse(chat)?;
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
        let place = Place::parse(chat).ok()?;
        match id {
            None => {
                let mut req = self.bot.send_message(place.id, text);
                if let Some(t) = place.thread {
                    req = req.message_thread_id(t);
                }
                req.await.ok().map(|m| m.id.0.to_string())
            }
            Some(id) => {
                let mid = teloxide::types::MessageId(id.parse().ok()?);
                let _ = self.bot.edit_message_text(place.id, mid, text).await;
                Some(id.to_string())
            }
        }
    }

    async fn typing(&self, chat: &str) {
        if let Ok(place) = Place::parse(chat) {
            let mut req = self.bot.send_chat_action(place.id, ChatAction::Typing);
            if let Some(t) = place.thread {
                req = req.message_thread_id(t);
            }
            let _ = req.await;
        }
    }

    fn topics(&self) -> bool {
        self.topics
    }

    async fn open_topic(&self, chat: &str, name: &str) -> anyhow::Result<String> {
        if !self.topics {
            anyhow::bail!("topics are off: set [gateway.telegram] topics = true");
        }
        let place = Place::parse(chat)?;
        let name: String = name.chars().take(128).collect();
        let mut budget = Budget::new("Telegram");
        loop {
            match self.bot.create_forum_topic(place.id, name.clone()).await {
                Ok(t) => {
                    return Ok(crate::platforms::topic::key(
                        chat,
                        &t.thread_id.0.0.to_string(),
                    ));
                }
                Err(RequestError::RetryAfter(d)) => budget.wait(d.duration()).await?,
                Err(RequestError::Api(e)) => anyhow::bail!(
                    "Telegram did not create a topic ({e}): the chat must have topics, and the bot needs the Manage Topics right"
                ),
                Err(e) => return Err(classify(e)),
            }
        }
    }

    async fn reopen_topic(&self, chat: &str) {
        if let Ok(Place {
            id,
            thread: Some(t),
        }) = Place::parse(chat)
        {
            // "TOPIC_NOT_MODIFIED" when it is open: what was wanted.
            let _ = self.bot.reopen_forum_topic(id, t).await;
        }
    }

    async fn close_topic(&self, chat: &str) {
        if let Ok(Place {
            id,
            thread: Some(t),
        }) = Place::parse(chat)
            && let Err(e) = self.bot.close_forum_topic(id, t).await
        {
            eprintln!("clibot-gateway: Telegram did not close topic {chat}: {e}");
        }
    }

    async fn edit_prompt(
        &self,
        chat: &str,
        message: &str,
        prompt_id: &str,
        text: &str,
        options: &[String],
    ) -> anyhow::Result<()> {
        let place = Place::parse(chat)?;
        let mid = teloxide::types::MessageId(message.parse()?);
        let text: String = text.chars().take(LIMIT).collect();
        let req = self
            .bot
            .edit_message_text(place.id, mid, text)
            .reply_markup(keyboard(prompt_id, options));
        match req.await {
            Ok(_) => Ok(()),
            // The same text and buttons as now: nothing to change.
            Err(RequestError::Api(e)) if e.to_string().contains("not modified") => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    async fn pin(&self, chat: &str, message: &str, on: bool) -> anyhow::Result<()> {
        let place = Place::parse(chat)?;
        let mid = teloxide::types::MessageId(message.parse()?);
        if on {
            self.bot
                .pin_chat_message(place.id, mid)
                .disable_notification(true)
                .await?;
        } else {
            self.bot
                .unpin_chat_message(place.id)
                .message_id(mid)
                .await?;
        }
        Ok(())
    }

    async fn send_prompt(
        &self,
        chat: &str,
        prompt_id: &str,
        text: &str,
        options: &[String],
    ) -> anyhow::Result<Option<String>> {
        let chat_id = Place::parse(chat)?;
        let rows = keyboard(prompt_id, options);
        let chunks = render_chunks_with_plain(text, LIMIT);
        let n = chunks.len();
        let mut with_buttons = None;
        for (i, c) in chunks.into_iter().enumerate() {
            let buttons = (i + 1 == n && !rows.inline_keyboard.is_empty()).then(|| rows.clone());
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
                    // A topic deleted (or a forum turned back into a group).
                    || t.contains("thread not found")
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

/// Where a message goes: a chat, and a topic in it (`CHAT/THREAD`).
#[derive(Clone, Copy)]
struct Place {
    id: ChatId,
    thread: Option<ThreadId>,
}

impl Place {
    fn parse(chat: &str) -> anyhow::Result<Place> {
        let (c, thread) = crate::platforms::topic::split(chat);
        let id = ChatId(
            c.parse()
                .map_err(|_| anyhow::anyhow!("not a Telegram chat id: {chat}"))?,
        );
        let thread = match thread {
            Some(t) => Some(ThreadId(teloxide::types::MessageId(
                t.parse()
                    .map_err(|_| anyhow::anyhow!("not a Telegram topic id: {chat}"))?,
            ))),
            None => None,
        };
        Ok(Place { id, thread })
    }
}

/// How the poller keys the chats messages come from.
#[derive(Clone, Copy)]
struct Keys {
    /// `[gateway.telegram] topics`.
    topics: bool,
    /// The bot has topics in private chats too.
    private_topics: bool,
}

impl Keys {
    /// A message's chat key — `CHAT/THREAD` inside a forum topic — and whether it was sent
    /// in the general part of a chat where sessions get topics. Without `topics`, every
    /// message is its chat's (as before topics).
    fn of(&self, m: &teloxide::types::Message) -> (String, bool) {
        let chat = m.chat.id.0.to_string();
        if !self.topics {
            return (chat, false);
        }
        // A reply in a plain group carries a thread id too: only a topic message counts.
        if let (true, Some(t)) = (m.is_topic_message, m.thread_id) {
            return (
                crate::platforms::topic::key(&chat, &t.0.0.to_string()),
                false,
            );
        }
        let forum = match &m.chat.kind {
            teloxide::types::ChatKind::Public(p) => matches!(
                &p.kind,
                teloxide::types::PublicChatKind::Supergroup(s) if s.is_forum
            ),
            teloxide::types::ChatKind::Private(_) => self.private_topics,
        };
        (chat, forum)
    }
}

/// Whether the bot has topics in private chats (`getMe`'s `has_topics_enabled`).
async fn private_topics(bot: &teloxide::Bot) -> bool {
    // Not `Url::join`: the token's `123:` would read as a URL scheme.
    let base = bot.api_url().as_str().trim_end_matches('/').to_string();
    let url = format!("{base}/bot{}/getMe", bot.token());
    let got = async {
        reqwest::Client::new()
            .get(url)
            .timeout(Duration::from_secs(10))
            .send()
            .await?
            .json::<serde_json::Value>()
            .await
    }
    .await
    // The URL holds the token: never in a message.
    .map_err(|e| e.without_url());
    match got {
        Ok(v) => v["result"]["has_topics_enabled"].as_bool().unwrap_or(false),
        Err(e) => {
            eprintln!(
                "clibot-gateway: cannot ask Telegram whether the bot has topics in private chats ({}); taking it has not",
                clibot_proto::describe(&e)
            );
            false
        }
    }
}

/// A chat's and a message's ids as Telegram takes them.
fn message_ids(chat: &str, message: &str) -> anyhow::Result<(ChatId, teloxide::types::MessageId)> {
    let chat_id = Place::parse(chat)?.id;
    let mid = teloxide::types::MessageId(
        message
            .parse()
            .map_err(|_| anyhow::anyhow!("not a Telegram message id: {message}"))?,
    );
    Ok((chat_id, mid))
}

/// A prompt's buttons, one per row.
fn keyboard(prompt_id: &str, options: &[String]) -> InlineKeyboardMarkup {
    let rows: Vec<Vec<InlineKeyboardButton>> = options
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let label: String = format!("{}. {o}", i + 1).chars().take(60).collect();
            vec![InlineKeyboardButton::callback(
                label,
                crate::platforms::shown::button_data(prompt_id, i + 1),
            )]
        })
        .collect();
    InlineKeyboardMarkup::new(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(chat: serde_json::Value, extra: serde_json::Value) -> teloxide::types::Message {
        let mut m = serde_json::json!({
            "message_id": 7, "date": 0, "chat": chat, "text": "hi",
            "from": { "id": 1, "is_bot": false, "first_name": "A" },
        });
        if let (Some(m), Some(e)) = (m.as_object_mut(), extra.as_object()) {
            m.extend(e.clone());
        }
        serde_json::from_value(m).expect("a message")
    }

    #[test]
    fn chat_keys_name_a_topic_only_for_topic_messages() {
        let forum =
            serde_json::json!({ "id": -100, "title": "f", "type": "supergroup", "is_forum": true });
        let group = serde_json::json!({ "id": -200, "title": "g", "type": "supergroup" });
        let private = serde_json::json!({ "id": 5, "first_name": "A", "type": "private" });
        let topic = serde_json::json!({ "message_thread_id": 42, "is_topic_message": true });
        // A reply in a plain group carries a thread id, and is no topic.
        let reply = serde_json::json!({ "message_thread_id": 3 });
        let on = Keys {
            topics: true,
            private_topics: false,
        };
        let off = Keys {
            topics: false,
            private_topics: true,
        };
        for (keys, chat, extra, want) in [
            (on, &forum, &topic, ("-100/42", false)),
            (on, &forum, &serde_json::json!({}), ("-100", true)),
            (on, &group, &reply, ("-200", false)),
            (on, &private, &serde_json::json!({}), ("5", false)),
            (off, &forum, &topic, ("-100", false)),
            (off, &private, &serde_json::json!({}), ("5", false)),
        ] {
            let (key, general) = keys.of(&message(chat.clone(), extra.clone()));
            assert_eq!((key.as_str(), general), want, "{chat} {extra}");
        }
        let private_on = Keys {
            topics: true,
            private_topics: true,
        };
        assert_eq!(
            private_on.of(&message(private.clone(), serde_json::json!({}))),
            ("5".to_string(), true)
        );
        assert!(Place::parse("-100/abc").is_err());
        assert!(Place::parse("-100/42").is_ok_and(|p| p.thread.is_some()));
    }
}
