//! The event log's memory (`--event-memory`): a session's turns each reply 250 KB (under the
//! 256 KiB an event carries), 400 of them, completed by `Stop` hooks as Claude Code's would.
//! The daemon's RSS before and after, and how long reading every retained event back takes
//! (`clibotctl events --since 0 --json`, which reads slimmed events from the file). Baseline in
//! the same run: the same daemon with `[daemon] event_memory_bytes` so large that nothing is
//! slimmed — the log bounded by its event count alone, as before.

use std::time::{Duration, Instant};

use anyhow::Context;
use clibot_tests::Harness;

const TURNS: usize = 400;
const REPLY: usize = 250_000;

/// One configuration's numbers.
pub struct Row {
    pub label: &'static str,
    pub rss_before_kib: u64,
    pub rss_after_kib: u64,
    pub read_all_ms: f64,
    pub read_bytes: usize,
}

async fn measure(label: &'static str, memory: Option<u64>) -> anyhow::Result<Row> {
    let mut h = Harness::with_config(
        "\n[cli.fakeclaude]\nargv = [\"sh\", \"-c\", \"exec bash --norc --noprofile\"]\nadapter = \"claude\"\n",
    );
    if let Some(m) = memory {
        h.set_daemon_keys(&format!("event_memory_bytes = {m}"));
    }
    h.start_daemon();
    let pid = h.daemon_pid().context("daemon pid")?;
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "hooked", "--cli", "fakeclaude", "--dir", &work]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_before_kib = crate::rss_kib(pid)?;
    let (sid, token) = crate::detect::hook_identity(&h, "hooked")?;
    for i in 0..TURNS {
        let text = format!("{i:05} {}", "y".repeat(REPLY));
        let mut child = crate::detect::fire_stop_hook(&h, &sid, &token, &text)?;
        child.wait()?;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_after_kib = crate::rss_kib(pid)?;
    let t = Instant::now();
    let all = h.ctl_ok(&["events", "--since", "0", "--json"]);
    let read_all_ms = t.elapsed().as_secs_f64() * 1000.0;
    anyhow::ensure!(
        all.contains(&format!("{:05} ", TURNS - 1)) && all.contains("00000 "),
        "every reply read back"
    );
    Ok(Row {
        label,
        rss_before_kib,
        rss_after_kib,
        read_all_ms,
        read_bytes: all.len(),
    })
}

pub async fn run() -> anyhow::Result<Vec<Row>> {
    Ok(vec![
        measure("count only (event_memory_bytes = 1 TiB)", Some(1 << 40)).await?,
        measure("default (event_memory_bytes = 16 MiB)", None).await?,
    ])
}

pub fn print(rows: &[Row]) {
    println!(
        "| event log in memory | RSS before | after {TURNS} replies of {} KB | growth | read every event back | bytes read |",
        REPLY / 1000
    );
    println!("|---|---|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {:.1} MB | {:.1} MB | {:.1} MB | {:.0} ms | {:.1} MB |",
            r.label,
            r.rss_before_kib as f64 / 1024.0,
            r.rss_after_kib as f64 / 1024.0,
            (r.rss_after_kib as f64 - r.rss_before_kib as f64) / 1024.0,
            r.read_all_ms,
            r.read_bytes as f64 / 1e6
        );
    }
}
