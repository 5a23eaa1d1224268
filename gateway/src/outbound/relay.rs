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

use clibot_proto::v1::{self, event::Kind};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;

use crate::ops::health::PlatformHealth;
use crate::outbound::chat_delivery::{ChatDelivery, Item};
use crate::outbound::poison::{self, Poison, Verdict};
use crate::outbound::render::for_chats;
use crate::platforms::Platform;

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

pub(crate) use clibot_gateway::daemon_lost as lost;

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
    let mut home_topics = crate::outbound::home_topic::HomeTopics::default();
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
        let chat = ChatDelivery::resume(platform, socket, health, b);
        tokio::spawn(chat.run(rx));
        workers.insert(b.chat.clone(), Worker { tx });
    }
    &workers[&b.chat]
}
