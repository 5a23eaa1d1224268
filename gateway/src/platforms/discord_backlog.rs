//! How many live Discord messages wait for the router at most.

/// Live messages not yet taken up, bounded: while the daemon is away (catch-up fails) or the
/// router is slow, strangers and floods cannot make the gateway keep every message in memory.
/// What is dropped is read back from the channels' history once catch-up works (a recorded
/// channel's cursor did not move); a stranger's message is simply gone.
#[derive(Default)]
pub struct Backlog {
    pending: std::sync::atomic::AtomicUsize,
    overflowed: std::sync::atomic::AtomicBool,
}

/// Live messages waiting at most, queued and held together.
const BACKLOG: usize = 2048;

impl Backlog {
    /// Takes a place for one more message; `false` (and a catch-up is due) when full.
    pub fn admit(&self) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        if self.pending.fetch_add(1, SeqCst) >= BACKLOG {
            self.pending.fetch_sub(1, SeqCst);
            self.overflowed.store(true, SeqCst);
            return false;
        }
        true
    }

    /// Gives a message's place back.
    pub fn release(&self, n: usize) {
        use std::sync::atomic::Ordering::SeqCst;
        let _ = self
            .pending
            .fetch_update(SeqCst, SeqCst, |p| Some(p.saturating_sub(n)));
    }

    /// Whether messages were dropped since the last call.
    pub fn took_overflow(&self) -> bool {
        self.overflowed
            .swap(false, std::sync::atomic::Ordering::SeqCst)
    }
}
