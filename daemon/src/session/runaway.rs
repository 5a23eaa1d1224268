//! Turns that will not end: a stall (no output for `stall_after`) and a turn past its
//! `turn_timeout` are told with what the screen shows, the real times and the next commands;
//! a timed-out turn then gets its `on_turn_timeout` (the notice alone, a cancel, or a
//! delegation along the `timeout` chain).

use std::time::Duration;

use tracing::warn;

use crate::cli::OnTurnTimeout;
use crate::core::*;
use crate::model::State;
use crate::store::events::EventKind;

/// Screen lines a stall or timeout notice carries.
const NOTICE_LINES: usize = 8;

impl Daemon {
    /// The last non-blank lines of session `name`'s screen, for a notice.
    pub(crate) async fn screen_tail(&self, name: &str, target: &str) -> String {
        let screen = self
            .mux_of(name)
            .capture(target, None, false)
            .await
            .unwrap_or_default();
        let lines: Vec<&str> = screen
            .lines()
            .map(str::trim_end)
            .filter(|l| !l.trim().is_empty())
            .collect();
        lines[lines.len().saturating_sub(NOTICE_LINES)..].join("\n")
    }

    /// How long session `name`'s running turn has been working, if it is.
    pub(crate) fn working_for(&self, name: &str) -> Option<Duration> {
        self.sessions()
            .get(name, |e| {
                Some(e)
                    .filter(|e| matches!(e.rec.state, State::Working | State::Waiting))
                    .and_then(turn_age)
            })
            .flatten()
            .map(|(_, age)| age)
    }

    /// Checks the running turn against its CLI's `turn_timeout` (else `[daemon]`'s), once per
    /// turn: a notice, then the action.
    pub(crate) async fn check_turn_timeout(&self, name: &str, target: &str) {
        let d = &self.settings().config.daemon;
        let timed_out = self.sessions().update(name, |e| {
            if e.rec.state != State::Working {
                return None;
            }
            let (started, age) = turn_age(e)?;
            if e.rt.timed_out_turn == Some(started) {
                return None;
            }
            let spec = self.cli(&e.rec.cli).ok();
            let limit = spec
                .as_ref()
                .and_then(|c| c.turn_timeout)
                .unwrap_or(d.turn_timeout);
            if limit.is_zero() || age < limit {
                return None;
            }
            e.rt.timed_out_turn = Some(started);
            let action = spec
                .as_ref()
                .and_then(|c| c.on_turn_timeout)
                .unwrap_or(d.on_turn_timeout);
            Some((
                age,
                (e.rec.cli.clone(), action),
                e.rec.id.clone(),
                e.rt.turn.last_output.elapsed(),
            ))
        });
        let Some((working, cli, id, silent)) = timed_out.flatten() else {
            return;
        };
        let (cli, action) = cli;
        let tail = self.screen_tail(name, target).await;
        let then = match action {
            OnTurnTimeout::Notify => "it goes on",
            OnTurnTimeout::Cancel => "it is cancelled now",
            OnTurnTimeout::Delegate => "its work goes to the next CLI",
        };
        warn!(session = name, cli, ?action, "turn ran past turn_timeout");
        self.event(
            name,
            &id,
            EventKind::Notice {
                text: format!(
                    "working {}, no output for {} — longer than turn_timeout; {then}. The screen ends with:\n{tail}\n!!screen shows it, !!cancel stops the turn, !!keys Escape / C-c interrupt it",
                    crate::duration::format_words(working),
                    crate::duration::format_words(silent),
                ),
                kind: "turn_timeout".into(),
            },
        );
        match action {
            OnTurnTimeout::Notify => {}
            OnTurnTimeout::Cancel => {
                if let Err(e) = self.cancel_turn(name, "turn_timeout").await {
                    warn!(
                        session = name,
                        "the timed-out turn could not be cancelled: {e}"
                    );
                }
            }
            OnTurnTimeout::Delegate => {
                let detail = format!(
                    "the turn ran {} (turn_timeout)",
                    crate::duration::format_words(working)
                );
                self.consider_delegation(name, "timeout", &detail);
            }
        }
    }
}

/// The running turn's start (Unix ms, 0 when only the turn machine knows it) and age: from when
/// clibot typed its input, else from when the CLI said it began.
fn turn_age(e: &crate::core::Entry) -> Option<(i64, Duration)> {
    if e.rec.turn_started_ms > 0 {
        let ms = (crate::store::now_ms() - e.rec.turn_started_ms).max(0);
        return Some((e.rec.turn_started_ms, Duration::from_millis(ms as u64)));
    }
    e.rt.turn.started.map(|t| (0, t.elapsed()))
}
