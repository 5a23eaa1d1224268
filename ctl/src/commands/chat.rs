//! `clibotctl transcript PLATFORM:CHAT`: what a chat sent and was shown, oldest first.

use anyhow::{anyhow, bail};
use clibot_proto::v1;

use super::audit_log::parse_since;
use crate::output::now_ms;

/// "telegram:100" → ("telegram", "100"); the chat id may itself hold colons.
pub fn parse_target(s: &str) -> anyhow::Result<(String, String)> {
    match s.split_once(':') {
        Some((p, c)) if !p.is_empty() && !c.is_empty() => Ok((p.to_string(), c.to_string())),
        _ => bail!("{s:?}: give the chat as PLATFORM:CHAT, e.g. telegram:123456789"),
    }
}

/// Fetches and prints a chat's transcript.
pub async fn run(
    c: &mut clibot_proto::Client,
    target: &str,
    since: Option<&str>,
    lines: Option<u32>,
    json: bool,
) -> anyhow::Result<()> {
    let (platform, chat) = parse_target(target)?;
    let since_ms = match since {
        Some(s) => {
            // Durations only here; a bare number is still read as Unix ms.
            parse_since(s, now_ms()).map_err(|e| anyhow!("--since {e}"))?
        }
        None => 0,
    };
    let r = c
        .get_transcript(v1::GetTranscriptRequest {
            platform,
            chat,
            since_ms,
            limit: lines.unwrap_or(0),
        })
        .await?
        .into_inner();
    for e in &r.entries {
        if json {
            let line = serde_json::json!({
                "time_ms": e.time_ms, "dir": e.dir, "user": e.user,
                "session": e.session, "text": e.text,
            });
            println!("{}", serde_json::to_string(&line)?);
        } else {
            let who = if e.dir == "in" {
                format!("› {}", if e.user.is_empty() { "chat" } else { &e.user })
            } else {
                "‹".to_string()
            };
            println!(
                "{} ago  [{}] {who}: {}",
                crate::output::ago(e.time_ms),
                e.session,
                e.text.replace('\n', "\n    ")
            );
        }
    }
    if r.entries.is_empty() && !json {
        eprintln!("nothing recorded for this chat");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_platform_and_chat() {
        assert_eq!(
            parse_target("telegram:-100123").expect("valid"),
            ("telegram".into(), "-100123".into())
        );
        assert_eq!(
            parse_target("feishu:oc_a:b").expect("valid"),
            ("feishu".into(), "oc_a:b".into())
        );
        assert!(parse_target("telegram").is_err());
        assert!(parse_target(":1").is_err());
        assert!(parse_target("telegram:").is_err());
    }
}
