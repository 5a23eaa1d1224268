//! Jobs proposed from a chat (`!!job add …`), waiting for their Add or Cancel button.
//!
//! Why the daemon keeps them, in `job_proposals.json`: the gateway holds nothing that matters,
//! and a card shown before a gateway or daemon restart must still work after it — a press
//! on Add then adds exactly the job the card showed, or says plainly that it expired. Why
//! they expire ([`TTL_MS`]): a card found days later in a chat's history must not add a job
//! whose session, owner or rights may have changed since (the rights are checked again when
//! Add is pressed anyway).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::JobSpec;
use crate::store::json_file::JsonFile;

/// How long a proposal waits for its button.
pub const TTL_MS: i64 = 15 * 60_000;
/// The most proposals kept (the oldest go first).
pub const MAX: usize = 64;

/// A job shown on a card, not added yet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proposal {
    pub spec: JobSpec,
    /// Who proposed it: only they confirm it.
    pub owner: String,
    pub made_ms: i64,
}

/// Why a proposal cannot be taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotTaken {
    #[error("that job card expired or was answered already: send !!job add again")]
    Gone,
    #[error("that job card is not yours: the person who sent !!job add answers it")]
    NotYours,
}

/// The proposals and their file.
pub struct Proposals {
    file: JsonFile,
    map: Mutex<BTreeMap<String, Proposal>>,
}

impl Proposals {
    pub fn open(state_dir: &Path) -> (Proposals, Option<String>) {
        let (map, file, warning) = JsonFile::open(
            state_dir,
            "job_proposals.json",
            "the job cards waiting for a button",
            "their buttons say they expired",
        );
        (
            Proposals {
                file,
                map: Mutex::new(map),
            },
            warning,
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Proposal>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `spec`, proposed by `owner`, under a new id.
    pub fn propose(&self, spec: JobSpec, owner: &str, now_ms: i64) -> String {
        let id = new_id();
        let mut map = self.lock();
        map.retain(|_, p| now_ms - p.made_ms <= TTL_MS);
        while map.len() >= MAX {
            let oldest = map
                .iter()
                .min_by_key(|(_, p)| p.made_ms)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => map.remove(&k),
                None => break,
            };
        }
        map.insert(
            id.clone(),
            Proposal {
                spec,
                owner: owner.to_string(),
                made_ms: now_ms,
            },
        );
        self.file.save(&*map);
        id
    }

    /// Takes proposal `id` for `owner` (it is gone afterwards): only its proposer, only
    /// before it expires.
    pub fn take(&self, id: &str, owner: &str, now_ms: i64) -> Result<Proposal, NotTaken> {
        let mut map = self.lock();
        let p = map.get(id).ok_or(NotTaken::Gone)?;
        if p.owner != owner {
            return Err(NotTaken::NotYours);
        }
        let p = map.remove(id).ok_or(NotTaken::Gone)?;
        self.file.save(&*map);
        if now_ms - p.made_ms > TTL_MS {
            return Err(NotTaken::Gone);
        }
        Ok(p)
    }
}

/// Eight random bytes in hex: a card's id cannot be guessed from another's.
fn new_id() -> String {
    let mut b = [0u8; 8];
    let filled = rustix::rand::getrandom(&mut b, rustix::rand::GetRandomFlags::empty());
    if filled.is_err() {
        // No randomness: the time still makes ids unique, and taking one needs its owner.
        b = crate::store::now_ms().to_le_bytes();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> JobSpec {
        JobSpec {
            name: name.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_proposal_is_taken_once_by_its_proposer_before_it_expires_even_after_a_restart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (p, w) = Proposals::open(dir.path());
        assert!(w.is_none());
        let id = p.propose(spec("a"), "telegram:1", 1000);
        assert_eq!(id.len(), 16);
        assert_eq!(p.take(&id, "telegram:2", 2000), Err(NotTaken::NotYours));
        let (p, _) = Proposals::open(dir.path());
        assert_eq!(
            p.take(&id, "telegram:1", 2000).map(|x| x.spec.name),
            Ok("a".to_string())
        );
        assert_eq!(p.take(&id, "telegram:1", 2000), Err(NotTaken::Gone), "once");
        let late = p.propose(spec("b"), "telegram:1", 1000);
        assert_eq!(
            p.take(&late, "telegram:1", 1000 + TTL_MS + 1),
            Err(NotTaken::Gone)
        );
        for i in 0..(MAX + 5) {
            p.propose(spec(&format!("j{i}")), "x", 5000 + i as i64);
        }
        assert_eq!(p.lock().len(), MAX, "bounded");
    }
}
