//! The chat platforms, behind one small trait, so the router and the relay (`inbound/` and
//! `outbound/`, with the chunking, fences and redaction of the library's `text/`) are the same
//! for every platform. A platform turns its updates into [`Inbound`] messages and sends text to
//! a chat. Chat keys with topics (`topic.rs`) and the data buttons carry (`shown.rs`) are here
//! because every platform encodes them. It may use `progress.rs` and `bounded.rs`, never
//! `inbound/`, `outbound/` or `ops/`.

pub mod console;
pub mod discord;
mod discord_backlog;
mod discord_history;
pub mod feishu;
pub mod labelled;
pub mod ratelimit;
pub mod reach;
pub mod recent;
pub mod redacting;
pub mod shown;
pub mod slack;
pub mod telegram;
pub mod topic;
pub mod wrapper;

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use crate::progress::Progress;

/// A message from a chat user.
#[derive(Debug)]
pub struct Inbound {
    pub chat: String,
    pub user: String,
    pub user_name: String,
    pub text: String,
    /// The platform's id of the message (empty where there is none), for the daemon's
    /// de-duplication of a message handed over twice.
    pub id: String,
    /// The prompt a pressed button belongs to (its answer is for that prompt only).
    pub prompt: Option<String>,
    /// Sent in a group chat (or a server channel), where only enabled groups work.
    pub group: bool,
    /// Sent in the general part of a chat where each session gets a topic of its own
    /// (`[gateway.PLATFORM] topics`, in a chat that has topics): choosing a session here opens
    /// (or reopens) its topic instead of binding this chat. A message inside a topic has
    /// `CHAT/THREAD` as its chat and this false.
    pub topics: bool,
    /// A photo, document or voice note the message carries (its text is the caption).
    pub file: Option<Attachment>,
    /// Fired once the message was handled (handed to the daemon, or refused with a reply):
    /// platforms that can redeliver (Telegram's update offset) confirm the update only then.
    pub ack: Option<tokio::sync::oneshot::Sender<()>>,
}

/// A file a chat message carries, as the platform names it (downloaded on demand).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attachment {
    /// The platform's reference to it (Telegram's `file_id`, a URL, …).
    pub id: String,
    /// Its file name (for a photo, one made up: `photo.jpg`).
    pub name: String,
    /// Its size as the platform says (0: not said).
    pub size: u64,
    /// "photo", "document" or "voice".
    pub kind: &'static str,
}

/// A chat platform.
#[async_trait]
pub trait Platform: Send + Sync + 'static {
    /// "console", "telegram", ...
    fn name(&self) -> &str;
    /// The key under which the daemon stores this gateway's delivery cursor.
    fn consumer(&self) -> String;
    /// Whether chat users act as the local user (only the console does: it runs as the
    /// daemon's own user); otherwise every call carries the chat user and the daemon checks
    /// their access.
    fn is_local(&self) -> bool {
        false
    }
    /// The longest message the platform takes (text is chunked to fit).
    fn max_message(&self) -> usize;
    /// The largest file, in bytes, the bot may upload (a reply longer than that is cut,
    /// saying so). Discord's limit for bots without boosts, unless the platform says more.
    fn max_file(&self) -> usize {
        8 << 20
    }
    /// Redacts a whole text before it is cut, flattened or chunked for this platform (the
    /// [`redacting::Redacting`] wrapper also knows the gateway's own secrets).
    fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        clibot_gateway::redact(text)
    }
    /// Sends text to a chat; an error means it was not delivered (and will be retried).
    async fn send(&self, chat: &str, text: &str) -> anyhow::Result<()>;
    /// Sends prompt `prompt_id`; platforms with buttons offer one per option, each carrying the
    /// prompt's id (the text lists them too, so a typed number always works). Returns the id
    /// of the message that carries the buttons, where there is one.
    async fn send_prompt(
        &self,
        chat: &str,
        _prompt_id: &str,
        text: &str,
        _options: &[String],
    ) -> anyhow::Result<Option<String>> {
        self.send(chat, text).await.map(|_| None)
    }
    /// Takes the buttons off a prompt's message once the prompt is resolved, so that nobody
    /// presses a dead button. Best effort.
    async fn remove_buttons(&self, _chat: &str, _message: &str) -> anyhow::Result<()> {
        Ok(())
    }
    /// Edits message `message`, sent by [`Platform::send_prompt`], to `text` with `options` as
    /// its buttons still (a board, edited in place). Platforms that cannot edit say so.
    async fn edit_prompt(
        &self,
        _chat: &str,
        _message: &str,
        _prompt_id: &str,
        _text: &str,
        _options: &[String],
    ) -> anyhow::Result<()> {
        anyhow::bail!("{} cannot edit a message", self.name())
    }
    /// Pins message `message` in its chat (`on`), or unpins it. Where the platform has no pins
    /// (or the bot may not pin there) nothing happens: the caller says so only when it fails.
    async fn pin(&self, _chat: &str, _message: &str, _on: bool) -> anyhow::Result<()> {
        Ok(())
    }
    /// Sends long output as a file with a short summary; platforms without files send the text.
    async fn send_file(
        &self,
        chat: &str,
        _name: &str,
        text: &str,
        _summary: &str,
    ) -> anyhow::Result<()> {
        self.send(chat, text).await
    }
    /// Sends a picture (PNG bytes) with a caption. Platforms without pictures say so.
    async fn send_image(
        &self,
        _chat: &str,
        _name: &str,
        _png: &[u8],
        _caption: &str,
    ) -> anyhow::Result<()> {
        anyhow::bail!(
            "{} cannot show pictures: !!screen shows the text",
            self.name()
        )
    }
    /// Sends a file as it is (any bytes), with a caption. Platforms without files send a text
    /// file as text and refuse others.
    async fn send_bytes(
        &self,
        chat: &str,
        name: &str,
        data: &[u8],
        caption: &str,
    ) -> anyhow::Result<()> {
        match std::str::from_utf8(data) {
            Ok(text) => self.send_file(chat, name, text, caption).await,
            Err(_) => anyhow::bail!("{} cannot send files", self.name()),
        }
    }
    /// Downloads a file a chat message carries, at most `max` bytes.
    async fn download(&self, _file: &Attachment, _max: u64) -> anyhow::Result<Vec<u8>> {
        anyhow::bail!("{} files cannot be downloaded", self.name())
    }
    /// Deletes a message a user sent (one that carried a password). `Ok(false)` where the
    /// platform does not let a bot delete it (the user is told to delete it themselves).
    async fn delete_message(&self, _chat: &str, _message: &str) -> anyhow::Result<bool> {
        Ok(false)
    }
    /// Whether sessions get topics of their own (`[gateway.PLATFORM] topics`).
    fn topics(&self) -> bool {
        false
    }
    /// Opens a topic named `name` in chat `chat` (a forum topic, a thread) and returns the
    /// key its messages go under, `CHAT/THREAD`. Platforms without topics refuse.
    async fn open_topic(&self, chat: &str, _name: &str) -> anyhow::Result<String> {
        anyhow::bail!("{} has no topics in chat {chat}", self.name())
    }
    /// Reopens a topic closed earlier (its session was started again). Best effort.
    async fn reopen_topic(&self, _chat: &str) {}
    /// Closes (archives) a topic whose session ended. Best effort.
    async fn close_topic(&self, _chat: &str) {}
    /// Shows that the CLI is working (a typing indicator); a no-op where there is none.
    async fn typing(&self, _chat: &str) {}
    /// A status message: created when `id` is `None` (its id is returned where the platform can
    /// edit it later), edited in place otherwise. Best effort: a failure costs only the status.
    async fn status(&self, chat: &str, id: Option<&str>, text: &str) -> Option<String> {
        if id.is_none() {
            let _ = self.send(chat, text).await;
        }
        None
    }
}

