//! The long connection: endpoint discovery, the websocket, pings, acknowledgements, and
//! reconnection after any drop.
//!
//! Each connection starts with `POST {api_url}/callback/ws/endpoint` (`{"AppID","AppSecret"}`),
//! which returns a single-use `wss://` URL and the `ClientConfig` timings. On the socket:
//! a ping at once and every `PingInterval`; a pong (or anything else) proves the connection
//! alive, and a connection that stays silent for a few intervals after a ping is dropped
//! (the official SDKs have no such watchdog and can hang on a half-open socket). Every data
//! frame is acknowledged as soon as it is parsed and handed on — Feishu pushes again what is
//! not acknowledged within 3 s. After a drop: discovery again (the URL is single use),
//! exponential backoff with jitter, forever; a server-sent `ReconnectCount` is ignored (it made
//! other clients give up for good).

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use prost::Message as _;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::{self, Message};

use super::api::{Api, random};
use super::frame::{Frame, METHOD_CONTROL, METHOD_DATA, Reassembly};

/// The timings Feishu hands out with an endpoint and in pongs (seconds).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq)]
pub struct ClientConfig {
    #[serde(rename = "ReconnectCount")]
    pub reconnect_count: Option<i64>,
    #[serde(rename = "ReconnectInterval")]
    pub reconnect_interval: Option<i64>,
    #[serde(rename = "ReconnectNonce")]
    pub reconnect_nonce: Option<i64>,
    #[serde(rename = "PingInterval")]
    pub ping_interval: Option<i64>,
}

/// A websocket URL to dial once, with its timings.
#[derive(Debug)]
pub struct Endpoint {
    pub url: String,
    pub config: ClientConfig,
}

/// Why there is no connection.
#[derive(Debug, PartialEq)]
pub enum Refused {
    /// Feishu will not accept this app as it is configured: retrying soon will not help.
    Fatal(String),
    /// A passing failure.
    Retry(String),
}

/// The timings in use.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    pub ping: Duration,
    /// The longest wait between reconnection attempts.
    pub cap: Duration,
    /// The spread of the first attempt after a drop.
    pub nonce: Duration,
}

impl Default for Timing {
    /// The SDKs' defaults: ping every 120 s, reconnect every 120 s, spread over 30 s.
    fn default() -> Timing {
        Timing {
            ping: Duration::from_secs(120),
            cap: Duration::from_secs(120),
            nonce: Duration::from_secs(30),
        }
    }
}

impl Timing {
    /// Takes the values that make sense (a zero or absurd one is ignored).
    pub fn apply(&mut self, c: &ClientConfig) {
        let secs = |v: Option<i64>, min: i64| {
            v.filter(|s| (min..=600).contains(s))
                .map(|s| Duration::from_secs(s.unsigned_abs()))
        };
        if let Some(p) = secs(c.ping_interval, 1) {
            self.ping = p;
        }
        if let Some(i) = secs(c.reconnect_interval, 1) {
            self.cap = i.min(Duration::from_secs(120));
        }
        if let Some(n) = secs(c.reconnect_nonce, 0) {
            self.nonce = n;
        }
    }

    /// How long after a ping silence means the connection is dead: three intervals, at most
    /// 45 s.
    pub fn pong_timeout(&self) -> Duration {
        (self.ping * 3).min(Duration::from_secs(45))
    }

    /// The wait before attempt `failures` (1 = the first after a connection that was up for a
    /// while): a short random spread first, then doubling from 1 s up to the cap, each with
    /// jitter (half fixed, half random).
    pub fn backoff(&self, failures: u32) -> Duration {
        let jitter = |max: Duration| {
            let ms = max.as_millis() as u64;
            Duration::from_millis(if ms == 0 { 0 } else { random() % ms })
        };
        if failures <= 1 {
            return Duration::from_millis(250) + jitter(self.nonce.min(Duration::from_secs(5)));
        }
        let exp = (failures - 2).min(16);
        let base =
            (Duration::from_secs(1) * (1u32 << exp)).min(self.cap.max(Duration::from_secs(1)));
        base / 2 + jitter(base / 2)
    }
}

