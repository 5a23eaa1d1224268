//! A fake Slack on `127.0.0.1`, so the gateway's Slack adapter can be tested offline: the Web
//! API calls a bot makes and a Socket Mode connection. The test pushes events (a user writes,
//! shares a file, presses a button), the client receives them in envelopes over a real
//! websocket and must acknowledge them; every call, message, upload and acknowledgement is
//! recorded.
//!
//! What it emulates (from Slack's API docs):
//! * `POST /api/{method}` ([`FakeSlack::url`] is the base) with a JSON or form body (form values
//!   are strings; `blocks` and `files` in a form are JSON text) and `Authorization: Bearer …`
//!   (or a `token` field). Errors come as HTTP 200 `{"ok":false,"error":…}`: `invalid_auth`,
//!   `not_allowed_token_type` (the app token where the bot token belongs, or the other way
//!   round), `unknown_method`. [`FakeSlack::fail_next`] injects a failure (a 429 `ratelimited`
//!   with `Retry-After`).
//! * `auth.test`; `apps.connections.open` (the app token) → a single-use
//!   `ws://127.0.0.1:WSPORT/link/?ticket=N`; `chat.postMessage`, `chat.update`, `chat.delete`
//!   (text up to [`TEXT_LIMIT`] characters, Block Kit blocks checked against Slack's limits →
//!   `invalid_blocks`, `thread_ts` must name a message of the channel, only the bot's own
//!   messages can be edited or deleted, a [`FakeSlack::kick`]ed channel answers
//!   `not_in_channel`); `reactions.add` / `reactions.remove`; `pins.add` / `pins.remove`
//!   (`channel` and `timestamp` of a message of the channel, the users' too, else
//!   `message_not_found`; `already_pinned`, `no_pin`, `not_in_channel` for a kicked channel; a
//!   deleted message is no longer pinned; see [`FakeSlack::pinned`]).
//! * Uploads in three steps: `files.getUploadURLExternal` → `POST /upload/{file_id}` (raw bytes
//!   or `multipart/form-data` with a `file` part, exactly the declared length) →
//!   `files.completeUploadExternal` (each file once).
//! * Files users share ([`FakeSlack::put_file`]): `url_private` downloads only with the bot
//!   token; without it Slack answers a redirect to its login page.
//! * Socket Mode: `hello` on connect, then `events_api`, `interactive` and `slash_commands`
//!   envelopes to the newest live connection (or the next one to connect). An `events_api`
//!   envelope not acknowledged within [`ACK_DEADLINE`] is pushed again with a new
//!   `envelope_id`, `retry_attempt` + 1 and `retry_reason: "timeout"`, up to [`MAX_PUSHES`]
//!   pushes in all; interactive ones are not. `disconnect` messages ([`FakeSlack::refresh`],
//!   [`FakeSlack::link_disabled`]), dropped connections, a websocket ping every 5 s.
//!
//! Like the other fakes, the API is synchronous: the servers run on their own thread with a
//! single-threaded tokio runtime and stop when the [`FakeSlack`] is dropped.

use std::collections::{HashMap, HashSet, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, LOCATION, RETRY_AFTER};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::handshake::server::{
    Request as WsRequest, Response as WsResponse,
};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

/// An app-level token (Socket Mode's `connections:write`), of the shape Slack hands out.
pub const APP_TOKEN: &str = "xapp-1-A0FAKEAPP01-1000000000001-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
/// The bot token (`xoxb-…`), for every other method.
pub const BOT_TOKEN: &str = "xoxb-1000000000-2000000000000-FakeSlackBotTokenForTests";
pub const TEAM: &str = "T0FAKETEAM";
pub const APP_ID: &str = "A0FAKEAPP01";
/// The bot's user id (what a mention of the bot carries) and its bot id.
pub const BOT_USER: &str = "U0FAKEBOT";
pub const BOT_ID: &str = "B0FAKEBOT";
/// An `events_api` envelope not acknowledged within this is pushed again.
pub const ACK_DEADLINE: Duration = Duration::from_secs(3);
/// How many times an event is pushed at most (the first push included).
pub const MAX_PUSHES: u32 = 3;
/// Slack's limits, in characters: a message's `text`, a section's text, a button's label, a
/// button's value.
pub const TEXT_LIMIT: usize = 40_000;
pub const SECTION_LIMIT: usize = 3_000;
pub const BUTTON_TEXT_LIMIT: usize = 75;
pub const VALUE_LIMIT: usize = 2_000;
/// Blocks in a message, elements in an actions block.
pub const MAX_BLOCKS: usize = 50;
pub const MAX_ACTIONS: usize = 25;

/// The block types a message may carry.
const BLOCK_TYPES: &str = "section actions context divider header markdown image rich_text";
/// How often the fake pings each connection.
const PING_EVERY: Duration = Duration::from_secs(5);

/// A Web API call, as received.
#[derive(Clone, Debug)]
pub struct Call {
    /// `chat.postMessage`, … (`response_url` for a POST to a `response_url`).
    pub method: String,
    /// The body as a JSON object (form fields as strings).
    pub body: Value,
}

/// A message the bot posted, updated or deleted.
#[derive(Clone, Debug, PartialEq)]
pub struct Sent {
    /// `"post"`, `"update"` or `"delete"`.
    pub kind: String,
    pub channel: String,
    pub ts: String,
    /// The thread it is in; empty if none.
    pub thread_ts: String,
    pub text: String,
    /// The blocks as sent (`Null` if none).
    pub blocks: Value,
}

impl Sent {
    /// What the message shows: its text and the text of its section, markdown, context and
    /// header blocks, line by line, with Slack's `&lt;` `&gt;` `&amp;` turned back.
    pub fn shown(&self) -> String {
        fn text_of(v: &Value) -> Option<String> {
            v["text"]
                .as_str()
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        }
        let mut out: Vec<String> = Vec::new();
        if !self.text.is_empty() {
            out.push(self.text.clone());
        }
        for b in self.blocks.as_array().into_iter().flatten() {
            match b["type"].as_str().unwrap_or_default() {
                "section" => {
                    out.extend(text_of(&b["text"]));
                    let fields = b["fields"].as_array().into_iter().flatten();
                    out.extend(fields.filter_map(text_of));
                }
                "header" => out.extend(text_of(&b["text"])),
                "markdown" => out.extend(text_of(b)),
                "context" => {
                    let elements = b["elements"].as_array().into_iter().flatten();
                    out.extend(elements.filter_map(text_of));
                }
                _ => {}
            }
        }
        out.join("\n")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&")
    }

    /// The buttons (in actions blocks and section accessories): (label, value, action_id).
    pub fn buttons(&self) -> Vec<(String, String, String)> {
        let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
        buttons(&self.blocks)
            .into_iter()
            .map(|(_, b)| (s(&b["text"]["text"]), s(&b["value"]), s(&b["action_id"])))
            .collect()
    }
}

/// A file the bot uploaded (`files.completeUploadExternal`).
#[derive(Clone, Debug, PartialEq)]
pub struct Upload {
    pub file_id: String,
    pub filename: String,
    pub title: String,
    /// `channel_id`, `thread_ts` and `initial_comment` of the completion (empty if none).
    pub channel: String,
    pub thread_ts: String,
    pub initial_comment: String,
    pub data: Vec<u8>,
}

/// An acknowledgement of a pushed envelope.
#[derive(Clone, Debug)]
pub struct Ack {
    /// The push number ([`FakeSlack::push_event`] and friends).
    pub event: usize,
    /// Which push of it (0 = the first).
    pub push: u32,
    pub envelope_id: String,
    /// From sending the envelope to receiving this.
    pub latency: Duration,
    /// The connection it came on (1 = the first).
    pub connection: u64,
    /// The `payload` it carried (`Null` if none).
    pub payload: Value,
}

/// What a connection is told to do.
enum Out {
    Text(String),
    /// Send a close frame after this long.
    CloseAfter(Duration),
    /// Send a close frame now.
    Close,
    /// Drop the TCP connection without a close frame.
    Drop,
}

/// A message of a channel: the bot's (`user` is [`BOT_USER`]) or a user's.
struct Msg {
    user: String,
    text: String,
    blocks: Value,
    thread_ts: String,
}

struct Pushed {
    /// `events_api`, `interactive`, `slash_commands`, or `raw` (sent as it is).
    kind: &'static str,
    payload: Value,
    pushes: u32,
    last_push: Option<Instant>,
    acked: bool,
}

struct Envelope {
    event: usize,
    push: u32,
    at: Instant,
}

struct Failure {
    method: String,
    status: u16,
    error: String,
    retry_after: Option<u64>,
}

/// A file announced by `files.getUploadURLExternal`.
struct Pending {
    filename: String,
    length: usize,
    data: Option<Vec<u8>>,
    completed: bool,
}

