//! A session's goal at work: its check run after each turn (jailed as the session is, time
//! limited), and while it fails the session told what failed and sent back to work; the goal
//! ends when the check passes, at its limits, when a person is needed, or when turned off.
//! Each round and the end are events the chats read.

use crate::core::Daemon;
use crate::error::CoreError;
use crate::jobs::goals::{Goal, Next};
use crate::model::{Actor, GoalEnd};
use crate::session::job_gate::Ran;
use crate::store::events::EventKind;
use crate::store::now_ms;

/// The last lines of a failed check told to the session and the chats.
const TOLD_LINES: usize = 20;
/// At most this much of them.
const TOLD_BYTES: usize = 2000;

/// The last lines of what a check printed, capped.
fn tail(stdout: &str, stderr: &str) -> String {
    let all = format!("{stdout}\n{stderr}");
    let lines: Vec<&str> = all.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut t = lines[lines.len().saturating_sub(TOLD_LINES)..].join("\n");
    if t.len() > TOLD_BYTES {
        let mut from = t.len() - TOLD_BYTES;
        while !t.is_char_boundary(from) {
            from += 1;
        }
        t = format!("…{}", &t[from..]);
    }
    t
}

impl Daemon {
    /// Sets `session`'s goal for `actor` and checks it at once: a goal already reached ends
    /// there; one that is not sends the session to work.
    pub async fn set_goal(
        &self,
        actor: &Actor,
        session: &str,
        until: &str,
        max_turns: u32,
        max_time_ms: u64,
    ) -> Result<Goal, CoreError> {
        self.get(session)?;
        let goal = self
            .goals()
            .set(Goal {
                session: session.to_string(),
                until: until.to_string(),
                max_turns,
                max_time_ms,
                started_ms: now_ms(),
                owner: actor.key(),
                ..Default::default()
            })
            .map_err(CoreError::JobInvalid)?;
        let d = self.clone();
        let name = session.to_string();
        self.in_background(async move { d.check_goal(&name).await });
        Ok(goal)
    }

    /// Ends `session`'s goal, `why`; says so in the session's chats.
    pub(crate) fn end_goal(&self, session: &str, why: GoalEnd, detail: &str) -> Option<Goal> {
        let g = self.goals().end(session)?;
        self.goal_ended(&g, why, detail);
        Some(g)
    }

    fn goal_ended(&self, g: &Goal, reason: GoalEnd, detail: &str) {
        let id = self.sessions().id_of(&g.session).unwrap_or_default();
        self.event(
            &g.session,
            &id,
            EventKind::GoalEnded {
                until: g.until.clone(),
                reason,
                rounds: g.rounds,
                detail: detail.to_string(),
            },
        );
    }

    /// Runs `session`'s goal's check, and acts on what it says (see the module's notes).
    pub(crate) async fn check_goal(&self, session: &str) {
        let Some(goal) = self.goals().begin_check(session) else {
            return;
        };
        let rec = match self.get(session) {
            Ok(r) => r,
            Err(e) => {
                self.end_goal(session, GoalEnd::Ended, &e.to_string());
                return;
            }
        };
        let argv = vec!["sh".to_string(), "-c".to_string(), goal.until.clone()];
        // Jailed as the session is, whoever set the goal: what the check runs (a build, its
        // tests) is the session owner's code.
        let (passed, code, output) = match self.run_checked(&rec.owner, &rec, &argv).await {
            Ok(Ran::Ended {
                code,
                stdout,
                stderr,
            }) => (code == Some(0), code, tail(&stdout, &stderr)),
            Ok(Ran::NotRun(why)) => {
                self.end_goal(
                    session,
                    GoalEnd::Ended,
                    &format!("the check cannot be run: {why}"),
                );
                return;
            }
            Err(e) => {
                self.end_goal(
                    session,
                    GoalEnd::Ended,
                    &format!("the check cannot be run: {e}"),
                );
                return;
            }
        };
        let Some(next) = self.goals().checked(session, passed, now_ms()) else {
            // Turned off while the check ran.
            return;
        };
        let ended = Goal {
            rounds: goal.rounds,
            ..goal.clone()
        };
        match next {
            Next::End(reason) => {
                let detail = match reason {
                    GoalEnd::Reached => String::new(),
                    _ => format!("the check exited with status {}", code.unwrap_or(-1)),
                };
                self.goal_ended(&ended, reason, &detail);
            }
            Next::Round(round) => {
                let id = self.sessions().id_of(session).unwrap_or_default();
                let exit_code = code.unwrap_or(-1);
                self.event(
                    session,
                    &id,
                    EventKind::GoalRound {
                        until: goal.until.clone(),
                        round,
                        exit_code,
                        output: output.clone(),
                    },
                );
                let mut text = format!(
                    "The goal is not reached yet: `{}` exited with status {exit_code}.",
                    goal.until
                );
                if !output.is_empty() {
                    text.push_str(&format!(" Its last lines:\n{output}\n"));
                }
                text.push_str(" Keep working until that command succeeds.");
                let key = format!("goal:{session}:{}:{round}", goal.started_ms);
                if let Err(e) = self
                    .send_input_once(session, &text, true, &key, "goal")
                    .await
                {
                    self.end_goal(session, GoalEnd::Ended, &e.to_string());
                }
            }
        }
    }

    /// What an event means for its session's goal: a turn's end checks it; a prompt left to
    /// a person, a cancel by a person, or the session's end stops it.
    pub(crate) fn goal_follows(&self, session: &str, kind: &EventKind) {
        if self.goals().get(session).is_none() {
            return;
        }
        match kind {
            EventKind::TurnCompleted { .. } => {
                let d = self.clone();
                let name = session.to_string();
                self.in_background(async move { d.check_goal(&name).await });
            }
            EventKind::Waiting { prompt } if prompt.auto.is_empty() => {
                self.end_goal(session, GoalEnd::Person, "a prompt waits for a person");
            }
            EventKind::TurnCancelled { by, .. } => {
                self.end_goal(
                    session,
                    GoalEnd::Person,
                    &format!("the turn was cancelled by {by}"),
                );
            }
            EventKind::Exited { .. } | EventKind::Stopped { .. } => {
                self.end_goal(session, GoalEnd::Ended, "the session ended");
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_check_is_told_by_its_last_lines() {
        let out: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        let t = tail(&out, "error: 3 tests failed\n");
        assert!(
            t.starts_with("line 12") && t.ends_with("error: 3 tests failed"),
            "{t}"
        );
        let long = "x".repeat(5000);
        assert!(tail(&long, "").len() <= TOLD_BYTES + 4);
    }
}
