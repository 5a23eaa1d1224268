//! A fake Feishu open platform on `127.0.0.1`, so the gateway's Feishu adapter can be tested
//! offline: endpoint discovery, the long connection speaking `pbbp2` frames, and the REST calls
//! a bot makes. The test pushes events (a user writes, a user presses a card button), the client
//! receives them over a real websocket and must acknowledge them; every request, ping and
//! acknowledgement is recorded.
//!
//! What it emulates (from the official SDKs and API docs; see `research/feishu.md`):
//! * `POST /callback/ws/endpoint` with `{"AppID","AppSecret"}` → a single-use
//!   `ws://127.0.0.1:WSPORT/ws?device_id=…&service_id=7` and a `ClientConfig` (`PingInterval`
//!   [`FakeFeishu::set_ping_interval`], default 1 s; `ReconnectInterval` 1 s, `ReconnectNonce`
//!   0). Wrong credentials get a non-zero code (a client error, not worth retrying).
//! * The socket: binary `pbbp2.Frame`s only. A ping (`method` 0, `type: ping`) is answered with
//!   a pong carrying the `ClientConfig` JSON, unless [`FakeFeishu::silence`]d. Events go out as
//!   data frames (`method` 1, headers `type: event`, `message_id`, `sum`, `seq`, `trace_id`,
//!   `timestamp`), split in parts on request ([`FakeFeishu::push_event_split`], sent last part
//!   first). An event not acknowledged within [`ACK_DEADLINE`] is pushed again (as Feishu does),
//!   up to [`MAX_PUSHES`] times in all; an event pushed while no client is connected waits for
//!   one. A data frame the client sends back is recorded as an [`Ack`].
//! * `POST /open-apis/auth/v3/tenant_access_token/internal` → `t-fake-N`, valid until
//!   [`FakeFeishu::expire_tokens`]; any other `/open-apis/` call with a token that is not valid
//!   gets HTTP 400 code 99991663.
//! * `GET /open-apis/bot/v3/info` (the bot's `open_id`, [`BOT_OPEN_ID`]),
//!   `GET /open-apis/im/v1/chats/{chat_id}` (`chat_mode`, known for chats events were pushed
//!   from), `POST /open-apis/im/v1/messages?receive_id_type=…` (text, interactive, file; the
//!   `content` must be a JSON string; body limits 150 KB for text and 30 KB for cards → 230025;
//!   the same `uuid` twice returns the first message's id without sending again),
//!   `PATCH /open-apis/im/v1/messages/{id}` (cards only, shared — `update_multi` — before and
//!   after), `POST /open-apis/im/v1/files` (`multipart/form-data` with `file_type`, `file_name`,
//!   `file`), `POST /open-apis/im/v1/images` (`image_type`, `image`) and `image` messages.
//! * Pins: `POST /open-apis/im/v1/pins` with `{"message_id"}` (one of the bot's messages; any
//!   other is HTTP 400 code 230001 `invalid message_id`; pinning a pinned message answers the
//!   pin it has) → `data.pin` (`message_id`, `chat_id`, `operator_id` the app id,
//!   `operator_id_type: app_id`, `create_time` in ms), `DELETE /open-apis/im/v1/pins/{id}`.
//!   See [`FakeFeishu::pinned`].
//! * A chat the bot was removed from ([`FakeFeishu::remove_bot`]) answers 230002 to sends,
//!   edits and pins; [`FakeFeishu::fail_next`] makes the next matching call fail with a code
//!   (a 429 or 99991400 comes with `x-ogw-ratelimit-reset: 1`).
//!
//! Like the other fakes, the API is synchronous: the servers run on their own thread with a
//! single-threaded tokio runtime and stop when the [`FakeFeishu`] is dropped.

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
use prost::Message as _;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message as WsMessage;

/// An app id of the shape Feishu hands out (`cli_` and 16 hex digits).
pub const APP_ID: &str = "cli_a1b2c3d4e5f60718";
/// The app's secret.
pub const APP_SECRET: &str = "fakeFeishuAppSecretForClibotTests";
/// The bot's own open_id (what a mention of the bot carries).
pub const BOT_OPEN_ID: &str = "ou_fakebot00000000000000000000000";
/// The `service_id` of every endpoint URL (pings must carry it).
pub const SERVICE_ID: i32 = 7;
/// An event not acknowledged within this is pushed again.
pub const ACK_DEADLINE: Duration = Duration::from_secs(3);
/// How many times an event is pushed at most (the first push included).
pub const MAX_PUSHES: u32 = 3;
/// Feishu's request body limits: text, and cards or rich text.
pub const TEXT_LIMIT: usize = 150 * 1024;
pub const CARD_LIMIT: usize = 30 * 1024;

/// `pbbp2.Header`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Header {
    #[prost(string, required, tag = "1")]
    pub key: String,
    #[prost(string, required, tag = "2")]
    pub value: String,
}

/// `pbbp2.Frame` (proto2: fields 1–4 required).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Frame {
    #[prost(uint64, required, tag = "1")]
    pub seq_id: u64,
    #[prost(uint64, required, tag = "2")]
    pub log_id: u64,
    #[prost(int32, required, tag = "3")]
    pub service: i32,
    #[prost(int32, required, tag = "4")]
    pub method: i32,
    #[prost(message, repeated, tag = "5")]
    pub headers: Vec<Header>,
    #[prost(string, optional, tag = "6")]
    pub payload_encoding: Option<String>,
    #[prost(string, optional, tag = "7")]
    pub payload_type: Option<String>,
    #[prost(bytes = "vec", optional, tag = "8")]
    pub payload: Option<Vec<u8>>,
    #[prost(string, optional, tag = "9")]
    pub log_id_new: Option<String>,
}

impl Frame {
    pub fn header(&self, key: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|h| h.key == key)
            .map(|h| h.value.as_str())
    }

    fn with_headers(mut self, headers: &[(&str, String)]) -> Frame {
        self.headers = headers
            .iter()
            .map(|(k, v)| Header {
                key: k.to_string(),
                value: v.clone(),
            })
            .collect();
        self
    }
}

/// A data frame the client sent back for a pushed event.
#[derive(Clone, Debug)]
pub struct Ack {
    /// The event ([`FakeFeishu::push_event`]'s number).
    pub event: usize,
    /// Which push of it (0 = the first).
    pub push: u32,
    /// The frame as received.
    pub frame: Frame,
    /// Its payload, parsed (`{"code":200,...}`).
    pub payload: Value,
    /// From sending the push's last fragment to receiving this.
    pub latency: Duration,
}

