//! Slack's Web API, as far as the gateway needs it: `POST {api_url}/METHOD` with the bot token
//! (or, for `apps.connections.open`, the app token), JSON or form bodies, and the answer's
//! `{"ok": true, ...}`.
//!
//! Rate limits are HTTP 429 with `Retry-After` (seconds), per method and workspace (Slack's
//! tiers: `chat.postMessage` about one a second per channel, `chat.update` tier 3, uploads
//! tier 2–4). A 429 puts its method in a cooldown for `Retry-After`: until it is over, a
//! message waits it out before calling (within its
//! [`Budget`](crate::platforms::ratelimit::Budget)) and is sent then — never dropped — and a
//! best-effort call ([`Wait::No`]: a status edit) is skipped without calling, so edits neither
//! hold a reply up nor spend the method's quota while Slack asks for quiet. Errors that mean the bot can no longer post in a
//! channel become [`Gone`](crate::platforms::Gone).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE};
use serde_json::Value;

use crate::platforms::Gone;

/// A failed call's Slack error (`"error": "invalid_blocks"`).
#[derive(Debug)]
pub struct Failed {
    pub error: String,
    pub text: String,
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for Failed {}

/// The Slack error of a failed call, when Slack gave one.
pub fn error_of(e: &anyhow::Error) -> Option<&str> {
    e.downcast_ref::<Failed>().map(|f| f.error.as_str())
}

/// Why Slack will not take a message for a channel, whatever the retries, and what to do.
fn gone_reason(error: &str) -> Option<&'static str> {
    Some(match error {
        "channel_not_found" => {
            "no such channel, or the bot cannot see it (invite it: /invite @bot)"
        }
        "not_in_channel" => "the bot is not in this channel (invite it back: /invite @bot)",
        "is_archived" => "the channel was archived",
        "restricted_action" | "restricted_action_read_only_channel" => {
            "the workspace does not let the bot post here"
        }
        "cannot_dm_bot" => "the bot cannot write to another bot",
        "user_disabled" | "account_inactive" => "the user or the bot was deactivated",
        "team_access_not_granted" => "the app is not installed where this channel is",
        _ => return None,
    })
}

/// What a call does about rate limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Waits them out within the message's budget (and retries network failures).
    OutRateLimits,
    /// Gives up at once: best effort (a status edit is worth less than the quota).
    No,
}

/// Which token a call is made with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Token {
    Bot,
    App,
}

