//! Each session's life between spawn and exit: the turn state machine.
//!
//! Push sources drive it: a tmux control-mode client per session signals output (a screen check
//! follows after a few quiet milliseconds), and the CLI's hooks arrive through the `Hook` RPC.
//! A slow tick only covers what is defined by time passing: quiescence (turn completion for
//! CLIs without hooks), stalls, and the one retry of an Enter that changed nothing.
//!
//! States: idle → working → (waiting ⇄ working) → idle; exited and error from anywhere. Input
//! that arrives while a turn runs is queued, persisted, and delivered when the CLI is ready.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::adapter::{Adapter, Choice, HookSignal, Stroke, answer_strokes, parse_choice};
use crate::core::{Daemon, lock};
use crate::detect::{Analysis, AnswerStyle, Pack};
use crate::error::CoreError;
use crate::events::EventKind;
use crate::keys::Key;
use crate::session::{Prompt, State};
use crate::tmux::{MuxError, WatchEvent};

/// Quiet time after output before the screen is read.
const DEBOUNCE: Duration = Duration::from_millis(20);
/// A screen read happens at the latest this long after the first unread output, even while
/// output continues (a spinner never goes quiet).
const MAX_DEBOUNCE: Duration = Duration::from_millis(120);
/// The slow tick.
const TICK: Duration = Duration::from_millis(250);
/// After Enter, a change is expected within this time; otherwise Enter is pressed once more.
const CONFIRM_AFTER: Duration = Duration::from_millis(2_000);
/// A hook announced a prompt; if the screen has not shown it by then, the hook's own
/// description is published.
const HOOK_PROMPT_SCREEN_WAIT: Duration = Duration::from_millis(700);
/// The same, for a hook that names no options (Gemini CLI's): such a prompt cannot be answered
/// from a phone, so the dialog is given longer to appear — a loaded machine can take a second or
/// more to draw it after the hook returns.
const HOOK_PROMPT_NO_OPTIONS_WAIT: Duration = Duration::from_millis(4_000);
/// How long an answer waits for the CLI's API link to come back before it goes by keys.
const API_ANSWER_WAIT: Duration = Duration::from_secs(15);
/// A busy frame this soon after a turn completed is a leftover of that turn, not a new one
/// (for CLIs whose turns start from the screen: no start hook).
const AFTER_TURN_SETTLE: Duration = Duration::from_millis(2_000);
/// Longer single lines than this are pasted (a tmux command line holds about 16 KiB).
const TYPE_MAX: usize = 2_048;
/// A hook-driven CLI whose screen never looks ready (an unknown version) is taken as ready after
/// this long without output. Generous: Gemini CLI can be silent for 10 s while it loads, and text
/// typed before it reads the terminal is lost.
const STARTUP_QUIET: Duration = Duration::from_secs(20);

/// The integration of one configured CLI.
pub(crate) struct CliKind {
    pub(crate) adapter: Arc<dyn Adapter>,
    pub(crate) pack: Arc<Pack>,
}

/// What the supervisor keeps per session besides the persisted record.
pub(crate) struct Runtime {
    pub(crate) last_output: Instant,
    /// When the current turn's input was submitted.
    pub(crate) turn_started: Option<Instant>,
    /// Absolute pane line where the current turn's output begins (for screen replies).
    pub(crate) anchor: Option<i64>,
    /// How many lines the submitted input itself takes on screen.
    pub(crate) input_lines: usize,
    /// Enter was pressed; a visible change or a submit hook confirms it before this instant.
    pub(crate) confirm_by: Option<Instant>,
    /// How many times Enter was pressed again for the current input.
    pub(crate) confirm_tries: u8,
    /// A hook announced the current prompt and the screen has not shown it yet.
    pub(crate) prompt_pending_since: Option<Instant>,
    /// Permission hooks waiting for a decision, by prompt id, with their payloads.
    pub(crate) waiters: HashMap<String, (oneshot::Sender<String>, Value)>,
    /// Recently resolved prompts and by whom, so that a late answer gets a clear error.
    pub(crate) resolved: VecDeque<(String, String)>,
    /// When a prompt was last answered through clibot (by keys or through its hook): the
    /// dialog may stay drawn for a moment while the CLI closes it, and that is not a new
    /// prompt. Cleared as soon as a screen without a dialog is seen; after that, whatever
    /// dialog appears is new.
    /// With it: the answered dialog's signature (kind, text, options, subject) when it was
    /// answered by keys — only that very dialog lingers; `None` when it was answered through
    /// its hook or API, whose words differ from the screen's — any dialog lingers then (the
    /// CLI's next prompt comes through the hook again). The flag: a screen check is already
    /// scheduled for when the lingering ends.
    pub(crate) answered_screen: Option<(Option<String>, Instant, bool)>,
    pub(crate) watcher: Option<CancellationToken>,
    /// Wakes the watcher for an immediate screen read.
    pub(crate) poke: Arc<Notify>,
    pub(crate) last_error_line: Option<String>,
    pub(crate) delivering: bool,
    /// The turn was already running when this daemon started: its hooks may have fired while
    /// no daemon listened, so the screen decides when it is over.
    pub(crate) recovered: bool,
    /// The pane's foreground process while the CLI waits for input (`bash` for a shell). A quiet
    /// pane whose foreground process is another one (`sleep`, `make`) is still working.
    pub(crate) idle_foreground: Option<String>,
    /// The CLI's own API, while connected ([`crate::opencode_link`]): it, not the screen,
    /// tells about turns and prompts, and takes the input.
    pub(crate) api: Option<crate::local_http::LocalHttp>,
    /// The link to the CLI's API gave up (the port refused the session's password): the
    /// session is read off the screen like any program's.
    pub(crate) api_gave_up: bool,
    /// Since when the screen of a working hook-driven CLI has looked idle (the safety net).
    pub(crate) idle_since: Option<Instant>,
    /// When the last turn completed.
    pub(crate) last_completed: Option<Instant>,
    /// The last turn was ended by the safety net: its completion hook may still come late.
    pub(crate) net_closed: bool,
    /// The last screen read, for the last words of a CLI whose dead pane lost them.
    pub(crate) last_screen: String,
    /// The prompt last looked at for an automatic answer, and who is answering it now
    /// ("rule 2", "decider"; empty once done or left to a person).
    pub(crate) auto_for: Option<(String, String)>,
}

impl Default for Runtime {
    fn default() -> Self {
        Runtime {
            last_output: Instant::now(),
            turn_started: None,
            anchor: None,
            input_lines: 0,
            confirm_by: None,
            confirm_tries: 0,
            prompt_pending_since: None,
            waiters: HashMap::new(),
            resolved: VecDeque::new(),
            answered_screen: None,
            watcher: None,
            poke: Arc::new(Notify::new()),
            last_error_line: None,
            delivering: false,
            recovered: false,
            idle_foreground: None,
            api: None,
            api_gave_up: false,
            idle_since: None,
            last_completed: None,
            net_closed: false,
            last_screen: String::new(),
            auto_for: None,
        }
    }
}

/// How long after an answer a dialog still on screen is taken for the answered one closing.
const ANSWERED_LINGER: Duration = Duration::from_secs(2);

fn signature(kind: &str, text: &str, options: &[String], subject: &str) -> String {
    format!(
        "{kind}\u{1f}{text}\u{1f}{}\u{1f}{subject}",
        options.join("\u{1f}")
    )
}

