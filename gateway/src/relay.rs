//! Outgoing: the daemon's event log, rendered for the chats bound to each session.
//!
//! Delivery is per chat. One dispatcher reads the log and hands each event to a worker per chat;
//! each worker sends, retries transient failures with backoff, and acknowledges its own chat's
//! progress in the daemon (per event, and per part of a reply split over several messages). A
//! chat that fails for good (the bot was kicked, the chat is gone) is reported to the daemon,
//! which suspends its binding and tells the session's other chats; it never holds up another
//! chat. A gateway killed at any moment resumes each chat where its delivery stopped.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clibot_gateway::chunk::{
    ChunkOptions, Measure, attachment_name, chunk, file_summary, should_send_as_file,
};
use clibot_proto::v1::{self, event::Kind};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;

use crate::blob;
use crate::egress::undelivered_notice;
use crate::health::{PlatformHealth, now_ms};
use crate::platforms::ratelimit::rate_limited;
use crate::platforms::{Platform, gone};
use crate::poison::{self, Poison, Verdict};
use crate::render::{for_chats, render, shown_prompt};
use crate::turn_status::Progress;

/// Output longer than this many messages goes as a file with a short summary.
const MAX_MESSAGES: usize = 3;
/// Longest wait between two attempts at a chat that fails for a passing reason.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

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

/// A connection that lasted this long was a good one: the next reconnect starts from the
/// shortest backoff again. (One that fails right after connecting does not reset it, so a
/// daemon that accepts and then drops the stream is not hammered.)
const HEALTHY: Duration = Duration::from_secs(30);
/// Longest wait between two connections to the daemon.
const MAX_RECONNECT: Duration = Duration::from_secs(10);

/// Whether a failed call means the daemon connection is gone (rather than a refusal of this
/// one call, which is logged and skipped: replaying it would fail the same way).
fn lost(s: &tonic::Status) -> bool {
    matches!(
        s.code(),
        tonic::Code::Unavailable
            | tonic::Code::Unknown
            | tonic::Code::Cancelled
            | tonic::Code::DeadlineExceeded
    )
}

/// A call made for one event: a refusal is logged and the event's routing skipped (`None`);
/// a lost connection is the caller's to handle.
fn tolerate<T>(
    r: Result<T, tonic::Status>,
    seq: u64,
    what: &str,
) -> Result<Option<T>, tonic::Status> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(s) if lost(&s) => Err(s),
        Err(s) => {
            eprintln!(
                "clibot-gateway: event {seq}: {what} failed ({}: {}); skipping it",
                s.code(),
                s.message()
            );
            Ok(None)
        }
    }
}

