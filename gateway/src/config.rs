//! The gateway's part of the config file: `[gateway.telegram]`, `[gateway.discord]`,
//! `[gateway.feishu]`, `[gateway.slack]`. Read by the daemon's rules (clibot-proto): the same default path
//! (`$XDG_CONFIG_HOME/clibot/config.toml`), `${NAME}` replaced by the environment variable and an
//! unset one an error, and an unknown key an error that names it. Sections other than
//! `[gateway]` belong to the daemon and are not looked at here.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// `[gateway]`.
#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GatewayConfig {
    pub telegram: Option<TokenPlatform>,
    pub discord: Option<TokenPlatform>,
    pub feishu: Option<FeishuConfig>,
    pub slack: Option<SlackConfig>,
    /// A platform whose receive loop completes no cycle for this long is restarted ("90s").
    #[serde(default)]
    pub stall_after: Option<String>,
    /// A platform down for this long is reported to the admins through another platform
    /// ("10m"; "0": never).
    #[serde(default)]
    pub down_notice_after: Option<String>,
    /// While a turn runs, its status message shows the newest lines it printed (default on).
    #[serde(default)]
    pub stream: Option<bool>,
    /// How long one outgoing message may wait out a platform's rate limits ("10m", the
    /// default): a 429 costs time, never a try; past it the message is given up.
    #[serde(default)]
    pub rate_limit_wait: Option<String>,
    /// The largest file passed from a chat to a session, in bytes (default 20 MB).
    #[serde(default)]
    pub max_file_bytes: Option<u64>,
    /// How voice notes become text.
    #[serde(default)]
    pub transcribe: Option<crate::inbound::transcribe::TranscribeConfig>,
    /// The daemons this gateway serves (`[[gateway.machines]]`); none: the local one.
    #[serde(default)]
    pub machines: Vec<MachineConfig>,
}

pub use clibot_proto::MachineConfig;

pub use clibot_proto::duration::parse_duration;

impl GatewayConfig {
    /// `[gateway] stall_after` (default 90 s; it cannot be off, and "0" is the default).
    pub fn stall_after(&self) -> Result<Duration, String> {
        match &self.stall_after {
            None => Ok(crate::progress::DEFAULT_STALL_AFTER),
            Some(t) => match parse_duration(t) {
                Ok(d) if d.is_zero() => Ok(crate::progress::DEFAULT_STALL_AFTER),
                Ok(d) => Ok(d),
                Err(e) => Err(format!("[gateway] stall_after: {e}")),
            },
        }
    }

    /// `[gateway] rate_limit_wait` (default 10 min; at least 1 s).
    pub fn rate_limit_wait(&self) -> Result<Duration, String> {
        match &self.rate_limit_wait {
            None => Ok(crate::platforms::ratelimit::DEFAULT_MAX_WAIT),
            Some(t) => match parse_duration(t) {
                Ok(d) if d >= Duration::from_secs(1) => Ok(d),
                Ok(_) => Err("[gateway] rate_limit_wait: at least \"1s\"".into()),
                Err(e) => Err(format!("[gateway] rate_limit_wait: {e}")),
            },
        }
    }

    /// `[gateway] down_notice_after` (default 10 min; zero: never).
    pub fn down_notice_after(&self) -> Result<Duration, String> {
        match &self.down_notice_after {
            None => Ok(crate::progress::DEFAULT_DOWN_NOTICE_AFTER),
            Some(t) => parse_duration(t).map_err(|e| format!("[gateway] down_notice_after: {e}")),
        }
    }
}

/// `[gateway.telegram]` and `[gateway.discord]`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TokenPlatform {
    #[serde(default)]
    pub token: String,
    /// Another API base (a self-hosted Bot API server, a proxy, a test fake).
    pub api_url: Option<String>,
    /// Where sessions started on the machine send their replies, prompts and errors until a
    /// chat binds them (an admin's chat).
    #[serde(default)]
    pub default_chat: Option<String>,
    /// Each session in a topic of its own (Telegram forum topics, Discord threads) in chats
    /// that have them; the chat's general part is for `!!` commands. Off: one thread per chat.
    #[serde(default)]
    pub topics: bool,
}

/// `[gateway.feishu]`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FeishuConfig {
    pub app_id: String,
    pub app_secret: String,
    /// `https://open.feishu.cn`; Lark: `https://open.larksuite.com`.
    #[serde(default = "feishu_default_url")]
    pub api_url: String,
    /// See [`TokenPlatform::default_chat`].
    #[serde(default)]
    pub default_chat: Option<String>,
    /// Each session in a thread of its own in group chats; see [`TokenPlatform::topics`].
    #[serde(default)]
    pub topics: bool,
}

