//! Files in the state directory: atomic replacement, setting aside what cannot be read, and the
//! session registry.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::session::SessionRecord;

/// Unix time in milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Replaces `path` with `data` so that a reader (or a crash) sees the old or the new content,
/// never a mix: write a temporary file beside it, flush it to disk, rename it over.
pub fn write_atomic(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    let result = (|| {
        // State files hold hook tokens, spawn environments and unredacted text: owner only.
        let mut f = {
            use std::os::unix::fs::OpenOptionsExt;
            fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?
        };
        f.write_all(data)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        if let Some(dir) = path.parent() {
            // Persist the rename itself; failure here only weakens durability on power loss.
            let _ = File::open(dir).and_then(|d| d.sync_all());
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Moves an unreadable file out of the way (`NAME.corrupt-<ms>`) so that it can be inspected,
/// and returns where it went.
pub fn set_aside(path: &Path) -> std::io::Result<PathBuf> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let target = path.with_file_name(format!("{name}.corrupt-{}", now_ms()));
    fs::rename(path, &target)?;
    Ok(target)
}

/// Whether a name or id read from a state file can be used: at most 256 bytes, no control
/// characters, and not empty unless `may_be_empty`.
pub fn sane_field(s: &str, may_be_empty: bool) -> bool {
    (may_be_empty || !s.is_empty()) && s.len() <= 256 && !s.chars().any(char::is_control)
}

/// What a loader says when some entries of the state file at `path` could not be used and were
/// dropped: the file as it was is first copied beside it (`NAME.bad`), so that saving the
/// cleaned state later loses nothing for good. `what` names the file for a person ("access
/// file"); each entry's description is shortened, and a long list is cut.
pub fn dropped_entries(path: &Path, what: &str, dropped: &[String]) -> String {
    const SHOWN: usize = 10;
    const LONGEST: usize = 160;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let bad = path.with_file_name(format!("{name}.bad"));
    let kept = match fs::copy(path, &bad) {
        Ok(_) => format!("the file as it was is kept at {}", bad.display()),
        Err(e) => format!("a copy of the file as it was could not be kept ({e})"),
    };
    let mut list: Vec<String> = dropped
        .iter()
        .take(SHOWN)
        .map(|d| match d.char_indices().nth(LONGEST) {
            Some((cut, _)) => format!("{}…", &d[..cut]),
            None => d.clone(),
        })
        .collect();
    if dropped.len() > SHOWN {
        list.push(format!("and {} more", dropped.len() - SHOWN));
    }
    let n = dropped.len();
    format!(
        "{what} {}: {n} entr{} could not be used and {} dropped ({}); {kept}",
        path.display(),
        if n == 1 { "y" } else { "ies" },
        if n == 1 { "was" } else { "were" },
        list.join("; ")
    )
}

/// `sessions.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct RegistryFile {
    pub version: u32,
    /// The newest event sequence number when this was written: numbering never goes back even
    /// if the event log is lost.
    pub last_seq: u64,
    pub sessions: Vec<SessionRecord>,
}

/// Loads the registry, never fatally. A missing file is an empty registry; a file that is not
/// JSON is set aside and reported (the sessions are then recovered from tmux itself); a session
/// entry that cannot be used is dropped with a warning, the file as it was kept beside it
/// (`sessions.json.bad`). The flag is false when the file exists but cannot be read
/// (permissions, I/O): it must then not be saved over, and the warning says how to fix it.
pub fn load_registry(path: &Path) -> (RegistryFile, Vec<String>, bool) {
    let mut warnings = Vec::new();
    match fs::read(path) {
        Ok(bytes) => match parse_registry(&bytes) {
            Ok((reg, dropped)) => {
                if !dropped.is_empty() {
                    warnings.push(dropped_entries(path, "session registry", &dropped));
                }
                return (reg, warnings, true);
            }
            Err(e) => {
                let kept = set_aside(path)
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|err| format!("(could not move it: {err})"));
                warnings.push(format!(
                    "session registry {} is corrupt ({e}); kept at {kept}; sessions are recovered from tmux",
                    path.display()
                ));
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            warnings.push(format!(
                "cannot read session registry {} ({e}): sessions are recovered from tmux, and the registry is not saved until it can be read; make it readable by clibotd's user (chmod 600) and restart clibotd",
                path.display()
            ));
            return (
                RegistryFile {
                    version: 1,
                    ..Default::default()
                },
                warnings,
                false,
            );
        }
    }
    (
        RegistryFile {
            version: 1,
            ..Default::default()
        },
        warnings,
        true,
    )
}

/// Parses `sessions.json` entry by entry: what cannot be used is dropped and described.
fn parse_registry(bytes: &[u8]) -> Result<(RegistryFile, Vec<String>), serde_json::Error> {
    use serde_json::Value;
    let raw: Value = serde_json::from_slice(bytes)?;
    let mut dropped = Vec::new();
    let mut reg = RegistryFile {
        version: 1,
        ..Default::default()
    };
    let obj = match raw {
        Value::Object(o) => o,
        other => {
            dropped.push(format!("the file holds {other} instead of an object"));
            return Ok((reg, dropped));
        }
    };
    match obj.get("last_seq") {
        None => {}
        Some(v) => match v.as_u64() {
            Some(n) => reg.last_seq = n,
            None => dropped.push(format!("last_seq = {v}")),
        },
    }
    match obj.get("sessions") {
        None => {}
        Some(Value::Array(list)) => {
            for v in list {
                let mut rec = match serde_json::from_value::<SessionRecord>(v.clone()) {
                    Ok(rec) => rec,
                    Err(e) => {
                        dropped.push(format!("session {v} ({e})"));
                        continue;
                    }
                };
                if !crate::names::is_valid_name(&rec.name)
                    || !crate::names::is_valid_name(&rec.cli)
                    || !sane_field(&rec.id, false)
                    || !sane_field(&rec.tmux_session, true)
                    || !sane_field(&rec.tmux_id, true)
                    || !sane_field(&rec.hook_token, true)
                    || !sane_field(&rec.cli_session_id, true)
                    || !sane_field(&rec.owner, true)
                {
                    dropped.push(format!(
                        "session {:?} (id {:?}): invalid name, CLI or ids",
                        rec.name, rec.id
                    ));
                    continue;
                }
                if reg
                    .sessions
                    .iter()
                    .any(|o| o.name == rec.name || o.id == rec.id)
                {
                    dropped.push(format!(
                        "a second session named {:?} or with id {:?}",
                        rec.name, rec.id
                    ));
                    continue;
                }
                let before = rec.env.len();
                rec.env.retain(|k, v| {
                    crate::names::is_valid_env_key(k) && k.len() <= 256 && !v.contains('\0')
                });
                if rec.env.len() != before {
                    dropped.push(format!(
                        "session {:?}: {} environment entr{} with an invalid name or a NUL",
                        rec.name,
                        before - rec.env.len(),
                        if before - rec.env.len() == 1 {
                            "y"
                        } else {
                            "ies"
                        }
                    ));
                }
                let before = rec.shared_with.len();
                rec.shared_with.retain(|u| sane_field(u, false));
                if rec.shared_with.len() != before {
                    dropped.push(format!(
                        "session {:?}: invalid shared_with entries",
                        rec.name
                    ));
                }
                reg.sessions.push(rec);
            }
        }
        Some(_) => dropped.push("sessions (not a list)".into()),
    }
    Ok((reg, dropped))
}

/// Takes group and other permissions away from the files in the state directory (files made
/// by an older version, or by hand); what cannot be changed is returned as warnings.
pub fn tighten_files(dir: &Path) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let mut warnings = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return warnings;
    };
    for entry in entries.flatten() {
        // Not following links: only regular files that live here.
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        let mode = meta.permissions().mode();
        if meta.is_file() && mode & 0o077 != 0 {
            let path = entry.path();
            if let Err(e) = fs::set_permissions(&path, fs::Permissions::from_mode(mode & 0o700)) {
                warnings.push(format!(
                    "{} can be read by other users and cannot be made private ({e}): run chmod 600 on it",
                    path.display()
                ));
            }
        }
    }
    warnings
}

