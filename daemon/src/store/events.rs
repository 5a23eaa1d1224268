//! The durable event log: every change the daemon makes or sees, with gap-free sequence numbers
//! that keep increasing across restarts.
//!
//! On disk it is JSON lines (`events.jsonl`), appended with one `write` per event, so a killed
//! daemon loses nothing that was written: the kernel holds the bytes even if the process dies.
//! Appends are not synced one by one; a consumer's acknowledgement is, so before a cursor may
//! pass an event, [`EventLog::sync_through`] puts the log on disk up to it (a power loss never
//! leaves a cursor above the log's end). In memory the newest `retention` events are kept for replay; the file is compacted when
//! it reaches twice that. Readers never block writers: they copy what they need under a short
//! lock and wait on a watch channel for more.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::model::{Prompt, State};
use crate::store::blobs::{Blobs, EVENT_TEXT_MAX};
use crate::store::event_memory::{Line, Memory, Record, cut as slim_text};
use crate::store::{keep_bad_copy, now_ms, sane_seq, set_aside};

/// One event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub seq: u64,
    pub time_ms: i64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub session: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub session_id: String,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    DaemonStarted {
        pid: u32,
        version: String,
        readopted: u32,
    },
    Spawned {
        cli: String,
        dir: String,
        args: Vec<String>,
        /// The CLI's version (empty: unknown).
        #[serde(default)]
        cli_version: String,
    },
    Adopted {
        cli: String,
        tmux_session: String,
    },
    Released,
    InputSent {
        text: String,
        submitted: bool,
        /// Set when `text` is the head of a longer input ([`crate::store::blobs`]).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        blob_id: String,
        #[serde(default, skip_serializing_if = "is_zero")]
        full_bytes: u64,
    },
    KeysSent {
        keys: Vec<String>,
    },
    StateChanged {
        from: State,
        to: State,
        #[serde(default)]
        reason: String,
    },
    Exited {
        status: Option<i32>,
        reason: String,
        /// The last lines the pane showed, when it could still be read.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        output: String,
    },
    Stopped {
        forced: bool,
    },
    Error {
        message: String,
        #[serde(default)]
        kind: String,
    },
    TurnCompleted {
        text: String,
        source: crate::model::TurnEnd,
        /// Set when `text` is the head of a longer reply ([`crate::store::blobs`]).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        blob_id: String,
        #[serde(default, skip_serializing_if = "is_zero")]
        full_bytes: u64,
    },
    Waiting {
        prompt: Prompt,
    },
    PromptResolved {
        prompt_id: String,
        by: String,
        #[serde(default)]
        answer: String,
        /// Who answered ("telegram:123 (Ann)", "local"); empty when unknown.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        actor: String,
        /// For an automatic answer: the line the chats show.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        note: String,
    },
    InputQueued {
        text: String,
        position: u32,
    },
    Stalled {
        silent_ms: u64,
        /// How long the turn has been working.
        #[serde(default, skip_serializing_if = "is_zero")]
        working_ms: u64,
        /// The screen's last lines.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        screen: String,
    },
    /// Delivery to a chat bound to the session failed for good; the binding is suspended.
    ChatSuspended {
        platform: String,
        chat: String,
        reason: String,
    },
    /// A line for the session's chats: why an automatic decision fell back to a person, a
    /// delegation.
    Notice {
        text: String,
        #[serde(default)]
        kind: String,
    },
    /// The session's work was handed to another session.
    Delegated {
        to_session: String,
        to_cli: String,
        reason: String,
        #[serde(default)]
        detail: String,
        attempt: u32,
        /// CLIs of the chain passed over because they could not start, each with why.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        skipped: Vec<String>,
    },
    /// The running turn was interrupted through clibot (`cancel`).
    TurnCancelled {
        /// Who asked ("local", "PLATFORM:USER", "turn_timeout").
        by: String,
        /// How the CLI was told ("keys Escape", "api").
        #[serde(default)]
        how: String,
    },
    /// A prompt nobody answered for `remind_after` (again each interval): shown again.
    PromptReminded {
        prompt: Prompt,
        count: u32,
        age_ms: u64,
    },
    /// A prompt nobody answered for `escalate_after`: shown to the admins' chats as well.
    PromptEscalated {
        prompt: Prompt,
        age_ms: u64,
    },
    /// A prompt nobody answered within `prompt_timeout`; `action` follows ("wait", "deny",
    /// "decider").
    PromptTimedOut {
        prompt_id: String,
        action: String,
        age_ms: u64,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        detail: String,
    },
    /// Stopped after being idle, its conversation kept: a message wakes it.
    Hibernated {
        reason: String,
        #[serde(default)]
        resumes: bool,
    },
    /// A message woke the hibernated session: its CLI started again.
    Woken {
        #[serde(default)]
        resumed: bool,
    },
    /// A file the CLI put in its outbox, moved to `path` (in the session's directory) for
    /// the chats.
    FileSent {
        name: String,
        path: String,
        bytes: u64,
    },
    /// A chat user's pairing code was approved: their direct chat is told.
    Paired {
        platform: String,
        user: String,
        chat: String,
    },
    /// A job's run started: what it types, and why now.
    JobStarted {
        job: String,
        run: u64,
        trigger: crate::model::JobTrigger,
        prompt: String,
    },
    /// A job's run ended.
    JobFinished {
        job: String,
        run: u64,
        outcome: crate::model::JobOutcome,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        detail: String,
        /// Not for the chats: the job is quiet and had nothing to say.
        #[serde(default)]
        quiet: bool,
        /// The job paused itself after this run.
        #[serde(default)]
        paused: bool,
    },
    /// A job's run did not start, and why.
    JobSkipped {
        job: String,
        reason: String,
    },
    /// A job fell due while the daemon was down: `count` times from `due_ms`; `ran`: it runs
    /// once now.
    JobMissed {
        job: String,
        due_ms: i64,
        count: u64,
        ran: bool,
    },
    /// A goal's check failed: the session is sent back to work (round `round`).
    GoalRound {
        until: String,
        round: u32,
        exit_code: i32,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        output: String,
    },
    /// A goal ended, and why.
    GoalEnded {
        until: String,
        reason: crate::model::GoalEnd,
        rounds: u32,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        detail: String,
    },
    /// What the turn that ended as event `turn_seq` cost, from the CLI's own records.
    TurnUsage {
        turn_seq: u64,
        #[serde(flatten)]
        tokens: crate::model::Tokens,
        #[serde(default)]
        model: String,
        #[serde(default)]
        calls: u32,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        windows: Vec<crate::model::PlanWindow>,
        /// The chats show it under the reply (`[usage] footer`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        footer: bool,
        /// Dollars at list price, when money is estimated for the session.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usd: Option<f64>,
    },
    /// Written by a newer daemon; kept so that sequence numbers stay gap-free.
    #[serde(other)]
    Unknown,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Result of a read: the events, and the range lost to retention before them, if any.
