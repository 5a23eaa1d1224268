//! Boards (`!!board`): one pinned message per chat, edited in place as things change — a line
//! per session the chat's board owner may use: its state and for how long, what waits for an
//! answer and since when, today's tokens, its worktree, its next scheduled run — with buttons
//! **Pending**, **Screen**, **Jobs**, **Usage**.
//!
//! The daemon keeps which message is each chat's board, so a restarted gateway edits the same
//! message. The keeper follows the daemon's event stream (push, not poll): an event marks the
//! boards stale, and they are drawn again at most every [`EDIT_EVERY`], so a burst of fifty
//! events costs one edit; a message is edited only when its text changed. Ages are in whole
//! minutes, so a quiet board is edited at most once a minute. Edits are best effort and run
//! apart from the chat's replies: a board never holds a reply up.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use clibot_proto::v1;
use tokio_stream::StreamExt;

use crate::platforms::Platform;

/// The pseudo prompt id of a board's buttons.
pub const BOARD_CARD: &str = "b.";
/// The board's buttons, in order.
pub const BUTTONS: [&str; 4] = ["Pending", "Screen", "Jobs", "Usage"];
/// Boards are drawn again at most this often.
pub const EDIT_EVERY: Duration = Duration::from_secs(3);
/// And at least this often while nothing happens (ages move on).
const QUIET_REDRAW: Duration = Duration::from_secs(60);

/// `board.user` (`PLATFORM:USER`) as the request metadata of a call made on their behalf in
/// `chat`, so that the daemon shows only what they may see.
fn as_user<T>(platform: &str, user: &str, chat: &str, body: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(body);
    let user = user
        .strip_prefix(platform)
        .and_then(|u| u.strip_prefix(':'))
        .unwrap_or(user);
    let md = r.metadata_mut();
    for (k, v) in [
        ("clibot-platform", platform),
        ("clibot-user", user),
        ("clibot-chat", chat),
    ] {
        if let Ok(v) = v.parse() {
            md.insert(k, v);
        }
    }
    r
}

/// A session's state in words.
pub fn state_word(s: i32) -> &'static str {
    match v1::SessionState::try_from(s) {
        Ok(v1::SessionState::Starting) => "starting",
        Ok(v1::SessionState::Idle) => "idle",
        Ok(v1::SessionState::Working) => "working",
        Ok(v1::SessionState::Waiting) => "waiting for you",
        Ok(v1::SessionState::Exited) => "exited",
        Ok(v1::SessionState::Error) => "error",
        Ok(v1::SessionState::Declared) => "declared (not started)",
        Ok(v1::SessionState::Hibernated) => "hibernated (a message wakes it)",
        _ => "unknown",
    }
}

/// "5m", "3h", "2d".
fn age(ms: i64) -> String {
    let m = (ms / 60_000).max(0);
    match m {
        0 => "<1m".into(),
        m if m < 60 => format!("{m}m"),
        m if m < 48 * 60 => format!("{}h", m / 60),
        m => format!("{}d", m / (24 * 60)),
    }
}

fn tokens(n: u64) -> String {
    match n {
        n if n >= 1_000_000 => format!("{:.1}M", n as f64 / 1e6),
        n if n >= 1_000 => format!("{:.1}k", n as f64 / 1e3),
        n => n.to_string(),
    }
}

