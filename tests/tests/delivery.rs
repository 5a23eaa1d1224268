//! Nothing stops the loop or the delivery: a reply larger than a gRPC message, a daemon
//! restarted mid-turn, a restart with queued input, a second window in a session, concurrent
//! restarts against the session cap, state files with absurd numbers. Real clibotd, clibotctl
//! and bash in tmux.

use std::time::Duration;

use clibot_tests::{Harness, lines};
use serde_json::Value;

fn wait_event(h: &Harness, name: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    h.wait_event(name, what, Duration::from_secs(60), pred)
}

/// A shell printing ~5.7 MB of three-byte characters: the reply's event carries its head and a
/// blob id, the event stream still flows (no message over 4 MiB), and `clibotctl last` prints
/// it whole through ReadBlob.
#[test]
fn a_reply_over_4_mib_is_kept_whole_and_streams_in_chunks() {
    let mut h = Harness::new();
    let config = std::fs::read_to_string(&h.config).expect("config");
    std::fs::write(
        &h.config,
        config.replace("height = 40", "height = 40\nhistory_limit = 200000"),
    )
    .expect("config");
    h.start_daemon();
    h.spawn_bash("r");
    // 60 000 lines of 32 `€` (96 bytes + newline) ≈ 5.8 MB.
    h.ctl_ok(&[
        "send",
        "r",
        &format!("yes {} | head -n 60000; echo DONE-MARK", "€".repeat(32)),
    ]);
    let done = wait_event(&h, "r", "the long turn's reply", |e| {
        e["type"] == "turn_completed" && e["session"] == "r"
    });
    let text = done["text"].as_str().unwrap_or_default();
    assert!(
        text.len() <= 256 * 1024,
        "event text is capped: {}",
        text.len()
    );
    let blob = done["blob_id"].as_str().unwrap_or_default().to_string();
    assert!(!blob.is_empty(), "a long reply names its blob: {done}");
    let full = done["full_bytes"].as_u64().unwrap_or(0);
    assert!(
        full > 4 * 1024 * 1024,
        "the whole reply is over 4 MiB: {full}"
    );
    let last = h.ctl(&["last", "r"]);
    assert!(
        last.status.success(),
        "{}",
        String::from_utf8_lossy(&last.stderr)
    );
    let whole = String::from_utf8(last.stdout).expect("utf8");
    assert!(whole.len() as u64 >= full, "{} < {full}", whole.len());
    assert!(whole.contains("DONE-MARK"), "the end of the reply is there");
    assert_eq!(
        whole.lines().filter(|l| *l == "€".repeat(32)).count(),
        60000,
        "every line arrived"
    );
    // The session takes the next message.
    h.ctl_ok(&["send", "r", "echo after-$((40+2))"]);
    h.wait_screen("r", "the next turn", |s| lines(s).contains(&"after-42"));
}

/// A daemon stopped (TERM, or kill -9) a second into `sleep 4; echo X1` and started again:
/// the running turn is reported once, with its output, when it ends, and the session takes
/// the next message.
fn restart_mid_turn(kill: bool) {
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("r");
    // A first turn, so that what the pane runs at rest is known.
    h.ctl_ok(&["send", "r", "echo warm"]);
    wait_event(&h, "r", "the first turn", |e| {
        e["type"] == "turn_completed" && e["text"].as_str().is_some_and(|t| t.contains("warm"))
    });
    h.ctl_ok(&["send", "r", "sleep 4; echo X$((0+1))"]);
    std::thread::sleep(Duration::from_millis(1000));
    if kill {
        h.kill_daemon();
    } else {
        h.terminate_daemon();
    }
    h.start_daemon();
    let done = wait_event(&h, "r", "the turn that outlived the daemon", |e| {
        e["type"] == "turn_completed" && e["text"].as_str().is_some_and(|t| t.contains("X1"))
    });
    let seq = done["seq"].as_u64().unwrap_or(0);
    let turns: Vec<Value> = h
        .events()
        .into_iter()
        .filter(|e| e["type"] == "turn_completed")
        .collect();
    assert_eq!(
        turns.len(),
        2,
        "the warm-up and the recovered turn, each once, nothing empty: {turns:#?}"
    );
    h.ctl_ok(&["send", "r", "echo after-$((40+2))"]);
    wait_event(&h, "r", "the next turn", |e| {
        e["type"] == "turn_completed"
            && e["seq"].as_u64().unwrap_or(0) > seq
            && e["text"].as_str().is_some_and(|t| t.contains("after-42"))
    });
    let list: Value = serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    assert_eq!(list[0]["state"], "idle", "{list:#}");
}

