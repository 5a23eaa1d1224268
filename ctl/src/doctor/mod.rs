//! `clibotctl doctor`: checks the installation a piece at a time and says, for each problem,
//! how to fix it. It never starts a daemon: a missing one is one of the things it reports.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use clibot_proto::v1;
use serde_json::json;

mod sandbox;

/// How long any one probe (a program's `--version`, tmux, systemctl, an RPC) may take.
const PROBE: Duration = Duration::from_secs(3);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Ok,
    Warn,
    Fail,
}

impl Level {
    fn word(self) -> &'static str {
        match self {
            Level::Ok => "ok",
            Level::Warn => "warn",
            Level::Fail => "FAIL",
        }
    }
}

#[derive(Debug)]
pub struct Check {
    pub name: String,
    pub level: Level,
    pub detail: String,
    pub fix: String,
}

pub(crate) fn check(
    name: impl Into<String>,
    level: Level,
    detail: impl Into<String>,
    fix: impl Into<String>,
) -> Check {
    Check {
        name: name.into(),
        level,
        detail: detail.into(),
        fix: fix.into(),
    }
}

/// Runs every check and prints the result; returns whether nothing failed.
pub async fn run(socket: &Path, json_out: bool) -> anyhow::Result<bool> {
    let checks = collect(socket).await;
    let ok = checks.iter().all(|c| c.level != Level::Fail);
    if json_out {
        let rows: Vec<_> = checks
            .iter()
            .map(|c| {
                json!({"name": c.name, "status": c.level.word().to_lowercase(), "detail": c.detail, "fix": c.fix})
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"checks": rows, "ok": ok}))?
        );
    } else {
        for c in &checks {
            println!("{:<4}  {}: {}", c.level.word(), c.name, c.detail);
            if c.level != Level::Ok && !c.fix.is_empty() {
                println!("      fix: {}", c.fix);
            }
        }
        let fails = checks.iter().filter(|c| c.level == Level::Fail).count();
        let warns = checks.iter().filter(|c| c.level == Level::Warn).count();
        println!("{fails} failed, {warns} warnings, {} checks", checks.len());
    }
    Ok(ok)
}

async fn collect(socket: &Path) -> Vec<Check> {
    let mut out = Vec::new();
    let config_path = config_path();
    let config = read_config(config_path.as_deref(), &mut out);
    sandbox::sandbox_checks(config.as_ref(), &mut out).await;

    // The daemon first: most other checks read its status.
    let mut client = None;
    let status = match tokio::time::timeout(PROBE, clibot_proto::connect(socket)).await {
        Ok(Ok(mut c)) => match tokio::time::timeout(PROBE, c.status(v1::StatusRequest {})).await {
            Ok(Ok(s)) => {
                let s = s.into_inner();
                out.push(check(
                    "daemon",
                    Level::Ok,
                    format!(
                        "clibotd {} (pid {}) answers at {}, up {}s",
                        s.version,
                        s.pid,
                        socket.display(),
                        s.uptime_ms / 1000
                    ),
                    "",
                ));
                client = Some(c);
                Some(s)
            }
            Ok(Err(e)) => {
                out.push(check(
                    "daemon",
                    Level::Fail,
                    format!("clibotd at {} refused its status: {}", socket.display(), e.message()),
                    "look at the daemon's log (journalctl --user -u clibotd, or clibotd.log next to the socket)",
                ));
                None
            }
            Err(_) => {
                out.push(check(
                    "daemon",
                    Level::Fail,
                    format!("clibotd at {} did not answer within {}s", socket.display(), PROBE.as_secs()),
                    "it may be stuck: systemctl --user restart clibotd (or kill it and run clibotd again)",
                ));
                None
            }
        },
        Ok(Err(e)) => {
            out.push(check(
                "daemon",
                Level::Fail,
                format!("not reachable: {e}"),
                "start it: systemctl --user enable --now clibotd.socket (see README, Running under systemd), or run `clibotd &`, or any clibotctl command without --no-autostart",
            ));
            None
        }
        Err(_) => {
            out.push(check(
                "daemon",
                Level::Fail,
                format!("connecting to {} timed out", socket.display()),
                "systemctl --user restart clibotd, or kill the daemon and start clibotd again",
            ));
            None
        }
    };

    tmux_check(status.as_ref(), config.as_ref(), &mut out).await;
    socket_check(socket, &mut out);
    if let Some(s) = &status {
        state_dir_check(Path::new(&s.state_dir), &mut out);
    }
    clis_check(status.as_ref(), config.as_ref(), &mut out).await;
    if let Some(c) = client.as_mut() {
        hook_check(c, &mut out).await;
    }
    systemd_check(&mut out).await;
    if let Some(s) = &status {
        gateway_check(s, &mut out);
        for w in &s.warnings {
            out.push(check(
                "daemon warning",
                Level::Warn,
                w.clone(),
                "see the daemon's log for what it repaired at start",
            ));
        }
        if !s.config_file.is_empty() {
            out.push(check(
                "config",
                Level::Ok,
                format!(
                    "{}: the running daemon accepted [daemon], [tmux], [cli], [access]",
                    s.config_file
                ),
                "",
            ));
        }
    }
    if let Some(table) = &config {
        gateway_config_check(table, &mut out);
    }
    out
}

