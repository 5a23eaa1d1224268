//! The scale sweep (`--sessions 25,100,200,500`): idle `bash` sessions are spawned one after
//! another into one daemon; at each checkpoint the benchmark records the batch's spawn times,
//! the daemon's RSS, the idle CPU of the daemon with its tmux client and of the tmux server, and
//! how fast a prompt in the newest session becomes a `waiting` event while all the others sit
//! idle. Printed as a curve, so that a regression shows as a slope. Baseline in the same run: a
//! bare `tmux new-session` on the same server at the same checkpoint.

use std::time::{Duration, Instant};

use anyhow::Context;
use clibot_proto::v1::{self, event::Kind};
use clibot_tests::Harness;
use tokio_stream::StreamExt;

use crate::detect::{children_of, cpu_ticks, tmux_server_pid};
use crate::{bare_new_session, follow_now, ms, percentile, rss_kib};

/// Prompts measured at each checkpoint.
const PROMPTS: usize = 7;
/// Bare `tmux new-session` calls at each checkpoint (the baseline; removed again at once).
const BARE: usize = 5;
/// How long idle CPU is measured at each checkpoint.
const IDLE: Duration = Duration::from_secs(10);

pub struct Point {
    pub sessions: usize,
    pub spawn: Vec<Duration>,
    pub bare: Vec<Duration>,
    pub rss_kib: u64,
    pub idle_daemon_pct: f64,
    pub idle_tmux_pct: f64,
    pub prompt_ms: Vec<f64>,
}

pub async fn run(h: &Harness, pid: u32, checkpoints: &[usize]) -> anyhow::Result<Vec<Point>> {
    let work = h.work.display().to_string();
    let mut c = h.client().await;
    let mut points = Vec::new();
    let mut n = 0usize;
    for &target in checkpoints {
        let mut spawn = Vec::new();
        while n < target {
            let t = Instant::now();
            c.spawn_session(v1::SpawnSessionRequest {
                name: format!("s{n}"),
                cli: "bash".into(),
                dir: work.clone(),
                ..Default::default()
            })
            .await
            .with_context(|| format!("spawn s{n}"))?;
            spawn.push(t.elapsed());
            n += 1;
        }
        spawn.sort();
        // The same server, the same moment: what tmux itself takes for one more session.
        // Sized as clibotd sizes its sessions, and kept rather than killed at once: tmux
        // 3.3a's server crashed (a NULL dereference, the same address each time) on an unsized
        // `new-session` with a few hundred control clients attached. A few extra sessions do
        // not change the curve.
        let mut bare = Vec::new();
        for i in 0..BARE {
            bare.push(
                bare_new_session(
                    h,
                    &format!("bare{target}-{i}"),
                    &work,
                    &["-x", "120", "-y", "40", "--", "sleep", "600"],
                )
                .with_context(|| format!("at {n} sessions"))?,
            );
        }
        bare.sort();
        tokio::time::sleep(Duration::from_secs(3)).await;
        let rss = rss_kib(pid)?;
        let children = children_of(pid);
        let server = tmux_server_pid(h);
        let ticks = |pids: &[u32]| pids.iter().map(|p| cpu_ticks(*p)).sum::<u64>();
        let d0 = ticks(&[pid]) + ticks(&children);
        let s0 = server.map(cpu_ticks).unwrap_or(0);
        let t0 = Instant::now();
        tokio::time::sleep(IDLE).await;
        let secs = t0.elapsed().as_secs_f64();
        let d1 = ticks(&[pid]) + ticks(&children);
        let s1 = server.map(cpu_ticks).unwrap_or(0);
        // USER_HZ is 100 on Linux.
        let idle_daemon_pct = (d1 - d0) as f64 / 100.0 / secs * 100.0;
        let idle_tmux_pct = (s1 - s0) as f64 / 100.0 / secs * 100.0;
        let prompt_ms = prompt_latency(h, &mut c, &format!("s{}", n - 1)).await?;
        eprintln!(
            "{target} sessions: spawn median {} ms, RSS {:.1} MB, idle {idle_daemon_pct:.2} % + tmux {idle_tmux_pct:.2} %",
            ms(percentile(&spawn, 0.5)),
            rss as f64 / 1024.0
        );
        points.push(Point {
            sessions: target,
            spawn,
            bare,
            rss_kib: rss,
            idle_daemon_pct,
            idle_tmux_pct,
            prompt_ms,
        });
    }
    Ok(points)
}

