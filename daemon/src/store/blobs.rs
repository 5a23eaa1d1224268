//! Long texts live beside the event log, not in it.
//!
//! A reply of several megabytes (a shell printing a build log, a CLI dumping a file) used to ride
//! whole in its event: every client then had to decode one message larger than gRPC's 4 MiB
//! limit, failed, and asked for the same event again, for ever. Now an event carries at most
//! [`EVENT_TEXT_MAX`] bytes of text; the whole text, up to [`BLOB_MAX`], is written once to
//! `STATE/blobs/<id>` and named by the event's `blob_id`, and clients that want it read it in
//! chunks of at most [`CHUNK`] through the `ReadBlob` stream. The gateway never reads these
//! files itself: it may run on another machine.
//!
//! Blobs expire with the events that name them (older than the oldest retained event), except a
//! session's last reply, which `clibotctl last` must still show; the whole store is also kept
//! under [`STORE_MAX`] bytes, oldest first.

use std::collections::HashSet;
use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The most text one event carries (bytes of UTF-8).
pub const EVENT_TEXT_MAX: usize = 256 * 1024;
/// The longest text kept in full; beyond it the end is cut (and the cut is said).
pub const BLOB_MAX: usize = 64 * 1024 * 1024;
/// The largest chunk one `ReadBlob` message carries.
pub const CHUNK: usize = 1024 * 1024;
/// All blobs together stay under this; the oldest go first.
pub const STORE_MAX: u64 = 512 * 1024 * 1024;

/// A text cut to fit an event, and where the rest is.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Capped {
    pub head: String,
    /// Empty when the text fit whole.
    pub blob_id: String,
    /// The whole text's length in bytes when `blob_id` is set, else 0.
    pub full_bytes: u64,
}

/// Why a blob cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    #[error("no blob {0:?}: it expired with the event log, or the id is wrong")]
    NotFound(String),
    #[error("offset {offset} is past the end of blob {id:?} ({len} bytes)")]
    PastEnd { id: String, offset: u64, len: u64 },
    #[error("reading blob {id:?}: {source}")]
    Io {
        id: String,
        #[source]
        source: std::io::Error,
    },
}

