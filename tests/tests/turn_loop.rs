//! The turn loop holds under a user's timing and faults, with the real clibotd, clibotctl and
//! bash in tmux: a request whose client hangs up still completes; accepted input is typed or
//! said to be lost, never dropped in silence; a missing program is refused at spawn; a CLI that
//! dies at once says why.

use std::process::Stdio;
use std::time::{Duration, Instant};

use clibot_tests::{Harness, lines};
use serde_json::Value;

fn spawn_bash(h: &Harness, name: &str) {
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", name, "--cli", "bash", "--dir", &work]);
    h.wait_screen(name, "the prompt", |s| s.contains("$"));
}

fn wait_event(h: &Harness, name: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    h.wait_event(name, what, Duration::from_secs(30), pred)
}

/// Runs clibotctl with `args` and kills it after `after`, as Ctrl-C or a dying gateway would.
fn hang_up(h: &Harness, args: &[&str], after: Duration) {
    let mut child = h
        .ctl_command(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run clibotctl");
    std::thread::sleep(after);
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_stop_whose_client_hangs_up_still_completes() {
    let mut h = Harness::new();
    h.start_daemon();
    spawn_bash(&h, "s");
    // A foreground command that ignores the quit keys: the stop waits out its timeout (2 s).
    h.ctl_ok(&["send", "s", "trap '' INT; sleep 60"]);
    wait_event(&h, "s", "working", |e| {
        e["type"] == "state_changed" && e["to"] == "working"
    });
    hang_up(&h, &["stop", "s"], Duration::from_millis(700));
    // The stop went on without its client: the session ends and the name is free again; it
    // never sticks as "being stopped".
    let deadline = Instant::now() + Duration::from_secs(20);
    while !h.ctl_ok(&["list"]).contains("no sessions") {
        assert!(Instant::now() < deadline, "{}", h.ctl_ok(&["list"]));
        std::thread::sleep(Duration::from_millis(100));
    }
    wait_event(&h, "s", "stopped", |e| e["type"] == "stopped");
    spawn_bash(&h, "s");
    h.ctl_ok(&["send", "s", "echo again-$((2*4))"]);
    h.wait_screen("s", "the new session works", |s| {
        lines(s).contains(&"again-8")
    });
}

#[test]
fn a_send_whose_client_hangs_up_is_typed_whole_with_its_enter() {
    // A CLI that needs a long pause between text and Enter, so the hang-up falls inside it.
    let mut h = Harness::with_config(
        r#"
[cli.slowbash]
argv = ["bash", "--norc", "--noprofile"]
env = { PS1 = "$ ", HISTFILE = "/dev/null" }
submit_delay_ms = 1500
quiet_ms = 300
"#,
    );
    h.start_daemon();
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "s", "--cli", "slowbash", "--dir", &work]);
    h.wait_screen("s", "the prompt", |s| s.contains("$"));
    hang_up(
        &h,
        &["send", "s", "echo whole-$((5*5))"],
        Duration::from_millis(500),
    );
    h.wait_screen("s", "the command ran: Enter came", |s| {
        lines(s).contains(&"whole-25")
    });
    let sent = wait_event(&h, "s", "input_sent", |e| e["type"] == "input_sent");
    assert_eq!(sent["text"], "echo whole-$((5*5))");
    let audit = std::fs::read_to_string(h.state_dir.join("audit.jsonl")).unwrap_or_default();
    assert!(
        audit
            .lines()
            .any(|l| l.contains("\"send\"") && l.contains("accepted")),
        "the send is audited though nobody waited for it: {audit}"
    );
}

#[test]
fn a_20_kb_line_queued_behind_a_turn_is_typed() {
    let mut h = Harness::new();
    h.start_daemon();
    spawn_bash(&h, "s");
    h.ctl_ok(&["send", "s", "sleep 2"]);
    let long = format!("echo {}-end | wc -c", "x".repeat(20_000));
    let out = h.ctl(&["send", "s", &long]);
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.starts_with("queued:"),
        "{}",
        &said[..said.len().min(300)]
    );
    // Delivered when the sleep ends, through a paste buffer: wc counts 20 000 x, "-end" and
    // the newline.
    h.wait_screen("s", "the long line ran", |s| lines(s).contains(&"20005"));
    let events = h.events();
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "input_sent" && e["text"] == long.as_str()),
        "the whole line was typed"
    );
    assert!(!events.iter().any(|e| e["type"] == "error"), "{events:#?}");
}

