//! Transcripts: what each chat sent to its sessions and what it was shown back, one file per
//! chat under the state directory (`transcripts/PLATFORM/CHAT.jsonl`, one JSON line per entry).
//!
//! Each chat's file is kept under a size limit: when the next line would pass it, `CHAT.jsonl`
//! becomes `CHAT.jsonl.1` (replacing the older one) and a new file is started, so a chat never
//! holds more than twice the limit. Lines are appended with one plain write each, not synced:
//! a transcript is a convenience, not a record the daemon depends on.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::store::rotating::{Limits, RotatingFile};

/// The default size at which a chat's transcript file is rotated (1 MiB).
pub const DEFAULT_MAX_BYTES: u64 = 1024 * 1024;
/// Entries a read returns when the caller does not say.
pub const DEFAULT_LIMIT: usize = 100;
/// Most entries one read returns.
pub const MAX_LIMIT: usize = 1000;
/// Open files kept; beyond this they are all closed and reopened on demand.
const MAX_OPEN: usize = 64;

/// One line of a transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub time_ms: i64,
    /// "in": the chat sent it; "out": the chat was shown it.
    pub dir: String,
    /// Who sent it (the chat user's id), for "in".
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub user: String,
    #[serde(default)]
    pub session: String,
    #[serde(default)]
    pub text: String,
}

/// Every chat's transcript.
pub struct Transcripts {
    dir: PathBuf,
    max_bytes: u64,
    open: Mutex<HashMap<(String, String), RotatingFile>>,
}

