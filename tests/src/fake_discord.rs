//! A fake Discord (REST API v10 and gateway) on `127.0.0.1`, so the gateway's Discord adapter
//! (serenity 0.12) can be tested offline: the test pushes events (a user writes a DM, a user
//! presses a button), serenity receives them over a real websocket, and every REST call it makes
//! is recorded and answered the way Discord answers it.
//!
//! How serenity is pointed at it:
//! ```text
//! let http = HttpBuilder::new(token).proxy(fake.url()).ratelimiter_disabled(true).build();
//! let client = ClientBuilder::new_with_http(http, intents).event_handler(h).await?;
//! client.start().await   // GET /api/v10/gateway, then ws://127.0.0.1:WSPORT?v=10
//! ```
//! The proxy is honoured only with the ratelimiter disabled, so a 429 reaches the caller as
//! `HttpError::UnsuccessfulRequest` (status 429, the body's `message`); the adapter must retry.
//!
//! What it emulates:
//! * REST under `/api/v{N}/`: `GET gateway`, `GET gateway/bot`, `GET users/@me`,
//!   `POST users/@me/channels` (DM channel), `POST/GET/PATCH/DELETE channels/{id}/messages[/{id}]`
//!   (JSON, or `multipart/form-data` with `payload_json` and `files[n]` parts),
//!   `GET channels/{id}/messages?after=|before=|around=&limit=` (history: at most `limit`, 1–100,
//!   default 50, newest first; with `after` the ones right after it), `GET channels/{id}` (a DM,
//!   or a server text channel for channels written in with [`FakeDiscord::send_as_user_in_guild`]),
//!   `POST channels/{id}/typing` (204), `PUT/DELETE channels/{id}/pins/{message_id}` (204; also
//!   under the newer `channels/{id}/messages/pins/{message_id}`; see [`FakeDiscord::pinned`]),
//!   `POST interactions/{id}/{token}/callback` (204),
//!   `PATCH webhooks/{app}/{token}/messages/@original`, `POST webhooks/{app}/{token}` (follow-up),
//!   application commands (`GET`/`PUT` answer `[]`). Anything else: 404 `{"message":"404: Not
//!   Found","code":0}`.
//! * `Authorization: Bot <token>` is checked (401 otherwise) except on interaction and webhook
//!   routes, which Discord authorises by the interaction token.
//! * Discord's checks: content at most 2000 characters (400, code 50035), no empty message (400,
//!   code 50006), unknown message (404, code 10008; also a message of another channel for a
//!   pin), more than 50 pins in a channel (400, code 30003), unknown interaction (404, code
//!   10062), an interaction answered twice (400, code 40060), and for a channel the bot lost
//!   access to ([`FakeDiscord::forbid_channel`]) 403 Missing Access (code 50001) on every
//!   channel route.
//! * The gateway: HELLO (`heartbeat_interval` 45000), IDENTIFY → READY, RESUME → RESUMED,
//!   heartbeat → ACK, a wrong token in IDENTIFY is closed with 4004. Dispatches pushed while no
//!   session is ready are kept and delivered after the next READY/RESUMED — except messages a
//!   user writes with [`FakeDiscord::send_as_user`], which, as on Discord, reach only sessions
//!   ready at that moment (a gateway that was down finds them in the channel's history).
//! * Failure injection ([`FakeDiscord::fail_next`]), e.g. a 429 from [`rate_limit_body`].
//!
//! Like [`crate::fake_telegram`], the API is synchronous: both servers run on one thread with its
//! own single-threaded tokio runtime and stop when the [`FakeDiscord`] is dropped.

use std::collections::{HashMap, HashSet, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

/// The bot's user id (and application id, as on Discord for bots created since 2019).
pub const BOT_USER_ID: u64 = 1_100_000_000_000_000_001;

/// The bot's username.
pub const BOT_USERNAME: &str = "clibot-test";

/// The interval HELLO announces, in milliseconds.
pub const HEARTBEAT_INTERVAL_MS: u64 = 45_000;

/// Longest message content Discord accepts, in characters.
pub const MAX_CONTENT: usize = 2000;

/// The first id the fake hands out; ids are snowflake-sized and sent as strings, as on Discord.
const FIRST_ID: u64 = 1_200_000_000_000_000_000;

/// A Discord error body: `{"message":...,"code":...}`.
/// A bot token the fake accepts (its first part is the bot's id, base64).
pub const TEST_TOKEN: &str = "MTEwMDAwMDAwMDAwMDAwMDAwMQ.FakeToken.ForClibotTestsOnly0123456789";

/// The fake Discord with the real gateway connected to it for `h`'s daemon.
/// A daemon with `config` added to its config file, a fake Discord, and a gateway connected
/// to it: how a Discord test begins (`config` usually holds an `[access.discord]` section).
pub fn started(config: &str) -> (crate::Harness, FakeDiscord, std::process::Child) {
    let mut h = crate::Harness::with_config(config);
    h.start_daemon();
    let (dc, g) = with_gateway(&h);
    (h, dc, g)
}

pub fn with_gateway(h: &crate::Harness) -> (FakeDiscord, std::process::Child) {
    let dc = FakeDiscord::start(TEST_TOKEN);
    let g = h.gateway(
        &["--discord", "--discord-api-url", &dc.url()],
        &[("DISCORD_TOKEN", TEST_TOKEN)],
    );
    assert!(
        dc.wait_ready(std::time::Duration::from_secs(30)),
        "the gateway connects to Discord; its log:\n{}",
        h.gateway_log()
    );
    (dc, g)
}

pub fn error_body(code: u64, message: &str) -> Value {
    json!({ "message": message, "code": code })
}

/// Discord's rate-limit reply (use with status 429); the fake adds a `Retry-After` header (whole
/// seconds, rounded up) and `X-RateLimit-Scope`.
pub fn rate_limit_body(retry_after: f64) -> Value {
    json!({ "message": "You are being rate limited.", "retry_after": retry_after, "global": false })
}

/// Something the bot put into a channel or changed: a created message, an edit, an
/// interaction reply.
#[derive(Clone, Debug, PartialEq)]
pub struct SentMessage {
    /// `"create"` (POST .../messages, a webhook follow-up), `"edit"` (PATCH .../messages/{id},
    /// PATCH .../@original), `"delete"`, `"interaction_reply"` (callback type 4) or
    /// `"interaction_update"` (callback type 7, which edits the button's message).
    pub kind: String,
    pub channel_id: u64,
    /// The content sent (for an edit without `content`, the message's content after it).
    pub content: String,
    /// The `components` as sent, if the request had them.
    pub components: Option<Value>,
    /// The message's id (new for create/reply, the edited one otherwise).
    pub id: u64,
    /// Attached files: (filename, bytes).
    pub files: Vec<(String, Vec<u8>)>,
    /// The embeds as sent (empty when none).
    pub embeds: Vec<Value>,
}

impl SentMessage {
    /// What the message shows as text: its content, then each embed's title and description.
    pub fn text(&self) -> String {
        let mut t = self.content.clone();
        for e in &self.embeds {
            for key in ["title", "description"] {
                if let Some(s) = e[key].as_str() {
                    if !t.is_empty() {
                        t.push('\n');
                    }
                    t.push_str(s);
                }
            }
        }
        t
    }
}

/// A running fake Discord. Dropping it stops both servers.
pub struct FakeDiscord {
    addr: SocketAddr,
    ws_addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// What a gateway session is told to do.
enum Out {
    Dispatch(String, Value),
    Close(u16),
}

struct Interaction {
    channel_id: u64,
    message_id: u64,
    token: String,
    answered: bool,
    /// The message the response created or updated (for `@original`).
    response_message: Option<u64>,
}

struct State {
    token: String,
    ws_url: String,
    /// Files users attached, by the path of their URL (`/files/<id>/<name>`).
    user_files: HashMap<String, Vec<u8>>,
    next_id: u64,
    calls: Vec<(String, String, Value)>,
    sent: Vec<SentMessage>,
    failures: VecDeque<(String, u16, Value)>,
    /// Messages by id (both the users' and the bot's), as Discord Message objects.
    messages: HashMap<u64, Value>,
    /// DM channel of each user who wrote.
    dm_channels: HashMap<u64, u64>,
    /// Server (guild) of each server channel users wrote in; every other channel is a DM.
    guild_channels: HashMap<u64, u64>,
    /// Channels the bot lost access to: every channel route answers 403 Missing Access.
    forbidden: HashSet<u64>,
    /// Threads by id: (parent channel, name, archived).
    threads: HashMap<u64, (u64, String, bool)>,
    /// Pinned messages of each channel, in the order they were pinned.
    pins: HashMap<u64, Vec<u64>>,
    interactions: HashMap<u64, Interaction>,
    /// Ready gateway sessions: (session number, sender).
    sessions: Vec<(u64, mpsc::UnboundedSender<Out>)>,
    next_session: u64,
    /// Dispatches pushed while no session was ready.
    backlog: Vec<(String, Value)>,
    /// Every frame a gateway client sent, parsed.
    received: Vec<Value>,
}

struct Shared {
    state: Mutex<State>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl State {
    fn new_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Sends a dispatch to every ready session, or keeps it for the next one.
    fn dispatch(&mut self, t: &str, d: Value) {
        self.sessions.retain(|(_, tx)| !tx.is_closed());
        if self.sessions.is_empty() {
            self.backlog.push((t.to_string(), d));
            return;
        }
        for (_, tx) in &self.sessions {
            let _ = tx.send(Out::Dispatch(t.to_string(), d.clone()));
        }
    }

    /// Registers a session that got READY or RESUMED and hands it the backlog.
    fn ready(&mut self, number: u64, tx: &mpsc::UnboundedSender<Out>) {
        for (t, d) in self.backlog.drain(..) {
            let _ = tx.send(Out::Dispatch(t, d));
        }
        self.sessions.push((number, tx.clone()));
    }
}

fn bot_user() -> Value {
    json!({
        "id": BOT_USER_ID.to_string(),
        "username": BOT_USERNAME,
        "discriminator": "0",
        "global_name": null,
        "avatar": null,
        "bot": true,
        "verified": true,
        "mfa_enabled": false,
        "flags": 0,
    })
}

fn user_json(user_id: u64, username: &str) -> Value {
    json!({
        "id": user_id.to_string(),
        "username": username,
        "discriminator": "0",
        "global_name": username,
        "avatar": null,
        "bot": false,
    })
}

/// Now as an RFC 3339 timestamp (UTC, milliseconds), like Discord's.
fn timestamp() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = d.as_secs();
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}+00:00",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_millis()
    )
}

