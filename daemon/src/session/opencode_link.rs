//! The live connection to the API an OpenCode session serves (see
//! [`crate::cli::opencode`]): one task per session follows the server's event stream, turns
//! its events into the session's state (turn started, turn completed with the final reply,
//! waiting, resolved, error), and delivers answers to prompts. It reconnects by itself —
//! OpenCode starts its server a few seconds after the pane opens, and a restarted daemon finds it
//! again — and on every (re)connect it reads what it may have missed: pending permissions and
//! questions, and whether a turn it saw start has ended. While it is disconnected the session
//! falls back to the screen (the `opencode` pattern pack and quiescence).

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, warn};

use crate::cli::HookSignal;
use crate::cli::local_http::{HttpError, LocalHttp};
use crate::cli::opencode::{
    API_USER, ApiEvent, ApiPrompt, answer_running, finished_turn_reply, idle_ends, interpret,
    last_reply, permission_prompt, question_prompt,
};
use crate::core::Daemon;
use crate::model::{Prompt, State};
use crate::store::events::EventKind;
use crate::usage::TurnUsage;

/// How long opening the event stream may take: OpenCode accepts connections while it is still
/// starting, and answers them once it is ready.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Asks the TUI to show OpenCode session `id`, in the background (its dialogs show only in the
/// conversation on screen).
fn show_in_tui(http: &LocalHttp, id: &str) {
    let http = http.clone();
    let body = json!({ "sessionID": id });
    tokio::spawn(async move {
        if let Err(e) = http.post_json("/tui/select-session", &body).await {
            debug!("the TUI did not switch to the session: {e}");
        }
    });
}

/// How long the TUI may take to follow the server's events (see [`Daemon::await_tui`]).
const TUI_PROBE: Duration = Duration::from_secs(20);
/// The toast that shows the TUI follows the events (short: a toast is narrow).
const TUI_TOAST: &str = "clibot connected";

/// OpenCode sends a heartbeat every few seconds; a stream silent for this long is dead.
const SILENT_STREAM: Duration = Duration::from_secs(45);
/// The longest pause between two connection attempts (the server is local: trying is cheap).
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// What the link knows about the CLI's sessions (OpenCode runs sub-agents in child sessions,
/// whose turns are not the user's).
#[derive(Default)]
struct Seen {
    /// Session id → whether it is a top-level session.
    roots: HashMap<String, bool>,
    /// A top-level session is working (so its start was reported).
    busy: bool,
    /// The running turn already failed: its end is not a completed turn.
    failed: bool,
}

/// Whether OpenCode says `session` is busy (or retrying) now; yes when it cannot be asked.
async fn busy_now(http: &LocalHttp, session: &str) -> bool {
    match http.get_json("/session/status").await {
        Ok(v) => v
            .get(session)
            .and_then(|s| s.get("type"))
            .and_then(Value::as_str)
            .is_some_and(|t| t != "idle"),
        Err(_) => true,
    }
}

