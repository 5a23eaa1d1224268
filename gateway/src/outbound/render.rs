//! What a chat sees of each event of the daemon's log (the relay sends it; this only words it).

use clibot_proto::v1::{self, event::Kind};

/// What a chat sees of an event; `None` for events that are not for chats.
pub fn render(ev: &v1::Event) -> Option<String> {
    let s = &ev.session;
    Some(match ev.kind.as_ref()? {
        Kind::TurnCompleted(t) if t.text.trim().is_empty() => format!("[{s}] done"),
        Kind::TurnCompleted(t) => format!("[{s}] {}", t.text),
        // Being answered by a rule or the decider: the chat sees the answer, not the prompt
        // (if that falls through, the prompt is published again for people).
        Kind::Waiting(w) if w.prompt.as_ref().is_some_and(|p| !p.auto.is_empty()) => return None,
        Kind::Waiting(w) => format!("[{s}] {}", prompt_text(w.prompt.as_ref()?)),
        Kind::PromptResolved(r) if !r.note.is_empty() => format!("[{s}] {}", r.note),
        Kind::Notice(n) => format!("[{s}] {}", n.text),
        Kind::TurnUsage(u) if u.footer => {
            use clibot_proto::usage_words::tokens;
            let mut line = format!(
                "[{s}] 📊 {} in · {} out",
                tokens(u.input),
                tokens(u.output)
            );
            if u.cache_read > 0 {
                line.push_str(&format!(" · {} cached", tokens(u.cache_read)));
            }
            for w in &u.windows {
                line.push_str(&format!(" · {} {:.0} %", w.name, w.used_percent));
            }
            if u.priced {
                line.push_str(&format!(" · {}", clibot_proto::usage_words::money(u.usd)));
            }
            line
        }
        Kind::JobStarted(j) => {
            let why = match j.trigger() {
                v1::JobTrigger::Webhook => ", by its webhook",
                v1::JobTrigger::Manual => ", run by hand",
                v1::JobTrigger::Late => ", late: it was due while clibotd was down",
                _ => "",
            };
            format!("[{s}] ⏰ job {} (run {}{why}): {}", j.job, j.run, j.prompt)
        }
        Kind::JobFinished(j) if j.quiet => return None,
        Kind::JobFinished(j) => job_finished(s, j),
        Kind::JobSkipped(j) => format!("[{s}] ⏰ job {} skipped: {}", j.job, j.reason),
        Kind::GoalRound(g) => format!(
            "[{s}] 🎯 goal round {}: `{}` exited with status {}; the session goes on{}",
            g.round,
            g.until,
            g.exit_code,
            if g.output.is_empty() { String::new() } else { format!(":\n{}", g.output) }
        ),
        Kind::GoalEnded(g) => goal_ended(s, g),
        Kind::JobMissed(j) if j.ran => format!(
            "[{s}] ⏰ job {} fell due {} time(s) while clibot was down; it runs once now",
            j.job, j.count
        ),
        Kind::JobMissed(j) => format!(
            "[{s}] ⏰ job {} fell due {} time(s) while clibot was down and was not run (missed = \"skip\"); it runs again at its next time",
            j.job, j.count
        ),
        Kind::TurnCancelled(c) if c.by == "turn_timeout" => {
            format!("[{s}] the turn ran too long and was cancelled")
        }
        Kind::TurnCancelled(_) => format!("[{s}] turn cancelled"),
        Kind::Hibernated(h) if h.resumes => format!(
            "[{s}] 💤 hibernated after being {}: your next message here wakes it and continues the conversation",
            h.reason
        ),
        Kind::Hibernated(h) => format!(
            "[{s}] 💤 hibernated after being {}: your next message here starts it again",
            h.reason
        ),
        Kind::PromptReminded(r) if r.prompt.as_ref().is_some_and(|p| !p.auto.is_empty()) => {
            return None;
        }
        Kind::PromptReminded(r) => format!(
            "[{s}] ⏰ still waiting for you ({}):\n{}",
            span(r.age_ms),
            prompt_text(r.prompt.as_ref()?)
        ),
        Kind::PromptEscalated(r) => format!(
            "[{s}] ⚠️ nobody has answered for {}; the admins are told too:\n{}",
            span(r.age_ms),
            prompt_text(r.prompt.as_ref()?)
        ),
        Kind::PromptTimedOut(t) => format!(
            "[{s}] nobody answered the prompt in {}: {}",
            span(t.age_ms),
            t.detail
        ),
        Kind::PromptResolved(r) => match r.by.as_str() {
            "terminal" => format!("[{s}] answered at the terminal"),
            "cli" => format!("[{s}] the prompt was withdrawn by the CLI"),
            _ => {
                let who = match r.actor.as_str() {
                    "" => "clibot".to_string(),
                    "local" => "the machine's user".to_string(),
                    a => a.to_string(),
                };
                if r.answer.is_empty() {
                    format!("[{s}] answered by {who}")
                } else {
                    format!("[{s}] answered by {who}: {}", r.answer)
                }
            }
        },
        Kind::Exited(e) => {
            let head = match e.status {
                Some(code) if e.reason.is_empty() || e.reason == "the CLI exited" => {
                    format!("[{s}] the CLI exited (status {code})")
                }
                // Stopped by clibot (idle too long): say why, and that it can come back.
                Some(_) if e.reason.starts_with("idle for") => format!(
                    "[{s}] stopped after being {}; restart it to resume the conversation",
                    e.reason
                ),
                Some(code) => format!("[{s}] the CLI exited (status {code}): {}", e.reason),
                None => format!("[{s}] the session ended: {}", e.reason),
            };
            if e.output.trim().is_empty() {
                head
            } else {
                format!("{head}; its last output:\n{}", e.output)
            }
        }
        Kind::Error(e) if e.kind == "usage_limit" => limit_text(s, e),
        Kind::Error(e) => format!("[{s}] error: {}", e.message),
        Kind::Stalled(st) => stall_text(s, st),
        // Which chat is not said: it may be another user's private chat, and this one may be
        // a group (`clibotctl chats` on the machine shows it).
        Kind::ChatSuspended(c) => format!(
            "[{s}] stopped delivering to another {} chat of this session: {}. It resumes when someone writes there again (`clibotctl chats` on the machine shows which).",
            c.platform,
            c.reason.replace(c.chat.as_str(), "…").trim_end_matches('.')
        ),
        Kind::Paired(_) => "✅ the owner of this machine approved you: write here to use clibot (!!help lists what you may do)".to_string(),
        Kind::EventsDropped(d) => format!(
            "clibot: events {}–{} were removed from the log before this chat got them; some replies may be missing here (`!!last` shows a session's latest reply)",
            d.first_seq, d.last_seq
        ),
        _ => return None,
    })
}