/// The board's text for what the daemon says now.
pub fn text(
    sessions: &[v1::Session],
    jobs: &[v1::Job],
    usage: &HashMap<String, u64>,
    now_ms: i64,
) -> String {
    if sessions.is_empty() {
        return "📋 no session yet: !!new NAME CLI [DIR] starts one".into();
    }
    let waiting = sessions.iter().filter(|s| s.prompt.is_some()).count();
    let mut lines = vec![match waiting {
        0 => format!("📋 {} session(s), none waiting for you", sessions.len()),
        n => format!("📋 {} session(s), {n} waiting for you", sessions.len()),
    }];
    for s in sessions {
        let state = state_word(s.state);
        let mut line = format!(
            "• {} ({}) {state} {}",
            s.name,
            s.cli,
            age(now_ms - s.last_activity_ms)
        );
        if let Some(p) = &s.prompt {
            line.push_str(&format!(
                " · ⏳ asks since {}",
                age(now_ms - p.waiting_since_ms)
            ));
        }
        if let Some(t) = usage.get(&s.name).filter(|t| **t > 0) {
            line.push_str(&format!(" · {} tok today", tokens(*t)));
        }
        if let Some(w) = &s.worktree {
            let dirty = if w.dirty > 0 { "*" } else { "" };
            line.push_str(&format!(" · 🌿 {}{dirty}", w.branch));
        }
        let next = jobs
            .iter()
            .filter(|j| j.spec.as_ref().is_some_and(|sp| sp.session == s.name))
            .filter(|j| j.next_due_ms > now_ms && j.paused_why.is_empty())
            .map(|j| j.next_due_ms)
            .min();
        if let Some(due) = next {
            line.push_str(&format!(" · ⏰ in {}", age(due - now_ms)));
        }
        lines.push(line);
    }
    lines.join("\n")
}

/// Draws `board` as its owner sees it now.
pub async fn draw(
    c: &mut clibot_proto::Client,
    platform: &str,
    board: &v1::Board,
) -> Result<String, tonic::Status> {
    let req = |body| as_user(platform, &board.user, &board.chat, body);
    let sessions = c
        .list_sessions(req(v1::ListSessionsRequest::default()))
        .await?
        .into_inner()
        .sessions;
    let jobs = c
        .list_jobs(as_user(
            platform,
            &board.user,
            &board.chat,
            v1::ListJobsRequest {},
        ))
        .await
        .map(|r| r.into_inner().jobs)
        .unwrap_or_default();
    let now = crate::ops::health::now_ms();
    let today = now - now.rem_euclid(86_400_000);
    let usage = c
        .get_usage(as_user(
            platform,
            &board.user,
            &board.chat,
            v1::GetUsageRequest {
                by: "session".into(),
                since_ms: today,
                session: String::new(),
            },
        ))
        .await
        .map(|r| {
            r.into_inner()
                .rows
                .into_iter()
                .map(|u| (u.key, u.input + u.output))
                .collect()
        })
        .unwrap_or_default();
    Ok(text(&sessions, &jobs, &usage, now))
}

/// The buttons, as options.
pub fn buttons() -> Vec<String> {
    BUTTONS.iter().map(|b| b.to_string()).collect()
}