#[derive(Debug, Default)]
pub struct Read {
    pub dropped: Option<(u64, u64)>,
    pub events: Vec<Event>,
}

struct Inner {
    file: Option<File>,
    lines_in_file: usize,
    mem: Memory<Event>,
    last_seq: u64,
    /// Every event up to this seq is on disk (synced).
    synced_seq: u64,
    /// The last append left part of its line in the file and it could not be cut off: the
    /// next append starts with a newline, so that its event is on a line of its own.
    torn: bool,
    /// A compaction is writing the new file (outside the lock).
    compacting: bool,
}

/// The log. Cheap to share behind an `Arc`.
pub struct EventLog {
    path: PathBuf,
    blobs: Blobs,
    retention: usize,
    inner: Mutex<Inner>,
    notify: watch::Sender<u64>,
}

impl EventLog {
    /// Opens (or creates) the log at `path`. `min_last_seq` is the highest sequence number known
    /// elsewhere (the session registry, every delivery cursor), so that numbering continues above
    /// it even if the log itself had to be set aside or lost its tail. Problems that were
    /// repaired are returned as warnings.
    pub fn open(path: &Path, retention: usize, min_last_seq: u64) -> (EventLog, Vec<String>) {
        Self::open_bounded(path, retention, DEFAULT_MEMORY, min_last_seq)
    }

