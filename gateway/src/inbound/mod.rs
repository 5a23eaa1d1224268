//! Chat messages → daemon calls: the router (commands, answers to prompts, text and files for
//! the CLI), the once-only claims of messages that change something, the (chat, user) pairs
//! the daemon accepted, and voice notes turned into text. It may use `outbound/` (a reply's
//! files and pictures), `platforms/`, `ops/` and `bounded.rs`; none of those may use it.

pub mod claim;
pub mod router;
pub mod transcribe;
pub mod verified;
