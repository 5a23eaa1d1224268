//! Discord through serenity's gateway client (an outbound websocket: works behind NAT).
//! Messages in the bot's DMs and channels become chat messages; replies are chunked at 2000
//! characters; prompts carry buttons; long output goes as a file; rate limits are waited out.
//!
//! With a custom API URL (a test fake, or a proxy) serenity's own rate limiter has to be off
//! (serenity-rs/serenity#1739), so a 429 is handled here: wait and send again, never drop.
//!
//! Ingress is durable although Discord's gateway does not replay what a closed connection
//! missed: once a message was handled, its id is recorded in the daemon (`AckIngress`, per
//! channel); at start and after every reconnect (`ready`/`resume`) the history after each
//! recorded id is read (`GET /channels/{id}/messages?after=`) and handed over like live
//! messages. Everything goes through one [`Ingress`] task, which hands messages over in id
//! order per channel and each id once (a live message and the same one from history).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use clibot_gateway::chunk::{ChunkOptions, chunk};
use clibot_proto::v1;
use serenity::all::{
    Channel, ChannelId, ClientBuilder, Context, CreateActionRow, CreateAttachment, CreateButton,
    CreateInteractionResponse, CreateMessage, EventHandler, GatewayIntents, Http, HttpBuilder,
    Interaction, Message, Ready, ResumedEvent,
};
use tokio::sync::{mpsc, oneshot};

use crate::bounded::Bounded;
use crate::platforms::discord_backlog::Backlog;
use crate::platforms::{Attachment, Inbound, Platform, Receiving};
use crate::progress::Progress;

pub struct Discord {
    http: Arc<Http>,
    bot_id: u64,
    /// `[gateway.discord] topics`: sessions get threads in server channels.
    topics: bool,
    _lock: Arc<std::fs::File>,
}

/// What the event handler passes to the [`Ingress`] task.
enum Event {
    /// A message as the gateway delivered it.
    Live(Box<Message>),
    /// The gateway connection is (re)established: read what was missed.
    CatchUp,
    /// A pressed button (no place in a channel's order: handed over at once).
    Button(Box<Inbound>),
    /// The gateway client stopped for good (a refused token, say): the platform's connection
    /// ends, and the gateway connects again with backoff.
    Ended,
}

struct Handler {
    events: mpsc::UnboundedSender<Event>,
    backlog: Arc<Backlog>,
    prefix: String,
    /// `[gateway.discord] topics`.
    topics: bool,
}

#[async_trait]
impl EventHandler for Handler {
    async fn message(&self, _ctx: Context, msg: Message) {
        if msg.author.bot || !self.backlog.admit() {
            return;
        }
        let _ = self.events.send(Event::Live(Box::new(msg)));
    }

    async fn ready(&self, _ctx: Context, _ready: Ready) {
        let _ = self.events.send(Event::CatchUp);
    }

    async fn resume(&self, _ctx: Context, _resumed: ResumedEvent) {
        let _ = self.events.send(Event::CatchUp);
    }

    async fn interaction_create(&self, ctx: Context, interaction: Interaction) {
        let Interaction::Component(c) = interaction else {
            return;
        };
        // Interactions must be answered within 3 s; the answer itself goes through the router.
        let _ = c
            .create_response(&ctx.http, CreateInteractionResponse::Acknowledge)
            .await;
        if let Some((prompt, choice)) = crate::platforms::shown::parse_button(&c.data.custom_id) {
            // A press in a thread: the thread's key, `CHANNEL/THREAD`.
            let thread_parent = c
                .channel
                .as_ref()
                .filter(|ch| self.topics && is_thread(ch.kind))
                .and_then(|ch| ch.parent_id);
            let chat = match thread_parent {
                Some(parent) => crate::platforms::topic::key(
                    &parent.get().to_string(),
                    &c.channel_id.get().to_string(),
                ),
                None => c.channel_id.get().to_string(),
            };
            let inbound = Inbound {
                chat,
                user: c.user.id.get().to_string(),
                user_name: c.user.name.clone(),
                text: format!("{}answer {choice}", self.prefix),
                // The interaction's id: a press handed over again is claimed only once.
                id: c.id.get().to_string(),
                prompt: Some(prompt),
                group: c.guild_id.is_some(),
                topics: false,
                file: None,
                ack: None,
            };
            let _ = self.events.send(Event::Button(Box::new(inbound)));
        }
    }
}

/// How long live messages are gathered before they are handed over: serenity runs every event
/// handler call as its own task, so two messages that arrive together may reach the handler in
/// either order; sorting what arrived within this window restores the channel's order.
const HOLD: Duration = Duration::from_millis(50);

/// Discord's largest page of channel history.
const PAGE: u8 = 100;

/// How many handed-over ids above the confirmed cursor are remembered per channel.
const RECENT: usize = 1024;

/// The last confirmed (handled) message id per channel, shared by the ingress task (which
/// skips what is confirmed) and the task that confirms messages to the daemon.
#[derive(Clone, Default)]
struct Cursors(Arc<Mutex<Bounded<u64, u64>>>);

