//! The platforms the gateway serves, one row each: how its settings are read from the flags and
//! the config, what in them is secret, and how it connects. `main.rs` knows no platform by
//! name: it asks every row, serves what they plan and starts each through its row.
//!
//! Why a registry: a platform used to be an arm in five `match`es of `main.rs`, and the list of
//! names the daemon knows lived elsewhere. A platform is now its adapter in `platforms/`, its row
//! here, its flags, and its row in `clibot_proto::platforms` (checked against these by a test).

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::mpsc;

use crate::config::{FeishuConfig, GatewayConfig, SlackConfig, TokenPlatform};
use crate::platforms::{Inbound, Platform, Receiving, console, discord, feishu, slack, telegram};

/// What the command line says of one platform.
#[derive(Debug, Default, Clone, Copy)]
pub struct Flags<'a> {
    /// `--NAME`: serve it (and, with any such flag, only the platforms flagged).
    pub serve: bool,
    /// `--NAME-token`, or its environment variable.
    pub token: Option<&'a str>,
    /// `--NAME-api-url`.
    pub api_url: Option<&'a str>,
}

/// What every platform's connection is made with.
pub struct Start<'a> {
    /// What marks a gateway command (`!!`).
    pub prefix: &'a str,
    /// Where the one-poller-per-bot locks are.
    pub lock_dir: &'a Path,
    /// The home machine's daemon.
    pub socket: &'a clibot_proto::Target,
    pub recv: &'a Receiving,
}

/// A connected platform and the messages it receives.
pub type Started = (Arc<dyn Platform>, mpsc::Receiver<Inbound>);

/// How a planned platform connects, with its settings: called again on every reconnection.
#[async_trait]
pub trait Connect: Send + Sync {
    async fn start(&self, at: &Start<'_>) -> anyhow::Result<Started>;
}

/// A platform to serve, with what it needs.
#[derive(Clone)]
pub struct Spec {
    /// Its name (`telegram`): `[gateway.NAME]`, health, logs.
    pub name: &'static str,
    /// `[gateway.NAME] default_chat`, when set.
    pub default_chat: Option<String>,
    /// What it holds that must never reach a chat (any platform's).
    pub secrets: Vec<String>,
    /// The terminal's own chat: the gateway ends with its input, and starts a daemon when
    /// none answers (as `clibotctl` does).
    pub console: bool,
    pub connect: Arc<dyn Connect>,
}

/// One platform the gateway can serve.
pub struct Row {
    pub name: &'static str,
    /// Its settings, from its flags and `[gateway.NAME]`. `Ok(None)`: neither configures it.
    /// An error says what to set, when it is configured or asked for and cannot be used.
    pub plan: fn(Flags<'_>, &GatewayConfig) -> Result<Option<Spec>, String>,
}

/// Every platform, in the order they are started.
pub const ROWS: &[Row] = &[
    Row {
        name: "console",
        plan: plan_console,
    },
    Row {
        name: "telegram",
        plan: plan_telegram,
    },
    Row {
        name: "discord",
        plan: plan_discord,
    },
    Row {
        name: "feishu",
        plan: plan_feishu,
    },
    Row {
        name: "slack",
        plan: plan_slack,
    },
];

/// The platforms to serve: those flagged when any is (`--telegram`, `--console`, ...), else
/// every one configured. `flags` gives each platform's flags by name.
pub fn plan<'a>(
    flags: impl Fn(&str) -> Flags<'a>,
    config: &GatewayConfig,
) -> Result<Vec<Spec>, String> {
    let chosen = ROWS.iter().any(|r| flags(r.name).serve);
    let mut specs = Vec::new();
    for row in ROWS {
        let f = flags(row.name);
        if chosen && !f.serve {
            continue;
        }
        specs.extend((row.plan)(f, config)?);
    }
    Ok(specs)
}

/// The console: only when asked for.
fn plan_console(flags: Flags<'_>, _: &GatewayConfig) -> Result<Option<Spec>, String> {
    struct Console;
    #[async_trait]
    impl Connect for Console {
        async fn start(&self, _: &Start<'_>) -> anyhow::Result<Started> {
            let (c, rx) = console::Console::start();
            Ok((Arc::new(c), rx))
        }
    }
    Ok(flags.serve.then(|| Spec {
        name: "console",
        default_chat: None,
        secrets: vec![],
        console: true,
        connect: Arc::new(Console),
    }))
}

/// A platform reached with one bot token (Telegram, Discord): its settings, when its flag,
/// its token or its section says to serve it.
struct TokenSettings {
    token: String,
    api_url: Option<String>,
    topics: bool,
}

fn plan_token(
    name: &'static str,
    flags: Flags<'_>,
    conf: &Option<TokenPlatform>,
    connect: fn(TokenSettings) -> Arc<dyn Connect>,
) -> Result<Option<Spec>, String> {
    if !(flags.serve || conf.is_some() || flags.token.is_some()) {
        return Ok(None);
    }
    let token = flags
        .token
        .map(str::to_string)
        .or_else(|| conf.as_ref().map(|c| c.token.clone()))
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            format!(
                "no {name} bot token: pass --{name}-token, export {}_TOKEN, or set [gateway.{name}] token",
                name.to_uppercase()
            )
        })?;
    let settings = TokenSettings {
        token: token.clone(),
        api_url: flags
            .api_url
            .map(str::to_string)
            .or_else(|| conf.as_ref().and_then(|c| c.api_url.clone())),
        topics: conf.as_ref().is_some_and(|c| c.topics),
    };
    Ok(Some(Spec {
        name,
        default_chat: default_chat(conf.as_ref().and_then(|c| c.default_chat.clone())),
        secrets: vec![token],
        console: false,
        connect: connect(settings),
    }))
}

