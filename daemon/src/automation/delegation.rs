//! Delegation: when a session's CLI cannot go on (its usage limit, a rate limit, a lost login,
//! a stall) the work moves to another CLI, so that a task left running at night does not wait
//! for the morning.
//!
//! The next CLI starts as `NAME-CLI` in the same directory; the request that failed is typed
//! there with a short handoff (what the first CLI last said, `git status --short`), the chats
//! bound to the first session move to the new one and are told. The first session is left as it
//! is, for inspection. A chain never visits a CLI twice and is bounded by `max_attempts`.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::cli::CliSpec;
use crate::model::SessionRecord;

/// `[delegation]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DelegationConfig {
    /// Error kinds (from the CLIs' pattern packs and hooks: `usage_limit`, `rate_limit`,
    /// `auth`, `network`, ...) and `stalled` that hand the work on.
    pub on: Vec<String>,
    /// The CLIs to continue in, tried in order (one not yet used by the chain).
    pub to: Vec<String>,
    /// How many hops one piece of work may make.
    pub max_attempts: u32,
    /// Every new session delegates (without `--delegate`).
    pub default: bool,
}

impl Default for DelegationConfig {
    fn default() -> Self {
        DelegationConfig {
            on: vec!["usage_limit".into(), "rate_limit".into(), "auth".into()],
            to: Vec::new(),
            max_attempts: 2,
            default: false,
        }
    }
}

impl DelegationConfig {
    /// Names the key that is wrong.
    pub fn validate(&self, clis: &BTreeMap<String, CliSpec>) -> Result<(), String> {
        for c in &self.to {
            if !clis.contains_key(c) {
                return Err(format!(
                    "[delegation] to: {c:?} is not a configured CLI (known: {})",
                    clis.keys().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
        }
        if self.max_attempts == 0 {
            return Err("[delegation] max_attempts must be at least 1 (the default is 2)".into());
        }
        if self.on.iter().any(|k| k.trim().is_empty()) {
            return Err("[delegation] on: an error kind is empty".into());
        }
        Ok(())
    }
}

/// "claude hit its usage limit".
pub(crate) fn why(cli: &str, reason: &str, detail: &str) -> String {
    match reason {
        "usage_limit" => format!("{cli} hit its usage limit"),
        "rate_limit" => format!("{cli} hit a rate limit"),
        "auth" => format!("{cli} cannot log in"),
        "network" => format!("{cli} cannot reach its API"),
        "stalled" => format!("{cli} stalled"),
        "manual" if !detail.is_empty() => format!("{cli}'s work was handed on by {detail}"),
        "manual" => format!("{cli}'s work was handed on"),
        other => format!("{cli} failed ({other})"),
    }
}

pub(crate) const HANDOFF_REPLY_CHARS: usize = 1500;
pub(crate) const HANDOFF_STATUS_LINES: usize = 30;

/// `NAME-CLI`, or `NAME-CLI-2`, ... when taken; at most 64 characters.
pub(crate) fn free_name<T>(sessions: &BTreeMap<String, T>, name: &str, cli: &str) -> String {
    let cut = |s: String| s.chars().take(64).collect::<String>();
    let base = cut(format!("{name}-{cli}"));
    if !sessions.contains_key(&base) {
        return base;
    }
    (2..)
        .map(|n| {
            let suffix = format!("-{n}");
            format!(
                "{}{suffix}",
                cut(base.clone())
                    .chars()
                    .take(64 - suffix.len())
                    .collect::<String>()
            )
        })
        .find(|c| !sessions.contains_key(c))
        .unwrap_or(base)
}

/// The text typed into the new CLI: context first, then the request itself.
pub(crate) fn handoff_text(
    old: &SessionRecord,
    reason: &str,
    detail: &str,
    status: &Option<String>,
) -> String {
    let mut t = format!(
        "(Handoff: this continues work begun in {} (session {}), which stopped: {}",
        old.cli,
        old.name,
        why(&old.cli, reason, "")
    );
    if reason != "manual" && !detail.trim().is_empty() {
        t.push_str(&format!(" — {}", one_line(detail, 200)));
    }
    t.push('.');
    if let Some(r) = old.last_reply.as_deref().filter(|r| !r.trim().is_empty()) {
        let tail: String = {
            let chars: Vec<char> = r.trim().chars().collect();
            chars[chars.len().saturating_sub(HANDOFF_REPLY_CHARS)..]
                .iter()
                .collect()
        };
        t.push_str(&format!("\n{} last said:\n{tail}", old.cli));
    }
    match status {
        Some(s) if s.trim().is_empty() => t.push_str("\n`git status --short`: clean"),
        Some(s) => t.push_str(&format!("\n`git status --short`:\n{}", s.trim_end())),
        None => {}
    }
    t.push_str(")\n\n");
    if old.last_input.trim().is_empty() {
        t.push_str("Please continue the task.");
    } else {
        t.push_str(&old.last_input);
    }
    t
}

pub(crate) fn one_line(s: &str, max: usize) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(max)
        .collect()
}

/// `git status --short` in `dir` when it is a repository (at most a few dozen lines); `None`
/// otherwise or when git is slow or missing.
pub(crate) async fn git_status(dir: &std::path::Path) -> Option<String> {
    // The repository is the chat user's: git must run none of its code (fsmonitor, filters).
    let text = crate::automation::safe_git::status_short(dir).await?;
    let lines: Vec<&str> = text.lines().collect();
    let mut s = lines
        .iter()
        .take(HANDOFF_STATUS_LINES)
        .copied()
        .collect::<Vec<_>>()
        .join("\n");
    if lines.len() > HANDOFF_STATUS_LINES {
        s.push_str(&format!(
            "\n… and {} more",
            lines.len() - HANDOFF_STATUS_LINES
        ));
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handoff_carries_context_then_request() {
        let rec = SessionRecord {
            name: "api".into(),
            cli: "claude".into(),
            last_reply: Some("I edited src/a.rs".into()),
            last_input: "add tests for the parser".into(),
            ..Default::default()
        };
        let t = handoff_text(
            &rec,
            "usage_limit",
            "Claude usage limit reached",
            &Some(" M src/a.rs\n".into()),
        );
        assert!(t.starts_with("(Handoff: this continues work begun in claude (session api), which stopped: claude hit its usage limit — Claude usage limit reached."), "{t}");
        assert!(t.contains("claude last said:\nI edited src/a.rs"), "{t}");
        assert!(t.contains("`git status --short`:\n M src/a.rs)"), "{t}");
        assert!(t.ends_with("\n\nadd tests for the parser"), "{t}");
        let t = handoff_text(
            &SessionRecord {
                cli: "x".into(),
                ..Default::default()
            },
            "stalled",
            "",
            &None,
        );
        assert!(
            !t.contains("git status") && t.ends_with("Please continue the task."),
            "{t}"
        );
    }

    #[test]
    fn config_is_checked() {
        let clis = crate::config::Config::default().clis();
        let ok = DelegationConfig {
            to: vec!["codex".into()],
            ..Default::default()
        };
        assert_eq!(ok.validate(&clis), Ok(()));
        let bad = DelegationConfig {
            to: vec!["nope".into()],
            ..Default::default()
        };
        assert!(
            bad.validate(&clis)
                .expect_err("should fail")
                .contains("\"nope\" is not a configured CLI")
        );
        let zero = DelegationConfig {
            max_attempts: 0,
            ..Default::default()
        };
        assert!(
            zero.validate(&clis)
                .expect_err("should fail")
                .contains("max_attempts")
        );
    }
}
