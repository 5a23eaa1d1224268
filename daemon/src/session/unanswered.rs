//! Prompts nobody answers. A prompt that has waited `remind_after` is shown again to its
//! chats (once per interval), one that has waited `escalate_after` is shown to the admins'
//! chats as well, and one that has waited `prompt_timeout` gets `on_prompt_timeout`: it goes
//! on waiting, its "no" is chosen, or the decider answers it — never for a prompt the guard
//! keeps for a person. Each is an event, an audit record and a metric.
//!
//! Checked by the daemon's monitor (every `poll_interval_ms`): minutes matter here, not
//! milliseconds. What was done is kept on the prompt itself, which is persisted, so a
//! restarted daemon neither repeats it nor forgets it.

use std::time::Duration;

use tracing::{Instrument, info, info_span, warn};

use crate::chat::chats::Binding;
use crate::cli::OnPromptTimeout;
use crate::core::*;
use crate::model::Prompt;
use crate::store::events::EventKind;

/// Escalated prompts remembered per session: how each ends goes to the admins' chats too.
const ESCALATED_KEPT: usize = 8;

/// What is due for one waiting prompt.
struct Due {
    name: String,
    session_id: String,
    cli: String,
    unmanaged: bool,
    prompt: Prompt,
    age: Duration,
    /// A reminder, with its count.
    remind: Option<u32>,
    escalate: bool,
    timeout: Option<OnPromptTimeout>,
}

impl Daemon {
    /// Looks at every prompt a person is to answer and does what its age calls for.
    pub(crate) async fn check_unanswered(&self) {
        let d = &self.settings().config.daemon;
        let now = crate::store::now_ms();
        // Each prompt's reminders, escalation and timeout are marked as they are found due, in
        // one sweep: a prompt is never made due twice.
        let due = self.sessions().filter_map_mut(|e| {
            if e.rec.state.is_exited() {
                return None;
            }
            let pol = self.cli(&e.rec.cli).map(|c| c.prompts).unwrap_or_default();
            let p = e.rec.prompt.as_mut()?;
            // Not yet shown, or being answered by a rule or the decider.
            if p.since_ms <= 0 || !p.auto.is_empty() {
                return None;
            }
            let age = Duration::from_millis(u64::try_from(now - p.since_ms).unwrap_or(0));
            let remind_after = pol.remind_after.unwrap_or(d.remind_after);
            let escalate_after = pol.escalate_after.unwrap_or(d.escalate_after);
            let timeout = pol.prompt_timeout.unwrap_or(d.prompt_timeout);
            let remind = (!remind_after.is_zero())
                .then(|| {
                    u32::try_from(age.as_millis() / remind_after.as_millis()).unwrap_or(u32::MAX)
                })
                .filter(|n| *n > p.reminded);
            if let Some(n) = remind {
                p.reminded = n;
            }
            let escalate = !escalate_after.is_zero() && age >= escalate_after && !p.escalated;
            if escalate {
                p.escalated = true;
                if e.rt.escalated.len() >= ESCALATED_KEPT {
                    e.rt.escalated.pop_front();
                }
                e.rt.escalated.push_back(p.id.clone());
            }
            let timeout = (!timeout.is_zero() && age >= timeout && !p.timed_out)
                .then(|| pol.on_prompt_timeout.unwrap_or(d.on_prompt_timeout));
            if timeout.is_some() {
                p.timed_out = true;
            }
            (remind.is_some() || escalate || timeout.is_some()).then(|| Due {
                name: e.rec.name.clone(),
                session_id: e.rec.id.clone(),
                cli: e.rec.cli.clone(),
                unmanaged: e.rec.unmanaged,
                prompt: p.clone(),
                age,
                // An escalation or a timeout shows the prompt anyway: no reminder too.
                remind: remind.filter(|_| !escalate && timeout.is_none()),
                escalate,
                timeout,
            })
        });
        if due.is_empty() {
            return;
        }
        self.persist();
        for d in due {
            let span = info_span!("session", session = %d.name);
            self.nudge(d).instrument(span).await;
        }
    }