/// `12m`, `1h 5m`, `40s`.
fn span(ms: u64) -> String {
    let secs = ms / 1000;
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        _ => format!("{}h {}m", secs / 3600, (secs % 3600) / 60),
    }
}

/// A stall, as a person can act on it: the real times, what the screen shows, what may be
/// going on, and what to do.
fn stall_text(s: &str, st: &v1::Stalled) -> String {
    let time = if st.working_ms > 0 {
        format!(
            "working {}, no output for {}",
            span(st.working_ms),
            span(st.silent_ms)
        )
    } else {
        format!("no output for {}", span(st.silent_ms))
    };
    let mut t = format!("[{s}] {time}.");
    if !st.screen.trim().is_empty() {
        t.push_str(&format!(" The screen ends with:\n{}\n", st.screen));
    }
    t.push_str(" It may be waiting on a question clibot does not recognise, on a slow tool or network, or stuck: !!screen shows it, !!cancel stops the turn, !!keys Enter / Escape / C-c press keys.");
    t
}

/// A goal that ended, in a chat's words.
fn goal_ended(s: &str, g: &v1::GoalEnded) -> String {
    use v1::GoalEnd;
    let rounds = match g.rounds {
        1 => "1 round".to_string(),
        n => format!("{n} rounds"),
    };
    let why = match g.reason() {
        GoalEnd::Reached => {
            return format!("[{s}] 🎯 goal reached after {rounds}: `{}` passes", g.until);
        }
        GoalEnd::Turns => "it used its rounds and the check still fails".to_string(),
        GoalEnd::Time => "it ran out of time and the check still fails".to_string(),
        GoalEnd::Person => "a person is needed".to_string(),
        GoalEnd::Off => "it was turned off".to_string(),
        GoalEnd::Ended | GoalEnd::Unspecified => "it cannot go on".to_string(),
    };
    let detail = if g.detail.is_empty() {
        String::new()
    } else {
        format!(" ({})", g.detail)
    };
    format!(
        "[{s}] 🎯 goal `{}` stopped after {rounds}: {why}{detail}",
        g.until
    )
}

