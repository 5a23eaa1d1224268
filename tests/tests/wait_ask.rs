//! `clibotctl ask` and `clibotctl wait`, for scripts: `ask` sends a message and prints the reply
//! of its own turn (queued behind a running turn too), a prompt is exit 3 with the prompt, a
//! timeout exit 4, an exited session exit 5; `wait` returns once the session is idle, waits on a
//! prompt, or exited; an unknown session is exit 1 with the daemon's message.

use std::process::Output;
use std::time::{Duration, Instant};

use clibot_tests::Harness;
use serde_json::Value;

fn spawn_bash(h: &Harness, name: &str) {
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", name, "--cli", "bash", "--dir", &work]);
    h.wait_screen(name, "the shell", |t| t.contains('$'));
}

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json_of(out: &Output) -> Value {
    serde_json::from_str(&stdout(out))
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", stdout(out), stderr(out)))
}

/// Runs clibotctl and insists on the exit code.
fn ctl_code(h: &Harness, args: &[&str], want: i32) -> Output {
    let out = h.ctl(args);
    assert_eq!(
        code(&out),
        Some(want),
        "clibotctl {args:?}\nstdout: {}\nstderr: {}\ndaemon log:\n{}",
        stdout(&out),
        stderr(&out),
        h.daemon_log()
    );
    out
}

#[test]
fn ask_prints_the_reply_of_its_own_turn_even_when_queued() {
    let mut h = Harness::new();
    h.start_daemon();
    spawn_bash(&h, "sh");

    let out = ctl_code(
        &h,
        &["ask", "sh", "echo hello-$((6*7))", "--timeout", "2m"],
        0,
    );
    assert!(stdout(&out).contains("hello-42"), "{}", stdout(&out));
    let v = json_of(&ctl_code(
        &h,
        &[
            "ask",
            "sh",
            "echo json-$((1+1))",
            "--json",
            "--timeout",
            "2m",
        ],
        0,
    ));
    assert_eq!(v["session"], "sh");
    assert_eq!(v["outcome"], "replied");
    assert!(
        v["text"].as_str().is_some_and(|t| t.contains("json-2")),
        "{v}"
    );
    assert!(v["prompt"].is_null(), "{v}");
    assert!(v["seq"].as_u64().is_some_and(|s| s > 0), "{v}");

    // `-`: the message from stdin.
    let mut cmd = h.ctl_command(&["ask", "sh", "-", "--timeout", "2m"]);
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("run clibotctl");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(b"echo from-$((2+3))-stdin")
            .expect("write stdin");
    }
    let out = child.wait_with_output().expect("clibotctl ends");
    assert_eq!(code(&out), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("from-5-stdin"), "{}", stdout(&out));

    // A running turn, and a message with the same text as ours queued ahead of it: ours waits
    // for its own turn, the last of the three.
    h.ctl_ok(&["send", "sh", "sleep 2; echo first-turn"]);
    h.wait_list("working", |l| l[0]["state"] == "working");
    let queued: Value =
        serde_json::from_str(&h.ctl_ok(&["send", "sh", "echo twice-$RANDOM", "--json"]))
            .expect("json");
    assert_eq!(queued["queued"], true, "{queued}");
    let v = json_of(&ctl_code(
        &h,
        &[
            "ask",
            "sh",
            "echo twice-$RANDOM",
            "--json",
            "--timeout",
            "2m",
        ],
        0,
    ));
    assert_eq!(v["outcome"], "replied", "{v}");
    let text = v["text"].as_str().unwrap_or_default();
    assert!(text.contains("twice-"), "{v}");
    assert!(!text.contains("first-turn"), "{v}");
    let completed: Vec<Value> = h
        .events()
        .into_iter()
        .filter(|e| e["type"] == "turn_completed")
        .collect();
    let last = completed.last().expect("turns completed");
    assert_eq!(
        last["seq"], v["seq"],
        "the last turn is ours: {completed:#?}"
    );
    let twice = completed
        .iter()
        .filter(|e| e["text"].as_str().is_some_and(|t| t.contains("twice-")))
        .count();
    assert_eq!(twice, 2, "{completed:#?}");
    h.wait_list("idle", |l| l[0]["state"] == "idle");

    // wait --until idle after a send.
    h.ctl_ok(&["send", "sh", "sleep 1; echo waited-for"]);
    ctl_code(&h, &["wait", "sh", "--timeout", "2m"], 0);
    let list: Value = serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    assert_eq!(list[0]["state"], "idle", "{list}");
    assert!(h.ctl_ok(&["last", "sh"]).contains("waited-for"));
    // Already idle: at once.
    let v = json_of(&ctl_code(&h, &["wait", "sh", "--json"], 0));
    assert_eq!(v["outcome"], "reached", "{v}");
}

