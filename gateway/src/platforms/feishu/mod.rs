//! Feishu / Lark through the long connection (an outbound websocket: works behind NAT, no
//! public URL). Text messages in private chats, and group messages that mention the bot, become
//! chat messages; a press on a prompt card's button becomes that prompt's answer. Replies go as
//! text messages (chunked under Feishu's 150 KB body limit), prompts as interactive cards with
//! one button per option, the running turn's status as a card updated in place, long output
//! as a file. Rate limits are waited out, never dropped; a chat the bot can no longer post in is
//! reported [`Gone`](crate::platforms::Gone).
//!
//! Events are acknowledged as soon as they are parsed and queued for the router (Feishu pushes
//! again what is not acknowledged within 3 s); when the queue is full (a flood, or a daemon
//! that is away) an event is left unacknowledged, so memory stays bounded and nothing is lost. Delivery is at least once: an event id or
//! message id seen lately is not handed over again, and the message id goes to the daemon as
//! the message's id, whose de-duplication covers a gateway restart.
//!
//! [`ws`] keeps the connection, [`frame`] is its wire format, [`api`] the REST calls, [`card`]
//! the cards.

// Until main.rs starts the platform, only the tests reach most of it.

mod api;
mod card;
mod frame;
#[cfg(test)]
mod tests;
mod ws;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use clibot_gateway::chunk::{ChunkOptions, Measure, chunk};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::platforms::recent::Recent;
use crate::platforms::{Attachment, Inbound, Platform, Receiving};
use api::{Api, Wait};
use ws::Handled;

/// Feishu's API (Lark's is `https://open.larksuite.com`).
pub const DEFAULT_API_URL: &str = "https://open.feishu.cn";

/// The largest text message, in characters: a text message's request body may not exceed
/// 150 KB, and one character takes at most 7 bytes of it (a control character, `\u0001`,
/// escaped once in `content` and again in the body). Every part is measured anyway.
pub const MAX_TEXT_CHARS: usize = 20_000;
/// Feishu's text body limit (150 KB), less room for the envelope.
const TEXT_BODY_LIMIT: usize = 149_000;
/// Feishu's card body limit (30 KB), less room for the envelope.
const CARD_BODY_LIMIT: usize = 29_000;
/// The text a prompt card carries at most; what comes before goes as text messages.
const CARD_TEXT_CHARS: usize = 4_000;
/// Prompt cards remembered (to take their buttons off without losing their text).
const CARDS_KEPT: usize = 256;

pub struct Feishu {
    api: Arc<Api>,
    app_id: String,
    /// `[gateway.feishu] topics`: each session in a thread of its own in group chats.
    topics: bool,
    /// The text of prompt cards sent lately, by message id, oldest first.
    cards: Mutex<VecDeque<(String, String)>>,
    /// Held while this process holds the app's long connection: a second gateway for the same
    /// app would get about half the events (Feishu hands each to one random connection).
    _lock: Arc<std::fs::File>,
}

/// Connects and starts the long connection; messages arrive on the returned channel.
/// `api_url` is `https://open.feishu.cn` (or Lark's `https://open.larksuite.com`, or a test
/// fake); empty means Feishu.
pub async fn start(
    config: &Settings<'_>,
    prefix: &str,
    lock_dir: &std::path::Path,
    recv: &Receiving,
) -> anyhow::Result<(Feishu, mpsc::Receiver<Inbound>)> {
    let (app_id, app_secret, api_url) = (config.app_id, config.app_secret, config.api_url);
    if app_id.trim().is_empty() || app_secret.trim().is_empty() {
        anyhow::bail!(
            "Feishu needs an app id and secret: set [gateway.feishu] app_id and app_secret (the app's Credentials & Basic Info page)"
        );
    }
    let api_url = if api_url.trim().is_empty() {
        DEFAULT_API_URL
    } else {
        api_url.trim()
    };
    let lock = crate::platforms::single_poller(recv, lock_dir, &format!("feishu-{app_id}"))?;
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(60))
        .build()
        .map_err(|e| anyhow::anyhow!("cannot build the HTTP client: {e}"))?;
    let api = Arc::new(Api::new(http, api_url, app_id, app_secret));
    api.token().await?;
    let bot = api.bot_open_id().await.map_err(|e| {
        anyhow::anyhow!(
            "cannot read the Feishu bot's identity (GET /open-apis/bot/v3/info): {e}; enable the app's Bot ability and publish a version"
        )
    })?;
    // The first endpoint now, so that a refused app fails the start with the reason.
    let first = match ws::discover(&api, app_id, app_secret).await {
        Ok(e) => Some(e),
        Err(ws::Refused::Fatal(why)) => anyhow::bail!(why),
        Err(ws::Refused::Retry(why)) => {
            eprintln!("clibot-gateway: Feishu long connection: {why}; retrying");
            None
        }
    };
    let (tx, rx) = mpsc::channel(16);
    let (queue, queued) = mpsc::channel(QUEUED);
    recv.spawn(dispatch(api.clone(), queued, tx, prefix.to_string()));
    let mut ingress = Ingress {
        bot,
        recent: Recent::default(),
        queue,
        topics: config.topics,
    };
    recv.spawn(ws::run(
        api.clone(),
        app_id.to_string(),
        app_secret.to_string(),
        first,
        recv.progress.clone(),
        move |payload: &[u8]| ingress.handle(payload),
    ));
    Ok((
        Feishu {
            api,
            topics: config.topics,
            app_id: app_id.to_string(),
            cards: Mutex::new(VecDeque::new()),
            _lock: lock,
        },
        rx,
    ))
}