fn message_json(id: u64, channel_id: u64, author: Value, content: &str) -> Value {
    json!({
        "id": id.to_string(),
        "channel_id": channel_id.to_string(),
        "author": author,
        "content": content,
        "timestamp": timestamp(),
        "edited_timestamp": null,
        "tts": false,
        "mention_everyone": false,
        "mentions": [],
        "mention_roles": [],
        "attachments": [],
        "embeds": [],
        "pinned": false,
        "type": 0,
        "flags": 0,
        "components": [],
    })
}

impl FakeDiscord {
    /// Starts the fake for a bot with this token on two ephemeral ports of 127.0.0.1 (REST and
    /// gateway); both are bound before this returns.
    pub fn start(token: &str) -> FakeDiscord {
        let bind = || {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the fake Discord");
            l.set_nonblocking(true).expect("non-blocking socket");
            l
        };
        let (http, ws) = (bind(), bind());
        let addr = http.local_addr().expect("REST address");
        let ws_addr = ws.local_addr().expect("gateway address");
        let token = token.strip_prefix("Bot ").unwrap_or(token).to_string();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                token,
                ws_url: format!("ws://{ws_addr}"),
                user_files: HashMap::new(),
                next_id: FIRST_ID,
                calls: Vec::new(),
                sent: Vec::new(),
                failures: VecDeque::new(),
                messages: HashMap::new(),
                dm_channels: HashMap::new(),
                guild_channels: HashMap::new(),
                forbidden: HashSet::new(),
                threads: HashMap::new(),
                pins: HashMap::new(),
                interactions: HashMap::new(),
                sessions: Vec::new(),
                next_session: 1,
                backlog: Vec::new(),
                received: Vec::new(),
            }),
        });
        let (shutdown, stopped) = oneshot::channel();
        let thread_shared = Arc::clone(&shared);
        let thread = crate::fake_thread("fake-discord", move || {
            serve(http, ws, thread_shared, stopped)
        });
        FakeDiscord {
            addr,
            ws_addr,
            shared,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    /// The proxy base for serenity's `HttpBuilder::proxy`: `http://127.0.0.1:PORT` (no slash).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The gateway URL `GET /gateway` hands out: `ws://127.0.0.1:WSPORT`.
    pub fn gateway_url(&self) -> String {
        format!("ws://{}", self.ws_addr)
    }

    pub fn bot_user_id(&self) -> u64 {
        BOT_USER_ID
    }

    /// A user writes `content` in a DM channel; every ready gateway session gets a
    /// MESSAGE_CREATE (or the next one to get ready). Returns the message's id.
    pub fn push_message(
        &self,
        channel_id: u64,
        user_id: u64,
        username: &str,
        content: &str,
    ) -> u64 {
        let mut st = self.shared.lock();
        let id = st.new_id();
        let message = message_json(id, channel_id, user_json(user_id, username), content);
        st.messages.insert(id, message.clone());
        st.dm_channels.insert(user_id, channel_id);
        st.dispatch("MESSAGE_CREATE", message);
        id
    }

    /// A user sends a file `filename` (with `content`) in DM channel `channel_id`: the message
    /// carries it as an attachment whose URL this fake serves. Returns the message's id.
    pub fn push_file(
        &self,
        channel_id: u64,
        user_id: u64,
        username: &str,
        filename: &str,
        data: &[u8],
        content: &str,
    ) -> u64 {
        let base = self.url();
        let mut st = self.shared.lock();
        let id = st.new_id();
        let file_id = st.new_id();
        let path = format!("/files/{file_id}/{filename}");
        st.user_files.insert(path.clone(), data.to_vec());
        let mut message = message_json(id, channel_id, user_json(user_id, username), content);
        let image = filename.ends_with(".png") || filename.ends_with(".jpg");
        message["attachments"] = json!([{
            "id": file_id.to_string(),
            "filename": filename,
            "size": data.len(),
            "url": format!("{base}{path}"),
            "proxy_url": format!("{base}{path}"),
            "content_type": if image { "image/png" } else { "application/octet-stream" },
        }]);
        st.messages.insert(id, message.clone());
        st.dm_channels.insert(user_id, channel_id);
        st.dispatch("MESSAGE_CREATE", message);
        id
    }

    /// A user writes `content` in DM channel `channel_id`, the way Discord behaves: the message
    /// joins the channel's history (`GET channels/{id}/messages`) and goes as MESSAGE_CREATE to
    /// the gateway sessions ready right now. With none ready it is not kept for a later one —
    /// a gateway that was down must read the history. Returns the message's id.
    pub fn send_as_user(
        &self,
        channel_id: u64,
        user_id: u64,
        username: &str,
        content: &str,
    ) -> u64 {
        self.user_writes(None, channel_id, user_id, username, content)
    }

    /// Like [`FakeDiscord::send_as_user`] in a text channel of server `guild_id`: the dispatch
    /// carries `guild_id`, and `GET channels/{id}` answers a server channel.
    pub fn send_as_user_in_guild(
        &self,
        guild_id: u64,
        channel_id: u64,
        user_id: u64,
        username: &str,
        content: &str,
    ) -> u64 {
        self.user_writes(Some(guild_id), channel_id, user_id, username, content)
    }

    fn user_writes(
        &self,
        guild_id: Option<u64>,
        channel_id: u64,
        user_id: u64,
        username: &str,
        content: &str,
    ) -> u64 {
        let mut st = self.shared.lock();
        let id = st.new_id();
        let message = message_json(id, channel_id, user_json(user_id, username), content);
        st.messages.insert(id, message.clone());
        let mut dispatched = message;
        match guild_id {
            Some(guild) => {
                st.guild_channels.insert(channel_id, guild);
                dispatched["guild_id"] = json!(guild.to_string());
            }
            None => {
                st.dm_channels.insert(user_id, channel_id);
            }
        }
        st.sessions.retain(|(_, tx)| !tx.is_closed());
        for (_, tx) in &st.sessions {
            let _ = tx.send(Out::Dispatch("MESSAGE_CREATE".into(), dispatched.clone()));
        }
        id
    }

    /// A user writes `content` in thread `thread` of server `guild_id` (which the bot opened
    /// with `POST channels/{id}/threads`): like [`FakeDiscord::send_as_user_in_guild`] with the
    /// thread as the channel, which `GET channels/{id}` answers as a thread of its parent.
    pub fn send_as_user_in_thread(
        &self,
        guild_id: u64,
        thread: u64,
        user_id: u64,
        username: &str,
        content: &str,
    ) -> u64 {
        self.user_writes(Some(guild_id), thread, user_id, username, content)
    }

    /// The threads the bot opened: (id, parent channel, name, archived), oldest first.
    pub fn threads(&self) -> Vec<(u64, u64, String, bool)> {
        let st = self.shared.lock();
        let mut t: Vec<(u64, u64, String, bool)> = st
            .threads
            .iter()
            .map(|(id, (parent, name, archived))| (*id, *parent, name.clone(), *archived))
            .collect();
        t.sort();
        t
    }

    /// The bot loses access to a channel: from now on every request about it
    /// (`channels/{id}/...`: sending, editing, typing, reading history) is answered 403
    /// `{"message": "Missing Access", "code": 50001}`, as Discord does.
    pub fn forbid_channel(&self, channel_id: u64) {
        self.shared.lock().forbidden.insert(channel_id);
    }

    /// A channel's history as `GET channels/{id}/messages` sees it: every message in it (the
    /// users' and the bot's), oldest first.
    pub fn history(&self, channel_id: u64) -> Vec<Value> {
        let st = self.shared.lock();
        channel_history(&st, channel_id)
            .into_iter()
            .map(|(_, m)| m.clone())
            .collect()
    }

    /// A user presses the button `custom_id` under the bot's message `message_id` in a DM
    /// channel: an INTERACTION_CREATE of a component interaction. Returns the interaction's id;
    /// its token is `"itoken<id>"`.
    pub fn push_button(
        &self,
        channel_id: u64,
        user_id: u64,
        message_id: u64,
        custom_id: &str,
    ) -> u64 {
        let mut st = self.shared.lock();
        let id = st.new_id();
        let token = format!("itoken{id}");
        let message = st
            .messages
            .get(&message_id)
            .cloned()
            .unwrap_or_else(|| message_json(message_id, channel_id, bot_user(), ""));
        let user = message_user(&st, user_id);
        let channel = match st.threads.get(&channel_id) {
            Some((parent, _, _)) => json!({
                "id": channel_id.to_string(), "type": 11, "parent_id": parent.to_string(),
            }),
            None => json!({ "id": channel_id.to_string(), "type": 1 }),
        };
        let guild = st.guild_channels.get(&channel_id).copied();
        let mut interaction = json!({
            "id": id.to_string(),
            "application_id": BOT_USER_ID.to_string(),
            "type": 3,
            "data": { "custom_id": custom_id, "component_type": 2 },
            "channel_id": channel_id.to_string(),
            "channel": channel,
            "user": user,
            "token": token,
            "version": 1,
            "message": message,
            "app_permissions": "0",
            "locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {},
            "context": 1,
            "attachment_size_limit": 10_485_760,
        });
        if let Some(g) = guild {
            interaction["guild_id"] = json!(g.to_string());
        }
        st.interactions.insert(
            id,
            Interaction {
                channel_id,
                message_id,
                token,
                answered: false,
                response_message: None,
            },
        );
        st.dispatch("INTERACTION_CREATE", interaction);
        id
    }

    /// Any dispatch (`t`, `d`) to the ready sessions.
    pub fn push_dispatch(&self, t: &str, d: Value) {
        self.shared.lock().dispatch(t, d);
    }

    /// Closes every gateway session with this close code (e.g. 4000 to make serenity resume).
    pub fn disconnect_all(&self, code: u16) {
        let mut st = self.shared.lock();
        for (_, tx) in st.sessions.drain(..) {
            let _ = tx.send(Out::Close(code));
        }
    }

    /// How many gateway sessions are ready (got READY or RESUMED and are still open).
    pub fn ready_sessions(&self) -> usize {
        let mut st = self.shared.lock();
        st.sessions.retain(|(_, tx)| !tx.is_closed());
        st.sessions.len()
    }

    /// Waits up to `timeout` for a ready gateway session; whether there is one.
    pub fn wait_ready(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.ready_sessions() > 0 {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Every frame gateway clients sent (IDENTIFY, heartbeats, ...), parsed, in order.
    pub fn gateway_received(&self) -> Vec<Value> {
        self.shared.lock().received.clone()
    }

    /// The `d` of the last IDENTIFY (token, intents, properties, ...).
    pub fn identify(&self) -> Option<Value> {
        self.shared
            .lock()
            .received
            .iter()
            .rev()
            .find(|f| f["op"] == 2)
            .map(|f| f["d"].clone())
    }

    /// Every REST request, in order, including refused ones: (method, path as requested, e.g.
    /// `/api/v10/channels/5/messages`, body). The body is the JSON body; for multipart the
    /// `payload_json` object plus `"_files": [{"name","filename","size","content"}]`; `null`
    /// when there was none.
    pub fn calls(&self) -> Vec<(String, String, Value)> {
        self.shared.lock().calls.clone()
    }

    /// Everything the bot put into channels or changed, in order (only successful requests).
    pub fn sent(&self) -> Vec<SentMessage> {
        self.shared.lock().sent.clone()
    }

    /// A message as it is now (a user's or the bot's).
    pub fn message(&self, id: u64) -> Option<Value> {
        self.shared.lock().messages.get(&id).cloned()
    }

    /// The ids of the messages pinned in a channel now, in the order they were pinned (the
    /// last one pinned last).
    pub fn pinned(&self, channel_id: u64) -> Vec<u64> {
        self.shared
            .lock()
            .pins
            .get(&channel_id)
            .cloned()
            .unwrap_or_default()
    }

    /// Answers the next REST request whose path contains `path_contains` with this status and
    /// body instead of handling it (recorded in [`FakeDiscord::calls`] all the same). Several
    /// queue up in order. For 429 the answer gets a `Retry-After` header from `retry_after`.
    pub fn fail_next(&self, path_contains: &str, status: u16, body: Value) {
        self.shared
            .lock()
            .failures
            .push_back((path_contains.to_string(), status, body));
    }

    /// Waits until [`FakeDiscord::sent`] satisfies `pred` and returns it; panics after 20 s.
    /// Waits until a message containing `needle` was posted in `channel`.
    pub fn wait_posted(&self, channel: u64, what: &str, needle: &str) {
        self.wait_sent(what, |s| {
            s.iter()
                .any(|m| m.channel_id == channel && m.kind == "create" && m.text().contains(needle))
        });
    }

    /// The admin starts bash session `name` in `work` from their direct messages and binds
    /// server channel `channel` of `guild` to it.
    pub fn session_bound_to_channel(
        &self,
        (admin, admin_dm): (u64, u64),
        (guild, channel): (u64, u64),
        name: &str,
        work: &str,
    ) {
        self.send_as_user(
            admin_dm,
            admin,
            "owner",
            &format!("!!new {name} bash {work}"),
        );
        self.wait_posted(admin_dm, "started", &format!("started {name}"));
        self.send_as_user_in_guild(guild, channel, admin, "owner", &format!("!!use {name}"));
        self.wait_posted(
            channel,
            "the channel bound",
            &format!("now talks to {name}"),
        );
    }

    pub fn wait_sent(&self, what: &str, pred: impl Fn(&[SentMessage]) -> bool) -> Vec<SentMessage> {
        crate::wait_records(what, || self.sent(), pred)
    }

    /// Waits until [`FakeDiscord::calls`] satisfies `pred` and returns it; panics after 20 s.
    pub fn wait_calls(
        &self,
        what: &str,
        pred: impl Fn(&[(String, String, Value)]) -> bool,
    ) -> Vec<(String, String, Value)> {
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

impl Drop for FakeDiscord {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The user pressing a button: as last seen writing, else a made-up one.
fn message_user(st: &State, user_id: u64) -> Value {
    st.messages
        .values()
        .find(|m| m["author"]["id"].as_str().and_then(parse_id) == Some(user_id))
        .map_or_else(|| user_json(user_id, "user"), |m| m["author"].clone())
}

async fn serve(
    http: std::net::TcpListener,
    ws: std::net::TcpListener,
    shared: Arc<Shared>,
    mut stopped: oneshot::Receiver<()>,
) {
    let (Ok(http), Ok(ws)) = (
        tokio::net::TcpListener::from_std(http),
        tokio::net::TcpListener::from_std(ws),
    ) else {
        eprintln!("fake Discord: cannot use the listening sockets");
        return;
    };
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            accepted = http.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let shared = Arc::clone(&shared);
                let service = service_fn(move |req| handle(req, Arc::clone(&shared)));
                crate::spawn_http(stream, service, "fake Discord");
            }
            accepted = ws.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                tokio::spawn(gateway_session(stream, Arc::clone(&shared)));
            }
        }
    }
}

/// One gateway connection: HELLO, then IDENTIFY/RESUME, heartbeats and dispatches.
async fn gateway_session(stream: tokio::net::TcpStream, shared: Arc<Shared>) {
    let ws = match tokio_tungstenite::accept_async(stream).await {
        Ok(ws) => ws,
        Err(e) => {
            eprintln!("fake Discord: websocket handshake failed: {e}");
            return;
        }
    };
    let (mut sink, mut source) = ws.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Out>();
    let number = {
        let mut st = shared.lock();
        st.next_session += 1;
        st.next_session - 1
    };
    let session_id = format!("fake-session-{number}");
    let mut seq: u64 = 0;
    let hello = json!({ "op": 10, "d": { "heartbeat_interval": HEARTBEAT_INTERVAL_MS } });
    if sink.send(WsMessage::Text(hello.to_string())).await.is_err() {
        return;
    }
    loop {
        let reply = tokio::select! {
            out = rx.recv() => match out {
                Some(Out::Dispatch(t, d)) => {
                    seq += 1;
                    json!({ "op": 0, "t": t, "s": seq, "d": d })
                }
                Some(Out::Close(code)) => {
                    let frame = CloseFrame { code: CloseCode::from(code), reason: "".into() };
                    let _ = sink.send(WsMessage::Close(Some(frame))).await;
                    break;
                }
                None => break,
            },
            frame = source.next() => {
                let text = match frame {
                    Some(Ok(WsMessage::Text(t))) => t,
                    Some(Ok(WsMessage::Binary(b))) => String::from_utf8_lossy(&b).into_owned(),
                    Some(Ok(WsMessage::Close(_)) | Err(_)) | None => break,
                    Some(Ok(_)) => continue,
                };
                let Ok(frame) = serde_json::from_str::<Value>(&text) else {
                    eprintln!("fake Discord: gateway frame is not JSON: {text}");
                    continue;
                };
                shared.lock().received.push(frame.clone());
                match frame["op"].as_u64() {
                    Some(1) => json!({ "op": 11 }),
                    Some(2) => {
                        let token = frame["d"]["token"].as_str().unwrap_or_default();
                        let token = token.strip_prefix("Bot ").unwrap_or(token);
                        if token != shared.lock().token {
                            let frame = CloseFrame {
                                code: CloseCode::from(4004),
                                reason: "Authentication failed.".into(),
                            };
                            let _ = sink.send(WsMessage::Close(Some(frame))).await;
                            break;
                        }
                        seq += 1;
                        let ready = json!({ "op": 0, "t": "READY", "s": seq, "d": {
                            "v": 10,
                            "user": bot_user(),
                            "guilds": [],
                            "private_channels": [],
                            "session_id": session_id,
                            "resume_gateway_url": shared.lock().ws_url,
                            "shard": [0, 1],
                            "application": { "id": BOT_USER_ID.to_string(), "flags": 0 },
                        }});
                        if sink.send(WsMessage::Text(ready.to_string())).await.is_err() {
                            break;
                        }
                        shared.lock().ready(number, &tx);
                        continue;
                    }
                    Some(6) => {
                        seq = frame["d"]["seq"].as_u64().unwrap_or(seq) + 1;
                        let resumed = json!({ "op": 0, "t": "RESUMED", "s": seq, "d": {} });
                        if sink.send(WsMessage::Text(resumed.to_string())).await.is_err() {
                            break;
                        }
                        shared.lock().ready(number, &tx);
                        continue;
                    }
                    _ => continue,
                }
            }
        };
        if sink.send(WsMessage::Text(reply.to_string())).await.is_err() {
            break;
        }
    }
    shared.lock().sessions.retain(|(n, _)| *n != number);
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

fn no_content() -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::NO_CONTENT;
    response
}

fn not_found() -> Response<Body> {
    json_response(404, &error_body(0, "404: Not Found"))
}

/// A file part of a multipart request.
struct FilePart {
    name: String,
    filename: String,
    data: Vec<u8>,
}

async fn handle(req: Request<Incoming>, shared: Arc<Shared>) -> Result<Response<Body>, Infallible> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or_default().to_string();
    let content_type = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let auth = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    // An attachment's URL (Discord's CDN serves them without the bot's token).
    if path.starts_with("/files/") {
        let found = shared.lock().user_files.get(&path).cloned();
        return Ok(match found {
            Some(data) => Response::builder()
                .status(200)
                .header(CONTENT_TYPE, "application/octet-stream")
                .body(Full::new(Bytes::from(data)))
                .unwrap_or_else(|_| json_response(500, &error_body(0, "response"))),
            None => json_response(404, &error_body(0, "404: Not Found")),
        });
    }
    let bytes = match req.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => return Ok(json_response(400, &error_body(0, &format!("body: {e}")))),
    };
    let (body, files) = if content_type
        .to_ascii_lowercase()
        .starts_with("multipart/form-data")
    {
        let Some(parts) = boundary(&content_type).and_then(|b| parse_multipart(&bytes, &b)) else {
            return Ok(json_response(400, &error_body(50035, "Invalid Form Body")));
        };
        let mut body = Value::Null;
        let mut file_parts = Vec::new();
        for part in parts {
            if !part.filename.is_empty() {
                file_parts.push(part);
            } else if part.name == "payload_json" {
                body = serde_json::from_slice(&part.data).unwrap_or(Value::Null);
            }
        }
        if !body.is_object() {
            body = json!({});
        }
        body["_files"] = file_parts
            .iter()
            .map(|f| {
                json!({
                    "name": f.name,
                    "filename": f.filename,
                    "size": f.data.len(),
                    "content": String::from_utf8_lossy(&f.data),
                })
            })
            .collect();
        (body, file_parts)
    } else if bytes.is_empty() {
        (Value::Null, Vec::new())
    } else {
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) => (v, Vec::new()),
            Err(e) => {
                return Ok(json_response(
                    400,
                    &error_body(
                        50109,
                        &format!("The request body contains invalid JSON: {e}"),
                    ),
                ));
            }
        }
    };

    let mut st = shared.lock();
    st.calls
        .push((method.to_string(), path.clone(), body.clone()));
    if let Some(i) = st
        .failures
        .iter()
        .position(|(p, _, _)| path.contains(p.as_str()))
    {
        let (_, status, fail) = st.failures.remove(i).unwrap_or_default();
        let mut response = json_response(status, &fail);
        if status == 429 {
            let secs = fail["retry_after"].as_f64().unwrap_or(1.0).ceil();
            let h = response.headers_mut();
            if let Ok(v) = HeaderValue::from_str(&format!("{secs}")) {
                h.insert("retry-after", v);
            }
            h.insert("x-ratelimit-scope", HeaderValue::from_static("user"));
        }
        return Ok(response);
    }
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let segments: &[&str] = match segments.as_slice() {
        ["api", v, rest @ ..] if v.starts_with('v') => rest,
        ["api", rest @ ..] => rest,
        _ => return Ok(not_found()),
    };
    let open = matches!(segments.first(), Some(&"interactions" | &"webhooks"));
    if !open && auth.strip_prefix("Bot ").unwrap_or(&auth) != st.token {
        return Ok(json_response(401, &error_body(0, "401: Unauthorized")));
    }
    Ok(route(&mut st, &method, segments, &query, &body, files))
}

