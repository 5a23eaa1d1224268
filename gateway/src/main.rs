//! `clibot-gateway`: relays clibotd sessions to chats. With no platform flag it serves every
//! platform configured in the config file (`[gateway.telegram]`, `[gateway.discord]`, …), each
//! on its own connection, in one process; `--telegram`, `--discord`, `--console` choose a
//! subset. A platform that fails (a bad token, an outage) is retried with backoff and never
//! stops the others. It holds no state that matters — bindings, access and delivery cursors
//! live in the daemon — so it can be killed at any moment and started again.

mod bounded;
mod config;
mod inbound;
mod machines;
mod ops;
mod outbound;
mod platforms;
mod progress;
mod registry;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use clibot_gateway::command::CommandParser;
use clibot_gateway::redact::Redactor;
use clibot_proto::v1;

use crate::config::GatewayConfig;
use crate::ops::health::{Health, PlatformHealth};
use crate::platforms::Platform;
use crate::registry::{Flags, Spec};

/// clibot-gateway — drive clibot sessions from a chat.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    #[command(subcommand)]
    command: Option<Cmd>,
    /// A chat on this terminal: type messages on stdin, read replies on stdout.
    #[arg(long)]
    console: bool,
    /// Internal: print the manual page clibot-gateway(1) (`clibotctl man --dir` collects it).
    #[arg(long, hide = true)]
    print_man: bool,
    /// Internal: make one HTTPS request to URL and say whether (and why not) it answered, as
    /// the platforms' clients would see it (`clibotctl doctor` asks this for TLS).
    #[arg(long, hide = true, value_name = "URL")]
    probe_api: Option<String>,
    /// Serve Discord (token from --discord-token, DISCORD_TOKEN, or `[gateway.discord] token`).
    #[arg(long)]
    discord: bool,
    /// The Discord bot token.
    #[arg(
        long,
        env = "DISCORD_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    discord_token: Option<String>,
    /// Another API base (a proxy or a test fake) instead of https://discord.com.
    #[arg(long, value_name = "URL")]
    discord_api_url: Option<String>,
    /// Serve Telegram, by long polling (token from --telegram-token, TELEGRAM_TOKEN, or
    /// `[gateway.telegram] token`).
    #[arg(long)]
    telegram: bool,
    /// The Telegram bot token (from @BotFather).
    #[arg(
        long,
        env = "TELEGRAM_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    telegram_token: Option<String>,
    /// A self-hosted Bot API server (or a test fake) instead of https://api.telegram.org.
    #[arg(long, value_name = "URL")]
    telegram_api_url: Option<String>,
    /// Serve Feishu / Lark, by its long connection (`[gateway.feishu] app_id`, `app_secret`,
    /// `api_url`).
    #[arg(long)]
    feishu: bool,
    /// Serve Slack, by Socket Mode (`[gateway.slack] app_token`, `bot_token`, `api_url`).
    #[arg(long)]
    slack: bool,
    /// Config file [default: $XDG_CONFIG_HOME/clibot/config.toml]
    #[arg(long, env = "CLIBOT_CONFIG", value_name = "FILE", global = true)]
    config: Option<PathBuf>,
    /// The daemon's socket [default: $XDG_RUNTIME_DIR/clibot/clibotd.sock, or
    /// $TMPDIR/clibot-$UID/clibotd.sock where XDG_RUNTIME_DIR is unset]
    #[arg(long, env = "CLIBOT_SOCKET", value_name = "PATH", global = true)]
    socket: Option<PathBuf>,
    /// What marks a gateway command (everything else goes to the CLI).
    #[arg(long, default_value = "!!")]
    prefix: String,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// How each platform of the running gateway is doing, as the daemon last heard it.
    /// Exits non-zero when a platform is not connected or no gateway reports.
    Status {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print the configuration the gateway would use — the config file's [gateway] sections
    /// with defaults, ${VARIABLES}, flags and the environment applied — as TOML, every token
    /// and secret masked. Exits non-zero when the config cannot be used.
    Config,
    /// Print a completion script for SHELL (bash, zsh, fish, elvish, powershell): its flags
    /// and subcommands. E.g. `clibot-gateway completions bash > ~/.local/share/bash-completion/completions/clibot-gateway`.
    Completions {
        /// The shell the script is for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.print_man {
        use clap::CommandFactory;
        return match clap_mangen::Man::new(Args::command()).render(&mut std::io::stdout()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("clibot-gateway: cannot write the manual page: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if let Some(url) = &args.probe_api {
        return probe_api(url);
    }
    if let Some(Cmd::Config) = args.command {
        return print_config(&args);
    }
    if let Some(Cmd::Completions { shell }) = args.command {
        use clap::CommandFactory;
        clap_complete::generate(
            shell,
            &mut Args::command(),
            "clibot-gateway",
            &mut std::io::stdout(),
        );
        return ExitCode::SUCCESS;
    }
    let socket = args
        .socket
        .clone()
        .unwrap_or_else(clibot_proto::default_socket_path);
    let Ok(rt) = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    else {
        eprintln!("clibot-gateway: cannot start the runtime");
        return ExitCode::FAILURE;
    };
    if let Some(Cmd::Status { json }) = args.command {
        return rt.block_on(status(&socket, json));
    }
    let parser = match CommandParser::new(&args.prefix) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("clibot-gateway: --prefix: {e}");
            return ExitCode::from(2);
        }
    };
    let (config, path) = match GatewayConfig::load(args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("clibot-gateway: {e}");
            return ExitCode::from(2);
        }
    };
    let specs = match plan(&args, &config, path.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("clibot-gateway: {e}");
            return ExitCode::from(2);
        }
    };
    // Gateway locks live beside the daemon's socket: one poller per bot and daemon.
    let lock_dir = socket
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(clibot_proto::private_runtime_dir);
    // Where the daemon's files are is nobody's business in a chat (an error that names them
    // is logged; in a message the path is blanked out).
    let mut private = vec![socket.display().to_string()];
    if let Some(dir) = socket.parent()
        && dir
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("clibot"))
    {
        private.push(dir.display().to_string());
    }
    private.extend(path.map(|p| p.display().to_string()));
    if specs.iter().any(|s| s.console) {
        rt.block_on(autostart_daemon(&socket));
    }
    outbound::turn_status::set_streaming(config.stream.unwrap_or(true));
    if let Some(t) = config.transcribe.clone() {
        // Its key never goes to a chat.
        private.extend(t.api_key.clone());
        inbound::transcribe::configure(t);
    }
    outbound::files::set_max_in(
        config
            .max_file_bytes
            .unwrap_or(outbound::files::DEFAULT_MAX_IN),
    );
    platforms::ratelimit::set_max_wait(
        config
            .rate_limit_wait()
            .unwrap_or(platforms::ratelimit::DEFAULT_MAX_WAIT),
    );
    // Both were checked when the config was read.
    let bounds = (
        config
            .stall_after()
            .unwrap_or(progress::DEFAULT_STALL_AFTER),
        config
            .down_notice_after()
            .unwrap_or(progress::DEFAULT_DOWN_NOTICE_AFTER),
    );
    let machines = match machines::from_config(&config.machines, &socket, &lock_dir) {
        Ok(m) => Arc::new(m),
        Err(e) => {
            eprintln!("clibot-gateway: {e}");
            return ExitCode::from(2);
        }
    };
    rt.block_on(serve(specs, machines, lock_dir, parser, private, bounds))
}

