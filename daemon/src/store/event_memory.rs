//! The event log's memory, bounded in bytes as well as in events.
//!
//! The log keeps its newest `event_retention` events in memory for readers (a chat catching up,
//! `clibotctl events`). Counted in events alone that was up to 10,000 × 256 KiB: a hundred turns
//! of large output took a daemon from 20 to 157 MB. So past `[daemon] event_memory_bytes` the
//! oldest events kept are *slimmed*: their long texts are cut to [`SLIM_TEXT`] bytes in memory,
//! and where each one's line lies in `events.jsonl` is remembered; a reader that needs one
//! whole gets it read back from the file. The file keeps every retained event whole (a
//! compaction copies a slimmed event's line from the old file, not from memory).

use std::collections::VecDeque;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde::de::DeserializeOwned;

/// What a slimmed event keeps of each long text.
pub const SLIM_TEXT: usize = 1024;

/// Where an event's line lies in the file: its first byte and its length with the newline.
pub type Line = (u64, u32);

/// What the memory keeps: an event of the log (the log says how one is slimmed).
pub trait Record: Clone + DeserializeOwned {
    fn seq(&self) -> u64;
    /// This record with each long text cut to [`SLIM_TEXT`] bytes.
    fn slimmed(&self) -> Self;
    /// What it weighs in memory: the length of its line.
    fn weight(&self) -> usize;
}

/// One event as kept in memory.
#[derive(Debug, Clone)]
pub struct Kept<E> {
    pub ev: E,
    /// `None` when unknown (the write failed): then a slimmed event cannot be read back.
    pub line: Option<Line>,
    pub slim: bool,
    weight: usize,
}

/// The events kept, oldest first, with what they weigh.
#[derive(Debug)]
pub struct Memory<E> {
    kept: VecDeque<Kept<E>>,
    retention: usize,
    budget: usize,
    bytes: usize,
    /// Every event before this index is slimmed (or too small to be).
    first_full: usize,
}

impl<E: Record> Memory<E> {
    pub fn new(retention: usize, budget: usize) -> Memory<E> {
        Memory {
            kept: VecDeque::new(),
            retention: retention.max(1),
            budget,
            bytes: 0,
            first_full: 0,
        }
    }

    /// Keeps `ev` (its line in the file, and `weight`, its size as written), dropping the
    /// oldest past the retention and slimming the oldest past the byte budget. The newest event
    /// is never slimmed.
    pub fn push(&mut self, ev: E, line: Option<Line>, weight: usize) {
        self.bytes += weight;
        self.kept.push_back(Kept {
            ev,
            line,
            slim: false,
            weight,
        });
        while self.kept.len() > self.retention {
            if let Some(k) = self.kept.pop_front() {
                self.bytes -= k.weight;
            }
            self.first_full = self.first_full.saturating_sub(1);
        }
        while self.bytes > self.budget && self.first_full + 1 < self.kept.len() {
            let i = self.first_full;
            self.first_full += 1;
            let k = &mut self.kept[i];
            if k.line.is_none() {
                // Could not be read back: kept whole.
                continue;
            }
            let slim = k.ev.slimmed();
            let w = slim.weight();
            if w < k.weight {
                self.bytes -= k.weight - w;
                k.weight = w;
                k.ev = slim;
                k.slim = true;
            }
        }
    }

    pub fn len(&self) -> usize {
        self.kept.len()
    }

    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn front(&self) -> Option<&E> {
        self.kept.front().map(|k| &k.ev)
    }

