//! `clibotctl hooks install|uninstall|status` on a private HOME, and `clibotctl hook --global`
//! where it must do nothing: inside a session clibot started, and with no daemon.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use clibot_tests::bin;

/// A private HOME with its own state directory and CODEX_HOME; no daemon.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        Home {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(bin("clibotctl"));
        cmd.args(args)
            .env("HOME", self.dir.path())
            .env("XDG_STATE_HOME", self.path(".local/state"))
            .env("CODEX_HOME", self.path("codex-home"))
            .env("CLIBOT_CONFIG", self.path("no-config.toml"))
            .env("CLIBOT_SOCKET", self.path("no-daemon/clibotd.sock"))
            .env("CLIBOT_NO_AUTOSTART", "1")
            .env_remove("CLAUDE_CONFIG_DIR")
            .env_remove("GEMINI_CLI_HOME")
            .env_remove("CLIBOT_STATE_DIR")
            .env_remove("CLIBOT_SESSION_ID")
            .env_remove("CLIBOT_HOOK_TOKEN")
            .stdin(Stdio::null());
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run clibotctl")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "clibotctl {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.ok(args);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
    }

    /// `status --json`'s object for one CLI.
    fn status(&self, cli: &str) -> serde_json::Value {
        let all = self.json(&["hooks", "status", "--json"]);
        all.as_array()
            .and_then(|a| a.iter().find(|r| r["cli"] == cli))
            .cloned()
            .unwrap_or_else(|| panic!("no {cli} in {all}"))
    }
}

