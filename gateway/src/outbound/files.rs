//! Files out of a session for a chat: `!!get PATH`, and the files a CLI puts in its outbox
//! (`file_sent` events). The daemon decides what may leave the session's directory and reads
//! it (`GetFile`, in chunks: the gateway may run on another machine); the gateway adds the one
//! check only it can make — its redactor finding a secret in a text file — and sends the file
//! unchanged, as a document.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use clibot_proto::v1;
use tokio_stream::StreamExt;

use crate::platforms::Platform;

/// The largest file passed from a chat to a session (`[gateway] max_file_bytes`).
static MAX_IN: AtomicU64 = AtomicU64::new(DEFAULT_MAX_IN);
/// Telegram's own limit for what a bot may download.
pub const DEFAULT_MAX_IN: u64 = 20 << 20;

/// Sets `[gateway] max_file_bytes` for every chat of this gateway.
pub fn set_max_in(bytes: u64) {
    MAX_IN.store(bytes, Ordering::Relaxed);
}

pub fn max_in() -> u64 {
    MAX_IN.load(Ordering::Relaxed)
}

/// The whole file `req` names.
pub async fn fetch(
    c: &mut clibot_proto::Client,
    req: tonic::Request<v1::GetFileRequest>,
) -> Result<Vec<u8>, tonic::Status> {
    let mut stream = c.get_file(req).await?.into_inner();
    let mut buf: Vec<u8> = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if chunk.offset != buf.len() as u64 {
            return Err(tonic::Status::data_loss(format!(
                "a chunk at byte {} where {} was expected",
                chunk.offset,
                buf.len()
            )));
        }
        buf.extend_from_slice(&chunk.data);
    }
    Ok(buf)
}

/// The file's name: the last part of its path.
pub fn base_name(path: &str) -> String {
    path.trim_end_matches('/')
        .rsplit('/')
        .next()
        .filter(|n| !n.is_empty())
        .unwrap_or("file")
        .to_string()
}

/// A text file in which the redactor finds a secret: its redacted text (else `None`).
pub fn redacted_if_secret(platform: &dyn Platform, data: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(data).ok()?;
    match platform.redact(text) {
        std::borrow::Cow::Owned(r) if r != text => Some(r),
        _ => None,
    }
}

/// Why `len` bytes cannot go to this platform, if they cannot.
pub fn too_large(platform: &dyn Platform, name: &str, len: usize) -> Option<String> {
    let max = platform.max_file();
    (len > max).then(|| {
        format!(
            "{name} has {len} bytes, more than {} takes from a bot ({} MiB)",
            platform.name(),
            max >> 20
        )
    })
}

/// A `file_sent` event: the file is read from the daemon and sent to `chat` — a text in which
/// the redactor finds a secret, redacted and saying so. What cannot be sent is said instead.
pub async fn deliver_outbox_file(
    platform: &Arc<dyn Platform>,
    c: Option<&mut clibot_proto::Client>,
    chat: &str,
    session: &str,
    f: &v1::FileSent,
) -> anyhow::Result<()> {
    let got = match c {
        Some(c) => {
            let req = v1::GetFileRequest {
                session: session.to_string(),
                path: f.path.clone(),
                force: false,
            };
            fetch(c, tonic::Request::new(req))
                .await
                .map_err(|s| s.message().to_string())
        }
        None => Err("the daemon cannot be reached".to_string()),
    };
    let data = match got {
        Ok(d) => d,
        Err(why) => {
            let text = format!("[{session}] {} could not be sent: {why}", f.name);
            return platform.send(chat, &text).await;
        }
    };
    if let Some(why) = too_large(platform.as_ref(), &f.name, data.len()) {
        let text = format!(
            "[{session}] {why}: it is in the session's directory as {}",
            f.path
        );
        return platform.send(chat, &text).await;
    }
    let (data, caption) = match redacted_if_secret(platform.as_ref(), &data) {
        Some(r) => (
            r.into_bytes(),
            format!(
                "[{session}] {} (what looked like secrets was redacted)",
                f.name
            ),
        ),
        None => (data, format!("[{session}] {}", f.name)),
    };
    platform.send_bytes(chat, &f.name, &data, &caption).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_is_the_last_part_of_the_path() {
        assert_eq!(base_name("out/report.pdf"), "report.pdf");
        assert_eq!(base_name("notes.txt"), "notes.txt");
        assert_eq!(base_name("dir/"), "dir");
        assert_eq!(base_name(""), "file");
    }
}
