//! Replies to chat messages, sent from a queue per chat so that incoming messages never wait
//! for outgoing ones.
//!
//! The router handles one incoming message at a time, for every chat of a platform. If it
//! awaited its own replies, one chat that the platform rate-limits (Telegram's 429 with a
//! long `retry_after`) would hold up every other chat's commands. [`Egress`] is the platform
//! the router sees: `send` and `send_file` only queue the text for the chat's own task and
//! return at once. Each chat's task sends in order; a message the platform keeps refusing for
//! its rate limit is given up after its [`Budget`](crate::platforms::ratelimit::Budget), and
//! once the platform's cooldown is over the chat is told, once, how many messages it missed.
//!
//! Chats' tasks end after a quiet minute, and at most [`MAX_PEERS`] chats have a queue (the
//! oldest is dropped first: its task still sends what it holds, then ends).

use std::borrow::Cow;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;

use crate::bounded::{Bounded, MAX_PEERS};
use crate::platforms::Platform;
use crate::platforms::ratelimit::{RateLimited, rate_limited};

/// Messages waiting per chat; more are counted as undelivered.
const QUEUE: usize = 64;
/// A chat's task ends after this long without a message.
const IDLE: Duration = Duration::from_secs(60);

/// One queued message.
enum Job {
    Text(String),
    File {
        name: String,
        text: String,
        summary: String,
    },
    /// A picture, or (`picture` false) a file of any bytes.
    Upload {
        name: String,
        data: Vec<u8>,
        caption: String,
        picture: bool,
    },
}

/// One chat's queue: where to put messages, and how many did not fit.
#[derive(Clone)]
struct Queue {
    tx: mpsc::Sender<Job>,
    overflow: Arc<AtomicU32>,
}

pub struct Egress {
    inner: Arc<dyn Platform>,
    prefix: String,
    queues: Mutex<Bounded<String, Queue>>,
}

impl Egress {
    pub fn new(inner: Arc<dyn Platform>, prefix: &str) -> Egress {
        Egress {
            inner,
            prefix: prefix.to_string(),
            queues: Mutex::new(Bounded::new(MAX_PEERS)),
        }
    }

    /// Queues a message for `chat`, starting its task when it has none (or it ended).
    fn enqueue(&self, chat: &str, job: Job) {
        let mut queues = self
            .queues
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let key = chat.to_string();
        let q = match queues.get(&key) {
            Some(q) if !q.tx.is_closed() => q.clone(),
            _ => {
                let (tx, rx) = mpsc::channel(QUEUE);
                let q = Queue {
                    tx,
                    overflow: Arc::new(AtomicU32::new(0)),
                };
                let task = ChatQueue {
                    inner: self.inner.clone(),
                    prefix: self.prefix.clone(),
                    chat: key.clone(),
                    overflow: q.overflow.clone(),
                    undelivered: 0,
                    limited: None,
                };
                tokio::spawn(task.run(rx));
                queues.insert(key, q.clone());
                q
            }
        };
        drop(queues);
        if q.tx.try_send(job).is_err() {
            q.overflow.fetch_add(1, Ordering::Relaxed);
            eprintln!(
                "clibot-gateway: {} chat {chat}: more than {QUEUE} replies waiting; one was dropped",
                self.inner.name()
            );
        }
    }
}

/// What a chat is told once a rate limit it was under has passed.
pub fn undelivered_notice(platform: &str, n: u32, prefix: &str) -> String {
    let platform = crate::ops::down::title(platform);
    let what = if n == 1 {
        "1 message".to_string()
    } else {
        format!("{n} messages")
    };
    format!(
        "clibot: {what} could not be delivered here because {platform} rate-limited this chat; {prefix}last shows a session's latest reply, {prefix}history this chat's recent messages"
    )
}

/// The task that sends one chat's messages, in order.
struct ChatQueue {
    inner: Arc<dyn Platform>,
    prefix: String,
    chat: String,
    overflow: Arc<AtomicU32>,
    /// Messages given up to the rate limit, not yet told.
    undelivered: u32,
    /// The latest rate limit a message was given up to.
    limited: Option<RateLimited>,
}

