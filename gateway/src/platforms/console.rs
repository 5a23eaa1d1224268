//! The console platform: standard input is one chat, standard output shows what the bot says.
//! For trying clibot out with no bot token, and for tests.

use async_trait::async_trait;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::{Mutex, mpsc};

use crate::platforms::{Inbound, Platform};

/// The one chat of the console.
pub const CHAT: &str = "console";

pub struct Console {
    out: Mutex<tokio::io::Stdout>,
}

impl Console {
    /// Starts reading stdin; lines arrive on the returned channel (closed at end of input).
    pub fn start() -> (Console, mpsc::Receiver<Inbound>) {
        let (tx, rx) = mpsc::channel(64);
        let user = std::env::var("USER").unwrap_or_else(|_| "console".into());
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if line.trim().is_empty() {
                    continue;
                }
                let msg = Inbound {
                    chat: CHAT.into(),
                    user: user.clone(),
                    user_name: user.clone(),
                    text: line,
                    id: String::new(),
                    prompt: None,
                    group: false,
                    topics: false,
                    file: None,
                    ack: None,
                };
                if tx.send(msg).await.is_err() {
                    break;
                }
            }
        });
        (
            Console {
                out: Mutex::new(tokio::io::stdout()),
            },
            rx,
        )
    }
}

#[async_trait]
impl Platform for Console {
    fn name(&self) -> &str {
        "console"
    }

    fn consumer(&self) -> String {
        "console".into()
    }

    fn is_local(&self) -> bool {
        true
    }

    fn max_message(&self) -> usize {
        1 << 20
    }

    async fn send(&self, _chat: &str, text: &str) -> anyhow::Result<()> {
        let mut out = self.out.lock().await;
        out.write_all(text.as_bytes()).await?;
        if !text.ends_with('\n') {
            out.write_all(b"\n").await?;
        }
        out.flush().await?;
        Ok(())
    }
}
