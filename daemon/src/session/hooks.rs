//! Hook calls from the CLIs: authenticated by session id and token, turned into turn starts, prompts, completions and errors.

use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::oneshot;
use tracing::{Instrument, debug, info, info_span};

use crate::cli::HookSignal;
use crate::cli::detect::AnswerStyle;
use crate::core::*;
use crate::error::CoreError;
use crate::model::{Prompt, State};
use crate::store::events::EventKind;

use super::shared::*;

/// How long a turn's reply is looked for in the CLI's records after its completion hook.
const RECORDS_WAIT: Duration = Duration::from_secs(5);

/// A CLI's "waiting for input" notice ends no turn younger than this: it belongs to the turn
/// before, arriving late (a turn that truly ends so soon is ended by the screen's safety net).
const IDLE_NOT_BEFORE: Duration = Duration::from_millis(700);

impl Daemon {
    /// A hook call from a CLI: authenticated by the session id and token given at spawn.
    pub async fn hook(
        &self,
        session_id: &str,
        token: &str,
        event: &str,
        payload: &str,
    ) -> Result<String, CoreError> {
        check_payload_shape(payload)?;
        let mut payload: Value = serde_json::from_str(payload)
            .map_err(|e| CoreError::HookPayload(format!("hook payload is not JSON: {e}")))?;
        let (name, cli, rec) = self
            .sessions()
            .find_map(|e| {
                (e.rec.id == session_id && crate::ids::token_eq(&e.rec.hook_token, token))
                    .then(|| (e.rec.name.clone(), e.rec.cli.clone(), e.rec.clone()))
            })
            .ok_or(CoreError::HookDenied)?;
        // A jailed CLI reports paths as it sees them; its transcripts lie in its own copy of
        // its state on the host — and nowhere else: a path outside it is dropped, so that a
        // jailed session cannot have the daemon read another file for it.
        if !rec.jail_home.is_empty() {
            for key in ["transcript_path", "transcriptPath"] {
                if let Some(Value::String(p)) = payload.get_mut(key) {
                    *p = self
                        .jailed_record_path(&rec, p)
                        .map(|h| h.display().to_string())
                        .unwrap_or_default();
                }
            }
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
            // Interpreting may read the CLI's files (its transcript, which may still be
            // being written): off the async threads.
            let (ev, body) = (event.clone(), payload.clone());
            let signal = tokio::task::spawn_blocking(move || adapter.hook(&ev, &body))
                .await
                .unwrap_or(HookSignal::Ignore);
            self.apply_signal(&name, signal, payload).await
        }
        .instrument(span)
        .await
    }

    /// A completion hook's reply: the turn ends with it, unless the safety net already ended
    /// this turn with this very reply (the hook is late, not a new turn).
    fn hook_completed(&self, name: &str, text: String) {
        let late = self
            .sessions()
            .update(name, |e| {
                let same = e.rec.state == State::Idle && e.rec.last_reply.as_ref() == Some(&text);
                e.rt.turn.hook_completed_late(same)
            })
            .unwrap_or(false);
        if late {
            debug!("a completion hook for a turn already ended; ignored");
        } else {
            self.complete_turn(name, text, crate::model::TurnEnd::Hook);
        }
    }

