//! The sessions' lifecycle: `list`, `show`, `spawn`, `stop`, `restart`, `adopt`, `release`,
//! `attach` and `delegate`.

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};
use clibot_proto::{Client, v1};
use serde_json::json;

use super::output::{self, print_json};

/// The filters that found nothing, for the message that says so ("in state waiting, of cli
/// codex"); empty when none was given.
fn no_match_filters(cli: Option<&str>, state: v1::SessionState, dir: &str) -> String {
    let mut parts = Vec::new();
    if state != v1::SessionState::Unspecified {
        parts.push(format!("in state {}", output::state_name(state as i32)));
    }
    if let Some(cli) = cli {
        parts.push(format!("of cli {cli}"));
    }
    if !dir.is_empty() {
        parts.push(format!("in {dir}"));
    }
    parts.join(", ")
}

/// `list`'s filters: only sessions of `cli`, in `state`, in `dir` or below it.
pub async fn list(
    c: &mut Client,
    json: bool,
    cli: Option<String>,
    state: Option<String>,
    dir: Option<PathBuf>,
) -> anyhow::Result<()> {
    let state = match state {
        Some(s) => output::parse_state(&s).ok_or_else(|| {
            anyhow!("unknown state {s:?}: use starting, idle, working, waiting, exited, error, declared or hibernated")
        })?,
        None => v1::SessionState::Unspecified,
    };
    let dir = dir
        .map(|d| absolute(&d))
        .transpose()?
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let filters = no_match_filters(cli.as_deref(), state, &dir);
    let req = v1::ListSessionsRequest {
        cli: cli.unwrap_or_default(),
        dir,
        state: state as i32,
    };
    let sessions = c.list_sessions(req).await?.into_inner().sessions;
    if json {
        return print_json(&serde_json::Value::Array(
            sessions.iter().map(output::session_json).collect(),
        ));
    }
    if sessions.is_empty() && !filters.is_empty() {
        println!("no sessions {filters}; `clibotctl list` shows them all");
    } else if sessions.is_empty() {
        println!("no sessions; start one with `clibotctl spawn NAME --cli shell`");
    } else {
        print!("{}", output::session_table(&sessions));
    }
    Ok(())
}

pub async fn show(c: &mut Client, name: String, json: bool) -> anyhow::Result<()> {
    let s = c
        .get_session(v1::GetSessionRequest {
            name,
            details: true,
        })
        .await?
        .into_inner();
    if json {
        return print_json(&output::session_json(&s));
    }
    print!("{}", output::session_details(&s));
    Ok(())
}

/// `spawn`'s request: `dir` made absolute (default: the current directory), each `env` entry
/// split at its `=`.
pub fn spawn_request(
    name: String,
    cli: String,
    dir: Option<PathBuf>,
    env: Vec<String>,
    args: Vec<String>,
    delegate: bool,
) -> anyhow::Result<v1::SpawnSessionRequest> {
    let dir = match dir {
        Some(d) => absolute(&d)?,
        None => std::env::current_dir().context("cannot read the current directory; pass --dir")?,
    };
    let mut envs = std::collections::HashMap::new();
    for kv in env {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| anyhow!("--env {kv:?}: write KEY=VALUE"))?;
        envs.insert(k.to_string(), v.to_string());
    }
    Ok(v1::SpawnSessionRequest {
        name,
        cli,
        dir: dir.display().to_string(),
        args,
        env: envs,
        delegate,
        ..Default::default()
    })
}

/// Starts the session and says how to attach to it.
pub async fn spawn(c: &mut Client, req: v1::SpawnSessionRequest, json: bool) -> anyhow::Result<()> {
    let s = c.spawn_session(req).await?.into_inner();
    if json {
        return print_json(&output::session_json(&s));
    }
    println!(
        "spawned {} ({}) in {}; attach with `clibotctl attach {}`",
        s.name, s.cli, s.dir, s.name
    );
    if let Some(w) = &s.worktree {
        println!(
            "it works on branch {} from {}, in a worktree of {} (your checkout there is not touched)",
            w.branch, w.base, w.repo
        );
    }
    if !s.isolate.is_empty() {
        println!(
            "note: {}; `clibotctl worktree isolate {}` starts it again in a worktree of its own (before you send it anything)",
            s.isolate, s.name
        );
    }
    Ok(())
}