    pub fn back(&self) -> Option<&E> {
        self.kept.back().map(|k| &k.ev)
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Kept<E>> {
        self.kept.iter()
    }

    /// Up to `limit` events with `seq > since`, as kept (slimmed ones to be read back).
    pub fn after(&self, since: u64, limit: usize) -> Vec<Kept<E>> {
        let start = self.kept.partition_point(|k| k.ev.seq() <= since);
        self.kept.range(start..).take(limit).cloned().collect()
    }

    /// Where event `seq`'s line lies now (after a compaction wrote a new file).
    pub fn relocate(&mut self, lines: &[(u64, Line)]) {
        let mut j = 0;
        for k in self.kept.iter_mut() {
            while j < lines.len() && lines[j].0 < k.ev.seq() {
                j += 1;
            }
            k.line = match lines.get(j) {
                Some((seq, line)) if *seq == k.ev.seq() => Some(*line),
                _ => None,
            };
        }
    }
}

/// Cuts `t` to [`SLIM_TEXT`] bytes (at a character boundary), into a new allocation:
/// truncating would keep the whole one.
pub fn cut(t: &mut String) {
    if t.len() > SLIM_TEXT {
        let mut at = SLIM_TEXT;
        while !t.is_char_boundary(at) {
            at -= 1;
        }
        let mut slim = String::with_capacity(at + '…'.len_utf8());
        slim.push_str(&t[..at]);
        slim.push('…');
        *t = slim;
    }
}

/// Reads the lines of slimmed events back from the log at `path` (opened once), each checked
/// to be the event it should be; one that is not (the file was replaced meanwhile) stays slim.
pub fn read_back<E: Record>(path: &Path, kept: Vec<Kept<E>>) -> Vec<E> {
    let mut file = None;
    kept.into_iter()
        .map(|k| {
            let (true, Some((at, len))) = (k.slim, k.line) else {
                return k.ev;
            };
            if file.is_none() {
                file = std::fs::File::open(path).ok();
            }
            file.as_mut()
                .and_then(|f| read_line::<E>(f, at, len))
                .filter(|e| e.seq() == k.ev.seq())
                .unwrap_or(k.ev)
        })
        .collect()
}

/// The raw line at `at` (`len` bytes), when it is a whole line.
pub fn line_bytes(f: &mut std::fs::File, at: u64, len: u32) -> Option<Vec<u8>> {
    f.seek(SeekFrom::Start(at)).ok()?;
    let mut buf = vec![0u8; len as usize];
    f.read_exact(&mut buf).ok()?;
    buf.ends_with(b"\n").then_some(buf)
}

fn read_line<E: Record>(f: &mut std::fs::File, at: u64, len: u32) -> Option<E> {
    serde_json::from_slice(&line_bytes(f, at, len)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, serde::Deserialize)]
    struct T {
        seq: u64,
        text: String,
    }

    impl Record for T {
        fn seq(&self) -> u64 {
            self.seq
        }
        fn slimmed(&self) -> T {
            let mut t = self.clone();
            cut(&mut t.text);
            t
        }
        fn weight(&self) -> usize {
            self.text.len() + 20
        }
    }

    fn turn(seq: u64, bytes: usize) -> T {
        T {
            seq,
            text: "é".repeat(bytes / 2),
        }
    }

    #[test]
    fn past_the_budget_the_oldest_are_slimmed_and_the_newest_kept_whole() {
        let mut m = Memory::new(1000, 100_000);
        for seq in 1..=20 {
            let ev = turn(seq, 20_000);
            let w = ev.weight();
            m.push(ev, Some((seq * 100, 10)), w);
        }
        assert!(m.bytes() <= 100_000 + 21_000, "{}", m.bytes());
        let slim: Vec<bool> = m.iter().map(|k| k.slim).collect();
        assert!(slim[0] && !slim[19], "{slim:?}");
        let text = &m.front().expect("kept").text;
        assert!(text.len() <= SLIM_TEXT + '…'.len_utf8(), "{}", text.len());
        // The memory itself goes, not only the length.
        assert!(text.capacity() <= SLIM_TEXT + 8, "{}", text.capacity());
        // Without a line to read it back from, an event is kept whole.
        let mut m = Memory::new(10, 10);
        m.push(turn(1, 5000), None, 5000);
        m.push(turn(2, 5000), Some((0, 1)), 5000);
        assert!(!m.iter().next().expect("kept").slim);
        // The retention still drops the oldest.
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn relocation_follows_the_new_file() {
        let mut m = Memory::new(10, usize::MAX);
        for seq in [3, 5, 8] {
            m.push(turn(seq, 10), Some((0, 1)), 10);
        }
        m.relocate(&[(3, (0, 7)), (8, (7, 9))]);
        let lines: Vec<Option<Line>> = m.iter().map(|k| k.line).collect();
        assert_eq!(lines, [Some((0, 7)), None, Some((7, 9))]);
    }
}