/// What the platform starts with (`[gateway.feishu]`).
pub struct Settings<'a> {
    pub app_id: &'a str,
    pub app_secret: &'a str,
    /// Empty: Feishu's own.
    pub api_url: &'a str,
    /// Each session in a thread of its own in group chats.
    pub topics: bool,
}

/// What an event is for the gateway.
#[derive(Debug, PartialEq)]
enum Event {
    /// A text message for the router.
    Message {
        event_id: String,
        message_id: String,
        chat: String,
        user: String,
        text: String,
        group: bool,
        /// A picture or a file it carries.
        file: Option<Attachment>,
        /// The first message of the thread it was sent in (empty: not in a thread).
        root: String,
    },
    /// A button pressed on a card: its prompt and option, when it is one of ours.
    Button {
        event_id: String,
        chat: String,
        user: String,
        answer: Option<(String, String)>,
    },
    /// Nothing for the gateway, and why.
    Ignored(String),
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    path.iter()
        .fold(v, |v, k| &v[*k])
        .as_str()
        .unwrap_or_default()
}

/// Reads an event envelope (schema 2.0): `im.message.receive_v1` and `card.action.trigger`.
/// `bot` is the bot's open_id: a group message counts only when it mentions the bot.
fn parse_event(v: &Value, bot: &str) -> Event {
    let event_id = str_at(v, &["header", "event_id"]).to_string();
    match str_at(v, &["header", "event_type"]) {
        "im.message.receive_v1" => parse_message(v, bot, event_id),
        "card.action.trigger" => {
            let e = &v["event"];
            let chat = match str_at(e, &["context", "open_chat_id"]) {
                "" => str_at(e, &["open_chat_id"]),
                c => c,
            };
            Event::Button {
                event_id,
                chat: chat.to_string(),
                user: str_at(e, &["operator", "open_id"]).to_string(),
                answer: card::button_data(&e["action"]["value"])
                    .and_then(crate::platforms::shown::parse_button),
            }
        }
        "" => Event::Ignored("an event without a type (schema 1.0?)".into()),
        other => Event::Ignored(format!("a {other} event")),
    }
}

fn parse_message(v: &Value, bot: &str, event_id: String) -> Event {
    let e = &v["event"];
    let m = &e["message"];
    if str_at(e, &["sender", "sender_type"]) != "user" {
        return Event::Ignored("a message not from a user".into());
    }
    let kind = str_at(m, &["message_type"]);
    let content: Value = serde_json::from_str(str_at(m, &["content"])).unwrap_or(Value::Null);
    let message_id = str_at(m, &["message_id"]);
    // A picture or a file: fetched through the message's resources when it is handled.
    let resource = |key: &str, what: &str, name: String, kind: &'static str| {
        let key = content[key].as_str().unwrap_or_default();
        (!key.is_empty()).then(|| Attachment {
            id: format!("{message_id}/{key}/{what}"),
            name,
            size: 0,
            kind,
        })
    };
    let file = match kind {
        "text" => None,
        "image" => resource("image_key", "image", "image.png".into(), "photo"),
        "file" => resource(
            "file_key",
            "file",
            content["file_name"].as_str().unwrap_or("file").to_string(),
            "document",
        ),
        "audio" => resource("file_key", "file", "voice.opus".into(), "voice"),
        other => return Event::Ignored(format!("a {other} message")),
    };
    let text = match (kind, content["text"].as_str(), &file) {
        ("text", Some(t), _) => t,
        ("text", None, _) => return Event::Ignored("a text message without text".into()),
        (_, _, Some(_)) => "",
        (_, _, None) => return Event::Ignored(format!("a {kind} message without its key")),
    };
    let group = str_at(m, &["chat_type"]) != "p2p";
    let mentions: Vec<&Value> = m["mentions"]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let to_bot = |x: &Value| !bot.is_empty() && str_at(x, &["id", "open_id"]) == bot;
    if group && !mentions.iter().any(|x| to_bot(x)) {
        return Event::Ignored("a group message that does not mention the bot".into());
    }
    let text = strip_mentions(text, &mentions, &to_bot);
    let (chat, user, message_id) = (
        str_at(m, &["chat_id"]),
        str_at(e, &["sender", "sender_id", "open_id"]),
        str_at(m, &["message_id"]),
    );
    if (text.is_empty() && file.is_none()) || chat.is_empty() || user.is_empty() {
        return Event::Ignored("a message without text, chat or sender".into());
    }
    // A thread's messages name its first message (`root_id`) and the thread (`thread_id`);
    // a reply outside a thread names a root but no thread.
    let root = match str_at(m, &["thread_id"]) {
        "" => "",
        _ => str_at(m, &["root_id"]),
    };
    Event::Message {
        event_id,
        message_id: message_id.to_string(),
        chat: chat.to_string(),
        user: user.to_string(),
        text,
        group,
        file,
        root: root.to_string(),
    }
}

