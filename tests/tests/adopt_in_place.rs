//! A CLI started by hand in a tmux server that is not clibot's, adopted where it runs: with
//! the real Claude Code against the mock model, clibot drives that very pane through a turn
//! and a permission prompt, keeps following it across a daemon kill -9, and lets it go again
//! leaving nothing of its own on the user's server.

use std::time::Duration;

use clibot_tests::Harness;
use clibot_tests::claude::{ClaudeHome, UNSET_ENV};
use clibot_tests::mock_llm::{MockLlm, Rule};
use clibot_tests::tmux_driver::TmuxDriver;
use serde_json::{Value, json};

fn wait_event(h: &Harness, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    h.wait_event("desk", what, Duration::from_secs(60), pred)
}

#[test]
fn real_cli_a_claude_in_another_tmux_server_is_adopted_where_it_runs_and_driven() {
    assert!(clibot_tests::claude::claude_available());
    let mut h = Harness::with_config("");
    let work = h.work.clone();
    let marker = work.join("marker.txt");
    let mock = MockLlm::start(vec![
        Rule::text("say hello", "Hello from the mock model."),
        Rule::text("say again", "Again."),
        Rule::tool(
            "make marker",
            "Bash",
            json!({"command": format!("touch {}", marker.display()), "description": "Create a marker file"}),
            "All done: the marker exists.",
        ),
    ]);
    let claude = ClaudeHome::new(&h.dir.path().join("claude"), &work, &mock.url());
    h.add_cli("claude", &claude.argv(), &claude.env(), "");
    h.start_daemon_without(UNSET_ENV);

    // The user's own tmux server, with Claude Code started in it by hand.
    let desk = TmuxDriver {
        socket: h.dir.path().join("desk.sock"),
        target: "mine",
        unset: UNSET_ENV,
    };
    let w = work.display().to_string();
    desk.start(&w, &claude.env(), &claude.argv());
    let idle = |s: &str| s.contains("? for shortcuts") && !s.contains("esc to interrupt");
    desk.wait("the idle prompt", Duration::from_secs(60), idle);
    desk.submit("please say hello");
    desk.wait("the reply", Duration::from_secs(60), |s| {
        s.contains("Hello from the mock model.") && idle(s)
    });
    let socket = desk.socket.display().to_string();

    let found: Value = serde_json::from_str(&h.ctl_ok(&["discover", "--json"])).expect("json");
    let found = found
        .as_array()
        .and_then(|a| {
            a.iter()
                .find(|f| f["cli"] == "claude" && f["dir"] == w.as_str())
                .cloned()
        })
        .unwrap_or_else(|| panic!("claude not discovered: {found:#}"));
    assert_eq!(found["where"]["server"], socket.as_str(), "{found}");
    assert_eq!(found["actions"], json!(["adopt", "resume"]), "{found}");
    let pane = found["where"]["pane"].as_str().expect("pane").to_string();
    let pid = found["pid"].as_u64().expect("pid");

    // Adopted in place: same pane, same process.
    let bad = h.ctl_err(&[
        "adopt",
        "desk",
        "--server",
        "/nonexistent/sock",
        "--pane",
        &pane,
    ]);
    assert!(bad.contains("no tmux socket"), "{bad}");
    let adopted: Value = serde_json::from_str(&h.ctl_ok(&[
        "adopt", "desk", "--server", &socket, "--pane", &pane, "--json",
    ]))
    .expect("json");
    assert_eq!(
        adopted["cli"], "claude",
        "the CLI was read off the process tree"
    );
    assert_eq!(adopted["server"], socket.as_str());
    let again = h.ctl_err(&["adopt", "desk2", "--server", &socket, "--pane", &pane]);
    assert!(again.contains("already managed"), "{again}");
    let listed: Value = serde_json::from_str(&h.ctl_ok(&["discover", "--json"])).expect("json");
    assert!(
        !listed
            .as_array()
            .is_some_and(|a| a.iter().any(|f| f["pid"].as_u64() == Some(pid))),
        "a managed CLI is no longer offered: {listed:#}"
    );

    // A turn typed from clibot reaches the same process; its reply comes back.
    h.ctl_ok(&["send", "desk", "please say again"]);
    let done = wait_event(&h, "the reply", |e| e["type"] == "turn_completed");
    assert!(
        done["text"].as_str().is_some_and(|t| t.contains("Again.")),
        "{done}"
    );
    assert!(
        desk.capture().contains("please say again"),
        "typed into the desk's own pane"
    );

    // kill -9 of the daemon: the new one follows the pane again, on that server.
    h.kill_daemon();
    h.start_daemon_without(UNSET_ENV);
    h.wait_list("re-adopted", |l| {
        l.as_array().is_some_and(|a| {
            a.iter().any(|s| {
                s["name"] == "desk" && s["state"] == "idle" && s["server"] == socket.as_str()
            })
        })
    });

    // A permission dialog in that pane is a prompt, answered from clibot.
    h.ctl_ok(&["send", "desk", "please make marker"]);
    let w8 = wait_event(&h, "the permission prompt", |e| e["type"] == "waiting");
    assert_eq!(w8["kind"], "permission", "{w8}");
    let id = w8["prompt_id"].as_str().expect("id").to_string();
    h.ctl_ok(&["answer", "desk", "1", "--prompt", &id]);
    wait_event(&h, "the final reply", |e| {
        e["type"] == "turn_completed"
            && e["text"]
                .as_str()
                .is_some_and(|t| t.contains("All done: the marker exists."))
    });
    assert!(marker.exists(), "the tool ran");

    // Released: the CLI goes on where it was, and nothing of clibot's stays on that server.
    h.ctl_ok(&["release", "desk"]);
    let sessions = desk.run(&["list-sessions", "-F", "#{session_name}"], None);
    let names = String::from_utf8_lossy(&sessions.stdout).to_string();
    assert_eq!(names.trim(), "mine", "only the user's session is left");
    assert!(
        std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the CLI still runs"
    );
}
