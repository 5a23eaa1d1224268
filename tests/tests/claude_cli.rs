//! The real Claude Code CLI, offline, in a real tmux server, against the mock Messages API —
//! driven with plain tmux commands exactly as clibot drives it (no clibotd here). These tests
//! pin down what clibot relies on: the idle and busy screens, the permission dialog and how a
//! digit answers it, and the hook payloads.
//!
//! Skipped (with a message) when `tests/node` is not installed, unless `CLIBOT_REQUIRE_CLIS` is
//! set. Set `CLIBOT_UPDATE_FIXTURES=1` to rewrite the screen fixtures in `tests/fixtures/`.

use std::path::{Path, PathBuf};

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use clibot_tests::claude::{self, ClaudeHome};
use clibot_tests::mock_llm::{MockLlm, Rule};
use clibot_tests::tmux_driver::TmuxDriver;
use serde_json::{Value, json};

/// The tmux target of the one session each test runs.
const TARGET: &str = "claude";

/// How long a dialog must have been on screen before a key press reaches it.
const DIALOG_SETTLE: Duration = Duration::from_millis(500);

/// Claude Code is a large program and the machines running these tests are small: one instance
/// at a time keeps the timings these tests measure meaningful.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// One running Claude Code in its own tmux server, home and work directory.
struct Claude {
    // Field order is drop order: tmux (and with it Claude) goes before the mock and the files.
    tmux: TmuxDriver,
    mock: MockLlm,
    work: PathBuf,
    /// Where the hooks of [`hook_settings`] write, when enabled.
    hooks: PathBuf,
    /// The pane's process: Claude itself (tmux execs the argv directly).
    pid: Option<u32>,
    _dir: tempfile::TempDir,
    _serial: MutexGuard<'static, ()>,
}

impl Drop for Claude {
    /// Ends tmux and waits for Claude to exit before the temporary directory goes: on the hang-up
    /// Claude still writes its transcript into the home, and a removal racing that write leaves
    /// the directory behind.
    fn drop(&mut self) {
        let _ = self.tmux.run(&["kill-server"], None);
        let Some(pid) = self.pid else { return };
        let started = Instant::now();
        let deadline = started + Duration::from_secs(10);
        while alive(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("claude: exited {:?} after kill-server", started.elapsed());
    }
}

/// Whether `pid` still runs: `/proc/<pid>/stat` exists and its state is not Z (a zombie no one
/// reaps, as under a container's init, has finished all the same).
fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // "pid (comm) S ...": the state follows the last ')'.
    stat.rsplit_once(')')
        .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
}

impl Claude {
    /// Starts Claude with the rules `rules(work_dir)` (optionally with the recording hooks) and
    /// waits for its idle prompt. A missing CLI fails the test (see `claude_available`).
    fn start(rules: impl FnOnce(&Path) -> Vec<Rule>, with_hooks: bool) -> Claude {
        assert!(claude::claude_available());
        let serial = one_at_a_time();
        let dir = tempfile::Builder::new()
            .prefix("clibot-claude-")
            .tempdir()
            .expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical tempdir");
        let work = root.join("work");
        let hooks = root.join("hooks");
        std::fs::create_dir_all(&work).expect("mkdir work");
        std::fs::create_dir_all(&hooks).expect("mkdir hooks");
        let mock = MockLlm::start(rules(&work));
        let home = ClaudeHome::new(&root, &work, &mock.url());
        let tmux = TmuxDriver {
            socket: root.join("t.sock"),
            target: TARGET,
            unset: claude::UNSET_ENV,
        };
        let env: Vec<String> = home
            .env()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let work_str = home.work_dir().display().to_string();
        let mut args: Vec<String> = [
            "new-session",
            "-d",
            "-s",
            TARGET,
            "-x",
            "160",
            "-y",
            "50",
            "-c",
            &work_str,
        ]
        .map(String::from)
        .to_vec();
        for kv in env {
            args.extend(["-e".to_string(), kv]);
        }
        args.push("--".into());
        args.extend(home.argv());
        if with_hooks {
            args.extend(["--settings".to_string(), hook_settings(&hooks)]);
        }
        let started = Instant::now();
        tmux.ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let pid = tmux
            .run(
                &["display-message", "-p", "-t", TARGET, "#{pane_pid}"],
                None,
            )
            .stdout;
        let pid = String::from_utf8_lossy(&pid).trim().parse().ok();
        let claude = Claude {
            tmux,
            mock,
            work,
            hooks,
            pid,
            _dir: dir,
            _serial: serial,
        };
        let screen = claude
            .tmux
            .wait("the idle prompt", Duration::from_secs(60), is_idle);
        eprintln!(
            "claude: idle prompt {:?} after start:\n{screen}",
            started.elapsed()
        );
        claude
    }