#[derive(Deserialize)]
struct EndpointReply {
    #[serde(default)]
    code: i64,
    #[serde(default)]
    msg: String,
    data: Option<EndpointData>,
}

#[derive(Deserialize)]
struct EndpointData {
    #[serde(rename = "URL", default)]
    url: String,
    #[serde(rename = "ClientConfig", default)]
    client_config: ClientConfig,
}

/// Codes of the endpoint call worth retrying: system busy, internal error.
const RETRYABLE: [i64; 2] = [1, 1000040343];

/// Asks Feishu where to connect.
pub async fn discover(api: &Api, app_id: &str, app_secret: &str) -> Result<Endpoint, Refused> {
    let url = format!("{}/callback/ws/endpoint", api.base());
    let r = api
        .http()
        .post(&url)
        .header("locale", "zh")
        .header("content-type", "application/json")
        .body(json!({ "AppID": app_id, "AppSecret": app_secret }).to_string())
        .send()
        .await
        .map_err(|e| Refused::Retry(format!("cannot reach {url} ({e})")))?;
    let status = r.status();
    if !status.is_success() {
        return Err(Refused::Retry(format!("{url} answered HTTP {status}")));
    }
    let text = r.text().await.unwrap_or_default();
    let reply: EndpointReply = serde_json::from_str(&text)
        .map_err(|e| Refused::Retry(format!("{url} answered something else than JSON ({e})")))?;
    if RETRYABLE.contains(&reply.code) {
        return Err(Refused::Retry(format!(
            "Feishu is busy (code {}: {})",
            reply.code, reply.msg
        )));
    }
    if reply.code != 0 {
        return Err(Refused::Fatal(format!(
            "Feishu refused the long connection for app {app_id} (code {}: {}); check [gateway.feishu] app_id and app_secret, and that the app is a self-built app with \"receive events through a long connection\" chosen under Events & Callbacks",
            reply.code, reply.msg
        )));
    }
    match reply.data {
        Some(d) if !d.url.is_empty() => Ok(Endpoint {
            url: d.url,
            config: d.client_config,
        }),
        _ => Err(Refused::Retry("Feishu returned no endpoint URL".into())),
    }
}

