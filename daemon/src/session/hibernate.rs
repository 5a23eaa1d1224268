//! Hibernate and wake. A session idle for `idle_stop_after` is stopped but not forgotten: it
//! is `hibernated`, its conversation id kept, and holds no process. The next message to it —
//! from a chat or `clibotctl send`, by anyone who may send to it — is queued, the chats are
//! told "waking NAME…" once, the CLI is started again resuming its conversation (as
//! `restart` does), and the message is typed once the CLI is ready, as any queued input is.

use tracing::{Instrument, info, info_span, warn};

use crate::core::Daemon;
use crate::locking::lock;
use crate::model::State;
use crate::store::events::EventKind;

impl Daemon {
    /// Starts waking session `name` if it is hibernated and not already waking.
    pub(crate) fn wake_if_hibernated(&self, name: &str) {
        let (id, cli) = {
            let mut sessions = lock(&self.inner.sessions);
            let Some(e) = sessions.get_mut(name) else {
                return;
            };
            if e.rec.state != State::Hibernated || e.rt.waking || e.stopping {
                return;
            }
            e.rt.waking = true;
            (e.rec.id.clone(), e.rec.cli.clone())
        };
        let resume = self.resumes_conversations(&cli);
        self.event(
            name,
            &id,
            EventKind::Notice {
                text: format!("waking {name}…"),
                kind: "waking".into(),
            },
        );
        let d = self.clone();
        let name = name.to_string();
        let span = info_span!("session", session = %name);
        self.in_background(
            async move {
                info!(resume, "a message came: waking the hibernated session");
                match d.restart_inner(&name, resume).await {
                    Ok(rec) => {
                        if let Some(entry) = lock(&d.inner.sessions).get_mut(&name) {
                            entry.rt.waking = false;
                        }
                        d.event(&name, &rec.id, EventKind::Woken { resumed: resume });
                        // What came while it woke is typed once it is ready (if it already
                        // is, now).
                        d.deliver_queued(&name);
                    }
                    Err(e) => {
                        warn!("the hibernated session could not be woken: {e}");
                        if let Some(entry) = lock(&d.inner.sessions).get_mut(&name) {
                            entry.rt.waking = false;
                        }
                        d.event(
                            &name,
                            &id,
                            EventKind::Error {
                                message: format!(
                                    "{name} could not be woken: {e}. The message waits in its queue: !!restart {name} tries again, !!drop all removes it"
                                ),
                                kind: "wake".into(),
                            },
                        );
                    }
                }
            }
            .instrument(span),
        );
    }
}