impl ChatQueue {
    async fn run(mut self, mut rx: mpsc::Receiver<Job>) {
        loop {
            let job = match tokio::time::timeout(IDLE, rx.recv()).await {
                Ok(Some(job)) => job,
                Ok(None) => break,
                Err(_) => {
                    // Quiet: stop taking messages, send what raced in, end (the next message
                    // starts a new task).
                    rx.close();
                    while let Ok(job) = rx.try_recv() {
                        self.send(job).await;
                    }
                    break;
                }
            };
            self.send(job).await;
        }
        self.tell().await;
    }

    async fn send(&mut self, job: Job) {
        self.tell().await;
        let r = match &job {
            Job::Text(t) => self.inner.send(&self.chat, t).await,
            Job::File {
                name,
                text,
                summary,
            } => self.inner.send_file(&self.chat, name, text, summary).await,
            Job::Upload {
                name,
                data,
                caption,
                picture: true,
            } => self.inner.send_image(&self.chat, name, data, caption).await,
            Job::Upload {
                name,
                data,
                caption,
                picture: false,
            } => self.inner.send_bytes(&self.chat, name, data, caption).await,
        };
        match r {
            Ok(()) => {}
            Err(e) => match rate_limited(&e) {
                Some(limit) => {
                    eprintln!(
                        "clibot-gateway: gave up a reply to {} chat {}: {e}",
                        self.inner.name(),
                        self.chat
                    );
                    self.undelivered += 1;
                    self.limited = Some(limit.clone());
                }
                None => eprintln!(
                    "clibot-gateway: cannot reply to {} chat {}: {e:#}",
                    self.inner.name(),
                    self.chat
                ),
            },
        }
    }

    /// After a rate limit: waits for its end, then tells the chat how many messages it missed
    /// (once; a notice that is itself refused is only logged).
    async fn tell(&mut self) {
        self.undelivered += self.overflow.swap(0, Ordering::Relaxed);
        if self.undelivered == 0 {
            return;
        }
        if let Some(limit) = self.limited.take() {
            tokio::time::sleep_until(limit.until).await;
        }
        let n = std::mem::take(&mut self.undelivered);
        let text = undelivered_notice(self.inner.name(), n, &self.prefix);
        if let Err(e) = self.inner.send(&self.chat, &text).await {
            eprintln!(
                "clibot-gateway: cannot tell {} chat {} that {n} replies were lost: {e:#}",
                self.inner.name(),
                self.chat
            );
        }
    }
}