/// `CLIBOT_CONFIG`, else `~/.config/clibot/config.toml` (as the daemon and gateway read it).
fn config_path() -> Option<PathBuf> {
    std::env::var_os("CLIBOT_CONFIG")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            directories::ProjectDirs::from("", "", "clibot")
                .map(|d| d.config_dir().join("config.toml"))
        })
}

fn read_config(path: Option<&Path>, out: &mut Vec<Check>) -> Option<toml::Table> {
    let path = path?;
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            out.push(check(
                "config",
                Level::Ok,
                format!("no config file at {}: built-in defaults", path.display()),
                "",
            ));
            return None;
        }
        Err(e) => {
            out.push(check(
                "config",
                Level::Fail,
                format!("cannot read {}: {e}", path.display()),
                format!("make it readable: chmod 600 {}", path.display()),
            ));
            return None;
        }
    };
    match text.parse::<toml::Table>() {
        Ok(t) => {
            let unknown: Vec<&String> = t
                .keys()
                .filter(|k| {
                    !matches!(
                        k.as_str(),
                        "daemon"
                            | "tmux"
                            | "cli"
                            | "access"
                            | "gateway"
                            | "rules"
                            | "guard"
                            | "decider"
                            | "delegation"
                    )
                })
                .collect();
            if !unknown.is_empty() {
                out.push(check(
                    "config sections",
                    Level::Warn,
                    format!(
                        "{}: unknown top-level keys {:?} are ignored by every part of clibot",
                        path.display(),
                        unknown
                    ),
                    "check their spelling: the sections are [daemon], [tmux], [cli.NAME], [access.PLATFORM], [gateway.PLATFORM]",
                ));
            }
            Some(t)
        }
        Err(e) => {
            out.push(check(
                "config",
                Level::Fail,
                format!("{} is not valid TOML: {}", path.display(), e.message()),
                "fix the syntax; the daemon and the gateway refuse to start on it",
            ));
            None
        }
    }
}

/// The keys the gateway accepts under `[gateway]` (it refuses to start on any other).
fn gateway_config_check(table: &toml::Table, out: &mut Vec<Check>) {
    let Some(gw) = table.get("gateway") else {
        return;
    };
    let mut unknown = Vec::new();
    match gw.as_table() {
        None => unknown.push("gateway (must be a table)".to_string()),
        Some(gw) => {
            for (platform, v) in gw {
                let keys: &[&str] = match platform.as_str() {
                    "telegram" | "discord" => &["token", "api_url"],
                    "feishu" => &["app_id", "app_secret", "api_url"],
                    _ => {
                        unknown.push(format!("gateway.{platform}"));
                        continue;
                    }
                };
                match v.as_table() {
                    None => unknown.push(format!("gateway.{platform} (must be a table)")),
                    Some(t) => unknown.extend(
                        t.keys()
                            .filter(|k| !keys.contains(&k.as_str()))
                            .map(|k| format!("gateway.{platform}.{k}")),
                    ),
                }
            }
        }
    }
    if unknown.is_empty() {
        out.push(check(
            "gateway config",
            Level::Ok,
            "[gateway] has only known keys",
            "",
        ));
    } else {
        out.push(check(
            "gateway config",
            Level::Fail,
            format!("unknown keys: {}", unknown.join(", ")),
            "the gateway refuses to start on them: telegram/discord take token, api_url; feishu takes app_id, app_secret, api_url",
        ));
    }
}

