//! `clibotctl`: the command line for people and scripts. A thin client of clibotd.
//!
//! Exit codes: 0 ok, 1 error (the daemon's message is printed), 2 usage.

mod commands;
mod connect;
mod doctor;
mod output;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use clap::{Parser, Subcommand};
use clibot_proto::v1;
use tokio_stream::StreamExt;

use crate::commands::{audit_log, chat as transcript, hook, io as last, ops as reload};

/// clibotctl — drive AI coding CLIs running under clibotd.
#[derive(Debug, Parser)]
#[command(version, about, propagate_version = true)]
struct Cli {
    /// The daemon's socket [default: $XDG_RUNTIME_DIR/clibot/clibotd.sock]
    #[arg(long, global = true, env = "CLIBOT_SOCKET", value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Do not start clibotd when none is running.
    #[arg(long, global = true, env = "CLIBOT_NO_AUTOSTART", value_parser = clap::builder::FalseyValueParser::new())]
    no_autostart: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Daemon status: version, paths, tmux, sessions.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// List sessions.
    #[command(alias = "ls")]
    List {
        #[arg(long)]
        json: bool,
        /// Only sessions of this CLI.
        #[arg(long)]
        cli: Option<String>,
        /// Only sessions in this state (starting, idle, working, waiting, exited, error).
        #[arg(long)]
        state: Option<String>,
        /// Only sessions in this directory or below it.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Show one session.
    Show {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Start a CLI in a new session.
    Spawn {
        name: String,
        /// A configured CLI: claude, codex, gemini, opencode, shell, or one from [cli.NAME].
        #[arg(long)]
        cli: String,
        /// Working directory [default: the current directory].
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Extra environment, KEY=VALUE (repeatable).
        #[arg(long = "env", value_name = "KEY=VALUE")]
        env: Vec<String>,
        /// Extra arguments for the CLI, after `--`.
        #[arg(last = true)]
        args: Vec<String>,
        /// Hand the work to another CLI if this one hits an error listed in `[delegation] on`
        /// (its usage limit, a rate limit, ...).
        #[arg(long)]
        delegate: bool,
        #[arg(long)]
        json: bool,
    },
    /// Type text into a session and submit it (`-` reads the text from stdin).
    Send {
        name: String,
        text: String,
        /// Type the text without pressing Enter.
        #[arg(long)]
        no_submit: bool,
    },
    /// Press named keys: Enter, Escape, Tab, Up, Down, C-c, y, 1, ...
    Keys {
        name: String,
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// Print what the session's pane shows.
    Screen {
        name: String,
        /// The last N lines, scrollback included [default: the visible screen].
        #[arg(long, short = 'n')]
        lines: Option<u32>,
        /// Keep colours and attributes (escape sequences).
        #[arg(long, short = 'e')]
        escapes: bool,
    },
    /// Stop a session: the CLI's graceful quit, then a kill after the timeout.
    Stop {
        name: String,
        /// Kill at once.
        #[arg(long)]
        force: bool,
        /// Seconds the graceful quit may take, 0.001 to 3600 [default: the daemon's, 5].
        #[arg(long, value_parser = parse_timeout)]
        timeout: Option<f64>,
    },
    /// Start a session's CLI again (after it exited, or ending it first), resuming its
    /// conversation: same name, directory, arguments and environment.
    Restart {
        name: String,
        /// Start a new conversation instead of resuming the previous one.
        #[arg(long)]
        fresh: bool,
    },
    /// Manage a tmux session that already runs on clibot's tmux server.
    Adopt {
        /// The tmux session's name (or $id).
        tmux_session: String,
        #[arg(long)]
        cli: String,
        /// The session's clibot name [default: the tmux name].
        #[arg(long)]
        name: Option<String>,
    },
    /// Stop managing a session; it keeps running in tmux.
    Release { name: String },
    /// Print events from the durable log.
    Events {
        /// Keep printing new events.
        #[arg(long, short = 'f')]
        follow: bool,
        /// Only events after this sequence number [default: 0, everything retained; with
        /// --follow alone: only new ones].
        #[arg(long)]
        since: Option<u64>,
        /// Only this session (repeatable).
        #[arg(long = "session")]
        sessions: Vec<String>,
        #[arg(long)]
        json: bool,
    },
    /// Attach this terminal to the session (tmux attach); detach with the tmux prefix, then d.
    Attach { name: String },
    /// Answer the prompt a session waits on: an option number, yes/no/always, or free text.
    Answer {
        name: String,
        answer: String,
        /// The prompt's id (from the waiting event); refuses to answer a different prompt.
        #[arg(long)]
        prompt: Option<String>,
    },
    /// Print the final reply of the session's last completed turn.
    Last { name: String },
    /// Let a chat user use a session made by someone else (PLATFORM:USER, e.g.
    /// telegram:123456789, as `!!whoami` shows it); --revoke takes it back.
    Share {
        name: String,
        user: String,
        #[arg(long)]
        revoke: bool,
    },
    /// What a chat sent and was shown (PLATFORM:CHAT, e.g. telegram:123456789), oldest first.
    Transcript {
        chat: String,
        /// Only entries since: a duration back from now (30s, 15m, 2h, 1d).
        #[arg(long, value_name = "DURATION")]
        since: Option<String>,
        /// Only the last N entries [default: 100, at most 1000].
        #[arg(short = 'n', long = "lines", value_name = "N")]
        lines: Option<u32>,
        /// One JSON object a line.
        #[arg(long)]
        json: bool,
    },
    /// The daemon's metrics, in the Prometheus text format.
    Metrics,
    /// Re-read the config file: access, rules, guard, decider, delegation, allowed roots and
    /// CLIs apply at once; says which changed sections need a daemon restart. An invalid file
    /// changes nothing.
    Reload {
        #[arg(long)]
        json: bool,
    },
    /// The approval rules with how often each fired, the guard, the decider and delegation.
    Rules {
        #[arg(long)]
        json: bool,
    },
    /// Hand a session's work to another CLI now: starts NAME-CLI in the same directory, types
    /// the last request with a handoff, moves the session's chats to it.
    Delegate {
        name: String,
        /// The CLI to continue in [default: the next of `[delegation] to`].
        cli: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Chats bound to sessions: where delivery stands, and which chats are suspended.
    Chats {
        #[arg(long)]
        json: bool,
    },
    /// Chat users: pending pairing codes, approvals, revocations.
    Pairing {
        #[command(subcommand)]
        action: PairingAction,
    },
    /// Check the installation (tmux, daemon, socket and state permissions, CLIs, hooks,
    /// systemd units, gateways, config) and say how to fix each problem; exit 1 on a failure.
    Doctor {
        #[arg(long)]
        json: bool,
    },
    /// Print the audit log (every accepted or refused action), oldest first.
    Audit {
        /// Only this session.
        #[arg(long)]
        session: Option<String>,
        /// Only this actor: a chat user's id, PLATFORM:USER, or "local".
        #[arg(long)]
        user: Option<String>,
        /// Only records since: a duration back from now (30s, 15m, 2h, 1d) or Unix ms.
        #[arg(long, value_name = "DURATION_OR_MS")]
        since: Option<String>,
        /// Only the last N matching records.
        #[arg(short = 'n', long = "lines", value_name = "N")]
        lines: Option<usize>,
        /// The state directory [default: the running daemon's].
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Entry point for CLI hooks: reads the hook's JSON from stdin and hands it to clibotd.
    /// Never fails the CLI: with no daemon it exits 0 at once.
    #[command(hide = true)]
    Hook {
        /// Which CLI's hook this is.
        #[arg(long)]
        cli: String,
        /// The event name, for CLIs that do not put it in the payload.
        event: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum PairingAction {
    /// Pending codes and approved users.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Let the chat user who was given CODE act.
    Approve { code: String },
    /// Take access away from a user (platform: telegram, discord, feishu, console).
    Revoke { platform: String, user: String },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Hook { cli: name, event } = &cli.command {
        return hook::run(cli.socket.clone(), name, event.as_deref().unwrap_or(""));
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("clibotctl: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            match e.downcast_ref::<tonic::Status>() {
                Some(s) => eprintln!("clibotctl: {}", s.message()),
                None => eprintln!("clibotctl: {e:#}"),
            }
            ExitCode::FAILURE
        }
    }
}

fn parse_timeout(s: &str) -> Result<f64, String> {
    let t: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if (0.001..=3600.0).contains(&t) {
        Ok(t)
    } else {
        Err("must be between 0.001 and 3600 seconds".into())
    }
}

fn absolute(p: &Path) -> anyhow::Result<PathBuf> {
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    let cwd = std::env::current_dir()
        .context("cannot read the current directory; pass an absolute --dir")?;
    Ok(cwd.join(p))
}

fn print_json(v: &serde_json::Value) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let configured = cli.socket.clone().or_else(connect::configured_socket);
    let explicit = configured.is_some();
    let socket = configured.unwrap_or_else(clibot_proto::default_socket_path);
    match &cli.command {
        Command::Doctor { json } => {
            if !doctor::run(&socket, *json).await? {
                bail!("doctor found failures (FAIL above); fix them and run it again");
            }
            return Ok(());
        }
        Command::Audit {
            session,
            user,
            since,
            lines,
            state_dir: Some(dir),
            json,
        } => return audit(dir, session, user, since, *lines, *json),
        _ => {}
    }
    let mut c = connect::client(&socket, !cli.no_autostart, explicit).await?;
    match cli.command {
        Command::Status { json } => {
            let s = c.status(v1::StatusRequest {}).await?.into_inner();
            if json {
                return print_json(&serde_json::json!({
                    "version": s.version, "pid": s.pid, "uptime_ms": s.uptime_ms, "socket": s.socket,
                    "state_dir": s.state_dir, "tmux_args": s.tmux_args, "tmux_version": s.tmux_version,
                    "tmux_reachable": s.tmux_reachable, "sessions": s.sessions, "last_seq": s.last_seq,
                    "clis": s.clis, "config_file": s.config_file, "warnings": s.warnings,
                    "gateways": s.gateways.iter().map(|g| serde_json::json!({
                        "platform": g.platform, "state": g.state, "detail": g.detail,
                        "last_heard_ms": g.last_heard_ms, "chats_bound": g.chats_bound,
                        "deliveries": g.deliveries, "deliveries_failed": g.deliveries_failed, "reported_ms": g.reported_ms,
                        "pid": g.pid,
                    })).collect::<Vec<_>>(),
                }));
            }
            println!(
                "clibotd {} (pid {}), up {}s",
                s.version,
                s.pid,
                s.uptime_ms / 1000
            );
            println!("socket:     {}", s.socket);
            println!("state dir:  {}", s.state_dir);
            println!(
                "config:     {}",
                if s.config_file.is_empty() {
                    "(defaults)"
                } else {
                    &s.config_file
                }
            );
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
        }
        Command::List {
            json,
            cli,
            state,
            dir,
        } => {
            let state = match state {
                Some(s) => output::parse_state(&s).ok_or_else(|| {
                    anyhow!(
                        "unknown state {s:?}: use starting, idle, working, waiting, exited or error"
                    )
                })?,
                None => v1::SessionState::Unspecified,
            };
            let dir = dir
                .map(|d| absolute(&d))
                .transpose()?
                .map(|d| d.display().to_string())
                .unwrap_or_default();
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
            if sessions.is_empty() {
                println!("no sessions; start one with `clibotctl spawn NAME --cli shell`");
            } else {
                print!("{}", output::session_table(&sessions));
            }
        }
        Command::Show { name, json } => {
            let s = c
                .get_session(v1::GetSessionRequest { name })
                .await?
                .into_inner();
            if json {
                return print_json(&output::session_json(&s));
            }
            for (k, v) in output::session_json(&s).as_object().into_iter().flatten() {
                println!("{k:<17} {v}");
            }
        }
        Command::Spawn {
            name,
            cli,
            dir,
            env,
            args,
            delegate,
            json,
        } => {
            let dir = match dir {
                Some(d) => absolute(&d)?,
                None => std::env::current_dir()
                    .context("cannot read the current directory; pass --dir")?,
            };
            let mut envs = std::collections::HashMap::new();
            for kv in env {
                let (k, v) = kv
                    .split_once('=')
                    .ok_or_else(|| anyhow!("--env {kv:?}: write KEY=VALUE"))?;
                envs.insert(k.to_string(), v.to_string());
            }
            let req = v1::SpawnSessionRequest {
                name,
                cli,
                dir: dir.display().to_string(),
                args,
                env: envs,
                delegate,
            };
            let s = c.spawn_session(req).await?.into_inner();
            if json {
                return print_json(&output::session_json(&s));
            }
            println!(
                "spawned {} ({}) in {}; attach with `clibotctl attach {}`",
                s.name, s.cli, s.dir, s.name
            );
        }
        Command::Send {
            name,
            text,
            no_submit,
        } => {
            // Past one gRPC message nothing is sent: the daemon's own limit ([daemon]
            // max_input_bytes) is far below it and says so for anything smaller.
            let most = clibot_proto::MAX_MESSAGE - 64 * 1024;
            let text = if text == "-" {
                let mut buf = String::new();
                std::io::stdin()
                    .take(most as u64 + 1)
                    .read_to_string(&mut buf)
                    .context("cannot read the text from stdin")?;
                buf
            } else {
                text
            };
            if text.len() > most {
                bail!(
                    "the text is over {most} bytes, more than one message to clibotd carries; the daemon takes at most [daemon] max_input_bytes (64 KiB unless configured): send a file's path instead"
                );
            }
            let req = v1::SendInputRequest {
                session: name.clone(),
                text,
                submit: !no_submit,
                ..Default::default()
            };
            if c.send_input(req).await?.get_ref().queued {
                eprintln!(
                    "queued: {name} is busy; the text is delivered when the current turn ends"
                );
            }
        }
        Command::Keys { name, keys } => {
            c.send_keys(v1::SendKeysRequest {
                session: name,
                keys,
            })
            .await?;
        }
        Command::Screen {
            name,
            lines,
            escapes,
        } => {
            let r = c
                .capture(v1::CaptureRequest {
                    session: name,
                    lines: lines.unwrap_or(0),
                    escapes,
                })
                .await?;
            print!("{}", r.into_inner().text);
        }
        Command::Stop {
            name,
            force,
            timeout,
        } => {
            let timeout_ms = timeout.map(|t| ((t * 1000.0) as u32).max(1)).unwrap_or(0);
            let r = c
                .stop_session(v1::StopSessionRequest {
                    session: name.clone(),
                    force,
                    timeout_ms,
                })
                .await?
                .into_inner();
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
        }
        Command::Adopt {
            tmux_session,
            cli,
            name,
        } => {
            let req = v1::AdoptSessionRequest {
                tmux_session,
                cli,
                name: name.unwrap_or_default(),
            };
            let s = c.adopt_session(req).await?.into_inner();
            println!(
                "adopted tmux session {} as {} ({})",
                s.tmux_session, s.name, s.cli
            );
        }
        Command::Restart { name, fresh } => {
            let s = c
                .restart_session(v1::RestartSessionRequest {
                    session: name.clone(),
                    fresh,
                })
                .await?
                .into_inner();
            let how = if fresh {
                "with a new conversation"
            } else {
                "resuming its conversation"
            };
            println!("restarted {} ({}) {how}", s.name, s.cli);
        }
        Command::Release { name } => {
            c.release_session(v1::ReleaseSessionRequest {
                session: name.clone(),
            })
            .await?;
            println!("released {name}; it keeps running in tmux");
        }
        Command::Events {
            follow,
            since,
            sessions,
            json,
        } => {
            // Following without --since starts at the newest event; the position is then known
            // and survives reconnects.
            let since = match since {
                Some(s) => s,
                None if follow => c.status(v1::StatusRequest {}).await?.into_inner().last_seq,
                None => 0,
            };
            watch_events(c, &socket, since, sessions, follow, json).await?;
        }
        Command::Answer {
            name,
            answer,
            prompt,
        } => {
            let req = v1::AnswerPromptRequest {
                session: name,
                prompt_id: prompt.unwrap_or_default(),
                answer,
            };
            c.answer_prompt(req).await?;
        }
        Command::Last { name } => last::print_last(&mut c, &name).await?,
        Command::Share { name, user, revoke } => {
            let r = c
                .share_session(v1::ShareSessionRequest {
                    session: name.clone(),
                    user: user.clone(),
                    revoke,
                })
                .await?
                .into_inner();
            if r.shared_with.is_empty() {
                println!("{name} is shared with nobody");
            } else {
                println!("{name} is shared with {}", r.shared_with.join(", "));
            }
        }
        Command::Chats { json } => {
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
        }
        Command::Hook { .. } | Command::Doctor { .. } => {}
        Command::Reload { json } => reload::run(&mut c, json).await?,
        Command::Rules { json } => {
            let r = c.list_rules(v1::ListRulesRequest {}).await?.into_inner();
            if json {
                return print_json(&output::rules_json(&r));
            }
            print!("{}", r.describe());
        }
        Command::Delegate { name, cli, json } => {
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
        }
        Command::Metrics => {
            let r = c.get_metrics(v1::GetMetricsRequest {}).await?.into_inner();
            print!("{}", r.text);
        }
        Command::Transcript {
            chat,
            since,
            lines,
            json,
        } => transcript::run(&mut c, &chat, since.as_deref(), lines, json).await?,
        Command::Audit {
            session,
            user,
            since,
            lines,
            json,
            ..
        } => {
            let dir = c.status(v1::StatusRequest {}).await?.into_inner().state_dir;
            audit(Path::new(&dir), &session, &user, &since, lines, json)?;
        }
        Command::Pairing { action } => match action {
            PairingAction::List { json } => {
                let r = c
                    .list_pairings(v1::ListPairingsRequest {})
                    .await?
                    .into_inner();
                let row = |p: &v1::Pairing| serde_json::json!({"platform": p.platform, "user": p.user, "name": p.name, "code": p.code, "created_at_ms": p.created_at_ms});
                if json {
                    let pending: Vec<_> = r.pending.iter().map(row).collect();
                    let approved: Vec<_> = r.approved.iter().map(row).collect();
                    return print_json(
                        &serde_json::json!({"pending": pending, "approved": approved}),
                    );
                }
                if r.pending.is_empty() && r.approved.is_empty() {
                    println!(
                        "no pairings: a chat user who writes to the bot gets a code to give you"
                    );
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
            }
            PairingAction::Approve { code } => {
                let r = c
                    .approve_pairing(v1::ApprovePairingRequest { code })
                    .await?
                    .into_inner();
                println!("approved {} user {}", r.platform, r.user);
            }
            PairingAction::Revoke { platform, user } => {
                c.revoke_access(v1::RevokeAccessRequest {
                    platform: platform.clone(),
                    user: user.clone(),
                })
                .await?;
                println!("revoked {platform} user {user}");
            }
        },
        Command::Attach { name } => {
            let s = c
                .get_session(v1::GetSessionRequest { name })
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
    }
    Ok(())
}

/// `clibotctl audit`: the matching records of the audit log in `state_dir`.
fn audit(
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

/// Prints events; with `follow`, keeps going across daemon restarts by resuming after the last
/// sequence number seen.
async fn watch_events(
    mut c: clibot_proto::Client,
    socket: &Path,
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
            if let Ok(nc) = clibot_proto::connect(socket).await {
                c = nc;
                break;
            }
        }
    }
}
