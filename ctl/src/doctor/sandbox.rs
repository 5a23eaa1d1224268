//! `doctor`'s look at the jail non-admins' sessions run in: is it off anywhere, and does
//! bubblewrap work on this machine (it needs unprivileged user namespaces)?

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
}