#[derive(Default)]
struct State {
    /// `127.0.0.1:PORT` of the HTTP server and of the websocket one.
    addr: String,
    ws_addr: String,
    next_id: u64,
    opens: usize,
    /// Tickets handed out: used or not.
    tickets: HashMap<String, bool>,
    /// Connections accepted, dials refused, and the live connections: (number, sender).
    connections: u64,
    refused: usize,
    live: Vec<(u64, mpsc::UnboundedSender<Out>)>,
    calls: Vec<Call>,
    sent: Vec<Sent>,
    uploads: Vec<Upload>,
    acks: Vec<Ack>,
    late_acks: Vec<Ack>,
    unknown_acks: Vec<String>,
    failures: VecDeque<Failure>,
    kicked: HashSet<String>,
    /// (channel, ts) → the message as it is now.
    messages: HashMap<(String, String), Msg>,
    reactions: HashMap<(String, String), Vec<String>>,
    /// Pinned messages of each channel (their ts), in the order they were pinned.
    pins: HashMap<String, Vec<String>>,
    pending: HashMap<String, Pending>,
    /// Files users shared: URL path → (bytes, mimetype).
    files: HashMap<String, (Vec<u8>, String)>,
    file_downloads: Vec<(String, String)>,
    pushed: Vec<Pushed>,
    envelopes: HashMap<String, Envelope>,
}