#[test]
fn text_with_control_characters_is_refused_and_keys_still_work() {
    let mut h = Harness::new();
    h.start_daemon();
    spawn_bash(&h, "s");
    let err = h.ctl_err(&["send", "s", "\u{4}"]);
    assert!(
        err.contains("control character U+0004") && err.contains("keys"),
        "{err}"
    );
    let err = h.ctl_err(&["send", "s", "echo \u{1b}[31mred"]);
    assert!(err.contains("U+001B"), "{err}");
    // Tabs and newlines are text; the shell is alive.
    h.ctl_ok(&["send", "s", "echo alive-$((1+1)) # a\tb"]);
    h.wait_screen("s", "the shell still runs", |s| {
        lines(s).contains(&"alive-2")
    });
    // Keys are the way to send control keys on purpose.
    h.ctl_ok(&["keys", "s", "C-d"]);
    h.wait_list("the shell ended", |l| l[0]["state"] == "exited");
}

#[test]
fn spawning_a_cli_that_is_not_installed_says_so_and_leaves_nothing() {
    let mut h = Harness::with_config(
        r#"
[cli.ghost]
argv = ["clibot-no-such-cli", "--flag"]
"#,
    );
    h.start_daemon();
    let work = h.work.display().to_string();
    let err = h.ctl_err(&["spawn", "fix", "--cli", "ghost", "--dir", &work]);
    assert!(
        err.contains("\"clibot-no-such-cli\" was not found on the PATH")
            && err.contains("[cli.ghost] argv"),
        "{err}"
    );
    assert!(h.ctl_ok(&["list"]).contains("no sessions"));
    let tmux = String::from_utf8_lossy(&h.tmux(&["list-sessions"]).stdout).into_owned();
    assert!(!tmux.contains("fix"), "{tmux}");
    // The name is free.
    spawn_bash(&h, "fix");
}

/// (tmux 3.3a drops what a pane printed in the last moment before its process exited, so the
/// CLI here lives a second after its message, as a real CLI that loads, complains and quits does.)
#[test]
fn a_cli_that_dies_at_once_says_why() {
    let mut h = Harness::with_config(
        r#"
[cli.broken]
argv = ["sh", "-c", "echo 'fatal: no API key configured (set FOO_API_KEY)'; sleep 1; exit 3"]
"#,
    );
    h.start_daemon();
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "b", "--cli", "broken", "--dir", &work]);
    let exited = wait_event(&h, "b", "exited", |e| e["type"] == "exited");
    assert_eq!(exited["status"], 3);
    assert!(
        exited["output"]
            .as_str()
            .is_some_and(|o| o.contains("fatal: no API key configured")),
        "{exited}"
    );
}

/// A CLI that prints why and wipes its screen as it dies (a full-screen program leaving its
/// alternate screen) leaves a blank pane: the reason comes from its first output, kept outside
/// tmux, and the file holds it with its escapes taken out.
#[test]
fn a_cli_that_dies_with_a_blank_screen_still_says_why() {
    let mut h = Harness::with_config(
        r#"
[cli.wiped]
argv = ["sh", "-c", '''printf '\033[1;31merror:\033[0m the model API refused the key (401)\r\n'; sleep 0.3; printf '\033[2J\033[3J\033[H'; exit 2''']
"#,
    );
    h.start_daemon();
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "w", "--cli", "wiped", "--dir", &work]);
    let exited = wait_event(&h, "w", "exited", |e| e["type"] == "exited");
    let list: Value = serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    let id = list[0]["id"].as_str().expect("id");
    let early = std::fs::read(h.state_dir.join("early").join(format!("{id}.log")))
        .expect("the first output is kept");
    assert!(
        String::from_utf8_lossy(&early).contains("refused the key"),
        "{early:?}\n{}",
        h.daemon_log()
    );
    assert_eq!(exited["status"], 2);
    assert!(
        exited["output"]
            .as_str()
            .is_some_and(|o| o.contains("error: the model API refused the key (401)")),
        "{exited}\n{}",
        h.daemon_log()
    );
}

/// Stopping a session with a dialog up never types the quit into the dialog: the shell's
/// `exit` typed into `read -p "Proceed? [y/n]"` would have answered it. The dialog is
/// dismissed (Escape) when it can be; this one cannot, so nothing is typed and the session is
/// ended after the timeout.
#[test]
fn a_stop_types_nothing_into_a_dialog() {
    let mut h = Harness::new();
    h.start_daemon();
    spawn_bash(&h, "d");
    let answered = h.work.join("answered.txt");
    h.ctl_ok(&[
        "send",
        "d",
        &format!(
            "read -p 'Proceed? [y/n] ' a; echo \"$a\" > {}",
            answered.display()
        ),
    ]);
    wait_event(&h, "d", "the dialog", |e| e["type"] == "waiting");
    let out = h.ctl(&["stop", "d", "--timeout", "1"]);
    assert!(out.status.success(), "{out:?}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !answered.exists(),
        "the dialog was answered by the stop: {:?}",
        std::fs::read_to_string(&answered)
    );
    let list: Value = serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    assert!(
        list.as_array().is_some_and(|a| a.is_empty()),
        "the session is gone: {list}"
    );
}
