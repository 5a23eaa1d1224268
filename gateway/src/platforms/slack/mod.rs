//! Slack through Socket Mode (an outbound websocket: no public URL). Messages in DMs and in
//! the channels the bot was invited to become chat messages; a press on a prompt's button
//! becomes that prompt's answer. Replies go as `mrkdwn` text (chunked under Slack's limits),
//! prompts as Block Kit buttons, the running turn's status as a message edited in place
//! (`chat.update`), files and `!!shot` pictures through `files.getUploadURLExternal` and
//! `files.completeUploadExternal`. With `topics`, each session gets a thread of its own in a
//! channel, marked ✅ when the session ends.
//!
//! Why no Slack crate: the gateway needs a dozen Web API methods and Socket Mode's four frame
//! kinds, and the workspace already builds the HTTP client and the websocket it takes (for
//! Feishu). `slack-morphism` would add its own hyper client stack to a 2-core build, and its
//! socket listener acknowledges an envelope after the handler returns, where clibot
//! acknowledges once the daemon has the message ([`socket`]).
//!
//! [`socket`] keeps the connection, [`ingress`] reads envelopes, [`api`] makes the calls,
//! [`blocks`] builds what is posted.

mod api;
mod blocks;
mod ingress;
mod socket;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use clibot_gateway::chunk::{ChunkOptions, Measure, chunk};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::platforms::recent::Recent;
use crate::platforms::topic;
use crate::platforms::{Attachment, Inbound, Platform, Receiving};
use api::{Api, Wait};

/// Slack's Web API.
pub const DEFAULT_API_URL: &str = "https://slack.com/api";
/// Prompts remembered (to take their buttons off without losing their text).
const PROMPTS_KEPT: usize = 256;
/// Messages waiting for the router at most: beyond, an event is left unacknowledged and
/// Slack pushes it again later, so a flood costs bounded memory.
const QUEUED: usize = 1024;
/// The reaction that marks a session's thread as ended.
const ENDED: &str = "white_check_mark";

/// What the platform starts with (`[gateway.slack]`).
pub struct Settings<'a> {
    pub app_token: &'a str,
    pub bot_token: &'a str,
    pub api_url: &'a str,
    pub topics: bool,
}

pub struct Slack {
    api: Arc<Api>,
    /// `TEAM:BOT_USER`: the delivery cursor's key.
    who: String,
    topics: bool,
    /// The text of prompts sent lately, by `CHANNEL/TS`, oldest first.
    prompts: Mutex<VecDeque<(String, String)>>,
    /// Held while this process holds the app's socket: Slack spreads events over every open
    /// connection, so a second gateway would get about half of them.
    _lock: Arc<std::fs::File>,
}

/// Checks the tokens, learns who the bot is, and starts Socket Mode; messages arrive on the
/// returned channel.
pub async fn start(
    config: &Settings<'_>,
    prefix: &str,
    lock_dir: &std::path::Path,
    recv: &Receiving,
) -> anyhow::Result<(Slack, mpsc::Receiver<Inbound>)> {
    let (app_token, bot_token) = (config.app_token.trim(), config.bot_token.trim());
    if !app_token.starts_with("xapp-") {
        anyhow::bail!(
            "[gateway.slack] app_token must be the app-level token (xapp-…): Basic Information → App-Level Tokens, with the connections:write scope"
        );
    }
    if !bot_token.starts_with("xoxb-") {
        anyhow::bail!(
            "[gateway.slack] bot_token must be the bot token (xoxb-…): OAuth & Permissions → Bot User OAuth Token"
        );
    }
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(60))
        // The bot token is never carried across a redirect (Slack answers a file URL the
        // token may not read with one to its login page).
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| anyhow::anyhow!("cannot build the HTTP client: {e}"))?;
    let api_url = match config.api_url.trim() {
        "" => DEFAULT_API_URL,
        u => u,
    };
    let api = Arc::new(Api::new(http, api_url, bot_token, app_token));
    let me = api
        .bot("auth.test", json!({}))
        .await
        .map_err(|e| anyhow::anyhow!("Slack did not accept the bot token (auth.test): {e:#}"))?;
    let (team, bot_user) = (
        me["team_id"].as_str().unwrap_or_default().to_string(),
        me["user_id"].as_str().unwrap_or_default().to_string(),
    );
    let lock =
        crate::platforms::single_poller(recv, lock_dir, &format!("slack-{team}-{bot_user}"))?;
    let (queue, rx) = mpsc::channel(QUEUED);
    let mut ingress = ingress::Ingress {
        team: team.clone(),
        bot_user: bot_user.clone(),
        topics: config.topics,
        prefix: prefix.to_string(),
        recent: Recent::default(),
        queue,
    };
    let handler: socket::Handler = Arc::new(Mutex::new(move |v: &Value| ingress.handle(v)));
    recv.spawn(socket::run(api.clone(), recv.progress.clone(), handler));
    Ok((
        Slack {
            api,
            who: format!("{team}:{bot_user}"),
            topics: config.topics,
            prompts: Mutex::new(VecDeque::new()),
            _lock: lock,
        },
        rx,
    ))
}