    /// The CLI says it waits for input: a turn still running in clibot's view ended without
    /// its completion hook (a refusal at a dialog, a cancel at the desk) and is over — when the
    /// screen agrees. The notice may come late, after the next input was typed: then the
    /// screen shows that turn working (or the typed text) and nothing is ended.
    async fn idle_again(&self, name: &str) {
        let looked = self.sessions().get(name, |e| {
            // A turn that began a moment ago is the next one, whose input was just typed.
            let running =
                e.rt.turn
                    .started
                    .is_some_and(|t| t.elapsed() >= IDLE_NOT_BEFORE)
                    && e.rec.prompt.is_none();
            self.kind_of(&e.rec.cli)
                .map(|(_, p)| (e.rec.target().to_string(), p, running))
        });
        let Some((target, pack, running)) = looked.flatten() else {
            return;
        };
        if !running {
            return;
        }
        let Ok(screen) = self.mux_of(name).capture(&target, None, false).await else {
            return;
        };
        let a = pack.analyze(&screen);
        if a.settled && a.idle && a.prompt.is_none() {
            info!("the CLI waits for input and no completion hook came: the turn is over");
            self.complete_turn_once(name, String::new(), crate::model::TurnEnd::Hook);
        }
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
                HookSignal::PlanWindows(windows) => {
                    // None with an API key, or after an answer that carried none: then none
                    // is known.
                    self.sessions().update(&name, |e| {
                        e.rt.plan_windows = windows;
                        e.rt.status_at = Some(Instant::now());
                    });
                    Ok(String::new())
                }
                HookSignal::TurnStarted => {
                    self.sessions()
                        .update(&name, |e| e.rt.turn.hook_started(Instant::now()));
                    self.set_state(&name, State::Working, "prompt submitted");
                    Ok(String::new())
                }
                HookSignal::TurnCompleted { text } => {
                    self.hook_completed(&name, text);
                    Ok(String::new())
                }
                HookSignal::Idle => {
                    self.idle_again(&name).await;
                    Ok(String::new())
                }
                HookSignal::TurnCompletedIn { path, stamp, read } => {
                    // Mostly the records hold the reply already: the turn ends now.
                    let p = path.clone();
                    let now = tokio::task::spawn_blocking(move || (read.0)(&p, stamp))
                        .await
                        .ok()
                        .flatten();
                    if let Some(text) = now {
                        self.hook_completed(&name, text);
                        return Ok(String::new());
                    }
                    // Else the hook is answered first: the CLI may write its records only
                    // after it (a new conversation's file).
                    let (d, name) = (self.clone(), name.clone());
                    self.in_background(async move {
                        let deadline = Instant::now() + RECORDS_WAIT;
                        let text = loop {
                            let p = path.clone();
                            let got = tokio::task::spawn_blocking(move || (read.0)(&p, stamp))
                                .await
                                .ok()
                                .flatten();
                            if let Some(text) = got {
                                break text;
                            }
                            if Instant::now() >= deadline || d.shutdown_token().is_cancelled() {
                                info!(
                                    "the CLI's records never held that stop; reading them as they are"
                                );
                                let p = path.clone();
                                break tokio::task::spawn_blocking(move || (read.0)(&p, 0))
                                    .await
                                    .ok()
                                    .flatten()
                                    .unwrap_or_default();
                            }
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        };
                        d.hook_completed(&name, text);
                    });
                    Ok(String::new())
                }
                HookSignal::Error { kind, message } => {
                    let Some(id) = self.sessions().update(&name, |e| {
                        e.rec.error = Some(message.clone());
                        e.rt.turn.failed();
                        e.rec.id.clone()
                    }) else {
                        return Ok(String::new());
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
        let watch_only = !wait
            && self
                .sessions()
                .get(name, |e| e.rec.unmanaged)
                .unwrap_or(false);
        // A CLI clibot does not run, whose hook cannot carry an answer (Gemini CLI): shown,
        // answered at its terminal.
        let text = if watch_only {
            format!("{text}\n(answer it at its terminal: clibot only watches this session)")
        } else {
            text
        };
        let subject_kind = crate::automation::subject::from_payload(&payload)
            .or_else(|| crate::automation::subject::infer(&text, &subject));
        // What a prompt shows is bounded (it goes to the event log and every chat); a subject
        // cut short is marked so, and no rule or decider answers for what it cannot see.
        let text = cut(text, MAX_PROMPT_TEXT).0;
        let (subject, subject_partial) = cut(subject, MAX_PROMPT_TEXT);
        let options = options
            .into_iter()
            .take(MAX_PROMPT_OPTIONS)
            .map(|o| cut(o, 1024).0)
            .collect();
        let prompt = Prompt {
            id: crate::ids::new_id(),
            subject_kind,
            kind: kind.into(),
            text,
            options,
            subject,
            subject_partial,
            source: crate::model::PromptSource::Hook,
            answer: AnswerStyle::Digit,
            ..Default::default()
        };
        let (tx, rx) = oneshot::channel();
        let poke = self.sessions().update(name, |e| {
            if let Some(old) = e.resolve_prompt("cli") {
                // The hook that announced it waits no longer: its dialog is gone.
                if let Some((tx, _)) = e.rt.waiters.remove(&old.id) {
                    let _ = tx.send(String::new());
                }
            }
            e.show_prompt(Some(prompt.clone()));
            e.rt.turn.prompt_announced(Instant::now());
            if wait {
                e.rt.waiters.insert(prompt.id.clone(), (tx, payload));
            }
            e.rt.poke.clone()
        });
        let Some(poke) = poke else {
            return Ok(String::new());
        };
        self.set_state(name, State::Waiting, "permission requested");
        poke.notify_one();
        let unmanaged = self
            .sessions()
            .get(name, |e| e.rec.unmanaged.then(|| e.rec.id.clone()))
            .flatten();
        if let Some(id) = &unmanaged {
            // No watcher and no screen to wait for: published at once.
            self.event(
                name,
                id,
                EventKind::Waiting {
                    prompt: prompt.clone(),
                },
            );
        }
        if !wait {
            // This CLI takes answers only by keys: the hook returns at once.
            return Ok(String::new());
        }
        // A CLI clibot does not run can be answered only through its hook: held for as long
        // as the hook waits.
        let wait = if unmanaged.is_some() {
            super::unmanaged::UNMANAGED_WAIT
        } else {
            Duration::from_millis(self.settings().config.daemon.permission_wait_ms)
        };
        tokio::select! {
            r = rx => Ok(r.unwrap_or_default()),
            _ = tokio::time::sleep(wait) => {
                self.sessions().update(name, |e| {
                    e.rt.waiters.remove(&prompt.id);
                });
                info!("no answer through clibot in time; the CLI's dialog stays for keys or the terminal");
                Ok(String::new())
            }
            _ = self.shutdown_token().cancelled() => Ok(String::new()),
        }
    }
}

/// The most of a hook prompt's text or subject kept, in bytes.
const MAX_PROMPT_TEXT: usize = 64 * 1024;
/// The most options a hook prompt offers.
const MAX_PROMPT_OPTIONS: usize = 32;

/// `s` cut to at most `max` bytes at a character boundary, and whether it was cut.
fn cut(mut s: String, max: usize) -> (String, bool) {
    if s.len() <= max {
        return (s, false);
    }
    let mut at = max;
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    s.truncate(at);
    s.push('…');
    (s, true)
}