/// Delivers events forever, reconnecting to the daemon when it goes away.
pub async fn run(
    platform: Arc<dyn Platform>,
    socket: clibot_proto::Target,
    health: PlatformHealth,
    default_chat: Option<String>,
) {
    let consumer = platform.consumer();
    let mut backoff = Duration::from_millis(200);
    // Workers outlive a lost daemon connection: what they hold is delivered once, and what
    // the new stream repeats they skip (each knows how far it got).
    let mut workers: HashMap<String, Worker> = HashMap::new();
    let mut poison = Poison::default();
    let mut home_topics = crate::home_topic::HomeTopics::default();
    loop {
        let began = Instant::now();
        let result: anyhow::Result<()> = async {
            let mut c = clibot_proto::connect_to(&socket).await?;
            // Named again on every connection: a restarted daemon does not keep it.
            if let Some(chat) = &default_chat {
                let req = v1::SetDefaultChatRequest {
                    platform: platform.name().to_string(),
                    chat: chat.clone(),
                };
                if let Err(s) = c.set_default_chat(req).await {
                    if lost(&s) {
                        return Err(s.into());
                    }
                    eprintln!(
                        "clibot-gateway: {}: the default chat was refused: {}",
                        platform.name(),
                        s.message()
                    );
                }
            }
            let bound = bindings(&mut c, platform.name(), "", 0).await?;
            let own = c
                .get_cursor(v1::GetCursorRequest {
                    consumer: consumer.clone(),
                })
                .await?
                .into_inner()
                .cursor;
            // Resume at the chat that is furthest behind.
            let mut since = bound
                .iter()
                .filter(|b| !b.broken)
                .map(|b| b.cursor)
                .chain([own])
                .min()
                .unwrap_or(own);
            let mut since_sync = 0u32;
            let mut last_sync = std::time::Instant::now();
            loop {
                let mut stream = c
                    .watch_events(v1::WatchEventsRequest {
                        since: Some(since),
                        sessions: vec![],
                        follow: true,
                    })
                    .await?
                    .into_inner();
                let mut last = since;
                let broke = loop {
                    let ev = match stream.next().await {
                        None => return Ok(()),
                        Some(Err(s)) => break s,
                        Some(Ok(ev)) => Arc::new(ev),
                    };
                    last = last.max(ev.seq);
                    if let Some(Kind::EventsDropped(d)) = &ev.kind {
                        // Every chat that was behind the gap is told; nothing to acknowledge
                        // (seq 0).
                        let first = d.first_seq;
                        let all = tolerate(
                            bindings(&mut c, platform.name(), "", 0).await,
                            first,
                            "listing chats",
                        )?;
                        for b in all.into_iter().flatten().filter(|b| open_for(b, first)) {
                            worker(&mut workers, &platform, &socket, &health, &b).send(Item {
                                ev: ev.clone(),
                                parts: 0,
                                sync: false,
                            });
                        }
                        continue;
                    }
                    // An approved pairing: the direct chat its code was given in is told.
                    if let Some(Kind::Paired(p)) = &ev.kind
                        && p.platform == platform.name()
                    {
                        let all = tolerate(
                            bindings(&mut c, platform.name(), "", 0).await,
                            ev.seq,
                            "listing chats",
                        )?;
                        for b in all
                            .into_iter()
                            .flatten()
                            .filter(|b| b.chat == p.chat && open_for(b, ev.seq))
                        {
                            worker(&mut workers, &platform, &socket, &health, &b).send(Item {
                                ev: ev.clone(),
                                parts: 0,
                                sync: false,
                            });
                        }
                    }
                    if !ev.session.is_empty() && for_chats(&ev) {
                        let mut chats = tolerate(
                            bindings(&mut c, platform.name(), &ev.session, ev.seq).await,
                            ev.seq,
                            "listing the session's chats",
                        )?;
                        if let Some(home) = &default_chat
                            && let Some(list) = chats.take()
                        {
                            chats = Some(
                                home_topics
                                    .route(&mut c, &platform, home, &ev, list)
                                    .await?,
                            );
                        }
                        for b in chats.into_iter().flatten().filter(|b| open_for(b, ev.seq)) {
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
                        let ack = v1::AckEventsRequest {
                            consumer: consumer.clone(),
                            seq: ev.seq,
                            ..Default::default()
                        };
                        tolerate(
                            c.ack_events(ack).await,
                            ev.seq,
                            "recording the platform's cursor",
                        )?;
                        since_sync += 1;
                        if since_sync >= SYNC_EVERY_EVENTS || last_sync.elapsed() >= SYNC_EVERY {
                            let synced =
                                sync_all(&mut c, &mut workers, &platform, &socket, &health, ev.seq)
                                    .await;
                            tolerate(synced, ev.seq, "moving quiet chats' cursors")?;
                            since_sync = 0;
                            last_sync = std::time::Instant::now();
                        }
                    }
                };
                // Gap-free numbering: the event that broke the stream is the next one.
                let at = last + 1;
                match poison.judge(&mut c, &consumer, at, &broke).await {
                    Verdict::Lost => return Err(broke.into()),
                    Verdict::Again => since = last,
                    Verdict::Skip { tell } => {
                        skip(
                            &mut c,
                            &mut workers,
                            &platform,
                            &socket,
                            &health,
                            at,
                            &broke,
                            tell,
                        )
                        .await?;
                        since = at;
                    }
                }
            }
        }
        .await;
        if began.elapsed() >= HEALTHY {
            backoff = Duration::from_millis(200);
        }
        if let Err(e) = result {
            eprintln!(
                "clibot-gateway: event relay interrupted ({e}); retrying in {:?}",
                backoff
            );
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_RECONNECT);
    }
}

/// Skips event `at`, which cannot be read: its session's chats are told instead (when `tell`
/// and the session can be found; else the log says it), and the platform's cursor moves past.
#[allow(clippy::too_many_arguments)]
async fn skip(
    c: &mut clibot_proto::Client,
    workers: &mut HashMap<String, Worker>,
    platform: &Arc<dyn Platform>,
    socket: &clibot_proto::Target,
    health: &PlatformHealth,
    at: u64,
    broke: &tonic::Status,
    tell: bool,
) -> Result<(), tonic::Status> {
    let all = bindings(c, platform.name(), "", 0).await?;
    let mut sessions: Vec<String> = all
        .iter()
        .filter(|b| open_for(b, at))
        .map(|b| b.session.clone())
        .collect();
    sessions.sort();
    sessions.dedup();
    let owner = if tell {
        poison::owner(c, at, &sessions).await
    } else {
        None
    };
    eprintln!(
        "clibot-gateway: skipping event {at}, which cannot be read ({}: {}){}",
        broke.code(),
        broke.message(),
        match &owner {
            Some(s) => format!("; telling the chats of {s}"),
            None => "; `clibotctl events` on the machine shows it".into(),
        }
    );
    if let Some(session) = owner {
        let ev = Arc::new(poison::notice(at, &session, broke));
        for b in all
            .iter()
            .filter(|b| b.session == session && open_for(b, at))
        {
            worker(workers, platform, socket, health, b).send(Item {
                ev: ev.clone(),
                parts: 0,
                sync: false,
            });
        }
    }
    let ack = v1::AckEventsRequest {
        consumer: platform.consumer(),
        seq: at,
        ..Default::default()
    };
    c.ack_events(ack).await?;
    Ok(())
}

/// Whether event `seq` is still to be delivered to chat `b`: not suspended, not yet
/// delivered, and not past the end the daemon set (its binder lost the session).
fn open_for(b: &v1::Binding, seq: u64) -> bool {
    !b.broken && b.cursor < seq && (b.until_seq == 0 || seq <= b.until_seq)
}

/// The platform's chats bound to `session` (all of them for an empty one); with `seq`, those
/// event `seq` goes to (an escalated prompt goes to the admins' chats too).
async fn bindings(
    c: &mut clibot_proto::Client,
    platform: &str,
    session: &str,
    seq: u64,
) -> Result<Vec<v1::Binding>, tonic::Status> {
    let req = v1::ListBindingsRequest {
        platform: platform.into(),
        chat: String::new(),
        session: session.into(),
        seq,
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
    socket: &clibot_proto::Target,
    health: &PlatformHealth,
    seq: u64,
) -> Result<(), tonic::Status> {
    let all = bindings(c, platform.name(), "", 0).await?;
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
    socket: &clibot_proto::Target,
    health: &PlatformHealth,
    b: &v1::Binding,
) -> &'a Worker {
    let alive = workers.get(&b.chat).is_some_and(|w| !w.tx.is_closed());
    if !alive {
        let (tx, rx) = mpsc::unbounded_channel();
        let chat = ChatDelivery {
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
            progress: None,
            undelivered: 0,
            pictured: 0,
        };
        tokio::spawn(chat.run(rx));
        workers.insert(b.chat.clone(), Worker { tx });
    }
    &workers[&b.chat]
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
            if crate::topic::split(&self.chat).1.is_some() {
                let text = format!(
                    "■ [{}] ended: this topic is closed until the session starts again",
                    ev.session
                );
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
            let c = self.client().await.ok();
            crate::files::deliver_outbox_file(&platform, c, &chat, &ev.session, f)
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
                && crate::picture::worth_a_picture(p)
                && std::mem::replace(&mut self.pictured, ev.seq) != ev.seq
            {
                let (platform, chat) = (self.platform.clone(), self.chat.clone());
                let c = self.client().await.ok();
                crate::picture::before_prompt(&platform, c, &chat, ev).await;
            }
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
        self.progress = Some(
            Progress::start(
                self.platform.clone(),
                self.socket.clone(),
                self.chat.clone(),
                ev.session.clone(),
                ev.time_ms,
            )
            .await,
        );
    }
}
