//! The audit log: every accepted or refused action, append-only (`audit.jsonl` in the state
//! directory): who, from which platform and chat, on which session, what, and the outcome.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use serde::Serialize;

use crate::store::now_ms;

/// One line of the audit log.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Record<'a> {
    pub time_ms: i64,
    /// "local" (this machine's user through the socket) or the chat user's id.
    pub actor: &'a str,
    /// "local", "telegram", "discord", ...
    pub platform: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub chat: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub session: &'a str,
    pub action: &'a str,
    /// "accepted" or "refused".
    pub outcome: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub detail: &'a str,
}

/// The log file, opened for appending.
pub struct Audit {
    file: Mutex<Option<File>>,
}

impl Audit {
    pub fn open(state_dir: &Path) -> (Audit, Option<String>) {
        let path = state_dir.join("audit.jsonl");
        use std::os::unix::fs::OpenOptionsExt;
        match OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(f) => (
                Audit {
                    file: Mutex::new(Some(f)),
                },
                None,
            ),
            Err(e) => (
                Audit {
                    file: Mutex::new(None),
                },
                Some(format!(
                    "cannot open the audit log {}: {e}; actions are not audited",
                    path.display()
                )),
            ),
        }
    }

    /// Appends one record (one write, so lines never interleave).
    pub fn record(&self, r: Record<'_>) {
        let Ok(mut line) = serde_json::to_vec(&r) else {
            return;
        };
        line.push(b'\n');
        let mut guard = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = guard.as_mut()
            && let Err(e) = f.write_all(&line)
        {
            tracing::error!("cannot write the audit log: {e}");
        }
    }

    /// A record stamped now.
    pub fn now<'a>(
        actor: &'a str,
        platform: &'a str,
        chat: &'a str,
        session: &'a str,
        action: &'a str,
        outcome: &'a str,
        detail: &'a str,
    ) -> Record<'a> {
        Record {
            time_ms: now_ms(),
            actor,
            platform,
            chat,
            session,
            action,
            outcome,
            detail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_json_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, w) = Audit::open(dir.path());
        assert!(w.is_none());
        a.record(Audit::now(
            "local",
            "local",
            "",
            "api",
            "spawn",
            "accepted",
            "cli=claude",
        ));
        a.record(Audit::now(
            "7",
            "telegram",
            "c1",
            "api",
            "send",
            "refused",
            "not paired",
        ));
        drop(a);
        let text = std::fs::read_to_string(dir.path().join("audit.jsonl")).expect("read");
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("json"))
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1]["outcome"], "refused");
        assert_eq!(lines[0]["action"], "spawn");
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(dir.path().join("audit.jsonl"))
                .expect("meta")
                .permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
    }
}
