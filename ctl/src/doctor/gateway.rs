//! The chat gateways: has each reported in and connected, and does `[gateway]` hold only the
//! keys the gateway accepts.

use clibot_proto::v1;

use super::report::{Check, Level, check};

/// One check per platform the gateway reported, or a warning that none did.
pub(super) fn gateway_check(s: &v1::StatusResponse, out: &mut Vec<Check>) {
    if s.gateways.is_empty() {
        out.push(check(
            "gateway",
            Level::Warn,
            "no gateway has reported: chat platforms are not connected",
            "configure [gateway.PLATFORM] and start clibot-gateway (e.g. `clibot-gateway --telegram &`; under systemd: systemctl --user enable --now clibot-gateway.service)",
        ));
        return;
    }
    for g in &s.gateways {
        let name = format!("gateway {}", g.platform);
        match g.state.as_str() {
            "connected" => out.push(check(
                name,
                Level::Ok,
                format!("connected (pid {})", g.pid),
                "",
            )),
            "connecting" => out.push(check(
                name,
                Level::Warn,
                "still connecting",
                "wait a few seconds and run doctor again",
            )),
            state => out.push(check(
                name,
                Level::Fail,
                if g.detail.is_empty() {
                    state.to_string()
                } else {
                    format!("{state}: {}", g.detail)
                },
                failure_fix(&g.platform, &g.detail),
            )),
        }
    }
}

/// What to do about a platform the gateway could not connect, from what it reported: a network
/// to fix is not a token to replace.
fn failure_fix(platform: &str, detail: &str) -> String {
    let log =
        "the gateway's own output says more (under systemd: journalctl --user -u clibot-gateway)";
    if detail.contains("cannot reach") {
        format!(
            "the gateway cannot reach {platform}'s API: check the network, a proxy, or [gateway.{platform}] api_url; {log}"
        )
    } else if detail.contains("token") {
        format!(
            "{platform} refused the bot token: put a valid one in [gateway.{platform}] token (or its environment variable) and restart clibot-gateway; {log}"
        )
    } else {
        format!("check [gateway.{platform}] and the network; {log}")
    }
}

/// The keys the gateway accepts under `[gateway]` (it refuses to start on any other).
pub(super) fn gateway_config_check(table: &toml::Table, out: &mut Vec<Check>) {
    let Some(gw) = table.get("gateway") else {
        return;
    };
    let mut unknown = Vec::new();
    match gw.as_table() {
        None => unknown.push("gateway (must be a table)".to_string()),
        Some(gw) => {
            for (platform, v) in gw {
                let keys: &[&str] = match platform.as_str() {
                    "telegram" | "discord" => &["token", "api_url"],
                    "feishu" => &["app_id", "app_secret", "api_url"],
                    _ => {
                        unknown.push(format!("gateway.{platform}"));
                        continue;
                    }
                };
                match v.as_table() {
                    None => unknown.push(format!("gateway.{platform} (must be a table)")),
                    Some(t) => unknown.extend(
                        t.keys()
                            .filter(|k| !keys.contains(&k.as_str()))
                            .map(|k| format!("gateway.{platform}.{k}")),
                    ),
                }
            }
        }
    }
    if unknown.is_empty() {
        out.push(check(
            "gateway config",
            Level::Ok,
            "[gateway] has only known keys",
            "",
        ));
    } else {
        out.push(check(
            "gateway config",
            Level::Fail,
            format!("unknown keys: {}", unknown.join(", ")),
            "the gateway refuses to start on them: telegram/discord take token, api_url; feishu takes app_id, app_secret, api_url",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreachable_api_is_not_a_bad_token() {
        let net = failure_fix(
            "telegram",
            "retrying: cannot reach Telegram at http://x: the connection was refused",
        );
        assert!(
            net.contains("api_url") && !net.contains("valid one"),
            "{net}"
        );
        let tok = failure_fix(
            "telegram",
            "stopped: Telegram did not accept the bot token (getMe): Unauthorized",
        );
        assert!(tok.contains("valid one"), "{tok}");
        assert!(!net.starts_with("systemctl") && net.contains("gateway's own output"));
    }

    #[test]
    fn gateway_keys() {
        let t: toml::Table = "[gateway.telegram]\ntoken = \"x\"\ntokn = \"y\"\n[gateway.feishu]\napp_id = \"a\"\napp_secret = \"b\"\n[gateway.slack]\n"
            .parse()
            .expect("toml");
        let mut out = Vec::new();
        gateway_config_check(&t, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].level, Level::Fail);
        assert!(
            out[0].detail.contains("gateway.telegram.tokn"),
            "{}",
            out[0].detail
        );
        assert!(out[0].detail.contains("gateway.slack"), "{}", out[0].detail);
        assert!(!out[0].detail.contains("feishu"), "{}", out[0].detail);
    }
}
