//! What a stopped daemon left half done is taken up by the next one: input queued for a
//! ready session is typed, a CLI that failed while no daemon ran is started again by its
//! restart policy, a restart due during the backoff is made. Real clibotd, clibotctl and bash
//! in tmux; the daemon is killed with SIGKILL, so no shutdown code runs.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use clibot_tests::{Harness, lines};
use serde_json::Value;

fn spawn_bash(h: &Harness, name: &str) -> String {
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", name, "--cli", "bash", "--dir", &work]);
    h.wait_screen(name, "the prompt", |s| s.contains("$"));
    let list: Value = serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    list[0]["id"].as_str().expect("an id").to_string()
}

/// A daemon killed between a turn's end and typing the next queued message leaves an idle
/// session with input queued (its queue file on disk, as written here). The next daemon types
/// it at once — before, nothing ever did, and every later message queued behind it.
#[test]
fn input_queued_for_an_idle_session_is_typed_when_the_daemon_starts() {
    let mut h = Harness::new();
    h.start_daemon();
    let id = spawn_bash(&h, "r");
    h.kill_daemon();
    let queues = h.state_dir.join("queues");
    std::fs::create_dir_all(&queues).expect("queues dir");
    std::fs::write(
        queues.join(format!("{id}.jsonl")),
        "{\"push\":\"echo left-$((2*3))\"}\n{\"push\":\"echo left-$((2*4))\"}\n",
    )
    .expect("queue file");
    h.start_daemon();
    h.wait_screen("r", "both queued messages typed, in order", |s| {
        let l = lines(s);
        let (a, b) = (
            l.iter().position(|x| *x == "left-6"),
            l.iter().position(|x| *x == "left-8"),
        );
        matches!((a, b), (Some(a), Some(b)) if a < b)
    });
    // Nothing is stuck behind them: a new message is typed, not queued.
    h.wait_list("idle again", |l| l[0]["state"] == "idle");
    let out = h.ctl(&["send", "r", "echo fresh-$((3*3))"]);
    assert!(out.status.success(), "{out:?}");
    h.wait_screen("r", "a later message", |s| lines(s).contains(&"fresh-9"));
    let queued = h.ctl_ok(&["queue", "r"]);
    assert!(!queued.contains("left-"), "the queue is empty: {queued}");
}

/// `restart = "on-failure"`: a CLI that exits with a failure while no daemon runs is found
/// dead by the next daemon, which says so and starts it again — once.
#[test]
fn a_cli_that_failed_while_no_daemon_ran_is_started_again() {
    let mut h = Harness::with_daemon_keys("restart = \"on-failure\"");
    h.start_daemon();
    spawn_bash(&h, "r");
    let list: Value = serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    let tmux = list[0]["tmux_session"].as_str().unwrap_or("r").to_string();
    h.kill_daemon();
    let out = h.tmux(&["send-keys", "-t", &format!("={tmux}:"), "-l", "exit 3"]);
    assert!(out.status.success(), "{out:?}");
    h.tmux(&["send-keys", "-t", &format!("={tmux}:"), "Enter"]);
    // The pane is kept dead (remain-on-exit) for the next daemon to read.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let o = h.tmux(&[
            "list-panes",
            "-t",
            &format!("={tmux}:"),
            "-F",
            "#{pane_dead}",
        ]);
        if String::from_utf8_lossy(&o.stdout).trim() == "1" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the shell did not exit"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    h.start_daemon();
    let notice = h.wait_event("r", "the restart notice", Duration::from_secs(30), |e| {
        e["type"] == "notice" && e["kind"] == "restart"
    });
    let text = notice["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("status 3") && text.contains("starting it again"),
        "{notice}"
    );
    h.wait_list("started again", |l| l[0]["state"] == "idle");
    h.ctl_ok(&["send", "r", "echo back-$((5*5))"]);
    h.wait_screen("r", "the new shell answers", |s| {
        lines(s).contains(&"back-25")
    });
    let restarts = h
        .events()
        .into_iter()
        .filter(|e| e["type"] == "notice" && e["kind"] == "restart")
        .count();
    assert_eq!(restarts, 1, "one exit, one restart: {:#?}", h.events());
}

