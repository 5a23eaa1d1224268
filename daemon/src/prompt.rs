//! The prompt state machine: what a screen read means for the dialog a session waits on. Pure
//! like [`crate::turn`]: (the prompt part of a session, what the screen shows) → (its next
//! state, actions); no clock, no ids, no I/O — the caller passes `now` and makes new prompts,
//! then applies the actions (events, the session's state, a later look at the screen).
//!
//! Why apart: a dialog announced by a hook and drawn late, a dialog still drawn while the CLI
//! closes it after an answer, one dialog replacing another, and a dialog answered at the desk
//! are each a few lines of rules that used to be woven into the screen reader with the
//! session's lock held; here each is a row of a table test.

use std::time::{Duration, Instant};

use crate::cli::detect::ScreenPrompt;
use crate::model::{Prompt, PromptKind, PromptSource, State};

/// How long after an answer a dialog still on screen is taken for the answered one closing.
pub(crate) const ANSWERED_LINGER: Duration = Duration::from_secs(2);

/// A dialog answered through clibot that may still be drawn: its signature ([`signature`])
/// when answered by keys — only that very dialog lingers — or `None` when answered through its
/// hook or API, whose words differ from the screen's (any dialog lingers then); when; and
/// whether a look at the screen is already scheduled for when the lingering ends.
pub(crate) type Answered = (Option<String>, Instant, bool);

/// What identifies an answered dialog while it closes: its question and subject, not its
/// options (an answer typed into an option's field, as Copilot's "No, and tell…", redraws
/// them). Another command behind the same question has another subject.
pub(crate) fn signature(kind: &str, text: &str, subject: &str) -> String {
    format!("{kind}\u{1f}{text}\u{1f}{subject}")
}

/// The part of a session's state this machine changes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Dialog {
    /// The prompt the session waits on.
    pub(crate) current: Option<Prompt>,
    /// The last dialog answered through clibot, while it may still be drawn.
    pub(crate) answered: Option<Answered>,
}

/// What the daemon knows besides the screen when it reads one.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seen<'a> {
    /// The dialog the screen shows, read with the CLI's pattern pack (`None` as well while the
    /// CLI's API is connected: its prompts come through it).
    pub(crate) dialog: Option<&'a ScreenPrompt>,
    /// A hook announced the current prompt and the screen has not shown it yet.
    pub(crate) pending: bool,
    /// The CLI's API is connected.
    pub(crate) api: bool,
    /// When keys were last pressed through clibot (Unix ms), and by whom.
    pub(crate) keys_by: Option<&'a (i64, String)>,
    /// When a client at the desk was last active (Unix seconds).
    pub(crate) desk_at: Option<i64>,
    pub(crate) now: Instant,
}

/// What the caller does after a step.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Action {
    /// Publish this prompt (a `waiting` event); `shown`: the dialog a hook announced is now on
    /// screen (the turn stops waiting for it).
    Publish { prompt: Prompt, shown: bool },
    /// The prompt `id` is over: resolved `by` ("clibot", "terminal", "cli") on behalf of
    /// `actor`; a hook waiting on it is released.
    Resolved {
        id: String,
        by: &'static str,
        actor: String,
    },
    /// Read the screen again after this long (no output may come to wake the watcher: the
    /// CLI waits for its answer).
    LookAgainIn(Duration),
    /// The session's state changes, with the reason.
    State(State, &'static str),
}