impl Ack {
    /// The callback answer in `data` (base64 of JSON), if any.
    pub fn data(&self) -> Option<Value> {
        use base64::Engine;
        let b64 = self.payload["data"].as_str()?;
        let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}

/// A ping the client sent.
#[derive(Clone, Debug)]
pub struct Ping {
    pub frame: Frame,
    /// Which connection it came on (1 = the first).
    pub connection: u64,
}

/// A REST request, as received.
#[derive(Clone, Debug)]
pub struct Call {
    pub method: String,
    pub path: String,
    pub query: String,
    /// The JSON body (`Null` if none; for a multipart upload, its text fields).
    pub body: Value,
}

/// A message the bot sent or a card it updated.
#[derive(Clone, Debug, PartialEq)]
pub struct Sent {
    /// `"create"` or `"patch"`.
    pub kind: String,
    pub message_id: String,
    /// The chat (`receive_id` of a create; the message's chat for a patch).
    pub chat: String,
    pub receive_id_type: String,
    pub msg_type: String,
    /// `content`, parsed from its JSON string.
    pub content: Value,
    pub uuid: String,
    /// The first message of the thread it went to (a reply in a thread); empty otherwise.
    pub root: String,
}

impl Sent {
    /// What the message shows as text: a text message's text, a rich-text message's
    /// elements (`md`, `text`) line by line, a card's markdown and text elements.
    pub fn text(&self) -> String {
        fn walk(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(o) => {
                    match (
                        o.get("tag").and_then(Value::as_str),
                        o.get("text"),
                        o.get("content"),
                    ) {
                        (Some("md" | "text"), Some(Value::String(t)), _) => out.push(t.clone()),
                        (
                            Some("markdown" | "plain_text" | "lark_md"),
                            _,
                            Some(Value::String(t)),
                        ) => out.push(t.clone()),
                        _ => o.values().for_each(|x| walk(x, out)),
                    }
                }
                Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
                _ => {}
            }
        }
        if self.msg_type == "text" {
            return self.content["text"]
                .as_str()
                .unwrap_or_default()
                .to_string();
        }
        let mut out = Vec::new();
        walk(&self.content, &mut out);
        out.join("\n")
    }
}

/// A file the bot uploaded.
#[derive(Clone, Debug, PartialEq)]
pub struct Upload {
    pub file_key: String,
    pub file_type: String,
    pub file_name: String,
    pub data: Vec<u8>,
}

/// What a connection is told to do.
enum Out {
    Binary(Vec<u8>),
    /// Drop the TCP connection without a close frame.
    Drop,
}

struct Pushed {
    payload: Vec<u8>,
    parts: usize,
    pushes: u32,
    last_push: Option<Instant>,
    acked: bool,
}

struct Failure {
    path: String,
    status: u16,
    code: i64,
}

struct Message {
    chat: String,
    msg_type: String,
    content: Value,
    /// The thread's first message, for a message in a thread.
    root: String,
}

