//! End to end with the real Qwen Code (pinned in tests/node, run with tests/node-runtime's
//! Node.js) driven by clibotd, offline, against the mock's Chat Completions API: the reply from
//! the `Stop` hook, a shell command's dialog answered Yes and No from the fake Telegram (a No
//! ends the turn without `Stop`: the idle notification does) and at the terminal, messages sent
//! the instant each reply lands, a daemon killed mid-turn, a cancel, and a hibernated session
//! woken with its conversation.
//!
//! Never skipped: without `tests/node` installed they fail and say how to install it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clibot_tests::mock_llm::{MockLlm, Rule};
use clibot_tests::qwen::{QwenHome, UNSET_ENV, require_qwen};
use clibot_tests::{Harness, tested_version};
use clibot_tests::{approvals, live};
use serde_json::{Value, json};

/// The clibot session every test runs.
const SESSION: &str = "qw";

const REPLY: &str = "Hello from the mock model.\nThis is line two.";

struct Setup {
    h: Harness,
    mock: MockLlm,
    home: QwenHome,
}

/// A daemon whose `qwen` CLI is the pinned Qwen Code in a seeded private home, talking to a
/// mock with `rules(work_dir)`; session `qw` spawned in the work directory and ready.
fn setup(rules: impl Fn(&Path) -> Vec<Rule>, extra: &str) -> Setup {
    require_qwen();
    let mut h = Harness::with_config(extra);
    let work = h.work.clone();
    let mock = MockLlm::start(rules(&work));
    let home = QwenHome::new(&h.dir.path().join("qwen"), &mock.url());
    h.add_cli("qwen", &home.argv(), &home.env(), "");
    h.start_daemon_without(UNSET_ENV);
    let w = work.display().to_string();
    h.ctl_ok(&["spawn", SESSION, "--cli", "qwen", "--dir", &w]);
    wait_event(&h, "the session to be ready", |e| {
        e["type"] == "state_changed" && e["to"] == "idle"
    });
    Setup { h, mock, home }
}

fn wait_event(h: &Harness, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    h.wait_event(SESSION, what, Duration::from_secs(60), pred)
}

fn wait_event_after(h: &Harness, seq: u64, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    wait_event(h, what, |e| {
        e["seq"].as_u64().is_some_and(|s| s > seq) && pred(e)
    })
}

fn rules(work: &Path) -> Vec<Rule> {
    approvals::rules(
        work,
        "run_shell_command",
        json!({ "description": "Create a marker file", "is_background": false }),
        REPLY,
    )
}

#[test]
fn real_cli_a_reply_arrives_as_turn_completed_with_the_exact_text() {
    let s = setup(rules, "");
    let since = live::last_seq(&s.h);
    s.h.ctl_ok(&["send", SESSION, "please say hello"]);
    let done = wait_event_after(&s.h, since, "the reply", |e| e["type"] == "turn_completed");
    assert_eq!(done["text"], REPLY, "{done}");
    assert_eq!(done["source"], "hook", "the Stop hook ended it: {done}");
    // The version the session runs, read from the package.
    let list: Value = serde_json::from_str(&s.h.ctl_ok(&["list", "--json"])).expect("json");
    assert_eq!(
        list[0]["cli_version"],
        tested_version("qwen").as_str(),
        "{list}"
    );
    // The user's own settings were not edited (clibot's hooks are in the session's own), and
    // the conversation is in the user's own projects, under the id clibot chose.
    let settings =
        std::fs::read_to_string(s.home.qwen_dir().join("settings.json")).expect("settings.json");
    assert!(!settings.contains("clibotctl"), "{settings}");
    let chats: Vec<PathBuf> = std::fs::read_dir(s.home.qwen_dir().join("projects"))
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|p| {
            std::fs::read_dir(p.path().join("chats"))
                .into_iter()
                .flatten()
                .flatten()
        })
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    assert_eq!(chats.len(), 1, "{chats:?}");
}

#[test]
fn real_cli_a_permission_answered_yes_then_no_from_telegram() {
    let s = setup(rules, approvals::ACCESS);
    approvals::yes_then_no_from_telegram(&s.h, SESSION, 4, || {});
}

#[test]
fn real_cli_answering_at_the_terminal_resolves_the_prompt() {
    let s = setup(rules, "");
    approvals::answered_at_the_terminal(&s.h, SESSION, 4);
    // What the turn cost, from Qwen Code's conversation file: two answers (the command, the
    // reply), each 10 prompt and 5 completion tokens, none cached (the mock's).
    let done =
        s.h.events()
            .into_iter()
            .rfind(|e| e["type"] == "turn_completed")
            .expect("the turn completed");
    let u = wait_event(&s.h, "the turn's usage", |e| {
        e["type"] == "turn_usage" && e["turn_seq"] == done["seq"]
    });
    assert_eq!(
        (&u["input"], &u["output"], &u["cache_read"], &u["calls"]),
        (&json!(20), &json!(10), &json!(0), &json!(2)),
        "{u}"
    );
    assert_eq!(u["model"], "mock-model", "{u}");
}

#[test]
fn real_cli_messages_sent_the_instant_each_reply_lands_all_get_replies() {
    let s = setup(|_| live::numbered_rules(5), "");
    live::rapid_turns(&s.h, SESSION, 5, true, Duration::from_secs(60));
}

#[test]
fn real_cli_a_turn_across_a_daemon_kill_9_is_reported_once() {
    let mut s = setup(|_| live::restart_rules(), "");
    live::killed_mid_turn(&mut s.h, &s.mock, SESSION, UNSET_ENV);
}

#[test]
fn real_cli_cancel_interrupts_a_long_turn_and_the_next_one_runs() {
    let s = setup(|_| live::cancel_rules(), "");
    live::cancel_long_turn(&s.h, SESSION, &s.mock, "keys C-u Escape");
}

#[test]
fn real_cli_a_hibernated_session_is_woken_by_a_message_and_keeps_its_history() {
    let s = setup(|_| live::wake_rules(), "");
    live::hibernate_and_wake(&s.h, SESSION, "qwen", &s.mock, |text| {
        s.h.ctl_ok(&["send", SESSION, text]);
    });
}

/// Qwen Code started by hand in a tmux server that is not clibot's: `discover` finds it once
/// (not the copy of itself it relaunches as), with its version and the conversation it holds;
/// `resume` continues that conversation under clibot.
#[test]
fn real_cli_a_qwen_started_outside_clibot_is_discovered_and_resumed_with_its_history() {
    require_qwen();
    let mut h = Harness::with_config("");
    let mock = MockLlm::start(vec![
        Rule::text("say hello", REPLY),
        Rule::text("say again", "Again."),
    ]);
    let home = QwenHome::new(&h.dir.path().join("qwen"), &mock.url());
    h.add_cli("qwen", &home.argv(), &home.env(), "");
    h.start_daemon_without(UNSET_ENV);
    let idle =
        |s: &str| s.contains("Type your message or @path/to/file") && !s.contains("esc to cancel");
    live::discovered_and_resumed(
        &h,
        &mock,
        "qwen",
        (&home.argv(), &home.env()),
        UNSET_ENV,
        idle,
        "This is line two.",
        SESSION,
    );
}
