//! The daemon's configuration: one typed struct with defaults, read from TOML.
//!
//! The daemon runs with no file at all. A file may hold sections for other parts of clibot
//! (`[gateway]`, `[access]`); those are ignored here, while a typo inside a section the daemon
//! owns is an error that names the key. `${NAME}` inside any string is replaced by the
//! environment variable, so secrets stay out of the file.

use crate::cli::{CliOverride, CliSpec, builtin_clis};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// Why the configuration could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {path} is not valid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error(
        "config file {path}: `{key}` refers to ${{{var}}}, but the environment variable {var} is not set; export it or remove the reference"
    )]
    MissingEnv {
        path: PathBuf,
        key: String,
        var: String,
    },
    #[error("config file {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// Everything the daemon reads from `config.toml`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Config {
    pub daemon: DaemonConfig,
    pub tmux: TmuxConfig,
    /// User entries; merged over the built-in ones by [`Config::clis`].
    #[serde(rename = "cli")]
    pub cli_overrides: BTreeMap<String, CliOverride>,
    /// `[access.PLATFORM]`: who may act from each chat platform.
    pub access: BTreeMap<String, crate::chat::access::PlatformAccess>,
    /// `[[rules]]`: automatic answers to prompts, tried in order.
    pub rules: Vec<crate::automation::RuleConfig>,
    /// `[guard]`: subjects always left to a person, beyond the built-in ones.
    pub guard: crate::automation::GuardConfig,
    /// `[decider]`: a program asked about prompts no rule matched.
    pub decider: Option<crate::automation::DeciderConfig>,
    /// `[delegation]`: handing a session's work to another CLI when its CLI fails.
    pub delegation: crate::automation::delegation::DelegationConfig,
    /// `[[sessions]]`: sessions declared in the config, started with the daemon (`auto_start`)
    /// or by `clibotctl start NAME` / `!!start NAME`.
    pub sessions: Vec<DeclaredSession>,
    /// `[[routes]]`: which CLI a new task goes to (`!!ask`, `clibotctl route`), first match.
    pub routes: Vec<crate::automation::routing::RouteConfig>,
    /// `[[jobs]]`: work that starts itself (docs/JOBS.md).
    pub jobs: Vec<crate::jobs::JobSpec>,
    /// `[triggers]`: where webhooks that start jobs are taken (off by default).
    pub triggers: crate::jobs::webhook::TriggersConfig,
    /// `[usage]`: how what the turns cost is shown (docs/USAGE.md).
    pub usage: crate::usage::UsageConfig,
    /// `[[budgets]]`: what the turns may cost, and what happens when they have.
    pub budgets: Vec<crate::usage::budgets::BudgetSpec>,
    /// `[worktrees]`: where sessions' git worktrees are made (docs/WORKTREES.md).
    pub worktrees: crate::worktrees::WorktreesConfig,
}

/// One `[[sessions]]` entry.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredSession {
    pub name: String,
    pub cli: String,
    /// The working directory (`~` is the home directory); it must lie in an allowed root.
    /// Unset: the CLI's own default directory.
    #[serde(default)]
    pub dir: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// Started when the daemon starts (and on `clibotctl reload`) if it does not run.
    #[serde(default)]
    pub auto_start: bool,
}

