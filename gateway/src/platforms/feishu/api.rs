//! Feishu's REST API, as far as the gateway needs it: the tenant access token (cached, renewed
//! before it expires and once when Feishu calls it invalid), messages (create, PATCH a card),
//! file upload, the bot's own identity and a chat's kind.
//!
//! Every answer is `{"code":0,"msg":"success",...}`; a non-zero code is a failure. Rate limits
//! (HTTP 429, codes 99991400 and 230020) are waited out and the call is made again — never
//! dropped — except for best-effort calls ([`Wait::No`], the status card). Codes that mean the
//! bot can no longer post in a chat become [`Gone`](crate::platforms::Gone).

use std::time::{Duration, Instant};

use reqwest::Method;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::platforms::Gone;

/// The request-rate limit of the open platform (HTTP 429, or 400 on old APIs).
const RATE_LIMITED: i64 = 99991400;
/// The send-message rate limit (5 QPS per user or group).
const SEND_RATE_LIMITED: i64 = 230020;
/// Token codes after which the token is renewed and the call made once more: missing, invalid
/// (tenant, app) or expired access token.
const TOKEN_INVALID: [i64; 4] = [99991661, 99991663, 99991664, 99991671];

/// "Failed to create card content": the card JSON was refused.
pub const CARD_INVALID: i64 = 230099;
/// Feishu's answer to content it cannot take for the message type ("invalid content").
pub const CONTENT_INVALID: i64 = 230001;

/// A failed call's Feishu code (as the error says it).
#[derive(Debug)]
pub struct Failed {
    pub code: i64,
    pub text: String,
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for Failed {}

/// The Feishu code of a failed call, when Feishu gave one.
pub fn code_of(e: &anyhow::Error) -> Option<i64> {
    e.downcast_ref::<Failed>().map(|f| f.code)
}

/// Why Feishu will not take a message for a chat, whatever the retries, and what to do.
fn gone_reason(code: i64, msg: &str) -> Option<&'static str> {
    Some(match code {
        230002 => "the bot is not in this group (add it back to the group)",
        230006 => {
            "the app has no bot ability (enable Bot in the Feishu developer console and publish a version)"
        }
        230013 => {
            "the user is outside the app's availability scope (widen it in the developer console and publish a version)"
        }
        230027 => {
            "the app lacks the permission to post here (grant im:message:send_as_bot; external groups need the bot's external sharing)"
        }
        230029 => "the user has left the organisation",
        230034 => "no such chat (invalid receive_id)",
        230001 if msg.contains("receive_id") => "no such chat (invalid receive_id)",
        230035 => "the bot may not post here (the group is muted, or the user blocked the bot)",
        230038 => "bots cannot write in a private chat across organisations",
        230053 => "the user stopped the bot from sending messages",
        232009 => "the group was dissolved",
        99991672 => {
            "the app lacks the scope this call needs (grant im:message:send_as_bot in the developer console)"
        }
        _ => return None,
    })
}

/// Gone codes that concern the chat, not the one message: what a failed card update may
/// suspend a chat for (a card too old to edit, say, must not).
fn chat_gone(code: i64) -> bool {
    matches!(code, 230002 | 230006 | 232009 | 99991672)
}

/// What a call does about rate limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Waits them out (and retries network failures): the message must go.
    OutRateLimits,
    /// Gives up at once: best effort (a status update is worth less than the quota).
    No,
}

/// Which failures mean the chat is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Sending to a chat: every code of [`gone_reason`].
    Send,
    /// Editing one message: only codes about the chat.
    Edit,
    /// Not about a chat: nothing is gone.
    Other,
}

/// A request body.
pub enum Body {
    None,
    Json(Value),
    /// Built again for every attempt (a multipart form is consumed by sending it).
    Form(Box<dyn Fn() -> reqwest::multipart::Form + Send + Sync>),
}

struct Token {
    value: String,
    renew_at: Instant,
}

pub struct Api {
    http: reqwest::Client,
    base: String,
    app_id: String,
    app_secret: String,
    token: Mutex<Option<Token>>,
}

