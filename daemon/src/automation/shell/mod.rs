//! A command guard that parses shell text instead of matching it with patterns.
//!
//! Text patterns are beaten by spelling: `rm --force --recursive`, `r''m -rf`, `$(echo rm)`,
//! `curl … | env sh`, `${HOME}/.bashrc`. Here a command line is parsed (`brush-parser`) into
//! its simple commands, with quotes removed and every expansion seen, and then judged on that
//! form:
//!
//! - a command is *understood* only when what runs can be read from its words: a plain command
//!   name, no command or process substitution, no `eval`, no shell or interpreter given code on
//!   its command line or its input, no compound commands;
//! - the *guard* finds dangers in the parsed words (recursive forced deletes, force pushes,
//!   downloads run by a shell, privilege, writes outside the session's directory or into
//!   protected places), also inside substitutions and compound commands;
//! - *rules* (`CommandPattern`) approve a command only if every simple command in it matches.
//!
//! Everything is pure: no file system, no environment. The caller passes the session's
//! directory (already canonical) and the home directory.

mod commands;
mod guard;
mod parse;
mod paths;
mod rules;
mod worktrees;

#[cfg(test)]
mod corpus_tests;

use std::path::{Path, PathBuf};

pub use parse::{Base, Redirect, RedirectKind, SimpleCommand, Word};
pub use rules::CommandPattern;
pub use worktrees::Protected;

/// Where a command runs and what the guard must know about the machine.
#[derive(Debug, Clone, Copy)]
pub struct GuardContext<'a> {
    /// The session's directory, canonical; commands start there.
    pub session_dir: &'a Path,
    /// The user's home directory (`~`, `$HOME`).
    pub home: &'a Path,
    /// Paths that hold secrets (`~/.ssh`, `~/.aws`); never written, even under `allow_paths`.
    pub secret_paths: &'a [PathBuf],
    /// `[guard] allow_paths`: places outside the session's directory that may be written.
    /// They lift only the "outside the session's directory" rule, never a protected place.
    pub allow_paths: &'a [PathBuf],
    /// Other sessions' worktrees (and, for a session in a worktree, the repository's own
    /// checkout): git never removes, deletes or resets them without a person.
    pub protected: &'a [Protected],
}

/// What may be done with a command without a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every simple command is understood, matched by a pattern, and none is dangerous.
    Approve,
    /// A danger: never answered automatically, not by a rule and not by the decider.
    Guarded(String),
    /// What would run cannot be read from the text: a person decides (a decider may look).
    NotUnderstood(String),
    /// Understood and not dangerous, but this simple command matches no pattern.
    NoRule(String),
}

/// Judges a command line against the approved patterns. A danger wins over everything, so a
/// command that is both obscure and dangerous is reported as `Guarded`.
pub fn judge(command: &str, patterns: &[CommandPattern], ctx: &GuardContext) -> Verdict {
    let scanned = match parse::scan(command) {
        Ok(s) => s,
        Err(e) => return Verdict::NotUnderstood(e),
    };
    if let Some(why) = guard::check_list(&scanned, ctx) {
        return Verdict::Guarded(why);
    }
    if let Err(why) = understood(&scanned) {
        return Verdict::NotUnderstood(why);
    }
    for s in &scanned {
        if !patterns.iter().any(|p| p.matches(&s.cmd.argv)) {
            return Verdict::NoRule(format!("no rule approves `{}`", s.cmd.argv.join(" ")));
        }
    }
    Verdict::Approve
}

/// The danger in a command line, if any. A command line that does not parse is a danger here
/// (nothing in it can be vouched for); one that parses but is not fully understood (`eval`)
/// is not, unless a danger is found in what could be read: use `judge` or `parse` to know
/// whether it is understood.
pub fn guard_command(command: &str, ctx: &GuardContext) -> Option<String> {
    match parse::scan(command) {
        Ok(scanned) => guard::check_list(&scanned, ctx),
        Err(e) => Some(e),
    }
}

/// The danger in writing a file, for prompts that name a path rather than a command (a CLI's
/// own Write or Edit): the same resolution and rules as a shell redirection from the session's
/// directory. The path is taken as literal text, except a leading `~`, `~/`, `$HOME` or `$PWD`.
pub fn guard_path(path: &str, ctx: &GuardContext) -> Option<String> {
    let (base, rest) = if path == "~" || path.starts_with("~/") {
        (Base::Home, &path[1..])
    } else if let Some(r) = path
        .strip_prefix("${HOME}")
        .or_else(|| path.strip_prefix("$HOME"))
    {
        (Base::Home, r)
    } else if let Some(r) = path
        .strip_prefix("${PWD}")
        .or_else(|| path.strip_prefix("$PWD"))
    {
        (Base::Cwd, r)
    } else {
        (Base::Literal, path)
    };
    let word = Word {
        text: path.to_string(),
        base,
        rest: rest.to_string(),
        glob: false,
        plain: false,
    };
    paths::check_word(&word, &[Some(ctx.session_dir.to_path_buf())], ctx)
        .map(|why| format!("a write to {why}"))
}

/// The simple commands of a command line, or why it is not fully understood.
pub fn parse(command: &str) -> Result<Vec<SimpleCommand>, String> {
    let scanned = parse::scan(command)?;
    understood(&scanned)?;
    Ok(scanned.into_iter().map(|s| s.cmd).collect())
}

fn understood(scanned: &[parse::Scanned]) -> Result<(), String> {
    if scanned.is_empty() {
        return Err("no command".into());
    }
    for s in scanned {
        let why = s
            .problem
            .clone()
            .or_else(|| commands::refusal(&s.cmd.words));
        if let Some(why) = why {
            let shown = s.cmd.argv.join(" ");
            return Err(if shown.is_empty() {
                why
            } else {
                format!("{why}: `{shown}`")
            });
        }
    }
    Ok(())
}
