//! The whole text of a reply too long for its event.
//!
//! The daemon puts at most 256 KiB of a reply into its `turn_completed` event (a gRPC message
//! is capped at 4 MiB, and one oversized event once stopped every chat) and keeps the whole
//! reply, up to 64 MiB, as a blob read with the streaming `ReadBlob` (chunks of at most
//! 1 MiB). The gateway never reads the daemon's files: it may run on another machine.
//!
//! A chat gets as much of it as the platform takes in one file ([`Platform::max_file`]);
//! beyond that, and when the blob cannot be read, it gets what there is with a first line
//! saying how long the reply was and where to read it whole.
//!
//! [`Platform::max_file`]: crate::platforms::Platform::max_file

use clibot_proto::v1;
use tokio_stream::StreamExt;

/// Room kept in a file for the note and the session's name (and what redaction adds).
const SLACK: usize = 64 << 10;

/// Up to `limit` bytes of blob `id` from its start, cut at a character boundary, and the
/// blob's whole length.
pub async fn read(
    c: &mut clibot_proto::Client,
    id: &str,
    limit: usize,
) -> Result<(String, u64), tonic::Status> {
    let mut stream = c
        .read_blob(v1::ReadBlobRequest {
            blob_id: id.to_string(),
            offset: 0,
        })
        .await?
        .into_inner();
    let mut buf: Vec<u8> = Vec::new();
    let mut total = 0u64;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        total = chunk.total;
        if chunk.offset != buf.len() as u64 {
            return Err(tonic::Status::data_loss(format!(
                "blob {id}: a chunk at byte {} where {} was expected",
                chunk.offset,
                buf.len()
            )));
        }
        let room = limit.saturating_sub(buf.len());
        buf.extend_from_slice(&chunk.data[..chunk.data.len().min(room)]);
        if buf.len() >= limit {
            // Dropping the stream ends the call: the rest is not transferred.
            break;
        }
    }
    Ok((utf8_prefix(buf), total))
}

/// The bytes as text: a character cut at the end is dropped, anything else invalid replaced.
fn utf8_prefix(mut buf: Vec<u8>) -> String {
    match std::str::from_utf8(&buf) {
        Ok(_) => {}
        Err(e) if e.error_len().is_none() => buf.truncate(e.valid_up_to()),
        Err(_) => return String::from_utf8_lossy(&buf).into_owned(),
    }
    String::from_utf8(buf).unwrap_or_default()
}

/// A byte count for people: "312 KiB", "5.7 MiB".
pub fn size(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / f64::from(1u32 << 20))
    } else if n >= 1 << 10 {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

/// The event with its reply made whole (as far as the chat takes it), for a `turn_completed`
/// whose text is only the head of a longer reply; `None` for any other event.
pub async fn whole_reply(
    c: Option<&mut clibot_proto::Client>,
    ev: &v1::Event,
    max_file: usize,
) -> Option<v1::Event> {
    let Some(v1::event::Kind::TurnCompleted(t)) = &ev.kind else {
        return None;
    };
    if t.blob_id.is_empty() {
        return None;
    }
    let limit = max_file.saturating_sub(SLACK).max(1 << 20);
    let whole = format!(
        "`clibotctl last {}` on the machine shows it whole",
        ev.session
    );
    let (text, note) = match c {
        Some(c) => match read(c, &t.blob_id, limit).await {
            Ok((text, total)) if (text.len() as u64) < total.max(t.full_bytes) => {
                let total = total.max(t.full_bytes);
                let note = format!(
                    "(this reply is {}; here are its first {}: {whole})",
                    size(total),
                    size(text.len() as u64)
                );
                (text, Some(note))
            }
            Ok((text, _)) => (text, None),
            Err(e) => {
                eprintln!(
                    "clibot-gateway: cannot read the whole reply of {} (blob {}): {}",
                    ev.session,
                    t.blob_id,
                    e.message()
                );
                (t.text.clone(), Some(head_note(t, &whole, e.code())))
            }
        },
        None => (
            t.text.clone(),
            Some(head_note(t, &whole, tonic::Code::Unavailable)),
        ),
    };
    let text = match note {
        Some(note) => format!("{note}\n{text}"),
        None => text,
    };
    let mut out = ev.clone();
    out.kind = Some(v1::event::Kind::TurnCompleted(v1::TurnCompleted {
        text,
        source: t.source,
        blob_id: String::new(),
        full_bytes: 0,
    }));
    Some(out)
}

/// `!!last`'s text: the reply whole when it was longer than its head (as far as a file of
/// `max_file` bytes takes it, saying so beyond).
pub async fn last_reply(
    c: &mut clibot_proto::Client,
    session: &str,
    r: v1::GetLastReplyResponse,
    max_file: usize,
) -> String {
    let ev = v1::Event {
        session: session.to_string(),
        kind: Some(v1::event::Kind::TurnCompleted(v1::TurnCompleted {
            text: r.text,
            source: v1::TurnEnd::Unspecified.into(),
            blob_id: r.blob_id,
            full_bytes: r.full_bytes,
        })),
        ..Default::default()
    };
    let ev = whole_reply(Some(c), &ev, max_file).await.unwrap_or(ev);
    match ev.kind {
        Some(v1::event::Kind::TurnCompleted(t)) => t.text,
        _ => String::new(),
    }
}

fn head_note(t: &v1::TurnCompleted, whole: &str, code: tonic::Code) -> String {
    format!(
        "(this reply is {}; only its first {} could be fetched ({}): {whole})",
        size(t.full_bytes),
        size(t.text.len() as u64),
        code.description().trim_end_matches('.')
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_character_is_dropped_and_sizes_read_well() {
        let euro = "€".repeat(3).into_bytes();
        assert_eq!(utf8_prefix(euro[..8].to_vec()), "€€");
        assert_eq!(utf8_prefix(euro.clone()), "€€€");
        assert_eq!(utf8_prefix(vec![b'a', 0xff, b'b']), "a\u{fffd}b");
        assert_eq!(size(300), "300 bytes");
        assert_eq!(size(256 << 10), "256 KiB");
        assert_eq!(size(5_700_000), "5.4 MiB");
    }
}
