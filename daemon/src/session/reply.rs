//! A session's last reply, whole (its blob when long), and the blobs that expire with the log.

use crate::core::*;
use crate::error::CoreError;
use crate::locking::lock;

/// A session's last reply, as `clibotctl last` shows it.
#[derive(Debug, Clone, Default)]
pub struct LastReply {
    pub text: String,
    pub seq: u64,
    pub blob_id: String,
    pub full_bytes: u64,
}

impl Daemon {
    /// The last completed turn's reply (its head when long, with the blob holding it whole).
    pub fn last_reply(&self, name: &str) -> Result<LastReply, CoreError> {
        let sessions = lock(&self.inner.sessions);
        let e = sessions
            .get(name)
            .ok_or_else(|| CoreError::NoSuchSession(name.to_string()))?;
        Ok(LastReply {
            text: e.rec.last_reply.clone().unwrap_or_default(),
            seq: e.rec.last_reply_seq,
            blob_id: e.rec.last_reply_blob.clone(),
            full_bytes: e.rec.last_reply_bytes,
        })
    }

    /// Removes blobs no retained event names, keeping every session's last reply.
    pub(crate) fn expire_blobs(&self) {
        let pinned: std::collections::HashSet<String> = lock(&self.inner.sessions)
            .values()
            .filter(|e| !e.rec.last_reply_blob.is_empty())
            .map(|e| e.rec.last_reply_blob.clone())
            .collect();
        let events = &self.inner.events;
        if let Some(oldest) = events.oldest_time_ms() {
            events.blobs().expire(oldest, &pinned);
        }
    }
}