/// "tmux 3.3a" → (3, 3).
fn tmux_version(v: &str) -> Option<(u32, u32)> {
    let num = v.split_whitespace().last()?.trim_start_matches("next-");
    let mut parts = num.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .ok()?;
    Some((major, minor))
}

/// Runs a program with a time limit; its first line of output, or why not.
async fn probe(program: &str, args: &[&str]) -> Result<String, String> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("TMUX")
        .kill_on_drop(true);
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    match tokio::time::timeout(PROBE, child.wait_with_output()).await {
        Err(_) => Err(format!(
            "{program} did not answer within {}s",
            PROBE.as_secs()
        )),
        Ok(Err(e)) => Err(format!("{program}: {e}")),
        Ok(Ok(o)) => {
            let text = if o.stdout.is_empty() {
                &o.stderr
            } else {
                &o.stdout
            };
            let first = String::from_utf8_lossy(text)
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .trim()
                .to_string();
            if o.status.success() {
                Ok(first)
            } else {
                Err(format!(
                    "{program} {}: {} {first}",
                    args.join(" "),
                    o.status
                ))
            }
        }
    }
}

async fn tmux_check(
    status: Option<&v1::StatusResponse>,
    config: Option<&toml::Table>,
    out: &mut Vec<Check>,
) {
    let binary = config
        .and_then(|c| c.get("tmux")?.get("binary")?.as_str().map(str::to_string))
        .unwrap_or_else(|| "tmux".into());
    let version = match status {
        Some(s) if s.tmux_reachable => Ok(s.tmux_version.clone()),
        Some(_) => Err("the daemon cannot run tmux".to_string()),
        None => probe(&binary, &["-V"]).await,
    };
    match version {
        Err(e) => out.push(check(
            "tmux",
            Level::Fail,
            e,
            "install tmux 3.2 or newer (apt install tmux, brew install tmux), or set [tmux] binary",
        )),
        Ok(v) => match tmux_version(&v) {
            Some(n) if n < (3, 2) => out.push(check(
                "tmux",
                Level::Fail,
                format!("{v} is older than 3.2, which clibot needs"),
                "upgrade tmux to 3.2 or newer",
            )),
            Some(_) => out.push(check("tmux", Level::Ok, v, "")),
            None => out.push(check(
                "tmux",
                Level::Warn,
                format!("cannot read a version from {v:?}"),
                "make sure it is tmux 3.2 or newer",
            )),
        },
    }
}

fn mode_of(m: &std::fs::Metadata) -> u32 {
    m.mode() & 0o7777
}

fn socket_check(socket: &Path, out: &mut Vec<Check>) {
    let uid = rustix::process::geteuid().as_raw();
    let name = "socket";
    match std::fs::symlink_metadata(socket) {
        Err(e) => out.push(check(
            name,
            Level::Warn,
            format!("{}: {e}", socket.display()),
            "it appears when the daemon (or clibotd.socket) starts",
        )),
        Ok(m) => {
            let mut problems = Vec::new();
            let mut fixes = Vec::new();
            if m.uid() != uid {
                problems.push(format!("owned by uid {} (you are {uid})", m.uid()));
                fixes.push(format!(
                    "someone else's daemon listens there: stop it, remove {} and start your own",
                    socket.display()
                ));
            }
            if mode_of(&m) != 0o600 {
                problems.push(format!("mode {:04o}, not 0600", mode_of(&m)));
                fixes.push(format!(
                    "chmod 600 {} (anyone who can connect controls your sessions)",
                    socket.display()
                ));
            }
            if let Some(dir) = socket.parent() {
                match std::fs::metadata(dir) {
                    Ok(d) => {
                        if mode_of(&d) != 0o700 {
                            problems.push(format!(
                                "directory {} mode {:04o}, not 0700",
                                dir.display(),
                                mode_of(&d)
                            ));
                            fixes.push(format!("chmod 700 {}", dir.display()));
                        }
                        if d.uid() != uid {
                            problems.push(format!(
                                "directory {} owned by uid {}",
                                dir.display(),
                                d.uid()
                            ));
                            fixes.push("use a socket in a directory of your own (--socket, [daemon] socket)".to_string());
                        }
                    }
                    Err(e) => problems.push(format!("directory {}: {e}", dir.display())),
                }
            }
            if problems.is_empty() {
                out.push(check(
                    name,
                    Level::Ok,
                    format!("{}: 0600, yours, in a 0700 directory", socket.display()),
                    "",
                ));
            } else {
                out.push(check(
                    name,
                    Level::Fail,
                    format!("{}: {}", socket.display(), problems.join("; ")),
                    fixes.join("; "),
                ));
            }
        }
    }
}

