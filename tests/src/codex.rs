//! Running the real Codex CLI (`@openai/codex`, pinned in `tests/node/`) offline against
//! [`crate::mock_llm::MockLlm`] (its Responses API, [`crate::mock_openai`]).
//!
//! [`CodexHome`] seeds a private `CODEX_HOME` whose `config.toml` selects a model provider at
//! the mock, asks before commands that need to leave the sandbox (`on-request`,
//! `workspace-write`), trusts the work directory, and turns off what would go online: the update
//! check, analytics, the plugin marketplace sync (`git ls-remote https://github.com/openai/
//! plugins.git` at every start) and apps. One request has no switch in 0.169: the TUI fetches
//! `raw.githubusercontent.com/openai/codex/main/announcement_tip.toml` at start. The environment
//! sends it to the mock as a proxy (which refuses it), so nothing leaves 127.0.0.1.

use std::path::{Path, PathBuf};

use crate::claude::node_bin_dir;

/// The API key handed to Codex (through the provider's `env_key`). The mock does not check it.
pub const API_KEY: &str = "clibot-mock-openai-api-key";

/// The variable the seeded model provider reads its key from.
const API_KEY_VAR: &str = "CLIBOT_MOCK_OPENAI_KEY";

/// The model name the seeded config selects; Codex knows no metadata for it and says so once
/// (`⚠ 1 warning · f2 to view` in the footer), which changes nothing else.
pub const MODEL: &str = "mock-model";

/// Variables that must not reach Codex from the environment running the tests: another account,
/// home, provider or sandbox (a test run from inside Codex has `CODEX_SANDBOX*` and
/// `CODEX_THREAD_ID` set) would change what it does. tmux cannot unset a variable per session
/// (`new-session -e` only sets), so remove these from the environment of the command that starts
/// the tmux server.
pub const UNSET_ENV: &[&str] = &[
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORGANIZATION",
    "OPENAI_PROJECT",
    "CODEX_API_KEY",
    "CODEX_ACCESS_TOKEN",
    "CODEX_HOME",
    "CODEX_SANDBOX",
    "CODEX_SANDBOX_NETWORK_DISABLED",
    "CODEX_THREAD_ID",
    "CODEX_MANAGED_BY_NPM",
    "CODEX_MANAGED_PACKAGE_ROOT",
    "ALL_PROXY",
    "all_proxy",
    "TMUX",
    "TMUX_PANE",
];

/// `tests/node/node_modules/.bin/codex`, installed by `npm install --prefix tests/node`.
pub fn codex_bin() -> PathBuf {
    node_bin_dir().join("codex")
}

/// Panics unless the pinned Codex CLI is installed: the Codex tests never skip, so that a missing
/// CLI cannot pass for a working one. The screens the tests expect belong to `tests/cli-versions.toml`,
/// so another version is a failure too.
pub fn require_codex() {
    crate::require_pinned(&codex_bin(), &crate::tested_version("codex"), &[]);
}

/// A private home directory in which Codex starts straight at its composer, talking to the mock.
#[derive(Debug, Clone)]
pub struct CodexHome {
    home: PathBuf,
    work_dir: PathBuf,
    mock_url: String,
}

impl CodexHome {
    /// Creates `<root>/home/.codex/config.toml` (see the module documentation). `mock_url` is the
    /// mock's base URL ([`crate::mock_llm::MockLlm::url`]). Panics if the file cannot be written
    /// (test setup).
    pub fn new(root: &Path, work_dir: &Path, mock_url: &str) -> CodexHome {
        let home = root.join("home");
        let codex_home = home.join(".codex");
        std::fs::create_dir_all(&codex_home).expect("create the Codex home");
        // Codex matches trusted projects against its real working directory.
        let work_dir = work_dir
            .canonicalize()
            .unwrap_or_else(|_| work_dir.to_path_buf());
        // JSON strings are valid TOML basic strings.
        let q = |s: &str| serde_json::Value::String(s.to_string()).to_string();
        let config = format!(
            r#"model = {model}
model_provider = "clibot_mock"
# Commands run in the sandbox without asking; one that asks to leave it
# (`sandbox_permissions = "require_escalated"`) waits for the user.
approval_policy = "on-request"
sandbox_mode = "workspace-write"
# No request to api.github.com for a newer release.
check_for_update_on_startup = false

[model_providers.clibot_mock]
name = "clibot mock"
base_url = {base_url}
env_key = {key_var}
wire_api = "responses"
# A refused or broken answer fails the turn at once instead of after minutes of retries.
request_max_retries = 0
stream_max_retries = 0

# No "Do you trust this folder?" question.
[projects.{work}]
trust_level = "trusted"

[tui]
# The welcome screen and the working indicator stay still between two captures.
animations = false
show_tooltips = false
screen_reader_detection_done = true

# No events to ab.chatgpt.com.
[analytics]
enabled = false

[features]
# No plugin marketplace sync (git over https to github.com) and no apps directory.
plugins = false
remote_plugin = false
apps = false
"#,
            model = q(MODEL),
            base_url = q(&format!("{mock_url}/v1")),
            key_var = q(API_KEY_VAR),
            work = q(&work_dir.display().to_string()),
        );
        std::fs::write(codex_home.join("config.toml"), config).expect("write ~/.codex/config.toml");
        CodexHome {
            home,
            work_dir,
            mock_url: mock_url.to_string(),
        }
    }

    /// The private `HOME`.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// `CODEX_HOME` (`~/.codex`): config, transcripts (`sessions/`), state databases.
    pub fn codex_home(&self) -> PathBuf {
        self.home.join(".codex")
    }

    /// The (canonical) working directory Codex is trusted in; start it there.
    pub fn work_dir(&self) -> &Path {
        &self.work_dir
    }

    /// The environment Codex needs, to be given to its tmux session (`new-session -e`).
    pub fn env(&self) -> Vec<(String, String)> {
        let mut env = crate::private_home_env(&self.home);
        let pairs = [
            ("CODEX_HOME", self.codex_home().display().to_string()),
            (API_KEY_VAR, API_KEY.into()),
            // Whatever Codex fetches on its own goes to the mock, which answers 404: the
            // announcement tip at start, and anything else a later version adds.
            ("HTTPS_PROXY", self.mock_url.clone()),
            ("HTTP_PROXY", self.mock_url.clone()),
            ("https_proxy", self.mock_url.clone()),
            ("http_proxy", self.mock_url.clone()),
            ("NO_PROXY", "127.0.0.1,localhost".into()),
            ("no_proxy", "127.0.0.1,localhost".into()),
        ];
        env.extend(pairs.into_iter().map(|(k, v)| (k.to_string(), v)));
        env
    }

    /// The command line: the pinned CLI, interactive. clibot's Codex adapter adds the rest
    /// (`--no-daemon`, its `notify` program).
    pub fn argv(&self) -> Vec<String> {
        vec![codex_bin().display().to_string()]
    }
}
