//! Hibernate and wake. A session idle for `idle_stop_after` is stopped but not forgotten: it
//! is `hibernated`, its conversation id kept, and holds no process. The next message to it —
//! from a chat or `clibotctl send`, by anyone who may send to it — is queued, the chats are
//! told "waking NAME…" once, the CLI is started again resuming its conversation (as
//! `restart` does), and the message is typed once the CLI is ready, as any queued input is.

use tracing::{Instrument, info, info_span, warn};

use crate::core::Daemon;
use crate::model::State;
use crate::store::events::EventKind;

impl Daemon {
    /// Starts waking session `name` if it is hibernated and not already waking.
    pub(crate) fn wake_if_hibernated(&self, name: &str) {
        let woken = self.sessions().update(name, |e| {
            if e.rec.state != State::Hibernated || e.rt.waking || e.stopping {
                return None;
            }
            e.rt.waking = true;
            Some((e.rec.id.clone(), e.rec.cli.clone()))
        });
        let Some((id, cli)) = woken.flatten() else {
            return;
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
                        d.sessions().update(&name, |e| e.rt.waking = false);
                        d.event(&name, &rec.id, EventKind::Woken { resumed: resume });
                        // What came while it woke is typed once it is ready (if it already
                        // is, now).
                        d.deliver_queued(&name);
                    }
                    Err(e) => {
                        warn!("the hibernated session could not be woken: {e}");
                        d.sessions().update(&name, |e| e.rt.waking = false);
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
