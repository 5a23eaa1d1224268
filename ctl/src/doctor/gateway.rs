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
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    for g in &s.gateways {
        let name = format!("gateway {}", g.platform);
        if g.stalled {
            let since = if g.last_progress_ms > 0 {
                format!(
                    "its last completed cycle was {}s ago",
                    (now - g.last_progress_ms).max(0) / 1000
                )
            } else {
                "it has not completed a cycle yet".to_string()
            };
            out.push(check(
                name,
                Level::Fail,
                format!(
                    "stalled: no receive cycle within {}s ({since}); restarted {} time{}",
                    g.stall_after_ms / 1000,
                    g.restarts,
                    if g.restarts == 1 { "" } else { "s" }
                ),
                failure_fix(&g.platform, &g.detail),
            ));
            continue;
        }
        match g.state.as_str() {
            "connected" if g.restarts > 0 => out.push(check(
                name,
                Level::Warn,
                format!(
                    "connected (pid {}), but its receive loop stalled and was restarted {} time{} (the last {}s ago)",
                    g.pid,
                    g.restarts,
                    if g.restarts == 1 { "" } else { "s" },
                    (now - g.last_restart_ms).max(0) / 1000
                ),
                failure_fix(&g.platform, "stalled"),
            )),
            "connected" => out.push(check(
                name,
                Level::Ok,
                format!("connected (pid {})", g.pid),
                "",
            )),
            // Still trying, but its last try failed for a reason (a refused token, no
            // network): waiting will not fix that.
            "connecting" if !g.detail.is_empty() => out.push(check(
                name,
                if g.detail.contains("token") {
                    Level::Fail
                } else {
                    Level::Warn
                },
                format!("not connected: {}", g.detail),
                failure_fix(&g.platform, &g.detail),
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
    } else if detail.contains("stalled") {
        format!(
            "{platform}'s API or clibotd answered too slowly for the gateway's receive loop: check the network and `clibotctl status`; a loop that stalls again is restarted again; {log}"
        )
    } else if detail.contains("token") {
        format!(
            "{platform} refused the bot token: put a valid one in [gateway.{platform}] token (or its environment variable) and restart clibot-gateway; {log}"
        )
    } else {
        format!("check [gateway.{platform}] and the network; {log}")
    }
}

/// The host and port of an API base URL (`https://host[:port]/...`).
fn host_port(url: &str) -> Option<(String, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split('/').next()?;
    let default = if scheme == "https" { 443 } else { 80 };
    match authority.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() => Some((h.to_string(), p.parse().ok()?)),
        _ if !authority.is_empty() => Some((authority.to_string(), default)),
        _ => None,
    }
}

/// Can this machine reach each configured platform's API? Read from the config file, with or
/// without a gateway running: a name that does not resolve or a port that refuses is a network
/// (or `api_url`) to fix, which no new token would. The token itself only the gateway checks.
pub(super) async fn api_reach_check(config: &toml::Table, out: &mut Vec<Check>) {
    let Some(gw) = config.get("gateway").and_then(|g| g.as_table()) else {
        return;
    };
    for (platform, default) in clibot_proto::platforms::PLATFORMS
        .iter()
        .filter(|p| !p.api_url.is_empty())
        .map(|p| (p.name, p.api_url))
    {
        let Some(section) = gw.get(platform).and_then(|s| s.as_table()) else {
            continue;
        };
        let url = section
            .get("api_url")
            .and_then(|u| u.as_str())
            .unwrap_or(default);
        let name = format!("gateway {platform} api");
        let fix = format!(
            "check the network and any proxy, or [gateway.{platform}] api_url; the gateway cannot work until {url} answers"
        );
        let Some((host, port)) = host_port(url) else {
            out.push(check(
                name,
                Level::Fail,
                format!("api_url {url:?} is not a URL"),
                fix,
            ));
            continue;
        };
        let wait = std::time::Duration::from_secs(3);
        let addrs = match tokio::time::timeout(wait, tokio::net::lookup_host((host.as_str(), port)))
            .await
        {
            Ok(Ok(a)) => a.collect::<Vec<_>>(),
            Ok(Err(e)) => {
                out.push(check(
                    name,
                    Level::Fail,
                    format!("{url}: {host} does not resolve (DNS: {e})"),
                    fix,
                ));
                continue;
            }
            Err(_) => {
                out.push(check(
                    name,
                    Level::Fail,
                    format!("{url}: resolving {host} timed out (DNS)"),
                    fix,
                ));
                continue;
            }
        };
        let Some(addr) = addrs.first() else {
            out.push(check(
                name,
                Level::Fail,
                format!("{url}: {host} has no address (DNS)"),
                fix,
            ));
            continue;
        };
        let connected = tokio::time::timeout(wait, tokio::net::TcpStream::connect(addr))
            .await
            // Closed at once: a server that serves one connection at a time must be free for
            // the TLS probe below.
            .map(|r| r.map(drop));
        match connected {
            // TCP answers; whether TLS does is for a client that speaks it: the gateway's.
            Ok(Ok(())) if url.starts_with("https://") => match tls_probe(url).await {
                Ok(()) => out.push(check(
                    name,
                    Level::Ok,
                    format!("{url} reachable ({addr})"),
                    "",
                )),
                Err(why) => out.push(check(name, Level::Fail, format!("{url}: {why}"), fix)),
            },
            Ok(Ok(())) => out.push(check(
                name,
                Level::Ok,
                format!("{url} reachable ({addr})"),
                "",
            )),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => out.push(check(
                name,
                Level::Fail,
                format!("{url}: the connection was refused ({addr}): nothing listens there"),
                fix,
            )),
            Ok(Err(e)) => out.push(check(
                name,
                Level::Fail,
                format!("{url}: cannot connect ({addr}: {e})"),
                fix,
            )),
            Err(_) => out.push(check(
                name,
                Level::Fail,
                format!("{url}: no answer from {addr} within 3s"),
                fix,
            )),
        }
    }
}

/// One HTTPS request through `clibot-gateway --probe-api` (beside this binary, or on PATH),
/// which uses the very TLS client the platforms do. No gateway installed: not checked.
async fn tls_probe(url: &str) -> Result<(), String> {
    let gateway = crate::connect::sibling("clibot-gateway");
    let run = tokio::process::Command::new(&gateway)
        .args(["--probe-api", url])
        .output();
    match tokio::time::timeout(std::time::Duration::from_secs(10), run).await {
        Ok(Ok(out)) if out.status.success() => Ok(()),
        Ok(Ok(out)) => Err(String::from_utf8_lossy(&out.stdout).trim().to_string()),
        // No gateway to ask, or it hung: the TCP check above stands.
        _ => Ok(()),
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
                    // `[gateway]`'s own keys, not platforms.
                    "stall_after" | "down_notice_after" => {
                        if !v.is_str() {
                            unknown.push(format!(
                                "gateway.{platform} (must be a duration such as \"90s\")"
                            ));
                        }
                        continue;
                    }
                    "max_file_bytes" => {
                        if v.as_integer().is_none_or(|n| n <= 0) {
                            unknown.push(
                                "gateway.max_file_bytes (must be a number of bytes)".to_string(),
                            );
                        }
                        continue;
                    }
                    "stream" => {
                        if v.as_bool().is_none() {
                            unknown.push("gateway.stream (must be true or false)".to_string());
                        }
                        continue;
                    }
                    "transcribe" => &["command", "url", "model", "api_key"],
                    "machines" => {
                        const KEYS: &[&str] = &[
                            "name",
                            "socket",
                            "ssh",
                            "ssh_options",
                            "remote_clibotctl",
                            "command",
                            "home",
                        ];
                        match v.as_array() {
                            None => unknown.push(
                                "gateway.machines (must be [[gateway.machines]] entries)".into(),
                            ),
                            Some(list) => {
                                for m in list {
                                    match m.as_table() {
                                        None => unknown
                                            .push("gateway.machines (each entry a table)".into()),
                                        Some(t) => unknown.extend(
                                            t.keys()
                                                .filter(|k| !KEYS.contains(&k.as_str()))
                                                .map(|k| format!("gateway.machines.{k}")),
                                        ),
                                    }
                                }
                            }
                        }
                        continue;
                    }
                    // A platform's section takes the keys its row lists.
                    p => match clibot_proto::platforms::platform(p) {
                        Some(row) if !row.gateway_keys.is_empty() => row.gateway_keys,
                        _ => {
                            unknown.push(format!("gateway.{platform}"));
                            continue;
                        }
                    },
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
            format!(
                "the gateway refuses to start on them: [gateway] takes stall_after, down_notice_after, stream, max_file_bytes, machines (name, socket, ssh, ssh_options, remote_clibotctl, command, home); transcribe takes command, url, model, api_key; {}",
                platform_keys()
            ),
        ));
    }
}