impl State {
    fn next(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// A new message timestamp, unique and increasing.
    fn next_ts(&mut self) -> String {
        format!("1700000000.{:06}", self.next())
    }
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

/// A running fake Slack. Dropping it stops both servers.
pub struct FakeSlack {
    addr: std::net::SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Something shaped like a UUID, unique per `(kind, n)`.
fn uuidish(kind: u32, n: u64) -> String {
    format!("{kind:08x}-0000-4000-8000-{n:012x}")
}

/// The `channel_type` of a message event in `channel`.
fn channel_type(channel: &str) -> &'static str {
    match channel.chars().next() {
        Some('D') => "im",
        Some('G') => "group",
        _ => "channel",
    }
}

/// `[gateway.slack]` for this fake, with `more` lines in the section; the tokens come from
/// `TEST_SLACK_APP_TOKEN` and `TEST_SLACK_BOT_TOKEN`, which [`gateway`] sets.
pub fn gateway_config(fs: &FakeSlack, more: &str) -> String {
    format!(
        "\n[gateway.slack]\napp_token = \"${{TEST_SLACK_APP_TOKEN}}\"\nbot_token = \"${{TEST_SLACK_BOT_TOKEN}}\"\napi_url = \"{}\"\n{more}",
        fs.url()
    )
}

/// Starts the real gateway of `h` (configured with [`gateway_config`]) and waits until it
/// holds a Socket Mode connection.
pub fn gateway(h: &crate::Harness, fs: &FakeSlack) -> std::process::Child {
    let g = h.gateway(
        &[],
        &[
            ("TEST_SLACK_APP_TOKEN", APP_TOKEN),
            ("TEST_SLACK_BOT_TOKEN", BOT_TOKEN),
        ],
    );
    assert!(
        fs.wait_until(Duration::from_secs(30), |f| f.connections().1 > 0),
        "the gateway opens a Socket Mode connection; its log:\n{}",
        h.gateway_log()
    );
    g
}

/// The buttons of `blocks` (actions elements and section accessories), with their block ids.
fn buttons(blocks: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (i, b) in blocks.as_array().into_iter().flatten().enumerate() {
        let id = b["block_id"]
            .as_str()
            .map_or_else(|| format!("blk{i}"), str::to_string);
        let candidates: Vec<&Value> = match b["type"].as_str() {
            Some("actions") => b["elements"].as_array().into_iter().flatten().collect(),
            Some("section") => vec![&b["accessory"]],
            _ => Vec::new(),
        };
        for e in candidates {
            if e["type"] == "button" {
                out.push((id.clone(), e.clone()));
            }
        }
    }
    out
}

/// A `block_actions` envelope for the button labelled `label` on `message` (panics when the
/// message shows none: Slack sends no action for it).
fn press_on(
    st: &mut State,
    channel: &str,
    user: &str,
    message: Value,
    thread_ts: &str,
    label: &str,
) -> usize {
    let ts = message["ts"].as_str().unwrap_or_default().to_string();
    let found = buttons(&message["blocks"]).into_iter().find(|(_, b)| {
        b["text"]["text"]
            .as_str()
            .is_some_and(|t| t.contains(label))
    });
    let Some((block_id, button)) = found else {
        panic!(
            "no button {label:?} on message {ts}; its blocks: {:#}",
            message["blocks"]
        );
    };
    let n = st.pushed.len();
    let action_ts = format!("{}.{:06}", now_secs(), st.next());
    let mut container = json!({
        "type": "message", "message_ts": ts, "channel_id": channel,
        "is_ephemeral": false,
    });
    if !thread_ts.is_empty() {
        container["thread_ts"] = json!(thread_ts);
    }
    let payload = json!({
        "type": "block_actions",
        "team": { "id": TEAM, "domain": "fake" },
        "user": { "id": user, "username": user, "name": user, "team_id": TEAM },
        "api_app_id": APP_ID, "token": "fake",
        "trigger_id": format!("T{n:010}.fake"),
        "container": container,
        "channel": { "id": channel, "name": "fake" },
        "message": message,
        "state": { "values": {} },
        "response_url": format!("http://{}/response/{n}", st.addr),
        "actions": [{
            "type": "button", "action_id": button["action_id"], "block_id": block_id,
            "text": button["text"], "value": button["value"], "action_ts": action_ts,
        }],
    });
    push(st, "interactive", payload)
}

/// Getters that clone a record of the state: `name: Type` → `fn name(&self) -> Vec<Type>`.
macro_rules! records {
    ($($(#[$doc:meta])* $name:ident: $t:ty,)*) => {$(
        $(#[$doc])*
        pub fn $name(&self) -> Vec<$t> {
            self.shared.lock().$name.clone()
        }
    )*};
}

impl FakeSlack {
    /// Starts the fake on two ephemeral ports of 127.0.0.1 (HTTP and websocket); both are
    /// bound before this returns.
    pub fn start() -> FakeSlack {
        let bind = || {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the fake Slack");
            l.set_nonblocking(true).expect("non-blocking socket");
            l
        };
        let (http, ws) = (bind(), bind());
        let addr = http.local_addr().expect("HTTP address");
        let ws_addr = ws.local_addr().expect("websocket address");
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                addr: addr.to_string(),
                ws_addr: ws_addr.to_string(),
                ..State::default()
            }),
        });
        let (shutdown, stopped) = oneshot::channel();
        let thread_shared = Arc::clone(&shared);
        let thread = crate::fake_thread("fake-slack", move || {
            serve(http, ws, thread_shared, stopped)
        });
        FakeSlack {
            addr,
            shared,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    /// The Web API base, `http://127.0.0.1:PORT/api` (the gateway's `api_url`).
    pub fn url(&self) -> String {
        format!("http://{}/api", self.addr)
    }

    /// Stores a file a user shares and returns its Slack file object; `url_private` downloads
    /// it with the bot token.
    pub fn put_file(&self, name: &str, data: &[u8], mimetype: &str) -> Value {
        let mut st = self.shared.lock();
        let id = format!("F1US{:07}", st.next());
        let path = format!("/files-pri/{TEAM}-{id}/{}", encode(name));
        let url = format!("http://{}{path}", st.addr);
        st.files.insert(path, (data.to_vec(), mimetype.to_string()));
        let filetype = name
            .rsplit_once('.')
            .map_or("binary".to_string(), |(_, ext)| ext.to_ascii_lowercase());
        let mut file = json!({
            "id": id, "created": now_secs(), "timestamp": now_secs(), "name": name,
            "title": name, "mimetype": mimetype, "filetype": filetype, "user_team": TEAM,
            "mode": "hosted", "is_external": false, "size": data.len(),
            "url_private": url, "url_private_download": url,
        });
        if mimetype.starts_with("audio/") {
            file["subtype"] = json!("slack_audio");
        }
        file
    }

    /// A user writes `text` in `channel`; returns the push number and the message's ts.
    pub fn push_message(&self, channel: &str, user: &str, text: &str) -> (usize, String) {
        self.push_user_message(channel, "", user, text, None)
    }

    /// A user writes `text` in the thread `thread_ts` heads.
    pub fn push_thread_message(
        &self,
        channel: &str,
        thread_ts: &str,
        user: &str,
        text: &str,
    ) -> (usize, String) {
        self.push_user_message(channel, thread_ts, user, text, None)
    }

    /// A user shares a file (`subtype: file_share`) with `text`.
    pub fn push_file(
        &self,
        channel: &str,
        user: &str,
        text: &str,
        name: &str,
        data: &[u8],
        mimetype: &str,
    ) -> (usize, String) {
        let file = self.put_file(name, data, mimetype);
        self.push_user_message(channel, "", user, text, Some(file))
    }

    fn push_user_message(
        &self,
        channel: &str,
        thread_ts: &str,
        user: &str,
        text: &str,
        file: Option<Value>,
    ) -> (usize, String) {
        let mut st = self.shared.lock();
        let ts = st.next_ts();
        let msg = Msg {
            user: user.to_string(),
            text: text.to_string(),
            blocks: Value::Null,
            thread_ts: thread_ts.to_string(),
        };
        st.messages.insert((channel.to_string(), ts.clone()), msg);
        let n = st.pushed.len() as u64;
        let mut event = json!({
            "type": "message", "channel": channel, "channel_type": channel_type(channel),
            "user": user, "team": TEAM, "text": text, "ts": ts, "event_ts": ts,
            "client_msg_id": uuidish(0xc11e47, n),
        });
        if !thread_ts.is_empty() {
            event["thread_ts"] = json!(thread_ts);
        }
        if let Some(f) = file {
            event["subtype"] = json!("file_share");
            event["files"] = json!([f]);
        }
        let payload = json!({
            "token": "fake", "team_id": TEAM, "api_app_id": APP_ID, "type": "event_callback",
            "event_id": format!("Ev0FAKE{n:06}"), "event_time": now_secs(), "event": event,
            "authorizations": [{ "team_id": TEAM, "user_id": BOT_USER, "is_bot": true }],
        });
        (push(&mut st, "events_api", payload), ts)
    }

    /// Pushes an `events_api` envelope with this payload; returns its push number.
    pub fn push_event(&self, payload: Value) -> usize {
        push(&mut self.shared.lock(), "events_api", payload)
    }

    /// Pushes an `interactive` envelope with this payload.
    pub fn push_interactive(&self, payload: Value) -> usize {
        push(&mut self.shared.lock(), "interactive", payload)
    }

    /// Sends `envelope` as a text frame as it is (never again; no acknowledgement expected).
    pub fn push_raw(&self, envelope: Value) -> usize {
        push(&mut self.shared.lock(), "raw", envelope)
    }

    /// `user` presses the button whose label contains `label` on the bot's message
    /// `message_ts` in `channel` (as it is now): a `block_actions` interactive envelope.
    /// Panics if the message shows no such button: Slack sends no action for it.
    pub fn press(&self, channel: &str, user: &str, message_ts: &str, label: &str) -> usize {
        let mut st = self.shared.lock();
        let key = (channel.to_string(), message_ts.to_string());
        let shown = st
            .messages
            .get(&key)
            .filter(|m| m.user == BOT_USER)
            .map(|m| (message_json(message_ts, m), m.thread_ts.clone()));
        let Some((message, thread_ts)) = shown else {
            drop(st);
            panic!("no message of the bot with ts {message_ts} in {channel}");
        };
        press_on(&mut st, channel, user, message, &thread_ts, label)
    }

    /// `user` presses a button on `version`, a message as it was sent or updated earlier: a
    /// phone that has not yet shown the update that took the button away (a double tap, a late
    /// press). Slack sends the action as the client shows it.
    pub fn press_shown(&self, user: &str, version: &Sent, label: &str) -> usize {
        let mut st = self.shared.lock();
        let message = json!({
            "type": "message", "ts": version.ts, "text": version.text, "blocks": version.blocks,
            "user": BOT_USER, "bot_id": BOT_ID, "team": TEAM,
        });
        press_on(
            &mut st,
            &version.channel,
            user,
            message,
            &version.thread_ts,
            label,
        )
    }

    /// The next call of `method` answers HTTP `status` with `{"ok":false,"error":error}`
    /// (and a `Retry-After` header, when given).
    pub fn fail_next(&self, method: &str, status: u16, error: &str, retry_after: Option<u64>) {
        self.shared.lock().failures.push_back(Failure {
            method: method.to_string(),
            status,
            error: error.to_string(),
            retry_after,
        });
    }

    /// The bot is removed from `channel`: posts there answer `not_in_channel`.
    pub fn kick(&self, channel: &str) {
        self.shared.lock().kicked.insert(channel.to_string());
    }

    pub fn unkick(&self, channel: &str) {
        self.shared.lock().kicked.remove(channel);
    }

    /// Tells every live connection it will be refreshed (`disconnect` `warning`, then
    /// `refresh_requested`) and closes them after `grace`.
    pub fn refresh(&self, grace: Duration) {
        let mut st = self.shared.lock();
        st.live.retain(|(_, tx)| !tx.is_closed());
        for (_, tx) in &st.live {
            let _ = tx.send(Out::Text(disconnect("warning")));
            let _ = tx.send(Out::Text(disconnect("refresh_requested")));
            let _ = tx.send(Out::CloseAfter(grace));
        }
    }

    /// The app's Socket Mode is turned off: `disconnect` `link_disabled`, then a close frame.
    pub fn link_disabled(&self) {
        let mut st = self.shared.lock();
        for (_, tx) in st.live.drain(..) {
            let _ = tx.send(Out::Text(disconnect("link_disabled")));
            let _ = tx.send(Out::Close);
        }
    }

    /// Drops every live connection (no close frame, as a network failure would).
    pub fn drop_connections(&self) {
        let mut st = self.shared.lock();
        for (_, tx) in st.live.drain(..) {
            let _ = tx.send(Out::Drop);
        }
    }

    /// Websocket connections accepted so far (with a valid ticket), and the live ones now.
    pub fn connections(&self) -> (u64, usize) {
        let mut st = self.shared.lock();
        st.live.retain(|(_, tx)| !tx.is_closed());
        (st.connections, st.live.len())
    }

    /// Socket Mode URLs handed out so far (successful `apps.connections.open` calls).
    pub fn opens(&self) -> usize {
        self.shared.lock().opens
    }

    /// Dials refused (a ticket unknown or already used).
    pub fn refused(&self) -> usize {
        self.shared.lock().refused
    }

    records! {
        calls: Call,
        sent: Sent,
        uploads: Upload,
        acks: Ack,
        /// Acknowledgements that came after [`ACK_DEADLINE`].
        late_acks: Ack,
        /// Frames from the client that acknowledge no envelope sent (as received).
        unknown_acks: String,
        /// Every request of a shared file: (path, the `Authorization` header it came with).
        file_downloads: (String, String),
    }

    /// The latest version of the bot's message `ts` in `channel` (`None` if it was deleted).
    pub fn message(&self, channel: &str, ts: &str) -> Option<Sent> {
        let st = self.shared.lock();
        let last = st
            .sent
            .iter()
            .rev()
            .find(|s| s.channel == channel && s.ts == ts)?;
        (last.kind != "delete").then(|| last.clone())
    }

    /// The reactions on message `ts` of `channel`, in the order they were added.
    pub fn reactions(&self, channel: &str, ts: &str) -> Vec<String> {
        let key = (channel.to_string(), ts.to_string());
        self.shared
            .lock()
            .reactions
            .get(&key)
            .cloned()
            .unwrap_or_default()
    }

    /// The ts of the messages pinned in `channel` now, in the order they were pinned (the
    /// last one pinned last).
    pub fn pinned(&self, channel: &str) -> Vec<String> {
        self.shared
            .lock()
            .pins
            .get(channel)
            .cloned()
            .unwrap_or_default()
    }

    /// The acknowledgements of push `event`.
    pub fn acks_of(&self, event: usize) -> Vec<Ack> {
        self.acks()
            .into_iter()
            .filter(|a| a.event == event)
            .collect()
    }

    /// How many times push `event` was sent.
    pub fn pushes_of(&self, event: usize) -> u32 {
        self.shared.lock().pushed.get(event).map_or(0, |p| p.pushes)
    }

    /// Polls `pred` until it holds (true) or `timeout` passes (false).
    pub fn wait_until(&self, timeout: Duration, pred: impl Fn(&FakeSlack) -> bool) -> bool {
        crate::poll_until(timeout, || pred(self))
    }

    /// Waits until [`FakeSlack::sent`] satisfies `pred` and returns it; panics after 20 s
    /// with what was sent.
    pub fn wait_sent(&self, what: &str, pred: impl Fn(&[Sent]) -> bool) -> Vec<Sent> {
        crate::wait_records(what, || self.sent(), pred)
    }
}

impl Drop for FakeSlack {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn disconnect(reason: &str) -> String {
    json!({ "type": "disconnect", "reason": reason, "debug_info": { "host": "fake-1" } })
        .to_string()
}

/// A message as Slack shows it (`chat.postMessage`'s `message`, an action's `message`).
fn message_json(ts: &str, m: &Msg) -> Value {
    let mut v =
        json!({ "type": "message", "user": m.user, "text": m.text, "ts": ts, "team": TEAM });
    if m.user == BOT_USER {
        v["bot_id"] = json!(BOT_ID);
        v["app_id"] = json!(APP_ID);
    }
    if !m.blocks.is_null() {
        v["blocks"] = m.blocks.clone();
    }
    if !m.thread_ts.is_empty() {
        v["thread_ts"] = json!(m.thread_ts);
    }
    v
}

/// Queues a push and sends it if a connection is live.
fn push(st: &mut State, kind: &'static str, payload: Value) -> usize {
    st.pushed.push(Pushed {
        kind,
        payload,
        pushes: 0,
        last_push: None,
        acked: false,
    });
    let n = st.pushed.len() - 1;
    deliver(st, n);
    n
}

/// Sends push `n` to the newest live connection, if there is one.
fn deliver(st: &mut State, n: usize) {
    st.live.retain(|(_, tx)| !tx.is_closed());
    let Some(tx) = st.live.last().map(|(_, tx)| tx.clone()) else {
        return;
    };
    let serial = st.next();
    let Some(p) = st.pushed.get_mut(n) else {
        return;
    };
    let push = p.pushes;
    let id = uuidish(0xe0e1_0000 + push, serial);
    let text = if p.kind == "raw" {
        p.payload.to_string()
    } else {
        json!({
            "envelope_id": id, "type": p.kind, "accepts_response_payload": false,
            "retry_attempt": push, "retry_reason": if push == 0 { "" } else { "timeout" },
            "payload": p.payload,
        })
        .to_string()
    };
    if tx.send(Out::Text(text)).is_err() {
        return;
    }
    p.pushes += 1;
    p.last_push = Some(Instant::now());
    if p.kind != "raw" {
        let at = Instant::now();
        st.envelopes.insert(id, Envelope { event: n, push, at });
    }
}

/// Sends what waits for a connection, and again the events not acknowledged in time.
fn redeliver(st: &mut State) {
    let due: Vec<usize> = st
        .pushed
        .iter()
        .enumerate()
        .filter(|(_, p)| {
            !p.acked
                && match p.last_push {
                    None => true,
                    Some(t) => {
                        p.kind == "events_api"
                            && p.pushes < MAX_PUSHES
                            && t.elapsed() >= ACK_DEADLINE
                    }
                }
        })
        .map(|(i, _)| i)
        .collect();
    for n in due {
        deliver(st, n);
    }
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
        eprintln!("fake Slack: cannot use the listening sockets");
        return;
    };
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            _ = tick.tick() => redeliver(&mut shared.lock()),
            accepted = http.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let shared = Arc::clone(&shared);
                let service = service_fn(move |req| handle(req, Arc::clone(&shared)));
                crate::spawn_http(stream, service, "fake Slack");
            }
            accepted = ws.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                tokio::spawn(connection(stream, Arc::clone(&shared)));
            }
        }
    }
}