impl Daemon {
    /// Follows session `name`'s OpenCode server on 127.0.0.1:`port` until the session ends.
    pub(crate) async fn api_link(self, name: &str, port: u16, cancel: CancellationToken) {
        let Some((secret, pid)) = self
            .sessions()
            .get(name, |e| (e.rec.hook_token.clone(), e.rec.pid))
        else {
            return;
        };
        // The password goes only to the server the session's own program runs.
        let http = LocalHttp::new(port, API_USER, &secret).owned_by(pid);
        let shutdown = self.shutdown_token().clone();
        let mut backoff = Duration::from_millis(100);
        let mut seen = Seen::default();
        let mut was_live = false;
        let mut probed = false;
        loop {
            let alive = self.sessions().alive(name);
            if !alive || cancel.is_cancelled() || shutdown.is_cancelled() {
                break;
            }
            match http.events("/event", CONNECT_TIMEOUT).await {
                Ok(mut stream) => {
                    info!(port, "connected to OpenCode's server");
                    backoff = Duration::from_millis(100);
                    was_live = true;
                    if !std::mem::replace(&mut probed, true) {
                        self.await_tui(name, &http).await;
                    }
                    self.set_api(name, Some(http.clone()));
                    self.api_catch_up(name, &http, &mut seen).await;
                    loop {
                        tokio::select! {
                            next = tokio::time::timeout(SILENT_STREAM, stream.next()) => match next {
                                Ok(Ok(Some(ev))) => self.on_api_event(name, &http, &mut seen, &ev).await,
                                Ok(Ok(None)) => { debug!("OpenCode closed its event stream"); break }
                                Ok(Err(e)) => { debug!("OpenCode's event stream failed: {e}"); break }
                                Err(_) => { warn!("OpenCode's event stream went silent; reconnecting"); break }
                            },
                            _ = cancel.cancelled() => break,
                            _ = shutdown.cancelled() => break,
                        }
                    }
                    self.set_api(name, None);
                }
                Err(HttpError::Status { status, .. }) if status.as_u16() == 401 => {
                    // Not our server (another program took the port), or one started without
                    // the password: never send it anything.
                    warn!(
                        port,
                        "OpenCode's port refuses this session's password; following the screen only"
                    );
                    let poke = self.sessions().update(name, |e| {
                        e.rt.api_gave_up = true;
                        e.rt.poke.clone()
                    });
                    if let Some(p) = poke {
                        p.notify_one();
                    }
                    break;
                }
                Err(e) => {
                    if was_live {
                        info!("OpenCode's server is gone ({e})");
                        was_live = false;
                    } else {
                        debug!("OpenCode's server is not up yet: {e}");
                    }
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = cancel.cancelled() => break,
                _ = shutdown.cancelled() => break,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
        self.set_api(name, None);
    }

    /// Waits until the TUI follows the server's events. Its server answers before the TUI has
    /// subscribed to them, and the TUI learns of a permission only from the event: a dialog
    /// asked in that window is never drawn, and the person at the desk cannot answer it. So the
    /// session is not ready until a toast sent through the same events shows on the screen
    /// (asked again every two seconds, for at most [`TUI_PROBE`]; a TUI that never shows it
    /// is followed anyway, through the API).
    async fn await_tui(&self, name: &str, http: &LocalHttp) {
        let body =
            json!({ "title": "clibot", "message": TUI_TOAST, "variant": "info", "duration": 2500 });
        let started = tokio::time::Instant::now();
        let mut asked: Option<tokio::time::Instant> = None;
        while started.elapsed() < TUI_PROBE {
            if asked.is_none_or(|t| t.elapsed() >= Duration::from_secs(2)) {
                asked = Some(tokio::time::Instant::now());
                if let Err(e) = http.post_json("/tui/show-toast", &body).await {
                    debug!("the TUI did not take the toast: {e}");
                }
            }
            let Some(target) = self
                .sessions()
                .get(name, |e| {
                    (!e.rec.state.is_exited()).then(|| e.rec.target().to_string())
                })
                .flatten()
            else {
                return;
            };
            match self.mux_of(name).capture(&target, None, false).await {
                Ok(screen) if screen.contains(TUI_TOAST) => {
                    info!("the TUI follows OpenCode's events");
                    return;
                }
                Ok(_) => {}
                Err(_) => return,
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        debug!("the TUI never showed clibot's toast; following the API anyway");
    }

    /// Remembers OpenCode's own id for the conversation, so that a restart can resume it.
    fn note_cli_session(&self, name: &str, session: &str) {
        let changed = self
            .sessions()
            .update(name, |e| {
                let changed = e.rec.cli_session_id != session;
                e.rec.cli_session_id = session.to_string();
                changed
            })
            .unwrap_or(false);
        if changed {
            self.persist();
        }
    }

    /// The API is reachable (`Some`) or not. A starting session is ready once its screen is
    /// too: the screen is read again at once.
    fn set_api(&self, name: &str, api: Option<LocalHttp>) {
        let poke = self.sessions().update(name, |e| {
            e.rt.api = api;
            e.rt.poke.clone()
        });
        if let Some(p) = poke {
            p.notify_one();
        }
    }

    /// Sends a message as the user's next turn: into the conversation clibot follows, or a new
    /// one, which the TUI is then asked to show (so the desk sees what the phone typed).
    pub(crate) async fn api_submit(
        &self,
        name: &str,
        http: &LocalHttp,
        text: &str,
    ) -> Result<(), HttpError> {
        let known = self
            .sessions()
            .get(name, |e| e.rec.cli_session_id.clone())
            .filter(|id| id.starts_with("ses_"));
        let body = json!({ "parts": [{ "type": "text", "text": text }] });
        if let Some(id) = &known {
            match http
                .post_json(&format!("/session/{id}/prompt_async"), &body)
                .await
            {
                Ok(_) => {
                    self.keep_shown(name, http, id, text);
                    return Ok(());
                }
                // Deleted meanwhile: start a new conversation below.
                Err(HttpError::Status { status, .. }) if status.as_u16() == 404 => {}
                Err(e) => return Err(e),
            }
        }
        let created = http.post_json("/session", &json!({})).await?;
        let id = created
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        self.note_cli_session(name, &id);
        http.post_json(&format!("/session/{id}/prompt_async"), &body)
            .await?;
        self.keep_shown(name, http, &id, text);
        Ok(())
    }

    /// Makes the TUI show the conversation a message went to. A TUI that is still starting
    /// ignores the request, and nothing says so; the screen does: until it shows the message,
    /// the request is repeated (for a minute at most).
    fn keep_shown(&self, name: &str, http: &LocalHttp, id: &str, text: &str) {
        let snippet: String = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("")
            .chars()
            .take(24)
            .collect();
        let (d, http, id, name) = (self.clone(), http.clone(), id.to_string(), name.to_string());
        tokio::spawn(
            async move {
                let body = json!({ "sessionID": id });
                for _ in 0..60 {
                    if let Err(e) = http.post_json("/tui/select-session", &body).await {
                        debug!("the TUI did not switch to the session: {e}");
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    let Some(target) = d
                        .sessions()
                        .get(&name, |e| {
                            (!e.rec.state.is_exited()).then(|| e.rec.target().to_string())
                        })
                        .flatten()
                    else {
                        return;
                    };
                    match d.mux_of(&name).capture(&target, None, false).await {
                        Ok(screen) if snippet.is_empty() || screen.contains(&snippet) => return,
                        Ok(_) => debug!("the TUI does not show the conversation yet"),
                        Err(_) => return,
                    }
                }
            }
            .in_current_span(),
        );
    }

    /// Whether OpenCode session `id` is a top-level one (asked once, then remembered).
    async fn is_root(&self, http: &LocalHttp, seen: &mut Seen, id: &str) -> bool {
        if let Some(root) = seen.roots.get(id) {
            return *root;
        }
        let root = match http.get_json(&format!("/session/{id}")).await {
            Ok(info) => info.get("parentID").and_then(Value::as_str).is_none(),
            // Unknown: count it, rather than miss the user's turn.
            Err(_) => true,
        };
        seen.roots.insert(id.to_string(), root);
        root
    }

    async fn on_api_event(&self, name: &str, http: &LocalHttp, seen: &mut Seen, ev: &Value) {
        match interpret(ev) {
            ApiEvent::Ignore => {}
            ApiEvent::Info { session, parent } => {
                seen.roots.insert(session, parent.is_none());
            }
            ApiEvent::Busy { session } => {
                // A busy event read after a catch-up may be older than the turn's end the
                // catch-up already reported: while clibot sees no turn running, one starts
                // only when OpenCode says the session is busy now.
                let idle_here = self
                    .sessions()
                    .get(name, |e| {
                        !matches!(e.rec.state, State::Working | State::Waiting)
                    })
                    .unwrap_or(false);
                if !seen.busy
                    && self.is_root(http, seen, &session).await
                    && (!idle_here || busy_now(http, &session).await)
                {
                    seen.busy = true;
                    seen.failed = false;
                    self.note_cli_session(name, &session);
                    let _ = self
                        .apply_signal(name, HookSignal::TurnStarted, Value::Null)
                        .await;
                }
            }
            ApiEvent::Idle { session } => {
                if !self.is_root(http, seen, &session).await {
                    return;
                }
                seen.busy = false;
                if std::mem::take(&mut seen.failed) {
                    return;
                }
                // The turn may have been completed already by the catch-up after a reconnect,
                // which saw it end just before this event arrived: never report it twice.
                // What clibot sent for the running turn; none for a turn begun at the desk.
                let asked = self.sessions().get(name, |e| {
                    let running = matches!(e.rec.state, State::Working | State::Waiting);
                    running.then(|| {
                        if e.rec.turn_started_ms > 0 {
                            e.rec.last_input.clone()
                        } else {
                            String::new()
                        }
                    })
                });
                let Some(Some(asked)) = asked else {
                    return;
                };
                if let Some((text, usage)) = self.api_reply(http, &session, &asked).await {
                    self.complete_api_turn(name, text, usage);
                }
            }
            ApiEvent::Asked(p) => {
                // The TUI shows the dialog only in the conversation on its screen.
                if self.is_root(http, seen, &p.session).await {
                    show_in_tui(http, &p.session);
                }
                self.raise_api_prompt(name, http, p)
            }
            ApiEvent::Replied { request } => self.api_prompt_replied(name, &request),
            ApiEvent::Error {
                session,
                kind,
                message,
            } => {
                if self.is_root(http, seen, &session).await {
                    seen.failed = true;
                    let _ = self
                        .apply_signal(name, HookSignal::Error { kind, message }, Value::Null)
                        .await;
                }
            }
        }
    }

    /// Completes the running turn with its reply and what it cost (from OpenCode's messages),
    /// the cost handed to the count of the turn through the session's runtime state: left
    /// there, a turn already completed would give it to the next.
    fn complete_api_turn(&self, name: &str, text: String, usage: Option<TurnUsage>) {
        self.sessions().update(name, |e| e.rt.api_usage = usage);
        self.complete_turn_once(name, text, crate::model::TurnEnd::Api);
        self.sessions().update(name, |e| e.rt.api_usage = None);
    }

    /// The final reply of OpenCode session `session`'s last turn and what the turn cost, when
    /// its idle ends the turn that asked `asked`; `None` for an idle read late from an older
    /// turn (a cancelled one's, after the next message went in): the running turn's own idle
    /// comes later.
    async fn api_reply(
        &self,
        http: &LocalHttp,
        session: &str,
        asked: &str,
    ) -> Option<(String, Option<TurnUsage>)> {
        match http
            .get_json(&format!("/session/{session}/message?limit=50"))
            .await
        {
            Ok(messages) if !idle_ends(&messages, asked) => {
                info!(
                    "an idle from an older turn, read after the next message went in: not this turn's end"
                );
                None
            }
            // The answer is still being written and OpenCode says the session works: a late
            // idle of the cancelled turn before, read once the next turn's answer began.
            Ok(messages) if answer_running(&messages) && busy_now(http, session).await => {
                info!("an idle read while the next answer is being written: not this turn's end");
                None
            }
            Ok(messages) => Some((
                last_reply(&messages).unwrap_or_default(),
                crate::usage::opencode::last_turn(&messages),
            )),
            Err(e) => {
                warn!("cannot read the reply from OpenCode: {e}");
                Some((String::new(), None))
            }
        }
    }

    /// After a (re)connect: prompts that are pending, and a turn that ended unseen.
    async fn api_catch_up(&self, name: &str, http: &LocalHttp, seen: &mut Seen) {
        let mut pending = Vec::new();
        for (path, read) in [
            (
                "/permission",
                permission_prompt as fn(&Value) -> Option<ApiPrompt>,
            ),
            ("/question", question_prompt),
        ] {
            match http.get_json(path).await {
                Ok(Value::Array(list)) => pending.extend(list.iter().filter_map(read)),
                Ok(_) => {}
                Err(e) => debug!("cannot list {path}: {e}"),
            }
        }
        // A prompt recorded before a restart that is no longer pending was answered meanwhile.
        let gone = self
            .sessions()
            .get(name, |e| {
                e.rec
                    .prompt
                    .as_ref()
                    .filter(|p| {
                        p.source == crate::model::PromptSource::Api
                            && !pending.iter().any(|q| q.request == p.id)
                    })
                    .map(|p| p.id.clone())
            })
            .flatten();
        if let Some(id) = gone {
            self.resolve_api_prompt(name, &id);
        }
        for p in pending {
            self.raise_api_prompt(name, http, p);
        }
        let Ok(status) = http.get_json("/session/status").await else {
            return;
        };
        let busy = status
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(_, s)| s.get("type").and_then(Value::as_str) == Some("busy"))
                    .map(|(id, _)| id.clone())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let mut root_busy = false;
        for id in &busy {
            root_busy |= self.is_root(http, seen, id).await;
        }
        seen.busy = root_busy;
        let Some((state, started, recovered_ms)) = self.sessions().get(name, |e| {
            (
                e.rec.state,
                e.rt.turn.started,
                e.rt.turn.recovered.then_some(e.rec.turn_started_ms),
            )
        }) else {
            return;
        };
        if root_busy || state != State::Working {
            return;
        }
        // Only a turn that ended after this one began: input typed a moment ago may not have
        // made OpenCode busy yet, and the previous turn's reply is not this one's.
        // A turn that outlived a daemon restart began when its input was sent, not when this
        // daemon started.
        let since_ms = match recovered_ms {
            Some(ms) if ms > 0 => ms,
            _ => started.map_or(0, |t| {
                crate::store::now_ms() - i64::try_from(t.elapsed().as_millis()).unwrap_or(i64::MAX)
            }),
        };
        // The turn ended while nobody listened: its reply is the latest top-level session's.
        let Ok(Value::Array(sessions)) = http.get_json("/session").await else {
            return;
        };
        let latest = sessions
            .iter()
            .filter(|s| s.get("parentID").is_none())
            .max_by_key(|s| {
                s.pointer("/time/updated")
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
            })
            .and_then(|s| s.get("id").and_then(Value::as_str));
        let Some(id) = latest else { return };
        let Ok(messages) = http
            .get_json(&format!("/session/{id}/message?limit=50"))
            .await
        else {
            return;
        };
        if let Some(text) = finished_turn_reply(&messages, since_ms) {
            let usage = crate::usage::opencode::last_turn(&messages);
            self.complete_api_turn(name, text, usage);
        }
    }

    /// Shows a request from OpenCode as the session's prompt, and sends the answer given
    /// through clibot back to the server.
    fn raise_api_prompt(&self, name: &str, http: &LocalHttp, p: ApiPrompt) {
        let Some(rx) = self.api_prompt(name, p) else {
            return;
        };
        let http = http.clone();
        let d = self.clone();
        let name = name.to_string();
        tokio::spawn(
            async move {
                // Dropped without an answer: resolved elsewhere, or the session ended.
                let Ok(decision) = rx.await else { return };
                let Ok(req) = serde_json::from_str::<Value>(&decision) else {
                    return;
                };
                let path = req.get("path").and_then(Value::as_str).unwrap_or("");
                let body = req.get("body").cloned().unwrap_or(json!({}));
                let mut result = http.post_json(path, &body).await;
                if result.is_err() {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    result = http.post_json(path, &body).await;
                }
                if let Err(e) = result {
                    warn!("the answer did not reach OpenCode: {e}");
                    let id = d.sessions().id_of(&name);
                    if let Some(id) = id {
                        d.event(
                            &name,
                            &id,
                            EventKind::Error {
                                message: format!(
                                    "the answer could not be delivered to OpenCode ({e}); answer in the terminal"
                                ),
                                kind: "other".into(),
                            },
                        );
                    }
                }
            }
            .in_current_span(),
        );
    }

    /// Records the request as the prompt the session waits on (its id is OpenCode's request
    /// id) and publishes it. Returns where the answer will arrive, or `None` when the request is
    /// already being waited on.
    fn api_prompt(&self, name: &str, p: ApiPrompt) -> Option<oneshot::Receiver<String>> {
        let (tx, rx) = oneshot::channel();
        // `None`: already waited on; `Some(None)`: recorded, but known from before a restart.
        let recorded = self.sessions().update(name, |e| {
            if e.rt.waiters.contains_key(&p.request) {
                return None;
            }
            e.rt.waiters
                .insert(p.request.clone(), (tx, p.payload.clone()));
            if e.rec.prompt.as_ref().is_some_and(|c| c.id == p.request) {
                return Some(None);
            }
            e.resolve_prompt("cli");
            let subject_kind = crate::automation::subject::from_payload(&p.payload)
                .or_else(|| {
                    p.payload
                        .get("permission")
                        .and_then(serde_json::Value::as_str)
                        .and_then(crate::automation::subject::from_tool)
                })
                .or_else(|| crate::automation::subject::infer(&p.text, &p.subject));
            let prompt = Prompt {
                id: p.request.clone(),
                subject_kind,
                kind: p.kind.into(),
                text: p.text,
                options: p.options,
                subject: p.subject,
                source: crate::model::PromptSource::Api,
                answer: p.answer,
                ..Default::default()
            };
            e.show_prompt(Some(prompt.clone()));
            e.rt.turn.prompt_shown();
            Some(Some((prompt, e.rec.id.clone())))
        });
        let Some((prompt, id)) = recorded.flatten()? else {
            // Known from before a restart: already published.
            return Some(rx);
        };
        self.event(name, &id, EventKind::Waiting { prompt });
        self.set_state(name, State::Waiting, "the CLI asks");
        self.persist();
        Some(rx)
    }

    /// OpenCode says request `request` was answered. If clibot did not answer it, the person at
    /// the terminal did.
    fn api_prompt_replied(&self, name: &str, request: &str) {
        let waited = self
            .sessions()
            .update(name, |e| e.rt.waiters.remove(request).is_some())
            .unwrap_or(false);
        if waited {
            self.resolve_api_prompt(name, request);
        }
    }

    /// The prompt `request` is no longer pending, and nobody answered it through clibot: the
    /// person at the terminal did.
    fn resolve_api_prompt(&self, name: &str, request: &str) {
        let id = self.sessions().update(name, |e| {
            e.rt.waiters.remove(request);
            if e.rec.prompt.as_ref().is_none_or(|p| p.id != request) {
                return None;
            }
            e.resolve_prompt("terminal");
            Some(e.rec.id.clone())
        });
        let Some(id) = id.flatten() else {
            return;
        };
        self.event(
            name,
            &id,
            EventKind::PromptResolved {
                prompt_id: request.to_string(),
                by: "terminal".into(),
                answer: String::new(),
                actor: String::new(),
                note: String::new(),
            },
        );
        self.set_state(name, State::Working, "answered at the terminal");
        self.persist();
    }
}