struct State {
    /// What users' image and file messages carry: (message id, key) → bytes.
    resources: HashMap<(String, String), Vec<u8>>,
    ws_addr: SocketAddr,
    app_id: String,
    app_secret: String,
    ping_interval: i64,
    silent: bool,
    tokens: HashSet<String>,
    token_calls: usize,
    next_token: u64,
    discoveries: usize,
    /// Connections accepted, and the live ones: (number, sender).
    connections: u64,
    live: Vec<(u64, mpsc::UnboundedSender<Out>)>,
    calls: Vec<Call>,
    sent: Vec<Sent>,
    uploads: Vec<Upload>,
    acks: Vec<Ack>,
    pings: Vec<Ping>,
    failures: VecDeque<Failure>,
    removed: HashSet<String>,
    chat_modes: HashMap<String, String>,
    messages: HashMap<String, Message>,
    /// Pinned messages, in the order they were pinned: (chat, message id, `create_time`).
    pins: Vec<(String, String, String)>,
    uuids: HashMap<String, String>,
    next_id: u64,
    next_seq: u64,
    pushed: Vec<Pushed>,
    /// Frame message ids of pushes: (event, push, when its last fragment went out).
    frames: HashMap<String, (usize, u32, Instant)>,
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

/// A running fake Feishu. Dropping it stops both servers.
pub struct FakeFeishu {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

/// An `im.message.receive_v1` event: `chat_type` is `p2p` or `group`; `mentions` are
/// (placeholder key, open_id, name), the key appearing in `text` (`@_user_1 hi`).
pub fn text_event(
    event_id: &str,
    message_id: &str,
    chat_id: &str,
    chat_type: &str,
    sender_open_id: &str,
    text: &str,
    mentions: &[(&str, &str, &str)],
) -> Value {
    let mentions: Vec<Value> = mentions
        .iter()
        .map(|(key, open_id, name)| {
            json!({
                "key": key,
                "id": { "open_id": open_id, "union_id": format!("on_{open_id}"), "user_id": "" },
                "name": name,
                "tenant_key": "fake-tenant",
            })
        })
        .collect();
    json!({
        "schema": "2.0",
        "header": {
            "event_id": event_id,
            "event_type": "im.message.receive_v1",
            "create_time": now_ms().to_string(),
            "token": "",
            "app_id": APP_ID,
            "tenant_key": "fake-tenant",
        },
        "event": {
            "sender": {
                "sender_id": { "open_id": sender_open_id, "union_id": format!("on_{sender_open_id}"), "user_id": "" },
                "sender_type": "user",
                "tenant_key": "fake-tenant",
            },
            "message": {
                "message_id": message_id,
                "root_id": "",
                "parent_id": "",
                "create_time": now_ms().to_string(),
                "update_time": now_ms().to_string(),
                "chat_id": chat_id,
                "thread_id": "",
                "chat_type": chat_type,
                "message_type": "text",
                "content": json!({ "text": text }).to_string(),
                "mentions": mentions,
                "user_agent": "fake",
            },
        },
    })
}

/// `[gateway.feishu]` for this fake, with `more` lines in the section; the app secret comes
/// from `TEST_FEISHU_SECRET`, which [`gateway`] sets.
pub fn gateway_config(fs: &FakeFeishu, more: &str) -> String {
    format!(
        "\n[gateway.feishu]\napp_id = \"{APP_ID}\"\napp_secret = \"${{TEST_FEISHU_SECRET}}\"\napi_url = \"{}\"\n{more}",
        fs.url()
    )
}

/// Starts the real gateway of `h` (configured with [`gateway_config`]) and waits until it
/// holds the long connection.
pub fn gateway(h: &crate::Harness, fs: &FakeFeishu) -> std::process::Child {
    let g = h.gateway(&[], &[("TEST_FEISHU_SECRET", APP_SECRET)]);
    assert!(
        fs.wait_until(Duration::from_secs(30), |f| f.connections().1 > 0),
        "the gateway opens the long connection; its log:\n{}",
        h.gateway_log()
    );
    g
}

/// `event` (a user's message event) as sent in the thread that message `root` heads.
pub fn in_thread(mut event: Value, root: &str) -> Value {
    let m = &mut event["event"]["message"];
    m["root_id"] = json!(root);
    m["parent_id"] = json!(root);
    m["thread_id"] = json!(format!("omt_{}", root.trim_start_matches("om_")));
    event
}

/// A user's `image` (`file_name` empty) or `file` message: `key` names the resource, which
/// [`FakeFeishu::put_resource`] makes downloadable.
pub fn file_event(
    event_id: &str,
    message_id: &str,
    chat_id: &str,
    sender_open_id: &str,
    key: &str,
    file_name: &str,
) -> Value {
    let mut v = text_event(
        event_id,
        message_id,
        chat_id,
        "p2p",
        sender_open_id,
        "",
        &[],
    );
    let (kind, content) = if file_name.is_empty() {
        ("image", json!({ "image_key": key }))
    } else {
        ("file", json!({ "file_key": key, "file_name": file_name }))
    };
    v["event"]["message"]["message_type"] = json!(kind);
    v["event"]["message"]["content"] = json!(content.to_string());
    v
}

/// A `card.action.trigger` event: `operator` pressed a button whose callback value is `value`
/// on card `message_id` in `chat_id`.
pub fn card_action_event(
    event_id: &str,
    operator: &str,
    chat_id: &str,
    message_id: &str,
    value: Value,
) -> Value {
    json!({
        "schema": "2.0",
        "header": {
            "event_id": event_id,
            "event_type": "card.action.trigger",
            "create_time": now_ms().to_string(),
            "app_id": APP_ID,
            "tenant_key": "fake-tenant",
        },
        "event": {
            "operator": { "open_id": operator, "user_id": "", "tenant_key": "fake-tenant" },
            "token": format!("c-{event_id}"),
            "action": {
                "tag": "button",
                "value": value,
                "name": "",
                "form_value": {},
            },
            "host": "im_message",
            "delivery_type": "",
            "context": { "open_message_id": message_id, "open_chat_id": chat_id, "url": "" },
        },
    })
}

/// The callback values of the buttons of a card (JSON 2.0 `behaviors`, or 1.0 `value`).
pub fn button_values(card: &Value) -> Vec<Value> {
    fn walk(v: &Value, out: &mut Vec<Value>) {
        match v {
            Value::Object(m) => {
                if m.get("tag").and_then(Value::as_str) == Some("button") {
                    if let Some(b) = m.get("behaviors").and_then(Value::as_array) {
                        out.extend(b.iter().filter_map(|x| x.get("value").cloned()));
                    } else if let Some(v) = m.get("value") {
                        out.push(v.clone());
                    }
                    return;
                }
                m.values().for_each(|x| walk(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(card, &mut out);
    out
}

impl FakeFeishu {
    /// Starts the fake for this app on two ephemeral ports of 127.0.0.1 (HTTP and websocket);
    /// both are bound before this returns.
    pub fn start(app_id: &str, app_secret: &str) -> FakeFeishu {
        let bind = || {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the fake Feishu");
            l.set_nonblocking(true).expect("non-blocking socket");
            l
        };
        let (http, ws) = (bind(), bind());
        let addr = http.local_addr().expect("HTTP address");
        let ws_addr = ws.local_addr().expect("websocket address");
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                ws_addr,
                app_id: app_id.to_string(),
                app_secret: app_secret.to_string(),
                ping_interval: 1,
                silent: false,
                tokens: HashSet::new(),
                token_calls: 0,
                next_token: 1,
                discoveries: 0,
                connections: 0,
                live: Vec::new(),
                calls: Vec::new(),
                sent: Vec::new(),
                uploads: Vec::new(),
                resources: HashMap::new(),
                acks: Vec::new(),
                pings: Vec::new(),
                failures: VecDeque::new(),
                removed: HashSet::new(),
                chat_modes: HashMap::new(),
                messages: HashMap::new(),
                pins: Vec::new(),
                uuids: HashMap::new(),
                next_id: 1,
                next_seq: 1,
                pushed: Vec::new(),
                frames: HashMap::new(),
            }),
        });
        let (shutdown, stopped) = oneshot::channel();
        let thread_shared = Arc::clone(&shared);
        let thread = crate::fake_thread("fake-feishu", move || {
            serve(http, ws, thread_shared, stopped)
        });
        FakeFeishu {
            addr,
            shared,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    /// The API base: `http://127.0.0.1:PORT` (the gateway's `[gateway.feishu] api_url`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The `PingInterval` handed out from now on (seconds).
    pub fn set_ping_interval(&self, secs: i64) {
        self.shared.lock().ping_interval = secs;
    }

    /// Stops (or resumes) answering pings: a client with a pong watchdog reconnects.
    pub fn silence(&self, silent: bool) {
        self.shared.lock().silent = silent;
    }

    /// Pushes an event to the newest live connection (or the next one to connect); returns its
    /// number, for [`FakeFeishu::acks_of`].
    pub fn push_event(&self, event: &Value) -> usize {
        self.push_event_split(event, 1)
    }

    /// Like [`FakeFeishu::push_event`], in `parts` fragments (sent last one first).
    pub fn push_event_split(&self, event: &Value, parts: usize) -> usize {
        let mut st = self.shared.lock();
        let m = &event["event"]["message"];
        if let (Some(chat), Some(kind)) = (m["chat_id"].as_str(), m["chat_type"].as_str()) {
            let mode = if kind == "p2p" { "p2p" } else { "group" };
            st.chat_modes.insert(chat.to_string(), mode.to_string());
        }
        st.pushed.push(Pushed {
            payload: event.to_string().into_bytes(),
            parts: parts.max(1),
            pushes: 0,
            last_push: None,
            acked: false,
        });
        let n = st.pushed.len() - 1;
        deliver(&mut st, n);
        n
    }

    /// Drops every live connection (no close frame, as a network failure would).
    pub fn drop_connections(&self) {
        let mut st = self.shared.lock();
        for (_, tx) in st.live.drain(..) {
            let _ = tx.send(Out::Drop);
        }
    }

    /// Makes every token handed out so far invalid (code 99991663), as if it had expired.
    pub fn expire_tokens(&self) {
        self.shared.lock().tokens.clear();
    }

    /// The bot leaves `chat`: sends and edits there answer 230002.
    pub fn remove_bot(&self, chat: &str) {
        self.shared.lock().removed.insert(chat.to_string());
    }

    /// The mode `GET /open-apis/im/v1/chats/{chat}` reports (`p2p`, `group`, `topic`).
    pub fn set_chat_mode(&self, chat: &str, mode: &str) {
        self.shared
            .lock()
            .chat_modes
            .insert(chat.to_string(), mode.to_string());
    }

    /// The next request whose path contains `path` gets HTTP `status` and `{"code": code}`
    /// instead of its answer.
    pub fn fail_next(&self, path: &str, status: u16, code: i64) {
        self.shared.lock().failures.push_back(Failure {
            path: path.to_string(),
            status,
            code,
        });
    }

    /// Endpoint discoveries so far.
    pub fn discoveries(&self) -> usize {
        self.shared.lock().discoveries
    }

    /// Token requests so far.
    pub fn token_calls(&self) -> usize {
        self.shared.lock().token_calls
    }

    /// Websocket connections accepted so far, and the live ones now.
    pub fn connections(&self) -> (u64, usize) {
        let mut st = self.shared.lock();
        st.live.retain(|(_, tx)| !tx.is_closed());
        (st.connections, st.live.len())
    }

    pub fn calls(&self) -> Vec<Call> {
        self.shared.lock().calls.clone()
    }

    pub fn sent(&self) -> Vec<Sent> {
        self.shared.lock().sent.clone()
    }

    /// The ids of the messages pinned in `chat` now, in the order they were pinned (the last
    /// one pinned last).
    pub fn pinned(&self, chat: &str) -> Vec<String> {
        self.shared
            .lock()
            .pins
            .iter()
            .filter(|(c, _, _)| c == chat)
            .map(|(_, id, _)| id.clone())
            .collect()
    }

    /// Makes resource `key` of message `message_id` downloadable with `data`.
    pub fn put_resource(&self, message_id: &str, key: &str, data: &[u8]) {
        self.shared
            .lock()
            .resources
            .insert((message_id.to_string(), key.to_string()), data.to_vec());
    }

    pub fn uploads(&self) -> Vec<Upload> {
        self.shared.lock().uploads.clone()
    }

    pub fn pings(&self) -> Vec<Ping> {
        self.shared.lock().pings.clone()
    }

    pub fn acks(&self) -> Vec<Ack> {
        self.shared.lock().acks.clone()
    }

    /// The acknowledgements of pushed event `event`.
    pub fn acks_of(&self, event: usize) -> Vec<Ack> {
        self.acks()
            .into_iter()
            .filter(|a| a.event == event)
            .collect()
    }

    /// How many times event `event` was pushed.
    pub fn pushes_of(&self, event: usize) -> u32 {
        self.shared.lock().pushed.get(event).map_or(0, |p| p.pushes)
    }

    /// Polls `pred` until it holds (true) or `timeout` passes (false).
    pub fn wait_until(&self, timeout: Duration, pred: impl Fn(&FakeFeishu) -> bool) -> bool {
        crate::poll_until(timeout, || pred(self))
    }

    /// Waits until [`FakeFeishu::sent`] satisfies `pred` and returns it; panics after 20 s
    /// with what was sent.
    pub fn wait_sent(&self, what: &str, pred: impl Fn(&[Sent]) -> bool) -> Vec<Sent> {
        crate::wait_records(what, || self.sent(), pred)
    }
}

impl Drop for FakeFeishu {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Pushes event `n` to the newest live connection, if there is one.
fn deliver(st: &mut State, n: usize) {
    st.live.retain(|(_, tx)| !tx.is_closed());
    let Some((_, tx)) = st.live.last().map(|(c, tx)| (*c, tx.clone())) else {
        return;
    };
    let seq = st.next_seq;
    st.next_seq += 1;
    let Some(p) = st.pushed.get_mut(n) else {
        return;
    };
    let push = p.pushes;
    let id = format!("fake-msg-{n}-{push}");
    let size = p.payload.len().div_ceil(p.parts).max(1);
    let chunks: Vec<Vec<u8>> = p.payload.chunks(size).map(<[u8]>::to_vec).collect();
    let sum = chunks.len();
    // Last fragment first: a client must reassemble by `seq`, not by arrival.
    for (i, c) in chunks.into_iter().enumerate().rev() {
        let frame = Frame {
            seq_id: seq,
            log_id: 1000 + seq,
            service: SERVICE_ID,
            method: 1,
            payload: Some(c),
            ..Default::default()
        }
        .with_headers(&[
            ("type", "event".into()),
            ("message_id", id.clone()),
            ("sum", sum.to_string()),
            ("seq", i.to_string()),
            ("trace_id", format!("trace-{n}-{push}")),
            ("timestamp", now_ms().to_string()),
        ]);
        let _ = tx.send(Out::Binary(frame.encode_to_vec()));
    }
    p.pushes += 1;
    p.last_push = Some(Instant::now());
    st.frames.insert(id, (n, push, Instant::now()));
}

/// Pushes what waits for a connection, and again what was not acknowledged in time.
fn redeliver(st: &mut State) {
    let due: Vec<usize> = st
        .pushed
        .iter()
        .enumerate()
        .filter(|(_, p)| {
            !p.acked
                && match p.last_push {
                    None => true,
                    Some(t) => p.pushes < MAX_PUSHES && t.elapsed() >= ACK_DEADLINE,
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
        eprintln!("fake Feishu: cannot use the listening sockets");
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
                crate::spawn_http(stream, service, "fake Feishu");
            }
            accepted = ws.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                tokio::spawn(connection(stream, Arc::clone(&shared)));
            }
        }
    }
}

/// One long connection: pongs for pings, pushed events out, acknowledgements recorded.
async fn connection(stream: tokio::net::TcpStream, shared: Arc<Shared>) {
    let ws = match tokio_tungstenite::accept_async(stream).await {
        Ok(ws) => ws,
        Err(e) => {
            eprintln!("fake Feishu: websocket handshake failed: {e}");
            return;
        }
    };
    let (mut sink, mut source) = ws.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Out>();
    let number = {
        let mut st = shared.lock();
        st.connections += 1;
        let n = st.connections;
        st.live.push((n, tx));
        redeliver(&mut st);
        n
    };
    loop {
        tokio::select! {
            out = rx.recv() => match out {
                Some(Out::Binary(b)) => {
                    if sink.send(WsMessage::Binary(b)).await.is_err() {
                        break;
                    }
                }
                Some(Out::Drop) | None => break,
            },
            m = source.next() => {
                let bytes = match m {
                    Some(Ok(WsMessage::Binary(b))) => b,
                    Some(Ok(WsMessage::Close(_)) | Err(_)) | None => break,
                    Some(Ok(other)) => {
                        eprintln!("fake Feishu: a non-binary message on the long connection: {other:?}");
                        continue;
                    }
                };
                let frame = match Frame::decode(bytes.as_slice()) {
                    Ok(f) => f,
                    Err(e) => {
                        eprintln!("fake Feishu: a frame that does not decode: {e}");
                        continue;
                    }
                };
                let pong = {
                    let mut st = shared.lock();
                    on_client_frame(&mut st, frame, number)
                };
                if let Some(p) = pong
                    && sink.send(WsMessage::Binary(p)).await.is_err()
                {
                    break;
                }
            }
        }
    }
    shared.lock().live.retain(|(n, _)| *n != number);
}

fn client_config(st: &State) -> Value {
    json!({
        "ReconnectCount": -1,
        "ReconnectInterval": 1,
        "ReconnectNonce": 0,
        "PingInterval": st.ping_interval,
    })
}

/// Records a frame from the client; returns the pong to send, if any.
fn on_client_frame(st: &mut State, frame: Frame, connection: u64) -> Option<Vec<u8>> {
    match (frame.method, frame.header("type")) {
        (0, Some("ping")) => {
            let service = frame.service;
            st.pings.push(Ping { frame, connection });
            if st.silent {
                return None;
            }
            let pong = Frame {
                service,
                method: 0,
                payload: Some(client_config(st).to_string().into_bytes()),
                ..Default::default()
            }
            .with_headers(&[("type", "pong".into())]);
            Some(pong.encode_to_vec())
        }
        (1, _) => {
            let id = frame.header("message_id").unwrap_or_default().to_string();
            let Some(&(event, push, at)) = st.frames.get(&id) else {
                eprintln!("fake Feishu: an acknowledgement of unknown frame {id:?}");
                return None;
            };
            let payload = frame
                .payload
                .as_deref()
                .and_then(|p| serde_json::from_slice(p).ok())
                .unwrap_or(Value::Null);
            if let Some(p) = st.pushed.get_mut(event) {
                p.acked = true;
            }
            st.acks.push(Ack {
                event,
                push,
                frame,
                payload,
                latency: at.elapsed(),
            });
            None
        }
        _ => {
            eprintln!("fake Feishu: an unexpected frame from the client: {frame:?}");
            None
        }
    }
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

fn code(status: u16, code: i64, msg: &str) -> Response<Body> {
    reply(status, &json!({ "code": code, "msg": msg }))
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
        Err(e) => return Ok(code(400, 9499, &format!("body: {e}"))),
    };
    let mut files = Vec::new();
    let body = if content_type
        .to_ascii_lowercase()
        .starts_with("multipart/form-data")
    {
        let Some(parts) = boundary(&content_type).and_then(|b| parse_multipart(&bytes, &b)) else {
            return Ok(code(400, 9499, "bad multipart body"));
        };
        let mut fields = serde_json::Map::new();
        for p in parts {
            if p.filename.is_some() {
                files.push(p);
            } else {
                fields.insert(
                    p.name.clone(),
                    Value::String(String::from_utf8_lossy(&p.data).into_owned()),
                );
            }
        }
        Value::Object(fields)
    } else if bytes.is_empty() {
        Value::Null
    } else {
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) => v,
            Err(e) => return Ok(code(400, 9499, &format!("invalid JSON body: {e}"))),
        }
    };

    let mut st = shared.lock();
    st.calls.push(Call {
        method: method.to_string(),
        path: path.clone(),
        query: query.clone(),
        body: body.clone(),
    });
    if let Some(i) = st.failures.iter().position(|f| path.contains(&f.path)) {
        let f = st.failures.remove(i);
        if let Some(f) = f {
            let mut r = code(f.status, f.code, "injected failure");
            if f.status == 429 || f.code == 99991400 {
                r.headers_mut()
                    .insert("x-ogw-ratelimit-reset", HeaderValue::from_static("1"));
            }
            return Ok(r);
        }
    }
    if method == Method::POST && path == "/callback/ws/endpoint" {
        st.discoveries += 1;
        if body["AppID"] != st.app_id.as_str() || body["AppSecret"] != st.app_secret.as_str() {
            return Ok(code(200, 1000040351, "app id or secret is wrong"));
        }
        let n = st.discoveries;
        let url = format!(
            "ws://{}/ws?fpid=493&device_id=fake-device-{n}&service_id={SERVICE_ID}",
            st.ws_addr
        );
        let data = json!({ "URL": url, "ClientConfig": client_config(&st) });
        return Ok(reply(200, &json!({ "code": 0, "msg": "ok", "data": data })));
    }
    if method == Method::POST && path == "/open-apis/auth/v3/tenant_access_token/internal" {
        st.token_calls += 1;
        if body["app_id"] != st.app_id.as_str() || body["app_secret"] != st.app_secret.as_str() {
            return Ok(code(400, 10014, "app secret invalid"));
        }
        let token = format!("t-fake-{}", st.next_token);
        st.next_token += 1;
        st.tokens.insert(token.clone());
        return Ok(reply(
            200,
            &json!({ "code": 0, "msg": "ok", "tenant_access_token": token, "expire": 7200 }),
        ));
    }
    let Some(rest) = path.strip_prefix("/open-apis/") else {
        return Ok(code(404, 404, "404 page not found"));
    };
    let token = auth.strip_prefix("Bearer ").unwrap_or_default();
    if !st.tokens.contains(token) {
        return Ok(code(
            400,
            99991663,
            "Invalid access token for authorization. Please make a request with token attached.",
        ));
    }
    let segments: Vec<&str> = rest.split('/').collect();
    Ok(match (&method, segments.as_slice()) {
        (&Method::GET, ["bot", "v3", "info"]) => reply(
            200,
            &json!({ "code": 0, "msg": "ok", "bot": {
                "activate_status": 2, "app_name": "clibot-test", "avatar_url": "",
                "ip_white_list": [], "open_id": BOT_OPEN_ID,
            }}),
        ),
        (&Method::GET, ["im", "v1", "messages", id, "resources", key]) => {
            let kind = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("type="))
                .unwrap_or_default();
            match st.resources.get(&(id.to_string(), key.to_string())) {
                Some(data) if matches!(kind, "image" | "file") => {
                    let mut r = Response::new(Full::new(Bytes::from(data.clone())));
                    r.headers_mut().insert(
                        CONTENT_TYPE,
                        HeaderValue::from_static("application/octet-stream"),
                    );
                    r
                }
                Some(_) => code(400, 234001, "Invalid request param: type"),
                None => code(400, 234003, "File not in msg."),
            }
        }
        (&Method::GET, ["im", "v1", "chats", chat]) => match st.chat_modes.get(*chat) {
            Some(mode) => reply(
                200,
                &json!({ "code": 0, "msg": "success", "data": { "chat_mode": mode, "name": "" } }),
            ),
            None => code(400, 232010, "chat not exist"),
        },
        (&Method::POST, ["im", "v1", "messages"]) => create(&mut st, &query, &body, bytes.len()),
        (&Method::POST, ["im", "v1", "messages", id, "reply"]) => {
            reply_to(&mut st, id, &body, bytes.len())
        }
        (&Method::PATCH, ["im", "v1", "messages", id]) => patch(&mut st, id, &body, bytes.len()),
        (&Method::POST, ["im", "v1", "pins"]) => pin(&mut st, &body),
        (&Method::DELETE, ["im", "v1", "pins", id]) => unpin(&mut st, id),
        (&Method::POST, ["im", "v1", "files"]) => upload(&mut st, &body, files),
        (&Method::POST, ["im", "v1", "images"]) => upload_image(&mut st, &body, files),
        _ => code(404, 404, "404 page not found"),
    })
}

fn query_param<'a>(query: &'a str, key: &str) -> Option<&'a str> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then_some(v)
    })
}

