//! A map with a fixed capacity that forgets its oldest entries first.
//!
//! Anything the gateway keeps per chat, per user or per channel can be grown by strangers (a
//! DM costs them nothing), so every such table is one of these: at most [`MAX_PEERS`]
//! entries, the least recently inserted evicted first. What is evicted is only a cache or a
//! queue that is started again on demand; nothing durable lives here.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

/// Entries kept per table.
pub const MAX_PEERS: usize = 4096;

#[derive(Debug)]
pub struct Bounded<K, V> {
    map: HashMap<K, V>,
    order: VecDeque<K>,
    cap: usize,
}

impl<K: Eq + Hash + Clone, V> Default for Bounded<K, V> {
    fn default() -> Self {
        Bounded::new(MAX_PEERS)
    }
}

impl<K: Eq + Hash + Clone, V> Bounded<K, V> {
    pub fn new(cap: usize) -> Self {
        Bounded {
            map: HashMap::new(),
            order: VecDeque::new(),
            cap: cap.max(1),
        }
    }

    pub fn get(&self, k: &K) -> Option<&V> {
        self.map.get(k)
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Inserts or replaces; a new key evicts the oldest ones beyond the capacity.
    pub fn insert(&mut self, k: K, v: V) {
        if let Some(old) = self.map.get_mut(&k) {
            *old = v;
            return;
        }
        self.make_room(k.clone());
        self.map.insert(k, v);
    }

    /// The entry for `k`, inserted with `make` when absent.
    pub fn get_or_insert_with(&mut self, k: K, make: impl FnOnce() -> V) -> &mut V {
        if !self.map.contains_key(&k) {
            self.make_room(k.clone());
        }
        self.map.entry(k).or_insert_with(make)
    }

    /// Records `k` as the newest key and evicts the oldest ones so that it fits.
    fn make_room(&mut self, k: K) {
        while self.map.len() >= self.cap {
            match self.order.pop_front() {
                Some(old) => {
                    self.map.remove(&old);
                }
                None => break,
            }
        }
        self.order.push_back(k);
    }

    pub fn remove(&mut self, k: &K) -> Option<V> {
        let v = self.map.remove(k)?;
        self.order.retain(|o| o != k);
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_goes_first_and_the_size_stays_bounded() {
        let mut b = Bounded::new(3);
        for i in 0..10 {
            b.insert(i, i * 10);
        }
        assert_eq!(b.len(), 3);
        assert_eq!(b.get(&6), None);
        assert_eq!(b.get(&9), Some(&90));
        b.insert(9, 1);
        assert_eq!(b.len(), 3, "a replaced key is not a new one");
        assert_eq!(b.remove(&8), Some(80));
        *b.get_or_insert_with(11, || 5) += 1;
        assert_eq!(b.get(&11), Some(&6));
        assert_eq!(b.get(&7), Some(&70));
        b.insert(12, 0);
        assert_eq!(b.get(&7), None, "7 was the oldest");
        let mut d: Bounded<u64, ()> = Bounded::default();
        for i in 0..(MAX_PEERS as u64 + 100) {
            d.insert(i, ());
        }
        assert_eq!(d.len(), MAX_PEERS);
    }
}
