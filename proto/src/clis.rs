//! One row per AI CLI clibot knows: the facts about it that `clibotd` and `clibotctl` both read.
//!
//! Why one table: these facts were spread over string-keyed `match`es in discovery, version
//! reading, the jail, the default config and `doctor`, so adding a CLI meant finding them all.
//! Now a CLI is a row here, its adapter (`daemon/src/cli/NAME.rs`, which holds what is code:
//! how its hooks, records and screens are read), its pattern pack, its tests and its docs.

/// What clibot knows of one CLI before reading any config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CliRow {
    /// Its name: the default `[cli.NAME]` section, its adapter and its pattern pack.
    pub name: &'static str,
    /// How people call it, in messages.
    pub title: &'static str,
    /// The command a session runs when the config does not say (`argv[0]` is its program).
    pub argv: &'static [&'static str],
    /// The keys that ask it to quit, pressed by `stop` before the pane is closed.
    pub stop_keys: &'static [&'static str],
    /// The npm packages (name prefixes) whose version is the CLI's: a wrapper or a project
    /// around it is not, its version says nothing of the CLI's screens.
    pub packages: &'static [&'static str],
    /// Parts of the path it is installed under, by which discovery knows a running process.
    pub install_dirs: &'static [&'static str],
    /// The names its executable or script runs under, for discovery (and `doctor`, which
    /// knows these print a version with `--version`).
    pub programs: &'static [&'static str],
    /// Its own state below the home directory (path, is a directory), seeded into each jailed
    /// session's own home from the user's: its config and credentials, never the user's files
    /// that the owner's other sessions read.
    pub state_paths: &'static [(&'static str, bool)],
}

/// The AI CLIs, in the order they are listed to people.
pub const CLIS: &[CliRow] = &[
    CliRow {
        name: "claude",
        title: "Claude Code",
        // Claude Code 2.1.3xx starts in auto mode (tool calls vetted by the model, never
        // asked): clibot asks for its classic mode, where each tool call is a prompt.
        argv: &["claude", "--permission-mode", "default"],
        stop_keys: &["C-c", "C-c"],
        packages: &["@anthropic-ai/claude-code"],
        install_dirs: &["/@anthropic-ai/claude-code/"],
        programs: &["claude", "claude.exe"],
        state_paths: &[(".claude", true), (".claude.json", false)],
    },
    CliRow {
        name: "codex",
        title: "Codex",
        argv: &["codex"],
        stop_keys: &["C-c", "C-c"],
        packages: &["@openai/codex"],
        install_dirs: &["/@openai/codex/", "/@openai/codex-"],
        programs: &["codex", "codex.js"],
        state_paths: &[(".codex", true)],
    },
    CliRow {
        name: "gemini",
        title: "Gemini CLI",
        argv: &["gemini"],
        stop_keys: &["C-c", "C-c"],
        packages: &["@google/gemini-cli"],
        install_dirs: &["/@google/gemini-cli/"],
        programs: &["gemini", "gemini.js"],
        state_paths: &[(".gemini", true)],
    },
    CliRow {
        name: "opencode",
        title: "OpenCode",
        argv: &["opencode"],
        stop_keys: &["C-c"],
        packages: &["opencode"],
        install_dirs: &["/opencode-ai/", "/opencode-linux-", "/opencode-darwin-"],
        programs: &["opencode", "opencode.exe"],
        state_paths: &[
            (".config/opencode", true),
            (".local/share/opencode", true),
            (".local/state/opencode", true),
        ],
    },
    CliRow {
        name: "copilot",
        title: "Copilot CLI",
        argv: &["copilot"],
        stop_keys: &["C-c", "C-c"],
        packages: &["@github/copilot"],
        install_dirs: &["/@github/copilot/", "/@github/copilot-"],
        programs: &["copilot"],
        state_paths: &[(".copilot", true)],
    },
    CliRow {
        name: "qwen",
        title: "Qwen Code",
        argv: &["qwen"],
        stop_keys: &["C-c", "C-c"],
        packages: &["@qwen-code/qwen-code"],
        install_dirs: &["/@qwen-code/qwen-code/"],
        programs: &["qwen"],
        state_paths: &[(".qwen", true)],
    },
];

/// The row of CLI `name`, if clibot knows it.
pub fn cli(name: &str) -> Option<&'static CliRow> {
    CLIS.iter().find(|c| c.name == name)
}

/// The names of the AI CLIs, in order.
pub fn names() -> impl Iterator<Item = &'static str> {
    CLIS.iter().map(|c| c.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_complete_and_named_once() {
        let mut seen = std::collections::BTreeSet::new();
        for c in CLIS {
            assert!(seen.insert(c.name), "{} twice", c.name);
            assert!(
                !c.argv.is_empty()
                    && !c.stop_keys.is_empty()
                    && !c.packages.is_empty()
                    && !c.programs.is_empty()
                    && !c.state_paths.is_empty(),
                "{c:?}"
            );
            // Discovery knows a CLI by its program, and `argv` runs that program.
            assert!(c.programs.contains(&c.argv[0]), "{c:?}");
            assert!(c.state_paths.iter().all(|(p, _)| !p.starts_with('/')));
        }
        assert_eq!(cli("codex").map(|c| c.title), Some("Codex"));
        assert!(cli("shell").is_none());
    }
}