/// The text with the bot's `@_user_N` placeholder removed and other mentions as `@name`.
fn strip_mentions(text: &str, mentions: &[&Value], to_bot: &dyn Fn(&Value) -> bool) -> String {
    let mut sorted: Vec<&&Value> = mentions.iter().collect();
    // `@_user_10` before `@_user_1`.
    sorted.sort_by_key(|m| std::cmp::Reverse(str_at(m, &["key"]).len()));
    let mut out = text.to_string();
    for m in sorted {
        let key = str_at(m, &["key"]);
        if key.is_empty() {
            continue;
        }
        if to_bot(m) {
            out = out.replace(&format!("{key} "), "").replace(key, "");
        } else {
            out = out.replace(key, &format!("@{}", str_at(m, &["name"])));
        }
    }
    out.trim().to_string()
}

/// What the connection hands on: a message, or a button press whose chat kind may need
/// asking.
enum Queued {
    Message(Inbound),
    Button {
        chat: String,
        user: String,
        prompt: String,
        choice: String,
        id: String,
    },
}

/// Events waiting for the router at most: beyond, an event is left unacknowledged (Feishu
/// pushes it again later), so a flood — or a daemon that is away — costs bounded memory.
const QUEUED: usize = 1024;

/// Runs on the connection task: reads events, drops repeats, queues the rest (never waits:
/// the acknowledgement follows at once, or none when the queue is full).
struct Ingress {
    bot: String,
    recent: Recent,
    queue: mpsc::Sender<Queued>,
    /// `[gateway.feishu] topics`: a thread in a group is keyed `CHAT/ROOT_MESSAGE`.
    topics: bool,
}

impl Ingress {
    /// Queues `q` unless the queue is full; then `ids` are forgotten (the event is pushed
    /// again and must be taken then) and it is left unacknowledged.
    fn enqueue(&mut self, q: Queued, ids: &[&str], answer: Option<Value>) -> Handled {
        match self.queue.try_send(q) {
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.recent.forget(ids);
                Handled::Later
            }
            _ => Handled::Ack(answer),
        }
    }

    /// Handles an event payload; says whether it was taken, with the callback answer of a
    /// button press.
    fn handle(&mut self, payload: &[u8]) -> Handled {
        let v: Value = match serde_json::from_slice(payload) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("clibot-gateway: a Feishu event that is not JSON ({e}); ignored");
                return Handled::Ack(None);
            }
        };
        match parse_event(&v, &self.bot) {
            Event::Message {
                event_id,
                message_id,
                chat,
                user,
                text,
                group,
                file,
                root,
            } => {
                let (chat, topics) = match (self.topics && group, root.is_empty()) {
                    (true, false) => (crate::platforms::topic::key(&chat, &root), false),
                    (true, true) => (chat, true),
                    (false, _) => (chat, false),
                };
                // Feishu pushes again under the same event id, and at times under a new one
                // with the same message.
                if !self.recent.seen(&[&event_id, &message_id]) {
                    let ids = [event_id.clone(), message_id.clone()];
                    let q = Queued::Message(Inbound {
                        chat,
                        user_name: user.clone(),
                        user,
                        text,
                        id: message_id,
                        prompt: None,
                        group,
                        topics,
                        file,
                        ack: None,
                    });
                    return self.enqueue(q, &[&ids[0], &ids[1]], None);
                }
                Handled::Ack(None)
            }
            Event::Button {
                event_id,
                chat,
                user,
                answer,
            } => {
                let Some((prompt, choice)) =
                    answer.filter(|_| !chat.is_empty() && !user.is_empty())
                else {
                    return Handled::Ack(Some(toast(
                        "warning",
                        "This button does not belong to a clibot prompt.",
                    )));
                };
                let reply = toast("info", &format!("Answer {choice} sent."));
                if !self.recent.seen(&[&event_id]) {
                    let id = event_id.clone();
                    let q = Queued::Button {
                        chat,
                        user,
                        prompt,
                        choice,
                        id: event_id,
                    };
                    return self.enqueue(q, &[&id], Some(reply));
                }
                Handled::Ack(Some(reply))
            }
            Event::Ignored(_) => Handled::Ack(None),
        }
    }
}