/// Longest wait for one rate limit.
const MAX_RATE_WAIT: Duration = Duration::from_secs(60);
/// Attempts at a request that fails on the network before the error is returned.
const NETWORK_ATTEMPTS: u32 = 3;

impl Api {
    pub fn new(http: reqwest::Client, base: &str, app_id: &str, app_secret: &str) -> Api {
        Api {
            http,
            base: base.trim_end_matches('/').to_string(),
            app_id: app_id.to_string(),
            app_secret: app_secret.to_string(),
            token: Mutex::new(None),
        }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// The tenant access token, fetched when there is none or it is about to expire.
    pub async fn token(&self) -> anyhow::Result<String> {
        let mut t = self.token.lock().await;
        if let Some(tok) = t.as_ref()
            && Instant::now() < tok.renew_at
        {
            return Ok(tok.value.clone());
        }
        let fresh = self.fetch_token().await?;
        let value = fresh.value.clone();
        *t = Some(fresh);
        Ok(value)
    }

    /// A new token, unless another caller already replaced `stale`.
    async fn renew(&self, stale: &str) -> anyhow::Result<String> {
        let mut t = self.token.lock().await;
        if let Some(tok) = t.as_ref()
            && tok.value != stale
        {
            return Ok(tok.value.clone());
        }
        let fresh = self.fetch_token().await?;
        let value = fresh.value.clone();
        *t = Some(fresh);
        Ok(value)
    }

    async fn fetch_token(&self) -> anyhow::Result<Token> {
        let url = format!(
            "{}/open-apis/auth/v3/tenant_access_token/internal",
            self.base
        );
        let body = json!({ "app_id": self.app_id, "app_secret": self.app_secret }).to_string();
        let mut wait = Duration::from_secs(1);
        loop {
            let r = self
                .http
                .post(&url)
                .header(CONTENT_TYPE, "application/json; charset=utf-8")
                .body(body.clone())
                .send()
                .await
                .map_err(|e| anyhow::anyhow!("cannot reach Feishu at {} ({e})", self.base))?;
            let status = r.status();
            let reset = rate_reset(r.headers());
            let text = r.text().await.unwrap_or_default();
            let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let code = v["code"].as_i64().unwrap_or(-1);
            if status.as_u16() == 429 || code == RATE_LIMITED {
                tokio::time::sleep(reset.unwrap_or(wait)).await;
                wait = (wait * 2).min(Duration::from_secs(30));
                continue;
            }
            let token = v["tenant_access_token"].as_str().unwrap_or_default();
            if code != 0 || token.is_empty() {
                let msg = v["msg"].as_str().unwrap_or(text.as_str());
                anyhow::bail!(
                    "Feishu refused app {}'s credentials (HTTP {status}, code {code}: {msg}); check [gateway.feishu] app_id and app_secret",
                    self.app_id
                );
            }
            // Renewed 3 minutes before it expires (as the Go SDK does); tokens live 2 hours.
            let life = Duration::from_secs(v["expire"].as_u64().unwrap_or(7200));
            let margin = Duration::from_secs(180).min(life / 2);
            return Ok(Token {
                value: token.to_string(),
                renew_at: Instant::now() + life - margin,
            });
        }
    }

    /// One API call: `path` (with its query) under the base URL, with the tenant token. Returns
    /// the answer's JSON when its code is 0.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: &Body,
        scope: Scope,
        wait: Wait,
    ) -> anyhow::Result<Value> {
        let url = format!("{}{path}", self.base);
        let what = format!("{method} {}", path.split('?').next().unwrap_or(path));
        let mut token = self.token().await?;
        let mut renewed = false;
        let mut network_failures = 0;
        let mut backoff = Duration::from_secs(1);
        // A message to a chat waits out rate limits within its budget; other calls (the
        // token, reading a chat) as long as it takes.
        let mut budget = crate::platforms::ratelimit::Budget::new("Feishu");
        loop {
            let mut req = self
                .http
                .request(method.clone(), &url)
                .header(AUTHORIZATION, format!("Bearer {token}"));
            req = match body {
                Body::None => req,
                Body::Json(v) => req
                    .header(CONTENT_TYPE, "application/json; charset=utf-8")
                    .body(v.to_string()),
                Body::Form(make) => req.multipart(make()),
            };
            let r = match req.send().await {
                Ok(r) => r,
                Err(e) => {
                    network_failures += 1;
                    if wait == Wait::No || network_failures >= NETWORK_ATTEMPTS {
                        anyhow::bail!("Feishu {what} failed: cannot reach {} ({e})", self.base);
                    }
                    tokio::time::sleep(Duration::from_millis(500) * network_failures).await;
                    continue;
                }
            };
            let status = r.status();
            let reset = rate_reset(r.headers());
            let text = r.text().await.unwrap_or_default();
            let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let code = match v["code"].as_i64() {
                Some(c) => c,
                None if status.is_success() && v.is_object() => 0,
                None => -1,
            };
            let msg = v["msg"].as_str().unwrap_or_default().to_string();
            if status.as_u16() == 429 || code == RATE_LIMITED || code == SEND_RATE_LIMITED {
                if wait == Wait::No {
                    anyhow::bail!("Feishu {what}: rate limited (code {code})");
                }
                let d = reset.unwrap_or(backoff);
                eprintln!(
                    "clibot-gateway: Feishu rate limit on {what} (HTTP {status}, code {code}); sending again in {d:?}"
                );
                if matches!(scope, Scope::Send) {
                    budget.wait(d).await?;
                } else {
                    tokio::time::sleep(d).await;
                }
                backoff = (backoff * 2).min(Duration::from_secs(30));
                continue;
            }
            if TOKEN_INVALID.contains(&code) && !renewed {
                token = self.renew(&token).await?;
                renewed = true;
                continue;
            }
            if code == 0 && status.is_success() {
                return Ok(v);
            }
            let gone = match scope {
                Scope::Send => gone_reason(code, &msg),
                Scope::Edit if chat_gone(code) => gone_reason(code, &msg),
                _ => None,
            };
            if let Some(reason) = gone {
                return Err(anyhow::Error::new(Gone(format!(
                    "Feishu: {reason} (code {code})"
                ))));
            }
            if code == -1 {
                let head: String = text.chars().take(200).collect();
                anyhow::bail!("Feishu {what} answered HTTP {status}: {head}");
            }
            return Err(anyhow::Error::new(Failed {
                code,
                text: format!("Feishu {what} failed (HTTP {status}, code {code}: {msg})"),
            }));
        }
    }