fn feishu_default_url() -> String {
    "https://open.feishu.cn".into()
}

/// `[gateway.slack]`: a Slack app with Socket Mode on.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SlackConfig {
    /// The app-level token (`xapp-…`, scope `connections:write`): opens the Socket Mode
    /// connection.
    pub app_token: String,
    /// The bot token (`xoxb-…`): every Web API call.
    pub bot_token: String,
    /// The Web API base, `https://slack.com/api` (a proxy, a test fake).
    #[serde(default = "slack_default_url")]
    pub api_url: String,
    /// See [`TokenPlatform::default_chat`] (a channel id, `C…`, or a DM's, `D…`).
    #[serde(default)]
    pub default_chat: Option<String>,
    /// Each session in a thread of its own in channels; see [`TokenPlatform::topics`].
    #[serde(default)]
    pub topics: bool,
}

fn slack_default_url() -> String {
    SLACK_DEFAULT_URL.into()
}

/// Slack's Web API when `api_url` is not set.
pub const SLACK_DEFAULT_URL: &str = crate::platforms::slack::DEFAULT_API_URL;

/// Why the config could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {path} is not valid: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("config file {path}: {source}")]
    MissingEnv {
        path: PathBuf,
        #[source]
        source: clibot_proto::MissingEnv,
    },
}

impl GatewayConfig {
    /// Reads `[gateway]` from `path` (given: it must exist), else from the default path (which
    /// may be absent: no platform is configured then). Returns the file it read.
    pub fn load(path: Option<&Path>) -> Result<(GatewayConfig, Option<PathBuf>), ConfigError> {
        let (path, required) = match path {
            Some(p) => (p.to_path_buf(), true),
            None => match clibot_proto::default_config_path() {
                Some(p) => (p, false),
                None => return Ok((GatewayConfig::default(), None)),
            },
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => {
                return Ok((GatewayConfig::default(), None));
            }
            Err(source) => return Err(ConfigError::Read { path, source }),
        };
        let config = GatewayConfig::parse(&text, &path)?;
        Ok((config, Some(path)))
    }

    /// Parses the text of a config file (`path` only names it in errors).
    pub fn parse(text: &str, path: &Path) -> Result<GatewayConfig, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let mut table: toml::Table = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        let Some(gateway) = table.remove("gateway") else {
            return Ok(GatewayConfig::default());
        };
        let mut gateway = match gateway {
            toml::Value::Table(t) => t,
            _ => {
                return Err(invalid(
                    "`gateway` must be a table ([gateway.PLATFORM])".into(),
                ));
            }
        };
        // Only the gateway's own keys: a daemon secret unset in the gateway's environment
        // must not stop the gateway.
        let mut wrapped = toml::Table::new();
        wrapped.insert(
            "gateway".into(),
            toml::Value::Table(std::mem::take(&mut gateway)),
        );
        clibot_proto::substitute_env(&mut wrapped).map_err(|source| ConfigError::MissingEnv {
            path: path.to_path_buf(),
            source,
        })?;
        let gateway = wrapped
            .remove("gateway")
            .unwrap_or(toml::Value::Table(gateway));
        let config: GatewayConfig = gateway.try_into().map_err(|e: toml::de::Error| {
            invalid(format!(
                "[gateway]: {} (the platforms are telegram, discord, feishu and slack)",
                e.message()
            ))
        })?;
        config.stall_after().map_err(invalid)?;
        config.down_notice_after().map_err(invalid)?;
        config.rate_limit_wait().map_err(invalid)?;
        Ok(config)
    }
}

/// What the command line and the environment add to the file: a flag (or its environment
/// variable) wins over the file's key.
#[derive(Debug, Default)]
pub struct Overrides {
    pub telegram_token: Option<String>,
    pub telegram_api_url: Option<String>,
    pub discord_token: Option<String>,
    pub discord_api_url: Option<String>,
}

/// Telegram's API when `api_url` is not set.
pub const TELEGRAM_DEFAULT_URL: &str = "https://api.telegram.org";
/// Discord's API when `api_url` is not set.
pub const DISCORD_DEFAULT_URL: &str = "https://discord.com";

