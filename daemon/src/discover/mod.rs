//! Discovery: the AI CLIs running as this user that clibot does not manage — in a pane of any
//! of the user's tmux servers, or in another terminal. Read-only: nothing is changed by looking.
//!
//! What a process is comes from its process tree (its executable and script paths, the package
//! they belong to and its version), never from window or session names. Which conversation it
//! holds is a best guess from the CLI's own records, `None` when that is ambiguous.

mod scan;

use std::path::PathBuf;

pub use scan::scan;

/// Where a discovered CLI runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A pane of a tmux server: its socket and pane id.
    Tmux { server: PathBuf, pane: String },
    /// A terminal outside tmux.
    Tty { tty: String },
    /// Neither (no terminal: a background process).
    Detached,
}

/// One AI CLI found running.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// `CLI-PID`: what `resume` and `adopt` name it by.
    pub id: String,
    pub cli: String,
    /// From the package it runs from; empty when unknown.
    pub version: String,
    pub pid: u32,
    pub dir: PathBuf,
    pub started_ms: i64,
    pub place: Place,
    pub conversation_id: Option<String>,
    /// "adopt" (a pane clibot can take over), "resume" (a conversation clibot can continue).
    pub actions: Vec<String>,
    /// The session it reports as through the global hooks (`u-CLI-PID`): watched, not
    /// managed; empty when it reports nothing.
    pub watched: String,
}

/// Interpreters that run a CLI's script (the script is then the next argument).
const RUNTIMES: &[&str] = &["node", "nodejs", "bun", "deno"];

/// Which CLI a process is, from its executable and arguments, and the path it runs from (the
/// executable, or the script an interpreter runs). `None`: not an AI CLI clibot knows.
pub fn identify(exe: &str, argv: &[String]) -> Option<(&'static str, String)> {
    let base = |p: &str| p.rsplit('/').next().unwrap_or(p).to_string();
    let mut paths: Vec<String> = vec![exe.to_string()];
    if let Some(a0) = argv.first() {
        paths.push(a0.clone());
        let runtime =
            RUNTIMES.contains(&base(a0).as_str()) || RUNTIMES.contains(&base(exe).as_str());
        if runtime {
            // The script: the first argument that is not an option.
            if let Some(script) = argv.iter().skip(1).find(|a| !a.starts_with('-')) {
                paths.push(script.clone());
            }
        }
    }
    // The AI CLIs clibot knows, by the package paths and program names they run as.
    for c in clibot_proto::clis::CLIS {
        for p in &paths {
            if c.install_dirs.iter().any(|d| p.contains(d))
                || c.programs.contains(&base(p).as_str())
            {
                return Some((c.name, p.clone()));
            }
        }
    }
    None
}

/// Which AI CLI process `pid` is, if any (from its executable and arguments).
pub fn identify_pid(pid: u32) -> Option<&'static str> {
    let (exe, argv) = exe_and_argv(pid)?;
    identify(&exe, &argv).map(|(cli, _)| cli)
}

/// A process's executable (empty when unreadable) and arguments, from /proc.
pub(crate) fn exe_and_argv(pid: u32) -> Option<(String, Vec<String>)> {
    let base = std::path::PathBuf::from(format!("/proc/{pid}"));
    let argv: Vec<String> = std::fs::read(base.join("cmdline"))
        .ok()?
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let exe = std::fs::read_link(base.join("exe"))
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    Some((exe, argv))
}

pub use crate::cli::version::package_version;

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn cli_kinds_come_from_paths_and_program_names() {
        let claude = "/home/u/.npm/lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe";
        assert_eq!(
            identify(claude, &args(&["claude", "--resume"])).map(|(c, _)| c),
            Some("claude")
        );
        let codex = "/home/u/n/node_modules/@openai/codex/bin/codex.js";
        assert_eq!(
            identify("/usr/bin/node", &args(&["node", codex, "exec"])),
            Some(("codex", codex.to_string()))
        );
        let gemini = "/x/node_modules/@google/gemini-cli/bundle/gemini.js";
        assert_eq!(
            identify("/usr/bin/node", &args(&["node", "--no-warnings", gemini])).map(|(c, _)| c),
            Some("gemini")
        );
        assert_eq!(
            identify(
                "/x/node_modules/opencode-linux-x64/bin/opencode",
                &args(&["opencode"])
            )
            .map(|(c, _)| c),
            Some("opencode")
        );
        // A file that merely mentions a CLI is not one.
        assert_eq!(
            identify("/usr/bin/vim", &args(&["vim", "/home/u/claude/notes.md"])),
            None
        );
        assert_eq!(identify("/usr/bin/bash", &args(&["bash"])), None);
        assert_eq!(
            identify("/usr/bin/node", &args(&["node", "/srv/app/server.js"])),
            None
        );
    }

    #[test]
    fn the_version_is_the_packages() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pkg = dir.path().join("node_modules/@openai/codex");
        std::fs::create_dir_all(pkg.join("bin")).expect("mkdir");
        std::fs::write(
            pkg.join("package.json"),
            r#"{"name": "@openai/codex", "version": "0.98.0"}"#,
        )
        .expect("write");
        assert_eq!(package_version(&pkg.join("bin/codex.js")), "0.98.0");
        // Run through node_modules/.bin, the link npm makes: still the package's version.
        let bin = dir.path().join("node_modules/.bin");
        std::fs::create_dir_all(&bin).expect("mkdir");
        std::fs::write(dir.path().join("package.json"), r#"{"version": "0.0.0"}"#).expect("root");
        std::os::unix::fs::symlink("../@openai/codex/bin/codex.js", bin.join("codex"))
            .expect("symlink");
        std::fs::write(pkg.join("bin/codex.js"), "").expect("script");
        assert_eq!(package_version(&bin.join("codex")), "0.98.0");
        assert_eq!(package_version(Path::new("/nonexistent/x/y")), "");
    }
}