    /// The bot's own open_id (`GET /open-apis/bot/v3/info`), to see when a group mentions it.
    pub async fn bot_open_id(&self) -> anyhow::Result<String> {
        let v = self
            .call(
                Method::GET,
                "/open-apis/bot/v3/info",
                &Body::None,
                Scope::Other,
                Wait::OutRateLimits,
            )
            .await?;
        let id = v["bot"]["open_id"]
            .as_str()
            .or_else(|| v["data"]["bot"]["open_id"].as_str())
            .unwrap_or_default();
        if id.is_empty() {
            anyhow::bail!("Feishu's bot info has no open_id: is the app's Bot ability enabled?");
        }
        Ok(id.to_string())
    }

    /// Sends a message to chat `chat` (`oc_…`), or into a thread of it (`oc_…/om_ROOT`: a
    /// reply in the thread its root message heads); returns its id (`om_…`). The `uuid`
    /// makes the retries of this one call idempotent (Feishu sends a uuid at most once an
    /// hour).
    pub async fn create(
        &self,
        chat: &str,
        msg_type: &str,
        content: &Value,
        wait: Wait,
    ) -> anyhow::Result<String> {
        let (body, path) = match crate::platforms::topic::split(chat) {
            (_, Some(root)) => (
                Body::Json(json!({
                    "msg_type": msg_type,
                    "content": content.to_string(),
                    "reply_in_thread": true,
                    "uuid": uuid(),
                })),
                format!("/open-apis/im/v1/messages/{root}/reply"),
            ),
            (chat, None) => (
                Body::Json(json!({
                    "receive_id": chat,
                    "msg_type": msg_type,
                    "content": content.to_string(),
                    "uuid": uuid(),
                })),
                "/open-apis/im/v1/messages?receive_id_type=chat_id".to_string(),
            ),
        };
        let v = self
            .call(Method::POST, &path, &body, Scope::Send, wait)
            .await?;
        match v["data"]["message_id"].as_str() {
            Some(id) if !id.is_empty() => Ok(id.to_string()),
            _ => anyhow::bail!("Feishu sent the message but returned no message_id"),
        }
    }

