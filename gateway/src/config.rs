//! The gateway's part of the config file: `[gateway.telegram]`, `[gateway.discord]`,
//! `[gateway.feishu]`. Read by the daemon's rules (clibot-proto): the same default path
//! (`$XDG_CONFIG_HOME/clibot/config.toml`), `${NAME}` replaced by the environment variable and an
//! unset one an error, and an unknown key an error that names it. Sections other than
//! `[gateway]` belong to the daemon and are not looked at here.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// `[gateway]`.
#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GatewayConfig {
    pub telegram: Option<TokenPlatform>,
    pub discord: Option<TokenPlatform>,
    pub feishu: Option<FeishuConfig>,
}

/// `[gateway.telegram]` and `[gateway.discord]`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TokenPlatform {
    #[serde(default)]
    pub token: String,
    /// Another API base (a self-hosted Bot API server, a proxy, a test fake).
    pub api_url: Option<String>,
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
}

fn feishu_default_url() -> String {
    "https://open.feishu.cn".into()
}

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
                "[gateway]: {} (the platforms are telegram, discord and feishu)",
                e.message()
            ))
        })?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let e = parse("[gateway.slack]\ntoken = \"t\"\n").expect_err("unknown platform");
        assert!(e.to_string().contains("slack"), "{e}");
        let e = parse("[gateway.feishu]\napp_id = \"a\"\n").expect_err("no secret");
        assert!(e.to_string().contains("app_secret"), "{e}");
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
