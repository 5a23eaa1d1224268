//! End to end with the real Codex CLI (pinned in tests/node) driven by clibotd, offline, against
//! the mock Responses API: the final reply from Codex's `notify` program, and a command that asks
//! to leave the sandbox, shown with the approval dialog's options and answered yes or no through
//! clibot, or at the terminal; and the next message sent the instant a reply lands.
//!
//! Never skipped: without `tests/node` installed they fail and say how to install it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clibot_tests::Harness;
use clibot_tests::codex::{CodexHome, UNSET_ENV, require_codex};
use clibot_tests::mock_llm::{MockLlm, Rule};
use serde_json::{Value, json};

/// The clibot session every test runs.
const SESSION: &str = "cx";

const REPLY: &str = "Hello from the mock model.\nThis is line two.";
const DONE: &str = "All done: the marker exists.";

struct Setup {
    h: Harness,
    mock: MockLlm,
    work: PathBuf,
}

/// A daemon whose `codex` CLI is the pinned Codex in a seeded private home, talking to a mock
/// with the rules `rules(work_dir)`; the session `cx` is spawned in the work directory and has
/// become ready.
fn setup(rules: impl Fn(&Path) -> Vec<Rule>) -> Setup {
    setup_with(rules, "")
}

/// [`setup`] with `extra` in the config file.
fn setup_with(rules: impl Fn(&Path) -> Vec<Rule>, extra: &str) -> Setup {
    require_codex();
    let mut h = Harness::with_config(extra);
    let work = h.work.clone();
    let mock = MockLlm::start(rules(&work));
    let codex = CodexHome::new(&h.dir.path().join("codex"), &work, &mock.url());
    h.add_cli("codex", &codex.argv(), &codex.env(), "");
    h.start_daemon_without(UNSET_ENV);
    let w = work.display().to_string();
    h.ctl_ok(&["spawn", SESSION, "--cli", "codex", "--dir", &w]);
    wait_event(&h, "the session to be ready", |e| {
        e["type"] == "state_changed" && e["to"] == "idle"
    });
    Setup { h, mock, work }
}

fn wait_event(h: &Harness, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    h.wait_event(SESSION, what, Duration::from_secs(60), pred)
}

/// The first event after `seq` that `pred` accepts.
fn wait_event_after(h: &Harness, seq: u64, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    wait_event(h, what, |e| {
        e["seq"].as_u64().is_some_and(|s| s > seq) && pred(e)
    })
}

/// A rule that has the model run `touch <work>/<file>` and ask to run it outside the sandbox,
/// which Codex's `on-request` policy puts to the user; after the command, the model says
/// [`DONE`].
fn touch_rule(work: &Path, trigger: &str, file: &str) -> Rule {
    Rule::tool(
        trigger,
        "exec_command",
        json!({
            "cmd": format!("touch {}", work.join(file).display()),
            "sandbox_permissions": "require_escalated",
            "justification": "Create a marker file",
        }),
        DONE,
    )
}

/// Sends `text` and waits for the approval dialog the command of [`touch_rule`] brings up.
fn ask_for_approval(s: &Setup, text: &str, file: &str) -> Value {
    s.h.ctl_ok(&["send", SESSION, text]);
    let w = wait_event(&s.h, "the approval prompt", |e| e["type"] == "waiting");
    assert_eq!(w["kind"], "permission");
    assert_eq!(w["text"], "Would you like to run the following command?");
    let command = format!("touch {}", s.work.join(file).display());
    assert_eq!(w["subject"], command.as_str());
    let options: Vec<String> = serde_json::from_value(w["options"].clone()).expect("options");
    assert_eq!(options.len(), 3, "{options:?}");
    assert_eq!(options[0], "Yes, proceed (y)");
    assert!(
        options[1].starts_with("Yes, and don't ask again for commands that start with"),
        "{options:?}"
    );
    assert_eq!(
        options[2],
        "No, and tell Codex what to do differently (esc)"
    );
    assert!(
        !s.work.join(file).exists(),
        "nothing runs before the answer"
    );
    w
}