    /// Replaces a card the bot sent with `card` (the whole card).
    pub async fn patch_card(&self, message: &str, card: &Value, wait: Wait) -> anyhow::Result<()> {
        if message.is_empty()
            || !message
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            anyhow::bail!("not a Feishu message id: {message:?}");
        }
        let body = Body::Json(json!({ "content": card.to_string() }));
        self.call(
            Method::PATCH,
            &format!("/open-apis/im/v1/messages/{message}"),
            &body,
            Scope::Edit,
            wait,
        )
        .await
        .map(|_| ())
    }

    /// Pins a message in its chat (`im/v1/pins`), or unpins it.
    pub async fn pin(&self, message: &str, on: bool) -> anyhow::Result<()> {
        if message.is_empty()
            || !message
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            anyhow::bail!("not a Feishu message id: {message:?}");
        }
        let (method, path, body) = if on {
            (
                Method::POST,
                "/open-apis/im/v1/pins".to_string(),
                Body::Json(json!({ "message_id": message })),
            )
        } else {
            (
                Method::DELETE,
                format!("/open-apis/im/v1/pins/{message}"),
                Body::None,
            )
        };
        self.call(method, &path, &body, Scope::Other, Wait::OutRateLimits)
            .await
            .map(|_| ())
    }

    /// Recalls (deletes) a message. Feishu lets a bot recall others' messages only in groups
    /// it administers.
    pub async fn delete_message(&self, message: &str) -> anyhow::Result<()> {
        if message.is_empty()
            || !message
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            anyhow::bail!("not a Feishu message id: {message:?}");
        }
        self.call(
            Method::DELETE,
            &format!("/open-apis/im/v1/messages/{message}"),
            &Body::None,
            Scope::Edit,
            Wait::OutRateLimits,
        )
        .await
        .map(|_| ())
    }

    /// Uploads a file for a file message; returns its `file_key`.
    pub async fn upload(&self, name: &str, bytes: Vec<u8>) -> anyhow::Result<String> {
        let name = name.to_string();
        let make = move || {
            let part = reqwest::multipart::Part::bytes(bytes.clone()).file_name(name.clone());
            reqwest::multipart::Form::new()
                .text("file_type", "stream")
                .text("file_name", name.clone())
                .part("file", part)
        };
        let v = self
            .call(
                Method::POST,
                "/open-apis/im/v1/files",
                &Body::Form(Box::new(make)),
                Scope::Send,
                Wait::OutRateLimits,
            )
            .await?;
        match v["data"]["file_key"].as_str() {
            Some(k) if !k.is_empty() => Ok(k.to_string()),
            _ => anyhow::bail!("Feishu took the file but returned no file_key"),
        }
    }

    /// The resource (an image or a file) message `message_id` carries, at most `max` bytes
    /// (`GET im/v1/messages/{id}/resources/{key}?type=image|file`).
    pub async fn download(
        &self,
        message_id: &str,
        key: &str,
        kind: &str,
        max: u64,
    ) -> anyhow::Result<Vec<u8>> {
        let safe = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-".contains(&b))
        };
        if !safe(message_id) || !safe(key) || !matches!(kind, "image" | "file") {
            anyhow::bail!("not a Feishu resource");
        }
        let url = format!(
            "{}/open-apis/im/v1/messages/{message_id}/resources/{key}?type={kind}",
            self.base
        );
        let token = self.token().await?;
        let mut r = self
            .http
            .get(&url)
            .header(AUTHORIZATION, format!("Bearer {token}"))
            .send()
            .await?;
        if !r.status().is_success() {
            anyhow::bail!("Feishu answered HTTP {}", r.status());
        }
        let mut data = Vec::new();
        while let Some(chunk) = r.chunk().await? {
            data.extend_from_slice(&chunk);
            if data.len() as u64 > max {
                anyhow::bail!("it has more than {max} bytes");
            }
        }
        Ok(data)
    }

    /// Uploads a picture for a message (`im/v1/images`, `image_type` `message`); its key.
    pub async fn upload_image(&self, bytes: Vec<u8>) -> anyhow::Result<String> {
        let make = move || {
            let part = reqwest::multipart::Part::bytes(bytes.clone()).file_name("screen.png");
            reqwest::multipart::Form::new()
                .text("image_type", "message")
                .part("image", part)
        };
        let v = self
            .call(
                Method::POST,
                "/open-apis/im/v1/images",
                &Body::Form(Box::new(make)),
                Scope::Send,
                Wait::OutRateLimits,
            )
            .await?;
        match v["data"]["image_key"].as_str() {
            Some(k) if !k.is_empty() => Ok(k.to_string()),
            _ => anyhow::bail!("Feishu took the picture but returned no image_key"),
        }
    }

    /// Whether a chat is a group (`chat_mode` other than `p2p`), for a button press, whose
    /// callback does not say.
    pub async fn chat_is_group(&self, chat: &str) -> anyhow::Result<bool> {
        if chat.is_empty() || !chat.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            anyhow::bail!("not a Feishu chat id: {chat:?}");
        }
        let v = self
            .call(
                Method::GET,
                &format!("/open-apis/im/v1/chats/{chat}"),
                &Body::None,
                Scope::Other,
                Wait::OutRateLimits,
            )
            .await?;
        match v["data"]["chat_mode"].as_str() {
            Some(mode) => Ok(mode != "p2p"),
            None => anyhow::bail!("Feishu's chat info has no chat_mode"),
        }
    }
}