    /// Presses `key` in a dialog that just appeared. Claude Code ignores keys that arrive too
    /// soon after a dialog's first frame: a `1` sent 0–100 ms after the dialog was first seen in
    /// a capture was lost in 4 of 5 runs (the dialog simply stays), one sent 150 ms or more
    /// later never (6 runs). clibot must wait, or check that the dialog went away and resend.
    fn answer(&self, key: &str) {
        std::thread::sleep(DIALOG_SETTLE);
        self.tmux.ok(&["send-keys", "-t", TARGET, key]);
    }

    /// Waits (up to a minute) until the screen satisfies `pred`; returns that screen and how
    /// long it took.
    fn wait(&self, what: &str, pred: impl Fn(&str) -> bool) -> (String, Duration) {
        let start = Instant::now();
        let screen = self.tmux.wait(what, Duration::from_secs(60), pred);
        let took = start.elapsed();
        eprintln!("claude: {what} after {took:?}");
        (screen, took)
    }
}

/// Claude's composer is ready: the shortcuts hint in the footer and no spinner's interrupt hint.
fn is_idle(screen: &str) -> bool {
    screen.contains("? for shortcuts")
        && !screen.contains("esc to interrupt")
        && screen.lines().any(|l| l.starts_with('❯'))
}

/// Writes a screen fixture when `CLIBOT_UPDATE_FIXTURES` is set.
fn save_fixture(name: &str, screen: &str) {
    if std::env::var_os("CLIBOT_UPDATE_FIXTURES").is_none() {
        return;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name);
    std::fs::create_dir_all(path.parent().expect("fixtures dir")).expect("mkdir fixtures");
    std::fs::write(&path, screen).expect("write fixture");
    eprintln!("wrote {}", path.display());
}

/// `--settings` adding command hooks that append their stdin (one JSON object) to
/// `<dir>/<Event>.jsonl`.
fn hook_settings(dir: &Path) -> String {
    let hook = |event: &str| {
        let file = dir.join(format!("{event}.jsonl"));
        json!([{ "matcher": "*", "hooks": [{
            "type": "command",
            "command": format!("(cat; echo) >> '{}'", file.display()),
            "timeout": 10,
        }]}])
    };
    json!({ "hooks": {
        "Stop": hook("Stop"),
        "PermissionRequest": hook("PermissionRequest"),
        "UserPromptSubmit": hook("UserPromptSubmit"),
    }})
    .to_string()
}

/// The payloads a hook received so far.
fn hook_payloads(dir: &Path, event: &str) -> Vec<Value> {
    std::fs::read_to_string(dir.join(format!("{event}.jsonl")))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("hook stdin is one JSON object"))
        .collect()
}

