//! The chat side: which chats are bound where (`chats`), who may use a session (`share`,
//! `pairing`), and what a chat sent and was shown (`transcript PLATFORM:CHAT`, oldest first).

use anyhow::{anyhow, bail};
use clibot_proto::{Client, v1};
use serde_json::json;

use super::audit_log::parse_since;
use super::output::{self, now_ms, print_json};

/// `chats`: the bindings, where delivery stands, and which are suspended.
pub async fn chats(c: &mut Client, json: bool) -> anyhow::Result<()> {
    let bindings = c
        .list_bindings(v1::ListBindingsRequest::default())
        .await?
        .into_inner()
        .bindings;
    if json {
        let rows: Vec<_> = bindings
            .iter()
            .map(|b| {
                serde_json::json!({
                    "platform": b.platform, "chat": b.chat, "session": b.session,
                    "group": b.group, "delivered_through": b.cursor,
                    "suspended": b.broken, "reason": b.broken_reason,
                })
            })
            .collect();
        return print_json(&serde_json::Value::Array(rows));
    }
    if bindings.is_empty() {
        println!("no chat is bound to a session");
    }
    for b in &bindings {
        let kind = if b.group { "group" } else { "direct" };
        let state = if b.broken {
            format!(
                "SUSPENDED: {} (resumes when someone writes there)",
                b.broken_reason
            )
        } else {
            format!("delivered through event {}", b.cursor)
        };
        println!(
            "{}:{} ({kind}) → {}  {state}",
            b.platform, b.chat, b.session
        );
    }
    Ok(())
}

/// `share`: lets `user` (PLATFORM:USER) use `name`, or with `revoke` takes it back.
pub async fn share(
    c: &mut Client,
    name: String,
    user: String,
    revoke: bool,
    json: bool,
) -> anyhow::Result<()> {
    let r = c
        .share_session(v1::ShareSessionRequest {
            session: name.clone(),
            user: user.clone(),
            revoke,
        })
        .await?
        .into_inner();
    if json {
        return print_json(&json!({"session": name, "shared_with": r.shared_with}));
    }
    if r.shared_with.is_empty() {
        println!("{name} is shared with nobody");
    } else {
        println!("{name} is shared with {}", r.shared_with.join(", "));
    }
    Ok(())
}

/// `pairing list`: pending codes and approved users.
pub async fn pairings(c: &mut Client, json: bool) -> anyhow::Result<()> {
    let r = c
        .list_pairings(v1::ListPairingsRequest {})
        .await?
        .into_inner();
    let row = |p: &v1::Pairing| serde_json::json!({"platform": p.platform, "user": p.user, "name": p.name, "code": p.code, "created_at_ms": p.created_at_ms});
    if json {
        let pending: Vec<_> = r.pending.iter().map(row).collect();
        let approved: Vec<_> = r.approved.iter().map(row).collect();
        return print_json(&serde_json::json!({"pending": pending, "approved": approved}));
    }
    if r.pending.is_empty() && r.approved.is_empty() {
        println!("no pairings: a chat user who writes to the bot gets a code to give you");
    }
    for p in &r.pending {
        println!(
            "pending   {}  {} user {} {}  ({} ago)",
            p.code,
            p.platform,
            p.user,
            p.name,
            output::ago(p.created_at_ms)
        );
    }
    for p in &r.approved {
        println!("approved  {} user {} {}", p.platform, p.user, p.name);
    }
    Ok(())
}

/// `pairing approve CODE`.
pub async fn approve(c: &mut Client, code: String, json: bool) -> anyhow::Result<()> {
    let r = c
        .approve_pairing(v1::ApprovePairingRequest { code })
        .await?
        .into_inner();
    if json {
        return print_json(&json!({"platform": r.platform, "user": r.user, "approved": true}));
    }
    println!("approved {} user {}", r.platform, r.user);
    Ok(())
}

/// `pairing revoke PLATFORM USER`.
pub async fn revoke(
    c: &mut Client,
    platform: String,
    user: String,
    json: bool,
) -> anyhow::Result<()> {
    c.revoke_access(v1::RevokeAccessRequest {
        platform: platform.clone(),
        user: user.clone(),
    })
    .await?;
    if json {
        return print_json(&json!({"platform": platform, "user": user, "revoked": true}));
    }
    println!("revoked {platform} user {user}");
    Ok(())
}

/// "telegram:100" → ("telegram", "100"); the chat id may itself hold colons.
pub fn parse_target(s: &str) -> anyhow::Result<(String, String)> {
    match s.split_once(':') {
        Some((p, c)) if !p.is_empty() && !c.is_empty() => Ok((p.to_string(), c.to_string())),
        _ => bail!("{s:?}: give the chat as PLATFORM:CHAT, e.g. telegram:123456789"),
    }
}

/// `transcript`: fetches and prints a chat's transcript.
pub async fn transcript(
    c: &mut Client,
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
                output::ago(e.time_ms),
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
