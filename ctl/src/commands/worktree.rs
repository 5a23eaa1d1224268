//! `clibotctl worktree …`: the worktrees of sessions started with `--worktree` — list, diff,
//! merge, pull request, keep, discard, ask the agent to resolve, and the clean-up
//! (docs/WORKTREES.md). The daemon does each; this prints what it said.

use std::io::Write;

use clap::Subcommand;
use clibot_proto::{Client, v1};

#[derive(Debug, Subcommand)]
pub enum WorktreeAction {
    /// The worktrees clibot made and has not removed: branch, base, uncommitted files,
    /// ahead/behind, whether the session runs.
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The session's work against its base: the stat, files git does not track, then the
    /// patch (of FILE only, when given).
    Diff {
        /// The session's name.
        name: String,
        /// Only this file's changes (a path in the worktree).
        file: Option<String>,
        /// The stat only.
        #[arg(long)]
        stat: bool,
    },
    /// Rebase the session's branch on its base (or --into) and fast-forward that branch,
    /// never switching or overwriting your checkout; on a conflict nothing changes and the
    /// files are named (exit 1).
    Merge {
        /// The session's name.
        name: String,
        /// The branch to merge into [default: the branch the worktree was made from].
        #[arg(long)]
        into: Option<String>,
    },
    /// Push the branch to origin and open a pull request with `gh` (installed and signed in).
    Pr {
        /// The session's name.
        name: String,
    },
    /// Keep it: the daily clean-up no longer reminds anyone of it.
    Keep {
        /// The session's name.
        name: String,
    },
    /// Remove the worktree and its branch, whatever they hold (the session is stopped first).
    Discard {
        /// The session's name.
        name: String,
        /// The session's name again: nothing is discarded without it.
        #[arg(long)]
        confirm: Option<String>,
    },
    /// Ask the session's agent to rebase on its base (or --into) and resolve the conflicts.
    Resolve {
        /// The session's name.
        name: String,
        /// The branch to rebase on [default: the branch the worktree was made from].
        #[arg(long)]
        into: Option<String>,
    },
    /// Start a session just spawned outside a worktree again in one of its own (nothing may
    /// have been typed into it yet).
    Isolate {
        /// The session's name.
        name: String,
    },
    /// Remove the worktrees of stopped sessions that are clean and merged or pushed; list the
    /// rest as stale.
    Prune {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(c: &mut Client, action: WorktreeAction) -> anyhow::Result<()> {
    use v1::WorktreeAction as A;
    let mut req = v1::WorktreeRequest::default();
    let (kind, json) = match action {
        WorktreeAction::List { json } => (A::List, json),
        WorktreeAction::Prune { json } => (A::Prune, json),
        WorktreeAction::Diff { name, file, stat } => {
            req.session = name;
            req.file = file.unwrap_or_default();
            req.action = A::Diff as i32;
            let r = c.worktree(req).await?.into_inner();
            println!("{}", r.text);
            if !stat && !r.patch.is_empty() {
                println!();
                std::io::stdout().write_all(&r.patch)?;
            }
            return Ok(());
        }
        WorktreeAction::Merge { name, into } => {
            req.session = name;
            req.into = into.unwrap_or_default();
            (A::Merge, false)
        }
        WorktreeAction::Pr { name } => {
            req.session = name;
            (A::Pr, false)
        }
        WorktreeAction::Keep { name } => {
            req.session = name;
            (A::Keep, false)
        }
        WorktreeAction::Discard { name, confirm } => {
            req.session = name;
            req.confirm = confirm.unwrap_or_default();
            (A::Discard, false)
        }
        WorktreeAction::Isolate { name } => {
            req.session = name;
            (A::Isolate, false)
        }
        WorktreeAction::Resolve { name, into } => {
            req.session = name;
            req.into = into.unwrap_or_default();
            (A::Resolve, false)
        }
    };
    req.action = kind as i32;
    let r = c.worktree(req).await?.into_inner();
    match kind {
        A::List if json => println!("{}", serde_json::to_string_pretty(&list_json(&r))?),
        A::List => print_list(&r),
        A::Prune if json => println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "removed": r.removed,
                "stale": r.stale,
            }))?
        ),
        A::Prune => {
            println!("{}", r.text);
            for s in &r.stale {
                println!("kept (holds work): {s}");
            }
        }
        _ => {
            println!("{}", r.text);
            if !r.conflicts.is_empty() {
                std::process::exit(1);
            }
        }
    }
    Ok(())
}

fn list_json(r: &v1::WorktreeResponse) -> serde_json::Value {
    serde_json::Value::Array(
        r.worktrees
            .iter()
            .map(|k| {
                let w = k.worktree.clone().unwrap_or_default();
                serde_json::json!({
                    "session": k.session,
                    "running": k.running,
                    "repo": w.repo,
                    "path": w.path,
                    "branch": w.branch,
                    "base": w.base,
                    "dirty": w.dirty,
                    "ahead": w.ahead,
                    "behind": w.behind,
                    "missing": w.missing,
                    "keep": k.keep,
                    "pr_url": k.pr_url,
                    "made_ms": k.made_ms,
                })
            })
            .collect(),
    )
}

fn print_list(r: &v1::WorktreeResponse) {
    if r.worktrees.is_empty() {
        println!("no worktrees (spawn NAME --worktree makes one)");
        return;
    }
    for k in &r.worktrees {
        let w = k.worktree.clone().unwrap_or_default();
        let state = if w.missing {
            "folder gone".to_string()
        } else {
            format!(
                "{} ahead, {} behind, {} uncommitted",
                w.ahead, w.behind, w.dirty
            )
        };
        println!(
            "{}\t{}\t{} from {}\t{}\t{}",
            k.session,
            if k.running { "running" } else { "stopped" },
            w.branch,
            w.base,
            state,
            w.path
        );
    }
}
