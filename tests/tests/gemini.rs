//! End to end with the real Gemini CLI (pinned in tests/node) driven by clibotd, offline,
//! against the mock model API: the final reply from the AfterAgent hook (read from the
//! transcript: Gemini's own `prompt_response` garbles a reply streamed in pieces), and a shell
//! confirmation announced by the Notification hook, shown with the dialog's options, answered
//! with a key (yes or no) or at the terminal.

use std::time::Duration;

use clibot_tests::Harness;
use clibot_tests::gemini::{GeminiHome, UNSET_ENV, require_gemini};
use clibot_tests::live::last_seq;
use clibot_tests::mock_llm::{MockLlm, Rule};
use serde_json::{Value, json};

struct Setup {
    h: Harness,
    mock: MockLlm,
    work: std::path::PathBuf,
}

fn setup(rules: impl Fn(&std::path::Path) -> Vec<Rule>) -> Setup {
    require_gemini();
    let mut h = Harness::with_config("");
    let work = h.work.clone();
    let mock = MockLlm::start(rules(&work));
    let gemini = GeminiHome::new(&h.dir.path().join("gemini"), &work, &mock.url());
    h.add_cli("gemini", &gemini.argv(), &gemini.env(), "");
    h.start_daemon_without(UNSET_ENV);
    let w = work.display().to_string();
    h.ctl_ok(&["spawn", "gm", "--cli", "gemini", "--dir", &w]);
    Setup { h, mock, work }
}

fn wait_event(h: &Harness, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    h.wait_event("gm", what, Duration::from_secs(90), pred)
}

#[test]
fn real_cli_a_reply_streamed_in_pieces_arrives_exactly() {
    let reply = "Hello from the mock model.\nThis is line two, streamed in several pieces.";
    let s = setup(|_| vec![Rule::text("say hello", reply)]);
    // Small pieces: the real API streams like this.
    s.mock.set_chunk_chars(8);
    wait_event(&s.h, "ready", |e| {
        e["type"] == "state_changed" && e["to"] == "idle"
    });
    s.h.ctl_ok(&["send", "gm", "please say hello"]);
    let done = wait_event(&s.h, "turn_completed", |e| e["type"] == "turn_completed");
    assert_eq!(done["text"], reply);
    assert_eq!(done["source"], "hook");
}

#[test]
fn real_cli_a_shell_confirmation_waits_and_a_key_answers_it() {
    let s = setup(|w| {
        let cmd = format!("touch {}", w.join("marker.txt").display());
        vec![Rule::tool(
            "make marker",
            "run_shell_command",
            json!({"command": cmd, "description": "Create a marker"}),
            "Marker created.",
        )]
    });
    wait_event(&s.h, "ready", |e| {
        e["type"] == "state_changed" && e["to"] == "idle"
    });
    s.h.ctl_ok(&["send", "gm", "please make marker"]);
    // The hook announces the prompt before Gemini draws its dialog; the event that carries the
    // dialog's choices is the one a chat can answer (on a loaded machine it may come second).
    let w = wait_event(&s.h, "waiting", |e| {
        e["type"] == "waiting" && e["options"].as_array().is_some_and(|o| !o.is_empty())
    });
    assert_eq!(w["kind"], "permission");
    assert_eq!(w["text"], "Allow execution of [Shell]?");
    assert_eq!(
        w["options"],
        json!([
            "Allow once",
            "Allow for this session",
            "No, suggest changes (esc)"
        ])
    );
    assert_eq!(
        w["subject"],
        format!("touch {}", s.work.join("marker.txt").display()).as_str()
    );
    s.h.ctl_ok(&["answer", "gm", "1"]);
    let done = wait_event(&s.h, "final reply", |e| e["type"] == "turn_completed");
    assert_eq!(done["text"], "Marker created.");
    assert!(s.work.join("marker.txt").exists(), "the command ran");
    let resolved = wait_event(&s.h, "resolved", |e| e["type"] == "prompt_resolved");
    assert_eq!(
        (resolved["by"].as_str(), resolved["answer"].as_str()),
        (Some("clibot"), Some("Allow once"))
    );
    // The user's own Gemini settings were not touched: the hooks live in the session's home.
    let settings =
        std::fs::read_to_string(s.h.dir.path().join("gemini/home/.gemini/settings.json"))
            .expect("settings");
    assert!(!settings.contains("clibot"), "{settings}");
    // What the turn cost, from Gemini CLI's chat file: two answers (the command, the reply),
    // each 1500 in of which 500 cached, 6 out and 2 of thoughts (the mock's).
    let u = wait_event(&s.h, "the turn's usage", |e| {
        e["type"] == "turn_usage" && e["turn_seq"] == done["seq"]
    });
    assert_eq!(
        (&u["input"], &u["output"], &u["cache_read"], &u["calls"]),
        (&json!(2000), &json!(16), &json!(1000), &json!(2)),
        "{u}"
    );
}

