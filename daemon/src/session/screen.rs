//! What a screen read means for a session: prompts appearing and going, readiness, a turn started at the desk, a turn that outlived a daemon restart.

use std::time::Instant;

use crate::cli::detect::Analysis;
use crate::core::*;
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
        let id = self.sessions().update_running(name, |e| {
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
            // The dialog: the prompt machine decides ([`crate::prompt`]).
            let mut dialog = crate::prompt::Dialog {
                current: e.rec.prompt.take(),
                answered: e.rt.answered_screen.take(),
            };
            let seen = crate::prompt::Seen {
                dialog: screen_prompt,
                pending: e.rt.turn.prompt_pending_since.is_some(),
                api: e.rt.api.is_some(),
                keys_by: e.rt.keys_by.as_ref(),
                desk_at: e.rt.desk_at,
                now,
            };
            let actions = crate::prompt::on_screen(&mut dialog, &seen, &new_prompt);
            e.show_prompt(dialog.current);
            e.rt.answered_screen = dialog.answered;
            for action in actions {
                match action {
                    crate::prompt::Action::Publish { prompt, shown } => {
                        if shown {
                            e.rt.turn.prompt_shown();
                        }
                        events.push(EventKind::Waiting { prompt });
                    }
                    crate::prompt::Action::Resolved { id, by, actor } => {
                        e.remember_resolved(&id, by);
                        if let Some((tx, _)) = e.rt.waiters.remove(&id) {
                            let _ = tx.send(String::new());
                        }
                        events.push(EventKind::PromptResolved {
                            prompt_id: id,
                            by: by.into(),
                            answer: String::new(),
                            actor,
                            note: String::new(),
                        });
                    }
                    crate::prompt::Action::LookAgainIn(wait) => {
                        let poke = e.rt.poke.clone();
                        tokio::spawn(async move {
                            tokio::time::sleep(wait).await;
                            poke.notify_one();
                        });
                    }
                    crate::prompt::Action::State(to, why) => state_to = Some((to, why)),
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
            if self.keep_warning(&w, "runs in a mode clibot does not know", MAX_MODE_WARNINGS) {
                tracing::warn!(session = %name, "{w}");
            }
        }
        for ev in events {
            self.event(name, &id, ev);
        }
        if recovered_turn {
            // The reply is read from the CLI's records off the async workers; the turn ends
            // once it is read.
            let rec = self.sessions().record(name);
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
