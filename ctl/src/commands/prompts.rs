//! What waits: `pending` (every prompt waiting anywhere, oldest first), and a session's running
//! turn and its queue (`cancel`, `queue`, `drop`).

use clibot_proto::{Client, v1};
use serde_json::json;

use super::output::{human, print_json};

/// The sessions that wait on a prompt, with it, oldest first.
pub async fn waiting(c: &mut Client) -> anyhow::Result<Vec<(v1::Session, v1::Prompt)>> {
    let sessions = c
        .list_sessions(v1::ListSessionsRequest::default())
        .await?
        .into_inner()
        .sessions;
    let mut out: Vec<(v1::Session, v1::Prompt)> = sessions
        .into_iter()
        .filter(|s| s.state == v1::SessionState::Waiting as i32)
        .filter_map(|mut s| {
            let p = s.prompt.take()?;
            Some((s, p))
        })
        .collect();
    out.sort_by_key(|(s, p)| (since(p), s.name.clone()));
    Ok(out)
}

/// When a prompt began to wait; one not published yet counts as now.
fn since(p: &v1::Prompt) -> i64 {
    if p.waiting_since_ms > 0 {
        p.waiting_since_ms
    } else {
        now_ms()
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

pub async fn pending(c: &mut Client, json: bool) -> anyhow::Result<()> {
    let list = waiting(c).await?;
    let now = now_ms();
    if json {
        let v: Vec<serde_json::Value> = list
            .iter()
            .map(|(s, p)| {
                json!({
                    "session": s.name,
                    "prompt_id": p.id,
                    "kind": p.kind_name(),
                    "text": p.text,
                    "options": p.options,
                    "subject": p.subject,
                    "waiting_since_ms": since(p),
                    "age_ms": (now - since(p)).max(0),
                })
            })
            .collect();
        return print_json(&serde_json::Value::Array(v));
    }
    if list.is_empty() {
        println!("no prompt is waiting");
        return Ok(());
    }
    for (s, p) in &list {
        let age = std::time::Duration::from_millis((now - since(p)).max(0) as u64);
        println!(
            "{} ({}) waiting {}: {}",
            s.name,
            s.cli,
            human(age),
            p.text.lines().next().unwrap_or("")
        );
        if !p.subject.is_empty() {
            println!("    {}", p.subject);
        }
        for (i, o) in p.options.iter().enumerate() {
            println!("    {}. {o}", i + 1);
        }
        println!(
            "    answer: clibotctl answer {} N --prompt {}",
            s.name, p.id
        );
    }
    Ok(())
}

pub async fn cancel(c: &mut Client, name: String, json: bool) -> anyhow::Result<()> {
    let r = c
        .cancel_turn(v1::CancelTurnRequest {
            session: name.clone(),
        })
        .await?
        .into_inner();
    if json {
        return print_json(&json!({"session": name, "how": r.how, "queued": r.queued}));
    }
    let next = match r.queued {
        0 => String::new(),
        1 => "; 1 queued input goes next (clibotctl drop NAME 1 takes it back)".to_string(),
        n => format!("; {n} queued inputs go next (clibotctl queue shows them)"),
    };
    println!("cancelled {name}'s turn ({}){next}", r.how);
    Ok(())
}

pub async fn queue(c: &mut Client, name: String, json: bool) -> anyhow::Result<()> {
    let q = c
        .list_queue(v1::ListQueueRequest {
            session: name.clone(),
        })
        .await?
        .into_inner();
    let inputs = q.inputs;
    if json {
        let v: Vec<serde_json::Value> = inputs
            .iter()
            .enumerate()
            .map(|(i, t)| json!({"position": i + 1, "text": t}))
            .collect();
        return print_json(&serde_json::Value::Array(v));
    }
    if q.omitted > 0 {
        // Said first, on stderr: the list below is not all of it.
        eprintln!(
            "clibotctl: {} more queued message(s) ({} bytes) after the {} listed are not shown (more than one answer carries); `clibotctl drop {name} N` still takes any back",
            q.omitted,
            q.omitted_bytes,
            inputs.len()
        );
    }
    if inputs.is_empty() {
        println!("nothing is queued for {name}");
    }
    for (i, t) in inputs.iter().enumerate() {
        let first: String = t.lines().next().unwrap_or("").chars().take(100).collect();
        let more = if t.lines().count() > 1 || first.len() < t.len() {
            " …"
        } else {
            ""
        };
        println!("{}. {first}{more}", i + 1);
    }
    Ok(())
}

pub async fn drop_queued(
    c: &mut Client,
    name: String,
    position: u32,
    json: bool,
) -> anyhow::Result<()> {
    let r = c
        .drop_queued(v1::DropQueuedRequest {
            session: name.clone(),
            position,
        })
        .await?
        .into_inner();
    if json {
        return print_json(&json!({"session": name, "dropped": r.dropped, "left": r.left}));
    }
    println!("dropped {} from {name}'s queue; {} left", r.dropped, r.left);
    Ok(())
}
