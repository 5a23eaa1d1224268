//! `clibot-gateway`: relays clibotd sessions to chats — `--telegram` (long polling), `--discord`
//! (its gateway websocket), or
//! `--console`, a chat on this terminal that needs no bot token. It holds no state that
//! matters — bindings, access and the delivery cursor live in the daemon — so it can be killed
//! at any moment and started again.

mod console;
mod discord;
mod platform;
mod relay;
mod router;
mod shown;
mod telegram;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use clibot_gateway::command::CommandParser;

/// clibot-gateway — drive clibot sessions from a chat.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// A chat on this terminal: type messages on stdin, read replies on stdout.
    #[arg(long, conflicts_with_all = ["telegram", "discord"])]
    console: bool,
    /// Discord, through its gateway (token from --discord-token, DISCORD_TOKEN, or
    /// `[gateway.discord] token` in the config file).
    #[arg(long, conflicts_with = "telegram")]
    discord: bool,
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
    /// Telegram, by long polling (token from --telegram-token, TELEGRAM_TOKEN, or
    /// `[gateway.telegram] token` in the config file).
    #[arg(long)]
    telegram: bool,
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
    /// Config file [default: ~/.config/clibot/config.toml]
    #[arg(long, env = "CLIBOT_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// The daemon's socket [default: $XDG_RUNTIME_DIR/clibot/clibotd.sock]
    #[arg(long, env = "CLIBOT_SOCKET", value_name = "PATH")]
    socket: Option<PathBuf>,
    /// What marks a gateway command (everything else goes to the CLI).
    #[arg(long, default_value = "!!")]
    prefix: String,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if !args.console && !args.telegram && !args.discord {
        eprintln!("clibot-gateway: choose a platform: --telegram, --discord or --console");
        return ExitCode::from(2);
    }
    let parser = match CommandParser::new(&args.prefix) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("clibot-gateway: --prefix: {e}");
            return ExitCode::from(2);
        }
    };
    let chosen = |on: bool, name: &str, token: &Option<String>, url: &Option<String>| {
        on.then(|| settings(&args, name, token.clone(), url.clone()))
            .transpose()
    };
    let (discord, telegram) = match (
        chosen(
            args.discord,
            "discord",
            &args.discord_token,
            &args.discord_api_url,
        ),
        chosen(
            args.telegram,
            "telegram",
            &args.telegram_token,
            &args.telegram_api_url,
        ),
    ) {
        (Ok(d), Ok(t)) => (d, t),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("clibot-gateway: {e}");
            return ExitCode::from(2);
        }
    };
    let Ok(rt) = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    else {
        eprintln!("clibot-gateway: cannot start the runtime");
        return ExitCode::FAILURE;
    };
    let socket = args
        .socket
        .clone()
        .unwrap_or_else(clibot_proto::default_socket_path);
    // Gateway locks live beside the daemon's socket: one poller per bot and daemon.
    let lock_dir = socket
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_else(clibot_proto::private_runtime_dir);
    rt.block_on(async move {
        let started: anyhow::Result<(Arc<dyn platform::Platform>, _)> = match (telegram, discord) {
            (Some((token, api_url)), _) => {
                telegram::Telegram::start(&token, api_url.as_deref(), parser.prefix(), &lock_dir)
                    .await
                    .map(|(t, rx)| (Arc::new(t) as Arc<dyn platform::Platform>, rx))
            }
            (None, Some((token, api_url))) => discord::Discord::start(
                &token,
                api_url.as_deref(),
                parser.prefix(),
                &lock_dir,
                &socket,
            )
            .await
            .map(|(d, rx)| (Arc::new(d) as Arc<dyn platform::Platform>, rx)),
            (None, None) => {
                let (c, rx) = console::Console::start();
                Ok((Arc::new(c) as Arc<dyn platform::Platform>, rx))
            }
        };
        let (platform, mut inbound) = match started {
            Ok(p) => p,
            Err(e) => {
                eprintln!("clibot-gateway: {e}");
                return ExitCode::FAILURE;
            }
        };
        tokio::spawn(relay::run(platform.clone(), socket.clone()));
        let router = router::Router {
            platform: platform.clone(),
            parser,
        };
        let mut client: Option<clibot_proto::Client> = None;
        while let Some(mut msg) = inbound.recv().await {
            let ack = msg.ack.take();
            // While the daemon is away: say so, keep the message, and try again with backoff.
            let mut waited = Duration::from_millis(200);
            let mut told = false;
            loop {
                if client.is_none() {
                    match clibot_proto::connect(&socket).await {
                        Ok(c) => client = Some(c),
                        Err(e) => {
                            if !told {
                                let _ = platform
                                    .send(
                                        &msg.chat,
                                        &format!("clibotd is not reachable ({e}); retrying"),
                                    )
                                    .await;
                                told = true;
                            }
                            tokio::time::sleep(waited).await;
                            waited = (waited * 2).min(Duration::from_secs(5));
                            continue;
                        }
                    }
                }
                let Some(c) = client.as_mut() else { continue };
                match router.handle(c, &msg).await {
                    Ok(()) => break,
                    Err(e) => {
                        eprintln!("clibot-gateway: lost the daemon ({e}); reconnecting");
                        client = None;
                    }
                }
            }
            if let Some(ack) = ack {
                let _ = ack.send(());
            }
        }
        ExitCode::SUCCESS
    })
}

/// A platform's token and API URL: flags and environment first, then `[gateway.PLATFORM]` in
/// the config file (where `${NAME}` is replaced by the environment variable NAME).
fn settings(
    args: &Args,
    platform: &str,
    token: Option<String>,
    api_url: Option<String>,
) -> Result<(String, Option<String>), String> {
    let path = args.config.clone().or_else(|| {
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config/clibot/config.toml"))
    });
    let table: Option<toml::Table> = path
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|t| t.parse().ok());
    let from_config = |key: &str| -> Option<String> {
        let v = table
            .as_ref()?
            .get("gateway")?
            .get(platform)?
            .get(key)?
            .as_str()?
            .to_string();
        Some(expand_env(&v))
    };
    let env = format!("{}_TOKEN", platform.to_uppercase());
    let token = token.or_else(|| from_config("token")).filter(|t| !t.is_empty()).ok_or(format!(
        "no {platform} bot token: pass --{platform}-token, export {env}, or set [gateway.{platform}] token"
    ))?;
    Ok((token, api_url.or_else(|| from_config("api_url"))))
}

/// `${NAME}` → the environment variable (empty when unset).
fn expand_env(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        match rest[i + 2..].find('}') {
            Some(end) => {
                out.push_str(&std::env::var(&rest[i + 2..i + 2 + end]).unwrap_or_default());
                rest = &rest[i + 3 + end..];
            }
            None => {
                out.push_str(&rest[i..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}
