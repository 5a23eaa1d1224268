//! Input to a session: typed now when the CLI is ready, else queued (bounded, on disk) and typed when the running turn ends; keys at once.

use std::time::{Duration, Instant};

use tracing::{Instrument, info, info_span, warn};

use crate::core::*;
use crate::error::CoreError;
use crate::keys::Key;
use crate::model::{Actor, State};
use crate::store::events::EventKind;
use crate::store::now_ms;

use super::shared::*;

/// What [`Daemon::deliver`] did with a message.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Delivery {
    /// Typed: the event that records it.
    Typed(u64),
    /// Not typed: a dialog is up (it was published as a prompt); the message waits.
    Held,
}

/// What became of a message sent to a session.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sent {
    /// The event that records it (input_sent, input_queued, or for a secret prompt_resolved).
    pub seq: u64,
    /// It waits behind the running turn.
    pub queued: bool,
    /// It answered a password prompt: typed, and kept nowhere.
    pub secret: bool,
}

/// The longest text whose echo is checked before its Enter (see `ensure_echoed`).
const ECHO_CHECKED_MAX: usize = 200;

impl Daemon {
    /// Accepts input: delivered now when the CLI is ready, else queued behind the running turn.
    /// Returns the event's sequence number and whether it was queued.
    async fn submit_input(
        &self,
        name: &str,
        text: String,
        submit: bool,
    ) -> Result<(u64, bool), CoreError> {
        let (max_inputs, max_bytes) = {
            let d = &self.settings().config.daemon;
            (d.max_queued_inputs, d.max_queued_bytes)
        };
        // A budget that holds this session's input: the message waits in the queue.
        let held = if submit { self.budget_hold(name) } else { None };
        let (queued, id) = self.sessions().try_update(name, |e| {
            // Hibernated, or being woken: the message waits in the queue meanwhile.
            let waking = e.rt.waking || e.rt.hibernating;
            if e.stopping && !waking {
                return Err(CoreError::Stopping(name.to_string()));
            }
            if e.rec.state.is_exited() && e.rec.state != State::Hibernated && !waking {
                return Err(CoreError::Exited(name.to_string()));
            }
            let busy = waking
                || held.is_some()
                || matches!(
                    e.rec.state,
                    State::Working | State::Waiting | State::Starting | State::Hibernated
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
                let file = self.queues().push(&e.rec.id, &text);
                Ok((Some((e.rec.queue.len() as u32, file)), e.rec.id.clone()))
            } else {
                Ok((None, e.rec.id.clone()))
            }
        })?;
        if let Some((position, file)) = queued {
            if let Err(e) = file.and_then(|f| crate::store::off_worker(|| f.sync_data())) {
                // Not on disk, so not confirmed: the sender keeps it and is told why.
                warn!("cannot keep the queued message on disk; not queued: {e}");
                self.sessions().update(name, |e| {
                    if let Some(i) = e.rec.queue.iter().rposition(|t| *t == text) {
                        e.rec.queue.remove(i);
                        if let Err(err) = self.queues().rewrite(&e.rec.id, &e.rec.queue) {
                            warn!("cannot rewrite the queue file either: {err}");
                        }
                    }
                });
                return Err(CoreError::NotQueued(e));
            }
            let seq = self.event(name, &id, EventKind::InputQueued { text, position });
            if let Some((spec, _)) = &held {
                info!(position, budget = %spec.name, "input held by a budget");
                self.event(
                    name,
                    &id,
                    EventKind::Notice {
                        text: Self::held_words(spec),
                        kind: "budget".into(),
                    },
                );
                return Ok((seq, true));
            }
            info!(position, "input queued behind the running turn");
            self.wake_if_hibernated(name);
            return Ok((seq, true));
        }
        match self.deliver(name, &text, submit).await? {
            Delivery::Typed(seq) => Ok((seq, false)),
            // A dialog came up between the check above and the typing: the message waits for
            // the turn like any other.
            Delivery::Held => self.queue_held(name, text).await,
        }
    }

    /// Queues a message a dialog held back (at the queue's head: it came first).
    async fn queue_held(&self, name: &str, text: String) -> Result<(u64, bool), CoreError> {
        let (id, file) = self.sessions().try_update(name, |e| {
            e.rec.queue.insert(0, text.clone());
            let file = self.queues().rewrite(&e.rec.id, &e.rec.queue);
            Ok((e.rec.id.clone(), file))
        })?;
        if let Err(err) = file {
            warn!("cannot keep the held message on disk (it is kept in memory): {err}");
        }
        let seq = self.event(name, &id, EventKind::InputQueued { text, position: 1 });
        info!("input held: a dialog is up; it is typed when the turn ends");
        Ok((seq, true))
    }

