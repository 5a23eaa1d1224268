//! A bound on how long one outgoing message may wait out a platform's rate limit.
//!
//! Platforms answer flood control with "retry after N seconds". Waiting that out forever holds
//! everything queued behind the message (and, before egress got per-chat queues, every chat's
//! incoming messages too). So each message gets a [`Budget`] of time: `[gateway] rate_limit_wait`
//! (10 minutes) from its first try, however many times the platform asks to wait within it — a 429 says when to try
//! again, so it costs time, never a try. When the budget is spent the send fails with
//! [`RateLimited`], which says how long the platform wants the chat left alone; the caller
//! gives the message up, counts it, and tells the chat once that cooldown is over.

use std::time::Duration;

use tokio::time::Instant;

/// Longest a message may spend waiting out rate limits, unless `[gateway] rate_limit_wait`
/// says otherwise.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(600);

/// `[gateway] rate_limit_wait`, in milliseconds, for every platform of this gateway.
static MAX_WAIT_MS: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(DEFAULT_MAX_WAIT.as_millis() as u64);

/// Sets how long one message may wait out rate limits.
pub fn set_max_wait(d: Duration) {
    MAX_WAIT_MS.store(
        d.as_millis().min(u128::from(u64::MAX)) as u64,
        std::sync::atomic::Ordering::Relaxed,
    );
}

fn max_wait() -> Duration {
    Duration::from_millis(MAX_WAIT_MS.load(std::sync::atomic::Ordering::Relaxed))
}

/// A message given up because the platform kept rate-limiting its chat.
#[derive(Debug, Clone)]
pub struct RateLimited {
    /// "Telegram", "Discord", "Feishu".
    pub platform: &'static str,
    /// When the platform said the chat may be written to again.
    pub until: Instant,
}

impl std::fmt::Display for RateLimited {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let left = self.until.saturating_duration_since(Instant::now());
        write!(
            f,
            "{} kept rate-limiting this chat (for over {}s); the chat may be written to again in {}s",
            self.platform,
            max_wait().as_secs(),
            left.as_secs()
        )
    }
}

impl std::error::Error for RateLimited {}

/// Whether an error is a message given up to rate limiting.
pub fn rate_limited(e: &anyhow::Error) -> Option<&RateLimited> {
    e.downcast_ref::<RateLimited>()
}

/// One message's allowance of rate-limit waits.
#[derive(Debug)]
pub struct Budget {
    platform: &'static str,
    deadline: Instant,
}

impl Budget {
    pub fn new(platform: &'static str) -> Budget {
        Budget {
            platform,
            deadline: Instant::now() + max_wait(),
        }
    }

    /// The platform asked to wait `d` before the next try: waits it out when the next try
    /// still falls within the budget's time, else gives the message up.
    pub async fn wait(&mut self, d: Duration) -> Result<(), RateLimited> {
        let next = Instant::now() + d;
        if next > self.deadline {
            return Err(RateLimited {
                platform: self.platform,
                until: next,
            });
        }
        tokio::time::sleep_until(next).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn many_waits_cost_time_not_tries_and_a_wait_past_the_budget_is_not_begun() {
        let mut b = Budget::new("Telegram");
        for _ in 0..25 {
            b.wait(Duration::from_millis(1))
                .await
                .expect("within the time");
        }
        let e = b
            .wait(DEFAULT_MAX_WAIT)
            .await
            .expect_err("past the budget's time");
        assert!(e.to_string().contains("Telegram kept rate-limiting"), "{e}");
        let mut b = Budget::new("Discord");
        let t0 = Instant::now();
        let e = b
            .wait(DEFAULT_MAX_WAIT + Duration::from_secs(1))
            .await
            .expect_err("too long");
        assert!(t0.elapsed() < Duration::from_secs(1), "nothing waited");
        assert!(e.until >= t0 + DEFAULT_MAX_WAIT);
    }
}