/// The `service_id` and `device_id` of an endpoint URL.
fn url_ids(url: &str) -> (i32, String) {
    let Ok(u) = reqwest::Url::parse(url) else {
        return (0, String::new());
    };
    let mut service = 0;
    let mut device = String::new();
    for (k, v) in u.query_pairs() {
        match k.as_ref() {
            "service_id" => service = v.parse().unwrap_or(0),
            "device_id" => device = v.into_owned(),
            _ => {}
        }
    }
    (service, device)
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Dials an endpoint; a refused upgrade is read from Feishu's `Handshake-*` headers.
async fn dial(url: &str) -> Result<Socket, Refused> {
    match tokio::time::timeout(
        Duration::from_secs(20),
        tokio_tungstenite::connect_async(url),
    )
    .await
    {
        Err(_) => Err(Refused::Retry("the websocket handshake timed out".into())),
        Ok(Ok((ws, _))) => Ok(ws),
        Ok(Err(tungstenite::Error::Http(resp))) => {
            let h = resp.headers();
            let get = |k: &str| h.get(k).and_then(|v| v.to_str().ok()).unwrap_or_default();
            let status: i64 = get("handshake-status")
                .parse()
                .unwrap_or(i64::from(resp.status().as_u16()));
            let auth: i64 = get("handshake-autherrcode").parse().unwrap_or(0);
            let msg = get("handshake-msg");
            Err(handshake_refusal(status, auth, msg))
        }
        Ok(Err(e)) => Err(Refused::Retry(format!("cannot open the websocket ({e})"))),
    }
}

/// What a refused websocket upgrade means (the SDKs' classification).
fn handshake_refusal(status: i64, auth: i64, msg: &str) -> Refused {
    match (status, auth) {
        (514, 1000040350) => Refused::Fatal(format!(
            "Feishu refused the connection: too many connections for this app (at most 50; {msg}); stop the other gateways or clients using it"
        )),
        (403, _) => Refused::Fatal(format!(
            "Feishu refused the connection: the app is forbidden ({msg}); check the app's status in the developer console"
        )),
        _ => Refused::Retry(format!(
            "Feishu refused the websocket (status {status}, code {auth}: {msg})"
        )),
    }
}

/// How long a connection must have lived for the next drop to count as the first failure.
const STABLE: Duration = Duration::from_secs(30);

/// Wait after a refusal that will not pass by itself (a wrong secret): the gateway keeps
/// trying, slowly, so that fixing the app in the console needs no restart.
const FATAL_WAIT: Duration = Duration::from_secs(60);

/// Keeps a connection up forever. `first` is an endpoint already discovered (at start);
/// What handling an event payload says.
#[derive(Debug, Clone, PartialEq)]
pub enum Handled {
    /// Taken (or a repeat): acknowledged, with what a card callback answers.
    Ack(Option<Value>),
    /// Not taken now: left unacknowledged, so that Feishu pushes it again.
    Later,
}

/// `handle` gets every complete event payload and says whether it was taken, and what a card
/// callback answers.
pub async fn run<H>(
    api: std::sync::Arc<Api>,
    app_id: String,
    app_secret: String,
    first: Option<Endpoint>,
    progress: crate::progress::Progress,
    mut handle: H,
) where
    H: FnMut(&[u8]) -> Handled + Send,
{
    let mut timing = Timing::default();
    let mut reassembly = Reassembly::default();
    let mut failures: u32 = 0;
    let mut first = first;
    loop {
        let endpoint = match first.take() {
            Some(e) => Ok(e),
            None => discover(&api, &app_id, &app_secret).await,
        };
        let refused = match endpoint {
            Ok(e) => {
                timing.apply(&e.config);
                let (service, device) = url_ids(&e.url);
                match dial(&e.url).await {
                    Ok(ws) => {
                        eprintln!(
                            "clibot-gateway: connected to Feishu as app {app_id} (device {device})"
                        );
                        let up = Instant::now();
                        let why = session(
                            ws,
                            service,
                            &mut timing,
                            &mut reassembly,
                            &progress,
                            &mut handle,
                        )
                        .await;
                        if up.elapsed() >= STABLE {
                            failures = 0;
                        }
                        Refused::Retry(format!("connection lost: {why}"))
                    }
                    Err(r) => r,
                }
            }
            Err(r) => r,
        };
        let wait = match refused {
            Refused::Fatal(why) => {
                eprintln!("clibot-gateway: {why}; trying again in {FATAL_WAIT:?}");
                FATAL_WAIT
            }
            Refused::Retry(why) => {
                failures += 1;
                let wait = timing.backoff(failures);
                eprintln!(
                    "clibot-gateway: Feishu long connection: {why}; reconnecting in {wait:?}"
                );
                wait
            }
        };
        tokio::time::sleep(wait).await;
    }
}

/// One connection, until it drops; returns why.
async fn session<H>(
    ws: Socket,
    service: i32,
    timing: &mut Timing,
    reassembly: &mut Reassembly,
    progress: &crate::progress::Progress,
    handle: &mut H,
) -> String
where
    H: FnMut(&[u8]) -> Handled + Send,
{
    let (mut sink, mut stream) = ws.split();
    let mut next_ping = Instant::now();
    // When the oldest unanswered ping went out.
    let mut unanswered: Option<Instant> = None;
    let mut tick = tokio::time::interval(progress.tick());
    loop {
        let deadline = unanswered.map(|t| t + timing.pong_timeout());
        tokio::select! {
            // The watchdog's cycle: the loop goes round and the connection is not overdue on a
            // pong (what arrives is handled as it arrives; the router's side is measured apart).
            _ = tick.tick() => {
                if deadline.is_none_or(|d| Instant::now() < d) {
                    progress.cycle();
                }
            }
            _ = tokio::time::sleep_until(next_ping) => {
                let ping = Frame::ping(service).encode_to_vec();
                if let Err(e) = sink.send(Message::Binary(ping)).await {
                    return format!("cannot send a ping ({e})");
                }
                unanswered.get_or_insert_with(Instant::now);
                next_ping = Instant::now() + timing.ping;
            }
            _ = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                return format!("no answer to a ping for {:?}", timing.pong_timeout());
            }
            m = stream.next() => {
                let m = match m {
                    None => return "Feishu closed the connection".into(),
                    Some(Err(e)) => return e.to_string(),
                    Some(Ok(m)) => m,
                };
                // Whatever arrives shows the connection is alive.
                unanswered = None;
                match m {
                    Message::Binary(bytes) => {
                        if let Some(ack) = on_frame(&bytes, timing, reassembly, handle)
                            && let Err(e) = sink.send(Message::Binary(ack.encode_to_vec())).await
                        {
                            return format!("cannot send an acknowledgement ({e})");
                        }
                    }
                    Message::Close(f) => {
                        return match f {
                            Some(f) => format!("Feishu closed the connection ({} {})", f.code, f.reason),
                            None => "Feishu closed the connection".into(),
                        };
                    }
                    Message::Text(t) => {
                        let head: String = t.chars().take(100).collect();
                        eprintln!("clibot-gateway: Feishu sent a text message on the long connection, ignored: {head}");
                    }
                    Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
                }
            }
        }
    }
}

