//! Which CLIs take global hooks, where their settings file is, which events clibot hooks there
//! and what each hook entry looks like.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use super::doc::Json;

/// A CLI `clibotctl hooks` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cli {
    Claude,
    Codex,
    Gemini,
    OpenCode,
    Copilot,
    Qwen,
}

/// One event clibot hooks: its name, its timeout in the CLI's unit, and the matcher (if any)
/// the entry carries.
pub struct Event {
    pub name: &'static str,
    pub timeout: u64,
    pub matcher: Option<&'static str>,
}

const fn ev(name: &'static str, timeout: u64, matcher: Option<&'static str>) -> Event {
    Event {
        name,
        timeout,
        matcher,
    }
}

/// A permission decision waits for a person, for as long as one takes (a day at most); the
/// terminal's own dialog stays answerable meanwhile.
const WAIT_FOR_A_PERSON: u64 = 86_400;

const CLAUDE_EVENTS: &[Event] = &[
    ev("UserPromptSubmit", 10, None),
    ev("Stop", 10, None),
    ev("StopFailure", 10, None),
    ev("Notification", 10, None),
    ev("SessionEnd", 10, None),
    ev("PermissionRequest", WAIT_FOR_A_PERSON, Some("*")),
];

const CODEX_EVENTS: &[Event] = &[
    ev("Stop", 30, None),
    ev("UserPromptSubmit", 30, None),
    ev("PermissionRequest", WAIT_FOR_A_PERSON, Some("*")),
];

/// Gemini CLI's timeouts are milliseconds.
const GEMINI_EVENTS: &[Event] = &[
    ev("BeforeAgent", 10_000, Some("")),
    ev("AfterAgent", 10_000, Some("")),
    ev("Notification", 10_000, Some("")),
];

/// Copilot CLI's timeouts are seconds (`timeoutSec`); its hooks name no event in their
/// payload, so the command carries it.
const COPILOT_EVENTS: &[Event] = &[
    ev("userPromptSubmitted", 30, None),
    ev("agentStop", 30, None),
    ev("permissionRequest", 30, None),
    ev("errorOccurred", 30, None),
];

/// Qwen Code reads Claude Code's hook names and shape; timeouts in seconds.
const QWEN_EVENTS: &[Event] = &[
    ev("UserPromptSubmit", 30, Some("*")),
    ev("Stop", 30, Some("*")),
    ev("StopFailure", 30, Some("*")),
    ev("Notification", 30, Some("*")),
    ev("PermissionRequest", 30, Some("*")),
];

impl Cli {
    pub const ALL: [Cli; 6] = [
        Cli::Claude,
        Cli::Codex,
        Cli::Gemini,
        Cli::OpenCode,
        Cli::Copilot,
        Cli::Qwen,
    ];

    /// The names `--cli` accepts.
    pub const NAMES: [&'static str; 6] =
        ["claude", "codex", "gemini", "opencode", "copilot", "qwen"];

    pub fn from_name(name: &str) -> Option<Cli> {
        Cli::ALL.into_iter().find(|c| c.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Cli::Claude => "claude",
            Cli::Codex => "codex",
            Cli::Gemini => "gemini",
            Cli::OpenCode => "opencode",
            Cli::Copilot => "copilot",
            Cli::Qwen => "qwen",
        }
    }

    /// The events clibot hooks; empty for a CLI without hooks.
    pub fn events(self) -> &'static [Event] {
        match self {
            Cli::Claude => CLAUDE_EVENTS,
            Cli::Codex => CODEX_EVENTS,
            Cli::Gemini => GEMINI_EVENTS,
            Cli::OpenCode => &[],
            Cli::Copilot => COPILOT_EVENTS,
            Cli::Qwen => QWEN_EVENTS,
        }
    }