/// `[daemon]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DaemonConfig {
    /// Socket path; the command line and `CLIBOT_SOCKET` win over it.
    pub socket: Option<PathBuf>,
    /// State directory; the command line and `CLIBOT_STATE_DIR` win over it.
    pub state_dir: Option<PathBuf>,
    /// Data directory (members' workspaces); the command line and `CLIBOT_DATA_DIR` win
    /// over it.
    pub data_dir: Option<PathBuf>,
    /// Working directories must lie inside one of these (`~` is the home directory).
    pub allowed_roots: Vec<PathBuf>,
    /// Largest text accepted by one `send`, in bytes.
    pub max_input_bytes: usize,
    /// Most messages that may wait behind a running turn, per session.
    pub max_queued_inputs: usize,
    /// Most bytes of messages that may wait behind a running turn, per session.
    pub max_queued_bytes: usize,
    /// How many events the log keeps; older ones are dropped.
    pub event_retention: usize,
    /// About how many bytes of those events are kept in memory; past it the oldest are kept
    /// with their long texts cut, read back from the file when a reader needs them whole.
    pub event_memory_bytes: usize,
    /// How long a graceful stop may take before the session is killed.
    pub stop_timeout_ms: u64,
    /// The safety-net check for exited sessions.
    pub poll_interval_ms: u64,
    /// A working session with no output for this long is reported stalled (never killed).
    pub stall_after_ms: u64,
    /// How long a CLI's permission hook waits for an answer from clibot before the CLI's own
    /// dialog is left to be answered (by keys through clibot, or at the terminal).
    pub permission_wait_ms: u64,
    /// A working CLI that reports turns by hook, whose screen has looked idle this long with no
    /// completion hook (lost, or never sent), has its turn ended (the reply read from its
    /// transcript where it keeps one) and takes its next queued input.
    pub idle_turn_end_ms: u64,
    /// The command the CLIs' hooks run; default: the `clibotctl` next to `clibotd`, `hook`.
    pub hook_command: Option<String>,
    /// A chat's transcript (`transcripts/PLATFORM/CHAT.jsonl`) is rotated when it reaches this
    /// size, in bytes; the current file and one older are kept.
    pub transcript_max_bytes: u64,
    /// The audit log (`audit.jsonl`) is rotated when it reaches this size, in bytes.
    pub audit_max_bytes: u64,
    /// Audit log files kept, the current one included.
    pub audit_files: u32,
    /// The daemon's own log, when it writes one (`clibotd.log` in the state directory, as when
    /// `clibotctl` starts it), is rotated at this size; three files are kept.
    pub log_max_bytes: u64,
    /// Sessions that may run at once (exited ones do not count); a spawn beyond it is refused.
    pub max_sessions: usize,
    /// A session idle this long (no input, no output, no prompt, nothing queued) is stopped
    /// gracefully and kept as exited, so that `restart` resumes it. Zero: never.
    #[serde(deserialize_with = "crate::duration::de_duration")]
    pub idle_stop_after: Duration,
    /// A turn running longer than this gets a notice with the screen's last lines, then
    /// `on_turn_timeout`. Zero: never.
    #[serde(deserialize_with = "crate::duration::de_duration")]
    pub turn_timeout: Duration,
    /// What follows that notice: "notify" (nothing more), "cancel" or "delegate".
    pub on_turn_timeout: crate::cli::OnTurnTimeout,
    /// "never", or "on-failure": a CLI that exits with a failure status or mid-turn is started
    /// again, resuming its conversation, at most `restart_max` times in `restart_window`.
    pub restart: crate::cli::RestartPolicy,
    pub restart_max: u32,
    #[serde(deserialize_with = "crate::duration::de_duration")]
    pub restart_window: Duration,
    /// A prompt nobody answered for this long is shown again to its chats, once per interval.
    /// Zero: never.
    #[serde(deserialize_with = "crate::duration::de_duration")]
    pub remind_after: Duration,
    /// A prompt nobody answered for this long is shown to the admins' chats as well. Zero:
    /// never.
    #[serde(deserialize_with = "crate::duration::de_duration")]
    pub escalate_after: Duration,
    /// A prompt nobody answered for this long gets `on_prompt_timeout`. Zero: never.
    #[serde(deserialize_with = "crate::duration::de_duration")]
    pub prompt_timeout: Duration,
    /// "wait" (it goes on waiting), "deny" (its "no" option) or "decider" (a guarded prompt
    /// never goes to the decider: it waits).
    pub on_prompt_timeout: crate::cli::OnPromptTimeout,
    /// Where to serve the metrics over HTTP (`GET /metrics`); unset: not served (they stay
    /// available through `clibotctl metrics`). Loopback only unless `metrics_allow_remote`.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Lets `metrics_listen` be a non-loopback address.
    pub metrics_allow_remote: bool,
    /// The session a chat with no binding talks to (if the chat user may use it); empty:
    /// none. Reloadable.
    pub default_session: String,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            socket: None,
            state_dir: None,
            data_dir: None,
            allowed_roots: vec![PathBuf::from("~")],
            max_input_bytes: 64 * 1024,
            max_queued_inputs: 100,
            max_queued_bytes: 1024 * 1024,
            event_retention: 10_000,
            event_memory_bytes: crate::store::events::DEFAULT_MEMORY,
            stop_timeout_ms: 5_000,
            poll_interval_ms: 2_000,
            stall_after_ms: 600_000,
            permission_wait_ms: 600_000,
            idle_turn_end_ms: 5_000,
            hook_command: None,
            transcript_max_bytes: crate::chat::transcript::DEFAULT_MAX_BYTES,
            audit_max_bytes: crate::store::audit::Limits::default().max_bytes,
            audit_files: crate::store::audit::Limits::default().files,
            log_max_bytes: 10 * 1024 * 1024,
            max_sessions: 32,
            idle_stop_after: Duration::from_secs(12 * 3600),
            turn_timeout: Duration::ZERO,
            on_turn_timeout: Default::default(),
            restart: Default::default(),
            restart_max: 3,
            restart_window: Duration::from_secs(600),
            remind_after: Duration::from_secs(15 * 60),
            escalate_after: Duration::from_secs(3600),
            prompt_timeout: Duration::ZERO,
            on_prompt_timeout: Default::default(),
            metrics_listen: None,
            metrics_allow_remote: false,
            default_session: String::new(),
        }
    }
}

