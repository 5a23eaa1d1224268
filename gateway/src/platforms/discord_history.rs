//! A Discord channel's history, read even when one message in it cannot be read.
//!
//! Why: catch-up after a restart reads each channel's history page by page. Discord's JSON
//! may hold what serenity's types refuse — a lone UTF-16 surrogate in a message's text (`\ud800`
//! with nothing after it), a field of an unexpected shape — and one such message used to fail
//! its whole page, every time: the channel's catch-up never got past it. A page serenity cannot
//! decode is fetched again as plain JSON, lone surrogates become U+FFFD, and each message is
//! decoded on its own; one that still cannot be is skipped (its id still moves the cursor on).

use std::time::Duration;

use serenity::all::{ChannelId, GetMessages, Http, LightMethod, Message, MessageId, Route};
use serenity::http::Request;

/// One page of `channel`'s history after message `after`, oldest or newest first as Discord
/// answers, waiting out rate limits; with the messages that cannot be read left out, the
/// highest id seen (read or not), and how many the page held.
pub async fn page(
    http: &Http,
    channel: u64,
    after: u64,
    limit: u8,
) -> Result<(Vec<Message>, u64, usize), serenity::Error> {
    let mut wait = Duration::from_millis(500);
    loop {
        let get = GetMessages::new()
            .after(MessageId::new(after.max(1)))
            .limit(limit);
        match ChannelId::new(channel).messages(http, get).await {
            Ok(page) => {
                let top = page.iter().map(|m| m.id.get()).max().unwrap_or(after);
                let n = page.len();
                return Ok((page, top, n));
            }
            Err(serenity::Error::Http(e)) if e.status_code().is_some_and(|s| s.as_u16() == 429) => {
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(10));
            }
            Err(serenity::Error::Json(_)) => return lenient(http, channel, after, limit).await,
            Err(e) => return Err(e),
        }
    }
}

/// The page as plain JSON, decoded message by message.
async fn lenient(
    http: &Http,
    channel: u64,
    after: u64,
    limit: u8,
) -> Result<(Vec<Message>, u64, usize), serenity::Error> {
    let req = Request::new(
        Route::ChannelMessages {
            channel_id: ChannelId::new(channel),
        },
        LightMethod::Get,
    )
    .params(Some(vec![
        ("after", after.max(1).to_string()),
        ("limit", limit.to_string()),
    ]));
    let text = http.request(req).await?.text().await?;
    let values: Vec<serde_json::Value> = serde_json::from_str(&without_lone_surrogates(&text))?;
    let mut top = after;
    let mut out = Vec::new();
    let n = values.len();
    for v in values {
        let id = v
            .get("id")
            .and_then(serde_json::Value::as_str)
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0);
        top = top.max(id);
        match serde_json::from_value::<Message>(v) {
            Ok(m) => out.push(m),
            Err(e) => eprintln!(
                "clibot-gateway: Discord message {id} in channel {channel} cannot be read ({e}); skipped"
            ),
        }
    }
    Ok((out, top, n))
}

/// `text` (JSON) with every `\uD800`–`\uDFFF` escape that is not one half of a pair made
/// `\uFFFD`, which JSON parsers accept.
pub fn without_lone_surrogates(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let unit = |at: usize| -> Option<u16> {
        let hex = b.get(at + 2..at + 6)?;
        (b.get(at) == Some(&b'\\') && b.get(at + 1) == Some(&b'u'))
            .then(|| u16::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok())
            .flatten()
    };
    let mut last = 0;
    while i < b.len() {
        if b[i] == b'\\' {
            // An escaped backslash is text, not the start of an escape.
            if b.get(i + 1) == Some(&b'\\') {
                i += 2;
                continue;
            }
            if let Some(u) = unit(i) {
                let high = (0xD800..0xDC00).contains(&u);
                let low = (0xDC00..0xE000).contains(&u);
                let paired = high && unit(i + 6).is_some_and(|n| (0xDC00..0xE000).contains(&n));
                if paired {
                    i += 12;
                    continue;
                }
                if high || low {
                    out.push_str(&text[last..i]);
                    out.push_str("\\uFFFD");
                    i += 6;
                    last = i;
                    continue;
                }
                i += 6;
                continue;
            }
        }
        i += 1;
    }
    out.push_str(&text[last..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lone_surrogates_are_replaced_and_pairs_kept() {
        let raw = r#"[{"c":"a\ud800b"},{"c":"\ud83d\ude00"},{"c":"\udc00"},{"c":"\\ud800"}]"#;
        let fixed = without_lone_surrogates(raw);
        let v: Vec<serde_json::Value> = serde_json::from_str(&fixed).expect("valid JSON now");
        assert_eq!(v[0]["c"], "a\u{FFFD}b");
        assert_eq!(v[1]["c"], "😀");
        assert_eq!(v[2]["c"], "\u{FFFD}");
        assert_eq!(v[3]["c"], "\\ud800", "an escaped backslash is text");
        assert!(serde_json::from_str::<Vec<serde_json::Value>>(raw).is_err());
    }
}
