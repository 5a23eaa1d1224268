//! A fake Telegram Bot API on `127.0.0.1`, so the gateway's Telegram adapter (teloxide) can be
//! tested offline: the test pushes updates (a user writes, a user presses a button), the bot
//! long-polls them with `getUpdates`, and every call the bot makes is recorded and answered the
//! way Telegram answers it.
//!
//! What it emulates, beyond "answer with something that parses":
//! * URLs `{url}bot{token}/{method}`; the method name is matched case-insensitively (teloxide
//!   sends `GetMe`, `SendMessage`, ...); a wrong token is answered 401 `Unauthorized`, an unknown
//!   method 404 `Not Found`.
//! * Parameters as a JSON body (what teloxide sends), `multipart/form-data` (teloxide's
//!   `SendDocument`), a URL-encoded form or the query string.
//! * `getUpdates`: `offset` confirms (and so drops) older updates, a negative offset keeps only
//!   the last `-offset` ones, `limit` (1–100), `timeout` (long polling, woken by a push),
//!   `allowed_updates` (remembered; updates of other kinds pushed later are not delivered), and a
//!   newer `getUpdates` answers an older one still waiting with 409 `Conflict: terminated by
//!   other getUpdates request; ...`.
//! * A chat model: message ids count up per chat (shared by the user's and the bot's messages),
//!   `editMessageText` of an unknown message, with nothing changed, or of a user's message fails
//!   as on Telegram, an edit without `reply_markup` removes the inline keyboard, deleted messages
//!   are gone, `answerCallbackQuery` knows which query ids exist.
//! * Pinned messages per chat: `pinChatMessage` (any message of the chat, the user's too;
//!   `disable_notification` accepted; an unknown one is 400 `Bad Request: message to pin not
//!   found`, pinning a pinned one again changes nothing), `unpinChatMessage` (the given message,
//!   or without `message_id` the most recent pinned one; one that is not pinned, or nothing
//!   pinned, is 400 `Bad Request: message to unpin not found`), and a deleted message is no
//!   longer pinned. No "pinned a message" service message is added to the chat.
//!   See [`FakeTelegram::pinned`].
//! * Text checks: `parse_mode: "HTML"` is parsed like Telegram does (supported tags only, tags
//!   balanced; else 400 `Bad Request: can't parse entities: ...`), the text must not be empty
//!   and at most 4096 characters after parsing (1024 for a caption). MarkdownV2 is accepted
//!   without checking.
//! * Failure injection ([`FakeTelegram::fail_next`]): the next call of a method gets the given
//!   status and body instead, e.g. a 429 with `retry_after`.
//!
//! Like [`crate::mock_llm`], the API is synchronous: the server runs on its own thread with its
//! own single-threaded tokio runtime and stops when the [`FakeTelegram`] is dropped.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use serde_json::{Map, Value, json};
use tokio::sync::{oneshot, watch};

/// The id of the first update pushed. Telegram's ids are large and start anywhere; a client
/// must not assume they start at 0 or 1.
const FIRST_UPDATE_ID: i64 = 100_000_001;

/// Longest message text, in characters after entity parsing.
const MAX_TEXT: usize = 4096;

/// Longest media caption, in characters after entity parsing.
const MAX_CAPTION: usize = 1024;

/// What Telegram answers an older `getUpdates` with when a newer one arrives for the same token
/// (teloxide: `ApiError::TerminatedByOtherGetUpdates`, matched on this exact text).
pub const CONFLICT: &str = "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running";

/// What Telegram answers an edit that changes nothing with (teloxide:
/// `ApiError::MessageNotModified`, matched on this exact text).
pub const NOT_MODIFIED: &str = "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message";

/// The tags Telegram's HTML parse mode accepts.
const HTML_TAGS: &[&str] = &[
    "a",
    "b",
    "strong",
    "i",
    "em",
    "u",
    "ins",
    "s",
    "strike",
    "del",
    "span",
    "tg-spoiler",
    "tg-emoji",
    "code",
    "pre",
    "blockquote",
];

/// The actions `sendChatAction` accepts.
const CHAT_ACTIONS: &[&str] = &[
    "typing",
    "upload_photo",
    "record_video",
    "upload_video",
    "record_voice",
    "upload_voice",
    "upload_document",
    "choose_sticker",
    "find_location",
    "record_video_note",
    "upload_video_note",
];

/// An error reply in Telegram's shape: `{"ok":false,"error_code":code,"description":...}`.
pub fn error_body(code: u16, description: &str) -> Value {
    json!({ "ok": false, "error_code": code, "description": description })
}

/// Telegram's flood-control reply (use with status 429): teloxide turns it into
/// `RequestError::RetryAfter(secs)`.
pub fn retry_after_body(secs: u64) -> Value {
    json!({
        "ok": false,
        "error_code": 429,
        "description": format!("Too Many Requests: retry after {secs}"),
        "parameters": { "retry_after": secs },
    })
}

/// One successful call that put something into a chat or changed it: `sendmessage`,
/// `editmessagetext`, `editmessagereplymarkup`, `deletemessage` or `senddocument`.
#[derive(Clone, Debug, PartialEq)]
pub struct Sent {
    /// The method, lowercased.
    pub method: String,
    pub chat_id: i64,
    /// The text as the bot sent it (with its HTML tags, if any); the caption for
    /// `senddocument`; the message's current text for `editmessagereplymarkup`; empty for
    /// `deletemessage`.
    pub text: String,
    pub parse_mode: Option<String>,
    /// The `reply_markup` as sent (any kind of keyboard), if any.
    pub reply_markup: Option<Value>,
    /// The new message's id (`sendmessage`, `senddocument`) or the one edited or deleted.
    pub message_id: i64,
    /// When the fake received the call (for latency measurements).
    pub at: std::time::Instant,
    /// The forum topic (`message_thread_id`) a new message went to, if any.
    pub thread: Option<i64>,
}

/// The texts of the messages sent to `chat` (`sendMessage`), in order.
/// Waits for the pairing code the bot gave `chat`, and returns it (8 characters).
pub fn pairing_code(tg: &FakeTelegram, chat: i64) -> String {
    let sent = tg.wait_sent("a pairing code", |s| {
        texts(s, chat).iter().any(|t| t.contains("pairing code"))
    });
    let msg = texts(&sent, chat)
        .into_iter()
        .find(|t| t.contains("pairing code"))
        .unwrap_or_default();
    let code: String = msg
        .split("pairing code is ")
        .nth(1)
        .unwrap_or_default()
        .chars()
        .take(9)
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    assert_eq!(code.len(), 8, "a pairing code in {msg:?}");
    code
}

pub fn texts(sent: &[Sent], chat: i64) -> Vec<String> {
    sent.iter()
        .filter(|s| s.chat_id == chat && s.method == "sendmessage")
        .map(|s| s.text.clone())
        .collect()
}

/// A file the bot sent with `sendDocument`.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    pub chat_id: i64,
    pub filename: String,
    pub content: Vec<u8>,
    pub caption: Option<String>,
    pub message_id: i64,
}

