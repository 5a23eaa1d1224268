//! Voice notes: `[gateway.transcribe]` turns a recording into text — a `command` (the file's
//! path appended; its standard output is the text) or an OpenAI-compatible endpoint (`url`,
//! `model`, `api_key`: the recording posted as `file` with `model`, the answer's `text`). The
//! text is shown in the chat with Send / Cancel buttons before it reaches the CLI: a
//! transcription is a guess, and what reaches the CLI runs.
//!
//! A transcription waiting for its button lives in this process only (bounded, the oldest
//! forgotten first): a gateway restarted meanwhile has forgotten it, and the note is sent again.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use serde::Deserialize;

use crate::bounded::Bounded;

/// The pseudo prompt id of a transcription's buttons: `v.N`.
pub const VOICE: &str = "v.";
/// Transcriptions kept waiting for their button.
const PENDING: usize = 64;
/// How long a transcription may take.
const TIMEOUT: Duration = Duration::from_secs(120);

/// `[gateway.transcribe]`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TranscribeConfig {
    /// A program and its arguments; the recording's path is appended.
    pub command: Option<Vec<String>>,
    /// An OpenAI-compatible `/audio/transcriptions` URL.
    pub url: Option<String>,
    pub model: Option<String>,
    pub api_key: Option<String>,
}

static CONFIG: OnceLock<TranscribeConfig> = OnceLock::new();

/// Sets `[gateway.transcribe]` for this gateway (once, at start).
pub fn configure(c: TranscribeConfig) {
    let _ = CONFIG.set(c);
}

/// The configured transcriber, if any.
pub fn configured() -> Option<&'static TranscribeConfig> {
    CONFIG
        .get()
        .filter(|c| c.command.as_ref().is_some_and(|v| !v.is_empty()) || c.url.is_some())
}

impl TranscribeConfig {
    /// The words of recording `data` (named `name`).
    pub async fn text(&self, name: &str, data: &[u8]) -> anyhow::Result<String> {
        match (&self.command, &self.url) {
            (Some(argv), _) if !argv.is_empty() => self.by_command(argv, name, data).await,
            (_, Some(url)) => self.by_endpoint(url, name, data).await,
            _ => anyhow::bail!("[gateway.transcribe] names neither a command nor a url"),
        }
    }

    async fn by_command(&self, argv: &[String], name: &str, data: &[u8]) -> anyhow::Result<String> {
        // A file of this user's own, removed once the command is done.
        let path = std::env::temp_dir().join(format!(
            "clibot-voice-{}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed),
            crate::outbound::files::base_name(name)
        ));
        {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)?;
            f.write_all(data)?;
        }
        let run = tokio::process::Command::new(&argv[0])
            .args(&argv[1..])
            .arg(&path)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(TIMEOUT, run).await;
        let _ = std::fs::remove_file(&path);
        let out = out.map_err(|_| {
            anyhow::anyhow!("the transcribe command took longer than {TIMEOUT:?}")
        })??;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            anyhow::bail!(
                "the transcribe command failed ({}): {}",
                out.status,
                err.trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    async fn by_endpoint(&self, url: &str, name: &str, data: &[u8]) -> anyhow::Result<String> {
        let part = reqwest::multipart::Part::bytes(data.to_vec()).file_name(name.to_string());
        let form = reqwest::multipart::Form::new()
            .text(
                "model",
                self.model.clone().unwrap_or_else(|| "whisper-1".into()),
            )
            .part("file", part);
        let mut req = reqwest::Client::new()
            .post(url)
            .multipart(form)
            .timeout(TIMEOUT);
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        let v: serde_json::Value = req.send().await?.error_for_status()?.json().await?;
        match v["text"].as_str() {
            Some(t) => Ok(t.trim().to_string()),
            None => anyhow::bail!("the transcription endpoint's answer has no \"text\""),
        }
    }
}

/// A transcription waiting for Send or Cancel: (chat, session, text).
type Held = (String, String, String);

static HELD: OnceLock<Mutex<Bounded<String, Held>>> = OnceLock::new();
static NEXT: AtomicU64 = AtomicU64::new(1);

fn held() -> &'static Mutex<Bounded<String, Held>> {
    HELD.get_or_init(|| Mutex::new(Bounded::new(PENDING)))
}

/// Keeps `text` for `session` until a button of `chat` decides; its pseudo prompt id.
pub fn hold(chat: &str, session: &str, text: &str) -> String {
    let id = format!("{VOICE}{}", NEXT.fetch_add(1, Ordering::Relaxed));
    if let Ok(mut h) = held().lock() {
        h.insert(
            id.clone(),
            (chat.to_string(), session.to_string(), text.to_string()),
        );
    }
    id
}

/// Takes the transcription `id` back, if it is waiting in `chat`: (session, text).
pub fn take(chat: &str, id: &str) -> Option<(String, String)> {
    let mut h = held().lock().ok()?;
    let id = id.to_string();
    let (c, _, _) = h.get(&id)?;
    if c != chat {
        return None;
    }
    h.remove(&id).map(|(_, s, t)| (s, t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// One HTTP exchange on a local port: the request as received, the answer `body`.
    async fn serve_once(body: &'static str) -> (String, tokio::task::JoinHandle<String>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!(
            "http://{}/v1/audio/transcriptions",
            l.local_addr().expect("addr")
        );
        let task = tokio::spawn(async move {
            let (mut s, _) = l.accept().await.expect("accept");
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            // Headers, then as many body bytes as they announce.
            loop {
                let n = s.read(&mut chunk).await.expect("read");
                buf.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&buf).to_string();
                if let Some(end) = text.find("\r\n\r\n") {
                    let len = text
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length: ")
                                .map(str::to_string)
                        })
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    if buf.len() >= end + 4 + len || n == 0 {
                        break;
                    }
                }
            }
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            s.write_all(answer.as_bytes()).await.expect("write");
            String::from_utf8_lossy(&buf).into_owned()
        });
        (url, task)
    }

    #[tokio::test]
    async fn an_openai_compatible_endpoint_gets_the_recording_and_gives_the_text() {
        let (url, seen) = serve_once(r#"{"text":" hello from the endpoint "}"#).await;
        let t = TranscribeConfig {
            url: Some(url),
            model: Some("whisper-x".into()),
            api_key: Some("k1".into()),
            ..Default::default()
        };
        let text = t.text("voice.ogg", b"OggS-recording").await.expect("text");
        assert_eq!(text, "hello from the endpoint");
        let req = seen.await.expect("request");
        assert!(
            req.to_ascii_lowercase()
                .contains("authorization: bearer k1"),
            "{req}"
        );
        assert!(
            req.contains("whisper-x") && req.contains("OggS-recording"),
            "{req}"
        );
        assert!(req.contains("filename=\"voice.ogg\""), "{req}");
    }

    #[tokio::test]
    async fn a_command_gets_the_recordings_path() {
        let t = TranscribeConfig {
            command: Some(vec![
                "sh".into(),
                "-c".into(),
                "cat \"$1\"".into(),
                "sh".into(),
            ]),
            ..Default::default()
        };
        assert_eq!(t.text("n.ogg", b"  words  ").await.expect("text"), "words");
        let failing = TranscribeConfig {
            command: Some(vec![
                "sh".into(),
                "-c".into(),
                "echo nope >&2; exit 3".into(),
            ]),
            ..Default::default()
        };
        let e = failing.text("n.ogg", b"x").await.expect_err("fails");
        assert!(e.to_string().contains("nope"), "{e}");
    }
}
