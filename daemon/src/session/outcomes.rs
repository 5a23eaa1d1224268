//! Learning from outcomes: what followed each automatic answer, kept by
//! [`crate::store::outcomes`]. This side says what an event means for the answers a session
//! waits on — its turn completed, an error or the end of its CLI (errored), an interrupt key
//! or a stop within a minute (undone) — and builds `clibotctl automation report`.

use crate::core::Daemon;
use crate::core::bus::Subscriber;
use crate::model::Prompt;
use crate::store::events::EventKind;
use crate::store::now_ms;
use crate::store::outcomes::{Answer, DECIDER, Expected, Outcome, Row};

/// Keys that interrupt a CLI: pressed after an automatic answer, they undo it.
const INTERRUPTS: &[&str] = &["Escape", "C-c"];

/// Who answered automatically, for the book.
pub(crate) enum AutoBy {
    /// The rule numbered so (1-based).
    Rule(usize),
    Decider,
}

/// One row of the report: a rule configured now (or one that answered before and is no
/// longer in the config), or the decider.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportRow {
    /// "rule" or "decider".
    pub by: &'static str,
    /// The rule's number now; when it is no longer configured, the number it last had.
    pub index: u32,
    pub about: String,
    pub configured: bool,
    pub tally: Row,
}

/// `clibotctl automation report`.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Since when answers are counted.
    pub since_ms: i64,
    pub rows: Vec<ReportRow>,
    /// The latest answers, oldest first.
    pub recent: Vec<Answer>,
}

/// A rule's row key: its description, so that a reordered config keeps its history.
fn rule_key(about: &str) -> String {
    format!("rule: {about}")
}

/// What became of automatic answers, on the bus: every event written may settle one.
pub(crate) struct AutomaticOutcomes;

impl Subscriber for AutomaticOutcomes {
    fn name(&self) -> &'static str {
        "outcomes of automatic answers"
    }

    fn on_event(&self, daemon: &Daemon, event: &crate::store::events::Event) {
        daemon.follow_outcomes(&event.session, &event.kind);
    }
}

impl Daemon {
    /// The row key, the rule's number and description for `by`.
    fn auto_row(&self, by: &AutoBy) -> (String, u32, String) {
        match by {
            AutoBy::Decider => (DECIDER.to_string(), 0, String::new()),
            AutoBy::Rule(n) => {
                let about = self
                    .automation()
                    .rules()
                    .get(n.saturating_sub(1))
                    .map(|(r, _)| r.describe())
                    .unwrap_or_default();
                (rule_key(&about), *n as u32, about)
            }
        }
    }

    /// An automatic answer (option `option`, 0-based, of `prompt` of `session`) is about to
    /// be given by `by`: its `prompt_resolved` event will count it.
    pub(crate) fn expect_answer(
        &self,
        session: &str,
        prompt: &Prompt,
        by: AutoBy,
        option: usize,
        about: &str,
    ) {
        let label = prompt.options.get(option).cloned().unwrap_or_default();
        let approved = match &by {
            AutoBy::Rule(n) => self
                .automation()
                .rules()
                .get(n.saturating_sub(1))
                .is_none_or(|(r, _)| r.action != crate::automation::Action::Deny),
            AutoBy::Decider => !crate::automation::is_no(&label),
        };
        let resolver = match &by {
            AutoBy::Rule(n) => format!("rule {n}"),
            AutoBy::Decider => "decider".to_string(),
        };
        let (key, index, row_about) = self.auto_row(&by);
        self.outcomes().expect(
            session,
            &prompt.id,
            Expected {
                key,
                index,
                about: row_about,
                by: resolver,
                subject: about.to_string(),
                approved,
                answer: label,
            },
        );
    }

    /// The automatic answer to `prompt_id` was not given (the prompt went away, or to a
    /// person).
    pub(crate) fn unexpect_answer(&self, prompt_id: &str) {
        self.outcomes().unexpect(prompt_id);
    }

    /// `by` looked at a prompt and left it to a person.
    pub(crate) fn note_left_to_person(&self, by: AutoBy) {
        let (key, index, about) = self.auto_row(&by);
        self.outcomes()
            .left_to_person(&key, index, &about, now_ms());
    }

    /// What event `kind` of `session` means for its automatic answers (called for every
    /// event, once written).
    fn follow_outcomes(&self, session: &str, kind: &EventKind) {
        let o = &self.outcomes();
        let now = now_ms();
        if let EventKind::PromptResolved { prompt_id, by, .. } = kind {
            o.resolved(session, prompt_id, by, now);
            return;
        }
        if session.is_empty() || !o.has_pending(session) {
            return;
        }
        match kind {
            EventKind::TurnCompleted { .. } => o.settle(session, Outcome::Completed, "", now),
            EventKind::Error { message, kind } => {
                let detail = if kind.is_empty() {
                    message.clone()
                } else {
                    format!("{kind}: {message}")
                };
                o.settle(session, Outcome::Errored, &detail, now);
            }
            EventKind::KeysSent { keys }
                if keys.iter().any(|k| INTERRUPTS.contains(&k.as_str())) =>
            {
                o.settle(session, Outcome::Undone, &keys.join(" "), now);
            }
            EventKind::Exited { reason, .. } => match reason.as_str() {
                // A person ended it: an undo when it came soon enough; the rest go unfollowed.
                "stopped" | "restarted" => {
                    o.settle(session, Outcome::Undone, reason, now);
                    o.forget(session);
                }
                r if r.starts_with("idle for") => o.forget(session),
                r => o.settle(session, Outcome::Errored, r, now),
            },
            EventKind::Released => o.forget(session),
            _ => {}
        }
    }

    /// Per rule (those configured now, then those that answered before and are gone) and for
    /// the decider: answers, approvals and denials, outcomes, prompts left to a person, when it
    /// last fired; and the latest answers.
    pub fn automation_report(&self) -> Report {
        let book = self.outcomes().book();
        let a = self.automation();
        let mut used: Vec<&str> = Vec::new();
        let mut rows = Vec::new();
        for (i, (rule, _)) in a.rules().into_iter().enumerate() {
            let about = rule.describe();
            let key = rule_key(&about);
            let tally = match book.rows.iter().find(|r| r.key == key) {
                Some(r) if !used.contains(&r.key.as_str()) => {
                    used.push(&r.key);
                    r.clone()
                }
                _ => Row {
                    key,
                    ..Default::default()
                },
            };
            rows.push(ReportRow {
                by: "rule",
                index: i as u32 + 1,
                about,
                configured: true,
                tally,
            });
        }
        for r in &book.rows {
            if r.key == DECIDER || used.contains(&r.key.as_str()) {
                continue;
            }
            rows.push(ReportRow {
                by: "rule",
                index: r.index,
                about: r.about.clone(),
                configured: false,
                tally: r.clone(),
            });
        }
        let decider = book.rows.iter().find(|r| r.key == DECIDER);
        if a.decider.is_some() || decider.is_some() {
            rows.push(ReportRow {
                by: "decider",
                index: 0,
                about: a
                    .decider
                    .as_ref()
                    .map(|d| d.command.join(" "))
                    .unwrap_or_default(),
                configured: a.decider.is_some(),
                tally: decider.cloned().unwrap_or_else(|| Row {
                    key: DECIDER.into(),
                    ..Default::default()
                }),
            });
        }
        Report {
            since_ms: book.since_ms,
            rows,
            recent: book.recent,
        }
    }
}
