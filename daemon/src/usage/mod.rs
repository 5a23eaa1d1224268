//! What work costs: the tokens of each turn, read from the CLI's own records, and the plan's
//! windows where the CLI records them.
//!
//! Why from the CLI's records and nothing else: they are what the CLI was billed for (its
//! API's usage figures, written down by the CLI), they need no credentials and no private
//! endpoint, and they are already on disk. Each CLI writes them differently — Claude Code a
//! line per content block, repeating a message's usage as it grows; Codex running totals —
//! so each has its reader here, fixed by golden files captured from the pinned versions.
//! OpenCode's are read from the API it serves (the messages of the turn), not from a file.
//!
//! What this folder owns: the figures (`TurnUsage`), the readers (`claude`, `codex`, `copilot`,
//! `gemini`, `opencode`, `qwen`), the ledger of counted turns (`ledger`: `usage.jsonl`, one
//! line per turn, read for the views), money as an estimate (`prices`) and the budgets that
//! act on the ledger (`budgets`).

pub mod budgets;
pub mod claude;
pub mod codex;
pub mod copilot;
pub mod gemini;
pub mod ledger;
pub mod limits;
pub mod opencode;
pub mod prices;
pub mod qwen;

use serde::{Deserialize, Serialize};

/// `[usage]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UsageConfig {
    /// A line under each final reply in the chats: "1.2k in · 340 out · 5h 42 %".
    pub footer: bool,
    /// When money is estimated: `"api"` (sessions using an API key), `"always"`, `"never"`.
    pub money: prices::Money,
    /// `[usage.prices."MODEL-PREFIX"] input = 3.0, output = 15.0` (dollars per million
    /// tokens; `cache_read`, `cache_write` optional): over the release's own table.
    pub prices: std::collections::BTreeMap<String, prices::Price>,
}

pub use crate::model::{PlanWindow, Tokens};

/// What a turn cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnUsage {
    pub tokens: Tokens,
    /// The model that answered (the last one, when several did).
    pub model: String,
    /// The API calls the turn made.
    pub calls: u32,
    /// The plan's windows after the turn, when the CLI records them.
    pub windows: Vec<PlanWindow>,
    /// The records hold the turn's end: a CLI may still be writing them when its hook says
    /// the turn ended, and a count read before is short.
    #[serde(skip)]
    pub complete: bool,
}

/// A count in a CLI's record (`0` when missing or not a count).
pub(crate) fn count(v: &serde_json::Value, k: &str) -> u64 {
    v.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0)
}

/// The JSON lines of a record file; lines that are not JSON (a torn last line) are skipped.
pub(crate) fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// A window's length in minutes, as people say it.
pub fn window_name(minutes: u64) -> String {
    match minutes {
        0 => "window".into(),
        m if m % 1440 == 0 => format!("{}d", m / 1440),
        m if m % 60 == 0 => format!("{}h", m / 60),
        m => format!("{m}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_named_as_people_say_them() {
        assert_eq!(window_name(300), "5h");
        assert_eq!(window_name(10080), "7d");
        assert_eq!(window_name(90), "90m");
        assert_eq!(window_name(0), "window");
    }
}