fn touch_rule(work: &std::path::Path, file: &str) -> Rule {
    let cmd = format!("touch {}", work.join(file).display());
    Rule::tool(
        "make marker",
        "run_shell_command",
        json!({"command": cmd, "description": "Create a marker"}),
        "Marker created.",
    )
}

/// The confirmation event that carries the dialog's options (see above).
fn wait_dialog(h: &Harness) -> Value {
    wait_event(h, "waiting with the dialog's options", |e| {
        e["type"] == "waiting" && e["options"].as_array().is_some_and(|o| !o.is_empty())
    })
}

#[test]
fn real_cli_answering_no_is_handled() {
    let s = setup(|w| {
        // Gemini sends the refused request's text again with the next one (in one user
        // turn), so the next message's rule comes first.
        vec![
            Rule::text("say hello", "Hello after the refusal."),
            touch_rule(w, "refused.txt"),
        ]
    });
    wait_event(&s.h, "ready", |e| {
        e["type"] == "state_changed" && e["to"] == "idle"
    });
    s.h.ctl_ok(&["send", "gm", "please make marker"]);
    let w = wait_dialog(&s.h);
    let id = w["prompt_id"].as_str().expect("prompt id").to_string();
    s.h.ctl_ok(&["answer", "gm", "3"]);
    let resolved = wait_event(&s.h, "resolved", |e| e["type"] == "prompt_resolved");
    assert_eq!(
        (
            resolved["by"].as_str(),
            resolved["answer"].as_str(),
            resolved["prompt_id"].as_str()
        ),
        (
            Some("clibot"),
            Some("No, suggest changes (esc)"),
            Some(id.as_str())
        )
    );
    // Gemini cancels the request ("ℹ Request cancelled.") without asking the model again, and
    // no AfterAgent hook runs: the turn ends when the daemon sees the idle composer, with no
    // reply text.
    let after = resolved["seq"].as_u64();
    let done = wait_event(&s.h, "the turn to end", |e| {
        e["seq"].as_u64() > after && e["type"] == "turn_completed"
    });
    assert_eq!(
        (done["source"].as_str(), done["text"].as_str()),
        (Some("idle"), Some(""))
    );
    wait_event(&s.h, "idle after the refusal", |e| {
        e["seq"].as_u64() > after && e["type"] == "state_changed" && e["to"] == "idle"
    });
    s.h.wait_screen("gm", "the cancellation", |t| {
        t.contains("Request cancelled.")
    });
    assert!(
        !s.work.join("refused.txt").exists(),
        "the command did not run"
    );
    let err = s.h.ctl_err(&["answer", "gm", "1", "--prompt", &id]);
    assert!(err.contains("already resolved"), "{err}");
    // The session takes the next message.
    let mark = last_seq(&s.h);
    s.h.ctl_ok(&["send", "gm", "please say hello"]);
    let done = wait_event(&s.h, "the next reply", |e| {
        e["seq"].as_u64() > Some(mark) && e["type"] == "turn_completed"
    });
    assert_eq!(done["text"], "Hello after the refusal.");
    assert!(!s.work.join("refused.txt").exists());
}

