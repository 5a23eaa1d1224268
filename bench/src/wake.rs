//! Waking a hibernated session (`--wake`): a message (`SendInput`) to a session that was stopped
//! after being idle, until it is typed into the CLI started again (`input_sent`) and until its
//! reply (`turn_completed`). Baselines in the same run, same CLI: a cold start as a user without
//! hibernation would make it — `SpawnSession` of a new session, its CLI ready (`idle`), then
//! the same message — and the message to the session while it is awake.
//!
//! Measured for `bash`, and for the real Claude Code against the mock model when it is
//! installed in `tests/node` (its wake resumes the conversation).

use std::time::{Duration, Instant};

use anyhow::Context;
use clibot_proto::v1::{self, event::Kind};
use clibot_tests::Harness;
use clibot_tests::mock_llm::{MockLlm, Rule};
use tokio_stream::StreamExt;

const ROUNDS: usize = 5;

/// One CLI's times, in ms.
pub struct Row {
    pub cli: String,
    /// Hibernated: message → typed, → reply.
    pub wake_typed: Vec<f64>,
    pub wake_reply: Vec<f64>,
    /// A new session: spawn → ready → message typed, → reply.
    pub cold_typed: Vec<f64>,
    pub cold_reply: Vec<f64>,
    /// Awake: message → typed, → reply.
    pub awake_typed: Vec<f64>,
    pub awake_reply: Vec<f64>,
}

fn since(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64() * 1000.0
}

/// Waits on `events` for `session`'s first event `pred` accepts.
async fn until(
    events: &mut tonic::Streaming<v1::Event>,
    session: &str,
    pred: impl Fn(&Kind) -> bool,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let ev = tokio::time::timeout_at(deadline, events.next())
            .await
            .context("no such event within 120 s")?
            .context("the event stream ended")??;
        if ev.session == session && ev.kind.as_ref().is_some_and(&pred) {
            return Ok(());
        }
    }
}

fn typed(k: &Kind) -> bool {
    matches!(k, Kind::InputSent(i) if i.submitted)
}

fn replied(k: &Kind) -> bool {
    matches!(k, Kind::TurnCompleted(_))
}

fn state_is(k: &Kind, s: v1::SessionState) -> bool {
    matches!(k, Kind::StateChanged(c) if c.to == s as i32)
}

/// A message to `session` → (typed, reply) in ms; `events` follows from before it is sent.
async fn message(
    c: &mut clibot_proto::Client,
    session: &str,
    text: &str,
) -> anyhow::Result<(f64, f64)> {
    let mut events = crate::follow_now(c, session).await?;
    let t0 = Instant::now();
    c.send_input(v1::SendInputRequest {
        session: session.into(),
        text: text.into(),
        submit: true,
        ..Default::default()
    })
    .await?;
    until(&mut events, session, typed).await?;
    let t = since(t0);
    until(&mut events, session, replied).await?;
    Ok((t, since(t0)))
}

