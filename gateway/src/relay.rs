//! Outgoing: the daemon's event log, from this gateway's stored cursor, rendered for the chats
//! bound to each session. An event is acknowledged (the cursor advances in the daemon) only after
//! the platform accepted every message for it, so a gateway killed at any moment resumes where
//! delivery stopped: nothing is lost.

use std::sync::Arc;
use std::time::Duration;

use clibot_gateway::chunk::{
    ChunkOptions, Measure, attachment_name, chunk, file_summary, should_send_as_file,
};
use clibot_gateway::redact;
use clibot_proto::v1::{self, event::Kind};
use tokio_stream::StreamExt;

use crate::platform::Platform;
use crate::router::prompt_text;

/// A running turn's chat feedback: the task that renews typing and the status message, the
/// status messages (chat, id) and when the turn started.
struct Progress {
    task: tokio::task::JoinHandle<()>,
    status: Vec<(String, Option<String>)>,
    started: std::time::Instant,
}

/// Running turns by session; their tasks stop when the relay loses the daemon.
#[derive(Default)]
struct Running(std::collections::HashMap<String, Progress>);

impl Drop for Running {
    fn drop(&mut self) {
        for p in self.0.values() {
            p.task.abort();
        }
    }
}

/// Output longer than this many messages goes as a file with a short summary.
const MAX_MESSAGES: usize = 3;

/// What a chat sees of an event; `None` for events that are not for chats.
pub fn render(ev: &v1::Event) -> Option<String> {
    let s = &ev.session;
    Some(match ev.kind.as_ref()? {
        Kind::TurnCompleted(t) if t.text.trim().is_empty() => format!("[{s}] done"),
        Kind::TurnCompleted(t) => format!("[{s}] {}", t.text),
        Kind::Waiting(w) => format!("[{s}] {}", prompt_text(w.prompt.as_ref()?)),
        Kind::PromptResolved(r) if r.by == "terminal" => format!("[{s}] answered at the terminal"),
        Kind::Exited(e) => {
            let head = match e.status {
                Some(code) => format!("[{s}] the CLI exited (status {code})"),
                None => format!("[{s}] the session ended: {}", e.reason),
            };
            if e.output.trim().is_empty() {
                head
            } else {
                format!("{head}; its last output:\n{}", e.output)
            }
        }
        Kind::Error(e) => format!("[{s}] error: {}", e.message),
        Kind::Stalled(st) => format!("[{s}] no output for {} min", st.silent_ms / 60_000),
        _ => return None,
    })
}