/// `[tmux]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TmuxConfig {
    /// The tmux binary.
    pub binary: PathBuf,
    /// A socket path (tmux `-S`); the command line and `CLIBOT_TMUX_SOCKET` win over it.
    pub socket: Option<PathBuf>,
    /// A socket name (tmux `-L`), used when no path is given.
    pub socket_name: String,
    /// A tmux config file for the server (tmux `-f`); unset: tmux's own default.
    pub config_file: Option<PathBuf>,
    /// Size of new windows until a terminal attaches.
    pub width: u16,
    pub height: u16,
    /// Scrollback lines kept per pane.
    pub history_limit: u32,
}

impl Default for TmuxConfig {
    fn default() -> Self {
        TmuxConfig {
            binary: PathBuf::from("tmux"),
            socket: None,
            socket_name: "clibot".to_string(),
            config_file: None,
            width: 200,
            height: 50,
            history_limit: 10_000,
        }
    }
}

/// The top-level sections the daemon reads.
pub const DAEMON_SECTIONS: &[&str] = &[
    "daemon",
    "tmux",
    "cli",
    "access",
    "rules",
    "guard",
    "decider",
    "delegation",
    "sessions",
    "routes",
    "jobs",
    "triggers",
    "usage",
    "budgets",
    "worktrees",
];

/// Top-level sections of the config file that neither the daemon nor the gateway reads (a
/// misspelled `[acess.telegram]`), each with what was probably meant.
pub fn unknown_sections(text: &str) -> Vec<String> {
    let Ok(value) = toml::from_str::<toml::Table>(text) else {
        return Vec::new();
    };
    let known: Vec<&str> = DAEMON_SECTIONS.iter().copied().chain(["gateway"]).collect();
    value
        .keys()
        .filter(|k| !known.contains(&k.as_str()))
        .map(|k| {
            let near = known
                .iter()
                .min_by_key(|n| edit_distance(k, n))
                .filter(|n| edit_distance(k, n) <= 2);
            match near {
                Some(n) => {
                    format!("[{k}] is no section clibot reads (did you mean [{n}]?): it is ignored")
                }
                None => format!("[{k}] is no section clibot reads: it is ignored"),
            }
        })
        .collect()
}

/// Levenshtein distance, for naming the section a misspelling meant.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == *cb {
                prev
            } else {
                1 + prev.min(row[j]).min(cur)
            };
            prev = cur;
        }
    }
    row[b.len()]
}

/// What the daemon was started with.
#[derive(Debug, Clone)]
pub struct Settings {
    pub config: Config,
    pub config_file: Option<PathBuf>,
    pub state_dir: PathBuf,
    /// Where members' workspaces are made (`members/PLATFORM-USER`).
    pub data_dir: PathBuf,
    /// The gRPC socket, passed to CLIs as `CLIBOT_SOCKET` so their hooks can reach the daemon.
    pub socket: PathBuf,
}

