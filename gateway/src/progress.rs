//! The progress watchdog: each platform's receive loop proves that it still works by completing
//! *cycles* — a batch fetched from the platform **and** handed over and handled (Telegram: one
//! `getUpdates` and the updates it returned; Discord and Feishu: the connection found alive and
//! what arrived handled). A loop that has not completed a cycle within `[gateway] stall_after`
//! (90 s by default) is stalled: the gateway aborts its receive tasks and starts them again
//! (with backoff), says so on stderr, and reports it to the daemon (`clibotctl status`, the
//! metric `clibot_gateway_last_progress_seconds`).
//!
//! Progress is measured on both sides: the receive loop marks [`Progress::cycle`], and the
//! router marks each message it is handling ([`Progress::handling`]); a message handled for
//! longer than the bound stalls the platform as well, even where the receive loop goes on.
//!
//! The logic takes the time as an argument (`now`), so it is tested without waiting.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// `[gateway] stall_after` when it is not set.
pub const DEFAULT_STALL_AFTER: Duration = Duration::from_secs(90);

/// `[gateway] down_notice_after` when it is not set.
pub const DEFAULT_DOWN_NOTICE_AFTER: Duration = Duration::from_secs(600);

/// The longest Telegram long poll (seconds), whatever the bound.
const LONGEST_POLL: u64 = 30;

#[derive(Debug)]
struct State {
    /// When the last cycle completed (or the loop was (re)started, which counts as one).
    last: Instant,
    /// The same as Unix ms, for the report; 0 until the first cycle.
    last_ms: i64,
    /// The last real cycle (a restart is none), or when the platform was set up: how long it
    /// has been down.
    last_cycle: Instant,
    /// Since when the router is handling a message (the oldest still being handled).
    handling: Option<(u64, Instant)>,
    next_handling: u64,
    /// Receive loops restarted because they stalled, and when the last one was (Unix ms).
    restarts: u32,
    last_restart_ms: i64,
    /// Whether the loop is stalled now (set by [`Progress::check`], cleared by a cycle).
    stalled: bool,
}

/// One platform's progress, shared by its receive loop, its router and the watchdog.
#[derive(Clone, Debug)]
pub struct Progress {
    state: Arc<Mutex<State>>,
    stall_after: Duration,
}

/// Marks the router's handling of one message; dropped when it is done.
pub struct Handling {
    progress: Progress,
    id: u64,
}

impl Handling {
    /// The handling is known to wait (for clibotd to come back): it starts over now.
    pub fn renew(&mut self) {
        let mut s = self.progress.lock();
        if s.handling.is_some_and(|(id, _)| id == self.id) {
            s.handling = Some((self.id, Instant::now()));
        }
    }
}

impl Drop for Handling {
    fn drop(&mut self) {
        let mut s = self.progress.lock();
        if s.handling.is_some_and(|(id, _)| id == self.id) {
            s.handling = None;
        }
    }
}

impl Default for Progress {
    fn default() -> Progress {
        Progress::new(DEFAULT_STALL_AFTER)
    }
}

impl Progress {
    /// `stall_after` zero is taken as the default (the watchdog cannot be turned off: a loop
    /// that stalls unseen is what it is for).
    pub fn new(stall_after: Duration) -> Progress {
        let stall_after = if stall_after.is_zero() {
            DEFAULT_STALL_AFTER
        } else {
            stall_after
        };
        Progress {
            state: Arc::new(Mutex::new(State {
                last: Instant::now(),
                last_ms: 0,
                last_cycle: Instant::now(),
                handling: None,
                next_handling: 0,
                restarts: 0,
                last_restart_ms: 0,
                stalled: false,
            })),
            stall_after,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn stall_after(&self) -> Duration {
        self.stall_after
    }

    /// How long a Telegram long poll may wait for updates: at most a third of the bound (and
    /// at most 30 s), so that a quiet but healthy loop completes a cycle well within it.
    pub fn poll_timeout_secs(&self) -> u32 {
        let third = self.stall_after.as_secs() / 3;
        third.clamp(1, LONGEST_POLL) as u32
    }

    /// How often a connection-based platform (Discord, Feishu) checks that its connection is
    /// alive and marks a cycle: a sixth of the bound, between 100 ms and 15 s.
    pub fn tick(&self) -> Duration {
        (self.stall_after / 6).clamp(Duration::from_millis(100), Duration::from_secs(15))
    }

    /// A whole cycle completed: a batch fetched and handled (or the connection found alive
    /// with nothing waiting).
    pub fn cycle(&self) {
        self.cycle_at(Instant::now(), now_ms());
    }

    fn cycle_at(&self, now: Instant, now_ms: i64) {
        let mut s = self.lock();
        s.last = now;
        s.last_ms = now_ms;
        s.last_cycle = now;
        s.stalled = false;
    }

    /// The receive loop was (re)started: it gets a whole bound to complete its first cycle.
    pub fn started(&self) {
        let mut s = self.lock();
        s.last = Instant::now();
        s.handling = None;
    }

    /// The router takes a message; handling it ends when the guard is dropped.
    pub fn handling(&self) -> Handling {
        self.handling_at(Instant::now())
    }

    fn handling_at(&self, now: Instant) -> Handling {
        let mut s = self.lock();
        s.next_handling += 1;
        let id = s.next_handling;
        s.handling = Some((id, now));
        Handling {
            progress: self.clone(),
            id,
        }
    }

    /// When progress was last proven: the last cycle, or the start of a message still being
    /// handled if that is older (a handler holding the loop is no progress).
    fn progress_at(s: &State) -> Instant {
        match s.handling {
            Some((_, since)) if since < s.last => since,
            _ => s.last,
        }
    }

    /// How long the loop has gone without progress, when that is longer than the bound.
    pub fn stalled_for(&self, now: Instant) -> Option<Duration> {
        let s = self.lock();
        let idle = now.saturating_duration_since(Self::progress_at(&s));
        (idle > self.stall_after).then_some(idle)
    }

    /// How long the platform has gone without a completed cycle, restarts or not (since it
    /// was set up, before the first): how long it has been down.
    pub fn down_for(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.lock().last_cycle)
    }

    /// Counts a restart of the stalled loop.
    pub fn restarted(&self) {
        let mut s = self.lock();
        s.restarts += 1;
        s.last_restart_ms = now_ms();
        s.stalled = true;
    }

    /// Waits until the loop stalls; returns how long it went without progress.
    pub async fn stalled(&self) -> Duration {
        loop {
            if let Some(idle) = self.stalled_for(Instant::now()) {
                return idle;
            }
            tokio::time::sleep(self.tick()).await;
        }
    }

    /// What the report to the daemon carries: the last cycle (Unix ms, 0 = none yet), the
    /// restarts, the last restart (Unix ms), and whether the loop is stalled now.
    pub fn report(&self) -> (i64, u32, i64, bool) {
        let s = self.lock();
        let stalled = s.stalled
            || Instant::now().saturating_duration_since(Self::progress_at(&s)) > self.stall_after;
        (s.last_ms, s.restarts, s.last_restart_ms, stalled)
    }
}

/// Unix time in milliseconds (0 if the clock is before 1970).
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUND: Duration = Duration::from_secs(90);

