//! The buttons under a usage limit: **Resume at reset** (a one-off job that types "continue"
//! into the session shortly after the limit resets), **Delegate now** (the delegation
//! chain, as `!!delegate` would) and **Switch to PROFILE** (the session started again with
//! another account profile of its CLI, see `profile_switch`). The card carries only the limit event's number: the daemon
//! reads the event back, so the press acts on the session and the reset time it told, and
//! checks the presser may use that session.

use tracing::info;

use crate::core::Daemon;
use crate::error::CoreError;
use crate::jobs::JobSpec;
use crate::model::Actor;
use crate::store::events::EventKind;

/// How long after the reset the session is told to continue: the provider's clock and ours
/// differ by a little.
const AFTER_RESET_MS: i64 = 30_000;
/// What a resumed session is told.
const RESUME_PROMPT: &str = "continue";

/// What a press on a limit's card asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LimitAction {
    Resume,
    Delegate,
    /// Go on with this account profile.
    Switch(String),
}

impl LimitAction {
    pub fn parse(s: &str) -> Option<LimitAction> {
        match s {
            "resume" => Some(LimitAction::Resume),
            "delegate" => Some(LimitAction::Delegate),
            _ => s
                .strip_prefix("switch:")
                .filter(|p| !p.is_empty())
                .map(|p| LimitAction::Switch(p.to_string())),
        }
    }
}

impl Daemon {
    /// Does what a limit card's button asks for the usage limit told as event `seq`; what to
    /// tell the chat.
    pub async fn limit_action(
        &self,
        actor: &Actor,
        seq: u64,
        action: LimitAction,
    ) -> Result<String, CoreError> {
        let read = self.events().read_after(seq.saturating_sub(1), 1);
        let Some(ev) = read.events.into_iter().find(|e| e.seq == seq) else {
            return Err(CoreError::LimitCard(format!(
                "the limit this card was for (event {seq}) is no longer kept"
            )));
        };
        let EventKind::Error { message, kind } = &ev.kind else {
            return Err(CoreError::LimitCard(format!(
                "event {seq} is not a usage limit"
            )));
        };
        if kind != "usage_limit" {
            return Err(CoreError::LimitCard(format!(
                "event {seq} is not a usage limit"
            )));
        }
        let session = ev.session.clone();
        let rec = self.get(&session)?;
        if !self.may_use(actor, &rec) {
            return Err(CoreError::NotYours(session));
        }
        match action {
            LimitAction::Resume => {
                let reset = crate::usage::limits::reset_of(
                    message,
                    ev.time_ms,
                    &jiff::tz::TimeZone::system(),
                )
                .ok_or_else(|| {
                    CoreError::LimitCard(format!(
                        "{}'s message does not say when its limit resets; add a job with `at` yourself (!!job add …)",
                        rec.cli
                    ))
                })?;
                let at_ms = reset.max(crate::store::now_ms()) + AFTER_RESET_MS;
                let at = jiff::Timestamp::from_millisecond(at_ms)
                    .map_err(|e| CoreError::LimitCard(format!("reset time: {e}")))?
                    .to_zoned(jiff::tz::TimeZone::UTC)
                    .datetime()
                    .strftime("%Y-%m-%dT%H:%M:%S")
                    .to_string();
                let head: String = session.chars().take(40).collect();
                let name = format!("resume-{head}-{seq}");
                let spec = JobSpec {
                    name: name.clone(),
                    session: session.clone(),
                    prompt: RESUME_PROMPT.into(),
                    at,
                    tz: "UTC".into(),
                    ..JobSpec::default()
                };
                self.add_job(actor, spec, true)?;
                info!(session = %session, job = %name, "resume at the limit's reset");
                let secs = (at_ms - crate::store::now_ms()).max(0) / 1000;
                Ok(format!(
                    "⏰ {session} is told to continue in {} (when its limit has reset): job {name}, removed with !!job remove {name}",
                    clibot_proto::usage_words::span(secs)
                ))
            }
            LimitAction::Switch(profile) => {
                // An account's credentials: an admin's choice, not that of a user the session
                // is shared with.
                if !self.is_admin(actor) {
                    return Err(CoreError::LimitCard(
                        "switching a session's account profile is for admins".into(),
                    ));
                }
                let r = self.switch_profile(&session, &profile, false).await?;
                Ok(format!(
                    "🔁 {session} starts again with profile {profile} ({})",
                    r.cli
                ))
            }
            LimitAction::Delegate => {
                let to = self
                    .delegate(&session, None, "usage_limit", message)
                    .await?;
                Ok(format!(
                    "{session}'s work goes on in {} ({})",
                    to.name, to.cli
                ))
            }
        }
    }
}