fn state_dir_check(dir: &Path, out: &mut Vec<Check>) {
    let uid = rustix::process::geteuid().as_raw();
    let name = "state dir";
    let m = match std::fs::metadata(dir) {
        Ok(m) => m,
        Err(e) => {
            out.push(check(
                name,
                Level::Fail,
                format!("{}: {e}", dir.display()),
                "the daemon creates it at start: check the path ([daemon] state_dir, CLIBOT_STATE_DIR) and restart it",
            ));
            return;
        }
    };
    let mut bad = Vec::new();
    if mode_of(&m) & 0o077 != 0 || m.uid() != uid {
        bad.push(format!(
            "{} ({:04o}, uid {})",
            dir.display(),
            mode_of(&m),
            m.uid()
        ));
    }
    let mut bad_files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    let mut seen = 0usize;
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            seen += 1;
            if seen > 10_000 {
                break;
            }
            let Ok(fm) = e.path().symlink_metadata() else {
                continue;
            };
            if fm.is_dir() {
                if mode_of(&fm) & 0o077 != 0 || fm.uid() != uid {
                    bad.push(format!("{} ({:04o})", e.path().display(), mode_of(&fm)));
                }
                stack.push(e.path());
            } else if fm.is_file() && (mode_of(&fm) & 0o077 != 0 || fm.uid() != uid) {
                bad_files.push(format!("{} ({:04o})", e.path().display(), mode_of(&fm)));
            }
        }
    }
    if bad.is_empty() && bad_files.is_empty() {
        out.push(check(
            name,
            Level::Ok,
            format!("{}: 0700, its files readable only by you", dir.display()),
            "",
        ));
        return;
    }
    let all: Vec<String> = bad.iter().chain(&bad_files).cloned().collect();
    let shown = all.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
    let more = if all.len() > 5 {
        format!(" and {} more", all.len() - 5)
    } else {
        String::new()
    };
    let d = dir.display();
    out.push(check(
        name,
        Level::Fail,
        format!("open to others: {shown}{more} (tokens, chat ids and transcripts live here)"),
        format!("chmod -R go-rwx {d} (as its owner)"),
    ));
}

/// The programs the built-in CLIs run (daemon/src/config.rs).
fn builtin_program(name: &str) -> Option<String> {
    match name {
        "claude" | "codex" | "gemini" | "opencode" => Some(name.to_string()),
        "shell" => Some(
            std::env::var("SHELL")
                .ok()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "/bin/sh".into()),
        ),
        _ => None,
    }
}

/// The PATH new sessions get: the tmux server's global environment, else this one's.
async fn session_path(status: Option<&v1::StatusResponse>) -> (String, &'static str) {
    let args: Vec<String> = status
        .map(|s| s.tmux_args.clone())
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| vec!["-L".into(), "clibot".into()]);
    let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
    all.extend(["show-environment", "-g", "PATH"]);
    if let Ok(line) = probe("tmux", &all).await
        && let Some(p) = line.strip_prefix("PATH=")
    {
        return (p.to_string(), "the tmux server's PATH");
    }
    (
        std::env::var("PATH").unwrap_or_default(),
        "this shell's PATH (the tmux server is not running)",
    )
}

fn find_program(program: &str, path: &str) -> Option<PathBuf> {
    let executable =
        |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0);
    if program.contains('/') {
        let p = PathBuf::from(program);
        return executable(&p).then_some(p);
    }
    path.split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(program))
        .find(|p| executable(p))
}