    /// [`EventLog::open`], keeping at most about `memory` bytes of events in memory
    /// ([`crate::store::event_memory`]).
    pub fn open_bounded(
        path: &Path,
        retention: usize,
        memory: usize,
        min_last_seq: u64,
    ) -> (EventLog, Vec<String>) {
        let mut warnings = Vec::new();
        let mut mem: Memory<Event> = Memory::new(retention, memory);
        // Where the line being read starts.
        let mut offset: u64 = 0;
        let mut rewrite = false;
        let mut readable = true;
        // Lines that could not be used: the file as it was is copied aside before the rewrite.
        let mut bad_lines = 0usize;
        match File::open(path) {
            Ok(f) => {
                let mut reader = BufReader::new(f);
                let mut line = Vec::new();
                let mut lineno = 0usize;
                let mut unread_from: Option<usize> = None;
                loop {
                    line.clear();
                    let at = offset;
                    match reader.read_until(b'\n', &mut line) {
                        Ok(0) => break,
                        Ok(n) => offset += n as u64,
                        Err(e) if lineno == 0 => {
                            // Nothing could be read at all (a directory, say): leave it be.
                            readable = false;
                            warnings.push(unreadable(path, &e));
                            break;
                        }
                        Err(e) => {
                            warnings.push(format!("reading {}: {e}", path.display()));
                            unread_from = Some(lineno + 1);
                            break;
                        }
                    }
                    lineno += 1;
                    let complete = line.ends_with(b"\n");
                    // The line can be read back as it is only when it is the event whole.
                    let mut whole = complete;
                    let parsed = match serde_json::from_slice::<Event>(&line) {
                        Ok(ev) => Ok(ev),
                        // A line torn by a failed write (a full disk) with the next event
                        // appended right after it, by a daemon that did not repair it: the
                        // event at the end is whole.
                        Err(e) => match glued(&line) {
                            Some(ev) => {
                                warnings.push(format!(
                                    "{} line {lineno}: a torn event (an interrupted write) runs into event {}; the torn part was dropped, the event kept",
                                    path.display(),
                                    ev.seq
                                ));
                                bad_lines += 1;
                                rewrite = true;
                                whole = false;
                                Ok(ev)
                            }
                            None => Err(e),
                        },
                    };
                    match parsed {
                        Ok(ev) if !sane_seq(ev.seq) => {
                            warnings.push(format!(
                                "{} line {lineno}: sequence {} is above 2^53 (damaged or edited); line skipped",
                                path.display(),
                                ev.seq
                            ));
                            bad_lines += 1;
                            rewrite = true;
                        }
                        Ok(ev) if mem.back().is_none_or(|b| ev.seq > b.seq) => {
                            // A last line cut just before its newline: the next append would
                            // run into it, so the file is written again whole.
                            rewrite |= !complete;
                            let place = whole.then_some((at, line.len() as u32));
                            mem.push(ev, place, line.len());
                        }
                        Ok(ev) => {
                            warnings.push(format!(
                                "{} line {lineno}: sequence {} goes backwards; skipped",
                                path.display(),
                                ev.seq
                            ));
                            rewrite = true;
                        }
                        Err(_) if !complete => {
                            // The last write was torn by a crash: that event was never acknowledged.
                            warnings.push(format!(
                                "{}: incomplete last line (interrupted write) dropped",
                                path.display()
                            ));
                            rewrite = true;
                        }
                        Err(e) => {
                            // One bad line (a write torn by a full disk, say) costs that line
                            // only: the events after it are read on.
                            warnings.push(format!(
                                "{} line {lineno}: {e}; line skipped",
                                path.display()
                            ));
                            bad_lines += 1;
                            rewrite = true;
                        }
                    }
                }
                if let Some(at) = unread_from {
                    // The rest could not be read at all: the original is kept whole, aside.
                    match set_aside(path) {
                        Ok(kept) => warnings.push(format!(
                            "event log {} could not be read from line {at}; the original is kept at {}, readable events were kept",
                            path.display(),
                            kept.display()
                        )),
                        Err(e) => warnings.push(format!("could not set aside unreadable {}: {e}", path.display())),
                    }
                    rewrite = true;
                } else if bad_lines > 0 {
                    warnings.push(match keep_bad_copy(path) {
                        Ok(kept) => format!(
                            "event log {}: {bad_lines} line{} could not be used (whole or in part) and {} dropped, every other event was kept; the file as it was is kept at {}",
                            path.display(),
                            if bad_lines == 1 { "" } else { "s" },
                            if bad_lines == 1 { "was" } else { "were" },
                            kept.display()
                        ),
                        Err(e) => format!(
                            "event log {}: {bad_lines} line(s) dropped; a copy of the file as it was could not be kept ({e})",
                            path.display()
                        ),
                    });
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                readable = false;
                warnings.push(unreadable(path, &e));
            }
        }
        let min_last_seq = if sane_seq(min_last_seq) {
            min_last_seq
        } else {
            // The callers range-check what they load; this guards the numbering all the same.
            // Clamped, not ignored: numbering from below it could repeat numbers a chat was
            // already given, and that chat would wait for them for good.
            warnings.push(format!(
                "the highest event number known outside the event log ({min_last_seq}) is above 2^53; numbering continues from 2^53"
            ));
            crate::store::MAX_SEQ
        };
        let last_seq = mem.back().map_or(0, |e| e.seq).max(min_last_seq);
        let lines_in_file = mem.len();
        let log = EventLog {
            path: path.to_path_buf(),
            blobs: Blobs::beside(path),
            retention,
            inner: Mutex::new(Inner {
                file: None,
                lines_in_file,
                mem,
                last_seq,
                // What was read back is on disk; numbers above the file's end were never written.
                synced_seq: last_seq,
                torn: false,
                compacting: false,
            }),
            notify: watch::channel(last_seq).0,
        };
        if rewrite && let Err(e) = log.compact(log.lock()) {
            warnings.push(format!("cannot rewrite event log {}: {e}", path.display()));
        }
        {
            let mut inner = log.lock();
            if readable && let Err(e) = log.open_append(&mut inner) {
                warnings.push(format!(
                    "cannot open event log {} for writing: {e}; events are kept in memory only",
                    path.display()
                ));
            }
        }
        (log, warnings)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the log half-updated in a way that matters
        // more than stopping the daemon would; keep serving.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn open_append(&self, inner: &mut Inner) -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        inner.file = Some(
            OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&self.path)?,
        );
        Ok(())
    }

    /// Rewrites the file with just the events kept in memory. The slow part — writing and
    /// syncing the new file — runs without the log's lock, so appends and readers go on; the
    /// events appended meanwhile are added to it, and it takes the old file's place, under the
    /// lock.
    fn compact(&self, mut inner: std::sync::MutexGuard<'_, Inner>) -> std::io::Result<()> {
        // Each retained event whole: from memory, or for a slimmed one its line in the old file.
        let plan: Vec<(u64, Part)> = inner.mem.iter().map(|k| (k.ev.seq, part(k))).collect();
        let upto = inner.last_seq;
        inner.compacting = true;
        drop(inner);
        let tmp = self
            .path
            .with_extension(format!("compact.{}", std::process::id()));
        let written = crate::store::off_worker(|| -> std::io::Result<(File, Vec<(u64, Line)>)> {
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            let mut old = File::open(&self.path).ok();
            let mut lines = Vec::with_capacity(plan.len());
            let mut at = 0u64;
            for (seq, p) in &plan {
                let bytes = p.bytes(old.as_mut());
                f.write_all(&bytes)?;
                lines.push((*seq, (at, bytes.len() as u32)));
                at += bytes.len() as u64;
            }
            f.sync_data()?;
            Ok((f, lines))
        });
        let mut inner = self.lock();
        inner.compacting = false;
        let (mut f, mut lines) = match written {
            Ok(w) => w,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        };
        let mut at = lines.last().map_or(0, |(_, (a, l))| a + u64::from(*l));
        let newer: Vec<(u64, Part)> = inner
            .mem
            .iter()
            .filter(|k| k.ev.seq > upto)
            .map(|k| (k.ev.seq, part(k)))
            .collect();
        let mut old = File::open(&self.path).ok();
        for (seq, p) in newer {
            let bytes = p.bytes(old.as_mut());
            f.write_all(&bytes)?;
            lines.push((seq, (at, bytes.len() as u32)));
            at += bytes.len() as u64;
        }
        std::fs::rename(&tmp, &self.path)?;
        inner.lines_in_file = lines.len();
        inner.mem.relocate(&lines);
        inner.synced_seq = upto;
        inner.torn = false;
        self.open_append(&mut inner)
    }

    /// Appends an event and wakes every reader. Returns it with its sequence number. A text
    /// longer than [`crate::store::blobs::EVENT_TEXT_MAX`] is cut, its whole kept as a blob.
    pub fn append(&self, session: &str, session_id: &str, kind: EventKind) -> Event {
        let kind = self.cap(kind);
        let mut inner = self.lock();
        // Never wraps: what was loaded is at most 2^53 (`MAX_SEQ`), far from the end of u64.
        inner.last_seq = inner.last_seq.saturating_add(1);
        let ev = Event {
            seq: inner.last_seq,
            time_ms: now_ms(),
            session: session.to_string(),
            session_id: session_id.to_string(),
            kind,
        };
        let mut line = serde_json::to_vec(&ev).unwrap_or_default();
        line.push(b'\n');
        let place = self
            .write_line(&mut inner, &line)
            .map(|at| (at, line.len() as u32));
        inner.lines_in_file += 1;
        inner.mem.push(ev.clone(), place, line.len());
        // Without a file open (it could not be read or opened) there is nothing to compact,
        // and writing one would replace what is there.
        let due = inner.file.is_some()
            && !inner.compacting
            && inner.lines_in_file >= self.retention.saturating_mul(2).max(16);
        let seq = ev.seq;
        if due {
            // Readers learn of the event before the compaction's slow part.
            drop(inner);
            self.notify.send_replace(seq);
            let inner = self.lock();
            if let Err(e) = self.compact(inner) {
                tracing::error!(path = %self.path.display(), "cannot compact the event log: {e}");
            }
            return ev;
        }
        drop(inner);
        self.notify.send_replace(seq);
        ev
    }

    /// Appends one line to the file. A failed or partial write (a full disk) must not leave a
    /// line without its end, or the next event would be glued onto it and both lost: the file
    /// is cut back to where the line began, or, if even that fails, the next line starts with a
    /// newline of its own. The event stays in memory either way (readers get it).
    ///
    /// Returns where the line starts in the file when it was written whole.
    fn write_line(&self, inner: &mut Inner, line: &[u8]) -> Option<u64> {
        let torn = inner.torn;
        let f = inner.file.as_mut()?;
        let before = f.metadata().map(|m| m.len());
        let result = if torn {
            f.write_all(b"\n").and_then(|()| f.write_all(line))
        } else {
            f.write_all(line)
        };
        let Err(e) = result else {
            inner.torn = false;
            return before.ok().map(|b| b + u64::from(torn));
        };
        let repaired = match before {
            Ok(len) => f.set_len(len).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match repaired {
            Ok(()) => tracing::error!(
                path = %self.path.display(),
                seq = %inner.last_seq,
                "cannot append to the event log ({e}); the event is kept in memory only and the file was cut back to its last whole line: free space on the disk holding clibotd's state directory"
            ),
            Err(cut) => {
                inner.torn = true;
                tracing::error!(
                    path = %self.path.display(),
                    seq = %inner.last_seq,
                    "cannot append to the event log ({e}), and cannot cut off the partial line ({cut}); the next event starts on a new line: free space on the disk holding clibotd's state directory"
                );
            }
        }
        None
    }

    /// The blobs that hold long texts of this log's events.
    pub fn blobs(&self) -> &Blobs {
        &self.blobs
    }

    /// When the oldest event kept in memory happened (blobs older than that have no event
    /// left to name them).
    pub fn oldest_time_ms(&self) -> Option<i64> {
        self.lock().mem.front().map(|e| e.time_ms)
    }

    /// Cuts the long texts of an event, outside the log's lock (a blob write can be slow).
    fn cap(&self, kind: EventKind) -> EventKind {
        match kind {
            EventKind::TurnCompleted { text, source, .. } if text.len() > EVENT_TEXT_MAX => {
                let c = self.blobs.cap(text);
                EventKind::TurnCompleted {
                    text: c.head,
                    source,
                    blob_id: c.blob_id,
                    full_bytes: c.full_bytes,
                }
            }
            EventKind::InputSent {
                text, submitted, ..
            } if text.len() > EVENT_TEXT_MAX => {
                let c = self.blobs.cap(text);
                EventKind::InputSent {
                    text: c.head,
                    submitted,
                    blob_id: c.blob_id,
                    full_bytes: c.full_bytes,
                }
            }
            // Texts without a blob of their own are cut: no event outgrows a client's limit.
            EventKind::InputQueued { text, position } if text.len() > EVENT_TEXT_MAX => {
                EventKind::InputQueued {
                    text: cut(text),
                    position,
                }
            }
            EventKind::Notice { text, kind } if text.len() > EVENT_TEXT_MAX => EventKind::Notice {
                text: cut(text),
                kind,
            },
            EventKind::Error { message, kind } if message.len() > EVENT_TEXT_MAX => {
                EventKind::Error {
                    message: cut(message),
                    kind,
                }
            }
            EventKind::Exited {
                status,
                reason,
                output,
            } if output.len() > EVENT_TEXT_MAX => EventKind::Exited {
                status,
                reason,
                output: cut(output),
            },
            k => k,
        }
    }

    /// Makes sure every event up to `seq` is on disk (fsync), so that a cursor may pass it.
    /// Cheap when already done: the file is synced only when `seq` is above the last sync.
    pub fn sync_through(&self, seq: u64) -> std::io::Result<()> {
        let (file, upto) = {
            let inner = self.lock();
            if seq <= inner.synced_seq {
                return Ok(());
            }
            // One sync covers everything appended so far. It runs outside the lock, on a
            // duplicate of the descriptor, so appends go on meanwhile; should a compaction
            // replace the file in between, the new file was synced whole when written.
            let file = inner.file.as_ref().map(File::try_clone).transpose()?;
            (file, inner.last_seq)
        };
        if let Some(f) = file {
            crate::store::off_worker(|| f.sync_data())?;
        }
        let mut inner = self.lock();
        inner.synced_seq = inner.synced_seq.max(upto);
        Ok(())
    }

    /// Up to `limit` events with `seq > since`.
    /// Events slimmed in memory are read back whole from the file, outside the log's lock.
    pub fn read_after(&self, since: u64, limit: usize) -> Read {
        let kept = {
            let inner = self.lock();
            let Some(first) = inner.mem.front().map(|e| e.seq) else {
                return Read::default();
            };
            let dropped = (since.saturating_add(1) < first).then(|| (since + 1, first - 1));
            (dropped, inner.mem.after(since, limit))
        };
        let (dropped, kept) = kept;
        let events = if kept.iter().any(|k| k.slim) {
            crate::store::off_worker(|| crate::store::event_memory::read_back(&self.path, kept))
        } else {
            kept.into_iter().map(|k| k.ev).collect()
        };
        Read { dropped, events }
    }

    /// What the events kept in memory weigh (bytes of their lines, slimmed ones as slimmed).
    pub fn memory_bytes(&self) -> usize {
        self.lock().mem.bytes()
    }

    /// The newest sequence number.
    pub fn last_seq(&self) -> u64 {
        self.lock().last_seq
    }

    /// Wakes when a new event was appended.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.notify.subscribe()
    }

    /// When `session` last had an event, as far as the retained log knows.
    pub fn last_activity(&self, session: &str) -> Option<i64> {
        self.lock()
            .mem
            .iter()
            .rev()
            .find(|k| k.ev.session == session)
            .map(|k| k.ev.time_ms)
    }
}

