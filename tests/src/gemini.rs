//! Running the real Gemini CLI (`@google/gemini-cli`, pinned in `tests/node/`) offline against
//! [`crate::mock_llm::MockLlm`].
//!
//! A fresh Gemini CLI opens with an authentication chooser (`How would you like to authenticate
//! for this project?`) and, in a folder it has not been told to trust, a `Do you trust the files
//! in this folder?` dialog; it also checks npm for updates and sends usage statistics to Google.
//! [`GeminiHome`] seeds a private `HOME` in which the questions are already answered and the
//! network features are off, so the CLI starts straight at its input prompt and talks to nothing
//! but the mock (checked with `strace -e connect`: one connection, to the mock, per request).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::claude::node_bin_dir;

/// The API key handed to Gemini CLI. The mock does not check it; Gemini CLI sends it as
/// `x-goog-api-key`.
pub const API_KEY: &str = "clibot-mock-gemini-api-key";

/// Variables that must not reach Gemini CLI from the environment running the tests: another
/// account, model, settings location or sandbox would change what the CLI does. tmux cannot unset
/// a variable per session (`new-session -e` only sets), so remove these from the environment of
/// the command that starts the tmux server.
pub const UNSET_ENV: &[&str] = &[
    "GOOGLE_API_KEY",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_GENAI_USE_GCA",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_VERTEX_BASE_URL",
    "GEMINI_MODEL",
    "GEMINI_SANDBOX",
    "SANDBOX",
    "GEMINI_CLI_HOME",
    // Gemini CLI runs non-interactively ("No input provided via stdin") when it sees CI set, as
    // it is when these tests run in CI.
    "CI",
    "CONTINUOUS_INTEGRATION",
    "GEMINI_CLI_TRUSTED_FOLDERS_PATH",
    "GEMINI_CLI_TRUST_WORKSPACE",
    "GEMINI_CLI_SYSTEM_DEFAULTS_PATH",
    "GEMINI_CLI_NO_RELAUNCH",
    "GEMINI_CLI_IDE_SERVER_PORT",
    "GEMINI_CLI_IDE_WORKSPACE_PATH",
    "GEMINI_CLI_IDE_AUTH_TOKEN",
    "GEMINI_CLI_INTEGRATION_TEST",
    "GEMINI_RESTRICTED_MODE",
    "CLOUD_SHELL",
    "TERM_PROGRAM",
    "DEBUG",
    "DEBUG_MODE",
    "NO_COLOR",
    "TMUX",
    "TMUX_PANE",
];

/// `tests/node/node_modules/.bin/gemini`, installed by `npm install --prefix tests/node`.
pub fn gemini_bin() -> PathBuf {
    node_bin_dir().join("gemini")
}

/// Panics unless the pinned Gemini CLI is installed: the Gemini tests never skip, so that a
/// missing CLI cannot pass for a working one. The screens the tests expect belong to
/// `tests/cli-versions.toml`, so another version is a failure too.
pub fn require_gemini() {
    crate::require_pinned(
        &gemini_bin(),
        &crate::tested_version("gemini"),
        &[("GEMINI_CLI_NO_RELAUNCH", "true")],
    );
}

/// A private home directory in which Gemini CLI starts straight at its input prompt.
#[derive(Debug, Clone)]
pub struct GeminiHome {
    home: PathBuf,
    work_dir: PathBuf,
    mock_url: String,
}