/// `timeout` in seconds (already checked to be 0.001 to 3600); `None` leaves it to the daemon.
pub async fn stop(
    c: &mut Client,
    name: String,
    force: bool,
    timeout: Option<f64>,
    json: bool,
) -> anyhow::Result<()> {
    // 0 asks for the daemon's default ([daemon] stop_timeout_ms).
    let timeout_ms = timeout
        .filter(|t| *t > 0.0)
        .map(|t| ((t * 1000.0) as u32).max(1))
        .unwrap_or(0);
    let call = c.stop_session(v1::StopSessionRequest {
        session: name.clone(),
        force,
        timeout_ms,
    });
    tokio::pin!(call);
    // A graceful quit can take up to the timeout: after a second, say what is being waited for
    // (to a person at a terminal; scripts read the result).
    let r = tokio::select! {
        r = &mut call => r,
        _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {
            if !json && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                eprintln!("stopping {name}: waiting for the CLI to quit…");
            }
            call.await
        }
    }?
    .into_inner();
    if json {
        return print_json(&json!({
            "session": name, "forced": r.forced || force, "exit_status": r.exit_status,
        }));
    }
    let how = if force {
        "killed"
    } else if r.forced {
        "did not quit in time; killed"
    } else {
        "quit"
    };
    match r.exit_status {
        Some(code) => println!("stopped {name}: {how} (exit status {code})"),
        None => println!("stopped {name}: {how}"),
    }
    Ok(())
}

pub async fn route(
    c: &mut Client,
    text: String,
    dir: Option<PathBuf>,
    name: Option<String>,
    dry_run: bool,
    json: bool,
) -> anyhow::Result<()> {
    let text = if text == "-" {
        let mut t = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut t)
            .context("cannot read the task from stdin")?;
        t
    } else {
        text
    };
    let dir = match dir {
        Some(d) => absolute(&d)?,
        None => std::env::current_dir().context("cannot read the current directory; pass --dir")?,
    };
    let r = c
        .route(v1::RouteRequest {
            text,
            dir: dir.display().to_string(),
            name: name.unwrap_or_default(),
            dry_run,
        })
        .await?
        .into_inner();
    if json {
        return print_json(&serde_json::json!({
            "cli": r.cli,
            "by": r.by,
            "why": r.why,
            "session": r.session.as_ref().map(output::session_json),
        }));
    }
    match &r.session {
        Some(s) => println!(
            "{} ({}: {}); started {} in {} with the task; attach with `clibotctl attach {}`",
            r.cli, r.by, r.why, s.name, s.dir, s.name
        ),
        None => println!("{} ({}: {})", r.cli, r.by, r.why),
    }
    Ok(())
}

pub async fn discover(c: &mut Client, json: bool) -> anyhow::Result<()> {
    let found = c.discover(v1::DiscoverRequest {}).await?.into_inner().found;
    if json {
        let v: Vec<serde_json::Value> = found
            .iter()
            .map(|f| {
                let place = match f.where_kind.as_str() {
                    "tmux" => json!({"kind": "tmux", "server": f.server, "pane": f.pane}),
                    "tty" => json!({"kind": "tty", "tty": f.tty}),
                    _ => json!({"kind": "none"}),
                };
                json!({
                    "id": f.id,
                    "cli": f.cli,
                    "version": f.version,
                    "pid": f.pid,
                    "dir": f.dir,
                    "started_ms": f.started_ms,
                    "where": place,
                    "conversation_id": (!f.conversation_id.is_empty()).then_some(&f.conversation_id),
                    "actions": f.actions,
                    "watched": (!f.watched.is_empty()).then_some(&f.watched),
                })
            })
            .collect();
        return print_json(&serde_json::Value::Array(v));
    }
    if found.is_empty() {
        println!("no AI CLI runs outside clibot");
        return Ok(());
    }
    for f in &found {
        let place = match f.where_kind.as_str() {
            "tmux" => format!("tmux {} pane {}", f.server, f.pane),
            "tty" => f.tty.clone(),
            _ => "no terminal".into(),
        };
        let version = if f.version.is_empty() {
            String::new()
        } else {
            format!(" {}", f.version)
        };
        let conversation = if f.conversation_id.is_empty() {
            String::new()
        } else {
            format!(", conversation {}", f.conversation_id)
        };
        let watched = if f.watched.is_empty() {
            String::new()
        } else {
            format!("; watched as {} through the global hooks", f.watched)
        };
        println!(
            "{}  {}{version} in {} ({place}{conversation}{watched})",
            f.id, f.cli, f.dir
        );
    }
    Ok(())
}

