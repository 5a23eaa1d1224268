//! One gateway over SSH (`--ssh`): what the SSH path adds, end to end through the fake
//! Telegram. The same daemon is served twice in one run, first by a gateway with its socket, then
//! by a gateway that reaches it only as a `[[gateway.machines]]` ssh entry — a real OpenSSH
//! server on loopback running `clibotctl dial-stdio` — so the difference is the SSH path alone:
//!
//! - **In**: a chat message → its text in the session's pane (seen on a tmux control client).
//! - **Out**: a completion hook on the session's machine → the reply's `sendMessage`.

use std::time::{Duration, Instant};

use clibot_tests::Harness;
use clibot_tests::fake_telegram::FakeTelegram;
use clibot_tests::sshd::Sshd;

use crate::chat::{ADMIN, KillOnDrop, PaneOutput, TOKEN};

const ROUNDS: usize = 20;

/// Times in ms, sorted, per path: (local, over ssh).
pub struct SshReport {
    pub in_local: Vec<f64>,
    pub in_ssh: Vec<f64>,
    pub out_local: Vec<f64>,
    pub out_ssh: Vec<f64>,
}

pub async fn run() -> anyhow::Result<SshReport> {
    let ssh_dir = tempfile_dir()?;
    let sshd = Sshd::start(&ssh_dir);
    let mut h = Harness::with_config(&format!(
        "\n[access.telegram]\npolicy = \"allowlist\"\nadmins = [\"{ADMIN}\"]\n\n[cli.fakeclaude]\nargv = [\"sh\", \"-c\", \"exec bash --norc --noprofile\"]\nadapter = \"claude\"\n"
    ));
    let base = std::fs::read_to_string(&h.config)?
        .replace("poll_interval_ms = 200", "poll_interval_ms = 2000");
    std::fs::write(&h.config, &base)?;
    h.start_daemon();
    let remote = format!(
        "env CLIBOT_SOCKET={} {}",
        h.socket.display(),
        clibot_tests::bin("clibotctl").display()
    );
    let options: Vec<String> = sshd
        .client_options()
        .iter()
        .map(|o| format!("{o:?}"))
        .collect();
    let over_ssh = format!(
        "{base}\n[[gateway.machines]]\nname = \"box\"\nssh = \"{}\"\nssh_options = [{}]\nremote_clibotctl = \"{remote}\"\n",
        sshd.url(),
        options.join(", ")
    );
    let mut report = SshReport {
        in_local: Vec::new(),
        in_ssh: Vec::new(),
        out_local: Vec::new(),
        out_ssh: Vec::new(),
    };
    // One fake Bot API for both gateways: Telegram never hands out a message id twice, and
    // the daemon remembers the ids it handled.
    let tg = FakeTelegram::start(TOKEN);
    for (label, config) in [("local", base.clone()), ("ssh", over_ssh)] {
        std::fs::write(&h.config, &config)?;
        let (inn, out) = measure(&h, &tg, label).await?;
        if label == "local" {
            (report.in_local, report.out_local) = (inn, out);
        } else {
            (report.in_ssh, report.out_ssh) = (inn, out);
        }
    }
    std::fs::write(&h.config, &base)?;
    drop(sshd);
    let _ = std::fs::remove_dir_all(&ssh_dir);
    Ok(report)
}

fn tempfile_dir() -> anyhow::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("clibot-bench-sshd-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// One gateway (as the config now says): message → pane and hook → reply, `ROUNDS` each.
async fn measure(
    h: &Harness,
    tg: &FakeTelegram,
    label: &str,
) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    let _gateway = KillOnDrop(h.gateway(
        &["--telegram", "--telegram-api-url", &tg.url()],
        &[("TELEGRAM_TOKEN", TOKEN)],
    ));
    anyhow::ensure!(
        tg.wait_polling(Duration::from_secs(20)),
        "the gateway polls"
    );
    let work = h.work.display().to_string();
    let wait_text = |needle: String| {
        tg.wait_sent("a reply", move |s| {
            s.iter().any(|m| m.text.contains(&needle))
        });
    };
    let (pane_name, hook_name) = (format!("in-{label}"), format!("hk-{label}"));
    tg.push_message(
        ADMIN,
        ADMIN,
        "Owner",
        &format!("!!new {pane_name} bash {work}"),
    );
    wait_text(format!("started {pane_name}"));
    tokio::time::sleep(Duration::from_millis(800)).await;
    let pane = PaneOutput::attach(h, &pane_name)?;
    let mut inn = Vec::new();
    for i in 0..ROUNDS {
        let marker = format!("m{i}{label}");
        let t0 = Instant::now();
        tg.push_message(ADMIN, ADMIN, "Owner", &format!(": {marker}"));
        let at = pane.wait_for(&marker, t0).await?;
        inn.push(at.duration_since(t0).as_secs_f64() * 1000.0);
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    drop(pane);
    tg.push_message(
        ADMIN,
        ADMIN,
        "Owner",
        &format!("!!new {hook_name} fakeclaude {work}"),
    );
    wait_text(format!("started {hook_name}"));
    tokio::time::sleep(Duration::from_millis(800)).await;
    let (sid, token) = crate::detect::hook_identity(h, &hook_name)?;
    let mut out = Vec::new();
    for i in 0..ROUNDS {
        let text = format!("reply-{i}-{label}");
        let fire = || crate::detect::fire_stop_hook(h, &sid, &token, &text);
        out.push(crate::chat::hook_to_sent_ms(tg, fire, &text)?);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    for v in [&mut inn, &mut out] {
        v.sort_by(|a, b| a.total_cmp(b));
    }
    Ok((inn, out))
}

impl SshReport {
    pub fn print(&self) {
        let q = |v: &[f64], p: f64| {
            v.get(((v.len().saturating_sub(1)) as f64 * p).round() as usize)
                .copied()
                .unwrap_or(0.0)
        };
        println!(
            "| path | local socket: median (p90) | over ssh (same run): median (p90) | added (median) | ratio |"
        );
        println!("|---|---|---|---|---|");
        for (what, local, ssh) in [
            (
                "chat message → its text in the pane",
                &self.in_local,
                &self.in_ssh,
            ),
            (
                "completion hook → the reply's `sendMessage`",
                &self.out_local,
                &self.out_ssh,
            ),
        ] {
            println!(
                "| {what} | {:.1} ms ({:.1} ms) | {:.1} ms ({:.1} ms) | {:+.1} ms | {:.2}× |",
                q(local, 0.5),
                q(local, 0.9),
                q(ssh, 0.5),
                q(ssh, 0.9),
                q(ssh, 0.5) - q(local, 0.5),
                q(ssh, 0.5) / q(local, 0.5).max(1e-9)
            );
        }
    }
}
