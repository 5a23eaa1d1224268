//! Which version of a CLI a session runs, and whether its pattern pack was made for it.
//!
//! A CLI that redraws its dialogs breaks screen detection silently: a prompt nobody sees, a
//! turn that never ends. Knowing the version turns that into something said: each pack names
//! the versions it was made for (`versions = ">=2.1, <3"` in `patterns.toml`), a session whose
//! CLI is outside that range says so once, and detection failures are counted per version.
//!
//! The version comes from the npm package the program belongs to (instant, no process), else
//! from `PROGRAM --version` (at most a few seconds, once): cached per binary path, modification
//! time and size, so a CLI updated in place is read again.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

pub use clibot_proto::versions::{Fit, Range, from_output};
use std::time::{Duration, SystemTime};

/// How long `PROGRAM --version` may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(3);

/// The longest version kept (a metric label, an event field).
const MAX_LEN: usize = 40;

type Key = (String, PathBuf, Option<SystemTime>, u64);

fn cache() -> &'static Mutex<HashMap<Key, String>> {
    static CACHE: OnceLock<Mutex<HashMap<Key, String>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The version of the package `path` belongs to: the nearest `package.json` above it with a
/// `version` (at most six levels up). Empty when there is none.
pub fn package_version(path: &Path) -> String {
    package_of(path).map(|(_, v)| v).unwrap_or_default()
}

/// The name and version of the package `path` belongs to (see [`package_version`]).
fn package_of(path: &Path) -> Option<(String, String)> {
    // `node_modules/.bin/codex` is a link into the package: look from where it points.
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut dir = real.parent();
    for _ in 0..6 {
        let d = dir?;
        if let Ok(text) = crate::confine::beneath::read_record(&d.join("package.json"), 1 << 20)
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&text)
            && let Some(version) = v["version"].as_str()
        {
            let name = v["name"].as_str().unwrap_or_default().to_string();
            return Some((name, clean(version)));
        }
        dir = d.parent();
    }
    None
}

/// Whether a package named `name` is the CLI of `adapter` (a wrapper or a project around it is
/// not: its version says nothing of the CLI's screens).
fn is_package_of(adapter: &str, name: &str) -> bool {
    match clibot_proto::clis::cli(adapter) {
        Some(c) => c.packages.iter().any(|p| name.starts_with(p)),
        // A generic CLI: any package it runs from.
        None => true,
    }
}

/// Interpreters a CLI may be started through (`node /x/qwen/cli.js`): the version is the
/// script's, not theirs.
const INTERPRETERS: &[&str] = &["node", "nodejs", "bun", "deno", "python", "python3", "env"];

/// The script an interpreter `program` runs as the CLI (`node /x/qwen/cli.js` → the script's
/// path), if that is what `argv` does.
pub(crate) fn script_of<'a>(program: &Path, argv: &'a [String]) -> Option<&'a str> {
    let base = program
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    argv.get(1)
        .map(String::as_str)
        .filter(|script| INTERPRETERS.contains(&base) && script.contains('/'))
}

/// The version of the CLI of `adapter` that `argv` runs, `program` being `argv[0]` resolved on
/// the session's PATH: its npm package's, or what `PROGRAM --version` prints when `probe` allows
/// running it and the program is named after the CLI (`claude`, not a wrapper such as `env` or
/// `docker`, whose version says nothing of the CLI). Empty when neither tells.
pub async fn read(adapter: &str, program: &Path, argv: &[String], probe: bool) -> String {
    let base = program
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let target = script_of(program, argv).map_or_else(|| program.to_path_buf(), PathBuf::from);
    let real = std::fs::canonicalize(&target).unwrap_or_else(|_| target.clone());
    let meta = std::fs::metadata(&real).ok();
    let key: Key = (
        adapter.to_string(),
        real.clone(),
        meta.as_ref().and_then(|m| m.modified().ok()),
        meta.as_ref().map_or(0, std::fs::Metadata::len),
    );
    if let Some(v) = crate::locking::lock(cache()).get(&key) {
        return v.clone();
    }
    let mut version = package_of(&target)
        .filter(|(name, _)| is_package_of(adapter, name))
        .map(|(_, v)| v)
        .unwrap_or_default();
    if version.is_empty() && probe && target == program && base.starts_with(adapter) {
        version = clean(&run_version(program).await);
    }
    let mut c = crate::locking::lock(cache());
    if c.len() > 256 {
        c.clear();
    }
    c.insert(key, version.clone());
    version
}

/// `PROGRAM --version`, its first version-looking word; empty on failure or timeout.
async fn run_version(program: &Path) -> String {
    let mut cmd = tokio::process::Command::new(program);
    cmd.arg("--version")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    match tokio::time::timeout(VERSION_TIMEOUT, cmd.output()).await {
        Ok(Ok(out)) => {
            let text = String::from_utf8_lossy(&out.stdout);
            from_output(&text)
                .or_else(|| from_output(&String::from_utf8_lossy(&out.stderr)))
                .unwrap_or_default()
        }
        _ => String::new(),
    }
}

/// A version as kept: printable, short, without a leading `v`.
fn clean(v: &str) -> String {
    v.trim()
        .trim_start_matches('v')
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+'))
        .take(MAX_LEN)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_package_tells_the_version_and_is_cached() {
        let d = tempfile::tempdir().expect("tempdir");
        let pkg = d.path().join("node_modules/@x/cli");
        std::fs::create_dir_all(pkg.join("bin")).expect("mkdir");
        std::fs::write(
            pkg.join("package.json"),
            r#"{"name":"@x/cli","version":"1.4.2"}"#,
        )
        .expect("write");
        let script = pkg.join("bin/cli.js");
        std::fs::write(&script, "").expect("write");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let argv = ["node".to_string(), script.display().to_string()];
        assert_eq!(
            rt.block_on(read("generic", Path::new("/usr/bin/node"), &argv, true)),
            "1.4.2",
            "the script's package, not node's"
        );
        assert_eq!(
            rt.block_on(read(
                "generic",
                &script,
                &[script.display().to_string()],
                false
            )),
            "1.4.2"
        );
        // Not the package of the CLI named: a wrapper's version is none.
        assert_eq!(
            rt.block_on(read(
                "claude",
                &script,
                &[script.display().to_string()],
                true
            )),
            ""
        );
        // `env FOO=1 claude`: env's own --version is never taken for the CLI's.
        let env = ["env".to_string(), "FOO=1".into(), "claude".into()];
        assert_eq!(
            rt.block_on(read("claude", Path::new("/usr/bin/env"), &env, true)),
            ""
        );
        assert_eq!(package_version(Path::new("/nonexistent/x/y")), "");
    }
}