impl Cursors {
    fn lock(&self) -> MutexGuard<'_, Bounded<u64, u64>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn get(&self, channel: u64) -> u64 {
        self.lock().get(&channel).copied().unwrap_or(0)
    }

    /// Moves a channel's cursor forward (never back).
    fn advance(&self, channel: u64, id: u64) {
        let mut m = self.lock();
        let c = m.get_or_insert_with(channel, || 0);
        *c = (*c).max(id);
    }
}

/// A handed-over message waiting to be confirmed: (channel, message id, its sender, fired
/// once handled). The sender goes with the confirmation: the daemon records a channel only
/// for a sender who may use clibot (a stranger's DM costs nothing durable).
type PendingAck = (u64, u64, String, oneshot::Receiver<()>);

/// Hands Discord messages to the router: live ones, and after a (re)connect the history each
/// channel missed — in id order per channel, each id once.
struct Ingress {
    http: Arc<Http>,
    socket: clibot_proto::Target,
    tx: mpsc::Sender<Inbound>,
    acks: mpsc::UnboundedSender<PendingAck>,
    cursors: Cursors,
    /// Ids handed over and not yet confirmed, per channel (bounded, and so is the number of
    /// channels: strangers can open any number of DMs).
    recent: Bounded<u64, BTreeSet<u64>>,
    /// Whether a channel is a server channel (`true`) or a DM, as far as known: history
    /// messages do not say (only the gateway's carry `guild_id`).
    guild: Bounded<u64, bool>,
    /// `[gateway.discord] topics`: messages in a thread are keyed `CHANNEL/THREAD`.
    topics: bool,
    /// The channel a server channel is a thread of (`None`: not a thread), as far as known.
    parents: Bounded<u64, Option<u64>>,
    /// The live messages waiting, shared with the event handler.
    backlog: Arc<Backlog>,
}

impl Ingress {
    /// Runs until the event handler is gone. Live messages wait while a catch-up is due, so
    /// that a channel's missed history goes first.
    async fn run(mut self, mut events: mpsc::UnboundedReceiver<Event>) {
        let mut due = true;
        let mut held: Vec<Box<Message>> = Vec::new();
        let mut backoff = Duration::from_millis(500);
        let mut next_try = tokio::time::Instant::now();
        loop {
            if due && tokio::time::Instant::now() >= next_try {
                match self.catch_up().await {
                    Ok(()) => {
                        due = false;
                        backoff = Duration::from_millis(500);
                        held.sort_by_key(|m| (m.channel_id, m.id));
                        for m in std::mem::take(&mut held) {
                            let group = m.guild_id.is_some();
                            self.hand_over(*m, group).await;
                            self.backlog.release(1);
                        }
                    }
                    Err(e) => {
                        eprintln!(
                            "clibot-gateway: cannot read what Discord channels missed ({e}); retrying in {backoff:?}"
                        );
                        next_try = tokio::time::Instant::now() + backoff;
                        backoff = (backoff * 2).min(Duration::from_secs(30));
                    }
                }
            }
            let first = if due {
                match tokio::time::timeout_at(next_try, events.recv()).await {
                    Ok(Some(e)) => e,
                    Ok(None) => return,
                    Err(_) => continue,
                }
            } else {
                match events.recv().await {
                    Some(e) => e,
                    None => return,
                }
            };
            let mut batch = vec![first];
            let until = tokio::time::Instant::now() + HOLD;
            while let Ok(Some(e)) = tokio::time::timeout_at(until, events.recv()).await {
                batch.push(e);
            }
            let mut live = Vec::new();
            for e in batch {
                match e {
                    Event::CatchUp => due = true,
                    Event::Live(m) => live.push(m),
                    Event::Button(b) => {
                        let _ = self.tx.send(*b).await;
                    }
                    // Dropping the sender ends the platform's stream of messages.
                    Event::Ended => return,
                }
            }
            // Messages were dropped for want of room: their channels' history has them.
            if self.backlog.took_overflow() {
                eprintln!(
                    "clibot-gateway: too many Discord messages waiting; the newest are read back from the channels' history"
                );
                due = true;
            }
            if due {
                held.append(&mut live);
                continue;
            }
            live.sort_by_key(|m| (m.channel_id, m.id));
            for m in live {
                let group = m.guild_id.is_some();
                self.hand_over(*m, group).await;
                self.backlog.release(1);
            }
        }
    }