/// A card callback's answer: a toast (the card stays as it is until the prompt is resolved).
fn toast(kind: &str, content: &str) -> Value {
    json!({ "toast": { "type": kind, "content": content } })
}

/// Hands queued messages to the router. A button press does not say whether its chat is a
/// group: the chats messages came from are remembered, others are asked of Feishu.
async fn dispatch(
    api: Arc<Api>,
    mut queued: mpsc::Receiver<Queued>,
    tx: mpsc::Sender<Inbound>,
    prefix: String,
) {
    let mut groups: HashMap<String, bool> = HashMap::new();
    while let Some(q) = queued.recv().await {
        if groups.len() > crate::platforms::recent::RECENT_IDS {
            groups.clear();
        }
        let inbound = match q {
            Queued::Message(m) => {
                groups.insert(m.chat.clone(), m.group);
                m
            }
            Queued::Button {
                chat,
                user,
                prompt,
                choice,
                id,
            } => {
                let group = match groups.get(&chat) {
                    Some(g) => *g,
                    None => match api.chat_is_group(&chat).await {
                        Ok(g) => {
                            groups.insert(chat.clone(), g);
                            g
                        }
                        Err(e) => {
                            eprintln!(
                                "clibot-gateway: cannot tell whether Feishu chat {chat} is a group ({e}); taking it for one (grant the app im:chat:readonly)"
                            );
                            true
                        }
                    },
                };
                Inbound {
                    chat,
                    user_name: user.clone(),
                    user,
                    text: format!("{prefix}answer {choice}"),
                    id,
                    prompt: Some(prompt),
                    group,
                    topics: false,
                    file: None,
                    ack: None,
                }
            }
        };
        if tx.send(inbound).await.is_err() {
            return;
        }
    }
}

/// `<at user_id="…">` in a text message mentions someone (`all`: everyone); text from a CLI
/// must not, so a word joiner goes between `<` and `at`.
fn defuse(text: &str) -> std::borrow::Cow<'_, str> {
    static AT: LazyLock<Option<regex::Regex>> =
        LazyLock::new(|| regex::Regex::new(r"(?i)<(at[\s>/])").ok());
    match AT.as_ref() {
        Some(re) => re.replace_all(text, "<\u{2060}$1"),
        None => std::borrow::Cow::Borrowed(text),
    }
}

/// The size of a message's request body with this content.
fn body_size(msg_type: &str, content: &Value) -> usize {
    json!({
        "receive_id": "oc_0123456789abcdef0123456789abcdef",
        "msg_type": msg_type,
        "content": content.to_string(),
        "uuid": "clibot-0123456789abcdef0123456789abcdef",
    })
    .to_string()
    .len()
}

/// Splits parts until each one's body fits: `size` measures a part's body.
fn fit(parts: Vec<String>, limit: usize, size: &dyn Fn(&str) -> usize) -> Vec<String> {
    let mut todo: VecDeque<String> = parts.into();
    let mut out = Vec::new();
    while let Some(p) = todo.pop_front() {
        let n = p.chars().count();
        if n <= 1 || size(&p) <= limit {
            out.push(p);
            continue;
        }
        let halves = chunk(&p, &ChunkOptions::new(n / 2, Measure::Chars));
        let halves = if halves.len() > 1 && halves.iter().all(|h| h.len() < p.len()) {
            halves
        } else {
            let cut = p.char_indices().nth(n / 2).map_or(p.len(), |(i, _)| i);
            vec![p[..cut].to_string(), p[cut..].to_string()]
        };
        for h in halves.into_iter().rev() {
            todo.push_front(h);
        }
    }
    out
}