pub async fn resume(
    c: &mut Client,
    id: String,
    name: Option<String>,
    quit: bool,
    json: bool,
) -> anyhow::Result<()> {
    let found = c.discover(v1::DiscoverRequest {}).await?.into_inner().found;
    let Some(f) = found.into_iter().find(|f| f.id == id) else {
        bail!("no CLI {id:?} runs outside clibot now: `clibotctl discover` lists the ones that do");
    };
    if f.conversation_id.is_empty() {
        bail!(
            "which conversation {id} holds is not known (its records are ambiguous): start a session with `clibotctl spawn NAME --cli {} --dir {} --resume CONVERSATION_ID`",
            f.cli,
            f.dir
        );
    }
    let name = name.unwrap_or_else(|| f.id.clone());
    // The original goes first: two processes on one conversation write over each other (Codex
    // calls it "open in another app").
    let mut quit_note = String::new();
    if quit {
        let pid = rustix::process::Pid::from_raw(f.pid as i32)
            .ok_or_else(|| anyhow!("{id} has no valid process id"))?;
        rustix::process::kill_process(pid, rustix::process::Signal::TERM)
            .with_context(|| format!("cannot ask process {} to quit", f.pid))?;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let gone = || {
            std::fs::read_to_string(format!("/proc/{}/stat", f.pid)).map_or(true, |s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
            })
        };
        while !gone() && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        quit_note = if gone() {
            format!("; process {} quit", f.pid)
        } else {
            format!("; process {} was asked to quit and still runs", f.pid)
        };
    }
    let s = c
        .spawn_session(v1::SpawnSessionRequest {
            name,
            cli: f.cli.clone(),
            dir: f.dir.clone(),
            resume: f.conversation_id.clone(),
            ..Default::default()
        })
        .await?
        .into_inner();
    if json {
        let mut v = output::session_json(&s);
        v["conversation_id"] = json!(f.conversation_id);
        v["quit"] = json!(quit);
        return print_json(&v);
    }
    println!(
        "{} ({}) continues conversation {} in {}{quit_note}; attach with `clibotctl attach {}`",
        s.name, s.cli, f.conversation_id, s.dir, s.name
    );
    Ok(())
}

pub async fn start(c: &mut Client, name: String, json: bool) -> anyhow::Result<()> {
    let s = c
        .start_session(v1::StartSessionRequest { name })
        .await?
        .into_inner();
    if json {
        return print_json(&output::session_json(&s));
    }
    println!("started {} ({}) in {}", s.name, s.cli, s.dir);
    Ok(())
}

pub async fn restart(
    c: &mut Client,
    name: String,
    fresh: bool,
    profile: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    let s = c
        .restart_session(v1::RestartSessionRequest {
            session: name.clone(),
            fresh,
            profile: profile.clone().unwrap_or_default(),
        })
        .await?
        .into_inner();
    if json {
        return print_json(&output::session_json(&s));
    }
    let how = match (fresh, s.resumable) {
        (_, false) => "",
        (true, true) => " with a new conversation",
        // A switch of profile says itself whether the conversation went along (in its events).
        (false, true) if profile.is_some() => "",
        (false, true) => ", resuming its conversation",
    };
    let with = profile
        .map(|p| format!(" with profile {p}"))
        .unwrap_or_default();
    println!("restarted {} ({}){with}{how}", s.name, s.cli);
    Ok(())
}

/// What `clibotctl adopt` names.
pub struct Adoption {
    pub target: String,
    pub cli: Option<String>,
    pub name: Option<String>,
    pub pane: Option<String>,
    pub server: Option<String>,
    pub found: Option<String>,
}