#[test]
fn real_cli_a_reply_arrives_as_turn_completed_with_the_exact_text() {
    let s = setup(|_| vec![Rule::text("say hello", REPLY)]);
    s.h.ctl_ok(&["send", SESSION, "please say hello"]);
    let done = wait_event(&s.h, "turn_completed", |e| e["type"] == "turn_completed");
    assert_eq!(done["text"], REPLY);
    assert_eq!(done["source"], "hook");
    assert_eq!(s.h.ctl_ok(&["last", SESSION]), format!("{REPLY}\n"));
    // The model request carried the typed text as the last user message.
    let main = s
        .mock
        .requests()
        .into_iter()
        .find(|r| r["tools"].as_array().is_some_and(|t| !t.is_empty()))
        .expect("a request offering tools");
    let last_user = main["input"]
        .as_array()
        .and_then(|items| items.iter().rev().find(|i| i["role"] == "user"))
        .expect("a user message");
    assert_eq!(last_user["content"][0]["text"], "please say hello");
    // Nothing but model requests; what Codex fetches on its own (the announcement tip) came
    // to the mock as a proxy and was refused.
    let paths = s.mock.paths();
    assert!(
        paths
            .iter()
            .all(|p| p == "POST /v1/responses" || p.starts_with("CONNECT ")),
        "{paths:?}"
    );
    // Codex's own side requests (the session title) did not end the turn early or twice.
    let completed =
        s.h.events()
            .iter()
            .filter(|e| e["type"] == "turn_completed")
            .count();
    assert_eq!(completed, 1);
}