/// `content` parsed from its JSON string, or the 230001 answer that refuses it.
fn content_of(body: &Value) -> Result<Value, Box<Response<Body>>> {
    let Some(s) = body["content"].as_str() else {
        return Err(Box::new(code(
            400,
            230001,
            "invalid content: content must be a JSON string",
        )));
    };
    serde_json::from_str(s)
        .map_err(|e| Box::new(code(400, 230001, &format!("invalid content: {e}"))))
}

fn shared_card(card: &Value) -> bool {
    card["config"]["update_multi"] == true
}

fn create(st: &mut State, query: &str, body: &Value, size: usize) -> Response<Body> {
    let id_type = query_param(query, "receive_id_type").unwrap_or_default();
    if !["chat_id", "open_id", "union_id", "user_id", "email"].contains(&id_type) {
        return code(400, 99992402, "field validation failed: receive_id_type");
    }
    let chat = body["receive_id"].as_str().unwrap_or_default().to_string();
    if chat.is_empty() {
        return code(400, 230001, "invalid receive_id");
    }
    post(st, chat, id_type, String::new(), body, size)
}

/// `POST im/v1/messages/{id}/reply`: a reply to one of the bot's messages, in its chat; with
/// `reply_in_thread` it goes to (or starts) the thread that message heads or is in.
fn reply_to(st: &mut State, parent: &str, body: &Value, size: usize) -> Response<Body> {
    let Some(m) = st.messages.get(parent) else {
        return code(400, 230011, "The message was withdrawn or does not exist.");
    };
    let chat = m.chat.clone();
    let root = match (body["reply_in_thread"].as_bool(), m.root.is_empty()) {
        (Some(true), true) => parent.to_string(),
        (Some(true), false) => m.root.clone(),
        _ => String::new(),
    };
    post(st, chat, "chat_id", root, body, size)
}