/// A request body.
pub enum Body {
    Json(Value),
    /// `application/x-www-form-urlencoded` (what `files.getUploadURLExternal` takes).
    Form(Vec<(&'static str, String)>),
}

pub struct Api {
    http: reqwest::Client,
    base: String,
    bot_token: String,
    app_token: String,
    /// Methods Slack rate-limited, and until when.
    cooldown: Mutex<HashMap<String, tokio::time::Instant>>,
}

/// Longest wait for one rate limit when Slack does not say.
const DEFAULT_RATE_WAIT: Duration = Duration::from_secs(1);
/// Longest wait Slack may ask for before a retry, bounded so a broken header cannot stall.
const MAX_RATE_WAIT: Duration = Duration::from_secs(120);
/// Attempts at a request that fails on the network before the error is returned.
const NETWORK_ATTEMPTS: u32 = 3;

impl Api {
    pub fn new(http: reqwest::Client, base: &str, bot_token: &str, app_token: &str) -> Api {
        Api {
            http,
            base: base.trim_end_matches('/').to_string(),
            bot_token: bot_token.to_string(),
            app_token: app_token.to_string(),
            cooldown: Mutex::new(HashMap::new()),
        }
    }

    /// When `method` may be called again, if Slack asked for quiet.
    fn quiet_until(&self, method: &str) -> Option<tokio::time::Instant> {
        let mut c = self.cooldown.lock().unwrap_or_else(|p| p.into_inner());
        let now = tokio::time::Instant::now();
        c.retain(|_, until| *until > now);
        c.get(method).copied()
    }

    fn cool_down(&self, method: &str, d: Duration) {
        let until = tokio::time::Instant::now() + d;
        let mut c = self.cooldown.lock().unwrap_or_else(|p| p.into_inner());
        let e = c.entry(method.to_string()).or_insert(until);
        *e = (*e).max(until);
    }

    /// One Web API call; the answer's JSON when `ok` is true. `channel` marks a call about a
    /// channel whose refusal may mean the channel is gone for the bot.
    pub async fn call(
        &self,
        method: &str,
        body: &Body,
        token: Token,
        wait: Wait,
        channel: bool,
    ) -> anyhow::Result<Value> {
        let url = format!("{}/{method}", self.base);
        let bearer = match token {
            Token::Bot => &self.bot_token,
            Token::App => &self.app_token,
        };
        let mut network_failures = 0;
        let mut budget = crate::platforms::ratelimit::Budget::new("Slack");
        loop {
            if let Some(until) = self.quiet_until(method) {
                if wait == Wait::No {
                    anyhow::bail!("Slack {method}: rate limited (skipped)");
                }
                budget
                    .wait(until.saturating_duration_since(tokio::time::Instant::now()))
                    .await?;
            }
            let req = self
                .http
                .post(&url)
                .header(AUTHORIZATION, format!("Bearer {bearer}"));
            let req = match body {
                Body::Json(v) => req
                    .header(CONTENT_TYPE, "application/json; charset=utf-8")
                    .body(v.to_string()),
                Body::Form(fields) => req.form(fields),
            };
            let r = match req.send().await {
                Ok(r) => r,
                Err(e) => {
                    network_failures += 1;
                    if wait == Wait::No || network_failures >= NETWORK_ATTEMPTS {
                        anyhow::bail!("Slack {method} failed: cannot reach {} ({e})", self.base);
                    }
                    tokio::time::sleep(Duration::from_millis(500) * network_failures).await;
                    continue;
                }
            };
            let status = r.status();
            let retry_after = retry_after(r.headers());
            let text = r.text().await.unwrap_or_default();
            let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let error = v["error"].as_str().unwrap_or_default().to_string();
            if status.as_u16() == 429 || error == "ratelimited" {
                let d = retry_after.unwrap_or(DEFAULT_RATE_WAIT);
                self.cool_down(method, d);
                if wait == Wait::No {
                    anyhow::bail!("Slack {method}: rate limited");
                }
                eprintln!(
                    "clibot-gateway: Slack rate limit on {method} (HTTP {status}); sending again in {d:?}"
                );
                continue;
            }
            if status.is_success() && v["ok"].as_bool() == Some(true) {
                return Ok(v);
            }
            if v.is_null() {
                let head: String = text.chars().take(200).collect();
                anyhow::bail!("Slack {method} answered HTTP {status}: {head}");
            }
            if channel && let Some(reason) = gone_reason(&error) {
                return Err(anyhow::Error::new(Gone(format!(
                    "Slack: {reason} ({error})"
                ))));
            }
            let hint = match error.as_str() {
                "invalid_auth" | "not_authed" | "token_revoked" | "token_expired" => {
                    "; the token is not valid: copy it again from the app's settings"
                }
                "not_allowed_token_type" => {
                    "; app_token must be the app-level token (xapp-…) and bot_token the bot token (xoxb-…)"
                }
                "missing_scope" => {
                    "; add the scope it names (needed) to the app's Bot Token Scopes and reinstall it"
                }
                _ => "",
            };
            let needed = v["needed"]
                .as_str()
                .map(|n| format!(" (needed: {n})"))
                .unwrap_or_default();
            return Err(anyhow::Error::new(Failed {
                text: format!("Slack {method} failed: {error}{needed}{hint}"),
                error,
            }));
        }
    }

    /// A bot-token call that waits out rate limits.
    pub async fn bot(&self, method: &str, body: Value) -> anyhow::Result<Value> {
        self.call(
            method,
            &Body::Json(body),
            Token::Bot,
            Wait::OutRateLimits,
            false,
        )
        .await
    }

    /// A bot-token call that writes to a channel (its refusal may mean the channel is gone).
    pub async fn to_channel(&self, method: &str, body: Value, wait: Wait) -> anyhow::Result<Value> {
        self.call(method, &Body::Json(body), Token::Bot, wait, true)
            .await
    }

    /// Uploads `data` as file `name` and shares it in `channel` (in thread `thread`, with
    /// `comment`): `files.getUploadURLExternal`, the bytes to the URL it gives, then
    /// `files.completeUploadExternal`.
    pub async fn upload(
        &self,
        channel: &str,
        thread: Option<&str>,
        name: &str,
        data: &[u8],
        comment: &str,
    ) -> anyhow::Result<()> {
        let name = if name.trim().is_empty() { "file" } else { name };
        let got = self
            .call(
                "files.getUploadURLExternal",
                &Body::Form(vec![
                    ("filename", name.to_string()),
                    ("length", data.len().to_string()),
                ]),
                Token::Bot,
                Wait::OutRateLimits,
                false,
            )
            .await?;
        let (Some(url), Some(id)) = (got["upload_url"].as_str(), got["file_id"].as_str()) else {
            anyhow::bail!("Slack gave no upload URL for {name}");
        };
        let r = self
            .http
            .post(url)
            .header(CONTENT_TYPE, "application/octet-stream")
            .body(data.to_vec())
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("cannot upload {name} to Slack ({e})"))?;
        if !r.status().is_success() {
            anyhow::bail!("Slack refused the upload of {name} (HTTP {})", r.status());
        }
        let mut body = serde_json::json!({
            "files": [{ "id": id, "title": name }],
            "channel_id": channel,
        });
        if let Some(t) = thread {
            body["thread_ts"] = t.into();
        }
        if !comment.trim().is_empty() {
            body["initial_comment"] = comment.into();
        }
        self.to_channel("files.completeUploadExternal", body, Wait::OutRateLimits)
            .await?;
        Ok(())
    }

    /// A file a user shared (`url_private_download`), at most `max` bytes. The bot token goes
    /// only to Slack's own file host or to the configured API's host: a URL elsewhere (a
    /// forged event) is refused rather than handed the token.
    pub async fn download(&self, url: &str, max: u64) -> anyhow::Result<Vec<u8>> {
        if !self.may_fetch(url) {
            anyhow::bail!("not a Slack file URL");
        }
        let mut r = self
            .http
            .get(url)
            .header(AUTHORIZATION, format!("Bearer {}", self.bot_token))
            .send()
            .await?;
        if !r.status().is_success() {
            anyhow::bail!(
                "Slack answered HTTP {} (grant the bot the files:read scope and reinstall the app)",
                r.status()
            );
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

    /// Whether `url` is on Slack's file host (https) or on the API's own host and scheme.
    fn may_fetch(&self, url: &str) -> bool {
        let origin = |u: &str| -> Option<String> {
            let (scheme, rest) = u.split_once("://")?;
            let host = rest.split(['/', '?', '#']).next()?;
            (!host.is_empty() && !host.contains('@')).then(|| format!("{scheme}://{host}"))
        };
        match origin(url) {
            Some(o) => o == "https://files.slack.com" || Some(o) == origin(&self.base),
            None => false,
        }
    }
}

/// `Retry-After` in seconds, bounded.
fn retry_after(h: &reqwest::header::HeaderMap) -> Option<Duration> {
    let secs: u64 = h.get("retry-after")?.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(secs).clamp(Duration::from_millis(200), MAX_RATE_WAIT))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(base: &str) -> Api {
        Api::new(reqwest::Client::new(), base, "xoxb-1", "xapp-1")
    }

    #[test]
    fn the_token_goes_only_to_slacks_file_host_or_the_apis_own() {
        let a = api("https://slack.com/api");
        assert!(a.may_fetch("https://files.slack.com/files-pri/T1-F1/download/a.png"));
        for bad in [
            "http://files.slack.com/files-pri/T1-F1/a.png",
            "https://files.slack.com.evil.example/a.png",
            "https://evil.example/https://files.slack.com/",
            "https://files.slack.com@evil.example/a",
            "file:///etc/passwd",
            "not a url",
        ] {
            assert!(!a.may_fetch(bad), "{bad}");
        }
        let local = api("http://127.0.0.1:8080/api/");
        assert!(local.may_fetch("http://127.0.0.1:8080/files-pri/T-F/a.txt"));
        assert!(!local.may_fetch("http://127.0.0.1:9090/files-pri/T-F/a.txt"));
    }

    #[tokio::test]
    async fn a_rate_limited_method_is_quiet_for_its_retry_after_and_others_are_not() {
        let a = api("https://slack.com/api");
        assert!(a.quiet_until("chat.update").is_none());
        a.cool_down("chat.update", Duration::from_secs(30));
        a.cool_down("chat.update", Duration::from_secs(1));
        let until = a.quiet_until("chat.update").expect("quiet");
        assert!(
            until > tokio::time::Instant::now() + Duration::from_secs(20),
            "the longer wait is kept"
        );
        assert!(a.quiet_until("chat.postMessage").is_none());
        // A best-effort call is skipped without reaching Slack (nothing listens at this URL).
        let e = a
            .call(
                "chat.update",
                &Body::Json(serde_json::json!({})),
                Token::Bot,
                Wait::No,
                true,
            )
            .await
            .expect_err("skipped");
        assert!(e.to_string().contains("skipped"), "{e}");
    }

    #[test]
    fn channel_refusals_are_gone_and_others_are_not() {
        assert!(gone_reason("not_in_channel").is_some());
        assert!(gone_reason("is_archived").is_some());
        assert!(gone_reason("invalid_blocks").is_none());
        assert!(gone_reason("ratelimited").is_none());
    }

    #[test]
    fn retry_after_is_read_and_bounded() {
        let mut h = reqwest::header::HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", "3".parse().expect("header"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
        h.insert("retry-after", "99999".parse().expect("header"));
        assert_eq!(retry_after(&h), Some(MAX_RATE_WAIT));
        h.insert("retry-after", "soon".parse().expect("header"));
        assert_eq!(retry_after(&h), None);
    }
}