async fn wait_state(
    c: &mut clibot_proto::Client,
    session: &str,
    s: v1::SessionState,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let now = c
            .get_session(v1::GetSessionRequest {
                name: session.into(),
                ..Default::default()
            })
            .await?
            .into_inner()
            .state;
        if now == s as i32 {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "{session} never became {s:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Measures CLI `cli` (configured in `h`, its `idle_stop_after` short) with messages `text(i)`.
async fn measure(h: &Harness, cli: &str, text: impl Fn(usize) -> String) -> anyhow::Result<Row> {
    let mut c = h.client().await;
    let work = h.work.display().to_string();
    let spawn = |name: &str| v1::SpawnSessionRequest {
        name: name.into(),
        cli: cli.into(),
        dir: work.clone(),
        ..Default::default()
    };
    let mut row = Row {
        cli: cli.into(),
        wake_typed: Vec::new(),
        wake_reply: Vec::new(),
        cold_typed: Vec::new(),
        cold_reply: Vec::new(),
        awake_typed: Vec::new(),
        awake_reply: Vec::new(),
    };
    let name = format!("w-{cli}");
    c.spawn_session(spawn(&name)).await?;
    wait_state(&mut c, &name, v1::SessionState::Idle).await?;
    for i in 0..ROUNDS {
        // Awake: right after it became ready (before it can hibernate).
        let (t, r) = message(&mut c, &name, &text(i * 3)).await?;
        row.awake_typed.push(t);
        row.awake_reply.push(r);
        // Hibernated, then woken by a message.
        wait_state(&mut c, &name, v1::SessionState::Hibernated).await?;
        let (t, r) = message(&mut c, &name, &text(i * 3 + 1)).await?;
        row.wake_typed.push(t);
        row.wake_reply.push(r);
        // A new session of the same CLI, and the same message once it is ready.
        let cold = format!("c-{cli}-{i}");
        let mut events = crate::follow_now(&mut c, &cold).await?;
        let t0 = Instant::now();
        c.spawn_session(spawn(&cold)).await?;
        until(&mut events, &cold, |k| state_is(k, v1::SessionState::Idle)).await?;
        c.send_input(v1::SendInputRequest {
            session: cold.clone(),
            text: text(i * 3 + 2),
            submit: true,
            ..Default::default()
        })
        .await?;
        until(&mut events, &cold, typed).await?;
        row.cold_typed.push(since(t0));
        until(&mut events, &cold, replied).await?;
        row.cold_reply.push(since(t0));
        c.stop_session(v1::StopSessionRequest {
            session: cold,
            force: true,
            timeout_ms: 0,
        })
        .await?;
        // The woken one is idle again: the next round's awake message.
        wait_state(&mut c, &name, v1::SessionState::Idle).await?;
    }
    for v in [
        &mut row.wake_typed,
        &mut row.wake_reply,
        &mut row.cold_typed,
        &mut row.cold_reply,
        &mut row.awake_typed,
        &mut row.awake_reply,
    ] {
        v.sort_by(|a, b| a.total_cmp(b));
    }
    Ok(row)
}

/// A harness whose CLI `cli` hibernates after `idle` of quiet.
fn short_idle(h: &Harness, cli: &str, idle: &str) -> anyhow::Result<()> {
    let table = format!("[cli.{cli}]\n");
    let text = std::fs::read_to_string(&h.config)?;
    anyhow::ensure!(text.contains(&table), "no {table} in the config");
    std::fs::write(
        &h.config,
        text.replacen(&table, &format!("{table}idle_stop_after = \"{idle}\"\n"), 1),
    )?;
    Ok(())
}

pub async fn run() -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    {
        let mut h = Harness::with_config("");
        short_idle(&h, "bash", "2s")?;
        h.start_daemon();
        rows.push(measure(&h, "bash", |i| format!("echo wake-{i}")).await?);
    }
    if clibot_tests::claude::claude_available() {
        let mut h = Harness::with_config("");
        let mock = MockLlm::start(vec![Rule::text("say hello", "Hello.")]);
        let claude = clibot_tests::claude::ClaudeHome::new(
            &h.dir.path().join("claude"),
            &h.work,
            &mock.url(),
        );
        h.add_cli("claude", &claude.argv(), &claude.env(), "");
        short_idle(&h, "claude", "3s")?;
        h.start_daemon_without(clibot_tests::claude::UNSET_ENV);
        rows.push(measure(&h, "claude", |i| format!("please say hello {i}")).await?);
    }
    Ok(rows)
}

pub fn print(rows: &[Row]) {
    let q = |v: &[f64], p: f64| {
        v.get(((v.len().saturating_sub(1)) as f64 * p).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    println!(
        "| CLI | hibernated: message → typed, median (max) | → reply | cold start (spawn, ready, message) → typed | → reply | wake / cold | awake: message → typed | → reply |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {:.0} ms ({:.0} ms) | {:.0} ms | {:.0} ms ({:.0} ms) | {:.0} ms | {:.2}× | {:.0} ms | {:.0} ms |",
            r.cli,
            q(&r.wake_typed, 0.5),
            q(&r.wake_typed, 1.0),
            q(&r.wake_reply, 0.5),
            q(&r.cold_typed, 0.5),
            q(&r.cold_typed, 1.0),
            q(&r.cold_reply, 0.5),
            q(&r.wake_typed, 0.5) / q(&r.cold_typed, 0.5).max(1e-9),
            q(&r.awake_typed, 0.5),
            q(&r.awake_reply, 0.5),
        );
    }
}
