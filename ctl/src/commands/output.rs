//! How sessions and events look on a terminal, and as JSON for scripts.

use clibot_proto::v1::{self, event::Kind};
use serde_json::{Value, json};

pub fn state_name(s: i32) -> &'static str {
    match v1::SessionState::try_from(s) {
        Ok(v1::SessionState::Starting) => "starting",
        Ok(v1::SessionState::Idle) => "idle",
        Ok(v1::SessionState::Working) => "working",
        Ok(v1::SessionState::Waiting) => "waiting",
        Ok(v1::SessionState::Exited) => "exited",
        Ok(v1::SessionState::Error) => "error",
        Ok(v1::SessionState::Declared) => "declared",
        Ok(v1::SessionState::Hibernated) => "hibernated",
        _ => "unknown",
    }
}

pub fn parse_state(s: &str) -> Option<v1::SessionState> {
    Some(match s {
        "starting" => v1::SessionState::Starting,
        "idle" => v1::SessionState::Idle,
        "working" => v1::SessionState::Working,
        "waiting" => v1::SessionState::Waiting,
        "exited" => v1::SessionState::Exited,
        "error" => v1::SessionState::Error,
        "declared" => v1::SessionState::Declared,
        "hibernated" => v1::SessionState::Hibernated,
        _ => return None,
    })
}