/// A platform or chat id as a file name: letters, digits, `-`, `_` and `.` are kept, every other
/// byte is written `%XX`, and a leading `.` too (no `..`, no hidden files), so that two ids
/// never share a file. Empty becomes `%`; very long ids are cut and end with a hash of the whole.
pub fn sanitize(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for (i, b) in id.bytes().enumerate() {
        let keep = b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || (b == b'.' && i > 0);
        if keep {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.is_empty() {
        out.push('%');
    }
    if out.len() > 160 {
        // FNV-1a over the whole id keeps long ids apart after the cut.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in id.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        out.truncate(140);
        out.push_str(&format!("~{h:016x}"));
    }
    out
}

fn private_dir(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
}

fn rotated(path: &Path) -> PathBuf {
    let mut n = path.as_os_str().to_owned();
    n.push(".1");
    PathBuf::from(n)
}

impl Transcripts {
    /// The store under `state_dir/transcripts`; nothing is created until a line is written.
    pub fn new(state_dir: &Path, max_bytes: u64) -> Transcripts {
        Transcripts {
            dir: state_dir.join("transcripts"),
            max_bytes: max_bytes.max(1),
            open: Mutex::default(),
        }
    }

    /// The current file of a chat's transcript.
    pub fn path(&self, platform: &str, chat: &str) -> PathBuf {
        self.dir
            .join(sanitize(platform))
            .join(format!("{}.jsonl", sanitize(chat)))
    }

    /// Appends an entry to a chat's transcript. Failures are logged, never returned: a chat's
    /// message is not refused because its transcript cannot be written.
    pub fn record(&self, platform: &str, chat: &str, entry: &Entry) {
        if platform.is_empty() || chat.is_empty() {
            return;
        }
        if let Err(e) = self.write(platform, chat, entry) {
            tracing::warn!(platform, chat, "cannot write the chat's transcript: {e}");
        }
    }

    fn write(&self, platform: &str, chat: &str, entry: &Entry) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(entry).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let path = self.path(platform, chat);
        let key = (platform.to_string(), chat.to_string());
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if !open.contains_key(&key) {
            if open.len() >= MAX_OPEN {
                open.clear();
            }
            if let Some(parent) = path.parent() {
                private_dir(&self.dir)?;
                private_dir(parent)?;
            }
            // The current file and one older (`rotated`), which `read` reads too.
            let limits = Limits {
                max_bytes: self.max_bytes,
                files: 2,
            };
            open.insert(key.clone(), RotatingFile::open(path, limits)?);
        }
        match open.get_mut(&key) {
            Some(f) => f.write(&line),
            None => Ok(()),
        }
    }

    /// A chat's newest `limit` entries (0: [`DEFAULT_LIMIT`], at most [`MAX_LIMIT`]) at or after
    /// `since_ms`, oldest first. Lines that do not parse are skipped.
    pub fn read(&self, platform: &str, chat: &str, since_ms: i64, limit: usize) -> Vec<Entry> {
        let limit = if limit == 0 {
            DEFAULT_LIMIT
        } else {
            limit.min(MAX_LIMIT)
        };
        let path = self.path(platform, chat);
        // Hold the lock so a rotation does not happen between reading the two files.
        let _open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = std::collections::VecDeque::with_capacity(limit);
        for p in [rotated(&path), path] {
            let Ok(f) = File::open(&p) else { continue };
            for line in BufReader::new(f).lines() {
                let Ok(line) = line else { break };
                let Ok(e) = serde_json::from_str::<Entry>(&line) else {
                    continue;
                };
                if e.time_ms < since_ms {
                    continue;
                }
                if out.len() == limit {
                    out.pop_front();
                }
                out.push_back(e);
            }
        }
        out.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn entry(n: usize) -> Entry {
        Entry {
            // Every line the same length, so that the rotation points are known.
            time_ms: 1000 + n as i64,
            dir: "in".into(),
            user: String::new(),
            session: "s".into(),
            text: format!("line {n:04}"),
        }
    }

    #[test]
    fn ids_become_distinct_safe_file_names() {
        assert_eq!(sanitize("-100123"), "-100123");
        assert_eq!(sanitize("oc_5f3a9"), "oc_5f3a9");
        assert_eq!(sanitize("../etc"), "%2E.%2Fetc");
        assert_eq!(sanitize(".."), "%2E.");
        assert_eq!(sanitize("a/b"), "a%2Fb");
        assert_eq!(sanitize(""), "%");
        assert_ne!(sanitize("a/b"), sanitize("a%2Fb"));
        assert_ne!(sanitize("a b"), sanitize("a_b"));
        let long_a = "x".repeat(300) + "a";
        let long_b = "x".repeat(300) + "b";
        assert!(sanitize(&long_a).len() <= 160);
        assert_ne!(sanitize(&long_a), sanitize(&long_b));
        for id in ["a/b", "..", "../../x", "é", "\0"] {
            let s = sanitize(id);
            assert!(
                !s.contains('/') && !s.starts_with('.') && !s.contains('\0'),
                "{s}"
            );
        }
    }

    #[test]
    fn files_are_private_and_named_by_chat() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let t = Transcripts::new(tmp.path(), DEFAULT_MAX_BYTES);
        t.record("telegram", "-100123", &entry(0));
        let path = tmp.path().join("transcripts/telegram/-100123.jsonl");
        assert_eq!(t.path("telegram", "-100123"), path);
        let mode = |p: &Path| std::fs::metadata(p).expect("exists").permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&tmp.path().join("transcripts")), 0o700);
        assert_eq!(mode(&tmp.path().join("transcripts/telegram")), 0o700);
        assert_eq!(t.read("telegram", "-100123", 0, 0), vec![entry(0)]);
        assert!(t.read("telegram", "other", 0, 0).is_empty());
    }

    #[test]
    fn a_full_file_rotates_and_two_files_are_kept() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let line_len = serde_json::to_vec(&entry(0)).expect("json").len() as u64 + 1;
        // Room for exactly ten lines per file.
        let t = Transcripts::new(tmp.path(), line_len * 10);
        for n in 0..35 {
            t.record("feishu", "oc_1", &entry(n));
        }
        let path = t.path("feishu", "oc_1");
        let lines = |p: &Path| {
            std::fs::read_to_string(p)
                .expect("readable")
                .lines()
                .count()
        };
        assert_eq!(lines(&path), 5, "30..35 in the current file");
        assert_eq!(lines(&rotated(&path)), 10, "20..30 in the older one");
        assert!(std::fs::metadata(&path).expect("file").len() <= line_len * 10);
        let all = t.read("feishu", "oc_1", 0, MAX_LIMIT);
        assert_eq!(all, (20..35).map(entry).collect::<Vec<_>>());
        // The newest N, and nothing before `since`.
        let last3 = t.read("feishu", "oc_1", 0, 3);
        assert_eq!(last3, (32..35).map(entry).collect::<Vec<_>>());
        let since = t.read("feishu", "oc_1", 1030, MAX_LIMIT);
        assert_eq!(since, (30..35).map(entry).collect::<Vec<_>>());
        // A fresh store (a daemon restart) goes on from the file's size.
        let t2 = Transcripts::new(tmp.path(), line_len * 10);
        for n in 35..41 {
            t2.record("feishu", "oc_1", &entry(n));
        }
        assert_eq!(lines(&path), 1, "the 11th line rotated again");
        assert_eq!(
            t2.read("feishu", "oc_1", 0, MAX_LIMIT),
            (30..41).map(entry).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_damaged_line_is_skipped() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let t = Transcripts::new(tmp.path(), DEFAULT_MAX_BYTES);
        t.record("telegram", "1", &entry(0));
        let path = t.path("telegram", "1");
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open");
        std::io::Write::write_all(&mut f, b"{not json\n").expect("write");
        t.record("telegram", "1", &entry(1));
        assert_eq!(t.read("telegram", "1", 0, 0), vec![entry(0), entry(1)]);
    }
}