/// A job's run that ended, in a chat's words.
fn job_finished(s: &str, j: &v1::JobFinished) -> String {
    use v1::JobOutcome;
    let mut t = match j.outcome() {
        JobOutcome::Done => format!("[{s}] ⏰ job {} (run {}) done", j.job, j.run),
        JobOutcome::GateSkipped => format!(
            "[{s}] ⏰ job {} (run {}): its gate found nothing to do",
            j.job, j.run
        ),
        JobOutcome::Cancelled => format!("[{s}] ⏰ job {} (run {}) cancelled", j.job, j.run),
        JobOutcome::Failed | JobOutcome::Unspecified => {
            format!("[{s}] ⏰ job {} (run {}) failed", j.job, j.run)
        }
    };
    if !j.detail.is_empty() {
        t.push_str(&format!(": {}", j.detail));
    }
    if j.paused {
        t.push_str(&format!(
            "\nThe job is paused after failing again and again: clibotctl jobs resume {} (or !!job resume {}) once it is fixed",
            j.job, j.job
        ));
    }
    t
}

/// Whether a chat does anything with this event (the rest are skipped without a lookup).
pub fn for_chats(ev: &v1::Event) -> bool {
    matches!(
        ev.kind,
        Some(
            Kind::StateChanged(_)
                | Kind::TurnCompleted(_)
                | Kind::Waiting(_)
                | Kind::PromptResolved(_)
                | Kind::Exited(_)
                | Kind::Error(_)
                | Kind::Stalled(_)
                | Kind::ChatSuspended(_)
                | Kind::Notice(_)
                | Kind::JobStarted(_)
                | Kind::TurnUsage(_)
                | Kind::JobFinished(_)
                | Kind::JobSkipped(_)
                | Kind::JobMissed(_)
                | Kind::GoalRound(_)
                | Kind::GoalEnded(_)
                | Kind::TurnCancelled(_)
                | Kind::PromptReminded(_)
                | Kind::PromptEscalated(_)
                | Kind::PromptTimedOut(_)
                | Kind::Hibernated(_)
                | Kind::FileSent(_)
                // Only a session's own topic is told (and closed).
                | Kind::Stopped(_)
                | Kind::Released(_)
        )
    )
}

/// The prompt an event shows with its options (a prompt, or one shown again).
pub fn shown_prompt(ev: &v1::Event) -> Option<&v1::Prompt> {
    match ev.kind.as_ref()? {
        Kind::Waiting(w) => w.prompt.as_ref(),
        Kind::PromptReminded(r) => r.prompt.as_ref(),
        Kind::PromptEscalated(r) => r.prompt.as_ref(),
        _ => None,
    }
}

/// The pseudo prompt id of a usage limit's buttons: `l.SEQ` (Resume at reset, Delegate now)
/// or `l.SEQ.d` (Delegate now: the CLI did not say when its limit resets), each followed by
/// one **Switch to PROFILE** per other account profile of the session's CLI.
pub const LIMIT_CARD: &str = "l.";

