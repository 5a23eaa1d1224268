//! The daemon's side of automatic answers: when a prompt is published it is looked at by the
//! guard and the rules ([`crate::automation`]); a rule's answer, or the decider's, then goes
//! through the same path as a person's, bound to the prompt's id. Whatever cannot be answered
//! automatically — a guarded subject, an `ask`, a decider that fails or declines — is shown to
//! the chats as an ordinary prompt, with the reason.

use tracing::{Instrument, info, info_span, warn};

use crate::automation::{
    Action, DeciderInput, DeciderPrompt, Plan, Verdict, last_lines, run_decider,
};
use crate::cli::Choice;
use crate::core::Daemon;
use crate::core::bus::{FollowUp, Subscriber};
use crate::error::CoreError;
use crate::model::Prompt;
use crate::store::events::EventKind;

use super::outcomes::AutoBy;

/// Lines of the screen the decider sees.
const DECIDER_SCREEN_LINES: usize = 40;

/// Automatic answers, on the bus: a prompt about to be recorded is looked at by the guard and
/// the rules (the record says whether it is being answered automatically), and once it is
/// recorded the answer it calls for starts in its own task.
pub(crate) struct AutomaticAnswers;

impl Subscriber for AutomaticAnswers {
    fn name(&self) -> &'static str {
        "automatic answers"
    }

    fn amend(&self, daemon: &Daemon, session: &str, kind: &mut EventKind) -> Option<FollowUp> {
        let EventKind::Waiting { prompt } = kind else {
            return None;
        };
        let (prepared, plan) = daemon.prepare_prompt(session, std::mem::take(prompt));
        *prompt = prepared.clone();
        let plan = plan?;
        let session = session.to_string();
        Some(Box::new(
            move |d: &Daemon, _: &crate::store::events::Event| {
                d.answer_automatically(&session, prepared, plan)
            },
        ))
    }
}

impl Daemon {
    /// Sets the prompt's guard warning and, the first time it is published, decides whether
    /// something other than a person answers it; returns the prompt as it is to be recorded,
    /// and the plan to carry out. A prompt published again keeps the state of its first
    /// publication (still being answered automatically, or left to a person).
    fn prepare_prompt(&self, session: &str, mut p: Prompt) -> (Prompt, Option<Plan>) {
        let a = self.automation();
        let protected = self.protected_worktrees(session);
        // The prompt is weighed against the session's state and the session marked with what
        // answers it, as one step: an automatic answer is decided once.
        let plan = self.sessions().update(session, |e| {
            p.warning = a
                .guard_among(&p, &e.rec.dir, &protected)
                .unwrap_or_default();
            // When it began to wait: from its first publication.
            let first = e
                .rec
                .prompt
                .as_ref()
                .filter(|c| c.id == p.id && c.since_ms > 0)
                .map(|c| c.since_ms);
            p.since_ms = first
                .or((p.since_ms > 0).then_some(p.since_ms))
                .unwrap_or_else(crate::store::now_ms);
            // A dialog that offers choices but was published without them: the pack missed them
            // (an open question or a password has none).
            if first.is_none()
                && p.options.is_empty()
                && !e.rec.unmanaged
                && !matches!(
                    p.kind,
                    crate::model::PromptKind::Question | crate::model::PromptKind::Secret
                )
            {
                self.metrics()
                    .detection_failure(&e.rec.cli, &e.rec.cli_version, "no_options");
            }
            // What was done while nobody answered it ([`super::unanswered`]) stays done.
            if let Some(c) = e.rec.prompt.as_ref().filter(|c| c.id == p.id) {
                p.reminded = p.reminded.max(c.reminded);
                p.escalated |= c.escalated;
                p.timed_out |= c.timed_out;
            }
            let mut plan = None;
            match &e.rt.auto_for {
                Some((id, who)) if *id == p.id => p.auto = who.clone(),
                _ => {
                    p.auto.clear();
                    // A subject not read whole is never answered by a machine: the guard and the
                    // rules would judge part of it. Nor is a password prompt: only a person knows
                    // the secret, and a guess would be typed as one.
                    // Nor is a CLI clibot does not run: only admins and the machine's user answer.
                    if p.warning.is_empty()
                        && !p.subject_partial
                        && !p.is_secret()
                        && !e.rec.unmanaged
                    {
                        let pl = a.plan(&p, &e.rec.cli, session, &e.rec.dir);
                        match &pl {
                            Plan::Rule { rule, .. } => p.auto = format!("rule {rule}"),
                            Plan::Decider => p.auto = "decider".into(),
                            Plan::RuleAsks { .. } => {}
                            Plan::Person => {}
                        }
                        plan = Some(pl);
                    }
                    e.rt.auto_for = Some((p.id.clone(), p.auto.clone()));
                }
            }
            if let Some(cur) = e.rec.prompt.as_mut().filter(|c| c.id == p.id) {
                cur.since_ms = p.since_ms;
                cur.warning = p.warning.clone();
                cur.auto = p.auto.clone();
            }
            plan
        });
        (p, plan.flatten())
    }