/// `clibot-gateway config`: the effective configuration, secrets masked.
fn print_config(args: &Args) -> ExitCode {
    let (config, path) = match GatewayConfig::load(args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("clibot-gateway: {e}");
            return ExitCode::from(2);
        }
    };
    let overrides = config::Overrides {
        telegram_token: args.telegram_token.clone().filter(|t| !t.is_empty()),
        telegram_api_url: args.telegram_api_url.clone(),
        discord_token: args.discord_token.clone().filter(|t| !t.is_empty()),
        discord_api_url: args.discord_api_url.clone(),
    };
    let socket = args
        .socket
        .clone()
        .unwrap_or_else(clibot_proto::default_socket_path);
    print!(
        "{}",
        config::render_effective(&config, &overrides, path.as_deref(), &socket, &args.prefix)
    );
    ExitCode::SUCCESS
}

/// On a terminal, as `clibotctl` does: no daemon answers, so one is started — by the
/// `clibotctl` beside this binary (or on PATH), which knows how and says what it did. Not with
/// `CLIBOT_NO_AUTOSTART=1`, and not for the chat platforms (a service manager starts those).
async fn autostart_daemon(socket: &Path) {
    let off = std::env::var("CLIBOT_NO_AUTOSTART").is_ok_and(|v| !v.is_empty() && v != "0");
    if off {
        return;
    }
    match clibot_proto::connect(socket).await {
        Err(e) if e.is_no_daemon() => {}
        _ => return,
    }
    let ctl = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("clibotctl")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| "clibotctl".into());
    let started = tokio::process::Command::new(&ctl)
        .arg("--socket")
        .arg(socket)
        .arg("status")
        .stdout(std::process::Stdio::null())
        .status()
        .await;
    if !started.is_ok_and(|s| s.success()) {
        eprintln!(
            "clibot-gateway: no clibotd answers at {} and {} could not start one; start it (clibotd &) and type again",
            socket.display(),
            ctl.display()
        );
    }
}

