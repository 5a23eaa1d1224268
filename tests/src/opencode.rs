//! Running the real OpenCode (`opencode-ai`, pinned in `tests/node/`) offline against
//! [`crate::mock_llm::MockLlm`]: a private `HOME` whose `opencode.json` defines a provider that
//! speaks the Anthropic API (OpenCode bundles `@ai-sdk/anthropic`) at the mock's address, and
//! asks before every shell command and edit.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::claude::node_bin_dir;

/// Variables that must not reach OpenCode from the environment running the tests (a config or
/// server password of the person running them, a surrounding tmux).
pub const UNSET_ENV: &[&str] = &[
    "OPENCODE_CONFIG",
    "OPENCODE_CONFIG_DIR",
    "OPENCODE_CONFIG_CONTENT",
    "OPENCODE_SERVER_PASSWORD",
    "OPENCODE_SERVER_USERNAME",
    "OPENCODE_PERMISSION",
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "TMUX",
    "TMUX_PANE",
];

/// `tests/node/node_modules/.bin/opencode`.
pub fn opencode_bin() -> PathBuf {
    node_bin_dir().join("opencode")
}

/// Panics unless the pinned OpenCode is installed (tests never pass by skipping).
pub fn require_opencode() {
    crate::require_pinned(&opencode_bin(), &crate::tested_version("opencode"), &[]);
}

/// A private home directory for OpenCode.
#[derive(Debug, Clone)]
pub struct OpenCodeHome {
    home: PathBuf,
}

impl OpenCodeHome {
    pub fn new(root: &Path, mock_url: &str) -> OpenCodeHome {
        let home = root.join("home");
        let config_dir = home.join(".config/opencode");
        std::fs::create_dir_all(&config_dir).expect("create the OpenCode config dir");
        let config = json!({
            "$schema": "https://opencode.ai/config.json",
            "model": "mock/mock-model",
            "small_model": "mock/mock-model",
            "autoupdate": false,
            "share": "disabled",
            "permission": { "bash": "ask", "edit": "ask" },
            "provider": {
                "mock": {
                    "npm": "@ai-sdk/anthropic",
                    "name": "Mock",
                    "options": { "baseURL": format!("{mock_url}/v1"), "apiKey": "sk-mock" },
                    "models": { "mock-model": { "name": "Mock model", "tool_call": true } }
                }
            }
        });
        std::fs::write(
            config_dir.join("opencode.json"),
            serde_json::to_string_pretty(&config).expect("serialize opencode.json"),
        )
        .expect("write opencode.json");
        OpenCodeHome { home }
    }

    /// The environment OpenCode needs, to be given to its tmux session.
    pub fn env(&self) -> Vec<(String, String)> {
        let mut env = crate::private_home_env(&self.home);
        for k in [
            "OPENCODE_DISABLE_AUTOUPDATE",
            "OPENCODE_DISABLE_MODELS_FETCH",
            "OPENCODE_DISABLE_LSP_DOWNLOAD",
            "OPENCODE_DISABLE_SHARE",
        ] {
            env.push((k.to_string(), "1".to_string()));
        }
        env
    }

    pub fn argv(&self) -> Vec<String> {
        vec![opencode_bin().display().to_string()]
    }
}