    /// Reads every recorded channel's history after its cursor and hands it over. Fails only
    /// when the daemon cannot say where the channels stand; a channel whose history cannot be
    /// read is skipped (and tried again at the next reconnect).
    async fn catch_up(&mut self) -> anyhow::Result<()> {
        let mut client = clibot_proto::connect_to(&self.socket).await?;
        let list = match client
            .list_ingress(v1::ListIngressRequest {
                platform: "discord".into(),
            })
            .await
        {
            Ok(list) => list.into_inner(),
            // An older daemon: it keeps no cursors, so there is nothing to catch up on (and
            // holding live messages back until it learns would silence the bot).
            Err(e) if e.code() == tonic::Code::Unimplemented => {
                eprintln!(
                    "clibot-gateway: clibotd does not record handled Discord messages (an older version?); messages sent while the gateway is down are not read back"
                );
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        for c in list.cursors {
            let (Ok(channel), Ok(id)) = (c.chat.parse::<u64>(), c.id.parse::<u64>()) else {
                continue;
            };
            self.cursors.advance(channel, id);
            if let Err(e) = self.catch_up_channel(channel).await {
                eprintln!(
                    "clibot-gateway: cannot read the history of Discord channel {channel}: {e}"
                );
            }
        }
        Ok(())
    }

    /// Hands over one channel's messages after its cursor, oldest first, page by page.
    async fn catch_up_channel(&mut self, channel: u64) -> anyhow::Result<()> {
        let mut after = self.cursors.get(channel);
        loop {
            let (mut page, top, held) =
                crate::platforms::discord_history::page(&self.http, channel, after, PAGE)
                    .await
                    .map_err(classify)?;
            let full = held >= usize::from(PAGE);
            // Discord answers newest first.
            page.sort_by_key(|m| m.id);
            // Past every message of the page, read or skipped.
            if top <= after {
                return Ok(());
            }
            after = top;
            for m in page {
                if m.author.bot {
                    continue;
                }
                let Some(group) = self.is_guild(channel).await? else {
                    anyhow::bail!("not a channel this bot reads");
                };
                self.hand_over(m, group).await;
            }
            if !full {
                return Ok(());
            }
        }
    }

    /// Whether a channel is a server channel; `None` for a kind of channel the bot does not
    /// read (a group DM).
    async fn is_guild(&mut self, channel: u64) -> anyhow::Result<Option<bool>> {
        if let Some(g) = self.guild.get(&channel) {
            return Ok(Some(*g));
        }
        let g = match self.http.get_channel(ChannelId::new(channel)).await {
            Ok(Channel::Guild(_)) => true,
            Ok(Channel::Private(_)) => false,
            Ok(_) => return Ok(None),
            Err(e) => return Err(classify(e)),
        };
        self.guild.insert(channel, g);
        Ok(Some(g))
    }

    /// The channel `channel` is a thread of, if it is one (asked of Discord once per channel:
    /// messages do not say).
    async fn parent(&mut self, channel: u64) -> Option<u64> {
        if let Some(p) = self.parents.get(&channel) {
            return *p;
        }
        let parent = match self.http.get_channel(ChannelId::new(channel)).await {
            Ok(Channel::Guild(g)) if is_thread(g.kind) => g.parent_id.map(|p| p.get()),
            Ok(_) => None,
            Err(e) => {
                eprintln!(
                    "clibot-gateway: cannot ask Discord whether channel {channel} is a thread: {e}"
                );
                // Not remembered: asked again with the next message.
                return None;
            }
        };
        self.parents.insert(channel, parent);
        parent
    }

    /// Hands one message to the router unless it was already: confirmed (at or below the
    /// channel's cursor) or handed over recently. Its confirmation follows once handled.
    async fn hand_over(&mut self, m: Message, group: bool) {
        if m.author.bot {
            return;
        }
        let (channel, id) = (m.channel_id.get(), m.id.get());
        self.guild.insert(channel, group);
        let confirmed = self.cursors.get(channel);
        let recent = self.recent.get_or_insert_with(channel, BTreeSet::new);
        recent.retain(|&i| i > confirmed);
        if id <= confirmed || !recent.insert(id) {
            return;
        }
        while recent.len() > RECENT {
            recent.pop_first();
        }
        let (done, handled) = oneshot::channel();
        let file = m.attachments.first().map(|a| Attachment {
            id: a.url.clone(),
            name: a.filename.clone(),
            size: u64::from(a.size),
            kind: if a.duration_secs.is_some() {
                "voice"
            } else if a
                .content_type
                .as_deref()
                .is_some_and(|t| t.starts_with("image/"))
            {
                "photo"
            } else {
                "document"
            },
        });
        // With topics, a thread of a server channel is that channel's topic, and the channel
        // itself is where sessions are chosen (each gets a thread).
        let (chat, topics) = if self.topics && group {
            match self.parent(channel).await {
                Some(parent) => (
                    crate::platforms::topic::key(&parent.to_string(), &channel.to_string()),
                    false,
                ),
                None => (channel.to_string(), true),
            }
        } else {
            (channel.to_string(), false)
        };
        let inbound = Inbound {
            chat,
            user: m.author.id.get().to_string(),
            user_name: m.author.name.clone(),
            text: m.content,
            id: id.to_string(),
            prompt: None,
            group,
            topics,
            file,
            ack: Some(done),
        };
        let _ = self
            .acks
            .send((channel, id, m.author.id.get().to_string(), handled));
        let _ = self.tx.send(inbound).await;
    }
}

/// Confirms handled messages to the daemon, in the order they were handed over: a message is
/// recorded only once the router is done with it, so a gateway killed before that reads it
/// again from the channel's history.
async fn confirm(
    socket: clibot_proto::Target,
    cursors: Cursors,
    mut acks: mpsc::UnboundedReceiver<PendingAck>,
) {
    let mut client: Option<clibot_proto::Client> = None;
    while let Some((channel, id, user, handled)) = acks.recv().await {
        if handled.await.is_err() {
            // Dropped unhandled (the gateway is stopping): not confirmed.
            continue;
        }
        cursors.advance(channel, id);
        let mut wait = Duration::from_millis(200);
        for attempt in 1..=5 {
            if client.is_none() {
                client = clibot_proto::connect_to(&socket).await.ok();
            }
            if let Some(c) = client.as_mut() {
                let req = v1::AckIngressRequest {
                    platform: "discord".into(),
                    chat: channel.to_string(),
                    id: id.to_string(),
                    user: user.clone(),
                };
                match c.ack_ingress(req).await {
                    Ok(_) => break,
                    Err(e) if e.code() == tonic::Code::Unimplemented => break,
                    Err(e) => {
                        client = None;
                        if attempt == 5 {
                            eprintln!(
                                "clibot-gateway: cannot record Discord message {id} in channel {channel} as handled ({e}); it may be handed over again after a restart"
                            );
                        }
                    }
                }
            }
            tokio::time::sleep(wait).await;
            wait *= 2;
        }
    }
}

/// serenity's shard runners, with each shard's connection stage.
type Runners = Arc<
    tokio::sync::Mutex<
        std::collections::HashMap<serenity::model::id::ShardId, serenity::gateway::ShardRunnerInfo>,
    >,
>;

/// The watchdog's cycles: serenity keeps the gateway connection (heartbeats, resumes) and
/// hands events to the handler as they come; every tick, a shard that serenity holds connected
/// completes a cycle. (A message held by the router stalls the platform on the router's side:
/// see [`Progress`].)
async fn alive(runners: Runners, progress: Progress) {
    loop {
        tokio::time::sleep(progress.tick()).await;
        let up = runners
            .lock()
            .await
            .values()
            .any(|r| r.stage == serenity::gateway::ConnectionStage::Connected);
        if up {
            progress.cycle();
        }
    }
}

impl Discord {
    /// Connects (REST and gateway) and starts receiving; messages arrive on the channel, each
    /// with an acknowledgement the caller fires once it was handled. The channel closes when
    /// the gateway client stops for good.
    pub async fn start(
        token: &str,
        api_url: Option<&str>,
        topics: bool,
        prefix: &str,
        lock_dir: &std::path::Path,
        socket: &clibot_proto::Target,
        recv: &Receiving,
    ) -> anyhow::Result<(Discord, mpsc::Receiver<Inbound>)> {
        let mut hb = HttpBuilder::new(token);
        if let Some(url) = api_url {
            hb = hb
                .proxy(url.trim_end_matches('/'))
                .ratelimiter_disabled(true);
        }
        let http = hb.build();
        let me = http.get_current_user().await.map_err(|e| match &e {
            serenity::Error::Http(serenity::http::HttpError::Request(_)) => {
                anyhow::anyhow!(crate::platforms::reach::unreachable(
                    "Discord",
                    api_url,
                    "https://discord.com",
                    &clibot_proto::describe(&e),
                ))
            }
            _ => anyhow::anyhow!("Discord did not accept the bot token: {e}"),
        })?;
        eprintln!(
            "clibot-gateway: connected to Discord as {} (bot id {})",
            me.name,
            me.id.get()
        );
        let lock =
            crate::platforms::single_poller(recv, lock_dir, &format!("discord-{}", me.id.get()))?;
        let (tx, rx) = mpsc::channel(16);
        let (events, events_rx) = mpsc::unbounded_channel();
        let backlog = Arc::new(Backlog::default());
        let intents = GatewayIntents::DIRECT_MESSAGES
            | GatewayIntents::GUILD_MESSAGES
            | GatewayIntents::MESSAGE_CONTENT;
        let mut client = ClientBuilder::new_with_http(http, intents)
            .event_handler(Handler {
                events: events.clone(),
                backlog: backlog.clone(),
                prefix: prefix.to_string(),
                topics,
            })
            .await
            .map_err(|e| anyhow::anyhow!("cannot start the Discord client: {e}"))?;
        let http = client.http.clone();
        let cursors = Cursors::default();
        let (acks, acks_rx) = mpsc::unbounded_channel();
        recv.spawn(confirm(socket.clone(), cursors.clone(), acks_rx));
        let ingress = Ingress {
            http: http.clone(),
            socket: socket.clone(),
            tx,
            acks,
            cursors,
            recent: Bounded::default(),
            guild: Bounded::default(),
            topics,
            parents: Bounded::default(),
            backlog,
        };
        recv.spawn(ingress.run(events_rx));
        recv.spawn(alive(
            client.shard_manager.runners.clone(),
            recv.progress.clone(),
        ));
        let ended = events;
        recv.spawn(async move {
            match client.start().await {
                Ok(()) => eprintln!("clibot-gateway: the Discord gateway connection ended"),
                Err(e) => eprintln!("clibot-gateway: the Discord gateway connection ended: {e}"),
            }
            let _ = ended.send(Event::Ended);
        });
        Ok((
            Discord {
                http,
                bot_id: me.id.get(),
                topics,
                _lock: lock,
            },
            rx,
        ))
    }

    /// The channel a chat key sends to: a thread is a channel of its own.
    fn channel(chat: &str) -> anyhow::Result<ChannelId> {
        let (c, thread) = crate::platforms::topic::split(chat);
        let id: u64 = thread
            .unwrap_or(c)
            .parse()
            .map_err(|_| anyhow::anyhow!("not a Discord channel id: {chat}"))?;
        Ok(ChannelId::new(id))
    }

    /// Sends one message, waiting out rate limits within the message's budget; returns its id.
    async fn send_message(
        &self,
        channel: ChannelId,
        make: impl Fn() -> CreateMessage,
    ) -> anyhow::Result<String> {
        let mut wait = Duration::from_millis(500);
        let mut budget = crate::platforms::ratelimit::Budget::new("Discord");
        loop {
            match channel.send_message(&self.http, make()).await {
                Ok(m) => return Ok(m.id.get().to_string()),
                Err(serenity::Error::Http(e))
                    if e.status_code().is_some_and(|s| s.as_u16() == 429) =>
                {
                    // serenity keeps no `retry_after` of an error: back off on our own.
                    budget.wait(wait).await?;
                    wait = (wait * 2).min(Duration::from_secs(10));
                }
                Err(e) => return Err(classify(e)),
            }
        }
    }
}

#[async_trait]
impl Platform for Discord {
    fn name(&self) -> &str {
        "discord"
    }

    fn consumer(&self) -> String {
        format!("discord:{}", self.bot_id)
    }

    fn max_message(&self) -> usize {
        2000
    }

    async fn send(&self, chat: &str, text: &str) -> anyhow::Result<()> {
        let channel = Self::channel(chat)?;
        for part in chunk(text, &ChunkOptions::discord()) {
            self.send_message(channel, || CreateMessage::new().content(part.clone()))
                .await?;
        }
        Ok(())
    }

    async fn remove_buttons(&self, chat: &str, message: &str) -> anyhow::Result<()> {
        let (channel, mid) = (Self::channel(chat)?, message_id(message)?);
        channel
            .edit_message(
                &self.http,
                mid,
                serenity::all::EditMessage::new().components(vec![]),
            )
            .await
            .map_err(classify)?;
        Ok(())
    }

    async fn edit_prompt(
        &self,
        chat: &str,
        message: &str,
        prompt_id: &str,
        text: &str,
        options: &[String],
    ) -> anyhow::Result<()> {
        let (channel, mid) = (Self::channel(chat)?, message_id(message)?);
        let text: String = text.chars().take(4000).collect();
        let embed = serenity::all::CreateEmbed::new()
            .description(text)
            .colour(PROMPT_COLOUR);
        let edit = serenity::all::EditMessage::new()
            .embed(embed)
            .components(prompt_rows(prompt_id, options));
        channel
            .edit_message(&self.http, mid, edit)
            .await
            .map_err(classify)?;
        Ok(())
    }

    async fn pin(&self, chat: &str, message: &str, on: bool) -> anyhow::Result<()> {
        let (channel, mid) = (Self::channel(chat)?, message_id(message)?);
        let done = if on {
            channel.pin(&self.http, mid).await
        } else {
            channel.unpin(&self.http, mid).await
        };
        done.map_err(classify)?;
        Ok(())
    }

    async fn delete_message(&self, chat: &str, message: &str) -> anyhow::Result<bool> {
        let (channel, mid) = (Self::channel(chat)?, message_id(message)?);
        // A bot may delete others' messages in a server channel where it has Manage
        // Messages; never in a DM.
        match channel.delete_message(&self.http, mid).await {
            Ok(()) => Ok(true),
            Err(e) => {
                eprintln!("clibot-gateway: Discord did not delete a message in {chat}: {e}");
                Ok(false)
            }
        }
    }

    async fn send_prompt(
        &self,
        chat: &str,
        prompt_id: &str,
        text: &str,
        options: &[String],
    ) -> anyhow::Result<Option<String>> {
        let channel = Self::channel(chat)?;
        let parts = chunk(text, &ChunkOptions::discord());
        let n = parts.len();
        let mut with_buttons = None;
        for (i, part) in parts.into_iter().enumerate() {
            let last = i + 1 == n;
            let id = self
                .send_message(channel, || {
                    // The dialog itself shows as an embed (set apart from the conversation,
                    // its code blocks kept), its buttons under it; what comes before it is
                    // plain text.
                    let mut m = if last {
                        CreateMessage::new().embed(
                            serenity::all::CreateEmbed::new()
                                .description(part.clone())
                                .colour(PROMPT_COLOUR),
                        )
                    } else {
                        CreateMessage::new().content(part.clone())
                    };
                    if last {
                        m = m.components(prompt_rows(prompt_id, options));
                    }
                    m
                })
                .await?;
            if last {
                with_buttons = Some(id);
            }
        }
        Ok(with_buttons)
    }

    async fn send_file(
        &self,
        chat: &str,
        name: &str,
        text: &str,
        summary: &str,
    ) -> anyhow::Result<()> {
        self.send_image(chat, name, text.as_bytes(), summary).await
    }

    async fn download(&self, file: &Attachment, max: u64) -> anyhow::Result<Vec<u8>> {
        // Discord's attachment URLs are signed links to its CDN: no token goes with them.
        if !(file.id.starts_with("https://") || file.id.starts_with("http://")) {
            anyhow::bail!("not an attachment URL");
        }
        let mut resp = reqwest::Client::new()
            .get(&file.id)
            .send()
            .await?
            .error_for_status()?;
        let mut data = Vec::new();
        while let Some(chunk) = resp.chunk().await? {
            data.extend_from_slice(&chunk);
            if data.len() as u64 > max {
                anyhow::bail!("it has more than {max} bytes");
            }
        }
        Ok(data)
    }

    async fn send_bytes(
        &self,
        chat: &str,
        name: &str,
        data: &[u8],
        caption: &str,
    ) -> anyhow::Result<()> {
        self.send_image(chat, name, data, caption).await
    }

    async fn send_image(
        &self,
        chat: &str,
        name: &str,
        png: &[u8],
        caption: &str,
    ) -> anyhow::Result<()> {
        let channel = Self::channel(chat)?;
        let caption: String = caption.chars().take(2000).collect();
        // An attached PNG shows inline.
        self.send_message(channel, || {
            CreateMessage::new()
                .content(caption.clone())
                .add_file(CreateAttachment::bytes(png.to_vec(), name))
        })
        .await
        .map(|_| ())
    }

    async fn status(&self, chat: &str, id: Option<&str>, text: &str) -> Option<String> {
        let channel = Self::channel(chat).ok()?;
        match id {
            None => channel
                .send_message(&self.http, CreateMessage::new().content(text))
                .await
                .ok()
                .map(|m| m.id.get().to_string()),
            Some(id) => {
                let mid = serenity::all::MessageId::new(id.parse().ok()?);
                let _ = channel
                    .edit_message(
                        &self.http,
                        mid,
                        serenity::all::EditMessage::new().content(text),
                    )
                    .await;
                Some(id.to_string())
            }
        }
    }

    async fn typing(&self, chat: &str) {
        if let Ok(channel) = Self::channel(chat) {
            let _ = channel.broadcast_typing(&self.http).await;
        }
    }

    fn topics(&self) -> bool {
        self.topics
    }

    async fn open_topic(&self, chat: &str, name: &str) -> anyhow::Result<String> {
        if !self.topics {
            anyhow::bail!("threads are off: set [gateway.discord] topics = true");
        }
        let channel = Self::channel(chat)?;
        let name: String = name.chars().take(100).collect();
        // A public thread with no starting message; it stays listed a week after its last
        // message (the longest auto-archive), and is archived when its session ends.
        let builder = serenity::all::CreateThread::new(name)
            .kind(serenity::all::ChannelType::PublicThread)
            .auto_archive_duration(serenity::all::AutoArchiveDuration::OneWeek);
        match channel.create_thread(&self.http, builder).await {
            Ok(t) => Ok(crate::platforms::topic::key(chat, &t.id.get().to_string())),
            Err(e) => anyhow::bail!(
                "Discord did not create a thread ({e}): the bot needs the Create Public Threads right in this channel"
            ),
        }
    }

    async fn reopen_topic(&self, chat: &str) {
        if crate::platforms::topic::split(chat).1.is_some()
            && let Ok(thread) = Self::channel(chat)
        {
            let edit = serenity::all::EditThread::new().archived(false);
            let _ = thread.edit_thread(&self.http, edit).await;
        }
    }

    async fn close_topic(&self, chat: &str) {
        if crate::platforms::topic::split(chat).1.is_some()
            && let Ok(thread) = Self::channel(chat)
        {
            let edit = serenity::all::EditThread::new().archived(true);
            if let Err(e) = thread.edit_thread(&self.http, edit).await {
                eprintln!("clibot-gateway: Discord did not archive thread {chat}: {e}");
            }
        }
    }
}

/// The bar beside a prompt's embed: amber, "waiting for you".
const PROMPT_COLOUR: u32 = 0xF5A623;

/// Whether a channel of this kind is a thread.
fn is_thread(kind: serenity::all::ChannelType) -> bool {
    use serenity::all::ChannelType as T;
    matches!(kind, T::PublicThread | T::PrivateThread | T::NewsThread)
}

/// Errors that retrying cannot fix — the bot lost access to the channel (403: Missing Access,
/// Missing Permissions, cannot message this user), or the channel is gone (404) — become
/// [`Gone`](crate::platforms::Gone); everything else stays a transient failure.
fn classify(e: serenity::Error) -> anyhow::Error {
    if let serenity::Error::Http(h) = &e
        && let Some(code) = h.status_code().map(|s| s.as_u16())
        && (code == 403 || code == 404)
    {
        return anyhow::Error::new(crate::platforms::Gone(format!(
            "Discord answered {code}: {e}"
        )));
    }
    e.into()
}

/// A prompt's buttons: at most 5 per row and 5 rows.
fn prompt_rows(prompt_id: &str, options: &[String]) -> Vec<CreateActionRow> {
    options
        .iter()
        .enumerate()
        .take(25)
        .map(|(i, o)| {
            let label: String = format!("{}. {o}", i + 1).chars().take(80).collect();
            CreateButton::new(crate::platforms::shown::button_data(prompt_id, i + 1)).label(label)
        })
        .collect::<Vec<_>>()
        .chunks(5)
        .map(|b| CreateActionRow::Buttons(b.to_vec()))
        .collect()
}

/// A Discord message id from its text.
fn message_id(message: &str) -> anyhow::Result<serenity::all::MessageId> {
    message
        .parse()
        .map(serenity::all::MessageId::new)
        .map_err(|_| anyhow::anyhow!("not a Discord message id: {message}"))
}

#[cfg(test)]
mod tests {
    //! The adapter against the fake Discord (and, for ingress, a real daemon).

    use std::time::Duration;

    use clibot_tests::Harness;
    use clibot_tests::fake_discord::FakeDiscord;
    use serenity::all::MessageId;

    use super::*;

    const TOKEN: &str = "fake.discord.token";
    const USER: u64 = 1_300_000_000_000_000_100;

    fn http(fake: &FakeDiscord) -> Arc<Http> {
        Arc::new(
            HttpBuilder::new(TOKEN)
                .proxy(fake.url())
                .ratelimiter_disabled(true)
                .build(),
        )
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn missing_access_is_gone_for_good() {
        let fake = FakeDiscord::start(TOKEN);
        fake.forbid_channel(13);
        let discord = Discord {
            http: http(&fake),
            bot_id: fake.bot_user_id(),
            topics: false,
            _lock: Arc::new(std::fs::File::open("/dev/null").expect("a file to hold")),
        };
        let e = discord.send("13", "hi").await.expect_err("403");
        let why = crate::platforms::gone(&e).expect("Missing Access is permanent");
        assert!(why.contains("403"), "{why}");
        let e = discord
            .remove_buttons("13", "1200000000000000001")
            .await
            .expect_err("403");
        assert!(crate::platforms::gone(&e).is_some(), "{e:#}");
        discord
            .send("14", "hi")
            .await
            .expect("another channel works");
        // A rate limit is waited out, a server error is not permanent.
        fake.fail_next(
            "/channels/14/messages",
            429,
            clibot_tests::fake_discord::rate_limit_body(0.1),
        );
        discord
            .send("14", "again")
            .await
            .expect("sent after the 429");
        fake.fail_next(
            "/channels/14/messages",
            500,
            clibot_tests::fake_discord::error_body(0, "500: Internal Server Error"),
        );
        let e = discord.send("14", "x").await.expect_err("500");
        assert!(crate::platforms::gone(&e).is_none(), "{e:#}");
    }

    struct Rig {
        fake: FakeDiscord,
        http: Arc<Http>,
        events: mpsc::UnboundedSender<Event>,
        rx: mpsc::Receiver<Inbound>,
    }

    /// The ingress task over the fake and a daemon, as `Discord::start` wires it.
    fn rig(h: &Harness) -> Rig {
        let fake = FakeDiscord::start(TOKEN);
        let http = http(&fake);
        let (tx, rx) = mpsc::channel(16);
        let (events, events_rx) = mpsc::unbounded_channel();
        let cursors = Cursors::default();
        let (acks, acks_rx) = mpsc::unbounded_channel();
        tokio::spawn(confirm(
            clibot_proto::Target::Socket(h.socket.clone()),
            cursors.clone(),
            acks_rx,
        ));
        let ingress = Ingress {
            http: http.clone(),
            socket: clibot_proto::Target::Socket(h.socket.clone()),
            tx,
            acks,
            cursors,
            recent: Bounded::default(),
            guild: Bounded::default(),
            topics: false,
            parents: Bounded::default(),
            backlog: Arc::default(),
        };
        tokio::spawn(ingress.run(events_rx));
        Rig {
            fake,
            http,
            events,
            rx,
        }
    }

    /// The next `n` messages handed over, each confirmed as the main loop does once handled.
    async fn take(rx: &mut mpsc::Receiver<Inbound>, n: usize) -> Vec<Inbound> {
        let mut got = Vec::new();
        while got.len() < n {
            let mut m = tokio::time::timeout(Duration::from_secs(20), rx.recv())
                .await
                .unwrap_or_else(|_| panic!("only {} of {n} messages handed over", got.len()))
                .expect("the ingress task runs");
            if let Some(ack) = m.ack.take() {
                let _ = ack.send(());
            }
            got.push(m);
        }
        got
    }

    /// Whether anything more is handed over within a while.
    async fn quiet(rx: &mut mpsc::Receiver<Inbound>) -> Option<Inbound> {
        tokio::time::timeout(Duration::from_millis(500), rx.recv())
            .await
            .ok()
            .flatten()
    }

    async fn cursor(h: &Harness, chat: u64) -> Option<String> {
        let list = h
            .client()
            .await
            .list_ingress(v1::ListIngressRequest {
                platform: "discord".into(),
            })
            .await
            .expect("ListIngress")
            .into_inner();
        list.cursors
            .into_iter()
            .find(|c| c.chat == chat.to_string())
            .map(|c| c.id)
    }

    async fn wait_cursor(h: &Harness, chat: u64, id: u64) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while cursor(h, chat).await != Some(id.to_string()) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "channel {chat} was never confirmed up to {id}: {:?}",
                cursor(h, chat).await
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn live(r: &Rig, channel: u64, id: u64) {
        let m = ChannelId::new(channel)
            .message(&r.http, MessageId::new(id))
            .await
            .expect("the message");
        let _ = r.events.send(Event::Live(Box::new(m)));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn missed_history_is_handed_over_in_order_once_and_confirmed() {
        // The sender may use clibot: only such a chat's ingress cursor is kept.
        let mut h = Harness::with_config(&format!("\n[access.discord]\nallow = [\"{USER}\"]\n"));
        h.start_daemon();
        let mut r = rig(&h);
        // The first catch-up finds no cursor: nothing to read.
        assert!(quiet(&mut r.rx).await.is_none());

        // Where the daemon says each channel stands: after the first message of each.
        let dm = 777;
        let guild = 666;
        let first_dm = r.fake.send_as_user(dm, USER, "ann", "seen before");
        let first_guild = r
            .fake
            .send_as_user_in_guild(99, guild, USER, "ann", "seen before");
        let mut c = h.client().await;
        for (chat, id) in [(dm, first_dm), (guild, first_guild)] {
            c.ack_ingress(v1::AckIngressRequest {
                platform: "discord".into(),
                chat: chat.to_string(),
                id: id.to_string(),
                user: USER.to_string(),
            })
            .await
            .expect("AckIngress");
        }
        // Missed: more than two pages in the DM, with the bot's own replies in between.
        let mut dm_ids = Vec::new();
        for i in 0..230 {
            dm_ids.push(r.fake.send_as_user(dm, USER, "ann", &format!("dm {i}")));
            if i % 50 == 0 {
                ChannelId::new(dm)
                    .say(&r.http, format!("reply {i}"))
                    .await
                    .expect("a bot message");
            }
        }
        let guild_ids: Vec<u64> = (0..3)
            .map(|i| {
                r.fake
                    .send_as_user_in_guild(99, guild, USER, "ann", &format!("g {i}"))
            })
            .collect();

        // A reconnect, with one of the missed messages also arriving live.
        let _ = r.events.send(Event::CatchUp);
        live(&r, dm, dm_ids[100]).await;
        let got = take(&mut r.rx, dm_ids.len() + guild_ids.len()).await;
        assert!(quiet(&mut r.rx).await.is_none(), "each id once");
        let handed = |chat: u64| -> Vec<(String, String, bool)> {
            got.iter()
                .filter(|m| m.chat == chat.to_string())
                .map(|m| (m.id.clone(), m.text.clone(), m.group))
                .collect()
        };
        let want_dm: Vec<(String, String, bool)> = dm_ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.to_string(), format!("dm {i}"), false))
            .collect();
        assert_eq!(handed(dm), want_dm, "oldest first, no bot messages");
        let want_guild: Vec<(String, String, bool)> = guild_ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.to_string(), format!("g {i}"), true))
            .collect();
        assert_eq!(handed(guild), want_guild, "a server channel stays a group");
        assert!(got.iter().all(|m| m.user == USER.to_string()));
        let pages = r
            .fake
            .calls()
            .iter()
            .filter(|(m, p, _)| m == "GET" && p == &format!("/api/v10/channels/{dm}/messages"))
            .count();
        assert_eq!(
            pages, 3,
            "235 messages after the cursor (5 of them the bot's) in pages of 100"
        );

        // Confirmed once handled, per channel.
        wait_cursor(&h, dm, dm_ids[229]).await;
        wait_cursor(&h, guild, guild_ids[2]).await;

        // A confirmed message that shows up again (live, or at the next reconnect) is not
        // handed over again.
        live(&r, dm, dm_ids[229]).await;
        let _ = r.events.send(Event::CatchUp);
        assert!(quiet(&mut r.rx).await.is_none());

        // Live messages that reach the handler out of order go in the channel's order.
        let a = r.fake.send_as_user(dm, USER, "ann", "a");
        let b = r.fake.send_as_user(dm, USER, "ann", "b");
        live(&r, dm, b).await;
        live(&r, dm, a).await;
        let got = take(&mut r.rx, 2).await;
        let order: Vec<&str> = got.iter().map(|m| m.text.as_str()).collect();
        assert_eq!(order, ["a", "b"]);
        wait_cursor(&h, dm, b).await;
    }
}