/// Handles one binary message; returns the acknowledgement to send, if any.
fn on_frame<H>(
    bytes: &[u8],
    timing: &mut Timing,
    reassembly: &mut Reassembly,
    handle: &mut H,
) -> Option<Frame>
where
    H: FnMut(&[u8]) -> Handled,
{
    let started = std::time::Instant::now();
    let frame = match Frame::decode(bytes) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("clibot-gateway: Feishu sent a frame that does not decode ({e}); ignored");
            return None;
        }
    };
    match frame.method {
        METHOD_CONTROL => {
            if frame.kind() == "pong"
                && let Some(p) = frame.payload.as_deref().filter(|p| !p.is_empty())
            {
                match serde_json::from_slice::<ClientConfig>(p) {
                    Ok(c) => timing.apply(&c),
                    Err(e) => {
                        eprintln!("clibot-gateway: Feishu pong with an unreadable config ({e})")
                    }
                }
            }
            None
        }
        METHOD_DATA => {
            let num = |k: &str, default: usize| {
                frame
                    .header(k)
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(default)
            };
            let (sum, seq) = (num("sum", 1), num("seq", 0));
            let id = frame.header("message_id").unwrap_or_default().to_string();
            let payload = frame.payload.clone().unwrap_or_default();
            let whole = match reassembly.add(&id, sum, seq, payload, started) {
                Ok(Some(w)) => w,
                // More fragments to come: only the last one is acknowledged.
                Ok(None) => return None,
                Err(e) => {
                    eprintln!(
                        "clibot-gateway: Feishu sent a bad fragment ({}); ignored",
                        e.0
                    );
                    return None;
                }
            };
            if frame.kind() != "event" {
                // The SDKs drop the legacy `card` type (and anything unknown) unacknowledged;
                // card callbacks arrive as events.
                eprintln!(
                    "clibot-gateway: Feishu sent a {:?} frame (trace {}); ignored",
                    frame.kind(),
                    frame.header("trace_id").unwrap_or_default()
                );
                return None;
            }
            // Not taken now (the queue is full): unacknowledged, Feishu pushes it again.
            let Handled::Ack(answer) = handle(&whole) else {
                return None;
            };
            Some(Frame::ack(
                &frame,
                started.elapsed().as_millis(),
                answer.as_ref(),
            ))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sensible_timings_are_taken_and_absurd_ones_ignored() {
        let mut t = Timing::default();
        t.apply(&ClientConfig {
            reconnect_count: Some(0),
            reconnect_interval: Some(300),
            reconnect_nonce: Some(0),
            ping_interval: Some(30),
        });
        assert_eq!(t.ping, Duration::from_secs(30));
        assert_eq!(t.cap, Duration::from_secs(120), "capped at 120 s");
        assert_eq!(t.nonce, Duration::ZERO);
        let before = t;
        t.apply(&ClientConfig {
            ping_interval: Some(0),
            reconnect_interval: Some(-1),
            reconnect_nonce: Some(100_000),
            ..Default::default()
        });
        assert_eq!(t, before);
        assert_eq!(t.pong_timeout(), Duration::from_secs(45));
        t.apply(&ClientConfig {
            ping_interval: Some(2),
            ..Default::default()
        });
        assert_eq!(t.pong_timeout(), Duration::from_secs(6));
    }

    #[test]
    fn backoff_spreads_the_first_attempt_then_doubles_up_to_the_cap() {
        let t = Timing::default();
        for _ in 0..50 {
            let first = t.backoff(1);
            assert!(first >= Duration::from_millis(250) && first <= Duration::from_millis(5250));
            let second = t.backoff(2);
            assert!(second >= Duration::from_millis(500) && second <= Duration::from_secs(1));
            let fourth = t.backoff(4);
            assert!(fourth >= Duration::from_secs(2) && fourth <= Duration::from_secs(4));
            let late = t.backoff(40);
            assert!(late >= Duration::from_secs(60) && late <= Duration::from_secs(120));
        }
    }

    #[test]
    fn handshake_refusals_are_fatal_only_when_retrying_cannot_help() {
        assert!(matches!(
            handshake_refusal(514, 1000040350, "limit"),
            Refused::Fatal(_)
        ));
        assert!(matches!(
            handshake_refusal(403, 0, "banned"),
            Refused::Fatal(_)
        ));
        assert!(matches!(
            handshake_refusal(514, 1, "hiccup"),
            Refused::Retry(_)
        ));
        assert!(matches!(handshake_refusal(502, 0, ""), Refused::Retry(_)));
    }

    #[test]
    fn the_endpoint_url_names_the_service_and_device() {
        assert_eq!(
            url_ids(
                "wss://msg-frontier.feishu.cn/ws/v2?fpid=493&device_id=abc&service_id=33554678"
            ),
            (33554678, "abc".to_string())
        );
        assert_eq!(url_ids("not a url"), (0, String::new()));
    }

    fn data(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
        Frame {
            seq_id: 5,
            log_id: 6,
            service: 7,
            method: METHOD_DATA,
            headers: headers
                .iter()
                .map(|(k, v)| super::super::frame::Header {
                    key: k.to_string(),
                    value: v.to_string(),
                })
                .collect(),
            payload: Some(payload.to_vec()),
            ..Default::default()
        }
        .encode_to_vec()
    }

    #[test]
    fn frames_are_joined_handled_and_acknowledged_once_complete() {
        let mut timing = Timing::default();
        let mut r = Reassembly::default();
        let got = std::cell::RefCell::new(Vec::<Vec<u8>>::new());
        let mut handle = |p: &[u8]| {
            got.borrow_mut().push(p.to_vec());
            Handled::Ack(Some(json!({ "toast": {} })))
        };
        let part = |seq: &str, p: &[u8]| {
            data(
                &[
                    ("type", "event"),
                    ("message_id", "m"),
                    ("sum", "2"),
                    ("seq", seq),
                ],
                p,
            )
        };
        assert!(on_frame(&part("1", b"def"), &mut timing, &mut r, &mut handle).is_none());
        let ack = on_frame(&part("0", b"abc"), &mut timing, &mut r, &mut handle).expect("ack");
        assert_eq!((ack.seq_id, ack.log_id), (5, 6));
        assert!(ack.header("biz_rt").is_some());
        // A legacy card frame is dropped unacknowledged.
        let card = data(&[("type", "card"), ("message_id", "c")], b"{}");
        assert!(on_frame(&card, &mut timing, &mut r, &mut handle).is_none());
        // A pong's config is applied.
        let pong = Frame {
            service: 7,
            method: METHOD_CONTROL,
            headers: vec![super::super::frame::Header {
                key: "type".into(),
                value: "pong".into(),
            }],
            payload: Some(br#"{"PingInterval":15,"ReconnectCount":0}"#.to_vec()),
            ..Default::default()
        };
        assert!(on_frame(&pong.encode_to_vec(), &mut timing, &mut r, &mut handle).is_none());
        assert!(on_frame(b"\xff\xff", &mut timing, &mut r, &mut handle).is_none());
        assert_eq!(got.into_inner(), vec![b"abcdef".to_vec()]);
        assert_eq!(timing.ping, Duration::from_secs(15));
    }
}
