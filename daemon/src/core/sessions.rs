//! The sessions' table: every session the daemon knows, by name, behind one lock that only
//! this file takes.
//!
//! Why a part of its own: the table is what nearly every operation reads or changes, and
//! when each of them took the lock itself, nothing said which changes had to be made under
//! one lock, nothing kept the guard from living longer than meant, and a reader could not
//! tell a look at one session from a change to many. Here the table has one owner. Callers
//! ask for what they need — one session's fields, a change to one session, the sessions
//! that match — and get answers, never the guard.
//!
//! The rules the methods keep:
//! - The lock is never held across an `.await`: every closure given here is synchronous,
//!   and the guard is a `std::sync::MutexGuard`, which is not `Send`, so a future that held
//!   it could not be spawned. What is awaited (tmux, the network) is done before or after,
//!   with the lock released; only the small writes that must agree with the table (a
//!   session's queue file) are made inside.
//! - What must be seen or changed as one step goes in one closure: a check and the change
//!   it allows are made under the same lock, or another task may come in between.
//! - A closure must not call back into the table: the lock is not re-entrant, and the call
//!   would wait for itself.
//! - Changing several sessions as one step (taking a new name after checking that it is
//!   free and that the limits allow it, filling or reconciling the whole table) is what
//!   [`Sessions::transaction`] is for, and only that.
//!
//! The table is keyed by each session's name, which is also its record's `name`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::core::Entry;
use crate::error::CoreError;
use crate::locking::lock;
use crate::model::{SessionRecord, State};

/// The table as a [`Sessions::transaction`] sees it: every session, by name.
pub(crate) type Table = BTreeMap<String, Entry>;

/// The sessions' table, its lock private to this file (see the module's documentation).
#[derive(Default)]
pub(crate) struct Sessions {
    map: Mutex<Table>,
}

impl Sessions {
    /// Reads session `name`: `f`'s answer, or `None` when there is no such session.
    pub(crate) fn get<R>(&self, name: &str, f: impl FnOnce(&Entry) -> R) -> Option<R> {
        lock(&self.map).get(name).map(f)
    }

    /// Changes session `name`: `f`'s answer, or `None` when there is no such session (then
    /// nothing is changed). Everything `f` does is one step for every other reader.
    pub(crate) fn update<R>(&self, name: &str, f: impl FnOnce(&mut Entry) -> R) -> Option<R> {
        lock(&self.map).get_mut(name).map(f)
    }

    /// [`Sessions::update`] for a change that may be refused: `NoSuchSession` when there is
    /// no such session, else what `f` returns (a refusal from `f` should leave the entry as
    /// it found it: nothing undoes what it did before).
    pub(crate) fn try_update<R>(
        &self,
        name: &str,
        f: impl FnOnce(&mut Entry) -> Result<R, CoreError>,
    ) -> Result<R, CoreError> {
        match lock(&self.map).get_mut(name) {
            Some(e) => f(e),
            None => Err(CoreError::NoSuchSession(name.to_string())),
        }
    }

    /// Changes session `name` if it may be acted on: `NoSuchSession` when unknown,
    /// `Stopping` while it is being stopped or restarted (see [`usable`]).
    pub(crate) fn usable<R>(
        &self,
        name: &str,
        f: impl FnOnce(&mut Entry) -> R,
    ) -> Result<R, CoreError> {
        usable(&mut lock(&self.map), name).map(f)
    }

    /// Changes session `name` only while its CLI runs and nobody is stopping it: what the
    /// turn state machine's clock and screen reads do, which a stop or an exit makes moot.
    /// `None` otherwise.
    pub(crate) fn update_running<R>(
        &self,
        name: &str,
        f: impl FnOnce(&mut Entry) -> R,
    ) -> Option<R> {
        lock(&self.map)
            .get_mut(name)
            .filter(|e| !e.stopping && !e.rec.state.is_exited())
            .map(f)
    }

    /// A copy of session `name`'s record.
    pub(crate) fn record(&self, name: &str) -> Option<SessionRecord> {
        self.get(name, |e| e.rec.clone())
    }

    /// Session `name`'s id, what its events are recorded under.
    pub(crate) fn id_of(&self, name: &str) -> Option<String> {
        self.get(name, |e| e.rec.id.clone())
    }

    /// The CLI session `name` runs (its configured name).
    pub(crate) fn cli_of(&self, name: &str) -> Option<String> {
        self.get(name, |e| e.rec.cli.clone())
    }

    /// Session `name`'s state.
    pub(crate) fn state_of(&self, name: &str) -> Option<State> {
        self.get(name, |e| e.rec.state)
    }

