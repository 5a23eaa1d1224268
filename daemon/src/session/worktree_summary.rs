//! `[worktrees] summary = true`: when a turn of a worktree session ends, its chats hear which
//! files the turn changed ("📝 changed 3 file(s): …"). A subscriber on the bus: it keeps each
//! session's last snapshot in memory (after a daemon restart the first turn only takes one).

use std::collections::HashMap;
use std::sync::Arc;

use crate::core::Daemon;
use crate::core::bus::Subscriber;
use crate::store::events::{Event, EventKind};
use crate::worktrees::summary::{self, Snapshot};

/// The most file names a summary lists.
const SHOWN: usize = 20;

#[derive(Default)]
pub(crate) struct WorktreeSummary {
    /// Each session's files at its last turn's end (or when its input was first typed).
    snaps: Arc<tokio::sync::Mutex<HashMap<String, Snapshot>>>,
}

impl Subscriber for WorktreeSummary {
    fn name(&self) -> &'static str {
        "worktree summary"
    }

    fn on_event(&self, d: &Daemon, ev: &Event) {
        let ended = match &ev.kind {
            EventKind::TurnCompleted { .. } => true,
            EventKind::InputSent { .. } => false,
            EventKind::Stopped { .. } => {
                let snaps = self.snaps.clone();
                let session = ev.session.clone();
                d.in_background(async move {
                    snaps.lock().await.remove(&session);
                });
                return;
            }
            _ => return,
        };
        if !d.live().config.worktrees.summary {
            return;
        }
        let Some(path) = d
            .get(&ev.session)
            .ok()
            .and_then(|r| r.worktree)
            .map(|w| w.path)
        else {
            return;
        };
        let Some(kept) = d.kept_worktrees().get(&ev.session) else {
            return;
        };
        let (snaps, session, d2) = (self.snaps.clone(), ev.session.clone(), d.clone());
        d.in_background(async move {
            let d3 = d2.clone();
            d3.in_worktree_jail(&kept, summarize(snaps, session, path, d2, ended))
                .await;
        });
    }
}

/// Takes the session's snapshot; at a turn's end, tells what changed since the last one.
async fn summarize(
    snaps: Arc<tokio::sync::Mutex<HashMap<String, Snapshot>>>,
    session: String,
    path: std::path::PathBuf,
    d2: Daemon,
    ended: bool,
) {
    // One session's turns in order: the lock is held while its files are read.
    let mut snaps = snaps.lock().await;
    if !ended {
        // A first turn since the daemon started: where it begins.
        if !snaps.contains_key(&session)
            && let Some(s) = summary::snapshot(&path).await
        {
            snaps.insert(session, s);
        }
        return;
    }
    let Some(now) = summary::snapshot(&path).await else {
        return;
    };
    let before = snaps.insert(session.clone(), now.clone());
    let Some(before) = before else {
        return;
    };
    let files = summary::changed(&path, &before, &now).await;
    if files.is_empty() {
        return;
    }
    let mut shown = files
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if files.len() > SHOWN {
        shown.push_str(&format!(" (+{} more)", files.len() - SHOWN));
    }
    d2.notice(
        &session,
        "worktree",
        &format!("📝 this turn changed {} file(s): {shown}", files.len()),
    );
}