/// Prints `v` as indented JSON.
pub fn print_json(v: &Value) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// "42s", "5m", "3h", "2d".
pub fn ago(ms: i64) -> String {
    let s = ((now_ms() - ms).max(0) / 1000) as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

pub fn prompt_json(p: &v1::Prompt) -> Value {
    json!({"prompt_id": p.id, "kind": p.kind_name(), "text": p.text, "options": p.options, "subject": p.subject, "subject_kind": p.subject_kind().name(), "source": p.source().name(), "warning": p.warning, "auto": p.auto, "context": p.context})
}

pub fn session_json(s: &v1::Session) -> Value {
    json!({
        "id": s.id, "name": s.name, "cli": s.cli, "cli_version": s.cli_version, "dir": s.dir, "state": state_name(s.state),
        "created_at_ms": s.created_at_ms, "last_activity_ms": s.last_activity_ms,
        "tmux_session": s.tmux_session, "tmux_session_id": s.tmux_session_id, "pid": s.pid,
        "exit_status": s.exit_status, "adopted": s.adopted, "args": s.args,
        "server": (!s.server.is_empty()).then_some(&s.server),
        "unmanaged": s.unmanaged,
        "attach_command": s.attach_command,
        "isolate": (!s.isolate.is_empty()).then_some(&s.isolate),
        "prompt": s.prompt.as_ref().map(prompt_json), "stalled": s.stalled,
        "queued_inputs": s.queued_inputs, "error": s.error, "exit_reason": s.exit_reason,
        "delegate": s.delegate, "delegated_from": s.delegated_from,
        "delegated_to": s.delegated_to,
        "conversation_id": s.conversation_id,
        "profile": s.profile,
        "worktree": s.worktree.as_ref().map(|w| json!({
            "repo": w.repo, "path": w.path, "branch": w.branch, "base": w.base,
            "base_commit": w.base_commit, "missing": w.missing,
            "dirty": w.read.then_some(w.dirty), "ahead": w.read.then_some(w.ahead),
            "behind": w.read.then_some(w.behind),
        })),
    })
}

/// `show` for people: one `key  value` line per field that says something, times as ages,
/// the exit status with the state; `--json` has every raw value.
pub fn session_details(s: &v1::Session) -> String {
    let mut rows: Vec<(&str, String)> = Vec::new();
    let mut state = state_name(s.state).to_string();
    if let Some(code) = s.exit_status {
        state.push_str(&format!(" (exit status {code})"));
    }
    if s.stalled {
        state.push_str(", stalled");
    }
    rows.push(("name", s.name.clone()));
    rows.push((
        "cli",
        if s.cli_version.is_empty() {
            s.cli.clone()
        } else {
            format!("{} {}", s.cli, s.cli_version)
        },
    ));
    rows.push(("state", state));
    if !s.exit_reason.is_empty() {
        rows.push(("exit reason", s.exit_reason.clone()));
    }
    rows.push(("dir", s.dir.clone()));
    if let Some(w) = &s.worktree {
        let mut t = format!("{} from {} (of {})", w.branch, w.base, w.repo);
        if w.missing {
            t.push_str(&format!(
                "; its folder is gone: `git worktree prune` in {} forgets it (the branch {} keeps its commits)",
                w.repo, w.branch
            ));
        } else if w.read {
            t.push_str(&format!(
                "; {} ahead, {} behind, {} uncommitted",
                w.ahead, w.behind, w.dirty
            ));
        }
        rows.push(("worktree", t));
    }
    if !s.conversation_id.is_empty() {
        rows.push(("conversation", s.conversation_id.clone()));
    }
    if !s.args.is_empty() {
        rows.push(("args", s.args.join(" ")));
    }
    if s.created_at_ms > 0 {
        rows.push(("created", format!("{} ago", ago(s.created_at_ms))));
    }
    if s.last_activity_ms > 0 {
        rows.push(("last activity", format!("{} ago", ago(s.last_activity_ms))));
    }
    if let Some(p) = &s.prompt {
        if !p.context.trim().is_empty() {
            // One line per line of the dialog, aligned under the first.
            rows.push((
                "context",
                p.context
                    .trim()
                    .lines()
                    .collect::<Vec<_>>()
                    .join("\n                "),
            ));
        }
        let mut line = format!("{}: {}", p.kind_name(), p.text);
        if !p.options.is_empty() {
            line.push_str(&format!(" [{}]", p.options.join(" / ")));
        }
        rows.push(("waiting on", line));
    }
    if s.queued_inputs > 0 {
        rows.push(("queued", format!("{} message(s)", s.queued_inputs)));
    }
    if !s.error.is_empty() {
        rows.push(("last error", s.error.clone()));
    }
    if !s.owner.is_empty() {
        rows.push(("owner", s.owner.clone()));
    }
    if !s.shared_with.is_empty() {
        rows.push(("shared with", s.shared_with.join(", ")));
    }
    if s.delegate {
        rows.push(("delegates", "on errors listed in [delegation] on".into()));
    }
    if !s.delegated_from.is_empty() {
        rows.push(("delegated from", s.delegated_from.join(" → ")));
    }
    if !s.delegated_to.is_empty() {
        rows.push(("delegated to", s.delegated_to.clone()));
    }
    if s.unmanaged {
        // No pane of clibot's: it reports through the global hooks only.
        rows.push((
            "unmanaged",
            format!(
                "pid {}, reports through the global hooks; answer its prompts, or adopt/resume it to drive it",
                s.pid
            ),
        ));
    } else {
        let mut tmux = format!("{} ({})", s.tmux_session, s.tmux_session_id);
        if s.pid > 0 {
            tmux.push_str(&format!(", pid {}", s.pid));
        }
        if s.adopted {
            tmux.push_str(", adopted");
        }
        if !s.server.is_empty() {
            tmux.push_str(&format!(", where it runs on the server at {}", s.server));
        }
        rows.push(("tmux", tmux));
    }
    if !s.attach_command.is_empty() {
        rows.push(("attach", s.attach_command.join(" ")));
    }
    rows.push(("id", s.id.clone()));
    rows.iter().map(|(k, v)| format!("{k:<15} {v}\n")).collect()
}

pub fn rules_json(r: &v1::ListRulesResponse) -> Value {
    json!({
        "rules": r.rules.iter().map(|x| json!({
            "index": x.index, "cli": x.cli, "session": x.session, "kind": x.kind,
            "subject": x.subject, "command": x.command, "action": x.action, "fired": x.fired,
        })).collect::<Vec<_>>(),
        "guard": r.guard,
        "decider": { "command": r.decider, "timeout_ms": r.decider_timeout_ms,
                     "answered": r.decider_answered, "asked": r.decider_asked },
        "delegation": { "on": r.delegation_on, "to": r.delegation_to,
                        "max_attempts": r.delegation_max_attempts,
                        "default": r.delegation_default,
                        "chains": r.delegation_chains.iter().map(|c| json!({
                            "kind": c.kind, "to": c.to, "max_attempts": c.max_attempts,
                        })).collect::<Vec<_>>() },
    })
}

pub fn session_table(sessions: &[v1::Session]) -> String {
    let rows: Vec<[String; 6]> = sessions
        .iter()
        .map(|s| {
            let mut state = state_name(s.state).to_string();
            let hibernated = s.state == v1::SessionState::Hibernated as i32;
            // A hibernated CLI was stopped by clibot: its status says nothing.
            if let Some(code) = s.exit_status.filter(|_| !hibernated) {
                state = format!("{state}({code})");
            }
            if !s.exit_reason.is_empty()
                && (hibernated || s.state == v1::SessionState::Exited as i32)
            {
                state = format!("{state}: {}", s.exit_reason);
            }
            [
                s.name.clone(),
                s.cli.clone(),
                state,
                ago(s.created_at_ms),
                ago(s.last_activity_ms),
                s.dir.clone(),
            ]
        })
        .collect();
    let header = ["NAME", "CLI", "STATE", "AGE", "ACTIVE", "DIR"].map(String::from);
    let mut widths = header.clone().map(|h| h.len());
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let on = crate::colour::enabled();
    let mut out = String::new();
    for (i, r) in std::iter::once(&header).chain(&rows).enumerate() {
        let line: Vec<String> = r
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(col, (c, w))| {
                let cell = format!("{c:<w$}");
                // Padded first, then coloured: escapes take no room on screen.
                if col == 2 && i > 0 {
                    crate::colour::paint(&cell, state_tone(c), on)
                } else {
                    cell
                }
            })
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// The colour a state is shown in.
fn state_tone(state: &str) -> crate::colour::Tone {
    use crate::colour::Tone;
    match state.split(['(', ':']).next().unwrap_or(state) {
        "idle" => Tone::Good,
        "working" | "starting" => Tone::Busy,
        "waiting" => Tone::Attention,
        "error" => Tone::Bad,
        _ => Tone::Quiet,
    }
}

/// The event's type and its fields.
fn kind_fields(k: &Kind) -> (&'static str, Value) {
    match k {
        Kind::DaemonStarted(d) => (
            "daemon_started",
            json!({"pid": d.pid, "version": d.version, "readopted": d.readopted}),
        ),
        Kind::Spawned(s) => (
            "spawned",
            json!({"cli": s.cli, "dir": s.dir, "args": s.args, "cli_version": s.cli_version}),
        ),
        Kind::Adopted(a) => (
            "adopted",
            json!({"cli": a.cli, "tmux_session": a.tmux_session}),
        ),
        Kind::Released(_) => ("released", json!({})),
        Kind::InputSent(i) => (
            "input_sent",
            json!({"text": i.text, "submitted": i.submitted, "blob_id": i.blob_id, "full_bytes": i.full_bytes}),
        ),
        Kind::KeysSent(k) => ("keys_sent", json!({"keys": k.keys})),
        Kind::StateChanged(s) => (
            "state_changed",
            json!({"from": state_name(s.from), "to": state_name(s.to), "reason": s.reason}),
        ),
        Kind::Exited(e) => (
            "exited",
            json!({"status": e.status, "reason": e.reason, "output": e.output}),
        ),
        Kind::Stopped(s) => ("stopped", json!({"forced": s.forced})),
        Kind::Error(e) => ("error", json!({"message": e.message, "kind": e.kind})),
        Kind::TurnCompleted(t) => (
            "turn_completed",
            json!({"text": t.text, "source": t.source().name(), "blob_id": t.blob_id, "full_bytes": t.full_bytes}),
        ),
        Kind::Waiting(w) => (
            "waiting",
            w.prompt.as_ref().map(prompt_json).unwrap_or(json!({})),
        ),
        Kind::PromptResolved(r) => (
            "prompt_resolved",
            json!({"prompt_id": r.prompt_id, "by": r.by, "answer": r.answer, "actor": r.actor, "note": r.note}),
        ),
        Kind::InputQueued(q) => (
            "input_queued",
            json!({"text": q.text, "position": q.position}),
        ),
        Kind::Stalled(s) => (
            "stalled",
            json!({"silent_ms": s.silent_ms, "working_ms": s.working_ms, "screen": s.screen}),
        ),
        Kind::ChatSuspended(c) => (
            "chat_suspended",
            json!({"platform": c.platform, "chat": c.chat, "reason": c.reason}),
        ),
        Kind::EventsDropped(d) => (
            "events_dropped",
            json!({"first_seq": d.first_seq, "last_seq": d.last_seq}),
        ),
        Kind::Notice(n) => ("notice", json!({"text": n.text, "kind": n.kind})),
        Kind::TurnCancelled(c) => ("turn_cancelled", json!({"by": c.by, "how": c.how})),
        Kind::Hibernated(h) => (
            "hibernated",
            json!({"reason": h.reason, "resumes": h.resumes}),
        ),
        Kind::Woken(w) => ("woken", json!({"resumed": w.resumed})),
        Kind::FileSent(f) => (
            "file_sent",
            json!({"name": f.name, "path": f.path, "bytes": f.bytes}),
        ),
        Kind::Paired(p) => (
            "paired",
            json!({"platform": p.platform, "user": p.user, "chat": p.chat}),
        ),
        Kind::JobStarted(j) => (
            "job_started",
            json!({"job": j.job, "run": j.run, "trigger": j.trigger().name(), "prompt": j.prompt}),
        ),
        Kind::JobFinished(j) => (
            "job_finished",
            json!({"job": j.job, "run": j.run, "outcome": j.outcome().name(), "detail": j.detail,
                   "quiet": j.quiet, "paused": j.paused}),
        ),
        Kind::JobSkipped(j) => ("job_skipped", json!({"job": j.job, "reason": j.reason})),
        Kind::GoalRound(g) => (
            "goal_round",
            json!({"until": g.until, "round": g.round, "exit_code": g.exit_code, "output": g.output}),
        ),
        Kind::GoalEnded(g) => (
            "goal_ended",
            json!({"until": g.until, "reason": g.reason().name(), "rounds": g.rounds, "detail": g.detail}),
        ),
        Kind::TurnUsage(u) => (
            "turn_usage",
            json!({"turn_seq": u.turn_seq, "input": u.input, "output": u.output,
                   "cache_read": u.cache_read, "cache_write": u.cache_write, "model": u.model,
                   "calls": u.calls, "usd": u.priced.then_some(u.usd),
                   "windows": u.windows.iter().map(|w| json!({"name": w.name,
                       "used_percent": w.used_percent, "resets_at_ms": w.resets_at_ms}))
                       .collect::<Vec<_>>()}),
        ),
        Kind::JobMissed(j) => (
            "job_missed",
            json!({"job": j.job, "due_ms": j.due_ms, "count": j.count, "ran": j.ran}),
        ),
        Kind::PromptReminded(r) => (
            "prompt_reminded",
            json!({"prompt": r.prompt.as_ref().map(prompt_json), "count": r.count, "age_ms": r.age_ms}),
        ),
        Kind::PromptEscalated(r) => (
            "prompt_escalated",
            json!({"prompt": r.prompt.as_ref().map(prompt_json), "age_ms": r.age_ms}),
        ),
        Kind::PromptTimedOut(t) => (
            "prompt_timed_out",
            json!({"prompt_id": t.prompt_id, "action": t.action, "age_ms": t.age_ms, "detail": t.detail}),
        ),
        Kind::Delegated(d) => (
            "delegated",
            json!({"to_session": d.to_session, "to_cli": d.to_cli, "reason": d.reason,
                   "detail": d.detail, "attempt": d.attempt, "skipped": d.skipped}),
        ),
    }
}

pub fn event_json(e: &v1::Event) -> Value {
    let (ty, fields) = e
        .kind
        .as_ref()
        .map(kind_fields)
        .unwrap_or(("unknown", json!({})));
    let mut v = json!({"seq": e.seq, "time_ms": e.time_ms, "session": e.session, "type": ty});
    if let (Some(obj), Value::Object(f)) = (v.as_object_mut(), fields) {
        obj.extend(f);
    }
    v
}

/// `3h 12m`, `12m`, `40s`.
pub fn human(d: std::time::Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        _ => format!("{}h {}m", s / 3600, (s % 3600) / 60),
    }
}

/// A prompt shown again because nobody answered it: which, and how long it waited.
fn nudged(p: Option<&v1::Prompt>, age_ms: u64) -> String {
    let waited = human(std::time::Duration::from_millis(age_ms));
    match p {
        Some(p) => format!("{:?} (id {}) waited {waited}", p.text, p.id),
        None => format!("waited {waited}"),
    }
}

pub fn event_line(e: &v1::Event) -> String {
    let (ty, fields) = e
        .kind
        .as_ref()
        .map(kind_fields)
        .unwrap_or(("unknown", json!({})));
    let detail = match (&e.kind, fields) {
        (Some(Kind::InputSent(i)), _) => {
            let mut t: String = i.text.chars().take(60).collect();
            if t.len() < i.text.len() {
                t.push('…');
            }
            format!("{t:?}{}", if i.submitted { " ⏎" } else { "" })
        }
        (Some(Kind::TurnCompleted(t)), _) => format!("{:?}", t.text),
        (Some(Kind::Waiting(w)), _) => match &w.prompt {
            Some(p) => {
                let opts = p
                    .options
                    .iter()
                    .enumerate()
                    .map(|(i, o)| format!("{}. {o}", i + 1))
                    .collect::<Vec<_>>()
                    .join(" / ");
                let subject = if p.subject.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", p.subject)
                };
                // The dialog's context on the same line, in front of its question.
                let context = if p.context.trim().is_empty() {
                    String::new()
                } else {
                    let flat = p.context.split_whitespace().collect::<Vec<_>>().join(" ");
                    format!("({flat}) ")
                };
                format!(
                    "{} {context}{}{subject} — {opts} (id {})",
                    p.kind_name(),
                    p.text,
                    p.id
                )
            }
            None => String::new(),
        },
        (Some(Kind::PromptReminded(r)), _) => nudged(r.prompt.as_ref(), r.age_ms),
        (Some(Kind::PromptEscalated(r)), _) => nudged(r.prompt.as_ref(), r.age_ms),
        (Some(Kind::StateChanged(s)), _) => {
            format!(
                "{} → {}{}",
                state_name(s.from),
                state_name(s.to),
                if s.reason.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", s.reason)
                }
            )
        }
        (_, Value::Object(m)) => m
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    };
    let session = if e.session.is_empty() {
        "-"
    } else {
        &e.session
    };
    format!(
        "{:>6}  {}  {:<16} {:<14} {}",
        e.seq,
        clock(e.time_ms),
        session,
        ty,
        detail
    )
    .trim_end()
    .to_string()
}

