//! End to end with the real GitHub Copilot CLI (pinned in tests/node) driven by clibotd, offline,
//! against the mock's Anthropic Messages API: the reply from the `agentStop` hook (read from
//! Copilot's events file), a shell command's dialog answered Yes and No from the fake Telegram
//! and at the terminal, messages sent the instant each reply lands, a daemon killed mid-turn,
//! a cancel, and a hibernated session woken with its conversation.
//!
//! Never skipped: without `tests/node` installed they fail and say how to install it.

use std::path::Path;
use std::time::Duration;

use clibot_tests::copilot::{CopilotHome, UNSET_ENV, require_copilot};
use clibot_tests::mock_llm::{MockLlm, Rule};
use clibot_tests::{Harness, tested_version};
use clibot_tests::{approvals, live};
use serde_json::{Value, json};

/// The clibot session every test runs.
const SESSION: &str = "cp";

const REPLY: &str = "Hello from the mock model.\nThis is line two.";

struct Setup {
    h: Harness,
    mock: MockLlm,
    home: CopilotHome,
}

/// A daemon whose `copilot` CLI is the pinned Copilot in a seeded private home, talking to a
/// mock with `rules(work_dir)`; session `cp` spawned in the work directory and ready.
fn setup(rules: impl Fn(&Path) -> Vec<Rule>, extra: &str) -> Setup {
    require_copilot();
    let mut h = Harness::with_config(extra);
    let work = h.work.clone();
    let mock = MockLlm::start(rules(&work));
    let home = CopilotHome::new(&h.dir.path().join("copilot"), &work, &mock.url());
    h.add_cli("copilot", &home.argv(), &home.env(), "");
    h.start_daemon_without(UNSET_ENV);
    let w = work.display().to_string();
    h.ctl_ok(&["spawn", SESSION, "--cli", "copilot", "--dir", &w]);
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
        "bash",
        json!({ "description": "Create a marker file" }),
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
    assert_eq!(
        done["source"], "hook",
        "the agentStop hook ended it: {done}"
    );
    // The version the session runs, read from the package.
    let list: Value = serde_json::from_str(&s.h.ctl_ok(&["list", "--json"])).expect("json");
    assert_eq!(
        list[0]["cli_version"],
        tested_version("copilot").as_str(),
        "{list}"
    );
    // The user's own Copilot home was not edited: clibot's hooks live in the session's own.
    assert!(
        !s.home.copilot_dir().join("hooks").exists(),
        "no hooks written into the user's ~/.copilot"
    );
    // The conversation is kept in the user's own session state (where `copilot --resume`
    // finds it), one for the session.
    let states = s.home.copilot_dir().join("session-state");
    let found: Vec<String> = std::fs::read_dir(&states)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        found.len(),
        1,
        "one conversation in {}: {found:?}",
        states.display()
    );
}

#[test]
fn real_cli_a_permission_answered_yes_then_no_from_telegram() {
    let s = setup(rules, approvals::ACCESS);
    approvals::yes_then_no_from_telegram(&s.h, SESSION, 3, || {
        assert!(
            live::requests_with(&s.mock, "rejected this tool call")
                .iter()
                .any(|r| r.contains("User feedback: No")),
            "Copilot told the model the user said no"
        );
    });
}

#[test]
fn real_cli_answering_at_the_terminal_resolves_the_prompt() {
    let s = setup(rules, "");
    approvals::answered_at_the_terminal(&s.h, SESSION, 3);
    // What the turn cost, from Copilot's events file: two calls (the command, the reply), each
    // 1000 in, 200 cache writes, 3000 cache reads and 7 out (the mock's).
    let done =
        s.h.events()
            .into_iter()
            .rfind(|e| e["type"] == "turn_completed")
            .expect("the turn completed");
    let u = wait_event(&s.h, "the turn's usage", |e| {
        e["type"] == "turn_usage" && e["turn_seq"] == done["seq"]
    });
    clibot_tests::live::assert_usage(&u, [2000, 14, 6000, 400, 2]);
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
    live::cancel_long_turn(&s.h, SESSION, &s.mock, "keys Escape Escape");
}

#[test]
fn real_cli_a_hibernated_session_is_woken_by_a_message_and_keeps_its_history() {
    let s = setup(|_| live::wake_rules(), "");
    live::hibernate_and_wake(&s.h, SESSION, "copilot", &s.mock, |text| {
        s.h.ctl_ok(&["send", SESSION, text]);
    });
}

/// Copilot CLI started by hand in a tmux server that is not clibot's: `discover` finds it once
/// (its npm launcher, not the native program under it), with its version and the conversation
/// it holds open; `resume` continues that conversation under clibot.
#[test]
fn real_cli_a_copilot_started_outside_clibot_is_discovered_and_resumed_with_its_history() {
    require_copilot();
    let mut h = Harness::with_config("");
    let work = h.work.clone();
    let mock = MockLlm::start(vec![
        Rule::text("say hello", REPLY),
        Rule::text("say again", "Again."),
    ]);
    let home = CopilotHome::new(&h.dir.path().join("copilot"), &work, &mock.url());
    h.add_cli("copilot", &home.argv(), &home.env(), "");
    h.start_daemon_without(UNSET_ENV);
    let idle = |s: &str| s.contains("/ commands · ? help") && !s.contains("Working");
    live::discovered_and_resumed(
        &h,
        &mock,
        "copilot",
        (&home.argv(), &home.env()),
        UNSET_ENV,
        idle,
        "This is line two.",
        SESSION,
    );
}
