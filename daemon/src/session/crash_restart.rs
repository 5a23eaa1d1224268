//! `restart = "on-failure"`: a CLI that exits with a failure status (or with none known, in
//! the middle of a turn) is started again — resuming its conversation where its CLI keeps one — at most
//! `restart_max` times in `restart_window`, waiting longer before each (1 s, 2 s, 4 s, … up to
//! 30 s). Every restart, and the one not made, is told to the session's chats.

use std::time::{Duration, Instant};

use tracing::{info, warn};

use crate::cli::RestartPolicy;
use crate::core::*;
use crate::store::events::EventKind;

/// The longest wait before a restart.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

impl Daemon {
    /// Session `name`'s CLI just exited with `status` (`mid_turn`: while it worked on a turn):
    /// started again when its policy says so.
    pub(crate) fn consider_crash_restart(&self, name: &str, status: Option<i32>, mid_turn: bool) {
        // Status 0 is a quit, never a failure; an unknown status counts when it came mid-turn.
        let failed = match status {
            Some(s) => s != 0,
            None => mid_turn,
        };
        if !failed {
            return;
        }
        let d = &self.settings().config.daemon;
        let counted = self.sessions().update(name, |e| {
            if !e.rec.server.is_empty() || e.rec.unmanaged {
                return None;
            }
            let policy = self
                .cli(&e.rec.cli)
                .ok()
                .and_then(|c| c.restart)
                .unwrap_or(d.restart);
            if policy != RestartPolicy::OnFailure {
                return None;
            }
            let window = d.restart_window;
            e.rt.crash_restarts.retain(|t| t.elapsed() < window);
            let attempt = e.rt.crash_restarts.len() as u32 + 1;
            if attempt <= d.restart_max {
                e.rt.crash_restarts.push(Instant::now());
            }
            let resume = !e.rec.cli_session_id.is_empty() && self.resumes_conversations(&e.rec.cli);
            Some((e.rec.id.clone(), attempt, resume))
        });
        let Some((id, attempt, resume)) = counted.flatten() else {
            return;
        };
        let why = match status {
            Some(s) => format!("the CLI exited with status {s}"),
            None => "the CLI exited mid-turn".to_string(),
        };
        let window = crate::duration::format_words(d.restart_window);
        if attempt > d.restart_max {
            warn!(session = name, "failed too often; not restarted");
            self.event(
                name,
                &id,
                EventKind::Notice {
                    text: format!(
                        "{why}; it failed {} times in {window}, so it is not started again: !!restart {name} when it is fixed",
                        d.restart_max
                    ),
                    kind: "restart".into(),
                },
            );
            return;
        }
        let wait = Duration::from_secs(1u64 << (attempt - 1).min(5)).min(MAX_BACKOFF);
        // On disk before it is told: a daemon stopped during the backoff makes it all the same.
        self.sessions().update(name, |e| {
            e.rec.restart_due_ms = crate::store::now_ms() + wait.as_millis() as i64;
        });
        self.persist();
        let how = if resume {
            ", resuming its conversation"
        } else {
            ""
        };
        self.event(
            name,
            &id,
            EventKind::Notice {
                text: format!(
                    "{why}; starting it again in {}{how} (restart {attempt} of {} in {window})",
                    crate::duration::format_words(wait),
                    d.restart_max
                ),
                kind: "restart".into(),
            },
        );
        self.schedule_crash_restart(name, wait, resume);
    }

    /// Restarts after a failure that a daemon stopped during the backoff had scheduled (the
    /// restart is due when it said).
    pub(crate) fn resume_crash_restarts(&self) {
        let due: Vec<(String, i64, String)> = self.sessions().filter_map(|e| {
            (e.rec.restart_due_ms > 0 && e.rec.state == crate::model::State::Exited)
                .then(|| (e.rec.name.clone(), e.rec.restart_due_ms, e.rec.cli.clone()))
        });
        for (name, at, cli) in due {
            let wait =
                Duration::from_millis(at.saturating_sub(crate::store::now_ms()).max(0) as u64);
            let resume = self
                .sessions()
                .get(&name, |e| !e.rec.cli_session_id.is_empty())
                .unwrap_or(false)
                && self.resumes_conversations(&cli);
            info!(session = %name, ?wait, "a restart after a failure was due: made now");
            self.schedule_crash_restart(&name, wait, resume);
        }
    }

    fn schedule_crash_restart(&self, name: &str, wait: Duration, resume: bool) {
        let d = self.clone();
        let name = name.to_string();
        self.in_background(async move {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = d.shutdown_token().cancelled() => return,
            }
            // Stopped, released or restarted by hand meanwhile: nothing to do.
            let (still_exited, id) = d
                .sessions()
                .update(&name, |e| {
                    let due = e.rec.restart_due_ms > 0;
                    e.rec.restart_due_ms = 0;
                    (
                        due && e.rec.state.is_exited() && !e.stopping,
                        e.rec.id.clone(),
                    )
                })
                .unwrap_or((false, String::new()));
            if !still_exited {
                return;
            }
            match d.restart(&name, resume).await {
                Ok(_) => info!(session = %name, "started again after a failure"),
                Err(e) => {
                    warn!(session = %name, "could not start it again: {e}");
                    d.persist();
                    d.event(
                        &name,
                        &id,
                        EventKind::Notice {
                            text: format!("it could not be started again: {e}"),
                            kind: "restart".into(),
                        },
                    );
                }
            }
        });
    }
}
