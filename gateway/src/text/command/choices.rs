//! The fixed words some commands take (`job run|pause|resume|remove`, `usage day|week|month`):
//! one enum each, parsed case-insensitively by the parser and named back by `as_str`.

use serde::{Deserialize, Serialize};

/// How far back `usage` looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageSpan {
    Day,
    Week,
    Month,
}

impl UsageSpan {
    pub const ALL: [UsageSpan; 3] = [UsageSpan::Day, UsageSpan::Week, UsageSpan::Month];

    pub fn as_str(self) -> &'static str {
        match self {
            UsageSpan::Day => "day",
            UsageSpan::Week => "week",
            UsageSpan::Month => "month",
        }
    }

    /// Its length in milliseconds.
    pub fn ms(self) -> i64 {
        86_400_000
            * match self {
                UsageSpan::Day => 1,
                UsageSpan::Week => 7,
                UsageSpan::Month => 30,
            }
    }
}

/// What `job` does to a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobAction {
    Run,
    Pause,
    Resume,
    Remove,
}

impl JobAction {
    pub const ALL: [JobAction; 4] = [
        JobAction::Run,
        JobAction::Pause,
        JobAction::Resume,
        JobAction::Remove,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JobAction::Run => "run",
            JobAction::Pause => "pause",
            JobAction::Resume => "resume",
            JobAction::Remove => "remove",
        }
    }
}

/// What `worktree NAME WORD` does (no word: the card with its buttons).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorktreeWord {
    Diff,
    Merge,
    Pr,
    Keep,
}

impl WorktreeWord {
    pub const ALL: [WorktreeWord; 4] = [
        WorktreeWord::Diff,
        WorktreeWord::Merge,
        WorktreeWord::Pr,
        WorktreeWord::Keep,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            WorktreeWord::Diff => "diff",
            WorktreeWord::Merge => "merge",
            WorktreeWord::Pr => "pr",
            WorktreeWord::Keep => "keep",
        }
    }
}