#[async_trait]
impl Platform for Egress {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn consumer(&self) -> String {
        self.inner.consumer()
    }
    fn is_local(&self) -> bool {
        self.inner.is_local()
    }
    fn max_message(&self) -> usize {
        self.inner.max_message()
    }
    fn max_file(&self) -> usize {
        self.inner.max_file()
    }
    fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        self.inner.redact(text)
    }
    /// Queued: always `Ok` (a failure is logged by the chat's task).
    async fn send(&self, chat: &str, text: &str) -> anyhow::Result<()> {
        self.enqueue(chat, Job::Text(text.to_string()));
        Ok(())
    }
    async fn send_file(
        &self,
        chat: &str,
        name: &str,
        text: &str,
        summary: &str,
    ) -> anyhow::Result<()> {
        self.enqueue(
            chat,
            Job::File {
                name: name.to_string(),
                text: text.to_string(),
                summary: summary.to_string(),
            },
        );
        Ok(())
    }
    async fn send_image(
        &self,
        chat: &str,
        name: &str,
        png: &[u8],
        caption: &str,
    ) -> anyhow::Result<()> {
        self.enqueue(
            chat,
            Job::Upload {
                name: name.to_string(),
                data: png.to_vec(),
                caption: caption.to_string(),
                picture: true,
            },
        );
        Ok(())
    }
    async fn download(
        &self,
        file: &crate::platforms::Attachment,
        max: u64,
    ) -> anyhow::Result<Vec<u8>> {
        self.inner.download(file, max).await
    }
    async fn send_bytes(
        &self,
        chat: &str,
        name: &str,
        data: &[u8],
        caption: &str,
    ) -> anyhow::Result<()> {
        self.enqueue(
            chat,
            Job::Upload {
                name: name.to_string(),
                data: data.to_vec(),
                caption: caption.to_string(),
                picture: false,
            },
        );
        Ok(())
    }
    async fn send_prompt(
        &self,
        chat: &str,
        prompt_id: &str,
        text: &str,
        options: &[String],
    ) -> anyhow::Result<Option<String>> {
        self.inner.send_prompt(chat, prompt_id, text, options).await
    }
    async fn remove_buttons(&self, chat: &str, message: &str) -> anyhow::Result<()> {
        self.inner.remove_buttons(chat, message).await
    }
    async fn edit_prompt(
        &self,
        chat: &str,
        message: &str,
        prompt_id: &str,
        text: &str,
        options: &[String],
    ) -> anyhow::Result<()> {
        self.inner
            .edit_prompt(chat, message, prompt_id, text, options)
            .await
    }
    async fn pin(&self, chat: &str, message: &str, on: bool) -> anyhow::Result<()> {
        self.inner.pin(chat, message, on).await
    }
    /// At once, not queued: the message holds a secret.
    async fn delete_message(&self, chat: &str, message: &str) -> anyhow::Result<bool> {
        self.inner.delete_message(chat, message).await
    }
    async fn typing(&self, chat: &str) {
        self.inner.typing(chat).await
    }
    fn topics(&self) -> bool {
        self.inner.topics()
    }
    async fn open_topic(&self, chat: &str, name: &str) -> anyhow::Result<String> {
        self.inner.open_topic(chat, name).await
    }
    async fn reopen_topic(&self, chat: &str) {
        self.inner.reopen_topic(chat).await
    }
    async fn close_topic(&self, chat: &str) {
        self.inner.close_topic(chat).await
    }
    async fn status(&self, chat: &str, id: Option<&str>, text: &str) -> Option<String> {
        self.inner.status(chat, id, text).await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    /// Chat "slow" is rate-limited for its first message; every send is recorded.
    #[derive(Default)]
    struct Flaky {
        said: Mutex<Vec<(String, String)>>,
        refused: Mutex<bool>,
    }

    #[async_trait]
    impl Platform for Flaky {
        fn name(&self) -> &str {
            "telegram"
        }
        fn consumer(&self) -> String {
            "flaky".into()
        }
        fn max_message(&self) -> usize {
            4096
        }
        async fn send(&self, chat: &str, text: &str) -> anyhow::Result<()> {
            if chat == "slow" {
                let first = {
                    let mut r = self.refused.lock().expect("lock");
                    !std::mem::replace(&mut *r, true)
                };
                if first {
                    // As the budget gives up after waiting: the chat is limited a while.
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    return Err(anyhow::Error::new(RateLimited {
                        platform: "Telegram",
                        until: tokio::time::Instant::now() + Duration::from_millis(300),
                    }));
                }
            }
            self.said
                .lock()
                .expect("lock")
                .push((chat.to_string(), text.to_string()));
            Ok(())
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_limited_chat_delays_only_itself_keeps_order_and_is_told_once() {
        let flaky = Arc::new(Flaky::default());
        let e = Egress::new(flaky.clone(), "!!");
        let t0 = Instant::now();
        e.send("slow", "one").await.expect("queued");
        e.send("slow", "two").await.expect("queued");
        e.send("fast", "hi").await.expect("queued");
        assert!(t0.elapsed() < Duration::from_millis(100), "never waits");
        let said = |chat: &str| -> Vec<String> {
            flaky
                .said
                .lock()
                .expect("lock")
                .iter()
                .filter(|(c, _)| c == chat)
                .map(|(_, t)| t.clone())
                .collect()
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while said("slow").len() < 2 {
            assert!(Instant::now() < deadline, "{:?}", said("slow"));
            if said("fast").is_empty() {
                assert!(t0.elapsed() < Duration::from_millis(250), "fast waited");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let slow = said("slow");
        assert!(
            slow[0].starts_with("clibot: 1 message could not be delivered here because Telegram rate-limited this chat; !!last"),
            "{slow:?}"
        );
        assert_eq!(slow[1], "two", "in order, after the notice");
        assert_eq!(said("fast"), ["hi"]);
    }
}
