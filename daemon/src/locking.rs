//! Locks that outlive a panic: the daemon keeps serving with what the lock guarded rather than
//! stopping every session because one task panicked while holding it.

use std::sync::{Mutex, MutexGuard};

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