    /// Whether session `name` is known and its CLI has not exited: what a loop that follows
    /// a session asks before each round.
    pub(crate) fn alive(&self, name: &str) -> bool {
        self.get(name, |e| !e.rec.state.is_exited())
            .unwrap_or(false)
    }

    /// Session `name`'s input lock: held while anything is typed into it, so that input is
    /// delivered in arrival order. Taken (awaited) by the caller, with the table unlocked.
    pub(crate) fn input_lock(&self, name: &str) -> Option<Arc<tokio::sync::Mutex<()>>> {
        self.get(name, |e| e.input.clone())
    }

    /// Session `name` is no longer being stopped or restarted (the stop failed, or what
    /// replaced it is ready): it may be used again. Nothing when it is gone.
    pub(crate) fn unreserve(&self, name: &str) {
        if let Some(e) = lock(&self.map).get_mut(name) {
            e.stopping = false;
        }
    }

    /// The sessions' names, in order.
    pub(crate) fn names(&self) -> Vec<String> {
        lock(&self.map).keys().cloned().collect()
    }

    /// Adds session `name`, replacing any entry of that name. Use
    /// [`Sessions::transaction`] when the name must be checked free first.
    pub(crate) fn insert(&self, name: String, entry: Entry) {
        lock(&self.map).insert(name, entry);
    }

    /// Puts `make(old)` in place of session `name` as one step, `old` being the entry it
    /// replaces (if any): for an entry made anew that carries some of the old one's state.
    pub(crate) fn replace(&self, name: &str, make: impl FnOnce(Option<Entry>) -> Entry) {
        let mut map = lock(&self.map);
        let old = map.remove(name);
        map.insert(name.to_string(), make(old));
    }

    /// Takes session `name` out of the table, returning its entry.
    pub(crate) fn remove(&self, name: &str) -> Option<Entry> {
        lock(&self.map).remove(name)
    }

    /// `f`'s answers for the sessions it answers for, in the order of their names: a
    /// consistent snapshot, read under one lock.
    pub(crate) fn filter_map<R>(&self, f: impl FnMut(&Entry) -> Option<R>) -> Vec<R> {
        lock(&self.map).values().filter_map(f).collect()
    }

    /// [`Sessions::filter_map`] that may change each session it visits: for a sweep that
    /// changes every session on its own terms (none depends on another's), as one step.
    pub(crate) fn filter_map_mut<R>(&self, f: impl FnMut(&mut Entry) -> Option<R>) -> Vec<R> {
        lock(&self.map).values_mut().filter_map(f).collect()
    }

    /// `f`'s first answer, trying the sessions in the order of their names.
    pub(crate) fn find_map<R>(&self, f: impl FnMut(&Entry) -> Option<R>) -> Option<R> {
        lock(&self.map).values().find_map(f)
    }

    /// Whether any session matches.
    pub(crate) fn any(&self, f: impl FnMut(&Entry) -> bool) -> bool {
        lock(&self.map).values().any(f)
    }

    /// How many sessions match.
    pub(crate) fn count(&self, mut f: impl FnMut(&Entry) -> bool) -> usize {
        lock(&self.map).values().filter(|e| f(e)).count()
    }

    /// Runs `f` on the whole table under its lock: for changes that involve several
    /// sessions and must be one step — taking a new name only after checking that it is free
    /// and that the limits allow one more session, filling or reconciling the table. Not for
    /// reading or changing one session ([`Sessions::get`], [`Sessions::update`]) nor for
    /// scans ([`Sessions::filter_map`]): the fewer places see the whole table, the fewer can
    /// break what it promises. Each caller says why it needs one.
    pub(crate) fn transaction<R>(&self, f: impl FnOnce(&mut Table) -> R) -> R {
        f(&mut lock(&self.map))
    }
}

