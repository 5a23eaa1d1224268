//! The config file as doctor reads it itself (the daemon may not run): can it be read, is it
//! TOML, are its sections known, and did the running daemon accept it.

use std::path::{Path, PathBuf};

use clibot_proto::v1;

use super::report::{Check, Level, check};

/// `CLIBOT_CONFIG`, else `~/.config/clibot/config.toml` (as the daemon and gateway read it).
pub(super) fn config_path() -> Option<PathBuf> {
    std::env::var_os("CLIBOT_CONFIG")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            directories::ProjectDirs::from("", "", "clibot")
                .map(|d| d.config_dir().join("config.toml"))
        })
}

/// The file as a table, with a check saying whether it could be read and parsed.
pub(super) fn read_config(path: Option<&Path>, out: &mut Vec<Check>) -> Option<toml::Table> {
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
        Ok(t) => Some(t),
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

/// The running daemon's config file, which it accepted to start.
pub(super) fn accepted_check(s: &v1::StatusResponse, out: &mut Vec<Check>) {
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

/// `[daemon] allowed_roots` as written in the file on disk: a root that does not exist (a typo)
/// lets no session start there, whatever the running daemon was started with.
pub(super) fn roots_check(config: &toml::Table, out: &mut Vec<Check>) {
    let Some(roots) = config
        .get("daemon")
        .and_then(|d| d.get("allowed_roots"))
        .and_then(|r| r.as_array())
    else {
        return;
    };
    let home = directories::BaseDirs::new().map(|b| b.home_dir().to_path_buf());
    let mut missing = Vec::new();
    let mut present = 0;
    for r in roots.iter().filter_map(|r| r.as_str()) {
        let path = match (r.strip_prefix('~'), &home) {
            (Some(rest), Some(h)) => h.join(rest.trim_start_matches('/')),
            _ => PathBuf::from(r),
        };
        if path.is_dir() {
            present += 1;
        } else {
            missing.push(r.to_string());
        }
    }
    if missing.is_empty() {
        out.push(check(
            "allowed roots",
            Level::Ok,
            format!("{present} root(s), all present"),
            "",
        ));
    } else {
        out.push(check(
            "allowed roots",
            if present == 0 { Level::Fail } else { Level::Warn },
            format!("[daemon] allowed_roots names what is not a directory: {}", missing.join(", ")),
            "fix the path in the config file (a typo?) or create the directory, then `clibotctl reload`",
        ));
    }
}

/// The file on disk read by the daemon's own parser (`clibotd --check-config`), whether a
/// daemon runs or not: what its next start would refuse fails here, naming the key; sections
/// nobody reads are warnings.
pub(super) async fn parser_check(path: Option<&Path>, out: &mut Vec<Check>) {
    let Some(path) = path.filter(|p| p.exists()) else {
        return;
    };
    let daemon = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("clibotd")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("clibotd"));
    let run = tokio::process::Command::new(&daemon)
        .arg("--check-config")
        .arg("--config")
        .arg(path)
        .stdin(std::process::Stdio::null())
        .output();
    let out_text = match tokio::time::timeout(std::time::Duration::from_secs(10), run).await {
        Ok(Ok(o)) => (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        ),
        _ => {
            out.push(check(
                "config",
                Level::Warn,
                format!(
                    "cannot run {} --check-config: the file was not checked with the daemon's parser",
                    daemon.display()
                ),
                "install clibotd next to clibotctl (./install.sh)",
            ));
            return;
        }
    };
    let (ok, text) = out_text;
    for line in text.lines() {
        if let Some(w) = line.strip_prefix("warning: ") {
            out.push(check(
                "config sections",
                Level::Warn,
                format!("{}: {w}", path.display()),
                "check the spelling: the sections are [daemon], [tmux], [cli.NAME], [access.PLATFORM], [gateway.PLATFORM], [[rules]], [guard], [decider], [delegation], [[sessions]], [[routes]]",
            ));
        } else if let Some(e) = line.strip_prefix("error: ") {
            out.push(check(
                "config",
                Level::Fail,
                format!("the daemon would refuse to start on it: {e}"),
                "fix what it names, then `clibotctl reload` (or restart the daemon)",
            ));
        }
    }
    if ok {
        out.push(check(
            "config",
            Level::Ok,
            format!("{}: the daemon's parser accepts it", path.display()),
            "",
        ));
    }
}
