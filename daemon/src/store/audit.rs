//! The audit log: every accepted or refused action, append-only (`audit.jsonl` in the state
//! directory): who, from which platform and chat, on which session, what, and the outcome.
//!
//! A stranger writing again and again must not fill the disk: a refusal repeated within a
//! minute (same user, chat, session, action and reason) is not written again; the repeats are
//! counted and written as one line (`repeated`: how many, `since_ms`: the first of them) once
//! that minute is over and the log is next written to, or when the daemon stops. And the file
//! rotates by size: `audit.jsonl` becomes `audit.jsonl.1`, and so on, the oldest dropped.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use serde::Serialize;

use crate::store::now_ms;
use crate::store::rotating::RotatingFile;

/// Repeated refusals within this long are folded into one line.
pub const FOLD_MS: i64 = 60 * 1000;
/// Refusals being folded at most; beyond this every count is written out at once.
const FOLD_CAP: usize = 1024;

/// How big the audit log may grow: 10 MiB × 5 files unless configured.
pub use crate::store::rotating::Limits;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: 10 * 1024 * 1024,
            files: 5,
        }
    }
}

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
    /// "session:NAME" when the actor acted from a process inside that session.
    #[serde(skip_serializing_if = "str::is_empty")]
    pub via: &'a str,
    /// A folded line: this many identical refusals were not written one by one; the first of
    /// them at `since_ms`, the last at `time_ms`.
    #[serde(skip_serializing_if = "is_zero")]
    pub repeated: u64,
    #[serde(skip_serializing_if = "is_zero_i64")]
    pub since_ms: i64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_i64(n: &i64) -> bool {
    *n == 0
}

/// What makes two refusals the same: actor, platform, chat, session, action, detail, via.
type FoldKey = [String; 7];

/// Refusals folded since the window's first one (which was written).
struct Fold {
    start_ms: i64,
    count: u64,
    first_ms: i64,
    last_ms: i64,
}

struct State {
    file: Option<RotatingFile>,
    folds: HashMap<FoldKey, Fold>,
    next_sweep_ms: i64,
}

/// The log file, opened for appending.
pub struct Audit {
    state: Mutex<State>,
}

impl State {
    /// Writes one line (one write, so lines never interleave), rotating first when it would
    /// make the file larger than allowed.
    fn write(&mut self, r: &Record<'_>) {
        let Ok(mut line) = serde_json::to_vec(r) else {
            return;
        };
        line.push(b'\n');
        if let Some(f) = self.file.as_mut()
            && let Err(e) = f.write(&line)
        {
            tracing::error!(path = %f.path().display(), "cannot write the audit log: {e}; check the state directory's permissions and free space");
        }
    }

    /// Writes the counts of the folds whose minute is over (all of them with `all`).
    fn flush(&mut self, now: i64, all: bool) {
        let done: Vec<FoldKey> = self
            .folds
            .iter()
            .filter(|(_, f)| all || now - f.start_ms >= FOLD_MS || now < f.start_ms)
            .map(|(k, _)| k.clone())
            .collect();
        for k in done {
            self.flush_one(&k);
        }
    }

    /// Ends one fold, writing its count when there were repeats.
    fn flush_one(&mut self, k: &FoldKey) {
        if let Some(f) = self.folds.remove(k)
            && f.count > 0
        {
            let [actor, platform, chat, session, action, detail, via] = k;
            self.write(&Record {
                time_ms: f.last_ms,
                actor,
                platform,
                chat,
                session,
                action,
                outcome: "refused",
                detail,
                via,
                repeated: f.count,
                since_ms: f.first_ms,
            });
        }
    }
}

