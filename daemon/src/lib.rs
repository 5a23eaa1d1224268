//! clibotd: owns the tmux sessions that run AI coding CLIs, keeps the durable event log, and
//! serves the `clibot.v1` gRPC contract on a Unix socket.
//!
//! Layout: `core` is the daemon's logic and knows nothing of gRPC; `rpc` translates; `server`
//! owns the socket and who may connect; `tmux` is the multiplexer adapter behind the `Mux`
//! trait; `events` and `store` own the files in the state directory.

pub mod automation;
pub mod caller;
pub mod chat;
pub mod cli;
pub mod config;
pub mod confine;
pub mod core;
pub mod discover;
pub mod duration;
pub mod error;
pub mod ids;
pub mod jobs;
pub mod keys;
pub mod locking;
pub mod model;
pub mod names;
pub mod ops;
pub mod paths;
pub mod procs;
pub(crate) mod prompt;
pub mod rpc;
pub mod safe_git;
pub mod server;
pub mod session;
pub mod store;
pub mod tmux;
pub mod turn;
pub mod usage;
pub mod worktrees;