fn parse_id(s: &str) -> Option<u64> {
    s.parse().ok()
}

/// A channel's messages, oldest first (ids grow with time, as snowflakes do).
fn channel_history(st: &State, channel: u64) -> Vec<(u64, &Value)> {
    let mut v: Vec<(u64, &Value)> = st
        .messages
        .iter()
        .filter(|(_, m)| m["channel_id"].as_str().and_then(parse_id) == Some(channel))
        .map(|(id, m)| (*id, m))
        .collect();
    v.sort_by_key(|(id, _)| *id);
    v
}

/// The value of `key` in a query string.
fn query_param<'a>(query: &'a str, key: &str) -> Option<&'a str> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

/// In a message's content, stands for a lone UTF-16 surrogate: the history serves `\ud800` in
/// its place, as Discord's JSON sometimes holds (a Rust string cannot).
pub const LONE_SURROGATE: &str = "\u{E000}lone\u{E000}";

/// `GET channels/{id}/messages`: at most `limit` messages, newest first — the newest ones, the
/// ones right before `before`, right after `after`, or around `around`.
fn get_history(st: &State, channel: u64, query: &str) -> Response<Body> {
    let invalid = || json_response(400, &error_body(50035, "Invalid Form Body"));
    let limit = match query_param(query, "limit") {
        None => 50,
        Some(l) => match l.parse::<usize>() {
            Ok(n @ 1..=100) => n,
            _ => return invalid(),
        },
    };
    let anchor = |key: &str| -> Result<Option<u64>, ()> {
        query_param(query, key)
            .map(|v| parse_id(v).ok_or(()))
            .transpose()
    };
    let (Ok(after), Ok(before), Ok(around)) = (anchor("after"), anchor("before"), anchor("around"))
    else {
        return invalid();
    };
    let all = channel_history(st, channel);
    let mut page: Vec<&Value> = if let Some(a) = after {
        all.iter()
            .filter(|(id, _)| *id > a)
            .take(limit)
            .map(|(_, m)| *m)
            .collect()
    } else if let Some(b) = before {
        let older: Vec<&Value> = all
            .iter()
            .filter(|(id, _)| *id < b)
            .map(|(_, m)| *m)
            .collect();
        older[older.len().saturating_sub(limit)..].to_vec()
    } else if let Some(c) = around {
        let at = all.iter().position(|(id, _)| *id >= c).unwrap_or(all.len());
        let start = at.saturating_sub(limit / 2);
        all.iter()
            .skip(start)
            .take(limit)
            .map(|(_, m)| *m)
            .collect()
    } else {
        all[all.len().saturating_sub(limit)..]
            .iter()
            .map(|(_, m)| *m)
            .collect()
    };
    page.reverse();
    let body = Value::Array(page.into_iter().cloned().collect())
        .to_string()
        .replace(LONE_SURROGATE, "\\ud800");
    let mut response = Response::new(Full::new(Bytes::from(body)));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// A thread as Discord shows it (type 11, a public thread).
fn thread_json(st: &State, id: u64) -> Value {
    let (parent, name, archived) = st.threads.get(&id).cloned().unwrap_or_default();
    let guild = st.guild_channels.get(&parent).copied().unwrap_or(1);
    json!({
        "id": id.to_string(),
        "type": 11,
        "guild_id": guild.to_string(),
        "parent_id": parent.to_string(),
        "owner_id": BOT_USER_ID.to_string(),
        "name": name,
        "last_message_id": null,
        "rate_limit_per_user": 0,
        "message_count": 0,
        "member_count": 1,
        "flags": 0,
        "thread_metadata": {
            "archived": archived,
            "auto_archive_duration": 10080,
            "archive_timestamp": timestamp(),
            "locked": false,
            "invitable": true,
        },
    })
}

/// `GET channels/{id}`: a thread the bot opened, a server text channel where users wrote with
/// a `guild_id`, else a DM.
fn get_channel(st: &State, channel: u64) -> Value {
    if st.threads.contains_key(&channel) {
        return thread_json(st, channel);
    }
    if let Some(guild) = st.guild_channels.get(&channel) {
        return json!({
            "id": channel.to_string(),
            "type": 0,
            "guild_id": guild.to_string(),
            "name": format!("channel-{channel}"),
            "position": 0,
            "permission_overwrites": [],
            "nsfw": false,
            "parent_id": null,
            "last_message_id": null,
            "rate_limit_per_user": 0,
            "topic": null,
            "flags": 0,
        });
    }
    let user = st
        .dm_channels
        .iter()
        .find(|(_, c)| **c == channel)
        .map_or(1, |(u, _)| *u);
    json!({
        "id": channel.to_string(),
        "type": 1,
        "last_message_id": null,
        "flags": 0,
        "recipients": [message_user(st, user)],
    })
}

fn route(
    st: &mut State,
    method: &Method,
    seg: &[&str],
    query: &str,
    body: &Value,
    files: Vec<FilePart>,
) -> Response<Body> {
    let m = method.as_str();
    if let ["channels", channel, ..] = seg
        && parse_id(channel).is_some_and(|c| st.forbidden.contains(&c))
    {
        return json_response(403, &error_body(50001, "Missing Access"));
    }
    match (m, seg) {
        ("GET", ["gateway"]) => json_response(200, &json!({ "url": st.ws_url })),
        ("GET", ["gateway", "bot"]) => json_response(
            200,
            &json!({
                "url": st.ws_url,
                "shards": 1,
                "session_start_limit": {
                    "total": 1000, "remaining": 999, "reset_after": 14_400_000, "max_concurrency": 1
                },
            }),
        ),
        ("GET", ["users", "@me"]) => json_response(200, &bot_user()),
        ("POST", ["users", "@me", "channels"]) => {
            let Some(user) = body["recipient_id"]
                .as_str()
                .and_then(parse_id)
                .or_else(|| body["recipient_id"].as_u64())
            else {
                return json_response(400, &error_body(50035, "Invalid Form Body"));
            };
            let channel = match st.dm_channels.get(&user) {
                Some(c) => *c,
                None => {
                    let c = st.new_id();
                    st.dm_channels.insert(user, c);
                    c
                }
            };
            json_response(
                200,
                &json!({
                    "id": channel.to_string(),
                    "type": 1,
                    "last_message_id": null,
                    "flags": 0,
                    "recipients": [user_json(user, "user")],
                }),
            )
        }
        ("POST", ["channels", channel, "messages"]) => {
            let Some(channel) = parse_id(channel) else {
                return not_found();
            };
            match create(st, "create", channel, body, files) {
                Ok((_, message)) => json_response(200, &message),
                Err((status, e)) => json_response(status, &e),
            }
        }
        ("GET", ["channels", channel, "messages"]) => match parse_id(channel) {
            Some(channel) => get_history(st, channel, query),
            None => not_found(),
        },
        ("GET", ["channels", channel]) => match parse_id(channel) {
            Some(channel) => json_response(200, &get_channel(st, channel)),
            None => not_found(),
        },
        ("POST", ["channels", _, "typing"]) => no_content(),
        ("POST", ["channels", channel, "threads"]) => {
            let Some(parent) = parse_id(channel) else {
                return not_found();
            };
            if !st.guild_channels.contains_key(&parent) {
                // A DM has no threads.
                return json_response(
                    400,
                    &error_body(50024, "Cannot execute action on this channel type"),
                );
            }
            let name = body["name"].as_str().unwrap_or_default().to_string();
            if !(1..=100).contains(&name.chars().count()) {
                return json_response(400, &error_body(50035, "Invalid Form Body"));
            }
            let id = st.new_id();
            st.threads.insert(id, (parent, name, false));
            let guild = st.guild_channels.get(&parent).copied().unwrap_or(1);
            st.guild_channels.insert(id, guild);
            json_response(201, &thread_json(st, id))
        }
        ("PATCH", ["channels", channel]) => {
            let Some(thread) = parse_id(channel).filter(|c| st.threads.contains_key(c)) else {
                return json_response(404, &error_body(10003, "Unknown Channel"));
            };
            if let (Some(archived), Some(t)) =
                (body["archived"].as_bool(), st.threads.get_mut(&thread))
            {
                t.2 = archived;
            }
            json_response(200, &thread_json(st, thread))
        }
        ("PUT" | "DELETE", ["channels", channel, "pins", id])
        | ("PUT" | "DELETE", ["channels", channel, "messages", "pins", id]) => {
            let (Some(channel), Some(id)) = (parse_id(channel), parse_id(id)) else {
                return not_found();
            };
            match pin(st, m == "PUT", channel, id) {
                Ok(()) => no_content(),
                Err((status, e)) => json_response(status, &e),
            }
        }
        (_, ["channels", channel, "messages", id]) => {
            let (Some(channel), Some(id)) = (parse_id(channel), parse_id(id)) else {
                return not_found();
            };
            let unknown = || json_response(404, &error_body(10008, "Unknown Message"));
            match m {
                "GET" => st
                    .messages
                    .get(&id)
                    .map_or_else(unknown, |msg| json_response(200, msg)),
                "PATCH" => match edit(st, "edit", channel, id, body, files) {
                    Ok(message) => json_response(200, &message),
                    Err((status, e)) => json_response(status, &e),
                },
                "DELETE" => {
                    if st.messages.remove(&id).is_none() {
                        return unknown();
                    }
                    if let Some(pins) = st.pins.get_mut(&channel) {
                        pins.retain(|p| *p != id);
                    }
                    st.sent.push(SentMessage {
                        kind: "delete".into(),
                        channel_id: channel,
                        content: String::new(),
                        components: None,
                        id,
                        files: Vec::new(),
                        embeds: Vec::new(),
                    });
                    no_content()
                }
                _ => not_found(),
            }
        }
        ("POST", ["interactions", id, token, "callback"]) => {
            let Some(id) = parse_id(id) else {
                return not_found();
            };
            let Some(interaction) = st.interactions.get(&id).filter(|i| i.token == *token) else {
                return json_response(404, &error_body(10062, "Unknown interaction"));
            };
            if interaction.answered {
                return json_response(
                    400,
                    &error_body(40060, "Interaction has already been acknowledged."),
                );
            }
            let (channel, message_id) = (interaction.channel_id, interaction.message_id);
            let data = body.get("data").cloned().unwrap_or(json!({}));
            let response_message = match body["type"].as_u64() {
                Some(4) => match create(st, "interaction_reply", channel, &data, files) {
                    Ok((new_id, _)) => Some(new_id),
                    Err((status, e)) => return json_response(status, &e),
                },
                Some(7) => {
                    match edit(st, "interaction_update", channel, message_id, &data, files) {
                        Ok(_) => Some(message_id),
                        Err((status, e)) => return json_response(status, &e),
                    }
                }
                Some(5) => None,
                Some(6) => Some(message_id),
                Some(1 | 9) => None,
                _ => return json_response(400, &error_body(50035, "Invalid Form Body")),
            };
            if let Some(i) = st.interactions.get_mut(&id) {
                i.answered = true;
                i.response_message = response_message;
            }
            no_content()
        }
        (_, ["webhooks", _, token, rest @ ..]) => {
            let Some((_, i)) = st.interactions.iter().find(|(_, i)| i.token == *token) else {
                return json_response(404, &error_body(10015, "Unknown Webhook"));
            };
            let (channel, original) = (i.channel_id, i.response_message);
            match (m, rest) {
                ("POST", []) => match create(st, "create", channel, body, files) {
                    Ok((_, message)) => json_response(200, &message),
                    Err((status, e)) => json_response(status, &e),
                },
                ("PATCH", ["messages", which]) => {
                    let target = if *which == "@original" {
                        original
                    } else {
                        parse_id(which)
                    };
                    let Some(target) = target else {
                        return json_response(404, &error_body(10008, "Unknown Message"));
                    };
                    match edit(st, "edit", channel, target, body, files) {
                        Ok(message) => json_response(200, &message),
                        Err((status, e)) => json_response(status, &e),
                    }
                }
                ("GET", ["messages", "@original"]) => {
                    original.and_then(|id| st.messages.get(&id)).map_or_else(
                        || json_response(404, &error_body(10008, "Unknown Message")),
                        |msg| json_response(200, msg),
                    )
                }
                _ => not_found(),
            }
        }
        ("GET" | "PUT", ["applications", _, "commands"])
        | ("GET" | "PUT", ["applications", _, "guilds", _, "commands"]) => {
            json_response(200, &json!([]))
        }
        _ => {
            eprintln!("fake Discord: no route for {m} /{}", seg.join("/"));
            not_found()
        }
    }
}

type Refusal = (u16, Value);

/// Most messages a channel can have pinned.
const MAX_PINS: usize = 50;

/// Pins (`pin`) or unpins message `id` of `channel`; pinning a pinned message, or unpinning one
/// that is not pinned, changes nothing.
fn pin(st: &mut State, pin: bool, channel: u64, id: u64) -> Result<(), Refusal> {
    let Some(message) = st
        .messages
        .get_mut(&id)
        .filter(|m| m["channel_id"].as_str().and_then(parse_id) == Some(channel))
    else {
        return Err((404, error_body(10008, "Unknown Message")));
    };
    let pins = st.pins.entry(channel).or_default();
    let pinned = pins.contains(&id);
    if pin && !pinned {
        if pins.len() >= MAX_PINS {
            return Err((
                400,
                error_body(30003, "Maximum number of pins reached (50)"),
            ));
        }
        pins.push(id);
    } else if !pin {
        pins.retain(|p| *p != id);
    }
    message["pinned"] = json!(pin);
    Ok(())
}

fn invalid_length() -> Refusal {
    (
        400,
        json!({
            "message": "Invalid Form Body",
            "code": 50035,
            "errors": { "content": { "_errors": [{
                "code": "BASE_TYPE_MAX_LENGTH",
                "message": format!("Must be {MAX_CONTENT} or fewer in length."),
            }]}},
        }),
    )
}

fn attachments(st: &mut State, channel: u64, files: &[FilePart]) -> Value {
    files
        .iter()
        .map(|f| {
            let id = st.new_id();
            let url = format!(
                "https://cdn.discordapp.com/attachments/{channel}/{id}/{}",
                f.filename
            );
            json!({
                "id": id.to_string(),
                "filename": f.filename,
                "size": f.data.len(),
                "url": url,
                "proxy_url": url.replace("cdn.discordapp.com", "media.discordapp.net"),
                "content_type": "application/octet-stream",
            })
        })
        .collect()
}

/// A new bot message from a create body (`content`, `components`, `embeds`).
fn create(
    st: &mut State,
    kind: &str,
    channel: u64,
    body: &Value,
    files: Vec<FilePart>,
) -> Result<(u64, Value), Refusal> {
    let content = body["content"].as_str().unwrap_or_default().to_string();
    if content.chars().count() > MAX_CONTENT {
        return Err(invalid_length());
    }
    let components = body.get("components").cloned();
    let embeds = body.get("embeds").cloned().unwrap_or(json!([]));
    let has_components = components
        .as_ref()
        .and_then(Value::as_array)
        .is_some_and(|c| !c.is_empty());
    let has_embeds = embeds.as_array().is_some_and(|e| !e.is_empty());
    // An embed's description holds at most 4096 characters.
    let long_embed = embeds.as_array().is_some_and(|e| {
        e.iter().any(|x| {
            x["description"]
                .as_str()
                .is_some_and(|d| d.chars().count() > 4096)
        })
    });
    if long_embed {
        return Err(invalid_length());
    }
    if content.trim().is_empty() && files.is_empty() && !has_components && !has_embeds {
        return Err((400, error_body(50006, "Cannot send an empty message")));
    }
    // Sending into an archived (unlocked) thread unarchives it.
    if let Some(t) = st.threads.get_mut(&channel) {
        t.2 = false;
    }
    let id = st.new_id();
    let mut message = message_json(id, channel, bot_user(), &content);
    message["attachments"] = attachments(st, channel, &files);
    message["embeds"] = embeds.clone();
    if let Some(c) = &components {
        message["components"] = c.clone();
    }
    st.messages.insert(id, message.clone());
    st.sent.push(SentMessage {
        kind: kind.into(),
        channel_id: channel,
        content,
        components,
        id,
        files: files.into_iter().map(|f| (f.filename, f.data)).collect(),
        embeds: embeds.as_array().cloned().unwrap_or_default(),
    });
    Ok((id, message))
}

/// Edits a bot message: fields present replace, absent ones stay.
fn edit(
    st: &mut State,
    kind: &str,
    channel: u64,
    id: u64,
    body: &Value,
    files: Vec<FilePart>,
) -> Result<Value, Refusal> {
    if let Some(content) = body["content"].as_str()
        && content.chars().count() > MAX_CONTENT
    {
        return Err(invalid_length());
    }
    let new_attachments = attachments(st, channel, &files);
    let Some(message) = st.messages.get_mut(&id) else {
        return Err((404, error_body(10008, "Unknown Message")));
    };
    if message["author"]["id"].as_str().and_then(parse_id) != Some(BOT_USER_ID) {
        return Err((
            403,
            error_body(50005, "Cannot edit a message authored by another user"),
        ));
    }
    if let Some(content) = body.get("content") {
        message["content"] = if content.is_null() {
            json!("")
        } else {
            content.clone()
        };
    }
    let components = body.get("components").cloned();
    if let Some(c) = &components {
        message["components"] = if c.is_null() { json!([]) } else { c.clone() };
    }
    if let Some(e) = body.get("embeds") {
        message["embeds"] = e.clone();
    }
    if !files.is_empty() {
        message["attachments"] = new_attachments;
    }
    message["edited_timestamp"] = json!(timestamp());
    let message = message.clone();
    st.sent.push(SentMessage {
        kind: kind.into(),
        channel_id: channel,
        content: message["content"].as_str().unwrap_or_default().to_string(),
        components,
        id,
        files: files.into_iter().map(|f| (f.filename, f.data)).collect(),
        embeds: message["embeds"].as_array().cloned().unwrap_or_default(),
    });
    Ok(message)
}

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

/// The value of `key=` in a Content-Disposition header.
fn disposition_param(header: &str, key: &str) -> Option<String> {
    header.split(';').skip(1).find_map(|param| {
        let (k, v) = param.trim().split_once('=')?;
        (k.trim().eq_ignore_ascii_case(key)).then(|| v.trim().trim_matches('"').to_string())
    })
}

/// The parts of a `multipart/form-data` body; a text field has an empty filename.
fn parse_multipart(body: &[u8], boundary: &str) -> Option<Vec<FilePart>> {
    let delimiter = format!("--{boundary}").into_bytes();
    let next_delimiter = [b"\r\n".as_slice(), &delimiter].concat();
    let mut parts = Vec::new();
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
        let mut name = None;
        let mut filename = None;
        for line in headers.lines() {
            if let Some((k, v)) = line.split_once(':')
                && k.trim().eq_ignore_ascii_case("content-disposition")
            {
                name = disposition_param(v, "name");
                filename = disposition_param(v, "filename");
            }
        }
        let name = name?;
        parts.push(FilePart {
            name,
            filename: filename.unwrap_or_default(),
            data: part[header_end + 4..].to_vec(),
        });
        pos = end + next_delimiter.len();
    }
    Some(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HOST;
    use tokio::net::TcpStream;

    const TOKEN: &str = "fake.discord.token";

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    /// One HTTP/1.1 request with hyper's client, authorised as the bot; status and JSON answer
    /// (`null` for an empty body) and the `Retry-After` header.
    async fn request(
        fake: &FakeDiscord,
        method: &str,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> (u16, Value, Option<String>) {
        let stream = TcpStream::connect(fake.addr()).await.expect("connect");
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .expect("handshake");
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header(HOST, fake.addr().to_string())
            .header(AUTHORIZATION, format!("Bot {TOKEN}"))
            .header(CONTENT_TYPE, content_type)
            .body(Full::new(Bytes::from(body)))
            .expect("request");
        let response = sender.send_request(request).await.expect("send");
        let status = response.status().as_u16();
        let retry = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        let value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).expect("JSON answer")
        };
        (status, value, retry)
    }

    async fn json_call(fake: &FakeDiscord, method: &str, path: &str, body: Value) -> (u16, Value) {
        let body = if body.is_null() {
            Vec::new()
        } else {
            body.to_string().into_bytes()
        };
        let (status, value, _) = request(fake, method, path, "application/json", body).await;
        (status, value)
    }

    type Ws = tokio_tungstenite::WebSocketStream<TcpStream>;

    async fn next_json(ws: &mut Ws) -> Value {
        loop {
            let frame = tokio::time::timeout(Duration::from_secs(5), ws.next())
                .await
                .expect("a gateway frame in time")
                .expect("open")
                .expect("frame");
            if let WsMessage::Text(t) = frame {
                return serde_json::from_str(&t).expect("JSON frame");
            }
        }
    }

    async fn send_json(ws: &mut Ws, v: Value) {
        ws.send(WsMessage::Text(v.to_string())).await.expect("send");
    }

    /// Connects to the gateway the way serenity finds it (`GET /gateway`, `?v=10`) and
    /// identifies; returns the socket after READY.
    async fn connect(fake: &FakeDiscord) -> Ws {
        let (status, gateway) = json_call(fake, "GET", "/api/v10/gateway", Value::Null).await;
        assert_eq!(status, 200);
        // serenity builds this with `Url::parse`, which adds the path's `/`.
        let url = format!("{}/?v=10", gateway["url"].as_str().expect("url"));
        assert_eq!(gateway["url"], fake.gateway_url());
        let stream = TcpStream::connect(fake.gateway_url().trim_start_matches("ws://"))
            .await
            .expect("connect gateway");
        let (mut ws, _) = tokio_tungstenite::client_async(url, stream)
            .await
            .expect("websocket handshake");
        let hello = next_json(&mut ws).await;
        assert_eq!(hello["op"], 10);
        assert_eq!(hello["d"]["heartbeat_interval"], 45_000);
        send_json(
            &mut ws,
            json!({ "op": 2, "d": { "token": TOKEN, "intents": 37_376, "properties": {} } }),
        )
        .await;
        let ready = next_json(&mut ws).await;
        assert_eq!(
            (&ready["op"], &ready["t"], &ready["s"]),
            (&json!(0), &json!("READY"), &json!(1))
        );
        assert_eq!(ready["d"]["user"]["id"], BOT_USER_ID.to_string());
        assert_eq!(ready["d"]["application"]["id"], BOT_USER_ID.to_string());
        assert_eq!(ready["d"]["shard"], json!([0, 1]));
        ws
    }

    #[test]
    fn gateway_hello_identify_ready_heartbeat_and_dispatches() {
        let fake = FakeDiscord::start(TOKEN);
        // Pushed before anyone connected: kept for the first ready session.
        let early = fake.push_message(555, 42, "ann", "early");
        runtime().block_on(async {
            let mut ws = connect(&fake).await;
            assert!(fake.wait_ready(Duration::from_secs(2)));
            let first = next_json(&mut ws).await;
            assert_eq!(first["t"], "MESSAGE_CREATE");
            assert_eq!(first["s"], 2);
            assert_eq!(first["d"]["id"], early.to_string());

            send_json(&mut ws, json!({ "op": 1, "d": 2 })).await;
            assert_eq!(next_json(&mut ws).await, json!({ "op": 11 }));

            let id = fake.push_message(555, 42, "ann", "!status");
            let event = next_json(&mut ws).await;
            assert_eq!(event["t"], "MESSAGE_CREATE");
            assert_eq!(event["s"], 3);
            let d = &event["d"];
            assert_eq!(d["id"], id.to_string());
            assert_eq!(d["channel_id"], "555");
            assert_eq!(d["content"], "!status");
            assert_eq!(d["author"]["id"], "42");
            assert_eq!(d["author"]["username"], "ann");
            assert_eq!(d["author"]["bot"], false);
            assert!(d.get("guild_id").is_none(), "a DM");
            assert!(
                d["timestamp"]
                    .as_str()
                    .expect("timestamp")
                    .ends_with("+00:00")
            );

            let button = fake.push_button(555, 42, 7, "answer:1");
            let event = next_json(&mut ws).await;
            assert_eq!(event["t"], "INTERACTION_CREATE");
            assert_eq!(event["d"]["type"], 3);
            assert_eq!(event["d"]["id"], button.to_string());
            assert_eq!(
                event["d"]["data"],
                json!({ "custom_id": "answer:1", "component_type": 2 })
            );
            assert_eq!(event["d"]["user"]["username"], "ann");
            assert_eq!(event["d"]["message"]["id"], "7");

            fake.disconnect_all(4000);
            let closed = tokio::time::timeout(Duration::from_secs(5), ws.next())
                .await
                .expect("closed in time");
            assert!(
                matches!(closed, Some(Ok(WsMessage::Close(Some(f)))) if u16::from(f.code) == 4000)
            );
        });
        assert_eq!(fake.identify().expect("identified")["intents"], 37_376);
        assert_eq!(fake.ready_sessions(), 0);
    }

    #[test]
    fn a_wrong_token_is_closed_with_4004() {
        let fake = FakeDiscord::start(TOKEN);
        runtime().block_on(async {
            let stream = TcpStream::connect(fake.gateway_url().trim_start_matches("ws://"))
                .await
                .expect("connect");
            let (mut ws, _) = tokio_tungstenite::client_async(fake.gateway_url(), stream)
                .await
                .expect("handshake");
            next_json(&mut ws).await;
            send_json(&mut ws, json!({ "op": 2, "d": { "token": "nope" } })).await;
            let frame = ws.next().await;
            assert!(
                matches!(frame, Some(Ok(WsMessage::Close(Some(f)))) if u16::from(f.code) == 4004)
            );
        });
        assert!(!fake.wait_ready(Duration::from_millis(50)));
    }

    #[test]
    fn rest_messages_edits_interactions_and_files() {
        let fake = FakeDiscord::start(TOKEN);
        runtime().block_on(async {
            let (status, me) = json_call(&fake, "GET", "/api/v10/users/@me", Value::Null).await;
            assert_eq!((status, &me["id"]), (200, &json!(BOT_USER_ID.to_string())));
            let (status, bot) =
                json_call(&fake, "GET", "/api/v10/gateway/bot", Value::Null).await;
            assert_eq!((status, &bot["shards"]), (200, &json!(1)));

            let components = json!([{ "type": 1, "components": [
                { "type": 2, "style": 1, "label": "Yes", "custom_id": "answer:1" }
            ]}]);
            let (status, message) = json_call(
                &fake,
                "POST",
                "/api/v10/channels/555/messages",
                json!({ "content": "Allow?", "components": components }),
            )
            .await;
            assert_eq!(status, 200, "{message}");
            assert_eq!(message["content"], "Allow?");
            assert_eq!(message["channel_id"], "555");
            assert_eq!(message["author"]["bot"], true);
            assert_eq!(message["components"], components);
            let id: u64 = message["id"].as_str().and_then(parse_id).expect("id");

            let (status, _) =
                json_call(&fake, "POST", "/api/v10/channels/555/typing", Value::Null).await;
            assert_eq!(status, 204);

            let (status, edited) = json_call(
                &fake,
                "PATCH",
                &format!("/api/v10/channels/555/messages/{id}"),
                json!({ "components": [] }),
            )
            .await;
            assert_eq!(status, 200);
            assert_eq!(edited["content"], "Allow?");
            assert_eq!(edited["components"], json!([]));
            let (status, e) = json_call(
                &fake,
                "PATCH",
                "/api/v10/channels/555/messages/1",
                json!({ "content": "x" }),
            )
            .await;
            assert_eq!((status, &e["code"]), (404, &json!(10008)));

            let (status, e) = json_call(
                &fake,
                "POST",
                "/api/v10/channels/555/messages",
                json!({ "content": "x".repeat(2001) }),
            )
            .await;
            assert_eq!((status, &e["code"]), (400, &json!(50035)));
            let (status, e) =
                json_call(&fake, "POST", "/api/v10/channels/555/messages", json!({})).await;
            assert_eq!((status, &e["code"]), (400, &json!(50006)));

            // A button press answered with an update of its message; twice is refused.
            let interaction = fake.push_button(555, 42, id, "answer:1");
            let callback = format!("/api/v10/interactions/{interaction}/itoken{interaction}/callback");
            let update = json!({ "type": 7, "data": { "content": "Allowed.", "components": [] } });
            let (status, _) = json_call(&fake, "POST", &callback, update.clone()).await;
            assert_eq!(status, 204);
            let (status, e) = json_call(&fake, "POST", &callback, update).await;
            assert_eq!((status, &e["code"]), (400, &json!(40060)));
            let (status, e) = json_call(
                &fake,
                "POST",
                "/api/v10/interactions/1/x/callback",
                json!({ "type": 6 }),
            )
            .await;
            assert_eq!((status, &e["code"]), (404, &json!(10062)));

            // A file, as serenity sends it: payload_json plus files[0].
            let boundary = "XyZ";
            let body = format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"payload_json\"\r\n\
                 Content-Type: application/json\r\n\r\n\
                 {{\"content\":\"log\",\"attachments\":[{{\"id\":0,\"filename\":\"out.txt\"}}]}}\r\n\
                 --{boundary}\r\nContent-Disposition: form-data; name=\"files[0]\"; filename=\"out.txt\"\r\n\
                 Content-Type: text/plain\r\n\r\nline 1\r\nline 2\r\n--{boundary}--\r\n"
            );
            let (status, message, _) = request(
                &fake,
                "POST",
                "/api/v10/channels/555/messages",
                &format!("multipart/form-data; boundary={boundary}"),
                body.into_bytes(),
            )
            .await;
            assert_eq!(status, 200, "{message}");
            assert_eq!(message["attachments"][0]["filename"], "out.txt");
            assert_eq!(message["attachments"][0]["size"], 14);

            let (status, commands) = json_call(
                &fake,
                "PUT",
                &format!("/api/v10/applications/{BOT_USER_ID}/commands"),
                json!([{ "name": "status", "description": "Sessions" }]),
            )
            .await;
            assert_eq!((status, commands), (200, json!([])));

            let (status, e, _) =
                request(&fake, "GET", "/api/v10/nowhere", "application/json", Vec::new()).await;
            assert_eq!((status, &e["message"]), (404, &json!("404: Not Found")));
        });
        let sent = fake.sent();
        let summary: Vec<(&str, &str)> = sent
            .iter()
            .map(|s| (s.kind.as_str(), s.content.as_str()))
            .collect();
        assert_eq!(
            summary,
            [
                ("create", "Allow?"),
                ("edit", "Allow?"),
                ("interaction_update", "Allowed."),
                ("create", "log"),
            ]
        );
        assert_eq!(sent[1].components, Some(json!([])));
        assert_eq!(sent[2].id, sent[0].id);
        assert_eq!(
            sent[3].files,
            [("out.txt".to_string(), b"line 1\r\nline 2".to_vec())]
        );
        let calls = fake.calls();
        let file_call = calls
            .iter()
            .find(|(_, _, b)| b["_files"].is_array())
            .expect("the multipart call");
        assert_eq!(file_call.2["_files"][0]["name"], "files[0]");
        assert_eq!(file_call.2["content"], "log");
        assert!(
            calls
                .iter()
                .any(|(m, p, _)| m == "POST" && p == "/api/v10/channels/555/typing")
        );
        assert_eq!(
            fake.message(sent[0].id).expect("kept")["content"],
            "Allowed."
        );
    }

    #[test]
    fn pins_and_edits_that_keep_their_buttons() {
        let fake = FakeDiscord::start(TOKEN);
        let row = |ids: &[&str]| {
            let buttons: Vec<Value> = ids
                .iter()
                .map(|id| json!({ "type": 2, "style": 2, "label": id, "custom_id": id }))
                .collect();
            json!([{ "type": 1, "components": buttons }])
        };
        let user = fake.send_as_user(555, 42, "ann", "hi");
        runtime().block_on(async {
            let (status, board) = json_call(
                &fake,
                "POST",
                "/api/v10/channels/555/messages",
                json!({ "content": "Board: idle", "components": row(&["board:stop"]) }),
            )
            .await;
            assert_eq!(status, 200, "{board}");
            let id: u64 = board["id"].as_str().and_then(parse_id).expect("id");
            let pin = format!("/api/v10/channels/555/pins/{id}");
            for _ in 0..2 {
                let (status, body) = json_call(&fake, "PUT", &pin, Value::Null).await;
                assert_eq!((status, body), (204, Value::Null));
            }
            assert_eq!(fake.pinned(555), [id], "pinned once");
            assert_eq!(fake.message(id).expect("kept")["pinned"], true);
            let newer = format!("/api/v10/channels/555/messages/pins/{user}");
            assert_eq!(json_call(&fake, "PUT", &newer, Value::Null).await.0, 204);
            assert_eq!(fake.pinned(555), [id, user]);
            let unknown = (404, error_body(10008, "Unknown Message"));
            let elsewhere = format!("/api/v10/channels/556/pins/{id}");
            assert_eq!(json_call(&fake, "PUT", &elsewhere, Value::Null).await, unknown);
            let missing = "/api/v10/channels/555/pins/1";
            assert_eq!(json_call(&fake, "PUT", missing, Value::Null).await, unknown);
            assert_eq!(json_call(&fake, "DELETE", missing, Value::Null).await, unknown);

            // An edit with new buttons.
            let (status, edited) = json_call(
                &fake,
                "PATCH",
                &format!("/api/v10/channels/555/messages/{id}"),
                json!({ "content": "Board: busy", "components": row(&["board:stop", "board:log"]) }),
            )
            .await;
            assert_eq!(status, 200, "{edited}");
            assert_eq!(edited["components"], row(&["board:stop", "board:log"]));
            assert_eq!(edited["pinned"], true);

            let (status, _) = json_call(&fake, "DELETE", &newer, Value::Null).await;
            assert_eq!(status, 204);
            assert_eq!(fake.pinned(555), [id]);
            assert_eq!(json_call(&fake, "DELETE", &pin, Value::Null).await.0, 204);
            assert!(fake.pinned(555).is_empty());
            assert_eq!(fake.message(id).expect("kept")["pinned"], false);

            // A deleted message is no longer pinned; a channel the bot lost refuses.
            assert_eq!(json_call(&fake, "PUT", &pin, Value::Null).await.0, 204);
            let message = format!("/api/v10/channels/555/messages/{id}");
            assert_eq!(json_call(&fake, "DELETE", &message, Value::Null).await.0, 204);
            assert!(fake.pinned(555).is_empty());
            fake.forbid_channel(555);
            let (status, e) = json_call(&fake, "PUT", &newer, Value::Null).await;
            assert_eq!((status, &e["code"]), (403, &json!(50001)));
        });
        let sent = fake.sent();
        let edit = sent.iter().find(|s| s.kind == "edit").expect("the edit");
        assert_eq!(edit.content, "Board: busy");
        assert_eq!(edit.components, Some(row(&["board:stop", "board:log"])));
        let pins = fake
            .calls()
            .into_iter()
            .filter(|(_, p, _)| p.contains("/pins/"))
            .count();
        assert_eq!(pins, 10);
    }

    #[test]
    fn rate_limits_are_injected_and_tokens_checked() {
        let fake = FakeDiscord::start(TOKEN);
        fake.fail_next("/messages", 429, rate_limit_body(0.5));
        runtime().block_on(async {
            let body = json!({ "content": "hi" }).to_string().into_bytes();
            let path = "/api/v10/channels/9/messages";
            let (status, reply, retry) =
                request(&fake, "POST", path, "application/json", body.clone()).await;
            assert_eq!(status, 429);
            assert_eq!(reply["retry_after"], 0.5);
            assert_eq!(reply["message"], "You are being rate limited.");
            assert_eq!(retry.as_deref(), Some("1"));
            let (status, reply, _) = request(&fake, "POST", path, "application/json", body).await;
            assert_eq!(status, 200, "{reply}");

            // A wrong token.
            let stream = TcpStream::connect(fake.addr()).await.expect("connect");
            let (mut sender, conn) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                    .await
                    .expect("handshake");
            tokio::spawn(conn);
            let req = Request::get("/api/v10/users/@me")
                .header(HOST, fake.addr().to_string())
                .header(AUTHORIZATION, "Bot wrong")
                .body(Full::new(Bytes::new()))
                .expect("request");
            let response = sender.send_request(req).await.expect("send");
            assert_eq!(response.status(), 401);
        });
        assert_eq!(fake.calls().len(), 3, "every attempt is recorded");
        assert_eq!(fake.sent().len(), 1);
        let sent = fake.wait_sent("the retried message", |s| !s.is_empty());
        assert_eq!(sent[0].content, "hi");
        assert_eq!(sent[0].channel_id, 9);
    }

    #[test]
    fn history_is_served_newest_first_and_users_write_live_only_to_ready_sessions() {
        let fake = FakeDiscord::start(TOKEN);
        // Written while no gateway is connected: only in the history.
        let ids: Vec<u64> = (0..5)
            .map(|i| fake.send_as_user(777, 42, "ann", &format!("m{i}")))
            .collect();
        fake.send_as_user(888, 43, "bob", "elsewhere");
        runtime().block_on(async {
            let (status, bot) = json_call(
                &fake,
                "POST",
                "/api/v10/channels/777/messages",
                json!({ "content": "from the bot" }),
            )
            .await;
            assert_eq!(status, 200, "{bot}");
            let contents = |v: &Value| -> Vec<String> {
                v.as_array()
                    .expect("an array")
                    .iter()
                    .map(|m| m["content"].as_str().unwrap_or_default().to_string())
                    .collect()
            };
            let path = |q: &str| format!("/api/v10/channels/777/messages?{q}");
            let (status, page) = json_call(
                &fake,
                "GET",
                &path(&format!("after={}&limit=2", ids[0])),
                Value::Null,
            )
            .await;
            assert_eq!(status, 200, "{page}");
            // The two right after the id, newest first.
            assert_eq!(contents(&page), ["m2", "m1"]);
            let (_, page) = json_call(
                &fake,
                "GET",
                &path(&format!("after={}", ids[2])),
                Value::Null,
            )
            .await;
            assert_eq!(contents(&page), ["from the bot", "m4", "m3"]);
            let (_, page) = json_call(&fake, "GET", &path("limit=2"), Value::Null).await;
            assert_eq!(contents(&page), ["from the bot", "m4"]);
            let (_, page) = json_call(
                &fake,
                "GET",
                &path(&format!("before={}", ids[2])),
                Value::Null,
            )
            .await;
            assert_eq!(contents(&page), ["m1", "m0"]);
            let (status, e) = json_call(&fake, "GET", &path("limit=101"), Value::Null).await;
            assert_eq!((status, &e["code"]), (400, &json!(50035)));
            let (status, e) = json_call(&fake, "GET", &path("after=x"), Value::Null).await;
            assert_eq!((status, &e["code"]), (400, &json!(50035)));

            let (status, dm) = json_call(&fake, "GET", "/api/v10/channels/777", Value::Null).await;
            assert_eq!((status, &dm["type"]), (200, &json!(1)));
            assert_eq!(dm["recipients"][0]["id"], "42");

            // Nothing was kept for a gateway that was not there.
            let mut ws = connect(&fake).await;
            assert!(fake.wait_ready(Duration::from_secs(2)));
            let live = fake.send_as_user_in_guild(99, 666, 42, "ann", "live");
            let event = next_json(&mut ws).await;
            assert_eq!(event["t"], "MESSAGE_CREATE");
            assert_eq!(event["d"]["id"], live.to_string());
            assert_eq!(event["d"]["guild_id"], "99");
            let (_, channel) = json_call(&fake, "GET", "/api/v10/channels/666", Value::Null).await;
            assert_eq!(
                (&channel["type"], &channel["guild_id"]),
                (&json!(0), &json!("99"))
            );
        });
        assert_eq!(
            fake.history(777)
                .iter()
                .map(|m| m["content"].as_str().unwrap_or_default().to_string())
                .collect::<Vec<_>>(),
            ["m0", "m1", "m2", "m3", "m4", "from the bot"]
        );
    }

    #[test]
    fn a_forbidden_channel_answers_403_missing_access() {
        let fake = FakeDiscord::start(TOKEN);
        fake.forbid_channel(13);
        runtime().block_on(async {
            let send = json!({ "content": "hi" });
            let (status, e) =
                json_call(&fake, "POST", "/api/v10/channels/13/messages", send.clone()).await;
            assert_eq!(
                (status, e),
                (403, json!({ "message": "Missing Access", "code": 50001 }))
            );
            let (status, _) =
                json_call(&fake, "GET", "/api/v10/channels/13/messages", Value::Null).await;
            assert_eq!(status, 403);
            let (status, _) = json_call(&fake, "POST", "/api/v10/channels/14/messages", send).await;
            assert_eq!(status, 200, "other channels are not affected");
        });
        assert_eq!(fake.sent().len(), 1);
        assert_eq!(fake.sent()[0].channel_id, 14);
    }
}