/// A usage limit in words: the CLI's message and, when it says, when the limit resets.
fn limit_text(s: &str, e: &v1::Error) -> String {
    let mut t = format!("[{s}] ⛔ usage limit: {}", e.message);
    let now = crate::ops::health::now_ms();
    if e.resets_at_ms > now {
        t.push_str(&format!(
            "\nIt resets in {}: Resume at reset tells the session to continue then; Delegate now hands its work to the next CLI.",
            clibot_proto::usage_words::span((e.resets_at_ms - now) / 1000)
        ));
    }
    if !e.switch_profiles.is_empty() {
        t.push_str(" Switch to … starts it again with another account profile, its conversation carried over where the CLI allows.");
    }
    t
}

/// The buttons under a usage limit: its card's id and options (see [`LIMIT_CARD`]).
pub fn limit_card(ev: &v1::Event) -> Option<(String, Vec<String>)> {
    let Some(Kind::Error(e)) = ev.kind.as_ref() else {
        return None;
    };
    if e.kind != "usage_limit" {
        return None;
    }
    let (id, mut options) = if e.resets_at_ms > crate::ops::health::now_ms() {
        (
            format!("{LIMIT_CARD}{}", ev.seq),
            vec!["Resume at reset".to_string(), "Delegate now".to_string()],
        )
    } else {
        (
            format!("{LIMIT_CARD}{}.d", ev.seq),
            vec!["Delegate now".to_string()],
        )
    };
    options.extend(e.switch_profiles.iter().map(|p| format!("Switch to {p}")));
    Some((id, options))
}

