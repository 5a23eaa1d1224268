//! Queued input on disk, one append-only file per session.
//!
//! Input that arrives while a turn runs waits in a queue that must survive a daemon restart.
//! It used to live in the session registry, so each queued message rewrote (and synced) every
//! session's record: 600 messages of 60 KB rewrote 36 MB per message. Now each session's queue
//! is `STATE/queues/<session id>.jsonl`, one line per change — `{"push": TEXT}` or `{"pop":
//! N}` (the N oldest left the queue) — so one enqueue costs one line the size of the message.
//! The file is removed when the queue empties, and rewritten whole (it is bounded by
//! `[daemon] max_queued_bytes`) when its lines outgrow the queue several times over.
//!
//! Loading replays the lines; a torn last line (a crash mid-append) is dropped, and a line
//! that cannot be read is skipped with a warning.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One change to a queue.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Op {
    Push(String),
    Pop(usize),
    /// The head is being typed; the event log ended at this sequence number then. A `pop`
    /// follows once it was submitted; a file that ends with this line leaves the next daemon
    /// to ask the log whether it was ([`crate::store::catch_up::submitted_since`]).
    Typing(u64),
    /// The head was typed whole and its Enter is being pressed (the log's number as for
    /// `Typing`): a daemon killed here leaves the next one to press Enter, never to type it
    /// again.
    Entering(u64),
}

/// A session's queue as its file says.
#[derive(Debug, Default)]
pub struct Loaded {
    pub queue: Vec<String>,
    /// The file ends with `Op::Typing` or `Op::Entering`: the head's typing began when
    /// the log ended here.
    pub typing_from: Option<u64>,
    /// It ends with `Op::Entering`: the head was typed whole, its Enter perhaps pressed.
    pub entering: bool,
    pub warnings: Vec<String>,
}

/// The directory of queue files.
#[derive(Debug, Clone)]
pub struct QueueFiles {
    dir: PathBuf,
}

