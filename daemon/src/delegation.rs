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
use tracing::{info, warn};

use crate::adapter::CliSpec;
use crate::core::{Daemon, SpawnRequest};
use crate::error::CoreError;
use crate::events::EventKind;
use crate::locking::lock;
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
fn why(cli: &str, reason: &str, detail: &str) -> String {
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

const HANDOFF_REPLY_CHARS: usize = 1500;
const HANDOFF_STATUS_LINES: usize = 30;

impl Daemon {
    /// An event that may hand a session's work on: an error of kind `kind` (or `stalled`).
    /// Acts only for sessions that delegate and have not yet handed on; runs in its own task.
    pub(crate) fn consider_delegation(&self, name: &str, kind: &str, detail: &str) {
        let live = self.live();
        let cfg = &live.config.delegation;
        if !cfg.on.iter().any(|k| k == kind) {
            return;
        }
        let wanted = lock(&self.inner.sessions)
            .get(name)
            .is_some_and(|e| e.rec.delegate && e.rec.delegated_to.is_empty() && !e.stopping);
        if !wanted {
            return;
        }
        let d = self.clone();
        let (name, kind, detail) = (name.to_string(), kind.to_string(), detail.to_string());
        tokio::spawn(async move {
            if let Err(e) = d.delegate(&name, None, &kind, &detail).await {
                warn!(session = %name, "no delegation: {e}");
                d.notice(&name, "delegation", &format!("{}; the work stays here", e));
            }
        });
    }

    /// Hands session `name`'s work to CLI `to` (or the next one of `[delegation] to`): starts
    /// it, types the last request with a handoff, moves the chats. `reason` is the error kind
    /// or "manual" (then `detail` says who). Returns the new session.
    pub async fn delegate(
        &self,
        name: &str,
        to: Option<&str>,
        reason: &str,
        detail: &str,
    ) -> Result<SessionRecord, CoreError> {
        let cfg = self.live().config.delegation.clone();
        let (old, target, new_name, chain) = {
            let mut sessions = lock(&self.inner.sessions);
            let e = sessions
                .get(name)
                .ok_or_else(|| CoreError::NoSuchSession(name.to_string()))?;
            if !e.rec.delegated_to.is_empty() {
                return Err(CoreError::Delegation(format!(
                    "session {name} already handed its work to {}",
                    e.rec.delegated_to
                )));
            }
            let mut chain = e.rec.delegated_from.clone();
            chain.push(e.rec.cli.clone());
            let hops = e.rec.delegated_from.len() as u32;
            let target = match to {
                Some(t) => {
                    self.cli(t)?;
                    if t == e.rec.cli {
                        return Err(CoreError::Delegation(format!(
                            "session {name} already runs {t}; name another CLI"
                        )));
                    }
                    t.to_string()
                }
                None => {
                    if hops >= cfg.max_attempts {
                        return Err(CoreError::Delegation(format!(
                            "this work was already handed on {hops} time(s), the most [delegation] max_attempts allows"
                        )));
                    }
                    cfg.to
                        .iter()
                        .find(|c| !chain.contains(c) && self.cli(c).is_ok())
                        .cloned()
                        .ok_or_else(|| {
                            CoreError::Delegation(format!(
                                "no CLI left to hand the work to: {} already tried, [delegation] to = {:?}",
                                chain.join(", "),
                                cfg.to
                            ))
                        })?
                }
            };
            let new_name = free_name(&sessions, name, &target);
            let old = e.rec.clone();
            // Reserved now, so that a second error cannot start a second delegation.
            if let Some(e) = sessions.get_mut(name) {
                e.rec.delegated_to = new_name.clone();
            }
            (old, target, new_name, chain)
        };
        let release = |d: &Daemon| {
            if let Some(e) = lock(&d.inner.sessions).get_mut(name) {
                e.rec.delegated_to.clear();
            }
        };
        let spawned = self
            .spawn(SpawnRequest {
                name: new_name.clone(),
                cli: target.clone(),
                dir: old.dir.to_string_lossy().into_owned(),
                owner: old.owner.clone(),
                delegate: old.delegate,
                delegated_from: chain.clone(),
                ..Default::default()
            })
            .await;
        let new = match spawned {
            Ok(r) => r,
            Err(e) => {
                release(self);
                return Err(CoreError::Delegation(format!(
                    "could not start {target} to continue: {e}"
                )));
            }
        };
        if let Some(e) = lock(&self.inner.sessions).get_mut(&new_name) {
            e.rec.shared_with = old.shared_with.clone();
        }
        let line = why(&old.cli, reason, detail);
        info!(session = %name, to = %new_name, reason, "handing the work on");
        let moved = self.inner.chats.move_session(name, &new_name);
        self.event(
            name,
            &old.id,
            EventKind::Delegated {
                to_session: new_name.clone(),
                to_cli: target.clone(),
                reason: reason.to_string(),
                detail: detail.to_string(),
                attempt: chain.len() as u32,
            },
        );
        self.notice(
            &new_name,
            "delegation",
            &format!("{line}; continuing in {new_name} ({target})"),
        );
        let handoff = handoff_text(&old, reason, detail, &git_status(&old.dir).await);
        if let Err(e) = self.send_input(&new_name, &handoff, true).await {
            warn!(session = %new_name, "the handoff could not be typed: {e}");
            self.notice(
                &new_name,
                "delegation",
                &format!("the handoff could not be typed ({e}); send the request again"),
            );
        }
        self.inner.audit.record(crate::audit::Audit::now(
            "clibot",
            "clibot",
            "",
            name,
            "delegate",
            "accepted",
            &format!(
                "to {new_name} ({target}): {reason}; {} chat(s) moved",
                moved.len()
            ),
        ));
        self.persist();
        Ok(lock(&self.inner.sessions)
            .get(&new_name)
            .map(|e| e.rec.clone())
            .unwrap_or(new))
    }

    /// A line for the session's chats.
    pub(crate) fn notice(&self, name: &str, kind: &str, text: &str) {
        let id = lock(&self.inner.sessions)
            .get(name)
            .map(|e| e.rec.id.clone())
            .unwrap_or_default();
        self.event(
            name,
            &id,
            EventKind::Notice {
                text: text.to_string(),
                kind: kind.to_string(),
            },
        );
    }
}

/// `NAME-CLI`, or `NAME-CLI-2`, ... when taken; at most 64 characters.
fn free_name(sessions: &BTreeMap<String, crate::core::Entry>, name: &str, cli: &str) -> String {
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
fn handoff_text(
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

fn one_line(s: &str, max: usize) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(max)
        .collect()
}

/// `git status --short` in `dir` when it is a repository (at most a few dozen lines); `None`
/// otherwise or when git is slow or missing.
async fn git_status(dir: &std::path::Path) -> Option<String> {
    // The repository is the chat user's: git must run none of its code (fsmonitor, filters).
    let text = crate::safe_git::status_short(dir).await?;
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