    /// Carries out a plan for a prompt just published (in its own task).
    fn answer_automatically(&self, session: &str, prompt: Prompt, plan: Plan) {
        match plan {
            Plan::Person => {}
            Plan::RuleAsks { rule, why: None } => self.note_left_to_person(AutoBy::Rule(rule)),
            Plan::RuleAsks {
                rule,
                why: Some(why),
            } => {
                self.note_left_to_person(AutoBy::Rule(rule));
                self.notice(session, "rule", &format!("{why}; it is left to you"));
            }
            Plan::Rule {
                rule,
                action,
                option,
            } => {
                let d = self.clone();
                let name = session.to_string();
                let span = info_span!("session", session = %name);
                self.in_background(
                    async move {
                        let by = format!("rule {rule}");
                        let verb = match action {
                            Action::Deny => "auto-denied",
                            _ => "auto-approved",
                        };
                        let note = format!("{verb} by {by}: {}", about(&prompt));
                        d.expect_answer(
                            &name,
                            &prompt,
                            AutoBy::Rule(rule),
                            option,
                            &about(&prompt),
                        );
                        d.finish_automatic(&name, &prompt, &(option + 1).to_string(), &by, &note)
                            .await;
                    }
                    .instrument(span),
                );
            }
            Plan::Decider => {
                let d = self.clone();
                let name = session.to_string();
                let span = info_span!("session", session = %name);
                self.in_background(
                    async move { d.ask_decider(&name, prompt).await }.instrument(span),
                );
            }
        }
    }

    pub(crate) async fn ask_decider(&self, name: &str, prompt: Prompt) {
        let a = self.automation();
        let Some(decider) = a.decider.clone() else {
            return;
        };
        let Some((cli, dir, last_reply, target)) = self.sessions().get(name, |e| {
            (
                e.rec.cli.clone(),
                e.rec.dir.to_string_lossy().into_owned(),
                e.rec.last_reply.clone().unwrap_or_default(),
                e.rec.target().to_string(),
            )
        }) else {
            return;
        };
        let screen = self
            .mux_of(name)
            .capture(&target, None, false)
            .await
            .map(|s| last_lines(&s, DECIDER_SCREEN_LINES))
            .unwrap_or_default();
        let input = DeciderInput {
            session: name,
            cli: &cli,
            dir: &dir,
            prompt: DeciderPrompt {
                id: &prompt.id,
                kind: prompt.kind.as_str(),
                text: &prompt.text,
                options: &prompt.options,
                subject: &prompt.subject,
            },
            screen,
            last_reply: &last_reply,
            free_text: prompt.options.is_empty(),
        };
        let verdict = tokio::select! {
            v = run_decider(&decider, &input) => v,
            // A daemon going away does not wait for a decider (it is killed with its task): the
            // prompt is still marked as being answered automatically, so the next daemon asks
            // again.
            _ = self.shutdown_token().cancelled() => return,
        };
        let why = match verdict {
            Ok(Verdict::Choice { choice, note }) => {
                match crate::cli::parse_choice(&choice, &prompt) {
                    // Only "this once": a wider yes ("always", "don't ask again", "for this
                    // session") changes what later prompts ask, which no machine decides.
                    Ok(Choice::Option(i))
                        if prompt
                            .options
                            .get(i)
                            .is_some_and(|o| crate::automation::widens(o)) =>
                    {
                        format!(
                            "the decider chose {:?}, which would stop later prompts from asking; only a person chooses that",
                            prompt.options.get(i).cloned().unwrap_or_default()
                        )
                    }
                    Ok(Choice::Option(i)) => {
                        a.decider_answered
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let label = prompt.options.get(i).cloned().unwrap_or_default();
                        let mut line =
                            format!("answered by the decider: {label} — {}", about(&prompt));
                        if !note.trim().is_empty() {
                            line.push_str(&format!(" ({})", note.trim()));
                        }
                        self.expect_answer(name, &prompt, AutoBy::Decider, i, &about(&prompt));
                        self.finish_automatic(
                            name,
                            &prompt,
                            &(i + 1).to_string(),
                            "decider",
                            &line,
                        )
                        .await;
                        return;
                    }
                    Ok(Choice::Text(_)) | Err(_) => {
                        format!("the decider chose {choice:?}, which is not one of the options")
                    }
                }
            }
            // Words for an open question: typed as a person's answer would be, and said so.
            Ok(Verdict::Text { text, note }) => {
                match crate::automation::decider::text_refusal(&text) {
                    _ if !prompt.options.is_empty() => {
                        format!(
                            "the decider answered in words ({text:?}) where options are offered"
                        )
                    }
                    Some(why) => why,
                    None => {
                        a.decider_answered
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let mut line =
                            format!("answered by the decider: {text:?} — {}", about(&prompt));
                        if !note.trim().is_empty() {
                            line.push_str(&format!(" ({})", note.trim()));
                        }
                        self.finish_automatic(name, &prompt, &text, "decider", &line)
                            .await;
                        return;
                    }
                }
            }
            Ok(Verdict::Ask { note }) => {
                a.decider_asked
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if note.trim().is_empty() {
                    "the decider leaves this one to you".to_string()
                } else {
                    format!("the decider leaves this one to you: {}", note.trim())
                }
            }
            Err(e) => {
                a.decider_asked
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                warn!("{e}");
                format!("{e}; it is left to you")
            }
        };
        self.note_left_to_person(AutoBy::Decider);
        self.to_person(name, &prompt, &why);
    }

