//! The systemd user units that start clibot at login: are they installed and enabled.

use std::process::Stdio;

use super::probe::{PROBE, find_program};
use super::report::{Check, Level, check};

/// `clibot-tmux.service`, `clibotd.socket`, `clibot-gateway.service`: enabled (or static).
pub(super) async fn systemd_check(out: &mut Vec<Check>) {
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
