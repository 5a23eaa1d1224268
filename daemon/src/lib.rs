//! clibotd: owns the tmux sessions that run AI coding CLIs, keeps the durable event log, and
//! serves the `clibot.v1` gRPC contract on a Unix socket.
//!
//! Layout: `core` is the daemon's logic and knows nothing of gRPC; `rpc` translates; `server`
//! owns the socket and who may connect; `tmux` is the multiplexer adapter behind the `Mux`
//! trait; `events` and `store` own the files in the state directory.

pub mod access;
pub mod adapter;
pub mod audit;
pub mod automation;
pub mod bind_rights;
pub mod blobs;
pub mod caller;
pub mod chats;
pub mod config;
pub mod confine;
pub mod core;
pub mod dedupe;
pub mod delegation;
pub mod detect;
pub mod duration;
pub mod error;
pub mod events;
pub mod ids;
pub mod jail;
pub mod keys;
pub mod launch;
pub mod limits;
pub mod local_http;
pub mod locking;
pub mod metrics;
pub mod model;
pub mod names;
pub mod paths;
pub mod procs;
pub mod program;
pub mod queue_file;
pub mod rotating;
pub mod rpc;
pub mod safe_git;
pub mod secrets;
pub mod server;
pub mod session;
pub mod shell;
pub mod store;
pub mod subject;
pub mod tmux;
pub mod transcript;
