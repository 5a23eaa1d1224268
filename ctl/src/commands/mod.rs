//! What each `clibotctl` command does, one file per area of the command line: it turns parsed
//! arguments into requests to clibotd (or reads a state file) and prints the answer.
//!
//! `sessions` (list, show, spawn, stop, restart, adopt, release, attach, delegate), `io` (send,
//! keys, screen, answer, last), `chat` (chats, share, pairing, transcript), `ops` (status,
//! events, metrics, rules, reload, audit), `automation` (the report of what followed automatic
//! answers), `jobs` (add, list, show, remove, pause, resume, run), `worktree` (diff, merge, pr, keep, discard, prune), `prompts` (what waits for an answer), `script` (`wait` and `ask`, for scripts), `hook` (the CLIs' hook entry, which must never fail them). `output` is how sessions, events and rules look on a terminal and as JSON;
//! `audit_log` reads the audit log's files. Nothing here parses arguments, connects on its own
//! (`main` hands each command a client) or reaches back into `main` or `doctor`.

mod audit_log;
pub mod automation;
pub mod chat;
pub mod completions;
pub mod dial;
pub mod docs;
pub mod hook;
pub mod io;
pub mod jobs;
pub mod logs;
pub mod ops;
mod output;
pub mod patterns;
pub mod prompts;
pub mod script;
pub mod sessions;
pub mod usage;
pub mod worktree;