/// Keeps this platform's boards up to date, reconnecting to the daemon when it goes away.
pub async fn keep(platform: Arc<dyn Platform>, socket: clibot_proto::Target) {
    let name = platform.name().to_string();
    // What each board shows now (by chat): edited only when the text changes.
    let mut shown: HashMap<String, String> = HashMap::new();
    loop {
        if let Err(e) = keep_connected(&platform, &socket, &name, &mut shown).await {
            log_failure(&name, &e);
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

fn log_failure(name: &str, e: &tonic::Status) {
    if e.code() != tonic::Code::Unavailable {
        eprintln!("clibot-gateway: {name}: boards: {}", e.message());
    }
}

async fn keep_connected(
    platform: &Arc<dyn Platform>,
    socket: &clibot_proto::Target,
    name: &str,
    shown: &mut HashMap<String, String>,
) -> Result<(), tonic::Status> {
    let mut c = clibot_proto::connect_to(socket)
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    // Only what happens from now on: the first pass draws every board anyway.
    let mut events = c
        .watch_events(v1::WatchEventsRequest {
            since: None,
            sessions: Vec::new(),
            follow: true,
        })
        .await?
        .into_inner();
    let mut stale = true;
    let mut next_draw = tokio::time::Instant::now();
    loop {
        let quiet = tokio::time::sleep(QUIET_REDRAW);
        tokio::select! {
            ev = events.next() => match ev {
                Some(Ok(_)) => stale = true,
                Some(Err(e)) => return Err(e),
                None => return Err(tonic::Status::unavailable("the daemon ended the event stream")),
            },
            () = tokio::time::sleep_until(next_draw), if stale => {
                redraw(&mut c, platform, name, shown).await?;
                stale = false;
                next_draw = tokio::time::Instant::now() + EDIT_EVERY;
            }
            () = quiet => stale = true,
        }
    }
}

/// Draws every board of the platform again, editing those whose text changed.
async fn redraw(
    c: &mut clibot_proto::Client,
    platform: &Arc<dyn Platform>,
    name: &str,
    shown: &mut HashMap<String, String>,
) -> Result<(), tonic::Status> {
    let boards = c
        .board(v1::BoardRequest {
            action: v1::BoardAction::List as i32,
            platform: name.to_string(),
            ..Default::default()
        })
        .await?
        .into_inner()
        .boards;
    shown.retain(|chat, _| boards.iter().any(|b| &b.chat == chat));
    for b in &boards {
        let text = match draw(c, name, b).await {
            Ok(t) => t,
            Err(e) if e.code() == tonic::Code::Unavailable => return Err(e),
            Err(e) => format!("📋 {}", e.message()),
        };
        let key = format!("{}\0{}", b.chat, b.message_id);
        if shown
            .get(&b.chat)
            .is_some_and(|t| *t == format!("{key}\0{text}"))
        {
            continue;
        }
        let text = platform.redact(&text).into_owned();
        match platform
            .edit_prompt(&b.chat, &b.message_id, BOARD_CARD, &text, &buttons())
            .await
        {
            Ok(()) => {
                shown.insert(b.chat.clone(), format!("{key}\0{text}"));
            }
            Err(e) => eprintln!(
                "clibot-gateway: {name}: the board in {} was not edited: {e:#}",
                b.chat
            ),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(name: &str, activity: i64) -> v1::Session {
        v1::Session {
            name: name.into(),
            cli: "bash".into(),
            state: v1::SessionState::Idle as i32,
            last_activity_ms: activity,
            ..Default::default()
        }
    }

    #[test]
    fn a_line_per_session_with_what_waits_usage_worktree_and_the_next_run() {
        let now = 10 * 3_600_000;
        let mut a = session("api", now - 5 * 60_000);
        a.prompt = Some(v1::Prompt {
            waiting_since_ms: now - 2 * 60_000,
            ..Default::default()
        });
        a.worktree = Some(v1::Worktree {
            branch: "feat".into(),
            dirty: 2,
            ..Default::default()
        });
        let b = session("web", now - 3 * 3_600_000);
        let job = v1::Job {
            spec: Some(v1::JobSpec {
                session: "api".into(),
                ..Default::default()
            }),
            next_due_ms: now + 90 * 60_000,
            ..Default::default()
        };
        let usage = HashMap::from([("api".to_string(), 12_345u64)]);
        let t = text(&[a, b], &[job], &usage, now);
        assert!(t.starts_with("📋 2 session(s), 1 waiting for you"), "{t}");
        assert!(
            t.contains(
                "• api (bash) idle 5m · ⏳ asks since 2m · 12.3k tok today · 🌿 feat* · ⏰ in 1h"
            ),
            "{t}"
        );
        assert!(t.contains("• web (bash) idle 3h"), "{t}");
        assert!(text(&[], &[], &HashMap::new(), now).contains("!!new"));
    }

    #[test]
    fn the_same_state_draws_the_same_text_within_a_minute() {
        let s = [session("api", 0)];
        let t1 = text(&s, &[], &HashMap::new(), 61_000);
        let t2 = text(&s, &[], &HashMap::new(), 119_000);
        assert_eq!(t1, t2, "ages move in whole minutes");
        assert_ne!(t1, text(&s, &[], &HashMap::new(), 121_000));
    }
}