/// A running fake Bot API on `127.0.0.1`. Dropping it stops the server.
pub struct FakeTelegram {
    addr: SocketAddr,
    token: String,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// The state, and a way for waiting `getUpdates` to hear about changes.
struct Shared {
    state: Mutex<State>,
    /// Bumped whenever a waiting `getUpdates` may have something new to look at (an update was
    /// pushed, a newer `getUpdates` arrived).
    changed: watch::Sender<u64>,
}

impl Shared {
    /// Locks the state even if a handler panicked while holding it: the data stays usable for
    /// the assertions that follow.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn wake(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// A message as the fake keeps it.
struct StoredMessage {
    /// The Message object as Telegram would return it now.
    json: Value,
    /// The text (or caption) as the bot sent it, before entity parsing.
    raw_text: String,
    parse_mode: Option<String>,
    /// The inline keyboard attached, if any.
    markup: Option<Value>,
    from_bot: bool,
    /// A text message (as opposed to a document), so `editMessageText` applies.
    is_text: bool,
}

struct Chat {
    info: Value,
    next_message_id: i64,
    messages: BTreeMap<i64, StoredMessage>,
    /// Forum topics by id (the id of the message that created each): (name, closed).
    topics: BTreeMap<i64, (String, bool)>,
    /// Pinned messages; ordered by id, as Telegram orders them (by sending date).
    pinned: BTreeSet<i64>,
}

struct State {
    token: String,
    /// `getMe`'s answer.
    me: Value,
    next_update_id: i64,
    /// Updates not yet confirmed by an offset, oldest first.
    queue: VecDeque<Value>,
    /// The update kinds the bot asked for (`allowed_updates`), if it did.
    allowed_updates: Option<Vec<String>>,
    offsets: Vec<i64>,
    /// Counts `getUpdates` requests; a waiting one whose number is no longer the latest has been
    /// superseded and gets 409.
    poll_generation: u64,
    /// `getUpdates` requests waiting for an update right now.
    waiting: usize,
    calls: Vec<(String, Value)>,
    sent: Vec<Sent>,
    documents: Vec<Document>,
    photos: Vec<Document>,
    /// Files users sent, by `file_id`: (file_path, bytes), for `getFile` and the download.
    user_files: HashMap<String, (String, Vec<u8>)>,
    failures: HashMap<String, VecDeque<(u16, Value)>>,
    /// Delays for the next calls of a method ([`FakeTelegram::stall_next`]).
    stalls: HashMap<String, VecDeque<Duration>>,
    /// (method, needle, wait): see [`FakeTelegram::hold_answer_when`].
    holds: Vec<(String, String, Duration)>,
    /// Chats the bot was removed from: every call for them answers 403.
    kicked: HashSet<i64>,
    /// One-shot failures for the first call of a method whose text contains a needle.
    failures_when: Vec<(String, String, u16, Value)>,
    chats: BTreeMap<i64, Chat>,
    users: HashMap<i64, Value>,
    callback_ids: HashSet<String>,
    /// Chats under flood control: the next calls for them (the count) answer 429 with
    /// `retry_after` (the seconds).
    throttled: HashMap<i64, (u64, u32)>,
    /// Every update ever queued, for [`FakeTelegram::redeliver`].
    history: Vec<Value>,
    commands: Value,
    next_file: u64,
    /// The bot has topics in private chats (Bot API 9.3: `getMe`'s `has_topics_enabled`).
    private_topics: bool,
}

/// A failed call: HTTP status and Telegram's description.
type Failure = (u16, String);

fn bad_request(what: &str) -> Failure {
    (400, format!("Bad Request: {what}"))
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// A bot token in Telegram's shape, for the tests.
pub const TEST_TOKEN: &str = "123456789:AAFakeTokenForClibotTestsOnly_0123456789";

/// Starts the real gateway of `h` against `tg` (a fake started with [`TEST_TOKEN`]).
pub fn gateway(h: &crate::Harness, tg: &FakeTelegram) -> std::process::Child {
    h.gateway(
        &["--telegram", "--telegram-api-url", &tg.url()],
        &[("TELEGRAM_TOKEN", TEST_TOKEN)],
    )
}

/// The fake, with the real gateway of `h` already polling it.
/// A daemon with `config` added to its config file, a fake Telegram, and a gateway polling
/// it: how a Telegram test begins (`config` usually holds an `[access.telegram]` section).
pub fn started(config: &str) -> (crate::Harness, FakeTelegram, std::process::Child) {
    let mut h = crate::Harness::with_config(config);
    h.start_daemon();
    let (tg, g) = with_gateway(&h);
    (h, tg, g)
}

pub fn with_gateway(h: &crate::Harness) -> (FakeTelegram, std::process::Child) {
    let tg = FakeTelegram::start(TEST_TOKEN);
    let g = gateway(h, &tg);
    assert!(
        tg.wait_polling(Duration::from_secs(20)),
        "the gateway polls"
    );
    (tg, g)
}

impl FakeTelegram {
    /// The newest message to `chat` whose text holds `needle` and that has buttons (waited
    /// for): its id and its buttons' callback data.
    pub fn buttons(&self, chat: i64, needle: &str) -> (i64, Vec<String>) {
        let with =
            |m: &&Sent| m.chat_id == chat && m.text.contains(needle) && m.reply_markup.is_some();
        let sent = self.wait_sent(needle, |s| s.iter().any(|m| with(&m)));
        let Some(m) = sent.iter().rev().find(with) else {
            panic!("no message with buttons holding {needle:?}");
        };
        let data = m.reply_markup.as_ref().map_or_else(Vec::new, |r| {
            r["inline_keyboard"]
                .as_array()
                .map(|rows| {
                    rows.iter()
                        .flat_map(|r| r.as_array().cloned().unwrap_or_default())
                        .filter_map(|b| b["callback_data"].as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        });
        (m.message_id, data)
    }

    /// Starts the fake for a bot with this token (`"123456:ABC..."`: the part before the colon
    /// is the bot's user id, as on Telegram) on an ephemeral port of 127.0.0.1. The socket is
    /// bound before this returns, so no request can be refused.
    pub fn start(token: &str) -> FakeTelegram {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("bind the fake Telegram to 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("make the fake Telegram's socket non-blocking");
        let addr = listener
            .local_addr()
            .expect("the fake Telegram's socket address");
        let bot_id = token
            .split(':')
            .next()
            .and_then(|id| id.parse::<i64>().ok())
            .unwrap_or(123_456);
        let me = json!({
            "id": bot_id,
            "is_bot": true,
            "first_name": "Clibot Test",
            "username": "clibot_test_bot",
            "can_join_groups": true,
            "can_read_all_group_messages": false,
            "supports_inline_queries": false,
            "can_connect_to_business": false,
            "has_main_web_app": false,
        });
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                token: token.to_string(),
                me,
                next_update_id: FIRST_UPDATE_ID,
                queue: VecDeque::new(),
                allowed_updates: None,
                offsets: Vec::new(),
                poll_generation: 0,
                waiting: 0,
                calls: Vec::new(),
                sent: Vec::new(),
                documents: Vec::new(),
                photos: Vec::new(),
                user_files: HashMap::new(),
                failures: HashMap::new(),
                stalls: HashMap::new(),
                holds: Vec::new(),
                kicked: HashSet::new(),
                failures_when: Vec::new(),
                chats: BTreeMap::new(),
                users: HashMap::new(),
                callback_ids: HashSet::new(),
                throttled: HashMap::new(),
                history: Vec::new(),
                commands: json!([]),
                next_file: 1,
                private_topics: false,
            }),
            changed: watch::Sender::new(0),
        });
        let (shutdown, stopped) = oneshot::channel();
        let thread_shared = Arc::clone(&shared);
        let thread = crate::fake_thread("fake-telegram", move || {
            serve(listener, thread_shared, stopped)
        });
        FakeTelegram {
            addr,
            token: token.to_string(),
            shared,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    /// The base URL for teloxide's `Bot::set_api_url` (or `TELOXIDE_API_URL`), with a trailing
    /// slash: `http://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    /// The bot's user id (from the token).
    pub fn bot_id(&self) -> i64 {
        self.shared.lock().me["id"].as_i64().unwrap_or_default()
    }

    /// Makes group `chat_id` a forum supergroup (topics on), as a group's admin does.
    pub fn make_forum(&self, chat_id: i64) {
        let mut st = self.shared.lock();
        st.chat(chat_id, None).info = json!({
            "id": chat_id, "title": "Test forum", "type": "supergroup", "is_forum": true,
        });
    }

    /// Turns on topics in private chats for the bot (BotFather's threaded mode, Bot API 9.3):
    /// `getMe` says `has_topics_enabled`, and private chats take `createForumTopic`.
    pub fn enable_private_topics(&self) {
        let mut st = self.shared.lock();
        st.private_topics = true;
        st.me["has_topics_enabled"] = json!(true);
    }

    /// The topics of a chat: (id, name, closed), oldest first.
    pub fn topics(&self, chat_id: i64) -> Vec<(i64, String, bool)> {
        let st = self.shared.lock();
        st.chats.get(&chat_id).map_or_else(Vec::new, |c| {
            c.topics
                .iter()
                .map(|(id, (name, closed))| (*id, name.clone(), *closed))
                .collect()
        })
    }

    /// A user writes `text` in forum topic `thread` of chat `chat_id` (a topic message, as
    /// Telegram marks it: `message_thread_id` and `is_topic_message`). Returns the update's id.
    pub fn push_topic_message(
        &self,
        chat_id: i64,
        thread: i64,
        user_id: i64,
        first_name: &str,
        text: &str,
    ) -> i64 {
        self.push_message_with(chat_id, user_id, first_name, text, Some(thread))
    }

    /// A user writes `text` to the bot. With `chat_id == user_id` (or any positive chat id) it
    /// is a private chat; a negative chat id makes it a group. Returns the update's id.
    pub fn push_message(&self, chat_id: i64, user_id: i64, first_name: &str, text: &str) -> i64 {
        self.push_message_with(chat_id, user_id, first_name, text, None)
    }

    fn push_message_with(
        &self,
        chat_id: i64,
        user_id: i64,
        first_name: &str,
        text: &str,
        thread: Option<i64>,
    ) -> i64 {
        let id = {
            let mut st = self.shared.lock();
            let user = json!({
                "id": user_id,
                "is_bot": false,
                "first_name": first_name,
                "language_code": "en",
            });
            st.users.insert(user_id, user.clone());
            let chat = st.chat(chat_id, Some(first_name));
            let message_id = chat.next_message_id;
            chat.next_message_id += 1;
            let mut message = json!({
                "message_id": message_id,
                "from": user,
                "chat": chat.info.clone(),
                "date": now(),
                "text": text,
            });
            if let Some(t) = thread {
                message["message_thread_id"] = json!(t);
                message["is_topic_message"] = json!(true);
            }
            if text.starts_with('/') {
                let command = text.split_whitespace().next().unwrap_or(text);
                message["entities"] = json!([{
                    "offset": 0,
                    "length": command.encode_utf16().count(),
                    "type": "bot_command",
                }]);
            }
            chat.messages.insert(
                message_id,
                StoredMessage {
                    json: message.clone(),
                    raw_text: text.to_string(),
                    parse_mode: None,
                    markup: None,
                    from_bot: false,
                    is_text: true,
                },
            );
            st.enqueue("message", message)
        };
        self.shared.wake();
        id
    }

    /// A user sends a file: `kind` "photo" (shown as a picture), "document" (with `name`) or
    /// "voice", with a caption; `getFile` and the download serve its bytes. Returns the
    /// update's id.
    pub fn push_file(
        &self,
        chat_id: i64,
        user_id: i64,
        kind: &str,
        name: &str,
        data: &[u8],
        caption: &str,
    ) -> i64 {
        let id = {
            let mut st = self.shared.lock();
            let n = st.user_files.len();
            let file_id = format!("AgACfakeuser{n:06}");
            let file_path = format!("{kind}s/file_{n}.bin");
            st.user_files
                .insert(file_id.clone(), (file_path, data.to_vec()));
            let user = json!({"id": user_id, "is_bot": false, "first_name": "User"});
            st.users.insert(user_id, user.clone());
            let chat = st.chat(chat_id, Some("User"));
            let message_id = chat.next_message_id;
            chat.next_message_id += 1;
            let meta = json!({
                "file_id": file_id,
                "file_unique_id": format!("u{file_id}"),
                "file_size": data.len(),
            });
            let mut message = json!({
                "message_id": message_id,
                "from": user,
                "chat": chat.info.clone(),
                "date": now(),
            });
            match kind {
                "photo" => {
                    let mut size = meta.clone();
                    size["width"] = json!(64);
                    size["height"] = json!(48);
                    let mut thumb = size.clone();
                    thumb["file_id"] = json!(format!("{file_id}thumb"));
                    thumb["width"] = json!(8);
                    thumb["height"] = json!(6);
                    message["photo"] = json!([thumb, size]);
                }
                "voice" => {
                    let mut v = meta.clone();
                    v["duration"] = json!(3);
                    v["mime_type"] = json!("audio/ogg");
                    message["voice"] = v;
                }
                _ => {
                    let mut d = meta.clone();
                    d["file_name"] = json!(name);
                    d["mime_type"] = json!("application/octet-stream");
                    message["document"] = d;
                }
            }
            if !caption.is_empty() {
                message["caption"] = json!(caption);
            }
            chat.messages.insert(
                message_id,
                StoredMessage {
                    json: message.clone(),
                    raw_text: caption.to_string(),
                    parse_mode: None,
                    markup: None,
                    from_bot: false,
                    is_text: false,
                },
            );
            st.enqueue("message", message)
        };
        self.shared.wake();
        id
    }

    /// A user presses an inline button with this `callback_data` under message `message_id` of
    /// the chat. The query's `message` is that message as it is now (an "inaccessible message"
    /// with `date: 0` if the fake does not know it, e.g. it was deleted); its id is
    /// `"cb<update_id>"`. Returns the update's id.
    pub fn push_callback(&self, chat_id: i64, user_id: i64, message_id: i64, data: &str) -> i64 {
        let id = {
            let mut st = self.shared.lock();
            let from =
                st.users.get(&user_id).cloned().unwrap_or_else(
                    || json!({ "id": user_id, "is_bot": false, "first_name": "User" }),
                );
            let chat = st.chat(chat_id, None);
            let message = match chat.messages.get(&message_id) {
                Some(m) => m.json.clone(),
                None => json!({ "chat": chat.info.clone(), "message_id": message_id, "date": 0 }),
            };
            let query_id = format!("cb{}", st.next_update_id);
            st.callback_ids.insert(query_id.clone());
            let query = json!({
                "id": query_id,
                "from": from,
                "message": message,
                "chat_instance": format!("ci{chat_id}"),
                "data": data,
            });
            st.enqueue("callback_query", query)
        };
        self.shared.wake();
        id
    }

    /// The `offset` of every `getUpdates` received, in order (0 when a request had none).
    pub fn offsets(&self) -> Vec<i64> {
        self.shared.lock().offsets.clone()
    }

    /// Ids of the updates not yet confirmed by an offset.
    pub fn pending(&self) -> Vec<i64> {
        self.shared
            .lock()
            .queue
            .iter()
            .filter_map(|u| u["update_id"].as_i64())
            .collect()
    }

    /// Whether a `getUpdates` is waiting for an update right now (the bot is long-polling).
    pub fn is_polling(&self) -> bool {
        self.shared.lock().waiting > 0
    }

    /// Waits up to `timeout` until a `getUpdates` is waiting; whether one is.
    pub fn wait_polling(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.is_polling() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The newest version of the message with id `message_id` that was sent, if any.
    pub fn message(&self, message_id: i64) -> Option<Sent> {
        self.sent()
            .into_iter()
            .rev()
            .find(|m| m.message_id == message_id)
    }

    /// Everything that changed a chat, in order (only calls that succeeded).
    pub fn sent(&self) -> Vec<Sent> {
        self.shared.lock().sent.clone()
    }

    /// Every request received, in order, including `getUpdates` and the ones answered with an
    /// error: the lowercased method and its parameters (the JSON body; for `multipart/form-data`
    /// an object of the text fields, with JSON-looking values parsed and `*_id` numbers as
    /// numbers, and each file part as `{"filename","content_type","size","content"}`).
    pub fn calls(&self) -> Vec<(String, Value)> {
        self.shared.lock().calls.clone()
    }

    /// The parameters of every call of `method` (any case), in order.
    pub fn calls_of(&self, method: &str) -> Vec<Value> {
        let method = method.to_ascii_lowercase();
        self.shared
            .lock()
            .calls
            .iter()
            .filter(|(m, _)| *m == method)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Pictures sent with `sendPhoto`.
    pub fn photos(&self) -> Vec<Document> {
        self.shared.lock().photos.clone()
    }

    /// Files sent with `sendDocument`.
    pub fn documents(&self) -> Vec<Document> {
        self.shared.lock().documents.clone()
    }

    /// The messages in a chat as they are now (after edits and deletions), both the user's and
    /// the bot's, as Telegram Message objects in message-id order.
    pub fn messages(&self, chat_id: i64) -> Vec<Value> {
        self.shared
            .lock()
            .chats
            .get(&chat_id)
            .map(|c| c.messages.values().map(|m| m.json.clone()).collect())
            .unwrap_or_default()
    }

    /// The ids of the messages pinned in a chat now (`pinChatMessage`, less `unpinChatMessage`
    /// and deletions), in message-id order as Telegram keeps them (by sending date, not by when
    /// they were pinned): the last one is what Telegram shows at the top of the chat.
    pub fn pinned(&self, chat_id: i64) -> Vec<i64> {
        self.shared
            .lock()
            .chats
            .get(&chat_id)
            .map(|c| c.pinned.iter().copied().collect())
            .unwrap_or_default()
    }

    /// The commands last set with `setMyCommands`.
    pub fn commands(&self) -> Value {
        self.shared.lock().commands.clone()
    }

    /// The bot is removed from `chat_id` (kicked from a group, blocked by a user): from now on
    /// every call for that chat answers 403, as Telegram does.
    pub fn kick(&self, chat_id: i64) {
        self.shared.lock().kicked.insert(chat_id);
    }

    /// Answers the first call of `method` whose `text` contains `needle` with this status and
    /// body (once), e.g. to fail the second part of a reply split over several messages.
    pub fn fail_when(&self, method: &str, needle: &str, status: u16, body: Value) {
        self.shared.lock().failures_when.push((
            method.to_ascii_lowercase(),
            needle.to_string(),
            status,
            body,
        ));
    }

    /// Flood control in one chat: the next `calls` calls for `chat_id` (any method) answer
    /// 429 with `retry_after: secs`, as Telegram does for a chat the bot writes to too often.
    pub fn throttle(&self, chat_id: i64, secs: u64, calls: u32) {
        self.shared.lock().throttled.insert(chat_id, (secs, calls));
    }

    /// Calls for `chat_id` still to be answered 429 (see [`FakeTelegram::throttle`]).
    pub fn throttled_left(&self, chat_id: i64) -> u32 {
        self.shared
            .lock()
            .throttled
            .get(&chat_id)
            .map_or(0, |t| t.1)
    }

    /// Hands update `update_id` over again, as Telegram does when the bot stopped before
    /// confirming it (a gateway killed after acting on an update, before its next
    /// `getUpdates`): the same update id and message, queued anew.
    pub fn redeliver(&self, update_id: i64) {
        {
            let mut st = self.shared.lock();
            let Some(u) = st
                .history
                .iter()
                .find(|u| u["update_id"].as_i64() == Some(update_id))
                .cloned()
            else {
                panic!("no update {update_id} was ever queued");
            };
            st.queue
                .retain(|q| q["update_id"].as_i64() != Some(update_id));
            st.queue.push_front(u);
        }
        self.shared.wake();
    }

    /// The bot is back in `chat_id`.
    pub fn unkick(&self, chat_id: i64) {
        self.shared.lock().kicked.remove(&chat_id);
    }

    /// Answers the next call of `method` (any case, e.g. `"sendMessage"`) with this HTTP status
    /// and JSON body instead of handling it. Each call of `fail_next` fails one request; several
    /// queue up in order. See [`retry_after_body`] and [`error_body`].
    pub fn fail_next(&self, method: &str, status: u16, body: Value) {
        self.shared
            .lock()
            .failures
            .entry(method.to_ascii_lowercase())
            .or_default()
            .push_back((status, body));
    }

    /// Holds the answer to the next call of `method` (any case, e.g. `"getUpdates"`,
    /// `"answerCallbackQuery"`) for `wait`: a Bot API that stops answering, or a handler of the
    /// bot that hangs on it. After the wait the call is answered as usual — a `getUpdates` with
    /// no updates (the bot has long moved on). Each call of `stall_next` stalls one request.
    pub fn stall_next(&self, method: &str, wait: Duration) {
        self.shared
            .lock()
            .stalls
            .entry(method.to_ascii_lowercase())
            .or_default()
            .push_back(wait);
    }

    /// Carries out the first call of `method` whose `text` contains `needle` (the message
    /// reaches the chat) but holds its answer for `wait`: a bot killed meanwhile never learns
    /// that it went out.
    pub fn hold_answer_when(&self, method: &str, needle: &str, wait: Duration) {
        self.shared
            .lock()
            .holds
            .push((method.to_ascii_lowercase(), needle.to_string(), wait));
    }

    /// Stalls no further request: the [`FakeTelegram::stall_next`] calls not used yet are
    /// dropped (a request stalled now still waits its time).
    pub fn clear_stalls(&self) {
        self.shared.lock().stalls.clear();
    }

    /// Waits until [`FakeTelegram::sent`] satisfies `pred` and returns it; panics after 20 s
    /// with what was sent.
    pub fn wait_sent(&self, what: &str, pred: impl Fn(&[Sent]) -> bool) -> Vec<Sent> {
        crate::wait_records(what, || self.sent(), pred)
    }

    /// Waits for a file named `filename` sent with `sendDocument`; panics after 20 s.
    pub fn wait_document(&self, filename: &str) -> Document {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(d) = self
                .documents()
                .into_iter()
                .find(|d| d.filename == filename)
            {
                return d;
            }
            if Instant::now() >= deadline {
                panic!(
                    "timed out waiting for the file {filename}; sent so far: {:#?}",
                    self.sent()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until [`FakeTelegram::calls`] satisfies `pred` and returns it; panics after 20 s.
    pub fn wait_calls(
        &self,
        what: &str,
        pred: impl Fn(&[(String, Value)]) -> bool,
    ) -> Vec<(String, Value)> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let calls = self.calls();
            if pred(&calls) {
                return calls;
            }
            if Instant::now() >= deadline {
                panic!("timed out waiting for {what}; calls so far: {calls:#?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for FakeTelegram {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl State {
    /// The chat, created on first use: private for a positive id, a group for a negative one.
    fn chat(&mut self, chat_id: i64, first_name: Option<&str>) -> &mut Chat {
        self.chats.entry(chat_id).or_insert_with(|| Chat {
            info: if chat_id > 0 {
                json!({ "id": chat_id, "first_name": first_name.unwrap_or("User"), "type": "private" })
            } else {
                json!({ "id": chat_id, "title": "Test group", "type": "group" })
            },
            next_message_id: 1,
            messages: BTreeMap::new(),
            topics: BTreeMap::new(),
            pinned: BTreeSet::new(),
        })
    }

    /// Queues an update of this kind unless the bot excluded the kind; returns its id either way.
    fn enqueue(&mut self, kind: &str, payload: Value) -> i64 {
        let id = self.next_update_id;
        self.next_update_id += 1;
        if let Some(allowed) = &self.allowed_updates
            && !allowed.iter().any(|k| k == kind)
        {
            eprintln!(
                "fake Telegram: not delivering {kind} update {id}: the bot asked only for {allowed:?}"
            );
            return id;
        }
        let mut update = Map::new();
        update.insert("update_id".into(), json!(id));
        update.insert(kind.into(), payload);
        self.history.push(Value::Object(update.clone()));
        self.queue.push_back(Value::Object(update));
        id
    }

    /// Applies a `getUpdates` offset: a positive one confirms every update before it, a negative
    /// one keeps only the last `-offset` updates.
    fn confirm(&mut self, offset: i64) {
        if offset > 0 {
            self.queue
                .retain(|u| u["update_id"].as_i64().is_some_and(|id| id >= offset));
        } else if offset < 0 {
            let keep = usize::try_from(offset.unsigned_abs()).unwrap_or(usize::MAX);
            while self.queue.len() > keep {
                self.queue.pop_front();
            }
        }
    }

    /// Stores a new message from the bot and returns its id and JSON.
    fn bot_message(
        &mut self,
        chat_id: i64,
        content: Map<String, Value>,
        stored: (String, Option<String>, Option<Value>, bool),
    ) -> (i64, Value) {
        let me = self.me.clone();
        let chat = self.chat(chat_id, None);
        let message_id = chat.next_message_id;
        chat.next_message_id += 1;
        let mut message = json!({
            "message_id": message_id,
            "from": {
                "id": me["id"],
                "is_bot": true,
                "first_name": me["first_name"],
                "username": me["username"],
            },
            "chat": chat.info.clone(),
            "date": now(),
        });
        for (k, v) in content {
            message[k] = v;
        }
        let (raw_text, parse_mode, markup, is_text) = stored;
        if let Some(markup) = &markup {
            message["reply_markup"] = markup.clone();
        }
        chat.messages.insert(
            message_id,
            StoredMessage {
                json: message.clone(),
                raw_text,
                parse_mode,
                markup,
                from_bot: true,
                is_text,
            },
        );
        (message_id, message)
    }

    fn message_mut(
        &mut self,
        chat_id: i64,
        message_id: i64,
        missing: &str,
    ) -> Result<&mut StoredMessage, Failure> {
        self.chats
            .get_mut(&chat_id)
            .and_then(|c| c.messages.get_mut(&message_id))
            .ok_or_else(|| bad_request(missing))
    }
}

/// Accepts connections until told to stop.
async fn serve(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    mut stopped: oneshot::Receiver<()>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("fake Telegram: cannot use the listening socket: {e}");
            return;
        }
    };
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        eprintln!("fake Telegram: accept failed: {e}");
                        continue;
                    }
                };
                let shared = Arc::clone(&shared);
                let service = service_fn(move |req| handle(req, Arc::clone(&shared)));
                crate::spawn_http(stream, service, "fake Telegram");
            }
        }
    }
}

type Body = Full<Bytes>;

fn json_response(status: u16, value: &Value) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(value.to_string())));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn ok(result: Value) -> Response<Body> {
    json_response(200, &json!({ "ok": true, "result": result }))
}

fn fail((status, description): Failure) -> Response<Body> {
    json_response(status, &error_body(status, &description))
}

/// `(token, method)` from `.../bot<token>/<method>`.
fn route(path: &str) -> Option<(String, String)> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let [.., bot, method] = segments.as_slice() else {
        return None;
    };
    let token = bot.strip_prefix("bot")?;
    Some((percent_decode(token, false), (*method).to_string()))
}

/// A file part of a multipart request.
struct FilePart {
    name: String,
    filename: String,
    content_type: Option<String>,
    data: Vec<u8>,
}

/// Answers one HTTP request.
async fn handle(req: Request<Incoming>, shared: Arc<Shared>) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or_default().to_string();
    let content_type = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    // A download: `/file/bot<token>/<file_path>`.
    if let Some(rest) = path.strip_prefix("/file/bot") {
        let found = rest.split_once('/').and_then(|(token, file_path)| {
            let st = shared.lock();
            (percent_decode(token, false) == st.token)
                .then(|| {
                    st.user_files
                        .values()
                        .find(|(p, _)| *p == percent_decode(file_path, false))
                        .map(|(_, d)| d.clone())
                })
                .flatten()
        });
        return Ok(match found {
            Some(data) => Response::builder()
                .status(200)
                .header(CONTENT_TYPE, "application/octet-stream")
                .body(Full::new(Bytes::from(data)))
                .unwrap_or_else(|_| fail((500, "response".into()))),
            None => {
                eprintln!("fake Telegram: no file at {path}");
                fail((404, "Not Found".into()))
            }
        });
    }
    let Some((token, method)) = route(&path) else {
        eprintln!("fake Telegram: no route for {path}");
        return Ok(fail((404, "Not Found".into())));
    };
    let bytes = match req.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => return Ok(fail(bad_request(&format!("cannot read the body: {e}")))),
    };