/// A prompt as a chat message: the guard's warning, the dialog's context (the lines above its
/// question that explain it), the question, its subject, the numbered options.
pub fn prompt_text(p: &v1::Prompt) -> String {
    if p.is_secret() {
        return format!(
            "🔒 {}\nIt asks for a password or secret. Send it as your next message: it is typed into the session, clibot keeps no copy (its logs show only the length), and your message is deleted where the platform allows. !!keys C-c cancels.",
            p.text
        );
    }
    let mut t = String::new();
    if !p.warning.is_empty() {
        t.push_str(&format!(
            "⚠️ careful — {}; clibot will not answer this one by itself\n",
            p.warning
        ));
    }
    if !p.context.trim().is_empty() {
        t.push_str(p.context.trim());
        t.push('\n');
    }
    t.push_str(&p.text);
    if !p.subject.is_empty() {
        t.push_str(&format!("\n  {}", p.subject));
    }
    for (i, o) in p.options.iter().enumerate() {
        t.push_str(&format!("\n  {}. {o}", i + 1));
    }
    if !p.options.is_empty() {
        t.push_str("\nanswer with the number");
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A usage limit gets its buttons: Resume at reset only when the reset time is known and
    /// ahead; other errors get none.
    #[test]
    fn a_usage_limit_gets_its_card() {
        let ev = |kind: &str, resets_at_ms: i64| v1::Event {
            seq: 42,
            session: "api".into(),
            kind: Some(Kind::Error(v1::Error {
                message: "You've hit your 5-hour limit".into(),
                kind: kind.into(),
                resets_at_ms,
                switch_profiles: Vec::new(),
            })),
            ..Default::default()
        };
        let later = crate::ops::health::now_ms() + 3_600_000;
        assert_eq!(
            limit_card(&ev("usage_limit", later)),
            Some((
                "l.42".to_string(),
                vec!["Resume at reset".to_string(), "Delegate now".to_string()]
            ))
        );
        assert_eq!(
            limit_card(&ev("usage_limit", 0)),
            Some(("l.42.d".to_string(), vec!["Delegate now".to_string()]))
        );
        assert_eq!(limit_card(&ev("rate_limit", later)), None);
        // The account profiles it could go on with follow, one button each.
        let mut two = ev("usage_limit", 0);
        if let Some(Kind::Error(e)) = two.kind.as_mut() {
            e.switch_profiles = vec!["work".into(), "home".into()];
        }
        assert_eq!(
            limit_card(&two).map(|c| c.1),
            Some(vec![
                "Delegate now".to_string(),
                "Switch to work".to_string(),
                "Switch to home".to_string()
            ])
        );
        let text = render(&ev("usage_limit", later)).unwrap_or_default();
        assert!(
            // 59m or 1h 0m, as the clock ticks between the two reads.
            text.starts_with("[api] ⛔ usage limit: You've hit your 5-hour limit\nIt resets in "),
            "{text}"
        );
    }

    fn exited(status: Option<i32>, reason: &str) -> v1::Event {
        v1::Event {
            seq: 1,
            session: "api".into(),
            kind: Some(Kind::Exited(v1::SessionExited {
                status,
                reason: reason.into(),
                output: String::new(),
            })),
            ..Default::default()
        }
    }

    #[test]
    fn a_prompt_shows_its_context_above_the_question_and_the_options() {
        let waiting = |context: &str, warning: &str| v1::Event {
            seq: 1,
            session: "api".into(),
            kind: Some(Kind::Waiting(v1::Waiting {
                prompt: Some(v1::Prompt {
                    id: "p1".into(),
                    kind: v1::PromptKind::Continue.into(),
                    text: "Enter to proceed".into(),
                    options: vec!["proceed".into()],
                    context: context.into(),
                    warning: warning.into(),
                    ..Default::default()
                }),
            })),
            ..Default::default()
        };
        let t = render(&waiting(
            "Confirmation Required\nThis will modify 3 files",
            "",
        ))
        .unwrap_or_default();
        assert_eq!(
            t,
            "[api] Confirmation Required\nThis will modify 3 files\nEnter to proceed\n  1. proceed\nanswer with the number"
        );
        // The guard's warning first, then the context, then the question.
        let t = render(&waiting(
            "This will modify 3 files",
            "recursive delete (rm -r)",
        ))
        .unwrap_or_default();
        let at = |s: &str| t.find(s).unwrap_or_else(|| panic!("{s:?} in {t}"));
        assert!(
            at("careful") < at("This will modify")
                && at("This will modify") < at("Enter to proceed")
        );
        // None: the question as before.
        assert_eq!(
            render(&waiting("", "")).unwrap_or_default(),
            "[api] Enter to proceed\n  1. proceed\nanswer with the number"
        );
    }

    #[test]
    fn a_suspended_chat_is_never_named() {
        let ev = v1::Event {
            seq: 1,
            session: "api".into(),
            kind: Some(Kind::ChatSuspended(v1::ChatSuspended {
                platform: "telegram".into(),
                chat: "123456789".into(),
                reason: "Telegram: Forbidden: bot was blocked by the user 123456789.".into(),
            })),
            ..Default::default()
        };
        let t = render(&ev).unwrap_or_default();
        assert!(!t.contains("123456789"), "{t}");
        assert!(
            t.starts_with("[api] stopped delivering to another telegram chat of this session: Telegram: Forbidden: bot was blocked by the user …."),
            "{t}"
        );
    }

    #[test]
    fn an_exit_says_why_and_a_reaped_session_says_it_can_come_back() {
        assert_eq!(
            render(&exited(Some(1), "the CLI exited")).as_deref(),
            Some("[api] the CLI exited (status 1)")
        );
        let reaped = render(&exited(Some(0), "idle for 12h")).unwrap_or_default();
        assert!(
            reaped.contains("idle for 12h") && reaped.contains("restart"),
            "{reaped}"
        );
        assert_eq!(
            render(&exited(None, "its tmux session is gone")).as_deref(),
            Some("[api] the session ended: its tmux session is gone")
        );
    }

    #[test]
    fn a_turns_usage_is_a_footer_only_when_asked_for() {
        let usage = |footer: bool| v1::Event {
            seq: 2,
            session: "api".into(),
            kind: Some(Kind::TurnUsage(v1::TurnUsage {
                input: 2000,
                output: 14,
                cache_read: 6000,
                windows: vec![v1::PlanWindow {
                    name: "5h".into(),
                    used_percent: 42.4,
                    resets_at_ms: 0,
                }],
                footer,
                ..Default::default()
            })),
            ..Default::default()
        };
        assert_eq!(render(&usage(false)), None);
        assert_eq!(
            render(&usage(true)).as_deref(),
            Some("[api] 📊 2.0k in · 14 out · 6.0k cached · 5h 42 %")
        );
    }
}