/// Waits until `event`'s hook has received `n` payloads.
fn wait_hooks(dir: &Path, event: &str, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = hook_payloads(dir, event);
        if got.len() >= n {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "{event} hook ran {} times, expected {n}",
            got.len()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

const REPLY: &str = "Hello from the mock model.\nThis is line two.";
const THEN: &str = "Marker created.";

fn rules(work: &Path) -> Vec<Rule> {
    vec![
        Rule::text("HELLO", REPLY),
        Rule::tool(
            "RUNBASH",
            "Bash",
            json!({
                "command": format!("touch {}", work.join("marker.txt").display()),
                "description": "Create an empty marker file",
            }),
            THEN,
        ),
    ]
}

/// Claude showed the reply text and is idle again.
fn replied(s: &str) -> bool {
    s.contains("● Hello from the mock model.") && s.contains("  This is line two.") && is_idle(s)
}

fn is_permission_dialog(s: &str) -> bool {
    s.contains("Do you want to proceed?") && s.lines().any(|l| l.contains("1. Yes"))
}

#[test]
fn real_cli_plain_text_reply_shows_on_screen() {
    let c = Claude::start(rules, false);
    // A slow model, so that the busy screen can be seen.
    c.mock.set_latency(Duration::from_millis(1500));
    c.tmux.submit("Please say HELLO");
    let (busy, _) = c.wait("the busy footer", |s| s.contains("esc to interrupt"));
    eprintln!("busy screen:\n{busy}");
    save_fixture("claude_busy.txt", &busy);
    let (screen, _) = c.wait("the reply", replied);
    eprintln!("idle screen after the reply:\n{screen}");
    save_fixture("claude_idle.txt", &screen);

    // The model request carried the user's text as its last user message.
    let requests = c.mock.requests();
    let main = requests
        .iter()
        .find(|r| r["tools"].as_array().is_some_and(|t| !t.is_empty()))
        .expect("a request offering tools");
    let last_user = main["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .expect("a user message");
    assert!(
        last_user.to_string().contains("Please say HELLO"),
        "{last_user}"
    );
    eprintln!("mock saw: {:?}", c.mock.paths());
}

#[test]
fn real_cli_bash_tool_call_asks_and_digit_one_runs_it() {
    let c = Claude::start(rules, false);
    let marker = c.work.join("marker.txt");
    c.tmux.submit("Please RUNBASH now");
    let (dialog, _) = c.wait("the permission dialog", is_permission_dialog);
    eprintln!("permission dialog:\n{dialog}");
    assert!(
        dialog.contains(&format!("touch {}", marker.display())),
        "{dialog}"
    );
    assert!(!marker.exists(), "nothing runs before the answer");
    save_fixture("claude_bash_permission.txt", &dialog);

    // A digit answers at once, without Enter.
    c.answer("1");
    let (screen, _) = c.wait("the closing text", |s| {
        s.contains(&format!("● {THEN}")) && is_idle(s)
    });
    eprintln!("after answering 1:\n{screen}");
    assert!(marker.exists(), "the approved command ran");
    assert!(!is_permission_dialog(&screen), "the dialog is gone");
}

#[test]
fn real_cli_hooks_report_prompt_permission_and_final_text() {
    let c = Claude::start(rules, true);
    c.tmux.submit("Please say HELLO");
    c.wait("the reply", replied);
    let prompts = wait_hooks(&c.hooks, "UserPromptSubmit", 1);
    assert_eq!(prompts[0]["hook_event_name"], "UserPromptSubmit");
    assert_eq!(prompts[0]["prompt"], "Please say HELLO");
    let stops = wait_hooks(&c.hooks, "Stop", 1);
    assert_eq!(stops[0]["hook_event_name"], "Stop");
    assert_eq!(stops[0]["last_assistant_message"], REPLY);

    // Multi-line text arrives as one prompt.
    c.tmux.submit("First line\nSecond line RUNBASH");
    c.wait("the permission dialog", is_permission_dialog);
    let perms = wait_hooks(&c.hooks, "PermissionRequest", 1);
    let marker = c.work.join("marker.txt");
    assert_eq!(perms[0]["tool_name"], "Bash");
    assert_eq!(
        perms[0]["tool_input"]["command"],
        format!("touch {}", marker.display())
    );
    c.answer("1");
    c.wait("the closing text", |s| {
        s.contains(&format!("● {THEN}")) && is_idle(s)
    });
    let prompts = wait_hooks(&c.hooks, "UserPromptSubmit", 2);
    assert_eq!(prompts[1]["prompt"], "First line\nSecond line RUNBASH");
    let stops = wait_hooks(&c.hooks, "Stop", 2);
    assert_eq!(stops[1]["last_assistant_message"], THEN);
    assert!(marker.exists());

    for event in ["UserPromptSubmit", "PermissionRequest", "Stop"] {
        let raw =
            std::fs::read_to_string(c.hooks.join(format!("{event}.jsonl"))).expect("hook output");
        eprint!("{event} hook stdin:\n{raw}");
    }
}