/// Sends a message to `chat` (in the thread `root` heads, when not empty).
fn post(
    st: &mut State,
    chat: String,
    id_type: &str,
    root: String,
    body: &Value,
    size: usize,
) -> Response<Body> {
    if st.removed.contains(&chat) {
        return code(400, 230002, "The bot can not be outside the group.");
    }
    let msg_type = body["msg_type"].as_str().unwrap_or_default().to_string();
    let content = match content_of(body) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let (limit, ok) = match msg_type.as_str() {
        "text" => (
            TEXT_LIMIT,
            content["text"].as_str().is_some_and(|t| !t.is_empty()),
        ),
        "interactive" => (CARD_LIMIT, content.is_object()),
        // Rich text: a locale (`zh_cn`, `en_us`, …) holding rows of elements.
        "post" => (
            CARD_LIMIT,
            content.as_object().is_some_and(|locales| {
                !locales.is_empty()
                    && locales.values().all(|l| {
                        l["content"].as_array().is_some_and(|rows| {
                            rows.iter().all(|r| {
                                r.as_array().is_some_and(|els| {
                                    els.iter().all(|e| e["tag"].as_str().is_some())
                                })
                            })
                        })
                    })
            }),
        ),
        "image" => (
            TEXT_LIMIT,
            content["image_key"]
                .as_str()
                .is_some_and(|k| st.uploads.iter().any(|u| u.file_key == k)),
        ),
        "file" => (
            TEXT_LIMIT,
            content["file_key"]
                .as_str()
                .is_some_and(|k| st.uploads.iter().any(|u| u.file_key == k)),
        ),
        _ => (0, false),
    };
    if !ok {
        return code(
            400,
            230001,
            &format!("invalid content for msg_type {msg_type:?}"),
        );
    }
    if size > limit {
        return code(
            400,
            230025,
            "The length of the message content reaches its limit.",
        );
    }
    let uuid = body["uuid"].as_str().unwrap_or_default().to_string();
    if let Some(id) = st.uuids.get(&uuid).filter(|_| !uuid.is_empty()) {
        // Sent at most once per uuid: the first message's id again.
        let id = id.clone();
        return reply(
            200,
            &json!({ "code": 0, "msg": "success", "data": { "message_id": id } }),
        );
    }
    let id = format!("om_fake{:08}", st.next_id);
    st.next_id += 1;
    if !uuid.is_empty() {
        st.uuids.insert(uuid.clone(), id.clone());
    }
    st.messages.insert(
        id.clone(),
        Message {
            chat: chat.clone(),
            msg_type: msg_type.clone(),
            content: content.clone(),
            root: root.clone(),
        },
    );
    st.sent.push(Sent {
        kind: "create".into(),
        message_id: id.clone(),
        chat: chat.clone(),
        receive_id_type: id_type.to_string(),
        msg_type: msg_type.clone(),
        content,
        uuid,
        root: root.clone(),
    });
    let thread = if root.is_empty() {
        String::new()
    } else {
        format!("omt_{}", root.trim_start_matches("om_"))
    };
    reply(
        200,
        &json!({ "code": 0, "msg": "success", "data": {
            "message_id": id, "chat_id": chat, "msg_type": msg_type,
            "root_id": root, "parent_id": root, "thread_id": thread,
            "create_time": now_ms().to_string(), "sender": { "id": APP_ID, "id_type": "app_id", "sender_type": "app" },
        }}),
    )
}