impl GeminiHome {
    /// Creates `<root>/home/.gemini` with a `settings.json` that selects API-key authentication
    /// and turns off update checks, usage statistics, IDE integration and the terminal
    /// compatibility warnings, and a `trustedFolders.json` that trusts `work_dir` (so the
    /// confirmation dialogs offer "Allow for this session"). `mock_url` is the API base URL
    /// ([`crate::mock_llm::MockLlm::url`]). Panics if the files cannot be written (test setup).
    pub fn new(root: &Path, work_dir: &Path, mock_url: &str) -> GeminiHome {
        let home = root.join("home");
        std::fs::create_dir_all(home.join(".gemini")).expect("create the Gemini home");
        // Gemini matches trusted folders against its real working directory; a path through a
        // symlink (macOS /tmp) would not match and the trust dialog would come back.
        let work_dir = work_dir
            .canonicalize()
            .unwrap_or_else(|_| work_dir.to_path_buf());
        let home = GeminiHome {
            home,
            work_dir,
            mock_url: mock_url.to_string(),
        };
        home.write_settings(&json!({}));
        let trusted = json!({ home.work_dir.display().to_string(): "TRUST_FOLDER" });
        std::fs::write(
            home.gemini_dir().join("trustedFolders.json"),
            serde_json::to_string_pretty(&trusted).expect("serialize trustedFolders.json"),
        )
        .expect("write ~/.gemini/trustedFolders.json");
        home
    }

    /// The private `HOME`.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// `~/.gemini`, where Gemini keeps its settings, trust list and transcripts.
    pub fn gemini_dir(&self) -> PathBuf {
        self.home.join(".gemini")
    }

    /// `~/.gemini/settings.json`.
    pub fn settings_path(&self) -> PathBuf {
        self.gemini_dir().join("settings.json")
    }

    /// The (canonical) working directory Gemini is trusted in; start it there.
    pub fn work_dir(&self) -> &Path {
        &self.work_dir
    }

    /// Writes `~/.gemini/settings.json`: the seeded settings with `hooks` (the value of the
    /// settings' `hooks` key: `{"AfterAgent": [{"matcher": "", "hooks": [...]}], ...}`) added.
    /// Gemini reads its settings at start, so call this before starting it.
    pub fn set_hooks(&self, hooks: Value) {
        self.write_settings(&json!({ "hooks": hooks }));
    }

    fn write_settings(&self, extra: &Value) {
        let mut settings = json!({
            // Skips "How would you like to authenticate for this project?"; the key itself
            // comes from GEMINI_API_KEY.
            "security": { "auth": { "selectedType": "gemini-api-key" } },
            // No npm registry lookups, no "update available" box.
            "general": { "enableAutoUpdate": false, "enableAutoUpdateNotification": false },
            // No Clearcut usage statistics (play.googleapis.com).
            "privacy": { "usageStatisticsEnabled": false },
            "telemetry": { "enabled": false },
            // No IDE companion detection or "connect to your IDE" nudge.
            "ide": { "enabled": false, "hasSeenNudge": true },
            // No "True color (24-bit) support not detected" (or TERM=screen) warning above the
            // prompt: it depends on the terminal running the tests.
            "ui": { "showCompatibilityWarnings": false },
        });
        if let (Some(base), Some(extra)) = (settings.as_object_mut(), extra.as_object()) {
            base.extend(extra.clone());
        }
        std::fs::write(
            self.settings_path(),
            serde_json::to_string_pretty(&settings).expect("serialize settings.json"),
        )
        .expect("write ~/.gemini/settings.json");
    }

    /// The environment Gemini CLI needs, to be given to its tmux session (`new-session -e`).
    pub fn env(&self) -> Vec<(String, String)> {
        let home = self.home.display().to_string();
        let mut env = crate::private_home_env(&self.home);
        let pairs = [
            ("GEMINI_API_KEY", API_KEY.into()),
            // The SDK appends `/v1beta/models/{model}:{method}`.
            ("GOOGLE_GEMINI_BASE_URL", self.mock_url.clone()),
            // The machine's /etc/gemini-cli/settings.json (and system-defaults.json beside it)
            // would override the seeded settings: point at a file that does not exist.
            (
                "GEMINI_CLI_SYSTEM_SETTINGS_PATH",
                format!("{home}/no-system-settings/settings.json"),
            ),
        ];
        env.extend(pairs.into_iter().map(|(k, v)| (k.to_string(), v)));
        env
    }

    /// The command line: the pinned CLI, interactive, default approval mode (every shell command
    /// asks).
    pub fn argv(&self) -> Vec<String> {
        vec![gemini_bin().display().to_string()]
    }
}
