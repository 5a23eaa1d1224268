//! End to end through a chat (`--chat`): the real gateway against the fake Telegram Bot API
//! from `tests/`, the real daemon, bash in tmux.
//!
//! - **In**: a message pushed into the fake (a waiting `getUpdates` is woken at once) → its
//!   text echoed in the pane, seen on a tmux control client of the benchmark's own. Baseline
//!   in the same run: the bare daemon path, `SendInput` over gRPC → the same echo.
//! - **Out**: a completion hook (`clibotctl hook`, a `Stop` payload) → the reply's
//!   `sendMessage` arriving at the fake. Baseline: the same hook → the `turn_completed` event on
//!   a `WatchEvents` stream.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use clibot_proto::v1;
use clibot_tests::Harness;
use clibot_tests::fake_telegram::FakeTelegram;

pub(crate) const TOKEN: &str = "123456789:AAFakeTokenForClibotBenchOnly_0123456789";
pub(crate) const ADMIN: i64 = 100;
const ROUNDS: usize = 30;

pub struct ChatReport {
    pub in_chat: Vec<f64>,
    pub in_rpc: Vec<f64>,
    pub out_chat: Vec<f64>,
    pub out_rpc: Vec<f64>,
}

/// Everything a pane prints, as a control client sees it, with the time each piece came.
pub(crate) struct PaneOutput {
    seen: Arc<Mutex<Vec<(Instant, String)>>>,
    child: std::process::Child,
}

impl PaneOutput {
    pub(crate) fn attach(h: &Harness, session: &str) -> anyhow::Result<PaneOutput> {
        let mut child = Command::new("tmux")
            .arg("-S")
            .arg(&h.tmux_socket)
            .args(["-C", "attach-session", "-f", "read-only", "-t", session])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let out = child.stdout.take().context("stdout")?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.strip_prefix("%output ") {
                    let text = rest.split_once(' ').map(|(_, t)| t).unwrap_or("");
                    if let Ok(mut v) = s.lock() {
                        v.push((Instant::now(), text.to_string()));
                    }
                }
            }
        });
        Ok(PaneOutput { seen, child })
    }

    /// When `marker` (printable ASCII) had appeared in the output received after `from`.
    pub(crate) async fn wait_for(&self, marker: &str, from: Instant) -> anyhow::Result<Instant> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(v) = self.seen.lock() {
                let mut acc = String::new();
                for (at, t) in v.iter().filter(|(at, _)| *at >= from) {
                    acc.push_str(t);
                    if acc.contains(marker) {
                        return Ok(*at);
                    }
                }
            }
            anyhow::ensure!(Instant::now() < deadline, "{marker} never reached the pane");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// A completion hook fired by `fire` (a reply holding `text`) to the reply's `sendMessage` at the
/// fake Telegram, in ms.
pub(crate) fn hook_to_sent_ms(
    tg: &FakeTelegram,
    fire: impl FnOnce() -> anyhow::Result<std::process::Child>,
    text: &str,
) -> anyhow::Result<f64> {
    let t0 = Instant::now();
    let mut child = fire()?;
    let needle = text.to_string();
    let sent = tg.wait_sent("the reply", move |s| {
        s.iter()
            .any(|m| m.method == "sendmessage" && m.text.contains(&needle))
    });
    let _ = child.wait();
    let at = sent
        .iter()
        .find(|m| m.method == "sendmessage" && m.text.contains(text))
        .map(|m| m.at)
        .context("sent")?;
    Ok(at.duration_since(t0).as_secs_f64() * 1000.0)
}