    /// Whether the session shows a dialog right now (a hook said it waits, or its screen shows
    /// one): then nothing is typed — a message would answer it. A dialog seen on the screen is
    /// published as a prompt. A password prompt does not hold a message: it is typed hidden.
    pub(crate) async fn dialog_up(&self, name: &str, target: &str, cli: &str) -> bool {
        let waiting = self
            .sessions()
            .get(name, |e| {
                e.rec.state == State::Waiting
                    && e.rec.prompt.as_ref().is_none_or(|p| !p.is_secret())
            })
            .unwrap_or(false);
        if waiting {
            return true;
        }
        match self
            .dialog_on_screen(self.mux_of(name).as_ref(), target, cli)
            .await
        {
            Some(a) => {
                if let Some(p) = &a.prompt {
                    info!(kind = %p.kind, "a dialog is up: the input waits");
                }
                self.on_screen(name, a);
                true
            }
            None => false,
        }
    }

    /// What `target`'s screen shows, when its CLI's pack reads a dialog on it (not a password
    /// prompt, which takes typed text).
    pub(crate) async fn dialog_on_screen(
        &self,
        mux: &dyn crate::tmux::Mux,
        target: &str,
        cli: &str,
    ) -> Option<crate::cli::detect::Analysis> {
        let (_, pack) = self.kind_of(cli)?;
        let screen = mux.capture(target, None, false).await.ok()?;
        let a = pack.analyze(&screen);
        a.prompt
            .as_ref()
            .is_some_and(|p| p.kind != crate::model::PromptKind::Secret)
            .then_some(a)
    }

    /// Types the text (and Enter) now, serialised with all other input to this session.
    pub(crate) async fn deliver(
        &self,
        name: &str,
        text: &str,
        submit: bool,
    ) -> Result<Delivery, CoreError> {
        let (rec, input) = self.lookup(name)?;
        self.refuse_unmanaged(&rec)?;
        let delay = self.cli(&rec.cli).map(|c| c.submit_delay_ms).unwrap_or(300);
        let _turn = input.lock().await;
        // Another message may have started a turn while this one waited for the lock: a
        // submitted message then waits for that turn (its Enter could meet its dialog).
        let state = self.sessions().state_of(name);
        if submit && !matches!(state, Some(State::Idle | State::Error)) {
            return Ok(Delivery::Held);
        }
        // Right before typing, the pane is read: nothing is ever typed into a dialog.
        if self.dialog_up(name, rec.target(), &rec.cli).await {
            if !submit {
                return Err(CoreError::DialogShown {
                    name: name.to_string(),
                });
            }
            return Ok(Delivery::Held);
        }
        let mux = self.mux_of(name);
        // Where this turn's output will begin, for CLIs whose reply is read off the screen.
        let anchor = match mux.cursor(rec.target()).await {
            Ok((hist, y)) => Some(hist + y),
            Err(_) => None,
        };
        // Their output is also copied outside tmux, for a turn longer than its scrollback.
        if submit
            && self
                .kind_of(&rec.cli)
                .is_some_and(|(a, _)| !a.completes_by_hook() && !a.serves_api())
        {
            self.copy_turn_output(name, &rec.id, rec.target()).await;
        }
        // A CLI with an API takes a submitted message through it: no keystroke can be lost
        // while its TUI is still settling, and its confirmation is the API's own answer.
        let api = self
            .sessions()
            .get(name, |e| e.rt.api.clone())
            .flatten()
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
        } else if self.already_typed(name, rec.target(), text).await {
            // The last daemon typed it and died before Enter: it is submitted, not typed twice.
            info!("the queued message was typed already by the last daemon; submitting it");
        } else if self
            .sessions()
            .update(name, |e| std::mem::take(&mut e.rt.maybe_entered))
            .unwrap_or(false)
        {
            // The last daemon was pressing its Enter as it stopped, and the line no longer
            // holds it: the Enter landed. Only Enter again (an empty line is harmless), never
            // the text twice.
            info!(
                "the queued message's Enter was being pressed when the last daemon stopped; not typed again"
            );
        } else if text.contains('\n') || text.len() > TYPE_MAX {
            let n = self.next_paste();
            mux.paste(rec.target(), &format!("clibot-{}-{n}", rec.id), text)
                .await?;
        } else if !text.is_empty() {
            mux.send_text(rec.target(), text).await?;
            // An AI CLI's input box echoes what is typed: one still settling (a woken Gemini
            // CLI loading its history) may drop it, and Enter would then submit nothing.
            let echoes = self
                .kind_of(&rec.cli)
                .is_some_and(|(a, _)| a.completes_by_hook());
            // (A long text may be shown folded, "[Pasted text #1]": only short ones are checked.)
            if submit && echoes && text.len() <= ECHO_CHECKED_MAX {
                self.ensure_echoed(mux.as_ref(), rec.target(), text).await?;
            }
        }
        if submit && !by_api {
            if !text.is_empty() {
                tokio::time::sleep(Duration::from_millis(delay)).await;
            }
            // A queued message (typed while its delivery holds the queue): its file says the
            // Enter is being pressed, for a daemon killed before `input_sent` is written.
            let queued = self
                .sessions()
                .get(name, |e| e.rt.delivering)
                .unwrap_or(false);
            if queued && let Err(e) = self.queues().entering(&rec.id, self.events().last_seq()) {
                warn!("cannot record on disk that a queued message's Enter is pressed: {e}");
            }
            mux.send_keys(rec.target(), &[Key::Named("Enter".into())])
                .await?;
        }
        let now = Instant::now();
        if submit {
            self.sessions().update(name, |e| {
                e.rt.turn
                    .submitted(now, anchor, text.lines().count(), by_api);
                e.turn_began(anchor, crate::store::now_ms());
                e.rec.last_activity_ms = crate::store::now_ms();
                e.rec.error = None;
                if !text.trim().is_empty() {
                    e.rec.last_input =
                        crate::store::blobs::head(text, crate::store::blobs::EVENT_TEXT_MAX)
                            .to_string();
                }
            });
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
        Ok(Delivery::Typed(seq))
    }

