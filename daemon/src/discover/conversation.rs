//! Which conversation a running CLI holds, guessed from the CLI's own records: an id on its
//! command line (`--resume ID`, `--session-id ID`) is certain; otherwise the one record of its
//! directory written since the process started (Claude Code's project transcripts, Codex's
//! rollout files, Gemini CLI's chats). Anything else — none, or several — is `None`: a wrong guess would resume
//! the wrong conversation.

use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

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
fn only_recent(files: Vec<PathBuf>, since_ms: i64) -> Option<PathBuf> {
    let mut recent = files.into_iter().filter(|f| modified_ms(f) >= since_ms);
    let first = recent.next()?;
    recent.next().is_none().then_some(first)
}

/// Claude Code keeps a project's transcripts in `~/.claude/projects/<dir, every character
/// that is not a letter or digit made "-">/<session id>.jsonl`.
pub fn claude_project_dir(config: &Path, dir: &Path) -> PathBuf {
    let name: String = dir
        .display()
        .to_string()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    config.join("projects").join(name)
}

/// The best guess at the conversation of CLI `cli` running as `pid` in `dir`.
pub fn guess(cli: &str, pid: u32, dir: &Path, started_ms: i64) -> Option<String> {
    let argv = argv_of(pid);
    let home = env_of(pid, "HOME").map(PathBuf::from);
    // Records may be written a moment before the process's start time is rounded to.
    let since = started_ms - 2_000;
    match cli {
        "claude" => {
            if let Some(id) = flag_value(&argv, &["--resume", "-r", "--session-id"]) {
                return Some(id);
            }
            let config = env_of(pid, "CLAUDE_CONFIG_DIR")
                .map(PathBuf::from)
                .or_else(|| home.map(|h| h.join(".claude")))?;
            let files = std::fs::read_dir(claude_project_dir(&config, dir))
                .ok()?
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
                .collect();
            let f = only_recent(files, since)?;
            Some(f.file_stem()?.to_string_lossy().into_owned())
        }
        "codex" => {
            let root = env_of(pid, "CODEX_HOME")
                .map(PathBuf::from)
                .or_else(|| home.map(|h| h.join(".codex")))?
                .join("sessions");
            let wanted = dir.display().to_string();
            let mut files = Vec::new();
            collect_rollouts(&root, 0, &mut files);
            // Only the rollouts of this directory (their first line records it).
            files.retain(|f| {
                crate::confine::beneath::read_record_head(f, 1 << 20)
                    .ok()
                    .and_then(|t| {
                        t.lines()
                            .next()
                            .map(|l| l.contains(&format!("\"{wanted}\"")))
                    })
                    .unwrap_or(false)
            });
            let f = only_recent(files, since)?;
            let stem = f.file_stem()?.to_string_lossy().into_owned();
            // rollout-<timestamp>-<uuid>: the uuid is the last 36 characters.
            (stem.len() >= 36).then(|| stem[stem.len() - 36..].to_string())
        }
        "gemini" => {
            if let Some(id) = flag_value(&argv, &["--resume", "-r"]).filter(|v| v.len() == 36) {
                return Some(id);
            }
            let base = env_of(pid, "GEMINI_CLI_HOME")
                .map(PathBuf::from)
                .or(home)?
                .join(".gemini");
            gemini_conversation(&base, dir, since)
        }
        "copilot" => {
            if let Some(id) = flag_value(&argv, &["--resume", "--session-id"])
                .or_else(|| flag_eq_value(&argv, &["--resume", "--session-id"]))
            {
                return Some(id);
            }
            let base = env_of(pid, "COPILOT_HOME")
                .map(PathBuf::from)
                .or_else(|| home.map(|h| h.join(".copilot")))?;
            copilot_conversation(&base.join("session-state"), pid)
        }
        "qwen" => {
            if let Some(id) = flag_value(&argv, &["--resume", "-r", "--session-id"]) {
                return Some(id);
            }
            let base = env_of(pid, "QWEN_HOME")
                .map(PathBuf::from)
                .or_else(|| home.map(|h| h.join(".qwen")))?;
            qwen_conversation(&base, dir, pid)
        }
        _ => None,
    }
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

/// Copilot CLI marks the conversation a process holds open with `inuse.<pid>.lock` in its
/// `session-state/<id>/` (the pid of the native program, which the npm launcher starts as its
/// child): certain, not a guess.
pub fn copilot_conversation(state: &Path, pid: u32) -> Option<String> {
    // The process and its descendants (`tree` lists both).
    let mut pids = crate::procs::tree(pid);
    if !pids.contains(&pid) {
        pids.push(pid);
    }
    std::fs::read_dir(state).ok()?.flatten().find_map(|e| {
        let holds = pids
            .iter()
            .any(|p| e.path().join(format!("inuse.{p}.lock")).exists());
        holds.then(|| e.file_name().to_string_lossy().into_owned())
    })
}

/// Qwen Code writes `<id>.runtime.json` (with the process's `pid`: the one it relaunches itself
/// as, below the one started) beside each conversation ([`crate::cli::qwen_chats`]): certain,
/// not a guess.
pub fn qwen_conversation(base: &Path, dir: &Path, pid: u32) -> Option<String> {
    let mut pids = crate::procs::tree(pid);
    if !pids.contains(&pid) {
        pids.push(pid);
    }
    std::fs::read_dir(crate::cli::qwen_chats(base, dir))
        .ok()?
        .flatten()
        .find_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let id = name.strip_suffix(".runtime.json")?;
            let v: serde_json::Value = serde_json::from_str(
                &crate::confine::beneath::read_record(&e.path(), 1 << 20).ok()?,
            )
            .ok()?;
            let held = v["pid"]
                .as_u64()
                .is_some_and(|p| pids.iter().any(|&x| u64::from(x) == p));
            held.then(|| id.to_string())
        })
}

