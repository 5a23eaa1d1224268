//! A bound on how long one outgoing message may wait out a platform's rate limit.
//!
//! Platforms answer flood control with "retry after N seconds". Waiting that out forever holds
//! everything queued behind the message (and, before egress got per-chat queues, every chat's
//! incoming messages too). So each message gets a [`Budget`]: at most [`MAX_TRIES`] tries and
//! [`MAX_WAIT`] from its first try. When the budget is spent the send fails with
//! [`RateLimited`], which says how long the platform wants the chat left alone; the caller
//! gives the message up, counts it, and tells the chat once that cooldown is over.

use std::time::Duration;

use tokio::time::Instant;

/// Tries per message, the first one included.
pub const MAX_TRIES: u32 = 5;
/// Longest a message may spend waiting out rate limits.
pub const MAX_WAIT: Duration = Duration::from_secs(120);

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
            "{} kept rate-limiting this chat ({MAX_TRIES} tries or {}s per message); the chat may be written to again in {}s",
            self.platform,
            MAX_WAIT.as_secs(),
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
    tries: u32,
    deadline: Instant,
}

impl Budget {
    pub fn new(platform: &'static str) -> Budget {
        Budget {
            platform,
            tries: 1,
            deadline: Instant::now() + MAX_WAIT,
        }
    }

    /// The platform asked to wait `d` before the next try: waits it out when the budget
    /// allows another try after it, else gives the message up.
    pub async fn wait(&mut self, d: Duration) -> Result<(), RateLimited> {
        let next = Instant::now() + d;
        if self.tries >= MAX_TRIES || next > self.deadline {
            return Err(RateLimited {
                platform: self.platform,
                until: next,
            });
        }
        self.tries += 1;
        tokio::time::sleep_until(next).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn five_tries_or_two_minutes_then_given_up() {
        let mut b = Budget::new("Telegram");
        for _ in 1..MAX_TRIES {
            b.wait(Duration::from_millis(1))
                .await
                .expect("within budget");
        }
        let e = b.wait(Duration::from_millis(1)).await.expect_err("5 tries");
        assert!(e.to_string().contains("Telegram kept rate-limiting"), "{e}");
        // A wait that would pass the deadline is not even begun.
        let mut b = Budget::new("Discord");
        let t0 = Instant::now();
        let e = b
            .wait(Duration::from_secs(600))
            .await
            .expect_err("too long");
        assert!(t0.elapsed() < Duration::from_secs(1), "nothing waited");
        assert!(e.until >= t0 + Duration::from_secs(600));
    }
}
