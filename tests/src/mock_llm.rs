//! A scripted stand-in for the Anthropic Messages API, the Gemini API and the OpenAI Responses
//! API, so the end-to-end tests can run the real Claude Code, Gemini CLI and Codex CLI offline and
//! deterministically.
//!
//! The server speaks just enough of the Anthropic API for Claude Code: `POST /v1/messages`
//! (streamed as server-sent events when the request says `"stream": true`, plain JSON otherwise)
//! and `POST /v1/messages/count_tokens`. For Gemini CLI (`GOOGLE_GEMINI_BASE_URL`) it speaks
//! `POST /v1beta/models/{model}:streamGenerateContent?alt=sse` (server-sent `data:` chunks),
//! `:generateContent` and `:countTokens`. For Codex CLI it speaks `POST /v1/responses`
//! ([`crate::mock_openai`]); for OpenAI-compatible CLIs (Qwen Code) `POST /v1/chat/completions`
//! ([`crate::mock_chat`]). Which reply a request gets is decided by the same [`Rule`]s for all
//! three, matched against the latest user text, so a test can say "when the user writes RUNBASH,
//! call the shell tool with `touch x`, then say done".
//!
//! The API is synchronous because most end-to-end tests are plain `#[test]` functions: the
//! server runs on its own thread with its own single-threaded tokio runtime and stops when the
//! [`MockLlm`] is dropped.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Channel, Full};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// What a request that matches no rule is answered with.
pub const DEFAULT_REPLY: &str = "OK from the mock model.";

/// The model name reported when a request names none.
const DEFAULT_MODEL: &str = "claude-mock";

/// Pause between two streamed events. Small, but not zero, so the client really sees a stream
/// arriving in pieces (as from the real API) rather than one burst.
const EVENT_DELAY: Duration = Duration::from_millis(5);

/// How large the pieces of a streamed text or tool input are.
pub(crate) const CHUNK_CHARS: usize = 24;

/// One scripted behaviour: when the latest user text contains `trigger`, answer with `reply`.
/// Rules are tried in order; the first match wins.
#[derive(Clone, Debug)]
pub struct Rule {
    /// A substring of the latest user text (case-sensitive).
    pub trigger: String,
    pub reply: Reply,
}

/// What a matching [`Rule`] answers.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A single text block, `stop_reason: end_turn`.
    Text(String),
    /// A `tool_use` block (`stop_reason: tool_use`); when the next request carries the matching
    /// `tool_result`, it is answered with the text `then`.
    Tool {
        name: String,
        input: Value,
        then: String,
    },
}

impl Rule {
    /// A rule answering `trigger` with the text `reply`.
    pub fn text(trigger: impl Into<String>, reply: impl Into<String>) -> Rule {
        Rule {
            trigger: trigger.into(),
            reply: Reply::Text(reply.into()),
        }
    }

    /// A rule answering `trigger` with a call of tool `name`, then with the text `then`.
    pub fn tool(
        trigger: impl Into<String>,
        name: impl Into<String>,
        input: Value,
        then: impl Into<String>,
    ) -> Rule {
        Rule {
            trigger: trigger.into(),
            reply: Reply::Tool {
                name: name.into(),
                input,
                then: then.into(),
            },
        }
    }
}

/// A running mock server on `127.0.0.1`. Dropping it stops the server.
pub struct MockLlm {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// What the server remembers between requests.
#[derive(Default)]
pub(crate) struct State {
    rules: Vec<Rule>,
    /// Bodies of every model request (`/v1/messages`, Gemini `:generateContent` and
    /// `:streamGenerateContent`), in arrival order.
    pub(crate) requests: Vec<Value>,
    /// `METHOD path` of every request, in arrival order.
    paths: Vec<String>,
    /// The `then` text of every tool call handed out, by tool_use (Anthropic) or functionCall
    /// (Gemini) id.
    pending_tools: HashMap<String, String>,
    /// Numbers message and tool call ids, which must be unique within a conversation.
    pub(crate) counter: u64,
    /// How long every model answer waits before its first byte.
    pub(crate) latency: Duration,
    /// How many characters a streamed piece of text (or Anthropic tool input) has, if not
    /// [`CHUNK_CHARS`].
    pub(crate) chunk_chars: Option<usize>,
}

impl State {
    /// A fresh state answering with `rules`.
    pub(crate) fn with_rules(rules: Vec<Rule>) -> State {
        State {
            rules,
            ..State::default()
        }
    }
}

/// A model request taken in: recorded, numbered (`id` is `prefix` and the number), answered by
/// `decide`, and held for the configured latency — what every API the mock speaks does first.
pub(crate) struct Taken {
    pub(crate) id: String,
    pub(crate) completion: Completion,
    pub(crate) chunk_chars: usize,
}

pub(crate) async fn take_request(
    state: &Mutex<State>,
    body: &Value,
    prefix: &str,
    decide: impl FnOnce(&mut State, &Value) -> Completion,
) -> Taken {
    let (taken, latency) = {
        let mut st = lock(state);
        st.requests.push(body.clone());
        st.counter += 1;
        let id = format!("{prefix}{:06}", st.counter);
        let completion = decide(&mut st, body);
        let chunk_chars = st.chunk_chars.unwrap_or(CHUNK_CHARS);
        (
            Taken {
                id,
                completion,
                chunk_chars,
            },
            st.latency,
        )
    };
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    taken
}

/// The model a request names, else `default`.
pub(crate) fn model_of<'a>(body: &'a Value, default: &'a str) -> &'a str {
    body.get("model").and_then(Value::as_str).unwrap_or(default)
}

/// Locks the state even if a handler panicked while holding it: the data stays usable for the
/// assertions that follow.
pub(crate) fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl MockLlm {
    /// Starts the server on an ephemeral port of 127.0.0.1 and returns once it accepts
    /// connections (the socket is bound before this returns, so no request can be refused).
    pub fn start(rules: Vec<Rule>) -> MockLlm {
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").expect("bind the mock LLM to 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("make the mock LLM's socket non-blocking");
        let addr = listener
            .local_addr()
            .expect("the mock LLM's socket address");
        let state = Arc::new(Mutex::new(State::with_rules(rules)));
        let (shutdown, stopped) = oneshot::channel();
        let thread_state = Arc::clone(&state);
        let thread = crate::fake_thread("mock-llm", move || serve(listener, thread_state, stopped));
        MockLlm {
            addr,
            state,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    /// The base URL to give a client, e.g. as `ANTHROPIC_BASE_URL` or `GOOGLE_GEMINI_BASE_URL`
    /// (no trailing slash, no `/v1` or `/v1beta`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bodies of all model requests received so far, oldest first: `/v1/messages` and Gemini
    /// `:generateContent` / `:streamGenerateContent` (including Gemini CLI's side requests, e.g.
    /// its model router's JSON-mode classification).
    pub fn requests(&self) -> Vec<Value> {
        lock(&self.state).requests.clone()
    }

    /// `METHOD path?query` of every request received so far, oldest first, including ones the
    /// mock does not understand (answered 404).
    pub fn paths(&self) -> Vec<String> {
        lock(&self.state).paths.clone()
    }

    /// Makes every later model answer (either API) wait `latency` before its first byte, like a
    /// model thinking, so a test can see the client's busy state (none by default).
    pub fn set_latency(&self, latency: Duration) {
        lock(&self.state).latency = latency;
    }

    /// Makes later streamed answers (either API) come in pieces of `chars` characters instead
    /// of 24; `usize::MAX` streams each text whole, in one event. Gemini CLI 0.61's AfterAgent
    /// `prompt_response` is only the plain reply text when the reply came in one piece.
    pub fn set_chunk_chars(&self, chars: usize) {
        lock(&self.state).chunk_chars = Some(chars);
    }
}

impl Drop for MockLlm {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Accepts connections until told to stop.
async fn serve(
    listener: std::net::TcpListener,
    state: Arc<Mutex<State>>,
    mut stopped: oneshot::Receiver<()>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("mock LLM: cannot use the listening socket: {e}");
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
                        eprintln!("mock LLM: accept failed: {e}");
                        continue;
                    }
                };
                let state = Arc::clone(&state);
                let service = service_fn(move |req| handle(req, Arc::clone(&state)));
                crate::spawn_http(stream, service, "mock LLM");
            }
        }
    }
}

pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// Answers one HTTP request.
async fn handle(
    req: Request<Incoming>,
    state: Arc<Mutex<State>>,
) -> Result<Response<Body>, Infallible> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    // A proxy request (`CONNECT host:443`) has only an authority.
    let path_and_query = req
        .uri()
        .path_and_query()
        .map_or_else(|| req.uri().to_string(), |pq| pq.as_str().to_string());
    lock(&state)
        .paths
        .push(format!("{method} {path_and_query}"));

    let bytes = match req.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            return Ok(error(
                StatusCode::BAD_REQUEST,
                &format!("cannot read body: {e}"),
            ));
        }
    };

    if method == Method::POST
        && let Some((model, call)) = gemini_route(&path)
    {
        return Ok(handle_gemini(&state, model, call, &bytes).await);
    }

    match (&method, path.as_str()) {
        (&Method::POST, "/v1/responses") => {
            Ok(crate::mock_openai::handle_responses(&state, &bytes).await)
        }
        (&Method::POST, "/v1/chat/completions") => {
            Ok(crate::mock_chat::handle_chat(&state, &bytes).await)
        }
        (&Method::GET, "/v1/models") => Ok(crate::mock_chat::models()),
        (&Method::POST, "/v1/messages") => {
            let body: Value = match serde_json::from_slice(&bytes) {
                Ok(v) => v,
                Err(e) => {
                    return Ok(error(
                        StatusCode::BAD_REQUEST,
                        &format!("body is not JSON: {e}"),
                    ));
                }
            };
            let Taken {
                id,
                completion,
                chunk_chars,
            } = take_request(&state, &body, "msg_mock_", decide).await;
            let model = model_of(&body, DEFAULT_MODEL).to_string();
            if body.get("stream").and_then(Value::as_bool) == Some(true) {
                let frames = sse_events(&id, &model, &completion, chunk_chars)
                    .iter()
                    .map(|(event, data)| sse_frame(event, data))
                    .collect();
                let mut r = stream_response(frames);
                // The plan's windows, as a Claude subscription gets them: Claude Code passes
                // them to a status-line command only (and ignores them with an API key).
                let reset = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs())
                    + crate::mock_openai::PRIMARY_RESETS_IN_SECS;
                for (k, v) in [
                    ("anthropic-ratelimit-unified-status", "allowed".to_string()),
                    (
                        "anthropic-ratelimit-unified-5h-utilization",
                        "0.42".to_string(),
                    ),
                    ("anthropic-ratelimit-unified-5h-reset", reset.to_string()),
                    (
                        "anthropic-ratelimit-unified-7d-utilization",
                        "0.30".to_string(),
                    ),
                    (
                        "anthropic-ratelimit-unified-7d-reset",
                        (reset + 86_400).to_string(),
                    ),
                    (
                        "anthropic-ratelimit-unified-representative-claim",
                        "five_hour".to_string(),
                    ),
                    ("anthropic-ratelimit-unified-reset", reset.to_string()),
                ] {
                    if let Ok(v) = HeaderValue::from_str(&v) {
                        r.headers_mut().insert(k, v);
                    }
                }
                Ok(r)
            } else {
                Ok(json_response(
                    StatusCode::OK,
                    &message_json(&id, &model, &completion),
                ))
            }
        }
        (&Method::POST, "/v1/messages/count_tokens") => {
            // A rough figure is enough: the client only displays or budgets with it.
            let tokens = bytes.len() / 4;
            Ok(json_response(
                StatusCode::OK,
                &json!({ "input_tokens": tokens }),
            ))
        }
        (&Method::GET | &Method::HEAD, "/") => Ok(json_response(StatusCode::OK, &json!({}))),
        _ => {
            eprintln!("mock LLM: unhandled {method} {path_and_query}");
            let message = format!("no route for {method} {path}");
            if is_gemini_path(&path) {
                Ok(gemini_error(StatusCode::NOT_FOUND, &message))
            } else {
                Ok(error(StatusCode::NOT_FOUND, &message))
            }
        }
    }
}