    let mut params = Map::new();
    for (k, v) in parse_form(&query) {
        params.insert(k, Value::String(v));
    }
    let mut files = Vec::new();
    let lower_type = content_type.to_ascii_lowercase();
    if lower_type.starts_with("multipart/form-data") {
        let Some((fields, parts)) =
            boundary(&content_type).and_then(|b| parse_multipart(&bytes, &b))
        else {
            return Ok(fail(bad_request("can't parse multipart/form-data")));
        };
        params.extend(fields);
        files = parts;
    } else if lower_type.starts_with("application/x-www-form-urlencoded") {
        for (k, v) in parse_form(&String::from_utf8_lossy(&bytes)) {
            params.insert(k, Value::String(v));
        }
    } else if !bytes.is_empty() {
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(Value::Object(body)) => params.extend(body),
            Ok(_) => return Ok(fail(bad_request("parameters must be a JSON object"))),
            Err(e) => return Ok(fail(bad_request(&format!("can't parse JSON: {e}")))),
        }
    }
    for f in &files {
        params.insert(
            f.name.clone(),
            json!({
                "filename": f.filename,
                "content_type": f.content_type,
                "size": f.data.len(),
                "content": String::from_utf8_lossy(&f.data),
            }),
        );
    }
    let params = Value::Object(params);
    let method = method.to_ascii_lowercase();

    let stall = {
        let mut st = shared.lock();
        if token == st.token {
            st.stalls.get_mut(&method).and_then(VecDeque::pop_front)
        } else {
            None
        }
    };
    if let Some(wait) = stall {
        if method == "getupdates" {
            // The offset confirms what it confirms on arrival, as on Telegram.
            let offset = int(&params, "offset").unwrap_or(0);
            shared.lock().confirm(offset);
        }
        tokio::time::sleep(wait).await;
        if method == "getupdates" {
            shared.lock().calls.push((method, params));
            return Ok(ok(json!([])));
        }
    }

    {
        let mut st = shared.lock();
        if token != st.token {
            return Ok(fail((401, "Unauthorized".into())));
        }
        st.calls.push((method.clone(), params.clone()));
        if let Some((status, body)) = st.failures.get_mut(&method).and_then(VecDeque::pop_front) {
            return Ok(json_response(status, &body));
        }
        let text = params
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if let Some(i) = st
            .failures_when
            .iter()
            .position(|(m, needle, _, _)| *m == method && text.contains(needle.as_str()))
        {
            let (_, _, status, body) = st.failures_when.remove(i);
            return Ok(json_response(status, &body));
        }
        let chat = params.get("chat_id").and_then(|v| match v {
            Value::Number(n) => n.as_i64(),
            Value::String(s) => s.parse().ok(),
            _ => None,
        });
        if let Some(chat) = chat.filter(|c| st.kicked.contains(c)) {
            let what = if chat < 0 { "group chat" } else { "user" };
            let description = if chat < 0 {
                format!("Forbidden: bot was kicked from the {what}")
            } else {
                "Forbidden: bot was blocked by the user".to_string()
            };
            return Ok(json_response(403, &error_body(403, &description)));
        }
        if let Some((secs, left)) = chat.and_then(|c| st.throttled.get_mut(&c))
            && *left > 0
        {
            *left -= 1;
            let secs = *secs;
            return Ok(json_response(429, &retry_after_body(secs)));
        }
    }

    if method == "getupdates" {
        return Ok(get_updates(&shared, &params).await);
    }
    let (result, hold) = {
        let mut st = shared.lock();
        let text = string(&params, "text").unwrap_or_default();
        let hold = st
            .holds
            .iter()
            .position(|(m, needle, _)| *m == method && text.contains(needle.as_str()))
            .map(|i| st.holds.remove(i).2);
        (apply(&mut st, &method, &params, &files), hold)
    };
    if let Some(wait) = hold {
        tokio::time::sleep(wait).await;
    }
    Ok(match result {
        Ok(v) => ok(v),
        Err(f) => fail(f),
    })
}

