//! Which conversation a running CLI holds (each adapter's
//! [`super::Adapter::running_conversation`]), guessed from the CLI's own records: an id on its
//! command line (`--resume ID`, `--session-id ID`) is certain; otherwise the one record of its
//! directory written since the process started (Claude Code's project transcripts, Codex's
//! rollout files, Gemini CLI's chats). Anything else — none, or several — is `None`: a wrong guess would resume
//! the wrong conversation.

use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// A process of a CLI, found running: what an adapter reads to tell its conversation.
pub struct Running<'a> {
    pub pid: u32,
    /// Its working directory.
    pub dir: &'a Path,
    /// Records written since then may be its: its start, less a moment (records may be written
    /// a moment before the process's start time is rounded to).
    pub since_ms: i64,
    argv: Vec<String>,
}

impl<'a> Running<'a> {
    /// Process `pid`, started at `started_ms`, working in `dir`.
    pub fn of(pid: u32, dir: &'a Path, started_ms: i64) -> Running<'a> {
        Running {
            pid,
            dir,
            since_ms: started_ms - 2_000,
            argv: argv_of(pid),
        }
    }

    /// The value after one of `flags` on its command line.
    pub fn flag(&self, flags: &[&str]) -> Option<String> {
        flag_value(&self.argv, flags)
    }

    /// The value of `--flag=VALUE` on its command line.
    pub fn flag_eq(&self, flags: &[&str]) -> Option<String> {
        flag_eq_value(&self.argv, flags)
    }

    /// Its environment variable `key`, when set and not empty.
    pub fn env(&self, key: &str) -> Option<String> {
        env_of(self.pid, key)
    }

    /// Its home directory.
    pub fn home(&self) -> Option<PathBuf> {
        self.env("HOME").map(PathBuf::from)
    }

    /// Where the CLI keeps its state: the directory its variable `var` names (`CODEX_HOME`),
    /// else `below_home` in its home (`.codex`).
    pub fn state_dir(&self, var: &str, below_home: &str) -> Option<PathBuf> {
        self.env(var)
            .map(PathBuf::from)
            .or_else(|| self.home().map(|h| h.join(below_home)))
    }
}

/// The process's environment variable `key`.
fn env_of(pid: u32, key: &str) -> Option<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    env.split(|b| *b == 0).find_map(|kv| {
        let kv = String::from_utf8_lossy(kv);
        kv.strip_prefix(&format!("{key}="))
            .map(str::to_string)
            .filter(|v| !v.is_empty())
    })
}

fn argv_of(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// The value after one of `flags` on the command line.
fn flag_value(argv: &[String], flags: &[&str]) -> Option<String> {
    argv.windows(2)
        .find(|w| flags.contains(&w[0].as_str()))
        .map(|w| w[1].clone())
        .filter(|v| !v.starts_with('-') && !v.is_empty())
}

fn modified_ms(p: &Path) -> i64 {
    std::fs::metadata(p)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as i64)
}

/// The one file among `files` written since `since_ms`, if exactly one was.
pub(crate) fn only_recent(files: Vec<PathBuf>, since_ms: i64) -> Option<PathBuf> {
    let mut recent = files.into_iter().filter(|f| modified_ms(f) >= since_ms);
    let first = recent.next()?;
    recent.next().is_none().then_some(first)
}

/// The value of `--flag=VALUE` on the command line.
fn flag_eq_value(argv: &[String], flags: &[&str]) -> Option<String> {
    argv.iter().find_map(|a| {
        flags.iter().find_map(|f| {
            a.strip_prefix(f)
                .and_then(|rest| rest.strip_prefix('='))
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_one_recent_record_is_a_guess() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = dir.path().join("a.jsonl");
        std::fs::write(&a, "{}").expect("write");
        assert_eq!(only_recent(vec![a.clone()], 0), Some(a.clone()));
        let b = dir.path().join("b.jsonl");
        std::fs::write(&b, "{}").expect("write");
        assert_eq!(only_recent(vec![a.clone(), b], 0), None, "ambiguous");
        assert_eq!(only_recent(vec![a], i64::MAX), None, "too old");
    }

    #[test]
    fn an_id_on_the_command_line_is_certain() {
        let argv: Vec<String> = ["claude", "--resume", "abc-123"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            flag_value(&argv, &["--resume", "-r"]),
            Some("abc-123".into())
        );
        assert_eq!(flag_value(&argv[..1], &["--resume"]), None);
    }

    #[test]
    fn a_flag_may_carry_its_value_after_an_equals_sign() {
        assert_eq!(
            flag_eq_value(&["copilot".into(), "--resume=abc".into()], &["--resume"]).as_deref(),
            Some("abc")
        );
    }
}