impl GatewayConfig {
    /// `[gateway]` as the gateway would use it, with every default filled in and the flags and
    /// environment applied: each platform it would serve with no platform flag. Secrets are
    /// still in it: see [`mask_secrets`]. Also the platforms' secrets, to check the output by.
    pub fn effective(&self, o: &Overrides) -> (toml::Table, Vec<String>) {
        let mut gateway = toml::Table::new();
        let mut secrets = Vec::new();
        let mut token_platform = |name: &str,
                                  conf: &Option<TokenPlatform>,
                                  token: &Option<String>,
                                  url: &Option<String>,
                                  default_url: &str| {
            if conf.is_none() && token.is_none() {
                return;
            }
            let token = token
                .clone()
                .or_else(|| conf.as_ref().map(|c| c.token.clone()))
                .unwrap_or_default();
            let url = url
                .clone()
                .or_else(|| conf.as_ref().and_then(|c| c.api_url.clone()))
                .unwrap_or_else(|| default_url.to_string());
            secrets.push(token.clone());
            let mut t = toml::Table::new();
            t.insert("token".into(), toml::Value::String(token));
            t.insert("api_url".into(), toml::Value::String(url));
            if let Some(chat) = conf.as_ref().and_then(|c| c.default_chat.clone()) {
                t.insert("default_chat".into(), toml::Value::String(chat));
            }
            gateway.insert(name.into(), toml::Value::Table(t));
        };
        token_platform(
            "telegram",
            &self.telegram,
            &o.telegram_token,
            &o.telegram_api_url,
            TELEGRAM_DEFAULT_URL,
        );
        token_platform(
            "discord",
            &self.discord,
            &o.discord_token,
            &o.discord_api_url,
            DISCORD_DEFAULT_URL,
        );
        if let Some(f) = &self.feishu {
            secrets.push(f.app_secret.clone());
            let mut t = toml::Table::new();
            t.insert("app_id".into(), toml::Value::String(f.app_id.clone()));
            t.insert(
                "app_secret".into(),
                toml::Value::String(f.app_secret.clone()),
            );
            t.insert("api_url".into(), toml::Value::String(f.api_url.clone()));
            if let Some(chat) = &f.default_chat {
                t.insert("default_chat".into(), toml::Value::String(chat.clone()));
            }
            gateway.insert("feishu".into(), toml::Value::Table(t));
        }
        if let Some(sl) = &self.slack {
            secrets.push(sl.app_token.clone());
            secrets.push(sl.bot_token.clone());
            let mut t = toml::Table::new();
            for (k, v) in [
                ("app_token", &sl.app_token),
                ("bot_token", &sl.bot_token),
                ("api_url", &sl.api_url),
            ] {
                t.insert(k.into(), toml::Value::String(v.clone()));
            }
            if let Some(chat) = &sl.default_chat {
                t.insert("default_chat".into(), toml::Value::String(chat.clone()));
            }
            gateway.insert("slack".into(), toml::Value::Table(t));
        }
        for (key, value) in [
            ("stall_after", self.stall_after()),
            ("down_notice_after", self.down_notice_after()),
            ("rate_limit_wait", self.rate_limit_wait()),
        ] {
            if let Ok(d) = value {
                let text = if d.is_zero() {
                    "0".to_string()
                } else {
                    format!("{}s", d.as_secs())
                };
                gateway.insert(key.into(), toml::Value::String(text));
            }
        }
        let mut root = toml::Table::new();
        root.insert("gateway".into(), toml::Value::Table(gateway));
        (root, secrets)
    }
}

/// Whether a key names a secret: a token, a secret, a key, a password, a credential.
fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["token", "secret", "key", "password", "passwd", "credential"]
        .iter()
        .any(|w| k.contains(w))
}

/// A secret as it may be shown: its first and last two characters and its length when it is
/// long enough that they give nothing away ("12…ab (46 chars)"), else "***"; empty stays empty
/// (it says the secret is missing).
pub fn mask(secret: &str) -> String {
    let chars: Vec<char> = secret.chars().collect();
    match chars.len() {
        0 => String::new(),
        n if n < 16 => "***".into(),
        n => format!(
            "{}…{} ({n} chars)",
            chars[..2].iter().collect::<String>(),
            chars[n - 2..].iter().collect::<String>()
        ),
    }
}

/// A URL with the password of its user part masked (`https://me:***@proxy`).
fn mask_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let rest = &url[scheme_end..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_string();
    };
    let user = match rest[..at].split_once(':') {
        Some((user, _)) => format!("{user}:***"),
        None => "***".to_string(),
    };
    format!("{}{user}{}", &url[..scheme_end], &rest[at..])
}

/// Masks every value whose key names a secret (see [`mask`]), and passwords in URLs, at any
/// depth.
pub fn mask_secrets(table: &mut toml::Table) {
    for (key, value) in table.iter_mut() {
        match value {
            toml::Value::Table(t) => mask_secrets(t),
            toml::Value::String(s) if is_secret_key(key) => *s = mask(s),
            toml::Value::String(s) => *s = mask_url(s),
            toml::Value::Array(items) if is_secret_key(key) => {
                for item in items {
                    if let toml::Value::String(s) = item {
                        *s = mask(s);
                    }
                }
            }
            _ => {}
        }
    }
}