fn close_frame() -> WsMessage {
    WsMessage::Close(Some(CloseFrame {
        code: CloseCode::Normal,
        reason: "".into(),
    }))
}

/// One Socket Mode connection: hello, envelopes out, acknowledgements recorded, a ping every
/// [`PING_EVERY`].
async fn connection(stream: tokio::net::TcpStream, shared: Arc<Shared>) {
    let mut uri = String::new();
    #[allow(clippy::result_large_err)] // the callback's type is tungstenite's
    let callback = |req: &WsRequest, resp: WsResponse| {
        uri = req.uri().to_string();
        Ok(resp)
    };
    let ws = match tokio_tungstenite::accept_hdr_async(stream, callback).await {
        Ok(ws) => ws,
        Err(e) => {
            eprintln!("fake Slack: websocket handshake failed: {e}");
            return;
        }
    };
    let (mut sink, mut source) = ws.split();
    let ticket = uri
        .split_once('?')
        .and_then(|(_, q)| parse_form(q).into_iter().find(|(k, _)| k == "ticket"))
        .map(|(_, v)| v)
        .unwrap_or_default();
    let (tx, mut rx) = mpsc::unbounded_channel::<Out>();
    let registered = {
        let mut st = shared.lock();
        if st.tickets.get(&ticket) == Some(&false) {
            st.tickets.insert(ticket, true);
            st.connections += 1;
            let n = st.connections;
            st.live.retain(|(_, tx)| !tx.is_closed());
            st.live.push((n, tx));
            let live = st.live.len();
            redeliver(&mut st);
            Some((n, live))
        } else {
            st.refused += 1;
            None
        }
    };
    let Some((number, live)) = registered else {
        // An unknown or used ticket: closed at once.
        let _ = sink.send(close_frame()).await;
        return;
    };
    let hello = json!({
        "type": "hello", "num_connections": live,
        "debug_info": { "host": "fake-1", "approximate_connection_time": 18060 },
        "connection_info": { "app_id": APP_ID },
    });
    let mut open = sink.send(WsMessage::Text(hello.to_string())).await.is_ok();
    let start = tokio::time::Instant::now() + PING_EVERY;
    let mut ping = tokio::time::interval_at(start, PING_EVERY);
    let mut close_at: Option<tokio::time::Instant> = None;
    while open {
        let at = close_at;
        let closing = async move {
            match at {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            out = rx.recv() => match out {
                Some(Out::Text(t)) => open = sink.send(WsMessage::Text(t)).await.is_ok(),
                Some(Out::CloseAfter(d)) => close_at = Some(tokio::time::Instant::now() + d),
                Some(Out::Close) => {
                    let _ = sink.send(close_frame()).await;
                    open = false;
                }
                Some(Out::Drop) | None => open = false,
            },
            () = closing => {
                let _ = sink.send(close_frame()).await;
                open = false;
            }
            _ = ping.tick() => open = sink.send(WsMessage::Ping(Vec::new())).await.is_ok(),
            m = source.next() => match m {
                Some(Ok(WsMessage::Text(t))) => on_client_text(&mut shared.lock(), &t, number),
                Some(Ok(WsMessage::Binary(b))) => {
                    on_client_text(&mut shared.lock(), &String::from_utf8_lossy(&b), number);
                }
                Some(Ok(WsMessage::Close(_)) | Err(_)) | None => open = false,
                Some(Ok(_)) => {}
            },
        }
    }
    shared.lock().live.retain(|(n, _)| *n != number);
}

/// Records a frame from the client: the acknowledgement of an envelope, or an unknown one.
fn on_client_text(st: &mut State, text: &str, connection: u64) {
    let frame: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    let id = frame["envelope_id"].as_str().unwrap_or_default();
    let Some(e) = st.envelopes.get(id) else {
        st.unknown_acks.push(text.to_string());
        return;
    };
    let ack = Ack {
        event: e.event,
        push: e.push,
        envelope_id: id.to_string(),
        latency: e.at.elapsed(),
        connection,
        payload: frame["payload"].clone(),
    };
    if let Some(p) = st.pushed.get_mut(ack.event) {
        p.acked = true;
    }
    if ack.latency > ACK_DEADLINE {
        st.late_acks.push(ack.clone());
    }
    st.acks.push(ack);
}

type Body = Full<Bytes>;

fn reply(status: u16, value: &Value) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(value.to_string())));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    response
}

fn plain(status: u16, text: String) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(text)));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    response
}

fn ok(mut v: Value) -> Response<Body> {
    v["ok"] = json!(true);
    reply(200, &v)
}

fn fail(error: &str) -> Response<Body> {
    reply(200, &json!({ "ok": false, "error": error }))
}

