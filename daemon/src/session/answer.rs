//! Answering a prompt: through the CLI's waiting hook, its API, or by keys on its dialog; late and repeated answers get clear errors.

use std::time::{Duration, Instant};

use tracing::info;

use crate::cli::{Choice, Stroke, answer_strokes, parse_choice};
use crate::core::*;
use crate::error::CoreError;
use crate::model::{Prompt, State};
use crate::store::events::EventKind;

use super::shared::*;

/// An answer that reached the CLI.
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    pub prompt_id: String,
    /// How: "hook", "api" or "keys".
    pub via: String,
    /// The prompt_resolved event's sequence number.
    pub seq: u64,
    /// The prompt asked for a secret: what was typed is kept nowhere.
    pub secret: bool,
}

impl Daemon {
    /// Answers the prompt a session waits on. The first answer wins; a second one, or one for
    /// a prompt that is gone, is refused and never reaches the CLI.
    pub async fn answer_prompt(
        &self,
        name: &str,
        prompt_id: &str,
        answer: &str,
        by: &str,
    ) -> Result<Answered, CoreError> {
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
    ) -> Result<Answered, CoreError> {
        // A chat button names its prompt, not the session: find the session that showed it.
        let owner;
        let name = if name.is_empty() {
            owner = self.session_of_prompt(prompt_id)?;
            owner.as_str()
        } else {
            name
        };
        self.await_api_link(name).await;
        // A secret is typed only where the program reads it hidden: checked before anything is
        // resolved, so a refused answer leaves the prompt waiting.
        let secret_at = self
            .sessions()
            .get(name, |e| {
                e.rec
                    .prompt
                    .as_ref()
                    .filter(|p| p.is_secret() && (prompt_id.is_empty() || p.id == prompt_id))
                    .map(|_| e.rec.target().to_string())
            })
            .flatten();
        if let Some(target) = secret_at {
            self.check_reads_hidden(name, &target).await?;
        }
        let (prompt, choice, hook_reply, input, target, id) =
            self.sessions().try_update(name, |e| {
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
            let choice = parse_choice(answer, &p).map_err(CoreError::Input)?;
            // A line break would submit the first part and type the rest into whatever reads
            // next, where it is shown.
            if p.is_secret()
                && let Choice::Text(t) = &choice
                && t.contains(['\n', '\r'])
            {
                return Err(CoreError::Input(
                    "a password is one line: send it without line breaks".into(),
                ));
            }
            // A CLI clibot does not run is answered through its waiting hook, or not at all.
            if e.rec.unmanaged && !e.rt.waiters.contains_key(&p.id) {
                return Err(CoreError::NotRunByClibot(format!(
                    "{name} is not run by clibot and its hook does not wait for this answer ({} hooks cannot carry one, or it stopped waiting): answer it at its terminal",
                    e.rec.cli
                )));
            }
            // A hook whose caller went away (its own timeout, killed) waits no more: the
            // answer goes by keys, not into a channel nobody reads.
            let waiter = e.rt.waiters.remove(&p.id).filter(|(tx, _)| !tx.is_closed());
            let hook_reply = match waiter {
                Some((tx, payload)) => {
                    let adapter = self.kind_of(&e.rec.cli).map(|(a, _)| a);
                    match adapter.and_then(|a| a.decision(&p, &choice, &payload)) {
                        Some(out) => Some((tx, out)),
                        None if e.rec.unmanaged => {
                            // No keys for a CLI clibot does not run: the hook keeps waiting.
                            e.rt.waiters.insert(p.id.clone(), (tx, payload));
                            return Err(CoreError::Input(format!(
                                "{name} is not run by clibot: only its dialog's own options can be sent through its hook; answer it at its terminal"
                            )));
                        }
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
                answer_strokes(&p, &choice).map_err(CoreError::Input)?;
            }
            // By keys or through the hook, the dialog may linger while the CLI closes it.
            let sig = hook_reply
                .is_none()
                .then(|| signature(p.kind.as_str(), &p.text, &p.subject));
            e.rt.answered_screen = Some((sig, Instant::now(), false));
            e.show_prompt(None);
            e.rt.turn.prompt_resolved();
            e.remember_resolved(&p.id, resolver);
            Ok((
                p,
                choice,
                hook_reply,
                e.input.clone(),
                e.rec.target().to_string(),
                e.rec.id.clone(),
            ))
        })?;
        let label = match &choice {
            // What was typed is never kept: the log shows its length only.
            Choice::Text(t) if prompt.is_secret() => crate::model::secret_placeholder(t),
            Choice::Option(i) => prompt.options.get(*i).cloned().unwrap_or_default(),
            Choice::Text(t) => t.clone(),
        };
        let via = match hook_reply {
            Some((tx, out)) => {
                let _ = tx.send(out);
                if prompt.source == crate::model::PromptSource::Api {
                    "api"
                } else {
                    "hook"
                }
            }
            None => {
                let strokes = answer_strokes(&prompt, &choice).map_err(CoreError::Input)?;
                let _g = input.lock().await;
                self.send_strokes(name, &target, &strokes).await?;
                // A TUI may drop a key that arrives while its dialog is still settling; if the
                // same dialog is still up a moment later, the answer is typed once more. Never a
                // secret: a password prompt stays up while it is checked, and a second copy
                // would land wherever the program goes next (a shell, echoed).
                if !prompt.is_secret() && self.dialog_still_shown(name, &target, &prompt).await {
                    info!("the dialog ignored the answer; typing it once more");
                    self.send_strokes(name, &target, &strokes).await?;
                }
                "keys"
            }
        };
        self.sessions()
            .update(name, |e| e.rt.turn.answered(Instant::now()));
        let seq = self.event(
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
        let newer = self
            .sessions()
            .get(name, |e| e.rec.prompt.is_some())
            .unwrap_or(false);
        if !newer {
            self.set_state(name, State::Working, "answered");
        }
        self.persist();
        info!(via, "prompt answered");
        Ok(Answered {
            prompt_id: prompt.id,
            via: via.to_string(),
            seq,
            secret: prompt.kind == crate::model::PromptKind::Secret,
        })
    }

    /// The session whose current or recently resolved prompt is `prompt_id`.
    pub fn session_of_prompt(&self, prompt_id: &str) -> Result<String, CoreError> {
        if prompt_id.is_empty() {
            return Err(CoreError::Input(
                "name the session or the prompt to answer".into(),
            ));
        }
        // From one look at the table: the sessions that know the prompt, whether it is their
        // current one, and whether they resolved it lately. The current one wins.
        let knowing = self.sessions().filter_map(|e| {
            let current = e.rec.prompt.as_ref().is_some_and(|p| p.id == prompt_id);
            let resolved = e.rt.resolved.iter().any(|(id, _)| id == prompt_id);
            (current || resolved).then(|| (e.rec.name.clone(), current, resolved))
        });
        knowing
            .iter()
            .find(|(_, current, _)| *current)
            .or_else(|| knowing.iter().find(|(_, _, resolved)| *resolved))
            .map(|(name, _, _)| name.clone())
            .ok_or_else(|| CoreError::UnknownPrompt(prompt_id.to_string()))
    }

    /// A prompt that came from the CLI's API is answered through it. Just after a daemon
    /// restart the link may still be reconnecting: give it a moment rather than fall back to
    /// keys, which depend on where the dialog's focus is.
    async fn await_api_link(&self, name: &str) {
        let deadline = Instant::now() + API_ANSWER_WAIT;
        loop {
            let linked = self
                .sessions()
                .get(name, |e| match &e.rec.prompt {
                    Some(p) if p.source == crate::model::PromptSource::Api => {
                        e.rt.waiters.contains_key(&p.id)
                    }
                    _ => true,
                })
                .unwrap_or(true);
            if linked || Instant::now() >= deadline || self.api_port(name).is_none() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn send_strokes(
        &self,
        name: &str,
        target: &str,
        strokes: &[Stroke],
    ) -> Result<(), CoreError> {
        let mut last_text = false;
        for (i, s) in strokes.iter().enumerate() {
            // A TUI may switch to a text field on the key before the text (Copilot's "No, and
            // tell…" option), and take an Enter that follows typed text too quickly as part of
            // it: a moment between them.
            let text = matches!(s, Stroke::Text(_));
            if i > 0 && (text || last_text) {
                tokio::time::sleep(Duration::from_millis(120)).await;
            }
            last_text = text;
            match s {
                Stroke::Key(k) => {
                    self.mux_of(name)
                        .send_keys(target, std::slice::from_ref(k))
                        .await?
                }
                Stroke::Text(t) => self.mux_of(name).send_text(target, t).await?,
                Stroke::Secret(t) if t.is_empty() => {}
                Stroke::Secret(t) => {
                    let n = self.next_paste();
                    let buffer = format!("clibot-hidden-{n}");
                    self.mux_of(name).type_hidden(target, &buffer, t).await?
                }
            }
        }
        Ok(())
    }

    /// Whether the screen still shows `prompt` (the same question and options) after a second.
    async fn dialog_still_shown(&self, name: &str, target: &str, prompt: &Prompt) -> bool {
        let Some(cli) = self.sessions().cli_of(name) else {
            return false;
        };
        let Some((_, pack)) = self.kind_of(&cli) else {
            return false;
        };
        let deadline = Instant::now() + Duration::from_millis(1000);
        while Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
            match self.mux_of(name).capture(target, None, false).await {
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
}

impl Daemon {
    /// Refuses to type a 🔒 answer into `target` unless its terminal reads a line without
    /// showing it — echo off, line mode on — as a password prompt does (`sudo`, `ssh`,
    /// `read -s`, getpass). Text that merely looks like a password prompt (printed by a program,
    /// or typed by someone the session is shared with) leaves the terminal echoing, or in the
    /// raw mode of a shell's line editor or a TUI: what was typed would be shown, echoed into
    /// the chat and kept in the logs.
    async fn check_reads_hidden(&self, name: &str, target: &str) -> Result<(), CoreError> {
        let tty = self
            .mux_of(name)
            .pane_tty(target)
            .await
            .map_err(|e| {
                CoreError::SecretNotTyped(format!(
                    "cannot tell whether {name}'s terminal hides what is typed ({e}): the 🔒 answer is not typed"
                ))
            })?;
        let modes = tokio::task::spawn_blocking(move || reads_hidden(&tty))
            .await
            .map_err(|e| CoreError::SecretNotTyped(e.to_string()))?;
        match modes {
            Ok(true) => Ok(()),
            Ok(false) => Err(CoreError::SecretNotTyped(format!(
                "{name}'s terminal would show what you type (no program is reading a hidden password there): the 🔒 answer is not typed. If this is not a password prompt, send ordinary text — it will be shown and kept"
            ))),
            Err(e) => Err(CoreError::SecretNotTyped(format!(
                "cannot tell whether {name}'s terminal hides what is typed ({e}): the 🔒 answer is not typed"
            ))),
        }
    }
}

/// Whether the terminal `tty` reads a line without echoing it: `ECHO` off, `ICANON` on.
fn reads_hidden(tty: &str) -> Result<bool, String> {
    use rustix::fs::{Mode, OFlags};
    use rustix::termios::LocalModes;
    if !tty.starts_with("/dev/") {
        return Err(format!("{tty:?} is not a terminal device"));
    }
    let fd = rustix::fs::open(
        tty,
        OFlags::RDONLY | OFlags::NOCTTY | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("{tty}: {e}"))?;
    let t = rustix::termios::tcgetattr(&fd).map_err(|e| format!("{tty}: {e}"))?;
    Ok(!t.local_modes.contains(LocalModes::ECHO) && t.local_modes.contains(LocalModes::ICANON))
}
