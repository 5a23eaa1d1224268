//! End to end with the real OpenCode (pinned in tests/node) driven by clibotd, offline, against
//! the mock model API. clibot follows OpenCode's own server (started with `--port` and a
//! password): the final reply comes from its messages when `session.idle` fires, permissions and
//! questions from its events, and answers go back through its API — OpenCode ignores digit keys.

use std::io::{Read, Write};
use std::time::Duration;

use clibot_tests::Harness;
use clibot_tests::mock_llm::{MockLlm, Rule};
use clibot_tests::opencode::{OpenCodeHome, UNSET_ENV, require_opencode};
use serde_json::{Value, json};

/// OpenCode starts in a few seconds, but a loaded machine may take far longer.
const WITHIN: Duration = Duration::from_secs(90);

struct Setup {
    h: Harness,
    mock: MockLlm,
    work: std::path::PathBuf,
}

fn setup(rules: impl Fn(&std::path::Path) -> Vec<Rule>) -> Setup {
    require_opencode();
    let mut h = Harness::with_config("");
    let work = h.work.clone();
    let mock = MockLlm::start(rules(&work));
    let oc = OpenCodeHome::new(&h.dir.path().join("opencode"), &mock.url());
    h.add_cli("opencode", &oc.argv(), &oc.env(), "");
    h.start_daemon_without(UNSET_ENV);
    let w = work.display().to_string();
    h.ctl_ok(&["spawn", "oc", "--cli", "opencode", "--dir", &w]);
    let s = Setup { h, mock, work };
    s.wait("ready", |e| {
        e["type"] == "state_changed" && e["to"] == "idle"
    });
    s
}

impl Setup {
    fn wait_state(&self, what: &str, state: &str) {
        self.h.wait_list(what, |l| l[0]["state"] == state);
    }

    fn wait(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        self.h.wait_event("oc", what, WITHIN, pred)
    }
}

fn touch_rule(work: &std::path::Path) -> Rule {
    let cmd = format!("touch {}", work.join("marker.txt").display());
    Rule::tool(
        "make marker",
        "bash",
        json!({"command": cmd, "description": "Create a marker"}),
        "Marker created.",
    )
}

/// A raw HTTP request to 127.0.0.1:`port`; returns the status line.
fn http_status(port: u16, request: &str) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect to OpenCode");
    s.set_read_timeout(Some(Duration::from_secs(60))).ok();
    s.write_all(request.as_bytes()).expect("send");
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    // Until the status line is in (a loaded machine may answer slowly, in pieces).
    while !got.contains(&b'\n') {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&got)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

