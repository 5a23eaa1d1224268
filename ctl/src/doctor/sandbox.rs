//! `doctor`'s look at the jail non-admins' sessions run in: is it off anywhere, does
//! bubblewrap work on this machine (it needs unprivileged user namespaces), which configured
//! member roots are not used, and what of the machine the jail's walls do not cover (the
//! docker group, a display).

use super::report::{Check, Level, check};

/// Platforms whose `[access.PLATFORM] sandbox` is "off".
fn unjailed(table: Option<&toml::Table>) -> Vec<String> {
    let Some(access) = table
        .and_then(|t| t.get("access"))
        .and_then(|a| a.as_table())
    else {
        return Vec::new();
    };
    access
        .iter()
        .filter(|(_, v)| v.get("sandbox").and_then(|s| s.as_str()) == Some("off"))
        .map(|(k, _)| k.clone())
        .collect()
}

/// The checks: one per platform with the jail off (a warning), and whether bubblewrap runs.
pub(super) async fn sandbox_checks(table: Option<&toml::Table>, out: &mut Vec<Check>) {
    for p in unjailed(table) {
        out.push(check(
            "sandbox",
            Level::Warn,
            format!("[access.{p}] sandbox = \"off\": non-admins' sessions run unjailed, and a process in one can reach everything you can"),
            format!("remove `sandbox = \"off\"` from [access.{p}] (install bubblewrap), then `clibotctl reload`"),
        ));
    }
    let run = tokio::process::Command::new("bwrap")
        .args([
            "--ro-bind",
            "/",
            "/",
            "--unshare-pid",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "true",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output();
    match tokio::time::timeout(std::time::Duration::from_secs(5), run).await {
        Ok(Ok(o)) if o.status.success() => out.push(check(
            "sandbox",
            Level::Ok,
            "bubblewrap works: non-admins' sessions run jailed",
            "",
        )),
        Ok(Ok(o)) => out.push(check(
            "sandbox",
            Level::Fail,
            format!(
                "bubblewrap is installed but cannot make a jail: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            "enable unprivileged user namespaces (e.g. `sysctl kernel.unprivileged_userns_clone=1`; on Ubuntu allow bwrap in AppArmor), or non-admins cannot start sessions",
        )),
        Ok(Err(_)) => out.push(check(
            "sandbox",
            Level::Warn,
            "bubblewrap is not installed: non-admins (chat users who are not admins) cannot start sessions",
            "install the package `bubblewrap` (sudo apt-get install bubblewrap)",
        )),
        Err(_) => out.push(check(
            "sandbox",
            Level::Warn,
            "bubblewrap did not finish a trial jail within 5 s",
            "try `bwrap --ro-bind / / true` by hand",
        )),
    }
}

/// What of the machine a jail's walls do not cover, for a user to know: membership of the
/// `docker` group (root through the engine's socket for any process that reaches it — jails
/// do not, your unjailed sessions and admins' do), and a display whose abstract socket jails
/// that share the network can reach.
pub(super) fn escape_checks(table: Option<&toml::Table>, out: &mut Vec<Check>) {
    if in_group("docker") {
        out.push(check(
            "sandbox",
            Level::Warn,
            "you are in the docker group: any process of yours that reaches the engine's socket is root on this machine (jails do not show it; your own and admins' sessions do)",
            "use rootless Docker, or leave the docker group (`sudo gpasswd -d $USER docker`) and use sudo",
        ));
    }
    let display = std::env::var_os("DISPLAY").is_some_and(|d| !d.is_empty())
        || std::fs::read_dir("/tmp/.X11-unix").is_ok_and(|d| d.flatten().next().is_some());
    let shared = shared_network(table);
    if display && !shared.is_empty() {
        out.push(check(
            "sandbox",
            Level::Warn,
            format!(
                "a display server runs here, and jails that share the network ({}) can reach its abstract socket (they lack ~/.Xauthority, so only a server that lets local users in without it — `xhost +local:` — is open to them)",
                shared.join(", ")
            ),
            "set [access.PLATFORM] network = \"off\" for programs that need no network, or run the X server with `-nolisten local`",
        ));
    }
}

/// Platforms whose non-admins' jails share the machine's network for some programs.
fn shared_network(table: Option<&toml::Table>) -> Vec<String> {
    let Some(access) = table
        .and_then(|t| t.get("access"))
        .and_then(|a| a.as_table())
    else {
        return Vec::new();
    };
    access
        .iter()
        .filter(|(_, v)| v.get("network").and_then(|s| s.as_str()) != Some("off"))
        .map(|(k, _)| k.clone())
        .collect()
}

/// Whether this user is in the group named `name` (from `/etc/group`).
fn in_group(name: &str) -> bool {
    let Ok(groups) = rustix::process::getgroups() else {
        return false;
    };
    let mut mine: Vec<u32> = groups.iter().map(|g| g.as_raw()).collect();
    mine.push(rustix::process::getgid().as_raw());
    std::fs::read_to_string("/etc/group").is_ok_and(|text| {
        text.lines().any(|l| {
            let mut f = l.split(':');
            let (n, gid) = (f.next(), f.nth(1));
            n == Some(name)
                && gid
                    .and_then(|g| g.parse::<u32>().ok())
                    .is_some_and(|g| mine.contains(&g))
        })
    })
}

/// Configured member roots a member's session will not use, and why.
pub(super) fn member_root_checks(table: Option<&toml::Table>, out: &mut Vec<Check>) {
    let Some(access) = table
        .and_then(|t| t.get("access"))
        .and_then(|a| a.as_table())
    else {
        return;
    };
    let home = directories::BaseDirs::new().map(|b| b.home_dir().to_path_buf());
    let Some(home) = home else { return };
    let mut owner = vec![];
    if let Some(b) = directories::BaseDirs::new() {
        owner.push(b.config_dir().join("clibot"));
        owner.push(b.home_dir().join(".local/state/clibot"));
    }
    for (platform, v) in access {
        let Some(roots) = v.get("member_roots").and_then(|r| r.as_array()) else {
            continue;
        };
        for r in roots.iter().filter_map(|r| r.as_str()) {
            let path = match r.strip_prefix("~") {
                Some(rest) => home.join(rest.trim_start_matches('/')),
                None => std::path::PathBuf::from(r),
            };
            let path = path.canonicalize().unwrap_or(path);
            if let Some(why) = clibot_proto::members::unfit_root(&path, &home, &owner) {
                out.push(check(
                    "sandbox",
                    Level::Warn,
                    format!("[access.{platform}] member_roots: {why}; members' sessions do not use it"),
                    "choose a directory of its own for members (a folder such as /srv/members), or leave member_roots unset: each member then gets a workspace under clibot's data directory",
                ));
            }
        }
    }
}

/// Each configured CLI run once in the jail a non-admin's session gets (by the daemon, as a
/// session would be): a CLI installed where the jail hides it, or needing what it hides, is
/// named with what it printed there.
pub(super) async fn jail_run_checks(c: &mut clibot_proto::Client, out: &mut Vec<Check>) {
    let r = match c
        .check_jail(clibot_proto::v1::CheckJailRequest::default())
        .await
    {
        Ok(r) => r.into_inner(),
        Err(s) => {
            out.push(check(
                "CLIs in the jail",
                Level::Warn,
                format!("the daemon did not check them: {}", s.message()),
                "upgrade and restart clibotd (systemctl --user restart clibotd), then run doctor again",
            ));
            return;
        }
    };
    if r.checks.is_empty() {
        out.push(check(
            "CLIs in the jail",
            Level::Ok,
            format!("nothing to check: {}", r.skipped),
            "",
        ));
        return;
    }
    use clibot_proto::v1::JailVerdict;
    for j in &r.checks {
        let name = format!("{} in {}'s jail", j.cli, j.platform);
        match JailVerdict::try_from(j.verdict) {
            Ok(JailVerdict::JailRuns) => {
                out.push(check(name, Level::Ok, "runs (`--version` inside the jail)", ""))
            }
            Ok(JailVerdict::JailFails) => out.push(check(
                name,
                Level::Warn,
                format!("a non-admin's session of it would not start: {}", j.why),
                format!(
                    "show its installation to the jail with [access.{}] jail_read = [\"DIR\"], or install it outside the home directory (e.g. npm's prefix in /usr/local); admins' sessions are not jailed",
                    j.platform
                ),
            )),
            _ => out.push(check(
                name,
                Level::Ok,
                "started in the jail (it does not answer `--version`, so whether it runs is not known)",
                "",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platforms_with_the_jail_off_are_found() {
        let t: toml::Table = toml::from_str(
            "[access.telegram]\nsandbox = \"off\"\n[access.discord]\nsandbox = \"bwrap\"\n",
        )
        .expect("toml");
        assert_eq!(unjailed(Some(&t)), vec!["telegram".to_string()]);
        assert!(unjailed(None).is_empty());
    }

    #[test]
    fn platforms_whose_jails_share_the_network_are_found() {
        let t: toml::Table =
            toml::from_str("[access.telegram]\nnetwork = \"off\"\n[access.discord]\nallow = []\n")
                .expect("toml");
        assert_eq!(shared_network(Some(&t)), vec!["discord".to_string()]);
    }

    #[test]
    fn a_member_root_in_the_home_is_reported() {
        let t: toml::Table =
            toml::from_str("[access.telegram]\nmember_roots = [\"~\", \"/srv/members\"]\n")
                .expect("toml");
        let mut out = Vec::new();
        member_root_checks(Some(&t), &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(out[0].detail.contains("home directory"), "{out:?}");
    }
}
