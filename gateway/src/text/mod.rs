//! The library's pure text pieces: chat text out (redaction — kept in `clibot_proto::redact` —, chunking, Telegram HTML, the pane
//! for a phone as text or as a PNG) and in (telling gateway commands from text for the CLI).
//! No network, no tokio, nothing of the binary's: this folder imports only its own files, and
//! `lib.rs` re-exports each public module under its old path (`clibot_gateway::chunk`, …).

pub mod chunk;
pub mod command;
mod fence;
pub mod phone_screen;
/// Redaction lives with the contract: the daemon redacts what it sends off the machine too.
pub use clibot_proto::redact;
pub mod shot;
pub mod telegram_html;