/// What one assistant message consists of.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Completion {
    pub(crate) blocks: Vec<Block>,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
}

impl Completion {
    pub(crate) fn text(text: &str) -> Completion {
        Completion {
            blocks: vec![Block::Text(text.to_string())],
        }
    }

    fn stop_reason(&self) -> &'static str {
        if self
            .blocks
            .iter()
            .any(|b| matches!(b, Block::ToolUse { .. }))
        {
            "tool_use"
        } else {
            "end_turn"
        }
    }
}

/// The latest thing the user said in a request: the text of the last `user` message (without
/// the `<system-reminder>` blocks Claude Code adds) and the ids of any tool results in it.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct UserTurn {
    pub(crate) text: String,
    pub(crate) tool_results: Vec<String>,
}

fn latest_user_turn(body: &Value) -> UserTurn {
    let Some(message) = body
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|ms| {
            ms.iter()
                .rev()
                .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        })
    else {
        return UserTurn::default();
    };
    match message.get("content") {
        Some(Value::String(s)) => UserTurn {
            text: s.clone(),
            tool_results: Vec::new(),
        },
        Some(Value::Array(blocks)) => {
            let mut texts = Vec::new();
            let mut tool_results = Vec::new();
            for block in blocks {
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        if let Some(t) = block.get("text").and_then(Value::as_str)
                            && !t.trim_start().starts_with("<system-reminder>")
                        {
                            texts.push(t);
                        }
                    }
                    Some("tool_result") => {
                        if let Some(id) = block.get("tool_use_id").and_then(Value::as_str) {
                            tool_results.push(id.to_string());
                        }
                    }
                    _ => {}
                }
            }
            UserTurn {
                text: texts.join("\n"),
                tool_results,
            }
        }
        _ => UserTurn::default(),
    }
}

/// Picks the reply to a `/v1/messages` request.
fn decide(st: &mut State, body: &Value) -> Completion {
    let turn = latest_user_turn(body);
    let has_tools = body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    decide_turn(st, &turn, has_tools, "toolu_mock_")
}

/// Picks the reply to the user's latest turn, whichever API it came through. `has_tools`: the
/// request offers tools (side requests do not); `id_prefix` starts the ids of tool calls.
pub(crate) fn decide_turn(
    st: &mut State,
    turn: &UserTurn,
    has_tools: bool,
    id_prefix: &str,
) -> Completion {
    // A tool result we asked for: finish that rule with its closing text — unless the same
    // message brings a new request (a call refused at the desk comes back as a result along
    // with the user's next message): that request is answered.
    let closed = turn
        .tool_results
        .iter()
        .find_map(|id| st.pending_tools.remove(id));
    let rule = st
        .rules
        .iter()
        .find(|r| !turn.text.is_empty() && turn.text.contains(&r.trigger))
        .cloned();
    if let Some(then) = closed
        && rule.is_none()
    {
        return Completion::text(&then);
    }
    match rule.map(|r| r.reply) {
        Some(Reply::Text(text)) => Completion::text(&text),
        Some(Reply::Tool { name, input, then }) if has_tools => {
            let id = format!("{id_prefix}{:06}", st.counter);
            st.pending_tools.insert(id.clone(), then);
            Completion {
                blocks: vec![Block::ToolUse { id, name, input }],
            }
        }
        // Side requests (title generation and the like) offer no tools: a tool call there would
        // be an error, so they get plain text.
        Some(Reply::Tool { .. }) | None => Completion::text(DEFAULT_REPLY),
    }
}

/// Usage figures, distinct per kind so that a count that mixes them up shows: input 1000,
/// cache writes 200, cache reads 3000, and `output_tokens` as given.
fn usage(output_tokens: usize) -> Value {
    json!({
        "input_tokens": 1000,
        "cache_creation_input_tokens": 200,
        "cache_read_input_tokens": 3000,
        "output_tokens": output_tokens,
    })
}

/// A message's final output tokens: 4 and 3 per content block (its start said 1).
pub fn output_tokens(blocks: usize) -> usize {
    4 + 3 * blocks
}

/// The non-streaming answer: one `message` object.
fn message_json(id: &str, model: &str, completion: &Completion) -> Value {
    let content: Vec<Value> = completion
        .blocks
        .iter()
        .map(|b| match b {
            Block::Text(text) => json!({ "type": "text", "text": text }),
            Block::ToolUse { id, name, input } => {
                json!({ "type": "tool_use", "id": id, "name": name, "input": input })
            }
        })
        .collect();
    json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": completion.stop_reason(),
        "stop_sequence": null,
        "usage": usage(output_tokens(completion.blocks.len())),
    })
}

/// Splits `s` into pieces of at most `n` characters (never inside a UTF-8 sequence).
pub(crate) fn chunks(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    chars.chunks(n.max(1)).map(|c| c.iter().collect()).collect()
}