impl Record for Event {
    fn seq(&self) -> u64 {
        self.seq
    }

    fn slimmed(&self) -> Event {
        let mut ev = self.clone();
        match &mut ev.kind {
            EventKind::InputSent { text, .. }
            | EventKind::TurnCompleted { text, .. }
            | EventKind::InputQueued { text, .. }
            | EventKind::Notice { text, .. } => slim_text(text),
            EventKind::Error { message, .. } => slim_text(message),
            EventKind::Exited { output, .. } => slim_text(output),
            EventKind::Stalled { screen, .. } => slim_text(screen),
            EventKind::Waiting { prompt }
            | EventKind::PromptReminded { prompt, .. }
            | EventKind::PromptEscalated { prompt, .. } => {
                slim_text(&mut prompt.text);
                slim_text(&mut prompt.context);
            }
            _ => {}
        }
        ev
    }

    fn weight(&self) -> usize {
        serde_json::to_vec(self).map_or(0, |v| v.len() + 1)
    }
}

/// The events kept in memory unless configured otherwise (`[daemon] event_memory_bytes`).
pub const DEFAULT_MEMORY: usize = 16 * 1024 * 1024;

/// How a compaction writes one retained event.
enum Part {
    /// Its line, made from memory.
    Made(Vec<u8>),
    /// Slimmed in memory: its line copied from the old file (made from the slim event, were
    /// the old line not there).
    Copied { line: Line, slim: Vec<u8> },
}