/// Programs whose `--version` is known to print a version and exit.
fn knows_version(program: &Path) -> bool {
    let base = program.file_name().and_then(|s| s.to_str()).unwrap_or("");
    matches!(
        base,
        "claude"
            | "codex"
            | "gemini"
            | "opencode"
            | "bash"
            | "zsh"
            | "fish"
            | "python"
            | "python3"
            | "node"
    )
}

async fn clis_check(
    status: Option<&v1::StatusResponse>,
    config: Option<&toml::Table>,
    out: &mut Vec<Check>,
) {
    let configured: BTreeMap<String, Option<String>> = config
        .and_then(|c| c.get("cli")?.as_table().cloned())
        .unwrap_or_default()
        .into_iter()
        .map(|(name, v)| {
            let prog = v
                .get("argv")
                .and_then(|a| a.as_array()?.first()?.as_str().map(str::to_string));
            (name, prog)
        })
        .collect();
    let mut names: Vec<String> = match status {
        Some(s) => s.clis.clone(),
        None => ["claude", "codex", "gemini", "opencode", "shell"]
            .iter()
            .map(|s| s.to_string())
            .chain(configured.keys().cloned())
            .collect(),
    };
    names.sort();
    names.dedup();
    let (path, path_from) = session_path(status).await;
    for name in names {
        let explicit = configured.get(&name).cloned().flatten();
        let in_config = configured.contains_key(&name);
        let Some(program) = explicit.or_else(|| builtin_program(&name)) else {
            out.push(check(
                format!("cli {name}"),
                Level::Warn,
                "no argv in the config file, and not a built-in CLI",
                format!("give [cli.{name}] an argv"),
            ));
            continue;
        };
        match find_program(&program, &path) {
            None if in_config => out.push(check(
                format!("cli {name}"),
                Level::Fail,
                format!("{program} not found on {path_from}"),
                format!(
                    "install {program}, or put its full path in [cli.{name}] argv, or add its directory to the PATH clibotd starts with"
                ),
            )),
            None => out.push(check(
                format!("cli {name}"),
                Level::Warn,
                format!("{program} (built-in) not installed on {path_from}"),
                format!("install it if you want to use {name}; otherwise ignore this"),
            )),
            Some(found) => {
                let version = if knows_version(&found) {
                    match probe(&found.display().to_string(), &["--version"]).await {
                        Ok(v) if !v.is_empty() => format!(", {v}"),
                        Ok(_) => String::new(),
                        Err(e) => format!(", --version failed: {e}"),
                    }
                } else {
                    String::new()
                };
                out.push(check(
                    format!("cli {name}"),
                    Level::Ok,
                    format!("{}{version}", found.display()),
                    "",
                ));
            }
        }
    }
}

/// A hook with a session id no session has: the daemon must answer (with a refusal).
async fn hook_check(c: &mut clibot_proto::Client, out: &mut Vec<Check>) {
    let req = v1::HookRequest {
        session_id: "clibot-doctor-probe".into(),
        token: "invalid".into(),
        cli: "claude".into(),
        event: "Notification".into(),
        payload: "{}".into(),
    };
    let fix =
        "the daemon does not answer hooks: look at its log (CLIBOT_LOG=debug) for `hook` lines";
    match tokio::time::timeout(PROBE, c.hook(req)).await {
        Err(_) => out.push(check(
            "hooks",
            Level::Fail,
            format!("no answer to a hook within {}s", PROBE.as_secs()),
            fix,
        )),
        Ok(Ok(_)) => out.push(check("hooks", Level::Ok, "the daemon answers hooks", "")),
        Ok(Err(s))
            if matches!(
                s.code(),
                tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Unimplemented
            ) =>
        {
            out.push(check(
                "hooks",
                Level::Fail,
                format!("hook failed: {}", s.message()),
                fix,
            ))
        }
        Ok(Err(s)) => out.push(check(
            "hooks",
            Level::Ok,
            format!(
                "the daemon answers hooks (a probe was refused: {})",
                s.message()
            ),
            "",
        )),
    }
}

