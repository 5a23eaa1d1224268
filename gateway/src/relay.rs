//! Outgoing: the daemon's event log, rendered for the chats bound to each session.
//!
//! Delivery is per chat. One dispatcher reads the log and hands each event to a worker per chat;
//! each worker sends, retries transient failures with backoff, and acknowledges its own chat's
//! progress in the daemon (per event, and per part of a reply split over several messages). A
//! chat that fails for good (the bot was kicked, the chat is gone) is reported to the daemon,
//! which suspends its binding and tells the session's other chats; it never holds up another
//! chat. A gateway killed at any moment resumes each chat where its delivery stopped.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clibot_gateway::chunk::{
    ChunkOptions, Measure, attachment_name, chunk, file_summary, should_send_as_file,
};
use clibot_proto::v1::{self, event::Kind};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;

use crate::health::{PlatformHealth, now_ms};
use crate::platforms::{Platform, gone};
use crate::router::prompt_text;

/// Output longer than this many messages goes as a file with a short summary.
const MAX_MESSAGES: usize = 3;
/// Longest wait between two attempts at a chat that fails for a passing reason.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

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
        Kind::Error(e) => format!("[{s}] error: {}", e.message),
        Kind::Stalled(st) => format!("[{s}] no output for {} min", st.silent_ms / 60_000),
        // Which chat is not said: it may be another user's private chat, and this one may be
        // a group (`clibotctl chats` on the machine shows it).
        Kind::ChatSuspended(c) => format!(
            "[{s}] stopped delivering to another {} chat of this session: {}. It resumes when someone writes there again (`clibotctl chats` on the machine shows which).",
            c.platform,
            c.reason.replace(c.chat.as_str(), "…").trim_end_matches('.')
        ),
        Kind::EventsDropped(d) => format!(
            "clibot: events {}–{} were removed from the log before this chat got them; some replies may be missing here (`!!last` shows a session's latest reply)",
            d.first_seq, d.last_seq
        ),
        _ => return None,
    })
}

/// Whether a chat does anything with this event (the rest are skipped without a lookup).
fn for_chats(ev: &v1::Event) -> bool {
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
        )
    )
}

/// One event for one chat; `parts` of it were already delivered.
struct Item {
    ev: Arc<v1::Event>,
    parts: u32,
    /// Not an event to show: "everything up to `ev.seq` that was for you is in your queue
    /// before this", so the chat's cursor may move there once the queue is worked off.
    sync: bool,
}

/// How often (in events, or time while events flow) chats that had nothing to deliver have
/// their cursors moved up, so that a quiet chat never lags behind the log's retention.
const SYNC_EVERY_EVENTS: u32 = 200;
const SYNC_EVERY: Duration = Duration::from_secs(10);

/// The worker of one chat.
struct Worker {
    tx: mpsc::UnboundedSender<Item>,
}

