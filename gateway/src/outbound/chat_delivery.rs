//! One chat's delivery: the events for it, in order, each sent and then acknowledged in the
//! daemon (per part of a reply split over several messages), so that a gateway killed at any
//! moment resumes where this chat stopped.
//!
//! A platform cannot be asked whether a message went out, so a kill between a send and its
//! acknowledgement would repeat that message silently. Before each message the daemon is told
//! which one is about to go (in memory there, no write); the next gateway finds it in the
//! binding and, sending that message again, first says it may be a repeat. Nothing is lost and
//! a repeat is never silent. The status message of a running turn is recorded the same way, so
//! the next gateway edits it to its end instead of leaving it at "working…" beside a new one.

use std::sync::Arc;
use std::time::Duration;

use clibot_gateway::chunk::{
    ChunkOptions, Measure, attachment_name, chunk, file_summary, should_send_as_file,
};
use clibot_proto::v1::{self, event::Kind};
use tokio::sync::mpsc;

use crate::ops::health::{PlatformHealth, now_ms};
use crate::outbound::blob;
use crate::outbound::egress::undelivered_notice;
use crate::outbound::render::{render, shown_prompt};
use crate::outbound::turn_status::Progress;
use crate::platforms::ratelimit::rate_limited;
use crate::platforms::{Platform, gone};

/// Output longer than this many messages goes as a file with a short summary.
const MAX_MESSAGES: usize = 3;
/// Longest wait between two attempts at a chat that fails for a passing reason.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Said before a message sent again that may have reached the chat already.
pub(crate) const MAY_REPEAT: &str =
    "↻ clibot-gateway restarted while sending the next message: it may be a repeat";

/// One event for one chat; `parts` of it were already delivered.
pub(crate) struct Item {
    pub(crate) ev: Arc<v1::Event>,
    pub(crate) parts: u32,
    /// Not an event to show: "everything up to `ev.seq` that was for you is in your queue
    /// before this", so the chat's cursor may move there once the queue is worked off.
    pub(crate) sync: bool,
}

/// Why a delivery stopped.
enum Stop {
    /// The chat is gone for good: suspend it.
    Gone(String),
    /// Try again later.
    Retry(anyhow::Error),
}

/// One chat's delivery state.
pub(crate) struct ChatDelivery {
    platform: Arc<dyn Platform>,
    socket: clibot_proto::Target,
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
    /// Events given up to the platform's rate limit, not yet told.
    undelivered: u32,
    /// The last prompt event whose dialog went as a picture (sent once, however often the
    /// prompt is retried).
    pictured: u64,
    /// The message (event seq, part from 0) that was being sent when the last gateway stopped.
    in_doubt: Option<(u64, u32)>,
}

impl ChatDelivery {
    /// The delivery of the chat `b`, resumed where the daemon says it stopped.
    pub(crate) fn resume(
        platform: &Arc<dyn Platform>,
        socket: &clibot_proto::Target,
        health: &PlatformHealth,
        b: &v1::Binding,
    ) -> ChatDelivery {
        let progress = b
            .status
            .as_ref()
            .filter(|s| !s.message.is_empty())
            .map(|s| {
                Progress::resume(
                    platform.clone(),
                    socket.clone(),
                    b.chat.clone(),
                    s.session.clone(),
                    s.message.clone(),
                    s.started_ms,
                )
            });
        ChatDelivery {
            platform: platform.clone(),
            socket: socket.clone(),
            health: health.clone(),
            chat: b.chat.clone(),
            client: None,
            done: b.cursor,
            partial: (b.cursor + 1, b.parts),
            shown: (!b.shown_prompt.is_empty())
                .then(|| (b.shown_prompt.clone(), b.shown_message.clone()))
                .into_iter()
                .collect(),
            progress,
            undelivered: 0,
            pictured: 0,
            in_doubt: (b.sending_seq > b.cursor).then_some((b.sending_seq, b.sending_part)),
        }
    }