/// Writes the registry atomically.
pub fn save_registry(path: &Path, reg: &RegistryFile) -> std::io::Result<()> {
    let data = serde_json::to_vec_pretty(reg).map_err(std::io::Error::other)?;
    write_atomic(path, &data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corrupt_registry_is_set_aside() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("sessions.json");
        fs::write(&p, "{ torn").expect("write");
        let (reg, w, writable) = load_registry(&p);
        assert!(writable);
        assert!(reg.sessions.is_empty());
        assert!(w[0].contains("corrupt"), "{w:?}");
        assert!(!p.exists());
        save_registry(
            &p,
            &RegistryFile {
                version: 1,
                last_seq: 7,
                sessions: vec![],
            },
        )
        .expect("save");
        let (reg, w, _) = load_registry(&p);
        assert!(w.is_empty());
        assert_eq!(reg.last_seq, 7);
    }

    fn record(name: &str, id: &str) -> serde_json::Value {
        serde_json::to_value(SessionRecord {
            id: id.into(),
            name: name.into(),
            cli: "shell".into(),
            ..Default::default()
        })
        .expect("json")
    }

    #[test]
    fn bad_sessions_are_dropped_told_and_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("sessions.json");
        let mut odd_env = record("c", "3");
        odd_env["env"] = serde_json::json!({"GOOD": "1", "BAD KEY": "2", "NUL": "a\u{0}b"});
        let file = serde_json::json!({
            "version": 1,
            "last_seq": 40,
            "sessions": [
                record("a", "1"),
                record("a", "2"),
                record("bad name", "4"),
                record("b", ""),
                odd_env,
                {"name": 5},
                "junk"
            ]
        });
        fs::write(&p, file.to_string()).expect("write");
        let (reg, w, writable) = load_registry(&p);
        assert!(writable);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("6 entries"), "{w:?}");
        assert!(dir.path().join("sessions.json.bad").exists());
        assert_eq!(reg.last_seq, 40);
        let names: Vec<&str> = reg.sessions.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a", "c"]);
        assert_eq!(reg.sessions[1].env.keys().collect::<Vec<_>>(), ["GOOD"]);
    }

    #[test]
    fn an_unreadable_registry_is_reported_and_not_to_be_saved() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("sessions.json");
        fs::create_dir(&p).expect("mkdir");
        let (reg, w, writable) = load_registry(&p);
        assert!(!writable);
        assert!(reg.sessions.is_empty());
        assert!(w[0].contains("chmod 600"), "{w:?}");
    }

    #[test]
    fn files_in_the_state_directory_are_made_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("events.jsonl");
        fs::write(&f, "").expect("write");
        fs::set_permissions(&f, fs::Permissions::from_mode(0o644)).expect("chmod");
        fs::create_dir(dir.path().join("sub")).expect("mkdir");
        assert!(tighten_files(dir.path()).is_empty());
        let mode = fs::metadata(&f).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