/// UTC wall-clock time of day.
fn clock(ms: i64) -> String {
    let s = (ms / 1000).rem_euclid(86400);
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

#[cfg(test)]
mod details_tests {
    use super::*;

    #[test]
    fn show_says_ages_and_statuses_not_raw_values() {
        let s = v1::Session {
            name: "api".into(),
            cli: "shell".into(),
            state: v1::SessionState::Exited as i32,
            exit_status: Some(3),
            created_at_ms: now_ms() - 120_000,
            last_activity_ms: now_ms() - 5_000,
            tmux_session: "api".into(),
            tmux_session_id: "$3".into(),
            ..Default::default()
        };
        let text = session_details(&s);
        assert!(text.contains("exited (exit status 3)"), "{text}");
        assert!(text.contains("created         2m ago"), "{text}");
        assert!(!text.contains("null") && !text.contains("_ms"), "{text}");
        assert!(!text.contains("owner"), "empty fields are left out: {text}");
    }

    #[test]
    fn a_prompt_is_shown_with_its_context() {
        let prompt = v1::Prompt {
            id: "p1".into(),
            kind: v1::PromptKind::Continue.into(),
            text: "Enter to proceed".into(),
            options: vec!["proceed".into()],
            context: "Confirmation Required\nThis will modify 3 files".into(),
            ..Default::default()
        };
        let s = v1::Session {
            name: "api".into(),
            state: v1::SessionState::Waiting as i32,
            prompt: Some(prompt.clone()),
            ..Default::default()
        };
        let text = session_details(&s);
        assert!(
            text.contains(
                "context         Confirmation Required\n                This will modify 3 files\nwaiting on      continue: Enter to proceed [proceed]"
            ),
            "{text}"
        );
        let ev = v1::Event {
            seq: 1,
            session: "api".into(),
            kind: Some(Kind::Waiting(v1::Waiting {
                prompt: Some(prompt.clone()),
            })),
            ..Default::default()
        };
        let line = event_line(&ev);
        assert!(
            line.contains("continue (Confirmation Required This will modify 3 files) Enter to proceed — 1. proceed"),
            "{line}"
        );
        assert_eq!(prompt_json(&prompt)["context"], prompt.context);
    }
}