#[test]
fn real_cli_approving_through_clibot_runs_the_command() {
    let s = setup(|w| vec![touch_rule(w, "make marker", "marker.txt")]);
    let w = ask_for_approval(&s, "please make marker", "marker.txt");
    let id = w["prompt_id"].as_str().expect("prompt id").to_string();
    s.h.ctl_ok(&["answer", SESSION, "yes", "--prompt", &id]);
    let done = wait_event(&s.h, "the final reply", |e| e["type"] == "turn_completed");
    assert_eq!(done["text"], DONE);
    assert!(
        s.work.join("marker.txt").exists(),
        "the approved command ran"
    );
    let resolved = wait_event(&s.h, "resolved", |e| e["type"] == "prompt_resolved");
    assert_eq!(
        (
            resolved["by"].as_str(),
            resolved["answer"].as_str(),
            resolved["prompt_id"].as_str()
        ),
        (Some("clibot"), Some("Yes, proceed (y)"), Some(id.as_str()))
    );
    // What the turn cost, from Codex's rollout: two API calls (the command, the answer), each
    // 1200 in of which 800 cached and 8 out; and the plan's windows its answers told.
    let u = wait_event(&s.h, "the turn's usage", |e| {
        e["type"] == "turn_usage" && e["turn_seq"] == done["seq"]
    });
    assert_eq!(
        (&u["input"], &u["output"], &u["cache_read"], &u["calls"]),
        (&json!(800), &json!(16), &json!(1600), &json!(2)),
        "{u}"
    );
    let windows: Vec<(String, f64)> = u["windows"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|w| {
                    (
                        w["name"].as_str().unwrap_or_default().to_string(),
                        w["used_percent"].as_f64().unwrap_or_default(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        windows,
        [("5h".to_string(), 42.0), ("7d".to_string(), 30.0)]
    );
    let text = s.h.ctl_ok(&["usage", "--by", "cli"]);
    assert!(
        text.contains("codex: 5h 42 % (resets in ") && text.contains("· 7d 30 %"),
        "{text}"
    );
    let csv = s.h.ctl_ok(&["usage", "--by", "session", "--csv"]);
    assert_eq!(
        csv.lines().collect::<Vec<_>>(),
        [
            // No money: the key is in a variable of the mock provider's own, not OPENAI_API_KEY.
            "session,turns,calls,input,output,cache_read,cache_write,usd",
            &format!("{SESSION},1,2,800,16,1600,0,")
        ],
        "{csv}"
    );
    let metrics = s.h.ctl_ok(&["metrics"]);
    assert!(
        metrics.contains("clibot_plan_window_used_ratio{cli=\"codex\",window=\"5h\"} 0.42"),
        "{metrics}"
    );
}

#[test]
fn real_cli_declining_through_clibot_ends_the_turn_and_the_next_message_runs() {
    let s = setup(|w| {
        vec![
            touch_rule(w, "make marker", "refused.txt"),
            Rule::text("say hello", REPLY),
        ]
    });
    ask_for_approval(&s, "please make marker", "refused.txt");
    s.h.ctl_ok(&["answer", SESSION, "no"]);
    let resolved = wait_event(&s.h, "resolved", |e| e["type"] == "prompt_resolved");
    assert_eq!(
        (resolved["by"].as_str(), resolved["answer"].as_str()),
        (
            Some("clibot"),
            Some("No, and tell Codex what to do differently (esc)")
        )
    );
    let resolved_at = resolved["seq"].as_u64().expect("seq");
    // Declining interrupts Codex's turn: no notify call, the screen says so.
    let idle = wait_event_after(&s.h, resolved_at, "idle after declining", |e| {
        e["type"] == "state_changed" && e["to"] == "idle"
    });
    assert!(
        !s.work.join("refused.txt").exists(),
        "the command did not run"
    );
    s.h.ctl_ok(&["send", SESSION, "now say hello"]);
    let done = wait_event_after(
        &s.h,
        idle["seq"].as_u64().expect("seq"),
        "the next reply",
        |e| e["type"] == "turn_completed",
    );
    assert_eq!(done["text"], REPLY);
    assert!(!s.work.join("refused.txt").exists());
}

#[test]
fn real_cli_answering_at_the_terminal_resolves_the_prompt() {
    let s = setup(|w| vec![touch_rule(w, "make marker", "desk.txt")]);
    let w = ask_for_approval(&s, "please make marker", "desk.txt");
    let id = w["prompt_id"].as_str().expect("prompt id").to_string();
    // The person at the desk presses 1 in the real terminal: Codex takes a digit at once.
    let mut desk = clibot_tests::desk::Desk::attach(&s.h, SESSION);
    desk.type_text("1");
    let resolved = wait_event(&s.h, "resolved at the terminal", |e| {
        e["type"] == "prompt_resolved"
    });
    assert_eq!(
        (resolved["by"].as_str(), resolved["prompt_id"].as_str()),
        (Some("terminal"), Some(id.as_str()))
    );
    let done = wait_event(&s.h, "the final reply", |e| e["type"] == "turn_completed");
    assert_eq!(done["text"], DONE);
    assert!(s.work.join("desk.txt").exists(), "the command ran");
    let err = s.h.ctl_err(&["answer", SESSION, "1", "--prompt", &id]);
    assert!(err.contains("already resolved"), "{err}");
}

/// A phone sends the next message the instant the reply lands: Codex is still redrawing after
/// its turn, and the second message must still be typed, submitted and answered (once).
#[test]
fn real_cli_a_message_sent_the_instant_a_reply_lands_is_answered() {
    const BYE: &str = "Bye from the mock model.";
    let s = setup(|_| vec![Rule::text("say hello", REPLY), Rule::text("say bye", BYE)]);
    s.h.ctl_ok(&["send", SESSION, "please say hello"]);
    let first = wait_event(&s.h, "the first reply", |e| e["type"] == "turn_completed");
    assert_eq!(first["text"], REPLY);
    s.h.ctl_ok(&["send", SESSION, "now say bye"]);
    let seq = first["seq"].as_u64().unwrap_or(0);
    let second = wait_event_after(&s.h, seq, "the second reply", |e| {
        e["type"] == "turn_completed"
    });
    assert_eq!(second["text"], BYE);
    // Typed once: the model saw the second message once, and no third turn followed.
    let byes = s
        .mock
        .requests()
        .into_iter()
        .filter(|r| {
            r["input"].as_array().is_some_and(|items| {
                items
                    .iter()
                    .rev()
                    .find(|i| i["role"] == "user")
                    .is_some_and(|u| u["content"][0]["text"] == "now say bye")
            })
        })
        .count();
    assert!(byes >= 1, "the second message reached the model");
    std::thread::sleep(Duration::from_secs(3));
    let completed =
        s.h.events()
            .iter()
            .filter(|e| e["type"] == "turn_completed")
            .count();
    assert_eq!(completed, 2);
}

/// A command rule approves Codex's `touch`, parsed; `rm -rf` that the rule's `*` would match
/// is held by the guard for a person.
#[test]
fn real_cli_a_command_rule_approves_codexs_command_and_the_guard_holds_a_dangerous_one() {
    let s = setup_with(
        |w| {
            vec![
                touch_rule(w, "make marker", "ruled.txt"),
                Rule::tool(
                    "clean up",
                    "exec_command",
                    json!({
                        "cmd": format!("rm -rf {}", w.join("build").display()),
                        "sandbox_permissions": "require_escalated",
                        "justification": "Remove the build",
                    }),
                    "Cleaned.",
                ),
            ]
        },
        "\n[[rules]]\ncli = \"codex\"\ncommand = [\"touch *\", \"rm *\"]\naction = \"allow\"\n",
    );
    std::fs::create_dir_all(s.work.join("build")).expect("mkdir");
    s.h.ctl_ok(&["send", SESSION, "please make marker"]);
    let r = wait_event(&s.h, "the rule's answer", |e| {
        e["type"] == "prompt_resolved"
    });
    assert_eq!(r["by"], "rule 1");
    wait_event(&s.h, "the reply", |e| e["type"] == "turn_completed");
    assert!(s.work.join("ruled.txt").exists(), "the rule approved it");
    let since = clibot_tests::live::last_seq(&s.h);
    s.h.ctl_ok(&["send", SESSION, "please clean up"]);
    let w = wait_event_after(&s.h, since, "the guarded prompt", |e| {
        e["type"] == "waiting"
    });
    assert_eq!(w["subject_kind"], "command");
    assert_eq!(w["warning"], "a recursive forced delete (rm -rf)");
    assert_eq!(w["auto"], "");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        s.work.join("build").exists(),
        "nothing ran without a person"
    );
}

/// The daemon stopped (TERM / kill -9) while Codex's model is still answering: the turn is
/// reported once when it ends, and the next runs.
fn real_cli_restart_mid_turn(kill: bool) {
    let mut s = setup(|_| {
        vec![
            Rule::text("first question", "First answer."),
            Rule::text("second question", "Second answer."),
        ]
    });
    clibot_tests::live::restart_mid_turn(
        &mut s.h,
        &s.mock,
        SESSION,
        ("the first question", "First answer."),
        ("the second question", "Second answer."),
        kill,
        UNSET_ENV,
        Duration::from_secs(60),
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

/// Codex started by hand in a tmux server that is not clibot's: `discover` finds it once (its
/// node wrapper, not the native child; the version from the package; its conversation from its
/// rollout), and `resume` continues that conversation in a managed session whose model request
/// carries the earlier exchange.
#[test]
fn real_cli_a_codex_started_outside_clibot_is_discovered_and_resumed_with_its_history() {
    require_codex();
    let mut h = Harness::with_config("");
    let work = h.work.clone();
    let mock = MockLlm::start(vec![
        Rule::text("say hello", REPLY),
        Rule::text("say again", "Again."),
    ]);
    let codex = CodexHome::new(&h.dir.path().join("codex"), &work, &mock.url());
    h.add_cli("codex", &codex.argv(), &codex.env(), "");
    h.start_daemon_without(UNSET_ENV);

    let mut argv = codex.argv();
    argv.push("--no-daemon".into());
    let idle = |s: &str| s.contains("? for shortcuts") && !s.contains("esc to interrupt");
    clibot_tests::live::discovered_and_resumed(
        &h,
        &mock,
        "codex",
        (&argv, &codex.env()),
        UNSET_ENV,
        idle,
        "This is line two.",
        SESSION,
    );
}

#[test]
fn real_cli_cancel_interrupts_a_long_turn_and_the_next_one_runs() {
    let s = setup(|_| clibot_tests::live::cancel_rules());
    clibot_tests::live::cancel_long_turn(&s.h, SESSION, &s.mock, "keys Escape");
}

#[test]
fn real_cli_a_hibernated_session_is_woken_by_a_message_and_keeps_its_history() {
    let s = setup(|_| clibot_tests::live::wake_rules());
    clibot_tests::live::hibernate_and_wake(&s.h, SESSION, "codex", &s.mock, |text| {
        s.h.ctl_ok(&["send", SESSION, text]);
    });
}
