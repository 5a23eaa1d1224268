//! What a daemon that stopped (killed, or restarted by systemd) left half done is taken up by
//! the next one: nothing waits for an event that already happened.
//!
//! The events that drive a session — a turn's end, a CLI that became ready, a wake that
//! finished — came while no daemon listened, so what they would have set off is set off at
//! start instead: input queued for a ready session is typed, a hibernated session with input
//! queued is woken, and a restart after a failure that was due is made.

use tracing::info;

use crate::core::Daemon;
use crate::model::State;

impl Daemon {
    /// Called once at start, after every session is watched again.
    pub(crate) fn take_up_at_start(&self) {
        // From one look at the table: each session with input queued, and its state.
        let queued = self.sessions().filter_map(|e| {
            (!e.rec.queue.is_empty() && !e.stopping).then(|| (e.rec.state, e.rec.name.clone()))
        });
        let with_queue = |s: State| {
            queued
                .iter()
                .filter(move |(state, _)| *state == s)
                .map(|(_, name)| name.clone())
        };
        let (ready, sleeping): (Vec<String>, Vec<String>) = (
            with_queue(State::Idle)
                .chain(with_queue(State::Error))
                .collect(),
            with_queue(State::Hibernated).collect(),
        );
        for name in ready {
            info!(session = %name, "input was queued for a ready session: typed now");
            self.sessions().update(&name, |e| {
                e.rt.maybe_half_typed = true;
                e.rt.maybe_entered = std::mem::take(&mut e.rec.queue_entering);
            });
            self.deliver_queued(&name);
        }
        for name in sleeping {
            info!(session = %name, "input was queued for a hibernated session: waking it");
            self.wake_if_hibernated(&name);
        }
        self.resume_crash_restarts();
    }
}