fn part(k: &crate::store::event_memory::Kept<Event>) -> Part {
    let mut made = serde_json::to_vec(&k.ev).unwrap_or_default();
    made.push(b'\n');
    match (k.slim, k.line) {
        (true, Some(line)) => Part::Copied { line, slim: made },
        _ => Part::Made(made),
    }
}

impl Part {
    fn bytes(&self, old: Option<&mut File>) -> Vec<u8> {
        match self {
            Part::Made(b) => b.clone(),
            Part::Copied { line, slim } => old
                .and_then(|f| crate::store::event_memory::line_bytes(f, line.0, line.1))
                .unwrap_or_else(|| slim.clone()),
        }
    }
}

/// The whole event at the end of a line that does not parse, when a torn line was glued to it
/// (`{"seq":5,"ti{"seq":6,...}`). Only an object that starts with `{"seq":` and runs to the
/// line's end counts, so a text field that happens to hold JSON is not mistaken for an event.
fn glued(line: &[u8]) -> Option<Event> {
    const START: &[u8] = b"{\"seq\":";
    let at = line
        .windows(START.len())
        .enumerate()
        .skip(1)
        .rfind(|(_, w)| *w == START)
        .map(|(i, _)| i)?;
    serde_json::from_slice::<Event>(&line[at..]).ok()
}