#[test]
fn a_turn_running_across_a_daemon_term_is_reported_once_when_it_ends() {
    restart_mid_turn(false);
}

#[test]
fn a_turn_running_across_a_daemon_kill_9_is_reported_once_when_it_ends() {
    restart_mid_turn(true);
}

/// `send r 'sleep 30'`, two more messages queued, `restart`: the queue is typed into the new
/// shell, in order, and later messages are not queued for ever.
#[test]
fn a_restart_with_queued_input_types_the_queue() {
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("r");
    h.ctl_ok(&["send", "r", "sleep 30"]);
    h.wait_list("working", |l| l[0]["state"] == "working");
    for m in ["echo q-$((1+0))", "echo q-$((1+1))"] {
        let out = h.ctl(&["send", "r", m]);
        assert!(String::from_utf8_lossy(&out.stderr).starts_with("queued"));
    }
    h.ctl_ok(&["restart", "r"]);
    h.wait_screen("r", "both queued messages ran", |s| {
        let l = lines(s);
        l.contains(&"q-1") && l.contains(&"q-2")
    });
    let out = h.ctl(&["send", "r", "echo fresh-$((2+1))"]);
    assert!(out.status.success());
    h.wait_screen("r", "a later message", |s| lines(s).contains(&"fresh-3"));
}

/// A window opened in a clibot session (prefix-c at the desk) neither takes the input nor
/// hides the CLI's exit.
#[test]
fn a_second_window_takes_nothing_over() {
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("r");
    let list: Value = serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    let tmux_session = list[0]["tmux_session"].as_str().unwrap_or("r").to_string();
    let out = h.tmux(&[
        "new-window",
        "-t",
        &format!("={tmux_session}:"),
        "-P",
        "-F",
        "#{pane_id}",
        "env PS1='other$ ' bash --norc --noprofile",
    ]);
    assert!(out.status.success(), "{out:?}");
    let other = String::from_utf8_lossy(&out.stdout).trim().to_string();
    h.ctl_ok(&["send", "r", "echo to-$((3*3))-cli"]);
    wait_event(&h, "r", "the turn in the CLI's pane", |e| {
        e["type"] == "turn_completed" && e["text"].as_str().is_some_and(|t| t.contains("to-9-cli"))
    });
    let shown = h.tmux(&["capture-pane", "-p", "-t", &other]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        !shown.contains("to-9"),
        "the new window got nothing: {shown}"
    );
    assert!(h.ctl_ok(&["screen", "r"]).contains("to-9-cli"));
    // The CLI exits while the other window stays: the exit is seen.
    h.ctl_ok(&["send", "r", "exit 7"]);
    let exited = wait_event(&h, "r", "the CLI's exit", |e| e["type"] == "exited");
    assert_eq!(exited["status"], 7, "{exited:#}");
}

/// Six restarts at once of exited sessions against `max_sessions = 3`: at most three run, the
/// others are refused naming the limit.
#[test]
fn concurrent_restarts_respect_max_sessions() {
    let mut h = Harness::with_daemon_keys("max_sessions = 3");
    h.start_daemon();
    let names = ["s1", "s2", "s3", "s4", "s5", "s6"];
    for pair in names.chunks(3) {
        for n in pair {
            h.spawn_bash(n);
        }
        for n in pair {
            h.ctl_ok(&["send", n, "exit"]);
        }
        h.wait_list("all exited", |l| {
            pair.iter().all(|n| {
                l.as_array()
                    .is_some_and(|a| a.iter().any(|s| s["name"] == *n && s["state"] == "exited"))
            })
        });
    }
    let children: Vec<_> = names
        .iter()
        .map(|n| {
            h.ctl_command(&["restart", n])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("run restart")
        })
        .collect();
    let mut refused = 0;
    for c in children {
        let out = c.wait_with_output().expect("wait");
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("max_sessions"), "{err}");
            refused += 1;
        }
    }
    let list: Value = serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    let running = list
        .as_array()
        .map(|a| a.iter().filter(|s| s["state"] != "exited").count())
        .unwrap_or(0);
    assert!(running <= 3, "{list:#}");
    assert_eq!(refused, 6 - running, "{list:#}");
}