/// The streamed answer as `(event name, data)` pairs, in the order the real API sends them.
fn sse_events(
    id: &str,
    model: &str,
    completion: &Completion,
    chunk_chars: usize,
) -> Vec<(&'static str, Value)> {
    let mut events = vec![
        (
            "message_start",
            json!({
                "type": "message_start",
                "message": {
                    "id": id, "type": "message", "role": "assistant", "model": model,
                    "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage(1),
                },
            }),
        ),
        ("ping", json!({ "type": "ping" })),
    ];
    for (index, block) in completion.blocks.iter().enumerate() {
        match block {
            Block::Text(text) => {
                events.push((
                    "content_block_start",
                    json!({ "type": "content_block_start", "index": index,
                            "content_block": { "type": "text", "text": "" } }),
                ));
                for piece in chunks(text, chunk_chars) {
                    events.push((
                        "content_block_delta",
                        json!({ "type": "content_block_delta", "index": index,
                                "delta": { "type": "text_delta", "text": piece } }),
                    ));
                }
            }
            Block::ToolUse { id, name, input } => {
                events.push((
                    "content_block_start",
                    json!({ "type": "content_block_start", "index": index,
                            "content_block": { "type": "tool_use", "id": id, "name": name, "input": {} } }),
                ));
                for piece in chunks(&input.to_string(), chunk_chars) {
                    events.push((
                        "content_block_delta",
                        json!({ "type": "content_block_delta", "index": index,
                                "delta": { "type": "input_json_delta", "partial_json": piece } }),
                    ));
                }
            }
        }
        events.push((
            "content_block_stop",
            json!({ "type": "content_block_stop", "index": index }),
        ));
    }
    events.push((
        "message_delta",
        json!({ "type": "message_delta",
                "delta": { "stop_reason": completion.stop_reason(), "stop_sequence": null },
                "usage": { "output_tokens": output_tokens(completion.blocks.len()) } }),
    ));
    events.push(("message_stop", json!({ "type": "message_stop" })));
    events
}

/// One server-sent event: `event:` line, one `data:` line (JSON never contains a raw newline),
/// blank line.
pub(crate) fn sse_frame(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

/// Streams already framed server-sent events as `text/event-stream`, one frame at a time.
pub(crate) fn stream_response(frames: Vec<String>) -> Response<Body> {
    let (mut tx, body) = Channel::<Bytes, Infallible>::new(4);
    tokio::spawn(async move {
        for frame in frames {
            if tx.send_data(Bytes::from(frame)).await.is_err() {
                return; // the client went away
            }
            tokio::time::sleep(EVENT_DELAY).await;
        }
    });
    let mut response = Response::new(body.boxed());
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    response
        .headers_mut()
        .insert("cache-control", HeaderValue::from_static("no-cache"));
    response
}

pub(crate) fn json_response(status: StatusCode, value: &Value) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(value.to_string())).boxed());
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// An error in the API's own shape, so the client reports it sensibly.
fn error(status: StatusCode, message: &str) -> Response<Body> {
    let kind = if status == StatusCode::NOT_FOUND {
        "not_found_error"
    } else {
        "invalid_request_error"
    };
    json_response(
        status,
        &json!({ "type": "error", "error": { "type": kind, "message": message } }),
    )
}

// --- Gemini API ------------------------------------------------------------------------------

/// The Gemini API methods the mock answers.
#[derive(Clone, Copy, Debug, PartialEq)]
enum GeminiCall {
    Generate,
    StreamGenerate,
    CountTokens,
}

/// `/{version}/models/{model}:{method}` (e.g. `/v1beta/models/gemini-2.5-pro:generateContent`)
/// as `(model, method)`, for the methods the mock answers.
fn gemini_route(path: &str) -> Option<(&str, GeminiCall)> {
    let (version, rest) = path.strip_prefix('/')?.split_once('/')?;
    if !version.starts_with("v1") {
        return None;
    }
    let (model, method) = rest.strip_prefix("models/")?.rsplit_once(':')?;
    if model.is_empty() || model.contains('/') {
        return None;
    }
    let call = match method {
        "generateContent" => GeminiCall::Generate,
        "streamGenerateContent" => GeminiCall::StreamGenerate,
        "countTokens" => GeminiCall::CountTokens,
        _ => return None,
    };
    Some((model, call))
}

/// Whether `path` belongs to the Gemini API, whose errors have Google's shape.
fn is_gemini_path(path: &str) -> bool {
    path.starts_with("/v1beta/") || path.starts_with("/v1alpha/") || path.starts_with("/v1/models")
}

/// Answers one Gemini API request: `:countTokens` with a rough count, the two generate methods
/// with the [`Completion`] the rules pick (streamed as `data:` chunks, or one JSON object).
async fn handle_gemini(
    state: &Mutex<State>,
    model: &str,
    call: GeminiCall,
    bytes: &[u8],
) -> Response<Body> {
    let body: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => {
            return gemini_error(StatusCode::BAD_REQUEST, &format!("body is not JSON: {e}"));
        }
    };
    if call == GeminiCall::CountTokens {
        // A rough figure is enough: the client only budgets its context with it.
        return json_response(StatusCode::OK, &json!({ "totalTokens": bytes.len() / 4 }));
    }
    let Taken {
        id,
        completion,
        chunk_chars,
    } = take_request(state, &body, "mock-response-", decide_gemini).await;
    if call == GeminiCall::StreamGenerate {
        let frames = gemini_chunks(&id, model, &completion, chunk_chars)
            .iter()
            .map(gemini_sse_frame)
            .collect();
        stream_response(frames)
    } else {
        json_response(
            StatusCode::OK,
            &gemini_chunk(&id, model, gemini_parts(&completion), true),
        )
    }
}