impl Config {
    /// Reads `path`. A missing file is an error only when `required` (it was named explicitly).
    pub fn load(path: &Path, required: bool) -> Result<Option<Config>, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => return Ok(None),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        Config::parse(&text, path).map(Some)
    }

    /// Parses TOML text (`path` only names the file in errors).
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let mut value: toml::Table = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        // Only the sections the daemon owns: a gateway token whose variable is unset in the
        // daemon's environment must not stop the daemon.
        value.retain(|k, _| DAEMON_SECTIONS.contains(&k));
        clibot_proto::substitute_env(&mut value).map_err(|e| ConfigError::MissingEnv {
            path: path.to_path_buf(),
            key: e.key,
            var: e.var,
        })?;
        let config: Config = toml::Table::try_into(value).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        config.validate(path)?;
        Ok(config)
    }

    fn validate(&self, path: &Path) -> Result<(), ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let clis = self.clis();
        let mut declared = std::collections::BTreeSet::new();
        for s in &self.sessions {
            if !crate::names::is_valid_name(&s.name) {
                return Err(invalid(format!(
                    "[[sessions]] name = {:?}: session names use only A-Z a-z 0-9 _ - (1 to 64)",
                    s.name
                )));
            }
            if crate::names::is_reserved(&s.name) {
                return Err(invalid(format!(
                    "[[sessions]] name = {:?}: names of the form u-CLI-NUMBER are clibot's own, for CLIs started outside it; choose another",
                    s.name
                )));
            }
            if !declared.insert(s.name.as_str()) {
                return Err(invalid(format!(
                    "[[sessions]]: {:?} is declared twice; give each session its own name",
                    s.name
                )));
            }
            if !clis.contains_key(&s.cli) {
                return Err(invalid(format!(
                    "[[sessions]] {:?}: cli = {:?} is not a configured CLI (known: {})",
                    s.name,
                    s.cli,
                    clis.keys().cloned().collect::<Vec<_>>().join(", ")
                )));
            }
        }
        crate::automation::routing::Routes::compile(&self.routes, &clis).map_err(invalid)?;
        if !self.daemon.default_session.is_empty()
            && !crate::names::is_valid_name(&self.daemon.default_session)
        {
            return Err(invalid(format!(
                "[daemon] default_session = {:?}: not a session name (A-Z a-z 0-9 _ -)",
                self.daemon.default_session
            )));
        }
        for (name, cli) in &self.cli_overrides {
            if !crate::names::is_valid_name(name) {
                return Err(invalid(format!(
                    "[cli.{name}]: CLI names use only A-Z a-z 0-9 _ - (at most 64)"
                )));
            }
            if cli
                .argv
                .as_ref()
                .is_some_and(|a| a.is_empty() || a[0].is_empty())
            {
                return Err(invalid(format!(
                    "[cli.{name}]: argv must name a program, e.g. argv = [\"{name}\"]"
                )));
            }
            for key in cli.stop_keys.iter().flatten() {
                crate::keys::Key::parse(key)
                    .map_err(|e| invalid(format!("[cli.{name}] stop_keys: {e}")))?;
            }
            if let Some(a) = &cli.adapter
                && !crate::cli::adapter_names().contains(&a.as_str())
            {
                return Err(invalid(format!(
                    "[cli.{name}] adapter = {a:?}: use one of {}",
                    crate::cli::adapter_names().join(", ")
                )));
            }
            let packs = crate::cli::detect::builtin_packs();
            if let Some(p) = &cli.pattern_pack
                && !packs.contains_key(p)
            {
                let known = packs.keys().cloned().collect::<Vec<_>>().join(", ");
                return Err(invalid(format!(
                    "[cli.{name}] pattern_pack = {p:?}: use one of {known}"
                )));
            }
            let base_name = cli.pattern_pack.clone().unwrap_or_else(|| {
                if packs.contains_key(name) {
                    name.clone()
                } else {
                    "generic".into()
                }
            });
            if let (Some(extra), Some(base)) = (&cli.patterns, packs.get(&base_name)) {
                crate::cli::detect::Pack::compile(base, Some(extra))
                    .map_err(|e| invalid(format!("[cli.{name}.patterns] {e}")))?;
            }
            if !builtin_clis().contains_key(name) && cli.argv.is_none() {
                return Err(invalid(format!(
                    "[cli.{name}]: a new CLI needs argv, e.g. argv = [\"{name}\"]"
                )));
            }
        }
        for (platform, access) in &self.access {
            if clibot_proto::platforms::platform(platform).is_none() {
                return Err(invalid(format!(
                    "[access.{platform}]: unknown platform; use {}",
                    clibot_proto::platforms::listed()
                )));
            }
            access.validate(platform).map_err(invalid)?;
        }
        if self.daemon.max_sessions == 0 {
            return Err(invalid(
                "[daemon] max_sessions must be at least 1 (the default is 32)".into(),
            ));
        }
        if self.daemon.event_retention == 0 {
            return Err(invalid(
                "[daemon] event_retention must be at least 1".into(),
            ));
        }
        if self.daemon.audit_max_bytes < 4096 {
            return Err(invalid(
                "[daemon] audit_max_bytes must be at least 4096 (the default is 10485760, 10 MiB)"
                    .into(),
            ));
        }
        if self.daemon.transcript_max_bytes < 4096 {
            return Err(invalid(
                "[daemon] transcript_max_bytes must be at least 4096 (the default is 1048576, 1 MiB)"
                    .into(),
            ));
        }
        self.triggers.check().map_err(invalid)?;
        let mut names = std::collections::HashSet::new();
        for b in &self.budgets {
            b.check().map_err(invalid)?;
            if !names.insert(b.name.as_str()) {
                return Err(invalid(format!(
                    "[[budgets]]: two budgets are named {:?}; names are how they are lifted",
                    b.name
                )));
            }
        }
        if let Some(addr) = self.daemon.metrics_listen {
            crate::ops::metrics::check_listen(addr, self.daemon.metrics_allow_remote)
                .map_err(invalid)?;
        }
        if self.daemon.log_max_bytes < 4096 {
            return Err(invalid(
                "[daemon] log_max_bytes must be at least 4096 (the default is 10485760, 10 MiB)"
                    .into(),
            ));
        }
        if self.daemon.audit_files == 0 {
            return Err(invalid(
                "[daemon] audit_files must be at least 1 (the default is 5)".into(),
            ));
        }
        crate::automation::Automation::new(&self.rules, &self.guard, self.decider.as_ref())
            .map_err(invalid)?;
        self.delegation.validate(&self.clis()).map_err(invalid)?;
        if self.tmux.width < 10 || self.tmux.height < 5 {
            return Err(invalid(
                "[tmux] width must be at least 10 and height at least 5".into(),
            ));
        }
        Ok(())
    }

    /// The built-in CLIs with the user's entries merged over them.
    pub fn clis(&self) -> BTreeMap<String, CliSpec> {
        let mut clis = builtin_clis();
        for (name, o) in &self.cli_overrides {
            let entry = clis.entry(name.clone()).or_insert_with(|| CliSpec {
                name: name.clone(),
                argv: Vec::new(),
                env: BTreeMap::new(),
                dir: None,
                submit_delay_ms: 300,
                stop_keys: vec!["C-c".into()],
                stop_text: None,
                adapter: "generic".into(),
                pattern_pack: "generic".into(),
                patterns: None,
                quiet_ms: 1_500,
                idle_stop_after: None,
                turn_timeout: None,
                on_turn_timeout: None,
                restart: None,
                prompts: Default::default(),
                profiles: BTreeMap::new(),
            });
            if let Some(v) = &o.adapter {
                entry.adapter = v.clone();
            }
            if let Some(v) = &o.pattern_pack {
                entry.pattern_pack = v.clone();
            }
            if let Some(v) = &o.patterns {
                entry.patterns = Some(v.clone());
            }
            if let Some(v) = o.quiet_ms {
                entry.quiet_ms = v;
            }
            if let Some(v) = o.idle_stop_after {
                entry.idle_stop_after = Some(v);
            }
            if let Some(v) = o.turn_timeout {
                entry.turn_timeout = Some(v);
            }
            if let Some(v) = o.on_turn_timeout {
                entry.on_turn_timeout = Some(v);
            }
            if let Some(v) = o.restart {
                entry.restart = Some(v);
            }
            let p = &mut entry.prompts;
            p.remind_after = o.remind_after.or(p.remind_after);
            p.escalate_after = o.escalate_after.or(p.escalate_after);
            p.prompt_timeout = o.prompt_timeout.or(p.prompt_timeout);
            p.on_prompt_timeout = o.on_prompt_timeout.or(p.on_prompt_timeout);
            if let Some(v) = &o.argv {
                entry.argv = v.clone();
            }
            if let Some(v) = &o.profiles {
                entry.profiles.extend(v.clone());
            }
            if let Some(v) = &o.env {
                entry.env.extend(v.clone());
            }
            if let Some(v) = &o.dir {
                entry.dir = Some(v.clone());
            }
            if let Some(v) = o.submit_delay_ms {
                entry.submit_delay_ms = v;
            }
            if let Some(v) = &o.stop_keys {
                entry.stop_keys = v.clone();
            }
            if let Some(v) = &o.stop_text {
                entry.stop_text = Some(v.clone()).filter(|t| !t.is_empty());
            }
        }
        clis
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::duration::{format_age, format_duration, format_words, parse_duration};

    fn parse(s: &str) -> Result<Config, ConfigError> {
        Config::parse(s, Path::new("test.toml"))
    }

    /// Every section of the daemon's config is read (a section missing from
    /// `DAEMON_SECTIONS` would be dropped before parsing, silently).
    #[test]
    fn every_section_is_read() {
        let c = parse(
            "[worktrees]\ndir = \"/wt\"\nsetup = [\"true\"]\nsummary = true\n[usage]\nfooter = true\n",
        )
        .expect("parses");
        assert_eq!(c.worktrees.dir.as_deref(), Some(Path::new("/wt")));
        assert_eq!((c.worktrees.setup.len(), c.worktrees.summary), (1, true));
        assert!(unknown_sections("[worktrees]\n[usage]\n[budgets]\n").is_empty());
    }

    #[test]
    fn empty_file_gives_defaults_and_builtins() {
        let c = parse("").expect("empty config parses");
        let clis = c.clis();
        for name in ["claude", "codex", "gemini", "opencode", "shell"] {
            assert!(clis.contains_key(name), "{name} is built in");
        }
        assert_eq!(c.daemon.max_input_bytes, 65536);
        assert_eq!(c.tmux.socket_name, "clibot");
        assert_eq!(
            (c.daemon.audit_max_bytes, c.daemon.audit_files),
            (10 * 1024 * 1024, 5)
        );
    }

    #[test]
    fn audit_limits_are_read_and_checked() {
        let c = parse("[daemon]\naudit_max_bytes = 65536\naudit_files = 2\n").expect("parses");
        assert_eq!((c.daemon.audit_max_bytes, c.daemon.audit_files), (65536, 2));
        let e = parse("[daemon]\naudit_files = 0\n").expect_err("no files");
        assert!(e.to_string().contains("audit_files"), "{e}");
        let e = parse("[daemon]\naudit_max_bytes = 10\n").expect_err("too small");
        assert!(e.to_string().contains("audit_max_bytes"), "{e}");
    }

    #[test]
    fn metrics_listen_is_loopback_unless_allowed() {
        let c = parse("").expect("parses");
        assert_eq!(c.daemon.metrics_listen, None);
        let c = parse("[daemon]\nmetrics_listen = \"127.0.0.1:9477\"\n").expect("parses");
        assert_eq!(
            c.daemon.metrics_listen.map(|a| a.to_string()).as_deref(),
            Some("127.0.0.1:9477")
        );
        let e = parse("[daemon]\nmetrics_listen = \"0.0.0.0:9477\"\n").expect_err("remote");
        assert!(e.to_string().contains("metrics_allow_remote"), "{e}");
        parse("[daemon]\nmetrics_listen = \"0.0.0.0:9477\"\nmetrics_allow_remote = true\n")
            .expect("allowed");
        parse("[daemon]\nmetrics_listen = \"localhost\"\n").expect_err("not an address");
        // Webhooks: loopback or a Unix socket only, whatever else is set.
        let e = parse("[triggers]\nlisten = \"0.0.0.0:8790\"\n").expect_err("remote");
        assert!(e.to_string().contains("[triggers] listen"), "{e}");
        parse("[triggers]\nlisten = \"127.0.0.1:8790\"\nwindow = \"2m\"\n").expect("loopback");
        let e = parse("[triggers]\nwindow = \"soon\"\n").expect_err("window");
        assert!(e.to_string().contains("[triggers] window"), "{e}");
    }

    #[test]
    fn user_entry_merges_over_builtin() {
        let c = parse(
            "[cli.claude]\nenv = { A = \"1\" }\n[cli.mytool]\nargv = [\"python3\", \"-i\"]\n",
        )
        .expect("parses");
        let clis = c.clis();
        assert_eq!(
            clis["claude"].argv,
            ["claude", "--permission-mode", "default"].map(String::from)
        );
        assert_eq!(clis["claude"].env["A"], "1");
        assert_eq!(
            clis["mytool"].argv,
            vec!["python3".to_string(), "-i".to_string()]
        );
    }

    #[test]
    fn env_substitution_and_escape() {
        // SAFETY of the test: a variable name no other test uses.
        let v = std::env::var("PATH").expect("PATH is set in tests");
        let c = parse("[cli.x]\nargv = [\"${PATH}\", \"$${LITERAL}\", \"a$b\"]\n").expect("parses");
        assert_eq!(
            c.clis()["x"].argv,
            vec![v, "${LITERAL}".to_string(), "a$b".to_string()]
        );
        let e = parse("[cli.x]\nargv = [\"${CLIBOT_SURELY_UNSET_VAR}\"]\n")
            .expect_err("unset var is an error");
        let msg = e.to_string();
        assert!(
            msg.contains("CLIBOT_SURELY_UNSET_VAR") && msg.contains("cli.x.argv"),
            "{msg}"
        );
    }

    #[test]
    fn typos_are_named() {
        let e = parse("[daemon]\nalowed_roots = []\n").expect_err("unknown key");
        assert!(e.to_string().contains("alowed_roots"), "{e}");
        let e = parse("[cli.new]\nenv = {}\n").expect_err("new cli without argv");
        assert!(e.to_string().contains("argv"), "{e}");
        let e = parse("[cli.x]\nargv=[\"a\"]\nstop_keys = [\"Hyper-Q\"]\n").expect_err("bad key");
        assert!(e.to_string().contains("Hyper-Q"), "{e}");
    }

    #[test]
    fn durations_parse_in_their_units() {
        let ok = |s: &str| parse_duration(s).expect(s);
        assert_eq!(ok("0"), Duration::ZERO);
        assert_eq!(ok("90s"), Duration::from_secs(90));
        assert_eq!(ok("30m"), Duration::from_secs(1800));
        assert_eq!(ok("12h"), Duration::from_secs(43_200));
        assert_eq!(ok("2d"), Duration::from_secs(172_800));
        assert_eq!(ok(" 5s "), Duration::from_secs(5));
        let huge = "9999999999999999999d";
        for bad in ["", "h", "12", "12x", "1.5h", "-3s", "30m12h", huge] {
            let e = parse_duration(bad).expect_err(bad);
            assert!(e.contains("\"12h\""), "{bad}: {e}");
        }
        assert_eq!(format_duration(Duration::from_secs(43_200)), "12h");
        assert_eq!(format_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(format_age(Duration::from_secs(3 * 3600 + 59)), "3h");
        assert_eq!(format_age(Duration::from_secs(2400)), "40m");
        assert_eq!(format_words(Duration::from_secs(3600)), "1 hour");
        assert_eq!(format_words(Duration::from_secs(5400)), "1 hour 30 minutes");
        assert_eq!(
            format_words(Duration::from_secs(47 * 60 + 12)),
            "47 minutes 12 seconds"
        );
        assert_eq!(format_words(Duration::from_secs(2 * 86_400 + 60)), "2 days");
        assert_eq!(format_words(Duration::from_secs(1)), "1 second");
        assert_eq!(format_words(Duration::ZERO), "0 seconds");
    }

    #[test]
    fn limits_and_idle_stop_are_read() {
        let c = parse("").expect("parses");
        assert_eq!(c.daemon.max_sessions, 32);
        assert_eq!(c.daemon.idle_stop_after, Duration::from_secs(12 * 3600));
        assert_eq!(c.clis()["shell"].idle_stop_after, None);
        let c = parse(
            "[daemon]\nmax_sessions = 3\nidle_stop_after = \"0\"\n[cli.shell]\nidle_stop_after = \"30m\"\n[access.telegram]\nmax_sessions_per_user = 2\n",
        )
        .expect("parses");
        assert_eq!(c.daemon.max_sessions, 3);
        assert_eq!(c.daemon.idle_stop_after, Duration::ZERO);
        assert_eq!(
            c.clis()["shell"].idle_stop_after,
            Some(Duration::from_secs(1800))
        );
        assert_eq!(c.access["telegram"].max_sessions_per_user, 2);
        let c = parse("[access.telegram]\nallow = [\"1\"]\n").expect("parses");
        assert_eq!(c.access["telegram"].max_sessions_per_user, 4);
        let e = parse("[daemon]\nidle_stop_after = \"12 hours\"\n").expect_err("bad unit");
        assert!(e.to_string().contains("idle_stop_after"), "{e}");
        let e = parse("[cli.shell]\nidle_stop_after = 30\n").expect_err("no unit");
        assert!(e.to_string().contains("\"30s\""), "{e}");
        let e = parse("[daemon]\nmax_sessions = 0\n").expect_err("zero");
        assert!(e.to_string().contains("max_sessions"), "{e}");
    }

    #[test]
    fn pairing_lifetime_and_cap_are_read_and_checked() {
        use crate::chat::access::{DEFAULT_MAX_PENDING, DEFAULT_PAIRING_TTL};
        let c = parse("[access.telegram]\nallow = [\"1\"]\n").expect("parses");
        assert_eq!(c.access["telegram"].pairing_ttl, DEFAULT_PAIRING_TTL);
        assert_eq!(DEFAULT_PAIRING_TTL, Duration::from_secs(3600));
        assert_eq!(
            c.access["telegram"].pairing_max_pending,
            DEFAULT_MAX_PENDING
        );
        assert_eq!(DEFAULT_MAX_PENDING, 50);
        let c = parse(
            "[access.telegram]\npairing_ttl = \"30m\"\npairing_max_pending = 5\n[access.discord]\npairing_ttl = \"2d\"\n",
        )
        .expect("parses");
        assert_eq!(c.access["telegram"].pairing_ttl, Duration::from_secs(1800));
        assert_eq!(c.access["telegram"].pairing_max_pending, 5);
        assert_eq!(
            c.access["discord"].pairing_ttl,
            Duration::from_secs(2 * 86_400)
        );
        assert_eq!(c.access["discord"].pairing_max_pending, 50);
        for (bad, key) in [
            ("pairing_ttl = \"0\"", "pairing_ttl"),
            ("pairing_ttl = 0", "pairing_ttl"),
            ("pairing_ttl = \"soon\"", "pairing_ttl"),
            ("pairing_ttl = \"1 hour\"", "pairing_ttl"),
            ("pairing_ttl = 3600", "pairing_ttl"),
            ("pairing_max_pending = 0", "pairing_max_pending"),
            ("pairing_max_pending = -1", "pairing_max_pending"),
            ("pairing_max_pending = \"many\"", "pairing_max_pending"),
            ("pairing_max_pending = 1000000", "pairing_max_pending"),
        ] {
            let e = parse(&format!("[access.feishu]\n{bad}\n")).expect_err(bad);
            let m = e.to_string();
            assert!(m.contains(key), "{bad}: {m}");
        }
        let e = parse("[access.telegram]\npairing_ttl = \"0\"\n").expect_err("zero");
        assert!(
            e.to_string().contains("[access.telegram] pairing_ttl"),
            "the section is named: {e}"
        );
    }

    #[test]
    fn other_sections_are_ignored() {
        parse("[gateway.telegram]\ntoken = \"x\"\n[access.telegram]\npolicy = \"pairing\"\n")
            .expect("foreign sections are fine");
    }
}
