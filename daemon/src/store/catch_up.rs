//! The registry caught up with the event log at start: one order for every step.
//!
//! A step of a session is recorded by appending its event (one `write`, kept by the kernel even
//! when the daemon is killed the next instant) and then saving the registry (`sessions.json`,
//! rewritten whole). A daemon killed between the two used to start from the older registry:
//! a turn whose completion the chats already had was still `working`, found ended and reported
//! again; a cancel was followed by a completion; a prompt read off the screen came back with a
//! new id, its buttons refused and its timers started over.
//!
//! So the event is the step's record, and the registry a snapshot of where the events had got
//! to (`last_seq`, read before the sessions were copied). At start the events after that
//! snapshot are applied to it again: each kind sets the fields its step changes, so applying an
//! event whose effect the snapshot already holds changes nothing. A kill at any instant then
//! leaves each step either done and recorded (the event is there, and the registry is brought
//! up to it) or not recorded at all (no event: the next daemon sees the step as not taken and
//! takes it).

use crate::model::{SessionRecord, State};
use crate::store::RegistryFile;
use crate::store::events::{Event, EventKind};

/// Applies `events` (in order, as read from the log after `registry.last_seq`) to the sessions
/// they name. Returns how many changed a session.
pub fn catch_up(registry: &mut RegistryFile, events: &[Event]) -> usize {
    let mut applied = 0;
    for ev in events.iter().filter(|e| e.seq > registry.last_seq) {
        let Some(rec) = registry
            .sessions
            .iter_mut()
            .find(|r| !ev.session_id.is_empty() && r.id == ev.session_id)
        else {
            continue;
        };
        if apply(rec, ev) {
            applied += 1;
        }
    }
    applied
}

/// One event's effect on its session's record; whether it changed it.
fn apply(rec: &mut SessionRecord, ev: &Event) -> bool {
    let before = rec.clone();
    match &ev.kind {
        EventKind::InputSent {
            text,
            submitted: true,
            ..
        } => {
            // The turn's anchor was kept in memory only: without it a screen-read reply is
            // read from the pane's newest lines, as for a turn started at the desk.
            rec.turn_input_lines = text.lines().count().min(u32::MAX as usize) as u32;
            rec.turn_started_ms = ev.time_ms;
            rec.last_activity_ms = rec.last_activity_ms.max(ev.time_ms);
            rec.error = None;
            if !text.trim().is_empty() {
                rec.last_input = text.clone();
            }
            if matches!(rec.state, State::Idle | State::Error | State::Starting) {
                rec.state = State::Working;
            }
        }
        EventKind::StateChanged { to, .. } => rec.state = *to,
        EventKind::TurnCompleted {
            text,
            blob_id,
            full_bytes,
            ..
        } => {
            end_turn(rec);
            rec.last_reply = Some(text.clone());
            rec.last_reply_seq = ev.seq;
            rec.last_reply_blob = blob_id.clone();
            rec.last_reply_bytes = *full_bytes;
        }
        EventKind::TurnCancelled { .. } => {
            end_turn(rec);
            rec.cancel_by.clear();
        }
        EventKind::Waiting { prompt } => rec.prompt = Some(prompt.clone()),
        EventKind::PromptResolved { prompt_id, .. }
            if rec.prompt.as_ref().is_some_and(|p| p.id == *prompt_id) =>
        {
            rec.prompt = None;
        }
        EventKind::Exited { status, reason, .. } => {
            rec.exit_status = *status;
            if rec.exit_reason.is_empty() {
                rec.exit_reason = reason.clone();
            }
        }
        _ => {}
    }
    *rec != before
}

/// What a turn's end clears; a session still shown working or waiting is idle.
fn end_turn(rec: &mut SessionRecord) {
    rec.turn_anchor = None;
    rec.turn_input_lines = 0;
    rec.turn_started_ms = 0;
    rec.stalled = false;
    rec.prompt = None;
    if matches!(rec.state, State::Working | State::Waiting) {
        rec.state = State::Idle;
    }
}