    /// Answers `prompt` as `by` ("rule 2", "decider"); if that fails for a reason other than
    /// the prompt being gone, the prompt goes to the people after all.
    async fn finish_automatic(
        &self,
        name: &str,
        prompt: &Prompt,
        answer: &str,
        by: &str,
        note: &str,
    ) {
        match self
            .answer_prompt_as(name, &prompt.id, answer, by, by, note)
            .await
        {
            Ok(_) => {
                info!(by, "prompt answered automatically");
                self.audit_log().record(crate::store::audit::Audit::now(
                    by, "clibot", "", name, "answer", "accepted", note,
                ));
                self.sessions().update(name, |e| {
                    if let Some((id, who)) = e.rt.auto_for.as_mut()
                        && *id == prompt.id
                    {
                        who.clear();
                    }
                });
            }
            // Answered meanwhile (at the terminal, from a chat) or withdrawn: nothing to do.
            Err(CoreError::AlreadyResolved(..))
            | Err(CoreError::NotThatPrompt { .. })
            | Err(CoreError::NotWaiting(_))
            | Err(CoreError::UnknownPrompt(_))
            | Err(CoreError::NoSuchSession(_)) => self.unexpect_answer(&prompt.id),
            Err(e) => {
                self.unexpect_answer(&prompt.id);
                warn!(by, "the automatic answer failed: {e}");
                self.to_person(name, prompt, &format!("{by} could not answer ({e})"));
            }
        }
    }

    /// Shows a prompt that was being answered automatically to the people after all, with why.
    fn to_person(&self, name: &str, prompt: &Prompt, why: &str) {
        let shown = self.sessions().update(name, |e| {
            if let Some((id, who)) = e.rt.auto_for.as_mut()
                && *id == prompt.id
            {
                who.clear();
            }
            // Still the prompt the session waits on: shown again, for people.
            let c = e.rec.prompt.as_mut().filter(|c| c.id == prompt.id)?;
            c.auto.clear();
            Some((c.clone(), e.rec.id.clone()))
        });
        let Some((p, id)) = shown.flatten() else {
            return;
        };
        self.notice(name, "automation", why);
        self.event(name, &id, EventKind::Waiting { prompt: p });
    }
}

/// What a prompt is about, in a few words: its subject, else its question's first line.
fn about(p: &Prompt) -> String {
    let s = if p.subject.trim().is_empty() {
        p.text.lines().find(|l| !l.trim().is_empty()).unwrap_or("")
    } else {
        &p.subject
    };
    let s = s.trim();
    if s.chars().count() > 100 {
        format!("{}…", s.chars().take(100).collect::<String>())
    } else {
        s.to_string()
    }
}