/// Lines of the pane since the turn began, without the echoed input and the prompt that
/// follows the output (generic CLIs: "what the pane printed since the input").
fn reply_from_screen(captured: &str, input_lines: usize) -> String {
    let mut lines: Vec<&str> = captured.lines().map(str::trim_end).collect();
    let prompt_prefix = lines.first().map(|l| l.to_string()).unwrap_or_default();
    let skip = input_lines.max(1).min(lines.len());
    lines.drain(..skip);
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    // The shell (or REPL) prompt that came back at the end is not part of the reply.
    if let Some(last) = lines.last() {
        let p = last.trim();
        if !p.is_empty() && prompt_prefix.starts_with(p) && p.len() <= 40 {
            lines.pop();
        }
    }
    lines.join("\n")
}

impl Daemon {
    pub(crate) fn kind_of(&self, cli: &str) -> Option<(Arc<dyn Adapter>, Arc<Pack>)> {
        self.live()
            .kinds
            .get(cli)
            .map(|k| (k.adapter.clone(), k.pack.clone()))
    }

    /// Starts the session's watcher (idempotent).
    pub(crate) fn start_watcher(&self, name: &str) {
        let token = CancellationToken::new();
        {
            let mut sessions = lock(&self.inner.sessions);
            let Some(e) = sessions.get_mut(name) else {
                return;
            };
            if e.rec.state.is_exited() || e.rt.watcher.is_some() {
                return;
            }
            e.rt.watcher = Some(token.clone());
        }
        let d = self.clone();
        let name = name.to_string();
        let span = info_span!("session", session = %name);
        if let Some(port) = self.api_port(&name) {
            let (d, name, token) = (d.clone(), name.clone(), token.clone());
            tokio::spawn(
                async move { d.api_link(&name, port, token).await }.instrument(span.clone()),
            );
        }
        tokio::spawn(async move { d.watch_loop(&name, token).await }.instrument(span));
    }

    /// The session's CLI serves an API that clibot follows and has not given up on: readiness,
    /// turns and prompts come from it, not from the screen.
    pub(crate) fn awaits_api(&self, e: &crate::core::Entry) -> bool {
        e.rec.api_port != 0
            && !e.rt.api_gave_up
            && self
                .kind_of(&e.rec.cli)
                .is_some_and(|(a, _)| a.serves_api())
    }

    /// The port of the API a session's CLI serves, if it serves one.
    fn api_port(&self, name: &str) -> Option<u16> {
        let sessions = lock(&self.inner.sessions);
        let e = sessions.get(name)?;
        let serves = self
            .kind_of(&e.rec.cli)
            .is_some_and(|(a, _)| a.serves_api());
        (serves && e.rec.api_port != 0).then_some(e.rec.api_port)
    }

    pub(crate) fn stop_watcher(&self, name: &str) {
        if let Some(e) = lock(&self.inner.sessions).get_mut(name)
            && let Some(t) = e.rt.watcher.take()
        {
            t.cancel();
        }
    }

