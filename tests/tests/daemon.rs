//! End to end: the real clibotd and clibotctl binaries, a real tmux server per test.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use clibot_proto::v1;
use clibot_tests::{Harness, lines};
use tonic::Code;

#[test]
fn spawn_send_screen_list_stop_with_a_shell() {
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("s1");
    h.ctl_ok(&["send", "s1", "echo hello-$((6*7))"]);
    h.wait_screen("s1", "the command's output", |s| {
        lines(s).contains(&"hello-42")
    });
    h.wait_list("s1 idle again", |l| l[0]["state"] == "idle");

    let list: serde_json::Value =
        serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    let s = &list[0];
    assert_eq!(
        (s["name"].as_str(), s["cli"].as_str(), s["state"].as_str()),
        (Some("s1"), Some("bash"), Some("idle"))
    );
    assert_eq!(s["dir"].as_str(), Some(h.work.to_str().expect("utf8")));
    let table = h.ctl_ok(&["list"]);
    assert!(
        table.starts_with("NAME") && table.contains("s1") && table.contains("bash"),
        "{table}"
    );

    // Keys: type without submitting, then press Enter by name.
    h.ctl_ok(&["send", "--no-submit", "s1", "echo by-key"]);
    h.ctl_ok(&["keys", "s1", "Enter"]);
    h.wait_screen("s1", "output after Enter", |s| lines(s).contains(&"by-key"));

    // Text that tmux would otherwise parse: a trailing ';' and a leading '-'.
    h.ctl_ok(&["send", "s1", "echo semi;"]);
    h.wait_screen("s1", "trailing semicolon kept", |s| {
        lines(s).contains(&"$ echo semi;")
    });

    let out = h.ctl_ok(&["stop", "s1"]);
    assert!(out.contains("stopped s1: quit"), "graceful stop: {out}");
    assert!(h.ctl_ok(&["list"]).contains("no sessions"));
    assert!(
        !h.tmux(&["has-session", "-t", "s1"]).status.success(),
        "tmux session is gone"
    );
    let types: Vec<String> = h
        .events()
        .iter()
        .filter(|e| e["session"] == "s1")
        .map(|e| e["type"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(types.first().map(String::as_str), Some("spawned"));
    assert!(
        types.ends_with(&["exited".to_string(), "stopped".to_string()]),
        "{types:?}"
    );
}

#[test]
fn multi_line_input_arrives_as_one_submission() {
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("m");
    // Pasted without Enter: bash holds both lines in its editor and runs neither.
    h.ctl_ok(&[
        "send",
        "--no-submit",
        "m",
        "echo first-line\necho second-line",
    ]);
    h.wait_screen("m", "the pasted text", |s| s.contains("echo second-line"));
    std::thread::sleep(Duration::from_millis(400));
    let screen = h.ctl_ok(&["screen", "m"]);
    assert!(
        !lines(&screen).contains(&"first-line"),
        "a newline inside the paste submitted early:\n{screen}"
    );
    // One Enter submits the whole paste.
    h.ctl_ok(&["keys", "m", "Enter"]);
    h.wait_screen("m", "both outputs", |s| {
        lines(s).contains(&"first-line") && lines(s).contains(&"second-line")
    });

    // And with submit, from stdin, in one call.
    let mut child = h
        .ctl_command(&["send", "m", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn ctl");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"echo third-$((1+2))\necho fourth\n")
        .expect("write");
    assert!(child.wait().expect("wait").success());
    let screen = h.wait_screen("m", "third and fourth", |s| {
        lines(s).contains(&"third-3") && lines(s).contains(&"fourth")
    });
    // A single prompt line holds the pasted block: bash saw one submission.
    let prompt_lines = lines(&screen)
        .iter()
        .filter(|l| l.starts_with("$ echo third"))
        .count();
    assert_eq!(prompt_lines, 1, "{screen}");
}

#[test]
fn kill_9_and_restart_keep_every_session_and_every_event() {
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("a");
    h.spawn_bash("b");
    h.spawn_bash("gone");
    h.ctl_ok(&["send", "a", "echo before-crash"]);
    h.wait_screen("a", "output", |s| lines(s).contains(&"before-crash"));
    h.wait_list("all idle", |l| {
        l.as_array()
            .is_some_and(|a| a.iter().all(|s| s["state"] == "idle"))
    });
    let before: serde_json::Value =
        serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    h.ctl_ok(&["send", "gone", "sleep 4245"]);
    wait_pids("sleep 4245", true);
    let events_before = h.events();

    h.kill_daemon();
    // tmux and the CLIs do not depend on the daemon.
    for s in ["a", "b", "gone"] {
        assert!(
            h.tmux(&["has-session", "-t", s]).status.success(),
            "{s} survived kill -9"
        );
    }
    // A session ends while no daemon watches.
    assert!(h.tmux(&["kill-session", "-t", "gone"]).status.success());
    h.start_daemon();

    let after: serde_json::Value =
        serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    for name in ["a", "b"] {
        let find = |v: &serde_json::Value| {
            v.as_array()
                .and_then(|a| a.iter().find(|s| s["name"] == name).cloned())
        };
        let (x, y) = (find(&before).expect("before"), find(&after).expect("after"));
        for field in [
            "id",
            "cli",
            "dir",
            "state",
            "created_at_ms",
            "tmux_session_id",
        ] {
            assert_eq!(x[field], y[field], "{name}.{field} changed across restart");
        }
    }
    let gone = after
        .as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == "gone").cloned())
        .expect("gone listed");
    assert_eq!(gone["state"], "exited");
    // Its CLI ended with it, although no daemon watched when it was killed.
    wait_pids("sleep 4245", false);

    let events_after = h.events();
    assert_eq!(
        &events_after[..events_before.len()],
        &events_before[..],
        "no event lost or changed"
    );
    let seqs: Vec<u64> = events_after
        .iter()
        .filter_map(|e| e["seq"].as_u64())
        .collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "gap-free sequence numbers"
    );
    let new: Vec<&str> = events_after[events_before.len()..]
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    assert!(
        new.contains(&"daemon_started") && new.contains(&"exited"),
        "{new:?}"
    );
    let started = events_after
        .iter()
        .rev()
        .find(|e| e["type"] == "daemon_started")
        .expect("daemon_started");
    assert_eq!(started["readopted"], 2);

    // The re-adopted session takes input as before.
    h.ctl_ok(&["send", "a", "echo after-restart"]);
    h.wait_screen("a", "output after restart", |s| {
        lines(s).contains(&"after-restart")
    });

    // A graceful restart (SIGTERM) keeps them too.
    assert!(h.terminate_daemon().success());
    assert!(h.tmux(&["has-session", "-t", "a"]).status.success());
    h.start_daemon();
    h.wait_list("a still idle", |l| {
        l.as_array()
            .is_some_and(|a| a.iter().any(|s| s["name"] == "a" && s["state"] == "idle"))
    });
}

#[test]
fn rejected_inputs_get_clear_errors_and_disturb_nothing() {
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("ok");
    let work = h.work.display().to_string();
    let missing = h.work.join("missing").display().to_string();
    let made = h.tmux(&["new-session", "-d", "-s", "taken", "--", "sleep", "60"]);
    assert!(
        made.status.success(),
        "tmux new-session: {}\ndaemon log:\n{}",
        String::from_utf8_lossy(&made.stderr),
        h.daemon_log()
    );

    let cases: &[(&[&str], &str)] = &[
        (
            &["spawn", "bad name", "--cli", "bash", "--dir", &work],
            "invalid session name",
        ),
        (
            &["spawn", "x", "--cli", "nosuchcli", "--dir", &work],
            "unknown CLI \"nosuchcli\"",
        ),
        (
            &["spawn", "x", "--cli", "bash", "--dir", &missing],
            "does not exist",
        ),
        (
            &["spawn", "x", "--cli", "bash", "--dir", "/"],
            "outside the allowed roots",
        ),
        (
            &["spawn", "ok", "--cli", "bash", "--dir", &work],
            "already exists",
        ),
        (
            &[
                "spawn", "x", "--cli", "bash", "--dir", &work, "--env", "1X=y",
            ],
            "invalid environment variable",
        ),
        (&["keys", "ok", "Hyper-Q"], "unknown key"),
        (&["send", "nosuch", "hi"], "no session named \"nosuch\""),
        (&["screen", "nosuch"], "no session named"),
        (&["stop", "nosuch"], "no session named"),
        (&["adopt", "nosuch", "--cli", "bash"], "no tmux session"),
        (
            &["spawn", "taken", "--cli", "bash", "--dir", &work],
            "adopt it with `clibotctl adopt taken",
        ),
    ];
    for (args, expect) in cases {
        let err = h.ctl_err(args);
        assert!(
            err.contains(expect),
            "clibotctl {args:?}: expected {expect:?} in {err:?}"
        );
    }
    // Oversized text, from stdin.
    let mut child = h
        .ctl_command(&["send", "ok", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&vec![b'x'; 70_000])
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("70000 bytes"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Usage errors exit 2.
    assert_eq!(h.ctl(&["spawn", "x"]).status.code(), Some(2));
    assert_eq!(h.ctl(&["frobnicate"]).status.code(), Some(2));
    assert_eq!(
        h.ctl(&["stop", "ok", "--timeout", "9999"]).status.code(),
        Some(2)
    );

    // The existing session is untouched and still works.
    h.ctl_ok(&["send", "ok", "echo still-fine"]);
    h.wait_screen("ok", "output", |s| lines(s).contains(&"still-fine"));
    let list: serde_json::Value =
        serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    assert_eq!(list.as_array().map(Vec::len), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_status_codes_are_precise() {
    let mut h = Harness::new();
    h.start_daemon();
    let mut c = h.client().await;
    let work = h.work.display().to_string();
    let spawn = |name: &str, cli: &str, dir: &str| v1::SpawnSessionRequest {
        name: name.into(),
        cli: cli.into(),
        dir: dir.into(),
        ..Default::default()
    };
    c.spawn_session(spawn("g", "bash", &work))
        .await
        .expect("spawn");
    let code =
        |r: Result<tonic::Response<v1::Session>, tonic::Status>| r.expect_err("must fail").code();
    assert_eq!(
        code(c.spawn_session(spawn("a b", "bash", &work)).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(c.spawn_session(spawn("x", "nope", &work)).await),
        Code::NotFound
    );
    assert_eq!(
        code(c.spawn_session(spawn("x", "bash", "/")).await),
        Code::PermissionDenied
    );
    assert_eq!(
        code(c.spawn_session(spawn("g", "bash", &work)).await),
        Code::AlreadyExists
    );
    assert_eq!(
        code(
            c.get_session(v1::GetSessionRequest {
                name: "zz".into(),
                ..Default::default()
            })
            .await
        ),
        Code::NotFound
    );
    let big = v1::SendInputRequest {
        session: "g".into(),
        text: "x".repeat(70_000),
        submit: true,
        ..Default::default()
    };
    assert_eq!(
        c.send_input(big).await.expect_err("too big").code(),
        Code::InvalidArgument
    );
    let keys = v1::SendKeysRequest {
        session: "g".into(),
        keys: vec!["Nope".into()],
    };
    assert_eq!(
        c.send_keys(keys).await.expect_err("bad key").code(),
        Code::InvalidArgument
    );
    let st = c
        .status(v1::StatusRequest {})
        .await
        .expect("status")
        .into_inner();
    assert!(
        st.tmux_reachable && st.tmux_version.starts_with("tmux"),
        "{st:?}"
    );
    assert_eq!(st.sessions, 1);
}

#[test]
fn socket_is_private_and_other_users_are_refused() {
    let mut h = Harness::new();
    h.start_daemon();
    let mode =
        |p: &std::path::Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode(&h.socket), 0o600, "socket mode");
    assert_eq!(
        mode(h.socket.parent().expect("dir")),
        0o700,
        "socket directory mode"
    );

    // A second daemon on the live socket refuses and names the holder.
    let out = std::process::Command::new(clibot_tests::bin("clibotd"))
        .args(["--socket", h.socket.to_str().expect("utf8"), "--state-dir"])
        .arg(h.dir.path().join("other-state"))
        .arg("--tmux-socket")
        .arg(&h.tmux_socket)
        .env("CLIBOT_CONFIG", &h.config)
        .output()
        .expect("run second clibotd");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let pid = h.daemon_pid().expect("pid").to_string();
    assert!(
        err.contains("already serving") && err.contains(&pid),
        "{err}"
    );

    if rustix_uid() != 0 {
        // Without root the test cannot act as another user; the modes above are what keep one out.
        eprintln!("not root: cross-uid connection not attempted");
        return;
    }
    // A private directory planted by another user is refused, not used.
    let trap = h.dir.path().join("clibot-trap");
    std::fs::create_dir(&trap).expect("mkdir");
    std::os::unix::fs::chown(&trap, Some(65534), Some(65534)).expect("chown");
    let out = std::process::Command::new(clibot_tests::bin("clibotd"))
        .arg("--socket")
        .arg(trap.join("d.sock"))
        .arg("--state-dir")
        .arg(h.dir.path().join("trap-state"))
        .arg("--tmux-socket")
        .arg(&h.tmux_socket)
        .env("CLIBOT_CONFIG", &h.config)
        .output()
        .expect("run clibotd");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("belongs to uid 65534"),
        "{err}"
    );

    // Open every door on the path, so that only the peer-credential check stands in the way.
    for p in [h.dir.path(), h.socket.parent().expect("dir")] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    std::fs::set_permissions(&h.socket, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(clibot_tests::bin("clibotctl"))
        .args([
            "--no-autostart",
            "--socket",
            h.socket.to_str().expect("utf8"),
            "list",
        ])
        .output()
        .expect("run setpriv");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "another uid must be refused; stderr: {err}"
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("NAME"),
        "no data for another uid"
    );
    // clibotctl itself refuses to talk to a daemon of another user.
    assert!(err.contains("not by you"), "{err}");
    // And the daemon refuses a raw connection from another uid before any HTTP/2 is spoken.
    // perl-base is on every Debian system; its socket module speaks Unix sockets.
    let probe = "use IO::Socket::UNIX; $SIG{PIPE} = 'IGNORE'; my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or die \"connect: $!\"; \
                 print $s \"PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n\"; my $b = ''; $s->recv($b, 100); print length($b);";
    let out = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/perl",
            "-e",
            probe,
        ])
        .arg(&h.socket)
        .output()
        .expect("run perl as another user");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "0",
        "the daemon answered another uid: {out:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while !h
        .daemon_log()
        .contains("refused a connection from another user")
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        h.daemon_log()
            .contains("refused a connection from another user"),
        "{}",
        h.daemon_log()
    );
    // The owner is still served.
    h.ctl_ok(&["status"]);
}

fn rustix_uid() -> u32 {
    // `id -u` keeps this crate free of a libc binding just for one call.
    let out = std::process::Command::new("id")
        .arg("-u")
        .output()
        .expect("id -u");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(u32::MAX)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_work_in_parallel() {
    // `slow` waits 1.5 s between typing and Enter; `fast` must not wait behind it.
    let mut h = Harness::with_config(
        "\n[cli.slow]\nargv = [\"bash\", \"--norc\", \"--noprofile\"]\nenv = { PS1 = \"$ \" }\nsubmit_delay_ms = 1500\n",
    );
    h.start_daemon();
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "a", "--cli", "slow", "--dir", &work]);
    h.spawn_bash("b");
    h.wait_screen("a", "prompt", |s| s.contains('$'));
    let mut ca = h.client().await;
    let mut cb = h.client().await;
    let started = Instant::now();
    let slow = tokio::spawn(async move {
        ca.send_input(v1::SendInputRequest {
            session: "a".into(),
            text: "echo from-a".into(),
            submit: true,
            ..Default::default()
        })
        .await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    cb.send_input(v1::SendInputRequest {
        session: "b".into(),
        text: "echo from-b".into(),
        submit: true,
        ..Default::default()
    })
    .await
    .expect("send b");
    let b_done = started.elapsed();
    assert!(
        b_done < Duration::from_millis(1200),
        "b waited behind a: {b_done:?}"
    );
    assert!(!slow.is_finished(), "a is still settling");
    slow.await.expect("join").expect("send a");
    h.wait_screen("a", "a's output", |s| lines(s).contains(&"from-a"));
    h.wait_screen("b", "b's output", |s| lines(s).contains(&"from-b"));
}

#[test]
fn adopt_an_existing_tmux_session_and_release_it() {
    let mut h = Harness::new();
    h.start_daemon();
    let work = h.work.display().to_string();
    let out = h.tmux(&[
        "new-session",
        "-d",
        "-s",
        "manual",
        "-c",
        &work,
        "--",
        "bash",
        "--norc",
        "--noprofile",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let msg = h.ctl_ok(&["adopt", "manual", "--cli", "bash"]);
    assert!(msg.contains("adopted tmux session manual"), "{msg}");
    h.ctl_ok(&["send", "manual", "echo adopted-ok"]);
    h.wait_screen("manual", "output", |s| lines(s).contains(&"adopted-ok"));
    let err = h.ctl_err(&["adopt", "manual", "--cli", "bash", "--name", "again"]);
    assert!(err.contains("already managed"), "{err}");
    h.ctl_ok(&["release", "manual"]);
    assert!(h.ctl_ok(&["list"]).contains("no sessions"));
    assert!(
        h.tmux(&["has-session", "-t", "manual"]).status.success(),
        "released session keeps running"
    );
    // clibot follows it no more: its window is no longer linked into clibot's monitor session.
    let linked = String::from_utf8_lossy(
        &h.tmux(&[
            "list-windows",
            "-t",
            "manual",
            "-F",
            "#{window_linked_sessions_list}",
        ])
        .stdout,
    )
    .into_owned();
    assert_eq!(linked.trim(), "manual");
}

#[test]
fn exited_cli_is_reported_with_its_status_and_can_be_removed() {
    let mut h = Harness::new();
    // The periodic check is ten minutes away: the exit has to be pushed (tmux reports the
    // dead pane to clibotd's control client).
    let config = std::fs::read_to_string(&h.config).expect("config");
    assert!(config.contains("poll_interval_ms = 200"));
    std::fs::write(
        &h.config,
        config.replace("poll_interval_ms = 200", "poll_interval_ms = 600000"),
    )
    .expect("config");
    h.start_daemon();
    h.spawn_bash("e");
    h.ctl_ok(&["send", "e", "echo bye; exit 7"]);
    h.wait_list("e exited", |l| {
        l[0]["state"] == "exited" && l[0]["exit_status"] == 7
    });
    // The last screen stays readable (tmux may still be draining the pane's last output when
    // the exit is seen, hence the wait).
    h.wait_screen("e", "the last output of the exited CLI", |s| {
        lines(s).contains(&"bye")
    });
    let err = h.ctl_err(&["send", "e", "hello"]);
    assert!(err.contains("has exited"), "{err}");
    // On the machine, the advice is clibotctl's (a chat is told its own commands).
    assert!(
        err.contains("`clibotctl restart e`") && !err.contains("!!"),
        "{err}"
    );
    h.ctl_ok(&["stop", "e"]);
    assert!(h.ctl_ok(&["list"]).contains("no sessions"));
    let ev = h.events();
    let exited = ev
        .iter()
        .find(|e| e["type"] == "exited")
        .expect("exited event");
    assert_eq!(exited["status"], 7);
}

#[test]
fn events_follow_streams_live_and_filters_by_session() {
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("one");
    h.spawn_bash("two");
    let mut follower = h
        .ctl_command(&["events", "--follow", "--json", "--session", "two"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn follower");
    let stdout = follower.stdout.take().expect("stdout");
    std::thread::sleep(Duration::from_millis(300));
    h.ctl_ok(&["send", "one", "echo not-this"]);
    h.ctl_ok(&["send", "two", "echo this-one"]);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let line = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("an event arrives");
    let ev: serde_json::Value = serde_json::from_str(&line).expect("json");
    assert_eq!(
        (
            ev["session"].as_str(),
            ev["type"].as_str(),
            ev["text"].as_str()
        ),
        (Some("two"), Some("input_sent"), Some("echo this-one"))
    );

    // The follower survives a daemon restart and resumes after the last event it printed.
    h.kill_daemon();
    h.start_daemon();
    h.ctl_ok(&["send", "two", "echo after-restart"]);
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            seen.push(line.clone());
            if line.contains("after-restart") {
                break;
            }
        }
    }
    let _ = follower.kill();
    let _ = follower.wait();
    assert!(seen.iter().any(|l| l.contains("after-restart")), "{seen:?}");
    assert!(
        !seen.iter().any(|l| l.contains("this-one")),
        "nothing delivered twice: {seen:?}"
    );
}

#[test]
fn clibotctl_starts_the_daemon_when_none_runs() {
    let h = Harness::new();
    let out = h
        .ctl_command(&["status"])
        .env_remove("CLIBOT_NO_AUTOSTART")
        .env("CLIBOT_NO_AUTOSTART", "0")
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("started clibotd"), "{stderr}");
    let status = h.ctl_ok(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&status).expect("json");
    let pid = v["pid"].as_u64().expect("pid");
    // Its log is in the state directory (rotated by size there), and the message says so.
    let log = std::path::Path::new(v["state_dir"].as_str().expect("state dir")).join("clibotd.log");
    assert!(stderr.contains(&log.display().to_string()), "{stderr}");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(text.contains("serving"), "{text}");
    // Not a child of the test harness: stop it by pid.
    let _ = std::process::Command::new("kill")
        .arg(pid.to_string())
        .status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while h.socket.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !h.socket.exists(),
        "the daemon removed its socket on SIGTERM"
    );
    // Without autostart, the message says how to start one.
    let err = h.ctl_err(&["status"]);
    assert!(
        err.contains("no clibotd is listening") && err.contains("clibotd"),
        "{err}"
    );
}

#[test]
fn attach_shows_the_same_live_session() {
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("desk");
    h.ctl_ok(&["send", "desk", "echo seen-from-$((40+2))"]);
    h.wait_screen("desk", "output", |s| lines(s).contains(&"seen-from-42"));
    // A terminal at the desk: an outer tmux (its own server) runs `clibotctl attach desk`.
    let outer = h.dir.path().join("outer.sock");
    let tmux_outer = |args: &[&str]| {
        std::process::Command::new("tmux")
            .arg("-S")
            .arg(&outer)
            .args(["-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("outer tmux")
    };
    let ctl = clibot_tests::bin("clibotctl").display().to_string();
    let socket = h.socket.display().to_string();
    let out = tmux_outer(&[
        "new-session",
        "-d",
        "-x",
        "120",
        "-y",
        "40",
        "--",
        &ctl,
        "--socket",
        &socket,
        "attach",
        "desk",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut screen = String::new();
    while Instant::now() < deadline {
        screen = String::from_utf8_lossy(&tmux_outer(&["capture-pane", "-p"]).stdout).into_owned();
        if screen.contains("seen-from-42") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Typing at the desk reaches the same session the daemon drives.
    assert!(
        screen.contains("seen-from-42"),
        "attached terminal shows the session:\n{screen}"
    );
    tmux_outer(&["send-keys", "-l", "echo typed-at-desk"]);
    tmux_outer(&["send-keys", "Enter"]);
    h.wait_screen("desk", "desk typing", |s| {
        lines(s).contains(&"typed-at-desk")
    });
    let _ = tmux_outer(&["kill-server"]);
}

#[test]
fn socket_activation_serves_on_the_passed_socket() {
    // systemd's own helper passes the listening socket as fd 3 with LISTEN_FDS/LISTEN_PID, as
    // clibotd.socket does.
    let h = Harness::new();
    std::fs::create_dir_all(h.socket.parent().expect("dir")).expect("mkdir");
    let mut child = std::process::Command::new("systemd-socket-activate")
        .arg("-l")
        .arg(&h.socket)
        // It passes on only the environment named with -E; no CLIBOT_SOCKET: the daemon must
        // find its path from the socket itself.
        .arg(format!(
            "--setenv=CLIBOT_STATE_DIR={}",
            h.state_dir.display()
        ))
        .arg(format!(
            "--setenv=CLIBOT_TMUX_SOCKET={}",
            h.tmux_socket.display()
        ))
        .arg(format!("--setenv=CLIBOT_CONFIG={}", h.config.display()))
        .arg(clibot_tests::bin("clibotd"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("systemd-socket-activate (package systemd) runs");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !h.socket.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // The first connection starts clibotd, which takes over the socket.
    let status = h.ctl_ok(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&status).expect("json");
    assert_eq!(v["socket"], h.socket.display().to_string());
    let work = h.work.display().to_string();
    h.ctl_ok(&["spawn", "act", "--cli", "bash", "--dir", &work]);
    assert!(h.ctl_ok(&["list"]).contains("act"));
    let _ = std::process::Command::new("kill")
        .arg(v["pid"].to_string())
        .status();
    let _ = child.kill();
    let _ = child.wait();
}

/// Waits until an event satisfies `pred`; returns it.
fn wait_event(
    h: &Harness,
    what: &str,
    pred: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Some(e) = h.events().into_iter().find(|e| pred(e)) {
            return e;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "timed out waiting for {what}; events:\n{:#?}\nlog:\n{}",
        h.events(),
        h.daemon_log()
    );
}

#[test]
fn a_shell_turn_completes_and_its_prompts_wait_for_an_answer() {
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("p");

    // A turn ends when the output goes quiet; its reply is what the pane printed.
    h.ctl_ok(&["send", "p", "echo alpha; echo beta"]);
    let done = wait_event(&h, "turn_completed", |e| e["type"] == "turn_completed");
    assert_eq!(done["text"], "alpha\nbeta");
    assert_eq!(h.ctl_ok(&["last", "p"]), "alpha\nbeta\n");

    // A question on the last line makes the session wait, with its options.
    h.ctl_ok(&[
        "send",
        "p",
        "read -p 'Overwrite config? [y/N] ' a; echo answer=$a",
    ]);
    let w = wait_event(&h, "waiting", |e| e["type"] == "waiting");
    assert_eq!(
        (w["kind"].as_str(), w["text"].as_str()),
        (Some("confirm"), Some("Overwrite config? [y/N]"))
    );
    assert_eq!(w["options"], serde_json::json!(["y", "n"]));
    h.wait_list("waiting", |l| {
        l[0]["state"] == "waiting" && l[0]["prompt"]["kind"] == "confirm"
    });
    let id = w["prompt_id"].as_str().expect("prompt id").to_string();
    h.ctl_ok(&["answer", "p", "yes", "--prompt", &id]);
    h.wait_screen("p", "the answer", |s| lines(s).contains(&"answer=y"));
    let resolved = wait_event(&h, "prompt_resolved", |e| e["type"] == "prompt_resolved");
    assert_eq!(
        (resolved["by"].as_str(), resolved["answer"].as_str()),
        (Some("clibot"), Some("y"))
    );
    // The first answer won; a second one never reaches the CLI.
    let err = h.ctl_err(&["answer", "p", "n", "--prompt", &id]);
    assert!(err.contains("already resolved"), "{err}");
    let done = wait_event(&h, "second turn", |e| {
        e["type"] == "turn_completed" && e["text"].as_str().is_some_and(|t| t.contains("answer=y"))
    });
    assert!(
        done["text"]
            .as_str()
            .is_some_and(|t| t.ends_with("answer=y")),
        "{done}"
    );

    // Answered at the desk instead: the prompt is reported resolved by the terminal.
    h.ctl_ok(&["send", "p", "read -p 'Really? (y/n) ' b; echo b=$b"]);
    let w2 = wait_event(&h, "second waiting", |e| {
        e["type"] == "waiting" && e["text"] == "Really? (y/n)"
    });
    let mut desk = clibot_tests::desk::Desk::attach(&h, "p");
    desk.type_text("n\r");
    let by_terminal = wait_event(&h, "resolved at the terminal", |e| {
        e["type"] == "prompt_resolved" && e["prompt_id"] == w2["prompt_id"]
    });
    assert_eq!(by_terminal["by"], "terminal");
    let err = h.ctl_err(&[
        "answer",
        "p",
        "y",
        "--prompt",
        w2["prompt_id"].as_str().unwrap_or(""),
    ]);
    assert!(err.contains("already resolved (by terminal)"), "{err}");
    h.wait_screen("p", "terminal answer", |s| lines(s).contains(&"b=n"));

    // Input sent while a turn runs is queued and delivered in order when the CLI is ready.
    h.wait_list("idle", |l| l[0]["state"] == "idle");
    h.ctl_ok(&["send", "p", "sleep 1; echo first-done"]);
    let out = h.ctl(&["send", "p", "echo second-done"]);
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("queued"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let screen = h.wait_screen("p", "both, in order", |s| lines(s).contains(&"second-done"));
    let ls = lines(&screen);
    let first = ls.iter().position(|l| *l == "first-done").expect("first");
    let second = ls.iter().position(|l| *l == "second-done").expect("second");
    assert!(first < second, "{screen}");
    wait_event(&h, "input_queued", |e| {
        e["type"] == "input_queued" && e["text"] == "echo second-done"
    });
}

/// Pids whose command line contains `needle`.
fn pids_running(needle: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
                .filter(|p| {
                    std::fs::read(format!("/proc/{p}/cmdline"))
                        .map(|c| {
                            String::from_utf8_lossy(&c)
                                .replace('\0', " ")
                                .contains(needle)
                        })
                        .unwrap_or(false)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Waits up to 10 s until a process whose command line contains `needle` runs (or none does).
fn wait_pids(needle: &str, running: bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while pids_running(needle).is_empty() == running && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        !pids_running(needle).is_empty(),
        running,
        "a process running {needle:?}"
    );
}

/// A person at the desk kills a session with tmux itself: its CLI ends as with any tmux
/// session, the daemon reports it exited, and the other sessions are not disturbed.
#[test]
fn a_session_killed_with_tmux_ends_its_cli() {
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("desk");
    h.spawn_bash("other");
    h.ctl_ok(&["send", "desk", "sleep 4246"]);
    wait_pids("sleep 4246", true);
    assert!(h.tmux(&["kill-session", "-t", "desk"]).status.success());
    wait_pids("sleep 4246", false);
    h.wait_list("desk exited", |l| {
        l.as_array().is_some_and(|a| {
            a.iter()
                .any(|s| s["name"] == "desk" && s["state"] == "exited")
        })
    });
    // Only clibot's sessions and its monitor remain on the server.
    let ls = String::from_utf8_lossy(&h.tmux(&["list-sessions", "-F", "#{session_name}"]).stdout)
        .into_owned();
    assert!(!ls.lines().any(|l| l == "desk"), "{ls}");
    h.ctl_ok(&["send", "other", "echo still-here"]);
    h.wait_screen("other", "output", |s| lines(s).contains(&"still-here"));
    // `clibotctl list` never shows the monitor session.
    assert!(!h.ctl_ok(&["list"]).contains("watch"));

    // The monitor session itself killed by hand: the CLIs go on, and clibotd follows them
    // again (a prompt is still seen).
    assert!(
        h.tmux(&["kill-session", "-t", "=clibot+watch"])
            .status
            .success()
    );
    h.ctl_ok(&["send", "other", "read -p 'Go on? [y/N] ' a"]);
    h.wait_list("other waiting", |l| {
        l.as_array().is_some_and(|a| {
            a.iter()
                .any(|s| s["name"] == "other" && s["state"] == "waiting")
        })
    });
    h.ctl_ok(&["answer", "other", "n"]);
    h.wait_list("other idle", |l| {
        l.as_array().is_some_and(|a| {
            a.iter()
                .any(|s| s["name"] == "other" && s["state"] == "idle")
        })
    });
}

/// tmux's server is killed under a running daemon: its sessions are reported gone, the daemon
/// does not start a server of its own accord (under systemd that would be one in clibotd's
/// cgroup), and the next spawn starts one and is followed as usual.
#[test]
fn the_tmux_server_killed_under_the_daemon() {
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("before");
    assert!(h.tmux(&["kill-server"]).status.success());
    h.wait_list("before gone", |l| l[0]["state"] == "exited");
    // Its watcher retries meanwhile; none of that may start a server.
    std::thread::sleep(Duration::from_millis(1500));
    let ls = h.tmux(&["list-sessions"]);
    assert!(
        !ls.status.success() && String::from_utf8_lossy(&ls.stderr).contains("no server running"),
        "a tmux server runs: {}",
        String::from_utf8_lossy(&ls.stdout)
    );
    h.spawn_bash("after");
    h.ctl_ok(&["send", "after", "read -p 'Go on? [y/N] ' a; echo got=$a"]);
    h.wait_list("after waiting", |l| {
        l.as_array().is_some_and(|a| {
            a.iter()
                .any(|s| s["name"] == "after" && s["state"] == "waiting")
        })
    });
    h.ctl_ok(&["answer", "after", "y"]);
    h.wait_screen("after", "the answer", |s| lines(s).contains(&"got=y"));
}

/// Keys pressed in one session while another's screen is read, many times at once: every read
/// shows its own session (clibot's queries share one tmux connection; each answer must reach
/// the query that asked).
#[test]
fn concurrent_keys_and_screen_reads_never_mix_up_sessions() {
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("keys");
    h.spawn_bash("reads");
    h.ctl_ok(&["send", "keys", "echo KEYS-$((1+1))"]);
    h.wait_screen("keys", "its marker", |s| lines(s).contains(&"KEYS-2"));
    h.ctl_ok(&["send", "reads", "echo READS-$((2+2))"]);
    h.wait_screen("reads", "its marker", |s| lines(s).contains(&"READS-4"));
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                for _ in 0..20 {
                    // Several named keys: several tmux commands in one query.
                    h.ctl_ok(&["keys", "keys", "Right", "Left", "Right", "Left"]);
                }
            });
        }
        let readers: Vec<_> = (0..3)
            .map(|_| {
                scope.spawn(|| {
                    for _ in 0..20 {
                        let screen = h.ctl_ok(&["screen", "reads"]);
                        assert!(
                            lines(&screen).contains(&"READS-4") && !screen.contains("KEYS-2"),
                            "a screen read of `reads` returned:\n{screen}"
                        );
                    }
                })
            })
            .collect();
        for r in readers {
            if let Err(e) = r.join() {
                std::panic::resume_unwind(e);
            }
        }
    });
}

#[test]
fn stop_leaves_no_process_behind() {
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("tree");
    // A child that ignores the hang-up that closing its pane sends.
    h.ctl_ok(&["send", "tree", "(trap '' HUP; exec sleep 4243) &"]);
    wait_pids("sleep 4243", true);
    h.ctl_ok(&["stop", "tree", "--force"]);
    // Stop killed the whole process tree.
    wait_pids("sleep 4243", false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_users_need_pairing_and_every_action_is_audited() {
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("work");
    let mut c = h.client().await;
    let check = v1::CheckAccessRequest {
        platform: "telegram".into(),
        user: "777".into(),
        chat: "c1".into(),
        user_name: "eve".into(),
        group: false,
    };
    let r = c
        .check_access(check.clone())
        .await
        .expect("check")
        .into_inner();
    assert!(!r.allowed && r.pairing_code.len() == 8, "{r:?}");
    assert!(
        r.message.contains("clibotctl pairing approve"),
        "{}",
        r.message
    );

    // Nothing of an unpaired user runs.
    let as_user = |req: v1::SendInputRequest| {
        let mut req = tonic::Request::new(req);
        req.metadata_mut()
            .insert("clibot-platform", "telegram".parse().expect("ascii"));
        req.metadata_mut()
            .insert("clibot-user", "777".parse().expect("ascii"));
        req.metadata_mut()
            .insert("clibot-chat", "c1".parse().expect("ascii"));
        req
    };
    let send = v1::SendInputRequest {
        session: "work".into(),
        text: "echo from-chat".into(),
        submit: true,
        ..Default::default()
    };
    let err = c
        .send_input(as_user(send.clone()))
        .await
        .expect_err("unpaired");
    assert_eq!(err.code(), Code::PermissionDenied);

    // The owner approves on the machine; the code is listed first.
    let listed = h.ctl_ok(&["pairing", "list"]);
    assert!(
        listed.contains(&r.pairing_code) && listed.contains("eve"),
        "{listed}"
    );
    let code = format!("{}-{}", &r.pairing_code[..4], &r.pairing_code[4..]).to_lowercase();
    assert!(
        h.ctl_ok(&["pairing", "approve", &code])
            .contains("approved telegram user 777")
    );
    assert!(
        c.check_access(check.clone())
            .await
            .expect("check")
            .into_inner()
            .allowed
    );
    // Paired, but the session is not theirs: a session made on the machine belongs to the
    // machine's user, and a chat user sees and uses only their own and those shared with them.
    let err = c
        .send_input(as_user(send.clone()))
        .await
        .expect_err("not theirs");
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    assert!(
        err.message().contains("that you may use"),
        "{}",
        err.message()
    );
    fn with<T>(body: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(body);
        r.metadata_mut()
            .insert("clibot-platform", "telegram".parse().expect("ascii"));
        r.metadata_mut()
            .insert("clibot-user", "777".parse().expect("ascii"));
        r
    }
    let listed = c
        .list_sessions(with(v1::ListSessionsRequest::default()))
        .await
        .expect("list")
        .into_inner()
        .sessions;
    assert!(listed.is_empty(), "not even listed: {listed:?}");
    let capture = v1::CaptureRequest {
        session: "work".into(),
        lines: 0,
        escapes: false,
        turn: false,
    };
    assert_eq!(
        c.capture(with(capture.clone()))
            .await
            .expect_err("screen")
            .code(),
        Code::PermissionDenied
    );
    let last = v1::GetLastReplyRequest {
        session: "work".into(),
    };
    assert_eq!(
        c.get_last_reply(with(last.clone()))
            .await
            .expect_err("last")
            .code(),
        Code::PermissionDenied
    );
    // Shared with them on the machine, they may use it (read it, type into it)...
    assert!(
        h.ctl_ok(&["share", "work", "telegram:777"])
            .contains("telegram:777")
    );
    c.send_input(as_user(send.clone()))
        .await
        .expect("a paired user may send to a session shared with them");
    h.wait_screen("work", "the chat's command", |s| {
        lines(s).contains(&"from-chat")
    });
    c.capture(with(capture))
        .await
        .expect("screen of a shared session");
    c.get_last_reply(with(last))
        .await
        .expect("last reply of a shared session");
    // ...but not stop it: only its owner or an admin may.
    let mut stop = tonic::Request::new(v1::StopSessionRequest {
        session: "work".into(),
        force: true,
        timeout_ms: 0,
    });
    stop.metadata_mut()
        .insert("clibot-platform", "telegram".parse().expect("ascii"));
    stop.metadata_mut()
        .insert("clibot-user", "777".parse().expect("ascii"));
    assert_eq!(
        c.stop_session(stop).await.expect_err("not admin").code(),
        Code::PermissionDenied
    );

    h.ctl_ok(&["pairing", "revoke", "telegram", "777"]);
    assert_eq!(
        c.send_input(as_user(send))
            .await
            .expect_err("revoked")
            .code(),
        Code::PermissionDenied
    );

    let audit = std::fs::read_to_string(h.state_dir.join("audit.jsonl")).expect("audit log");
    let records: Vec<serde_json::Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    let has = |action: &str, outcome: &str, user: &str| {
        records
            .iter()
            .any(|r| r["action"] == action && r["outcome"] == outcome && r["actor"] == user)
    };
    assert!(has("spawn", "accepted", "local"), "{audit}");
    assert!(
        has("send", "refused", "777") && has("send", "accepted", "777"),
        "{audit}"
    );
    assert!(has("stop", "refused", "777"), "{audit}");
    assert!(
        has("screen", "refused", "777") && has("screen", "accepted", "777"),
        "reads by chat users are audited: {audit}"
    );
    assert!(has("last", "accepted", "777"), "{audit}");
    assert!(
        has("pairing approve", "accepted", "local") && has("access", "refused", "777"),
        "{audit}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_bindings_and_delivery_cursors_survive_a_daemon_crash() {
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("api");
    let mut c = h.client().await;
    let bind = |session: &str| v1::SetBindingRequest {
        platform: "telegram".into(),
        chat: "42".into(),
        session: session.into(),
        group: false,
        from_seq: 0,
    };
    c.set_binding(bind("api")).await.expect("bind");
    assert_eq!(
        c.set_binding(bind("nosuch"))
            .await
            .expect_err("unknown session")
            .code(),
        Code::NotFound
    );
    let last = c
        .status(v1::StatusRequest {})
        .await
        .expect("status")
        .into_inner()
        .last_seq;
    let ack = |seq| v1::AckEventsRequest {
        consumer: "telegram:bot".into(),
        seq,
        ..Default::default()
    };
    assert_eq!(
        c.ack_events(ack(last))
            .await
            .expect("ack")
            .into_inner()
            .cursor,
        last
    );
    assert_eq!(
        c.ack_events(ack(1))
            .await
            .expect("late ack")
            .into_inner()
            .cursor,
        last,
        "never moves back"
    );
    assert_eq!(
        c.ack_events(ack(last + 100))
            .await
            .expect_err("future")
            .code(),
        Code::OutOfRange
    );

    h.kill_daemon();
    h.start_daemon();
    let mut c = h.client().await;
    let cursor = c
        .get_cursor(v1::GetCursorRequest {
            consumer: "telegram:bot".into(),
        })
        .await
        .expect("cursor")
        .into_inner()
        .cursor;
    assert_eq!(cursor, last);
    let b = c
        .list_bindings(v1::ListBindingsRequest {
            platform: "telegram".into(),
            chat: "42".into(),
            session: String::new(),
            seq: 0,
        })
        .await
        .expect("bindings")
        .into_inner()
        .bindings;
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].session, "api");
    // Resuming from the cursor replays exactly what came after it.
    let mut s = c
        .watch_events(v1::WatchEventsRequest {
            since: Some(cursor),
            sessions: vec![],
            follow: false,
        })
        .await
        .expect("watch")
        .into_inner();
    let mut seqs = Vec::new();
    while let Some(ev) = tokio_stream::StreamExt::next(&mut s).await {
        seqs.push(ev.expect("event").seq);
    }
    assert!(
        !seqs.is_empty() && seqs.iter().all(|s| *s > cursor),
        "{seqs:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_message_handed_over_twice_is_typed_once() {
    let mut h = Harness::new();
    h.start_daemon();
    h.spawn_bash("dup");
    let mut c = h.client().await;
    let req = v1::SendInputRequest {
        session: "dup".into(),
        text: "echo once-$((20+22))".into(),
        submit: true,
        dedupe_key: "telegram:42:1001".into(),
    };
    let first = c.send_input(req.clone()).await.expect("first").into_inner();
    h.wait_screen("dup", "the output", |s| lines(s).contains(&"once-42"));
    h.wait_list("idle", |l| l[0]["state"] == "idle");
    let again = c.send_input(req).await.expect("again").into_inner();
    assert_eq!(again.seq, first.seq, "the same event answers the repeat");
    std::thread::sleep(Duration::from_millis(500));
    let screen = h.ctl_ok(&["screen", "dup"]);
    assert_eq!(
        lines(&screen).iter().filter(|l| **l == "once-42").count(),
        1,
        "{screen}"
    );
}

#[test]
fn a_silent_turn_is_reported_stalled_not_killed() {
    let mut h = Harness::new();
    let cfg = std::fs::read_to_string(&h.config)
        .expect("config")
        .replace("[daemon]\n", "[daemon]\nstall_after_ms = 700\n");
    std::fs::write(&h.config, cfg).expect("config");
    h.start_daemon();
    h.spawn_bash("quiet");
    // `sleep` runs in the foreground and prints nothing: the turn goes on, silently.
    h.ctl_ok(&["send", "quiet", "sleep 4; echo woke-up"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !h.events().iter().any(|e| e["type"] == "stalled") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        h.events()
            .iter()
            .any(|e| e["type"] == "stalled" && e["session"] == "quiet"),
        "{:#?}",
        h.events()
    );
    let l: serde_json::Value = serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("json");
    assert_eq!(
        (l[0]["state"].as_str(), l[0]["stalled"].as_bool()),
        (Some("working"), Some(true))
    );
    // Not killed: the command finishes and the turn completes with its output.
    h.wait_screen("quiet", "the late output", |s| {
        lines(s).contains(&"woke-up")
    });
    h.wait_list("idle, no longer stalled", |l| {
        l[0]["state"] == "idle" && l[0]["stalled"] == false
    });
}