/// Whether a queued message whose typing began when the log ended at `typing_from` was
/// submitted: an `input_sent` of its session came after. (Nothing else is typed and submitted
/// while input waits in the queue: a message sent meanwhile joins the queue.)
pub fn submitted_since(events: &[Event], session_id: &str, typing_from: u64) -> bool {
    events.iter().any(|e| {
        e.seq > typing_from
            && e.session_id == session_id
            && matches!(
                e.kind,
                EventKind::InputSent {
                    submitted: true,
                    ..
                }
            )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Prompt;

    fn ev(seq: u64, kind: EventKind) -> Event {
        Event {
            seq,
            time_ms: 1_000 + seq as i64,
            session: "s".into(),
            session_id: "id1".into(),
            kind,
        }
    }

    fn registry(state: State, last_seq: u64) -> RegistryFile {
        RegistryFile {
            version: 1,
            last_seq,
            sessions: vec![SessionRecord {
                id: "id1".into(),
                name: "s".into(),
                state,
                ..Default::default()
            }],
        }
    }

    fn completed(seq: u64) -> Event {
        ev(
            seq,
            EventKind::TurnCompleted {
                text: "done".into(),
                source: crate::model::TurnEnd::Hook,
                blob_id: String::new(),
                full_bytes: 0,
            },
        )
    }

    #[test]
    fn a_turn_reported_before_the_registry_was_saved_is_over() {
        let mut reg = registry(State::Working, 10);
        reg.sessions[0].turn_started_ms = 5;
        let n = catch_up(&mut reg, &[completed(11)]);
        assert_eq!(n, 1);
        let r = &reg.sessions[0];
        assert_eq!(r.state, State::Idle);
        assert_eq!(r.turn_started_ms, 0);
        assert_eq!(r.last_reply.as_deref(), Some("done"));
        assert_eq!(r.last_reply_seq, 11);
    }

    #[test]
    fn events_the_snapshot_holds_change_nothing() {
        let mut reg = registry(State::Idle, 10);
        reg.sessions[0].last_reply = Some("done".into());
        reg.sessions[0].last_reply_seq = 11;
        // Read before the copy: the event came after last_seq, its effect is in the copy.
        assert_eq!(catch_up(&mut reg, &[completed(11)]), 0);
        // Events up to last_seq are not applied at all.
        let mut reg = registry(State::Working, 12);
        assert_eq!(catch_up(&mut reg, &[completed(11)]), 0);
        assert_eq!(reg.sessions[0].state, State::Working);
    }

    #[test]
    fn a_cancel_ends_the_turn_and_its_prompt() {
        let mut reg = registry(State::Waiting, 3);
        reg.sessions[0].prompt = Some(Prompt {
            id: "p1".into(),
            ..Default::default()
        });
        reg.sessions[0].cancel_by = "local".into();
        catch_up(
            &mut reg,
            &[ev(
                4,
                EventKind::TurnCancelled {
                    by: "local".into(),
                    how: "keys C-c".into(),
                },
            )],
        );
        let r = &reg.sessions[0];
        assert_eq!(r.state, State::Idle);
        assert!(r.prompt.is_none());
        assert!(r.cancel_by.is_empty());
    }

    #[test]
    fn a_prompt_keeps_its_id_and_clock_and_goes_when_resolved() {
        let mut reg = registry(State::Working, 1);
        let p = Prompt {
            id: "p7".into(),
            since_ms: 1234,
            ..Default::default()
        };
        catch_up(
            &mut reg,
            &[
                ev(2, EventKind::Waiting { prompt: p.clone() }),
                ev(
                    3,
                    EventKind::StateChanged {
                        from: State::Working,
                        to: State::Waiting,
                        reason: String::new(),
                    },
                ),
            ],
        );
        assert_eq!(reg.sessions[0].prompt.as_ref(), Some(&p));
        assert_eq!(reg.sessions[0].state, State::Waiting);
        let other = ev(
            4,
            EventKind::PromptResolved {
                prompt_id: "p6".into(),
                by: "x".into(),
                answer: String::new(),
                actor: String::new(),
                note: String::new(),
            },
        );
        catch_up(&mut reg, &[other]);
        assert!(reg.sessions[0].prompt.is_some(), "another prompt's answer");
        let mine = ev(
            5,
            EventKind::PromptResolved {
                prompt_id: "p7".into(),
                by: "x".into(),
                answer: "1".into(),
                actor: String::new(),
                note: String::new(),
            },
        );
        catch_up(&mut reg, &[mine]);
        assert!(reg.sessions[0].prompt.is_none());
    }

    #[test]
    fn input_sent_starts_the_turn_and_only_events_of_the_session_count() {
        let mut reg = registry(State::Idle, 0);
        let sent = ev(
            1,
            EventKind::InputSent {
                text: "echo hi".into(),
                submitted: true,
                blob_id: String::new(),
                full_bytes: 0,
            },
        );
        let mut elsewhere = completed(2);
        elsewhere.session_id = "id2".into();
        catch_up(&mut reg, &[sent.clone(), elsewhere]);
        let r = &reg.sessions[0];
        assert_eq!(r.state, State::Working);
        assert_eq!(r.turn_started_ms, sent.time_ms);
        assert_eq!(r.last_input, "echo hi");
        assert!(submitted_since(std::slice::from_ref(&sent), "id1", 0));
        assert!(!submitted_since(std::slice::from_ref(&sent), "id1", 1));
        assert!(!submitted_since(&[sent], "id2", 0));
    }
}
