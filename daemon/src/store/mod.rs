//! Everything the daemon keeps on disk, and how: the event log and the long texts beside it,
//! the session registry, the queued input, the audit log, the outcomes of automatic answers
//! and size-rotated files; atomic replacement, and setting aside (never deleting) what cannot
//! be read.
//!
//! Owns the file formats. May not touch: sessions, tmux, chats — it stores what it is given
//! and knows nothing of what drives the daemon.

pub mod audit;
pub mod blobs;
pub mod catch_up;
pub mod event_memory;
pub mod events;
pub mod json_file;
pub mod outcomes;
pub mod queue_file;
pub mod rotating;

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::model::SessionRecord;

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
    off_worker(|| write_atomic_here(path, data))
}

/// Runs blocking disk work (writes, fsyncs) without holding up the async runtime: on one of
/// its worker threads, the worker first hands its other tasks to a thread of their own
/// (`block_in_place`), so a slow disk stalls only this call; elsewhere (a test on a
/// single-threaded runtime, a plain thread) it just runs.
pub fn off_worker<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

fn write_atomic_here(path: &Path, data: &[u8]) -> std::io::Result<()> {
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

/// The largest sequence number (or other count) a state file may hold: 2^53.
///
/// Why this bound: it is the largest integer that JSON tools working in doubles (jq,
/// JavaScript) keep exactly, so a state file a person inspects or edits with them says what the
/// daemon meant; and it is unreachable in practice (a million events a second for 285 years).
/// A number above it can only come from damage or a hand edit (`u64::MAX` once wrapped the event
/// numbering to 1 and silenced a chat for good), so every loader drops it like any other bad
/// entry, with a warning, and numbering continues from the highest number that is in range.
///
/// The one state this cannot make whole: numbers edited to within a few events of the bound.
/// The log then numbers past it (it never wraps or repeats a number), and the next start drops
/// those events with warnings like any other damage.
pub const MAX_SEQ: u64 = 1 << 53;

/// Whether a number read from a state file is in range (see [`MAX_SEQ`]).
pub fn sane_seq(n: u64) -> bool {
    n <= MAX_SEQ
}

/// How many copies of each kind (`NAME.bad-<ms>`, `NAME.corrupt-<ms>`) are kept per file: the
/// newest, so that a second repair does not overwrite the first, and repeated repairs do not
/// fill the disk.
pub const KEPT_COPIES: usize = 5;

/// `NAME.KIND-<unix ms>` beside `path`, later than every such copy already there: two repairs
/// in the same millisecond must neither overwrite each other nor sort in the wrong order.
fn stamped(path: &Path, kind: &str) -> PathBuf {
    let name = file_name(path);
    let newest = stamped_copies(path, kind).last().map(|(ms, _)| ms + 1);
    let mut ms = (now_ms().max(0) as u64).max(newest.unwrap_or(0));
    loop {
        let p = path.with_file_name(format!("{name}.{kind}-{ms}"));
        if p.symlink_metadata().is_err() {
            return p;
        }
        ms += 1;
    }
}

/// The `NAME.KIND-<ms>` files beside `path`, oldest first.
fn stamped_copies(path: &Path, kind: &str) -> Vec<(u64, PathBuf)> {
    let prefix = format!("{}.{kind}-", file_name(path));
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut copies: Vec<(u64, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let ms = name.strip_prefix(&prefix)?.parse::<u64>().ok()?;
            Some((ms, e.path()))
        })
        .collect();
    copies.sort();
    copies
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Removes all but the newest [`KEPT_COPIES`] `NAME.KIND-<ms>` files beside `path`.
fn prune_copies(path: &Path, kind: &str) {
    let copies = stamped_copies(path, kind);
    let extra = copies.len().saturating_sub(KEPT_COPIES);
    for (_, p) in copies.into_iter().take(extra) {
        if let Err(e) = fs::remove_file(&p) {
            tracing::warn!("cannot remove the old copy {}: {e}", p.display());
        }
    }
}

/// Copies the file at `path` as it is to `NAME.bad-<unix ms>` before a loader saves a cleaned
/// version over it, keeping the newest [`KEPT_COPIES`] such copies; returns the copy's path.
pub fn keep_bad_copy(path: &Path) -> std::io::Result<PathBuf> {
    let target = stamped(path, "bad");
    fs::copy(path, &target)?;
    prune_copies(path, "bad");
    Ok(target)
}

/// Moves an unreadable file out of the way (`NAME.corrupt-<ms>`) so that it can be inspected,
/// and returns where it went; the newest [`KEPT_COPIES`] such files are kept.
pub fn set_aside(path: &Path) -> std::io::Result<PathBuf> {
    let target = stamped(path, "corrupt");
    fs::rename(path, &target)?;
    prune_copies(path, "corrupt");
    Ok(target)
}

/// Whether a name or id read from a state file can be used: at most 256 bytes, no control
/// characters, and not empty unless `may_be_empty`.
pub fn sane_field(s: &str, may_be_empty: bool) -> bool {
    (may_be_empty || !s.is_empty()) && s.len() <= 256 && !s.chars().any(char::is_control)
}

/// What a loader says when some entries of the state file at `path` could not be used and were
/// dropped: the file as it was is first copied beside it (`NAME.bad-<unix ms>`, the newest
/// [`KEPT_COPIES`] kept), so that saving the cleaned state later loses nothing for good. `what`
/// names the file for a person ("access file"); each entry's description is shortened, and a
/// long list is cut.
pub fn dropped_entries(path: &Path, what: &str, dropped: &[String]) -> String {
    const SHOWN: usize = 10;
    const LONGEST: usize = 160;
    let kept = match keep_bad_copy(path) {
        Ok(bad) => format!("the file as it was is kept at {}", bad.display()),
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
/// (`sessions.json.bad-<ms>`); a number out of range ([`MAX_SEQ`]) is dropped or reset, told
/// the same way. The flag is false when the file exists but cannot be read
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
                let prev = previous_registry(path);
                if let Ok((reg, _)) = fs::read(&prev)
                    .map_err(|e| e.to_string())
                    .and_then(|b| parse_registry(&b).map_err(|e| e.to_string()))
                {
                    warnings.push(format!(
                        "session registry {} is corrupt ({e}); kept at {kept}; its previous version {} was read instead ({} sessions), brought up to date by the event log",
                        path.display(),
                        prev.display(),
                        reg.sessions.len()
                    ));
                    return (reg, warnings, true);
                }
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
            Some(n) if sane_seq(n) => reg.last_seq = n,
            Some(n) => dropped.push(format!(
                "last_seq = {n} (above 2^53: damaged or edited; event numbering continues from the event log and the delivery cursors)"
            )),
            None => dropped.push(format!("last_seq = {v} (not a number from 0 to 2^53)")),
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
                dropped.extend(reset_out_of_range(&mut rec));
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

/// Resets the numbers of a session record that are out of range (above [`MAX_SEQ`], or a
/// negative time), describing each: the session itself is kept, as the numbers only inform
/// (`last` and the reply's length) or time (the turn's start, idle time).
fn reset_out_of_range(rec: &mut SessionRecord) -> Vec<String> {
    let mut told = Vec::new();
    let name = rec.name.clone();
    let mut check_u64 = |field: &str, n: &mut u64| {
        if !sane_seq(*n) {
            told.push(format!(
                "session {name:?}: {field} = {n} is above 2^53; reset to 0"
            ));
            *n = 0;
        }
    };
    check_u64("last_reply_seq", &mut rec.last_reply_seq);
    check_u64("last_reply_bytes", &mut rec.last_reply_bytes);
    let in_range = |n: i64| (0..=MAX_SEQ as i64).contains(&n);
    for (field, n) in [
        ("created_at_ms", &mut rec.created_at_ms),
        ("last_activity_ms", &mut rec.last_activity_ms),
        ("turn_started_ms", &mut rec.turn_started_ms),
    ] {
        if !in_range(*n) {
            told.push(format!(
                "session {name:?}: {field} = {n} is not a time from 0 to 2^53 ms; reset to 0"
            ));
            *n = 0;
        }
    }
    if let Some(a) = rec.turn_anchor
        && a.unsigned_abs() > MAX_SEQ
    {
        told.push(format!(
            "session {name:?}: turn_anchor = {a} is beyond 2^53 lines; forgotten (the running turn's reply may be cut)"
        ));
        rec.turn_anchor = None;
    }
    told
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

/// Writes the registry atomically. The file it replaces stays as `sessions.json.prev` (a
/// second name for it, no copy): a registry damaged on disk is recovered from it, and the event
/// log brings it up to date ([`crate::store::catch_up`]), so hibernated sessions and the queues
/// of sessions tmux still runs are not lost with it.
pub fn save_registry(path: &Path, reg: &RegistryFile) -> std::io::Result<()> {
    let data = serde_json::to_vec_pretty(reg).map_err(std::io::Error::other)?;
    let prev = previous_registry(path);
    off_worker(|| {
        let _ = fs::remove_file(&prev);
        let _ = fs::hard_link(path, &prev);
    });
    write_atomic(path, &data)
}

/// Where the registry's previous version is kept.
pub fn previous_registry(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".prev");
    path.with_file_name(name)
}

#[cfg(test)]
pub(crate) fn copies(dir: &Path, prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .expect("ls")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repairs_keep_their_own_copies_up_to_five() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("chats.json");
        for i in 0..8 {
            fs::write(&p, format!("version {i}")).expect("write");
            let w = dropped_entries(&p, "chat bindings file", &[format!("entry {i}")]);
            assert!(w.contains("chats.json.bad-"), "{w}");
        }
        let kept = copies(dir.path(), "chats.json.bad-");
        assert_eq!(kept.len(), KEPT_COPIES, "{kept:?}");
        let texts: Vec<String> = kept
            .iter()
            .map(|n| fs::read_to_string(dir.path().join(n)).expect("read"))
            .collect();
        let mut sorted = texts.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            (3..8).map(|i| format!("version {i}")).collect::<Vec<_>>(),
            "the newest five, none overwritten"
        );
        for _ in 0..7 {
            fs::write(&p, "x").expect("write");
            set_aside(&p).expect("aside");
        }
        assert_eq!(copies(dir.path(), "chats.json.corrupt-").len(), KEPT_COPIES);
        assert_eq!(copies(dir.path(), "chats.json.bad-").len(), KEPT_COPIES);
    }

    #[test]
    fn out_of_range_numbers_in_the_registry_are_dropped_and_told() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("sessions.json");
        let mut rec = record("a", "1");
        rec["last_reply_seq"] = serde_json::json!(u64::MAX);
        rec["created_at_ms"] = serde_json::json!(i64::MIN);
        rec["turn_anchor"] = serde_json::json!(i64::MAX);
        let file = serde_json::json!({"version": 1, "last_seq": u64::MAX, "sessions": [rec]});
        fs::write(&p, file.to_string()).expect("write");
        let (reg, w, _) = load_registry(&p);
        assert_eq!(reg.last_seq, 0);
        assert_eq!(reg.sessions.len(), 1, "the session is kept");
        let s = &reg.sessions[0];
        assert_eq!(
            (s.last_reply_seq, s.created_at_ms, s.turn_anchor),
            (0, 0, None)
        );
        assert_eq!(w.len(), 1, "{w:?}");
        for needle in [
            "last_seq = 18446744073709551615",
            "2^53",
            "last_reply_seq",
            "created_at_ms",
            "turn_anchor",
        ] {
            assert!(w[0].contains(needle), "{needle}: {w:?}");
        }
        // Exactly the bound is kept; a negative or fractional last_seq is not.
        fs::write(&p, format!("{{\"last_seq\": {MAX_SEQ}}}")).expect("write");
        assert_eq!(load_registry(&p).0.last_seq, MAX_SEQ);
        for bad in ["-1", "1.5", "1e300", "\"7\""] {
            fs::write(&p, format!("{{\"last_seq\": {bad}}}")).expect("write");
            let (reg, w, _) = load_registry(&p);
            assert_eq!(reg.last_seq, 0, "{bad}");
            assert!(w[0].contains("last_seq"), "{bad}: {w:?}");
        }
    }

    #[test]
    fn a_corrupt_registry_is_recovered_from_its_previous_version() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("sessions.json");
        let reg = |n: usize, last_seq: u64| RegistryFile {
            version: 1,
            last_seq,
            sessions: (0..n)
                .map(|i| SessionRecord {
                    id: format!("id{i}"),
                    name: format!("s{i}"),
                    cli: "bash".into(),
                    ..Default::default()
                })
                .collect(),
        };
        save_registry(&p, &reg(1, 3)).expect("save");
        save_registry(&p, &reg(2, 9)).expect("save");
        fs::write(&p, "{ damaged").expect("damage");
        let (got, w, writable) = load_registry(&p);
        assert!(writable);
        assert_eq!(got.last_seq, 3, "the version before the last write");
        assert_eq!(got.sessions.len(), 1);
        assert!(w[0].contains("previous version"), "{w:?}");
    }

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
        assert_eq!(copies(dir.path(), "sessions.json.bad-").len(), 1);
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