/// Which platforms to serve: those named by flags, else every one configured (in the config
/// file, or by a token in the environment).
fn plan(args: &Args, config: &GatewayConfig, path: Option<&Path>) -> Result<Vec<Spec>, String> {
    let specs = registry::plan(|name| flags(args, name), config)?;
    if specs.is_empty() {
        let file = path
            .map(|p| p.display().to_string())
            .or_else(|| clibot_proto::default_config_path().map(|p| p.display().to_string()))
            .unwrap_or_else(|| "~/.config/clibot/config.toml".into());
        return Err(format!(
            "no chat platform is configured: add [gateway.telegram] token = \"${{TELEGRAM_TOKEN}}\" (or [gateway.discord] token, [gateway.feishu] app_id and app_secret, or [gateway.slack] app_token and bot_token) to {file}, or try it on this terminal with --console"
        ));
    }
    Ok(specs)
}

/// What the command line says of platform `name`: the one place its flags are named.
fn flags<'a>(args: &'a Args, name: &str) -> Flags<'a> {
    match name {
        "console" => Flags {
            serve: args.console,
            ..Flags::default()
        },
        "telegram" => Flags {
            serve: args.telegram,
            token: args.telegram_token.as_deref().filter(|t| !t.is_empty()),
            api_url: args.telegram_api_url.as_deref(),
        },
        "discord" => Flags {
            serve: args.discord,
            token: args.discord_token.as_deref().filter(|t| !t.is_empty()),
            api_url: args.discord_api_url.as_deref(),
        },
        "feishu" => Flags {
            serve: args.feishu,
            ..Flags::default()
        },
        "slack" => Flags {
            serve: args.slack,
            ..Flags::default()
        },
        _ => Flags::default(),
    }
}

/// Serves every platform until the console's input ends (or forever, without a console).
async fn serve(
    specs: Vec<Spec>,
    machines: Arc<Vec<machines::Machine>>,
    lock_dir: PathBuf,
    parser: CommandParser,
    private: Vec<String>,
    (stall_after, down_notice_after): (Duration, Duration),
) -> ExitCode {
    let health = Health::new(stall_after);
    // Every machine's `clibotctl status` shows the gateway.
    for m in machines.iter() {
        tokio::spawn(health.clone().report(m.target.clone()));
    }
    tokio::spawn(ops::down::watch(health.clone(), down_notice_after));
    // Every platform's chats are kept from every configured credential, not only its own.
    let redactor = Arc::new(platforms::redacting::redactor(
        specs
            .iter()
            .flat_map(|s| s.secrets.iter().map(String::as_str))
            .chain(private.iter().map(String::as_str)),
    ));
    let mut console = None;
    for spec in specs {
        let ph = health.platform(spec.name);
        let task = tokio::spawn(run_platform(
            spec.clone(),
            machines.clone(),
            lock_dir.clone(),
            parser.clone(),
            ph,
            redactor.clone(),
        ));
        if spec.console {
            console = Some(task);
        }
    }
    match console {
        Some(task) => {
            let _ = task.await;
        }
        None => std::future::pending::<()>().await,
    }
    ExitCode::SUCCESS
}