async fn systemd_check(out: &mut Vec<Check>) {
    let units = [
        "clibot-tmux.service",
        "clibotd.socket",
        "clibot-gateway.service",
    ];
    if find_program("systemctl", &std::env::var("PATH").unwrap_or_default()).is_none() {
        out.push(check(
            "systemd",
            Level::Warn,
            "no systemctl: nothing starts clibotd at login",
            "clibotctl starts the daemon on demand; or run clibotd from your session's startup",
        ));
        return;
    }
    let mut args = vec!["--user", "is-enabled"];
    args.extend(units);
    let mut cmd = tokio::process::Command::new("systemctl");
    cmd.args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let result = match cmd.spawn() {
        Ok(child) => tokio::time::timeout(PROBE, child.wait_with_output()).await,
        Err(e) => {
            out.push(check(
                "systemd",
                Level::Warn,
                format!("cannot run systemctl: {e}"),
                "",
            ));
            return;
        }
    };
    let Ok(Ok(o)) = result else {
        out.push(check(
            "systemd",
            Level::Warn,
            "systemctl --user did not answer (no user session bus?)",
            "log in to a normal session, or loginctl enable-linger \"$USER\"",
        ));
        return;
    };
    let text = String::from_utf8_lossy(&o.stdout);
    let states: Vec<&str> = text.lines().map(str::trim).collect();
    let mut not = Vec::new();
    for (i, unit) in units.iter().enumerate() {
        let state = states.get(i).copied().unwrap_or("not installed");
        if state != "enabled" && state != "static" && state != "indirect" {
            let state = if state.is_empty() {
                "not installed"
            } else {
                state
            };
            not.push(format!("{unit} ({state})"));
        }
    }
    if !not.is_empty() {
        out.push(check(
            "systemd",
            Level::Warn,
            format!("user units not enabled: {}", not.join(", ")),
            "cp systemd/*.service systemd/*.socket ~/.config/systemd/user/ && systemctl --user daemon-reload && systemctl --user enable --now clibot-tmux.service clibotd.socket clibot-gateway.service",
        ));
    } else {
        out.push(check(
            "systemd",
            Level::Ok,
            format!("{} enabled", units.join(", ")),
            "",
        ));
    }
}

fn gateway_check(s: &v1::StatusResponse, out: &mut Vec<Check>) {
    if s.gateways.is_empty() {
        out.push(check(
            "gateway",
            Level::Warn,
            "no gateway has reported: chat platforms are not connected",
            "configure [gateway.PLATFORM] and start clibot-gateway (systemctl --user enable --now clibot-gateway.service)",
        ));
        return;
    }
    for g in &s.gateways {
        let name = format!("gateway {}", g.platform);
        match g.state.as_str() {
            "connected" => out.push(check(
                name,
                Level::Ok,
                format!("connected (pid {})", g.pid),
                "",
            )),
            "connecting" => out.push(check(
                name,
                Level::Warn,
                "still connecting",
                "wait a few seconds and run doctor again",
            )),
            state => out.push(check(
                name,
                Level::Fail,
                if g.detail.is_empty() {
                    state.to_string()
                } else {
                    format!("{state}: {}", g.detail)
                },
                "check the token and the network; journalctl --user -u clibot-gateway shows why",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(tmux_version("tmux 3.3a"), Some((3, 3)));
        assert_eq!(tmux_version("tmux next-3.6"), Some((3, 6)));
        assert!(tmux_version("tmux 3.1c").is_some_and(|v| v < (3, 2)));
        assert_eq!(tmux_version("nonsense"), None);
    }

    #[test]
    fn gateway_keys() {
        let t: toml::Table = "[gateway.telegram]\ntoken = \"x\"\ntokn = \"y\"\n[gateway.feishu]\napp_id = \"a\"\napp_secret = \"b\"\n[gateway.slack]\n"
            .parse()
            .expect("toml");
        let mut out = Vec::new();
        gateway_config_check(&t, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].level, Level::Fail);
        assert!(
            out[0].detail.contains("gateway.telegram.tokn"),
            "{}",
            out[0].detail
        );
        assert!(out[0].detail.contains("gateway.slack"), "{}", out[0].detail);
        assert!(!out[0].detail.contains("feishu"), "{}", out[0].detail);
    }
}
