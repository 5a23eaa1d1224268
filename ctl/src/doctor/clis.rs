//! The CLIs sessions run: is each configured or built-in CLI's program on the PATH new sessions
//! get, what version it reports, and does the daemon answer the hooks they call.

use std::collections::BTreeMap;
use std::path::Path;

use clibot_proto::v1;

use super::probe::{PROBE, find_program, probe};
use super::report::{Check, Level, check};

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

pub(super) async fn clis_check(
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
    // The file on disk counts as well as the running daemon: a [cli.X] added since it started
    // is checked before a reload or restart trips on it.
    let mut names: Vec<String> = match status {
        Some(s) => s.clis.clone(),
        None => ["claude", "codex", "gemini", "opencode", "shell"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
    };
    names.extend(configured.keys().cloned());
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
pub(super) async fn hook_check(c: &mut clibot_proto::Client, out: &mut Vec<Check>) {
    let req = v1::HookRequest {
        session_id: "clibot-doctor-probe".into(),
        token: "invalid".into(),
        cli: "claude".into(),
        event: "Notification".into(),
        payload: "{}".into(),
        global: false,
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