/// A field as a string (a number too: form and JSON clients differ).
fn field(body: &Value, key: &str) -> String {
    match &body[key] {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

async fn handle(req: Request<Incoming>, shared: Arc<Shared>) -> Result<Response<Body>, Infallible> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or_default().to_string();
    let header = |name| {
        req.headers()
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let (auth, content_type) = (header(AUTHORIZATION), header(CONTENT_TYPE));
    let bytes = match req.into_body().collect().await {
        Ok(c) => c.to_bytes(),
        Err(e) => return Ok(plain(400, format!("body: {e}"))),
    };
    let mut st = shared.lock();
    if let Some(id) = path.strip_prefix("/upload/") {
        return Ok(receive_upload(&mut st, id, &content_type, &bytes));
    }
    if path.starts_with("/files-pri/") {
        st.file_downloads.push((path.clone(), auth.clone()));
        return Ok(match st.files.get(&path) {
            None => plain(404, "file not found".into()),
            Some(_) if auth.trim() != format!("Bearer {BOT_TOKEN}") => {
                let mut r = plain(302, String::new());
                r.headers_mut()
                    .insert(LOCATION, HeaderValue::from_static("/login"));
                r
            }
            Some((data, mimetype)) => {
                let mut r = plain(200, String::new());
                *r.body_mut() = Full::new(Bytes::from(data.clone()));
                if let Ok(v) = HeaderValue::from_str(mimetype) {
                    r.headers_mut().insert(CONTENT_TYPE, v);
                }
                r
            }
        });
    }
    if path == "/login" {
        let mut r = plain(200, "<html><body>Sign in to Fake Team</body></html>".into());
        r.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("text/html"));
        return Ok(r);
    }
    let body = match parse_body(&content_type, &bytes, &query) {
        Ok(b) => b,
        Err(e) => return Ok(fail(e)),
    };
    if path.starts_with("/response/") && method == Method::POST {
        let method = "response_url".to_string();
        st.calls.push(Call { method, body });
        return Ok(ok(json!({})));
    }
    let Some(api_method) = path.strip_prefix("/api/") else {
        return Ok(plain(404, "not found".into()));
    };
    st.calls.push(Call {
        method: api_method.to_string(),
        body: body.clone(),
    });
    if let Some(i) = st.failures.iter().position(|f| f.method == api_method)
        && let Some(f) = st.failures.remove(i)
    {
        let mut r = reply(f.status, &json!({ "ok": false, "error": f.error }));
        if let Some(secs) = f.retry_after {
            r.headers_mut().insert(RETRY_AFTER, HeaderValue::from(secs));
        }
        return Ok(r);
    }
    let bearer = auth.strip_prefix("Bearer ").map(str::trim);
    let token = bearer.map_or_else(|| field(&body, "token"), str::to_string);
    Ok(api(&mut st, api_method, &body, &token))
}

/// An API call's parameters as a JSON object: a JSON body, or a form (with the query string's).
fn parse_body(content_type: &str, bytes: &[u8], query: &str) -> Result<Value, &'static str> {
    let ct = content_type.to_ascii_lowercase();
    let mut body = if bytes.is_empty() {
        json!({})
    } else if ct.contains("json") {
        serde_json::from_slice::<Value>(bytes)
            .ok()
            .filter(Value::is_object)
            .ok_or("invalid_json")?
    } else if ct.contains("x-www-form-urlencoded") {
        let mut form = serde_json::Map::new();
        for (k, v) in parse_form(&String::from_utf8_lossy(bytes)) {
            let parsed = match k.as_str() {
                "blocks" | "files" => serde_json::from_str(&v).ok(),
                _ => None,
            };
            form.insert(k, parsed.unwrap_or(Value::String(v)));
        }
        Value::Object(form)
    } else {
        return Err("invalid_form_data");
    };
    if let Value::Object(o) = &mut body {
        for (k, v) in parse_form(query) {
            o.entry(k).or_insert(Value::String(v));
        }
    }
    Ok(body)
}

fn api(st: &mut State, method: &str, body: &Value, token: &str) -> Response<Body> {
    const METHODS: &[&str] = &[
        "auth.test",
        "apps.connections.open",
        "chat.postMessage",
        "chat.update",
        "chat.delete",
        "reactions.add",
        "reactions.remove",
        "pins.add",
        "pins.remove",
        "files.getUploadURLExternal",
        "files.completeUploadExternal",
    ];
    if !METHODS.contains(&method) {
        return fail("unknown_method");
    }
    let wanted = if method == "apps.connections.open" {
        APP_TOKEN
    } else {
        BOT_TOKEN
    };
    if token != wanted {
        let known = token == APP_TOKEN || token == BOT_TOKEN;
        return fail(if known {
            "not_allowed_token_type"
        } else {
            "invalid_auth"
        });
    }
    match method {
        "auth.test" => ok(json!({
            "url": "https://fake.slack.com/", "team": "Fake Team", "user": "clibot",
            "team_id": TEAM, "user_id": BOT_USER, "bot_id": BOT_ID, "is_enterprise_install": false,
        })),
        "apps.connections.open" => {
            st.opens += 1;
            let ticket = st.opens.to_string();
            st.tickets.insert(ticket.clone(), false);
            ok(json!({ "url": format!("ws://{}/link/?ticket={ticket}", st.ws_addr) }))
        }
        "chat.postMessage" => write_message(st, body, "post"),
        "chat.update" => write_message(st, body, "update"),
        "chat.delete" => delete(st, body),
        "reactions.add" | "reactions.remove" => react(st, method == "reactions.add", body),
        "pins.add" | "pins.remove" => pin(st, method == "pins.add", body),
        "files.getUploadURLExternal" => upload_url(st, body),
        _ => complete_upload(st, body),
    }
}

/// `text` and `blocks` of a post or an update, or the error that refuses them.
fn content(body: &Value) -> Result<(String, Value), Box<Response<Body>>> {
    let text = field(body, "text");
    let blocks = match &body["blocks"] {
        Value::String(s) if s.is_empty() => Value::Null,
        Value::String(s) => {
            serde_json::from_str(s).map_err(|_| Box::new(fail("invalid_blocks_format")))?
        }
        v => v.clone(),
    };
    let has_blocks = blocks.as_array().is_some_and(|a| !a.is_empty());
    if text.is_empty() && !has_blocks {
        return Err(Box::new(fail("no_text")));
    }
    if text.chars().count() > TEXT_LIMIT {
        return Err(Box::new(fail("msg_too_long")));
    }
    if !blocks.is_null()
        && let Err(why) = check_blocks(&blocks)
    {
        return Err(Box::new(reply(
            200,
            &json!({ "ok": false, "error": "invalid_blocks", "errors": [why],
                     "response_metadata": { "messages": [format!("[ERROR] {why}")] } }),
        )));
    }
    Ok((text, blocks))
}

fn chars(v: &Value) -> usize {
    v.as_str().map_or(0, |s| s.chars().count())
}

/// Block Kit's rules for the blocks a bot sends (the subset a chat bot uses): the first one
/// broken, worded as Slack does (`why [json-pointer:/blocks/…]`).
fn check_blocks(blocks: &Value) -> Result<(), String> {
    let Some(list) = blocks.as_array() else {
        return Err("must be an array [json-pointer:/blocks]".into());
    };
    if list.len() > MAX_BLOCKS {
        return Err(format!(
            "must provide at most {MAX_BLOCKS} items [json-pointer:/blocks]"
        ));
    }
    let mut ids = HashSet::new();
    for (i, b) in list.iter().enumerate() {
        let at = format!("/blocks/{i}");
        let (t, kind) = (&b["text"], b["type"].as_str().unwrap_or_default());
        let elements = b["elements"].as_array().map_or(&[][..], Vec::as_slice);
        let why = if kind == "section" && t.is_null() && b["fields"].is_null() {
            "must provide text or fields".to_string()
        } else if kind == "section"
            && !t.is_null()
            && !matches!(t["type"].as_str(), Some("plain_text" | "mrkdwn"))
        {
            "text.type must be plain_text or mrkdwn".into()
        } else if kind == "section" && chars(&t["text"]) > SECTION_LIMIT {
            format!("text.text must be at most {SECTION_LIMIT} characters")
        } else if kind == "actions" && !(1..=MAX_ACTIONS).contains(&elements.len()) {
            format!("elements must be 1 to {MAX_ACTIONS} items")
        } else if kind == "context" && !(1..=10).contains(&elements.len()) {
            "elements must be 1 to 10 items".into()
        } else if !BLOCK_TYPES.split(' ').any(|t| t == kind) {
            format!("unsupported type {kind:?}")
        } else {
            if kind == "actions" {
                for (j, e) in elements.iter().enumerate() {
                    check_button(e, &format!("{at}/elements/{j}"), &mut ids)?;
                }
            } else if b["accessory"]["type"] == "button" {
                check_button(&b["accessory"], &format!("{at}/accessory"), &mut ids)?;
            }
            continue;
        };
        return Err(format!("{why} [json-pointer:{at}]"));
    }
    Ok(())
}

fn check_button(e: &Value, at: &str, ids: &mut HashSet<String>) -> Result<(), String> {
    let id = e["action_id"].as_str().unwrap_or_default();
    let why = if e["type"] != "button" {
        "must be a button".to_string()
    } else if e["text"]["type"] != "plain_text" {
        "text.type must be plain_text".into()
    } else if !(1..=BUTTON_TEXT_LIMIT).contains(&chars(&e["text"]["text"])) {
        format!("text.text must be 1 to {BUTTON_TEXT_LIMIT} characters")
    } else if chars(&e["value"]) > VALUE_LIMIT {
        format!("value must be at most {VALUE_LIMIT} characters")
    } else if !(1..=255).contains(&id.chars().count()) {
        "action_id must be 1 to 255 characters".into()
    } else if !ids.insert(id.to_string()) {
        format!("action_id {id:?} is used twice")
    } else {
        return Ok(());
    };
    Err(format!("{why} [json-pointer:{at}]"))
}

/// Gives each block a `block_id`, as Slack does for blocks sent without one.
fn with_block_ids(mut blocks: Value) -> Value {
    for (i, b) in blocks.as_array_mut().into_iter().flatten().enumerate() {
        if let Some(o) = b.as_object_mut() {
            o.entry("block_id")
                .or_insert_with(|| json!(format!("blk{i}")));
        }
    }
    blocks
}