fn patch(st: &mut State, id: &str, body: &Value, size: usize) -> Response<Body> {
    let Some(m) = st.messages.get(id) else {
        return code(400, 230001, "invalid message_id");
    };
    if st.removed.contains(&m.chat) {
        return code(400, 230002, "The bot can not be outside the group.");
    }
    if m.msg_type != "interactive" {
        return code(400, 230001, "This message is NOT a card.");
    }
    let card = match content_of(body) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    if !shared_card(&m.content) || !shared_card(&card) {
        return code(
            400,
            230001,
            "only shared cards (config.update_multi: true, before and after) can be updated",
        );
    }
    if size > CARD_LIMIT {
        return code(
            400,
            230025,
            "The length of the message content reaches its limit.",
        );
    }
    let chat = m.chat.clone();
    if let Some(m) = st.messages.get_mut(id) {
        m.content = card.clone();
    }
    st.sent.push(Sent {
        kind: "patch".into(),
        message_id: id.to_string(),
        chat,
        receive_id_type: String::new(),
        msg_type: "interactive".into(),
        content: card,
        uuid: String::new(),
        root: String::new(),
    });
    reply(200, &json!({ "code": 0, "msg": "success", "data": {} }))
}

/// The chat of message `id` that may be pinned or unpinned, or the answer that refuses it.
fn pinnable(st: &State, id: &str) -> Result<String, Box<Response<Body>>> {
    let Some(m) = st.messages.get(id) else {
        return Err(Box::new(code(400, 230001, "invalid message_id")));
    };
    if st.removed.contains(&m.chat) {
        return Err(Box::new(code(
            400,
            230002,
            "The bot can not be outside the group.",
        )));
    }
    Ok(m.chat.clone())
}

