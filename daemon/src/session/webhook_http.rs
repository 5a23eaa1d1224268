//! The webhook endpoint (`[triggers] listen`): `POST /hooks/JOB` on a loopback port or a Unix
//! socket, bounded like the metrics endpoint (connections, idle time), with a capped body
//! that must arrive in [`BODY_WITHIN`]. What a delivery must prove is the daemon's
//! (`webhook.rs`); this file only reads requests and writes answers.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use http_body_util::BodyExt;
use tokio_util::sync::CancellationToken;

use crate::core::Daemon;
use crate::jobs::webhook::{Delivery, Listen};
use crate::ops::http;

/// How long a request's body may take to arrive.
pub const BODY_WITHIN: Duration = Duration::from_secs(30);

fn header(req: &hyper::Request<hyper::body::Incoming>, name: &str) -> Option<String> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Answers one request.
async fn handle(
    daemon: Daemon,
    req: hyper::Request<hyper::body::Incoming>,
    max_body: usize,
    window: Duration,
) -> hyper::Response<http::Body> {
    let path = req.uri().path().to_string();
    let Some(name) = path.strip_prefix("/hooks/").filter(|n| !n.is_empty()) else {
        return http::text(404, "webhooks are taken on POST /hooks/JOB\n");
    };
    let name = name.to_string();
    if req.method() != hyper::Method::POST {
        return http::text(405, "POST only\n");
    }
    let mut d = Delivery {
        signature: header(&req, "x-hub-signature-256").unwrap_or_default(),
        timestamp: header(&req, "x-clibot-timestamp"),
        id: header(&req, "x-github-delivery")
            .or_else(|| header(&req, "x-clibot-delivery"))
            .unwrap_or_default(),
        event: header(&req, "x-github-event").unwrap_or_default(),
        body: Vec::new(),
    };
    let body = http_body_util::Limited::new(req.into_body(), max_body);
    d.body = match tokio::time::timeout(BODY_WITHIN, body.collect()).await {
        Ok(Ok(b)) => b.to_bytes().to_vec(),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            return http::text(
                413,
                format!("the body is over {max_body} bytes ([triggers] max_body)\n"),
            );
        }
        Ok(Err(e)) => return http::text(400, format!("the body could not be read: {e}\n")),
        Err(_) => return http::text(408, "the body took too long to arrive\n"),
    };
    let a = daemon.take_webhook(&name, d, window).await;
    http::text(a.status, format!("{}\n", a.text))
}

/// Serves the webhooks at `listen` until `shutdown` is cancelled. A Unix socket is made
/// readable and writable by this user only; a stale socket file is replaced, anything else
/// at that path is refused.
pub async fn serve(
    daemon: Daemon,
    listen: Listen,
    shutdown: CancellationToken,
) -> std::io::Result<String> {
    let cfg = daemon.settings().config.triggers.clone();
    let window = cfg.window().map_err(std::io::Error::other)?;
    let max_body = cfg.max_body;
    let handler = move |req| handle(daemon.clone(), req, max_body, window);
    let limits = http::Limits::new("webhook endpoint");
    match listen {
        Listen::Tcp(addr) => {
            let l = tokio::net::TcpListener::bind(addr).await?;
            let at = l.local_addr().map_or(addr.to_string(), |a| a.to_string());
            tokio::spawn(http::serve(l, handler, limits, shutdown));
            Ok(at)
        }
        Listen::Unix(path) => {
            use std::os::unix::fs::FileTypeExt;
            match std::fs::symlink_metadata(&path) {
                Ok(m) if m.file_type().is_socket() => std::fs::remove_file(&path)?,
                Ok(_) => {
                    return Err(std::io::Error::other(format!(
                        "{} exists and is no socket: choose another [triggers] listen path",
                        path.display()
                    )));
                }
                Err(_) => {}
            }
            let l = tokio::net::UnixListener::bind(&path)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
            tokio::spawn(http::serve(l, handler, limits, shutdown));
            Ok(format!("unix:{}", path.display()))
        }
    }
}