/// The queue behind a running turn is bounded (`max_queued_inputs`, `max_queued_bytes`, refused
/// with RESOURCE_EXHAUSTED naming the limit), is not written into the registry, and survives a
/// kill -9 of the daemon: what was queued is typed after it, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_input_queue_is_bounded_cheap_and_survives_a_kill_9() {
    let mut h = Harness::with_daemon_keys("max_queued_inputs = 5\nmax_queued_bytes = 4000");
    h.start_daemon();
    h.spawn_bash("r");
    h.ctl_ok(&["send", "r", "sleep 5"]);
    h.wait_list("working", |l| l[0]["state"] == "working");
    let mut c = h.client().await;
    let send = |text: String| clibot_proto::v1::SendInputRequest {
        session: "r".into(),
        text,
        submit: true,
        dedupe_key: String::new(),
    };
    for i in 1..=3 {
        let r = c
            .send_input(send(format!("echo queued-{i}-{}", "x".repeat(900))))
            .await
            .expect("queued");
        assert!(r.into_inner().queued);
    }
    // 2 700 bytes wait; 1 500 more would pass 4 000.
    let err = c
        .send_input(send("y".repeat(1500)))
        .await
        .expect_err("over the bytes");
    assert_eq!(err.code(), tonic::Code::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("max_queued_bytes"), "{err:?}");
    for i in 4..=5 {
        c.send_input(send(format!("echo queued-{i}")))
            .await
            .expect("queued");
    }
    let err = c
        .send_input(send("echo one-too-many".into()))
        .await
        .expect_err("over the count");
    assert_eq!(err.code(), tonic::Code::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("max_queued_inputs"), "{err:?}");
    let registry = std::fs::read_to_string(h.state_dir.join("sessions.json")).expect("registry");
    assert!(
        !registry.contains("queued-1"),
        "queued text is not rewritten into the registry"
    );
    drop(c);
    h.kill_daemon();
    h.start_daemon();
    h.wait_screen("r", "every queued message typed after the restart", |s| {
        lines(s).contains(&"queued-5")
    });
    let typed: Vec<String> = h
        .events()
        .into_iter()
        .filter(|e| e["type"] == "input_sent")
        .filter_map(|e| e["text"].as_str().map(str::to_string))
        .filter(|t| t.starts_with("echo queued-"))
        .map(|t| t.chars().take(13).collect())
        .collect();
    assert_eq!(
        typed,
        [
            "echo queued-1",
            "echo queued-2",
            "echo queued-3",
            "echo queued-4",
            "echo queued-5"
        ]
        .map(String::from),
        "each once, in order"
    );
}

/// The control clients attached to clibot's own tmux session (`clibot+watch`).
fn monitor_clients(h: &Harness) -> Vec<String> {
    let out = h.tmux(&["list-clients", "-F", "#{client_pid} #{client_session}"]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.ends_with(" clibot+watch"))
        .map(str::to_string)
        .collect()
}

/// A daemon killed with -9 leaves its tmux control client attached; the next daemon ends it,
/// so exactly one (its own) follows the sessions, however often the daemon is killed.
#[test]
fn a_killed_daemons_control_client_is_ended_by_the_next() {
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("r");
    // The daemon attaches its client as it follows the sessions: wait for it, then never two.
    let one_client = |h: &Harness| {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut seen = monitor_clients(h);
        while seen.len() != 1 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
            seen = monitor_clients(h);
        }
        seen
    };
    for _ in 0..3 {
        let seen = one_client(&h);
        assert_eq!(seen.len(), 1, "{seen:?}");
        h.kill_daemon();
        h.start_daemon();
        h.ctl_ok(&["send", "r", "echo alive-$((6*7))"]);
        wait_event(&h, "r", "a turn after the restart", |e| {
            e["type"] == "turn_completed"
                && e["text"].as_str().is_some_and(|t| t.contains("alive-42"))
                && e["seq"].as_u64().is_some()
        });
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while monitor_clients(&h).len() != 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(monitor_clients(&h).len(), 1, "{:?}", monitor_clients(&h));
}

