//! Files in: a photo, document or voice note sent to a session's chat. It is downloaded from
//! the platform (at most `[gateway] max_file_bytes`, 20 MB by default: Telegram's own download
//! limit for bots), streamed to the daemon (`PutFile`: the gateway may run on another machine),
//! which stores it as `.clibot/inbox/<YYYYmmdd-HHMMSS>-<name>` in the session's directory, and
//! the CLI gets one line: `[file from telegram:123: .clibot/inbox/…] CAPTION` (Claude Code and
//! Gemini CLI read images by path). What cannot be passed on gets a reply saying why.

use clibot_proto::v1;

use super::Router;
use crate::platforms::{Attachment, Inbound};

/// Bytes per `PutFile` chunk.
const CHUNK: usize = 1 << 20;

impl Router {
    /// A press on a transcription's button: Send types it into its session, Cancel drops it.
    pub(super) async fn voice_answer(
        &self,
        c: &mut clibot_proto::Client,
        msg: &Inbound,
        id: &str,
        choice: &str,
    ) -> Result<String, tonic::Status> {
        let Some((session, text)) = crate::inbound::transcribe::take(&msg.chat, id) else {
            return Ok(
                "that transcription is no longer waiting (answered, or the gateway restarted since): send the voice note again".into(),
            );
        };
        if choice != "1" {
            return Ok("not sent".into());
        }
        let req = v1::SendInputRequest {
            session: session.clone(),
            text,
            submit: true,
            dedupe_key: String::new(),
        };
        let r = c.send_input(self.req(msg, req)).await?.into_inner();
        Ok(if r.queued {
            format!("[{session}] busy: it is queued and goes in when the current turn ends")
        } else {
            format!("sent to {session}")
        })
    }

    /// Passes `file` (with the message's caption) to `session`; a reply when there is one.
    pub(super) async fn file_in(
        &self,
        c: &mut clibot_proto::Client,
        msg: &Inbound,
        session: &str,
        file: &Attachment,
    ) -> Result<Option<String>, tonic::Status> {
        let max = crate::outbound::files::max_in();
        if file.kind == "voice" && crate::inbound::transcribe::configured().is_none() {
            return Ok(Some(
                "voice notes need [gateway.transcribe] on the machine (a command or an OpenAI-compatible endpoint): send the text, or the recording as a file".into(),
            ));
        }
        let too_big = |n: u64| {
            format!(
                "{} has {n} bytes; at most {max} are passed to a session ([gateway] max_file_bytes)",
                file.name
            )
        };
        if file.size > max {
            return Ok(Some(too_big(file.size)));
        }
        let data = match self.platform.download(file, max).await {
            Ok(d) => d,
            Err(e) => {
                return Ok(Some(format!(
                    "{} could not be downloaded from {}: {e}",
                    file.name,
                    self.platform.name()
                )));
            }
        };
        if data.len() as u64 > max {
            return Ok(Some(too_big(data.len() as u64)));
        }
        if let (true, Some(t)) = (
            file.kind == "voice",
            crate::inbound::transcribe::configured(),
        ) {
            // Transcribing takes seconds to minutes: done beside the chat's receive loop, so
            // no other message (of this chat or any other) waits for it; a few at a time.
            static RUNNING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);
            let (platform, chat, session) =
                (self.platform.clone(), msg.chat.clone(), session.to_string());
            let name = file.name.clone();
            tokio::spawn(async move {
                let Ok(_turn) = RUNNING.acquire().await else {
                    return;
                };
                let said = match t.text(&name, &data).await {
                    Ok(text) if !text.trim().is_empty() => {
                        // A transcription is a guess: shown first, typed only when the sender
                        // says so.
                        let id = crate::inbound::transcribe::hold(&chat, &session, &text);
                        let shown = format!("🎤 [{session}] {text}\nSend it to {session}?");
                        let options = ["Send".to_string(), "Cancel".to_string()];
                        platform
                            .send_prompt(&chat, &id, &shown, &options)
                            .await
                            .map(|_| ())
                    }
                    Ok(_) => {
                        platform
                            .send(&chat, "the voice note has no words in it")
                            .await
                    }
                    Err(e) => {
                        platform
                            .send(
                                &chat,
                                &format!("the voice note could not be transcribed: {e}"),
                            )
                            .await
                    }
                };
                if let Err(e) = said {
                    eprintln!("clibot-gateway: cannot show a transcription in {chat}: {e:#}");
                }
            });
            return Ok(None);
        }
        let mut chunks: Vec<v1::PutFileChunk> = data
            .chunks(CHUNK)
            .map(|d| v1::PutFileChunk {
                data: d.to_vec(),
                ..Default::default()
            })
            .collect();
        if chunks.is_empty() {
            chunks.push(v1::PutFileChunk::default());
        }
        chunks[0].session = session.to_string();
        chunks[0].name = file.name.clone();
        let stored = c
            .put_file(self.req(msg, tokio_stream::iter(chunks)))
            .await?
            .into_inner();
        let caption = msg.text.trim();
        let mut line = format!(
            "[file from {}:{}: {}]",
            self.platform.name(),
            msg.user,
            stored.path
        );
        if !caption.is_empty() {
            line.push(' ');
            line.push_str(caption);
        }
        let dedupe_key = if msg.id.is_empty() {
            String::new()
        } else {
            format!("{}:{}:{}", self.platform.name(), msg.chat, msg.id)
        };
        let req = v1::SendInputRequest {
            session: session.to_string(),
            text: line,
            submit: true,
            dedupe_key,
        };
        let r = c.send_input(self.req(msg, req)).await?.into_inner();
        Ok(r.queued.then(|| {
            format!(
                "[{session}] busy: the file is saved as {} and goes in when the current turn ends",
                stored.path
            )
        }))
    }
}