    /// Whether `text` already stands at the end of the pane's input line, typed by a daemon
    /// that died before it pressed Enter (asked once, after a start with input queued).
    async fn already_typed(&self, name: &str, target: &str, text: &str) -> bool {
        let asked = self
            .sessions()
            .update(name, |e| std::mem::take(&mut e.rt.maybe_half_typed))
            .unwrap_or(false);
        let text = text.trim_end();
        if !asked || text.is_empty() || text.contains('\n') || text.len() > TYPE_MAX {
            return false;
        }
        let mux = self.mux_of(name);
        let (Ok(screen), Ok((_, y))) = (
            mux.capture(target, None, false).await,
            mux.cursor(target).await,
        ) else {
            return false;
        };
        // On the line the cursor stands on, right before it: output that merely ends with the
        // same words is not an input line.
        screen
            .lines()
            .nth(usize::try_from(y).unwrap_or(usize::MAX))
            .is_some_and(|l| l.trim_end().ends_with(text))
    }

    /// Waits for the head of `text`, just typed (at most [`ECHO_CHECKED_MAX`] bytes), to show on the screen (3 s at most); a CLI
    /// that never showed it was not taking input yet, and it is typed once more.
    async fn ensure_echoed(
        &self,
        mux: &dyn crate::tmux::Mux,
        target: &str,
        text: &str,
    ) -> Result<(), crate::tmux::MuxError> {
        let head: String = text.trim().chars().take(16).collect();
        if head.chars().count() < 4 {
            return Ok(());
        }
        for _ in 0..15 {
            let shown = mux
                .capture(target, None, false)
                .await
                .map_or(true, |s| s.contains(&head));
            if shown {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        warn!(
            "the typed text never showed on the screen (the CLI was not taking input yet); typing it again"
        );
        mux.send_text(target, text).await
    }

    /// Delivers the oldest queued input if the session is ready for it. The message leaves the
    /// queue (in memory and on disk) only once it was typed: a daemon killed while typing it
    /// finds it queued still, and a dialog that holds it keeps it first in line.
    pub(crate) fn deliver_queued(&self, name: &str) {
        // A budget in force holds the queue until it is lifted or its period ends.
        if self.budget_hold(name).is_some() {
            return;
        }
        let next = self.sessions().update(name, |e| {
            if e.rt.delivering
                || e.rec.queue.is_empty()
                || !matches!(e.rec.state, State::Idle | State::Error)
            {
                return None;
            }
            e.rt.delivering = true;
            // Before the head is typed, its file says so: a daemon killed from here on leaves
            // the next one to ask the event log whether it was submitted (then it is not
            // typed again) or not (then it is, a half-typed line completed).
            if let Err(err) = self.queues().typing(&e.rec.id, self.events().last_seq()) {
                warn!("cannot record on disk that a queued message is being typed: {err}");
            }
            e.rec.queue.first().cloned()
        });
        let Some(next) = next.flatten() else {
            return;
        };
        let d = self.clone();
        let name = name.to_string();
        self.in_background(async move {
            let taken = |d: &Daemon| {
                d.sessions().update(&name, |e| {
                    if e.rec.queue.first() == Some(&next) {
                        e.rec.queue.remove(0);
                        if let Err(err) = d.queues().pop(&e.rec.id, &e.rec.queue) {
                            warn!("cannot record on disk that a queued message was typed: {err}");
                        }
                    }
                });
            };
            let failed = match d.deliver(&name, &next, true).await {
                Ok(Delivery::Typed(_)) => {
                    taken(&d);
                    false
                }
                Ok(Delivery::Held) => false,
                Err(e) => {
                    taken(&d);
                    warn!(session = %name, "queued input could not be delivered: {e}");
                    let id = d.sessions().id_of(&name).unwrap_or_default();
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
            d.sessions().update(&name, |e| e.rt.delivering = false);
            d.persist();
            if failed {
                // The session did not start a turn: the next queued input may go.
                d.deliver_queued(&name);
            }
        });
    }

    /// Types `text` into the session and, when `submit`, presses Enter after the CLI's settle
    /// time. Multi-line text goes as one bracketed paste. While a turn runs the text is queued
    /// and delivered when the CLI is ready. Returns the event's sequence number and whether the
    /// text was queued.
    /// [`Daemon::send_input`] for a chat message: a key seen before (a gateway that restarted
    /// before confirming the message to its platform hands it over again) is accepted without
    /// typing the text a second time.
    pub async fn send_input_once(
        &self,
        name: &str,
        text: &str,
        submit: bool,
        key: &str,
        by: &str,
    ) -> Result<Sent, CoreError> {
        if key.is_empty() {
            return self.send_or_answer_secret(name, text, submit, by).await;
        }
        match self.seen_inputs().claim(key).await {
            crate::chat::dedupe::Claim::Seen(seq) => {
                info!(
                    session = name,
                    key, "chat message seen before; not typed again"
                );
                Ok(Sent {
                    seq,
                    queued: false,
                    secret: false,
                })
            }
            crate::chat::dedupe::Claim::Mine(reservation) => {
                // On an error the reservation is dropped: the message was not taken, and a
                // redelivery may try again.
                let r = self.send_or_answer_secret(name, text, submit, by).await?;
                reservation.done(r.seq);
                Ok(r)
            }
        }
    }

    /// Refuses text longer than one `send` may carry (`[daemon] max_input_bytes`).
    fn check_input_len(&self, text: &str) -> Result<(), CoreError> {
        let max = self.settings().config.daemon.max_input_bytes;
        if text.len() > max {
            return Err(CoreError::TextTooLong {
                len: text.len(),
                max,
            });
        }
        Ok(())
    }

    /// Text for a session that waits on a password prompt is its answer: typed, never queued
    /// or kept (see [`crate::model::secret_placeholder`]). Any other text is input.
    async fn send_or_answer_secret(
        &self,
        name: &str,
        text: &str,
        submit: bool,
        by: &str,
    ) -> Result<Sent, CoreError> {
        let secret = self
            .sessions()
            .get(name, |e| {
                e.rec
                    .prompt
                    .as_ref()
                    .filter(|p| p.is_secret())
                    .map(|p| p.id.clone())
            })
            .flatten();
        if let Some(prompt_id) = secret.filter(|_| submit) {
            // The same bound as any input: a password is typed too.
            self.check_input_len(text)?;
            let a = self.answer_prompt(name, &prompt_id, text, by).await?;
            return Ok(Sent {
                seq: a.seq,
                queued: false,
                secret: true,
            });
        }
        let (seq, queued) = self.send_input(name, text, submit).await?;
        Ok(Sent {
            seq,
            queued,
            secret: false,
        })
    }

    /// Claims a chat command or button press by its key: true the first time only, so that a
    /// redelivered update does not restart, stop or press anything twice. Kept with the keys of
    /// typed messages, under their own prefix.
    pub async fn claim_once(&self, key: &str) -> bool {
        match self.seen_inputs().claim(&format!("once:{key}")).await {
            crate::chat::dedupe::Claim::Seen(_) => false,
            crate::chat::dedupe::Claim::Mine(reservation) => {
                reservation.done(0);
                true
            }
        }
    }

    pub async fn send_input(
        &self,
        name: &str,
        text: &str,
        submit: bool,
    ) -> Result<(u64, bool), CoreError> {
        self.check_input_len(text)?;
        if let Some(c) = text
            .chars()
            .find(|c| c.is_control() && !matches!(c, '\n' | '\t' | '\r'))
        {
            return Err(CoreError::Input(format!(
                "text contains the control character U+{:04X}, which a terminal would take as a key: text is typed as it is written, so send keys separately (`clibotctl keys SESSION C-d`, or !!keys from a chat)",
                c as u32
            )));
        }
        // One newline convention; trailing newlines would be typed as extra blank lines —
        // submitting is what Enter is for.
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        let text = text.trim_end_matches('\n');
        if text.is_empty() && !submit {
            return Err(CoreError::Input(
                "nothing to send: the text is empty and submit is off".into(),
            ));
        }
        let span = info_span!("session", session = %name);
        self.submit_input(name, text.to_string(), submit)
            .instrument(span)
            .await
    }

    /// Presses named keys, in order, at once: never behind queued input, so that Escape or
    /// C-c interrupts the running turn. Only input being typed right now goes first (keys
    /// wait for the paste or the keystrokes in progress, never inside them).
    pub async fn send_keys(&self, name: &str, keys: &[String]) -> Result<u64, CoreError> {
        self.send_keys_by(name, keys, Actor::LOCAL).await
    }

    /// [`Daemon::send_keys`] on behalf of `by` ("local", or "PLATFORM:USER"): a dialog that
    /// goes away after is said to be answered by them.
    pub async fn send_keys_by(
        &self,
        name: &str,
        keys: &[String],
        by: &str,
    ) -> Result<u64, CoreError> {
        if keys.is_empty() {
            return Err(CoreError::Input(
                "no keys given: name at least one, e.g. Enter or Escape".into(),
            ));
        }
        crate::ops::limits::check_keys(keys)?;
        let parsed = keys
            .iter()
            .map(|k| Key::parse(k))
            .collect::<Result<Vec<_>, _>>()?;
        let (rec, input) = self.lookup(name)?;
        self.refuse_unmanaged(&rec)?;
        if rec.state == State::Hibernated {
            return Err(CoreError::Hibernated(name.to_string()));
        }
        if rec.state.is_exited() {
            return Err(CoreError::Exited(name.to_string()));
        }
        let _turn = input.lock().await;
        self.sessions().update(name, |e| {
            e.rt.keys_by = Some((crate::store::now_ms(), by.to_string()));
        });
        self.mux_of(&rec.name)
            .send_keys(rec.target(), &parsed)
            .await?;
        self.touch(name);
        let names = parsed.iter().map(|k| k.to_string()).collect();
        Ok(self.event(name, &rec.id, EventKind::KeysSent { keys: names }))
    }

    pub(crate) fn touch(&self, name: &str) {
        self.sessions()
            .update(name, |e| e.rec.last_activity_ms = now_ms());
    }

    /// The pane's text: the last `lines` lines (scrollback included), or the visible screen
    /// when `lines` is 0. Trailing blank lines are dropped.
    pub async fn capture(
        &self,
        name: &str,
        lines: u32,
        escapes: bool,
    ) -> Result<String, CoreError> {
        let rec = self.get(name)?;
        self.refuse_unmanaged(&rec)?;
        let start = (lines > 0).then(|| -i64::from(lines));
        let raw = self
            .mux_of(&rec.name)
            .capture(rec.target(), start, escapes)
            .await?;
        Ok(trim_capture(&raw, lines as usize, escapes))
    }

    /// What the running turn has printed so far, for a chat to watch it grow: the pane from the
    /// line where its input was typed, the newest `lines` of it; empty when no turn runs, or
    /// where it began is unknown (a turn the CLI began by itself).
    pub async fn capture_turn(&self, name: &str, lines: u32) -> Result<String, CoreError> {
        let rec = self.get(name)?;
        self.refuse_unmanaged(&rec)?;
        let Some(anchor) = rec.turn_anchor.filter(|_| rec.state == State::Working) else {
            return Ok(String::new());
        };
        let mux = self.mux_of(&rec.name);
        let (hist, _) = mux.cursor(rec.target()).await?;
        let raw = mux
            .capture(rec.target(), Some(anchor - hist), false)
            .await?;
        Ok(trim_capture(&raw, lines as usize, false))
    }
}
