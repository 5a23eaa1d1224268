//! `clibotctl dial-stdio`: this process's standard input and output joined to the daemon's
//! socket, so that `ssh HOST clibotctl dial-stdio` is a gRPC connection to HOST's daemon,
//! authenticated by SSH as that user (the way `docker system dial-stdio` serves `docker -H
//! ssh://`). The daemon's own checks apply: it sees a same-uid peer, like any local client.

use std::path::Path;

use anyhow::Context;
use tokio::io::AsyncWriteExt;

/// Copies until the daemon closes the connection (or stdin ends and the daemon answers all).
pub async fn dial_stdio(socket: &Path) -> anyhow::Result<()> {
    let stream = clibot_proto::open_socket(socket).await?;
    let (mut from_daemon, mut to_daemon) = stream.into_split();
    // Up: what the far side sends. Its end (ssh closed) half-closes the socket, so the daemon
    // finishes what it was asked and closes.
    tokio::spawn(async move {
        let mut stdin = tokio::io::stdin();
        let _ = tokio::io::copy(&mut stdin, &mut to_daemon).await;
        let _ = to_daemon.shutdown().await;
    });
    let mut stdout = tokio::io::stdout();
    tokio::io::copy(&mut from_daemon, &mut stdout)
        .await
        .context("the connection to the daemon broke")?;
    stdout.flush().await?;
    Ok(())
}
