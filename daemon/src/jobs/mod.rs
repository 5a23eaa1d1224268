//! Work that starts itself: jobs that run on a schedule, when a session goes idle, or by hand,
//! and goals that keep a session going until a check passes (`goals`: each session's goal and
//! its rounds, in `goals.json`).
//!
//! What this folder owns: what a job is (`spec`: checked as it is written, every error naming
//! its field), when a cron line is due (`cron`), the jobs' durable table (`table`: what is
//! due, what runs, what ended, in `jobs.json`), what a webhook's delivery must prove
//! (`webhook`), and the jobs proposed from a chat that wait for their button (`proposals`).
//! It decides nothing about sessions: running a job (its gate, typing its prompt, starting
//! its session), following its turn and taking a webhook are the daemon's, in
//! `session/jobs.rs`, `session/job_gate.rs` and `session/webhook.rs`.

pub mod cron;
pub mod goals;
pub mod proposals;
pub mod spec;
pub mod table;
pub mod webhook;

pub use spec::{JobSpec, Missed, Overlap};
pub use table::{Jobs, Outcome, Trigger};
