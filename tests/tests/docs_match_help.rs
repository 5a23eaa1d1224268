//! Every clibotctl command and flag the README and docs/*.md name exists, as `--help` says:
//! documentation that names a flag the tool does not have costs a newcomer an hour.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use clibot_tests::bin;

/// `clibotctl ARGS --help`, or None when clibotctl refuses it (no such command).
fn help(args: &[&str]) -> Option<String> {
    let out = Command::new(bin("clibotctl"))
        .args(args)
        .arg("--help")
        .output()
        .expect("run clibotctl");
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The words after `clibotctl` in a command line, up to a shell separator or a comment.
fn command_words(line: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("clibotctl ") {
        let after = &rest[at + "clibotctl ".len()..];
        let end = after
            .find(['|', ';', '&', '#', '`', '>', '<', ')', '('])
            .unwrap_or(after.len());
        found.push(
            after[..end]
                .split_whitespace()
                .map(str::to_string)
                .collect(),
        );
        rest = after;
    }
    found
}

/// (command path, flags) named in one command line, when its first word is a command.
fn parse(words: &[String], commands: &BTreeSet<String>) -> Option<(Vec<String>, Vec<String>)> {
    let mut i = 0;
    // Global flags first.
    while i < words.len() && words[i].starts_with('-') {
        i += if words[i] == "--socket" { 2 } else { 1 };
    }
    let first = words.get(i)?;
    if !commands.contains(first) {
        return None;
    }
    let mut path = vec![first.clone()];
    // Commands with subcommands: the flags are the subcommand's.
    let subs: &[&str] = match first.as_str() {
        "pairing" => &["list", "approve", "revoke"],
        "automation" => &["report"],
        "patterns" => &["test"],
        "hooks" => &["install", "uninstall", "status"],
        "jobs" => &["add", "list", "show", "remove", "pause", "resume", "run"],
        "worktree" => &[
            "list", "diff", "merge", "pr", "keep", "discard", "resolve", "prune",
        ],
        _ => &[],
    };
    if let Some(sub) = words.get(i + 1)
        && subs.contains(&sub.as_str())
    {
        path.push(sub.clone());
    }
    let flags = words[i..]
        .iter()
        .take_while(|w| *w != "--")
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| {
            w.split('=')
                .next()
                .unwrap_or(w)
                .trim_end_matches(',')
                .to_string()
        })
        .collect();
    Some((path, flags))
}

#[test]
fn every_documented_command_and_flag_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("root")
        .to_path_buf();
    let top = help(&[]).expect("clibotctl --help");
    let commands: BTreeSet<String> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .chain(["hook".to_string()])
        .collect();
    assert!(commands.contains("spawn"), "{top}");
    let mut files = vec![root.join("README.md")];
    for e in std::fs::read_dir(root.join("docs"))
        .expect("docs")
        .flatten()
    {
        if e.path().extension().is_some_and(|x| x == "md") {
            files.push(e.path());
        }
    }
    let mut problems = Vec::new();
    let mut checked = 0;
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read doc");
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut in_reference = false;
        for (n, line) in text.lines().enumerate() {
            if line.starts_with('#') {
                in_reference = line.contains("clibotctl reference");
            }
            let mut uses: Vec<(Vec<String>, Vec<String>)> = command_words(line)
                .iter()
                .filter_map(|w| parse(w, &commands))
                .collect();
            // The reference table: | `COMMAND ...` | `--flag`, ... | what it does |
            if in_reference && line.starts_with("| `") {
                let cells: Vec<&str> = line.split('|').collect();
                if let (Some(cmds), Some(flags)) = (cells.get(1), cells.get(2)) {
                    let flags: Vec<String> = flags
                        .split(['`', ',', ' '])
                        .filter(|w| w.starts_with("--") && w.len() > 2)
                        .map(str::to_string)
                        .collect();
                    // `a` / `b CODE`: one row for several commands, the flags for each.
                    for cmd in cmds.split(" / ") {
                        let words: Vec<String> = cmd
                            .trim()
                            .trim_matches('`')
                            .split_whitespace()
                            .map(str::to_string)
                            .collect();
                        if let Some((path, _)) = parse(&words, &commands) {
                            uses.push((path, flags.clone()));
                        }
                    }
                }
            }
            for (path, flags) in uses {
                checked += 1;
                let args: Vec<&str> = path.iter().map(String::as_str).collect();
                let Some(h) = help(&args) else {
                    problems.push(format!(
                        "{name}:{}: no command `clibotctl {}`",
                        n + 1,
                        path.join(" ")
                    ));
                    continue;
                };
                for flag in flags {
                    if !h.contains(&format!("{flag} "))
                        && !h.contains(&format!("{flag}\n"))
                        && !h.contains(&format!("{flag},"))
                        && !h.contains(&format!("{flag}="))
                        && !h.contains(&format!("{flag} <"))
                    {
                        problems.push(format!(
                            "{name}:{}: `clibotctl {}` has no {flag}",
                            n + 1,
                            path.join(" ")
                        ));
                    }
                }
            }
        }
    }
    assert!(checked > 40, "only {checked} commands found in the docs");
    assert!(
        problems.is_empty(),
        "the docs name what clibotctl does not have:\n{}",
        problems.join("\n")
    );
}