/// Tabs, CRLF, trailing spaces, unicode, no final newline, and a hook of the user's own.
const USER_SETTINGS: &str = "{\r\n\t\"model\": \"opus\",   \r\n\t\"hooks\": {\r\n\t\t\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"notify-send 'fertig ✓'\"}]}]\r\n\t},\r\n\t\"env\": {\"GRÜSSE\": \"日本\"}\r\n}";

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn claude_settings_get_clibots_hooks_beside_the_users_and_come_back_byte_for_byte() {
    let home = Home::new();
    let file = home.path(".claude/settings.json");
    std::fs::create_dir_all(home.path(".claude")).expect("mkdir");
    std::fs::write(&file, USER_SETTINGS).expect("write settings");

    let before = home.status("claude");
    assert_eq!(before["installed"], false, "{before}");
    assert_eq!(before["backup"], false, "{before}");
    assert_eq!(before["file"], file.display().to_string());

    // No --cli: the CLIs whose config directory exists, here only Claude Code.
    let first = home.json(&["hooks", "install", "--json"]);
    assert_eq!(first.as_array().map(Vec::len), Some(1), "{first}");
    assert_eq!(first[0]["cli"], "claude");
    assert_eq!(first[0]["action"], "installed");
    let installed = read(&file);
    let again = home.json(&["hooks", "install", "--cli", "claude", "--json"]);
    assert_eq!(again[0]["action"], "already_installed", "{again}");
    assert_eq!(read(&file), installed, "a second install changed the file");

    let v: serde_json::Value = serde_json::from_slice(&installed).expect("settings stay JSON");
    assert_eq!(v["model"], "opus");
    assert_eq!(v["env"]["GRÜSSE"], "日本");
    let stop = v["hooks"]["Stop"].as_array().expect("Stop");
    assert_eq!(stop.len(), 2, "{v}");
    assert_eq!(stop[0]["hooks"][0]["command"], "notify-send 'fertig ✓'");
    let ours = stop[1]["hooks"][0]["command"].as_str().expect("command");
    assert!(
        ours.starts_with('\'') && ours.ends_with("clibotctl' hook --cli claude --global"),
        "{ours}"
    );
    assert_eq!(v["hooks"]["PermissionRequest"][0]["matcher"], "*");
    assert_eq!(
        v["hooks"]["PermissionRequest"][0]["hooks"][0]["timeout"],
        86400
    );

    let during = home.status("claude");
    assert_eq!(during["installed"], true, "{during}");
    assert_eq!(during["backup"], true, "{during}");
    let events: Vec<&str> = during["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e.as_str())
        .collect();
    for e in [
        "UserPromptSubmit",
        "Stop",
        "StopFailure",
        "Notification",
        "SessionEnd",
        "PermissionRequest",
    ] {
        assert!(events.contains(&e), "{e} missing in {during}");
    }

    let text = home.ok(&["hooks", "uninstall", "--cli", "claude"]);
    assert!(text.contains("claude: removed"), "{text}");
    assert_eq!(
        read(&file),
        USER_SETTINGS.as_bytes(),
        "not restored byte for byte"
    );
    let after = home.status("claude");
    assert_eq!(after["installed"], false, "{after}");
    assert_eq!(after["backup"], false, "{after}");
}

#[test]
fn an_absent_codex_hooks_file_is_created_and_removed_again() {
    let home = Home::new();
    let file = home.path("codex-home/hooks.json");
    let out = home.ok(&["hooks", "install", "--cli", "codex"]);
    assert!(out.contains("codex: installed"), "{out}");
    assert!(
        out.contains("Codex asks once to trust new hooks"),
        "the trust step is not said: {out}"
    );
    let v: serde_json::Value = serde_json::from_slice(&read(&file)).expect("hooks.json");
    assert_eq!(v["hooks"]["Stop"][0]["hooks"][0]["timeout"], 30);
    assert_eq!(v["hooks"]["PermissionRequest"][0]["matcher"], "*");
    let status = home.status("codex");
    assert_eq!(status["installed"], true, "{status}");
    assert!(
        status["note"].as_str().is_some_and(|n| n.contains("trust")),
        "{status}"
    );

    let out = home.json(&["hooks", "uninstall", "--cli", "codex", "--json"]);
    assert_eq!(out[0]["action"], "removed", "{out}");
    assert!(!file.exists(), "hooks.json is still there");
    assert!(
        !home.path("codex-home").exists(),
        "the directory install made is still there"
    );
    assert_eq!(home.status("codex")["installed"], false);
}

#[test]
fn a_settings_file_that_is_not_json_is_refused_and_left_alone() {
    let home = Home::new();
    let file = home.path(".claude/settings.json");
    std::fs::create_dir_all(home.path(".claude")).expect("mkdir");
    std::fs::write(&file, "{\"hooks\": {,\n").expect("write");
    let out = home.run(&["hooks", "install", "--cli", "claude"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&file.display().to_string()) && err.contains("not valid JSON"),
        "{err}"
    );
    assert_eq!(read(&file), b"{\"hooks\": {,\n");
    assert_eq!(home.status("claude")["backup"], false);
}

#[test]
fn opencode_is_explained_and_nothing_is_installed_without_a_cli() {
    let home = Home::new();
    let out = home.json(&["hooks", "install", "--cli", "opencode", "--json"]);
    assert_eq!(out[0]["action"], "skipped", "{out}");
    assert!(
        out[0]["note"]
            .as_str()
            .is_some_and(|n| n.contains("resume")),
        "{out}"
    );
    let out = home.run(&["hooks", "install"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--cli claude"), "{err}");
    assert!(
        std::fs::read_dir(home.dir.path())
            .expect("ls")
            .next()
            .is_none()
    );
}

/// Runs `clibotctl hook --cli claude --global` with a Stop payload on stdin.
fn global_hook(home: &Home, session: Option<&str>) -> Output {
    let mut cmd = home.command(&["hook", "--cli", "claude", "--global"]);
    if let Some(id) = session {
        cmd.env("CLIBOT_SESSION_ID", id);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run clibotctl hook");
    if let Some(mut stdin) = child.stdin.take() {
        // Inside a clibot session the hook does not read stdin: a closed pipe is fine.
        let _ = stdin.write_all(br#"{"hook_event_name":"Stop","session_id":"x"}"#);
    }
    child.wait_with_output().expect("hook output")
}

#[test]
fn the_global_hook_does_nothing_inside_a_clibot_session_or_without_a_daemon() {
    let home = Home::new();
    for session in [Some("s-1"), None] {
        let out = global_hook(&home, session);
        assert_eq!(out.status.code(), Some(0), "{session:?}");
        assert!(out.stdout.is_empty(), "{session:?}: {:?}", out.stdout);
        assert!(out.stderr.is_empty(), "{session:?}: {:?}", out.stderr);
    }
}