pub(crate) struct KillOnDrop(pub(crate) std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for PaneOutput {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub async fn run() -> anyhow::Result<ChatReport> {
    let mut h = Harness::with_config(&format!(
        "\n[access.telegram]\npolicy = \"allowlist\"\nadmins = [\"{ADMIN}\"]\n\n[cli.fakeclaude]\nargv = [\"sh\", \"-c\", \"exec bash --norc --noprofile\"]\nadapter = \"claude\"\n"
    ));
    let cfg = std::fs::read_to_string(&h.config)?
        .replace("poll_interval_ms = 200", "poll_interval_ms = 2000");
    std::fs::write(&h.config, cfg)?;
    h.start_daemon();
    let tg = FakeTelegram::start(TOKEN);
    // Ended on every way out, errors included.
    let _gateway = KillOnDrop(h.gateway(
        &["--telegram", "--telegram-api-url", &tg.url()],
        &[("TELEGRAM_TOKEN", TOKEN)],
    ));
    anyhow::ensure!(
        tg.wait_polling(Duration::from_secs(20)),
        "the gateway polls"
    );
    let work = h.work.display().to_string();
    let mut c = h.client().await;
    let wait_text = |needle: String| {
        tg.wait_sent("a reply", move |s| {
            s.iter().any(|m| m.text.contains(&needle))
        });
    };

    // In: chat message → pane, and SendInput → pane.
    tg.push_message(ADMIN, ADMIN, "Owner", &format!("!!new ch bash {work}"));
    wait_text("started ch".into());
    tokio::time::sleep(Duration::from_millis(800)).await;
    let pane = PaneOutput::attach(&h, "ch")?;
    let mut report = ChatReport {
        in_chat: Vec::new(),
        in_rpc: Vec::new(),
        out_chat: Vec::new(),
        out_rpc: Vec::new(),
    };
    for i in 0..ROUNDS {
        for via_chat in [true, false] {
            let marker = format!("m{i}x{}", u8::from(via_chat));
            let t0 = Instant::now();
            if via_chat {
                tg.push_message(ADMIN, ADMIN, "Owner", &format!(": {marker}"));
            } else {
                c.send_input(v1::SendInputRequest {
                    session: "ch".into(),
                    text: format!(": {marker}"),
                    submit: true,
                    ..Default::default()
                })
                .await?;
            }
            let at = pane.wait_for(&marker, t0).await?;
            let ms = at.duration_since(t0).as_secs_f64() * 1000.0;
            if via_chat {
                report.in_chat.push(ms);
            } else {
                report.in_rpc.push(ms);
            }
            // Let the turn end (bash is read by quiescence) before the next message.
            tokio::time::sleep(Duration::from_millis(700)).await;
        }
    }
    drop(pane);

    // Out: completion hook → sendMessage at the fake, and → the event on a stream.
    tg.push_message(
        ADMIN,
        ADMIN,
        "Owner",
        &format!("!!new hk fakeclaude {work}"),
    );
    wait_text("started hk".into());
    tokio::time::sleep(Duration::from_millis(800)).await;
    let (sid, token) = crate::detect::hook_identity(&h, "hk")?;
    let hook = |text: &str| crate::detect::fire_stop_hook(&h, &sid, &token, text);
    for i in 0..ROUNDS {
        // Through the chat.
        report.out_chat.push(hook_to_sent_ms(
            &tg,
            || hook(&format!("reply-{i}-chat")),
            &format!("reply-{i}-chat"),
        )?);
        tokio::time::sleep(Duration::from_millis(300)).await;

        // The daemon alone.
        let ms = crate::detect::hook_to_event_ms(
            &h,
            &mut c,
            "hk",
            &sid,
            &token,
            &format!("reply-{i}-rpc"),
        )
        .await?;
        report.out_rpc.push(ms);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    for v in [
        &mut report.in_chat,
        &mut report.in_rpc,
        &mut report.out_chat,
        &mut report.out_rpc,
    ] {
        v.sort_by(|a, b| a.total_cmp(b));
    }
    Ok(report)
}

impl ChatReport {
    pub fn print(&self) {
        let q = |v: &[f64], p: f64| {
            v.get(((v.len().saturating_sub(1)) as f64 * p).round() as usize)
                .copied()
                .unwrap_or(0.0)
        };
        println!(
            "| path | through the chat: median (p90) | bare daemon path (same run): median (p90) | ratio | target |"
        );
        println!("|---|---|---|---|---|");
        println!(
            "| message → its text in the pane | {:.1} ms ({:.1} ms) | {:.1} ms ({:.1} ms) `SendInput` RPC | {:.1}× | < 30 ms |",
            q(&self.in_chat, 0.5),
            q(&self.in_chat, 0.9),
            q(&self.in_rpc, 0.5),
            q(&self.in_rpc, 0.9),
            q(&self.in_chat, 0.5) / q(&self.in_rpc, 0.5).max(1e-9)
        );
        println!(
            "| completion hook → the reply's `sendMessage` | {:.1} ms ({:.1} ms) | {:.1} ms ({:.1} ms) hook → `turn_completed` on a stream | {:.1}× | < 30 ms |",
            q(&self.out_chat, 0.5),
            q(&self.out_chat, 0.9),
            q(&self.out_rpc, 0.5),
            q(&self.out_rpc, 0.9),
            q(&self.out_chat, 0.5) / q(&self.out_rpc, 0.5).max(1e-9)
        );
    }
}