/// What each platform's section takes, from the platforms' table: "telegram takes token, …".
fn platform_keys() -> String {
    clibot_proto::platforms::PLATFORMS
        .iter()
        .filter(|p| !p.gateway_keys.is_empty())
        .map(|p| format!("{} takes {}", p.name, p.gateway_keys.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_urls_give_host_and_port() {
        assert_eq!(
            host_port("https://api.telegram.org"),
            Some(("api.telegram.org".into(), 443))
        );
        assert_eq!(
            host_port("http://127.0.0.1:8081/bot"),
            Some(("127.0.0.1".into(), 8081))
        );
        assert_eq!(host_port("not a url"), None);
    }

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
        let t: toml::Table = "[gateway]\nstall_after = \"90s\"\ndown_notice_after = \"10m\"\n[gateway.telegram]\ntoken = \"x\"\ndefault_chat = \"1\"\ntopics = true\ntokn = \"y\"\n[[gateway.machines]]\nname = \"b\"\nssh = \"me@b\"\nhome = true\n[gateway.feishu]\napp_id = \"a\"\napp_secret = \"b\"\n[gateway.matrix]\n[gateway.slack]\napp_token = \"a\"\nbot_token = \"b\"\n"
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
        assert!(
            out[0].detail.contains("gateway.matrix"),
            "{}",
            out[0].detail
        );
        assert!(!out[0].detail.contains("slack"), "{}", out[0].detail);
        assert!(
            out[0].fix.contains("slack takes app_token"),
            "{}",
            out[0].fix
        );
        assert!(!out[0].detail.contains("feishu"), "{}", out[0].detail);
        for known in ["stall_after", "down_notice_after", "default_chat", "topics"] {
            assert!(!out[0].detail.contains(known), "{}", out[0].detail);
        }
    }
}
