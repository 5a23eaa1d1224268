//! For scripts: `wait` (until a session is idle, waits on a prompt, or exited) and `ask` (send a
//! message, wait for the turn it starts, print its reply).
//!
//! Both follow the session's events (WatchEvents) rather than polling, and resume after the
//! last event seen should the daemon restart. `wait` reads the present state first, from a
//! position in the log taken before that read, so that nothing happening in between is missed.
//! `ask` follows from the event of its own input: a message queued behind a running turn waits
//! for its own turn, found by its place in the queue (and by its text once something was
//! dropped from the queue).
//!
//! Exit codes: 0 the reply came or the state was reached, 1 an error (the daemon's message, a
//! cancelled or failed turn), 3 a prompt waits for an answer, 4 timed out, 5 the session exited
//! or is gone.

use std::io::Write;
use std::time::Duration;

use anyhow::{Result, bail};
use clibot_proto::v1::event::Kind;
use clibot_proto::v1::{self, SessionState as S};
use clibot_proto::{Client, v1::Prompt};
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_stream::StreamExt;

use super::io::read_blob;
use super::output::{print_json, prompt_json};

/// What `wait` waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Until {
    /// Ready for input: the running turn ended.
    Idle,
    /// A prompt waits for an answer.
    Waiting,
    /// The CLI exited, or the session is gone.
    Exited,
}

pub use clibot_proto::duration::parse_duration;

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// The reply came, or the state was reached: exit 0.
    Done,
    /// A prompt waits: exit 3.
    Waiting,
    /// Exit 4.
    Timeout,
    /// The session exited or is gone: exit 5.
    Exited,
    /// The turn was cancelled or failed: exit 1.
    Error,
}

impl Outcome {
    fn code(self) -> i32 {
        match self {
            Outcome::Done => 0,
            Outcome::Error => 1,
            Outcome::Waiting => 3,
            Outcome::Timeout => 4,
            Outcome::Exited => 5,
        }
    }
}

struct End {
    outcome: Outcome,
    /// The event that decided it (0: none, the state as read).
    seq: u64,
    /// The reply; for an exit or an error, what happened.
    text: String,
    prompt: Option<Prompt>,
}

impl End {
    fn new(outcome: Outcome, seq: u64, text: impl Into<String>) -> End {
        End {
            outcome,
            seq,
            text: text.into(),
            prompt: None,
        }
    }

    fn prompt(outcome: Outcome, seq: u64, p: &Prompt) -> End {
        End {
            prompt: Some(p.clone()),
            ..End::new(outcome, seq, "")
        }
    }
}

/// The session's events, from a position on, across daemon restarts, until a deadline.
struct Follow {
    c: Client,
    socket: clibot_proto::Target,
    name: String,
    since: u64,
    deadline: Option<Instant>,
    stream: Option<tonic::Streaming<v1::Event>>,
}

/// How long `ask` and `wait` wait for a daemon that went away to come back.
const RECONNECT_FOR: Duration = Duration::from_secs(30);

impl Follow {
    fn new(
        c: &Client,
        socket: &clibot_proto::Target,
        name: &str,
        since: u64,
        deadline: Option<Instant>,
    ) -> Self {
        Follow {
            c: c.clone(),
            socket: socket.clone(),
            name: name.to_string(),
            since,
            deadline,
            stream: None,
        }
    }