/// A daemon killed during the backoff before a restart after a failure: the restart it had
/// scheduled is on disk, and the next daemon makes it (once).
#[test]
fn a_restart_due_when_the_daemon_died_is_made_by_the_next() {
    let mut h = Harness::with_daemon_keys("restart = \"on-failure\"");
    h.start_daemon();
    spawn_bash(&h, "r");
    h.ctl_ok(&["send", "r", "exit 4"]);
    h.wait_event("r", "the restart notice", Duration::from_secs(30), |e| {
        e["type"] == "notice" && e["kind"] == "restart"
    });
    h.kill_daemon();
    h.start_daemon();
    h.wait_list("started again", |l| l[0]["state"] == "idle");
    h.ctl_ok(&["send", "r", "echo again-$((6*6))"]);
    h.wait_screen("r", "the new shell answers", |s| {
        lines(s).contains(&"again-36")
    });
    let spawned = h
        .events()
        .into_iter()
        .filter(|e| e["type"] == "exited" && e["session"] == "r")
        .count();
    assert_eq!(
        spawned,
        1,
        "the one exit is reported once: {:#?}",
        h.events()
    );
}

/// `clibotctl events --follow | head -1`: the reader goes away, and clibotctl ends quietly
/// (no panic about a broken pipe).
#[test]
fn clibotctl_ends_quietly_on_a_closed_pipe() {
    let mut h = Harness::new();
    h.start_daemon();
    spawn_bash(&h, "r");
    let mut child = h
        .ctl_command(&["events", "--follow", "--since", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("clibotctl");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    out.read_line(&mut first).expect("a first line");
    assert!(!first.is_empty());
    drop(out);
    // More events, so clibotctl writes into the closed pipe.
    for i in 0..5 {
        h.ctl_ok(&["send", "r", &format!("echo more-{i}")]);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("try_wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("clibotctl events --follow did not end after its reader went away");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let done = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(!err.contains("panicked") && err.trim().is_empty(), "{err}");
}

/// A daemon killed between typing a queued message and pressing Enter (here a CLI whose
/// `submit_delay_ms` is 3 s holds that window open): the next daemon finds the message on the
/// input line and submits it — the CLI receives it once, not typed twice on one line.
#[test]
fn a_queued_message_half_typed_when_the_daemon_died_is_submitted_once() {
    let mut h = Harness::with_config(
        "\n[cli.slowsh]\nargv = [\"bash\", \"--norc\", \"--noprofile\"]\nenv = { PS1 = \"$ \" }\nsubmit_delay_ms = 3000\n",
    );
    h.start_daemon();
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "q", "--cli", "slowsh", "--dir", &work]);
    h.wait_screen("q", "the prompt", |s| s.contains("$"));
    h.ctl_ok(&["send", "q", "sleep 1"]);
    h.wait_list("working", |l| l[0]["state"] == "working");
    let out = h.ctl(&["send", "q", "echo once-$((7*6))"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with("queued"),
        "{out:?}"
    );
    // Typed, not yet submitted: the daemon dies in that window.
    h.wait_screen("q", "the queued message typed", |s| {
        s.lines()
            .any(|l| l.trim_end().ends_with("echo once-$((7*6))"))
            && !lines(s).contains(&"once-42")
    });
    h.kill_daemon();
    h.start_daemon();
    let screen = h.wait_screen("q", "the message ran", |s| lines(s).contains(&"once-42"));
    std::thread::sleep(Duration::from_secs(4));
    let screen = String::from_utf8_lossy(&h.ctl(&["screen", "q"]).stdout).into_owned() + &screen;
    let now = String::from_utf8_lossy(&h.ctl(&["screen", "q"]).stdout).into_owned();
    assert_eq!(
        lines(&now).iter().filter(|l| **l == "once-42").count(),
        1,
        "typed once: {screen}"
    );
    assert!(
        !now.contains("))echo"),
        "not typed twice on one line: {now}"
    );
}

/// A daemon killed in the instant after it pressed a queued message's Enter, before it could
/// record that it did: the queue file says the Enter was being pressed, the event log has no
/// `input_sent` after that, and the line is empty because the shell took it. The next daemon
/// does not type it again (it only presses Enter, which an empty line ignores).
#[test]
fn a_queued_message_whose_enter_landed_as_the_daemon_died_is_not_typed_again() {
    let mut h = Harness::new();
    h.start_daemon();
    let id = spawn_bash(&h, "e");
    let list: Value = serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    let tmux = list[0]["tmux_session"].as_str().unwrap_or("e").to_string();
    h.kill_daemon();
    let text = "echo entered-$((4*4))";
    h.tmux(&["send-keys", "-t", &format!("={tmux}:"), "-l", text]);
    h.tmux(&["send-keys", "-t", &format!("={tmux}:"), "Enter"]);
    let last_seq = std::fs::read_to_string(h.state_dir.join("events.jsonl"))
        .expect("events")
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|e| e["seq"].as_u64())
        .max()
        .expect("a seq");
    let queues = h.state_dir.join("queues");
    std::fs::create_dir_all(&queues).expect("queues dir");
    std::fs::write(
        queues.join(format!("{id}.jsonl")),
        format!(
            "{}\n{{\"entering\":{last_seq}}}\n",
            serde_json::json!({ "push": text })
        ),
    )
    .expect("queue file");
    h.start_daemon();
    h.wait_list("idle, nothing queued", |l| l[0]["state"] == "idle");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !h.ctl_ok(&["queue", "e"]).contains("nothing is queued") {
        assert!(std::time::Instant::now() < deadline, "the queue empties");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    let screen = String::from_utf8_lossy(&h.ctl(&["screen", "e"]).stdout).into_owned();
    assert_eq!(
        lines(&screen)
            .iter()
            .filter(|l| **l == "entered-16")
            .count(),
        1,
        "run once: {screen}\n{}",
        h.daemon_log()
    );
}

/// `sessions.json` damaged while no daemon ran: the next daemon reads its previous version,
/// brought up to date by the event log — a hibernated session (which tmux no longer knows) is
/// still there and wakes, and the input queued for a running one is typed.
#[test]
fn a_damaged_registry_keeps_hibernated_sessions_and_queues() {
    let mut h = Harness::with_daemon_keys("idle_stop_after = \"2s\"");
    h.start_daemon();
    spawn_bash(&h, "sleepy");
    h.wait_list("hibernated", |l| l[0]["state"] == "hibernated");
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "busy", "--cli", "bash", "--dir", &work]);
    h.ctl_ok(&["send", "busy", "sleep 4; echo first-$((1+1))"]);
    h.ctl_ok(&["send", "busy", "echo queued-$((2+3))"]);
    h.kill_daemon();
    std::fs::write(h.state_dir.join("sessions.json"), "{ damaged").expect("damage");
    h.start_daemon();
    let list: Value = serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    let state = |n: &str| {
        list.as_array()
            .and_then(|a| a.iter().find(|s| s["name"] == n))
            .map(|s| s["state"].clone())
    };
    assert_eq!(state("sleepy"), Some("hibernated".into()), "{list:#}");
    h.wait_screen("busy", "the queued message typed", |s| {
        lines(s).contains(&"queued-5")
    });
    h.ctl_ok(&["send", "sleepy", "echo awake-$((3*3))"]);
    h.wait_screen("sleepy", "woken", |s| lines(s).contains(&"awake-9"));
    let status = h.ctl_ok(&["status"]);
    assert!(status.contains("previous version"), "{status}");
}
