//! `clibotctl hooks install|uninstall|status`: clibot's hooks in the CLIs' own settings files, so
//! that every session of Claude Code, Codex, Gemini CLI, Copilot CLI and Qwen Code on the
//! machine (one in a plain terminal too) reports its turns and prompts to clibotd. File operations only; no daemon.
//!
//! `clis` knows each CLI's file, events and entry shape; `merge` edits a file's text (pure);
//! `doc` keeps a file's key order and layout; `backup` keeps what uninstall restores; `files`
//! reads and writes atomically.

mod backup;
mod clis;
mod doc;
mod files;
mod merge;

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};
use clap::Subcommand;
use serde_json::json;

use self::backup::Backup;
use self::clis::Cli;

#[derive(Debug, Subcommand)]
pub enum Action {
    /// Add clibot's hooks to the CLIs' settings files, next to your own hooks; the file as it
    /// was is kept for `uninstall`.
    Install {
        /// claude, codex, gemini, opencode, copilot or qwen (repeatable) [default: those of
        /// claude, codex, gemini, copilot and qwen whose config directory exists].
        #[arg(long = "cli", value_name = "CLI", value_parser = Cli::NAMES)]
        clis: Vec<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Take clibot's hooks out again: the file is put back byte for byte when it was not
    /// edited since install, else only clibot's entries are taken out.
    Uninstall {
        /// claude, codex, gemini, opencode, copilot or qwen (repeatable) [default: those of
        /// claude, codex, gemini, copilot and qwen whose config directory exists].
        #[arg(long = "cli", value_name = "CLI", value_parser = Cli::NAMES)]
        clis: Vec<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Per CLI: its settings file, whether clibot's hooks are in it (which events), whether a
    /// backup is kept, and what to know about it.
    Status {
        /// claude, codex, gemini, opencode, copilot or qwen (repeatable) [default: all six].
        #[arg(long = "cli", value_name = "CLI", value_parser = Cli::NAMES)]
        clis: Vec<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// What install or uninstall did to one CLI's file.
struct Outcome {
    cli: Cli,
    file: Option<PathBuf>,
    action: &'static str,
    note: String,
}

pub fn run(action: &Action) -> anyhow::Result<()> {
    match action {
        Action::Install { clis, json } => change(clis, *json, true),
        Action::Uninstall { clis, json } => change(clis, *json, false),
        Action::Status { clis, json } => status(clis, *json),
    }
}

/// The CLIs named, or by default those whose config directory exists.
fn chosen(names: &[String], verb: &str) -> anyhow::Result<Vec<Cli>> {
    let mut clis: Vec<Cli> = Vec::new();
    for name in names {
        let cli = Cli::from_name(name).ok_or_else(|| {
            anyhow!("unknown CLI {name:?}: use claude, codex, gemini, opencode, copilot or qwen")
        })?;
        if !clis.contains(&cli) {
            clis.push(cli);
        }
    }
    if !clis.is_empty() {
        return Ok(clis);
    }
    for cli in [
        Cli::Claude,
        Cli::Codex,
        Cli::Gemini,
        Cli::Copilot,
        Cli::Qwen,
    ] {
        if cli.config_dir()?.is_some_and(|d| d.is_dir()) {
            clis.push(cli);
        }
    }
    if clis.is_empty() {
        bail!(
            "none of Claude Code, Codex, Gemini CLI, Copilot CLI or Qwen Code has a config \
             directory here (~/.claude, ~/.codex, ~/.gemini, ~/.copilot, ~/.qwen): name the CLI, \
             e.g. `clibotctl hooks {verb} --cli claude`"
        );
    }
    Ok(clis)
}

fn change(names: &[String], json: bool, install_them: bool) -> anyhow::Result<()> {
    let clis = chosen(names, if install_them { "install" } else { "uninstall" })?;
    let exe = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .context("cannot find this clibotctl's own path")?;
    let store = backup::dir()?;
    let mut outcomes = Vec::new();
    let mut errors = Vec::new();
    for cli in clis {
        let done = match cli.settings_file() {
            Ok(None) => Ok(skipped(cli)),
            Ok(Some(path)) if install_them => install(
                cli,
                &files::target(&path),
                &clis::hook_command(&exe, cli),
                &store,
            ),
            Ok(Some(path)) => uninstall(cli, &files::target(&path), &store),
            Err(e) => Err(e),
        };
        match done {
            Ok(o) => outcomes.push(o),
            Err(e) => errors.push(format!("{}: {e:#}", cli.name())),
        }
    }
    if json {
        let out: Vec<_> = outcomes
            .iter()
            .map(|o| json!({"cli": o.cli.name(), "file": o.file, "action": o.action, "note": o.note}))
            .collect();
        println!("{}", serde_json::Value::Array(out));
    } else {
        for o in &outcomes {
            let file = o.file.as_ref().map(|f| format!(" in {}", f.display()));
            let action = o.action.replace('_', " ");
            println!(
                "{}: {action}{} — {}",
                o.cli.name(),
                file.unwrap_or_default(),
                o.note
            );
        }
        let hooked: Vec<&str> = outcomes
            .iter()
            .filter(|o| matches!(o.action, "installed" | "already_installed"))
            .map(|o| o.cli.name())
            .collect();
        if install_them && !hooked.is_empty() {
            println!(
                "Sessions of these CLIs now report to clibotd as u-CLI-PID (e.g. u-{}-12345) while \
                 it runs, and behave as before when it does not; `clibotctl hooks uninstall` \
                 undoes this.",
                hooked[0]
            );
        }
    }
    if !errors.is_empty() {
        bail!("{}", errors.join("\n"));
    }
    Ok(())
}

/// Merges clibot's hooks into `file`, keeping a backup in `store` first.
fn install(cli: Cli, file: &Path, command: &str, store: &Path) -> anyhow::Result<Outcome> {
    let file = file.to_path_buf();
    let text = files::read(&file)?;
    let merged = merge::install(text.as_deref(), cli, command).map_err(|e| refused(&file, &e))?;
    let mut note = cli.note().to_string();
    let Some(new) = merged else {
        return Ok(Outcome {
            cli,
            file: Some(file),
            action: "already_installed",
            note,
        });
    };
    let had_ours = text
        .as_deref()
        .is_some_and(|t| merge::installed_events(t).is_ok_and(|e| !e.is_empty()));
    let kept = backup::load(store, cli, &file)?;
    let backup = match (kept, had_ours) {
        // An earlier install (clibotctl moved since): the file before it is still the original.
        (Some(b), true) => Some(Backup {
            written: new.clone(),
            ..b
        }),
        // clibot's entries with no backup: no original to restore; uninstall takes them out.
        (None, true) => None,
        (_, false) => Some(Backup {
            file: file.clone(),
            original: text.clone(),
            written: new.clone(),
            created_dirs: files::missing_dirs(&file),
        }),
    };
    match &backup {
        Some(b) => backup::save(store, cli, b)?,
        None => backup::discard(store, cli, &file)?,
    }
    files::write_atomic(&file, &new)?;
    if had_ours {
        note = format!("updated clibot's entries; {note}");
    }
    Ok(Outcome {
        cli,
        file: Some(file),
        action: "installed",
        note,
    })
}

/// Takes clibot's hooks out of `file`: restores the backup in `store` when the file is as
/// clibot wrote it, else removes only clibot's entries.
fn uninstall(cli: Cli, file: &Path, store: &Path) -> anyhow::Result<Outcome> {
    let file = file.to_path_buf();
    let text = files::read(&file)?;
    let kept = backup::load(store, cli, &file)?;
    let outcome = |action, note: &str| Outcome {
        cli,
        file: Some(file.clone()),
        action,
        note: note.to_string(),
    };
    if let (Some(b), Some(t)) = (&kept, &text)
        && *t == b.written
    {
        match &b.original {
            Some(original) => files::write_atomic(&file, original)?,
            None => files::remove(&file, &b.created_dirs)?,
        }
        backup::discard(store, cli, &file)?;
        let note = if b.original.is_some() {
            "the file is back as it was before install"
        } else {
            "there was no file before install, so it was removed"
        };
        return Ok(outcome("removed", note));
    }
    let Some(text) = text else {
        backup::discard(store, cli, &file)?;
        return Ok(outcome("not_installed", "there is no such file"));
    };
    let original = kept.as_ref().map(|b| b.original.as_deref());
    let stripped = merge::uninstall(&text, cli, original).map_err(|e| refused(&file, &e))?;
    let Some(new) = stripped else {
        backup::discard(store, cli, &file)?;
        return Ok(outcome("not_installed", "it holds none of clibot's hooks"));
    };
    files::write_atomic(&file, &new)?;
    backup::discard(store, cli, &file)?;
    let note = if kept.is_some() {
        "the file was edited since install, so it was not restored byte for byte: only clibot's \
         entries were taken out"
    } else {
        "only clibot's entries were taken out (no backup was kept)"
    };
    Ok(outcome("removed", note))
}

fn skipped(cli: Cli) -> Outcome {
    Outcome {
        cli,
        file: None,
        action: "skipped",
        note: format!("{}; nothing was changed", cli.note()),
    }
}

/// A settings file clibot will not touch, and what to do about it.
fn refused(file: &Path, why: &str) -> anyhow::Error {
    anyhow!(
        "{} {why}; nothing was changed: fix the file (or move it away) and run this again",
        file.display()
    )
}

fn status(names: &[String], json: bool) -> anyhow::Result<()> {
    let store = backup::dir()?;
    let clis = if names.is_empty() {
        Cli::ALL.to_vec()
    } else {
        chosen(names, "status")?
    };
    let mut rows = Vec::new();
    for cli in clis {
        let Some(path) = cli.settings_file()? else {
            rows.push(json!({"cli": cli.name(), "file": null, "installed": false,
                "events": [], "backup": false, "note": cli.note()}));
            continue;
        };
        let file = files::target(&path);
        let mut note = cli.note().to_string();
        let events = match files::read(&file) {
            Ok(Some(text)) => {
                if cli == Cli::Gemini && merge::hooks_disabled(&text) {
                    note = format!(
                        "hooksConfig.enabled is false, so Gemini CLI runs no hooks; {note}"
                    );
                }
                merge::installed_events(&text).unwrap_or_else(|e| {
                    note = format!("{} {e}; {note}", file.display());
                    Vec::new()
                })
            }
            Ok(None) => Vec::new(),
            Err(e) => {
                note = format!("{e:#}; {note}");
                Vec::new()
            }
        };
        rows.push(
            json!({"cli": cli.name(), "file": file, "installed": !events.is_empty(),
            "events": events, "backup": backup::exists(&store, cli, &file), "note": note}),
        );
    }
    if json {
        println!("{}", serde_json::Value::Array(rows));
        return Ok(());
    }
    for r in &rows {
        let cli = r["cli"].as_str().unwrap_or_default();
        let note = r["note"].as_str().unwrap_or_default();
        let Some(file) = r["file"].as_str() else {
            println!("{cli}: no hooks — {note}");
            continue;
        };
        let events: Vec<&str> = r["events"]
            .as_array()
            .map(|a| a.iter().filter_map(|e| e.as_str()).collect())
            .unwrap_or_default();
        let state = if events.is_empty() {
            "not installed".to_string()
        } else {
            format!("installed ({})", events.join(", "))
        };
        let backup = if r["backup"] == true {
            ", backup kept"
        } else {
            ""
        };
        println!("{cli}: {state} in {file}{backup} — {note}");
    }
    if rows.iter().all(|r| r["installed"] != true) {
        println!("`clibotctl hooks install` adds them.");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