/// `chat.postMessage` (`kind` "post") and `chat.update` ("update").
fn write_message(st: &mut State, body: &Value, kind: &str) -> Response<Body> {
    let (channel, ts) = (field(body, "channel"), field(body, "ts"));
    if channel.is_empty() {
        return fail("channel_not_found");
    }
    let thread_ts = if kind == "post" {
        field(body, "thread_ts")
    } else {
        match st.messages.get(&(channel.clone(), ts.clone())) {
            None => return fail("message_not_found"),
            Some(m) if m.user != BOT_USER => return fail("cant_update_message"),
            Some(m) => m.thread_ts.clone(),
        }
    };
    if st.kicked.contains(&channel) {
        return fail("not_in_channel");
    }
    let (text, blocks) = match content(body) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let parent = (channel.clone(), thread_ts.clone());
    if kind == "post" && !thread_ts.is_empty() && !st.messages.contains_key(&parent) {
        return fail("thread_not_found");
    }
    let ts = if kind == "post" { st.next_ts() } else { ts };
    let msg = Msg {
        user: BOT_USER.into(),
        text: text.clone(),
        blocks: with_block_ids(blocks.clone()),
        thread_ts: thread_ts.clone(),
    };
    let message = message_json(&ts, &msg);
    st.messages.insert((channel.clone(), ts.clone()), msg);
    let answer = json!({ "channel": channel, "ts": ts, "text": text, "message": message });
    let kind = kind.to_string();
    st.sent.push(Sent {
        kind,
        channel,
        ts,
        thread_ts,
        text,
        blocks,
    });
    ok(answer)
}

fn delete(st: &mut State, body: &Value) -> Response<Body> {
    let key = (field(body, "channel"), field(body, "ts"));
    if key.0.is_empty() {
        return fail("channel_not_found");
    }
    let thread_ts = match st.messages.get(&key) {
        None => return fail("message_not_found"),
        // A bot token cannot delete users' messages.
        Some(m) if m.user != BOT_USER => return fail("cant_delete_message"),
        Some(m) => m.thread_ts.clone(),
    };
    st.messages.remove(&key);
    st.reactions.remove(&key);
    if let Some(pins) = st.pins.get_mut(&key.0) {
        pins.retain(|p| *p != key.1);
    }
    let (channel, ts) = key;
    st.sent.push(Sent {
        kind: "delete".into(),
        channel: channel.clone(),
        ts: ts.clone(),
        thread_ts,
        text: String::new(),
        blocks: Value::Null,
    });
    ok(json!({ "channel": channel, "ts": ts }))
}

fn react(st: &mut State, add: bool, body: &Value) -> Response<Body> {
    let key = (field(body, "channel"), field(body, "timestamp"));
    let name = field(body, "name");
    if key.0.is_empty() {
        return fail("channel_not_found");
    }
    if name.is_empty() {
        return fail("invalid_name");
    }
    if !st.messages.contains_key(&key) {
        return fail("message_not_found");
    }
    let names = st.reactions.entry(key).or_default();
    match (add, names.contains(&name)) {
        (true, true) => fail("already_reacted"),
        (false, false) => fail("no_reaction"),
        (true, false) => {
            names.push(name);
            ok(json!({}))
        }
        (false, true) => {
            names.retain(|n| *n != name);
            ok(json!({}))
        }
    }
}

/// `pins.add` (`add`) and `pins.remove`: message `timestamp` of `channel`.
fn pin(st: &mut State, add: bool, body: &Value) -> Response<Body> {
    let key = (field(body, "channel"), field(body, "timestamp"));
    if key.0.is_empty() {
        return fail("channel_not_found");
    }
    if st.kicked.contains(&key.0) {
        return fail("not_in_channel");
    }
    if key.1.is_empty() {
        return fail("no_item_specified");
    }
    if !st.messages.contains_key(&key) {
        return fail("message_not_found");
    }
    let (channel, ts) = key;
    let pins = st.pins.entry(channel).or_default();
    match (add, pins.contains(&ts)) {
        (true, true) => fail("already_pinned"),
        (false, false) => fail("no_pin"),
        (true, false) => {
            pins.push(ts);
            ok(json!({}))
        }
        (false, true) => {
            pins.retain(|p| *p != ts);
            ok(json!({}))
        }
    }
}

fn upload_url(st: &mut State, body: &Value) -> Response<Body> {
    let filename = field(body, "filename");
    let length = field(body, "length").parse::<usize>().unwrap_or(0);
    if filename.is_empty() || length == 0 {
        return fail("invalid_arguments");
    }
    let id = format!("F0UP{:07}", st.next());
    let pending = Pending {
        filename,
        length,
        data: None,
        completed: false,
    };
    st.pending.insert(id.clone(), pending);
    let url = format!("http://{}/upload/{id}", st.addr);
    ok(json!({ "upload_url": url, "file_id": id }))
}

/// `POST /upload/{id}`: the file's bytes, raw or as the `file` part of a multipart form.
fn receive_upload(st: &mut State, id: &str, content_type: &str, body: &[u8]) -> Response<Body> {
    let Some(p) = st.pending.get_mut(id) else {
        return plain(404, format!("no upload {id}"));
    };
    let data = if content_type
        .to_ascii_lowercase()
        .starts_with("multipart/form-data")
    {
        let parts = boundary(content_type).and_then(|b| parse_multipart(body, &b));
        match parts.and_then(|ps| ps.into_iter().find(|p| p.name == "file")) {
            Some(part) => part.data,
            None => return plain(400, "no file part in the multipart body".into()),
        }
    } else {
        body.to_vec()
    };
    if data.len() != p.length {
        return plain(400, format!("{} bytes, {} declared", data.len(), p.length));
    }
    let n = data.len();
    p.data = Some(data);
    plain(200, format!("OK - {n}"))
}

fn complete_upload(st: &mut State, body: &Value) -> Response<Body> {
    let files = match &body["files"] {
        Value::String(s) => serde_json::from_str(s).unwrap_or(Value::Null),
        v => v.clone(),
    };
    let Some(list) = files.as_array().filter(|l| !l.is_empty()) else {
        return fail("invalid_arguments");
    };
    for f in list {
        match st.pending.get(&field(f, "id")) {
            None => return fail("file_not_found"),
            Some(p) if p.completed => return fail("file_not_found"),
            Some(p) if p.data.is_none() => return fail("file_upload_not_complete"),
            Some(_) => {}
        }
    }
    let channel = field(body, "channel_id");
    if st.kicked.contains(&channel) {
        return fail("not_in_channel");
    }
    let mut out = Vec::new();
    for f in list {
        let id = field(f, "id");
        let Some(p) = st.pending.get_mut(&id) else {
            continue;
        };
        p.completed = true;
        let title = Some(field(f, "title"))
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| p.filename.clone());
        out.push(json!({ "id": id, "title": title }));
        let upload = Upload {
            file_id: id,
            filename: p.filename.clone(),
            title,
            channel: channel.clone(),
            thread_ts: field(body, "thread_ts"),
            initial_comment: field(body, "initial_comment"),
            data: p.data.clone().unwrap_or_default(),
        };
        st.uploads.push(upload);
    }
    ok(json!({ "files": out }))
}