/// A delivery failure that will not go away by retrying: the bot was removed from the chat,
/// the chat is gone, the bot may not post there. The relay suspends the chat's binding instead
/// of retrying; platforms wrap such errors in it (`anyhow::Error::new(Gone(..))`).
#[derive(Debug)]
pub struct Gone(pub String);

impl std::fmt::Display for Gone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Gone {}

/// Why an error means the chat is gone for good, if it does.
pub fn gone(e: &anyhow::Error) -> Option<&str> {
    e.downcast_ref::<Gone>().map(|g| g.0.as_str())
}

/// Another gateway holds the bot's lock: refusing beats two pollers taking turns at the
/// same updates.
#[derive(Debug)]
pub struct AlreadyPolling(pub std::path::PathBuf);

impl std::fmt::Display for AlreadyPolling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "another clibot-gateway is already polling this bot (lock {}); one poller per token: stop the other one first",
            self.0.display()
        )
    }
}

impl std::error::Error for AlreadyPolling {}

/// One poller per bot and daemon: a lock file beside the daemon's socket, held for the life of
/// the process (the kernel releases it however the process ends). A second gateway for the same
/// bot refuses to start. (Across machines, Telegram itself ends the older poll with a conflict.)
/// The lock is kept by the platform's [`Receiving`], across its connections: connecting again
/// (after the loop stalled, say) while the last connection's replies still go out is not
/// refused.
pub fn single_poller(
    recv: &Receiving,
    dir: &std::path::Path,
    name: &str,
) -> anyhow::Result<Arc<std::fs::File>> {
    let path = dir.join(format!("{name}.lock"));
    let mut held = recv.locks.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, f)) = held.iter().find(|(p, _)| *p == path) {
        return Ok(f.clone());
    }
    let f = Arc::new(lock_file(dir, &path)?);
    held.push((path, f.clone()));
    Ok(f)
}

fn lock_file(dir: &std::path::Path, path: &std::path::Path) -> anyhow::Result<std::fs::File> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(false)
        .open(path)?;
    if f.try_lock().is_err() {
        return Err(anyhow::Error::new(AlreadyPolling(path.to_path_buf())));
    }
    Ok(f)
}

/// What a platform's receive side gets from the gateway: where it marks its cycles, and where
/// its tasks are kept, so that a loop that stalls can be aborted and started again.
#[derive(Clone, Default)]
pub struct Receiving {
    pub progress: Progress,
    tasks: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
    /// The poller locks taken ([`single_poller`]).
    locks: Arc<Mutex<Vec<Held>>>,
}

/// A poller lock file taken, by its path.
type Held = (PathBuf, Arc<std::fs::File>);

impl Receiving {
    pub fn new(progress: Progress) -> Receiving {
        Receiving {
            progress,
            ..Default::default()
        }
    }

    /// Spawns one of the platform's receive tasks.
    pub fn spawn<F>(&self, f: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let handle = tokio::spawn(f);
        self.tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(handle.abort_handle());
    }

    /// Ends every receive task (the platform's connection ended, or its loop stalled).
    pub fn abort(&self) {
        for t in self
            .tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            t.abort();
        }
    }
}