/// `clibot-gateway config`: the effective `[gateway]` as TOML, secrets masked, after a header
/// that says where it came from. `file` is the config file read (None: none was there).
pub fn render_effective(
    config: &GatewayConfig,
    o: &Overrides,
    file: Option<&Path>,
    socket: &Path,
    prefix: &str,
) -> String {
    let (mut table, secrets) = config.effective(o);
    mask_secrets(&mut table);
    let source = match file {
        Some(p) => format!("the config file {}", p.display()),
        None => "no config file (none at the default path)".into(),
    };
    let mut out = format!(
        "# clibot-gateway's effective configuration: {source},\n\
         # with defaults, ${{VARIABLES}}, flags and the environment applied. Secrets are masked.\n\
         # The daemon's socket (--socket, CLIBOT_SOCKET): {}\n\
         # The command prefix (--prefix): {prefix}\n",
        socket.display()
    );
    for (name, flag, set) in [
        (
            "telegram",
            "--telegram-token or TELEGRAM_TOKEN",
            o.telegram_token.is_some(),
        ),
        (
            "discord",
            "--discord-token or DISCORD_TOKEN",
            o.discord_token.is_some(),
        ),
    ] {
        if set {
            out.push_str(&format!("# [gateway.{name}] token: from {flag}\n"));
        }
    }
    let platforms = table
        .get("gateway")
        .and_then(toml::Value::as_table)
        .map_or(0, |g| g.values().filter(|v| v.is_table()).count());
    if platforms == 0 {
        out.push_str(
            "# No chat platform is configured: add [gateway.telegram] token = \"${TELEGRAM_TOKEN}\" (or [gateway.discord] token, [gateway.feishu] app_id and app_secret, or [gateway.slack] app_token and bot_token).\n",
        );
        return out;
    }
    out.push('\n');
    out.push_str(&toml::to_string(&table).unwrap_or_default());
    // Whatever a key is called, no secret leaves in full.
    for s in secrets.iter().filter(|s| s.chars().count() >= 4) {
        out = out.replace(s.as_str(), "***");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_masked_by_their_key_and_in_urls() {
        assert_eq!(
            mask("1234567890:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"),
            "12…aw (45 chars)"
        );
        assert_eq!(mask("short-secret"), "***");
        assert_eq!(mask(""), "");
        assert_eq!(
            mask_url("https://me:pw@proxy:8080/x"),
            "https://me:***@proxy:8080/x"
        );
        assert_eq!(mask_url("https://tok@proxy/"), "https://***@proxy/");
        assert_eq!(mask_url("https://proxy/a@b"), "https://proxy/a@b");
        assert_eq!(mask_url("not a url"), "not a url");
        for key in [
            "token",
            "app_secret",
            "api_key",
            "ApiKey",
            "password",
            "client_credentials",
        ] {
            assert!(is_secret_key(key), "{key}");
        }
        for key in ["api_url", "app_id", "policy"] {
            assert!(!is_secret_key(key), "{key}");
        }
        let mut t: toml::Table = toml::from_str(
            "[a.b]\napi_key = \"sk-0123456789abcdefghij\"\npasswords = [\"hunter2hunter2\"]\nname = \"x\"\n",
        )
        .expect("toml");
        mask_secrets(&mut t);
        let text = toml::to_string(&t).expect("toml");
        assert!(
            !text.contains("0123456789") && !text.contains("hunter2"),
            "{text}"
        );
        assert!(text.contains("name = \"x\""), "{text}");
    }

    #[test]
    fn the_effective_config_has_defaults_and_overrides_and_no_secret() {
        let token = "1234567890:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw";
        let c = parse(&format!(
            "[gateway.telegram]\ntoken = \"{token}\"\n[gateway.feishu]\napp_id = \"cli_a1\"\napp_secret = \"feishu-secret-value-123\"\n[gateway.slack]\napp_token = \"xapp-1-A1-2-slack-app-secret\"\nbot_token = \"xoxb-1-2-slack-bot-secret\"\n"
        ))
        .expect("parses");
        let o = Overrides {
            discord_token: Some("discord-token-from-the-environment".into()),
            ..Default::default()
        };
        let out = render_effective(
            &c,
            &o,
            Some(Path::new("/home/me/.config/clibot/config.toml")),
            Path::new("/run/clibot.sock"),
            "!!",
        );
        for secret in [
            token,
            "feishu-secret-value-123",
            "discord-token-from-the-environment",
            "xapp-1-A1-2-slack-app-secret",
            "xoxb-1-2-slack-bot-secret",
        ] {
            assert!(!out.contains(secret), "{out}");
            assert!(!out.contains(&secret[3..secret.len() - 3]), "{out}");
        }
        let parsed: toml::Table = toml::from_str(&out).expect("the output is TOML");
        let g = &parsed["gateway"];
        assert_eq!(
            g["telegram"]["api_url"].as_str(),
            Some(TELEGRAM_DEFAULT_URL)
        );
        assert_eq!(g["telegram"]["token"].as_str(), Some("12…aw (45 chars)"));
        assert_eq!(g["discord"]["api_url"].as_str(), Some(DISCORD_DEFAULT_URL));
        assert_eq!(g["feishu"]["app_id"].as_str(), Some("cli_a1"));
        assert_eq!(
            g["feishu"]["api_url"].as_str(),
            Some("https://open.feishu.cn")
        );
        assert_eq!(g["slack"]["api_url"].as_str(), Some(SLACK_DEFAULT_URL));
        assert!(out.contains("/home/me/.config/clibot/config.toml"), "{out}");
        assert!(
            out.contains("[gateway.discord] token: from --discord-token"),
            "{out}"
        );
        let none = render_effective(
            &GatewayConfig::default(),
            &Overrides::default(),
            None,
            Path::new("/s"),
            "!!",
        );
        assert!(none.contains("No chat platform is configured"), "{none}");
    }

    fn parse(text: &str) -> Result<GatewayConfig, ConfigError> {
        GatewayConfig::parse(text, Path::new("config.toml"))
    }

    #[test]
    fn every_platform_and_only_known_keys() {
        let c = parse(
            "[daemon]\nwhatever = 1\n[cli.x]\nargv = [\"${CLIBOT_SURELY_UNSET_DAEMON_VAR}\"]\n\
             [gateway.telegram]\ntoken = \"t\"\n[gateway.discord]\ntoken = \"d\"\napi_url = \"http://x\"\n\
             [gateway.feishu]\napp_id = \"cli_a\"\napp_secret = \"s\"\n",
        )
        .expect("parses");
        assert_eq!(c.telegram.as_ref().map(|t| t.token.as_str()), Some("t"));
        assert_eq!(
            c.discord.as_ref().and_then(|d| d.api_url.as_deref()),
            Some("http://x")
        );
        assert_eq!(
            c.feishu.as_ref().map(|f| f.api_url.as_str()),
            Some("https://open.feishu.cn")
        );
        let e = parse("[gateway.telegram]\ntokn = \"t\"\n").expect_err("typo");
        assert!(e.to_string().contains("tokn"), "{e}");
        let e = parse("[gateway.slack]\ntoken = \"t\"\n").expect_err("Slack has two tokens");
        assert!(e.to_string().contains("token"), "{e}");
        let e = parse("[gateway.matrix]\ntoken = \"t\"\n").expect_err("unknown platform");
        assert!(e.to_string().contains("matrix"), "{e}");
        let e = parse("[gateway.feishu]\napp_id = \"a\"\n").expect_err("no secret");
        assert!(e.to_string().contains("app_secret"), "{e}");
    }

    #[test]
    fn the_watchdog_bounds_are_durations() {
        let c =
            parse("[gateway]\nstall_after = \"3s\"\ndown_notice_after = \"0\"\n").expect("parses");
        assert_eq!(c.stall_after(), Ok(Duration::from_secs(3)));
        assert_eq!(c.down_notice_after(), Ok(Duration::ZERO));
        let d = GatewayConfig::default();
        assert_eq!(d.stall_after(), Ok(Duration::from_secs(90)));
        assert_eq!(d.down_notice_after(), Ok(Duration::from_secs(600)));
        let e = parse("[gateway]\nstall_after = \"soon\"\n").expect_err("not a duration");
        assert!(e.to_string().contains("stall_after"), "{e}");
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert!(parse_duration("10").is_err());
    }

    #[test]
    fn an_unset_variable_is_an_error_naming_it() {
        let e = parse("[gateway.telegram]\ntoken = \"${CLIBOT_SURELY_UNSET_TOKEN}\"\n")
            .expect_err("unset");
        let m = e.to_string();
        assert!(
            m.contains("CLIBOT_SURELY_UNSET_TOKEN") && m.contains("gateway.telegram.token"),
            "{m}"
        );
        assert_eq!(parse("").expect("empty"), GatewayConfig::default());
    }
}
