//! Approvals for sessions clibot did not start: with `clibotctl hooks install`, the real Claude
//! Code running in a plain terminal (a pty under `script`, no tmux at all) reports its turns and
//! permission prompts as the unmanaged session `u-claude-PID`; the prompt reaches the admin's
//! Telegram chat and a button press lets the tool run; clibot never types into it; with the
//! daemon stopped the CLI runs as if clibot were not there; discovery offers it for resume,
//! which continues its conversation; `hooks uninstall` leaves the settings as they were. Codex is
//! approved through its hook too; Copilot CLI and Qwen Code, whose hooks are watch-only, report
//! their turns and dialogs, answered at their terminal.

use std::io::Write;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use clibot_tests::Harness;
use clibot_tests::claude::ClaudeHome;
use clibot_tests::codex::CodexHome;
use clibot_tests::fake_telegram::{self, texts};
use clibot_tests::mock_llm::{MockLlm, Rule};
use serde_json::{Value, json};

const ADMIN: i64 = 100;

/// Claude Code in a pseudo-terminal of its own (no tmux), typed into through `script`.
struct Terminal {
    child: Child,
    stdin: ChildStdin,
    log: std::path::PathBuf,
}

impl Terminal {
    /// `argv` with `env` in `dir`, in a 160x50 pseudo-terminal.
    fn start(
        h: &Harness,
        env: &[(String, String)],
        argv: &[String],
        dir: &std::path::Path,
    ) -> Terminal {
        let log = h.dir.path().join("terminal.log");
        let argv = argv
            .iter()
            .map(|a| format!("'{a}'"))
            .collect::<Vec<_>>()
            .join(" ");
        let mut child = Command::new("script")
            .args(["-qfec", &format!("stty cols 160 rows 50; exec {argv}")])
            .arg(&log)
            .env_clear()
            .envs(env.iter().cloned())
            .env("TERM", "xterm-256color")
            // Where the hooks find this test's daemon (the user's own would be the default).
            .env("CLIBOT_SOCKET", &h.socket)
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start script");
        let stdin = child.stdin.take().expect("stdin");
        Terminal { child, stdin, log }
    }