/// Delivers events forever, reconnecting to the daemon when it goes away.
pub async fn run(
    platform: Arc<dyn Platform>,
    socket: std::path::PathBuf,
    shown: crate::shown::Shown,
) {
    let consumer = platform.consumer();
    let opts = ChunkOptions::new(platform.max_message(), Measure::Chars);
    let mut backoff = Duration::from_millis(200);
    loop {
        let result: anyhow::Result<()> = async {
            let mut c = clibot_proto::connect(&socket).await?;
            let since = c
                .get_cursor(v1::GetCursorRequest {
                    consumer: consumer.clone(),
                })
                .await?
                .into_inner()
                .cursor;
            let mut stream = c
                .watch_events(v1::WatchEventsRequest {
                    since: Some(since),
                    sessions: vec![],
                    follow: true,
                })
                .await?
                .into_inner();
            backoff = Duration::from_millis(200);
            let mut progress = Running::default();
            while let Some(ev) = stream.next().await {
                let ev = ev?;
                if let Some(Kind::StateChanged(sc)) = &ev.kind {
                    // While a turn runs: a status message (edited in place, at most every 15 s)
                    // and a typing indicator renewed before it fades (5 s).
                    if let Some(done) = progress.0.remove(&ev.session) {
                        done.task.abort();
                        let secs = done.started.elapsed().as_secs();
                        let text = match v1::SessionState::try_from(sc.to) {
                            Ok(v1::SessionState::Waiting) => {
                                format!("⏸ [{}] waiting for you ({secs}s)", ev.session)
                            }
                            Ok(v1::SessionState::Idle) => {
                                format!("✓ [{}] done in {secs}s", ev.session)
                            }
                            _ => format!("■ [{}] ended after {secs}s", ev.session),
                        };
                        for (chat, id) in &done.status {
                            if let Some(id) = id {
                                platform.status(chat, Some(id), &text).await;
                            }
                        }
                    }
                    if sc.to == v1::SessionState::Working as i32 {
                        let req = v1::ListBindingsRequest {
                            platform: platform.name().into(),
                            chat: String::new(),
                            session: ev.session.clone(),
                        };
                        let chats: Vec<String> = c
                            .list_bindings(req)
                            .await?
                            .into_inner()
                            .bindings
                            .into_iter()
                            .map(|b| b.chat)
                            .collect();
                        if !chats.is_empty() {
                            let mut status = Vec::new();
                            for chat in &chats {
                                let id = platform
                                    .status(chat, None, &format!("⏳ [{}] working…", ev.session))
                                    .await;
                                status.push((chat.clone(), id));
                            }
                            let p = platform.clone();
                            let session = ev.session.clone();
                            let ids = status.clone();
                            let started = std::time::Instant::now();
                            let task = tokio::spawn(async move {
                                let mut tick = 0u64;
                                loop {
                                    for chat in &chats {
                                        p.typing(chat).await;
                                    }
                                    tokio::time::sleep(Duration::from_secs(4)).await;
                                    tick += 1;
                                    if tick.is_multiple_of(4) {
                                        let text = format!(
                                            "⏳ [{session}] working… {}s",
                                            started.elapsed().as_secs()
                                        );
                                        for (chat, id) in &ids {
                                            if let Some(id) = id {
                                                p.status(chat, Some(id), &text).await;
                                            }
                                        }
                                    }
                                }
                            });
                            progress.0.insert(
                                ev.session.clone(),
                                Progress {
                                    task,
                                    status,
                                    started,
                                },
                            );
                        }
                    }
                }
                if let Some(text) = render(&ev) {
                    let req = v1::ListBindingsRequest {
                        platform: platform.name().into(),
                        chat: String::new(),
                        session: ev.session.clone(),
                    };
                    let chats = c.list_bindings(req).await?.into_inner().bindings;
                    let text = redact(&text);
                    let (prompt_id, options) = match &ev.kind {
                        Some(Kind::Waiting(w)) => w
                            .prompt
                            .as_ref()
                            .map(|p| (p.id.clone(), redact_all(&p.options)))
                            .unwrap_or_default(),
                        _ => Default::default(),
                    };
                    for b in &chats {
                        // Not delivered: the cursor stays, the event comes again.
                        if options.is_empty() && should_send_as_file(&text, &opts, MAX_MESSAGES) {
                            let summary =
                                file_summary(&text, 12, &ChunkOptions::new(1024, Measure::Utf16));
                            platform
                                .send_file(&b.chat, attachment_name(&text), &text, &summary)
                                .await?;
                        } else if options.is_empty() {
                            for part in chunk(&text, &opts) {
                                platform.send(&b.chat, &part).await?;
                            }
                        } else {
                            platform
                                .send_prompt(&b.chat, &prompt_id, &text, &options)
                                .await?;
                        }
                        if !prompt_id.is_empty() {
                            shown.record(&b.chat, &ev.session, &prompt_id);
                        }
                    }
                }
                if ev.seq > 0 {
                    c.ack_events(v1::AckEventsRequest {
                        consumer: consumer.clone(),
                        seq: ev.seq,
                    })
                    .await?;
                }
            }
            Ok(())
        }
        .await;
        if let Err(e) = result {
            eprintln!(
                "clibot-gateway: event relay interrupted ({e}); retrying in {:?}",
                backoff
            );
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// Button labels leave the machine too: redacted like every other text.
fn redact_all(options: &[String]) -> Vec<String> {
    options.iter().map(|o| redact(o).into_owned()).collect()
}
