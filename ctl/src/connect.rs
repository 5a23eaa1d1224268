//! Reaching the daemon, starting one when none answers (as tmux starts its server), unless the
//! user said not to.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};
use clibot_proto::{Client, ConnectError, connect};

/// How long a freshly started daemon may take to answer.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Connects to the daemon at `socket`, starting it first when `autostart` and nothing listens.
pub async fn client(
    socket: &Path,
    autostart: bool,
    explicit_socket: bool,
) -> anyhow::Result<Client> {
    match connect(socket).await {
        Ok(c) => Ok(c),
        Err(e) if e.is_no_daemon() && autostart => start_daemon(socket, explicit_socket).await,
        Err(e @ ConnectError::NoDaemon { .. }) => Err(anyhow!(
            "{e} (clibotctl starts one by itself unless --no-autostart or CLIBOT_NO_AUTOSTART=1)"
        )),
        Err(e) => Err(e.into()),
    }
}

/// The daemon of another machine over ssh (`--host` / `CLIBOT_HOST`): `CLIBOT_SSH` is the ssh
/// command (default `ssh`), `CLIBOT_REMOTE_CLIBOTCTL` the program run there (default
/// `clibotctl`).
pub fn remote(host: &str) -> anyhow::Result<clibot_proto::Target> {
    let program: Vec<String> = std::env::var("CLIBOT_SSH")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let remote = std::env::var("CLIBOT_REMOTE_CLIBOTCTL").unwrap_or_default();
    clibot_proto::Target::ssh(host, &program, &[], &remote, None).map_err(|e| anyhow!("--host {e}"))
}

/// `[daemon] socket` from the config file the daemon reads (`CLIBOT_CONFIG` or
/// `~/.config/clibot/config.toml`), so that a socket moved in the config is found without flags.
pub fn configured_socket() -> Option<PathBuf> {
    configured_daemon_path("socket")
}

/// The config file the daemon reads: `CLIBOT_CONFIG` or `~/.config/clibot/config.toml`.
fn config_path() -> Option<PathBuf> {
    std::env::var_os("CLIBOT_CONFIG")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            directories::ProjectDirs::from("", "", "clibot")
                .map(|d| d.config_dir().join("config.toml"))
        })
}

/// The daemons of the config file's `[[gateway.machines]]` (none: only the local one is meant).
pub fn configured_machines() -> anyhow::Result<Vec<clibot_proto::MachineConfig>> {
    let Some(path) = config_path() else {
        return Ok(Vec::new());
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(anyhow!("{}: {e}", path.display())),
    };
    let table: toml::Table = text
        .parse()
        .map_err(|e| anyhow!("{}: {e}", path.display()))?;
    let Some(list) = table.get("gateway").and_then(|g| g.get("machines")) else {
        return Ok(Vec::new());
    };
    list.clone()
        .try_into()
        .map_err(|e| anyhow!("{}: [[gateway.machines]]: {e}", path.display()))
}

/// A path in the config file's `[daemon]` section (`~/` expanded).
pub fn configured_daemon_path(key: &str) -> Option<PathBuf> {
    let table: toml::Table = std::fs::read_to_string(config_path()?).ok()?.parse().ok()?;
    let s = table.get("daemon")?.get(key)?.as_str()?;
    match s.strip_prefix("~/") {
        Some(rest) => directories::BaseDirs::new().map(|b| b.home_dir().join(rest)),
        None => Some(PathBuf::from(s)),
    }
}

/// One of clibot's programs: the one installed next to this clibotctl (so both are the same
/// version), else `name` as found on PATH.
pub fn sibling(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join(name)))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from(name))
}

async fn start_daemon(socket: &Path, explicit_socket: bool) -> anyhow::Result<Client> {
    let bin = sibling("clibotd");
    let log_dir = socket
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(clibot_proto::private_runtime_dir);
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&log_dir)
            .with_context(|| format!("cannot create {}", log_dir.display()))?;
    }
    let log_path = log_dir.join("clibotd.log");
    use std::os::unix::fs::OpenOptionsExt;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        // Never follow a symlink planted where the log goes.
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&log_path)
        .with_context(|| format!("cannot open {}", log_path.display()))?;
    let mut cmd = tokio::process::Command::new(&bin);
    // Once running, its log goes to the state directory, rotated by size; this file only
    // catches what it says before it knows where that is (a config error, say).
    cmd.arg("--log-to-state-dir");
    if explicit_socket {
        cmd.arg("--socket").arg(socket);
    }
    // Its own process group: a Ctrl-C in this terminal must not reach the daemon.
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .process_group(0);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let here = std::env::current_exe()
                .ok()
                .and_then(|p| p.parent().map(|d| d.display().to_string()))
                .unwrap_or_else(|| "this program's directory".into());
            anyhow::bail!(
                "no clibotd is running at {} and none was found to start: not in {here} (next to clibotctl) nor on PATH; install it beside clibotctl (./install.sh in the clibot checkout does), or start it yourself and point --socket at it",
                socket.display()
            );
        }
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!(
                "no clibotd is running at {} and starting {} failed",
                socket.display(),
                bin.display()
            )));
        }
    };
    let pid = child.id().unwrap_or(0);
    let started = Instant::now();
    let deadline = started + START_TIMEOUT;
    let mut told = false;
    loop {
        // A start that takes a while (re-adopting many sessions, a loaded machine) is said, so
        // that a person at a terminal does not think clibotctl hangs.
        if !told && started.elapsed() > std::time::Duration::from_secs(1) {
            told = true;
            if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                eprintln!("clibotctl: starting clibotd (pid {pid})…");
            }
        }
        match connect(socket).await {
            Ok(mut c) => {
                let log = match c.status(clibot_proto::v1::StatusRequest {}).await {
                    Ok(s) => format!("{}/clibotd.log", s.into_inner().state_dir),
                    Err(_) => log_path.display().to_string(),
                };
                eprintln!("clibotctl: started clibotd (pid {pid}); its log is {log}");
                return Ok(c);
            }
            Err(e) if !e.is_no_daemon() => return Err(e.into()),
            Err(_) => {}
        }
        if let Ok(Some(status)) = child.try_wait() {
            let tail = std::fs::read_to_string(&log_path).unwrap_or_default();
            let last = tail
                .lines()
                .rev()
                .find(|l| l.contains("error"))
                .unwrap_or("")
                .to_string();
            return Err(anyhow!(
                "clibotd exited at start ({status}): {last} (see {})",
                log_path.display()
            ));
        }
        if Instant::now() > deadline {
            return Err(anyhow!(
                "clibotd did not answer within {}s; see {}",
                START_TIMEOUT.as_secs(),
                log_path.display()
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