/// How long Feishu asks to wait (`x-ogw-ratelimit-reset`, seconds), within reason.
fn rate_reset(h: &reqwest::header::HeaderMap) -> Option<Duration> {
    let secs: f64 = h
        .get("x-ogw-ratelimit-reset")?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| {
        Duration::from_secs_f64(secs)
            .max(Duration::from_millis(200))
            .min(MAX_RATE_WAIT)
    })
}

pub use crate::platforms::recent::random;

/// A message's `uuid` (≤ 50 characters).
fn uuid() -> String {
    format!("clibot-{:016x}{:016x}", random(), random())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_level_codes_are_gone_and_others_are_not() {
        for code in [230002, 230013, 230035, 230053, 232009] {
            assert!(gone_reason(code, "").is_some(), "{code}");
        }
        assert!(gone_reason(230001, "invalid receive_id").is_some());
        assert!(gone_reason(230001, "invalid msg_type").is_none());
        for code in [0, 230020, 99991400, 230025, 230099, 1500] {
            assert!(gone_reason(code, "").is_none(), "{code}");
        }
        // Editing: a message-level refusal never suspends the chat.
        assert!(chat_gone(230002) && !chat_gone(230027) && !chat_gone(230013));
    }

    #[test]
    fn the_rate_limit_reset_is_read_and_bounded() {
        let mut h = reqwest::header::HeaderMap::new();
        assert_eq!(rate_reset(&h), None);
        h.insert("x-ogw-ratelimit-reset", "2".parse().expect("value"));
        assert_eq!(rate_reset(&h), Some(Duration::from_secs(2)));
        h.insert("x-ogw-ratelimit-reset", "0".parse().expect("value"));
        assert_eq!(rate_reset(&h), Some(Duration::from_millis(200)));
        h.insert("x-ogw-ratelimit-reset", "9999".parse().expect("value"));
        assert_eq!(rate_reset(&h), Some(MAX_RATE_WAIT));
        h.insert("x-ogw-ratelimit-reset", "soon".parse().expect("value"));
        assert_eq!(rate_reset(&h), None);
    }

    #[test]
    fn uuids_are_short_and_distinct() {
        let (a, b) = (uuid(), uuid());
        assert_ne!(a, b);
        assert!(a.len() <= 50, "{a}");
    }
}