/// `POST /open-apis/im/v1/pins`: pins `message_id` in its chat; a pinned one answers the pin
/// it already has.
fn pin(st: &mut State, body: &Value) -> Response<Body> {
    let id = body["message_id"].as_str().unwrap_or_default().to_string();
    let chat = match pinnable(st, &id) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let create_time = match st.pins.iter().find(|(_, p, _)| *p == id) {
        Some((_, _, t)) => t.clone(),
        None => {
            let t = now_ms().to_string();
            st.pins.push((chat.clone(), id.clone(), t.clone()));
            t
        }
    };
    reply(
        200,
        &json!({ "code": 0, "msg": "success", "data": { "pin": {
            "message_id": id, "chat_id": chat, "operator_id": st.app_id,
            "operator_id_type": "app_id", "create_time": create_time,
        }}}),
    )
}

/// `DELETE /open-apis/im/v1/pins/{id}`.
fn unpin(st: &mut State, id: &str) -> Response<Body> {
    if let Err(r) = pinnable(st, id) {
        return *r;
    }
    st.pins.retain(|(_, p, _)| p != id);
    reply(200, &json!({ "code": 0, "msg": "success", "data": {} }))
}

fn upload(st: &mut State, fields: &Value, files: Vec<Part>) -> Response<Body> {
    let file_type = fields["file_type"].as_str().unwrap_or_default();
    let file_name = fields["file_name"].as_str().unwrap_or_default();
    let Some(file) = files.into_iter().find(|f| f.name == "file") else {
        return code(400, 234001, "Invalid request param: file is required");
    };
    if !["opus", "mp4", "pdf", "doc", "xls", "ppt", "stream"].contains(&file_type)
        || file_name.is_empty()
    {
        return code(400, 234001, "Invalid request param: file_type or file_name");
    }
    if file.data.is_empty() {
        return code(400, 234010, "File's size can't be 0.");
    }
    let key = format!("file_v2_fake{:04}", st.next_id);
    st.next_id += 1;
    st.uploads.push(Upload {
        file_key: key.clone(),
        file_type: file_type.to_string(),
        file_name: file_name.to_string(),
        data: file.data,
    });
    reply(
        200,
        &json!({ "code": 0, "msg": "success", "data": { "file_key": key } }),
    )
}

/// `POST /open-apis/im/v1/images`: `image_type` `message` and an `image` part (PNG, JPEG, …);
/// kept among the uploads with `file_type` "image" and its `image_key`.
fn upload_image(st: &mut State, fields: &Value, files: Vec<Part>) -> Response<Body> {
    if fields["image_type"].as_str() != Some("message") {
        return code(400, 234001, "Invalid request param: image_type");
    }
    let Some(image) = files.into_iter().find(|f| f.name == "image") else {
        return code(400, 234001, "Invalid request param: image is required");
    };
    let png = image.data.starts_with(b"\x89PNG\r\n\x1a\n");
    if !png && !image.data.starts_with(&[0xff, 0xd8, 0xff]) {
        return code(400, 234011, "Can't recognize image format.");
    }
    let key = format!("img_v3_fake{:04}", st.next_id);
    st.next_id += 1;
    st.uploads.push(Upload {
        file_key: key.clone(),
        file_type: "image".into(),
        file_name: image.filename.unwrap_or_default(),
        data: image.data,
    });
    reply(
        200,
        &json!({ "code": 0, "msg": "success", "data": { "image_key": key } }),
    )
}

