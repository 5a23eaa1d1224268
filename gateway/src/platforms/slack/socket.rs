//! Socket Mode: `apps.connections.open` (app token) gives a single-use `wss://` URL; Slack says
//! `hello`, then sends envelopes (`events_api`, `interactive`, `slash_commands`) as JSON text
//! frames, each to be acknowledged with `{"envelope_id": …}` within 3 seconds or pushed again.
//!
//! * **Acknowledged when handled, and within 3 s.** An event is acknowledged once the router has
//!   handed it to the daemon (whose de-duplication by message id covers a restart), or after
//!   [`ACK_WITHIN`] whatever happens — never later than Slack's deadline. A gateway killed before
//!   that leaves it unacknowledged, and Slack pushes it to the next gateway. A button press is
//!   acknowledged at once (Slack does not push those again; the user would see an error).
//! * **Refresh without a gap.** Slack asks a connection to go (`disconnect`, reason `warning`
//!   or `refresh_requested`) some seconds before it closes it: the next connection is opened
//!   first, and the old one is closed only once the new one said `hello`. Events arriving on
//!   either meanwhile are taken once (the ingress remembers ids).
//! * **Reconnect with backoff.** Any other end (a drop, a silent socket: pinged every
//!   [`PING_EVERY`], given up after [`SILENT_FOR`] without a frame) opens a new connection,
//!   waiting 0.25 s, then doubling from 1 s up to 60 s, with jitter. `link_disabled` (Socket
//!   Mode switched off for the app) is retried slowly: turning it back on needs no restart.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::stream::FuturesUnordered;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

use super::api::{Api, Body, Token, Wait};

/// The longest an event waits for its hand-over before it is acknowledged anyway.
pub const ACK_WITHIN: Duration = Duration::from_millis(2_000);
/// A ping goes out this often.
const PING_EVERY: Duration = Duration::from_secs(10);
/// A connection that sent nothing (not even a pong) for this long is dropped.
const SILENT_FOR: Duration = Duration::from_secs(35);
/// A connection up this long resets the backoff.
const STABLE: Duration = Duration::from_secs(30);
/// The wait after Slack refused the app (Socket Mode off, a bad token).
const FATAL_WAIT: Duration = Duration::from_secs(60);

/// When an envelope is acknowledged.
pub enum Ack {
    /// At once (a repeat, a button press, something not for the gateway).
    Now,
    /// When this fires (the message was handed over), or after [`ACK_WITHIN`].
    After(oneshot::Receiver<()>),
    /// Not now: Slack pushes it again (the gateway's queue is full).
    Not,
}

/// What reads envelopes: shared by the connections (an event may arrive on either while one
/// is being replaced).
pub type Handler = Arc<Mutex<dyn FnMut(&Value) -> Ack + Send>>;

/// What a connection tells the loop.
enum Said {
    Hello(u64),
    /// Slack asked this connection to go; `fatal`: Socket Mode is off for the app.
    Leaving(u64, bool),
    Ended(u64, String),
}

/// Why no connection was opened.
enum Refused {
    Fatal(String),
    Retry(String),
}

struct Conn {
    id: u64,
    close: Option<oneshot::Sender<()>>,
    since: Instant,
    hello: bool,
}

impl Conn {
    fn close(&mut self) {
        if let Some(c) = self.close.take() {
            let _ = c.send(());
        }
    }
}

