//! Building blocks for `clibot-gateway`, the process that relays clibot sessions to chat
//! platforms (Telegram, Discord, Feishu). Everything here is pure and synchronous: no
//! network, no tokio, so each piece is easy to test and reuse.
//!
//! The outgoing path for CLI output is: [`redact()`] the text (so no secret leaves the
//! machine), decide with [`chunk::should_send_as_file`] whether it is too long for chat,
//! then either [`chunk::chunk`] it (Discord, plain Telegram) or
//! [`telegram_html::render_chunks`] it (Telegram HTML), or send a
//! [`chunk::file_summary`] plus the full text as a file. Redact before chunking: redaction
//! changes lengths, and a secret split across two chunks would escape the patterns.
//!
//! The incoming path is [`command`]: decide whether a chat message is a gateway command,
//! an answer to a waiting prompt, or text for the CLI.

mod text;

pub use text::{chunk, command, phone_screen, redact, shot, telegram_html};

pub use redact::redact;

/// Whether a failed call means the daemon connection is gone (rather than a refusal of this
/// one call, which is logged and skipped: replaying it would fail the same way). One answer
/// for every caller: a call cut off as the daemon died reads "operation was canceled"
/// (Cancelled), which a chat must read as the daemon being away, not as a reply.
pub fn daemon_lost(s: &tonic::Status) -> bool {
    matches!(
        s.code(),
        tonic::Code::Unavailable
            | tonic::Code::Unknown
            | tonic::Code::Cancelled
            | tonic::Code::DeadlineExceeded
    )
}