/// A text cut to [`EVENT_TEXT_MAX`] bytes, saying how much was left out.
fn cut(text: String) -> String {
    let mut out = crate::store::blobs::head(&text, EVENT_TEXT_MAX).to_string();
    out.push_str(&format!(
        "\n[clibot: {} more bytes left out]",
        text.len() - out.len()
    ));
    out
}

/// The warning for a log that cannot be read: appending to it, and compacting above all, could
/// write over what it holds, so it is left alone.
fn unreadable(path: &Path, e: &std::io::Error) -> String {
    format!(
        "cannot read event log {} ({e}): it is left alone and events are kept in memory only; make it readable by clibotd's user (chmod 600) and restart clibotd",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(i: usize) -> EventKind {
        EventKind::Error {
            message: format!("e{i}"),
            kind: String::new(),
        }
    }

    #[test]
    fn append_read_and_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("events.jsonl");
        let (log, w) = EventLog::open(&p, 100, 0);
        assert!(w.is_empty(), "{w:?}");
        for i in 0..5 {
            log.append("s", "id", kind(i));
        }
        let r = log.read_after(2, 10);
        assert_eq!(
            r.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            vec![3, 4, 5]
        );
        drop(log);
        let (log, w) = EventLog::open(&p, 100, 0);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(log.last_seq(), 5);
        assert_eq!(log.append("s", "id", kind(9)).seq, 6);
    }

    #[test]
    fn retention_reports_dropped_range_and_compacts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("events.jsonl");
        let (log, _) = EventLog::open(&p, 10, 0);
        for i in 0..50 {
            log.append("s", "", kind(i));
        }
        let r = log.read_after(0, 100);
        assert_eq!(r.dropped, Some((1, 40)));
        assert_eq!(r.events.len(), 10);
        assert_eq!(r.events[0].seq, 41);
        let lines = std::fs::read_to_string(&p).expect("read").lines().count();
        assert!(lines <= 20, "file compacted, has {lines} lines");
        drop(log);
        let (log, _) = EventLog::open(&p, 10, 0);
        assert_eq!(log.last_seq(), 50);
    }

    /// Past the memory budget the oldest events are slimmed in memory, yet every reader gets
    /// them whole (read back from the file), through compactions and a reopening.
    #[test]
    fn memory_is_bounded_in_bytes_and_readers_get_every_event_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("events.jsonl");
        let big = |i: usize| EventKind::TurnCompleted {
            text: format!("{i:04}-{}", "x".repeat(100_000)),
            source: crate::model::TurnEnd::Hook,
            blob_id: String::new(),
            full_bytes: 0,
        };
        let (log, _) = EventLog::open_bounded(&p, 30, 400_000, 0);
        for i in 0..100 {
            log.append("s", "", big(i));
        }
        // 30 events of 100 KB would be 3 MB; a few whole ones and the rest slim.
        assert!(log.memory_bytes() < 600_000, "{}", log.memory_bytes());
        let whole = |log: &EventLog| {
            let r = log.read_after(0, 1000);
            assert_eq!(r.events.len(), 30);
            for (n, e) in r.events.iter().enumerate() {
                let EventKind::TurnCompleted { text, .. } = &e.kind else {
                    panic!("kind");
                };
                assert_eq!(text.len(), 100_005, "event {} whole", e.seq);
                assert!(
                    text.starts_with(&format!("{:04}-", 70 + n)),
                    "{}",
                    &text[..8]
                );
            }
        };
        whole(&log);
        drop(log);
        let (log, w) = EventLog::open_bounded(&p, 30, 400_000, 0);
        assert!(w.is_empty(), "{w:?}");
        assert!(log.memory_bytes() < 600_000, "{}", log.memory_bytes());
        whole(&log);
        // Compacted again after the reopening: the file still holds them whole.
        for i in 100..160 {
            log.append("s", "", big(i));
        }
        let r = log.read_after(129, 1000);
        assert_eq!(r.events.len(), 30);
        assert!(r.events.iter().all(
            |e| matches!(&e.kind, EventKind::TurnCompleted { text, .. } if text.len() == 100_005)
        ));
        let lines = std::fs::read_to_string(&p).expect("read").lines().count();
        assert!(lines <= 60, "compacted: {lines}");
    }

    #[test]
    fn torn_last_line_is_dropped_and_a_bad_line_costs_only_itself() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("events.jsonl");
        let (log, _) = EventLog::open(&p, 100, 0);
        log.append("s", "", kind(1));
        log.append("s", "", kind(2));
        drop(log);
        let mut f = OpenOptions::new().append(true).open(&p).expect("open");
        f.write_all(b"{\"seq\":3,\"time_").expect("write");
        drop(f);
        let (log, w) = EventLog::open(&p, 100, 0);
        assert!(w.iter().any(|w| w.contains("incomplete")), "{w:?}");
        assert_eq!(log.append("s", "", kind(3)).seq, 3);
        drop(log);

        // Garbage in the middle costs that line only: every other event is read on, the file
        // as it was is copied aside, nothing is renamed away.
        let text = std::fs::read_to_string(&p).expect("read");
        let mut lines: Vec<&str> = text.lines().collect();
        lines.insert(1, "not json at all");
        std::fs::write(&p, lines.join("\n") + "\n").expect("write");
        let (log, w) = EventLog::open(&p, 100, 0);
        assert!(
            w.iter()
                .any(|w| w.contains("line 2") && w.contains("skipped")),
            "{w:?}"
        );
        assert!(
            w.iter().any(|w| w.contains("every other event was kept")),
            "{w:?}"
        );
        assert_eq!(log.read_after(0, 10).events.len(), 3);
        assert_eq!(
            crate::store::copies(dir.path(), "events.jsonl.bad-").len(),
            1
        );
        assert!(crate::store::copies(dir.path(), "events.jsonl.corrupt-").is_empty());
        assert_eq!(log.append("s", "", kind(5)).seq, 4);
        drop(log);
        let (log, w) = EventLog::open(&p, 100, 0);
        assert!(w.is_empty(), "repaired for good: {w:?}");
        assert_eq!(log.read_after(0, 10).events.len(), 4);
        // Numbering continues from the registry's number when that is higher.
        drop(log);
        let (log, _) = EventLog::open(&p, 100, 40);
        assert_eq!(log.append("s", "", kind(4)).seq, 41);
    }

    #[test]
    fn a_torn_line_glued_to_the_next_event_keeps_that_event() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("events.jsonl");
        std::fs::write(
            &p,
            "{\"seq\":1,\"time_ms\":1,\"type\":\"released\"}\n{\"seq\":2,\"ti{\"seq\":3,\"time_ms\":1,\"type\":\"released\"}\n{\"seq\":4,\"time_ms\":1,\"type\":\"released\"}\n",
        )
        .expect("write");
        let (log, w) = EventLog::open(&p, 100, 0);
        assert!(
            w.iter()
                .any(|w| w.contains("torn event") && w.contains("event 3")),
            "{w:?}"
        );
        let seqs: Vec<u64> = log.read_after(0, 10).events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [1, 3, 4]);
        assert_eq!(log.append("s", "", kind(5)).seq, 5);
    }

    #[test]
    fn numbers_above_the_bound_never_reach_the_numbering() {
        use crate::store::MAX_SEQ;
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("events.jsonl");
        std::fs::write(
            &p,
            format!(
                "{{\"seq\":1,\"time_ms\":1,\"type\":\"released\"}}\n{{\"seq\":{},\"time_ms\":1,\"type\":\"released\"}}\n{{\"seq\":18446744073709551615,\"time_ms\":1,\"type\":\"released\"}}\n{{\"seq\":-3,\"time_ms\":1,\"type\":\"released\"}}\n",
                MAX_SEQ + 1
            ),
        )
        .expect("write");
        let (log, w) = EventLog::open(&p, 100, u64::MAX);
        assert!(
            w.iter()
                .any(|w| w.contains("above 2^53") && w.contains("line 2")),
            "{w:?}"
        );
        assert!(
            w.iter()
                .any(|w| w.contains("18446744073709551615") && w.contains("above 2^53")),
            "{w:?}"
        );
        assert_eq!(
            log.append("s", "", kind(2)).seq,
            MAX_SEQ + 1,
            "clamped, no wrap"
        );
        assert_eq!(log.read_after(u64::MAX, 10).events.len(), 0, "no overflow");
        drop(log);
        std::fs::remove_file(&p).expect("rm");
        let (log, _) = EventLog::open(&p, 100, 40);
        assert_eq!(log.append("s", "", kind(3)).seq, 41);
    }

    #[test]
    fn a_failed_append_never_glues_the_next_event_onto_its_part() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("events.jsonl");
        let (log, _) = EventLog::open(&p, 100, 0);
        log.append("s", "", kind(1));
        // A full disk that cannot even be cut back: writes and truncation both fail.
        log.lock().file = Some(
            OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .expect("/dev/full"),
        );
        log.append("s", "", kind(2));
        assert!(
            log.lock().torn,
            "the next append must start a line of its own"
        );
        // Part of event 2 did reach the file before the disk filled.
        let mut f = OpenOptions::new().append(true).open(&p).expect("open");
        f.write_all(b"{\"seq\":2,\"time_ms\":17").expect("write");
        log.lock().file = Some(f);
        log.append("s", "", kind(3));
        assert!(!log.lock().torn);
        drop(log);
        let (log, w) = EventLog::open(&p, 100, 0);
        assert!(w.iter().any(|w| w.contains("line 2")), "{w:?}");
        let seqs: Vec<u64> = log.read_after(0, 10).events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [1, 3], "event 3 survived on its own line");
        assert_eq!(log.append("s", "", kind(4)).seq, 4);
    }

    #[test]
    fn sync_through_syncs_only_what_is_new() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("events.jsonl");
        let (log, _) = EventLog::open(&p, 100, 0);
        log.sync_through(0).expect("nothing to sync");
        for i in 0..3 {
            log.append("s", "", kind(i));
        }
        assert_eq!(log.lock().synced_seq, 0);
        log.sync_through(2).expect("sync");
        assert_eq!(
            log.lock().synced_seq,
            3,
            "one sync covers every append so far"
        );
        log.append("s", "", kind(4));
        log.sync_through(3).expect("already synced");
        assert_eq!(log.lock().synced_seq, 3);
        log.sync_through(4).expect("sync");
        assert_eq!(log.lock().synced_seq, 4);
    }

    #[test]
    fn a_log_that_lost_its_tail_numbers_above_the_given_minimum() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("events.jsonl");
        let (log, _) = EventLog::open(&p, 100, 0);
        for i in 0..6 {
            log.append("s", "", kind(i));
        }
        drop(log);
        // Only the first two lines reached the disk; a cursor had passed event 6.
        let text = std::fs::read_to_string(&p).expect("read");
        let kept: String = text.lines().take(2).map(|l| format!("{l}\n")).collect();
        std::fs::write(&p, kept).expect("truncate");
        let (log, w) = EventLog::open(&p, 100, 6);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(log.append("s", "", kind(7)).seq, 7);
    }

    #[test]
    fn a_last_line_without_its_newline_does_not_swallow_the_next_event() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("events.jsonl");
        std::fs::write(&p, "{\"seq\":1,\"time_ms\":1,\"type\":\"released\"}").expect("write");
        let (log, _) = EventLog::open(&p, 100, 0);
        assert_eq!(log.append("s", "", kind(2)).seq, 2);
        drop(log);
        let (log, w) = EventLog::open(&p, 100, 0);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(log.read_after(0, 10).events.len(), 2);
    }

    #[test]
    fn an_unreadable_log_is_left_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("events.jsonl");
        std::fs::create_dir(&p).expect("mkdir");
        let (log, w) = EventLog::open(&p, 10, 5);
        assert!(w.iter().any(|w| w.contains("chmod 600")), "{w:?}");
        for i in 0..50 {
            log.append("s", "", kind(i));
        }
        assert_eq!(log.last_seq(), 55);
        log.sync_through(55).expect("nothing on disk to sync");
        assert!(p.is_dir(), "left alone");
    }

    #[test]
    fn unknown_kinds_from_newer_versions_are_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("events.jsonl");
        std::fs::write(
            &p,
            "{\"seq\":1,\"time_ms\":1,\"type\":\"from_the_future\",\"x\":1}\n",
        )
        .expect("write");
        let (log, w) = EventLog::open(&p, 100, 0);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(log.read_after(0, 10).events[0].kind, EventKind::Unknown);
    }
}