/// Keeps a Socket Mode connection up forever (until the future is dropped, which ends every
/// connection with it).
pub async fn run(api: Arc<Api>, progress: crate::progress::Progress, handle: Handler) {
    let (said_tx, mut said) = mpsc::channel::<Said>(16);
    let mut tasks = JoinSet::new();
    let mut next_id = 0u64;
    let mut current: Option<Conn> = None;
    let mut incoming: Option<Conn> = None;
    let mut failures: u32 = 0;
    let mut retry_at: Option<Instant> = Some(Instant::now());
    loop {
        let due = retry_at.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            _ = tokio::time::sleep_until(due), if retry_at.is_some() => {
                retry_at = None;
                next_id += 1;
                match open(&api, next_id, &said_tx, &handle, &progress, &mut tasks).await {
                    Ok(c) => current = Some(c),
                    Err(r) => retry_at = Some(Instant::now() + wait_after(r, &mut failures)),
                }
            }
            Some(s) = said.recv() => match s {
                Said::Hello(id) => {
                    if let Some(c) = incoming.as_mut().filter(|c| c.id == id) {
                        c.hello = true;
                        // The next connection is up: the old one may go.
                        if let Some(mut old) = current.take() {
                            old.close();
                        }
                        current = incoming.take();
                        eprintln!("clibot-gateway: Slack connection refreshed");
                    } else if let Some(c) = current.as_mut().filter(|c| c.id == id) {
                        c.hello = true;
                        eprintln!("clibot-gateway: connected to Slack (Socket Mode)");
                    }
                }
                Said::Leaving(id, fatal) => {
                    if fatal {
                        eprintln!(
                            "clibot-gateway: Slack turned Socket Mode off for this app (link_disabled): turn it on in the app's settings; retrying in {FATAL_WAIT:?}"
                        );
                        continue;
                    }
                    let is_current = current.as_ref().is_some_and(|c| c.id == id);
                    if is_current && incoming.is_none() {
                        next_id += 1;
                        match open(&api, next_id, &said_tx, &handle, &progress, &mut tasks).await {
                            Ok(c) => incoming = Some(c),
                            Err(Refused::Fatal(why) | Refused::Retry(why)) => eprintln!(
                                "clibot-gateway: Slack asked to reconnect, but the next connection failed ({why}); keeping this one until it closes"
                            ),
                        }
                    }
                }
                Said::Ended(id, why) => {
                    if incoming.as_ref().is_some_and(|c| c.id == id) {
                        incoming = None;
                        continue;
                    }
                    // Only the connection in use matters (taking another out would drop its
                    // closer, which closes it).
                    if current.as_ref().is_none_or(|c| c.id != id) {
                        continue;
                    }
                    let Some(c) = current.take() else {
                        continue;
                    };
                    if let Some(next) = incoming.take() {
                        // The old connection closed before the next said hello: it takes over.
                        current = Some(next);
                        continue;
                    }
                    if c.hello && c.since.elapsed() >= STABLE {
                        failures = 0;
                    }
                    let fatal = why.contains("link_disabled");
                    let r = if fatal { Refused::Fatal(why) } else { Refused::Retry(why) };
                    retry_at = Some(Instant::now() + wait_after(r, &mut failures));
                }
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
}

/// How long to wait after a failure, saying why.
fn wait_after(r: Refused, failures: &mut u32) -> Duration {
    match r {
        Refused::Fatal(why) => {
            eprintln!("clibot-gateway: Slack: {why}; trying again in {FATAL_WAIT:?}");
            FATAL_WAIT
        }
        Refused::Retry(why) => {
            *failures += 1;
            let wait = backoff(*failures);
            eprintln!("clibot-gateway: Slack Socket Mode: {why}; reconnecting in {wait:?}");
            wait
        }
    }
}

/// 0.25 s (spread a little) for the first try after a connection that was up, then doubling
/// from 1 s up to 60 s, half of it random.
fn backoff(failures: u32) -> Duration {
    let jitter = |max: Duration| {
        let ms = max.as_millis() as u64;
        Duration::from_millis(if ms == 0 {
            0
        } else {
            crate::platforms::recent::random() % ms
        })
    };
    if failures <= 1 {
        return Duration::from_millis(250) + jitter(Duration::from_millis(500));
    }
    let base =
        (Duration::from_secs(1) * (1u32 << (failures - 2).min(6))).min(Duration::from_secs(60));
    base / 2 + jitter(base / 2)
}

/// Asks Slack for a URL and dials it; the connection runs on its own task.
async fn open(
    api: &Api,
    id: u64,
    said: &mpsc::Sender<Said>,
    handle: &Handler,
    progress: &crate::progress::Progress,
    tasks: &mut JoinSet<()>,
) -> Result<Conn, Refused> {
    let v = api
        .call(
            "apps.connections.open",
            &Body::Json(json!({})),
            Token::App,
            Wait::No,
            false,
        )
        .await
        .map_err(|e| {
            let text = format!("{e:#}");
            match super::api::error_of(&e) {
                Some(
                    "invalid_auth" | "not_authed" | "not_allowed_token_type" | "token_revoked",
                ) => Refused::Fatal(format!(
                    "{text} (app_token must be the app-level token, xapp-…, with connections:write)"
                )),
                _ => Refused::Retry(text),
            }
        })?;
    let Some(url) = v["url"].as_str() else {
        return Err(Refused::Retry("apps.connections.open gave no URL".into()));
    };
    let (ws, _) = tokio::time::timeout(
        Duration::from_secs(20),
        tokio_tungstenite::connect_async(url),
    )
    .await
    .map_err(|_| Refused::Retry("the websocket handshake timed out".into()))?
    .map_err(|e| Refused::Retry(format!("cannot open the websocket ({e})")))?;
    let (close, closed) = oneshot::channel();
    tasks.spawn(session(
        id,
        ws,
        closed,
        said.clone(),
        handle.clone(),
        progress.clone(),
    ));
    Ok(Conn {
        id,
        close: Some(close),
        since: Instant::now(),
        hello: false,
    })
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// One connection until it ends (or is told to close): tells the loop what happened.
async fn session(
    id: u64,
    ws: Socket,
    mut closed: oneshot::Receiver<()>,
    said: mpsc::Sender<Said>,
    handle: Handler,
    progress: crate::progress::Progress,
) {
    let why = serve(id, ws, &mut closed, &said, &handle, &progress).await;
    let _ = said.send(Said::Ended(id, why)).await;
}

async fn serve(
    id: u64,
    ws: Socket,
    closed: &mut oneshot::Receiver<()>,
    said: &mpsc::Sender<Said>,
    handle: &Handler,
    progress: &crate::progress::Progress,
) -> String {
    let (mut sink, mut stream) = ws.split();
    // Acknowledgements waiting for their message's hand-over.
    let mut waiting: FuturesUnordered<futures_util::future::BoxFuture<'static, String>> =
        FuturesUnordered::new();
    let mut last_heard = Instant::now();
    let mut ping = tokio::time::interval(PING_EVERY);
    let mut tick = tokio::time::interval(progress.tick());
    loop {
        tokio::select! {
            _ = &mut *closed => {
                // Whatever still waits is acknowledged here first: it was taken.
                while let Some(envelope) = waiting.next().await {
                    let _ = sink.send(ack(&envelope)).await;
                }
                let _ = sink.send(Message::Close(None)).await;
                return "replaced by the next connection".into();
            }
            _ = tick.tick() => {
                if last_heard.elapsed() < SILENT_FOR {
                    progress.cycle();
                }
            }
            _ = ping.tick() => {
                if last_heard.elapsed() >= SILENT_FOR {
                    return format!("Slack sent nothing for {SILENT_FOR:?}");
                }
                if let Err(e) = sink.send(Message::Ping(Vec::new())).await {
                    return format!("cannot send a ping ({e})");
                }
            }
            Some(envelope) = waiting.next(), if !waiting.is_empty() => {
                if let Err(e) = sink.send(ack(&envelope)).await {
                    return format!("cannot send an acknowledgement ({e})");
                }
            }
            m = stream.next() => {
                let m = match m {
                    None => return "Slack closed the connection".into(),
                    Some(Err(e)) => return e.to_string(),
                    Some(Ok(m)) => m,
                };
                last_heard = Instant::now();
                let text = match m {
                    Message::Text(t) => t,
                    Message::Close(f) => {
                        return match f {
                            Some(f) => format!("Slack closed the connection ({} {})", f.code, f.reason),
                            None => "Slack closed the connection".into(),
                        };
                    }
                    _ => continue,
                };
                let v: Value = match serde_json::from_str(&text) {
                    Ok(v) => v,
                    Err(e) => {
                        eprintln!("clibot-gateway: Slack sent a frame that is not JSON ({e}); ignored");
                        continue;
                    }
                };
                match v["type"].as_str().unwrap_or_default() {
                    "hello" => {
                        let _ = said.send(Said::Hello(id)).await;
                        continue;
                    }
                    "disconnect" => {
                        let reason = v["reason"].as_str().unwrap_or_default();
                        let _ = said.send(Said::Leaving(id, reason == "link_disabled")).await;
                        if reason == "link_disabled" {
                            return "link_disabled".into();
                        }
                        continue;
                    }
                    _ => {}
                }
                let Some(envelope) = v["envelope_id"].as_str().map(str::to_string) else {
                    continue;
                };
                let decided = {
                    let mut h = handle.lock().unwrap_or_else(|p| p.into_inner());
                    (*h)(&v)
                };
                match decided {
                    Ack::Now => {
                        if let Err(e) = sink.send(ack(&envelope)).await {
                            return format!("cannot send an acknowledgement ({e})");
                        }
                    }
                    Ack::After(done) => waiting.push(Box::pin(async move {
                        let _ = tokio::time::timeout(ACK_WITHIN, done).await;
                        envelope
                    })),
                    Ack::Not => {}
                }
            }
        }
    }
}

fn ack(envelope: &str) -> Message {
    Message::Text(json!({ "envelope_id": envelope }).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_starts_short_then_doubles_up_to_a_minute() {
        assert!(backoff(1) < Duration::from_secs(1));
        let b2 = backoff(2);
        assert!(b2 >= Duration::from_millis(500) && b2 <= Duration::from_secs(1));
        let far = backoff(30);
        assert!(far >= Duration::from_secs(30) && far <= Duration::from_secs(60));
    }

    #[test]
    fn an_acknowledgement_names_its_envelope() {
        let Message::Text(t) = ack("e-1") else {
            panic!("a text frame");
        };
        assert_eq!(t, r#"{"envelope_id":"e-1"}"#);
    }
}
