//! Events the relay cannot read.
//!
//! An event the gateway cannot decode (one over the gRPC message limit, say — a 5.7 MB reply
//! once was) breaks the event stream at the same place every time it is read again. Taken
//! for a lost connection, it was replayed five times a second, forever, and no chat of the
//! platform received anything after it. Now a broken stream is judged: when the daemon still
//! answers, the stream is read again once from where it broke; when it breaks at the same
//! event again, that event is skipped — its session's chats are told, once, and the log says
//! which event it was. Only a daemon that does not answer counts as a lost connection (the
//! relay connects again, with growing backoff).

use std::collections::BTreeSet;

use clibot_proto::v1;
use tokio_stream::StreamExt;

/// Skipped events remembered (so a replay after a reconnect skips them at once).
const REMEMBERED: usize = 1024;

/// What to do about a stream that broke at an event.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// The daemon is gone: connect again, with backoff.
    Lost,
    /// Read the stream again from where it broke (once).
    Again,
    /// Skip the event; `tell` when its chats were not told yet.
    Skip { tell: bool },
}

#[derive(Default)]
pub struct Poison {
    /// Where the stream broke last, to tell a poison event from a passing failure.
    last: Option<u64>,
    skipped: BTreeSet<u64>,
}

impl Poison {
    /// Judges a stream that failed with `status` where event `at` was due.
    pub async fn judge(
        &mut self,
        c: &mut clibot_proto::Client,
        consumer: &str,
        at: u64,
        status: &tonic::Status,
    ) -> Verdict {
        let answers = c
            .get_cursor(v1::GetCursorRequest {
                consumer: consumer.to_string(),
            })
            .await
            .is_ok();
        if !answers {
            return Verdict::Lost;
        }
        if self.skipped.contains(&at) {
            return Verdict::Skip { tell: false };
        }
        if self.last.replace(at) != Some(at) {
            eprintln!(
                "clibot-gateway: the event stream broke at event {at} ({}: {}); reading it again",
                status.code(),
                status.message()
            );
            return Verdict::Again;
        }
        self.skipped.insert(at);
        while self.skipped.len() > REMEMBERED {
            self.skipped.pop_first();
        }
        self.last = None;
        Verdict::Skip { tell: true }
    }
}

/// The session event `at` belongs to, among `sessions`: the one whose own stream breaks there.
pub async fn owner(c: &mut clibot_proto::Client, at: u64, sessions: &[String]) -> Option<String> {
    for s in sessions {
        let req = v1::WatchEventsRequest {
            since: Some(at.saturating_sub(1)),
            sessions: vec![s.clone()],
            follow: false,
        };
        let Ok(stream) = c.watch_events(req).await else {
            continue;
        };
        let mut stream = stream.into_inner();
        match stream.next().await {
            Some(Err(_)) => return Some(s.clone()),
            Some(Ok(ev)) if ev.seq == at => return None,
            _ => continue,
        }
    }
    None
}

/// What the chats of the event's session are told instead of it.
pub fn notice(at: u64, session: &str, status: &tonic::Status) -> v1::Event {
    let why: String = status.message().chars().take(200).collect();
    v1::Event {
        seq: at,
        session: session.to_string(),
        time_ms: crate::ops::health::now_ms(),
        kind: Some(v1::event::Kind::Notice(v1::Notice {
            text: format!(
                "an event of this session could not be shown here and was skipped (event {at}: {why}); !!last shows the latest reply, and `clibotctl last {session}` on the machine shows it whole"
            ),
            kind: String::new(),
        })),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use clibot_tests::Harness;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_event_that_breaks_the_stream_twice_is_skipped_and_a_gone_daemon_is_lost() {
        let mut h = Harness::new();
        h.start_daemon();
        let mut c = h.client().await;
        let broke = tonic::Status::out_of_range("decoded message length too large");
        let mut p = Poison::default();
        assert_eq!(p.judge(&mut c, "t", 7, &broke).await, Verdict::Again);
        assert_eq!(
            p.judge(&mut c, "t", 7, &broke).await,
            Verdict::Skip { tell: true }
        );
        // Met again after a reconnect: skipped at once, the chats already told.
        assert_eq!(
            p.judge(&mut c, "t", 7, &broke).await,
            Verdict::Skip { tell: false }
        );
        // A different place is read again first.
        assert_eq!(p.judge(&mut c, "t", 9, &broke).await, Verdict::Again);
        h.kill_daemon();
        assert_eq!(p.judge(&mut c, "t", 9, &broke).await, Verdict::Lost);
    }
}
