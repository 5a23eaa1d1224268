//! `clibotd`: the daemon binary. Reads flags and config, takes the socket (from systemd or by
//! binding it), starts the core and serves until SIGTERM/SIGINT. The tmux server and every
//! session in it outlive this process.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, anyhow};
use clap::Parser;
use clibotd::config::Config;
use clibotd::config::Settings;
use clibotd::core::Daemon;
use clibotd::paths::create_private_dir;
use clibotd::paths::expand_home;
use clibotd::rpc::Service;
use clibotd::store::rotating::{Limits, RotatingFile};
use clibotd::tmux::{Tmux, TmuxSocket};
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

/// clibotd — runs AI coding CLIs in tmux and serves clibot.v1 on a Unix socket.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Config file [default: ~/.config/clibot/config.toml; optional]
    #[arg(long, env = "CLIBOT_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// gRPC socket [default: $XDG_RUNTIME_DIR/clibot/clibotd.sock, or
    /// $TMPDIR/clibot-$UID/clibotd.sock where XDG_RUNTIME_DIR is unset]
    #[arg(long, env = "CLIBOT_SOCKET", value_name = "PATH")]
    socket: Option<PathBuf>,
    /// State directory: session registry and event log [default: ~/.local/state/clibot]
    #[arg(long, env = "CLIBOT_STATE_DIR", value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Data directory: members' workspaces [default: ~/.local/share/clibot]
    #[arg(long, env = "CLIBOT_DATA_DIR", value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// tmux server socket (tmux -S) [default: tmux -L clibot]
    #[arg(long, env = "CLIBOT_TMUX_SOCKET", value_name = "PATH")]
    tmux_socket: Option<PathBuf>,
    /// Write the log to `clibotd.log` in the state directory, rotated by size
    /// (`[daemon] log_max_bytes`, three files), instead of standard error once the state
    /// directory is known. `clibotctl` starts the daemon so; under systemd the journal keeps it.
    #[arg(long)]
    log_to_state_dir: bool,
    /// Internal: start a session's program from the private launch file FILE (what tmux runs
    /// for each session, so that no secret stands on a command line).
    #[arg(long, hide = true, value_name = "FILE")]
    launch: Option<PathBuf>,
    /// Internal: print the manual page clibotd(1) (`clibotctl man --dir` collects it).
    #[arg(long, hide = true)]
    print_man: bool,
    /// Check the config file (`--config`, `CLIBOT_CONFIG` or the default) as a starting daemon
    /// would read it, print what is wrong and exit: 0 when it would be accepted.
    #[arg(long)]
    check_config: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.print_man {
        use clap::CommandFactory;
        return match clap_mangen::Man::new(Args::command()).render(&mut std::io::stdout()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("clibotd: cannot write the manual page: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if args.check_config {
        return check_config(args.config.as_deref());
    }
    if let Some(file) = &args.launch {
        let e = clibotd::confine::launch::run(file);
        eprintln!("clibotd: {e}");
        return ExitCode::from(127);
    }
    // Before any thread exists: listenfd edits the environment.
    let activated = listenfd::ListenFd::from_env().take_unix_listener(0);
    let sink = LogSink::default();
    init_tracing(sink.clone());
    match run(args, activated, sink.clone()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Said once on stderr; the log file, when there is one, keeps it too.
            let said = clibot_proto::describe(e.as_ref());
            if sink.is_file() {
                error!("{said}");
            }
            eprintln!("clibotd: error: {said}");
            ExitCode::FAILURE
        }
    }
}

/// Where the log goes: standard error, until (with `--log-to-state-dir`) the state directory is
/// known and a rotating `clibotd.log` there takes over.
#[derive(Clone, Default)]
struct LogSink(Arc<Mutex<Option<RotatingFile>>>);