    #[test]
    fn a_loop_that_completes_cycles_is_not_stalled() {
        let p = Progress::new(BOUND);
        let t0 = Instant::now();
        assert_eq!(p.stalled_for(t0 + Duration::from_secs(60)), None);
        p.cycle_at(t0 + Duration::from_secs(80), 1);
        assert_eq!(p.stalled_for(t0 + Duration::from_secs(160)), None);
        assert_eq!(
            p.stalled_for(t0 + Duration::from_secs(171)),
            Some(Duration::from_secs(91))
        );
    }

    #[test]
    fn a_handler_that_holds_a_message_stalls_the_platform_even_while_the_loop_goes_on() {
        let p = Progress::new(BOUND);
        let t0 = Instant::now();
        let h = p.handling_at(t0 + Duration::from_secs(10));
        // The receive loop still marks cycles (Discord, Feishu hand over without waiting).
        p.cycle_at(t0 + Duration::from_secs(95), 1);
        assert_eq!(
            p.stalled_for(t0 + Duration::from_secs(101)),
            Some(Duration::from_secs(91))
        );
        drop(h);
        assert_eq!(p.stalled_for(t0 + Duration::from_secs(101)), None);
    }

    #[test]
    fn only_the_current_handling_counts() {
        let p = Progress::new(BOUND);
        let t0 = Instant::now();
        let first = p.handling_at(t0);
        let second = p.handling_at(t0 + Duration::from_secs(5));
        // The first guard going late does not clear the second.
        drop(first);
        p.cycle_at(t0 + Duration::from_secs(200), 1);
        assert!(p.stalled_for(t0 + Duration::from_secs(200)).is_some());
        drop(second);
        assert!(p.stalled_for(t0 + Duration::from_secs(200)).is_none());
    }

    #[test]
    fn restarts_are_counted_and_a_cycle_ends_the_stall() {
        let p = Progress::new(BOUND);
        p.restarted();
        p.restarted();
        let (last, restarts, at, stalled) = p.report();
        assert_eq!((last, restarts, stalled), (0, 2, true));
        assert!(at > 0);
        p.cycle();
        let (last, restarts, _, stalled) = p.report();
        assert!(last > 0);
        assert_eq!((restarts, stalled), (2, false));
    }

    #[test]
    fn a_restart_gives_a_new_bound_but_does_not_end_the_outage() {
        let p = Progress::new(Duration::from_millis(50));
        std::thread::sleep(Duration::from_millis(80));
        assert!(p.stalled_for(Instant::now()).is_some());
        p.restarted();
        p.started();
        assert!(p.stalled_for(Instant::now()).is_none());
        assert!(p.down_for(Instant::now()) >= Duration::from_millis(80));
        p.cycle();
        assert!(p.down_for(Instant::now()) < Duration::from_millis(80));
    }

    #[test]
    fn the_long_poll_and_the_tick_fit_the_bound() {
        assert_eq!(Progress::new(BOUND).poll_timeout_secs(), 30);
        assert_eq!(Progress::new(Duration::from_secs(3)).poll_timeout_secs(), 1);
        assert_eq!(Progress::new(Duration::from_secs(1)).poll_timeout_secs(), 1);
        assert_eq!(Progress::new(BOUND).tick(), Duration::from_secs(15));
        assert_eq!(
            Progress::new(Duration::from_secs(3)).tick(),
            Duration::from_millis(500)
        );
        assert_eq!(Progress::new(Duration::ZERO).stall_after(), BOUND);
    }
}
