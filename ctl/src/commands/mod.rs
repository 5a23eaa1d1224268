//! What each `clibotctl` command does, one file per area of the command line: it turns parsed
//! arguments into requests to clibotd (or reads a state file) and prints the answer.
//! `main.rs` parses and dispatches; nothing here parses arguments or names `main`.
//! `sessions` (list, show, spawn, stop, restart, adopt, release, attach, delegate), `io` (send,
//! keys, screen, answer, last), `chat` (chats, share, pairing, transcript), `ops` (status,
//! events, metrics, rules, reload, audit, reading `audit_log`), `hook` (the CLIs' hook entry).

pub mod audit_log;
pub mod chat;
pub mod hook;
pub mod io;
pub mod ops;
pub mod sessions;