#[test]
fn a_prompt_is_exit_3_a_timeout_exit_4_an_exit_5() {
    let mut h = Harness::new();
    h.start_daemon();
    spawn_bash(&h, "sh");

    let v = json_of(&ctl_code(
        &h,
        &[
            "ask",
            "sh",
            "read -p 'Ship it? [y/N] ' a; echo ship=$a",
            "--json",
            "--timeout",
            "2m",
        ],
        3,
    ));
    assert_eq!(v["outcome"], "waiting", "{v}");
    let prompt = &v["prompt"];
    assert!(
        prompt["text"]
            .as_str()
            .is_some_and(|t| t.contains("Ship it?")),
        "{v}"
    );
    let id = prompt["prompt_id"].as_str().expect("prompt id").to_string();
    // Waiting on it: `wait` (idle) says so with 3, `wait --until waiting` is satisfied.
    let out = ctl_code(&h, &["wait", "sh"], 3);
    assert!(stdout(&out).contains("Ship it?"), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("clibotctl answer sh"),
        "{}",
        stdout(&out)
    );
    let v = json_of(&ctl_code(
        &h,
        &["wait", "sh", "--until", "waiting", "--json"],
        0,
    ));
    assert_eq!(v["prompt"]["prompt_id"], id.as_str(), "{v}");
    h.ctl_ok(&["answer", "sh", "y", "--prompt", &id]);
    ctl_code(&h, &["wait", "sh", "--timeout", "2m"], 0);
    assert!(h.ctl_ok(&["last", "sh"]).contains("ship=y"));

    // A turn that outlasts the timeout: exit 4, with the JSON all the same.
    let started = Instant::now();
    let v = json_of(&ctl_code(
        &h,
        &["ask", "sh", "sleep 600", "--timeout", "2s", "--json"],
        4,
    ));
    assert_eq!(v["outcome"], "timeout", "{v}");
    assert!(started.elapsed() < Duration::from_secs(60));
    let out = ctl_code(&h, &["wait", "sh", "--timeout", "1s"], 4);
    assert!(stderr(&out).contains("timed out"), "{}", stderr(&out));
    h.ctl_ok(&["cancel", "sh"]);
    ctl_code(&h, &["wait", "sh", "--timeout", "2m"], 0);

    // The shell exits: `wait --until exited` is satisfied, waiting for idle is 5, and so is an
    // `ask` whose session exits under it.
    let v = json_of(&ctl_code(
        &h,
        &["ask", "sh", "exit", "--json", "--timeout", "2m"],
        5,
    ));
    assert_eq!(v["outcome"], "exited", "{v}");
    ctl_code(
        &h,
        &["wait", "sh", "--until", "exited", "--timeout", "2m"],
        0,
    );
    let out = ctl_code(&h, &["wait", "sh"], 5);
    assert!(stderr(&out).contains("exited"), "{}", stderr(&out));
    // Asked once it exited: 5 too, with the daemon's word.
    let out = ctl_code(&h, &["ask", "sh", "echo late"], 5);
    assert!(stderr(&out).contains("has exited"), "{}", stderr(&out));
}

#[test]
fn an_unknown_session_is_exit_1_and_a_bad_duration_exit_2() {
    let mut h = Harness::new();
    h.start_daemon();
    for args in [&["ask", "nosuch", "hi"][..], &["wait", "nosuch"][..]] {
        let out = ctl_code(&h, args, 1);
        assert!(
            stderr(&out).contains("no session named \"nosuch\""),
            "{}",
            stderr(&out)
        );
    }
    // Gone is what --until exited waits for.
    ctl_code(&h, &["wait", "nosuch", "--until", "exited"], 0);
    ctl_code(&h, &["wait", "nosuch", "--timeout", "30"], 2);
    ctl_code(&h, &["ask", "nosuch", "hi", "--timeout", "soon"], 2);
}