    async fn watch_loop(self, name: &str, cancel: CancellationToken) {
        let shutdown = self.inner.shutdown.clone();
        let mut backoff = Duration::from_millis(200);
        'outer: loop {
            // The session is watched (all its panes' output wakes the watcher); the CLI's own
            // pane is read.
            let Some((target, pane, poke)) = lock(&self.inner.sessions)
                .get(name)
                .map(|e| (e.rec.tmux_id.clone(), e.rec.target().to_string(), e.rt.poke.clone()))
            else {
                break;
            };
            let mut rx = match self.inner.mux.watch(&target).await {
                // Stopped (released) while the watch was being set up: undo it.
                Ok(_) if cancel.is_cancelled() => {
                    let _ = self.inner.mux.unwatch(&target).await;
                    break;
                }
                Ok(rx) => rx,
                Err(e) => {
                    warn!("cannot watch the session's output: {e}");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => { backoff = (backoff * 2).min(Duration::from_secs(10)); continue },
                        _ = cancel.cancelled() => break,
                        _ = shutdown.cancelled() => break,
                    }
                }
            };
            // The first read tells where the session stands (a restarted daemon, a fresh spawn).
            let mut check_at: Option<Instant> = Some(Instant::now());
            let mut first_unread: Option<Instant> = None;
            // The tick runs only while time itself can change something (a running turn, a
            // start, a pending prompt or confirmation): 50 quiet sessions cost no wake-ups.
            let mut tick_at: Option<Instant> = Some(Instant::now() + TICK);
            loop {
                let sleep_until = check_at.map(tokio::time::Instant::from_std);
                if tick_at.is_none() && self.wants_tick(name) {
                    tick_at = Some(Instant::now() + TICK);
                }
                let tick_until = tick_at.map(tokio::time::Instant::from_std);
                tokio::select! {
                    ev = rx.recv() => match ev {
                        Some(WatchEvent::Output) => {
                            let now = Instant::now();
                            self.note_output(name);
                            let first = *first_unread.get_or_insert(now);
                            check_at = Some((now + DEBOUNCE).min(first + MAX_DEBOUNCE));
                        }
                        Some(WatchEvent::Closed) | None => {
                            // The session ended, or tmux went away: let the exit check decide.
                            self.check_sessions().await;
                            let alive = lock(&self.inner.sessions).get(name).is_some_and(|e| !e.rec.state.is_exited());
                            if !alive {
                                break 'outer;
                            }
                            tokio::select! {
                                _ = tokio::time::sleep(backoff) => { backoff = (backoff * 2).min(Duration::from_secs(10)); continue 'outer },
                                _ = cancel.cancelled() => break 'outer,
                                _ = shutdown.cancelled() => break 'outer,
                            }
                        }
                    },
                    _ = async { match sleep_until { Some(t) => tokio::time::sleep_until(t).await, None => std::future::pending().await } } => {
                        check_at = None;
                        first_unread = None;
                        self.read_screen(name, &pane).await;
                    }
                    _ = poke.notified() => check_at = Some(Instant::now()),
                    _ = async { match tick_until { Some(t) => tokio::time::sleep_until(t).await, None => std::future::pending().await } } => {
                        tick_at = None;
                        self.on_tick(name, &pane).await;
                    }
                    _ = cancel.cancelled() => break 'outer,
                    _ = shutdown.cancelled() => break 'outer,
                }
                backoff = Duration::from_millis(200);
            }
        }
        debug!("watcher ended");
    }

    /// The session's CLI tells by hook when it takes a prompt, and its hooks reach the daemon.
    fn start_hook_live(&self, e: &crate::core::Entry) -> bool {
        !e.rec.hook_token.is_empty()
            && self
                .kind_of(&e.rec.cli)
                .is_some_and(|(a, _)| a.signals_turn_start())
    }

    /// Without a start hook, a hook-driven CLI whose screen shows when it works (Codex) confirms
    /// that it took the input by that screen: output alone may be the echo of text sitting
    /// unsent in its composer, after an Enter it ignored while finishing the previous turn.
    fn confirms_by_screen(&self, e: &crate::core::Entry) -> bool {
        !self.start_hook_live(e)
            && self
                .kind_of(&e.rec.cli)
                .is_some_and(|(a, p)| a.completes_by_hook() && p.shows_busy())
    }

    /// Whether the session has something that only time can settle.
    fn wants_tick(&self, name: &str) -> bool {
        lock(&self.inner.sessions).get(name).is_some_and(|e| {
            matches!(e.rec.state, State::Working | State::Starting)
                || e.rt.prompt_pending_since.is_some()
                || e.rt.confirm_by.is_some()
        })
    }

    fn note_output(&self, name: &str) {
        let mut sessions = lock(&self.inner.sessions);
        if let Some(e) = sessions.get_mut(name) {
            let now = Instant::now();
            e.rt.last_output = now;
            // Output after Enter confirms the input arrived — unless the CLI's start hook or its
            // busy screen tells that: then output may be just the echo of text that sits unsent
            // in the composer (Gemini CLI ignores an Enter that comes while it finishes the
            // previous turn).
            if e.rt.confirm_by.is_some()
                && e.rt.turn_started.is_some_and(|t| now > t)
                && !self.start_hook_live(e)
                && !self.confirms_by_screen(e)
            {
                e.rt.confirm_by = None;
            }
            if e.rec.stalled {
                e.rec.stalled = false;
            }
        }
    }

    async fn read_screen(&self, name: &str, target: &str) {
        let Some((cli, learn_idle)) = lock(&self.inner.sessions).get(name).map(|e| {
            // Never learned from a turn that outlived a daemon restart: its foreground is the
            // command still running, not the CLI.
            let calm = e.rec.state == State::Idle
                && e.rt.turn_started.is_none()
                && e.rec.queue.is_empty()
                && !e.rt.recovered;
            (e.rec.cli.clone(), calm && e.rt.idle_foreground.is_none())
        }) else {
            return;
        };
        let Some((adapter, pack)) = self.kind_of(&cli) else {
            return;
        };
        if learn_idle
            && !adapter.completes_by_hook()
            && let Ok(fg) = self.inner.mux.foreground(target).await
            && let Some(e) = lock(&self.inner.sessions).get_mut(name)
            && e.rt.turn_started.is_none()
        {
            // What the pane runs while waiting for input: a quiet pane running anything else
            // is still working. Kept in the record for the next daemon.
            e.rec.idle_program = fg.clone();
            e.rt.idle_foreground = Some(fg);
        }
        match self.inner.mux.capture(target, None, false).await {
            Ok(screen) => {
                let a = pack.analyze(&screen);
                self.on_screen(name, a);
                if let Some(e) = lock(&self.inner.sessions).get_mut(name) {
                    e.rt.last_screen = screen;
                }
            }
            Err(MuxError::NoSuchTarget(_)) | Err(MuxError::NoServer(_)) => {}
            Err(e) => debug!("screen read failed: {e}"),
        }
    }

    /// Applies what the screen shows to the session's state.
    pub(crate) fn on_screen(&self, name: &str, a: Analysis) {
        let mut deliver = false;
        let mut recovered_turn = false;
        let mut events: Vec<EventKind> = Vec::new();
        let mut state_to: Option<(State, &'static str)> = None;
        let id;
        {
            let mut sessions = lock(&self.inner.sessions);
            let Some(e) = running(&mut sessions, name) else {
                return;
            };
            id = e.rec.id.clone();
            let (by_hook, start_hook) =
                self.kind_of(&e.rec.cli).map_or((false, false), |(ad, _)| {
                    (ad.completes_by_hook(), ad.signals_turn_start())
                });
            // A session whose hooks cannot reach the daemon (recovered without its token) is
            // read off the screen; otherwise the start hook, not a frame, starts a turn.
            let start_hook = start_hook && !e.rec.hook_token.is_empty();
            // A CLI with an API is ready when the API is: input goes through it, so the TUI
            // need not have settled. Without one, the screen says.
            let api = self.awaits_api(e);
            let ready = if api {
                e.rt.api.is_some()
            } else {
                (a.idle && a.ready) || !by_hook
            };
            let now = Instant::now();
            // The CLI shows it works on the input: submitted.
            if a.busy
                && e.rt.confirm_by.is_some()
                && e.rt.turn_started.is_some()
                && self.confirms_by_screen(e)
            {
                e.rt.confirm_by = None;
            }
            // With the CLI's API connected, prompts come and go through it; the screen's view
            // of a dialog (drawn late, or lingering after an answer) would only add noise.
            let screen_prompt = if e.rt.api.is_some() {
                None
            } else {
                a.prompt.as_ref()
            };
            match (screen_prompt, e.rec.prompt.clone()) {
                (Some(sp), Some(mut cur)) => {
                    let pending = e.rt.prompt_pending_since.is_some() && cur.source == "hook";
                    // Published from the hook alone, without options, because the dialog was
                    // slow to appear: the same prompt again, now with the dialog's choices.
                    let late_options =
                        cur.source == "hook" && cur.options.is_empty() && !sp.options.is_empty();
                    // A dialog whose question is drawn but not yet its options is waited for
                    // (the tick publishes the hook's words if the options never come).
                    let half_drawn = cur.options.is_empty() && sp.options.is_empty();
                    if (pending && !half_drawn) || late_options {
                        // The dialog the hook announced is on screen: take its exact words.
                        if !sp.text.is_empty() && cur.kind != "question" {
                            cur.text = sp.text.clone();
                        }
                        if !sp.options.is_empty() {
                            cur.options = sp.options.clone();
                        }
                        if cur.subject.is_empty() {
                            cur.subject = sp.subject.clone();
                        }
                        cur.answer = sp.answer;
                        e.rt.prompt_pending_since = None;
                        e.rec.prompt = Some(cur.clone());
                        events.push(EventKind::Waiting { prompt: cur });
                    } else if !cur.same_question(&sp.kind, &sp.text, &sp.options)
                        && cur.source == "screen"
                    {
                        // A different dialog replaced the previous one.
                        events.push(EventKind::PromptResolved {
                            prompt_id: cur.id.clone(),
                            by: "terminal".into(),
                            answer: String::new(),
                            actor: String::new(),
                            note: String::new(),
                        });
                        remember_resolved(&mut e.rt.resolved, &cur.id, "terminal");
                        let p = new_prompt(sp, "screen");
                        e.rec.prompt = Some(p.clone());
                        events.push(EventKind::Waiting { prompt: p });
                    }
                }
                (Some(sp), None) => {
                    // Right after an answer, with no dialog-free screen seen since, a dialog is
                    // the answered one being closed (whatever its words look like in its last
                    // frames): not a new prompt. One still there after that is published.
                    let lingering = e.rt.answered_screen.as_ref().is_some_and(|(sig, at, _)| {
                        now.duration_since(*at) < ANSWERED_LINGER
                            && sig.as_ref().is_none_or(|s| {
                                *s == signature(&sp.kind, &sp.text, &sp.options, &sp.subject)
                            })
                    });
                    // Looked at again when the lingering ends (no output may come to wake the
                    // watcher: the CLI waits for its answer).
                    if let Some((_, at, scheduled @ false)) = e.rt.answered_screen.as_mut()
                        && lingering
                    {
                        *scheduled = true;
                        let (poke, wait) =
                            (e.rt.poke.clone(), ANSWERED_LINGER - now.duration_since(*at));
                        tokio::spawn(async move {
                            tokio::time::sleep(wait + Duration::from_millis(20)).await;
                            poke.notify_one();
                        });
                    }
                    if !lingering {
                        e.rt.answered_screen = None;
                        let p = new_prompt(sp, "screen");
                        e.rec.prompt = Some(p.clone());
                        e.rt.confirm_by = None;
                        state_to = Some((State::Waiting, "the CLI asks"));
                        events.push(EventKind::Waiting { prompt: p });
                    }
                }
                (None, Some(cur)) => {
                    if e.rt.prompt_pending_since.is_none() && e.rt.api.is_none() {
                        // Gone from the screen, and nobody answered through clibot: the person at
                        // the terminal did (or the CLI withdrew it).
                        e.rec.prompt = None;
                        remember_resolved(&mut e.rt.resolved, &cur.id, "terminal");
                        if let Some((tx, _)) = e.rt.waiters.remove(&cur.id) {
                            let _ = tx.send(String::new());
                        }
                        events.push(EventKind::PromptResolved {
                            prompt_id: cur.id.clone(),
                            by: "terminal".into(),
                            answer: String::new(),
                            actor: String::new(),
                            note: String::new(),
                        });
                        state_to = Some((State::Working, "answered at the terminal"));
                    }
                }
                (None, None) => {
                    // The answered dialog is gone: the next dialog is a new one.
                    e.rt.answered_screen = None;
                }
            }
            if screen_prompt.is_none() && e.rec.prompt.is_none() {
                match e.rec.state {
                    State::Starting if ready => {
                        state_to = Some((State::Idle, "ready"));
                        deliver = true;
                    }
                    State::Working | State::Waiting if a.interrupted && by_hook => {
                        // Claude Code fires no Stop hook for an interrupted turn.
                        state_to = Some((State::Idle, "interrupted"));
                        e.rt.turn_started = None;
                        deliver = true;
                    }
                    // With the CLI's API connected, it says when a turn runs, and with a start
                    // hook the hook does: a busy footer that lingers after the turn ended says
                    // nothing. Without either, a busy screen is a turn started at the desk,
                    // unless it is the frame right after a completion.
                    State::Idle | State::Error
                        if a.busy
                            && e.rt.api.is_none()
                            && !start_hook
                            && e.rt
                                .last_completed
                                .is_none_or(|t| now.duration_since(t) >= AFTER_TURN_SETTLE) =>
                    {
                        e.rt.turn_started.get_or_insert(now);
                        e.rt.net_closed = false;
                        state_to = Some((State::Working, "busy"))
                    }
                    // A CLI with an API says itself when the recovered turn ended
                    // ([`crate::opencode_link`]); its screen may look idle while it thinks.
                    State::Working
                        if by_hook && e.rt.recovered && a.idle && !a.busy && !api =>
                    {
                        e.rt.recovered = false;
                        recovered_turn = true;
                    }
                    _ => {}
                }
            }
            // The safety net's clock: how long a working hook-driven CLI has looked idle.
            if e.rec.state == State::Working
                && by_hook
                && !api
                && state_to.is_none()
                && a.settled
                && a.prompt.is_none()
                && e.rec.prompt.is_none()
            {
                e.rt.idle_since.get_or_insert(now);
            } else {
                e.rt.idle_since = None;
            }
            if let Some((kind, line)) = &a.error
                && e.rt.last_error_line.as_deref() != Some(line.as_str())
            {
                e.rt.last_error_line = Some(line.clone());
                e.rec.error = Some(line.clone());
                events.push(EventKind::Error {
                    message: line.clone(),
                    kind: kind.clone(),
                });
            }
        }
        if let Some((to, reason)) = state_to {
            self.set_state(name, to, reason);
        }
        for ev in events {
            self.event(name, &id, ev);
        }
        if recovered_turn {
            let rec = lock(&self.inner.sessions).get(name).map(|e| e.rec.clone());
            let text = rec
                .and_then(|r| {
                    self.kind_of(&r.cli)
                        .and_then(|(ad, _)| ad.recover_reply(&r, self.cli(&r.cli).ok().as_deref()))
                })
                .unwrap_or_default();
            self.complete_turn(name, text, "transcript");
        } else if deliver {
            self.deliver_queued(name);
        }
    }

    async fn on_tick(&self, name: &str, target: &str) {
        let now = Instant::now();
        let stall_after = Duration::from_millis(self.inner.settings.config.daemon.stall_after_ms);
        let mut complete_from_screen: Option<(Option<i64>, usize)> = None;
        let mut retry_enter = false;
        let mut publish: Option<Prompt> = None;
        let mut stalled: Option<u64> = None;
        let mut ready = false;
        let mut net = false;
        let idle_end = Duration::from_millis(self.inner.settings.config.daemon.idle_turn_end_ms);
        let id;
        {
            let mut sessions = lock(&self.inner.sessions);
            let Some(e) = running(&mut sessions, name) else {
                return;
            };
            id = e.rec.id.clone();
            let live = self.live();
            let Some(kind) = live.kinds.get(&e.rec.cli) else {
                return;
            };
            if e.rec.state == State::Working
                && kind.adapter.completes_by_hook()
                && !self.awaits_api(e)
                && e.rt
                    .idle_since
                    .is_some_and(|t| now.duration_since(t) >= idle_end)
                && e.rt
                    .turn_started
                    .is_none_or(|t| now.duration_since(t) >= idle_end)
            {
                net = true;
            }
            let quiet =
                Duration::from_millis(self.cli(&e.rec.cli).map(|c| c.quiet_ms).unwrap_or(1500));
            let silent = now.duration_since(e.rt.last_output);
            let screen_wait = match &e.rec.prompt {
                Some(p) if p.options.is_empty() => HOOK_PROMPT_NO_OPTIONS_WAIT,
                _ => HOOK_PROMPT_SCREEN_WAIT,
            };
            if let Some(since) = e.rt.prompt_pending_since
                && now.duration_since(since) > screen_wait
            {
                e.rt.prompt_pending_since = None;
                publish = e.rec.prompt.clone();
            }
            if let Some(by) = e.rt.confirm_by
                && now > by
            {
                e.rt.confirm_by = None;
                // Confirmed by its start hook or its busy screen, a CLI may be asked a few times;
                // by output, once.
                let tries = if self.start_hook_live(e) || self.confirms_by_screen(e) {
                    3
                } else {
                    1
                };
                if e.rt.confirm_tries < tries {
                    e.rt.confirm_tries += 1;
                    retry_enter = true;
                    if e.rt.confirm_tries < tries {
                        e.rt.confirm_by = Some(now + CONFIRM_AFTER);
                    }
                }
            }
            match e.rec.state {
                // A CLI whose API link gave up falls back to quiescence, like any program.
                State::Working
                    if (!kind.adapter.completes_by_hook()
                        || (kind.adapter.serves_api() && !self.awaits_api(e)))
                        && e.rt
                            .turn_started
                            .is_some_and(|t| now.duration_since(t) >= quiet)
                        && silent >= quiet =>
                {
                    complete_from_screen = Some((e.rt.anchor.take(), e.rt.input_lines));
                    e.rt.turn_started = None;
                }
                State::Starting
                    if silent >= STARTUP_QUIET && (!self.awaits_api(e) || e.rt.api.is_some()) =>
                {
                    ready = true
                }
                _ => {}
            }
            if e.rec.state == State::Working && silent >= stall_after && !e.rec.stalled {
                e.rec.stalled = true;
                stalled = Some(silent.as_millis() as u64);
            }
        }
        if let Some(p) = publish {
            self.event(name, &id, EventKind::Waiting { prompt: p });
        }
        if let Some(ms) = stalled {
            warn!(silent_ms = ms, "no output for a long time");
            self.event(name, &id, EventKind::Stalled { silent_ms: ms });
        }
        if retry_enter {
            info!("no visible change after Enter; pressing Enter once more");
            let input = lock(&self.inner.sessions)
                .get(name)
                .map(|e| e.input.clone());
            if let Some(input) = input {
                let _g = input.lock().await;
                let _ = self
                    .inner
                    .mux
                    .send_keys(target, &[Key::Named("Enter".into())])
                    .await;
            }
        }
        if ready {
            self.set_state(name, State::Idle, "ready");
            self.deliver_queued(name);
        }
        if net {
            self.end_idle_turn(name, target, idle_end).await;
        }
        if let Some((anchor, input_lines)) = complete_from_screen {
            // Quiet, but is a command still running in the foreground (a shell's `sleep 10`)?
            let fg = self.inner.mux.foreground(target).await.ok();
            let still_running = {
                let mut sessions = lock(&self.inner.sessions);
                match sessions.get_mut(name) {
                    Some(e) => match (&e.rt.idle_foreground, &fg) {
                        (Some(idle), Some(now)) if idle != now => {
                            // Not over: put the turn back and look again later.
                            e.rt.turn_started = Some(Instant::now());
                            e.rt.anchor = anchor;
                            true
                        }
                        _ => false,
                    },
                    None => return,
                }
            };
            if still_running {
                return;
            }
            let text = match (anchor, self.inner.mux.cursor(target).await) {
                (Some(a), Ok((hist, _))) => self
                    .inner
                    .mux
                    .capture(target, Some(a - hist), false)
                    .await
                    .ok(),
                _ => self.inner.mux.capture(target, None, false).await.ok(),
            }
            .map(|c| reply_from_screen(&c, input_lines))
            .unwrap_or_default();
            self.complete_turn(name, text, "screen");
        }
    }

    /// The safety net: the screen of a working hook-driven CLI has looked idle for `idle_end`
    /// and no completion hook came (lost, or never sent). Looked at once more; if it still
    /// looks idle, the turn ends with the reply from the CLI's transcript (when it keeps one
    /// and it holds a new reply), and the next queued input goes.
    async fn end_idle_turn(&self, name: &str, target: &str, idle_end: Duration) {
        let Some((cli, pack)) = lock(&self.inner.sessions).get(name).and_then(|e| {
            self.kind_of(&e.rec.cli)
                .map(|(_, p)| (e.rec.cli.clone(), p))
        }) else {
            return;
        };
        let Ok(screen) = self.inner.mux.capture(target, None, false).await else {
            return;
        };
        let a = pack.analyze(&screen);
        let rec = {
            let mut sessions = lock(&self.inner.sessions);
            let Some(e) = running(&mut sessions, name) else {
                return;
            };
            if !(a.settled && a.prompt.is_none())
                || e.rec.state != State::Working
                || e.rec.prompt.is_some()
            {
                e.rt.idle_since = None;
                return;
            }
            e.rec.clone()
        };
        let reply = self
            .kind_of(&cli)
            .and_then(|(ad, _)| ad.recover_reply(&rec, self.cli(&cli).ok().as_deref()))
            .filter(|r| rec.last_reply.as_ref() != Some(r))
            .unwrap_or_default();
        warn!(
            idle_ms = idle_end.as_millis() as u64,
            "the CLI looks idle but its completion hook never came; ending the turn"
        );
        self.complete_turn(name, reply, "idle");
        if let Some(e) = lock(&self.inner.sessions).get_mut(name) {
            e.rt.net_closed = true;
        }
    }

    /// Records a finished turn and moves on to the next queued input.
    pub(crate) fn complete_turn(&self, name: &str, text: String, source: &str) {
        let id = {
            let mut sessions = lock(&self.inner.sessions);
            let Some(e) = sessions.get_mut(name) else {
                return;
            };
            e.rt.turn_started = None;
            e.rt.idle_since = None;
            e.rt.net_closed = false;
            e.rt.recovered = false;
            e.rec.turn_anchor = None;
            e.rec.turn_input_lines = 0;
            e.rec.turn_started_ms = 0;
            e.rt.last_completed = Some(Instant::now());
            e.rt.confirm_by = None;
            e.rec.stalled = false;
            if let Some(p) = e.rec.prompt.take() {
                remember_resolved(&mut e.rt.resolved, &p.id, "cli");
            }
            self.inner.metrics.turn_completed(name, &e.rec.cli);
            e.rec.id.clone()
        };
        let ev = self.event_full(
            name,
            &id,
            EventKind::TurnCompleted {
                text,
                source: source.to_string(),
                blob_id: String::new(),
                full_bytes: 0,
            },
        );
        if let EventKind::TurnCompleted {
            text,
            blob_id,
            full_bytes,
            ..
        } = ev.kind
        {
            let long = !blob_id.is_empty();
            if let Some(e) = lock(&self.inner.sessions).get_mut(name) {
                e.rec.last_reply = Some(text);
                e.rec.last_reply_seq = ev.seq;
                e.rec.last_reply_blob = blob_id;
                e.rec.last_reply_bytes = full_bytes;
            }
            if long {
                self.expire_blobs();
            }
        }
        info!(source, "turn completed");
        let reason = if source == "idle" {
            "turn ended: the CLI looked idle and no completion hook came"
        } else {
            "turn completed"
        };
        self.set_state(name, State::Idle, reason);
        self.persist();
        self.deliver_queued(name);
    }

    /// Accepts input: delivered now when the CLI is ready, else queued behind the running turn.
    /// Returns the event's sequence number and whether it was queued.
    pub(crate) async fn submit_input(
        &self,
        name: &str,
        text: String,
        submit: bool,
    ) -> Result<(u64, bool), CoreError> {
        let (max_inputs, max_bytes) = {
            let d = &self.inner.settings.config.daemon;
            (d.max_queued_inputs, d.max_queued_bytes)
        };
        let (queued, id) = {
            let mut sessions = lock(&self.inner.sessions);
            let e = crate::core::usable(&mut sessions, name)?;
            if e.rec.state.is_exited() {
                return Err(CoreError::Exited(name.to_string()));
            }
            let busy = matches!(
                e.rec.state,
                State::Working | State::Waiting | State::Starting
            );
            if submit && (busy || !e.rec.queue.is_empty() || e.rt.delivering) {
                let bytes: usize = e.rec.queue.iter().map(String::len).sum();
                if e.rec.queue.len() >= max_inputs {
                    return Err(CoreError::QueueFull {
                        name: name.to_string(),
                        detail: format!(
                            "{} messages already wait, the limit ([daemon] max_queued_inputs)",
                            e.rec.queue.len()
                        ),
                    });
                }
                if bytes + text.len() > max_bytes {
                    return Err(CoreError::QueueFull {
                        name: name.to_string(),
                        detail: format!(
                            "{bytes} bytes already wait and this message has {}, over the limit of {max_bytes} ([daemon] max_queued_bytes)",
                            text.len()
                        ),
                    });
                }
                e.rec.queue.push(text.clone());
                // One line appended to the session's queue file, in the queue's order: the cost
                // of the message, not of every session's record.
                let file = self.inner.queues.push(&e.rec.id, &text);
                (Some((e.rec.queue.len() as u32, file)), e.rec.id.clone())
            } else {
                (None, e.rec.id.clone())
            }
        };
        if let Some((position, file)) = queued {
            if let Err(e) = file.and_then(|f| f.sync_data()) {
                warn!("cannot keep the queued message on disk (it is kept in memory): {e}");
            }
            let seq = self.event(name, &id, EventKind::InputQueued { text, position });
            info!(position, "input queued behind the running turn");
            return Ok((seq, true));
        }
        let seq = self.deliver(name, &text, submit).await?;
        Ok((seq, false))
    }

    /// Types the text (and Enter) now, serialised with all other input to this session.
    async fn deliver(&self, name: &str, text: &str, submit: bool) -> Result<u64, CoreError> {
        let (rec, input) = self.lookup(name)?;
        let delay = self.cli(&rec.cli).map(|c| c.submit_delay_ms).unwrap_or(300);
        let _turn = input.lock().await;
        let mux = &self.inner.mux;
        // Where this turn's output will begin, for CLIs whose reply is read off the screen.
        let anchor = match mux.cursor(rec.target()).await {
            Ok((hist, y)) => Some(hist + y),
            Err(_) => None,
        };
        // A CLI with an API takes a submitted message through it: no keystroke can be lost
        // while its TUI is still settling, and its confirmation is the API's own answer.
        let api = lock(&self.inner.sessions)
            .get(name)
            .and_then(|e| e.rt.api.clone())
            .filter(|_| submit && !text.is_empty());
        let mut by_api = false;
        if let Some(http) = api {
            match self.api_submit(name, &http, text).await {
                Ok(()) => by_api = true,
                Err(e) => warn!("OpenCode's API did not take the message ({e}); typing it"),
            }
        }
        if by_api {
            // Delivered.
        } else if text.contains('\n') || text.len() > TYPE_MAX {
            let n = self.inner.paste_counter.fetch_add(1, Ordering::Relaxed);
            mux.paste(rec.target(), &format!("clibot-{}-{n}", rec.id), text)
                .await?;
        } else if !text.is_empty() {
            mux.send_text(rec.target(), text).await?;
        }
        if submit && !by_api {
            if !text.is_empty() {
                tokio::time::sleep(Duration::from_millis(delay)).await;
            }
            mux.send_keys(rec.target(), &[Key::Named("Enter".into())])
                .await?;
        }
        let now = Instant::now();
        if submit && let Some(e) = lock(&self.inner.sessions).get_mut(name) {
            e.rt.turn_started = Some(now);
            e.rt.recovered = false;
            e.rt.anchor = anchor;
            e.rt.input_lines = text.lines().count().max(1);
            e.rec.turn_anchor = anchor;
            e.rec.turn_input_lines = e.rt.input_lines.min(u32::MAX as usize) as u32;
            e.rec.turn_started_ms = crate::store::now_ms();
            e.rt.confirm_by = (!by_api).then_some(now + CONFIRM_AFTER);
            e.rt.confirm_tries = 0;
            e.rt.last_output = now;
            e.rec.last_activity_ms = crate::store::now_ms();
            e.rec.error = None;
            if !text.trim().is_empty() {
                e.rec.last_input = crate::blobs::head(text, crate::blobs::EVENT_TEXT_MAX).to_string();
            }
        }
        let seq = self.event(
            name,
            &rec.id,
            EventKind::InputSent {
                text: text.to_string(),
                submitted: submit,
                blob_id: String::new(),
                full_bytes: 0,
            },
        );
        if submit {
            self.set_state(name, State::Working, "input sent");
            // On disk before the turn runs: a daemon killed mid-turn (even by kill -9) finds
            // it working, with where its output begins, and reports it when it ends.
            self.persist();
        }
        Ok(seq)
    }

    /// Delivers the oldest queued input if the session is ready for it.
    pub(crate) fn deliver_queued(&self, name: &str) {
        let next = {
            let mut sessions = lock(&self.inner.sessions);
            let Some(e) = sessions.get_mut(name) else {
                return;
            };
            if e.rt.delivering
                || e.rec.queue.is_empty()
                || !matches!(e.rec.state, State::Idle | State::Error)
            {
                return;
            }
            e.rt.delivering = true;
            let next = e.rec.queue.remove(0);
            if let Err(err) = self.inner.queues.pop(&e.rec.id, &e.rec.queue) {
                warn!("cannot record on disk that a queued message was typed: {err}");
            }
            next
        };
        let d = self.clone();
        let name = name.to_string();
        tokio::spawn(async move {
            let failed = match d.deliver(&name, &next, true).await {
                Ok(_) => false,
                Err(e) => {
                    warn!(session = %name, "queued input could not be delivered: {e}");
                    let id = lock(&d.inner.sessions)
                        .get(&name)
                        .map(|e| e.rec.id.clone())
                        .unwrap_or_default();
                    d.event(
                        &name,
                        &id,
                        EventKind::Error {
                            message: format!(
                                "a queued message could not be typed and was dropped: {e} (it began: {:?})",
                                next.chars().take(60).collect::<String>()
                            ),
                            kind: "input".into(),
                        },
                    );
                    true
                }
            };
            if let Some(e) = lock(&d.inner.sessions).get_mut(&name) {
                e.rt.delivering = false;
            }
            d.persist();
            if failed {
                // The session did not start a turn: the next queued input may go.
                d.deliver_queued(&name);
            }
        });
    }

    /// A hook call from a CLI: authenticated by the session id and token given at spawn.
    pub async fn hook(
        &self,
        session_id: &str,
        token: &str,
        event: &str,
        payload: &str,
    ) -> Result<String, CoreError> {
        let mut payload: Value = serde_json::from_str(payload)
            .map_err(|e| CoreError::InvalidArgument(format!("hook payload is not JSON: {e}")))?;
        let (name, cli, rec) = {
            let sessions = lock(&self.inner.sessions);
            let e = sessions
                .values()
                .find(|e| {
                    e.rec.id == session_id && crate::secrets::token_eq(&e.rec.hook_token, token)
                })
                .ok_or(CoreError::HookDenied)?;
            (e.rec.name.clone(), e.rec.cli.clone(), e.rec.clone())
        };
        // A jailed CLI reports paths as it sees them; its transcripts lie in its own copy of
        // its state on the host.
        if !rec.jail_home.is_empty()
            && let Some(Value::String(p)) = payload.get_mut("transcript_path")
        {
            *p = self.host_path(&rec, p);
        }
        let event = if event.is_empty() {
            payload
                .get("hook_event_name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        } else {
            event.to_string()
        };
        let Some((adapter, _)) = self.kind_of(&cli) else {
            return Ok(String::new());
        };
        let span = info_span!("session", session = %name);
        async {
            debug!(event, "hook");
            let signal = adapter.hook(&event, &payload);
            self.apply_signal(&name, signal, payload).await
        }
        .instrument(span)
        .await
    }

    /// What a hook call (or the CLI's API) says happened, applied to the session.
    pub(crate) async fn apply_signal(
        &self,
        name: &str,
        signal: HookSignal,
        payload: Value,
    ) -> Result<String, CoreError> {
        let name = name.to_string();
        {
            match signal {
                HookSignal::Ignore => Ok(String::new()),
                HookSignal::TurnStarted => {
                    if let Some(e) = lock(&self.inner.sessions).get_mut(&name) {
                        e.rt.confirm_by = None;
                        e.rt.net_closed = false;
                        e.rt.turn_started.get_or_insert(Instant::now());
                    }
                    self.set_state(&name, State::Working, "prompt submitted");
                    Ok(String::new())
                }
                HookSignal::TurnCompleted { text } => {
                    // The safety net already ended this turn with this very reply: the hook is
                    // late, not a new turn.
                    let late = lock(&self.inner.sessions).get_mut(&name).is_some_and(|e| {
                        let late = e.rt.net_closed
                            && e.rec.state == State::Idle
                            && e.rec.last_reply.as_ref() == Some(&text);
                        e.rt.net_closed = false;
                        late
                    });
                    if late {
                        debug!("a completion hook for a turn already ended; ignored");
                    } else {
                        self.complete_turn(&name, text, "hook");
                    }
                    Ok(String::new())
                }
                HookSignal::Error { kind, message } => {
                    let id = {
                        let mut sessions = lock(&self.inner.sessions);
                        let Some(e) = sessions.get_mut(&name) else {
                            return Ok(String::new());
                        };
                        e.rec.error = Some(message.clone());
                        e.rt.turn_started = None;
                        e.rec.id.clone()
                    };
                    self.event(&name, &id, EventKind::Error { message, kind });
                    self.set_state(&name, State::Error, "the turn failed");
                    self.persist();
                    self.deliver_queued(&name);
                    Ok(String::new())
                }
                HookSignal::Prompt {
                    kind,
                    text,
                    options,
                    subject,
                    wait,
                } => {
                    self.hook_prompt(&name, kind, text, options, subject, payload, wait)
                        .await
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    /// A CLI asks through a hook: the session waits; the hook holds until a person answers
    /// through clibot or the configured time passes (then the CLI's own dialog stays up).
    async fn hook_prompt(
        &self,
        name: &str,
        kind: String,
        text: String,
        options: Vec<String>,
        subject: String,
        payload: Value,
        wait: bool,
    ) -> Result<String, CoreError> {
        let subject_kind = crate::subject::from_payload(&payload)
            .unwrap_or_else(|| crate::subject::infer(&text, &subject))
            .to_string();
        let prompt = Prompt {
            id: crate::core::new_id(),
            subject_kind,
            kind,
            text,
            options,
            subject,
            source: "hook".into(),
            answer: AnswerStyle::Digit,
            ..Default::default()
        };
        let (tx, rx) = oneshot::channel();
        let poke = {
            let mut sessions = lock(&self.inner.sessions);
            let Some(e) = sessions.get_mut(name) else {
                return Ok(String::new());
            };
            if let Some(old) = e.rec.prompt.take() {
                remember_resolved(&mut e.rt.resolved, &old.id, "cli");
            }
            e.rec.prompt = Some(prompt.clone());
            e.rt.prompt_pending_since = Some(Instant::now());
            e.rt.confirm_by = None;
            if wait {
                e.rt.waiters.insert(prompt.id.clone(), (tx, payload));
            }
            e.rt.poke.clone()
        };
        self.set_state(name, State::Waiting, "permission requested");
        poke.notify_one();
        if !wait {
            // This CLI takes answers only by keys: the hook returns at once.
            return Ok(String::new());
        }
        let wait = Duration::from_millis(self.inner.settings.config.daemon.permission_wait_ms);
        tokio::select! {
            r = rx => Ok(r.unwrap_or_default()),
            _ = tokio::time::sleep(wait) => {
                if let Some(e) = lock(&self.inner.sessions).get_mut(name) {
                    e.rt.waiters.remove(&prompt.id);
                }
                info!("no answer through clibot in time; the CLI's dialog stays for keys or the terminal");
                Ok(String::new())
            }
            _ = self.inner.shutdown.cancelled() => Ok(String::new()),
        }
    }

    /// Answers the prompt a session waits on. The first answer wins; a second one, or one for
    /// a prompt that is gone, is refused and never reaches the CLI.
    pub async fn answer_prompt(
        &self,
        name: &str,
        prompt_id: &str,
        answer: &str,
        by: &str,
    ) -> Result<(String, String), CoreError> {
        self.answer_prompt_as(name, prompt_id, answer, by, "clibot", "")
            .await
    }

    /// [`Daemon::answer_prompt`], recorded as resolved by `resolver` ("clibot" for a
    /// person's answer through clibot, "rule 2" or "decider" for an automatic one) with the
    /// line the chats show for it.
    pub(crate) async fn answer_prompt_as(
        &self,
        name: &str,
        prompt_id: &str,
        answer: &str,
        by: &str,
        resolver: &str,
        note: &str,
    ) -> Result<(String, String), CoreError> {
        // A chat button names its prompt, not the session: find the session that showed it.
        let owner;
        let name = if name.is_empty() {
            owner = self.session_of_prompt(prompt_id)?;
            owner.as_str()
        } else {
            name
        };
        self.await_api_link(name).await;
        let (prompt, choice, hook_reply, input, target, id) = {
            let mut sessions = lock(&self.inner.sessions);
            let e = sessions
                .get_mut(name)
                .ok_or_else(|| CoreError::NoSuchSession(name.to_string()))?;
            let resolved_by = |id: &str| {
                e.rt.resolved
                    .iter()
                    .find(|(p, _)| p == id)
                    .map(|(_, by)| by.clone())
            };
            let Some(p) = e.rec.prompt.clone() else {
                return Err(match resolved_by(prompt_id) {
                    Some(by) if !prompt_id.is_empty() => {
                        CoreError::AlreadyResolved(prompt_id.to_string(), by)
                    }
                    _ => CoreError::NotWaiting(name.to_string()),
                });
            };
            if !prompt_id.is_empty() && prompt_id != p.id {
                return Err(match resolved_by(prompt_id) {
                    Some(by) => CoreError::AlreadyResolved(prompt_id.to_string(), by),
                    None => CoreError::NotThatPrompt {
                        session: name.to_string(),
                        prompt: prompt_id.to_string(),
                        current: p.id.clone(),
                    },
                });
            }
            let choice = parse_choice(answer, &p).map_err(CoreError::InvalidArgument)?;
            let waiter = e.rt.waiters.remove(&p.id);
            let hook_reply = match waiter {
                Some((tx, payload)) => {
                    let adapter = self.kind_of(&e.rec.cli).map(|(a, _)| a);
                    match adapter.and_then(|a| a.decision(&p, &choice, &payload)) {
                        Some(out) => Some((tx, out)),
                        None => {
                            // This answer cannot go through the hook: release it, use keys.
                            let _ = tx.send(String::new());
                            None
                        }
                    }
                }
                None => None,
            };
            if hook_reply.is_none() {
                answer_strokes(&p, &choice).map_err(CoreError::InvalidArgument)?;
            }
            // By keys or through the hook, the dialog may linger while the CLI closes it.
            let sig = hook_reply
                .is_none()
                .then(|| signature(&p.kind, &p.text, &p.options, &p.subject));
            e.rt.answered_screen = Some((sig, Instant::now(), false));
            e.rec.prompt = None;
            e.rt.prompt_pending_since = None;
            remember_resolved(&mut e.rt.resolved, &p.id, resolver);
            (
                p,
                choice,
                hook_reply,
                e.input.clone(),
                e.rec.target().to_string(),
                e.rec.id.clone(),
            )
        };
        let label = match &choice {
            Choice::Option(i) => prompt.options.get(*i).cloned().unwrap_or_default(),
            Choice::Text(t) => t.clone(),
        };
        let via = match hook_reply {
            Some((tx, out)) => {
                let _ = tx.send(out);
                if prompt.source == "api" {
                    "api"
                } else {
                    "hook"
                }
            }
            None => {
                let strokes =
                    answer_strokes(&prompt, &choice).map_err(CoreError::InvalidArgument)?;
                let _g = input.lock().await;
                self.send_strokes(&target, &strokes).await?;
                // A TUI may drop a key that arrives while its dialog is still settling; if the
                // same dialog is still up a moment later, the answer is typed once more.
                if self.dialog_still_shown(name, &target, &prompt).await {
                    info!("the dialog ignored the answer; typing it once more");
                    self.send_strokes(&target, &strokes).await?;
                }
                "keys"
            }
        };
        if let Some(e) = lock(&self.inner.sessions).get_mut(name) {
            e.rt.last_output = Instant::now();
            e.rt.turn_started.get_or_insert(Instant::now());
        }
        self.event(
            name,
            &id,
            EventKind::PromptResolved {
                prompt_id: prompt.id.clone(),
                by: resolver.into(),
                answer: label,
                actor: by.to_string(),
                note: note.to_string(),
            },
        );
        // A new dialog may already be up and published (the CLI asked again at once): the
        // session waits on that one, it does not go back to working.
        let newer = lock(&self.inner.sessions)
            .get(name)
            .is_some_and(|e| e.rec.prompt.is_some());
        if !newer {
            self.set_state(name, State::Working, "answered");
        }
        self.persist();
        info!(via, "prompt answered");
        Ok((prompt.id, via.to_string()))
    }

    /// The session whose current or recently resolved prompt is `prompt_id`.
    pub fn session_of_prompt(&self, prompt_id: &str) -> Result<String, CoreError> {
        if prompt_id.is_empty() {
            return Err(CoreError::InvalidArgument(
                "name the session or the prompt to answer".into(),
            ));
        }
        let sessions = lock(&self.inner.sessions);
        sessions
            .values()
            .find(|e| e.rec.prompt.as_ref().is_some_and(|p| p.id == prompt_id))
            .or_else(|| {
                sessions
                    .values()
                    .find(|e| e.rt.resolved.iter().any(|(id, _)| id == prompt_id))
            })
            .map(|e| e.rec.name.clone())
            .ok_or_else(|| CoreError::UnknownPrompt(prompt_id.to_string()))
    }

    /// A prompt that came from the CLI's API is answered through it. Just after a daemon
    /// restart the link may still be reconnecting: give it a moment rather than fall back to
    /// keys, which depend on where the dialog's focus is.
    async fn await_api_link(&self, name: &str) {
        let deadline = Instant::now() + API_ANSWER_WAIT;
        loop {
            let linked = lock(&self.inner.sessions)
                .get(name)
                .is_none_or(|e| match &e.rec.prompt {
                    Some(p) if p.source == "api" => e.rt.waiters.contains_key(&p.id),
                    _ => true,
                });
            if linked || Instant::now() >= deadline || self.api_port(name).is_none() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn send_strokes(&self, target: &str, strokes: &[Stroke]) -> Result<(), CoreError> {
        for s in strokes {
            match s {
                Stroke::Key(k) => {
                    self.inner
                        .mux
                        .send_keys(target, std::slice::from_ref(k))
                        .await?
                }
                Stroke::Text(t) => self.inner.mux.send_text(target, t).await?,
            }
        }
        Ok(())
    }

    /// Whether the screen still shows `prompt` (the same question and options) after a second.
    async fn dialog_still_shown(&self, name: &str, target: &str, prompt: &Prompt) -> bool {
        let Some(cli) = lock(&self.inner.sessions)
            .get(name)
            .map(|e| e.rec.cli.clone())
        else {
            return false;
        };
        let Some((_, pack)) = self.kind_of(&cli) else {
            return false;
        };
        let deadline = Instant::now() + Duration::from_millis(1000);
        while Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
            match self.inner.mux.capture(target, None, false).await {
                // The very dialog answered: its words, options and subject. Anything else
                // (another command behind the same question) is a new prompt, never retyped at.
                Ok(screen) => match pack.analyze(&screen).prompt {
                    Some(p)
                        if p.text == prompt.text
                            && p.options == prompt.options
                            && p.subject == prompt.subject => {}
                    _ => return false,
                },
                Err(_) => return false,
            }
        }
        true
    }

    /// The last completed turn's reply (its head when long, with the blob holding it whole).
    pub fn last_reply(&self, name: &str) -> Result<LastReply, CoreError> {
        let sessions = lock(&self.inner.sessions);
        let e = sessions
            .get(name)
            .ok_or_else(|| CoreError::NoSuchSession(name.to_string()))?;
        Ok(LastReply {
            text: e.rec.last_reply.clone().unwrap_or_default(),
            seq: e.rec.last_reply_seq,
            blob_id: e.rec.last_reply_blob.clone(),
            full_bytes: e.rec.last_reply_bytes,
        })
    }

    /// Removes blobs no retained event names, keeping every session's last reply.
    pub(crate) fn expire_blobs(&self) {
        let pinned: std::collections::HashSet<String> = lock(&self.inner.sessions)
            .values()
            .filter(|e| !e.rec.last_reply_blob.is_empty())
            .map(|e| e.rec.last_reply_blob.clone())
            .collect();
        let events = &self.inner.events;
        if let Some(oldest) = events.oldest_time_ms() {
            events.blobs().expire(oldest, &pinned);
        }
    }
}

/// A session's last reply, as `clibotctl last` shows it.
#[derive(Debug, Clone, Default)]
pub struct LastReply {
    pub text: String,
    pub seq: u64,
    pub blob_id: String,
    pub full_bytes: u64,
}

fn new_prompt(sp: &crate::detect::ScreenPrompt, source: &str) -> Prompt {
    Prompt {
        id: crate::core::new_id(),
        subject_kind: sp
            .subject_kind
            .clone()
            .unwrap_or_else(|| crate::subject::infer(&sp.text, &sp.subject).to_string()),
        subject_partial: sp.subject_partial,
        kind: sp.kind.clone(),
        text: sp.text.clone(),
        options: sp.options.clone(),
        subject: sp.subject.clone(),
        source: source.into(),
        answer: sp.answer,
        ..Default::default()
    }
}

/// The session's entry while its CLI runs and nobody is stopping it.
fn running<'a>(
    sessions: &'a mut std::collections::BTreeMap<String, crate::core::Entry>,
    name: &str,
) -> Option<&'a mut crate::core::Entry> {
    sessions
        .get_mut(name)
        .filter(|e| !e.stopping && !e.rec.state.is_exited())
}

pub(crate) fn remember_resolved(resolved: &mut VecDeque<(String, String)>, id: &str, by: &str) {
    resolved.push_back((id.to_string(), by.to_string()));
    while resolved.len() > 32 {
        resolved.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn screen_reply_drops_echo_and_prompt() {
        let c = "$ ls -1\na.txt\nb.txt\n$ \n\n";
        assert_eq!(reply_from_screen(c, 1), "a.txt\nb.txt");
        let c = "$ echo one\n> echo two\none\ntwo\n$\n";
        assert_eq!(reply_from_screen(c, 2), "one\ntwo");
        assert_eq!(reply_from_screen(">>> 1+1\n2\n>>>\n", 1), "2");
    }
}
