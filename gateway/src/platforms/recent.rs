//! Ids seen lately, so that an event a platform pushes again (it was not acknowledged in time,
//! or it came on two connections at once) is handed over once; and the randomness behind
//! reconnection jitter and idempotency keys.

use std::collections::{HashSet, VecDeque};

/// Event and message ids remembered.
pub const RECENT_IDS: usize = 4096;

/// Ids seen lately (bounded, oldest forgotten first).
#[derive(Default)]
pub struct Recent {
    set: HashSet<String>,
    order: VecDeque<String>,
}

impl Recent {
    /// Whether any of `ids` was seen; all of them are remembered from now on.
    pub fn seen(&mut self, ids: &[&str]) -> bool {
        let mut seen = false;
        for id in ids.iter().filter(|i| !i.is_empty()) {
            if self.set.contains(*id) {
                seen = true;
            } else {
                self.set.insert(id.to_string());
                self.order.push_back(id.to_string());
            }
        }
        while self.order.len() > RECENT_IDS {
            if let Some(old) = self.order.pop_front() {
                self.set.remove(&old);
            }
        }
        seen
    }
}

impl Recent {
    /// Forgets `ids`: an event that could not be taken is taken when pushed again.
    pub fn forget(&mut self, ids: &[&str]) {
        for id in ids {
            self.set.remove(*id);
        }
    }
}

/// A random 64-bit number (std's hasher keys are seeded from the OS).
pub fn random() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_ids_are_bounded() {
        let mut r = Recent::default();
        assert!(!r.seen(&["a", ""]));
        assert!(r.seen(&["a"]));
        for i in 0..RECENT_IDS {
            r.seen(&[&i.to_string()]);
        }
        assert!(!r.seen(&["a"]), "forgotten after {RECENT_IDS} newer ids");
        assert!(r.order.len() <= RECENT_IDS && r.set.len() == r.order.len());
    }
}
