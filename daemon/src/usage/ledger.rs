//! The ledger of counted turns: `usage.jsonl` in the state directory, one line per turn,
//! appended when the turn's usage is read, rotated by size (four files of 16 MiB: years of
//! turns). The views (`clibotctl usage`, `!!usage`) sum it; the event log, which is trimmed,
//! is not where usage is kept.
//!
//! Why a turn is counted once: it is appended by the daemon that recorded the turn's end, keyed
//! by that event's sequence number, and a line whose number is already in the file is not
//! appended again (a turn read twice — a retry — counts once).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::{PlanWindow, Tokens};
use crate::store::rotating::{Limits, RotatingFile};

const LIMITS: Limits = Limits {
    max_bytes: 16 << 20,
    files: 4,
};

/// One counted turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Entry {
    pub time_ms: i64,
    /// The `turn_completed` event's sequence number.
    pub seq: u64,
    pub session: String,
    pub cli: String,
    /// "local" or PLATFORM:USER: whose session it is.
    pub owner: String,
    pub model: String,
    /// The account profile the session was started with; empty: none.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub profile: String,
    #[serde(flatten)]
    pub tokens: Tokens,
    pub calls: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<PlanWindow>,
    /// Dollars at list price, when money is estimated for the session ([`super::prices`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
}

/// How the views group turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    Session,
    User,
    Cli,
    Day,
    Model,
    Profile,
}

impl By {
    pub fn parse(s: &str) -> Option<By> {
        Some(match s {
            "" | "session" => By::Session,
            "user" => By::User,
            "cli" => By::Cli,
            "day" => By::Day,
            "model" => By::Model,
            "profile" => By::Profile,
            _ => return None,
        })
    }

    fn key(self, e: &Entry) -> String {
        match self {
            By::Session => e.session.clone(),
            By::User => e.owner.clone(),
            By::Cli => e.cli.clone(),
            By::Model => e.model.clone(),
            By::Profile => format!("{}:{}", e.cli, e.profile),
            By::Day => jiff::Timestamp::from_millisecond(e.time_ms)
                .map(|t| t.to_zoned(jiff::tz::TimeZone::system()).date().to_string())
                .unwrap_or_default(),
        }
    }
}

/// A group's sum.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    pub key: String,
    pub tokens: Tokens,
    pub turns: u64,
    pub calls: u64,
    /// Dollars of the priced turns among them (see `priced`).
    pub usd: f64,
    /// How many of the turns have a price.
    pub priced: u64,
}

/// Sums `entries` by `by`, biggest first (output, then input).
pub fn sum(entries: &[Entry], by: By) -> Vec<Row> {
    let mut rows: BTreeMap<String, Row> = BTreeMap::new();
    for e in entries {
        let key = by.key(e);
        let r = rows.entry(key.clone()).or_insert_with(|| Row {
            key,
            ..Default::default()
        });
        r.tokens.add(&e.tokens);
        r.turns += 1;
        r.calls += u64::from(e.calls);
        if let Some(usd) = e.usd {
            r.usd += usd;
            r.priced += 1;
        }
    }
    let mut rows: Vec<Row> = rows.into_values().collect();
    if by == By::Day {
        rows.sort_by(|a, b| a.key.cmp(&b.key));
    } else {
        rows.sort_by(|a, b| {
            (b.tokens.output, b.tokens.input, &a.key).cmp(&(
                a.tokens.output,
                a.tokens.input,
                &b.key,
            ))
        });
    }
    rows
}

/// The ledger and its file.
pub struct Ledger {
    path: PathBuf,
    file: Mutex<Option<RotatingFile>>,
    /// The turns counted since the daemon started, and those the current file held then.
    counted: Mutex<HashSet<u64>>,
}

impl Ledger {
    pub fn open(state_dir: &Path) -> (Ledger, Option<String>) {
        let path = state_dir.join("usage.jsonl");
        let (file, warning) = match RotatingFile::open(path.clone(), LIMITS) {
            Ok(f) => (Some(f), None),
            Err(e) => (
                None,
                Some(format!(
                    "cannot write the usage ledger {} ({e}): turns are not counted until it can be (chmod 600 it and restart)",
                    path.display()
                )),
            ),
        };
        let counted = read_file(&path).into_iter().map(|e| e.seq).collect();
        (
            Ledger {
                path,
                file: Mutex::new(file),
                counted: Mutex::new(counted),
            },
            warning,
        )
    }

    /// Appends `e` unless its turn was counted already; false then.
    pub fn record(&self, e: &Entry) -> bool {
        if !self
            .counted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(e.seq)
        {
            return false;
        }
        let Ok(mut line) = serde_json::to_vec(e) else {
            return false;
        };
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = file.as_mut()
            && let Err(err) = f.write(&line)
        {
            tracing::error!(path = %self.path.display(), "cannot append to the usage ledger: {err}");
        }
        true
    }

    /// The turns counted at or after `since_ms`, oldest first (every kept file).
    pub fn since(&self, since_ms: i64) -> Vec<Entry> {
        let _held = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        for i in (1..LIMITS.files).rev() {
            out.extend(read_file(&PathBuf::from(format!(
                "{}.{i}",
                self.path.display()
            ))));
        }
        out.extend(read_file(&self.path));
        out.retain(|e| e.time_ms >= since_ms);
        out
    }
}

/// The entries of one file; lines that do not parse (a torn last line) are skipped.
fn read_file(path: &Path) -> Vec<Entry> {
    std::fs::read_to_string(path)
        .map(|t| {
            t.lines()
                .filter_map(|l| serde_json::from_str::<Entry>(l).ok())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: u64, session: &str, owner: &str, output: u64) -> Entry {
        Entry {
            time_ms: 1_000 * seq as i64,
            seq,
            session: session.into(),
            cli: "claude".into(),
            owner: owner.into(),
            model: "m".into(),
            profile: String::new(),
            tokens: Tokens {
                input: 10,
                output,
                cache_read: 1,
                cache_write: 2,
            },
            calls: 2,
            windows: vec![],
            usd: None,
        }
    }

    #[test]
    fn a_turn_is_counted_once_across_a_restart_and_summed_by_group() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (l, w) = Ledger::open(dir.path());
        assert!(w.is_none());
        assert!(l.record(&entry(1, "a", "local", 5)));
        assert!(l.record(&entry(2, "b", "telegram:1", 7)));
        assert!(!l.record(&entry(2, "b", "telegram:1", 7)), "twice");
        let (l, _) = Ledger::open(dir.path());
        assert!(!l.record(&entry(1, "a", "local", 5)), "after a restart");
        assert!(l.record(&entry(3, "a", "local", 1)));
        let all = l.since(0);
        assert_eq!(all.len(), 3);
        let rows = sum(&all, By::Session);
        assert_eq!(
            rows.iter()
                .map(|r| (r.key.as_str(), r.tokens.output, r.turns, r.calls))
                .collect::<Vec<_>>(),
            [("b", 7, 1, 2), ("a", 6, 2, 4)]
        );
        assert_eq!(sum(&all, By::User)[0].key, "telegram:1");
        assert_eq!(l.since(2_500).len(), 1);
        assert_eq!(By::parse("week"), None);
    }
}