/// One screen read: changes `d` and says what to do. `fresh` makes a new prompt from a dialog
/// on screen (with a new id).
pub(crate) fn on_screen(
    d: &mut Dialog,
    s: &Seen<'_>,
    fresh: &dyn Fn(&ScreenPrompt) -> Prompt,
) -> Vec<Action> {
    let mut out = Vec::new();
    match (s.dialog, d.current.clone()) {
        (Some(sp), Some(mut cur)) => {
            let pending = s.pending && cur.source == PromptSource::Hook;
            // Published from the hook alone, without options, because the dialog was slow to
            // appear: the same prompt again, now with the dialog's choices.
            let late_options = cur.source == PromptSource::Hook
                && cur.options.is_empty()
                && !sp.options.is_empty();
            // A dialog whose question is drawn but not yet its options is waited for (the
            // tick publishes the hook's words if the options never come).
            let half_drawn = cur.options.is_empty() && sp.options.is_empty();
            if (pending && !half_drawn) || late_options {
                take_dialogs_words(&mut cur, sp);
                d.current = Some(cur.clone());
                out.push(Action::Publish {
                    prompt: cur,
                    shown: true,
                });
            } else if !cur.same_question(&sp.kind, &sp.text, &sp.options)
                && cur.source == PromptSource::Screen
            {
                // A different dialog replaced the previous one.
                out.push(Action::Resolved {
                    id: cur.id.clone(),
                    by: "terminal",
                    actor: String::new(),
                });
                let p = fresh(sp);
                d.current = Some(p.clone());
                out.push(Action::Publish {
                    prompt: p,
                    shown: false,
                });
            }
        }
        (Some(sp), None) => {
            // Right after an answer, with no dialog-free screen seen since, a dialog is the
            // answered one being closed (whatever its words look like in its last frames):
            // not a new prompt. One still there after that is published.
            let lingering = d.answered.as_ref().is_some_and(|(sig, at, _)| {
                s.now.duration_since(*at) < ANSWERED_LINGER
                    && sig
                        .as_ref()
                        .is_none_or(|x| *x == signature(sp.kind.as_str(), &sp.text, &sp.subject))
            });
            if let Some((_, at, scheduled @ false)) = d.answered.as_mut()
                && lingering
            {
                *scheduled = true;
                let wait = ANSWERED_LINGER.saturating_sub(s.now.duration_since(*at));
                out.push(Action::LookAgainIn(wait + Duration::from_millis(20)));
            }
            if !lingering {
                d.answered = None;
                let p = fresh(sp);
                d.current = Some(p.clone());
                out.push(Action::Publish {
                    prompt: p,
                    shown: true,
                });
                out.push(Action::State(State::Waiting, "the CLI asks"));
            }
        }
        (None, Some(cur)) => {
            if !s.pending && !s.api {
                // Gone from the screen, and nobody answered through clibot's answer: keys
                // pressed through clibot since it was shown answered it; else a person at
                // the terminal did, if a client there was active since; else the CLI
                // withdrew it.
                let since_s = cur.since_ms / 1000 - 1;
                let (by, actor, reason) = match s.keys_by {
                    Some((at, who)) if *at >= cur.since_ms => {
                        ("clibot", who.clone(), "answered by keys")
                    }
                    _ if s.desk_at.is_some_and(|t| t >= since_s) => {
                        ("terminal", String::new(), "answered at the terminal")
                    }
                    _ => ("cli", String::new(), "the dialog closed"),
                };
                d.current = None;
                out.push(Action::Resolved {
                    id: cur.id.clone(),
                    by,
                    actor,
                });
                out.push(Action::State(State::Working, reason));
            }
        }
        (None, None) => {
            // The answered dialog is gone: the next dialog is a new one.
            d.answered = None;
        }
    }
    out
}

/// The dialog a hook announced is on screen: the prompt takes its exact words.
fn take_dialogs_words(cur: &mut Prompt, sp: &ScreenPrompt) {
    if !sp.text.is_empty() && cur.kind != PromptKind::Question {
        cur.text = sp.text.clone();
    }
    if !sp.options.is_empty() {
        cur.options = sp.options.clone();
    }
    if cur.subject.is_empty() {
        cur.subject = sp.subject.clone();
        cur.subject_partial |= sp.subject_partial;
    } else if !sp.subject.is_empty() && !subjects_agree(&cur.subject, sp) {
        // The hook said one thing, the dialog shows another: the dialog is what an answer by
        // keys acts on, and nothing automatic answers a prompt whose two accounts disagree.
        cur.subject = sp.subject.clone();
        cur.subject_partial = true;
    }
    if cur.context.is_empty() {
        cur.context = sp.context.clone();
    }
    cur.answer = sp.answer;
}

/// Whether a hook's subject and the one its dialog shows are the same, spaces aside (the
/// screen's may be cut short: then a beginning of the hook's).
fn subjects_agree(hook: &str, screen: &ScreenPrompt) -> bool {
    let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let (h, s) = (norm(hook), norm(&screen.subject));
    h == s || (screen.subject_partial && h.starts_with(s.trim_end_matches('…')))
}

#[cfg(test)]
mod tests;