    fn expired(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// The next event; `None` once the deadline (or the earlier `by`) passed.
    async fn next(&mut self, by: Option<Instant>) -> Result<Option<v1::Event>> {
        let limit = match (self.deadline, by) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        loop {
            if self.stream.is_none() && !self.open(limit).await? {
                return Ok(None);
            }
            let Some(stream) = self.stream.as_mut() else {
                continue;
            };
            let item = match limit {
                Some(t) => match tokio::time::timeout_at(t, stream.next()).await {
                    Ok(item) => item,
                    Err(_) => return Ok(None),
                },
                None => stream.next().await,
            };
            match item {
                Some(Ok(ev)) => {
                    self.since = self.since.max(ev.seq);
                    return Ok(Some(ev));
                }
                Some(Err(e)) => {
                    eprintln!(
                        "clibotctl: event stream interrupted ({}); reconnecting",
                        e.message()
                    );
                    self.stream = None;
                }
                None => self.stream = None,
            }
        }
    }

    /// Opens the stream, reconnecting to a daemon that went away; false when `limit` passed.
    async fn open(&mut self, limit: Option<Instant>) -> Result<bool> {
        let give_up = Instant::now() + RECONNECT_FOR;
        loop {
            let req = v1::WatchEventsRequest {
                since: Some(self.since),
                sessions: vec![self.name.clone()],
                follow: true,
            };
            match self.c.watch_events(req).await {
                Ok(r) => {
                    self.stream = Some(r.into_inner());
                    return Ok(true);
                }
                Err(e) if !matches!(e.code(), tonic::Code::Unavailable | tonic::Code::Unknown) => {
                    return Err(e.into());
                }
                Err(_) => {}
            }
            if limit.is_some_and(|t| Instant::now() >= t) {
                return Ok(false);
            }
            if Instant::now() >= give_up {
                bail!(
                    "lost clibotd and it did not come back within {}s; see `clibotctl logs`, then `clibotctl show {}`",
                    RECONNECT_FOR.as_secs(),
                    self.name
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            if let Ok(c) = clibot_proto::connect_to(&self.socket).await {
                self.c = c;
            }
        }
    }
}

/// The newest event's sequence number.
async fn last_seq(c: &mut Client) -> Result<u64> {
    Ok(c.status(v1::StatusRequest {}).await?.into_inner().last_seq)
}

fn state(s: i32) -> S {
    S::try_from(s).unwrap_or(S::Unspecified)
}

/// A prompt for a person; one being answered by a rule or the decider is not.
fn for_a_person(p: Option<&Prompt>) -> Option<&Prompt> {
    p.filter(|p| p.auto.is_empty())
}

fn exit_text(name: &str, status: Option<i32>, reason: &str) -> String {
    match status {
        Some(s) => format!("{name} exited with status {s}: {reason}"),
        None => format!("{name} exited: {reason}"),
    }
}

fn released(name: &str) -> String {
    format!("{name} was released: clibot no longer manages it")
}

/// What the session as read says, if it decides the wait.
fn judge_session(s: &v1::Session, until: Until) -> Option<End> {
    match state(s.state) {
        S::Exited | S::Declared | S::Hibernated if until == Until::Exited => {
            Some(End::new(Outcome::Done, 0, ""))
        }
        S::Hibernated => Some(End::new(
            Outcome::Exited,
            0,
            format!(
                "{} is hibernated ({}): a message wakes it (`clibotctl send {}` or `ask`)",
                s.name, s.exit_reason, s.name
            ),
        )),
        S::Exited | S::Declared => Some(End::new(
            Outcome::Exited,
            0,
            exit_text(&s.name, s.exit_status, &s.exit_reason),
        )),
        S::Idle if until == Until::Idle => Some(End::new(Outcome::Done, 0, "")),
        S::Waiting => {
            let p = for_a_person(s.prompt.as_ref())?;
            match until {
                Until::Waiting => Some(End::prompt(Outcome::Done, 0, p)),
                Until::Idle => Some(End::prompt(Outcome::Waiting, 0, p)),
                Until::Exited => None,
            }
        }
        S::Error if until == Until::Idle => Some(End::new(
            Outcome::Error,
            0,
            format!("{} is in error: {}", s.name, s.error),
        )),
        _ => None,
    }
}

/// What an event says, if it decides the wait. `error` keeps the last error's message.
fn judge_event(ev: &v1::Event, until: Until, error: &mut String) -> Option<End> {
    let (seq, gone) = (ev.seq, until == Until::Exited);
    match ev.kind.as_ref()? {
        Kind::StateChanged(c) => match state(c.to) {
            S::Idle if until == Until::Idle => Some(End::new(Outcome::Done, seq, "")),
            S::Exited | S::Declared | S::Hibernated if gone => {
                Some(End::new(Outcome::Done, seq, ""))
            }
            S::Exited | S::Declared | S::Hibernated => Some(End::new(
                Outcome::Exited,
                seq,
                exit_text(&ev.session, None, &c.reason),
            )),
            S::Error if until == Until::Idle => {
                let why = if error.is_empty() { &c.reason } else { error };
                Some(End::new(Outcome::Error, seq, why.clone()))
            }
            _ => None,
        },
        Kind::Waiting(w) => {
            let p = for_a_person(w.prompt.as_ref())?;
            match until {
                Until::Waiting => Some(End::prompt(Outcome::Done, seq, p)),
                Until::Idle => Some(End::prompt(Outcome::Waiting, seq, p)),
                Until::Exited => None,
            }
        }
        Kind::Exited(_) | Kind::Released(_) if gone => Some(End::new(Outcome::Done, seq, "")),
        Kind::Exited(x) => Some(End::new(
            Outcome::Exited,
            seq,
            exit_text(&ev.session, x.status, &x.reason),
        )),
        Kind::Released(_) => Some(End::new(Outcome::Exited, seq, released(&ev.session))),
        Kind::Error(e) => {
            *error = e.message.clone();
            None
        }
        _ => None,
    }
}

/// `wait`: until the session is in the state asked.
pub async fn wait(
    c: &mut Client,
    socket: &clibot_proto::Target,
    name: String,
    until: Until,
    timeout: Option<Duration>,
    json: bool,
) -> Result<()> {
    let deadline = timeout.map(|t| Instant::now() + t);
    let before = last_seq(c).await?;
    let read = c
        .get_session(v1::GetSessionRequest {
            name: name.clone(),
            ..Default::default()
        })
        .await;
    let end = match read {
        Ok(s) => match judge_session(&s.into_inner(), until) {
            Some(end) => end,
            None => {
                let after = last_seq(c).await?;
                follow_state(c, socket, &name, until, before, after, deadline).await?
            }
        },
        Err(e) if e.code() == tonic::Code::NotFound && until == Until::Exited => {
            End::new(Outcome::Done, 0, "")
        }
        Err(e) => return Err(e.into()),
    };
    let code = end.outcome.code();
    if json {
        print_json(&end_json(&name, &end, "reached"))?;
    }
    match end.outcome {
        Outcome::Done => {
            if let (Some(p), false) = (&end.prompt, json) {
                print_prompt(&name, p, "");
            }
        }
        Outcome::Waiting => {
            if !json {
                print_prompt(&name, end.prompt.as_ref().unwrap_or(&Prompt::default()), "");
            }
        }
        Outcome::Timeout => eprintln!(
            "clibotctl: timed out: {name} is not {} yet",
            until_word(until)
        ),
        Outcome::Exited | Outcome::Error => eprintln!("clibotctl: {}", end.text),
    }
    exit_with(code)
}

fn until_word(until: Until) -> &'static str {
    match until {
        Until::Idle => "idle",
        Until::Waiting => "waiting on a prompt",
        Until::Exited => "exited",
    }
}

/// Follows the events after `before` until one decides; one at or before `after` may predate
/// the state as read, so the state read again decides instead.
async fn follow_state(
    c: &mut Client,
    socket: &clibot_proto::Target,
    name: &str,
    until: Until,
    before: u64,
    after: u64,
    deadline: Option<Instant>,
) -> Result<End> {
    let mut f = Follow::new(c, socket, name, before, deadline);
    let mut error = String::new();
    loop {
        let Some(ev) = f.next(None).await? else {
            return Ok(End::new(Outcome::Timeout, 0, ""));
        };
        let Some(end) = judge_event(&ev, until, &mut error) else {
            continue;
        };
        if ev.seq > after {
            return Ok(end);
        }
        let again =
            f.c.get_session(v1::GetSessionRequest {
                name: name.to_string(),
                ..Default::default()
            })
            .await;
        match again {
            Ok(s) => {
                if let Some(end) = judge_session(&s.into_inner(), until) {
                    return Ok(end);
                }
            }
            Err(e) if e.code() == tonic::Code::NotFound => {
                return Ok(match until {
                    Until::Exited => End::new(Outcome::Done, ev.seq, ""),
                    _ => End::new(Outcome::Exited, ev.seq, format!("{name} is gone")),
                });
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Where `ask`'s message stands.
struct Mine {
    /// Its own event (input_sent, input_queued, or the secret prompt it answered).
    seq: u64,
    /// Its text as the log has it.
    text: String,
    /// Its text as it was asked.
    asked: String,
    /// The input_sent that typed it.
    typed: Option<u64>,
    /// How many queued messages are typed before it; unknown (`None`) once one was dropped
    /// from the queue: then its text finds it.
    ahead: Option<u32>,
    /// The queue no longer holds it: typed by then, or dropped.
    missing_by: Option<Instant>,
}

impl Mine {
    /// A queued message was taken off the queue (typed, or failed to be); is it this one?
    fn is_next(&mut self, text: &str) -> bool {
        match self.ahead {
            Some(0) if text == self.text => true,
            // Not in its place: count no more.
            Some(0) => {
                self.ahead = None;
                false
            }
            Some(n) => {
                self.ahead = Some(n - 1);
                false
            }
            None => text == self.text,
        }
    }
}

/// How long a message missing from the queue may take to be typed before it counts as dropped.
const TYPING_GRACE: Duration = Duration::from_secs(10);

/// `ask`: sends `text`, follows the session until the turn of this message ends.
pub async fn ask(
    c: &mut Client,
    socket: &clibot_proto::Target,
    name: String,
    text: String,
    timeout: Option<Duration>,
    json: bool,
) -> Result<()> {
    let deadline = timeout.map(|t| Instant::now() + t);
    let text = super::io::text_or_stdin(text)?;
    let sent = c
        .send_input(v1::SendInputRequest {
            session: name.clone(),
            text: text.clone(),
            submit: true,
            ..Default::default()
        })
        .await;
    let end = match sent {
        Ok(sent) => follow_turn(c, socket, &name, text, &sent.into_inner(), deadline).await?,
        Err(e) => {
            // Refused because the session exited: exit 5, as when it exits while asked.
            let now = c
                .get_session(v1::GetSessionRequest {
                    name: name.clone(),
                    ..Default::default()
                })
                .await
                .map(|s| state(s.into_inner().state));
            if !matches!(now, Ok(S::Exited | S::Declared | S::Hibernated)) {
                return Err(e.into());
            }
            End::new(Outcome::Exited, 0, e.message())
        }
    };
    // A turn that ended with nothing read is no reply: a script must not take the empty line
    // for one (a CLI adopted before it wrote a conversation, a reply lost with the screen).
    let end = if end.outcome == Outcome::Done && end.text.trim().is_empty() {
        End::new(
            Outcome::Error,
            end.seq,
            format!(
                "{name}'s turn ended but no reply could be read: `clibotctl screen {name}` shows what it shows (a CLI adopted before its first conversation has none to read until it writes one)"
            ),
        )
    } else {
        end
    };
    let code = end.outcome.code();
    if json {
        print_json(&end_json(&name, &end, "replied"))?;
    }
    match end.outcome {
        Outcome::Done if !json => {
            let mut out = std::io::stdout().lock();
            out.write_all(end.text.as_bytes())?;
            if !end.text.ends_with('\n') {
                out.write_all(b"\n")?;
            }
        }
        Outcome::Done => {}
        Outcome::Waiting if !json => {
            let p = end.prompt.as_ref().cloned().unwrap_or_default();
            print_prompt(&name, &p, &end.text);
        }
        Outcome::Waiting => {}
        Outcome::Timeout => eprintln!(
            "clibotctl: timed out waiting for {name}'s reply; it may still come: `clibotctl wait {name}`, then `clibotctl last {name}`"
        ),
        Outcome::Exited | Outcome::Error => eprintln!("clibotctl: {}", end.text),
    }
    exit_with(code)
}

async fn follow_turn(
    c: &mut Client,
    socket: &clibot_proto::Target,
    name: &str,
    text: String,
    sent: &v1::SendInputResponse,
    deadline: Option<Instant>,
) -> Result<End> {
    let mut f = Follow::new(c, socket, name, sent.seq.saturating_sub(1), deadline);
    let mut mine = Mine {
        seq: sent.seq,
        text: text.clone(),
        asked: text,
        typed: (!sent.queued).then_some(sent.seq),
        ahead: None,
        missing_by: None,
    };
    if sent.queued {
        // A prompt already waiting holds the message back until it is answered.
        let s =
            f.c.get_session(v1::GetSessionRequest {
                name: name.to_string(),
                ..Default::default()
            })
            .await?
            .into_inner();
        if state(s.state) == S::Waiting
            && let Some(p) = for_a_person(s.prompt.as_ref())
        {
            return Ok(held_back(0, p));
        }
    }
    loop {
        let Some(ev) = f.next(mine.missing_by).await? else {
            if f.expired() {
                return Ok(End::new(Outcome::Timeout, 0, ""));
            }
            return Ok(End::new(
                Outcome::Error,
                0,
                format!("the message was dropped from {name}'s queue before it was typed"),
            ));
        };
        if ev.seq <= mine.seq {
            match &ev.kind {
                Some(Kind::InputQueued(q)) if ev.seq == mine.seq => {
                    mine.ahead = Some(q.position.saturating_sub(1));
                    mine.text = q.text.clone();
                }
                Some(Kind::InputSent(i)) if ev.seq == mine.seq => mine.text = i.text.clone(),
                _ => {}
            }
            continue;
        }
        if let Some(end) = ended(&ev, name) {
            return Ok(end);
        }
        let Some(kind) = &ev.kind else { continue };
        if mine.typed.is_some() {
            if let Some(end) = after_typed(&mut f.c, &ev, kind).await? {
                return Ok(end);
            }
            continue;
        }
        match kind {
            Kind::InputSent(i) if i.submitted && mine.is_next(&i.text) => {
                mine.typed = Some(ev.seq);
                mine.missing_by = None;
            }
            Kind::Error(e) if e.kind == "input" => {
                let head: String = mine.text.chars().take(60).collect();
                let me = match mine.ahead {
                    Some(_) => mine.is_next(&mine.text.clone()),
                    None => e.message.contains(&format!("{head:?}")),
                };
                if me {
                    return Ok(End::new(Outcome::Error, ev.seq, e.message.clone()));
                }
            }
            Kind::Notice(n) if n.kind == "queue" => {
                // Something was dropped from the queue: its text finds the message now, and
                // a message no longer queued must be typed soon, or it was the one dropped.
                mine.ahead = None;
                let queue =
                    f.c.list_queue(v1::ListQueueRequest {
                        session: name.to_string(),
                    })
                    .await?
                    .into_inner();
                // Among those left out of a very long queue, it may still wait.
                let held = queue.omitted > 0
                    || queue
                        .inputs
                        .iter()
                        .any(|q| *q == mine.text || q.trim_end() == mine.asked.trim_end());
                mine.missing_by = (!held).then(|| Instant::now() + TYPING_GRACE);
            }
            Kind::Waiting(w) => {
                if let Some(p) = for_a_person(w.prompt.as_ref()) {
                    return Ok(held_back(ev.seq, p));
                }
            }
            _ => {}
        }
    }
}

fn held_back(seq: u64, p: &Prompt) -> End {
    End {
        prompt: Some(p.clone()),
        ..End::new(
            Outcome::Waiting,
            seq,
            "the message is queued behind this prompt and is typed once it is answered",
        )
    }
}

/// The session exited, is gone, or handed its work on: the same before and after the message
/// was typed.
fn ended(ev: &v1::Event, name: &str) -> Option<End> {
    let seq = ev.seq;
    match ev.kind.as_ref()? {
        Kind::Exited(x) => Some(End::new(
            Outcome::Exited,
            seq,
            exit_text(&ev.session, x.status, &x.reason),
        )),
        Kind::Released(_) => Some(End::new(Outcome::Exited, seq, released(&ev.session))),
        Kind::StateChanged(c) if matches!(state(c.to), S::Exited | S::Declared | S::Hibernated) => {
            Some(End::new(
                Outcome::Exited,
                seq,
                exit_text(&ev.session, None, &c.reason),
            ))
        }
        // A message could not wake it: it waits in the queue, and nothing will come.
        Kind::Error(e) if e.kind == "wake" => {
            Some(End::new(Outcome::Error, seq, e.message.clone()))
        }
        Kind::Delegated(d) => Some(End::new(
            Outcome::Error,
            seq,
            format!(
                "{name} handed its work to {} ({}); the reply comes there: `clibotctl wait {}`, then `clibotctl last {}`",
                d.to_session, d.reason, d.to_session, d.to_session
            ),
        )),
        _ => None,
    }
}

/// After the message was typed: its turn's reply, a prompt, or its end.
async fn after_typed(c: &mut Client, ev: &v1::Event, kind: &Kind) -> Result<Option<End>> {
    Ok(Some(match kind {
        Kind::TurnCompleted(t) => {
            let text = if t.blob_id.is_empty() {
                t.text.clone()
            } else {
                let whole = read_blob(c, &t.blob_id).await.map_err(|e| {
                    e.context(format!("reading the whole reply ({} bytes)", t.full_bytes))
                })?;
                String::from_utf8_lossy(&whole).into_owned()
            };
            End::new(Outcome::Done, ev.seq, text)
        }
        Kind::Waiting(w) => match for_a_person(w.prompt.as_ref()) {
            Some(p) => End::prompt(Outcome::Waiting, ev.seq, p),
            None => return Ok(None),
        },
        Kind::TurnCancelled(t) => End::new(
            Outcome::Error,
            ev.seq,
            format!("the turn was cancelled by {} ({})", t.by, t.how),
        ),
        Kind::Error(e) => End::new(Outcome::Error, ev.seq, e.message.clone()),
        _ => return Ok(None),
    }))
}

fn outcome_word(o: Outcome, done: &'static str) -> &'static str {
    match o {
        Outcome::Done => done,
        Outcome::Waiting => "waiting",
        Outcome::Timeout => "timeout",
        Outcome::Exited => "exited",
        Outcome::Error => "error",
    }
}

/// `{"session", "outcome", "text", "prompt", "seq"}`; `done` names the outcome of exit 0.
fn end_json(name: &str, end: &End, done: &'static str) -> Value {
    json!({
        "session": name,
        "outcome": outcome_word(end.outcome, done),
        "text": end.text,
        "prompt": end.prompt.as_ref().map(prompt_json),
        "seq": end.seq,
    })
}

/// The prompt, its options and how to answer it.
fn print_prompt(name: &str, p: &Prompt, note: &str) {
    println!("{name} waits: {}", p.text);
    if !p.subject.is_empty() {
        println!("    {}", p.subject);
    }
    for (i, o) in p.options.iter().enumerate() {
        println!("    {}. {o}", i + 1);
    }
    let what = if p.options.is_empty() { "TEXT" } else { "N" };
    println!("answer: clibotctl answer {name} {what} --prompt {}", p.id);
    if !note.is_empty() {
        println!("({note})");
    }
}

/// Ends the process with `code` once stdout is written; 0 returns.
fn exit_with(code: i32) -> Result<()> {
    if code == 0 {
        return Ok(());
    }
    std::io::stdout().flush()?;
    std::process::exit(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_read_as_since_reads_them() {
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert!(parse_duration("30").is_err());
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn a_queued_message_is_found_by_its_place_then_by_its_text() {
        let mut m = Mine {
            seq: 5,
            text: "echo b".into(),
            asked: "echo b".into(),
            typed: None,
            ahead: Some(1),
            missing_by: None,
        };
        // The same text ahead of it is not it.
        assert!(!m.is_next("echo b"));
        assert!(m.is_next("echo b"));
        let mut m = Mine {
            ahead: Some(0),
            ..m
        };
        assert!(!m.is_next("echo other"));
        assert_eq!(m.ahead, None);
        assert!(m.is_next("echo b"));
    }
}