/// Percent-encodes all but unreserved characters (a file name in a URL path).
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Decodes `%XX` escapes and `+` as a space (a form).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: Option<&u8>| c.and_then(|c| char::from(*c).to_digit(16));
        match (b[i], hex(b.get(i + 1)), hex(b.get(i + 2))) {
            (b'%', Some(hi), Some(lo)) => {
                out.push(u8::try_from(hi * 16 + lo).unwrap_or(b'?'));
                i += 3;
            }
            (b'+', _, _) => {
                out.push(b' ');
                i += 1;
            }
            (c, _, _) => {
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
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

/// A part of a `multipart/form-data` body.
struct Part {
    name: String,
    data: Vec<u8>,
}

fn param(header: &str, key: &str) -> Option<String> {
    header.split(';').skip(1).find_map(|p| {
        let (k, v) = p.trim().split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case(key)
            .then(|| v.trim().trim_matches('"').to_string())
    })
}

fn boundary(content_type: &str) -> Option<String> {
    param(content_type, "boundary")
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    haystack
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

fn parse_multipart(body: &[u8], boundary: &str) -> Option<Vec<Part>> {
    let delimiter = format!("--{boundary}").into_bytes();
    let next = [b"\r\n".as_slice(), &delimiter].concat();
    let mut parts = Vec::new();
    let mut pos = find(body, &delimiter, 0)? + delimiter.len();
    loop {
        let rest = body.get(pos..)?;
        if rest.starts_with(b"--") {
            return Some(parts);
        }
        if rest.starts_with(b"\r\n") {
            pos += 2;
        }
        let end = find(body, &next, pos)?;
        let part = body.get(pos..end)?;
        let head_end = find(part, b"\r\n\r\n", 0)?;
        let head = String::from_utf8_lossy(&part[..head_end]);
        let name = head.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("content-disposition")
                .then(|| param(v, "name"))?
        });
        parts.push(Part {
            name: name?,
            data: part.get(head_end + 4..)?.to_vec(),
        });
        pos = end + next.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::HeaderMap;
    use tokio::net::TcpStream;

    type Ws = tokio_tungstenite::WebSocketStream<TcpStream>;

    fn runtime() -> tokio::runtime::Runtime {
        let mut b = tokio::runtime::Builder::new_current_thread();
        b.enable_all().build().expect("runtime")
    }

    /// One HTTP/1.1 request with hyper's client: status, headers and body.
    async fn http(
        fake: &FakeSlack,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> (u16, HeaderMap, Bytes) {
        let stream = TcpStream::connect(fake.addr).await.expect("connect");
        let io = hyper_util::rt::TokioIo::new(stream);
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
            .await
            .expect("http");
        tokio::spawn(conn);
        let mut request = Request::builder().method(method).uri(path);
        for (k, v) in [("host", fake.addr.to_string().as_str())]
            .iter()
            .chain(headers)
        {
            request = request.header(*k, *v);
        }
        let body = Full::new(Bytes::copy_from_slice(body));
        let response = sender
            .send_request(request.body(body).expect("request"))
            .await;
        let response = response.expect("an answer");
        let (status, headers) = (response.status().as_u16(), response.headers().clone());
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        (status, headers, bytes)
    }

    /// A Web API call with a JSON body: status, headers and the answer.
    async fn call(
        fake: &FakeSlack,
        method: &str,
        token: &str,
        body: Value,
    ) -> (u16, HeaderMap, Value) {
        let auth = format!("Bearer {token}");
        let headers = [
            ("authorization", auth.as_str()),
            ("content-type", "application/json"),
        ];
        let path = format!("/api/{method}");
        let (status, headers, bytes) =
            http(fake, "POST", &path, &headers, body.to_string().as_bytes()).await;
        (
            status,
            headers,
            serde_json::from_slice(&bytes).expect("JSON answer"),
        )
    }

    /// A Web API call with the bot token: the answer.
    async fn bot(fake: &FakeSlack, method: &str, body: Value) -> Value {
        call(fake, method, BOT_TOKEN, body).await.2
    }

    async fn dial(url: &str) -> Ws {
        let host = url
            .trim_start_matches("ws://")
            .split('/')
            .next()
            .expect("host");
        let stream = TcpStream::connect(host).await.expect("connect");
        let ws = tokio_tungstenite::client_async(url, stream).await;
        ws.expect("websocket handshake").0
    }

    /// The next frame other than a ping or pong.
    async fn next_frame(ws: &mut Ws) -> WsMessage {
        loop {
            let frame = tokio::time::timeout(Duration::from_secs(10), ws.next()).await;
            match frame
                .expect("a frame within 10 s")
                .expect("open")
                .expect("a frame")
            {
                WsMessage::Ping(_) | WsMessage::Pong(_) => {}
                frame => return frame,
            }
        }
    }

    async fn next_json(ws: &mut Ws) -> Value {
        match next_frame(ws).await {
            WsMessage::Text(t) => serde_json::from_str(&t).expect("JSON frame"),
            other => panic!("expected a text frame, got {other:?}"),
        }
    }

    async fn ack(ws: &mut Ws, envelope: &Value) {
        let frame = json!({ "envelope_id": envelope["envelope_id"] }).to_string();
        ws.send(WsMessage::Text(frame)).await.expect("send");
    }

    /// Opens a Socket Mode connection: the socket, its URL and the hello.
    async fn open(fake: &FakeSlack) -> (Ws, String, Value) {
        let (_, _, open) = call(fake, "apps.connections.open", APP_TOKEN, json!({})).await;
        let url = open["url"].as_str().expect("url").to_string();
        let mut ws = dial(&url).await;
        let hello = next_json(&mut ws).await;
        (ws, url, hello)
    }

    #[test]
    fn socket_mode_says_hello_and_an_event_acked_once_is_pushed_once() {
        let fake = FakeSlack::start();
        runtime().block_on(async {
            let (_, _, r) = call(&fake, "apps.connections.open", BOT_TOKEN, json!({})).await;
            assert_eq!(r["error"], "not_allowed_token_type");
            let (_, _, r) = call(&fake, "auth.test", "xoxb-wrong", json!({})).await;
            assert_eq!(r["error"], "invalid_auth");
            assert_eq!(bot(&fake, "auth.test", json!({})).await["user_id"], BOT_USER);

            let (mut ws, url, hello) = open(&fake).await;
            assert_eq!((&hello["type"], &hello["num_connections"]), (&json!("hello"), &json!(1)));
            assert_eq!(hello["connection_info"]["app_id"], APP_ID);
            // A ticket is good for one dial.
            let mut again = dial(&url).await;
            assert!(matches!(next_frame(&mut again).await, WsMessage::Close(_)));
            assert_eq!((fake.opens(), fake.refused(), fake.connections()), (1, 1, (1, 1)));

            let (n, ts) = fake.push_message("D0USER1", "U0ALICE", "hi");
            let env = next_json(&mut ws).await;
            assert_eq!((&env["type"], &env["retry_attempt"]), (&json!("events_api"), &json!(0)));
            let event = &env["payload"]["event"];
            assert_eq!((&event["channel_type"], &event["ts"]), (&json!("im"), &json!(ts)));
            ack(&mut ws, &env).await;
            tokio::time::sleep(ACK_DEADLINE + Duration::from_millis(500)).await;
            assert_eq!(fake.pushes_of(n), 1);
            let acks = fake.acks_of(n);
            assert_eq!(acks.iter().map(|a| (a.push, a.connection)).collect::<Vec<_>>(), [(0, 1)]);
            assert!(fake.late_acks().is_empty() && fake.unknown_acks().is_empty());

            // The bot answers in the thread with a button; the user presses it.
            let blocks = json!([
                { "type": "section", "text": { "type": "mrkdwn", "text": "Run `ls`?" } },
                { "type": "actions", "elements": [{ "type": "button", "action_id": "ok",
                  "text": { "type": "plain_text", "text": "Approve" }, "value": "yes" }] },
            ]);
            let body = json!({ "channel": "D0USER1", "thread_ts": ts, "text": "a &amp; b", "blocks": blocks });
            let posted = bot(&fake, "chat.postMessage", body).await;
            let bot_ts = posted["ts"].as_str().expect("ts").to_string();
            assert!(bot_ts > ts, "{posted}");
            let sent = fake.message("D0USER1", &bot_ts).expect("posted");
            assert_eq!(sent.shown(), "a & b\nRun `ls`?");
            assert_eq!(sent.buttons(), [("Approve".into(), "yes".into(), "ok".into())]);
            let p = fake.press("D0USER1", "U0ALICE", &bot_ts, "Appr");
            let env = next_json(&mut ws).await;
            let payload = &env["payload"];
            assert_eq!((&env["type"], &payload["actions"][0]["value"]), (&json!("interactive"), &json!("yes")));
            assert_eq!(payload["container"]["thread_ts"], json!(ts));
            ack(&mut ws, &env).await;
            assert!(fake.wait_until(Duration::from_secs(5), |f| f.acks_of(p).len() == 1));

            // A refresh: two disconnect messages, then a close frame.
            fake.refresh(Duration::from_millis(200));
            assert_eq!(next_json(&mut ws).await["reason"], "warning");
            assert_eq!(next_json(&mut ws).await["reason"], "refresh_requested");
            assert!(matches!(next_frame(&mut ws).await, WsMessage::Close(_)));
        });
    }

    #[test]
    fn an_unacked_event_is_pushed_again_with_retry_attempt_1() {
        let fake = FakeSlack::start();
        let n = fake
            .push_event(json!({ "type": "event_callback", "event": { "type": "app_mention" } }));
        runtime().block_on(async {
            // Pushed while no connection was live: it waited for one.
            let (mut ws, _, _) = open(&fake).await;
            let first = next_json(&mut ws).await;
            assert_eq!(
                (&first["retry_attempt"], &first["retry_reason"]),
                (&json!(0), &json!(""))
            );
            let second = next_json(&mut ws).await;
            assert_eq!(
                (&second["retry_attempt"], &second["retry_reason"]),
                (&json!(1), &json!("timeout"))
            );
            assert_ne!(first["envelope_id"], second["envelope_id"]);
            ack(&mut ws, &second).await;
            ack(&mut ws, &first).await;
            ack(&mut ws, &json!({ "envelope_id": "not-one-of-ours" })).await;
            assert!(fake.wait_until(Duration::from_secs(5), |f| f.unknown_acks().len() == 1));
        });
        let acks = fake.acks_of(n);
        assert_eq!(acks.iter().map(|a| a.push).collect::<Vec<_>>(), [1, 0]);
        assert!(acks[0].latency < ACK_DEADLINE);
        assert_eq!((fake.late_acks().len(), fake.pushes_of(n)), (1, 2));
    }

    #[test]
    fn a_button_label_of_76_characters_is_invalid_blocks() {
        let fake = FakeSlack::start();
        let button = |label: String, id: &str| json!({ "type": "button", "action_id": id, "text": { "type": "plain_text", "text": label } });
        let actions = |buttons: Vec<Value>| json!([{ "type": "actions", "elements": buttons }]);
        runtime().block_on(async {
            let post = |blocks| {
                bot(
                    &fake,
                    "chat.postMessage",
                    json!({ "channel": "C0A", "blocks": blocks }),
                )
            };
            let r = post(actions(vec![button("x".repeat(76), "a")])).await;
            assert_eq!(r["error"], "invalid_blocks", "{r}");
            let r = post(actions(vec![
                button("x".into(), "a"),
                button("y".into(), "a"),
            ]))
            .await;
            assert_eq!(r["error"], "invalid_blocks", "a duplicate action_id: {r}");
            let r = post(actions(vec![button("é".repeat(75), "a")])).await;
            assert_eq!(r["ok"], true, "{r}");
            // A form, blocks as JSON text.
            let blocks = encode(&actions(vec![button("Go".into(), "a")]).to_string());
            let form = format!("channel=C0A&text=hi+there&blocks={blocks}&token={BOT_TOKEN}");
            let form_type = [("content-type", "application/x-www-form-urlencoded")];
            let (_, _, bytes) = http(
                &fake,
                "POST",
                "/api/chat.postMessage",
                &form_type,
                form.as_bytes(),
            )
            .await;
            assert_eq!(
                serde_json::from_slice::<Value>(&bytes).expect("JSON")["ok"],
                true
            );
            let r = bot(&fake, "chat.postMessage", json!({ "channel": "C0A" })).await;
            assert_eq!(r["error"], "no_text");
            let (_, ts) = fake.push_message("C0A", "U0ALICE", "mine");
            let r = bot(
                &fake,
                "chat.update",
                json!({ "channel": "C0A", "ts": ts, "text": "x" }),
            )
            .await;
            assert_eq!(r["error"], "cant_update_message");
        });
        let sent = fake.sent();
        assert_eq!((sent.len(), sent[1].text.as_str()), (2, "hi there"));
        assert_eq!(sent[1].buttons()[0].0, "Go");
    }

    #[test]
    fn pins_and_updates_that_keep_their_buttons() {
        let fake = FakeSlack::start();
        let blocks = |text: &str, labels: &[&str]| {
            let buttons: Vec<Value> = labels
                .iter()
                .map(|l| {
                    json!({ "type": "button", "action_id": l, "value": l,
                                 "text": { "type": "plain_text", "text": l } })
                })
                .collect();
            json!([
                { "type": "section", "text": { "type": "mrkdwn", "text": text } },
                { "type": "actions", "elements": buttons },
            ])
        };
        let (_, user_ts) = fake.push_message("C0A", "U0ALICE", "hi");
        runtime().block_on(async {
            let posted = bot(
                &fake,
                "chat.postMessage",
                json!({ "channel": "C0A", "text": "Board", "blocks": blocks("idle", &["Stop"]) }),
            )
            .await;
            let ts = posted["ts"].as_str().expect("ts").to_string();
            let pin = json!({ "channel": "C0A", "timestamp": ts });
            assert_eq!(
                bot(&fake, "pins.add", pin.clone()).await,
                json!({ "ok": true })
            );
            let r = bot(&fake, "pins.add", pin.clone()).await;
            assert_eq!(r["error"], "already_pinned");
            // A form, as some clients send it.
            let form = format!("channel=C0A&timestamp={user_ts}&token={BOT_TOKEN}");
            let form_type = [("content-type", "application/x-www-form-urlencoded")];
            let (_, _, bytes) =
                http(&fake, "POST", "/api/pins.add", &form_type, form.as_bytes()).await;
            assert_eq!(
                serde_json::from_slice::<Value>(&bytes).expect("JSON")["ok"],
                true
            );
            assert_eq!(fake.pinned("C0A"), [ts.clone(), user_ts.clone()]);
            let nope = json!({ "channel": "C0A", "timestamp": "1.000001" });
            let r = bot(&fake, "pins.add", nope.clone()).await;
            assert_eq!(r["error"], "message_not_found");
            let r = bot(&fake, "pins.remove", nope).await;
            assert_eq!(r["error"], "message_not_found");

            // An update with new buttons.
            let update = json!({ "channel": "C0A", "ts": ts, "text": "Board",
                                 "blocks": blocks("busy", &["Stop", "Log"]) });
            assert_eq!(bot(&fake, "chat.update", update).await["ok"], true);

            let user_pin = json!({ "channel": "C0A", "timestamp": user_ts });
            assert_eq!(
                bot(&fake, "pins.remove", user_pin.clone()).await["ok"],
                true
            );
            let r = bot(&fake, "pins.remove", user_pin).await;
            assert_eq!(r["error"], "no_pin");
            assert_eq!(fake.pinned("C0A"), [ts.as_str()]);
            let delete = json!({ "channel": "C0A", "ts": ts });
            assert_eq!(bot(&fake, "chat.delete", delete).await["ok"], true);
            assert!(
                fake.pinned("C0A").is_empty(),
                "a deleted message is unpinned"
            );
            fake.kick("C0A");
            let r = bot(&fake, "pins.add", pin).await;
            assert_eq!(r["error"], "not_in_channel");
        });
        let sent = fake.sent();
        let update = sent
            .iter()
            .find(|s| s.kind == "update")
            .expect("the update");
        assert_eq!(update.shown(), "Board\nbusy");
        let labels: Vec<String> = update.buttons().into_iter().map(|b| b.0).collect();
        assert_eq!(labels, ["Stop", "Log"]);
        let pins = fake
            .calls()
            .iter()
            .filter(|c| c.method.starts_with("pins."))
            .count();
        assert_eq!(pins, 8);
    }

    #[test]
    fn a_429_from_fail_next_carries_retry_after() {
        let fake = FakeSlack::start();
        fake.fail_next("chat.postMessage", 429, "ratelimited", Some(7));
        runtime().block_on(async {
            let body = json!({ "channel": "C0A", "text": "hi" });
            let (status, headers, r) =
                call(&fake, "chat.postMessage", BOT_TOKEN, body.clone()).await;
            assert_eq!((status, &r["error"]), (429, &json!("ratelimited")));
            assert_eq!(
                headers.get(RETRY_AFTER).and_then(|v| v.to_str().ok()),
                Some("7")
            );
            let (status, headers, r) = call(&fake, "chat.postMessage", BOT_TOKEN, body).await;
            assert_eq!(
                (status, &r["ok"], headers.get(RETRY_AFTER)),
                (200, &json!(true), None)
            );
        });
        assert_eq!((fake.calls().len(), fake.sent().len()), (2, 1));
    }

    #[test]
    fn files_go_up_in_three_steps_and_come_down_with_the_bot_token() {
        let fake = FakeSlack::start();
        runtime().block_on(async {
            let r = bot(
                &fake,
                "files.getUploadURLExternal",
                json!({ "filename": "a.txt", "length": "5" }),
            )
            .await;
            let url = r["upload_url"].as_str().expect("url");
            let path = &url[url.find("/upload/").expect("path")..];
            assert_eq!(http(&fake, "POST", path, &[], b"toolong").await.0, 400);
            let (status, _, answer) = http(&fake, "POST", path, &[], b"hello").await;
            assert_eq!((status, answer.as_ref()), (200, b"OK - 5".as_slice()));
            let body = json!({ "files": [{ "id": r["file_id"] }], "channel_id": "C0A" });
            let r = bot(&fake, "files.completeUploadExternal", body.clone()).await;
            assert_eq!(r["files"][0]["title"], "a.txt", "{r}");
            let r = bot(&fake, "files.completeUploadExternal", body).await;
            assert_eq!(r["error"], "file_not_found");

            let file = fake.put_file("voice note.m4a", b"OggS", "audio/mp4");
            assert_eq!(file["subtype"], "slack_audio");
            let url = file["url_private"].as_str().expect("url");
            let path = &url[url.find("/files-pri/").expect("path")..];
            let (status, headers, _) = http(&fake, "GET", path, &[], b"").await;
            assert_eq!(
                (status, headers.get(LOCATION).map(|v| v.as_bytes())),
                (302, Some(&b"/login"[..]))
            );
            let auth = format!("Bearer {BOT_TOKEN}");
            let (status, _, data) =
                http(&fake, "GET", path, &[("authorization", &auth)], b"").await;
            assert_eq!((status, data.as_ref()), (200, b"OggS".as_slice()));
        });
        let uploads = fake.uploads();
        assert_eq!(
            (uploads.len(), uploads[0].data.as_slice()),
            (1, b"hello".as_slice())
        );
        let auths: Vec<String> = fake.file_downloads().into_iter().map(|d| d.1).collect();
        assert_eq!(auths, ["".to_string(), format!("Bearer {BOT_TOKEN}")]);
    }

    #[test]
    fn multipart_bodies_are_split_into_parts() {
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nline 1\r\nline 2\r\n--XyZ--\r\n";
        let parts = parse_multipart(body, "XyZ").expect("parses");
        assert_eq!(
            (parts[0].name.as_str(), &parts[0].data[..]),
            ("file", &b"line 1\r\nline 2"[..])
        );
        assert_eq!(percent_decode("a%3Ab+c"), "a:b c");
    }
}