impl Feishu {
    fn cards(&self) -> MutexGuard<'_, VecDeque<(String, String)>> {
        self.cards
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The rich-text messages for `text`, each within the post body limit (code fences
    /// closed and reopened across parts by the chunker).
    fn post_parts(text: &str) -> Vec<String> {
        let text = defuse(text);
        fit(
            chunk(&text, &ChunkOptions::new(CARD_TEXT_CHARS, Measure::Chars)),
            CARD_BODY_LIMIT,
            &|p| body_size("post", &card::post(p)),
        )
    }

    /// The text messages for `text`, each within the body limit.
    fn text_parts(text: &str, max_chars: usize) -> Vec<String> {
        let text = defuse(text);
        fit(
            chunk(&text, &ChunkOptions::new(max_chars, Measure::Chars)),
            TEXT_BODY_LIMIT,
            &|p| body_size("text", &json!({ "text": p })),
        )
    }

    async fn send_text(&self, chat: &str, part: &str) -> anyhow::Result<String> {
        self.api
            .create(chat, "text", &json!({ "text": part }), Wait::OutRateLimits)
            .await
    }
}

#[async_trait]
impl Platform for Feishu {
    fn name(&self) -> &str {
        "feishu"
    }

    fn consumer(&self) -> String {
        format!("feishu:{}", self.app_id)
    }

    fn max_message(&self) -> usize {
        MAX_TEXT_CHARS
    }

