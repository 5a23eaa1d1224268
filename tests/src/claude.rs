//! Running the real Claude Code CLI (`@anthropic-ai/claude-code`, pinned in `tests/node/`)
//! offline against [`crate::mock_llm::MockLlm`].
//!
//! Claude Code normally opens with onboarding (theme, login: which needs api.anthropic.com), a
//! "use this API key?" question (default *No*) and a workspace-trust dialog. A test cannot answer
//! those reliably and clibot's prompt detector should not have to, so [`ClaudeHome`] seeds a
//! private `HOME` in which all of them are already answered, and gives the environment that
//! keeps the CLI from reaching any network service other than the mock.

use std::path::{Path, PathBuf};

/// The API key handed to Claude Code. Claude remembers a key the user approved by its last 20
/// characters (`customApiKeyResponses.approved` in `~/.claude.json`), which is how the
/// "Detected a custom API key" question is pre-answered.
pub const API_KEY: &str = "sk-ant-api03-clibot-mock-0123456789abcdefghij";

/// Variables that must not reach Claude Code from the environment running the tests: a test run
/// from inside Claude Code (`CLAUDECODE`, …), or with a real account configured, would otherwise
/// change what the CLI does or where it keeps its state. tmux cannot unset a variable per
/// session (`new-session -e` only sets), so remove these from the environment of the command
/// that starts the tmux server.
pub const UNSET_ENV: &[&str] = &[
    "CLAUDECODE",
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDE_CODE_SESSION_ID",
    "CLAUDE_CODE_CHILD_SESSION",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CODE_USE_FOUNDRY",
    "CLAUDE_CONFIG_DIR",
    "CLAUDE_PROJECT_DIR",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "ANTHROPIC_CUSTOM_HEADERS",
    "TMUX",
    "TMUX_PANE",
];

/// `tests/node/node_modules/.bin/claude`, installed by `npm install --prefix tests/node`.
pub fn claude_bin() -> PathBuf {
    node_bin_dir().join("claude")
}

/// `tests/node/node_modules/.bin`, where npm links the pinned CLIs.
pub fn node_bin_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("node/node_modules/.bin")
}

/// Checks that the pinned Claude Code is installed, and fails the calling test with the command
/// that installs it when it is not (a test that needs the real CLI never passes by skipping).
/// An installed CLI of another version (`tests/node` updated without reinstalling) fails too:
/// the screens the tests expect belong to `tests/cli-versions.toml`. Returns true, for call sites that
/// read as a condition.
pub fn claude_available() -> bool {
    crate::require_pinned(
        &claude_bin(),
        &crate::tested_version("claude"),
        &[
            ("DISABLE_AUTOUPDATER", "1"),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ],
    );
    true
}

/// A private home directory in which Claude Code starts straight at its input prompt.
#[derive(Debug, Clone)]
pub struct ClaudeHome {
    home: PathBuf,
    work_dir: PathBuf,
    mock_url: String,
}

impl ClaudeHome {
    /// Creates `<root>/home` with a `~/.claude.json` that marks onboarding as done, the API key as
    /// approved and `work_dir` as trusted. `mock_url` is the Messages API base URL
    /// ([`crate::mock_llm::MockLlm::url`]). Panics if the files cannot be written (test setup).
    pub fn new(root: &Path, work_dir: &Path, mock_url: &str) -> ClaudeHome {
        let home = root.join("home");
        std::fs::create_dir_all(home.join(".claude")).expect("create the Claude home");
        // Claude keys projects by its real working directory; a path through a symlink (macOS
        // /tmp) would not match and the trust dialog would come back.
        let work_dir = work_dir
            .canonicalize()
            .unwrap_or_else(|_| work_dir.to_path_buf());
        let key_suffix = &API_KEY[API_KEY.len() - 20..];
        let config = serde_json::json!({
            // Skips the theme picker and the login screen (which would call api.anthropic.com).
            "hasCompletedOnboarding": true,
            "lastOnboardingVersion": crate::tested_version("claude"),
            // "Detected a custom API key in your environment. Do you want to use this API key?"
            "customApiKeyResponses": { "approved": [key_suffix], "rejected": [] },
            // Written by the CLI itself after a first start; seeded so that the first start
            // looks like any later one (no release notes, no marketplace install attempt).
            "lastReleaseNotesSeen": crate::tested_version("claude"),
            "officialMarketplaceAutoInstallAttempted": true,
            "officialMarketplaceAutoInstalled": false,
            "projects": {
                work_dir.display().to_string(): {
                    // "Accessing workspace: … Yes, I trust this folder".
                    "hasTrustDialogAccepted": true,
                    "hasCompletedProjectOnboarding": true,
                    "allowedTools": [],
                },
            },
        });
        std::fs::write(
            home.join(".claude.json"),
            serde_json::to_string_pretty(&config).expect("serialize .claude.json"),
        )
        .expect("write ~/.claude.json");
        ClaudeHome {
            home,
            work_dir,
            mock_url: mock_url.to_string(),
        }
    }

    /// The private `HOME`.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The (canonical) working directory Claude is trusted in; start it there.
    pub fn work_dir(&self) -> &Path {
        &self.work_dir
    }

    /// The environment Claude Code needs, to be given to its tmux session (`new-session -e`).
    pub fn env(&self) -> Vec<(String, String)> {
        let mut env = crate::private_home_env(&self.home);
        let pairs = [
            ("ANTHROPIC_BASE_URL", self.mock_url.clone()),
            ("ANTHROPIC_API_KEY", API_KEY.into()),
            // Offline: no update checks, telemetry, error reports or feature-flag fetches, no
            // IDE-extension install, and no install of the official plugin marketplace (which
            // otherwise tries `git clone` from GitHub over https and ssh at every start). With
            // these, the only connection the CLI makes is to the mock (checked with strace).
            ("DISABLE_AUTOUPDATER", "1".into()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
            ("DISABLE_TELEMETRY", "1".into()),
            ("DISABLE_ERROR_REPORTING", "1".into()),
            (
                "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL",
                "1".into(),
            ),
            ("CLAUDE_CODE_IDE_SKIP_AUTO_INSTALL", "1".into()),
        ];
        env.extend(pairs.into_iter().map(|(k, v)| (k.to_string(), v)));
        env
    }

    /// The command line: the pinned binary in classic permission mode. Since 2.1.3xx the
    /// default mode is "auto" (tool calls are vetted by the model instead of the user; the
    /// footer then reads `⏵⏵ auto mode on (shift+tab to cycle)` and a one-time notice explains
    /// it); `default` brings back the `Do you want to proceed?` dialogs and the footer
    /// `⏸ manual mode on · ? for shortcuts`.
    pub fn argv(&self) -> Vec<String> {
        vec![
            claude_bin().display().to_string(),
            "--permission-mode".into(),
            "default".into(),
        ]
    }
}