/// A chat key as Slack's channel and thread.
fn place(chat: &str) -> (&str, Option<&str>) {
    topic::split(chat)
}

impl Slack {
    fn prompts(&self) -> MutexGuard<'_, VecDeque<(String, String)>> {
        self.prompts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Posts a message to a chat (in its thread, if it is one); its `ts`.
    async fn post(&self, chat: &str, mut body: Value, wait: Wait) -> anyhow::Result<String> {
        let (channel, thread) = place(chat);
        body["channel"] = channel.into();
        if let Some(t) = thread {
            body["thread_ts"] = t.into();
        }
        body["unfurl_links"] = false.into();
        body["unfurl_media"] = false.into();
        let v = self.api.to_channel("chat.postMessage", body, wait).await?;
        Ok(v["ts"].as_str().unwrap_or_default().to_string())
    }

    async fn update(
        &self,
        chat: &str,
        ts: &str,
        mut body: Value,
        wait: Wait,
    ) -> anyhow::Result<()> {
        let (channel, _) = place(chat);
        body["channel"] = channel.into();
        body["ts"] = ts.into();
        self.api
            .to_channel("chat.update", body, wait)
            .await
            .map(|_| ())
    }

    /// A reaction on a thread's first message, added or taken off; best effort.
    async fn mark(&self, chat: &str, on: bool) {
        let (channel, Some(thread)) = place(chat) else {
            return;
        };
        let method = if on {
            "reactions.add"
        } else {
            "reactions.remove"
        };
        let body = json!({ "channel": channel, "timestamp": thread, "name": ENDED });
        if let Err(e) = self.api.bot(method, body).await
            && !matches!(api::error_of(&e), Some("already_reacted" | "no_reaction"))
        {
            eprintln!("clibot-gateway: Slack {method} on thread {chat}: {e:#}");
        }
    }
}

#[async_trait]
impl Platform for Slack {
    fn name(&self) -> &str {
        "slack"
    }

    fn consumer(&self) -> String {
        format!("slack:{}", self.who)
    }

    fn max_message(&self) -> usize {
        blocks::MAX_TEXT_CHARS
    }

    fn max_file(&self) -> usize {
        // Slack takes up to 1 GB; replies this long are unreadable anyway.
        50 << 20
    }

    async fn send(&self, chat: &str, text: &str) -> anyhow::Result<()> {
        for part in chunk(
            text,
            &ChunkOptions::new(blocks::MAX_TEXT_CHARS, Measure::Chars),
        ) {
            if part.trim().is_empty() {
                continue;
            }
            let body = json!({ "text": blocks::mrkdwn(&part), "mrkdwn": true });
            self.post(chat, body, Wait::OutRateLimits).await?;
        }
        Ok(())
    }