    /// Text goes as rich text (Markdown: what CLIs reply in); a part Feishu cannot take as
    /// rich text goes as plain text instead (retrying would fail the same way).
    async fn send(&self, chat: &str, text: &str) -> anyhow::Result<()> {
        for part in Self::post_parts(text) {
            if part.trim().is_empty() {
                continue;
            }
            let sent = self
                .api
                .create(chat, "post", &card::post(&part), Wait::OutRateLimits)
                .await;
            match sent {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        api::code_of(&e),
                        Some(api::CONTENT_INVALID | api::CARD_INVALID)
                    ) =>
                {
                    eprintln!(
                        "clibot-gateway: Feishu refused a rich-text message in {chat} ({e:#}); sending it as text"
                    );
                    for p in Self::text_parts(&part, MAX_TEXT_CHARS) {
                        self.send_text(chat, &p).await?;
                    }
                }
                Err(e) => return Err(e),
            }
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
        let size = |p: &str| body_size("interactive", &card::prompt(p, prompt_id, options));
        let mut parts = fit(
            chunk(text, &ChunkOptions::new(CARD_TEXT_CHARS, Measure::Chars)),
            CARD_BODY_LIMIT,
            &size,
        );
        // The card carries the last part; what comes before goes as text.
        let last = parts.pop().unwrap_or_default();
        for p in parts {
            for part in Self::text_parts(&p, MAX_TEXT_CHARS) {
                self.send_text(chat, &part).await?;
            }
        }
        let sent = self
            .api
            .create(
                chat,
                "interactive",
                &card::prompt(&last, prompt_id, options),
                Wait::OutRateLimits,
            )
            .await;
        let id = match sent {
            Ok(id) => id,
            // Feishu cannot build the card (230099): the prompt goes as text, which lists the
            // options, so that a typed number answers it (retrying would fail the same way).
            Err(e) if api::code_of(&e) == Some(api::CARD_INVALID) => {
                eprintln!(
                    "clibot-gateway: Feishu refused a prompt card in {chat} ({e:#}); sending it as text"
                );
                self.send(chat, &last).await?;
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let mut cards = self.cards();
        cards.push_back((id.clone(), last));
        while cards.len() > CARDS_KEPT {
            cards.pop_front();
        }
        Ok(Some(id))
    }

    async fn remove_buttons(&self, _chat: &str, message: &str) -> anyhow::Result<()> {
        let text = {
            let cards = self.cards();
            cards
                .iter()
                .find(|(id, _)| id == message)
                .map(|(_, t)| t.clone())
        };
        self.api
            .patch_card(
                message,
                &card::answered(text.as_deref()),
                Wait::OutRateLimits,
            )
            .await?;
        self.cards().retain(|(id, _)| id != message);
        Ok(())
    }

    async fn edit_prompt(
        &self,
        _chat: &str,
        message: &str,
        prompt_id: &str,
        text: &str,
        options: &[String],
    ) -> anyhow::Result<()> {
        let text: String = text.chars().take(CARD_TEXT_CHARS).collect();
        let card = card::prompt(&text, prompt_id, options);
        self.api.patch_card(message, &card, Wait::No).await
    }

    async fn pin(&self, _chat: &str, message: &str, on: bool) -> anyhow::Result<()> {
        self.api.pin(message, on).await
    }

    async fn delete_message(&self, chat: &str, message: &str) -> anyhow::Result<bool> {
        match self.api.delete_message(message).await {
            Ok(()) => Ok(true),
            Err(e) => {
                eprintln!("clibot-gateway: Feishu did not recall a message in {chat}: {e:#}");
                Ok(false)
            }
        }
    }

    async fn send_file(
        &self,
        chat: &str,
        name: &str,
        text: &str,
        summary: &str,
    ) -> anyhow::Result<()> {
        self.send_bytes(chat, name, text.as_bytes(), summary).await
    }

    async fn download(&self, file: &Attachment, max: u64) -> anyhow::Result<Vec<u8>> {
        let mut parts = file.id.split('/');
        let (Some(message), Some(key), Some(kind)) = (parts.next(), parts.next(), parts.next())
        else {
            anyhow::bail!("not a Feishu resource");
        };
        self.api.download(message, key, kind, max).await
    }

    async fn send_bytes(
        &self,
        chat: &str,
        name: &str,
        data: &[u8],
        caption: &str,
    ) -> anyhow::Result<()> {
        let key = self.api.upload(name, data.to_vec()).await?;
        self.api
            .create(
                chat,
                "file",
                &json!({ "file_key": key }),
                Wait::OutRateLimits,
            )
            .await?;
        if !caption.trim().is_empty() {
            self.send(chat, caption).await?;
        }
        Ok(())
    }

    async fn send_image(
        &self,
        chat: &str,
        _name: &str,
        png: &[u8],
        caption: &str,
    ) -> anyhow::Result<()> {
        let key = self.api.upload_image(png.to_vec()).await?;
        self.api
            .create(
                chat,
                "image",
                &json!({ "image_key": key }),
                Wait::OutRateLimits,
            )
            .await?;
        if !caption.trim().is_empty() {
            self.send(chat, caption).await?;
        }
        Ok(())
    }

    async fn status(&self, chat: &str, id: Option<&str>, text: &str) -> Option<String> {
        let body: String = text.chars().take(CARD_TEXT_CHARS).collect();
        let card = card::status(&body);
        match id {
            None => self
                .api
                .create(chat, "interactive", &card, Wait::No)
                .await
                .ok(),
            Some(id) => {
                // Best effort: a status update that fails (a rate limit) is simply skipped.
                let _ = self.api.patch_card(id, &card, Wait::No).await;
                Some(id.to_string())
            }
        }
    }

    fn topics(&self) -> bool {
        self.topics
    }

    async fn open_topic(&self, chat: &str, name: &str) -> anyhow::Result<String> {
        if !self.topics {
            anyhow::bail!("threads are off: set [gateway.feishu] topics = true");
        }
        // A thread grows from a message: this one heads it, and what goes to the thread is
        // a reply in it.
        let head = defuse(&format!("🧵 {name}")).into_owned();
        let root = self
            .api
            .create(chat, "text", &json!({ "text": head }), Wait::OutRateLimits)
            .await?;
        Ok(crate::platforms::topic::key(chat, &root))
    }

    // Feishu threads cannot be closed: the session's last message says it ended.

    // No typing indicator: Feishu has none (a reaction renewed in a loop burns the API quota).
}

#[cfg(test)]
mod unit {
    use super::*;

    fn message(chat_type: &str, text: &str, mentions: Value) -> Value {
        json!({
            "schema": "2.0",
            "header": { "event_id": "ev1", "event_type": "im.message.receive_v1" },
            "event": {
                "sender": { "sender_id": { "open_id": "ou_user" }, "sender_type": "user" },
                "message": {
                    "message_id": "om_1",
                    "chat_id": "oc_chat",
                    "chat_type": chat_type,
                    "message_type": "text",
                    "content": json!({ "text": text }).to_string(),
                    "mentions": mentions,
                },
            },
        })
    }

    fn mention(key: &str, open_id: &str, name: &str) -> Value {
        json!({ "key": key, "id": { "open_id": open_id }, "name": name })
    }

    #[test]
    fn a_private_message_is_taken_as_it_is() {
        assert_eq!(
            parse_event(&message("p2p", " run the tests ", json!([])), "ou_bot"),
            Event::Message {
                event_id: "ev1".into(),
                message_id: "om_1".into(),
                chat: "oc_chat".into(),
                user: "ou_user".into(),
                text: "run the tests".into(),
                group: false,
                file: None,
                root: String::new(),
            }
        );
    }

    #[test]
    fn a_group_message_counts_only_with_the_bots_mention_which_is_removed() {
        let plain = message("group", "hello all", json!([]));
        assert!(matches!(parse_event(&plain, "ou_bot"), Event::Ignored(_)));
        let other = message(
            "group",
            "@_user_1 hi",
            json!([mention("@_user_1", "ou_x", "Ann")]),
        );
        assert!(matches!(parse_event(&other, "ou_bot"), Event::Ignored(_)));
        let ours = message(
            "topic_group",
            "@_user_1 ask @_user_10 and @_user_2",
            json!([
                mention("@_user_1", "ou_bot", "clibot"),
                mention("@_user_2", "ou_b", "Bob"),
                mention("@_user_10", "ou_c", "Cy"),
            ]),
        );
        match parse_event(&ours, "ou_bot") {
            Event::Message { text, group, .. } => {
                assert_eq!(text, "ask @Cy and @Bob");
                assert!(group);
            }
            e => panic!("{e:?}"),
        }
        // Only the mention: nothing to do.
        let bare = message(
            "group",
            "@_user_1",
            json!([mention("@_user_1", "ou_bot", "clibot")]),
        );
        assert!(matches!(parse_event(&bare, "ou_bot"), Event::Ignored(_)));
    }

    #[test]
    fn an_image_or_a_file_message_carries_its_resource() {
        let mut image = message("p2p", "x", json!([]));
        image["event"]["message"]["message_type"] = json!("image");
        image["event"]["message"]["content"] = json!(json!({"image_key": "img_1"}).to_string());
        match parse_event(&image, "ou_bot") {
            Event::Message {
                file: Some(f),
                text,
                ..
            } => {
                assert!(text.is_empty());
                assert_eq!((f.kind, f.name.as_str()), ("photo", "image.png"));
                assert!(f.id.ends_with("/img_1/image"), "{}", f.id);
            }
            other => panic!("{other:?}"),
        }
        let mut file = image.clone();
        file["event"]["message"]["message_type"] = json!("file");
        file["event"]["message"]["content"] =
            json!(json!({"file_key": "file_1", "file_name": "a b.pdf"}).to_string());
        assert!(matches!(
            parse_event(&file, "ou_bot"),
            Event::Message {
                file: Some(Attachment {
                    kind: "document",
                    ..
                }),
                ..
            }
        ));
    }

    #[test]
    fn other_messages_and_events_are_ignored() {
        let mut image = message("p2p", "x", json!([]));
        image["event"]["message"]["message_type"] = json!("image");
        assert!(matches!(parse_event(&image, "ou_bot"), Event::Ignored(_)));
        let mut from_bot = message("p2p", "x", json!([]));
        from_bot["event"]["sender"]["sender_type"] = json!("app");
        assert!(matches!(
            parse_event(&from_bot, "ou_bot"),
            Event::Ignored(_)
        ));
        let other = json!({ "header": { "event_type": "im.chat.member.bot.added_v1" } });
        assert!(matches!(parse_event(&other, "ou_bot"), Event::Ignored(_)));
        assert!(matches!(
            parse_event(&json!({}), "ou_bot"),
            Event::Ignored(_)
        ));
    }

    #[test]
    fn a_button_press_names_its_prompt_and_option() {
        let press = json!({
            "schema": "2.0",
            "header": { "event_id": "ev2", "event_type": "card.action.trigger" },
            "event": {
                "operator": { "open_id": "ou_user" },
                "action": { "tag": "button", "value": { "d": "a:p9:2" } },
                "context": { "open_message_id": "om_card", "open_chat_id": "oc_chat" },
            },
        });
        assert_eq!(
            parse_event(&press, "ou_bot"),
            Event::Button {
                event_id: "ev2".into(),
                chat: "oc_chat".into(),
                user: "ou_user".into(),
                answer: Some(("p9".into(), "2".into())),
            }
        );
        let mut foreign = press.clone();
        foreign["event"]["action"]["value"] = json!({ "req": "r_1" });
        assert!(matches!(
            parse_event(&foreign, "ou_bot"),
            Event::Button { answer: None, .. }
        ));
    }

    #[test]
    fn with_topics_a_thread_is_keyed_by_its_first_message() {
        let (queue, mut queued) = mpsc::channel(QUEUED);
        let mut ingress = Ingress {
            bot: "ou_bot".into(),
            recent: Recent::default(),
            queue,
            topics: true,
        };
        let mentions = json!([mention("@_user_1", "ou_bot", "bot")]);
        let mut threaded = message("group", "@_user_1 hi", mentions.clone());
        threaded["event"]["message"]["root_id"] = json!("om_root");
        threaded["event"]["message"]["thread_id"] = json!("omt_1");
        threaded["header"]["event_id"] = json!("ev2");
        threaded["event"]["message"]["message_id"] = json!("om_2");
        // A reply outside a thread names a root too, but no thread: the chat's own.
        let mut reply = message("group", "@_user_1 yo", mentions.clone());
        reply["event"]["message"]["root_id"] = json!("om_root");
        reply["header"]["event_id"] = json!("ev3");
        reply["event"]["message"]["message_id"] = json!("om_3");
        for (v, chat, topics) in [
            (threaded, "oc_chat/om_root", false),
            (reply, "oc_chat", true),
            (message("p2p", "hi", json!([])), "oc_chat", false),
        ] {
            ingress.handle(v.to_string().as_bytes());
            match queued.try_recv() {
                Ok(Queued::Message(m)) => assert_eq!((m.chat.as_str(), m.topics), (chat, topics)),
                _ => panic!("a message for {chat}"),
            }
        }
    }

    #[test]
    fn a_full_queue_leaves_an_event_unacknowledged_and_takes_it_when_pushed_again() {
        let (queue, mut queued) = mpsc::channel(1);
        let mut ingress = Ingress {
            bot: "ou_bot".into(),
            recent: Recent::default(),
            queue,
            topics: false,
        };
        let first = message("p2p", "one", json!([])).to_string();
        let mut second = message("p2p", "two", json!([]));
        second["header"]["event_id"] = json!("ev-2");
        second["event"]["message"]["message_id"] = json!("om_2");
        let second = second.to_string();
        assert_eq!(ingress.handle(first.as_bytes()), Handled::Ack(None));
        assert_eq!(ingress.handle(second.as_bytes()), Handled::Later);
        assert!(matches!(queued.try_recv(), Ok(Queued::Message(m)) if m.text == "one"));
        // Feishu pushes it again: taken now, once.
        assert_eq!(ingress.handle(second.as_bytes()), Handled::Ack(None));
        assert!(matches!(queued.try_recv(), Ok(Queued::Message(m)) if m.text == "two"));
        assert_eq!(ingress.handle(second.as_bytes()), Handled::Ack(None));
        assert!(queued.try_recv().is_err(), "a repeat is not handed over");
    }

    #[test]
    fn ingress_hands_each_message_over_once_and_answers_every_press() {
        let (queue, mut queued) = mpsc::channel(QUEUED);
        let mut ingress = Ingress {
            bot: "ou_bot".into(),
            recent: Recent::default(),
            queue,
            topics: false,
        };
        let m = message("p2p", "hi", json!([])).to_string();
        assert_eq!(ingress.handle(m.as_bytes()), Handled::Ack(None));
        assert_eq!(ingress.handle(m.as_bytes()), Handled::Ack(None));
        // Pushed again under a new event id: the same message.
        let mut again = message("p2p", "hi", json!([]));
        again["header"]["event_id"] = json!("ev-new");
        assert_eq!(
            ingress.handle(again.to_string().as_bytes()),
            Handled::Ack(None)
        );
        let press = json!({
            "header": { "event_id": "ev3", "event_type": "card.action.trigger" },
            "event": {
                "operator": { "open_id": "ou_user" },
                "action": { "value": { "d": "a:p9:1" } },
                "context": { "open_chat_id": "oc_chat" },
            },
        })
        .to_string();
        for _ in 0..2 {
            let Handled::Ack(Some(answer)) = ingress.handle(press.as_bytes()) else {
                panic!("a toast");
            };
            assert_eq!(answer["toast"]["type"], "info");
        }
        assert_eq!(ingress.handle(b"not json"), Handled::Ack(None));
        let mut got = Vec::new();
        while let Ok(q) = queued.try_recv() {
            got.push(q);
        }
        assert_eq!(got.len(), 2, "one message, one press");
        assert!(matches!(&got[0], Queued::Message(m) if m.id == "om_1" && m.text == "hi"));
        assert!(
            matches!(&got[1], Queued::Button { prompt, choice, .. } if prompt == "p9" && choice == "1")
        );
    }

    #[test]
    fn mentions_in_outgoing_text_are_defused() {
        let t = defuse(r#"ping <at user_id="all"></at> and <AT id=all> but <attr> stays"#);
        assert!(!t.contains("<at ") && !t.contains("<AT "), "{t}");
        assert!(t.contains("<attr>"), "{t}");
        assert_eq!(defuse("plain"), "plain");
    }

    #[test]
    fn every_text_part_fits_the_body_limit() {
        // Control characters take 7 bytes each in the body: the worst case.
        let worst = "\u{1}".repeat(MAX_TEXT_CHARS * 2 + 5);
        let parts = Feishu::text_parts(&worst, MAX_TEXT_CHARS);
        assert!(parts.len() >= 2);
        for p in &parts {
            assert!(body_size("text", &json!({ "text": p })) <= TEXT_BODY_LIMIT);
        }
        assert_eq!(parts.concat(), worst, "nothing lost");
        // A card that would be too big is split until it fits.
        let big = "\"".repeat(20_000);
        let parts = fit(vec![big.clone()], CARD_BODY_LIMIT, &|p| {
            body_size("interactive", &card::prompt(p, "p", &["a".into()]))
        });
        assert!(parts.len() > 1);
        assert_eq!(parts.concat(), big);
    }
}
