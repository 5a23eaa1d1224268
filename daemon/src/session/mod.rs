//! A session's life, as operations of the daemon: spawn, adopt, stop, restart and the limits
//! around them; input, queued and typed; the turn state machine driven by screens, hooks and
//! time; prompts and their answers, and what followed the automatic ones; the last reply.
//!
//! Each file adds the methods of one concern to [`crate::core::Daemon`], the holder of the
//! parts. Nothing below this folder (the store, tmux, the CLIs' adapters, the chat tables,
//! automation's rules) names it: they are the parts it drives.

mod adopt;
mod answer;
mod auto_answer;
mod bind_rights;
mod budgets;
mod cancel;
mod cli_version;
mod confine;
mod crash_restart;
mod declared;
mod default_chat;
mod delegation;
mod discover;
mod disk;
mod early;
mod files;
mod goals;
mod hibernate;
mod hooks;
mod in_place;
mod input;
mod jail_check;
mod job_gate;
mod jobs;
mod limit_card;
mod limits;
mod opencode_link;
mod outcomes;
mod owner;
mod profile_switch;
mod reload;
mod reply;
mod restart;
mod route;
mod runaway;
mod screen;
mod scrollback;
pub(crate) mod shared;
mod spawn;
mod startup;
mod stop;
mod take_up;
mod tick;
mod unanswered;
mod unmanaged;
mod usage;
mod watch;
pub mod webhook;
pub mod webhook_http;
mod workspace;
mod worktree;
mod worktree_finish;
mod worktree_isolate;
mod worktree_jail;
mod worktree_summary;

pub use answer::Answered;
pub use budgets::{BudgetView, budget_amount_words};
pub use cancel::Cancelled;
pub use files::MAX_FILE_BYTES;
pub use in_place::InPlace;
pub use input::Sent;
pub use jail_check::Verdict as JailVerdict;
pub use jobs::RunStarted;
pub use limit_card::LimitAction;
pub use outcomes::{Report, ReportRow};
pub use reply::LastReply;
pub use route::{RouteTask, Routed};
pub use worktree_finish::{Pruned, WorktreeDone, WorktreeOp};