/// Picks the reply to a Gemini generate request. JSON-mode requests (Gemini CLI's model router
/// and other side questions, `generationConfig.responseMimeType: application/json`) get a value
/// shaped like their schema; everything else goes through the rules like an Anthropic request.
fn decide_gemini(st: &mut State, body: &Value) -> Completion {
    if let Some(config) = body.get("generationConfig")
        && config.get("responseMimeType").and_then(Value::as_str) == Some("application/json")
    {
        let value = config
            .get("responseJsonSchema")
            .or_else(|| config.get("responseSchema"))
            .map_or_else(|| json!({}), example_of_schema);
        return Completion::text(&value.to_string());
    }
    let turn = gemini_user_turn(body);
    let has_tools = body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|tools| {
            tools.iter().any(|t| {
                t.get("functionDeclarations")
                    .and_then(Value::as_array)
                    .is_some_and(|d| !d.is_empty())
            })
        });
    decide_turn(st, &turn, has_tools, "call_mock_")
}

/// The latest thing the user said in a Gemini request: the text parts of the last `user`
/// content (without the `<session_context>` block Gemini CLI puts before the first prompt, and
/// without thoughts) and the ids of any `functionResponse` parts in it.
fn gemini_user_turn(body: &Value) -> UserTurn {
    let Some(content) = body
        .get("contents")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .rev()
                .find(|c| c.get("role").and_then(Value::as_str).unwrap_or("user") == "user")
        })
    else {
        return UserTurn::default();
    };
    let mut texts = Vec::new();
    let mut tool_results = Vec::new();
    for part in content
        .get("parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if part.get("thought").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        if let Some(t) = part.get("text").and_then(Value::as_str) {
            if !t.trim_start().starts_with("<session_context>") {
                texts.push(t);
            }
        } else if let Some(id) = part
            .get("functionResponse")
            .and_then(|r| r.get("id"))
            .and_then(Value::as_str)
        {
            tool_results.push(id.to_string());
            // Some code paths of Gemini CLI rename a call `<id>` to `<tool name>__<id>`.
            if let Some((_, original)) = id.split_once("__") {
                tool_results.push(original.to_string());
            }
        }
    }
    UserTurn {
        text: texts.join("\n"),
        tool_results,
    }
}

/// A value that satisfies a (Gemini-style, upper- or lower-case `type`) JSON schema: objects
/// with every property, the first enum value (`"user"` if offered, so that a "who speaks next"
/// check hands the turn back), 1 for numbers, `false`, `[]`, or `"mock"`.
pub(crate) fn example_of_schema(schema: &Value) -> Value {
    if let Some(values) = schema.get("enum").and_then(Value::as_array)
        && let Some(first) = values.first()
    {
        let user = json!("user");
        return if values.contains(&user) {
            user
        } else {
            first.clone()
        };
    }
    let kind = match schema.get("type") {
        Some(Value::String(t)) => t.to_ascii_lowercase(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| !t.eq_ignore_ascii_case("null"))
            .unwrap_or("null")
            .to_ascii_lowercase(),
        _ if schema.get("properties").is_some() => "object".into(),
        _ => "string".into(),
    };
    match kind.as_str() {
        "object" => Value::Object(
            schema
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), example_of_schema(v)))
                .collect(),
        ),
        "array" => json!([]),
        "integer" | "number" => schema
            .get("minimum")
            .filter(|m| m.is_number())
            .cloned()
            .unwrap_or_else(|| json!(1)),
        "boolean" => json!(false),
        "null" => Value::Null,
        _ => json!("mock"),
    }
}

/// The parts of a model content: `text`, or `functionCall {id, name, args}` (Gemini CLI sends
/// the id back in the matching `functionResponse`).
fn gemini_parts(completion: &Completion) -> Vec<Value> {
    completion
        .blocks
        .iter()
        .map(|b| match b {
            Block::Text(text) => json!({ "text": text }),
            Block::ToolUse { id, name, input } => {
                json!({ "functionCall": { "id": id, "name": name, "args": input } })
            }
        })
        .collect()
}

/// One `GenerateContentResponse`: the non-streaming answer, or one streamed chunk. Only the last
/// chunk carries the `finishReason` (`STOP`, also after a function call, as the real API does).
fn gemini_chunk(id: &str, model: &str, parts: Vec<Value>, last: bool) -> Value {
    let mut candidate = json!({ "content": { "role": "model", "parts": parts }, "index": 0 });
    if last {
        candidate["finishReason"] = json!("STOP");
    }
    json!({
        "candidates": [candidate],
        "usageMetadata": { "promptTokenCount": 1500, "cachedContentTokenCount": 500, "candidatesTokenCount": 6, "thoughtsTokenCount": 2, "totalTokenCount": 1508 },
        "modelVersion": model,
        "responseId": id,
    })
}

/// The streamed answer: text in pieces of `chunk_chars`, a function call whole.
fn gemini_chunks(id: &str, model: &str, completion: &Completion, chunk_chars: usize) -> Vec<Value> {
    let mut parts: Vec<Value> = Vec::new();
    for block in &completion.blocks {
        match block {
            Block::Text(text) => {
                parts.extend(
                    chunks(text, chunk_chars)
                        .into_iter()
                        .map(|piece| json!({ "text": piece })),
                );
            }
            Block::ToolUse { .. } => {
                parts.extend(gemini_parts(&Completion {
                    blocks: vec![block.clone()],
                }));
            }
        }
    }
    if parts.is_empty() {
        parts.push(json!({ "text": "" }));
    }
    let n = parts.len();
    parts
        .into_iter()
        .enumerate()
        .map(|(i, part)| gemini_chunk(id, model, vec![part], i + 1 == n))
        .collect()
}

/// One server-sent event as Google sends them: a `data:` line and a blank line, CRLF-terminated.
fn gemini_sse_frame(data: &Value) -> String {
    format!("data: {data}\r\n\r\n")
}