/// A session id is used as a file name only when it cannot leave the directory.
fn safe_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl QueueFiles {
    pub fn new(state_dir: &Path) -> QueueFiles {
        QueueFiles {
            dir: state_dir.join("queues"),
        }
    }

    fn path(&self, id: &str) -> Option<PathBuf> {
        safe_id(id).then(|| self.dir.join(format!("{id}.jsonl")))
    }

    /// Appends one line, unsynced: callers append while holding the session table, so that the
    /// file's order is the queue's, and sync (the slow part) after letting go of it.
    fn append(&self, id: &str, op: &Op) -> std::io::Result<fs::File> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let Some(path) = self.path(id) else {
            return Err(std::io::Error::other(format!("unusable session id {id:?}")));
        };
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        let mut line = serde_json::to_vec(op).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let mut f = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)?;
        if let Err(e) = f.write_all(&line) {
            // Never leave half a line for the next append to run into.
            let _ = self.rewrite_after_failure(id, &path);
            return Err(e);
        }
        Ok(f)
    }

    /// After a failed append the file is cut back to its last complete line.
    fn rewrite_after_failure(&self, _id: &str, path: &Path) -> std::io::Result<()> {
        let bytes = fs::read(path)?;
        let keep = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        let f = fs::OpenOptions::new().write(true).open(path)?;
        f.set_len(keep as u64)
    }

    /// Records that `text` joined the back of session `id`'s queue. The file is returned to
    /// be synced (`sync_data`) before the message is confirmed as queued.
    pub fn push(&self, id: &str, text: &str) -> std::io::Result<fs::File> {
        self.append(id, &Op::Push(text.to_string()))
    }

    /// Records that the head is about to be typed (unsynced, like a pop: the kernel keeps it
    /// through a kill), the log ending at `log_seq`.
    pub fn typing(&self, id: &str, log_seq: u64) -> std::io::Result<()> {
        self.append(id, &Op::Typing(log_seq)).map(drop)
    }

    /// Records that the head was typed whole and its Enter is about to be pressed.
    pub fn entering(&self, id: &str, log_seq: u64) -> std::io::Result<()> {
        self.append(id, &Op::Entering(log_seq)).map(drop)
    }

    /// Records that the oldest entry left the queue, which now holds `left`. An empty queue's
    /// file is removed; one whose file outgrew it is written again whole.
    pub fn pop(&self, id: &str, left: &[String]) -> std::io::Result<()> {
        if left.is_empty() {
            return self.remove(id);
        }
        // Not synced: lost to a power cut, it means the message is typed again after the
        // restart (at least once), never that one is lost.
        self.append(id, &Op::Pop(1))?;
        let Some(path) = self.path(id) else {
            return Ok(());
        };
        let lines = fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let held: u64 = left.iter().map(|t| t.len() as u64 + 16).sum();
        if lines > held.saturating_mul(4).max(64 * 1024) {
            self.rewrite(id, left)?;
        }
        Ok(())
    }

    /// Writes session `id`'s queue whole (a migration from the registry, or a compaction).
    pub fn rewrite(&self, id: &str, queue: &[String]) -> std::io::Result<()> {
        if queue.is_empty() {
            return self.remove(id);
        }
        let Some(path) = self.path(id) else {
            return Ok(());
        };
        let mut buf = Vec::new();
        for t in queue {
            serde_json::to_writer(&mut buf, &Op::Push(t.clone())).map_err(std::io::Error::other)?;
            buf.push(b'\n');
        }
        use std::os::unix::fs::DirBuilderExt;
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        crate::store::write_atomic(&path, &buf)
    }

    /// Forgets session `id`'s queue.
    pub fn remove(&self, id: &str) -> std::io::Result<()> {
        let Some(path) = self.path(id) else {
            return Ok(());
        };
        match fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Session `id`'s queue as the file says, with warnings about what could not be read.
    pub fn load(&self, id: &str) -> Loaded {
        let mut out = Loaded::default();
        let Some(path) = self.path(id) else {
            return out;
        };
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return out,
            Err(e) => {
                out.warnings.push(format!(
                    "cannot read queued input {} ({e}): those messages are not typed; make it readable by clibotd's user",
                    path.display()
                ));
                return out;
            }
        };
        let mut queue: std::collections::VecDeque<String> = Default::default();
        let mut torn = false;
        for (i, line) in bytes.split_inclusive(|b| *b == b'\n').enumerate() {
            let complete = line.ends_with(b"\n");
            match serde_json::from_slice::<Op>(line) {
                Ok(Op::Push(t)) => queue.push_back(t),
                Ok(Op::Pop(n)) => {
                    out.typing_from = None;
                    out.entering = false;
                    for _ in 0..n.min(queue.len()) {
                        queue.pop_front();
                    }
                }
                Ok(Op::Typing(seq)) => {
                    out.typing_from = Some(seq);
                    out.entering = false;
                }
                Ok(Op::Entering(seq)) => {
                    out.typing_from = Some(seq);
                    out.entering = true;
                }
                Err(_) if !complete => torn = true,
                Err(e) => {
                    out.warnings
                        .push(format!("{} line {}: {e}; skipped", path.display(), i + 1))
                }
            }
        }
        out.queue = queue.into();
        if out.queue.is_empty() {
            out.typing_from = None;
            out.entering = false;
        }
        if torn || !out.warnings.is_empty() {
            // Written again clean, so the next append starts on a line of its own (an
            // unfinished typing is kept: the caller settles it).
            if let Err(e) = self.rewrite(id, &out.queue) {
                out.warnings
                    .push(format!("cannot rewrite {}: {e}", path.display()));
            } else if let Some(seq) = out.typing_from
                && let Err(e) = if out.entering {
                    self.entering(id, seq)
                } else {
                    self.typing(id, seq)
                }
            {
                out.warnings
                    .push(format!("cannot rewrite {}: {e}", path.display()));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushes_and_pops_replay_and_an_empty_queue_leaves_no_file() {
        let d = tempfile::tempdir().expect("tempdir");
        let q = QueueFiles::new(d.path());
        q.push("s1", "one").expect("push");
        q.push("s1", "two\nlines").expect("push");
        q.push("s1", "three").expect("push");
        q.pop("s1", &["two\nlines".into(), "three".into()])
            .expect("pop");
        let l = q.load("s1");
        assert!(l.warnings.is_empty(), "{:?}", l.warnings);
        assert_eq!(l.queue, ["two\nlines", "three"]);
        q.pop("s1", &["three".into()]).expect("pop");
        q.pop("s1", &[]).expect("pop");
        assert!(!d.path().join("queues/s1.jsonl").exists());
        assert!(q.load("s1").queue.is_empty());
    }

    #[test]
    fn a_torn_line_is_dropped_and_the_file_repaired() {
        let d = tempfile::tempdir().expect("tempdir");
        let q = QueueFiles::new(d.path());
        q.push("s", "kept").expect("push");
        let path = d.path().join("queues/s.jsonl");
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open");
        f.write_all(b"{\"push\":\"cut").expect("write");
        assert_eq!(q.load("s").queue, ["kept"]);
        q.push("s", "next").expect("push");
        assert_eq!(q.load("s").queue, ["kept", "next"]);
    }

    #[test]
    fn a_typing_left_unfinished_is_reported_and_a_pop_settles_it() {
        let d = tempfile::tempdir().expect("tempdir");
        let q = QueueFiles::new(d.path());
        q.push("s", "one").expect("push");
        q.push("s", "two").expect("push");
        q.typing("s", 41).expect("typing");
        let l = q.load("s");
        assert_eq!(l.queue, ["one", "two"]);
        assert_eq!(l.typing_from, Some(41));
        q.entering("s", 42).expect("entering");
        let l = q.load("s");
        assert_eq!((l.typing_from, l.entering), (Some(42), true));
        q.pop("s", &["two".into()]).expect("pop");
        let l = q.load("s");
        assert_eq!(l.queue, ["two"]);
        assert_eq!((l.typing_from, l.entering), (None, false));
        // Survives the repair of a torn line.
        q.typing("s", 50).expect("typing");
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(d.path().join("queues/s.jsonl"))
            .expect("open");
        f.write_all(b"{\"pu").expect("write");
        assert_eq!(q.load("s").typing_from, Some(50));
        assert_eq!(q.load("s").typing_from, Some(50));
    }

    #[test]
    fn ids_that_are_paths_are_not_used() {
        let d = tempfile::tempdir().expect("tempdir");
        let q = QueueFiles::new(d.path());
        assert!(q.push("../x", "t").is_err());
        assert!(q.load("../x").queue.is_empty());
    }
}