/// A part of a `multipart/form-data` body.
struct Part {
    name: String,
    filename: Option<String>,
    data: Vec<u8>,
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
    haystack
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

fn disposition(header: &str, key: &str) -> Option<String> {
    header.split(';').skip(1).find_map(|param| {
        let (k, v) = param.trim().split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case(key)
            .then(|| v.trim().trim_matches('"').to_string())
    })
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
        let (mut name, mut filename) = (None, None);
        for line in head.lines() {
            if let Some((k, v)) = line.split_once(':')
                && k.trim().eq_ignore_ascii_case("content-disposition")
            {
                name = disposition(v, "name");
                filename = disposition(v, "filename");
            }
        }
        parts.push(Part {
            name: name?,
            filename,
            data: part.get(head_end + 4..)?.to_vec(),
        });
        pos = end + next.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HOST;
    use tokio::net::TcpStream;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    /// One request with hyper's client and a JSON body (none for `Null`): the status and the
    /// JSON answer.
    async fn call(
        fake: &FakeFeishu,
        method: &str,
        path: &str,
        token: &str,
        body: Value,
    ) -> (u16, Value) {
        let stream = TcpStream::connect(fake.addr).await.expect("connect");
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .expect("handshake");
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let bytes = if body.is_null() {
            Bytes::new()
        } else {
            Bytes::from(body.to_string())
        };
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header(HOST, fake.addr.to_string())
            .header(AUTHORIZATION, format!("Bearer {token}"))
            .header(CONTENT_TYPE, "application/json; charset=utf-8")
            .body(Full::new(bytes))
            .expect("request");
        let response = sender.send_request(request).await.expect("send");
        let status = response.status().as_u16();
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        (status, serde_json::from_slice(&bytes).expect("JSON answer"))
    }

    #[test]
    fn pins_and_card_updates_that_keep_their_buttons() {
        let fake = FakeFeishu::start(APP_ID, APP_SECRET);
        let card = |buttons: &[&str]| {
            let buttons: Vec<Value> = buttons
                .iter()
                .map(|b| {
                    json!({ "tag": "button", "text": { "tag": "plain_text", "content": b },
                                 "behaviors": [{ "type": "callback", "value": { "d": b } }] })
                })
                .collect();
            json!({ "schema": "2.0", "config": { "update_multi": true },
                    "body": { "elements": buttons } })
        };
        runtime().block_on(async {
            let credentials = json!({ "app_id": APP_ID, "app_secret": APP_SECRET });
            let path = "/open-apis/auth/v3/tenant_access_token/internal";
            let (_, auth) = call(&fake, "POST", path, "", credentials).await;
            let token = auth["tenant_access_token"].as_str().expect("a token");
            let (status, sent) = call(
                &fake,
                "POST",
                "/open-apis/im/v1/messages?receive_id_type=chat_id",
                token,
                json!({ "receive_id": "oc_board", "msg_type": "interactive",
                        "content": card(&["stop"]).to_string() }),
            )
            .await;
            assert_eq!((status, &sent["code"]), (200, &json!(0)), "{sent}");
            let id = sent["data"]["message_id"].as_str().expect("message_id");

            let pin = json!({ "message_id": id });
            let pins = "/open-apis/im/v1/pins";
            let (status, first) = call(&fake, "POST", pins, token, pin.clone()).await;
            assert_eq!((status, &first["code"]), (200, &json!(0)), "{first}");
            let p = &first["data"]["pin"];
            assert_eq!(
                (&p["message_id"], &p["chat_id"], &p["operator_id"]),
                (&json!(id), &json!("oc_board"), &json!(APP_ID))
            );
            assert_eq!(p["operator_id_type"], "app_id");
            assert!(p["create_time"].as_str().is_some_and(|t| t.len() >= 13));
            let (_, again) = call(&fake, "POST", pins, token, pin.clone()).await;
            assert_eq!(again, first, "a pinned message answers its pin");
            assert_eq!(fake.pinned("oc_board"), [id]);
            let invalid = (400, json!({ "code": 230001, "msg": "invalid message_id" }));
            let nope = json!({ "message_id": "om_nope" });
            assert_eq!(call(&fake, "POST", pins, token, nope).await, invalid);
            let (status, e) = call(&fake, "POST", pins, "t-wrong", pin.clone()).await;
            assert_eq!((status, &e["code"]), (400, &json!(99991663)));

            // An update of the card with new buttons.
            let (status, patched) = call(
                &fake,
                "PATCH",
                &format!("/open-apis/im/v1/messages/{id}"),
                token,
                json!({ "content": card(&["stop", "log"]).to_string() }),
            )
            .await;
            assert_eq!((status, &patched["code"]), (200, &json!(0)), "{patched}");

            let unpin = format!("{pins}/{id}");
            let (status, done) = call(&fake, "DELETE", &unpin, token, Value::Null).await;
            assert_eq!((status, &done["code"]), (200, &json!(0)), "{done}");
            assert!(fake.pinned("oc_board").is_empty());
            let unknown = format!("{pins}/om_nope");
            assert_eq!(
                call(&fake, "DELETE", &unknown, token, Value::Null).await,
                invalid
            );
            fake.remove_bot("oc_board");
            let (status, e) = call(&fake, "POST", pins, token, pin).await;
            assert_eq!((status, &e["code"]), (400, &json!(230002)));
        });
        let sent = fake.sent();
        let patch = sent.last().expect("the update");
        assert_eq!(
            (patch.kind.as_str(), patch.chat.as_str()),
            ("patch", "oc_board")
        );
        assert_eq!(
            button_values(&patch.content),
            [json!({ "d": "stop" }), json!({ "d": "log" })]
        );
        assert_eq!(patch.content, card(&["stop", "log"]));
    }

    #[test]
    fn button_values_are_found_in_cards_of_both_schemas() {
        let v2 = json!({ "schema": "2.0", "body": { "elements": [
            { "tag": "div" },
            { "tag": "button", "behaviors": [{ "type": "callback", "value": { "d": "a:p:1" } }] },
            { "tag": "column_set", "columns": [{ "elements": [
                { "tag": "button", "behaviors": [{ "type": "callback", "value": { "d": "a:p:2" } }] },
            ]}]},
        ]}});
        assert_eq!(
            button_values(&v2),
            vec![json!({ "d": "a:p:1" }), json!({ "d": "a:p:2" })]
        );
        let v1 = json!({ "elements": [{ "tag": "action", "actions": [
            { "tag": "button", "value": { "k": 1 } },
        ]}]});
        assert_eq!(button_values(&v1), vec![json!({ "k": 1 })]);
    }

    #[test]
    fn multipart_bodies_are_split_into_fields_and_files() {
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"file_type\"\r\n\r\nstream\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"out.txt\"\r\nContent-Type: application/octet-stream\r\n\r\nline 1\r\nline 2\r\n--XyZ--\r\n";
        let parts = parse_multipart(body, "XyZ").expect("parses");
        assert_eq!(parts.len(), 2);
        assert_eq!(
            (
                parts[0].name.as_str(),
                parts[0].filename.as_deref(),
                parts[0].data.as_slice()
            ),
            ("file_type", None, b"stream".as_slice())
        );
        assert_eq!(parts[1].filename.as_deref(), Some("out.txt"));
        assert_eq!(parts[1].data, b"line 1\r\nline 2");
        assert!(parse_multipart(b"junk", "XyZ").is_none());
        assert_eq!(
            boundary("multipart/form-data; boundary=\"XyZ\"").as_deref(),
            Some("XyZ")
        );
    }
}
