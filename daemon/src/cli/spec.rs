//! A CLI as clibot runs it: the built-in entries, and `[cli.NAME]` as the user writes it,
//! merged over them by the config.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// `[cli.NAME]` as written by the user: every field optional, merged over the built-in entry.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CliOverride {
    pub argv: Option<Vec<String>>,
    pub env: Option<BTreeMap<String, String>>,
    pub dir: Option<PathBuf>,
    pub submit_delay_ms: Option<u64>,
    pub stop_keys: Option<Vec<String>>,
    pub stop_text: Option<String>,
    /// Which integration: "claude" (hooks) or "generic" (quiescence and patterns).
    pub adapter: Option<String>,
    /// Which built-in pattern pack: "generic", "claude", "codex", "gemini", "opencode".
    pub pattern_pack: Option<String>,
    /// Patterns added to the pack (`check_lines`, `prompts`, `busy`, `idle`, `errors`).
    pub patterns: Option<crate::cli::detect::PackConfig>,
    /// Generic adapter: a turn is complete after this long without output.
    pub quiet_ms: Option<u64>,
    /// Overrides `[daemon] idle_stop_after` for this CLI ("0": never).
    #[serde(deserialize_with = "crate::duration::de_opt_duration")]
    pub idle_stop_after: Option<Duration>,
    /// Overrides `[daemon] turn_timeout` for this CLI ("0": never).
    #[serde(deserialize_with = "crate::duration::de_opt_duration")]
    pub turn_timeout: Option<Duration>,
    /// Overrides `[daemon] on_turn_timeout` for this CLI.
    pub on_turn_timeout: Option<OnTurnTimeout>,
    /// Overrides `[daemon] restart` for this CLI.
    pub restart: Option<RestartPolicy>,
    /// Overrides `[daemon] remind_after` for this CLI ("0": never).
    #[serde(deserialize_with = "crate::duration::de_opt_duration")]
    pub remind_after: Option<Duration>,
    /// Overrides `[daemon] escalate_after` for this CLI ("0": never).
    #[serde(deserialize_with = "crate::duration::de_opt_duration")]
    pub escalate_after: Option<Duration>,
    /// Overrides `[daemon] prompt_timeout` for this CLI ("0": never).
    #[serde(deserialize_with = "crate::duration::de_opt_duration")]
    pub prompt_timeout: Option<Duration>,
    /// Overrides `[daemon] on_prompt_timeout` for this CLI.
    pub on_prompt_timeout: Option<OnPromptTimeout>,
    /// `[cli.NAME.profiles.PROFILE]`: accounts a session may be started with.
    pub profiles: Option<BTreeMap<String, Profile>>,
}

/// An account profile of a CLI: the environment that points it at another account (its
/// config directory: `CLAUDE_CONFIG_DIR`, `CODEX_HOME`, …). A session started with it keeps
/// it across restarts, and its usage is counted under it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// What happens to a prompt nobody answered within `prompt_timeout`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnPromptTimeout {
    /// It keeps waiting (the chats are told it timed out).
    #[default]
    Wait,
    /// Its "no" option is chosen.
    Deny,
    /// The decider answers it — unless the guard keeps it for a person (a guarded subject, a
    /// password, a subject not read whole, a CLI clibot does not run): then it waits.
    Decider,
}

impl OnPromptTimeout {
    pub fn as_str(self) -> &'static str {
        match self {
            OnPromptTimeout::Wait => "wait",
            OnPromptTimeout::Deny => "deny",
            OnPromptTimeout::Decider => "decider",
        }
    }
}

/// When nobody answers a prompt: `[daemon]`'s, with a CLI's own entries over them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PromptPolicy {
    pub remind_after: Option<Duration>,
    pub escalate_after: Option<Duration>,
    pub prompt_timeout: Option<Duration>,
    pub on_prompt_timeout: Option<OnPromptTimeout>,
}

/// Whether a CLI that fails is started again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RestartPolicy {
    /// Left exited: `restart` starts it.
    #[default]
    Never,
    /// Started again (resuming its conversation) when it exits with a failure status or in
    /// the middle of a turn, at most `restart_max` times in `restart_window`, with backoff.
    OnFailure,
}

