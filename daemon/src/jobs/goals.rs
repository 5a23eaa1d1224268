//! Goals: per session, a check that decides when its work is done. Kept in `goals.json` in the
//! state directory, so a goal outlives a daemon restart with its rounds counted.
//!
//! Why a deterministic check and not a model's opinion: "keep going until it is done" is only
//! safe unattended when "done" is a command's exit status a person chose.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::model::GoalEnd;
use crate::store::json_file::JsonFile;

/// Rounds a goal may take unless it says otherwise.
pub const DEFAULT_MAX_TURNS: u32 = 10;
/// Time a goal may take unless it says otherwise.
pub const DEFAULT_MAX_TIME_MS: u64 = 2 * 3600 * 1000;
/// The longest check command.
pub const MAX_UNTIL: usize = 4096;

/// A session's goal.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Goal {
    pub session: String,
    /// A shell command that exits 0 once the goal is reached.
    pub until: String,
    pub max_turns: u32,
    pub max_time_ms: u64,
    /// Rounds the session was sent back to work so far.
    pub rounds: u32,
    pub started_ms: i64,
    /// Who set it ("local" or PLATFORM:USER): its check runs with their rights.
    pub owner: String,
    /// A check is running (set while one runs, so two turn ends do not check twice).
    pub checking: bool,
}

/// What a check's result means for a goal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Ended, and why.
    End(GoalEnd),
    /// Send the session back to work: round number.
    Round(u32),
}

/// The goals and their file.
pub struct Goals {
    file: JsonFile,
    goals: Mutex<BTreeMap<String, Goal>>,
}

impl Goals {
    /// Reads `goals.json` in `state_dir`; one that cannot be parsed is set aside.
    pub fn open(state_dir: &Path) -> (Goals, Option<String>) {
        let (mut goals, file, warning): (BTreeMap<String, Goal>, _, _) = JsonFile::open(
            state_dir,
            "goals.json",
            "the goals",
            "sessions have no goals until they are set again",
        );
        // A check that ran when the daemon stopped is run again at the next turn.
        goals.values_mut().for_each(|g| g.checking = false);
        (
            Goals {
                file,
                goals: Mutex::new(goals),
            },
            warning,
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Goal>> {
        self.goals.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn save(&self, goals: &BTreeMap<String, Goal>) {
        self.file.save(goals);
    }

    pub fn get(&self, session: &str) -> Option<Goal> {
        self.lock().get(session).cloned()
    }

    /// Sets `session`'s goal (replacing one it had), its limits defaulted.
    pub fn set(&self, mut goal: Goal) -> Result<Goal, String> {
        if goal.until.trim().is_empty() {
            return Err("until: the check to run is empty".into());
        }
        if goal.until.len() > MAX_UNTIL {
            return Err(format!("until: at most {MAX_UNTIL} bytes"));
        }
        if goal.until.chars().any(|c| c.is_control() && c != '\t') {
            return Err("until: one line, without control characters".into());
        }
        if goal.max_turns == 0 {
            goal.max_turns = DEFAULT_MAX_TURNS;
        }
        if goal.max_time_ms == 0 {
            goal.max_time_ms = DEFAULT_MAX_TIME_MS;
        }
        goal.rounds = 0;
        goal.checking = false;
        let mut goals = self.lock();
        goals.insert(goal.session.clone(), goal.clone());
        self.save(&goals);
        Ok(goal)
    }

    /// Ends `session`'s goal: the goal it had.
    pub fn end(&self, session: &str) -> Option<Goal> {
        let mut goals = self.lock();
        let g = goals.remove(session)?;
        self.save(&goals);
        Some(g)
    }

    /// Starts a check of `session`'s goal unless one runs: the goal to check.
    pub fn begin_check(&self, session: &str) -> Option<Goal> {
        let mut goals = self.lock();
        let g = goals.get_mut(session).filter(|g| !g.checking)?;
        g.checking = true;
        Some(g.clone())
    }

    /// A check of `session`'s goal ended (`passed`) at `now_ms`: what comes next. A goal that
    /// goes on counts the round; one that ends is removed.
    pub fn checked(&self, session: &str, passed: bool, now_ms: i64) -> Option<Next> {
        let mut goals = self.lock();
        let g = goals.get_mut(session)?;
        g.checking = false;
        let next = if passed {
            Next::End(GoalEnd::Reached)
        } else if g.rounds >= g.max_turns {
            Next::End(GoalEnd::Turns)
        } else if (now_ms - g.started_ms).max(0) as u64 >= g.max_time_ms {
            Next::End(GoalEnd::Time)
        } else {
            g.rounds += 1;
            Next::Round(g.rounds)
        };
        if matches!(next, Next::End(_)) {
            goals.remove(session);
        }
        self.save(&goals);
        Some(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn goal(max_turns: u32) -> Goal {
        Goal {
            session: "s".into(),
            until: "test -f done".into(),
            max_turns,
            max_time_ms: 60_000,
            started_ms: 1_000,
            owner: "local".into(),
            ..Default::default()
        }
    }

    #[test]
    fn rounds_until_the_check_passes_or_the_limits() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (goals, w) = Goals::open(dir.path());
        assert_eq!(w, None);
        goals.set(goal(2)).expect("set");
        assert!(goals.begin_check("s").is_some());
        assert_eq!(goals.begin_check("s"), None, "one check at a time");
        assert_eq!(goals.checked("s", false, 2_000), Some(Next::Round(1)));
        goals.begin_check("s");
        assert_eq!(goals.checked("s", false, 3_000), Some(Next::Round(2)));
        // Kept across a restart, rounds and all.
        drop(goals);
        let (goals, _) = Goals::open(dir.path());
        assert_eq!(goals.get("s").map(|g| g.rounds), Some(2));
        goals.begin_check("s");
        assert_eq!(
            goals.checked("s", false, 4_000),
            Some(Next::End(GoalEnd::Turns))
        );
        assert_eq!(goals.get("s"), None);

        goals.set(goal(5)).expect("set");
        assert_eq!(
            goals.checked("s", false, 61_001),
            Some(Next::End(GoalEnd::Time))
        );
        goals.set(goal(5)).expect("set");
        assert_eq!(
            goals.checked("s", true, 2_000),
            Some(Next::End(GoalEnd::Reached))
        );
        assert_eq!(
            goals.set(Goal {
                until: " ".into(),
                ..goal(1)
            }),
            Err("until: the check to run is empty".into())
        );
    }
}
