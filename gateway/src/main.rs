//! `clibot-gateway`: relays clibotd sessions to chats. Today: `--console`, a chat on this
//! terminal (no bot token needed). It holds no state that matters — bindings, access and the
//! delivery cursor live in the daemon — so it can be killed at any moment and started again.

mod console;
mod platform;
mod relay;
mod router;

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
    #[arg(long)]
    console: bool,
    /// The daemon's socket [default: $XDG_RUNTIME_DIR/clibot/clibotd.sock]
    #[arg(long, env = "CLIBOT_SOCKET", value_name = "PATH")]
    socket: Option<PathBuf>,
    /// What marks a gateway command (everything else goes to the CLI).
    #[arg(long, default_value = "!!")]
    prefix: String,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if !args.console {
        eprintln!(
            "clibot-gateway: choose a platform: --console (Telegram and Discord are not available in this build)"
        );
        return ExitCode::from(2);
    }
    let parser = match CommandParser::new(&args.prefix) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("clibot-gateway: --prefix: {e}");
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
        .unwrap_or_else(clibot_proto::default_socket_path);
    rt.block_on(async move {
        let (console, mut inbound) = console::Console::start();
        let platform: Arc<dyn platform::Platform> = Arc::new(console);
        tokio::spawn(relay::run(platform.clone(), socket.clone()));
        let router = router::Router {
            platform: platform.clone(),
            parser,
        };
        let mut client: Option<clibot_proto::Client> = None;
        while let Some(msg) = inbound.recv().await {
            // Reconnect lazily; while the daemon is away, say so instead of dropping the message.
            let mut waited = Duration::from_millis(200);
            let c = loop {
                if let Some(c) = client.as_mut() {
                    break c;
                }
                match clibot_proto::connect(&socket).await {
                    Ok(c) => client = Some(c),
                    Err(e) => {
                        let _ = platform
                            .send(
                                &msg.chat,
                                &format!("clibotd is not reachable ({e}); retrying"),
                            )
                            .await;
                        tokio::time::sleep(waited).await;
                        waited = (waited * 2).min(Duration::from_secs(5));
                    }
                }
            };
            router.handle(c, msg).await;
        }
    });
    ExitCode::SUCCESS
}
