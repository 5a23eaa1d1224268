//! `clibotctl last`: a session's last reply, whole. A reply longer than an event carries (256
//! KiB) is read through the daemon's `ReadBlob` stream in chunks, so that no single message
//! outgrows gRPC's 4 MiB limit however long the reply was.

use std::io::Write;

use anyhow::{Context, Result, bail};
use clibot_proto::{Client, v1};

/// Prints the last reply of `name` to stdout.
pub async fn print_last(c: &mut Client, name: &str) -> Result<()> {
    let r = c
        .get_last_reply(v1::GetLastReplyRequest {
            session: name.to_string(),
        })
        .await?
        .into_inner();
    if r.seq == 0 {
        bail!("{name} has not completed a turn yet");
    }
    let mut out = std::io::stdout().lock();
    if r.blob_id.is_empty() {
        writeln!(out, "{}", r.text)?;
        return Ok(());
    }
    let whole = read_blob(c, &r.blob_id)
        .await
        .with_context(|| format!("reading the whole reply ({} bytes)", r.full_bytes))?;
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
