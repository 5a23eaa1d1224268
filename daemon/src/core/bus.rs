//! The event bus: recording an event publishes it to the parts that follow events.
//!
//! Why a bus: the core records what happened and nothing more. Automatic answers, delegation,
//! the outcomes of automatic answers and the metrics each follow the log as a subscriber, so
//! the core calls no feature and a new feature is a new subscriber (one row in the list the
//! daemon is started with), never an edit of the core.
//!
//! Why in process and synchronous: each subscriber is called, in the order of the list, on the
//! thread that recorded the event, before [`crate::core::Daemon::event`] returns. So what a
//! subscriber keeps (a tally, a pending outcome) is up to date when the recorder goes on, and
//! the order of events is the order each subscriber sees. A subscriber never blocks: what takes
//! time (a decider, a delegation) it starts in its own task.

use std::sync::Arc;

use crate::core::Daemon;
use crate::store::events::{Event, EventKind};

/// Work a subscriber asked for while it amended an event, run once the event is written.
pub(crate) type FollowUp = Box<dyn FnOnce(&Daemon, &Event) + Send>;

/// A part that follows the events the core records.
pub(crate) trait Subscriber: Send + Sync {
    /// Its name, for the logs and the list of parts.
    fn name(&self) -> &'static str;

    /// Looks at an event before it is written and may amend it — what the log and the chats
    /// show must already say, for example, that a prompt is being answered automatically. What
    /// it returns runs after the event is written (right after its [`Subscriber::on_event`]).
    fn amend(&self, _daemon: &Daemon, _session: &str, _kind: &mut EventKind) -> Option<FollowUp> {
        None
    }

    /// An event as written (long texts cut to their head, secrets scrubbed).
    fn on_event(&self, _daemon: &Daemon, _event: &Event) {}
}

/// The subscribers, in the order they are called.
#[derive(Clone, Default)]
pub(crate) struct Bus {
    subscribers: Arc<Vec<Arc<dyn Subscriber>>>,
}

impl Bus {
    pub(crate) fn new(subscribers: Vec<Arc<dyn Subscriber>>) -> Bus {
        Bus {
            subscribers: Arc::new(subscribers),
        }
    }

    /// The subscribers' names, in order.
    pub(crate) fn names(&self) -> Vec<&'static str> {
        self.subscribers.iter().map(|s| s.name()).collect()
    }

    /// Lets every subscriber amend `kind`; returns the follow-ups, by subscriber.
    pub(crate) fn amend(
        &self,
        daemon: &Daemon,
        session: &str,
        kind: &mut EventKind,
    ) -> Vec<Option<FollowUp>> {
        self.subscribers
            .iter()
            .map(|s| s.amend(daemon, session, kind))
            .collect()
    }

    /// Hands the written event to every subscriber, each followed by its own follow-up.
    pub(crate) fn publish(
        &self,
        daemon: &Daemon,
        event: &Event,
        follow_ups: Vec<Option<FollowUp>>,
    ) {
        let mut follow_ups = follow_ups.into_iter();
        for s in self.subscribers.iter() {
            s.on_event(daemon, event);
            if let Some(f) = follow_ups.next().flatten() {
                f(daemon, event);
            }
        }
    }
}