impl LogSink {
    /// The log goes to a file (not to standard error).
    fn is_file(&self) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    fn to_file(&self, f: RotatingFile) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(f);
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogSink {
    type Writer = LogSink;
    fn make_writer(&'a self) -> LogSink {
        self.clone()
    }
}

impl std::io::Write for LogSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut file = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match file.as_mut() {
            // A log that cannot be written (a full disk) must not stop the daemon: stderr.
            Some(f) => match f.write(buf) {
                Ok(()) => Ok(buf.len()),
                Err(_) => std::io::stderr().write(buf),
            },
            None => std::io::stderr().write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

fn init_tracing(sink: LogSink) {
    let wanted = std::env::var("CLIBOT_LOG").unwrap_or_default();
    let filter = tracing_subscriber::EnvFilter::try_new(log_directives(&wanted))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(sink)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .init();
}

/// `CLIBOT_LOG` as tracing directives. A bare level (`debug`, `trace`) is about clibot: the
/// HTTP/2 and gRPC libraries stay at `info`, or every frame floods the log; name them to hear
/// them (`CLIBOT_LOG=debug,h2=trace`).
fn log_directives(wanted: &str) -> String {
    const QUIET: &[&str] = &["h2", "hyper", "hyper_util", "tower", "tonic"];
    let wanted = wanted.trim();
    if wanted.is_empty() {
        return "info".into();
    }
    let mut out = wanted.to_string();
    for lib in QUIET {
        if !wanted.contains(lib) {
            out.push_str(&format!(",{lib}=info"));
        }
    }
    out
}

fn default_state_dir() -> anyhow::Result<PathBuf> {
    let dirs = directories::ProjectDirs::from("", "", "clibot")
        .ok_or_else(|| anyhow!("cannot find the home directory; pass --state-dir"))?;
    Ok(dirs
        .state_dir()
        .unwrap_or_else(|| dirs.data_local_dir())
        .to_path_buf())
}

/// `--check-config`: the file read with the daemon's own parser; what a start would refuse is
/// printed with the key it names, sections nobody reads as warnings.
fn check_config(path: Option<&std::path::Path>) -> ExitCode {
    let (path, required) = match path {
        Some(p) => (p.to_path_buf(), true),
        None => match clibot_proto::default_config_path() {
            Some(p) => (p, false),
            None => {
                println!("ok: no config file (built-in defaults)");
                return ExitCode::SUCCESS;
            }
        },
    };
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    for w in clibotd::config::unknown_sections(&text) {
        println!("warning: {w}");
    }
    match Config::load(&path, required) {
        Ok(None) => {
            println!(
                "ok: no config file at {} (built-in defaults)",
                path.display()
            );
            ExitCode::SUCCESS
        }
        Ok(Some(_)) => {
            println!("ok: {}", path.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn default_data_dir() -> anyhow::Result<PathBuf> {
    let dirs = directories::ProjectDirs::from("", "", "clibot")
        .ok_or_else(|| anyhow!("cannot find the home directory; pass --data-dir"))?;
    Ok(dirs.data_local_dir().to_path_buf())
}

fn run(
    args: Args,
    activated: std::io::Result<Option<std::os::unix::net::UnixListener>>,
    sink: LogSink,
) -> anyhow::Result<()> {
    let (config, config_file) = match &args.config {
        Some(p) => (Config::load(p, true)?.unwrap_or_default(), Some(p.clone())),
        None => match clibot_proto::default_config_path() {
            Some(p) => match Config::load(&p, false)? {
                Some(c) => (c, Some(p)),
                None => (Config::default(), None),
            },
            None => (Config::default(), None),
        },
    };
    let socket = match args
        .socket
        .or_else(|| config.daemon.socket.as_deref().map(expand_home))
    {
        Some(s) => s,
        None => clibot_proto::default_socket_path(),
    };
    let state_dir = match args
        .state_dir
        .or_else(|| config.daemon.state_dir.as_deref().map(expand_home))
    {
        Some(d) => d,
        None => default_state_dir()?,
    };
    let data_dir = match args
        .data_dir
        .or_else(|| config.daemon.data_dir.as_deref().map(expand_home))
    {
        Some(d) => d,
        None => default_data_dir()?,
    };
    let tmux_socket = match args
        .tmux_socket
        .or_else(|| config.tmux.socket.as_deref().map(expand_home))
    {
        Some(p) => TmuxSocket::Path(p),
        None => TmuxSocket::Name(config.tmux.socket_name.clone()),
    };

    // One daemon per state directory, even with different sockets.
    create_private_dir(&state_dir)
        .with_context(|| format!("cannot create state directory {}", state_dir.display()))?;
    let lock_path = state_dir.join("clibotd.lock");
    let mut lock = File::options()
        .mode(0o600)
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .with_context(|| format!("cannot open {}", lock_path.display()))?;
    if lock.try_lock().is_err() {
        let holder = std::fs::read_to_string(&lock_path).unwrap_or_default();
        return Err(anyhow!(
            "another clibotd (pid {}) is using state directory {}: stop it first, or pass a different --state-dir",
            holder.trim(),
            state_dir.display()
        ));
    }
    lock.set_len(0)?;
    writeln!(lock, "{}", std::process::id())?;
    if args.log_to_state_dir {
        let path = state_dir.join("clibotd.log");
        let limits = Limits {
            max_bytes: config.daemon.log_max_bytes,
            files: 3,
        };
        match RotatingFile::open(path.clone(), limits) {
            Ok(f) => {
                info!(log = %path.display(), "logging to the state directory");
                sink.to_file(f);
            }
            Err(e) => error!(
                "cannot write the log to {}: {e}; logging to stderr",
                path.display()
            ),
        }
    }

    let (std_listener, bound, socket) = match activated {
        Ok(Some(l)) => {
            // The socket systemd bound is the one clients (and hooks) use, whatever the default.
            let path = l
                .local_addr()
                .ok()
                .and_then(|a| a.as_pathname().map(PathBuf::from))
                .unwrap_or(socket);
            info!(socket = %path.display(), "using the socket passed by systemd");
            (l, false, path)
        }
        Ok(None) => (clibotd::server::bind(&socket)?, true, socket),
        Err(e) => return Err(anyhow!("cannot take the socket passed by systemd: {e}")),
    };
    std_listener.set_nonblocking(true)?;
    let identity = if bound {
        clibotd::server::socket_identity(&socket)
    } else {
        None
    };

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let result = runtime.block_on(async {
        let listener = tokio::net::UnixListener::from_std(std_listener)?;
        let conf_file = config.tmux.config_file.as_deref().map(expand_home);
        let tmux = Tmux::new(
            &expand_home(&config.tmux.binary),
            tmux_socket,
            conf_file.as_deref(),
        );
        let settings = Settings {
            config,
            config_file,
            state_dir: state_dir.clone(),
            data_dir,
            socket: socket.clone(),
        };
        let daemon = Daemon::start(settings, Arc::new(tmux)).await?;
        let shutdown = daemon.shutdown_token().clone();
        if let Some(addr) = daemon.settings().config.daemon.metrics_listen {
            let metrics_listener =
                tokio::net::TcpListener::bind(addr).await.with_context(|| {
                    format!("cannot listen on [daemon] metrics_listen = \"{addr}\"")
                })?;
            info!(
                listen = %metrics_listener.local_addr().unwrap_or(addr),
                "serving the metrics on /metrics"
            );
            let scraped = daemon.clone();
            tokio::spawn(clibotd::ops::metrics::serve_http(
                metrics_listener,
                move || scraped.metrics_text(),
                shutdown.clone(),
            ));
        }
        let triggers = daemon.settings().config.triggers.listen();
        if let Ok(Some(listen)) = triggers {
            let at =
                clibotd::session::webhook_http::serve(daemon.clone(), listen, shutdown.clone())
                    .await
                    .context("cannot listen on [triggers] listen")?;
            info!(listen = %at, "taking webhooks on /hooks/JOB");
        }
        tokio::spawn(daemon.clone().run_monitor(shutdown.clone()));
        tokio::spawn(daemon.clone().run_disk_watch(shutdown.clone()));
        let clock = daemon.clone();
        tokio::spawn(async move { clock.job_clock().await });
        let budgets = daemon.clone();
        tokio::spawn(async move { budgets.budget_clock().await });
        let worktrees = daemon.clone();
        tokio::spawn(async move { worktrees.worktree_clock().await });
        tokio::spawn(wait_for_signal(shutdown.clone()));
        tokio::spawn(reload_on_hangup(daemon.clone(), shutdown.clone()));
        tokio::spawn(watchdog(shutdown.clone()));
        info!(socket = %socket.display(), state_dir = %state_dir.display(), "serving");
        let _ = sd_notify::notify(&[
            sd_notify::NotifyState::Ready,
            sd_notify::NotifyState::Status("serving"),
        ]);
        let served = clibotd::server::serve(
            listener,
            Service::new(daemon.clone(), shutdown.clone()),
            shutdown.clone(),
        )
        .await;
        let _ = sd_notify::notify(&[sd_notify::NotifyState::Stopping]);
        shutdown.cancel();
        daemon.shutdown().await;
        info!("stopped; tmux sessions keep running");
        served.map_err(anyhow::Error::from)
    });
    // Only the file this process bound: a newer daemon may have replaced it meanwhile.
    if bound && identity.is_some() && clibotd::server::socket_identity(&socket) == identity {
        let _ = std::fs::remove_file(&socket);
    }
    result
}

/// SIGHUP re-reads the config file, as `clibotctl reload` does.
async fn reload_on_hangup(daemon: Daemon, shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        error!("cannot install the SIGHUP handler; use `clibotctl reload`");
        return;
    };
    loop {
        tokio::select! {
            _ = hup.recv() => {}
            _ = shutdown.cancelled() => return,
        }
        match daemon.reload_and_start().await {
            Ok(r) => {
                info!(reloaded = ?r.reloaded, needs_restart = ?r.needs_restart, "SIGHUP: config reloaded")
            }
            Err(e) => error!("SIGHUP: the config was not reloaded: {e}"),
        }
    }
}

async fn wait_for_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        error!("cannot install signal handlers; stop the daemon with SIGKILL");
        return;
    };
    tokio::select! {
        _ = term.recv() => info!("SIGTERM: shutting down"),
        _ = int.recv() => info!("SIGINT: shutting down"),
        _ = shutdown.cancelled() => {}
    }
    shutdown.cancel();
}

/// Pings systemd's watchdog at half its period, when one is configured.
async fn watchdog(shutdown: CancellationToken) {
    let Some(period) = sd_notify::watchdog_enabled() else {
        return;
    };
    let mut tick = tokio::time::interval((period / 2).max(Duration::from_millis(100)));
    loop {
        tokio::select! {
            _ = tick.tick() => { let _ = sd_notify::notify(&[sd_notify::NotifyState::Watchdog]); }
            _ = shutdown.cancelled() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_level_keeps_the_transport_libraries_quiet() {
        assert_eq!(log_directives(""), "info");
        let d = log_directives("debug");
        assert!(d.starts_with("debug,") && d.contains("h2=info") && d.contains("hyper=info"));
        let d = log_directives("debug,h2=trace");
        assert!(d.contains("h2=trace") && !d.contains("h2=info"), "{d}");
    }
}
