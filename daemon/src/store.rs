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

/// Loads the registry. A missing file is an empty registry; an unreadable one is set aside and
/// reported (the sessions are then recovered from tmux itself).
pub fn load_registry(path: &Path) -> (RegistryFile, Vec<String>) {
    let mut warnings = Vec::new();
    match fs::read(path) {
        Ok(bytes) => match serde_json::from_slice::<RegistryFile>(&bytes) {
            Ok(reg) => return (reg, warnings),
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
        Err(e) => warnings.push(format!(
            "cannot read session registry {}: {e}",
            path.display()
        )),
    }
    (
        RegistryFile {
            version: 1,
            ..Default::default()
        },
        warnings,
    )
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
        let (reg, w) = load_registry(&p);
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
        let (reg, w) = load_registry(&p);
        assert!(w.is_empty());
        assert_eq!(reg.last_seq, 7);
    }
}