/// Requests far past any real use — 200,000 keys, 3 MiB of arguments, 20,000 environment
/// variables, a 5 MiB message — are refused as invalid, naming the limit, and the session
/// still works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_requests_are_refused_naming_the_limit() {
    use clibot_proto::v1;
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("r");
    let mut c = h.client().await;
    let err = c
        .send_keys(v1::SendKeysRequest {
            session: "r".into(),
            keys: vec!["a".into(); 200_000],
        })
        .await
        .expect_err("too many keys");
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("at most 1000"), "{err:?}");
    let work = h.work.display().to_string();
    let spawn = |args: Vec<String>, env: std::collections::HashMap<String, String>| {
        v1::SpawnSessionRequest {
            name: "big".into(),
            cli: "bash".into(),
            dir: work.clone(),
            args,
            env,
            delegate: false,
            ..Default::default()
        }
    };
    let err = c
        .spawn_session(spawn(vec!["x".repeat(1024); 3 * 1024], Default::default()))
        .await
        .expect_err("3 MiB of arguments");
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("at most"), "{err:?}");
    let env = (0..20_000)
        .map(|i| (format!("V{i}"), "1".to_string()))
        .collect();
    let err = c
        .spawn_session(spawn(Vec::new(), env))
        .await
        .expect_err("20,000 variables");
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("environment variables"), "{err:?}");
    // Over the 4 MiB message limit (a client that does not cap what it sends): refused by the
    // daemon, and the daemon lives on.
    let mut raw = h.client().await.max_encoding_message_size(usize::MAX);
    let err = raw
        .send_input(v1::SendInputRequest {
            session: "r".into(),
            text: "z".repeat(5 * 1024 * 1024),
            submit: true,
            dedupe_key: String::new(),
        })
        .await
        .expect_err("5 MiB");
    assert!(
        matches!(
            err.code(),
            tonic::Code::OutOfRange | tonic::Code::ResourceExhausted | tonic::Code::InvalidArgument
        ),
        "{err:?}"
    );
    assert!(!err.message().contains("install tmux"), "{err:?}");
    let mut c = h.client().await;
    c.send_input(v1::SendInputRequest {
        session: "r".into(),
        text: "echo still-$((5+5))".into(),
        submit: true,
        dedupe_key: String::new(),
    })
    .await
    .expect("the session still takes input");
    h.wait_screen("r", "the next command", |s| lines(s).contains(&"still-10"));
    let list: Value = serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    assert_eq!(
        list.as_array().map(Vec::len),
        Some(1),
        "nothing was spawned: {list:#}"
    );
}

/// Keys are pressed at once, not behind queued input: C-c interrupts the running turn while a
/// message waits, and the waiting message then runs.
#[test]
fn keys_are_pressed_at_once_even_with_input_queued() {
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("r");
    h.ctl_ok(&["send", "r", "sleep 60; echo never-$((1+1))"]);
    h.wait_list("working", |l| l[0]["state"] == "working");
    h.ctl_ok(&["send", "r", "echo waited-$((2+2))"]);
    let started = std::time::Instant::now();
    h.ctl_ok(&["keys", "r", "C-c"]);
    h.wait_screen("r", "the queued message after the interrupt", |s| {
        lines(s).contains(&"waited-4")
    });
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(!h.ctl_ok(&["screen", "r"]).contains("never-2"));
}

/// A queue larger than one gRPC answer (five messages of 900 KB): `queue` lists what fits and
/// says how many more there are, instead of failing with gRPC's raw size error.
#[test]
fn a_queue_over_four_mib_is_listed_in_part_with_a_count() {
    use std::io::Write;
    let mut h = Harness::with_daemon_keys("max_input_bytes = 1048576\nmax_queued_bytes = 8388608");
    h.start_daemon();
    h.spawn_bash("r");
    h.ctl_ok(&["send", "r", "sleep 60"]);
    h.wait_list("working", |l| l[0]["state"] == "working");
    let big = format!(": {}", "x".repeat(900_000));
    for _ in 0..5 {
        let mut child = h
            .ctl_command(&["send", "r", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("clibotctl");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(big.as_bytes())
            .expect("write");
        let out = child.wait_with_output().expect("wait");
        assert!(
            String::from_utf8_lossy(&out.stderr).starts_with("queued"),
            "{out:?}"
        );
    }
    let out = h.ctl(&["queue", "r"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("2 more queued message(s)"), "{err}");
    let listed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        listed.lines().filter(|l| l.contains(": xxx")).count(),
        3,
        "{listed}"
    );
}
