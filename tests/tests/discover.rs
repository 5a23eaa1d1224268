//! Discovery: `clibotctl discover` lists the AI CLIs running as this user outside clibot — in a
//! pane of a tmux server that is not clibot's, or in a terminal with no tmux (under `script`) —
//! identified by their process tree and package, with the conversation when it is certain.
//! Sessions clibot manages are not listed, and nothing changes by looking.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clibot_tests::Harness;

/// A stand-in package at `root/node_modules/NAME` with this version and a script that stays up
/// (and, for a wrapper, starts a native child of the same package, as Codex does).
fn package(root: &Path, name: &str, version: &str, script: &str, child: Option<&str>) -> String {
    let dir = root.join("node_modules").join(name);
    let script_path = dir.join(script);
    std::fs::create_dir_all(script_path.parent().expect("parent")).expect("mkdir");
    std::fs::write(
        dir.join("package.json"),
        format!(r#"{{"name": "{name}", "version": "{version}"}}"#),
    )
    .expect("package.json");
    let body = match child {
        Some(native) => {
            let native_path = root.join("node_modules").join(native);
            std::fs::create_dir_all(native_path.parent().expect("parent")).expect("mkdir");
            std::fs::copy("/bin/sleep", &native_path).expect("copy sleep");
            format!(
                "require('child_process').spawn({:?}, ['300'], {{stdio: 'inherit'}});\nsetTimeout(() => {{}}, 300000);\n",
                native_path.display().to_string()
            )
        }
        None => "setTimeout(() => {}, 300000);\n".to_string(),
    };
    std::fs::write(&script_path, body).expect("script");
    script_path.display().to_string()
}

/// Runs the stand-in `script` with node, as HOME `home`, in a new session of the tmux server at
/// `socket` (not clibot's).
fn in_other_tmux(socket: &Path, session: &str, dir: &str, home: &Path, script: &str) {
    let ok = Command::new("tmux")
        .arg("-S")
        .arg(socket)
        .args([
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            session,
            "-c",
            dir,
        ])
        .arg(format!("HOME={} exec node {script}", home.display()))
        .env_remove("TMUX")
        .status()
        .expect("tmux");
    assert!(ok.success());
}

/// Claude Code's transcript of conversation `id` of project `dir`, as Claude Code names it.
fn claude_transcript(home: &Path, dir: &str, id: &str) {
    let project = home.join(".claude/projects").join(
        dir.chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect::<String>(),
    );
    std::fs::create_dir_all(&project).expect("project dir");
    std::fs::write(project.join(format!("{id}.jsonl")), "{}\n").expect("transcript");
}

fn discovered(h: &Harness) -> Vec<serde_json::Value> {
    serde_json::from_str::<serde_json::Value>(&h.ctl_ok(&["discover", "--json"]))
        .expect("discover --json is JSON")
        .as_array()
        .cloned()
        .unwrap_or_default()
}

struct Cleanup {
    other_tmux: std::path::PathBuf,
    script: Option<Child>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.other_tmux)
            .arg("kill-server")
            .status();
        if let Some(c) = self.script.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn discover_lists_cli_processes_outside_clibot_by_their_process_tree() {
    let mut h = Harness::new();
    h.start_daemon();
    let root = h.dir.path().join("pkgs");
    let claude = package(&root, "@anthropic-ai/claude-code", "9.8.7", "cli.js", None);
    let codex = package(
        &root,
        "@openai/codex",
        "0.1.2",
        "bin/codex.js",
        Some("@openai/codex-linux-x64/vendor/codex"),
    );
    let home = h.dir.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let work = h.work.display().to_string();

    // One in a tmux server of the user that is not clibot's, in a window named to mislead.
    let other = h.dir.path().join("other-tmux.sock");
    let mut cleanup = Cleanup {
        other_tmux: other.clone(),
        script: None,
    };
    in_other_tmux(&other, "gemini-here", &work, &home, &claude);
    // One in a terminal with no tmux at all.
    cleanup.script = Some(
        Command::new("script")
            .args(["-qfc", &format!("exec node {codex}"), "/dev/null"])
            .current_dir(&h.work)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("script"),
    );
    // And one clibot manages: never listed.
    h.ctl_ok(&["spawn", "mine", "--cli", "bash", "--dir", &work]);
    h.ctl_ok(&["send", "mine", &format!("node {claude}")]);

    // Claude Code's transcript of the pane's conversation, written after it started.
    std::thread::sleep(Duration::from_millis(500));
    claude_transcript(&home, &work, "0d7c-conv");

    let deadline = Instant::now() + Duration::from_secs(20);
    let found = loop {
        let f = discovered(&h);
        if f.len() >= 2 || Instant::now() > deadline {
            break f;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let ours: Vec<&serde_json::Value> =
        found.iter().filter(|f| f["dir"] == work.as_str()).collect();
    assert_eq!(ours.len(), 2, "{found:#?}");
    let claude_found = ours
        .iter()
        .find(|f| f["cli"] == "claude")
        .expect("claude listed");
    assert_eq!(claude_found["version"], "9.8.7");
    assert_eq!(claude_found["where"]["kind"], "tmux");
    assert_eq!(
        claude_found["where"]["server"],
        other.display().to_string().as_str()
    );
    assert!(
        claude_found["where"]["pane"]
            .as_str()
            .is_some_and(|p| p.starts_with('%'))
    );
    assert_eq!(claude_found["conversation_id"], "0d7c-conv");
    let codex_found = ours
        .iter()
        .find(|f| f["cli"] == "codex")
        .expect("codex listed once, as its wrapper");
    assert_eq!(codex_found["version"], "0.1.2");
    assert_eq!(codex_found["where"]["kind"], "tty");
    assert!(
        codex_found["where"]["tty"]
            .as_str()
            .is_some_and(|t| t.starts_with("/dev/pts/"))
    );
    assert!(codex_found["conversation_id"].is_null());
    assert!(
        codex_found["id"]
            .as_str()
            .is_some_and(|i| i == format!("codex-{}", codex_found["pid"]))
    );
    // Nothing changed: clibot still manages only its own session.
    let list = h.ctl_ok(&["list"]);
    assert_eq!(
        list.lines().filter(|l| l.contains("mine")).count(),
        1,
        "{list}"
    );
    assert!(
        !list.contains("claude") && !list.contains("codex"),
        "{list}"
    );
    drop(cleanup);
}

/// `clibotctl resume ID` continues a discovered CLI's conversation in a managed session in the
/// same directory (and with `--quit` asks the original to quit); `spawn --resume` does the same
/// by conversation id. A stand-in `claude` shows the arguments clibot starts it with.
#[test]
fn resume_continues_a_discovered_conversation_in_a_managed_session() {
    let h = Harness::new();
    let text = std::fs::read_to_string(&h.config).expect("config");
    std::fs::write(
        &h.config,
        format!(
            "{text}\n[cli.claude]\nargv = [\"bash\", \"-c\", \"echo \\\"ARGS: $*\\\"; exec bash --norc --noprofile\", \"claude\"]\nenv = {{ PS1 = \"$ \", HISTFILE = \"/dev/null\" }}\n"
        ),
    )
    .expect("config");
    let mut h = h;
    h.start_daemon();
    let root = h.dir.path().join("pkgs");
    let claude = package(&root, "@anthropic-ai/claude-code", "9.8.7", "cli.js", None);
    let home = h.dir.path().join("home");
    let work = h.work.display().to_string();
    let other = h.dir.path().join("other-tmux.sock");
    let cleanup = Cleanup {
        other_tmux: other.clone(),
        script: None,
    };
    in_other_tmux(&other, "t", &work, &home, &claude);
    std::thread::sleep(Duration::from_millis(500));
    claude_transcript(&home, &work, "5e1f-conv");
    let deadline = Instant::now() + Duration::from_secs(20);
    let found = loop {
        let f = discovered(&h);
        if let Some(c) = f
            .iter()
            .find(|f| f["cli"] == "claude" && f["dir"] == work.as_str())
        {
            break c.clone();
        }
        assert!(Instant::now() < deadline, "not discovered: {f:#?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        found["actions"],
        serde_json::json!(["adopt", "resume"]),
        "{found}"
    );
    let id = found["id"].as_str().expect("id").to_string();
    let pid = found["pid"].as_u64().expect("pid") as u32;

    let out = h.ctl_ok(&["resume", &id, "--name", "r1", "--quit", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["name"], "r1");
    assert_eq!(v["dir"], work.as_str());
    assert_eq!(v["conversation_id"], "5e1f-conv");
    h.wait_screen("r1", "the resumed conversation", |t| {
        t.contains("ARGS: --resume 5e1f-conv")
    });
    // The original was asked to quit.
    let deadline = Instant::now() + Duration::from_secs(10);
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(Instant::now() < deadline, "process {pid} still runs");
        std::thread::sleep(Duration::from_millis(100));
    }

    // By id, without discovering; a shell keeps no conversations; an id is checked.
    h.ctl_ok(&[
        "spawn", "r2", "--cli", "claude", "--dir", &work, "--resume", "abc-123",
    ]);
    h.wait_screen("r2", "the resumed conversation", |t| {
        t.contains("ARGS: --resume abc-123")
    });
    let e = h.ctl_err(&[
        "spawn", "r3", "--cli", "bash", "--dir", &work, "--resume", "x",
    ]);
    assert!(e.contains("keeps no conversations"), "{e}");
    let e = h.ctl_err(&[
        "spawn", "r4", "--cli", "claude", "--dir", &work, "--resume", "a b;c",
    ]);
    assert!(e.contains("is not a conversation id"), "{e}");
    let e = h.ctl_err(&["resume", "claude-1"]);
    assert!(e.contains("clibotctl discover"), "{e}");
    drop(cleanup);
}