pub async fn adopt(c: &mut Client, a: Adoption, json: bool) -> anyhow::Result<()> {
    let in_place = a.pane.is_some() || a.found.is_some();
    let req = if in_place {
        v1::AdoptSessionRequest {
            name: a.target,
            cli: a.cli.unwrap_or_default(),
            server: a.server.unwrap_or_default(),
            pane: a.pane.unwrap_or_default(),
            found: a.found.unwrap_or_default(),
            ..Default::default()
        }
    } else {
        let Some(cli) = a.cli else {
            bail!(
                "say which CLI runs in tmux session {}: --cli claude (or codex, gemini, opencode, shell, ...)",
                a.target
            );
        };
        v1::AdoptSessionRequest {
            tmux_session: a.target,
            cli,
            name: a.name.unwrap_or_default(),
            ..Default::default()
        }
    };
    let s = c.adopt_session(req).await?.into_inner();
    if json {
        return print_json(&output::session_json(&s));
    }
    if s.server.is_empty() {
        println!(
            "adopted tmux session {} as {} ({})",
            s.tmux_session, s.name, s.cli
        );
    } else {
        println!(
            "adopted {} ({}) where it runs: tmux session {} on the server at {}; `clibotctl release {}` lets it go again",
            s.name, s.cli, s.tmux_session, s.server, s.name
        );
    }
    if s.resumable && s.conversation_id.is_empty() {
        eprintln!("{}", no_conversation_yet(&s.name));
    }
    Ok(())
}

/// Said when a CLI that keeps conversations is adopted before it wrote one: its replies are
/// read from that record, so they may be empty until then (`ask` then exits 1, not 0).
pub fn no_conversation_yet(name: &str) -> String {
    format!(
        "note: {name} has no conversation on disk yet, so its replies may come back empty until its CLI writes one (after its first answer); `clibotctl screen {name}` shows what it shows"
    )
}

pub async fn release(c: &mut Client, name: String, json: bool) -> anyhow::Result<()> {
    c.release_session(v1::ReleaseSessionRequest {
        session: name.clone(),
    })
    .await?;
    if json {
        return print_json(&json!({"session": name, "released": true}));
    }
    println!("released {name}; it keeps running in tmux");
    Ok(())
}

/// Replaces this process with the daemon's attach command; only returns on failure.
pub async fn attach(c: &mut Client, name: String) -> anyhow::Result<()> {
    let s = c
        .get_session(v1::GetSessionRequest {
            name,
            ..Default::default()
        })
        .await?
        .into_inner();
    let (prog, args) = s
        .attach_command
        .split_first()
        .ok_or_else(|| anyhow!("the daemon sent no attach command"))?;
    use std::os::unix::process::CommandExt;
    // Replaces this process; only returns on failure. TMUX is cleared so that attaching
    // from inside another tmux works (as a nested client).
    let err = std::process::Command::new(prog)
        .args(args)
        .env_remove("TMUX")
        .exec();
    bail!("cannot run {prog}: {err}");
}

pub async fn delegate(
    c: &mut Client,
    name: String,
    cli: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    let s = c
        .delegate(v1::DelegateRequest {
            session: name.clone(),
            cli: cli.unwrap_or_default(),
        })
        .await?
        .into_inner();
    if json {
        return print_json(&output::session_json(&s));
    }
    println!(
        "{name}'s work continues in {} ({}); its chats moved there; attach with `clibotctl attach {}`",
        s.name, s.cli, s.name
    );
    Ok(())
}

fn absolute(p: &Path) -> anyhow::Result<PathBuf> {
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    let cwd = std::env::current_dir()
        .context("cannot read the current directory; pass an absolute --dir")?;
    Ok(cwd.join(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_filtered_list_names_its_filters() {
        assert_eq!(
            no_match_filters(Some("codex"), v1::SessionState::Waiting, "/src"),
            "in state waiting, of cli codex, in /src"
        );
        assert_eq!(
            no_match_filters(None, v1::SessionState::Unspecified, ""),
            ""
        );
    }
}