/// The directory of blobs.
#[derive(Debug, Clone)]
pub struct Blobs {
    dir: PathBuf,
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
pub fn head(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// A blob id is `<ms>-<hex>`: digits, one dash, hex digits. Anything else (a path, `..`) is
/// refused before it reaches the file system.
fn valid_id(id: &str) -> bool {
    let Some((ms, rand)) = id.split_once('-') else {
        return false;
    };
    !ms.is_empty()
        && ms.len() <= 20
        && ms.bytes().all(|b| b.is_ascii_digit())
        && !rand.is_empty()
        && rand.len() <= 32
        && rand.bytes().all(|b| b.is_ascii_hexdigit())
}

/// When the blob was written, from its id.
fn written_ms(id: &str) -> Option<i64> {
    id.split_once('-').and_then(|(ms, _)| ms.parse().ok())
}

impl Blobs {
    /// The blobs of the state directory whose event log is at `events_path`.
    pub fn beside(events_path: &Path) -> Blobs {
        let dir = events_path
            .parent()
            .map_or_else(|| PathBuf::from("blobs"), |p| p.join("blobs"));
        Blobs { dir }
    }

    /// `text` whole when it fits an event, else its head and a new blob holding it (cut at
    /// [`BLOB_MAX`]). When the blob cannot be written the head alone is kept, with a line that
    /// says so: the event still goes out.
    pub fn cap(&self, text: String) -> Capped {
        if text.len() <= EVENT_TEXT_MAX {
            return Capped {
                head: text,
                ..Capped::default()
            };
        }
        let full = head(&text, BLOB_MAX);
        let mut whole = full.to_string();
        if full.len() < text.len() {
            whole.push_str(&format!(
                "\n[clibot: the text was {} bytes; only the first {} are kept]\n",
                text.len(),
                full.len()
            ));
        }
        let shown = head(&text, EVENT_TEXT_MAX).to_string();
        // Unguessable, so that an id seen in one chat does not lead to another session's text.
        let rand = crate::ids::new_token().unwrap_or_else(|_| {
            let n = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            format!("{n:x}")
        });
        let id = format!("{}-{rand}", crate::store::now_ms());
        match self.write(&id, whole.as_bytes()) {
            Ok(()) => Capped {
                head: shown,
                blob_id: id,
                full_bytes: whole.len() as u64,
            },
            Err(e) => {
                tracing::error!(dir = %self.dir.display(), "cannot keep a long text: {e}");
                let mut shown = shown;
                shown.push_str(&format!(
                    "\n[clibot: {} more bytes could not be kept: {e}]",
                    text.len() - shown.len()
                ));
                Capped {
                    head: shown,
                    ..Capped::default()
                }
            }
        }
    }

    fn write(&self, id: &str, bytes: &[u8]) -> std::io::Result<()> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        let path = self.dir.join(id);
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        f.write_all(bytes)
    }

    /// The blob's length and up to [`CHUNK`] bytes from `offset`.
    pub fn read_chunk(&self, id: &str, offset: u64) -> Result<(Vec<u8>, u64), BlobError> {
        if !valid_id(id) {
            return Err(BlobError::NotFound(id.to_string()));
        }
        let io = |source| BlobError::Io {
            id: id.to_string(),
            source,
        };
        let mut f = match fs::File::open(self.dir.join(id)) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(BlobError::NotFound(id.to_string()));
            }
            Err(e) => return Err(io(e)),
        };
        let len = f.metadata().map_err(io)?.len();
        if offset > len {
            return Err(BlobError::PastEnd {
                id: id.to_string(),
                offset,
                len,
            });
        }
        f.seek(SeekFrom::Start(offset)).map_err(io)?;
        let want = (len - offset).min(CHUNK as u64) as usize;
        let mut buf = vec![0; want];
        f.read_exact(&mut buf).map_err(io)?;
        Ok((buf, len))
    }

    /// Removes blobs written before `keep_after_ms` that are not `pinned`, then the oldest
    /// unpinned ones while the store is over [`STORE_MAX`]. Returns how many were removed.
    pub fn expire(&self, keep_after_ms: i64, pinned: &HashSet<String>) -> usize {
        let Ok(rd) = fs::read_dir(&self.dir) else {
            return 0;
        };
        let mut all: Vec<(i64, String, u64)> = rd
            .flatten()
            .filter_map(|d| {
                let name = d.file_name().into_string().ok()?;
                let ms = written_ms(&name).filter(|_| valid_id(&name))?;
                let len = d.metadata().map(|m| m.len()).unwrap_or(0);
                Some((ms, name, len))
            })
            .collect();
        all.sort();
        let mut total: u64 = all.iter().map(|b| b.2).sum();
        let mut removed = 0;
        for (ms, name, len) in all {
            if pinned.contains(&name) {
                continue;
            }
            if (ms < keep_after_ms || total > STORE_MAX)
                && fs::remove_file(self.dir.join(&name)).is_ok()
            {
                removed += 1;
                total = total.saturating_sub(len);
            }
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Blobs) {
        let d = tempfile::tempdir().expect("tempdir");
        let b = Blobs::beside(&d.path().join("events.jsonl"));
        (d, b)
    }

    #[test]
    fn short_text_stays_in_the_event() {
        let (_d, b) = store();
        let c = b.cap("hello".into());
        assert_eq!(c.head, "hello");
        assert!(c.blob_id.is_empty());
        assert_eq!(c.full_bytes, 0);
    }

    #[test]
    fn long_text_is_cut_on_a_char_boundary_and_kept_whole() {
        let (_d, b) = store();
        // `€` is three bytes: 256 KiB is not a multiple of three, so the cut falls mid-char.
        let text = "€".repeat(EVENT_TEXT_MAX / 3 + 10);
        let c = b.cap(text.clone());
        assert!(c.head.len() <= EVENT_TEXT_MAX);
        assert!(text.starts_with(&c.head));
        assert_eq!(c.full_bytes, text.len() as u64);
        let mut got = Vec::new();
        let mut off = 0;
        loop {
            let (chunk, len) = b.read_chunk(&c.blob_id, off).expect("chunk");
            assert!(chunk.len() <= CHUNK);
            off += chunk.len() as u64;
            got.extend(chunk);
            if off >= len {
                break;
            }
        }
        assert_eq!(String::from_utf8(got).expect("utf8"), text);
    }

    #[test]
    fn ids_that_are_paths_are_refused() {
        let (_d, b) = store();
        for id in [
            "../events.jsonl",
            "1-../../x",
            "",
            "1-",
            "-ab",
            "12-zz",
            "1-a/b",
        ] {
            assert!(
                matches!(b.read_chunk(id, 0), Err(BlobError::NotFound(_))),
                "{id}"
            );
        }
    }

    #[test]
    fn offsets_past_the_end_are_an_error_and_the_end_is_empty() {
        let (_d, b) = store();
        let c = b.cap("x".repeat(EVENT_TEXT_MAX + 1));
        let len = c.full_bytes;
        assert!(b.read_chunk(&c.blob_id, len).expect("end").0.is_empty());
        assert!(matches!(
            b.read_chunk(&c.blob_id, len + 1),
            Err(BlobError::PastEnd { .. })
        ));
    }

    #[test]
    fn expiry_keeps_pinned_and_recent_blobs() {
        let (_d, b) = store();
        let old = b.cap("o".repeat(EVENT_TEXT_MAX + 1)).blob_id;
        let pinned = b.cap("p".repeat(EVENT_TEXT_MAX + 1)).blob_id;
        let keep: HashSet<String> = [pinned.clone()].into();
        let cutoff = written_ms(&pinned).expect("ms") + 1;
        assert_eq!(b.expire(cutoff, &keep), 1);
        assert!(b.read_chunk(&old, 0).is_err());
        assert!(b.read_chunk(&pinned, 0).is_ok());
    }
}
