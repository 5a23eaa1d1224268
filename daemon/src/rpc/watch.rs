//! The event stream. Translation only: the core decides.

use super::*;

pub(super) async fn watch_events(
    svc: &Service,
    req: Request<v1::WatchEventsRequest>,
) -> Result<Response<EventStream>, Status> {
    let r = req.into_inner();
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<v1::Event, Status>>(BATCH);
    let daemon = svc.daemon.clone();
    let shutdown = svc.shutdown.clone();
    tokio::spawn(async move {
        let log = daemon.events();
        // Subscribe before reading, so nothing appended in between is missed.
        let mut changed = log.subscribe();
        let mut cursor = r.since.unwrap_or_else(|| log.last_seq());
        loop {
            let read = log.read_after(cursor, BATCH);
            if let Some((first, last)) = read.dropped {
                let gap = v1::Event {
                    seq: 0,
                    time_ms: crate::store::now_ms(),
                    session: String::new(),
                    session_id: String::new(),
                    kind: Some(Kind::EventsDropped(v1::EventsDropped {
                        first_seq: first,
                        last_seq: last,
                    })),
                };
                if tx.send(Ok(gap)).await.is_err() {
                    return;
                }
            }
            let n = read.events.len();
            for ev in read.events {
                cursor = ev.seq;
                if !r.sessions.is_empty() && !r.sessions.contains(&ev.session) {
                    continue;
                }
                if let Some(pe) = event_to_proto(ev).map(|pe| with_profiles(&daemon, pe))
                    && tx.send(Ok(pe)).await.is_err()
                {
                    return;
                }
            }
            if n == BATCH {
                continue;
            }
            if !r.follow {
                return;
            }
            tokio::select! {
                res = changed.changed() => if res.is_err() { return },
                _ = tx.closed() => return,
                _ = shutdown.cancelled() => {
                    let _ = tx.send(Err(Status::unavailable("clibotd is shutting down; reconnect and resume with since"))).await;
                    return;
                }
            }
        }
    });
    Ok(Response::new(Box::pin(
        tokio_stream::wrappers::ReceiverStream::new(rx),
    )))
}

/// A usage limit with the profiles its session could go on with (for its card's buttons),
/// as the configuration has them now.
fn with_profiles(daemon: &crate::core::Daemon, mut pe: v1::Event) -> v1::Event {
    if let Some(Kind::Error(e)) = pe.kind.as_mut()
        && e.kind == "usage_limit"
    {
        e.switch_profiles = daemon.other_profiles(&pe.session);
    }
    pe
}
