//! The CLIs sessions run: is each configured or built-in CLI's program on the PATH new sessions
//! get, what version it reports, and does the daemon answer the hooks they call.

use std::collections::BTreeMap;
use std::path::Path;

use clibot_proto::v1;
use clibot_proto::versions::{Fit, Range, from_output};

use super::probe::{PROBE, find_program, probe};
use super::report::{Check, Level, check};

/// The versions clibot's end-to-end tests run each AI CLI at (`tests/cli-versions.toml`).
const TESTED: &str = include_str!("../../../tests/cli-versions.toml");

/// The built-in pattern packs, for the versions each was made for.
const PACKS: &str = include_str!("../../../daemon/src/cli/patterns.toml");

/// The programs the built-in CLIs run: each AI CLI's row's, and the user's shell.
fn builtin_program(name: &str) -> Option<String> {
    if let Some(c) = clibot_proto::clis::cli(name) {
        return c.argv.first().map(|p| p.to_string());
    }
    (name == "shell").then(|| {
        std::env::var("SHELL")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "/bin/sh".into())
    })
}

/// The PATH new sessions get: the tmux server's global environment, else this one's.
async fn session_path(status: Option<&v1::StatusResponse>) -> (String, &'static str) {
    let args: Vec<String> = status
        .map(|s| s.tmux_args.clone())
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| vec!["-L".into(), "clibot".into()]);
    let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
    all.extend(["show-environment", "-g", "PATH"]);
    if let Ok(line) = probe("tmux", &all).await
        && let Some(p) = line.strip_prefix("PATH=")
    {
        return (p.to_string(), "the tmux server's PATH");
    }
    (
        std::env::var("PATH").unwrap_or_default(),
        "this shell's PATH (the tmux server is not running)",
    )
}

/// Programs whose `--version` is known to print a version and exit: the AI CLIs' and a few
/// shells and interpreters.
fn knows_version(program: &Path) -> bool {
    let base = program.file_name().and_then(|s| s.to_str()).unwrap_or("");
    clibot_proto::clis::CLIS
        .iter()
        .any(|c| c.programs.contains(&base))
        || matches!(
            base,
            "bash" | "zsh" | "fish" | "python" | "python3" | "node"
        )
}

pub(super) async fn clis_check(
    status: Option<&v1::StatusResponse>,
    config: Option<&toml::Table>,
    out: &mut Vec<Check>,
) {
    let configured: BTreeMap<String, Option<String>> = config
        .and_then(|c| c.get("cli")?.as_table().cloned())
        .unwrap_or_default()
        .into_iter()
        .map(|(name, v)| {
            let prog = v
                .get("argv")
                .and_then(|a| a.as_array()?.first()?.as_str().map(str::to_string));
            (name, prog)
        })
        .collect();
    let cli_tables = config
        .and_then(|c| c.get("cli")?.as_table().cloned())
        .unwrap_or_default();
    // The file on disk counts as well as the running daemon: a [cli.X] added since it started
    // is checked before a reload or restart trips on it.
    let mut names: Vec<String> = match status {
        Some(s) => s.clis.clone(),
        None => clibot_proto::clis::names()
            .chain(["shell"])
            .map(str::to_string)
            .collect(),
    };
    names.extend(configured.keys().cloned());
    names.sort();
    names.dedup();
    let (path, path_from) = session_path(status).await;
    for name in names {
        let explicit = configured.get(&name).cloned().flatten();
        let in_config = configured.contains_key(&name);
        let Some(program) = explicit.or_else(|| builtin_program(&name)) else {
            out.push(check(
                format!("cli {name}"),
                Level::Warn,
                "no argv in the config file, and not a built-in CLI",
                format!("give [cli.{name}] an argv"),
            ));
            continue;
        };
        match find_program(&program, &path) {
            None if in_config => out.push(check(
                format!("cli {name}"),
                Level::Fail,
                format!("{program} not found on {path_from}"),
                format!(
                    "install {program}, or put its full path in [cli.{name}] argv, or add its directory to the PATH clibotd starts with"
                ),
            )),
            None => out.push(check(
                format!("cli {name}"),
                Level::Warn,
                format!("{program} (built-in) not installed on {path_from}"),
                format!("install it if you want to use {name}; otherwise ignore this"),
            )),
            Some(found) => {
                let (version, printed) = if knows_version(&found) {
                    match probe(&found.display().to_string(), &["--version"]).await {
                        Ok(v) if !v.is_empty() => (from_output(&v), format!(", {v}")),
                        Ok(_) => (None, String::new()),
                        Err(e) => (None, format!(", --version failed: {e}")),
                    }
                } else {
                    (None, String::new())
                };
                let table = cli_tables.get(&name).and_then(toml::Value::as_table);
                out.push(version_check(
                    &name,
                    format!("{}{printed}", found.display()),
                    version.as_deref(),
                    table,
                ));
            }
        }
    }
}

/// The version clibot was tested with for `cli`, and its npm package.
fn tested(cli: &str) -> Option<(String, String)> {
    let t: toml::Table = toml::from_str(TESTED).ok()?;
    let e = t.get(cli)?.as_table()?;
    Some((
        e.get("version")?.as_str()?.to_string(),
        e.get("package")?.as_str()?.to_string(),
    ))
}