    pub(crate) async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Item>) {
        let mut backoff = Duration::from_secs(1);
        while let Some(item) = rx.recv().await {
            let seq = item.ev.seq;
            if seq != 0 && seq <= self.done {
                continue;
            }
            if self.in_doubt.is_some_and(|(s, _)| seq > s) {
                self.in_doubt = None;
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
                    Err(Stop::Retry(e)) if rate_limited(&e).is_some() => {
                        // Given up after its budget: the chat hears of it once the platform's
                        // cooldown is over, and delivery goes on with the next event.
                        self.health.failed();
                        eprintln!(
                            "clibot-gateway: gave up event {seq} for {} chat {}: {e}",
                            self.platform.name(),
                            self.chat
                        );
                        let until = rate_limited(&e).map(|r| r.until);
                        self.ack(seq, 0, "", "").await;
                        self.undelivered += 1;
                        if let Some(until) = until {
                            tokio::time::sleep_until(until).await;
                        }
                        self.tell_undelivered().await;
                        break;
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

    /// Tells the chat how many events it missed to rate limits (best effort: a notice that
    /// is refused as well is only logged, and counted again next time).
    async fn tell_undelivered(&mut self) {
        if self.undelivered == 0 {
            return;
        }
        let text = undelivered_notice(self.platform.name(), self.undelivered, "!!");
        match self.platform.send(&self.chat, &text).await {
            Ok(()) => self.undelivered = 0,
            Err(e) => eprintln!(
                "clibot-gateway: cannot tell {} chat {} about {} undelivered messages: {e:#}",
                self.platform.name(),
                self.chat,
                self.undelivered
            ),
        }
    }

    async fn client(&mut self) -> anyhow::Result<&mut clibot_proto::Client> {
        if self.client.is_none() {
            self.client = Some(clibot_proto::connect_to(&self.socket).await?);
        }
        self.client
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("no daemon connection"))
    }

    /// Records progress in the daemon; a lost daemon is retried, never skipped (a resend
    /// after a restart would show the chat the same message twice).
    async fn ack(&mut self, seq: u64, parts: u32, prompt: &str, message: &str) {
        self.record(v1::AckEventsRequest {
            seq,
            parts,
            message: message.into(),
            prompt: prompt.into(),
            ..Default::default()
        })
        .await;
    }

    /// Says which message is about to go (see the module's doc), after telling the chat
    /// when it is the one the last gateway may have sent already.
    async fn sending(&mut self, seq: u64, part: u32) -> Result<(), Stop> {
        if self.in_doubt == Some((seq, part)) {
            self.platform
                .send(&self.chat, MAY_REPEAT)
                .await
                .map_err(Self::fail)?;
            self.in_doubt = None;
        }
        self.record(v1::AckEventsRequest {
            seq,
            parts: part,
            sending: true,
            ..Default::default()
        })
        .await;
        Ok(())
    }

    /// Records the chat's status message of a running turn (`message` empty: closed), with
    /// the state change `seq` that posted or closed it.
    async fn record_status(&mut self, seq: u64, session: &str, message: &str, started_ms: i64) {
        self.record(v1::AckEventsRequest {
            seq,
            status: Some(v1::StatusMessage {
                message: message.into(),
                session: session.into(),
                started_ms,
            }),
            ..Default::default()
        })
        .await;
    }

    /// Sends one acknowledgement of this chat to the daemon, retried until it is recorded.
    async fn record(&mut self, mut req: v1::AckEventsRequest) {
        if req.seq == 0 {
            return;
        }
        req.platform = self.platform.name().into();
        req.chat = self.chat.clone();
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
            // Acknowledged only when it posts or closes a status message (recorded so that
            // the next gateway edits that message on); otherwise the next message's
            // acknowledgement covers it, and a replayed old one shows nothing.
            self.progress(ev, sc).await;
            return Ok(());
        }
        // A prompt shown again (a reminder) has buttons in several messages: each loses them.
        while let Some(Kind::PromptResolved(r)) = &ev.kind
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
        // A session's own topic says it ended and closes (starting it again reopens it);
        // other chats are not told (whoever stopped it was).
        if matches!(&ev.kind, Some(Kind::Stopped(_)) | Some(Kind::Released(_))) {
            if crate::platforms::topic::split(&self.chat).1.is_some() {
                let text = format!(
                    "■ [{}] ended: this topic is closed until the session starts again",
                    ev.session
                );
                self.sending(ev.seq, 0).await?;
                self.platform
                    .send(&self.chat, &text)
                    .await
                    .map_err(Self::fail)?;
                self.platform.close_topic(&self.chat).await;
            }
            self.ack(ev.seq, 0, "", "").await;
            return Ok(());
        }
        // A file from the session's outbox: read from the daemon and sent as it is.
        if let Some(Kind::FileSent(f)) = &ev.kind {
            let (platform, chat) = (self.platform.clone(), self.chat.clone());
            self.sending(ev.seq, 0).await?;
            let c = self.client().await.ok();
            crate::outbound::files::deliver_outbox_file(&platform, c, &chat, &ev.session, f)
                .await
                .map_err(Self::fail)?;
            self.ack(ev.seq, 0, "", "").await;
            return Ok(());
        }
        // A reply longer than its event: fetched whole (as far as a file here takes it).
        let whole = match &ev.kind {
            Some(Kind::TurnCompleted(t)) if !t.blob_id.is_empty() => {
                let max_file = self.platform.max_file();
                let c = self.client().await.ok();
                blob::whole_reply(c, ev, max_file).await
            }
            _ => None,
        };
        let Some(text) = render(whole.as_ref().unwrap_or(ev)) else {
            return Ok(());
        };
        let text = self.platform.redact(&text);
        if let Some(p) = shown_prompt(ev)
            && !p.options.is_empty()
        {
            // A dialog with a diff or a table: its picture first, the buttons last.
            if matches!(&ev.kind, Some(Kind::Waiting(_)))
                && crate::outbound::picture::worth_a_picture(p)
                && std::mem::replace(&mut self.pictured, ev.seq) != ev.seq
            {
                let (platform, chat) = (self.platform.clone(), self.chat.clone());
                let c = self.client().await.ok();
                crate::outbound::picture::before_prompt(&platform, c, &chat, ev).await;
            }
            let options: Vec<String> = p
                .options
                .iter()
                .map(|o| self.platform.redact(o).into_owned())
                .collect();
            self.sending(ev.seq, 0).await?;
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
        // A usage limit: its buttons under it (pressed, they act through the daemon).
        if let Some((card, options)) = crate::outbound::render::limit_card(ev) {
            self.sending(ev.seq, 0).await?;
            let message = self
                .platform
                .send_prompt(&self.chat, &card, &text, &options)
                .await
                .map_err(Self::fail)?
                .unwrap_or_default();
            self.ack(ev.seq, 0, "", &message).await;
            return Ok(());
        }
        let opts = ChunkOptions::new(self.platform.max_message(), Measure::Chars);
        if should_send_as_file(&text, &opts, MAX_MESSAGES) {
            let summary = file_summary(&text, 12, &ChunkOptions::new(1024, Measure::Utf16));
            self.sending(ev.seq, 0).await?;
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
                self.sending(ev.seq, i as u32).await?;
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
        // A question without options (free text): a typed answer is for it.
        let prompt = shown_prompt(ev).map(|p| p.id.clone()).unwrap_or_default();
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
            // The turn's true length: from the event that began it to the one that ended it
            // (not when this process saw them).
            let secs = (ev.time_ms.saturating_sub(done.started_ms).max(0) / 1000) as u64;
            let s = &ev.session;
            let text = match v1::SessionState::try_from(sc.to) {
                Ok(v1::SessionState::Waiting) => format!("⏸ [{s}] waiting for you ({secs}s)"),
                // A cancel or a refusal ended it: no "done".
                Ok(v1::SessionState::Idle) if sc.reason.contains("cancel") => {
                    format!("■ [{s}] cancelled after {secs}s")
                }
                Ok(v1::SessionState::Idle) if sc.reason.contains("interrupt") => {
                    format!("■ [{s}] interrupted after {secs}s")
                }
                Ok(v1::SessionState::Idle) => format!("✓ [{s}] done in {secs}s"),
                Ok(v1::SessionState::Working) => {
                    // Still the same turn.
                    self.progress = Some(done);
                    return;
                }
                _ => format!("■ [{}] ended after {secs}s", ev.session),
            };
            if let Some(id) = &done.status {
                self.platform.status(&self.chat, Some(id), &text).await;
                self.record_status(ev.seq, &ev.session, "", 0).await;
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
        let progress = Progress::start(
            self.platform.clone(),
            self.socket.clone(),
            self.chat.clone(),
            ev.session.clone(),
            ev.time_ms,
        )
        .await;
        if let Some(id) = progress.status.clone() {
            self.record_status(ev.seq, &ev.session, &id, ev.time_ms)
                .await;
        }
        self.progress = Some(progress);
    }
}