/// One platform, for the life of the gateway: connect, relay and route until the connection
/// ends, then connect again with backoff (and jitter, so that several gateways do not retry in
/// step). The console ends with its input. A receive loop that completes no cycle within
/// `[gateway] stall_after` is aborted and started again the same way (see `progress.rs`).
async fn run_platform(
    spec: Spec,
    machines: Arc<Vec<machines::Machine>>,
    lock_dir: PathBuf,
    parser: CommandParser,
    health: PlatformHealth,
    redactor: Arc<Redactor>,
) {
    let name = spec.name;
    let socket = machines::home_target(&machines);
    // Kept across reconnections: who the daemon accepted where, in this process.
    let verified = Arc::new(inbound::verified::Verified::default());
    let claims = Arc::new(inbound::claim::Claims::default());
    let mut backoff = Duration::from_secs(1);
    let mut first = true;
    let default_chat = spec.default_chat.clone();
    let console = spec.console;
    let recv = platforms::Receiving::new(health.progress().clone());
    // A default chat the daemon refuses (not an admin's) is a config mistake to fix now, not
    // something to retry: the gateway refuses to start. A daemon not up yet is checked later.
    if let Some(chat) = &default_chat
        && let Ok(mut c) = clibot_proto::connect_to(&socket).await
    {
        let req = v1::SetDefaultChatRequest {
            platform: name.to_string(),
            chat: chat.clone(),
        };
        if let Err(s) = c.set_default_chat(req).await
            && s.code() == tonic::Code::PermissionDenied
        {
            eprintln!("clibot-gateway: {name}: {}", s.message());
            std::process::exit(2);
        }
    }
    // Why the last try failed, kept while trying again: a refused token is not "connecting".
    let mut last_failure = String::new();
    loop {
        health.state("connecting", &last_failure);
        let began = std::time::Instant::now();
        let at = registry::Start {
            prefix: parser.prefix(),
            lock_dir: &lock_dir,
            socket: &socket,
            recv: &recv,
        };
        match spec.connect.start(&at).await {
            Ok((platform, inbound)) => {
                let platform: Arc<dyn Platform> = Arc::new(platforms::redacting::Redacting::new(
                    platform,
                    redactor.clone(),
                ));
                health.progress().started();
                health.state("connected", "");
                last_failure.clear();
                health.heard();
                health.connected_through(Some(platform.clone()));
                let stalled = tokio::select! {
                    () = machines::serve_connection(
                        platform.clone(),
                        &machines,
                        &health,
                        default_chat.clone(),
                        &parser,
                        (verified.clone(), claims.clone()),
                        inbound,
                    ) => None,
                    idle = health.progress().stalled(), if !console => Some(idle),
                };
                recv.abort();
                health.connected_through(None);
                if console {
                    return;
                }
                match stalled {
                    Some(idle) => {
                        health.progress().restarted();
                        eprintln!(
                            "clibot-gateway: {name}: the receive loop completed no cycle (a batch fetched and handled) for {}s, over [gateway] stall_after = {}s; restarting it",
                            idle.as_secs(),
                            health.progress().stall_after().as_secs()
                        );
                        health.state(
                            "retrying",
                            &format!(
                                "stalled: no receive cycle for {}s; restarted",
                                idle.as_secs()
                            ),
                        );
                    }
                    None => {
                        eprintln!("clibot-gateway: {name}: the connection ended; connecting again");
                        health.state("retrying", "the connection ended");
                    }
                }
                if began.elapsed() > Duration::from_secs(60) {
                    backoff = Duration::from_secs(1);
                }
            }
            Err(e) if first && e.downcast_ref::<platforms::AlreadyPolling>().is_some() => {
                // At start, a second gateway for the same bot is a mistake to point out, not
                // a standby that takes turns with the first.
                eprintln!(
                    "clibot-gateway: {name}: {}",
                    clibot_proto::describe(e.as_ref())
                );
                std::process::exit(1);
            }
            Err(e) => {
                eprintln!(
                    "clibot-gateway: {name}: {}; retrying in {backoff:?}",
                    clibot_proto::describe(e.as_ref())
                );
                last_failure = clibot_proto::describe(e.as_ref());
                health.state("retrying", &last_failure);
            }
        }
        first = false;
        tokio::time::sleep(jitter(backoff)).await;
        backoff = (backoff * 2).min(Duration::from_secs(300));
    }
}