/// The versions the pack a CLI uses was made for: `[cli.NAME.patterns] versions`, else the
/// built-in pack's (`[cli.NAME] pattern_pack`, else the CLI's own name).
fn pack_range(cli: &str, table: Option<&toml::Table>) -> Option<String> {
    if let Some(v) = table
        .and_then(|t| t.get("patterns")?.get("versions")?.as_str())
        .map(str::to_string)
    {
        return Some(v);
    }
    let pack = table
        .and_then(|t| t.get("pattern_pack")?.as_str())
        .unwrap_or(cli);
    let packs: toml::Table = toml::from_str(PACKS).ok()?;
    packs
        .get(pack)?
        .get("versions")?
        .as_str()
        .map(str::to_string)
}

/// One CLI's line: where its program is and what it printed, with the version clibot was
/// tested with; a warning when the version is outside what its screen patterns were made for.
fn version_check(
    cli: &str,
    seen: String,
    version: Option<&str>,
    table: Option<&toml::Table>,
) -> Check {
    let tested = tested(cli);
    let mut detail = seen;
    if let Some((t, _)) = &tested {
        detail.push_str(&format!(" (tested with {t})"));
    }
    let (Some(version), Some(range)) = (version, pack_range(cli, table)) else {
        return check(format!("cli {cli}"), Level::Ok, detail, "");
    };
    let Ok(range) = Range::parse(&range) else {
        return check(
            format!("cli {cli}"),
            Level::Warn,
            format!("{detail}; [cli.{cli}.patterns] versions = {range:?} is not a version range"),
            "write a semver range, e.g. versions = \">=2.1, <3\"",
        );
    };
    let how = match range.fit(version) {
        Fit::Newer => "newer than",
        Fit::Older => "older than",
        Fit::Inside | Fit::Unknown => return check(format!("cli {cli}"), Level::Ok, detail, ""),
    };
    let install = tested
        .map(|(t, package)| {
            format!(", or install the tested version: npm install -g {package}@{t}")
        })
        .unwrap_or_default();
    check(
        format!("cli {cli}"),
        Level::Warn,
        format!(
            "{detail}: {version} is {how} the versions its screen patterns were made for ({}), so a dialog it draws differently may go unseen",
            range.text
        ),
        format!(
            "if a prompt does not reach you, save its screen (clibotctl screen NAME > screen.txt), try it with `clibotctl patterns test screen.txt --cli {cli}` and add patterns under [cli.{cli}.patterns]{install}"
        ),
    )
}

/// A hook with a session id no session has: the daemon must answer (with a refusal).
pub(super) async fn hook_check(c: &mut clibot_proto::Client, out: &mut Vec<Check>) {
    let req = v1::HookRequest {
        session_id: "clibot-doctor-probe".into(),
        token: "invalid".into(),
        cli: "claude".into(),
        event: "Notification".into(),
        payload: "{}".into(),
        global: false,
    };
    let fix =
        "the daemon does not answer hooks: look at its log (CLIBOT_LOG=debug) for `hook` lines";
    match tokio::time::timeout(PROBE, c.hook(req)).await {
        Err(_) => out.push(check(
            "hooks",
            Level::Fail,
            format!("no answer to a hook within {}s", PROBE.as_secs()),
            fix,
        )),
        Ok(Ok(_)) => out.push(check("hooks", Level::Ok, "the daemon answers hooks", "")),
        Ok(Err(s))
            if matches!(
                s.code(),
                tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Unimplemented
            ) =>
        {
            out.push(check(
                "hooks",
                Level::Fail,
                format!("hook failed: {}", s.message()),
                fix,
            ))
        }
        Ok(Err(s)) => out.push(check(
            "hooks",
            Level::Ok,
            format!(
                "the daemon answers hooks (a probe was refused: {})",
                s.message()
            ),
            "",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_outside_the_packs_range_is_a_warning_that_says_what_to_do() {
        let ok = version_check("claude", "/x/claude".into(), Some("2.1.332"), None);
        assert_eq!(ok.level, Level::Ok, "{ok:?}");
        assert!(ok.detail.contains("(tested with "), "{ok:?}");
        let newer = version_check("claude", "/x/claude".into(), Some("3.0.1"), None);
        assert_eq!(newer.level, Level::Warn, "{newer:?}");
        assert!(newer.detail.contains("3.0.1 is newer than"), "{newer:?}");
        assert!(
            newer.fix.contains("patterns test")
                && newer
                    .fix
                    .contains("npm install -g @anthropic-ai/claude-code@"),
            "{newer:?}"
        );
        // The config's own range wins over the built-in pack's.
        let table: toml::Table = toml::from_str("[patterns]\nversions = \"<2\"").expect("toml");
        let own = version_check("claude", "/x/claude".into(), Some("2.1.332"), Some(&table));
        assert_eq!(own.level, Level::Warn, "{own:?}");
        let bad: toml::Table = toml::from_str("[patterns]\nversions = \"soon\"").expect("toml");
        let bad = version_check("claude", "/x/claude".into(), Some("2.1.332"), Some(&bad));
        assert!(bad.detail.contains("not a version range"), "{bad:?}");
        // Every CLI clibot tests has a tested version and a pack range.
        for cli in clibot_proto::clis::names() {
            assert!(tested(cli).is_some(), "{cli} in tests/cli-versions.toml");
            let range = pack_range(cli, None).unwrap_or_default();
            let (t, _) = tested(cli).unwrap_or_default();
            assert_eq!(
                Range::parse(&range).map(|r| r.fit(&t)).ok(),
                Some(Fit::Inside),
                "{cli}: the tested version {t} is inside its pack's range {range:?}"
            );
        }
    }
}