    async fn send_prompt(
        &self,
        chat: &str,
        prompt_id: &str,
        text: &str,
        options: &[String],
    ) -> anyhow::Result<Option<String>> {
        let mut parts = chunk(
            text,
            &ChunkOptions::new(blocks::SECTION_CHARS, Measure::Chars),
        );
        // The buttons go under the last part; what comes before goes as text.
        let last = parts.pop().unwrap_or_default();
        for p in parts {
            let body = json!({ "text": blocks::escape(&p) });
            self.post(chat, body, Wait::OutRateLimits).await?;
        }
        let body = json!({
            "text": blocks::escape(&last),
            "blocks": blocks::prompt(&last, prompt_id, options),
        });
        let ts = match self.post(chat, body, Wait::OutRateLimits).await {
            Ok(ts) => ts,
            // Slack cannot take the blocks: the prompt goes as text, which lists the options,
            // so that a typed number answers it (retrying would fail the same way).
            Err(e) if api::error_of(&e) == Some("invalid_blocks") => {
                eprintln!(
                    "clibot-gateway: Slack refused a prompt's buttons in {chat} ({e:#}); sending it as text"
                );
                self.post(
                    chat,
                    json!({ "text": blocks::escape(&last) }),
                    Wait::OutRateLimits,
                )
                .await?;
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let mut kept = self.prompts();
        kept.push_back((ts.clone(), last));
        while kept.len() > PROMPTS_KEPT {
            kept.pop_front();
        }
        Ok(Some(ts))
    }

    async fn remove_buttons(&self, chat: &str, message: &str) -> anyhow::Result<()> {
        let text = self
            .prompts()
            .iter()
            .find(|(ts, _)| ts == message)
            .map(|(_, t)| t.clone());
        let body = json!({
            "text": blocks::escape(text.as_deref().unwrap_or("✓ answered")),
            "blocks": blocks::answered(text.as_deref()),
        });
        match self.update(chat, message, body, Wait::OutRateLimits).await {
            Ok(()) => {}
            // Deleted meanwhile: nobody can press it.
            Err(e) if api::error_of(&e) == Some("message_not_found") => {}
            Err(e) => return Err(e),
        }
        self.prompts().retain(|(ts, _)| ts != message);
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
        let text: String = text.chars().take(blocks::SECTION_CHARS).collect();
        let body = json!({
            "text": blocks::escape(&text),
            "blocks": blocks::prompt(&text, prompt_id, options),
        });
        self.update(chat, message, body, Wait::No).await
    }

    async fn pin(&self, chat: &str, message: &str, on: bool) -> anyhow::Result<()> {
        let (channel, _) = place(chat);
        let method = if on { "pins.add" } else { "pins.remove" };
        let body = json!({ "channel": channel, "timestamp": message });
        match self.api.to_channel(method, body, Wait::OutRateLimits).await {
            Ok(_) => Ok(()),
            Err(e) if matches!(api::error_of(&e), Some("already_pinned" | "no_pin")) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn send_file(
        &self,
        chat: &str,
        name: &str,
        text: &str,
        summary: &str,
    ) -> anyhow::Result<()> {
        self.send_bytes(chat, name, text.as_bytes(), summary).await
    }

    async fn send_bytes(
        &self,
        chat: &str,
        name: &str,
        data: &[u8],
        caption: &str,
    ) -> anyhow::Result<()> {
        let (channel, thread) = place(chat);
        let caption = blocks::escape(caption);
        self.api.upload(channel, thread, name, data, &caption).await
    }

    async fn send_image(
        &self,
        chat: &str,
        name: &str,
        png: &[u8],
        caption: &str,
    ) -> anyhow::Result<()> {
        self.send_bytes(chat, name, png, caption).await
    }

    async fn download(&self, file: &Attachment, max: u64) -> anyhow::Result<Vec<u8>> {
        self.api.download(&file.id, max).await
    }

    // A bot token cannot delete what a user wrote: `delete_message` stays "no", and the user is
    // told to delete a password message themselves.

    async fn status(&self, chat: &str, id: Option<&str>, text: &str) -> Option<String> {
        let body: String = text.chars().take(blocks::MAX_TEXT_CHARS).collect();
        let body = json!({ "text": blocks::escape(&body) });
        match id {
            None => self.post(chat, body, Wait::No).await.ok(),
            Some(ts) => {
                // Best effort: an edit refused (a rate limit) is simply skipped.
                let _ = self.update(chat, ts, body, Wait::No).await;
                Some(ts.to_string())
            }
        }
    }

    fn topics(&self) -> bool {
        self.topics
    }

    async fn open_topic(&self, chat: &str, name: &str) -> anyhow::Result<String> {
        if !self.topics {
            anyhow::bail!("threads are off: set [gateway.slack] topics = true");
        }
        // A thread grows from a message: this one heads it.
        let head = json!({ "text": format!("🧵 *{}*", blocks::escape(name)) });
        let ts = self.post(chat, head, Wait::OutRateLimits).await?;
        Ok(topic::key(chat, &ts))
    }

    async fn close_topic(&self, chat: &str) {
        self.mark(chat, true).await;
    }

    async fn reopen_topic(&self, chat: &str) {
        self.mark(chat, false).await;
    }
}