/// `d` plus up to a quarter more, from the clock's low bits (no need for a random source).
fn jitter(d: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|t| t.subsec_nanos())
        .unwrap_or(0);
    d + d.mul_f64(f64::from(nanos % 1000) / 4000.0)
}

/// `--probe-api URL`: one request with the client the platforms use; prints "ok" or the
/// cause (refused, DNS, TLS, timeout) and exits 1 when there was no HTTP answer at all.
fn probe_api(url: &str) -> ExitCode {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return ExitCode::FAILURE;
    };
    rt.block_on(async {
        let client = match reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
        {
            Ok(c) => c,
            Err(e) => {
                println!("cannot build an HTTP client: {e}");
                return ExitCode::FAILURE;
            }
        };
        match client.get(url).send().await {
            Ok(r) => {
                println!("ok: HTTP {}", r.status().as_u16());
                ExitCode::SUCCESS
            }
            Err(e) => {
                let chain = clibot_proto::describe(&e);
                println!("{}: {chain}", platforms::reach::network_cause(&chain));
                ExitCode::FAILURE
            }
        }
    })
}

/// `clibot-gateway status`: the platforms as the daemon last heard of them.
async fn status(socket: &Path, json: bool) -> ExitCode {
    let mut c = match clibot_proto::connect(socket).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("clibot-gateway: {e}");
            return ExitCode::FAILURE;
        }
    };
    let s = match c.status(v1::StatusRequest {}).await {
        Ok(s) => s.into_inner(),
        Err(e) => {
            eprintln!("clibot-gateway: the daemon did not answer: {}", e.message());
            return ExitCode::FAILURE;
        }
    };
    let healthy = !s.gateways.is_empty() && s.gateways.iter().all(|g| g.state == "connected");
    if json {
        let rows: Vec<serde_json::Value> = s
            .gateways
            .iter()
            .map(|g| {
                serde_json::json!({
                    "platform": g.platform, "state": g.state, "detail": g.detail,
                    "last_heard_ms": g.last_heard_ms, "chats_bound": g.chats_bound,
                    "deliveries": g.deliveries, "deliveries_failed": g.deliveries_failed, "reported_ms": g.reported_ms,
                    "pid": g.pid, "last_progress_ms": g.last_progress_ms, "restarts": g.restarts,
                "last_restart_ms": g.last_restart_ms, "stalled": g.stalled,
                "stall_after_ms": g.stall_after_ms,
                })
            })
            .collect();
        println!("{}", serde_json::Value::Array(rows));
    } else if s.gateways.is_empty() {
        println!("no gateway has reported to the daemon: start clibot-gateway");
    } else {
        let now = ops::health::now_ms();
        for g in &s.gateways {
            println!("{}", g.describe(now));
        }
    }
    if healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod cli_help_tests {
    use super::*;

    /// Every argument of every command says what it is in `--help`.
    #[test]
    fn every_argument_has_help() {
        use clap::CommandFactory;
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                let id = a.get_id().as_str();
                if id == "help" || id == "version" || a.is_hide_set() {
                    continue;
                }
                if a.get_help().is_none() && a.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Args::command(), "clibot-gateway", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:#?}");
    }
}