#[test]
fn real_cli_a_plain_reply_arrives_exactly_the_server_wants_the_password_and_a_restart_resumes() {
    let reply = "Hello from the mock model.\nThis is line two.";
    let s = setup(|_| {
        vec![
            Rule::text("say again", "Again."),
            Rule::text("say hello", reply),
        ]
    });
    s.h.ctl_ok(&["send", "oc", "please say hello"]);
    let done = s.wait("turn_completed", |e| e["type"] == "turn_completed");
    assert_eq!(done["text"], reply);
    assert_eq!(done["source"], "api");
    assert_eq!(s.h.ctl_ok(&["last", "oc"]), format!("{reply}\n"));
    // The message went through OpenCode's API, and the TUI at the desk shows the conversation.
    s.h.wait_screen("oc", "the conversation in the TUI", |t| {
        t.contains("please say hello") && t.contains("This is line two.")
    });
    s.wait_state("idle", "idle");

    // OpenCode's server answers nobody without the session's password: another local user
    // cannot drive the CLI through its port.
    let registry: Value = serde_json::from_str(
        &std::fs::read_to_string(s.h.state_dir.join("sessions.json")).expect("registry"),
    )
    .expect("registry JSON");
    let port = registry
        .as_array()
        .into_iter()
        .flatten()
        .chain(
            registry
                .get("sessions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten(),
        )
        .find_map(|r| r["api_port"].as_u64())
        .expect("the session's API port is recorded") as u16;
    assert!(port > 0);
    let anonymous = http_status(
        port,
        "GET /session HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(anonymous.contains(" 401"), "{anonymous}");
    // "opencode:wrong" in base64.
    let wrong = http_status(
        port,
        "GET /session HTTP/1.1\r\nHost: x\r\nAuthorization: Basic b3BlbmNvZGU6d3Jvbmc=\r\nConnection: close\r\n\r\n",
    );
    assert!(wrong.contains(" 401"), "{wrong}");

    // A restart continues OpenCode's conversation (`--session`), on a new port and password.
    let mark =
        s.h.events()
            .iter()
            .filter_map(|e| e["seq"].as_u64())
            .max()
            .unwrap_or(0);
    s.h.ctl_ok(&["restart", "oc"]);
    s.wait("ready after the restart", |e| {
        e["seq"].as_u64() > Some(mark) && e["type"] == "state_changed" && e["to"] == "idle"
    });
    s.h.ctl_ok(&["send", "oc", "please say again"]);
    let again = s.wait("reply after the restart", |e| {
        e["seq"].as_u64() > Some(mark) && e["type"] == "turn_completed"
    });
    assert_eq!(again["text"], "Again.");
    let request = s
        .mock
        .requests()
        .iter()
        .map(Value::to_string)
        .rfind(|r| r.contains("please say again"))
        .unwrap_or_default();
    assert!(
        request.contains("please say hello"),
        "the model saw the earlier exchange: {request}"
    );
}

#[test]
fn real_cli_a_shell_command_waits_and_yes_runs_it_even_across_a_daemon_restart() {
    let mut s = setup(|w| vec![touch_rule(w)]);
    s.h.ctl_ok(&["send", "oc", "please make marker"]);
    let w = s.wait("waiting", |e| e["type"] == "waiting");
    assert_eq!(w["kind"], "permission");
    assert_eq!(w["text"], "Run this shell command?");
    assert_eq!(
        w["options"],
        json!(["Allow once", "Allow always", "Reject"])
    );
    let subject = format!("touch {}", s.work.join("marker.txt").display());
    assert_eq!(w["subject"], subject.as_str());
    s.wait_state("waiting", "waiting");

    // The daemon dies while the prompt waits; the restarted one finds the prompt again.
    s.h.kill_daemon();
    s.h.start_daemon_without(UNSET_ENV);
    s.wait_state("still waiting", "waiting");
    let id = w["prompt_id"].as_str().expect("prompt id").to_string();
    s.h.ctl_ok(&["answer", "oc", "yes", "--prompt", &id]);
    let done = s.wait("final reply", |e| e["type"] == "turn_completed");
    assert_eq!(done["text"], "Marker created.");
    assert!(s.work.join("marker.txt").exists(), "the command ran");
    // What the turn cost, from OpenCode's messages: two calls (the command, the reply), each
    // 1000 in, 200 cache writes, 3000 cache reads and 7 out (the mock's).
    let u = s.wait("the turn's usage", |e| {
        e["type"] == "turn_usage" && e["turn_seq"] == done["seq"]
    });
    clibot_tests::live::assert_usage(&u, [2000, 14, 6000, 400, 2]);
    assert_eq!(u["model"], "mock-model", "{u}");
    // Through OpenCode's API, not keys: the restarted daemon re-attached to the request.
    let log = s.h.daemon_log();
    assert!(log.contains(r#"via="api""#), "{log}");
    let resolved = s.wait("resolved", |e| e["type"] == "prompt_resolved");
    assert_eq!(
        (resolved["by"].as_str(), resolved["answer"].as_str()),
        (Some("clibot"), Some("Allow once"))
    );
    // The mock saw the tool's result: OpenCode really ran it, not a fake.
    assert!(
        s.mock
            .requests()
            .iter()
            .any(|r| r.to_string().contains("tool_result")),
        "the tool result went back to the model"
    );
}

#[test]
fn real_cli_no_is_handled_and_the_turn_ends() {
    let s = setup(|w| vec![touch_rule(w)]);
    s.h.ctl_ok(&["send", "oc", "please make marker"]);
    let w = s.wait("waiting", |e| e["type"] == "waiting");
    s.h.ctl_ok(&["answer", "oc", "3"]);
    let resolved = s.wait("resolved", |e| e["type"] == "prompt_resolved");
    assert_eq!(
        (
            resolved["by"].as_str(),
            resolved["answer"].as_str(),
            resolved["prompt_id"].as_str()
        ),
        (Some("clibot"), Some("Reject"), w["prompt_id"].as_str())
    );
    // OpenCode ends the turn after a rejection.
    s.wait("turn end", |e| e["type"] == "turn_completed");
    s.wait_state("idle", "idle");
    assert!(
        !s.work.join("marker.txt").exists(),
        "the command did not run"
    );
}

#[test]
fn real_cli_answering_at_the_terminal_resolves_the_prompt_and_a_late_answer_is_refused() {
    let s = setup(|w| vec![touch_rule(w)]);
    // The session was ready only once the TUI followed the server's events (before, a dialog
    // asked by the server may never be drawn).
    assert!(
        s.h.daemon_log()
            .contains("the TUI follows OpenCode's events"),
        "{}",
        s.h.daemon_log()
    );
    s.h.ctl_ok(&["send", "oc", "please make marker"]);
    let w = s.wait("waiting", |e| e["type"] == "waiting");
    let id = w["prompt_id"].as_str().expect("prompt id").to_string();
    // The person at the desk confirms in the TUI ("Allow once" has the focus).
    s.h.wait_screen("oc", "the dialog", |t| t.contains("Allow once"));
    assert!(
        s.h.tmux(&["send-keys", "-t", "oc", "Enter"])
            .status
            .success()
    );
    let resolved = s.wait("resolved at the terminal", |e| {
        e["type"] == "prompt_resolved"
    });
    assert_eq!(
        (resolved["by"].as_str(), resolved["prompt_id"].as_str()),
        (Some("terminal"), Some(id.as_str()))
    );
    let done = s.wait("final reply", |e| e["type"] == "turn_completed");
    assert_eq!(done["text"], "Marker created.");
    assert!(s.work.join("marker.txt").exists());
    let err = s.h.ctl_err(&["answer", "oc", "1", "--prompt", &id]);
    assert!(err.contains("already resolved"), "{err}");
}

#[test]
fn real_cli_a_question_is_answered_with_a_choice() {
    let s = setup(|_| {
        vec![Rule::tool(
            "which db",
            "question",
            json!({"questions": [{
                "question": "Which database should we use?",
                "header": "Database",
                "options": [
                    {"label": "Postgres", "description": "Relational, robust"},
                    {"label": "SQLite", "description": "Embedded, simple"}
                ]
            }]}),
            "Going with it.",
        )]
    });
    s.h.ctl_ok(&["send", "oc", "which db should we use?"]);
    let w = s.wait("question", |e| e["type"] == "waiting");
    assert_eq!(w["kind"], "question");
    assert_eq!(w["text"], "Which database should we use?");
    assert_eq!(w["options"], json!(["Postgres", "SQLite"]));
    s.h.ctl_ok(&["answer", "oc", "2"]);
    let done = s.wait("final reply", |e| e["type"] == "turn_completed");
    assert_eq!(done["text"], "Going with it.");
    // The model got the choice as the tool's result.
    let last = s
        .mock
        .requests()
        .last()
        .map(Value::to_string)
        .unwrap_or_default();
    assert!(last.contains("SQLite"), "{last}");
}

/// The daemon stopped (TERM / kill -9) while OpenCode's model is still answering: the turn is
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
        "oc",
        ("the first question", "First answer."),
        ("the second question", "Second answer."),
        kill,
        UNSET_ENV,
        WITHIN,
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
fn real_cli_cancel_aborts_a_long_turn_through_the_api_and_the_next_one_runs() {
    let s = setup(|_| clibot_tests::live::cancel_rules());
    clibot_tests::live::cancel_long_turn(&s.h, "oc", &s.mock, "api");
}

#[test]
fn real_cli_a_hibernated_session_is_woken_by_a_message_and_keeps_its_history() {
    let s = setup(|_| clibot_tests::live::wake_rules());
    clibot_tests::live::hibernate_and_wake(&s.h, "oc", "opencode", &s.mock, |text| {
        s.h.ctl_ok(&["send", "oc", text]);
    });
}

/// A process other than the session's own program squats the port clibot gave its OpenCode
/// server (here: the test, while the session's program serves nothing): clibot sends it
/// nothing — not a request, not the session's password.
#[test]
fn a_server_the_session_does_not_run_gets_no_password() {
    let mut h = Harness::with_config(
        "\n[cli.ocshell]\nadapter = \"opencode\"\nargv = [\"sh\", \"-c\", \"PS1='$ ' exec bash --norc --noprofile\", \"sh\"]\nquiet_ms = 300\n",
    );
    h.start_daemon();
    let w = h.work.display().to_string();
    h.ctl_ok(&["spawn", "oc", "--cli", "ocshell", "--dir", &w]);
    let env =
        String::from_utf8_lossy(&h.tmux(&["show-environment", "-t", "oc"]).stdout).into_owned();
    let port: u16 = env
        .lines()
        .find_map(|l| l.strip_prefix("CLIBOT_API_PORT="))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("the session's API port in {env}"));
    let squatter = std::net::TcpListener::bind(("127.0.0.1", port)).expect("take the port");
    squatter.set_nonblocking(true).expect("non-blocking");
    let until = std::time::Instant::now() + Duration::from_secs(8);
    let mut received = Vec::new();
    while std::time::Instant::now() < until {
        if let Ok((mut s, _)) = squatter.accept() {
            let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
            let mut buf = [0u8; 4096];
            if let Ok(n) = s.read(&mut buf) {
                received.extend_from_slice(&buf[..n]);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let text = String::from_utf8_lossy(&received);
    assert!(
        !text.contains("Authorization") && received.is_empty(),
        "clibot talked to a server it did not start: {text}"
    );
    let _ = std::io::stdout().flush();
}
