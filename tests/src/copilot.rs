//! Running the real GitHub Copilot CLI (`@github/copilot`, pinned in `tests/node/`) offline
//! against [`crate::mock_llm::MockLlm`], in its bring-your-own-provider mode (no GitHub sign-in):
//! `COPILOT_PROVIDER_BASE_URL` at the mock's Anthropic Messages API, `COPILOT_MODEL` named.
//!
//! `COPILOT_OFFLINE=true` keeps it off the network (without it, it retries GitHub sign-in in a
//! loop that keeps a core busy); `COPILOT_DISABLE_LOGIN_SHELL_ENV=1` spares each first shell
//! command a 4 s wait for a login shell's environment. [`CopilotHome`] seeds a private `HOME`
//! whose `~/.copilot/config.json` trusts the work directory, so the CLI starts at its input.
//!
//! The native CLI unpacks its program (~235 MB) under `$XDG_CACHE_HOME/copilot` at its first
//! start: one cache in `tests/node/node_modules/.copilot-cache` serves every test.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::claude::node_bin_dir;

/// The API key handed to Copilot's provider; the mock does not check it.
pub const API_KEY: &str = "sk-ant-api03-clibot-mock-copilot";

/// The model Copilot is told to use (it requires one with a custom provider).
pub const MODEL: &str = "claude-sonnet-4";

/// Variables that must not reach Copilot from the environment running the tests: another
/// account, provider, home or approval mode would change what it does.
pub const UNSET_ENV: &[&str] = &[
    "COPILOT_HOME",
    "COPILOT_PROVIDER_BASE_URL",
    "COPILOT_PROVIDER_TYPE",
    "COPILOT_PROVIDER_API_KEY",
    "COPILOT_PROVIDER_API_KEY_COMMAND",
    "COPILOT_PROVIDER_BEARER_TOKEN",
    "COPILOT_MODEL",
    "COPILOT_ALLOW_ALL",
    "COPILOT_GITHUB_TOKEN",
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "TMUX",
    "TMUX_PANE",
];

/// `tests/node/node_modules/.bin/copilot`.
pub fn copilot_bin() -> PathBuf {
    node_bin_dir().join("copilot")
}

/// The cache every test's Copilot unpacks its program into (once).
fn shared_cache() -> PathBuf {
    node_bin_dir()
        .parent()
        .map_or_else(|| PathBuf::from("/tmp"), Path::to_path_buf)
        .join(".copilot-cache")
}

/// Panics unless the pinned Copilot CLI is installed (the tests never skip); its first run
/// here unpacks it into the shared cache, before any test starts one.
pub fn require_copilot() {
    let cache = shared_cache().display().to_string();
    crate::require_pinned(
        &copilot_bin(),
        &crate::tested_version("copilot"),
        &[
            ("XDG_CACHE_HOME", cache.as_str()),
            ("COPILOT_OFFLINE", "true"),
        ],
    );
}

/// A private home in which Copilot starts at its input, talking to the mock only.
#[derive(Debug, Clone)]
pub struct CopilotHome {
    home: PathBuf,
    work_dir: PathBuf,
    mock_url: String,
}

impl CopilotHome {
    /// Creates `<root>/home/.copilot/config.json` trusting `work_dir`. Panics if it cannot
    /// (test setup).
    pub fn new(root: &Path, work_dir: &Path, mock_url: &str) -> CopilotHome {
        let home = root.join("home");
        let dir = home.join(".copilot");
        std::fs::create_dir_all(&dir).expect("create the Copilot home");
        let work_dir = work_dir
            .canonicalize()
            .unwrap_or_else(|_| work_dir.to_path_buf());
        let config = json!({
            "trustedFolders": [work_dir.display().to_string()],
            "banner": "never",
            "showTipsOnStartup": false,
        });
        std::fs::write(dir.join("config.json"), config.to_string())
            .expect("write ~/.copilot/config.json");
        CopilotHome {
            home,
            work_dir,
            mock_url: mock_url.to_string(),
        }
    }

    /// `~/.copilot`: config, trusted folders, session state (`session-state/ID/events.jsonl`).
    pub fn copilot_dir(&self) -> PathBuf {
        self.home.join(".copilot")
    }

    /// The (canonical) trusted working directory.
    pub fn work_dir(&self) -> &Path {
        &self.work_dir
    }

    /// The environment Copilot needs, for its tmux session.
    pub fn env(&self) -> Vec<(String, String)> {
        let mut env = crate::private_home_env(&self.home);
        env.retain(|(k, _)| k != "XDG_CACHE_HOME");
        let pairs = [
            // The SDK appends `/v1/messages`.
            ("COPILOT_PROVIDER_BASE_URL", self.mock_url.clone()),
            ("COPILOT_PROVIDER_TYPE", "anthropic".into()),
            ("COPILOT_PROVIDER_API_KEY", API_KEY.into()),
            ("COPILOT_MODEL", MODEL.into()),
            ("COPILOT_OFFLINE", "true".into()),
            ("COPILOT_AUTO_UPDATE", "false".into()),
            ("COPILOT_DISABLE_LOGIN_SHELL_ENV", "1".into()),
            ("XDG_CACHE_HOME", shared_cache().display().to_string()),
        ];
        env.extend(pairs.into_iter().map(|(k, v)| (k.to_string(), v)));
        env
    }

    /// The command line: the pinned CLI, interactive, asking before tools (its default).
    pub fn argv(&self) -> Vec<String> {
        vec![copilot_bin().display().to_string()]
    }
}
