//! What a screen read means for a session: prompts appearing and going, readiness, a turn started at the desk, a turn that outlived a daemon restart.

use std::time::{Duration, Instant};

use crate::cli::detect::Analysis;
use crate::core::*;
use crate::locking::lock;
use crate::model::State;
use crate::store::events::EventKind;

use super::shared::*;

/// The most warnings about modes nobody told clibot of that `doctor` shows.
const MAX_MODE_WARNINGS: usize = 4;

impl Daemon {
    /// Applies what the screen shows to the session's state.
    pub(crate) fn on_screen(&self, name: &str, a: Analysis) {
        let mut deliver = false;
        let mut recovered_turn = false;
        let mut events: Vec<EventKind> = Vec::new();
        let mut state_to: Option<(State, &'static str)> = None;
        let mut new_mode_warning: Option<String> = None;
        let id = self.inner.sessions.update_running(name, |e| {
            let id = e.rec.id.clone();
            let now = Instant::now();
            // A CLI that runs its tools without asking: its chats are told once, since no
            // permission prompt will ever reach them.
            if let Some(mode) = &a.unasked
                && !std::mem::replace(&mut e.rt.unasked_told, true)
            {
                events.push(EventKind::Notice {
                    text: format!(
                        "{} runs in a mode that does not ask before it uses tools (\"{mode}\"): no permission prompt reaches this chat, commands and edits just run. To be asked, start it with its asking mode (Claude Code: --permission-mode default, clibot's default) or switch modes in the session (Shift+Tab).",
                        e.rec.cli
                    ),
                    kind: "mode".into(),
                });
            }
            // A mode nobody told clibot of (a new version's default, perhaps): it may ask
            // nothing, so the chats hear of it, and doctor with the version that showed it.
            if let Some(mode) = &a.new_mode
                && !std::mem::replace(&mut e.rt.new_mode_told, true)
            {
                let (cli, version) = (&e.rec.cli, &e.rec.cli_version);
                let head = format!(
                    "{cli} {version} runs in a mode clibot does not know (\"{mode} on\"), perhaps its new default: it may use tools without asking, and then no permission prompt reaches a chat"
                );
                new_mode_warning = Some(format!(
                    "{head}. Start it in a mode that asks ([cli.{cli}] argv; Claude Code: --permission-mode default) and, if the mode asks nothing, add it to [cli.{cli}.patterns] unasked"
                ));
                events.push(EventKind::Notice {
                    text: format!(
                        "⚠ {head}. Switch modes in the session (Shift+Tab) if you want to be asked."
                    ),
                    kind: "mode".into(),
                });
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
                    let pending = e.rt.turn.prompt_pending_since.is_some()
                        && cur.source == crate::model::PromptSource::Hook;
                    // Published from the hook alone, without options, because the dialog was
                    // slow to appear: the same prompt again, now with the dialog's choices.
                    let late_options = cur.source == crate::model::PromptSource::Hook
                        && cur.options.is_empty()
                        && !sp.options.is_empty();
                    // A dialog whose question is drawn but not yet its options is waited for
                    // (the tick publishes the hook's words if the options never come).
                    let half_drawn = cur.options.is_empty() && sp.options.is_empty();
                    if (pending && !half_drawn) || late_options {
                        // The dialog the hook announced is on screen: take its exact words.
                        if !sp.text.is_empty() && cur.kind != crate::model::PromptKind::Question {
                            cur.text = sp.text.clone();
                        }
                        if !sp.options.is_empty() {
                            cur.options = sp.options.clone();
                        }
                        if cur.subject.is_empty() {
                            cur.subject = sp.subject.clone();
                            cur.subject_partial |= sp.subject_partial;
                        } else if !sp.subject.is_empty() && !subjects_agree(&cur.subject, sp) {
                            // The hook said one thing, the dialog shows another: the dialog
                            // is what an answer by keys acts on, and nothing automatic
                            // answers a prompt whose two accounts disagree.
                            cur.subject = sp.subject.clone();
                            cur.subject_partial = true;
                        }
                        if cur.context.is_empty() {
                            cur.context = sp.context.clone();
                        }
                        cur.answer = sp.answer;
                        e.rt.turn.prompt_shown();
                        e.rec.prompt = Some(cur.clone());
                        events.push(EventKind::Waiting { prompt: cur });
                    } else if !cur.same_question(&sp.kind, &sp.text, &sp.options)
                        && cur.source == crate::model::PromptSource::Screen
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
                        let p = new_prompt(sp);
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
                                *s == signature(sp.kind.as_str(), &sp.text, &sp.subject)
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
                        let p = new_prompt(sp);
                        e.rec.prompt = Some(p.clone());
                        e.rt.turn.prompt_shown();
                        state_to = Some((State::Waiting, "the CLI asks"));
                        events.push(EventKind::Waiting { prompt: p });
                    }
                }
                (None, Some(cur)) => {
                    if e.rt.turn.prompt_pending_since.is_none() && e.rt.api.is_none() {
                        // Gone from the screen, and nobody answered through clibot's answer:
                        // keys pressed through clibot since it was shown answered it; else a
                        // person at the terminal did, if a client there was active since; else
                        // the CLI withdrew it.
                        let since_s = cur.since_ms / 1000 - 1;
                        let (by, actor, reason) = match &e.rt.keys_by {
                            Some((at, who)) if *at >= cur.since_ms => {
                                ("clibot", who.clone(), "answered by keys")
                            }
                            _ if e.rt.desk_at.is_some_and(|t| t >= since_s) => {
                                ("terminal", String::new(), "answered at the terminal")
                            }
                            _ => ("cli", String::new(), "the dialog closed"),
                        };
                        e.rec.prompt = None;
                        remember_resolved(&mut e.rt.resolved, &cur.id, by);
                        if let Some((tx, _)) = e.rt.waiters.remove(&cur.id) {
                            let _ = tx.send(String::new());
                        }
                        events.push(EventKind::PromptResolved {
                            prompt_id: cur.id.clone(),
                            by: by.into(),
                            answer: String::new(),
                            actor,
                            note: String::new(),
                        });
                        state_to = Some((State::Working, reason));
                    }
                }
                (None, None) => {
                    // The answered dialog is gone: the next dialog is a new one.
                    e.rt.answered_screen = None;
                }
            }
            // A dialog is up and the session has its prompt, yet something (input typed under
            // it before this check existed, a late state change) says working: it waits, and
            // `pending` lists it.
            if state_to.is_none()
                && screen_prompt.is_some()
                && e.rec.prompt.is_some()
                && e.rec.state == State::Working
                && e.rt.turn.prompt_pending_since.is_none()
            {
                state_to = Some((State::Waiting, "the CLI asks"));
            }
            // The turn itself: the state machine decides ([`crate::turn`]).
            if let Some(caps) = self.turn_caps(e) {
                let facts = crate::turn::Facts {
                    state: e.rec.state,
                    stalled: e.rec.stalled,
                    prompt: e.rec.prompt.as_ref().map(|p| !p.options.is_empty()),
                };
                let seen = crate::turn::ScreenFacts {
                    busy: a.busy,
                    idle: a.idle,
                    ready: a.ready,
                    settled: a.settled,
                    interrupted: a.interrupted,
                    dialog: screen_prompt.is_some() || e.rec.prompt.is_some(),
                    // With no API connected the screen's dialog is the one it shows.
                    prompt_on_screen: a.prompt.is_some(),
                    state_decided: state_to.is_some(),
                };
                let out = e.rt.turn.screen(&facts, &seen, &caps, now);
                if out.state_to.is_some() {
                    state_to = out.state_to;
                }
                deliver |= out.deliver;
                recovered_turn |= out.recovered_turn;
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
            id
        });
        let Some(id) = id else {
            return;
        };
        if let Some((to, reason)) = state_to {
            self.set_state(name, to, reason);
        }
        if let Some(w) = new_mode_warning {
            // A session can draw any footer and be restarted at will: a few such warnings are
            // kept, not one per name it makes up.
            let mut warnings = lock(&self.inner.warnings);
            let kept = warnings
                .iter()
                .filter(|k| k.contains("runs in a mode clibot does not know"))
                .count();
            if kept < MAX_MODE_WARNINGS && !warnings.contains(&w) {
                tracing::warn!(session = %name, "{w}");
                warnings.push(w);
            }
        }
        for ev in events {
            self.event(name, &id, ev);
        }
        if recovered_turn {
            // The reply is read from the CLI's records off the async workers; the turn ends
            // once it is read.
            let rec = self.inner.sessions.record(name);
            let (d, name) = (self.clone(), name.to_string());
            self.in_background(async move {
                let text = match rec {
                    Some(r) => d.recovered_reply(&r).await.unwrap_or_default(),
                    None => String::new(),
                };
                d.complete_turn(&name, text, crate::model::TurnEnd::Transcript);
            });
        } else if deliver {
            self.deliver_queued(name);
        }
    }
}

/// Whether a hook's subject and the one its dialog shows are the same, spaces aside (the
/// screen's may be cut short: then a beginning of the hook's).
fn subjects_agree(hook: &str, screen: &crate::cli::detect::ScreenPrompt) -> bool {
    let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let (h, s) = (norm(hook), norm(&screen.subject));
    h == s || (screen.subject_partial && h.starts_with(s.trim_end_matches('…')))
}