/// A `[y/N]` question in session `name` appearing D ms after Enter reaches the pane (as a
/// person at the desk would press it), to the `waiting` event on a stream. The moment the
/// question appears is taken from tmux itself: a control client of the bench's own, attached to
/// the session, sees the question's bytes leave the pane — so neither the bench's `send-keys`
/// nor the shell's `sleep` (both slower on a server with many panes) is counted as clibot's.
async fn prompt_latency(
    h: &Harness,
    c: &mut clibot_proto::Client,
    name: &str,
) -> anyhow::Result<Vec<f64>> {
    use tokio::io::AsyncBufReadExt;
    let mut observer = tokio::process::Command::new("tmux")
        .arg("-S")
        .arg(&h.tmux_socket)
        .args(["-C", "attach-session", "-t", name, "-f", "read-only"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("attach the bench's control client")?;
    let stdout = observer.stdout.take().context("observer stdout")?;
    let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        while let Ok(Some(l)) = lines.next_line().await {
            if l.starts_with("%output ") && seen_tx.send((l, Instant::now())).is_err() {
                break;
            }
        }
    });
    let mut out = Vec::new();
    for round in 0..PROMPTS {
        let delay_ms = 200 + (round as u64 * 137) % 600;
        let question = format!("Go on with {round}? [y/N] ");
        h.ctl_ok(&[
            "send",
            name,
            &format!(
                "read _; sleep {}; read -p '{question}' a",
                delay_ms as f64 / 1000.0
            ),
        ]);
        tokio::time::sleep(Duration::from_millis(600)).await;
        while seen_rx.try_recv().is_ok() {}
        let mut stream = follow_now(c, name).await?;
        anyhow::ensure!(
            h.tmux(&["send-keys", "-t", name, "Enter"]).status.success(),
            "send-keys"
        );
        let needle = format!("Go on with {round}?");
        let appear = loop {
            let (line, at) = tokio::time::timeout(Duration::from_secs(15), seen_rx.recv())
                .await
                .with_context(|| format!("the question never appeared in {name}"))?
                .context("the bench's control client ended")?;
            if line.contains(&needle) {
                break at;
            }
        };
        let at = loop {
            let ev = tokio::time::timeout(Duration::from_secs(15), stream.next())
                .await
                .with_context(|| format!("no waiting event in {name} within 15 s"))?
                .context("stream ended")??;
            if matches!(ev.kind, Some(Kind::Waiting(_))) {
                break Instant::now();
            }
        };
        out.push(at.saturating_duration_since(appear).as_secs_f64() * 1000.0);
        h.ctl_ok(&["answer", name, "n"]);
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    let _ = observer.kill().await;
    out.sort_by(|a, b| a.total_cmp(b));
    Ok(out)
}

pub fn print(points: &[Point]) {
    println!(
        "| sessions | spawn median (p90) | bare `tmux new-session` median | ratio | daemon RSS | idle CPU: clibotd + its tmux client | idle CPU: tmux server | prompt → `waiting` median (max) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for p in points {
        let med = |v: &[f64]| v.get(v.len() / 2).copied().unwrap_or(0.0);
        println!(
            "| {} | {} ms ({} ms) | {} ms | {:.1}× | {:.1} MB | {:.2} % | {:.2} % | {:.1} ms ({:.1} ms) |",
            p.sessions,
            ms(percentile(&p.spawn, 0.5)),
            ms(percentile(&p.spawn, 0.9)),
            ms(percentile(&p.bare, 0.5)),
            percentile(&p.spawn, 0.5).as_secs_f64()
                / percentile(&p.bare, 0.5).as_secs_f64().max(1e-9),
            p.rss_kib as f64 / 1024.0,
            p.idle_daemon_pct,
            p.idle_tmux_pct,
            med(&p.prompt_ms),
            p.prompt_ms.last().copied().unwrap_or(0.0),
        );
    }
}
