//! A webhook's delivery, once the endpoint has read it: proven, taken once, matched, and the
//! job run with the payload's chosen fields (`jobs/webhook.rs` says why each check).
//!
//! Why the answer waits a little for the run: the sender's delivery log (GitHub's "Recent
//! Deliveries") is where a person looks when a job did not run, so the answer says what
//! happened — started, skipped by the gate, paused — when that is known within
//! [`ANSWER_WITHIN`]; a gate slower than that is still run, and the answer says so.

use std::time::Duration;

use crate::core::Daemon;
use crate::jobs::Trigger;
use crate::jobs::webhook::{Delivery, Refused, Take, take, verify};
use crate::model::Actor;
use crate::store::now_ms;

/// How long a delivery's answer waits for its run to start.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// How a delivery was answered: an HTTP status and a line of text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub text: String,
}

fn answer(status: u16, text: impl Into<String>) -> Answer {
    Answer {
        status,
        text: text.into(),
    }
}

impl Daemon {
    /// Takes a delivery to `/hooks/NAME` (`window`: how far a signed time may be off).
    pub async fn take_webhook(&self, name: &str, d: Delivery, window: Duration) -> Answer {
        let refused = |why: &Refused| match why {
            Refused::Signature | Refused::Stale(_) | Refused::BadTimestamp => 401,
            Refused::NoId | Refused::NotJson(_) => 400,
            Refused::Replayed(_) => 409,
        };
        // An unknown job and a wrong signature get the same answer: the endpoint does not
        // tell a stranger which jobs exist.
        let job = self.jobs().get(name);
        let Some((job, hook)) = job.and_then(|j| j.spec.webhook.clone().map(|h| (j, h))) else {
            tracing::info!(
                job = name,
                "a webhook delivery for no job that takes webhooks"
            );
            return answer(401, Refused::Signature.to_string());
        };
        let session = job.spec.session.clone();
        let via = Actor {
            via: "webhook".into(),
            ..Actor::from_key(&job.owner).unwrap_or_else(Actor::local)
        };
        let audit_refusal = |why: &Refused| {
            tracing::warn!(job = name, "a webhook delivery was refused: {why}");
            self.audit(
                &via,
                &session,
                &format!("webhook {name}"),
                Err(&why.to_string()),
            );
            answer(refused(why), why.to_string())
        };
        if let Err(why) = verify(&hook.secret, &d, now_ms() / 1000, window) {
            return audit_refusal(&why);
        }
        if !self.jobs().take_delivery(name, &d.id, now_ms()) {
            return audit_refusal(&Refused::Replayed(d.id.clone()));
        }
        let added = match take(&hook, &d) {
            Ok(Take::Run(added)) => added,
            Ok(Take::Ignore(why)) => {
                tracing::info!(job = name, "a webhook delivery ignored: {why}");
                return answer(200, format!("ignored: {why}"));
            }
            Err(why) => return audit_refusal(&why),
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (d2, job_name) = (self.clone(), name.to_string());
        self.in_background(async move {
            let r = d2.run_job(&job_name, Trigger::Webhook, &added).await;
            let _ = tx.send(r);
        });
        match tokio::time::timeout(ANSWER_WITHIN, rx).await {
            Ok(Ok(Ok(started))) => match started.skipped {
                Some(why) => answer(
                    200,
                    format!("run {} skipped by its gate: {why}", started.run),
                ),
                None => answer(
                    202,
                    format!("run {} started in {}", started.run, started.session),
                ),
            },
            // Paused, still running, over its daily limit, failed: the sender's log says so.
            Ok(Ok(Err(e))) => answer(409, format!("not run: {e}")),
            Ok(Err(_)) => answer(503, "the daemon is stopping; send it again"),
            Err(_) => answer(
                202,
                "accepted: the run is starting (its gate is still running)",
            ),
        }
    }
}
