//! Operations with the real daemon: the session limits ([daemon] max_sessions, [access.PLATFORM]
//! max_sessions_per_user) and idle sessions hibernated after [daemon] idle_stop_after, then
//! woken by a message.

use std::time::{Duration, Instant};

use clibot_proto::v1;
use clibot_tests::{Harness, lines};
use tonic::Code;

/// A harness whose config has these keys in its `[daemon]` section, and `extra` appended.
fn harness(daemon_keys: &str, extra: &str) -> Harness {
    let h = Harness::with_config(extra);
    h.set_daemon_keys(daemon_keys);
    h
}

fn session<'a>(list: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    list.as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == name))
        .unwrap_or(&serde_json::Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawns_beyond_max_sessions_are_refused_naming_the_idle_ones() {
    let mut h = harness("max_sessions = 2", "");
    h.start_daemon();
    h.spawn_bash("a");
    h.spawn_bash("b");
    h.wait_list("both idle", |l| {
        session(l, "a")["state"] == "idle" && session(l, "b")["state"] == "idle"
    });

    let work = h.work.display().to_string();
    let err = h.ctl_err(&["spawn", "c", "--cli", "bash", "--dir", &work]);
    assert!(
        err.contains("cannot start c: 2 sessions run, the limit ([daemon] max_sessions)"),
        "{err}"
    );
    assert!(
        err.contains("idle ones you could stop: ")
            && err.contains("a (idle ")
            && err.contains("b (idle "),
        "{err}"
    );

    // Over gRPC the refusal is RESOURCE_EXHAUSTED.
    let mut c = h.client().await;
    let status = c
        .spawn_session(v1::SpawnSessionRequest {
            name: "c".into(),
            cli: "bash".into(),
            dir: work.clone(),
            ..Default::default()
        })
        .await
        .expect_err("a third session is refused");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("max_sessions"), "{status:?}");

    // An exited session does not count.
    h.ctl_ok(&["send", "b", "exit"]);
    h.wait_list("b exited", |l| session(l, "b")["state"] == "exited");
    h.spawn_bash("c");
    let l = h.wait_list("c idle", |l| session(l, "c")["state"] == "idle");
    assert_eq!(session(&l, "a")["state"], "idle", "{l:#}");

    // The exited one cannot come back while the limit is reached: restarting it starts it.
    let err = h.ctl_err(&["restart", "b"]);
    assert!(err.contains("cannot start b: 2 sessions run"), "{err}");
    h.ctl_ok(&["stop", "a"]);
    h.ctl_ok(&["restart", "b"]);
    h.wait_list("b idle again", |l| session(l, "b")["state"] == "idle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_user_runs_at_most_max_sessions_per_user() {
    let mut h = Harness::with_config(
        "\n[access.telegram]\nallow = [\"777\"]\nclis = [\"*\"]\nmax_sessions_per_user = 1\n",
    );
    h.start_daemon();
    let mut c = h.client().await;
    let as_user = |user: &str, name: &str| {
        // A member's session starts in their own workspace.
        let mut req = tonic::Request::new(v1::SpawnSessionRequest {
            name: name.into(),
            cli: "bash".into(),
            ..Default::default()
        });
        let md = req.metadata_mut();
        md.insert("clibot-platform", "telegram".parse().expect("ascii"));
        md.insert("clibot-user", user.parse().expect("ascii"));
        md.insert("clibot-chat", "c1".parse().expect("ascii"));
        req
    };
    let first = c
        .spawn_session(as_user("777", "mine"))
        .await
        .expect("the first session of 777")
        .into_inner();
    assert_eq!(first.owner, "telegram:777");
    h.wait_list("mine idle", |l| session(l, "mine")["state"] == "idle");

    let status = c
        .spawn_session(as_user("777", "second"))
        .await
        .expect_err("a second session of 777 is refused");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    let msg = status.message();
    assert!(
        msg.contains("cannot start second: telegram:777 already runs 1 session,")
            && msg.contains("[access.telegram] max_sessions_per_user")
            && msg.contains("mine (idle "),
        "{msg}"
    );

    // The machine's user is not capped per user.
    h.spawn_bash("local1");
    h.spawn_bash("local2");

    // Once the chat user's session is gone, they may start another.
    h.ctl_ok(&["stop", "mine"]);
    let second = c
        .spawn_session(as_user("777", "second"))
        .await
        .expect("777 has room again")
        .into_inner();
    assert_eq!(second.owner, "telegram:777");
}

#[test]
fn a_quiet_session_hibernates_after_idle_stop_after_and_a_message_wakes_it() {
    let mut h = harness("idle_stop_after = \"2s\"", "");
    h.start_daemon();
    let work = h.work.display().to_string();
    // The busy ones get their input at once, before they could count as idle.
    h.ctl_ok(&["spawn", "asking", "--cli", "bash", "--dir", &work]);
    h.ctl_ok(&["send", "asking", "read -p 'Go? [y/N] ' a; echo go=$a"]);
    h.ctl_ok(&["spawn", "busy", "--cli", "bash", "--dir", &work]);
    h.ctl_ok(&["send", "busy", "sleep 30"]);
    h.spawn_bash("quiet");
    h.ctl_ok(&["send", "quiet", "echo before-$((20+1))"]);
    h.wait_screen("quiet", "the echo", |s| lines(s).contains(&"before-21"));

    let l = h.wait_list("quiet stopped as idle", |l| {
        session(l, "quiet")["state"] == "hibernated"
    });
    assert_eq!(session(&l, "quiet")["exit_reason"], "idle for 2s", "{l:#}");
    let table = h.ctl_ok(&["list"]);
    assert!(table.contains("idle for 2s"), "{table}");
    let only: serde_json::Value =
        serde_json::from_str(&h.ctl_ok(&["list", "--state", "hibernated", "--json"]))
            .expect("json");
    assert_eq!(only.as_array().map(Vec::len), Some(1), "{only:#}");
    let hibernated = h.wait_event("quiet", "the event", Duration::from_secs(5), |e| {
        e["session"] == "quiet" && e["type"] == "hibernated"
    });
    assert_eq!(hibernated["reason"], "idle for 2s", "{hibernated}");
    let events = h.ctl_ok(&["events", "--since", "0"]);
    assert!(events.contains("idle for 2s"), "{events}");

    h.wait_list("asking waits and busy works", |l| {
        session(l, "asking")["state"] == "waiting" && session(l, "busy")["state"] == "working"
    });
    // Well past the idle time, the waiting and the working sessions still run.
    let until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < until {
        let l: serde_json::Value =
            serde_json::from_str(&h.ctl_ok(&["list", "--json"])).expect("list --json is JSON");
        assert_eq!(session(&l, "asking")["state"], "waiting", "{l:#}");
        assert_eq!(session(&l, "busy")["state"], "working", "{l:#}");
        std::thread::sleep(Duration::from_millis(200));
    }

    // Keys cannot reach it, and say what to do.
    let out = h.ctl(&["keys", "quiet", "Enter"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("hibernated"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The next message wakes it, with its record, and is typed once it is ready; a second
    // one sent meanwhile waits its turn; the chats are told "waking" once.
    h.ctl_ok(&["send", "quiet", "echo after-$((40+2))"]);
    h.ctl_ok(&["send", "quiet", "echo then-$((40+3))"]);
    h.wait_screen("quiet", "both echoes after the wake", |s| {
        lines(s).contains(&"after-42") && lines(s).contains(&"then-43")
    });
    let l = h.wait_list("quiet idle again", |l| {
        session(l, "quiet")["state"] == "idle"
    });
    assert_eq!(session(&l, "quiet")["exit_reason"], "", "{l:#}");
    let events = h.events();
    let waking = events
        .iter()
        .filter(|e| e["session"] == "quiet" && e["kind"] == "waking")
        .count();
    assert_eq!(waking, 1, "told once");
    assert!(
        events
            .iter()
            .any(|e| e["session"] == "quiet" && e["type"] == "woken"),
        "a woken event"
    );
    // Hibernated again, it stays so across a daemon killed and started again, and
    // `clibotctl ask` wakes it and gets its reply.
    h.wait_list("quiet hibernated again", |l| {
        session(l, "quiet")["state"] == "hibernated"
    });
    h.kill_daemon();
    h.start_daemon();
    h.wait_list("still hibernated", |l| {
        session(l, "quiet")["state"] == "hibernated"
    });
    let out = h.ctl_ok(&["ask", "quiet", "echo asked-$((1+1))", "--timeout", "60s"]);
    assert!(out.contains("asked-2"), "{out}");
    // And `restart` starts a hibernated one at once.
    h.wait_list("quiet hibernated once more", |l| {
        session(l, "quiet")["state"] == "hibernated"
    });
    h.ctl_ok(&["restart", "quiet"]);
    h.wait_list("quiet restarted", |l| {
        session(l, "quiet")["state"] == "idle"
    });
}
