//! Running the daemon: `status`, `events`, `metrics`, `rules`, `reload` (the daemon re-reads
//! its config file and says what changed) and `audit` (read from the state directory's files).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::anyhow;
use clibot_proto::{Client, v1};
use tokio_stream::StreamExt;

use super::audit_log;
use super::output::{self, print_json};

/// `status`: version, paths, tmux, sessions, gateways and the daemon's warnings.
pub async fn status(c: &mut Client, json: bool) -> anyhow::Result<()> {
    let s = c.status(v1::StatusRequest {}).await?.into_inner();
    if json {
        return print_json(&serde_json::json!({
            "version": s.version, "pid": s.pid, "uptime_ms": s.uptime_ms, "socket": s.socket,
            "state_dir": s.state_dir, "tmux_args": s.tmux_args, "tmux_version": s.tmux_version,
            "tmux_reachable": s.tmux_reachable, "sessions": s.sessions, "last_seq": s.last_seq,
            "clis": s.clis, "config_file": s.config_file, "config_read_ms": s.config_read_ms, "warnings": s.warnings,
            "pending_prompts": s.pending_prompts,
            "gateways": s.gateways.iter().map(|g| serde_json::json!({
                "platform": g.platform, "state": g.state, "detail": g.detail,
                "last_heard_ms": g.last_heard_ms, "chats_bound": g.chats_bound,
                "deliveries": g.deliveries, "deliveries_failed": g.deliveries_failed, "reported_ms": g.reported_ms,
                "pid": g.pid, "last_progress_ms": g.last_progress_ms, "restarts": g.restarts,
                "last_restart_ms": g.last_restart_ms, "stalled": g.stalled,
                "stall_after_ms": g.stall_after_ms,
                "machines": g.machines.iter().map(|m| serde_json::json!({
                    "name": m.name, "reachable": m.down_since_ms == 0, "down_since_ms": m.down_since_ms,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        }));
    }
    // What needs a person comes first.
    match s.pending_prompts {
        1 => println!("1 prompt waiting (clibotctl pending)"),
        n => println!(
            "{n} prompts waiting{}",
            if n > 0 { " (clibotctl pending)" } else { "" }
        ),
    }
    println!(
        "clibotd {} (pid {}), up {}s",
        s.version,
        s.pid,
        s.uptime_ms / 1000
    );
    println!("socket:     {}", s.socket);
    println!("state dir:  {}", s.state_dir);
    println!("config:     {}", config_line(&s));
    let tmux = if s.tmux_reachable {
        s.tmux_version.clone()
    } else {
        "NOT FOUND".to_string()
    };
    println!("tmux:       {} ({})", tmux, s.tmux_args.join(" "));
    println!("sessions:   {}", s.sessions);
    println!("last event: {}", s.last_seq);
    println!("CLIs:       {}", s.clis.join(", "));
    if s.gateways.is_empty() {
        println!("gateway:    none has reported (start clibot-gateway)");
    }
    let now = output::now_ms();
    for g in &s.gateways {
        println!("gateway:    {}", g.describe(now));
    }
    for w in &s.warnings {
        println!("warning:    {w}");
    }
    Ok(())
}

/// `events`: prints the log from `since` (with `follow` alone: from the newest event on).
pub async fn events(
    c: &mut Client,
    socket: &clibot_proto::Target,
    follow: bool,
    since: Option<u64>,
    sessions: Vec<String>,
    json: bool,
) -> anyhow::Result<()> {
    // Following without --since starts at the newest event; the position is then known
    // and survives reconnects.
    let since = match since {
        Some(s) => s,
        None if follow => c.status(v1::StatusRequest {}).await?.into_inner().last_seq,
        None => 0,
    };
    watch_events(c, socket, since, sessions, follow, json).await
}

/// Prints events; with `follow`, keeps going across daemon restarts by resuming after the last
/// sequence number seen.
async fn watch_events(
    c: &mut Client,
    socket: &clibot_proto::Target,
    mut since: u64,
    sessions: Vec<String>,
    follow: bool,
    json: bool,
) -> anyhow::Result<()> {
    loop {
        let req = v1::WatchEventsRequest {
            since: Some(since),
            sessions: sessions.clone(),
            follow,
        };
        let result: anyhow::Result<()> = async {
            let mut stream = c.watch_events(req).await?.into_inner();
            while let Some(item) = stream.next().await {
                let ev = item?;
                if ev.seq > 0 {
                    since = ev.seq;
                }
                if json {
                    println!("{}", output::event_json(&ev));
                } else {
                    println!("{}", output::event_line(&ev));
                }
            }
            Ok(())
        }
        .await;
        if !follow {
            return result;
        }
        if let Err(e) = &result {
            eprintln!("clibotctl: event stream interrupted ({e}); reconnecting");
        }
        // The daemon went away: wait for it to come back and resume after the last event.
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            if let Ok(nc) = clibot_proto::connect_to(socket).await {
                *c = nc;
                break;
            }
        }
    }
}

/// `metrics`: the Prometheus text, as the daemon renders it.
pub async fn metrics(c: &mut Client) -> anyhow::Result<()> {
    let r = c.get_metrics(v1::GetMetricsRequest {}).await?.into_inner();
    print!("{}", r.text);
    Ok(())
}

/// `rules`: the approval rules with their counts, the guard, the decider and delegation.
pub async fn rules(c: &mut Client, json: bool) -> anyhow::Result<()> {
    let r = c.list_rules(v1::ListRulesRequest {}).await?.into_inner();
    if json {
        return print_json(&output::rules_json(&r));
    }
    print!("{}", r.describe());
    Ok(())
}

/// The running daemon's state directory, where `audit` reads without `--state-dir`.
pub async fn state_dir(c: &mut Client) -> anyhow::Result<PathBuf> {
    Ok(c.status(v1::StatusRequest {})
        .await?
        .into_inner()
        .state_dir
        .into())
}

/// `clibotctl audit`: the matching records of the audit log in `state_dir`.
pub fn audit(
    state_dir: &Path,
    session: &Option<String>,
    user: &Option<String>,
    since: &Option<String>,
    last: Option<usize>,
    json: bool,
) -> anyhow::Result<()> {
    let since_ms = since
        .as_deref()
        .map(|s| audit_log::parse_since(s, output::now_ms()))
        .transpose()
        .map_err(|e| anyhow!("--since {e}"))?;
    let filter = audit_log::Filter {
        session: session.clone(),
        user: user.clone(),
        since_ms,
        last,
    };
    let (records, bad) = audit_log::read(state_dir, &filter)?;
    for r in &records {
        if json {
            println!("{r}");
        } else {
            println!("{}", audit_log::line(r));
        }
    }
    if bad > 0 {
        eprintln!("clibotctl: skipped {bad} unreadable lines of the audit log");
    }
    Ok(())
}

/// `reload`: asks for the reload and prints what applies now and what needs a restart.
pub async fn reload(c: &mut Client, json: bool) -> anyhow::Result<()> {
    let r = c.reload(v1::ReloadRequest {}).await?.into_inner();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "reloaded": r.reloaded,
                "needs_restart": r.needs_restart,
                "warnings": r.warnings,
            }))?
        );
        return Ok(());
    }
    for w in &r.warnings {
        eprintln!("warning: {w}");
    }
    if r.reloaded.is_empty() && r.needs_restart.is_empty() {
        println!("reloaded: nothing changed");
    }
    if !r.reloaded.is_empty() {
        println!("reloaded: {}", r.reloaded.join(", "));
    }
    if !r.needs_restart.is_empty() {
        println!(
            "changed, applies after a restart (`systemctl --user restart clibotd`): {}",
            r.needs_restart.join(", ")
        );
    }
    Ok(())
}

/// The config file in use, when it was read, and whether it changed on disk since (then the
/// daemon runs on something else than the file says: `reload` reads it).
fn config_line(s: &v1::StatusResponse) -> String {
    if s.config_file.is_empty() {
        return "(defaults)".to_string();
    }
    let mut line = s.config_file.clone();
    if s.config_read_ms > 0 {
        line.push_str(&format!(
            " (read {} ago)",
            super::output::ago(s.config_read_ms)
        ));
        let modified = std::fs::metadata(&s.config_file)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as i64);
        if modified.is_some_and(|m| m > s.config_read_ms) {
            line.push_str(
                "; changed on disk since: `clibotctl reload` reads it (`clibotctl doctor` checks it first)",
            );
        }
    }
    line
}