    /// What a user should know about this CLI's global hooks.
    pub fn note(self) -> &'static str {
        match self {
            Cli::Claude => {
                "turns and permission prompts reach clibotd; prompts can be answered from chat, \
                 and the terminal's dialog stays answerable meanwhile"
            }
            Cli::Codex => {
                "Codex asks once to trust new hooks: start codex and accept them in its hooks \
                 review"
            }
            Cli::Gemini => {
                "watch-only: Gemini CLI's hooks cannot carry an answer, so its prompts are \
                 answered at the terminal"
            }
            Cli::OpenCode => {
                "OpenCode has no hooks: clibot discovers and resumes OpenCode sessions instead \
                 (`clibotctl discover`, then `clibotctl resume ID`)"
            }
            Cli::Copilot => {
                "watch-only: Copilot CLI draws its dialog only once its hook returns, so its \
                 prompts are answered at the terminal; the hooks are a file of clibot's own \
                 in its hooks folder"
            }
            Cli::Qwen => {
                "watch-only: Qwen Code draws its dialog only once its hook returns, so its \
                 prompts are answered at the terminal"
            }
        }
    }

    /// The CLI's configuration directory, honouring its environment override.
    pub fn config_dir(self) -> anyhow::Result<Option<PathBuf>> {
        let env = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(|v| expand_home(Path::new(&v)))
                .transpose()
        };
        Ok(Some(match self {
            Cli::Claude => env("CLAUDE_CONFIG_DIR")?.unwrap_or(home()?.join(".claude")),
            Cli::Codex => env("CODEX_HOME")?.unwrap_or(home()?.join(".codex")),
            Cli::Gemini => env("GEMINI_CLI_HOME")?.unwrap_or(home()?).join(".gemini"),
            Cli::OpenCode => return Ok(None),
            Cli::Copilot => env("COPILOT_HOME")?.unwrap_or(home()?.join(".copilot")),
            Cli::Qwen => env("QWEN_HOME")?.unwrap_or(home()?.join(".qwen")),
        }))
    }

    /// The settings file clibot's hooks go into; None for a CLI without hooks.
    pub fn settings_file(self) -> anyhow::Result<Option<PathBuf>> {
        let name = match self {
            Cli::Codex => "hooks.json",
            Cli::Copilot => "hooks/clibot.json",
            _ => "settings.json",
        };
        Ok(self.config_dir()?.map(|d| d.join(name)))
    }

    /// The entry clibot adds to `event`'s list, running `command`.
    pub fn entry(self, event: &Event, command: &str) -> Json {
        if self == Cli::Copilot {
            // A flat entry; the payload names no event, the command does.
            return Json::object(vec![
                ("type", Json::str("command")),
                ("bash", Json::str(&format!("{command} {}", event.name))),
                ("timeoutSec", Json::num(event.timeout)),
            ]);
        }
        let mut hook = vec![
            ("type", Json::str("command")),
            ("command", Json::str(command)),
            ("timeout", Json::num(event.timeout)),
        ];
        if self == Cli::Gemini {
            hook.insert(0, ("name", Json::str(&format!("clibot-{}", event.name))));
        }
        let mut entry = vec![("hooks", Json::Array(vec![Json::object(hook)]))];
        if let Some(m) = event.matcher {
            entry.insert(0, ("matcher", Json::str(m)));
        }
        Json::object(entry)
    }
}

/// `$HOME`.
pub fn home() -> anyhow::Result<PathBuf> {
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(h) => Ok(PathBuf::from(h)),
        None => bail!("HOME is not set: set it to your home directory and run this again"),
    }
}

/// `p` with a leading `~` replaced by `$HOME`.
fn expand_home(p: &Path) -> anyhow::Result<PathBuf> {
    match p.strip_prefix("~") {
        Ok(rest) => Ok(home().context("cannot expand ~")?.join(rest)),
        Err(_) => Ok(p.to_path_buf()),
    }
}

/// The command clibot's hooks run: this clibotctl by its absolute path, single-quoted for the
/// shell, then `hook --cli CLI --global`.
pub fn hook_command(exe: &Path, cli: Cli) -> String {
    let path = exe.to_string_lossy().replace('\'', r"'\''");
    format!("'{path}' hook --cli {} --global", cli.name())
}

/// Whether a hook's command is one `clibotctl hooks install` wrote (wherever clibotctl is now).
pub fn is_clibot_command(command: &str) -> bool {
    command.contains("clibotctl")
        && command.contains(" hook --cli ")
        && (command.ends_with(" --global") || command.contains(" --global "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every AI CLI clibot knows has global hooks here, in the same order: a new row in
    /// `clibot_proto::clis` fails this until its hooks are written.
    #[test]
    fn every_known_cli_has_global_hooks() {
        assert_eq!(
            Cli::NAMES.to_vec(),
            clibot_proto::clis::names().collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_command_is_quoted_and_recognised_wherever_clibotctl_lives() {
        let cmd = hook_command(Path::new("/opt/it's/clibotctl"), Cli::Claude);
        assert_eq!(cmd, r"'/opt/it'\''s/clibotctl' hook --cli claude --global");
        assert!(is_clibot_command(&cmd));
        assert!(is_clibot_command(
            "'/elsewhere/clibotctl' hook --cli codex --global"
        ));
        assert!(!is_clibot_command("'/x/clibotctl' hook --cli claude"));
        assert!(!is_clibot_command("my-script --global"));
    }

    #[test]
    fn entries_have_the_shape_each_cli_reads() {
        let perm = &CLAUDE_EVENTS[5];
        let e = serde_json::to_value(Cli::Claude.entry(perm, "c")).expect("value");
        assert_eq!(
            e,
            serde_json::json!({"matcher": "*", "hooks": [{"type": "command", "command": "c", "timeout": 86400}]})
        );
        let e = serde_json::to_value(Cli::Gemini.entry(&GEMINI_EVENTS[1], "c")).expect("value");
        assert_eq!(
            e,
            serde_json::json!({"matcher": "", "hooks": [{"name": "clibot-AfterAgent", "type": "command", "command": "c", "timeout": 10000}]})
        );
    }
}
