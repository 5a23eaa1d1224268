//! clibot-bench: measures clibotd on this machine and prints a Markdown report.
//!
//! Run with `cargo run --release -p clibot-bench` (it builds and uses the release binaries).
//! Every number is compared with a baseline measured in the same run: a bare Unix-socket echo
//! for RPC latency, and a bare `tmux new-session` for spawn time.
//!
//! Modes: no argument, the single-daemon report; `--sessions 25,100,200,500`, the scale sweep
//! ([`scale`]); `--chat`, end to end through the fake Telegram ([`chat`]); `--wake`, waking a
//! hibernated session ([`wake`]); `--ssh`, what a gateway reaching the daemon over SSH adds
//! ([`ssh`]); `--event-memory`, the event log's memory with many large replies
//! ([`event_memory`]).

use std::path::Path;
use std::time::{Duration, Instant};

mod chat;
mod detect;
mod event_memory;
mod scale;
mod ssh;
mod wake;

use anyhow::Context;
use clibot_proto::v1;
use clibot_tests::Harness;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Samples for the latency measurement.
const LATENCY_SAMPLES: usize = 5_000;
/// How long each throughput run lasts.
const THROUGHPUT_RUN: Duration = Duration::from_secs(3);
/// Spawns measured.
const SPAWNS: usize = 20;

pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

pub(crate) fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

/// A stream of `session`'s events from this moment on.
pub(crate) async fn follow_now(
    client: &mut clibot_proto::Client,
    session: &str,
) -> anyhow::Result<tonic::Streaming<v1::Event>> {
    let since = client
        .status(v1::StatusRequest {})
        .await?
        .into_inner()
        .last_seq;
    Ok(client
        .watch_events(v1::WatchEventsRequest {
            since: Some(since),
            sessions: vec![session.into()],
            follow: true,
        })
        .await?
        .into_inner())
}

/// How long a bare `tmux new-session -d -s NAME -c DIR ARGS…` takes on the harness's server:
/// the baseline for a spawn.
pub(crate) fn bare_new_session(
    h: &Harness,
    name: &str,
    dir: &str,
    args: &[&str],
) -> anyhow::Result<Duration> {
    let mut argv = vec!["new-session", "-d", "-s", name, "-c", dir];
    argv.extend_from_slice(args);
    let t = Instant::now();
    let out = h.tmux(&argv);
    let took = t.elapsed();
    anyhow::ensure!(
        out.status.success(),
        "tmux new-session failed: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(took)
}

pub(crate) fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .context("no VmRSS")?;
    Ok(line
        .split_whitespace()
        .nth(1)
        .context("no value")?
        .parse()?)
}

/// Round trips of one byte over a bare Unix socket: the floor under any RPC.
async fn uds_echo_baseline(dir: &Path) -> anyhow::Result<Vec<Duration>> {
    let path = dir.join("echo.sock");
    let listener = tokio::net::UnixListener::bind(&path)?;
    tokio::spawn(async move {
        if let Ok((mut s, _)) = listener.accept().await {
            let mut b = [0u8; 1];
            while s.read_exact(&mut b).await.is_ok() {
                if s.write_all(&b).await.is_err() {
                    break;
                }
            }
        }
    });
    let mut c = tokio::net::UnixStream::connect(&path).await?;
    let mut b = [7u8; 1];
    let mut samples = Vec::with_capacity(LATENCY_SAMPLES);
    for i in 0..LATENCY_SAMPLES + 200 {
        let t = Instant::now();
        c.write_all(&b).await?;
        c.read_exact(&mut b).await?;
        if i >= 200 {
            samples.push(t.elapsed());
        }
    }
    samples.sort();
    Ok(samples)
}

async fn rpc_latency(h: &Harness) -> anyhow::Result<Vec<Duration>> {
    let mut c = h.client().await;
    let mut samples = Vec::with_capacity(LATENCY_SAMPLES);
    for i in 0..LATENCY_SAMPLES + 200 {
        let t = Instant::now();
        c.get_session(v1::GetSessionRequest {
            name: "bench0".into(),
            ..Default::default()
        })
        .await?;
        if i >= 200 {
            samples.push(t.elapsed());
        }
    }
    samples.sort();
    Ok(samples)
}

/// Requests per second with `clients` connections, each issuing calls back to back.
async fn throughput(h: &Harness, clients: usize) -> anyhow::Result<f64> {
    let mut tasks = Vec::new();
    let start = Instant::now();
    for _ in 0..clients {
        let mut c = h.client().await;
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while start.elapsed() < THROUGHPUT_RUN {
                if c.get_session(v1::GetSessionRequest {
                    name: "bench0".into(),
                    ..Default::default()
                })
                .await
                .is_ok()
                {
                    n += 1;
                }
            }
            n
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await?;
    }
    Ok(total as f64 / start.elapsed().as_secs_f64())
}

