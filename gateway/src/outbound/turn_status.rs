//! A running turn's feedback in one chat: a typing indicator renewed before it fades, and one
//! status message edited in place with how long the turn has worked and — with
//! `[gateway] stream` (on by default) — the newest lines it has printed so far, so that a phone
//! sees the reply grow instead of "working… 40s". When the turn ends the message says so
//! ("✓ done in 12s") and the reply comes as a message of its own (an edit notifies nobody).
//!
//! Edits go at most every 1.5 s per chat, and only when the output changed (the time alone is
//! refreshed every 16 s): within Telegram's limit of about one edit a second per chat, Discord's
//! five per five seconds per channel and Feishu's five a second. Best effort throughout: a
//! failure costs only the status.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clibot_proto::v1;

use crate::platforms::Platform;

/// Whether status messages show the turn's output (`[gateway] stream`); set once at start.
static STREAM: AtomicBool = AtomicBool::new(true);

/// Sets `[gateway] stream` for every chat of this gateway.
pub fn set_streaming(on: bool) {
    STREAM.store(on, Ordering::Relaxed);
}

/// How often the status may be edited.
const EDIT_EVERY: Duration = Duration::from_millis(1500);
/// Typing indicators fade after about 5 s.
const TYPING_EVERY: Duration = Duration::from_secs(4);
/// With no new output, how often the time is refreshed.
const TIME_EVERY: Duration = Duration::from_secs(16);
/// Lines of the turn's output shown.
const LINES: u32 = 12;
/// A line longer than this is cut.
const LINE_CHARS: usize = 200;

/// The feedback task of one running turn; ended when dropped.
pub(crate) struct Progress {
    pub(crate) session: String,
    task: tokio::task::JoinHandle<()>,
    /// The status message's id, where the platform can edit it.
    pub(crate) status: Option<String>,
    /// When the turn began, by the daemon's clock (its event's time).
    pub(crate) started_ms: i64,
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Progress {
    /// Posts the status message for `session`'s new turn and starts keeping it current.
    pub(crate) async fn start(
        platform: Arc<dyn Platform>,
        socket: clibot_proto::Target,
        chat: String,
        session: String,
        started_ms: i64,
    ) -> Progress {
        let status = platform
            .status(&chat, None, &format!("⏳ [{session}] working…"))
            .await;
        Progress::keeping(
            platform,
            socket,
            chat,
            session,
            status,
            Instant::now(),
            started_ms,
        )
    }

    /// Takes up the status message a previous gateway posted for a turn that may still run:
    /// it is edited on, and closed when the turn's end is delivered.
    pub(crate) fn resume(
        platform: Arc<dyn Platform>,
        socket: clibot_proto::Target,
        chat: String,
        session: String,
        message: String,
        started_ms: i64,
    ) -> Progress {
        let ran = crate::ops::health::now_ms()
            .saturating_sub(started_ms)
            .max(0) as u64;
        let started = Instant::now()
            .checked_sub(Duration::from_millis(ran))
            .unwrap_or_else(Instant::now);
        Progress::keeping(
            platform,
            socket,
            chat,
            session,
            Some(message),
            started,
            started_ms,
        )
    }

    /// Keeps status message `status` (and the typing indicator) current from now on.
    fn keeping(
        platform: Arc<dyn Platform>,
        socket: clibot_proto::Target,
        chat: String,
        session: String,
        status: Option<String>,
        started: Instant,
        started_ms: i64,
    ) -> Progress {
        let task = tokio::spawn(keep(
            platform,
            socket,
            chat,
            session.clone(),
            status.clone(),
            started,
        ));
        Progress {
            session,
            task,
            status,
            started_ms,
        }
    }
}

async fn keep(
    p: Arc<dyn Platform>,
    socket: clibot_proto::Target,
    chat: String,
    session: String,
    id: Option<String>,
    started: Instant,
) {
    let mut client: Option<clibot_proto::Client> = None;
    let mut shown_tail = String::new();
    let mut last_edit = Instant::now();
    let mut last_typing: Option<Instant> = None;
    loop {
        if last_typing.is_none_or(|t| t.elapsed() >= TYPING_EVERY) {
            p.typing(&chat).await;
            last_typing = Some(Instant::now());
        }
        tokio::time::sleep(EDIT_EVERY).await;
        let Some(id) = &id else { continue };
        let tail = if STREAM.load(Ordering::Relaxed) {
            let raw = turn_output(&mut client, &socket, &session).await;
            p.redact(&raw).into_owned()
        } else {
            String::new()
        };
        if tail == shown_tail && last_edit.elapsed() < TIME_EVERY {
            continue;
        }
        let head = format!("⏳ [{session}] working… {}s", started.elapsed().as_secs());
        let text = status_text(&head, &tail, p.max_message());
        p.status(&chat, Some(id), &text).await;
        shown_tail = tail;
        last_edit = Instant::now();
    }
}

/// The newest lines the running turn printed; empty when they cannot be read.
async fn turn_output(
    client: &mut Option<clibot_proto::Client>,
    socket: &clibot_proto::Target,
    session: &str,
) -> String {
    if client.is_none() {
        *client = clibot_proto::connect_to(socket).await.ok();
    }
    let Some(c) = client.as_mut() else {
        return String::new();
    };
    let req = v1::CaptureRequest {
        session: session.to_string(),
        lines: LINES,
        escapes: false,
        turn: true,
    };
    match c.capture(req).await {
        Ok(r) => r.into_inner().text,
        Err(_) => {
            *client = None;
            String::new()
        }
    }
}

/// `head`, then the output's non-blank lines (each cut to [`LINE_CHARS`]), as many of the
/// newest as fit in `max` characters.
pub(crate) fn status_text(head: &str, output: &str, max: usize) -> String {
    let lines: Vec<String> = output
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            if l.chars().count() > LINE_CHARS {
                format!("{}…", l.chars().take(LINE_CHARS).collect::<String>())
            } else {
                l.to_string()
            }
        })
        .collect();
    let budget = max.saturating_sub(head.chars().count() + 8);
    let mut used = 0;
    let mut keep = Vec::new();
    for l in lines.iter().rev() {
        let n = l.chars().count() + 1;
        if used + n > budget {
            break;
        }
        used += n;
        keep.push(l.as_str());
    }
    keep.reverse();
    if keep.is_empty() {
        head.to_string()
    } else {
        format!("{head}\n{}", keep.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_lines_that_fit_follow_the_head() {
        let out = "first\n\n  second  \nthird\n";
        assert_eq!(
            status_text("⏳ [a] working… 3s", out, 4096),
            "⏳ [a] working… 3s\nfirst\n  second\nthird"
        );
        // Room for the head and one line: the newest.
        let t = status_text("head", out, 4 + 8 + 6);
        assert_eq!(t, "head\nthird");
        assert_eq!(status_text("head", "", 100), "head");
        let long = "x".repeat(500);
        let t = status_text("head", &long, 4096);
        assert_eq!(t.chars().count(), "head\n".chars().count() + LINE_CHARS + 1);
    }
}