/// Session `name` in `table`, unless it is unknown or being stopped (or restarted).
pub(crate) fn usable<'a>(table: &'a mut Table, name: &str) -> Result<&'a mut Entry, CoreError> {
    let e = table
        .get_mut(name)
        .ok_or_else(|| CoreError::NoSuchSession(name.to_string()))?;
    if e.stopping {
        return Err(CoreError::Stopping(name.to_string()));
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, state: State) -> Entry {
        Entry::new(SessionRecord {
            name: name.to_string(),
            id: format!("id-{name}"),
            state,
            ..Default::default()
        })
    }

    fn table(names: &[&str]) -> Sessions {
        let s = Sessions::default();
        for n in names {
            s.insert(n.to_string(), entry(n, State::Idle));
        }
        s
    }

    #[test]
    fn filter_map_answers_in_the_order_of_names() {
        let s = table(&["c", "a", "b"]);
        assert_eq!(s.filter_map(|e| Some(e.rec.name.clone())), ["a", "b", "c"]);
        assert_eq!(s.names(), ["a", "b", "c"]);
        let skipped = s.filter_map(|e| (e.rec.name != "b").then(|| e.rec.id.clone()));
        assert_eq!(skipped, ["id-a", "id-c"]);
    }

    #[test]
    fn find_map_takes_the_first_by_name() {
        let s = table(&["z", "m", "b"]);
        assert_eq!(
            s.find_map(|e| (e.rec.name != "b").then(|| e.rec.name.clone())),
            Some("m".to_string())
        );
        assert_eq!(s.find_map(|_| None::<()>), None);
    }

    #[test]
    fn remove_returns_the_entry() {
        let s = table(&["a", "b"]);
        let e = s.remove("a").map(|e| e.rec.id);
        assert_eq!(e.as_deref(), Some("id-a"));
        assert!(s.remove("a").is_none());
        assert_eq!(s.names(), ["b"]);
    }

    #[test]
    fn get_and_update_miss_an_unknown_name() {
        let s = table(&["a"]);
        assert_eq!(s.get("x", |_| ()), None);
        assert_eq!(s.update("x", |e| e.stopping = true), None);
        assert!(matches!(
            s.try_update("x", |_| Ok(())),
            Err(CoreError::NoSuchSession(n)) if n == "x"
        ));
        assert_eq!(
            s.update("a", |e| std::mem::replace(&mut e.stopping, true)),
            Some(false)
        );
        assert_eq!(s.get("a", |e| e.stopping), Some(true));
    }

    #[test]
    fn usable_refuses_a_session_being_stopped() {
        let s = table(&["a"]);
        assert!(s.usable("a", |e| e.stopping = true).is_ok());
        assert!(matches!(s.usable("a", |_| ()), Err(CoreError::Stopping(_))));
        assert!(matches!(
            s.usable("x", |_| ()),
            Err(CoreError::NoSuchSession(_))
        ));
        s.unreserve("a");
        assert!(s.usable("a", |_| ()).is_ok());
    }

    #[test]
    fn update_running_skips_stopped_and_exited_sessions() {
        let s = table(&["a"]);
        s.insert("b".into(), entry("b", State::Exited));
        assert_eq!(s.update_running("a", |_| 1), Some(1));
        assert_eq!(s.update_running("b", |_| 1), None);
        s.update("a", |e| e.stopping = true);
        assert_eq!(s.update_running("a", |_| 1), None);
        assert!(!s.alive("b"));
        assert!(s.alive("a"));
        assert!(!s.alive("x"));
    }

    #[test]
    fn replace_hands_the_old_entry_over() {
        let s = table(&["a"]);
        s.update("a", |e| e.rec.queue.push("queued".into()));
        s.replace("a", |old| {
            let mut new = entry("a", State::Starting);
            if let Some(old) = old {
                new.rec.queue = old.rec.queue;
            }
            new
        });
        assert_eq!(
            s.get("a", |e| (e.rec.state, e.rec.queue.clone())),
            Some((State::Starting, vec!["queued".to_string()]))
        );
        s.replace("n", |old| {
            assert!(old.is_none());
            entry("n", State::Idle)
        });
        assert_eq!(s.names(), ["a", "n"]);
    }

    #[test]
    fn a_transaction_is_one_step_for_other_threads() {
        // Two threads each take a free name of the form `t-N` after checking it is free: under
        // one transaction the check and the insert cannot interleave, so no name is taken twice
        // and every insert lands.
        let s = Arc::new(Sessions::default());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        s.transaction(|t| {
                            let name = (0..)
                                .map(|n| format!("t-{n}"))
                                .find(|n| !t.contains_key(n))
                                .unwrap_or_default();
                            std::thread::yield_now();
                            t.insert(name.clone(), entry(&name, State::Idle));
                        });
                    }
                })
            })
            .collect();
        for t in threads {
            assert!(t.join().is_ok());
        }
        assert_eq!(s.count(|_| true), 200);
    }

    #[test]
    fn a_transaction_answers_what_its_closure_returns() {
        let s = table(&["a", "b"]);
        let moved = s.transaction(|t| {
            let e = t.remove("a")?;
            t.insert("c".into(), e);
            Some(t.len())
        });
        assert_eq!(moved, Some(2));
        assert_eq!(s.names(), ["b", "c"]);
        assert_eq!(s.transaction(|t| t.remove("a").map(|_| ())), None);
        assert!(s.any(|e| e.rec.id == "id-a"));
        assert_eq!(s.count(|e| e.rec.state == State::Idle), 2);
    }
}