impl Audit {
    /// Opens `audit.jsonl` in the state directory for appending; on failure actions are not
    /// audited, and the returned warning says so.
    pub fn open(state_dir: &Path, limits: Limits) -> (Audit, Option<String>) {
        let path = state_dir.join("audit.jsonl");
        let (file, warning) = match RotatingFile::open(path.clone(), limits) {
            Ok(f) => (Some(f), None),
            Err(e) => (
                None,
                Some(format!(
                    "cannot open the audit log {}: {e}; actions are not audited: check the state directory's permissions",
                    path.display()
                )),
            ),
        };
        (
            Audit {
                state: Mutex::new(State {
                    file,
                    folds: HashMap::new(),
                    next_sweep_ms: 0,
                }),
            },
            warning,
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends one record; a refusal repeated within [`FOLD_MS`] is counted instead, and
    /// written as one folded line when its minute is over.
    pub fn record(&self, r: Record<'_>) {
        let now = r.time_ms;
        let mut st = self.lock();
        if now >= st.next_sweep_ms || now < st.next_sweep_ms - FOLD_MS {
            st.flush(now, false);
            st.next_sweep_ms = now + 1000;
        }
        if r.outcome == "refused" && r.repeated == 0 {
            let key: FoldKey = [
                r.actor, r.platform, r.chat, r.session, r.action, r.detail, r.via,
            ]
            .map(str::to_string);
            let open = st
                .folds
                .get(&key)
                .is_some_and(|f| now - f.start_ms < FOLD_MS && now >= f.start_ms);
            if open {
                if let Some(f) = st.folds.get_mut(&key) {
                    f.count += 1;
                    if f.count == 1 {
                        f.first_ms = now;
                    }
                    f.last_ms = now;
                }
                return;
            }
            // The previous minute of this refusal, if any, is written out first.
            st.flush_one(&key);
            if st.folds.len() >= FOLD_CAP {
                st.flush(now, true);
            }
            st.folds.insert(
                key,
                Fold {
                    start_ms: now,
                    count: 0,
                    first_ms: 0,
                    last_ms: 0,
                },
            );
        }
        st.write(&r);
    }

    /// Writes every pending count now (the daemon stops).
    pub fn flush(&self) {
        self.lock().flush(now_ms(), true);
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
            via: "",
            repeated: 0,
            since_ms: 0,
        }
    }
}

impl Drop for Audit {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_json_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, w) = Audit::open(dir.path(), Limits::default());
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

    fn lines(path: &Path) -> Vec<serde_json::Value> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("json"))
            .collect()
    }

    fn refusal(t: i64, user: &str) -> Record<'_> {
        Record {
            time_ms: t,
            ..Audit::now(
                user,
                "telegram",
                "c",
                "",
                "access",
                "refused",
                "not allowed",
            )
        }
    }

    #[test]
    fn repeated_refusals_are_folded_into_one_line_a_minute() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.jsonl");
        let (a, _) = Audit::open(dir.path(), Limits::default());
        let t0 = 1_000_000;
        a.record(refusal(t0, "7"));
        for i in 1..=100 {
            a.record(refusal(t0 + i * 100, "7"));
        }
        // Another user, and an accepted action, are not folded with them.
        a.record(refusal(t0 + 20_000, "8"));
        a.record(Record {
            time_ms: t0 + 20_001,
            ..Audit::now("7", "telegram", "c", "", "access", "accepted", "")
        });
        assert_eq!(lines(&path).len(), 3, "one line per refusing user so far");
        // The next minute: the count of the last one comes first, then the new refusal.
        a.record(refusal(t0 + FOLD_MS + 5, "7"));
        let l = lines(&path);
        assert_eq!(l.len(), 5, "{l:?}");
        assert_eq!(l[3]["repeated"], 100);
        assert_eq!(l[3]["since_ms"], t0 + 100);
        assert_eq!(l[3]["time_ms"], t0 + 10_000);
        assert!(l[4].get("repeated").is_none());
        // Stopping writes what is still being counted.
        a.record(refusal(t0 + FOLD_MS + 6, "7"));
        drop(a);
        let l = lines(&path);
        assert_eq!(l.len(), 6, "{l:?}");
        assert_eq!(
            (l[5]["repeated"].as_u64(), l[5]["actor"].as_str()),
            (Some(1), Some("7"))
        );
    }

    #[test]
    fn the_log_rotates_by_size_and_keeps_so_many_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.jsonl");
        let limits = Limits {
            max_bytes: 1000,
            files: 3,
        };
        let (a, _) = Audit::open(dir.path(), limits);
        for i in 0..100 {
            a.record(Audit::now(
                &format!("u{i}"),
                "local",
                "",
                "s",
                "send",
                "accepted",
                "",
            ));
        }
        drop(a);
        let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let rotated = |i: u32| dir.path().join(format!("audit.jsonl.{i}"));
        assert!(size(&path) > 0 && size(&path) <= 1000, "{}", size(&path));
        assert!(size(&rotated(1)) > 0 && size(&rotated(1)) <= 1000);
        assert!(size(&rotated(2)) > 0 && size(&rotated(2)) <= 1000);
        assert!(!rotated(3).exists(), "three files in all");
        let last = lines(&path).pop().expect("a line");
        assert_eq!(last["actor"], "u99", "the newest lines are in audit.jsonl");
        // Reopened, it goes on from the size the file has.
        let (a, _) = Audit::open(
            dir.path(),
            Limits {
                max_bytes: 1000,
                files: 1,
            },
        );
        for i in 0..30 {
            a.record(Audit::now(
                &format!("v{i}"),
                "local",
                "",
                "s",
                "send",
                "accepted",
                "",
            ));
        }
        drop(a);
        assert!(size(&path) <= 1000);
        assert_eq!(lines(&path).pop().expect("a line")["actor"], "v29");
    }
}
