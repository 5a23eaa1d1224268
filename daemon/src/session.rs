//! A managed session as the daemon records it.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Where a session is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Starting,
    Idle,
    Working,
    Waiting,
    Exited,
    Error,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Starting => "starting",
            State::Idle => "idle",
            State::Working => "working",
            State::Waiting => "waiting",
            State::Exited => "exited",
            State::Error => "error",
        }
    }

    /// The process is gone: no input can reach it.
    pub fn is_exited(self) -> bool {
        self == State::Exited
    }
}

/// The persisted record of one session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    pub id: String,
    pub name: String,
    pub cli: String,
    pub dir: PathBuf,
    pub state: State,
    pub created_at_ms: i64,
    #[serde(default)]
    pub last_activity_ms: i64,
    /// The tmux session's name and id (`$3`); the daemon targets the id.
    pub tmux_session: String,
    pub tmux_id: String,
    #[serde(default)]
    pub pid: u32,
    #[serde(default)]
    pub exit_status: Option<i32>,
    #[serde(default)]
    pub adopted: bool,
    #[serde(default)]
    pub args: Vec<String>,
}