fn plan_telegram(flags: Flags<'_>, config: &GatewayConfig) -> Result<Option<Spec>, String> {
    struct Telegram(TokenSettings);
    #[async_trait]
    impl Connect for Telegram {
        async fn start(&self, at: &Start<'_>) -> anyhow::Result<Started> {
            let s = &self.0;
            let (t, rx) = telegram::Telegram::start(
                &s.token,
                s.api_url.as_deref(),
                s.topics,
                at.prefix,
                at.lock_dir,
                at.recv,
            )
            .await?;
            Ok((Arc::new(t), rx))
        }
    }
    plan_token("telegram", flags, &config.telegram, |s| {
        Arc::new(Telegram(s))
    })
}

fn plan_discord(flags: Flags<'_>, config: &GatewayConfig) -> Result<Option<Spec>, String> {
    struct Discord(TokenSettings);
    #[async_trait]
    impl Connect for Discord {
        async fn start(&self, at: &Start<'_>) -> anyhow::Result<Started> {
            let s = &self.0;
            let (d, rx) = discord::Discord::start(
                &s.token,
                s.api_url.as_deref(),
                s.topics,
                at.prefix,
                at.lock_dir,
                at.socket,
                at.recv,
            )
            .await?;
            Ok((Arc::new(d), rx))
        }
    }
    plan_token("discord", flags, &config.discord, |s| Arc::new(Discord(s)))
}

/// Feishu / Lark: from `[gateway.feishu]` only (its app id and secret have no flags).
fn plan_feishu(flags: Flags<'_>, config: &GatewayConfig) -> Result<Option<Spec>, String> {
    struct Feishu(FeishuConfig);
    #[async_trait]
    impl Connect for Feishu {
        async fn start(&self, at: &Start<'_>) -> anyhow::Result<Started> {
            let f = &self.0;
            let settings = feishu::Settings {
                app_id: &f.app_id,
                app_secret: &f.app_secret,
                api_url: &f.api_url,
                topics: f.topics,
            };
            let (p, rx) = feishu::start(&settings, at.prefix, at.lock_dir, at.recv).await?;
            Ok((Arc::new(p), rx))
        }
    }
    let f = match (&config.feishu, flags.serve) {
        (Some(f), _) => f.clone(),
        (None, true) => {
            return Err(
                "--feishu needs [gateway.feishu] app_id and app_secret in the config file".into(),
            );
        }
        (None, false) => return Ok(None),
    };
    Ok(Some(Spec {
        name: "feishu",
        default_chat: default_chat(f.default_chat.clone()),
        secrets: vec![f.app_secret.clone()],
        console: false,
        connect: Arc::new(Feishu(f)),
    }))
}