#[test]
fn real_cli_answering_at_the_terminal_resolves_the_prompt() {
    let s = setup(|w| vec![touch_rule(w, "desk.txt")]);
    wait_event(&s.h, "ready", |e| {
        e["type"] == "state_changed" && e["to"] == "idle"
    });
    s.h.ctl_ok(&["send", "gm", "please make marker"]);
    let w = wait_dialog(&s.h);
    // The person at the desk reads the dialog, then presses 1 in the real terminal.
    s.h.wait_screen("gm", "the dialog", |t| t.contains("1. Allow once"));
    std::thread::sleep(Duration::from_millis(1000));
    let mut desk = clibot_tests::desk::Desk::attach(&s.h, "gm");
    desk.type_text("1");
    let resolved = wait_event(&s.h, "resolved at the terminal", |e| {
        e["type"] == "prompt_resolved"
    });
    assert_eq!(
        (resolved["by"].as_str(), resolved["prompt_id"].as_str()),
        (Some("terminal"), w["prompt_id"].as_str())
    );
    let done = wait_event(&s.h, "final reply", |e| e["type"] == "turn_completed");
    assert_eq!(done["text"], "Marker created.");
    assert!(s.work.join("desk.txt").exists(), "the command ran");
    let err = s.h.ctl_err(&["answer", "gm", "1"]);
    assert!(
        err.contains("not waiting") || err.contains("already resolved"),
        "{err}"
    );
}

/// Five messages, each sent the instant the previous reply lands (as a phone does), with a
/// message typed at the desk in between: five replies and the desk's, each once, and the
/// session idle at the end. Gemini CLI used to wedge here after its first reply.
#[test]
fn real_cli_messages_sent_the_instant_each_reply_lands_all_get_replies() {
    let s = setup(|_| clibot_tests::live::numbered_rules(5));
    wait_event(&s.h, "ready", |e| {
        e["type"] == "state_changed" && e["to"] == "idle"
    });
    clibot_tests::live::rapid_turns(&s.h, "gm", 5, true, Duration::from_secs(90));
}

/// The same on a loaded machine: a busy loop on every core, so the TUI draws late.
#[test]
fn real_cli_messages_sent_the_instant_each_reply_lands_all_get_replies_under_load() {
    let s = setup(|_| clibot_tests::live::numbered_rules(5));
    wait_event(&s.h, "ready", |e| {
        e["type"] == "state_changed" && e["to"] == "idle"
    });
    let _load = clibot_tests::live::CpuLoad::start();
    clibot_tests::live::rapid_turns(&s.h, "gm", 5, true, Duration::from_secs(180));
}

/// The daemon stopped (TERM / kill -9) while Gemini CLI's model is still answering: the turn
/// is reported once when it ends, and the next runs.
fn real_cli_restart_mid_turn(kill: bool) {
    let mut s = setup(|_| {
        vec![
            Rule::text("first question", "First answer."),
            Rule::text("second question", "Second answer."),
        ]
    });
    wait_event(&s.h, "ready", |e| {
        e["type"] == "state_changed" && e["to"] == "idle"
    });
    clibot_tests::live::restart_mid_turn(
        &mut s.h,
        &s.mock,
        "gm",
        ("the first question", "First answer."),
        ("the second question", "Second answer."),
        kill,
        UNSET_ENV,
        Duration::from_secs(90),
    );
}

#[test]
fn real_cli_a_turn_across_a_daemon_term_is_reported_once() {
    real_cli_restart_mid_turn(false);
}

#[test]
fn real_cli_a_turn_across_a_daemon_kill_9_is_reported_once() {
    real_cli_restart_mid_turn(true);
}

#[test]
fn real_cli_cancel_interrupts_a_long_turn_and_the_next_one_runs() {
    let s = setup(|_| clibot_tests::live::cancel_rules());
    wait_event(&s.h, "ready", |e| {
        e["type"] == "state_changed" && e["to"] == "idle"
    });
    clibot_tests::live::cancel_long_turn(&s.h, "gm", &s.mock, "keys Escape");
}

#[test]
fn real_cli_a_hibernated_session_is_woken_by_a_message_and_keeps_its_history() {
    let s = setup(|_| clibot_tests::live::wake_rules());
    wait_event(&s.h, "ready", |e| {
        e["type"] == "state_changed" && e["to"] == "idle"
    });
    clibot_tests::live::hibernate_and_wake(&s.h, "gm", "gemini", &s.mock, |text| {
        s.h.ctl_ok(&["send", "gm", text]);
    });
}