/// An error in Google's shape (`{"error": {"code", "message", "status"}}`).
fn gemini_error(status: StatusCode, message: &str) -> Response<Body> {
    let reason = if status == StatusCode::NOT_FOUND {
        "NOT_FOUND"
    } else {
        "INVALID_ARGUMENT"
    };
    json_response(
        status,
        &json!({ "error": { "code": status.as_u16(), "message": message, "status": reason } }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses an SSE stream back into `(event, data)` pairs, insisting on the framing.
    fn parse_sse(stream: &str) -> Vec<(String, Value)> {
        assert!(stream.ends_with("\n\n"), "stream ends with a blank line");
        stream
            .trim_end_matches('\n')
            .split("\n\n")
            .map(|frame| {
                let lines: Vec<&str> = frame.lines().collect();
                assert_eq!(
                    lines.len(),
                    2,
                    "one event line and one data line: {frame:?}"
                );
                let event = lines[0].strip_prefix("event: ").expect("event line");
                let data = lines[1].strip_prefix("data: ").expect("data line");
                (
                    event.to_string(),
                    serde_json::from_str(data).expect("data is JSON"),
                )
            })
            .collect()
    }

    fn stream_of(completion: &Completion) -> String {
        sse_events("msg_1", "m", completion, CHUNK_CHARS)
            .iter()
            .map(|(e, d)| sse_frame(e, d))
            .collect()
    }

    #[test]
    fn text_reply_streams_as_the_api_does() {
        let text = "Hello from the mock model.\nLine two — ünïcode, long enough to be split.";
        let events = parse_sse(&stream_of(&Completion::text(text)));
        let names: Vec<&str> = events.iter().map(|(e, _)| e.as_str()).collect();
        assert_eq!(names.first(), Some(&"message_start"));
        assert_eq!(
            &names[names.len() - 3..],
            &["content_block_stop", "message_delta", "message_stop"]
        );
        for (name, data) in &events {
            assert_eq!(data["type"], name.as_str(), "event name matches data.type");
        }
        let deltas: Vec<&Value> = events
            .iter()
            .filter(|(e, _)| e == "content_block_delta")
            .map(|(_, d)| d)
            .collect();
        assert!(deltas.len() > 1, "long text arrives in several deltas");
        let joined: String = deltas
            .iter()
            .map(|d| d["delta"]["text"].as_str().expect("text_delta"))
            .collect();
        assert_eq!(joined, text);
        let (_, delta) = &events[events.len() - 2];
        assert_eq!(delta["delta"]["stop_reason"], "end_turn");
    }

    #[test]
    fn tool_use_streams_its_input_as_json_deltas() {
        let input = json!({ "command": "touch /tmp/some/where/marker.txt", "description": "Mark" });
        let completion = Completion {
            blocks: vec![Block::ToolUse {
                id: "toolu_1".into(),
                name: "Bash".into(),
                input: input.clone(),
            }],
        };
        let events = parse_sse(&stream_of(&completion));
        let start = events
            .iter()
            .find(|(e, _)| e == "content_block_start")
            .expect("block start");
        assert_eq!(start.1["content_block"]["type"], "tool_use");
        assert_eq!(start.1["content_block"]["name"], "Bash");
        let partial: String = events
            .iter()
            .filter(|(e, _)| e == "content_block_delta")
            .map(|(_, d)| {
                assert_eq!(d["delta"]["type"], "input_json_delta");
                d["delta"]["partial_json"]
                    .as_str()
                    .expect("partial_json")
                    .to_string()
            })
            .collect();
        assert_eq!(
            serde_json::from_str::<Value>(&partial).expect("joined partial_json is JSON"),
            input
        );
        let (_, delta) = &events[events.len() - 2];
        assert_eq!(delta["delta"]["stop_reason"], "tool_use");
        assert_eq!(
            message_json("m1", "m", &completion)["stop_reason"],
            "tool_use"
        );
    }

    #[test]
    fn rules_tools_and_side_requests() {
        let mut st = State {
            rules: vec![
                Rule::text("HELLO", "Hi there."),
                Rule::tool("RUN", "Bash", json!({ "command": "true" }), "Done."),
            ],
            ..State::default()
        };
        let user = |content: Value| {
            json!({ "tools": [{ "name": "Bash" }], "messages": [
            { "role": "user", "content": "earlier" },
            { "role": "user", "content": content },
            { "role": "system", "content": "not the user" },
        ] })
        };
        let reminder =
            json!({ "type": "text", "text": "<system-reminder>\nRUN HELLO\n</system-reminder>" });

        let reply = decide(
            &mut st,
            &user(json!([reminder, { "type": "text", "text": "say HELLO" }])),
        );
        assert_eq!(reply, Completion::text("Hi there."));
        assert_eq!(
            decide(&mut st, &user(json!("nothing"))),
            Completion::text(DEFAULT_REPLY)
        );
        assert_eq!(
            decide(&mut st, &user(json!([reminder]))),
            Completion::text(DEFAULT_REPLY),
            "system reminders are not user text"
        );

        st.counter = 7;
        let call = decide(&mut st, &user(json!("please RUN it")));
        let Some(Block::ToolUse { id, name, .. }) = call.blocks.first() else {
            panic!("expected a tool call, got {call:?}");
        };
        assert_eq!(name, "Bash");
        let result = json!([{ "type": "tool_result", "tool_use_id": id, "content": "" }, reminder]);
        assert_eq!(decide(&mut st, &user(result)), Completion::text("Done."));

        let mut side = user(json!("please RUN it"));
        side["tools"] = json!([]);
        assert_eq!(decide(&mut st, &side), Completion::text(DEFAULT_REPLY));
    }

    #[test]
    fn serves_streamed_and_plain_requests_over_http() {
        let mock = MockLlm::start(vec![Rule::text("ping", "pong")]);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let raw = |body: &str, path: &str| {
            let request = format!(
                "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let addr = mock.addr;
            runtime.block_on(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
                s.write_all(request.as_bytes()).await.expect("write");
                let mut out = Vec::new();
                s.read_to_end(&mut out).await.expect("read");
                String::from_utf8(out).expect("utf8")
            })
        };
        let body = r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"ping"}]}"#;
        let streamed = raw(body, "/v1/messages?beta=true");
        assert!(
            streamed.contains("content-type: text/event-stream"),
            "{streamed}"
        );
        assert!(streamed.contains(r#""text":"pong""#), "{streamed}");
        assert!(streamed.contains("event: message_stop"), "{streamed}");

        let plain = raw(&body.replace("true", "false"), "/v1/messages");
        let json_part = plain.split("\r\n\r\n").nth(1).expect("body");
        let v: Value = serde_json::from_str(json_part).expect("JSON body");
        assert_eq!(v["content"][0]["text"], "pong");

        let counted = raw(body, "/v1/messages/count_tokens");
        assert!(counted.contains("input_tokens"), "{counted}");
        assert!(raw("{}", "/v1/unknown").starts_with("HTTP/1.1 404"));

        assert_eq!(mock.requests().len(), 2);
        assert_eq!(
            mock.paths(),
            [
                "POST /v1/messages?beta=true",
                "POST /v1/messages",
                "POST /v1/messages/count_tokens",
                "POST /v1/unknown"
            ]
        );
    }

    #[test]
    fn gemini_routes() {
        assert_eq!(
            gemini_route("/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent"),
            Some(("gemini-3.1-pro-preview", GeminiCall::StreamGenerate))
        );
        assert_eq!(
            gemini_route("/v1beta/models/m:generateContent"),
            Some(("m", GeminiCall::Generate))
        );
        assert_eq!(
            gemini_route("/v1/models/m:countTokens"),
            Some(("m", GeminiCall::CountTokens))
        );
        assert_eq!(gemini_route("/v1beta/models/m:embedContent"), None);
        assert_eq!(gemini_route("/v1beta/models"), None);
        assert_eq!(gemini_route("/v1/messages"), None);
        assert_eq!(gemini_route("/v1beta/tunedModels/x:generateContent"), None);
        assert!(is_gemini_path("/v1beta/models"));
        assert!(!is_gemini_path("/v1/messages/unknown"));
    }

    /// A main-loop request as Gemini CLI 0.61 sends it: the session context and the prompt as
    /// two text parts of one user content, tools as function declarations.
    fn gemini_request(contents: Value) -> Value {
        json!({
            "contents": contents,
            "systemInstruction": { "parts": [{ "text": "You are Gemini CLI" }] },
            "tools": [{ "functionDeclarations": [{ "name": "run_shell_command" }] }],
            "generationConfig": { "temperature": 1 },
        })
    }

    #[test]
    fn gemini_rules_tools_and_side_requests() {
        let mut st = State {
            rules: vec![
                Rule::text("HELLO", "Hi there."),
                Rule::tool(
                    "RUN",
                    "run_shell_command",
                    json!({ "command": "true" }),
                    "Done.",
                ),
            ],
            ..State::default()
        };
        let context =
            json!({ "text": "<session_context>\nRUN HELLO in /tmp/x\n</session_context>" });
        let first = gemini_request(json!([
            { "role": "user", "parts": [context, { "text": "say HELLO" }] },
        ]));
        assert_eq!(
            gemini_user_turn(&first),
            UserTurn {
                text: "say HELLO".into(),
                tool_results: vec![]
            }
        );
        assert_eq!(
            decide_gemini(&mut st, &first),
            Completion::text("Hi there.")
        );
        let only_context = gemini_request(json!([{ "role": "user", "parts": [context] }]));
        assert_eq!(
            decide_gemini(&mut st, &only_context),
            Completion::text(DEFAULT_REPLY),
            "the session context is not user text"
        );

        st.counter = 3;
        let ask = gemini_request(json!([
            { "role": "user", "parts": [{ "text": "say HELLO" }] },
            { "role": "model", "parts": [{ "text": "Hi there." }] },
            { "role": "user", "parts": [{ "text": "please RUN it" }] },
        ]));
        let call = decide_gemini(&mut st, &ask);
        let parts = gemini_parts(&call);
        assert_eq!(parts.len(), 1);
        let function_call = &parts[0]["functionCall"];
        assert_eq!(function_call["name"], "run_shell_command");
        assert_eq!(function_call["args"], json!({ "command": "true" }));
        let id = function_call["id"].as_str().expect("call id");
        assert_eq!(id, "call_mock_000003");

        let mut answered = ask.clone();
        let contents = answered["contents"].as_array_mut().expect("contents");
        contents.push(json!({ "role": "model", "parts": parts }));
        contents.push(json!({ "role": "user", "parts": [{ "functionResponse": {
            "id": id, "name": "run_shell_command", "response": { "output": "" } } }] }));
        assert_eq!(decide_gemini(&mut st, &answered), Completion::text("Done."));
        assert_eq!(
            decide_gemini(&mut st, &answered),
            Completion::text(DEFAULT_REPLY),
            "a tool result is answered once"
        );

        let renamed = json!({ "contents": [{ "role": "user", "parts": [{ "functionResponse": {
            "id": "run_shell_command__call_mock_000009", "name": "run_shell_command" } }] }] });
        assert_eq!(
            gemini_user_turn(&renamed).tool_results,
            ["run_shell_command__call_mock_000009", "call_mock_000009"]
        );

        // Without tools on offer (a side request) a tool rule gives plain text.
        let mut side = ask.clone();
        side["tools"] = json!([]);
        assert_eq!(
            decide_gemini(&mut st, &side),
            Completion::text(DEFAULT_REPLY)
        );
    }

    #[test]
    fn gemini_json_mode_gets_a_value_of_its_schema() {
        let mut st = State {
            rules: vec![Rule::text("HELLO", "not JSON")],
            ..State::default()
        };
        // Gemini CLI's model router.
        let mut router =
            gemini_request(json!([{ "role": "user", "parts": [{ "text": "HELLO" }] }]));
        router["generationConfig"] = json!({
            "responseMimeType": "application/json",
            "responseJsonSchema": {
                "type": "OBJECT",
                "properties": {
                    "complexity_reasoning": { "type": "STRING" },
                    "complexity_score": { "type": "INTEGER" },
                    "next_speaker": { "type": "string", "enum": ["model", "user"] },
                    "tags": { "type": "ARRAY", "items": { "type": "STRING" } },
                    "sure": { "type": ["boolean", "null"] },
                },
                "required": ["complexity_reasoning", "complexity_score"],
            },
        });
        let Completion { blocks } = decide_gemini(&mut st, &router);
        let [Block::Text(text)] = blocks.as_slice() else {
            panic!("expected one text block, got {blocks:?}");
        };
        let value: Value = serde_json::from_str(text).expect("JSON text");
        assert_eq!(
            value,
            json!({
                "complexity_reasoning": "mock",
                "complexity_score": 1,
                "next_speaker": "user",
                "tags": [],
                "sure": false,
            })
        );
        router["generationConfig"] = json!({ "responseMimeType": "application/json" });
        assert_eq!(decide_gemini(&mut st, &router), Completion::text("{}"));
    }

    #[test]
    fn gemini_stream_chunks() {
        let text = "Hello from the mock model.\nLine two — ünïcode, long enough to be split.";
        let chunks = gemini_chunks("r1", "m", &Completion::text(text), CHUNK_CHARS);
        assert!(chunks.len() > 1, "long text arrives in several chunks");
        let joined: String = chunks
            .iter()
            .map(|c| {
                assert_eq!(c["candidates"][0]["content"]["role"], "model");
                assert_eq!(c["modelVersion"], "m");
                c["candidates"][0]["content"]["parts"][0]["text"]
                    .as_str()
                    .expect("text part")
                    .to_string()
            })
            .collect();
        assert_eq!(joined, text);
        let reasons: Vec<&Value> = chunks
            .iter()
            .map(|c| &c["candidates"][0]["finishReason"])
            .collect();
        assert!(reasons[..reasons.len() - 1].iter().all(|r| r.is_null()));
        assert_eq!(reasons[reasons.len() - 1], "STOP");

        let call = Completion {
            blocks: vec![Block::ToolUse {
                id: "call_1".into(),
                name: "run_shell_command".into(),
                input: json!({ "command": "touch x" }),
            }],
        };
        let chunks = gemini_chunks("r2", "m", &call, CHUNK_CHARS);
        assert_eq!(chunks.len(), 1, "a function call arrives whole");
        assert_eq!(
            chunks[0]["candidates"][0]["content"]["parts"][0]["functionCall"],
            json!({ "id": "call_1", "name": "run_shell_command", "args": { "command": "touch x" } })
        );
        assert_eq!(chunks[0]["candidates"][0]["finishReason"], "STOP");

        let whole = gemini_chunks("r4", "m", &Completion::text(text), usize::MAX);
        assert_eq!(whole.len(), 1, "usize::MAX: the text in one piece");
        assert_eq!(
            whole[0]["candidates"][0]["content"]["parts"][0]["text"],
            text
        );

        let empty = gemini_chunks("r3", "m", &Completion::text(""), CHUNK_CHARS);
        assert_eq!(empty.len(), 1);
        assert_eq!(empty[0]["candidates"][0]["content"]["parts"][0]["text"], "");
        assert_eq!(
            gemini_sse_frame(&json!({ "a": 1 })),
            "data: {\"a\":1}\r\n\r\n"
        );
    }

    #[test]
    fn serves_gemini_over_http() {
        let mock = MockLlm::start(vec![Rule::text("ping", "pong")]);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let raw = |body: &str, path: &str| {
            let request = format!(
                "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nx-goog-api-key: k\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let addr = mock.addr;
            runtime.block_on(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
                s.write_all(request.as_bytes()).await.expect("write");
                let mut out = Vec::new();
                s.read_to_end(&mut out).await.expect("read");
                String::from_utf8(out).expect("utf8")
            })
        };
        let body = r#"{"contents":[{"role":"user","parts":[{"text":"ping"}]}]}"#;
        let streamed = raw(body, "/v1beta/models/gm:streamGenerateContent?alt=sse");
        assert!(
            streamed.contains("content-type: text/event-stream"),
            "{streamed}"
        );
        assert!(streamed.contains(r#"{"text":"pong"}"#), "{streamed}");
        assert!(streamed.contains(r#""finishReason":"STOP""#), "{streamed}");

        let plain = raw(body, "/v1beta/models/gm:generateContent");
        let json_part = plain.split("\r\n\r\n").nth(1).expect("body");
        let v: Value = serde_json::from_str(json_part).expect("JSON body");
        assert_eq!(v["candidates"][0]["content"]["parts"][0]["text"], "pong");
        assert_eq!(v["modelVersion"], "gm");

        let counted = raw(body, "/v1beta/models/gm:countTokens");
        assert!(counted.contains("totalTokens"), "{counted}");
        let unknown = raw("{}", "/v1beta/models/gm:embedContent");
        assert!(unknown.starts_with("HTTP/1.1 404"), "{unknown}");
        assert!(unknown.contains(r#""status":"NOT_FOUND""#), "{unknown}");

        assert_eq!(mock.requests().len(), 2, "generate requests are recorded");
        assert_eq!(
            mock.paths(),
            [
                "POST /v1beta/models/gm:streamGenerateContent?alt=sse",
                "POST /v1beta/models/gm:generateContent",
                "POST /v1beta/models/gm:countTokens",
                "POST /v1beta/models/gm:embedContent"
            ]
        );
    }
}