/// Slack: from `[gateway.slack]` only (its two tokens have no flags).
fn plan_slack(flags: Flags<'_>, config: &GatewayConfig) -> Result<Option<Spec>, String> {
    struct Slack(SlackConfig);
    #[async_trait]
    impl Connect for Slack {
        async fn start(&self, at: &Start<'_>) -> anyhow::Result<Started> {
            let c = &self.0;
            let settings = slack::Settings {
                app_token: &c.app_token,
                bot_token: &c.bot_token,
                api_url: &c.api_url,
                topics: c.topics,
            };
            let (p, rx) = slack::start(&settings, at.prefix, at.lock_dir, at.recv).await?;
            Ok((Arc::new(p), rx))
        }
    }
    let c = match (&config.slack, flags.serve) {
        (Some(c), _) => c.clone(),
        (None, true) => {
            return Err(
                "--slack needs [gateway.slack] app_token (xapp-…) and bot_token (xoxb-…) in the config file".into(),
            );
        }
        (None, false) => return Ok(None),
    };
    Ok(Some(Spec {
        name: "slack",
        default_chat: default_chat(c.default_chat.clone()),
        secrets: vec![c.app_token.clone(), c.bot_token.clone()],
        console: false,
        connect: Arc::new(Slack(c)),
    }))
}

/// A default chat that says something.
fn default_chat(chat: Option<String>) -> Option<String> {
    chat.filter(|c| !c.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every platform the shared table names is served here, and only those: the daemon's
    /// `[access.NAME]` check and `clibotctl doctor` read that table.
    #[test]
    fn the_registry_and_the_shared_table_name_the_same_platforms() {
        let mut here: Vec<&str> = ROWS.iter().map(|r| r.name).collect();
        let mut shared: Vec<&str> = clibot_proto::platforms::names().collect();
        here.sort_unstable();
        shared.sort_unstable();
        assert_eq!(here, shared);
    }

    fn config(text: &str) -> GatewayConfig {
        GatewayConfig::parse(text, Path::new("test.toml")).expect("config")
    }

    fn names(specs: &[Spec]) -> Vec<&'static str> {
        specs.iter().map(|s| s.name).collect()
    }

    /// Without a flag every configured platform is served; with one, only those flagged; a
    /// flagged platform without what it needs says what to set.
    #[test]
    fn flags_choose_and_the_config_fills_in() {
        let c = config(
            "[gateway.telegram]\ntoken = \"t1\"\ndefault_chat = \" \"\n[gateway.feishu]\napp_id = \"a\"\napp_secret = \"s\"\n",
        );
        let none = |_: &str| Flags::default();
        let specs = plan(none, &c).expect("plan");
        assert_eq!(names(&specs), ["telegram", "feishu"]);
        assert_eq!(specs[0].secrets, ["t1"]);
        assert_eq!(specs[0].default_chat, None, "a blank default chat is none");
        assert_eq!(specs[1].secrets, ["s"]);

        let only_console = |n: &str| Flags {
            serve: n == "console",
            ..Flags::default()
        };
        let specs = plan(only_console, &c).expect("plan");
        assert_eq!(names(&specs), ["console"]);
        assert!(specs[0].console);

        let discord = |n: &str| Flags {
            serve: n == "discord",
            ..Flags::default()
        };
        let e = plan(discord, &c).err().expect("no discord token");
        assert!(
            e.contains("--discord-token") && e.contains("DISCORD_TOKEN"),
            "{e}"
        );

        let feishu = |n: &str| Flags {
            serve: n == "feishu",
            ..Flags::default()
        };
        let e = plan(feishu, &config("")).err().expect("no feishu section");
        assert!(e.contains("[gateway.feishu]"), "{e}");
        let slack = |n: &str| Flags {
            serve: n == "slack",
            ..Flags::default()
        };
        let e = plan(slack, &config("")).err().expect("no slack section");
        assert!(e.contains("[gateway.slack]"), "{e}");
        let specs = plan(
            slack,
            &config("[gateway.slack]\napp_token = \"xapp-a\"\nbot_token = \"xoxb-b\"\n"),
        )
        .expect("plan");
        assert_eq!(names(&specs), ["slack"]);
        assert_eq!(specs[0].secrets, ["xapp-a", "xoxb-b"]);

        // A token in the environment alone serves its platform.
        let token = |n: &str| Flags {
            token: (n == "discord").then_some("d1"),
            ..Flags::default()
        };
        let specs = plan(token, &config("")).expect("plan");
        assert_eq!(names(&specs), ["discord"]);
        assert_eq!(specs[0].secrets, ["d1"]);
    }
}