    async fn nudge(&self, d: Due) {
        let age_ms = u64::try_from(d.age.as_millis()).unwrap_or(u64::MAX);
        let waited = crate::duration::format_words(d.age);
        let metrics = self.metrics();
        if let Some(count) = d.remind {
            info!(prompt = %d.prompt.id, count, "reminding: nobody has answered the prompt");
            metrics.prompt_nudged("reminder", &d.cli, "");
            self.audit_nudge(&d.name, "prompt_reminded", &format!("waited {waited}"));
            self.event(
                &d.name,
                &d.session_id,
                EventKind::PromptReminded {
                    prompt: d.prompt.clone(),
                    count,
                    age_ms,
                },
            );
        }
        if d.escalate {
            info!(prompt = %d.prompt.id, "escalating to the admins: nobody has answered the prompt");
            metrics.prompt_nudged("escalation", &d.cli, "");
            self.audit_nudge(&d.name, "prompt_escalated", &format!("waited {waited}"));
            self.event(
                &d.name,
                &d.session_id,
                EventKind::PromptEscalated {
                    prompt: d.prompt.clone(),
                    age_ms,
                },
            );
        }
        let Some(wanted) = d.timeout else {
            return;
        };
        let p = &d.prompt;
        let guarded = guard_reason(p, d.unmanaged);
        let deny = crate::automation::deny_option(&p.options);
        let decider = self.automation().decider.is_some();
        let (action, detail) = match wanted {
            OnPromptTimeout::Wait => (OnPromptTimeout::Wait, "it goes on waiting".to_string()),
            OnPromptTimeout::Deny if deny.is_none() => (
                OnPromptTimeout::Wait,
                "it has no option that says no, so it goes on waiting".to_string(),
            ),
            OnPromptTimeout::Deny => (OnPromptTimeout::Deny, "it is denied".to_string()),
            OnPromptTimeout::Decider => match guarded {
                Some(why) => (
                    OnPromptTimeout::Wait,
                    format!("{why}, so it goes on waiting for a person"),
                ),
                None if !decider => (
                    OnPromptTimeout::Wait,
                    "no [decider] is configured, so it goes on waiting".to_string(),
                ),
                None => (
                    OnPromptTimeout::Decider,
                    "the decider answers it".to_string(),
                ),
            },
        };
        warn!(prompt = %p.id, action = action.as_str(), "nobody answered the prompt within prompt_timeout");
        metrics.prompt_nudged("timeout", &d.cli, action.as_str());
        self.audit_nudge(
            &d.name,
            "prompt_timed_out",
            &format!("waited {waited}; {}: {detail}", action.as_str()),
        );
        self.event(
            &d.name,
            &d.session_id,
            EventKind::PromptTimedOut {
                prompt_id: p.id.clone(),
                action: action.as_str().to_string(),
                age_ms,
                detail,
            },
        );
        match action {
            OnPromptTimeout::Wait => {}
            OnPromptTimeout::Deny => {
                let Some(i) = deny else {
                    return;
                };
                let label = p.options.get(i).cloned().unwrap_or_default();
                let note = format!("nobody answered in {waited}: denied ({label})");
                let by = "prompt_timeout";
                if let Err(e) = self
                    .answer_prompt_as(&d.name, &p.id, &(i + 1).to_string(), by, by, &note)
                    .await
                {
                    warn!("the timed-out prompt could not be denied: {e}");
                    self.notice(
                        &d.name,
                        "prompt_timeout",
                        &format!("the prompt could not be denied ({e}); it goes on waiting"),
                    );
                }
            }
            OnPromptTimeout::Decider => {
                let marked = self.sessions().update(&d.name, |e| {
                    let cur = e.rec.prompt.as_mut().filter(|c| c.id == p.id)?;
                    cur.auto = "decider".into();
                    e.rt.auto_for = Some((p.id.clone(), "decider".into()));
                    Some(())
                });
                if marked.flatten().is_none() {
                    return;
                }
                self.ask_decider(&d.name, p.clone()).await;
            }
        }
    }

    fn audit_nudge(&self, session: &str, action: &str, detail: &str) {
        self.audit_log().record(crate::store::audit::Audit::now(
            "clibot", "", "", session, action, "accepted", detail,
        ));
    }

    /// Where event `seq` of `session` goes on `platform` besides the session's own chats: a
    /// prompt's escalation, how an escalated prompt ended, and what a budget did go to the
    /// admins' chats.
    pub fn escalation_bindings(&self, platform: &str, session: &str, seq: u64) -> Vec<Binding> {
        let escalated: Vec<String> = self
            .sessions()
            .get(session, |e| e.rt.escalated.iter().cloned().collect())
            .unwrap_or_default();
        if escalated.is_empty() && self.live().config.budgets.is_empty() {
            return Vec::new();
        }
        let read = self.events().read_after(seq.saturating_sub(1), 1);
        let Some(ev) = read.events.first().filter(|ev| ev.seq == seq) else {
            return Vec::new();
        };
        let for_admins = match &ev.kind {
            EventKind::PromptEscalated { .. } => true,
            // What a budget did is the admins' to know (and to lift).
            EventKind::Notice { kind, .. } => kind == "budget",
            EventKind::PromptResolved { prompt_id, .. }
            | EventKind::PromptTimedOut { prompt_id, .. } => escalated.contains(prompt_id),
            _ => false,
        };
        if !for_admins || ev.session != session {
            return Vec::new();
        }
        self.admin_notice_chats(platform)
            .into_iter()
            .filter_map(|chat| {
                self.chats()
                    .bindings(platform, &chat, "")
                    .into_iter()
                    .next()
            })
            .collect()
    }
}

/// Why no machine may answer this prompt, if it may not.
fn guard_reason(p: &Prompt, unmanaged: bool) -> Option<String> {
    if !p.warning.is_empty() {
        Some(format!("the guard keeps it for a person ({})", p.warning))
    } else if p.is_secret() {
        Some("it asks for a secret".into())
    } else if p.subject_partial {
        Some("its subject was not read whole".into())
    } else if unmanaged {
        Some("clibot does not run that CLI".into())
    } else {
        None
    }
}
