//! What goes into a session and comes out of it: `send`, `keys`, `answer`, `screen` and `last`.
//!
//! `last` prints a session's last reply, whole. A reply longer than an event carries (256
//! KiB) is read through the daemon's `ReadBlob` stream in chunks, so that no single message
//! outgrows gRPC's 4 MiB limit however long the reply was.

use std::io::{Read, Write};

use anyhow::{Context, Result, bail};
use clibot_proto::{Client, v1};
use serde_json::json;

use super::output::print_json;

/// `text`, or with `-` what stdin holds. Past one gRPC message nothing is sent: the daemon's
/// own limit (`[daemon] max_input_bytes`) is far below it and says so for anything smaller.
pub fn text_or_stdin(text: String) -> Result<String> {
    let most = clibot_proto::MAX_MESSAGE - 64 * 1024;
    let text = if text == "-" {
        let mut buf = String::new();
        std::io::stdin()
            .take(most as u64 + 1)
            .read_to_string(&mut buf)
            .context("cannot read the text from stdin")?;
        buf
    } else {
        text
    };
    if text.len() > most {
        bail!(
            "the text is over {most} bytes, more than one message to clibotd carries; the daemon takes at most [daemon] max_input_bytes (64 KiB unless configured): send a file's path instead"
        );
    }
    Ok(text)
}

/// Types `text` (`-`: stdin) into `name`, pressing Enter unless `no_submit`.
pub async fn send(
    c: &mut Client,
    name: String,
    text: String,
    no_submit: bool,
    json: bool,
) -> Result<()> {
    let text = text_or_stdin(text)?;
    let req = v1::SendInputRequest {
        session: name.clone(),
        text,
        submit: !no_submit,
        ..Default::default()
    };
    let r = c.send_input(req).await?.into_inner();
    if json {
        return print_json(&json!({"session": name, "seq": r.seq, "queued": r.queued}));
    }
    if r.queued {
        eprintln!(
            "queued: {name} does not take input now (a turn runs, or a budget holds it); the text is delivered when it does (`clibotctl queue {name}` shows what waits)"
        );
    }
    Ok(())
}

pub async fn keys(c: &mut Client, name: String, keys: Vec<String>, json: bool) -> Result<()> {
    let r = c
        .send_keys(v1::SendKeysRequest {
            session: name.clone(),
            keys,
        })
        .await?
        .into_inner();
    if json {
        return print_json(&json!({"session": name, "seq": r.seq}));
    }
    Ok(())
}

/// `prompt`: the id of the prompt meant; the daemon refuses to answer a different one.
pub async fn answer(
    c: &mut Client,
    name: String,
    answer: String,
    prompt: Option<String>,
    json: bool,
) -> Result<()> {
    let req = v1::AnswerPromptRequest {
        session: name.clone(),
        prompt_id: prompt.unwrap_or_default(),
        answer,
    };
    let r = c.answer_prompt(req).await?.into_inner();
    if json {
        return print_json(&json!({"session": name, "prompt_id": r.prompt_id, "via": r.via}));
    }
    Ok(())
}

/// Prints the pane: the visible screen, or the last `lines` with scrollback.
pub async fn screen(
    c: &mut Client,
    name: String,
    lines: Option<u32>,
    escapes: bool,
    json: bool,
) -> Result<()> {
    let r = c
        .capture(v1::CaptureRequest {
            session: name.clone(),
            lines: lines.unwrap_or(0),
            escapes,
            turn: false,
        })
        .await?;
    let text = without_trailing_blank_lines(&r.into_inner().text);
    if json {
        return print_json(&json!({"session": name, "text": text}));
    }
    print!("{text}");
    Ok(())
}

/// The screen without the blank rows below its last text (a pane whose CLI exited shows one
/// line and 49 empty ones), ending in one newline.
fn without_trailing_blank_lines(text: &str) -> String {
    let kept = text.trim_end_matches(['\n', ' ', '\r']);
    if kept.is_empty() {
        String::new()
    } else {
        format!("{kept}\n")
    }
}

/// Prints the last reply of `name` to stdout.
pub async fn print_last(c: &mut Client, name: &str, json: bool) -> Result<()> {
    let r = c
        .get_last_reply(v1::GetLastReplyRequest {
            session: name.to_string(),
        })
        .await?
        .into_inner();
    if r.seq == 0 {
        bail!("{name} has not completed a turn yet");
    }
    let whole = if r.blob_id.is_empty() {
        r.text.clone().into_bytes()
    } else {
        read_blob(c, &r.blob_id)
            .await
            .with_context(|| format!("reading the whole reply ({} bytes)", r.full_bytes))?
    };
    if json {
        return print_json(&json!({
            "session": name,
            "seq": r.seq,
            "text": String::from_utf8_lossy(&whole),
        }));
    }
    let mut out = std::io::stdout().lock();
    out.write_all(&whole)?;
    if !whole.ends_with(b"\n") {
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// The whole blob, chunk after chunk, resuming from the last byte received should the stream
/// break.
pub async fn read_blob(c: &mut Client, id: &str) -> Result<Vec<u8>> {
    let mut data = Vec::new();
    let mut tries = 0;
    loop {
        let mut stream = c
            .read_blob(v1::ReadBlobRequest {
                blob_id: id.to_string(),
                offset: data.len() as u64,
            })
            .await?
            .into_inner();
        let mut broke = None;
        loop {
            match stream.message().await {
                Ok(Some(chunk)) => {
                    if chunk.offset != data.len() as u64 {
                        bail!(
                            "the daemon sent bytes from {} while {} were expected",
                            chunk.offset,
                            data.len()
                        );
                    }
                    let end = chunk.data.is_empty();
                    data.extend_from_slice(&chunk.data);
                    if end || data.len() as u64 >= chunk.total {
                        return Ok(data);
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    broke = Some(e);
                    break;
                }
            }
        }
        tries += 1;
        if tries >= 3 {
            match broke {
                Some(e) => return Err(e.into()),
                None => bail!("the daemon ended the blob after {} bytes", data.len()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_rows_below_the_screen_are_not_printed() {
        assert_eq!(
            without_trailing_blank_lines("$ exit\n\n\n   \n\n"),
            "$ exit\n"
        );
        assert_eq!(without_trailing_blank_lines("a\n\nb\n"), "a\n\nb\n");
        assert_eq!(without_trailing_blank_lines("\n\n"), "");
    }
}
