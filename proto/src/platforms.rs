//! One row per chat platform: the facts the daemon (which `[access.NAME]` sections exist),
//! `clibotctl doctor` (where its API is, which keys its section takes) and the gateway (how
//! chats are told its name) all read.
//!
//! Why here: the daemon's list of platform names failed only at run time when a platform was
//! added to the gateway and not to it. A platform is now this row, its adapter in
//! `gateway/src/platforms/`, its fake in the tests, and its docs.

/// What clibot knows of one chat platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlatformRow {
    /// Its name: `[gateway.NAME]`, `[access.NAME]`, and the first part of `NAME:USER`.
    pub name: &'static str,
    /// How people call it, in messages.
    pub title: &'static str,
    /// Where its API is when `[gateway.NAME] api_url` does not say; empty: none (the console).
    pub api_url: &'static str,
    /// The keys `[gateway.NAME]` takes.
    pub gateway_keys: &'static [&'static str],
}

/// The platforms, in the order they are listed to people.
pub const PLATFORMS: &[PlatformRow] = &[
    PlatformRow {
        name: "telegram",
        title: "Telegram",
        api_url: "https://api.telegram.org",
        gateway_keys: &["token", "api_url", "default_chat", "topics"],
    },
    PlatformRow {
        name: "discord",
        title: "Discord",
        api_url: "https://discord.com",
        gateway_keys: &["token", "api_url", "default_chat", "topics"],
    },
    PlatformRow {
        name: "feishu",
        title: "Feishu",
        api_url: "https://open.feishu.cn",
        gateway_keys: &["app_id", "app_secret", "api_url", "default_chat", "topics"],
    },
    PlatformRow {
        name: "slack",
        title: "Slack",
        api_url: "https://slack.com/api",
        gateway_keys: &[
            "app_token",
            "bot_token",
            "api_url",
            "default_chat",
            "topics",
        ],
    },
    PlatformRow {
        name: "console",
        title: "the console",
        api_url: "",
        gateway_keys: &[],
    },
];

/// The row of platform `name`, if clibot knows it.
pub fn platform(name: &str) -> Option<&'static PlatformRow> {
    PLATFORMS.iter().find(|p| p.name == name)
}

/// The platforms' names, in order.
pub fn names() -> impl Iterator<Item = &'static str> {
    PLATFORMS.iter().map(|p| p.name)
}

/// The platforms' names as a sentence lists them: "telegram, discord, feishu or console".
pub fn listed() -> String {
    let names: Vec<&str> = names().collect();
    match names.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_platform_is_named_once_and_those_with_an_api_say_where() {
        let mut seen = std::collections::BTreeSet::new();
        for p in PLATFORMS {
            assert!(seen.insert(p.name), "{} twice", p.name);
            assert_eq!(p.api_url.is_empty(), p.gateway_keys.is_empty(), "{p:?}");
            assert!(p.api_url.is_empty() || p.api_url.starts_with("https://"));
        }
        assert_eq!(platform("feishu").map(|p| p.title), Some("Feishu"));
        assert!(platform("matrix").is_none());
        assert_eq!(listed(), "telegram, discord, feishu, slack or console");
    }
}