/// SpawnSession over gRPC (the daemon's own cost) against the bare tmux client command.
async fn spawn_times(h: &Harness) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let work = h.work.display().to_string();
    let mut c = h.client().await;
    let mut ours = Vec::new();
    for i in 0..SPAWNS {
        let req = v1::SpawnSessionRequest {
            name: format!("sp{i}"),
            cli: "bash".into(),
            dir: work.clone(),
            ..Default::default()
        };
        let t = Instant::now();
        c.spawn_session(req).await?;
        ours.push(t.elapsed());
    }
    for i in 0..SPAWNS {
        c.stop_session(v1::StopSessionRequest {
            session: format!("sp{i}"),
            force: true,
            timeout_ms: 0,
        })
        .await?;
    }
    let mut bare = Vec::new();
    for i in 0..SPAWNS {
        bare.push(bare_new_session(
            h,
            &format!("bare{i}"),
            &work,
            &["--", "bash", "--norc", "--noprofile"],
        )?);
    }
    for i in 0..SPAWNS {
        h.tmux(&["kill-session", "-t", &format!("bare{i}")]);
    }
    ours.sort();
    bare.sort();
    Ok((ours, bare))
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let tmux = std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    format!("Machine: {cores} cores, {cpu}; {tmux}")
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--sessions") => {
            let points: Vec<usize> = args
                .get(1)
                .context("--sessions takes a list: --sessions 25,100,200,500")?
                .split(',')
                .map(|n| n.trim().parse::<usize>())
                .collect::<Result<_, _>>()
                .context("--sessions takes whole numbers: --sessions 25,100,200,500")?;
            anyhow::ensure!(
                points.windows(2).all(|w| w[0] < w[1]) && points.first().is_some_and(|&n| n > 0),
                "--sessions takes increasing counts above 0"
            );
            let max = points.last().copied().unwrap_or(0);
            let mut h = Harness::with_config("");
            // The default safety-net poll (2 s), as a user runs it; room for every session.
            let cfg = std::fs::read_to_string(&h.config)?
                .replace("poll_interval_ms = 200", "poll_interval_ms = 2000")
                .replacen(
                    "[daemon]\n",
                    &format!("[daemon]\nmax_sessions = {}\n", max + 10),
                    1,
                );
            std::fs::write(&h.config, cfg)?;
            h.start_daemon();
            let pid = h.daemon_pid().context("daemon pid")?;
            let curve = scale::run(&h, pid, &points).await?;
            println!("{}\n", machine());
            scale::print(&curve);
            return Ok(());
        }
        Some("--chat") => {
            let report = chat::run().await?;
            println!("{}\n", machine());
            report.print();
            return Ok(());
        }
        Some("--ssh") => {
            let report = ssh::run().await?;
            println!("{}\n", machine());
            report.print();
            return Ok(());
        }
        Some("--event-memory") => {
            let rows = event_memory::run().await?;
            println!("{}\n", machine());
            event_memory::print(&rows);
            return Ok(());
        }
        Some("--wake") => {
            let rows = wake::run().await?;
            println!("{}\n", machine());
            wake::print(&rows);
            return Ok(());
        }
        Some(other) => anyhow::bail!(
            "unknown argument {other:?}: use no argument, --sessions 25,100,200,500, --chat, --wake, --event-memory or --ssh"
        ),
        None => {}
    }
    let mut h = Harness::with_config(
        "\n[cli.fakeclaude]\nargv = [\"sh\", \"-c\", \"exec bash --norc --noprofile\"]\nadapter = \"claude\"\n",
    );
    // The default safety-net poll (2 s) is what a user runs; the tests' faster one would add noise.
    // 50 quiet sessions and a few more are measured: above the default session limit (32).
    let cfg = std::fs::read_to_string(&h.config)?
        .replace("poll_interval_ms = 200", "poll_interval_ms = 2000")
        .replacen("[daemon]\n", "[daemon]\nmax_sessions = 100\n", 1);
    std::fs::write(&h.config, cfg)?;
    h.start_daemon();
    let pid = h.daemon_pid().context("daemon pid")?;
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "bench0", "--cli", "bash", "--dir", &work]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_1 = rss_kib(pid)?;

    let echo = uds_echo_baseline(h.dir.path()).await?;
    let lat = rpc_latency(&h).await?;
    let tp1 = throughput(&h, 1).await?;
    let tp16 = throughput(&h, 16).await?;
    let (spawn, bare) = spawn_times(&h).await?;

    let mut detection = detect::run(&h, pid).await?;
    let rss_50 = rss_kib(pid)?;

    println!("{}\n", machine());
    println!("| measure | clibotd | baseline (same run) | ratio | target |");
    println!("|---|---|---|---|---|");
    println!(
        "| unary RPC latency p50 (GetSession) | {} ms | {} ms (bare UDS 1-byte echo) | {:.1}× | < 0.3 ms |",
        ms(percentile(&lat, 0.5)),
        ms(percentile(&echo, 0.5)),
        percentile(&lat, 0.5).as_secs_f64() / percentile(&echo, 0.5).as_secs_f64()
    );
    println!(
        "| unary RPC latency p99 | {} ms | {} ms | {:.1}× | |",
        ms(percentile(&lat, 0.99)),
        ms(percentile(&echo, 0.99)),
        percentile(&lat, 0.99).as_secs_f64() / percentile(&echo, 0.99).as_secs_f64()
    );
    println!("| throughput, 1 client | {tp1:.0} req/s | | | |");
    println!(
        "| throughput, 16 clients | {tp16:.0} req/s | | {:.2}× of 1 client | |",
        tp16 / tp1
    );
    println!(
        "| spawn a session (SpawnSession RPC), median (p90) | {} ms ({} ms) | {} ms ({} ms) bare `tmux new-session` | {:.1}× | |",
        ms(percentile(&spawn, 0.5)),
        ms(percentile(&spawn, 0.9)),
        ms(percentile(&bare, 0.5)),
        ms(percentile(&bare, 0.9)),
        percentile(&spawn, 0.5).as_secs_f64() / percentile(&bare, 0.5).as_secs_f64()
    );
    println!(
        "| daemon RSS, 1 idle session | {:.1} MB | | | |",
        rss_1 as f64 / 1024.0
    );
    println!(
        "| daemon RSS, 50 idle sessions | {:.1} MB | | | < 40 MB |",
        rss_50 as f64 / 1024.0
    );
    detection.print();
    Ok(())
}