    /// What the terminal showed so far, its escape sequences and spaces taken out (a TUI
    /// moves the cursor over a space as often as it prints one).
    fn output(&self) -> String {
        let raw =
            String::from_utf8_lossy(&std::fs::read(&self.log).unwrap_or_default()).into_owned();
        let mut out = String::new();
        let mut chars = raw.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '\u{1b}' {
                if !c.is_whitespace() {
                    out.push(c);
                }
                continue;
            }
            match chars.next() {
                // CSI: parameters up to a final byte in @..~.
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC: up to BEL or ESC \.
                Some(']') => {
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' || (c == '\u{1b}' && chars.next_if_eq(&'\\').is_some()) {
                            break;
                        }
                    }
                }
                _ => {}
            }
        }
        out
    }

    fn wait(&self, what: &str, pred: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if pred(&self.output()) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "timed out waiting for {what}; the terminal:\n{}",
            self.output()
        );
    }

    /// Types `text`, then Enter on its own (as a person would).
    fn submit(&mut self, text: &str) {
        self.stdin.write_all(text.as_bytes()).expect("type");
        self.stdin.flush().expect("flush");
        std::thread::sleep(Duration::from_millis(500));
        self.stdin.write_all(b"\r").expect("enter");
        self.stdin.flush().expect("flush");
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn settings_file(claude: &ClaudeHome) -> std::path::PathBuf {
    claude.home().join(".claude/settings.json")
}

#[test]
fn real_cli_a_claude_in_a_plain_terminal_reports_through_the_global_hooks_and_is_approved_from_telegram()
 {
    assert!(clibot_tests::claude::claude_available());
    let mut h = Harness::with_config(&format!(
        "\n[access.telegram]\npolicy = \"pairing\"\nadmins = [\"{ADMIN}\"]\n"
    ));
    let work = h.work.clone();
    let marker = work.join("marker.txt");
    let mock = MockLlm::start(vec![
        Rule::text("say hello", "Hello from the mock model."),
        Rule::text("say again", "Again, without clibot."),
        Rule::text("say bye", "Bye."),
        Rule::tool(
            "make marker",
            "Bash",
            json!({"command": format!("touch {}", marker.display()), "description": "Create a marker file"}),
            "All done: the marker exists.",
        ),
    ]);
    let claude = ClaudeHome::new(&h.dir.path().join("claude"), &work, &mock.url());
    h.add_cli("claude", &claude.argv(), &claude.env(), "");
    h.start_daemon_without(clibot_tests::claude::UNSET_ENV);
    let (tg, _g) = fake_telegram::with_gateway(&h);
    // The admin's private chat: where sessions clibot does not run report.
    tg.push_message(ADMIN, ADMIN, "Owner", "!!whoami");
    tg.wait_sent("whoami", |s| {
        texts(s, ADMIN).iter().any(|t| t.contains("telegram user"))
    });

    // The user's own settings get clibot's hooks; twice is once.
    let settings = settings_file(&claude);
    assert!(!settings.exists());
    let home = claude.home().display().to_string();
    let install = |h: &Harness, args: &[&str]| {
        let out = h
            .ctl_command(args)
            .env("HOME", &home)
            .env_remove("CLAUDE_CONFIG_DIR")
            .output()
            .expect("clibotctl");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    install(&h, &["hooks", "install", "--cli", "claude"]);
    let first = std::fs::read(&settings).expect("settings written");
    install(&h, &["hooks", "install", "--cli", "claude"]);
    assert_eq!(std::fs::read(&settings).expect("settings"), first);

    let mut term = Terminal::start(&h, &claude.env(), &claude.argv(), claude.work_dir());
    term.wait("the idle prompt", |o| o.contains("forshortcuts"));
    term.submit("please say hello");
    tg.wait_sent("the reply in the admin's chat", |s| {
        texts(s, ADMIN)
            .iter()
            .any(|t| t.contains("Hello from the mock model."))
    });
    let list: Value = serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    let u = list
        .as_array()
        .and_then(|a| a.iter().find(|s| s["unmanaged"] == true).cloned())
        .unwrap_or_else(|| panic!("no unmanaged session: {list:#}"));
    let name = u["name"].as_str().expect("name").to_string();
    assert!(name.starts_with("u-claude-"), "{name}");
    assert_eq!(u["cli"], "claude");
    let refused = h.ctl_err(&["send", &name, "rm -rf ~"]);
    assert!(refused.contains("not run by clibot"), "{refused}");

    // Its permission prompt reaches Telegram; a button press lets the tool run.
    term.submit("please make marker");
    let sent = tg.wait_sent("the prompt with buttons", |s| {
        s.iter().any(|m| {
            m.chat_id == ADMIN && m.text.contains("Do you want") && m.reply_markup.is_some()
        })
    });
    let prompt = sent
        .iter()
        .rev()
        .find(|m| m.chat_id == ADMIN && m.reply_markup.is_some() && m.text.contains("Do you want"))
        .expect("prompt")
        .clone();
    let data =
        prompt.reply_markup.as_ref().expect("buttons")["inline_keyboard"][0][0]["callback_data"]
            .as_str()
            .expect("data")
            .to_string();
    tg.push_callback(ADMIN, ADMIN, prompt.message_id, &data);
    tg.wait_sent("the tool's outcome", |s| {
        texts(s, ADMIN)
            .iter()
            .any(|t| t.contains("All done: the marker exists."))
    });
    assert!(marker.exists(), "the tool ran");
    let resolved = h
        .events()
        .into_iter()
        .rfind(|e| e["type"] == "prompt_resolved" && e["session"] == name.as_str())
        .expect("resolved");
    assert_eq!(resolved["answer"], "Yes", "{resolved}");

    // Watched, not managed: discovery lists it, with the session it reports as.
    let found: Value = serde_json::from_str(&h.ctl_ok(&["discover", "--json"])).expect("json");
    let watched = found
        .as_array()
        .and_then(|a| a.iter().find(|f| f["watched"] == name.as_str()).cloned())
        .unwrap_or_else(|| panic!("{name} not discovered: {found:#}"));
    assert_eq!(watched["cli"], "claude", "{watched}");
    assert_eq!(watched["where"]["kind"], "tty", "{watched}");

    // With the daemon stopped, the CLI goes on as if clibot were not there.
    h.terminate_daemon();
    term.submit("please say again");
    term.wait("the reply without clibot", |o| {
        o.contains("Again,withoutclibot.")
    });

    // Discovery offers it for resume (it runs in no tmux), with its conversation.
    h.start_daemon_without(clibot_tests::claude::UNSET_ENV);
    let found: Value = serde_json::from_str(&h.ctl_ok(&["discover", "--json"])).expect("json");
    let f = found
        .as_array()
        .and_then(|a| {
            a.iter()
                .find(|f| {
                    f["cli"] == "claude"
                        && f["dir"] == claude.work_dir().display().to_string().as_str()
                })
                .cloned()
        })
        .unwrap_or_else(|| panic!("not discovered: {found:#}"));
    assert_eq!(f["where"]["kind"], "tty", "{f}");
    assert_eq!(f["actions"], json!(["resume"]), "{f}");
    let id = f["id"].as_str().expect("id").to_string();
    h.ctl_ok(&["resume", &id, "--name", "r", "--quit"]);
    h.wait_event("r", "ready", Duration::from_secs(60), |e| {
        e["type"] == "state_changed" && e["to"] == "idle"
    });
    h.ctl_ok(&["send", "r", "please say bye"]);
    h.wait_event("r", "the reply", Duration::from_secs(60), |e| {
        e["type"] == "turn_completed" && e["text"] == "Bye."
    });
    let last = mock
        .requests()
        .iter()
        .map(Value::to_string)
        .rfind(|r| r.contains("please say bye"))
        .unwrap_or_default();
    assert!(
        last.contains("please say hello") && last.contains("Again, without clibot."),
        "the resumed conversation holds the terminal's history: {last}"
    );
    // The resumed session is clibot's own: its global hook stayed silent (no second report).
    let turns = h
        .events()
        .into_iter()
        .filter(|e| e["type"] == "turn_completed" && e["text"] == "Bye.")
        .count();
    assert_eq!(turns, 1);

    // Uninstalled: the settings are as they were (absent).
    install(&h, &["hooks", "uninstall", "--cli", "claude"]);
    assert!(!settings.exists(), "the file clibot created is gone again");
}

/// Codex in a plain terminal, its hooks installed and trusted: its approval, asked through its
/// `PermissionRequest` hook, is answered from clibot, and the command runs.
#[test]
fn real_cli_a_codex_in_a_plain_terminal_is_approved_through_its_global_hook() {
    clibot_tests::codex::require_codex();
    let mut h = Harness::with_config("");
    let work = h.work.clone();
    let marker = work.join("marker.txt");
    let mock = MockLlm::start(vec![Rule::tool(
        "make marker",
        "exec_command",
        json!({
            "cmd": format!("touch {}", marker.display()),
            "sandbox_permissions": "require_escalated",
            "justification": "Create a marker file",
        }),
        "All done: the marker exists.",
    )]);
    let codex = CodexHome::new(&h.dir.path().join("codex"), &work, &mock.url());
    h.start_daemon();
    let out = h
        .ctl_command(&["hooks", "install", "--cli", "codex"])
        .env("HOME", codex.home())
        .env("CODEX_HOME", codex.codex_home())
        .output()
        .expect("clibotctl");
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("trust"),
        "install explains Codex's hook trust: {said}"
    );
    assert!(codex.codex_home().join("hooks.json").exists());

    // Started by hand, its new hooks trusted (as after the one-time review).
    let mut argv = codex.argv();
    argv.extend([
        "--no-daemon".to_string(),
        "--dangerously-bypass-hook-trust".to_string(),
    ]);
    let mut term = Terminal::start(&h, &codex.env(), &argv, codex.work_dir());
    term.wait("the composer", |o| o.contains("?forshortcuts"));
    term.submit("please make marker");
    let w = h.wait_event(
        "",
        "the approval through the hook",
        Duration::from_secs(60),
        |e| {
            e["type"] == "waiting"
                && e["session"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("u-codex-"))
        },
    );
    let name = w["session"].as_str().expect("session").to_string();
    assert_eq!(w["source"], "hook", "{w}");
    // clibot never types into it: the answer goes through the waiting hook.
    h.ctl_ok(&["answer", &name, "1"]);
    h.wait_event(&name, "the final reply", Duration::from_secs(60), |e| {
        e["type"] == "turn_completed" && e["text"] == "All done: the marker exists."
    });
    assert!(marker.exists(), "the command ran");
}

/// A CLI whose global hooks are watch-only (Copilot CLI, Qwen Code) started by hand in a plain
/// terminal: its turn's reply reaches clibotd as the unmanaged session `u-CLI-PID`, its
/// permission dialog is published from the hook (to be answered at the terminal, which draws
/// it), a 1 typed there lets the command run, and that turn's reply follows.
fn watch_only_cli_reports_through_its_global_hooks(
    h: &Harness,
    cli: &str,
    (home, env): (&std::path::Path, &[(String, String)]),
    argv: &[String],
    idle: &str,
    marker: &std::path::Path,
) {
    let out = h
        .ctl_command(&["hooks", "install", "--cli", cli])
        .env("HOME", home)
        .output()
        .expect("clibotctl");
    assert!(out.status.success(), "{out:?}");
    let mut term = Terminal::start(h, env, argv, &h.work);
    term.wait("the input", |o| o.contains(idle));
    term.submit("please say hello");
    let prefix = format!("u-{cli}-");
    let mine = |e: &Value| {
        e["session"]
            .as_str()
            .is_some_and(|s| s.starts_with(&prefix))
    };
    let done = h.wait_event("", "the reply", Duration::from_secs(60), |e| {
        mine(e) && e["type"] == "turn_completed"
    });
    assert_eq!(done["text"], "Hello from the unmanaged session.", "{done}");
    let name = done["session"].as_str().expect("session").to_string();
    let list: Value = serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    assert!(
        list.as_array().is_some_and(|a| a
            .iter()
            .any(|s| s["name"] == name.as_str() && s["unmanaged"] == true)),
        "{list:#}"
    );
    term.submit("please make marker");
    let w = h.wait_event(
        &name,
        "the dialog from the hook",
        Duration::from_secs(60),
        |e| e["type"] == "waiting",
    );
    assert_eq!(w["source"], "hook", "{w}");
    assert!(
        w["subject"]
            .as_str()
            .is_some_and(|s| s.contains("marker.txt")),
        "{w}"
    );
    // Answered where it is drawn.
    std::thread::sleep(Duration::from_millis(800));
    term.stdin.write_all(b"1").expect("type");
    term.stdin.flush().expect("flush");
    h.wait_event(&name, "the final reply", Duration::from_secs(60), |e| {
        e["type"] == "turn_completed" && e["text"] == "All done: the marker exists."
    });
    assert!(marker.exists(), "the command ran");
    let out = h
        .ctl_command(&["hooks", "uninstall", "--cli", cli])
        .env("HOME", home)
        .output()
        .expect("clibotctl");
    assert!(out.status.success(), "{out:?}");
}

fn unmanaged_rules(tool: &str, input: Value) -> Vec<Rule> {
    vec![
        Rule::text("say hello", "Hello from the unmanaged session."),
        Rule::tool("make marker", tool, input, "All done: the marker exists."),
    ]
}

#[test]
fn real_cli_a_copilot_in_a_plain_terminal_reports_through_its_global_hooks() {
    clibot_tests::copilot::require_copilot();
    let mut h = Harness::with_config("");
    let marker = h.work.join("marker.txt");
    let mock = MockLlm::start(unmanaged_rules(
        "bash",
        json!({ "command": format!("touch {}", marker.display()), "description": "Create a marker file" }),
    ));
    let home = clibot_tests::copilot::CopilotHome::new(
        &h.dir.path().join("copilot"),
        &h.work,
        &mock.url(),
    );
    h.start_daemon();
    let hooks = home.copilot_dir().join("hooks/clibot.json");
    watch_only_cli_reports_through_its_global_hooks(
        &h,
        "copilot",
        (&h.dir.path().join("copilot/home"), &home.env()),
        &home.argv(),
        "/commands·?help",
        &marker,
    );
    assert!(!hooks.exists(), "uninstall took clibot's hooks file away");
}

#[test]
fn real_cli_a_qwen_in_a_plain_terminal_reports_through_its_global_hooks() {
    clibot_tests::qwen::require_qwen();
    let mut h = Harness::with_config("");
    let marker = h.work.join("marker.txt");
    let mock = MockLlm::start(unmanaged_rules(
        "run_shell_command",
        json!({ "command": format!("touch {}", marker.display()), "description": "Create a marker file", "is_background": false }),
    ));
    let home = clibot_tests::qwen::QwenHome::new(&h.dir.path().join("qwen"), &mock.url());
    let settings = home.qwen_dir().join("settings.json");
    h.start_daemon();
    watch_only_cli_reports_through_its_global_hooks(
        &h,
        "qwen",
        (&h.dir.path().join("qwen/home"), &home.env()),
        &home.argv(),
        "Typeyourmessage",
        &marker,
    );
    // Qwen Code writes its own settings version in (an edit since install): only clibot's
    // entries are taken out.
    let after = std::fs::read_to_string(&settings).expect("settings");
    assert!(!after.contains("clibotctl"), "{after}");
    assert!(
        after.contains("approvalMode"),
        "the user's settings stay: {after}"
    );
}