/// Decrements the count of waiting polls when a wait ends, however it ends.
struct Waiting<'a>(&'a Shared);

impl<'a> Waiting<'a> {
    fn new(shared: &'a Shared) -> Waiting<'a> {
        shared.lock().waiting += 1;
        Waiting(shared)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.waiting = st.waiting.saturating_sub(1);
    }
}

/// `getUpdates`: confirms by offset, answers at once if updates are queued, else waits up to
/// `timeout` seconds for one; a newer `getUpdates` ends the wait with 409.
async fn get_updates(shared: &Shared, params: &Value) -> Response<Body> {
    let offset = int(params, "offset").unwrap_or(0);
    let limit = usize::try_from(int(params, "limit").unwrap_or(100).clamp(1, 100)).unwrap_or(100);
    let timeout = u64::try_from(int(params, "timeout").unwrap_or(0).clamp(0, 3600)).unwrap_or(0);
    let mut changed = shared.changed.subscribe();
    let generation = {
        let mut st = shared.lock();
        st.offsets.push(offset);
        st.confirm(offset);
        if let Some(Value::Array(kinds)) = json_field(params, "allowed_updates") {
            let kinds: Vec<String> = kinds
                .iter()
                .filter_map(|k| k.as_str().map(str::to_string))
                .collect();
            // An empty list means "the default": every kind we can push.
            st.allowed_updates = (!kinds.is_empty()).then_some(kinds);
        }
        st.poll_generation += 1;
        st.poll_generation
    };
    shared.wake();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
    loop {
        changed.borrow_and_update();
        {
            let st = shared.lock();
            if st.poll_generation != generation {
                return fail((409, CONFLICT.into()));
            }
            if !st.queue.is_empty() {
                return ok(Value::Array(st.queue.iter().take(limit).cloned().collect()));
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return ok(json!([]));
        }
        let _waiting = Waiting::new(shared);
        tokio::select! {
            res = changed.changed() => if res.is_err() { return ok(json!([])) },
            () = tokio::time::sleep_until(deadline) => {}
        }
    }
}

/// Every method but `getUpdates`.
fn apply(st: &mut State, method: &str, p: &Value, files: &[FilePart]) -> Result<Value, Failure> {
    match method {
        "getme" => Ok(st.me.clone()),
        "getfile" => {
            let id = string(p, "file_id").unwrap_or_default();
            match st.user_files.get(&id) {
                // Bots download at most 20 MB.
                Some((_, data)) if data.len() > 20 << 20 => Err(bad_request("file is too big")),
                Some((path, data)) => Ok(json!({
                    "file_id": id,
                    "file_unique_id": format!("u{id}"),
                    "file_size": data.len(),
                    "file_path": path,
                })),
                None => Err(bad_request("invalid file_id")),
            }
        }
        "getwebhookinfo" => Ok(json!({
            "url": "",
            "has_custom_certificate": false,
            "pending_update_count": st.queue.len(),
        })),
        "deletewebhook" => {
            if truthy(p, "drop_pending_updates") {
                st.queue.clear();
            }
            Ok(json!(true))
        }
        "close" | "logout" => Ok(json!(true)),
        "sendmessage" => {
            let chat_id = chat_id(p)?;
            let thread = thread_of(st, chat_id, p)?;
            let text = string(p, "text").unwrap_or_default();
            let parse_mode = string(p, "parse_mode");
            let plain = render(&text, parse_mode.as_deref(), MAX_TEXT, false)
                .map_err(|e| e.unwrap_or_else(|| bad_request("message is too long")))?;
            let sent_markup = json_field(p, "reply_markup");
            let markup = inline_markup(sent_markup.as_ref());
            let mut content = Map::new();
            content.insert("text".into(), json!(plain));
            in_topic(&mut content, thread);
            let (message_id, message) = st.bot_message(
                chat_id,
                content,
                (text.clone(), parse_mode.clone(), markup, true),
            );
            st.sent.push(Sent {
                at: std::time::Instant::now(),
                thread,
                method: method.into(),
                chat_id,
                text,
                parse_mode,
                reply_markup: sent_markup,
                message_id,
            });
            Ok(message)
        }
        "editmessagetext" => {
            let text = string(p, "text").unwrap_or_default();
            let parse_mode = string(p, "parse_mode");
            let plain = render(&text, parse_mode.as_deref(), MAX_TEXT, false)
                .map_err(|e| e.unwrap_or_else(|| bad_request("MESSAGE_TOO_LONG")))?;
            let sent_markup = json_field(p, "reply_markup");
            let markup = inline_markup(sent_markup.as_ref());
            if p.get("inline_message_id").is_some() {
                return Ok(json!(true));
            }
            let chat_id = chat_id(p)?;
            let message_id = message_id(p)?;
            let msg = st.message_mut(chat_id, message_id, "message to edit not found")?;
            if !msg.from_bot {
                return Err(bad_request("message can't be edited"));
            }
            if !msg.is_text {
                return Err(bad_request("there is no text in the message to edit"));
            }
            if msg.raw_text == text && msg.parse_mode == parse_mode && msg.markup == markup {
                return Err((400, NOT_MODIFIED.into()));
            }
            msg.raw_text.clone_from(&text);
            msg.parse_mode.clone_from(&parse_mode);
            msg.markup.clone_from(&markup);
            msg.json["text"] = json!(plain);
            msg.json["edit_date"] = json!(now());
            set_markup(&mut msg.json, markup.as_ref());
            let message = msg.json.clone();
            st.sent.push(Sent {
                at: std::time::Instant::now(),
                thread: None,
                method: method.into(),
                chat_id,
                text,
                parse_mode,
                reply_markup: sent_markup,
                message_id,
            });
            Ok(message)
        }
        "editmessagereplymarkup" => {
            let sent_markup = json_field(p, "reply_markup");
            let markup = inline_markup(sent_markup.as_ref());
            if p.get("inline_message_id").is_some() {
                return Ok(json!(true));
            }
            let chat_id = chat_id(p)?;
            let message_id = message_id(p)?;
            let msg = st.message_mut(chat_id, message_id, "message to edit not found")?;
            if !msg.from_bot {
                return Err(bad_request("message can't be edited"));
            }
            if msg.markup == markup {
                return Err((400, NOT_MODIFIED.into()));
            }
            msg.markup.clone_from(&markup);
            msg.json["edit_date"] = json!(now());
            set_markup(&mut msg.json, markup.as_ref());
            let (message, text, parse_mode) = (
                msg.json.clone(),
                msg.raw_text.clone(),
                msg.parse_mode.clone(),
            );
            st.sent.push(Sent {
                at: std::time::Instant::now(),
                thread: None,
                method: method.into(),
                chat_id,
                text,
                parse_mode,
                reply_markup: sent_markup,
                message_id,
            });
            Ok(message)
        }
        "deletemessage" => {
            let chat_id = chat_id(p)?;
            let message_id = message_id(p)?;
            let chat = st.chats.get_mut(&chat_id);
            chat.and_then(|c| {
                c.pinned.remove(&message_id);
                c.messages.remove(&message_id)
            })
            .ok_or_else(|| bad_request("message to delete not found"))?;
            st.sent.push(Sent {
                at: std::time::Instant::now(),
                thread: None,
                method: method.into(),
                chat_id,
                text: String::new(),
                parse_mode: None,
                reply_markup: None,
                message_id,
            });
            Ok(json!(true))
        }
        "pinchatmessage" => {
            let chat_id = chat_id(p)?;
            let message_id = message_id(p)?;
            let chat = st
                .chats
                .get_mut(&chat_id)
                .filter(|c| c.messages.contains_key(&message_id))
                .ok_or_else(|| bad_request("message to pin not found"))?;
            chat.pinned.insert(message_id);
            Ok(json!(true))
        }
        "unpinchatmessage" => {
            let chat_id = chat_id(p)?;
            let not_found = || bad_request("message to unpin not found");
            let chat = st.chats.get_mut(&chat_id).ok_or_else(not_found)?;
            let message_id = match int(p, "message_id") {
                Some(id) => id,
                None => chat.pinned.last().copied().ok_or_else(not_found)?,
            };
            if !chat.pinned.remove(&message_id) {
                return Err(not_found());
            }
            Ok(json!(true))
        }
        "answercallbackquery" => {
            let id = string(p, "callback_query_id").unwrap_or_default();
            if st.callback_ids.contains(&id) {
                Ok(json!(true))
            } else {
                Err(bad_request(
                    "query is too old and response timeout expired or query ID is invalid",
                ))
            }
        }
        "sendchataction" => {
            let chat = chat_id(p)?;
            thread_of(st, chat, p)?;
            let action = string(p, "action").unwrap_or_default();
            if CHAT_ACTIONS.contains(&action.as_str()) {
                Ok(json!(true))
            } else {
                Err(bad_request("wrong parameter action in request"))
            }
        }
        "createforumtopic" => {
            let chat = chat_id(p)?;
            let name = string(p, "name").unwrap_or_default();
            if !(1..=128).contains(&name.chars().count()) {
                return Err(bad_request("TOPIC_NAME_INVALID"));
            }
            if !has_topics(st, chat) {
                return Err(bad_request("the chat is not a forum"));
            }
            // A topic's id is that of the service message that opens it.
            let mut content = Map::new();
            content.insert(
                "forum_topic_created".into(),
                json!({ "name": name, "icon_color": 7322096 }),
            );
            let (id, _) = st.bot_message(chat, content, (String::new(), None, None, false));
            if let Some(c) = st.chats.get_mut(&chat) {
                c.topics.insert(id, (name.clone(), false));
                if let Some(m) = c.messages.get_mut(&id) {
                    m.json["message_thread_id"] = json!(id);
                    m.json["is_topic_message"] = json!(true);
                }
            }
            Ok(json!({ "message_thread_id": id, "name": name, "icon_color": 7322096 }))
        }
        "closeforumtopic" | "reopenforumtopic" => {
            let chat = chat_id(p)?;
            let thread = int(p, "message_thread_id")
                .ok_or_else(|| bad_request("message thread not found"))?;
            let close = method == "closeforumtopic";
            let topic = st
                .chats
                .get_mut(&chat)
                .and_then(|c| c.topics.get_mut(&thread))
                .ok_or_else(|| bad_request("message thread not found"))?;
            if topic.1 == close {
                return Err(bad_request("TOPIC_NOT_MODIFIED"));
            }
            topic.1 = close;
            Ok(json!(true))
        }
        "senddocument" => send_document(st, p, files, "document"),
        "sendphoto" => send_document(st, p, files, "photo"),
        "setmycommands" => {
            let Some(Value::Array(commands)) = json_field(p, "commands") else {
                return Err(bad_request("parameter \"commands\" is required"));
            };
            if commands.len() > 100 {
                return Err(bad_request("BOT_COMMANDS_TOO_MUCH"));
            }
            for c in &commands {
                let name = c["command"].as_str().unwrap_or_default();
                let valid = (1..=32).contains(&name.len())
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
                if !valid {
                    return Err(bad_request("BOT_COMMAND_INVALID"));
                }
                let description = c["description"].as_str().unwrap_or_default();
                if !(1..=256).contains(&description.chars().count()) {
                    return Err(bad_request("BOT_COMMAND_DESCRIPTION_INVALID"));
                }
            }
            st.commands = Value::Array(commands);
            Ok(json!(true))
        }
        "getmycommands" => Ok(st.commands.clone()),
        "deletemycommands" => {
            st.commands = json!([]);
            Ok(json!(true))
        }
        _ => {
            eprintln!("fake Telegram: method {method} is not emulated");
            Err((404, "Not Found".into()))
        }
    }
}

/// `sendDocument` (`field` "document") and `sendPhoto` ("photo": a PNG or JPEG, shown as a
/// picture; anything else is refused as Telegram refuses it).
fn send_document(
    st: &mut State,
    p: &Value,
    files: &[FilePart],
    field: &str,
) -> Result<Value, Failure> {
    let chat_id = chat_id(p)?;
    let thread = thread_of(st, chat_id, p)?;
    // The file is either "attach://<part>" (teloxide) or the file part itself.
    let file = match p.get(field) {
        Some(Value::String(s)) => match s.strip_prefix("attach://") {
            Some(part) => files.iter().find(|f| f.name == part),
            None => None,
        },
        _ => files.iter().find(|f| f.name == field),
    };
    let (filename, content, content_type) = match (file, p.get(field)) {
        (Some(f), _) => (f.filename.clone(), f.data.clone(), f.content_type.clone()),
        // A file id or URL: nothing uploaded.
        (None, Some(Value::String(s))) if !s.is_empty() && !s.starts_with("attach://") => {
            (String::new(), Vec::new(), None)
        }
        _ => return Err(bad_request(&format!("there is no {field} in the request"))),
    };
    let photo = field == "photo";
    let png = content.starts_with(b"\x89PNG\r\n\x1a\n");
    if photo && !png && !content.starts_with(&[0xff, 0xd8, 0xff]) {
        return Err(bad_request("IMAGE_PROCESS_FAILED"));
    }
    let caption = string(p, "caption");
    let parse_mode = string(p, "parse_mode");
    let plain_caption = match &caption {
        Some(c) => Some(
            render(c, parse_mode.as_deref(), MAX_CAPTION, true)
                .map_err(|e| e.unwrap_or_else(|| bad_request("message caption is too long")))?,
        ),
        None => None,
    };
    let sent_markup = json_field(p, "reply_markup");
    let markup = inline_markup(sent_markup.as_ref());
    let n = st.next_file;
    st.next_file += 1;
    let mut document = json!({
        "file_id": format!("BQACAgfake{n:06}"),
        "file_unique_id": format!("AgADfake{n:06}"),
        "file_size": content.len(),
    });
    if !filename.is_empty() {
        document["file_name"] = json!(filename);
    }
    if let Some(t) = &content_type {
        document["mime_type"] = json!(t);
    }
    let mut fields = Map::new();
    if photo {
        // A PNG's size is in its header.
        let be = |at: usize| {
            content
                .get(at..at + 4)
                .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
                .unwrap_or(0)
        };
        let (w, h) = if png { (be(16), be(20)) } else { (0, 0) };
        document["width"] = json!(w);
        document["height"] = json!(h);
        fields.insert("photo".into(), json!([document]));
    } else {
        fields.insert("document".into(), document);
    }
    if let Some(c) = plain_caption.filter(|c| !c.is_empty()) {
        fields.insert("caption".into(), json!(c));
    }
    in_topic(&mut fields, thread);
    let raw_caption = caption.clone().unwrap_or_default();
    let (message_id, message) = st.bot_message(
        chat_id,
        fields,
        (raw_caption.clone(), parse_mode.clone(), markup, false),
    );
    let doc = Document {
        chat_id,
        filename,
        content,
        caption,
        message_id,
    };
    if photo {
        st.photos.push(doc);
    } else {
        st.documents.push(doc);
    }
    st.sent.push(Sent {
        at: std::time::Instant::now(),
        thread,
        method: format!("send{field}"),
        chat_id,
        text: raw_caption,
        parse_mode,
        reply_markup: sent_markup,
        message_id,
    });
    Ok(message)
}

/// Whether a chat has topics: a forum supergroup, or a private chat when the bot has topics
/// in private chats.
fn has_topics(st: &State, chat: i64) -> bool {
    match st.chats.get(&chat) {
        Some(c) if c.info["is_forum"] == json!(true) => true,
        _ => chat > 0 && st.private_topics,
    }
}

/// The topic a call names (`message_thread_id`), which must exist in the chat (closed topics
/// take the bot's messages: it manages them). In a chat without topics Telegram ignores it.
fn thread_of(st: &State, chat: i64, p: &Value) -> Result<Option<i64>, Failure> {
    let Some(thread) = int(p, "message_thread_id") else {
        return Ok(None);
    };
    if !has_topics(st, chat) {
        return Ok(None);
    }
    let known = st
        .chats
        .get(&chat)
        .is_some_and(|c| c.topics.contains_key(&thread));
    if known {
        Ok(Some(thread))
    } else {
        Err(bad_request("message thread not found"))
    }
}

/// Marks a new message as one in topic `thread`.
fn in_topic(content: &mut Map<String, Value>, thread: Option<i64>) {
    if let Some(t) = thread {
        content.insert("message_thread_id".into(), json!(t));
        content.insert("is_topic_message".into(), json!(true));
    }
}

/// Parses a text (or caption) as Telegram does and returns the text the message will show.
/// `Err(None)` means "too long" (each method words that differently).
fn render(
    text: &str,
    parse_mode: Option<&str>,
    max: usize,
    may_be_empty: bool,
) -> Result<String, Option<Failure>> {
    let plain = match parse_mode.map(str::to_ascii_lowercase).as_deref() {
        None | Some("") => text.to_string(),
        Some("html") => parse_html(text)
            .map_err(|e| Some(bad_request(&format!("can't parse entities: {e}"))))?,
        Some("markdownv2" | "markdown") => text.to_string(),
        Some(_) => return Err(Some(bad_request("unsupported parse_mode"))),
    };
    let plain = plain.trim().to_string();
    if plain.is_empty() && !may_be_empty {
        return Err(Some(bad_request("message text is empty")));
    }
    if plain.chars().count() > max {
        return Err(None);
    }
    Ok(plain)
}

/// Checks Telegram-flavoured HTML and returns its text without tags, entities decoded. The
/// errors are worded as Telegram's (after "can't parse entities: ").
fn parse_html(text: &str) -> Result<String, String> {
    let b = text.as_bytes();
    let n = b.len();
    let space = |c: u8| c.is_ascii_whitespace();
    let mut out = String::new();
    let mut open: Vec<String> = Vec::new();
    let mut i = 0;
    while i < n {
        if b[i] == b'&' {
            match decode_entity(&text[i..]) {
                Some((c, len)) => {
                    out.push(c);
                    i += len;
                }
                None => {
                    out.push('&');
                    i += 1;
                }
            }
            continue;
        }
        if b[i] != b'<' {
            let c = text[i..].chars().next().unwrap_or('\u{fffd}');
            out.push(c);
            i += c.len_utf8();
            continue;
        }
        let begin = i;
        i += 1;
        if i < n && b[i] == b'/' {
            i += 1;
            let start = i;
            while i < n && !space(b[i]) && b[i] != b'>' {
                i += 1;
            }
            let name = text[start..i].to_ascii_lowercase();
            while i < n && space(b[i]) {
                i += 1;
            }
            if i >= n || b[i] != b'>' {
                return Err(format!("Unclosed end tag at byte offset {begin}"));
            }
            i += 1;
            let Some(top) = open.pop() else {
                return Err(format!("Unexpected end tag at byte offset {begin}"));
            };
            if top != name {
                return Err(format!(
                    "Unmatched end tag at byte offset {begin}, expected \"</{top}>\", found \"</{name}>\""
                ));
            }
            continue;
        }
        let start = i;
        while i < n && !space(b[i]) && b[i] != b'>' {
            i += 1;
        }
        if i >= n {
            return Err(format!("Unclosed start tag at byte offset {begin}"));
        }
        let name = text[start..i].to_ascii_lowercase();
        if !HTML_TAGS.contains(&name.as_str()) {
            return Err(format!(
                "Unsupported start tag \"{name}\" at byte offset {begin}"
            ));
        }
        let mut attributes = Vec::new();
        loop {
            while i < n && space(b[i]) {
                i += 1;
            }
            if i >= n {
                return Err(format!("Unclosed start tag at byte offset {begin}"));
            }
            if b[i] == b'>' {
                i += 1;
                break;
            }
            let attr_start = i;
            while i < n && !space(b[i]) && b[i] != b'=' && b[i] != b'>' {
                i += 1;
            }
            let attr = text[attr_start..i].to_ascii_lowercase();
            if attr.is_empty() {
                return Err(format!(
                    "Empty attribute name in the tag \"{name}\" at byte offset {i}"
                ));
            }
            while i < n && space(b[i]) {
                i += 1;
            }
            if i >= n || b[i] != b'=' {
                return Err(format!(
                    "Expected equal sign in declaration of an attribute of the tag \"{name}\" at byte offset {i}"
                ));
            }
            i += 1;
            while i < n && space(b[i]) {
                i += 1;
            }
            if i >= n {
                return Err(format!("Unclosed start tag at byte offset {begin}"));
            }
            let value = if b[i] == b'"' || b[i] == b'\'' {
                let quote = b[i];
                i += 1;
                let value_start = i;
                while i < n && b[i] != quote {
                    i += 1;
                }
                if i >= n {
                    return Err(format!("Unclosed start tag at byte offset {begin}"));
                }
                i += 1;
                &text[value_start..i - 1]
            } else {
                let value_start = i;
                while i < n && !space(b[i]) && b[i] != b'>' {
                    i += 1;
                }
                &text[value_start..i]
            };
            attributes.push((attr, value.to_string()));
        }
        if name == "span"
            && !attributes
                .iter()
                .any(|(k, v)| k == "class" && v == "tg-spoiler")
        {
            return Err(format!(
                "Tag \"span\" must have class \"tg-spoiler\" at byte offset {begin}"
            ));
        }
        open.push(name);
    }
    if let Some(top) = open.last() {
        return Err(format!(
            "Can't find end tag corresponding to start tag \"{top}\""
        ));
    }
    Ok(out)
}

/// `&lt;`, `&gt;`, `&amp;`, `&quot;` and numeric entities, as Telegram decodes them; the
/// character and the entity's length in bytes.
fn decode_entity(s: &str) -> Option<(char, usize)> {
    let end = s.find(';')?;
    if end > 12 {
        return None;
    }
    let body = &s[1..end];
    let c = match body {
        "lt" => '<',
        "gt" => '>',
        "amp" => '&',
        "quot" => '"',
        _ => {
            let num = body.strip_prefix('#')?;
            let code = match num.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => num.parse().ok()?,
            };
            char::from_u32(code)?
        }
    };
    Some((c, end + 1))
}

/// An integer parameter, given as a number or as a string of digits.
fn int(p: &Value, key: &str) -> Option<i64> {
    match p.get(key)? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A string parameter (a non-string value as its JSON text).
fn string(p: &Value, key: &str) -> Option<String> {
    match p.get(key)? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// A JSON-valued parameter, given as JSON or as a string holding JSON (form fields).
fn json_field(p: &Value, key: &str) -> Option<Value> {
    match p.get(key)? {
        Value::Null => None,
        Value::String(s) => serde_json::from_str(s).ok(),
        other => Some(other.clone()),
    }
}

fn truthy(p: &Value, key: &str) -> bool {
    match p.get(key) {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s == "true" || s == "1",
        Some(Value::Number(n)) => n.as_i64() == Some(1),
        _ => false,
    }
}

fn chat_id(p: &Value) -> Result<i64, Failure> {
    if p.get("chat_id").is_none() {
        return Err(bad_request("chat_id is empty"));
    }
    int(p, "chat_id").ok_or_else(|| bad_request("chat not found"))
}

fn message_id(p: &Value) -> Result<i64, Failure> {
    int(p, "message_id").ok_or_else(|| bad_request("message identifier is not specified"))
}

/// The part of a `reply_markup` a Message carries: only an inline keyboard (a reply keyboard,
/// `remove_keyboard` or `force_reply` is not echoed by Telegram, and teloxide could not parse it
/// there).
fn inline_markup(markup: Option<&Value>) -> Option<Value> {
    markup
        .filter(|m| m.get("inline_keyboard").is_some())
        .cloned()
}

fn set_markup(message: &mut Value, markup: Option<&Value>) {
    if let Some(obj) = message.as_object_mut() {
        match markup {
            Some(m) => {
                obj.insert("reply_markup".into(), m.clone());
            }
            None => {
                obj.remove("reply_markup");
            }
        }
    }
}

/// Decodes `%XX` escapes (and `+` as a space in forms).
fn percent_decode(s: &str, plus_is_space: bool) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = |c: u8| char::from(c).to_digit(16);
                match (hex(b[i + 1]), hex(b[i + 2])) {
                    (Some(hi), Some(lo)) => {
                        out.push(u8::try_from(hi * 16 + lo).unwrap_or(b'?'));
                        i += 3;
                    }
                    _ => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `a=1&b=x%20y` into pairs.
fn parse_form(s: &str) -> Vec<(String, String)> {
    s.split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (percent_decode(k, true), percent_decode(v, true))
        })
        .collect()
}

/// The `boundary` parameter of a multipart content type.
fn boundary(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|param| {
        let (k, v) = param.trim().split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| v.trim().trim_matches('"').to_string())
    })
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if from > haystack.len() {
        return None;
    }
    haystack[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// The value of `key=` in a Content-Disposition header (quoted, or RFC 5987 `key*=utf-8''...`).
fn disposition_param(header: &str, key: &str) -> Option<String> {
    let mut plain = None;
    for param in header.split(';').skip(1) {
        let Some((k, v)) = param.trim().split_once('=') else {
            continue;
        };
        let k = k.trim().to_ascii_lowercase();
        let v = v.trim();
        if k == format!("{key}*") {
            let encoded = v.split_once("''").map_or(v, |(_, rest)| rest);
            return Some(percent_decode(encoded, false));
        }
        if k == key {
            let v = v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(v);
            plain = Some(v.replace("\\\"", "\"").replace("\\\\", "\\"));
        }
    }
    plain
}

/// Splits a `multipart/form-data` body into text fields (as JSON values: JSON-looking text
/// parsed, integer `*_id` fields as numbers, everything else a string) and file parts.
fn parse_multipart(body: &[u8], boundary: &str) -> Option<(Map<String, Value>, Vec<FilePart>)> {
    let delimiter = format!("--{boundary}").into_bytes();
    let next_delimiter = [b"\r\n".as_slice(), &delimiter].concat();
    let mut fields = Map::new();
    let mut files = Vec::new();
    let mut pos = find(body, &delimiter, 0)? + delimiter.len();
    loop {
        if body[pos..].starts_with(b"--") {
            break;
        }
        if body[pos..].starts_with(b"\r\n") {
            pos += 2;
        }
        let end = find(body, &next_delimiter, pos)?;
        let part = &body[pos..end];
        let header_end = find(part, b"\r\n\r\n", 0)?;
        let headers = String::from_utf8_lossy(&part[..header_end]);
        let data = &part[header_end + 4..];
        let mut name = None;
        let mut filename = None;
        let mut content_type = None;
        for line in headers.lines() {
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            if k.trim().eq_ignore_ascii_case("content-disposition") {
                name = disposition_param(v, "name");
                filename = disposition_param(v, "filename");
            } else if k.trim().eq_ignore_ascii_case("content-type") {
                content_type = Some(v.trim().to_string());
            }
        }
        let name = name?;
        match filename {
            Some(filename) => files.push(FilePart {
                name,
                filename,
                content_type,
                data: data.to_vec(),
            }),
            None => {
                let text = String::from_utf8_lossy(data).into_owned();
                let value = if text.starts_with(['{', '[']) {
                    serde_json::from_str(&text).unwrap_or(Value::String(text))
                } else if name.ends_with("_id")
                    && let Ok(n) = text.trim().parse::<i64>()
                {
                    json!(n)
                } else {
                    Value::String(text)
                };
                fields.insert(name, value);
            }
        }
        pos = end + next_delimiter.len();
    }
    Some((fields, files))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HOST;
    use tokio::net::TcpStream;

    const TOKEN: &str = "4242:TEST-token_x";

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    /// One HTTP/1.1 POST with hyper's client; the status and the JSON answer.
    async fn post(addr: SocketAddr, path: &str, content_type: &str, body: Vec<u8>) -> (u16, Value) {
        let stream = TcpStream::connect(addr).await.expect("connect");
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .expect("handshake");
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let request = Request::post(path)
            .header(HOST, addr.to_string())
            .header(CONTENT_TYPE, content_type)
            .body(Full::new(Bytes::from(body)))
            .expect("request");
        let response = sender.send_request(request).await.expect("send");
        let status = response.status().as_u16();
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        let value = serde_json::from_slice(&bytes).expect("JSON answer");
        (status, value)
    }

    /// A Bot API call the way teloxide makes it: PascalCase method, JSON body.
    async fn call(fake: &FakeTelegram, method: &str, body: Value) -> (u16, Value) {
        post(
            fake.addr(),
            &format!("/bot{}/{method}", fake.token()),
            "application/json",
            body.to_string().into_bytes(),
        )
        .await
    }

    async fn call_ok(fake: &FakeTelegram, method: &str, body: Value) -> Value {
        let (status, reply) = call(fake, method, body).await;
        assert_eq!(status, 200, "{method}: {reply}");
        assert_eq!(reply["ok"], true, "{method}: {reply}");
        reply["result"].clone()
    }

    fn ids(updates: &Value) -> Vec<i64> {
        updates
            .as_array()
            .expect("array of updates")
            .iter()
            .map(|u| u["update_id"].as_i64().expect("update_id"))
            .collect()
    }

    async fn until_polling(fake: &FakeTelegram) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !fake.is_polling() {
            assert!(Instant::now() < deadline, "no getUpdates is waiting");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[test]
    fn get_me_and_start_up_calls() {
        let fake = FakeTelegram::start(TOKEN);
        assert!(fake.url().starts_with("http://127.0.0.1:"));
        assert!(fake.url().ends_with('/'));
        runtime().block_on(async {
            let me = call_ok(&fake, "GetMe", json!({})).await;
            for key in [
                "id",
                "is_bot",
                "first_name",
                "username",
                "can_join_groups",
                "can_read_all_group_messages",
                "supports_inline_queries",
                "has_main_web_app",
            ] {
                assert!(me.get(key).is_some(), "getMe lacks {key}: {me}");
            }
            assert_eq!(me["id"], 4242);
            assert_eq!(me["is_bot"], true);
            assert_eq!(fake.bot_id(), 4242);

            let hook = call_ok(&fake, "GetWebhookInfo", json!({})).await;
            assert_eq!(hook["url"], "");
            assert_eq!(hook["pending_update_count"], 0);
            assert_eq!(call_ok(&fake, "deleteWebhook", json!({})).await, true);
            assert_eq!(call_ok(&fake, "LogOut", json!({})).await, true);

            let (status, reply) = post(
                fake.addr(),
                "/botWRONG:token/GetMe",
                "application/json",
                b"{}".to_vec(),
            )
            .await;
            assert_eq!(status, 401);
            assert_eq!(reply, error_body(401, "Unauthorized"));
            let (status, _) = call(&fake, "NoSuchMethod", json!({})).await;
            assert_eq!(status, 404);
        });
        let methods: Vec<String> = fake.calls().into_iter().map(|(m, _)| m).collect();
        assert_eq!(
            methods,
            [
                "getme",
                "getwebhookinfo",
                "deletewebhook",
                "logout",
                "nosuchmethod"
            ]
        );
    }

    #[test]
    fn long_poll_wakes_when_an_update_is_pushed() {
        let fake = Arc::new(FakeTelegram::start(TOKEN));
        runtime().block_on(async {
            let poller = Arc::clone(&fake);
            let started = Instant::now();
            let poll = tokio::spawn(async move {
                call_ok(&poller, "GetUpdates", json!({ "offset": 0, "timeout": 10 })).await
            });
            until_polling(&fake).await;
            let id = fake.push_message(777, 777, "Ann", "/status now");
            let updates = poll.await.expect("poll task");
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "woken by the push"
            );
            assert_eq!(ids(&updates), [id]);
            let message = &updates[0]["message"];
            assert_eq!(message["message_id"], 1);
            assert_eq!(message["text"], "/status now");
            assert_eq!(
                message["chat"],
                json!({ "id": 777, "first_name": "Ann", "type": "private" })
            );
            assert_eq!(
                message["from"],
                json!({ "id": 777, "is_bot": false, "first_name": "Ann", "language_code": "en" })
            );
            assert!(message["date"].as_i64().expect("date") > 1_700_000_000);
            assert_eq!(message["entities"][0]["type"], "bot_command");
            assert_eq!(message["entities"][0]["length"], 7);

            // Nothing queued and a short timeout: an empty answer after about that long.
            let started = Instant::now();
            let empty = call_ok(
                &fake,
                "GetUpdates",
                json!({ "offset": id + 1, "timeout": 1 }),
            )
            .await;
            assert_eq!(empty, json!([]));
            assert!(started.elapsed() >= Duration::from_millis(900));
        });
        assert!(!fake.is_polling());
    }

    #[test]
    fn offsets_confirm_updates() {
        let fake = FakeTelegram::start(TOKEN);
        let a = fake.push_message(1, 1, "A", "one");
        let b = fake.push_message(1, 1, "A", "two");
        let c = fake.push_message(1, 1, "A", "three");
        assert_eq!([b, c], [a + 1, a + 2]);
        runtime().block_on(async {
            let get = |offset: i64, limit: i64| {
                call_ok(
                    &fake,
                    "GetUpdates",
                    json!({ "offset": offset, "limit": limit, "timeout": 0 }),
                )
            };
            assert_eq!(ids(&get(0, 100).await), [a, b, c]);
            assert_eq!(
                ids(&get(0, 2).await),
                [a, b],
                "limit; nothing confirmed yet"
            );
            assert_eq!(ids(&get(b, 100).await), [b, c], "offset b confirms a");
            assert_eq!(fake.pending(), [b, c]);
            assert_eq!(ids(&get(0, 100).await), [b, c], "confirmed ones are gone");
            assert_eq!(ids(&get(c + 1, 100).await), Vec::<i64>::new());
            assert!(fake.pending().is_empty());
            let d = fake.push_message(1, 1, "A", "four");
            let e = fake.push_message(1, 1, "A", "five");
            assert_eq!(
                ids(&get(-1, 100).await),
                [e],
                "a negative offset keeps the last"
            );
            assert!(d < e);
        });
        assert_eq!(fake.offsets(), [0, 0, b, 0, c + 1, -1]);
    }

    #[test]
    fn rate_limit_and_parse_errors_are_injected_once() {
        let fake = FakeTelegram::start(TOKEN);
        fake.fail_next("sendMessage", 429, retry_after_body(1));
        fake.fail_next(
            "SENDMESSAGE",
            400,
            error_body(400, "Bad Request: can't parse entities: injected"),
        );
        runtime().block_on(async {
            let body = json!({ "chat_id": 5, "text": "<b>hi</b>", "parse_mode": "HTML" });
            let (status, reply) = call(&fake, "SendMessage", body.clone()).await;
            assert_eq!(status, 429);
            assert_eq!(reply["error_code"], 429);
            assert_eq!(reply["parameters"]["retry_after"], 1);
            assert_eq!(reply["description"], "Too Many Requests: retry after 1");
            let (status, reply) = call(&fake, "SendMessage", body.clone()).await;
            assert_eq!(status, 400);
            assert_eq!(
                reply["description"],
                "Bad Request: can't parse entities: injected"
            );
            let message = call_ok(&fake, "SendMessage", body).await;
            assert_eq!(message["text"], "hi", "tags are parsed away");
            assert_eq!(message["message_id"], 1);
        });
        assert_eq!(
            fake.calls_of("sendmessage").len(),
            3,
            "every attempt is recorded"
        );
        let sent = fake.sent();
        assert_eq!(sent.len(), 1, "only the one that got through");
        assert_eq!(sent[0].text, "<b>hi</b>");
        assert_eq!(sent[0].parse_mode.as_deref(), Some("HTML"));
    }

    #[test]
    fn a_second_poller_terminates_the_first_with_409() {
        let fake = Arc::new(FakeTelegram::start(TOKEN));
        runtime().block_on(async {
            let first = Arc::clone(&fake);
            let started = Instant::now();
            let older = tokio::spawn(async move {
                call(&first, "GetUpdates", json!({ "offset": 0, "timeout": 10 })).await
            });
            until_polling(&fake).await;
            let newer = call_ok(&fake, "GetUpdates", json!({ "offset": 0, "timeout": 0 })).await;
            assert_eq!(newer, json!([]));
            let (status, reply) = older.await.expect("older poll");
            assert!(started.elapsed() < Duration::from_secs(5));
            assert_eq!(status, 409);
            assert_eq!(reply, error_body(409, CONFLICT));
        });
    }

    #[test]
    fn messages_edits_buttons_and_callbacks() {
        let fake = FakeTelegram::start(TOKEN);
        let user_msg = fake.push_message(9, 9, "Bo", "hello");
        runtime().block_on(async {
            let keyboard = json!({ "inline_keyboard": [[
                { "text": "1. Yes", "callback_data": "answer:1" },
                { "text": "2. No", "callback_data": "answer:2" },
            ]] });
            let message = call_ok(
                &fake,
                "SendMessage",
                json!({ "chat_id": 9, "text": "Allow?", "reply_markup": keyboard }),
            )
            .await;
            assert_eq!(message["message_id"], 2, "after the user's message 1");
            assert_eq!(message["chat"]["id"], 9);
            assert_eq!(message["from"]["id"], 4242);
            assert_eq!(message["from"]["is_bot"], true);
            assert_eq!(message["reply_markup"], keyboard);

            let update = fake.push_callback(9, 9, 2, "answer:1");
            assert_eq!(update, user_msg + 1);
            let updates = call_ok(
                &fake,
                "GetUpdates",
                json!({ "offset": user_msg + 1, "timeout": 0 }),
            )
            .await;
            let query = &updates[0]["callback_query"];
            assert_eq!(query["id"], format!("cb{update}"));
            assert_eq!(query["data"], "answer:1");
            assert_eq!(query["from"]["first_name"], "Bo");
            assert_eq!(query["message"]["reply_markup"], keyboard);
            assert!(query["chat_instance"].is_string());
            let answered = call_ok(
                &fake,
                "AnswerCallbackQuery",
                json!({ "callback_query_id": query["id"] }),
            )
            .await;
            assert_eq!(answered, true);
            let (status, _) = call(
                &fake,
                "AnswerCallbackQuery",
                json!({ "callback_query_id": "nope" }),
            )
            .await;
            assert_eq!(status, 400);

            // An edit without reply_markup removes the keyboard; the same edit again is refused.
            let edit = json!({ "chat_id": 9, "message_id": 2, "text": "Allowed." });
            let edited = call_ok(&fake, "EditMessageText", edit.clone()).await;
            assert_eq!(edited["text"], "Allowed.");
            assert!(edited.get("reply_markup").is_none());
            assert!(edited.get("edit_date").is_some());
            let (status, reply) = call(&fake, "EditMessageText", edit).await;
            assert_eq!((status, reply), (400, error_body(400, NOT_MODIFIED)));
            let (_, reply) = call(
                &fake,
                "EditMessageText",
                json!({ "chat_id": 9, "message_id": 1, "text": "x" }),
            )
            .await;
            assert_eq!(reply["description"], "Bad Request: message can't be edited");

            let (_, reply) = call(
                &fake,
                "SendMessage",
                json!({ "chat_id": 9, "text": "<b>open", "parse_mode": "HTML" }),
            )
            .await;
            assert_eq!(
                reply["description"],
                "Bad Request: can't parse entities: Can't find end tag corresponding to start tag \"b\""
            );
            let (_, reply) = call(
                &fake,
                "SendMessage",
                json!({ "chat_id": 9, "text": "x".repeat(4097) }),
            )
            .await;
            assert_eq!(reply["description"], "Bad Request: message is too long");
            let (_, reply) = call(&fake, "SendMessage", json!({ "chat_id": 9, "text": " " })).await;
            assert_eq!(reply["description"], "Bad Request: message text is empty");

            assert_eq!(
                call_ok(&fake, "SendChatAction", json!({ "chat_id": 9, "action": "typing" }))
                    .await,
                true
            );
            assert_eq!(
                call_ok(&fake, "DeleteMessage", json!({ "chat_id": 9, "message_id": 2 })).await,
                true
            );
            let (_, reply) =
                call(&fake, "DeleteMessage", json!({ "chat_id": 9, "message_id": 2 })).await;
            assert_eq!(reply["description"], "Bad Request: message to delete not found");
            let commands = json!([{ "command": "status", "description": "Show sessions" }]);
            assert_eq!(
                call_ok(&fake, "SetMyCommands", json!({ "commands": commands })).await,
                true
            );
            assert_eq!(fake.commands(), commands);
        });
        let sent = fake.sent();
        let summary: Vec<(&str, i64)> = sent
            .iter()
            .map(|s| (s.method.as_str(), s.message_id))
            .collect();
        assert_eq!(
            summary,
            [
                ("sendmessage", 2),
                ("editmessagetext", 2),
                ("deletemessage", 2)
            ]
        );
        assert_eq!(
            sent[0]
                .reply_markup
                .as_ref()
                .map(|m| &m["inline_keyboard"][0][1]["callback_data"]),
            Some(&json!("answer:2"))
        );
        let left = fake.messages(9);
        assert_eq!(left.len(), 1, "only the user's message is left: {left:?}");
    }

    #[test]
    fn pins_and_edits_that_keep_their_buttons() {
        let fake = FakeTelegram::start(TOKEN);
        runtime().block_on(async {
            let keyboard = json!({ "inline_keyboard": [[
                { "text": "Stop", "callback_data": "board:stop" },
            ]] });
            let board = call_ok(
                &fake,
                "SendMessage",
                json!({ "chat_id": 12, "text": "Board: idle", "reply_markup": keyboard }),
            )
            .await;
            assert_eq!(board["message_id"], 1);
            let pin = json!({ "chat_id": 12, "message_id": 1, "disable_notification": true });
            assert_eq!(call_ok(&fake, "PinChatMessage", pin.clone()).await, true);
            assert_eq!(call_ok(&fake, "PinChatMessage", pin).await, true);
            assert_eq!(fake.pinned(12), [1], "pinned once");
            fake.push_message(12, 12, "Cy", "mine");
            let mine = json!({ "chat_id": 12, "message_id": 2 });
            assert_eq!(call_ok(&fake, "PinChatMessage", mine.clone()).await, true);
            assert_eq!(fake.pinned(12), [1, 2]);
            let (status, reply) = call(
                &fake,
                "PinChatMessage",
                json!({ "chat_id": 12, "message_id": 99 }),
            )
            .await;
            assert_eq!(
                (status, reply),
                (
                    400,
                    error_body(400, "Bad Request: message to pin not found")
                )
            );

            // An edit that carries buttons keeps them; the same edit again is refused.
            let keyboard = json!({ "inline_keyboard": [[
                { "text": "Stop", "callback_data": "board:stop" },
                { "text": "Log", "callback_data": "board:log" },
            ]] });
            let edit = json!({
                "chat_id": 12, "message_id": 1, "text": "Board: <b>busy</b>",
                "parse_mode": "HTML", "reply_markup": keyboard,
            });
            let edited = call_ok(&fake, "EditMessageText", edit.clone()).await;
            assert_eq!(
                (&edited["text"], &edited["reply_markup"]),
                (&json!("Board: busy"), &keyboard)
            );
            let (status, reply) = call(&fake, "EditMessageText", edit).await;
            assert_eq!((status, reply), (400, error_body(400, NOT_MODIFIED)));
            let now = fake.message(1).expect("the board");
            assert_eq!(
                (now.method.as_str(), now.text.as_str()),
                ("editmessagetext", "Board: <b>busy</b>")
            );
            assert_eq!(now.reply_markup.as_ref(), Some(&keyboard));
            assert_eq!(fake.messages(12)[0]["reply_markup"], keyboard);

            // Without a message id the most recent pinned one goes.
            let unpin = json!({ "chat_id": 12 });
            assert_eq!(
                call_ok(&fake, "UnpinChatMessage", unpin.clone()).await,
                true
            );
            assert_eq!(fake.pinned(12), [1]);
            let unpinned = error_body(400, "Bad Request: message to unpin not found");
            let (status, reply) = call(&fake, "UnpinChatMessage", mine).await;
            assert_eq!((status, &reply), (400, &unpinned), "not pinned any more");
            let board = json!({ "chat_id": 12, "message_id": 1 });
            assert_eq!(
                call_ok(&fake, "UnpinChatMessage", board.clone()).await,
                true
            );
            let (status, reply) = call(&fake, "UnpinChatMessage", unpin).await;
            assert_eq!((status, &reply), (400, &unpinned), "nothing pinned");
            assert!(fake.pinned(12).is_empty());

            // A deleted message is no longer pinned; a chat the bot left refuses.
            call_ok(&fake, "PinChatMessage", board.clone()).await;
            call_ok(&fake, "DeleteMessage", board.clone()).await;
            assert!(fake.pinned(12).is_empty());
            fake.kick(12);
            let (status, reply) = call(&fake, "PinChatMessage", board).await;
            assert_eq!(
                (status, reply),
                (
                    403,
                    error_body(403, "Forbidden: bot was blocked by the user")
                )
            );
        });
        let pins = fake.calls_of("pinchatmessage");
        assert_eq!(pins.len(), 6);
        assert_eq!(pins[0]["disable_notification"], true);
        assert_eq!(fake.calls_of("unpinChatMessage").len(), 4);
    }

    #[test]
    fn allowed_updates_filter_later_pushes() {
        let fake = FakeTelegram::start(TOKEN);
        let early = fake.push_callback(3, 3, 1, "before");
        runtime().block_on(async {
            let updates = call_ok(
                &fake,
                "GetUpdates",
                json!({ "offset": 0, "timeout": 0, "allowed_updates": ["message"] }),
            )
            .await;
            assert_eq!(ids(&updates), [early], "pushed before the filter was set");
            assert_eq!(updates[0]["callback_query"]["message"]["date"], 0);
            fake.push_callback(3, 3, 1, "after");
            let text = fake.push_message(3, 3, "C", "hi");
            let updates = call_ok(
                &fake,
                "GetUpdates",
                json!({ "offset": early + 1, "timeout": 0 }),
            )
            .await;
            assert_eq!(ids(&updates), [text]);
        });
    }

    #[test]
    fn send_document_as_teloxide_does() {
        let fake = FakeTelegram::start(TOKEN);
        let boundary = "abc123";
        let body = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"chat_id\"\r\n\r\n77\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"document\"\r\n\r\nattach://f0\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"caption\"\r\n\r\n<i>log</i>\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"parse_mode\"\r\n\r\nHTML\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"f0\"; filename=\"out.txt\"\r\n\
             Content-Type: text/plain\r\n\r\nline 1\r\nline 2\r\n--{boundary}--\r\n"
        );
        let message = runtime().block_on(async {
            let (status, reply) = post(
                fake.addr(),
                &format!("/bot{TOKEN}/SendDocument"),
                &format!("multipart/form-data; boundary={boundary}"),
                body.into_bytes(),
            )
            .await;
            assert_eq!(status, 200, "{reply}");
            reply["result"].clone()
        });
        assert_eq!(message["document"]["file_name"], "out.txt");
        assert_eq!(message["document"]["file_size"], 14);
        assert_eq!(message["caption"], "log");
        assert_eq!(
            fake.documents(),
            [Document {
                chat_id: 77,
                filename: "out.txt".into(),
                content: b"line 1\r\nline 2".to_vec(),
                caption: Some("<i>log</i>".into()),
                message_id: 1,
            }]
        );
        let call = &fake.calls_of("senddocument")[0];
        assert_eq!(call["chat_id"], 77);
        assert_eq!(call["document"], "attach://f0");
        assert_eq!(call["f0"]["filename"], "out.txt");
        assert_eq!(call["f0"]["content"], "line 1\r\nline 2");
        assert_eq!(fake.sent()[0].method, "senddocument");
    }

    #[test]
    fn html_like_telegram() {
        assert_eq!(
            parse_html("<b>bold</b> &lt;x&gt; &amp; a&b <a href=\"https://x.y/?a=1&amp;b\">l</a>")
                .as_deref(),
            Ok("bold <x> & a&b l")
        );
        assert_eq!(
            parse_html("<pre><code class=\"language-rust\">fn</code></pre> &#65;&#x42;").as_deref(),
            Ok("fn AB")
        );
        assert_eq!(
            parse_html("<span class=\"tg-spoiler\">s</span><tg-spoiler>t</tg-spoiler>").as_deref(),
            Ok("st")
        );
        assert_eq!(
            parse_html("a <br> b"),
            Err("Unsupported start tag \"br\" at byte offset 2".into())
        );
        assert_eq!(
            parse_html("1 < 2"),
            Err("Unsupported start tag \"\" at byte offset 2".into())
        );
        assert_eq!(
            parse_html("<b><i>x</b></i>"),
            Err("Unmatched end tag at byte offset 7, expected \"</i>\", found \"</b>\"".into())
        );
        assert_eq!(
            parse_html("x</b>"),
            Err("Unexpected end tag at byte offset 1".into())
        );
        assert_eq!(
            parse_html("<b"),
            Err("Unclosed start tag at byte offset 0".into())
        );
        assert!(parse_html("<span>x</span>").is_err());
        assert_eq!(route("/bot1:a/GetMe"), Some(("1:a".into(), "GetMe".into())));
        assert_eq!(
            route("/api//bot1:a/SendMessage"),
            Some(("1:a".into(), "SendMessage".into()))
        );
        assert_eq!(route("/GetMe"), None);
        assert_eq!(percent_decode("a%3Ab+c", true), "a:b c");
    }
}