/// What happens to a turn that runs longer than `turn_timeout`: always a notice with the last
/// screen lines, then this.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnTurnTimeout {
    /// The notice only.
    #[default]
    Notify,
    /// The turn is cancelled (as `clibotctl cancel`).
    Cancel,
    /// The work goes to the next CLI of the `timeout` delegation chain.
    Delegate,
}

/// A CLI the daemon may spawn.
#[derive(Debug, Clone, PartialEq)]
pub struct CliSpec {
    pub name: String,
    /// Program and its fixed arguments; spawn arguments are appended.
    pub argv: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// Default working directory.
    pub dir: Option<PathBuf>,
    /// Pause between typing text and pressing Enter: several TUIs turn an Enter that follows
    /// a paste too quickly into a newline (Codex within 120 ms, Gemini within 40 ms).
    pub submit_delay_ms: u64,
    /// Keys that ask the CLI to quit (graceful stop).
    pub stop_keys: Vec<String>,
    /// Text typed and submitted to quit, after `stop_keys`.
    pub stop_text: Option<String>,
    /// The integration ("claude", "generic").
    pub adapter: String,
    /// The built-in pattern pack it starts from.
    pub pattern_pack: String,
    /// User additions to the pack.
    pub patterns: Option<crate::cli::detect::PackConfig>,
    /// Generic adapter: quiet time that completes a turn.
    pub quiet_ms: u64,
    /// Idle time after which its sessions are stopped; `None`: `[daemon] idle_stop_after`.
    pub idle_stop_after: Option<Duration>,
    /// `None`: `[daemon] turn_timeout`.
    pub turn_timeout: Option<Duration>,
    /// `None`: `[daemon] on_turn_timeout`.
    pub on_turn_timeout: Option<OnTurnTimeout>,
    /// `None`: `[daemon] restart`.
    pub restart: Option<RestartPolicy>,
    /// Each `None`: `[daemon]`'s.
    pub prompts: PromptPolicy,
    /// Its account profiles, by name.
    pub profiles: BTreeMap<String, Profile>,
}

/// The CLIs every installation knows.
pub(crate) fn builtin_clis() -> BTreeMap<String, CliSpec> {
    let shell = std::env::var("SHELL")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "/bin/sh".into());
    let mk =
        |name: &str, argv: Vec<String>, delay: u64, keys: &[&str], text: Option<&str>| CliSpec {
            name: name.to_string(),
            argv,
            env: BTreeMap::new(),
            dir: None,
            submit_delay_ms: delay,
            stop_keys: keys.iter().map(|k| k.to_string()).collect(),
            stop_text: text.map(str::to_string),
            adapter: if clibot_proto::clis::cli(name).is_some() {
                name.to_string()
            } else {
                "generic".into()
            },
            pattern_pack: if name == "shell" {
                "generic".into()
            } else {
                name.to_string()
            },
            patterns: None,
            quiet_ms: 1_500,
            idle_stop_after: None,
            turn_timeout: None,
            on_turn_timeout: None,
            profiles: BTreeMap::new(),
            restart: None,
            prompts: PromptPolicy::default(),
        };
    // Each AI CLI as its row says, typed into after 300 ms of settling; and the user's shell.
    clibot_proto::clis::CLIS
        .iter()
        .map(|c| {
            let argv = c.argv.iter().map(|a| a.to_string()).collect();
            mk(c.name, argv, 300, c.stop_keys, None)
        })
        .chain([mk("shell", vec![shell], 50, &["C-c"], Some("exit"))])
        .map(|c| (c.name.clone(), c))
        .collect()
}

impl CliSpec {
    /// The name its program runs under (`bash` for `/bin/bash --norc`): what the pane's
    /// foreground process is called while the CLI waits for input.
    pub fn program_name(&self) -> Option<String> {
        self.argv
            .first()
            .and_then(|p| std::path::Path::new(p).file_name())
            .map(|n| n.to_string_lossy().into_owned())
    }
}