/// Delivers events forever, reconnecting to the daemon when it goes away.
pub async fn run(platform: Arc<dyn Platform>, socket: PathBuf, health: PlatformHealth) {
    let consumer = platform.consumer();
    let mut backoff = Duration::from_millis(200);
    // Workers outlive a lost daemon connection: what they hold is delivered once, and what
    // the new stream repeats they skip (each knows how far it got).
    let mut workers: HashMap<String, Worker> = HashMap::new();
    loop {
        let result: anyhow::Result<()> = async {
            let mut c = clibot_proto::connect(&socket).await?;
            let bound = bindings(&mut c, platform.name(), "").await?;
            let own = c
                .get_cursor(v1::GetCursorRequest {
                    consumer: consumer.clone(),
                })
                .await?
                .into_inner()
                .cursor;
            // Resume at the chat that is furthest behind.
            let since = bound
                .iter()
                .filter(|b| !b.broken)
                .map(|b| b.cursor)
                .chain([own])
                .min()
                .unwrap_or(own);
            let mut stream = c
                .watch_events(v1::WatchEventsRequest {
                    since: Some(since),
                    sessions: vec![],
                    follow: true,
                })
                .await?
                .into_inner();
            backoff = Duration::from_millis(200);
            let mut since_sync = 0u32;
            let mut last_sync = std::time::Instant::now();
            while let Some(ev) = stream.next().await {
                let ev = Arc::new(ev?);
                if let Some(Kind::EventsDropped(d)) = &ev.kind {
                    // Every chat that was behind the gap is told; nothing to acknowledge (seq 0).
                    let first = d.first_seq;
                    let all = bindings(&mut c, platform.name(), "").await?;
                    for b in all.into_iter().filter(|b| open_for(b, first)) {
                        worker(&mut workers, &platform, &socket, &health, &b).send(Item {
                            ev: ev.clone(),
                            parts: 0,
                            sync: false,
                        });
                    }
                    continue;
                }
                if !ev.session.is_empty() && for_chats(&ev) {
                    let chats = bindings(&mut c, platform.name(), &ev.session).await?;
                    for b in chats.into_iter().filter(|b| open_for(b, ev.seq)) {
                        let parts = if b.cursor + 1 == ev.seq { b.parts } else { 0 };
                        worker(&mut workers, &platform, &socket, &health, &b).send(Item {
                            ev: ev.clone(),
                            parts,
                            sync: false,
                        });
                    }
                }
                // The platform's own cursor: where a gateway with no bound chat resumes.
                if ev.seq > 0 {
                    c.ack_events(v1::AckEventsRequest {
                        consumer: consumer.clone(),
                        seq: ev.seq,
                        ..Default::default()
                    })
                    .await?;
                    since_sync += 1;
                    if since_sync >= SYNC_EVERY_EVENTS || last_sync.elapsed() >= SYNC_EVERY {
                        sync_all(&mut c, &mut workers, &platform, &socket, &health, ev.seq).await?;
                        since_sync = 0;
                        last_sync = std::time::Instant::now();
                    }
                }
            }
            Ok(())
        }
        .await;
        if let Err(e) = result {
            eprintln!(
                "clibot-gateway: event relay interrupted ({e}); retrying in {:?}",
                backoff
            );
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// Whether event `seq` is still to be delivered to chat `b`: not suspended, not yet
/// delivered, and not past the end the daemon set (its binder lost the session).
fn open_for(b: &v1::Binding, seq: u64) -> bool {
    !b.broken && b.cursor < seq && (b.until_seq == 0 || seq <= b.until_seq)
}

/// The platform's chats bound to `session` (all of them for an empty one).
async fn bindings(
    c: &mut clibot_proto::Client,
    platform: &str,
    session: &str,
) -> Result<Vec<v1::Binding>, tonic::Status> {
    let req = v1::ListBindingsRequest {
        platform: platform.into(),
        chat: String::new(),
        session: session.into(),
    };
    Ok(c.list_bindings(req).await?.into_inner().bindings)
}

/// Moves every chat's cursor up to `seq`, the dispatcher's position: a chat with a worker
/// through its queue (after what it still has to deliver), a chat without one at once (it has
/// nothing pending in this process).
async fn sync_all(
    c: &mut clibot_proto::Client,
    workers: &mut HashMap<String, Worker>,
    platform: &Arc<dyn Platform>,
    socket: &std::path::Path,
    health: &PlatformHealth,
    seq: u64,
) -> Result<(), tonic::Status> {
    let all = bindings(c, platform.name(), "").await?;
    for b in all.into_iter().filter(|b| !b.broken && b.cursor < seq) {
        if workers.get(&b.chat).is_some_and(|w| !w.tx.is_closed()) {
            let ev = Arc::new(v1::Event {
                seq,
                ..Default::default()
            });
            worker(workers, platform, socket, health, &b).send(Item {
                ev,
                parts: 0,
                sync: true,
            });
        } else {
            c.ack_events(v1::AckEventsRequest {
                seq,
                platform: platform.name().into(),
                chat: b.chat.clone(),
                ..Default::default()
            })
            .await?;
        }
    }
    Ok(())
}

impl Worker {
    fn send(&self, item: Item) {
        // A worker that ended (its chat broke) dropped its receiver: the item is not for it.
        let _ = self.tx.send(item);
    }
}

/// The chat's worker, started when there is none (or the last one ended with its chat).
fn worker<'a>(
    workers: &'a mut HashMap<String, Worker>,
    platform: &Arc<dyn Platform>,
    socket: &std::path::Path,
    health: &PlatformHealth,
    b: &v1::Binding,
) -> &'a Worker {
    let alive = workers.get(&b.chat).is_some_and(|w| !w.tx.is_closed());
    if !alive {
        let (tx, rx) = mpsc::unbounded_channel();
        let chat = ChatDelivery {
            platform: platform.clone(),
            socket: socket.to_path_buf(),
            health: health.clone(),
            chat: b.chat.clone(),
            client: None,
            done: b.cursor,
            partial: (b.cursor + 1, b.parts),
            shown: (!b.shown_prompt.is_empty())
                .then(|| (b.shown_prompt.clone(), b.shown_message.clone()))
                .into_iter()
                .collect(),
            progress: None,
        };
        tokio::spawn(chat.run(rx));
        workers.insert(b.chat.clone(), Worker { tx });
    }
    &workers[&b.chat]
}

/// A running turn's feedback in one chat: the task that renews typing and the status message.
struct Progress {
    session: String,
    task: tokio::task::JoinHandle<()>,
    status: Option<String>,
    started: Instant,
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Why a delivery stopped.
enum Stop {
    /// The chat is gone for good: suspend it.
    Gone(String),
    /// Try again later.
    Retry(anyhow::Error),
}

/// One chat's delivery state.
struct ChatDelivery {
    platform: Arc<dyn Platform>,
    socket: PathBuf,
    health: PlatformHealth,
    chat: String,
    client: Option<clibot_proto::Client>,
    /// Every event up to here is delivered.
    done: u64,
    /// (seq, parts) of a partly delivered event.
    partial: (u64, u32),
    /// Prompts shown here and not yet resolved, with the message carrying their buttons
    /// (a newer prompt can be shown before the older one's resolution is logged).
    shown: Vec<(String, String)>,
    progress: Option<Progress>,
}

impl ChatDelivery {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Item>) {
        let mut backoff = Duration::from_secs(1);
        while let Some(item) = rx.recv().await {
            let seq = item.ev.seq;
            if seq != 0 && seq <= self.done {
                continue;
            }
            if item.sync {
                self.ack(seq, 0, "", "").await;
                self.done = seq;
                continue;
            }
            if seq == self.partial.0 {
                self.partial.1 = self.partial.1.max(item.parts);
            } else {
                self.partial = (seq, item.parts);
            }
            loop {
                match self.deliver(&item.ev).await {
                    Ok(()) => {
                        self.health.delivered();
                        backoff = Duration::from_secs(1);
                        break;
                    }
                    Err(Stop::Gone(reason)) => {
                        self.health.failed();
                        eprintln!(
                            "clibot-gateway: {} chat {} cannot be delivered to ({reason}); suspending it",
                            self.platform.name(),
                            self.chat
                        );
                        self.suspend(&reason).await;
                        return;
                    }
                    Err(Stop::Retry(e)) => {
                        self.health.failed();
                        eprintln!(
                            "clibot-gateway: delivery to {} chat {} failed ({e:#}); retrying in {backoff:?}",
                            self.platform.name(),
                            self.chat
                        );
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                    }
                }
            }
            if seq != 0 {
                self.done = seq;
            }
        }
    }

    async fn client(&mut self) -> anyhow::Result<&mut clibot_proto::Client> {
        if self.client.is_none() {
            self.client = Some(clibot_proto::connect(&self.socket).await?);
        }
        self.client
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("no daemon connection"))
    }

    /// Records progress in the daemon; a lost daemon is retried, never skipped (a resend
    /// after a restart would show the chat the same message twice).
    async fn ack(&mut self, seq: u64, parts: u32, prompt: &str, message: &str) {
        if seq == 0 {
            return;
        }
        let req = v1::AckEventsRequest {
            consumer: String::new(),
            seq,
            platform: self.platform.name().into(),
            chat: self.chat.clone(),
            parts,
            message: message.into(),
            prompt: prompt.into(),
        };
        let mut wait = Duration::from_millis(200);
        loop {
            let r = match self.client().await {
                Ok(c) => c
                    .ack_events(req.clone())
                    .await
                    .map(|_| ())
                    .map_err(|s| s.into()),
                Err(e) => Err(e),
            };
            match r {
                Ok(()) => return,
                Err(e) => {
                    if let Some(s) = e.downcast_ref::<tonic::Status>()
                        && matches!(s.code(), tonic::Code::NotFound | tonic::Code::OutOfRange)
                    {
                        // Unbound meanwhile, or the log was reset: nothing to record.
                        return;
                    }
                    self.client = None;
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

    async fn suspend(&mut self, reason: &str) {
        self.progress = None;
        let req = v1::MarkChatBrokenRequest {
            platform: self.platform.name().into(),
            chat: self.chat.clone(),
            reason: reason.into(),
        };
        for _ in 0..10 {
            let r = match self.client().await {
                Ok(c) => c.mark_chat_broken(req.clone()).await.is_ok(),
                Err(_) => false,
            };
            if r {
                return;
            }
            self.client = None;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// A prompt shown here, kept until resolved (the oldest dropped beyond a few: a prompt
    /// that was never resolved must not grow the list forever).
    fn remember(&mut self, prompt: &str, message: &str) {
        if self.shown.len() >= 8 {
            self.shown.remove(0);
        }
        self.shown.push((prompt.to_string(), message.to_string()));
    }

    fn fail(e: anyhow::Error) -> Stop {
        match gone(&e) {
            Some(reason) => Stop::Gone(reason.to_string()),
            None => Stop::Retry(e),
        }
    }

    /// Delivers one event (from the part where it stopped) and records it.
    async fn deliver(&mut self, ev: &v1::Event) -> Result<(), Stop> {
        if let Some(Kind::StateChanged(sc)) = &ev.kind {
            // Not acknowledged on its own (a status is not worth a write): the next message's
            // acknowledgement covers it, and a replayed old one shows nothing.
            self.progress(ev, sc).await;
            return Ok(());
        }
        if let Some(Kind::PromptResolved(r)) = &ev.kind
            && let Some(i) = self.shown.iter().position(|(p, _)| *p == r.prompt_id)
        {
            let message = self.shown[i].1.clone();
            if !message.is_empty()
                && let Err(e) = self.platform.remove_buttons(&self.chat, &message).await
            {
                if gone(&e).is_some() {
                    return Err(Self::fail(e));
                }
                eprintln!(
                    "clibot-gateway: cannot remove the buttons of an answered prompt in {}: {e:#}",
                    self.chat
                );
            }
            self.shown.remove(i);
        }
        let Some(text) = render(ev) else {
            return Ok(());
        };
        let text = self.platform.redact(&text);
        if let Some(Kind::Waiting(w)) = &ev.kind
            && let Some(p) = &w.prompt
            && !p.options.is_empty()
        {
            let options: Vec<String> = p
                .options
                .iter()
                .map(|o| self.platform.redact(o).into_owned())
                .collect();
            let message = self
                .platform
                .send_prompt(&self.chat, &p.id, &text, &options)
                .await
                .map_err(Self::fail)?
                .unwrap_or_default();
            self.remember(&p.id, &message);
            self.ack(ev.seq, 0, &p.id, &message).await;
            return Ok(());
        }
        let opts = ChunkOptions::new(self.platform.max_message(), Measure::Chars);
        if should_send_as_file(&text, &opts, MAX_MESSAGES) {
            let summary = file_summary(&text, 12, &ChunkOptions::new(1024, Measure::Utf16));
            self.platform
                .send_file(&self.chat, attachment_name(&text), &text, &summary)
                .await
                .map_err(Self::fail)?;
        } else {
            let parts = chunk(&text, &opts);
            let n = parts.len() as u32;
            let skip = if self.partial.0 == ev.seq {
                self.partial.1
            } else {
                0
            };
            for (i, part) in parts.iter().enumerate().skip(skip as usize) {
                self.platform
                    .send(&self.chat, part)
                    .await
                    .map_err(Self::fail)?;
                let sent = i as u32 + 1;
                self.partial = (ev.seq, sent);
                if sent < n {
                    self.ack(ev.seq, sent, "", "").await;
                }
            }
        }
        let prompt = match &ev.kind {
            // A question without options (free text): a typed answer is for it.
            Some(Kind::Waiting(w)) => w.prompt.as_ref().map(|p| p.id.clone()).unwrap_or_default(),
            _ => String::new(),
        };
        if !prompt.is_empty() {
            self.remember(&prompt, "");
        }
        self.ack(ev.seq, 0, &prompt, "").await;
        Ok(())
    }

    /// While a turn runs: a status message (edited in place, at most every 16 s) and a typing
    /// indicator renewed before it fades. Best effort: a failure costs only the status.
    async fn progress(&mut self, ev: &v1::Event, sc: &v1::StateChanged) {
        if let Some(done) = self.progress.take_if(|p| p.session == ev.session) {
            let secs = done.started.elapsed().as_secs();
            let text = match v1::SessionState::try_from(sc.to) {
                Ok(v1::SessionState::Waiting) => {
                    format!("⏸ [{}] waiting for you ({secs}s)", ev.session)
                }
                Ok(v1::SessionState::Idle) => format!("✓ [{}] done in {secs}s", ev.session),
                Ok(v1::SessionState::Working) => {
                    // Still the same turn.
                    self.progress = Some(done);
                    return;
                }
                _ => format!("■ [{}] ended after {secs}s", ev.session),
            };
            if let Some(id) = &done.status {
                self.platform.status(&self.chat, Some(id), &text).await;
            }
        }
        if sc.to != v1::SessionState::Working as i32 {
            return;
        }
        // An event replayed long after it happened (a gateway that was down) shows no status.
        let age_ms = now_ms().saturating_sub(ev.time_ms);
        if age_ms > 60_000 {
            return;
        }
        let status = self
            .platform
            .status(&self.chat, None, &format!("⏳ [{}] working…", ev.session))
            .await;
        let (p, chat, session, id) = (
            self.platform.clone(),
            self.chat.clone(),
            ev.session.clone(),
            status.clone(),
        );
        let started = Instant::now();
        let task = tokio::spawn(async move {
            let mut tick = 0u64;
            loop {
                p.typing(&chat).await;
                tokio::time::sleep(Duration::from_secs(4)).await;
                tick += 1;
                if tick.is_multiple_of(4)
                    && let Some(id) = &id
                {
                    let text = format!("⏳ [{session}] working… {}s", started.elapsed().as_secs());
                    p.status(&chat, Some(id), &text).await;
                }
            }
        });
        self.progress = Some(Progress {
            session: ev.session.clone(),
            task,
            status,
            started,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