/// Gemini CLI keeps a project's chats in `~/.gemini/tmp/<short name>/chats/session-*.jsonl`,
/// the short name from `~/.gemini/projects.json`; a chat's first line holds its `sessionId`
/// (what `gemini --resume` takes).
pub fn gemini_conversation(base: &Path, dir: &Path, since_ms: i64) -> Option<String> {
    let projects: serde_json::Value = serde_json::from_str(
        &crate::confine::beneath::read_record(&base.join("projects.json"), 4 << 20).ok()?,
    )
    .ok()?;
    let short = projects["projects"][dir.display().to_string()].as_str()?;
    if short.is_empty() || short.contains('/') || short.contains("..") {
        return None;
    }
    let chats = base.join("tmp").join(short).join("chats");
    let files = std::fs::read_dir(chats)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("session-"))
        })
        .collect();
    let f = only_recent(files, since_ms)?;
    let first =
        crate::confine::beneath::read_record_head(&f, crate::confine::beneath::RECORD_MAX).ok()?;
    let meta: serde_json::Value = serde_json::from_str(first.lines().next()?).ok()?;
    meta["sessionId"].as_str().map(str::to_string)
}

/// Codex's rollout files under `dir` (`YYYY/MM/DD/rollout-*.jsonl`).
fn collect_rollouts(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth > 3 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_rollouts(&p, depth + 1, out);
        } else if p
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("rollout-"))
        {
            out.push(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_names_a_project_after_its_directory() {
        assert_eq!(
            claude_project_dir(Path::new("/h/.claude"), Path::new("/home/dev/my.proj")),
            Path::new("/h/.claude/projects/-home-dev-my-proj")
        );
    }

    #[test]
    fn copilot_and_qwen_say_which_conversation_a_process_holds() {
        let d = tempfile::tempdir().expect("tempdir");
        let state = d.path().join("session-state");
        for (id, pid) in [("aaaa", 41), ("bbbb", 42)] {
            std::fs::create_dir_all(state.join(id)).expect("mkdir");
            std::fs::write(state.join(id).join(format!("inuse.{pid}.lock")), "").expect("write");
        }
        assert_eq!(copilot_conversation(&state, 42).as_deref(), Some("bbbb"));
        assert_eq!(copilot_conversation(&state, 43), None);
        let chats = d.path().join("q/projects/-home-dev-my-proj/chats");
        std::fs::create_dir_all(&chats).expect("mkdir");
        std::fs::write(
            chats.join("1111.runtime.json"),
            r#"{"pid": 7, "session_id": "1111"}"#,
        )
        .expect("write");
        std::fs::write(chats.join("2222.runtime.json"), r#"{"pid": 8}"#).expect("write");
        let base = d.path().join("q");
        assert_eq!(
            qwen_conversation(&base, Path::new("/home/dev/my.proj"), 8).as_deref(),
            Some("2222")
        );
        assert_eq!(
            qwen_conversation(&base, Path::new("/home/dev/my.proj"), 9),
            None
        );
        assert_eq!(
            flag_eq_value(&["copilot".into(), "--resume=abc".into()], &["--resume"]).as_deref(),
            Some("abc")
        );
    }

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
    fn gemini_names_its_chats_by_the_project_short_name() {
        let base = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            base.path().join("projects.json"),
            r#"{"projects": {"/home/dev/proj": "proj"}}"#,
        )
        .expect("projects");
        let chats = base.path().join("tmp/proj/chats");
        std::fs::create_dir_all(&chats).expect("mkdir");
        std::fs::write(
            chats.join("session-2026-11-27T02-40-4d66b8e3.jsonl"),
            "{\"sessionId\":\"4d66b8e3-8157-42e8-9f75-66415186022e\",\"kind\":\"main\"}\n",
        )
        .expect("chat");
        assert_eq!(
            gemini_conversation(base.path(), Path::new("/home/dev/proj"), 0),
            Some("4d66b8e3-8157-42e8-9f75-66415186022e".into())
        );
        assert_eq!(
            gemini_conversation(base.path(), Path::new("/elsewhere"), 0),
            None
        );
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
}
